"""An experiment document written as TOML text (the inverse of ``tomllib.loads``
for the shapes ``config.preset_to_dict`` makes).

The judge (``judge.py``) writes each of its stages as an experiment file a
reader can open, change and run by hand (``--config FILE``, with ``--jobs``
or ``--shard``); Python's standard library reads TOML but does not write it,
and the documents are simple: top-level values, then tables (a value that is
itself a table, as ``[sweep]``'s ``train`` or ``[tuned]``'s ``rope``, written
inline), then ``[[ablations]]``.
"""

from __future__ import annotations

import json
import math

__all__ = ["toml_text"]


def _value(value, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} has no TOML form an experiment reads")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_key(k)} = {_value(v, where)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise ValueError(f"{where}: a {type(value).__name__} has no TOML form")


def _key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "")
    return key if bare.isascii() and bare.isalnum() else json.dumps(key)


def toml_text(document: dict, *, header: str = "") -> str:
    """``document`` as TOML: ``header`` lines as comments, the plain values, each
    table (a dict of values), then each array of tables (a list of dicts)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    if lines:
        lines.append("")
    tables, arrays = {}, {}
    for key, value in document.items():
        if isinstance(value, dict):
            tables[key] = value
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) for v in value)
        ):
            arrays[key] = value
        else:
            lines.append(f"{_key(key)} = {_value(value, key)}")
    for name, table in tables.items():
        lines += ["", f"[{_key(name)}]"]
        for key, value in table.items():
            lines.append(f"{_key(key)} = {_value(value, f'{name}.{key}')}")
    for name, items in arrays.items():
        for item in items:
            lines += ["", f"[[{_key(name)}]]"]
            for key, value in item.items():
                lines.append(f"{_key(key)} = {_value(value, f'{name}.{key}')}")
    return "\n".join(lines) + "\n"
