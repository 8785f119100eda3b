"""The synthetic tasks' units (chapter 9): look-back and passkey retrieval.

A small model is trained on ``synthetic.lookback_batch`` or ``synthetic.passkey_batch``
at the task's own length and scored at each multiple of it; the RoPE passkey
model is also read with each of RoPE's scaling methods, zero-shot and after a
short fine-tune (``extensions.py``).
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Callable
from dataclasses import replace

import torch

from ...attention.layer_patterns import has_temperature, without_temperature
from ...lm.model import ByteTransformer
from ...lm.scoring import (
    length_error,
    lookback_accuracy,
    passkey_accuracy,
    passkey_digit_accuracy,
)
from ...lm.synthetic import lookback_batch, passkey_batch
from ...lm.train import TrainConfig, curve_steps, train
from ..configuration.presets import Preset
from .extensions import Extensions, fine_tuning
from .measures import mean_over_depths, scores_text
from .run_context import RunContext
from .units import LOOKBACK, PASSKEY, ROPE_PASSKEY, UnitKind


def keys_by_step(task: dict) -> Callable[[], int]:
    """The number of keys of each passkey training batch, one call a batch: one key
    for the task's first ``one_key_steps`` batches (a curriculum, chapter 12: the
    frontier run's task first), then the task's ``keys``."""
    count = itertools.count(1)
    one_key = task.get("one_key_steps", 0)

    def keys() -> int:
        return 1 if next(count) <= one_key else task.get("keys", 1)

    return keys


class TaskUnits:
    """The synthetic tasks' units: a small model trained on look-back or passkey data.

    Each unit trains on the task at its own length and scores accuracy at
    each multiple of it; a RoPE passkey model is also read with each scaling
    method, zero-shot and after a short fine-tune. The runner supplies the
    preset, the device and the model configurations; ``extensions`` the fine-tuning.
    """

    def __init__(self, runner: RunContext, extensions: Extensions):
        self.runner = runner
        self.extensions = extensions
        self.device = runner.device

    @property
    def preset(self) -> Preset:
        """The runner's preset: while a unit runs, as its kind may read it."""
        return self.runner.preset

    def kind(self, task: str, scheme: str) -> UnitKind:
        """The kind of a task's unit: the RoPE passkey model is also extended
        (unless the preset's ``extensions`` is off)."""
        if task == "lookback":
            return LOOKBACK
        extended = scheme == "rope" and self.runner.whole_preset.extensions
        return ROPE_PASSKEY if extended else PASSKEY

    def steps(self, task: str, scheme: str) -> int:
        """The training steps of a task's unit (for the progress bar)."""
        p = self.preset
        steps = getattr(p, task)["steps"]
        if self.kind(task, scheme) is ROPE_PASSKEY:
            steps += p.finetune_steps * len(p.finetune_methods)
        return steps

    def lookback(self, scheme: str, seed: int) -> dict:
        """Train a model on the look-back task; its accuracy at each length."""
        p = self.preset
        task = p.lookback
        L = task["seq_len"]
        config = replace(
            p.training_for(scheme),
            steps=task["steps"],
            seq_len=L,
            warmup_steps=task["steps"] // 10,
            seed=seed,
        )
        torch.manual_seed(seed)
        model = ByteTransformer(
            replace(self.runner.model_config(scheme), max_positions=L)
        )

        def batches(generator, n=L, size=config.batch_size):
            return lookback_batch(
                size,
                n,
                generator,
                lookback=task["lookback"],
                num_symbols=task["num_symbols"],
            )

        train(
            model,
            batches,
            config,
            device=self.device,
            progress=self.runner.progress,
            description=f"look-back {scheme} seed {seed}",
        )
        accuracy = {}
        for m in p.multiples:
            n = m * L
            accuracy[str(n)] = (
                None
                if length_error(model, n) is not None
                else lookback_accuracy(
                    model, functools.partial(batches, n=n, size=64), device=self.device
                )
            )
        self.runner.log(f"look-back {scheme}, seed {seed}: {scores_text(accuracy)}")
        return {"run": {"seed": seed, "accuracy": accuracy}}

    def passkey_training(self, seed: int, scheme: str) -> TrainConfig:
        """``scheme``'s training (its tuned rates) on the passkey task's length,
        batch and steps."""
        task = self.preset.passkey
        return replace(
            self.preset.training_for(scheme),
            steps=task["steps"],
            seq_len=task["seq_len"],
            batch_size=task["batch_size"],
            warmup_steps=task["steps"] // 10,
            seed=seed,
        )

    def passkey_scores(
        self,
        model: ByteTransformer,
        measure: Callable = passkey_accuracy,
        lengths: list[int] | None = None,
    ) -> dict[str, dict]:
        """``measure`` (whole-key accuracy) at each length (default: each multiple
        of the task's) and depth: ``{length: {depth: value}}``, None for a length
        the model cannot read."""
        task = self.preset.passkey
        if lengths is None:
            lengths = [m * task["seq_len"] for m in self.preset.multiples]
        scores = {}
        for n in lengths:
            if length_error(model, n) is not None:
                scores[str(n)] = None
                continue
            scores[str(n)] = {
                str(depth): measure(
                    model,
                    functools.partial(
                        passkey_batch,
                        64,
                        n,
                        key_len=task["key_len"],
                        depth=depth,
                        keys=task.get("keys", 1),
                    ),
                    device=self.device,
                )
                for depth in task["depths"]
            }
        return scores

    def passkey(self, scheme: str, seed: int) -> dict:
        """Train a model on passkey retrieval; its accuracy by length and depth (and RoPE's scalings)."""
        task = self.preset.passkey
        L = task["seq_len"]
        config = self.passkey_training(seed, scheme)
        torch.manual_seed(seed)
        model = ByteTransformer(
            replace(self.runner.model_config(scheme), max_positions=L)
        )

        keys = keys_by_step(task)
        every = task.get("ask_every_key", False)

        def batches(generator, n=L, size=config.batch_size):
            count = keys()  # training rows ask every key if the task says so
            return passkey_batch(
                size,
                n,
                generator,
                key_len=task["key_len"],
                keys=count,
                ask_every_key=every and count > 1,
            )

        # the learning curve: whole-key accuracy at L (mean over the depths) after
        # each of curve_points step counts, on the batches of the final score, so
        # the last point is that score at L
        curve = {"steps": curve_steps(config.steps, self.preset.curve_points)}
        curve["accuracy"] = []

        def score(model: ByteTransformer) -> None:
            at_L = self.passkey_scores(model, lengths=[L])[str(L)]
            curve["accuracy"].append(sum(at_L.values()) / len(at_L))

        train(
            model,
            batches,
            config,
            device=self.device,
            progress=self.runner.progress,
            description=f"passkey {scheme} seed {seed}",
            evaluate=score,
            evaluate_at=curve["steps"],
        )
        by_depth = self.passkey_scores(model)
        self.runner.log(
            f"passkey {scheme}, seed {seed}: {scores_text(mean_over_depths(by_depth))}"
        )
        # each digit's accuracy: the first is retrieval, which a guess and a copy
        # of the rest cannot fake (passkey_digit_accuracy)
        digits = self.passkey_scores(model, passkey_digit_accuracy)
        unit = {"run": {"seed": seed, "by_depth": by_depth, "digits": digits}}
        if has_temperature(model):
            # Llama 4 scales its NoPE layers' queries at inference: the same model
            # read without the scale says what the scale does to its retrieval
            unit["run"]["without_temperature"] = self.passkey_scores(
                without_temperature(model)
            )
        if curve["steps"]:
            unit["run"]["curve"] = curve
        if self.kind("passkey", scheme) is ROPE_PASSKEY:
            target = int(self.preset.extension_factor * L)
            tune = fine_tuning(config, target, self.preset.finetune_steps, seed)
            extension = {}
            extensions = self.extensions
            for method, stage in extensions.stages():
                variant = copy.deepcopy(model)
                variant.set_rope_scaling(extensions.scaling_for(method, L))
                if stage == "fine-tuned":
                    extensions.fine_tune(
                        variant,
                        tune,
                        f"passkey fine-tune {method or 'plain'} seed {seed}",
                        functools.partial(batches, n=target, size=tune.batch_size),
                    )
                extension[f"{method or 'none'}/{stage}"] = self.passkey_scores(variant)
            unit["extension"] = extension
        return unit
