"""The runner: a preset's plan of units, and the language models it trains and scores.

``Runner`` reads the corpora (its base, ``run_data.RunData``), builds and
trains the models and scores them; ``plan`` lists every unit of a preset (``units.Unit``) with its fingerprint.
The language-model units are computed here, their context extensions by
``Extensions`` (``extensions.py``) and the synthetic tasks by ``TaskUnits``
(``tasks.py``). While a unit runs, ``preset`` is the view of its kind
(``units.PresetReads``), which refuses a field the kind does not declare.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace

import torch

from ...attention.layer_patterns import (
    has_temperature,
    with_global_interpolation,
    without_temperature,
)
from ...lm.model import ByteTransformer, ModelConfig
from ...lm.scoring import (
    bits_per_byte,
    context_gain,
    length_error,
    length_losses,
    window_reference_losses,
)
from ...lm.sinks import first_key_weights
from ...lm.streaming import rolling_cache_losses
from ...lm.train import TrainConfig, curve_steps, train
from ...lm.windows import (
    random_windows,
    starting_with,
)
from ..configuration.presets import Preset, Variant, variants
from .extensions import Extensions
from .measures import position_parameter_values, scores_text, tail_mean
from .run_data import CORPORA, CorpusData, RunData, corpus_reader
from .tasks import TaskUnits
from .units import (
    LANGUAGE_MODEL,
    LEARNED_LANGUAGE_MODEL,
    ROPE_LANGUAGE_MODEL,
    PresetReads,
    Unit,
    UnitKind,
    fingerprint,
)

__all__ = ["CORPORA", "corpus_reader", "Runner", "position_bin"]


def _rounded(values: torch.Tensor) -> list[float]:
    """A record's per-segment or per-bin values: four decimals (0.0001 bpb)."""
    return [round(v, 4) for v in values.tolist()]


def position_bin(seq_len: int) -> int:
    """The bin of the loss by position: 1/16 of the training length ``seq_len``."""
    return max(1, seq_len // 16)


class Runner(RunData):
    """A preset on a device: its corpora, models, training and scoring, and its plan.

    ``preset`` is the preset itself, or while a unit runs, its kind's view
    (``reading``); the runner and its helpers read the preset only through it.
    The corpus named None is the preset's own (``Preset.corpus``). With
    ``read_corpus=False`` no corpus is read at the start (to assemble units
    computed elsewhere, as ``merge`` does).
    """

    def __init__(
        self,
        preset: Preset,
        device: torch.device,
        progress: bool,
        *,
        read_corpus: bool = True,
    ):
        self._preset = preset
        self._reading: PresetReads | None = None  # the view of the unit running
        self.name = preset.name  # a label, for messages only
        self.device = device
        self.progress = progress
        self.log: Callable[[str], None] = lambda message: None
        # name: (the data, the preset fields read to make it)
        self._data: dict[str, tuple[CorpusData, frozenset[str]]] = {}
        self._corpus_fingerprints: dict[str, dict] = {}
        if read_corpus:  # now: a corpus too small for the preset fails at once
            self.data()
        self.extensions = Extensions(self)
        self.tasks = TaskUnits(self, self.extensions)

    @property
    def preset(self) -> Preset:
        """The preset; while a unit runs, as its kind may read it (``reading``)."""
        return self._preset if self._reading is None else self._reading

    @contextlib.contextmanager
    def reading(self, kind: UnitKind) -> Iterator[None]:
        """Within it, ``preset`` refuses the fields ``kind`` does not declare."""
        self._reading = PresetReads(self._preset, kind)
        try:
            yield
        finally:
            self._reading = None

    @property
    def num_targets(self) -> int:
        """eval_windows segments of the longest length, spread over the whole split."""
        return self.preset.eval_windows * max(self.preset.lengths)

    @property
    def position_bin(self) -> int:
        """Loss by position is kept in bins of 1/16 of the training length."""
        return position_bin(self.preset.train.seq_len)

    @property
    def whole_preset(self) -> Preset:
        """The preset itself, not a unit's view: for what decides which units exist
        and of what kind (the kind and the corpus are in a unit's fingerprint)."""
        return self._preset

    def model_config(self, scheme: str, **switches) -> ModelConfig:
        fields = {"max_positions": self.preset.train.seq_len, **self.preset.model}
        return ModelConfig(scheme=scheme, **{**fields, **switches})

    def text_batches(self, config: TrainConfig, corpus: str | None = None) -> Callable:
        """Random training windows of a corpus, each starting with the preset's
        ``start_byte`` if it has one (``windows.starting_with``)."""
        windows = functools.partial(
            random_windows,
            self.data(corpus).corpus.train,
            config.batch_size,
            config.seq_len,
        )
        start = self.preset.start_byte
        if start is None:
            return windows

        def batches(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            inputs, targets = windows(generator)
            return starting_with(inputs, start), targets

        return batches

    def train_model(
        self,
        config: ModelConfig,
        seed: int,
        label: str,
        training: TrainConfig,
        corpus: str = "stdlib",
        *,
        evaluate: Callable[[ByteTransformer], object] | None = None,
        evaluate_at: tuple[int, ...] | list[int] = (),
    ):
        """A model of ``config`` trained from ``seed``; with ``evaluate``, called
        after each step count of ``evaluate_at`` (``train``: it leaves the
        training as it would be without)."""
        torch.manual_seed(seed)
        model = ByteTransformer(config)
        train_config = replace(training, seed=seed)
        losses = train(
            model,
            self.text_batches(train_config, corpus),
            train_config,
            device=self.device,
            progress=self.progress,
            description=f"{label} seed {seed}",
            evaluate=evaluate,
            evaluate_at=evaluate_at,
        )
        return model, losses

    def evaluate(
        self,
        model: ByteTransformer,
        corpus: str | None = None,
        *,
        targets: bool = False,
    ) -> dict:
        """``bpb`` and ``notes`` per length; ``position_bpb`` over the longest window.

        ``position_bpb`` is the loss by position, averaged over bins of
        ``position_bin`` positions (None where the model cannot read that length).
        With ``targets``, also what chapter 9 weighs target by target:
        ``segment_bpb``, each length's bpb on each scored segment (the same
        segments at every length and for every model, so seeds and segments
        combine in ``findings.bootstrap_interval``); ``context_gain``, per
        segment, the loss of the targets read with more than L bytes of context
        at each length above L minus the same targets' loss in a sliding window
        of L (``scoring.window_reference_losses``; negative: the longer context
        helps); and ``position_gain``, that difference by position over the
        longest window, averaged over segments and binned as ``position_bpb``
        (0 for the first L positions, where the contexts are the same).
        """
        lengths = self.preset.lengths
        segments = self.data(corpus).segments
        losses = length_losses(model, segments, lengths, device=self.device)
        notes = {str(n): length_error(model, n) for n in lengths}
        longest = losses[max(lengths)]
        scores = {
            "bpb": {
                str(n): None if loss is None else loss.mean().item()
                for n, loss in losses.items()
            },
            "notes": {n: note for n, note in notes.items() if note},
            "position_bpb": None if longest is None else self._binned(longest),
        }
        if not targets:
            return scores
        scores["segment_bpb"] = {
            str(n): None if loss is None else _rounded(loss.mean(1))
            for n, loss in losses.items()
        }
        L = self.preset.train.seq_len
        reference = window_reference_losses(model, segments, L, device=self.device)
        scores["context_gain"] = {
            str(n): None
            if loss is None
            else _rounded(context_gain(loss, reference, n, L))
            for n, loss in losses.items()
            if n > L
        }
        scores["position_gain"] = (
            None if longest is None else self._binned(longest - reference)
        )
        return scores

    def rolling_cache(self, model: ByteTransformer, corpus: str | None = None) -> dict:
        """The longest length read as StreamingLLM reads a stream (chapter 12).

        For each ``s`` of ``cache_sinks``, every target read through a rolling
        cache of the first ``s`` bytes and the last ``cache_window``
        (``lm.streaming.rolling_cache_losses``), and, as the reference, each
        target read afresh in a sliding window of ``cache_window`` bytes
        (``window_reference_losses``: at least 7/8 of the window of context,
        recomputed): ``bpb`` and ``position_bpb`` of each, keyed ``"sinks=s"``
        and ``"recomputed"``.
        """
        window, segments = self.preset.cache_window, self.data(corpus).segments
        readings = {
            f"sinks={s}": rolling_cache_losses(
                model, segments, window, s, device=self.device
            )
            for s in self.preset.cache_sinks
        }
        readings["recomputed"] = window_reference_losses(
            model, segments, window, device=self.device
        )
        return {
            name: {"bpb": loss.mean().item(), "position_bpb": self._binned(loss)}
            for name, loss in readings.items()
        }

    def sink_probe(self, model: ByteTransformer, corpus: str | None = None) -> dict:
        """The weight the model puts on its first keys (``lm.sinks``, chapter 12).

        Read on the first ``L`` bytes of each scored segment (the training
        length, each starting with ``start_byte`` where the preset has one),
        queries ``L/2`` to ``L - 1``: ``first_key_weights`` for the first key
        and the first four, by layer and head, with their even shares.
        """
        L = self.preset.train.seq_len
        windows = self.data(corpus).segments[:, :L]
        return first_key_weights(model, windows)

    def _binned(self, losses: torch.Tensor) -> list[float]:
        """Per-target values ``(K, S)`` averaged over segments, then over bins of
        ``position_bin`` positions of a window as long as ``S``."""
        return _rounded(losses.mean(0).view(-1, self.position_bin).mean(1))

    def train_split_bpb(
        self, model: ByteTransformer, corpus: str | None = None
    ) -> float:
        """Bits per byte on training bytes at the training length: the other side of the gap."""
        return bits_per_byte(
            model,
            self.data(corpus).train_segments,
            self.preset.train.seq_len,
            device=self.device,
        )

    def variants(self) -> list[Variant]:
        """The preset's language-model variants (``presets.variants``); none when
        its ``language_models`` is off."""
        return variants(self.preset) if self.preset.language_models else []

    def plan(self) -> list[Unit]:
        """Every unit of work in order, each with its key, kind, steps and fingerprint.

        A unit is one trained model and all that is measured on it, so a run
        stopped between units loses nothing (``RunFile``). The RoPE model's
        unit includes its context-extension variants, which start from it.
        """
        p = self.preset
        units = self.language_model_units()
        if p.lookback:
            units += self.task_units("lookback")
        if p.passkey:
            units += self.task_units("passkey")
        return units

    def unit(
        self, kind: UnitKind, key: str, steps: int, compute: Callable, **arguments
    ) -> Unit:
        """A unit computed by ``compute(**arguments)`` under ``kind``'s view of the
        preset, with the fingerprint derived from them (``units.fingerprint``)."""
        corpus = (
            self.corpus_fingerprint(arguments["variant"].corpus)
            if kind.corpus
            else None
        )
        printed = fingerprint(
            kind,
            self.preset,
            arguments,
            device_type=self.device.type,
            corpus=corpus,
        )

        def run() -> dict:
            with self.reading(kind):
                return compute(**arguments)

        return Unit(key, kind, steps, printed, run)

    def language_model_kind(self, variant: Variant) -> UnitKind:
        """Plain RoPE and the plain learned table are also extended (unless the
        preset's ``extensions`` is off); the others are not."""
        if not self.whole_preset.extensions:
            return LANGUAGE_MODEL
        if variant == Variant("rope"):
            return ROPE_LANGUAGE_MODEL
        if variant == Variant("learned"):
            return LEARNED_LANGUAGE_MODEL
        return LANGUAGE_MODEL

    def language_model_units(self) -> list[Unit]:
        """One unit per variant and seed; RoPE's and the learned table's also extend."""
        p = self.preset
        units = []
        for variant in self.variants():
            self.variant_config(variant)  # a bad ablation fails now, not hours in
            kind = self.language_model_kind(variant)
            steps = p.train.steps
            if kind is ROPE_LANGUAGE_MODEL:
                steps += p.finetune_steps * len(p.finetune_methods)
            if kind is LEARNED_LANGUAGE_MODEL:
                steps += p.finetune_steps
            for seed in p.seeds:
                key = f"lm/{variant.key}/{seed}"
                units.append(
                    self.unit(
                        kind,
                        key,
                        steps,
                        self.language_model_unit,
                        variant=variant,
                        seed=seed,
                    )
                )
        return units

    def task_units(self, task: str) -> list[Unit]:
        """One unit per scheme and seed of a synthetic task (``lookback``, ``passkey``);
        the RoPE passkey model is also read with each scaling method."""
        p = self.preset
        units = []
        for scheme in p.schemes:
            self.model_config(scheme)  # checked now
            kind = self.tasks.kind(task, scheme)
            steps = self.tasks.steps(task, scheme)
            for seed in p.seeds:
                compute = getattr(self.tasks, task)
                key = f"{task}/{scheme}/{seed}"
                units.append(
                    self.unit(kind, key, steps, compute, scheme=scheme, seed=seed)
                )
        return units

    def variant_config(self, variant: Variant) -> ModelConfig:
        return self.model_config(
            variant.scheme,
            norm=variant.norm,
            absolute=variant.absolute,
            **dict(variant.changes),
        )

    def variant_training(self, variant: Variant) -> TrainConfig:
        """The scheme's training (the preset's, with its ``tuned`` fields), then the
        variant's learning rate and fields set."""
        changed = dict(variant.training)
        if variant.learning_rate is not None:
            changed["learning_rate"] = variant.learning_rate
        training = self.preset.training_for(variant.scheme)
        return replace(training, **changed) if changed else training

    def language_model_unit(self, variant: Variant, seed: int) -> dict:
        """One variant trained from one seed, scored, and extended where its kind says.

        Its run records the learning curve, ``{"steps", "bpb"}``: bits per byte
        at the training length L after each of ``curve_points`` step counts
        spread evenly over training (the last at its end), on the windows the
        final score at L reads (every scored validation segment cut at L), so
        its last point is that score. Reading it leaves the trained model as it
        is without (``train``). A scheme with position parameters of its own
        keeps them as the seeded model built them and as training left them
        (``position_parameters``: ``measures.position_parameter_values``).
        """
        config = self.variant_config(variant)
        label = variant.label
        training = self.variant_training(variant)
        L = self.preset.train.seq_len  # the model's length, as ``evaluate`` reads it
        segments = self.data(variant.corpus).segments
        curve = {"steps": curve_steps(training.steps, self.preset.curve_points)}
        curve["bpb"] = []

        def score(model: ByteTransformer) -> None:
            # as ``evaluate`` scores L, so the last point is the final score exactly
            losses = length_losses(model, segments, [L], device=self.device)[L]
            curve["bpb"].append(losses.mean().item())

        # the scheme's position parameters as training starts: train_model seeds
        # and builds the same model (and seeds again, so nothing it draws moves)
        torch.manual_seed(seed)
        start = position_parameter_values(ByteTransformer(config))
        model, losses = self.train_model(
            config,
            seed,
            label,
            training,
            variant.corpus,
            evaluate=score,
            evaluate_at=curve["steps"],
        )
        scores = self.evaluate(model, variant.corpus, targets=True)
        run = {
            "seed": seed,
            "final_train_bpb": tail_mean(losses) / math.log(2),
            "train_split_bpb": self.train_split_bpb(model, variant.corpus),
            **scores,
        }
        if curve["steps"]:
            run["curve"] = curve
        if start:  # what training made of them (issue 69's report card)
            run["position_parameters"] = {
                "start": start,
                "trained": position_parameter_values(model),
            }
        if has_temperature(model):
            # Llama 4 applies its NoPE layers' query scale at inference; the toy
            # trains with it: the same model read without it (chapter 12)
            untempered = self.evaluate(without_temperature(model), variant.corpus)
            run["without_temperature"] = {
                "bpb": untempered["bpb"],
                "position_bpb": untempered["position_bpb"],
            }
        if self.preset.cache_window:
            run["rolling_cache"] = self.rolling_cache(model, variant.corpus)
            run["sink_probe"] = self.sink_probe(model, variant.corpus)
        if self.preset.global_interpolation and variant.scheme == "local-global":
            # Gemma 3 ships its global layers interpolated: the same weights read so
            run["global_interpolation"] = {
                f"{factor:g}": self.evaluate(
                    with_global_interpolation(model, factor), variant.corpus
                )["bpb"]
                for factor in self.preset.global_interpolation
            }
        self.log(f"{label}, seed {seed}: bpb {scores_text(scores['bpb'])}")
        unit = {"run": run, "parameters": model.num_parameters()}
        kind = self.language_model_kind(variant)
        if kind is ROPE_LANGUAGE_MODEL:
            unit["extension"] = self.extensions.rope(model, seed)
            unit["bands"] = self.extensions.bands(model)
        if kind is LEARNED_LANGUAGE_MODEL:
            unit["table_extension"] = self.extensions.learned_table(model, seed)
        return unit

    def settings(self) -> dict:
        p = self.preset
        return {
            "model": {
                k: v
                for k, v in self.model_config("rope").to_dict().items()
                if k not in ("scheme", "norm", "absolute", "rope_scaling")
            },
            "train": asdict(p.train),
            "corpus": p.corpus,
            "seeds": list(p.seeds),
            "lengths": p.lengths,
            "eval_targets": self.num_targets,
            "eval_segments": p.eval_windows,
            "position_bin": self.position_bin,
            "extension_factor": p.extension_factor,
            "finetune_steps": p.finetune_steps,
            "lookback": p.lookback,
            "passkey": p.passkey,
            "extensions": p.extensions,
            "sweep": {path: list(values) for path, values in p.sweep},
            "tuned": {scheme: dict(fields) for scheme, fields in p.tuned},
            "cache_window": p.cache_window,
            "start_byte": p.start_byte,
            "global_interpolation": list(p.global_interpolation),
            "language_models": p.language_models,
            "cache_sinks": list(p.cache_sinks),
        }
