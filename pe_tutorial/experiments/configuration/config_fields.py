"""The fields of an experiment file and how a value becomes a field's (chapter 9):
the tables and keys an experiment may hold, their types read from the dataclasses
they fill (``Preset``, ``ModelConfig``, ``TrainConfig``), ``ExperimentError``, and the
conversion of one value with a message that names the field and what it expects.
``config.py`` reads a whole file with them."""

from __future__ import annotations

import types
import typing
from dataclasses import fields

from ...lm.model import ModelConfig
from ...lm.train import TrainConfig
from .presets import (
    NOT_SWEPT,
    STANDARD_LOOKBACK,
    STANDARD_PASSKEY,
    Preset,
)

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
    "families",
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
        "keys": int,  # several named keys, one asked for; 1 when not given
        "one_key_steps": int,  # with keys > 1: the first steps train on one key
        "ask_every_key": bool,  # with keys > 1: training rows ask every key
    },
}


TASK_DEFAULTS = {"lookback": STANDARD_LOOKBACK, "passkey": STANDARD_PASSKEY}


# Preset fields written otherwise than as a top-level key of their own
SPECIAL_FIELDS = {
    "model",
    "train",
    "lookback",
    "passkey",
    "extensions",
    "ablations",
    "sweep",
    "tuned",
    "families",
}


PRESET_HINTS = typing.get_type_hints(Preset)


TOP_LEVEL = tuple(f.name for f in fields(Preset) if f.name not in SPECIAL_FIELDS)


MODEL_HINTS = typing.get_type_hints(ModelConfig)


MODEL_FIELDS = tuple(
    f.name for f in fields(ModelConfig) if f.name not in NOT_SWEPT["model"]
)


TRAIN_HINTS = typing.get_type_hints(TrainConfig)


TRAIN_FIELDS = tuple(f.name for f in fields(TrainConfig) if f.name != "seed")


SCHEME_LISTS = (
    "schemes",
    "post_norm_schemes",
    "every_layer_schemes",
    "learning_rate_schemes",
    "language_schemes",
)


class ExperimentError(ValueError):
    """An experiment that cannot run as written: one line naming the field and
    what it may be."""


def listed(names) -> str:
    return ", ".join(str(n) for n in names)


def shown(value) -> str:
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


def expected_type(hint) -> str:
    if typing.get_origin(hint) is tuple:
        return (
            f"a list of {expected_type(typing.get_args(hint)[0]).removeprefix('a ')}s"
        )
    if optional_type(hint) is not None:
        return expected_type(optional_type(hint))
    return {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
    }.get(hint, getattr(hint, "__name__", str(hint)))


def optional_type(hint):
    """``X`` for a hint ``X | None``, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        others = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(others) == 1 and len(typing.get_args(hint)) == 2:
            return others[0]
    return None


def convert(where: str, value, hint, *, sweep_hint: str = ""):
    """``value`` read from TOML as ``hint`` says, or an ``ExperimentError``."""
    if typing.get_origin(hint) is tuple:
        element = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ExperimentError(
                f"{where}: expected {expected_type(hint)}, got {shown(value)}"
            )
        return tuple(
            convert(f"{where}[{i}]", item, element) for i, item in enumerate(value)
        )
    if isinstance(value, list):
        advice = (
            f"; to train at each of them, sweep it: [sweep] {sweep_hint} = {value!r}"
            if sweep_hint
            else ""
        )
        raise ExperimentError(
            f"{where}: one value expected ({expected_type(hint)}), got a list "
            f"{value!r}{advice}"
        )
    inner = optional_type(hint)
    if inner is not None:
        return convert(where, value, inner)
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    raise ExperimentError(
        f"{where}: expected {expected_type(hint)}, got {shown(value)}"
    )


def table_of(where: str, value) -> dict:
    if not isinstance(value, dict):
        raise ExperimentError(f"{where}: expected a table, got {shown(value)}")
    return value


def no_such(where: str, key: str, owner: str, allowed) -> ExperimentError:
    return ExperimentError(
        f"{where}{key}: no such field; {owner} has {listed(allowed)}"
    )
