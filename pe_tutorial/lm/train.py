"""Training for chapter 9: seeded, device-aware, with a learning rate of its own for
position parameters.

``train`` runs AdamW on batches from a seeded generator, with a linear warm-up
and a cosine decay to a tenth of the peak (``learning_rate_at``), and can
evaluate the model at chosen steps while it trains (``evaluate`` and
``evaluate_at``; ``curve_steps`` spreads them evenly), for a learning curve,
without changing the training itself. It can also give the model's position
parameters (``ByteTransformer.position_parameters``) a learning rate of their
own, ``TrainConfig.position_lr_multiplier`` times the rest. Scoring a trained
model (bits per byte by length and position, the tasks' accuracies) is
``scoring.py``'s.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from .._validation import (
    require_non_negative_int,
    require_positive_float,
    require_positive_int,
)
from ..devices import DEVICE_CHOICES, resolve_device  # noqa: F401  (re-exported)
from .data import IGNORE_INDEX

__all__ = [
    "TrainConfig",
    "learning_rate_at",
    "resolve_device",
    "train",
    "curve_steps",
]

Batches = Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class TrainConfig:
    """How long and how fast to train; checked when made.

    The learning rate warms up linearly for ``warmup_steps`` and then follows a
    cosine down to a tenth of its peak. ``seed`` fixes the initial weights and
    the order of the batches.

    ``position_lr_multiplier``: the model's position parameters (a T5 or Shaw
    table, CoPE's, a learned absolute table; ``position_parameters()`` of a
    ``ByteTransformer``) train at ``learning_rate`` times this, on the same
    schedule. AdamW moves a parameter by about the learning rate a step
    whatever its gradient, so a table of scalar biases that must reach a few
    logits needs a larger rate than the weights around it (issue 34). At 1.0
    (the default) training is exactly as without it.
    """

    steps: int = 300
    batch_size: int = 16
    seq_len: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    position_lr_multiplier: float = 1.0

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            require_positive_int(getattr(self, name), name)
        require_positive_float(self.learning_rate, "learning_rate")
        require_positive_float(self.grad_clip, "grad_clip")
        require_positive_float(self.position_lr_multiplier, "position_lr_multiplier")
        if self.warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError("warmup_steps and weight_decay must not be negative")

    def to_dict(self) -> dict:
        return asdict(self)


def learning_rate_at(config: TrainConfig, step: int) -> float:
    """The peak-relative schedule ``train`` uses, at ``step`` (0-based; chapter 9).

    A linear warm-up ``eta (step + 1) / W`` over the first ``W =
    warmup_steps`` steps, then a cosine from the peak ``eta`` down to ``eta /
    10`` over the rest: ``eta (0.1 + 0.45 (1 + cos(pi p)))`` with ``p = (step
    - W) / (steps - W)``. AdamW moves a parameter by at most about this much
    per step, so its sum over the steps bounds how far a parameter can travel
    (chapter 9: why position tables get a rate of their own).
    """
    require_non_negative_int(step, "step")
    if step >= config.steps:
        raise ValueError(
            f"step {step} is past the schedule: it has steps 0 to {config.steps - 1}"
        )
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    # cosine from 1 to 0.1 of the peak
    return config.learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def _loss(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    logits = model(inputs)  # (B, T, V)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX
    )


def curve_steps(steps: int, points: int) -> list[int]:
    """``points`` step counts spread evenly over ``steps``, the last one ``steps``.

    Counted from 1 (after the first step), rounded to whole steps; fewer when
    ``steps < points`` (every step then). ``points=0`` gives none:
    ``curve_steps(800, 8) == [100, 200, ..., 800]``.
    """
    require_positive_int(steps, "steps")
    require_non_negative_int(points, "points")
    return sorted({max(1, round(steps * (i + 1) / points)) for i in range(points)})


def _optimiser(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over every parameter; the position parameters in a group of their own
    when ``position_lr_multiplier`` is not 1 (each group keeps its multiplier)."""
    options = {
        "lr": config.learning_rate,
        "weight_decay": config.weight_decay,
        "betas": (0.9, 0.95),
    }
    if config.position_lr_multiplier == 1.0:
        return torch.optim.AdamW(model.parameters(), **options)
    finder = getattr(model, "position_parameters", None)
    if finder is None:
        raise ValueError(
            f"position_lr_multiplier={config.position_lr_multiplier} needs a model "
            f"that names its position parameters (position_parameters()); "
            f"{type(model).__name__} does not"
        )
    position = list(finder())
    ids = {id(p) for p in position}
    rest = [p for p in model.parameters() if id(p) not in ids]
    groups = [{"params": rest, "lr_multiplier": 1.0}]
    if position:
        groups.append(
            {"params": position, "lr_multiplier": config.position_lr_multiplier}
        )
    return torch.optim.AdamW(groups, **options)


def _evaluate(
    model: nn.Module, evaluate: Callable[[nn.Module], object], device: torch.device
) -> None:
    """``evaluate(model)`` in eval mode, without gradients, on a forked random state:
    nothing it does reaches the training that follows."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        model.eval()
        try:
            evaluate(model)
        finally:
            model.train()


def train(
    model: nn.Module,
    batches: Batches,
    config: TrainConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = True,
    description: str = "training",
    evaluate: Callable[[nn.Module], object] | None = None,
    evaluate_at: Iterable[int] = (),
) -> list[float]:
    """Train ``model`` in place with AdamW; return the loss (nats) of every step.

    ``batches(generator)`` returns ``(inputs, targets)`` on the CPU; the
    generator is seeded from ``config.seed``, so a run is repeatable. A tqdm
    bar on stderr shows the progress unless ``progress=False``. The position
    parameters train at ``config.position_lr_multiplier`` times the rate
    (``TrainConfig``).

    ``evaluate(model)`` is called after each step count in ``evaluate_at``
    (from 1 to ``config.steps``; ``curve_steps`` spreads them evenly), in eval
    mode, under ``no_grad`` and on a forked random state, so the model trained
    is the same, to the bit, with or without it; it records what it measures
    itself (a learning curve, say).
    """
    device = torch.device(device)
    evaluate_at = sorted(set(evaluate_at))
    if evaluate_at and evaluate is None:
        raise ValueError("evaluate_at needs an evaluate callable")
    if evaluate_at and not 1 <= evaluate_at[0] <= evaluate_at[-1] <= config.steps:
        raise ValueError(
            f"evaluate_at must count steps from 1 to {config.steps}, got {evaluate_at}"
        )
    model.to(device).train()
    optimiser = _optimiser(model, config)
    generator = torch.Generator().manual_seed(config.seed)
    losses: list[float] = []
    bar = tqdm(
        range(config.steps),
        desc=description,
        disable=not progress,
        file=sys.stderr,
        leave=False,
        mininterval=1.0,
    )
    for step in bar:
        rate = learning_rate_at(config, step)
        for group in optimiser.param_groups:
            group["lr"] = rate * group.get("lr_multiplier", 1.0)
        inputs, targets = batches(generator)
        loss = _loss(model, inputs.to(device), targets.to(device))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimiser.step()
        losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if evaluate_at and step + 1 == evaluate_at[0]:
            evaluate_at.pop(0)
            _evaluate(model, evaluate, device)
    model.eval()
    return losses
