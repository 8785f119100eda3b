"""Small summaries of a unit's numbers: the passkey's mean over depths, the loss at
the end of training, and the short text of a log line."""

from __future__ import annotations

__all__ = ["mean_over_depths", "tail_mean", "scores_text"]


def mean_over_depths(by_depth: dict[str, dict | None]) -> dict[str, float | None]:
    """Passkey accuracy per length, averaged over the depths (None where it could not run)."""
    return {
        n: None if depths is None else sum(depths.values()) / len(depths)
        for n, depths in by_depth.items()
    }


def tail_mean(losses: list[float], n: int = 20) -> float:
    """The mean of the last ``n`` training losses."""
    tail = losses[-n:]
    return sum(tail) / len(tail)


def scores_text(values: dict) -> str:
    """``length:score`` pairs for a log line (a summary's mean; ``-`` for None)."""

    def one(v):
        if v is None:
            return "-"
        if isinstance(v, dict):
            v = v["mean"]
        return f"{v:.3f}"

    return " ".join(f"{n}:{one(v)}" for n, v in values.items())
