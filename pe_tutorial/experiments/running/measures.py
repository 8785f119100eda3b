"""Small summaries of a unit's numbers: the passkey's mean over depths, the loss at
the end of training, the short text of a log line, and a scheme's learned
position parameters as a record keeps them."""

from __future__ import annotations

import torch

__all__ = [
    "mean_over_depths",
    "tail_mean",
    "scores_text",
    "position_parameter_values",
    "VALUES_KEPT",
]

# a position parameter of at most this many numbers is kept whole in a record (a
# per-head scale, T5's bucket table); a larger one (a learned absolute table) by
# its root mean square
VALUES_KEPT = 512


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


def position_parameter_values(model: torch.nn.Module) -> dict[str, dict]:
    """A model's position parameters (``named_position_parameters``) as a record
    keeps them (issue 69): per name, ``shape`` and either ``values`` (nested lists,
    4 decimals) when it holds at most ``VALUES_KEPT`` numbers, or ``rms`` (its root
    mean square, 6 significant digits) when it holds more. Empty for a scheme
    with none."""
    kept = {}
    for name, parameter in model.named_position_parameters():
        data = parameter.detach().float().cpu()
        entry: dict = {"shape": list(data.shape)}
        if data.numel() <= VALUES_KEPT:
            # rounded in float64, so the record holds 0.9161, not 0.916100025...
            entry["values"] = data.double().round(decimals=4).tolist()
        else:
            entry["rms"] = float(f"{data.pow(2).mean().sqrt().item():.6g}")
        kept[name] = entry
    return kept
