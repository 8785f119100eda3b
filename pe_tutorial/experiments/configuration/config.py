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
    schemes_from = ["my_pe.py"]      # files (or modules) registering your own
                                     # schemes (scheme_files.py)
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

    [passkey]                        # the task's settings (STANDARD_PASSKEY)
    keys = 3                         # several named keys, one asked for (default 1)
    one_key_steps = 1800             # a curriculum: the first steps on one key
    ask_every_key = true             # training rows ask every key (scoring: one)

    [sweep]                          # lists: each scheme trained at every combination
    train.learning_rate = [1e-3, 3e-3]

    [tuned]                          # a scheme's own TrainConfig fields (its rates)
    t5 = { learning_rate = 1e-2, position_lr_multiplier = 30.0 }

Top-level keys are the preset's other fields (``eval_windows``,
``train_bytes``, ``post_norm_schemes``, ``extension_methods``, chapter 12's
``cache_window``, ``start_byte``, ``global_interpolation``, ``language_models
= false`` for the tasks alone, ...);
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
``[[families]]`` declares, before the run is read, a family of claims the
chapter corrects together: ``name``, ``claims`` (sentences such as ``"alibi -
rope at 1L"`` or ``"rope from 1L to 8L"``, on the preset's schemes and
multiples) and ``correction = "holm"`` (``lm.declared_families``; no unit
reads them, so declaring one leaves every unit's fingerprint as it is).
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

This module reads a file, its tables and ``--set`` into a ``Preset`` and back;
the fields and the conversion of one value are ``config_fields.py``'s, the
rules the whole experiment must keep ``config_checks.py``'s.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path

from ...encodings.rope_scaling import SCALING_METHODS
from ...lm.declared_families import FamilyDeclaration, parse_claim
from ...lm.registry import registered, scheme_names
from ...lm.train import TrainConfig
from . import scheme_files
from .config_checks import (
    check_corpus,
    check_experiment,
    check_multiples,
)
from .config_fields import (
    ANALYSES,
    BUILT_IN_CORPORA,
    MODEL_FIELDS,
    MODEL_HINTS,
    PRESET_HINTS,
    SCHEME_LISTS,
    TABLES,
    TASK_DEFAULTS,
    TASK_FIELDS,
    TOP_LEVEL,
    TRAIN_FIELDS,
    TRAIN_HINTS,
    ExperimentError,
    convert,
    listed,
    no_such,
    shown,
    table_of,
)
from .presets import (
    NOT_SWEPT,
    Preset,
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
    "declared_families",
]


def _model_table(where: str, value) -> dict:
    model = {}
    for key, item in table_of(where, value).items():
        if key in NOT_SWEPT["model"]:
            raise ExperimentError(
                f"{where}.{key}: set by each variant, not in [model] (schemes, "
                "post_norm_schemes and every_layer_schemes choose the scheme, norm "
                "and placement; the extension analyses the RoPE scaling)"
            )
        if key not in MODEL_FIELDS:
            raise no_such(f"{where}.", key, "ModelConfig", MODEL_FIELDS)
        model[key] = convert(
            f"{where}.{key}", item, MODEL_HINTS[key], sweep_hint=f"model.{key}"
        )
    return model


def _train_fields(where: str, value, refused: dict[str, str]) -> dict:
    """A table of ``TrainConfig`` fields, each converted; a field of ``refused``
    is an error with its reason, as is any name TrainConfig does not have."""
    settings = {}
    for key, item in table_of(where, value).items():
        if key in refused:
            raise ExperimentError(f"{where}.{key}: {refused[key]}")
        if key not in TRAIN_FIELDS:
            raise no_such(f"{where}.", key, "TrainConfig", TRAIN_FIELDS)
        sweep_hint = f"train.{key}" if where == "train" else ""
        settings[key] = convert(
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
    for key, item in table_of(task, value).items():
        if key not in allowed:
            raise no_such(f"{task}.", key, f"[{task}]", allowed)
        settings[key] = convert(f"{task}.{key}", item, allowed[key])
    return settings


def _check_schemes(where: str, names: tuple[str, ...]) -> None:
    known = scheme_names()
    for name in names:
        if name not in known:
            raise ExperimentError(
                f"{where}: unknown scheme {name!r}; choose from {listed(known)} "
                "(pe_tutorial.lm.registry)"
            )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ExperimentError(f"{where}: {listed(twice)} listed twice")


def _ablations(value) -> tuple:
    if not isinstance(value, list):
        raise ExperimentError(
            "ablations: expected a list of tables ([[ablations]] with scheme = "
            f'"t5" and model = {{ t5_max_distance = 1024 }}), got {shown(value)}'
        )
    found = []
    for i, item in enumerate(value):
        where = f"ablations[{i}]"
        item = table_of(where, item)
        unknown = set(item) - {"scheme", "model"}
        if unknown:
            raise no_such(
                f"{where}.", sorted(unknown)[0], "an ablation", ("scheme", "model")
            )
        if "scheme" not in item:
            raise ExperimentError(
                f"{where}.scheme: missing; name the scheme it changes"
            )
        scheme = convert(f"{where}.scheme", item["scheme"], str)
        _check_schemes(f"{where}.scheme", (scheme,))
        changes = _model_table(f"{where}.model", item.get("model", {}))
        if not changes:
            raise ExperimentError(
                f"{where}.model: empty; an ablation changes ModelConfig fields"
            )
        found.append((scheme, tuple(changes.items())))
    return tuple(found)


def _families(value) -> tuple:
    """``[[families]]``, each checked (``FamilyDeclaration``), as plain tuples."""
    if not isinstance(value, list):
        raise ExperimentError(
            "families: expected a list of tables ([[families]] with name = ... and "
            f"claims = ['alibi - rope at 1L', ...]), got {shown(value)}"
        )
    found = []
    for i, item in enumerate(value):
        where = f"families[{i}]"
        try:
            declared = FamilyDeclaration.from_table(table_of(where, item))
        except ValueError as error:
            raise ExperimentError(f"{where}: {error}") from None
        found.append(
            (
                declared.name,
                tuple(claim.text for claim in declared.claims),
                declared.correction,
            )
        )
    names = [name for name, _, _ in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ExperimentError(f"families: {listed(twice)} declared twice")
    return tuple(found)


def declared_families(preset: Preset) -> tuple[FamilyDeclaration, ...]:
    """The families ``preset`` declares (``[[families]]``), in its order."""
    return tuple(
        FamilyDeclaration(name, tuple(parse_claim(text) for text in claims), correction)
        for name, claims, correction in preset.families
    )


def _check_families(preset: Preset) -> None:
    """Each declared claim names schemes the preset trains and multiples it reads."""
    for i, family in enumerate(declared_families(preset)):
        for claim in family.claims:
            where = f"families[{i}] ({family.name!r}): claim {claim.text!r}"
            strangers = [s for s in claim.schemes if s not in preset.schemes]
            if strangers:
                raise ExperimentError(
                    f"{where} names {listed(strangers)}, which this experiment does "
                    f"not train; its schemes are {listed(preset.schemes)}"
                )
            unread = [m for m in claim.multiples if m not in preset.multiples]
            if unread:
                raise ExperimentError(
                    f"{where} reads {unread[0]}L, which this experiment does not "
                    f"score; its multiples are {list(preset.multiples)}"
                )


def _tuned(value, train: TrainConfig) -> tuple:
    """``[tuned]``: per scheme, the TrainConfig fields it trains with instead of ``[train]``'s."""
    found = []
    for scheme, fields_ in table_of("tuned", value).items():
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
    for path, values in _flatten("", table_of("sweep", value)):
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
            raise no_such(f"sweep.{table}.", name, owner, allowed)
        if not isinstance(values, list) or not values:
            raise ExperimentError(
                f"{where}: a sweep takes a list of values, such as [1e-3, 3e-3]; got "
                f"{shown(values)}"
            )
        converted = tuple(
            convert(f"{where}[{i}]", v, hints[name]) for i, v in enumerate(values)
        )
        twice = sorted({v for v in converted if converted.count(v) > 1}, key=str)
        if twice:
            raise ExperimentError(f"{where}: {listed(twice)} given twice")
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
    table = table_of("analyses", value)
    switches = {"extensions": True, **{task: task in data for task in TASK_FIELDS}}
    for key, item in table.items():
        if key not in ANALYSES:
            raise ExperimentError(
                f"analyses.{key}: no such analysis; choose from {listed(ANALYSES)} "
                "(length curves and loss by position always run)"
            )
        switches[key] = convert(f"analyses.{key}", item, bool)
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
    data = table_of("the experiment", data)
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
            f"{key}: no such field{hint}; an experiment has {listed(TOP_LEVEL)} "
            f"and the tables {listed(TABLES)}"
        )
    check_multiples(data)
    values: dict = {}
    for key in TOP_LEVEL:
        if key in data:
            values[key] = convert(key, data[key], PRESET_HINTS[key])
    values.setdefault("name", name or "experiment")
    if "schemes_from" in values:  # the reader's schemes, before any list names them
        values["schemes_from"] = tuple(
            scheme_files.resolve(s, base) for s in values["schemes_from"]
        )
        scheme_files.load(values["schemes_from"])
    for key in SCHEME_LISTS:
        if key in values:
            _check_schemes(key, values[key])
    tables = tuple(n for n in scheme_names() if registered(n).absolute)
    for name in values.get("every_layer_schemes", ()):
        if name not in tables:
            raise ExperimentError(
                f"every_layer_schemes: {name!r} has no absolute table to add in every "
                f"layer; choose from {listed(tables)}"
            )
    if "finetune_methods" in data:
        methods = convert("finetune_methods", data["finetune_methods"], tuple[str, ...])
        for method in methods:
            if method != "none" and method not in SCALING_METHODS:
                raise ExperimentError(
                    f"finetune_methods: unknown method {method!r}; choose from none "
                    f"(plain RoPE), {listed(SCALING_METHODS)}"
                )
        values["finetune_methods"] = tuple(None if m == "none" else m for m in methods)
    for method in values.get("extension_methods", ()):
        if method not in SCALING_METHODS:
            raise ExperimentError(
                f"extension_methods: unknown method {method!r}; choose from "
                f"{listed(SCALING_METHODS)}"
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
        families=_families(data.get("families", [])),
    )
    check_experiment(preset)
    _check_families(preset)
    return preset


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
        if value is None:  # TOML has no None: a field left out reads as None
            continue
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
    data["families"] = [
        {"name": name, "correction": correction, "claims": list(claims)}
        for name, claims, correction in preset.families
    ]
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
    if isinstance(data.get("schemes_from"), list):  # files read from the file's folder
        data["schemes_from"] = [
            scheme_files.resolve(s, base) if isinstance(s, str) else s
            for s in data["schemes_from"]
        ]
    data.setdefault("name", path.stem)
    return data, base


# The shipped presets, in this order first; any other file in presets/ after them.
PRESET_ORDER = ("quick", "standard", "frontier", "streaming", "full")


def _load_presets() -> dict[str, Preset]:
    folder = resources.files(__package__.rpartition(".")[0]) / "presets"
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
