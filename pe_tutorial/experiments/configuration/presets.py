"""What a run of the experiments does: a ``Preset``, and its language-model variants.

A preset is the whole experiment: the schemes, the model and its training,
the corpus, the lengths read, the seeds, which analyses run and what is swept.
It is written as a TOML file (``config.py`` reads one; the shipped presets,
``PRESETS``, are the files in ``presets/``). A ``Variant`` is one language
model of a run: its scheme, norm, table placement, learning rate, changed
``ModelConfig`` and ``TrainConfig`` fields and corpus; ``variants`` lists a
preset's, sweeps expanded (``swept_variants``). Which preset fields each kind
of unit reads is declared in ``units.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ...encodings.rope_scaling import SCALING_METHODS
from ...lm.model import SCHEMES
from ...lm.train import TrainConfig

__all__ = [
    "Preset",
    "Variant",
    "STANDARD_PASSKEY",
    "STANDARD_LOOKBACK",
    "NOT_SWEPT",
    "swept_variants",
    "variants",
]


@dataclass(frozen=True)
class Preset:
    """Everything one run of the experiments does; see ``config.PRESETS``.

    ``corpus`` is what the language models read: ``"stdlib"`` (Python's
    source), ``"shakespeare"``, or the path of a folder of text files or of
    one file (``lm.data.text_corpus``); ``language_schemes`` also train on
    Shakespeare. ``extensions`` switches the context-extension analyses
    (RoPE's scalings and bands, the learned table lengthened; for the
    passkey's RoPE model too); ``lookback`` and ``passkey`` hold their task's
    settings, empty when the task does not run. ``sweep`` holds ``(field,
    values)`` pairs, ``field`` a dotted ``"model.NAME"`` or ``"train.NAME"``:
    each of ``schemes`` is trained once per combination of the values in
    place of once (``swept_variants``).
    """

    name: str
    model: dict
    train: TrainConfig
    seeds: tuple[int, ...]
    multiples: tuple[int, ...] = (1, 2, 4, 8)
    eval_windows: int = 16  # windows at the longest length; the same bytes at all
    # points of each language model's learning curve: bpb at the training length,
    # evenly spaced in steps, the last at the end of training (0: no curve)
    curve_points: int = 8
    train_bytes: int = 2_000_000
    validation_bytes: int = 400_000
    # a held-out test split of the preset's own corpus (the standard library
    # only): files no tuning decision read (0: none), and the split every score
    # of the preset's corpus reads, "validation" or "test" (chapter 9)
    test_bytes: int = 0
    scored_split: str = "validation"
    corpus: str = "stdlib"
    # Python files (absolute paths) or modules that register the reader's own
    # schemes, loaded in every process that reads the preset (scheme_files.py)
    schemes_from: tuple[str, ...] = ()
    schemes: tuple[str, ...] = SCHEMES
    post_norm_schemes: tuple[str, ...] = ()
    every_layer_schemes: tuple[str, ...] = ()
    # schemes trained pre- and post-norm at each of these learning rates besides
    # the preset's own, so each norm is compared at its best
    learning_rate_schemes: tuple[str, ...] = ()
    learning_rates: tuple[float, ...] = ()
    # schemes trained and scored on natural language (the Shakespeare corpus) too
    language_schemes: tuple[str, ...] = ()
    # more variants, each a scheme with ModelConfig fields changed: (scheme, {field: value})
    ablations: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    # the context-extension analyses (RoPE's scalings and bands, the learned table)
    extensions: bool = True
    extension_factor: float = 4.0
    extension_methods: tuple[str, ...] = SCALING_METHODS
    finetune_methods: tuple[str | None, ...] = (None, "linear", "yarn")
    finetune_steps: int = 40
    lookback: dict = field(default_factory=dict)
    # passkey retrieval: seq_len, steps, batch_size, key_len, depths (empty: skipped)
    passkey: dict = field(default_factory=dict)
    # (dotted field, values): each of ``schemes`` trained at every combination
    sweep: tuple[tuple[str, tuple], ...] = ()
    # (scheme, ((TrainConfig field, value), ...)): a scheme's own training where it
    # differs from ``train`` (its learning rate and position-parameter rate, as a
    # tuning sweep chose them); every model of that scheme starts from it
    tuned: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    # StreamingLLM's rolling cache (chapter 12): each language model is also read
    # at the longest length keeping the last ``cache_window`` bytes and the first
    # ``s`` for each ``s`` of ``cache_sinks`` (0: no such reading)
    cache_window: int = 0
    cache_sinks: tuple[int, ...] = (0, 4)
    # a byte every training window and every scored segment starts with (None:
    # the text as it is), so a model can learn to park attention on it: a
    # sink for StreamingLLM's rolling cache (chapter 12)
    start_byte: int | None = None
    # each local-global model is also read at every length with its global
    # layers' RoPE interpolated linearly by each factor (Gemma 3 ships 8)
    global_interpolation: tuple[float, ...] = ()
    # false: no language model trains, only the synthetic tasks (at least one on)
    language_models: bool = True
    # the families of claims a chapter reads from the run, declared before it is
    # read: (name, claim sentences, correction), as ``[[families]]`` writes them
    # (``lm.declared_families``); no unit reads them
    families: tuple[tuple[str, tuple[str, ...], str], ...] = ()

    @property
    def lengths(self) -> list[int]:
        return [m * self.train.seq_len for m in self.multiples]

    def training_for(self, scheme: str) -> TrainConfig:
        """``train`` with ``scheme``'s tuned fields set (``tuned``); ``train`` if none."""
        changed = dict(dict(self.tuned).get(scheme, ()))
        return replace(self.train, **changed) if changed else self.train


@dataclass(frozen=True)
class Variant:
    """One language-model variant: a scheme, its norm and table placement, and changes.

    ``learning_rate`` None means the preset's; ``changes`` are ModelConfig
    fields set otherwise, and ``training`` TrainConfig fields, as ``(name,
    value)`` pairs; ``corpus`` None is the preset's corpus, else a key of
    ``runner.CORPORA`` (``"shakespeare"`` for ``language_schemes``). Its
    ``key`` and ``label`` name everything set.
    """

    scheme: str
    norm: str = "pre"
    absolute: str = "input"
    learning_rate: float | None = None
    changes: tuple[tuple[str, object], ...] = ()
    corpus: str | None = None
    training: tuple[tuple[str, object], ...] = ()

    @property
    def key(self) -> str:
        parts = [] if self.corpus is None else [self.corpus]
        parts += [self.scheme, self.norm, self.absolute]
        if self.learning_rate is not None:
            parts.append(f"lr={self.learning_rate:g}")
        parts += [f"{name}={value}" for name, value in self.changes]
        parts += [f"train.{name}={value}" for name, value in self.training]
        return "/".join(parts)

    @property
    def label(self) -> str:
        text = ("" if self.corpus is None else f"{self.corpus}: ") + (
            f"{self.scheme} {self.norm}-norm"
        )
        if self.absolute == "every_layer":
            text += " every layer"
        if self.learning_rate is not None:
            text += f" lr {self.learning_rate:g}"
        text += "".join(f" {name}={value}" for name, value in self.changes)
        return text + "".join(f" train.{name}={value}" for name, value in self.training)


# The task settings a preset file's [passkey] and [lookback] start from (the
# standard preset's).
STANDARD_PASSKEY = {
    "seq_len": 64,
    "steps": 600,
    "batch_size": 32,
    "key_len": 4,
    "depths": (0.0, 0.25, 0.5, 0.75, 1.0),
}
STANDARD_LOOKBACK = {"seq_len": 32, "lookback": 5, "steps": 400, "num_symbols": 16}

# What a sweep may not vary (any other ModelConfig or TrainConfig field it may):
# the fields a variant sets, the window (the lengths read are multiples of it, the
# same for every unit of a run) and the seed (``seeds`` lists those).
NOT_SWEPT = {
    "model": ("scheme", "norm", "absolute", "rope_scaling"),
    "train": ("seq_len", "seed"),
}


def swept_variants(scheme: str, sweep: tuple[tuple[str, tuple], ...]) -> list[Variant]:
    """``scheme``'s variants, one per combination of the swept values, in order.

    ``"train.learning_rate"`` sets the variant's ``learning_rate``, another
    ``"train.NAME"`` its ``training``, ``"model.NAME"`` its ``changes``; the
    last field named varies fastest. No sweep: the plain variant.
    """
    variants_found = []
    for values in itertools.product(*(values for _, values in sweep)):
        learning_rate, changes, training = None, [], []
        for (path, _), value in zip(sweep, values, strict=True):
            table, name = path.split(".", 1)
            if path == "train.learning_rate":
                learning_rate = value
            elif table == "train":
                training.append((name, value))
            else:
                changes.append((name, value))
        variants_found.append(
            Variant(
                scheme,
                learning_rate=learning_rate,
                changes=tuple(changes),
                training=tuple(training),
            )
        )
    return variants_found


def variants(preset: Preset) -> list[Variant]:
    """Every language-model variant of a preset, in the order a run trains them:
    ``schemes`` (swept), post-norm, tables in every layer, learning rates (both
    norms), ablations, then Shakespeare's."""
    p = preset
    found = [v for s in p.schemes for v in swept_variants(s, p.sweep)]
    found += [Variant(s, "post") for s in p.post_norm_schemes]
    found += [Variant(s, absolute="every_layer") for s in p.every_layer_schemes]
    for scheme in p.learning_rate_schemes:
        for norm in ("pre", "post"):
            found += [
                Variant(scheme, norm, learning_rate=lr) for lr in p.learning_rates
            ]
    found += [Variant(s, changes=changes) for s, changes in p.ablations]
    found += [Variant(s, corpus="shakespeare") for s in p.language_schemes]
    return found
