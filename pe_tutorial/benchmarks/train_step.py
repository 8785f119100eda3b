"""One training step of chapter 9's quick model per scheme: the ``train_step`` suite
(and the model and step that ``step_profile`` profiles)."""

from __future__ import annotations

import torch
from torch import nn

from ._core import Plan, Suite, register
from .timing import Case


def train_step_sizes(
    device: torch.device, batch: int | None = None, seq_len: int | None = None
) -> tuple[int, int]:
    """``(batch, seq_len)`` of the ``train_step`` suite: (16, 64) on a CPU, (64, 256) on a GPU."""
    default = (64, 256) if device.type == "cuda" else (16, 64)
    batch = default[0] if batch is None else batch
    return batch, default[1] if seq_len is None else seq_len


def quick_model(scheme: str, seq_len: int, device: torch.device) -> nn.Module:
    """Chapter 9's quick model (``QUICK_MODEL``) with ``scheme``, on ``device``."""
    from ..lm.model import ByteTransformer, ModelConfig

    config = ModelConfig(scheme=scheme, max_positions=seq_len, **QUICK_MODEL)
    return ByteTransformer(config).to(device)


def train_step_fn(model: nn.Module, tokens: torch.Tensor):
    """One forward and backward pass of ``model`` on ``tokens`` (B, T + 1): next-byte
    cross-entropy, gradients accumulated into ``.grad`` (no optimiser step)."""

    def step():
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1), tokens[:, 1:].flatten()
        )
        loss.backward()

    return step


def train_step(
    device: torch.device,
    dtype: torch.dtype,
    *,
    batch: int | None = None,
    seq_len: int | None = None,
    schemes: tuple[str, ...] | None = None,
) -> Plan:
    """One forward and backward pass of chapter 9's quick model, per scheme (chapter 9)."""
    from ..lm.model import SCHEMES

    batch, seq_len = train_step_sizes(device, batch, seq_len)
    schemes = tuple(SCHEMES) if schemes is None else schemes
    model_settings = dict(QUICK_MODEL)
    tokens = torch.randint(0, 256, (batch, seq_len + 1), device=device)
    cases = [
        Case(
            f"train step, {scheme}",
            train_step_fn(quick_model(scheme, seq_len, device), tokens),
            {"tokens": [batch, seq_len]},
            "float32",
        )
        for scheme in schemes
    ]
    return Plan(
        cases,
        settings={"batch": batch, "seq_len": seq_len, "model": model_settings},
        reference=cases[0].name,
    )


# The model of chapter 9's quick preset (experiments.PRESETS["quick"].model; a test holds
# the two equal). Written here because the timing suites sit beside the experiments, on
# the same floor, and import nothing from them.
QUICK_MODEL = {"d_model": 64, "num_heads": 4, "num_layers": 2}


register(
    Suite(
        "train_step",
        "9",
        "one training step per scheme",
        train_step,
        why="chapter 9's quick model on one batch",
        smoke={"batch": 2, "seq_len": 8, "schemes": ("nope", "rope")},
        warmup=2,
    )
)
