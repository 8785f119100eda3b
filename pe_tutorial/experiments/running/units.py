"""The units of a run and their fingerprints.

A run is a plan of units, each one trained model and all that is measured on
it (``Unit``). Its *fingerprint* says what its result depends on; ``--resume``
reuses a recorded unit only if the fingerprint is unchanged (``record.py``).

The fingerprint is derived, not written out per unit. Each kind of unit
(``KINDS``) declares once which fields of the ``Preset`` it reads, and the
fingerprint holds

- ``preset``: the value of each of those fields, whole (``train`` is the whole
  ``TrainConfig``, ``model`` the whole dict of ``ModelConfig`` fields, so every
  config a unit builds from them is covered, field by field), except ``tuned``,
  of which a unit holds its own scheme's fields only (a unit trains one
  scheme, and reads that scheme's training through ``Preset.training_for``), so
  that tuning one scheme again leaves the others' units as they are;
- ``arguments``: what the unit is called with (its ``Variant`` or scheme, its seed);
- ``corpus``: for a language model, the corpus it reads: where from, its sizes
  and a hash of its bytes (another Python ships another standard library);
- ``device_type`` (``cpu``, ``cuda``, ``mps``) and ``code``, the code version.

The declaration cannot fall behind the code: while a unit runs, it sees the
preset through ``PresetReads``, which refuses any field its kind does not
declare (``UndeclaredRead``), so a unit that starts reading a new field fails
in the tests until the field is declared, and is then in its fingerprint.
Fields no unit reads (the preset's name, which schemes and seeds it runs, its
sweep) are in no fingerprint: they decide which units exist, not what a unit
computes, so a preset that gains a scheme or a seed reuses the units it had; a
swept value is part of its unit's ``Variant``, so of its arguments. Nor is
``corpus``, the path or name of the text the language models read: the corpus
itself is, described and hashed, so the same text at another path is the same. Per-kind
reads (rather than the whole preset in every fingerprint) keep that: a longer
passkey training reruns the passkey units and no language model.

The code version (``code_version``) is a hash of the modules the units run:
``runner.py`` and every package module it imports, directly or through others
(read from their ``import`` statements, with the ``__init__`` of each package
on the way; the top-level ``pe_tutorial/__init__``, which only re-exports, is
left out). It hashes each module's syntax tree with docstrings removed, so a
comment, a docstring, blank lines or formatting change nothing, while any
change to code (a log message's text included) is a new version. The trees are
those of the running Python, so another Python version may read as other code.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import NamedTuple

from ..configuration import scheme_files
from ..configuration.presets import Preset

__all__ = [
    "UnitKind",
    "Unit",
    "KINDS",
    "LANGUAGE_MODEL",
    "ROPE_LANGUAGE_MODEL",
    "LEARNED_LANGUAGE_MODEL",
    "LOOKBACK",
    "PASSKEY",
    "ROPE_PASSKEY",
    "PresetReads",
    "UndeclaredRead",
    "fingerprint",
    "code_version",
    "code_files",
    "source_digest",
]

PRESET_FIELDS = frozenset(f.name for f in fields(Preset))
# Preset's methods a unit may call; each reads the fields it needs through the view
_PRESET_METHODS = frozenset({"training_for"})


@dataclass(frozen=True)
class UnitKind:
    """A kind of unit: its name and the ``Preset`` fields it reads.

    ``corpus``: the unit trains and scores on a corpus (its variant's), whose
    description and hash go into the fingerprint.
    """

    name: str
    reads: tuple[str, ...]
    corpus: bool = False

    def __post_init__(self):
        unknown = set(self.reads) - PRESET_FIELDS
        if unknown:
            raise ValueError(f"{self.name}: no Preset field {sorted(unknown)}")


# What each kind reads, in one place (``PresetReads`` holds the units to it).
# A model is built from ``model`` with ``max_positions`` the training length, and
# trained with ``train`` and its scheme's ``tuned`` fields (its seed, steps or
# length replaced where a task says).
_MODEL = ("model", "train", "tuned", "schemes_from")
# scored at ``multiples`` of the training length on ``eval_windows`` segments of
# a corpus cut at ``train_bytes``, ``validation_bytes`` and ``test_bytes``, on the
# ``scored_split``
_TEXT = (
    "multiples",
    "eval_windows",
    "train_bytes",
    "validation_bytes",
    "test_bytes",
    "scored_split",
    "start_byte",
)
# a learning curve of ``curve_points`` points, read while the model trains
_CURVE = ("curve_points",)
# read again, if set: the longest length through a rolling cache (StreamingLLM),
# Gemma 3's pattern with its global layers interpolated
_READ_AGAIN = ("cache_window", "cache_sinks", "global_interpolation")
# a fine-tune at ``extension_factor`` times the length for ``finetune_steps``, in
# the extended kinds, which exist while ``extensions`` is on (off, RoPE's and the
# learned table's units are of the plain kinds)
_FINE_TUNE = ("extensions", "extension_factor", "finetune_steps")
# RoPE read with each scaling method, zero-shot and fine-tuned
_METHODS = ("extension_methods", "finetune_methods")

LANGUAGE_MODEL = UnitKind(
    "language model", (*_MODEL, *_TEXT, *_CURVE, *_READ_AGAIN), corpus=True
)
ROPE_LANGUAGE_MODEL = UnitKind(
    "RoPE language model, extended",
    (*_MODEL, *_TEXT, *_CURVE, *_READ_AGAIN, *_FINE_TUNE, *_METHODS),
    True,
)
LEARNED_LANGUAGE_MODEL = UnitKind(
    "learned-table language model, lengthened",
    (*_MODEL, *_TEXT, *_CURVE, *_READ_AGAIN, *_FINE_TUNE),
    True,
)
LOOKBACK = UnitKind("look-back", (*_MODEL, "multiples", "lookback"))
PASSKEY = UnitKind("passkey", (*_MODEL, "multiples", "passkey", *_CURVE))
ROPE_PASSKEY = UnitKind(
    "RoPE passkey, extended", (*PASSKEY.reads, *_FINE_TUNE, *_METHODS)
)
KINDS = (
    LANGUAGE_MODEL,
    ROPE_LANGUAGE_MODEL,
    LEARNED_LANGUAGE_MODEL,
    LOOKBACK,
    PASSKEY,
    ROPE_PASSKEY,
)


class Unit(NamedTuple):
    """One unit of a plan: its key, kind, training steps (for the bar), fingerprint,
    and what computes its result (a JSON-ready dict)."""

    key: str
    kind: UnitKind
    steps: int
    fingerprint: dict
    compute: Callable[[], dict]


class UndeclaredRead(RuntimeError):
    """A unit read a preset field that its kind does not declare."""


class PresetReads:
    """A preset as a unit sees it: each field read is noted in ``names``.

    With a ``kind``, a field the kind does not declare raises
    ``UndeclaredRead`` at once. Properties (``lengths``) and methods
    (``training_for``) are computed through the view, so the fields they read
    are checked too. A ``PresetReads`` of a
    ``PresetReads`` notes its own reads and passes them through the outer one.
    """

    def __init__(self, preset: Preset | PresetReads, kind: UnitKind | None = None):
        self._preset = preset
        self._kind = kind
        self.names: set[str] = set()

    def __getattr__(self, name: str):
        attribute = getattr(Preset, name, None)
        if isinstance(attribute, property):
            return attribute.fget(self)
        if callable(attribute) and name in _PRESET_METHODS:  # read through the view
            return attribute.__get__(self)
        if name not in PRESET_FIELDS:
            raise AttributeError(name)
        kind = self._kind
        if kind is not None and name not in kind.reads:
            raise UndeclaredRead(
                f"a {kind.name} unit read the preset's {name!r}, which its kind does "
                f"not declare, so its fingerprint would not see a change of it: add "
                f"{name!r} to the kind's reads in pe_tutorial/experiments/running/units.py"
            )
        self.names.add(name)
        return getattr(self._preset, name)


def _plain(value):
    return asdict(value) if is_dataclass(value) else value


def _scheme_of(arguments: dict) -> str:
    """The scheme a unit trains: its variant's, or the task's ``scheme`` argument."""
    variant = arguments.get("variant")
    return variant.scheme if variant is not None else arguments["scheme"]


def fingerprint(
    kind: UnitKind,
    preset: Preset,
    arguments: dict,
    *,
    device_type: str,
    corpus: dict | None = None,
) -> dict:
    """Everything a unit's result depends on, JSON-shaped (as its file holds it).

    ``arguments`` are what the unit's computation is called with; ``corpus``
    (required for a kind that reads one) describes the corpus. See the module's
    docstring.
    """
    if kind.corpus != (corpus is not None):
        raise ValueError(
            f"a {kind.name} unit's fingerprint takes a corpus if and only if it reads one"
        )
    value = {
        "kind": kind.name,
        "code": code_version(),
        "device_type": device_type,
        "arguments": {name: _plain(v) for name, v in arguments.items()},
        "preset": {name: _plain(getattr(preset, name)) for name in kind.reads},
    }
    if "schemes_from" in kind.reads:  # the reader's files: their text, not their place
        sources = value["preset"].pop("schemes_from")
        if sources:
            value["scheme_files"] = scheme_files.digests(sources)
    if "tuned" in kind.reads:  # a unit trains one scheme, so reads its fields only
        scheme = _scheme_of(arguments)
        fields_ = dict(preset.tuned).get(scheme)
        value["preset"]["tuned"] = {} if fields_ is None else {scheme: dict(fields_)}
    if corpus is not None:
        value["corpus"] = corpus
    return json.loads(json.dumps(value))


PACKAGE = Path(__file__).resolve().parents[2]
# where the units' code starts: the runner, its kinds of unit and the presets
UNIT_MODULES = ("experiments/running/runner.py",)


def _module_files(base: Path, parts: list[str]) -> list[Path]:
    """The files Python runs to import ``parts`` below ``base``: the ``__init__``
    of each package on the way and the module itself."""
    files = []
    for i in range(1, len(parts) + 1):
        folder = base.joinpath(*parts[:i])
        if (folder / "__init__.py").is_file():
            files.append(folder / "__init__.py")
        elif i == len(parts) and folder.with_suffix(".py").is_file():
            files.append(folder.with_suffix(".py"))
    return files


def _imports(path: Path) -> list[Path]:
    """The package files that ``path``'s import statements (anywhere in it) run."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "pe_tutorial."
        ):
            base = PACKAGE.parent
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pe_tutorial."):
                    found += _module_files(PACKAGE.parent, alias.name.split("."))
            continue
        else:
            continue
        parts = node.module.split(".") if node.module else []
        found += _module_files(base, parts)
        for alias in node.names:  # ``from . import name`` may name a module
            found += _module_files(base, [*parts, alias.name])
    return [
        f for f in found if f.is_relative_to(PACKAGE) and f != PACKAGE / "__init__.py"
    ]


def code_files() -> list[Path]:
    """The package modules the units run: ``UNIT_MODULES`` and all they import."""
    todo = [PACKAGE / module for module in UNIT_MODULES]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += _imports(path)
    return sorted(seen)


def source_digest(source: str) -> str:
    """A hash of Python source that comments, docstrings and formatting leave alone."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            )
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


@functools.cache
def code_version() -> str:
    """The code version of the units: a hash of ``code_files``, as ``source_digest`` reads them."""
    digest = hashlib.sha256()
    for path in code_files():
        name = path.relative_to(PACKAGE).as_posix()
        digest.update(f"{name}\0{source_digest(path.read_text())}\0".encode())
    return digest.hexdigest()[:16]
