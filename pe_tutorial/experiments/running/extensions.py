"""Context extension on trained models (chapter 9), for the runner's units.

RoPE's scaling methods (``rope_scaling.SCALING_METHODS``) zero-shot and after a
short fine-tune at the target length; a learned table lengthened by copying its
rows or by random ones, before and after a fine-tune; RoPE's frequency bands held or dropped at
evaluation (``rope_bands``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

import torch

from ...encodings.absolute import EXTENSION_ROWS
from ...encodings.rope_bands import BAND_ABLATIONS, band_frequencies
from ...encodings.rope_scaling import RopeScaling
from ...lm.model import ByteTransformer
from ...lm.scoring import length_bits_per_byte
from ...lm.train import TrainConfig, train
from ..configuration.presets import Preset
from .run_context import RunContext

# a learned table lengthened with its rows copied or drawn afresh, read before and
# after a fine-tune: the stages of the learned_extension section
LEARNED_TABLE_STAGES = tuple(
    f"{rows}/{stage}"
    for rows in EXTENSION_ROWS
    for stage in ("zero-shot", "fine-tuned")
)

# A fine-tune's rate is the pre-training rate divided by this (text and passkey alike)
FINE_TUNE_RATE_DIVISOR = 3


def fine_tuning(
    training: TrainConfig, length: int, steps: int, seed: int
) -> TrainConfig:
    """A fine-tune of a model trained with ``training``: ``steps`` steps at ``length``.

    The same bytes per step as pre-training (the batch shrinks as the window
    grows), warm-up a tenth of the steps, the pre-training rate divided by
    ``FINE_TUNE_RATE_DIVISOR``, and a seed of its own (``seed + 1000``). Chapter 9 sizes
    ``steps`` at about 2% of pre-training, in the spirit of position
    interpolation's short fine-tune (Chen et al., 2023).
    """
    return replace(
        training,
        steps=steps,
        seq_len=length,
        batch_size=max(1, training.batch_size * training.seq_len // length),
        warmup_steps=max(1, steps // 10),
        learning_rate=training.learning_rate / FINE_TUNE_RATE_DIVISOR,
        seed=seed + 1000,
    )


class Extensions:
    """Context extension on trained models (chapter 9): RoPE's scaling methods,
    zero-shot and after a short fine-tune; a learned table lengthened by copying
    its rows; RoPE's frequency bands held or dropped (``rope_bands``). The
    runner supplies the preset, the device, the text and the scoring.
    """

    def __init__(self, runner: RunContext):
        self.runner = runner
        self.device = runner.device

    @property
    def preset(self) -> Preset:
        """The runner's preset: while a unit runs, as its kind may read it."""
        return self.runner.preset

    def stages(self) -> list[tuple[str | None, str]]:
        """(method, stage) of every reading: plain RoPE and each method zero-shot,
        then the methods that are fine-tuned."""
        p = self.preset
        return [(m, "zero-shot") for m in (None, *p.extension_methods)] + [
            (m, "fine-tuned") for m in p.finetune_methods
        ]

    def finetune_config(self, seed: int, scheme: str) -> TrainConfig:
        """``scheme``'s text training at ``extension_factor`` times the length, as
        long as a fine-tune is (``fine_tuning``)."""
        p = self.preset
        target = int(p.extension_factor * p.train.seq_len)
        return fine_tuning(p.training_for(scheme), target, p.finetune_steps, seed)

    def bands(self, model: ByteTransformer) -> dict[str, dict]:
        """bpb per length with one band of RoPE's frequencies changed (``rope_bands``)."""
        L = self.preset.train.seq_len
        c = model.config
        results = {}
        for mode in BAND_ABLATIONS:
            variant = copy.deepcopy(model)
            bpb = {}
            for n in self.preset.lengths:
                variant.set_rope_frequencies(
                    band_frequencies(
                        c.head_dim, mode, train_length=L, length=n, base=c.rope_base
                    )
                )
                scored = length_bits_per_byte(
                    variant, self.runner.segments, [n], device=self.device
                )
                bpb[str(n)] = scored[n]["bpb"]
            results[mode] = bpb
        return results

    def learned_table(self, model: ByteTransformer, seed: int) -> dict[str, dict]:
        """A learned table lengthened by copying its rows, and by random rows, each
        read before and after a fine-tune (``LEARNED_TABLE_STAGES``)."""
        tune = self.finetune_config(seed, "learned")
        results = {}
        for rows in EXTENSION_ROWS:
            variant = copy.deepcopy(model)
            rows_drawn = torch.Generator().manual_seed(seed + 2000)
            variant.extend_learned_table(tune.seq_len, rows, rows_drawn)
            results[f"{rows}/zero-shot"] = self.runner.evaluate(variant)["bpb"]
            self.fine_tune(
                variant, tune, f"fine-tune learned table ({rows}) seed {seed}"
            )
            results[f"{rows}/fine-tuned"] = self.runner.evaluate(variant)["bpb"]
        return results

    def fine_tune(
        self,
        model: ByteTransformer,
        tune: TrainConfig,
        description: str,
        batches: Callable | None = None,
    ) -> None:
        """Train ``model`` further in place (on text windows unless ``batches`` is given)."""
        train(
            model,
            batches or self.runner.text_batches(tune),
            tune,
            device=self.device,
            progress=self.runner.progress,
            description=description,
        )

    def scaling_for(
        self, method: str | None, trained_length: int | None = None
    ) -> RopeScaling | None:
        """``method`` set for ``extension_factor`` times ``trained_length`` (default:
        the language models' training length); None for plain RoPE."""
        if method is None:
            return None
        p = self.preset
        return RopeScaling(
            method,
            factor=p.extension_factor,
            original_max_positions=trained_length or p.train.seq_len,
        )

    def rope(self, model: ByteTransformer, seed: int) -> dict[str, dict]:
        """bpb per length of each scaling method on a trained RoPE model, zero-shot and tuned."""
        tune = self.finetune_config(seed, "rope")
        results = {}
        for method, stage in self.stages():
            variant = copy.deepcopy(model)
            variant.set_rope_scaling(self.scaling_for(method))
            if stage == "fine-tuned":
                description = f"fine-tune RoPE {method or 'plain'} seed {seed}"
                self.fine_tune(variant, tune, description)
            results[f"{method or 'none'}/{stage}"] = self.runner.evaluate(variant)[
                "bpb"
            ]
        return results
