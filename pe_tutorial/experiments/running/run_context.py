"""What the units that continue a run's models read of the run (chapter 9's runner).

``runner.Runner`` trains and scores the language models; the context-extension
units (``extensions.Extensions``) and the synthetic tasks' units
(``tasks.TaskUnits``) fine-tune, read and train further models with its
settings. They take the runner as a ``RunContext``, the few things they read of
it, named here so that neither imports the runner, which imports both: the
runner sits above them, never beside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from ...lm.model import ByteTransformer, ModelConfig
from ...lm.train import TrainConfig
from ..configuration.presets import Preset

__all__ = ["RunContext"]


class RunContext(Protocol):
    """The run, as its extension and task units see it."""

    device: torch.device
    progress: bool
    log: Callable[[str], None]

    @property
    def preset(self) -> Preset:
        """The preset, as the unit that runs may read it."""

    @property
    def whole_preset(self) -> Preset:
        """The preset itself: what decides which units exist and of what kind."""

    @property
    def segments(self) -> torch.Tensor:
        """The validation segments every language model is scored on."""

    def model_config(self, scheme: str, **switches) -> ModelConfig:
        """The configuration of a model of ``scheme`` with the preset's settings."""

    def text_batches(self, config: TrainConfig, corpus: str | None = None) -> Callable:
        """Random training windows of the corpus, as ``config`` asks for them."""

    def evaluate(
        self,
        model: ByteTransformer,
        corpus: str | None = None,
        *,
        targets: bool = False,
    ) -> dict:
        """A model's bits per byte at each length of the preset."""
