"""Tuning that does not stop at its grid's edge (issue 69).

Chapter 9 tuned its schemes on a grid of learning rates (1e-3 to 3e-2) and
position-parameter rates (1, 10 and 30 times the rate) and, where a scheme's
best setting sat at the grid's edge, trained it once more beyond that edge
(``tuning-edge``: T5, Shaw, CoPE and DeBERTa at 100 times; ``tuning-below``:
the learned table and DeBERTa at 0.3 and 0.1 times): a best at the edge may
only be the best of the settings tried. The judge does the same for a
reader's scheme, in rounds:

- the best setting (``tuning.best_training``: the lowest validation bits per
  byte at L) is at an edge of an axis when no setting was tried beyond it
  along that axis, the other held: a learning rate the largest (smallest)
  tried at the best's position-rate multiplier, or, for a scheme with
  position parameters, a multiplier the largest (smallest) tried at the
  best's learning rate;
- each edge is one new setting, the next value of the book's grids along it
  (``step``: 1, 3, 10, 30, ... times a power of ten, as 1e-3, 3e-3, 1e-2 and
  30, 100), trained as the tuning stages train (one seed, the validation
  split) in a stage ``tune-edge-K-rate`` or ``tune-edge-K-multiplier``
  (``edge_stages``);
- the rounds go on until the best is inside the grid along both axes, or
  stop after ``EDGE_ROUNDS`` rounds, or where the next value leaves
  ``LIMITS``; ``edge_settings`` says why it stops, and the card says so.
"""

from __future__ import annotations

import math

from .tuning import SweepPoint, best_training

__all__ = [
    "EDGE_ROUNDS",
    "LIMITS",
    "step",
    "edge_settings",
    "edge_stages",
]

# at most this many rounds of edge stages; each round trains 1 to 4 settings
EDGE_ROUNDS = 3
# the values an extension may reach, per axis: beyond them a rate does not train
# a model of this size at all (above) or does not move it in the budget (below)
LIMITS = {
    "learning_rate": (1e-5, 0.3),
    "position_lr_multiplier": (0.01, 1000.0),
}
AXIS_WORDS = {
    "learning_rate": "learning rate",
    "position_lr_multiplier": "position-rate multiplier",
}


def step(value: float, up: bool) -> float:
    """The next value of the book's grids above (``up``) or below ``value``: a
    mantissa of 1 or 3 times a power of ten, so 1e-3 -> 3e-3 -> 1e-2 and
    30 -> 100 up, 1 -> 0.3 -> 0.1 down. A value off that grid goes to the
    nearest grid value beyond it."""
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"step: {value!r} is not a positive rate")
    exponent = math.floor(math.log10(value) + 1e-9)
    grid = sorted(
        m * 10.0**e for e in (exponent - 1, exponent, exponent + 1) for m in (1, 3)
    )
    if up:
        found = next(g for g in grid if g > value * (1 + 1e-9))
    else:
        found = next(g for g in reversed(grid) if g < value * (1 - 1e-9))
    return float(f"{found:.6g}")


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9)


def edge_settings(
    points: list[SweepPoint], scheme: str, position_parameters: bool
) -> tuple[list[dict], list[str]]:
    """The settings the next round trains, and why the grid stops where it does.

    Each setting is ``{"learning_rate", "position_lr_multiplier", "why",
    "best"}`` (``best``: the best setting's two values it steps from): the
    next grid value beyond an edge the best setting of ``scheme`` sits at (along
    the multiplier only for a scheme with ``position_parameters``). ``stopped``
    lists the edges not extended because the next value leaves ``LIMITS``."""
    mine = [p for p in points if p.scheme == scheme]
    if not mine:
        raise ValueError(f"edge_settings: no tuning point of {scheme!r}")
    best = best_training(mine)[scheme]
    here = {
        "learning_rate": best.learning_rate,
        "position_lr_multiplier": best.position_lr_multiplier,
    }
    axes = ["learning_rate"] + (
        ["position_lr_multiplier"] if position_parameters else []
    )
    settings, stopped = [], []
    for axis in axes:
        other = next(a for a in here if a != axis)
        tried = [
            getattr(p, axis) for p in mine if _same(getattr(p, other), here[other])
        ]
        for up, word in ((True, "largest"), (False, "smallest")):
            beyond = [
                v for v in tried if (v > here[axis]) == up and not _same(v, here[axis])
            ]
            if beyond:
                continue
            value = step(here[axis], up)
            low, high = LIMITS[axis]
            at = (
                f"the best setting's {AXIS_WORDS[axis]}, {here[axis]:g}, is the "
                f"{word} tried at {AXIS_WORDS[other]} {here[other]:g}"
            )
            if not low <= value <= high:
                stopped.append(
                    f"{at}; {value:g} would leave the range {low:g}-{high:g}"
                )
                continue
            settings.append({**here, axis: value, "why": at, "best": dict(here)})
    return settings, stopped


def edge_stages(round_number: int, settings: list[dict]) -> dict[str, dict]:
    """The stages of one round and the sweep each trains (``{"train": {...}}``).

    A stage sweeps a product of values, so the settings of one axis go together
    (they share the other axis's value): ``tune-edge-K-rate`` for new learning
    rates, ``tune-edge-K-multiplier`` for new multipliers."""
    stages = {}
    for axis, name in (
        ("learning_rate", "rate"),
        ("position_lr_multiplier", "multiplier"),
    ):
        other = next(a for a in AXIS_WORDS if a != axis)
        chosen = [s for s in settings if s[axis] != s["best"][axis]]
        if not chosen:
            continue
        stages[f"tune-edge-{round_number}-{name}"] = {
            "train": {
                axis: sorted(s[axis] for s in chosen),
                other: [chosen[0][other]],
            }
        }
    return stages
