"""Join the run files of a sharded run into one record: ``merge OUT.json PART ...``.

A run split with ``--shard K/N`` leaves one run file per shard
(``OUT.json.K-of-N.partial``), each with a header that holds the experiment,
the fingerprint of every unit of the whole plan, and its metadata
(``record.RunFile``). ``merge_parts`` reads them and makes the record that one
process would have made, after checking that

- every part is of the same plan (the same unit keys);
- every part's fingerprints agree, unit by unit, with the first part's, both
  those its header planned and those of the units it holds: the same settings,
  corpus, device type and code version (``MergeError`` names the units and
  what differs);
- every planned unit is in some part (``MergeError`` names the missing ones).

A unit in two parts (a shard run twice, or a whole run's file beside a
shard's) is taken from the first. The record's metadata is the first part's,
its ``wall_seconds`` the units' own times summed, and ``parts`` says which
file ran which shard where.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..configuration.config import ExperimentError, preset_from_dict
from ..records.record import ResumeError, read_run_file
from .run import record
from .runner import Runner

__all__ = ["MergeError", "merge_parts"]


class MergeError(ValueError):
    """Parts that cannot be merged; the message names the files or units and says why."""


def _listed(keys: list[str], most: int = 12) -> str:
    shown = ", ".join(keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _differing(one: dict, other: dict) -> list[str]:
    """The parts of two fingerprints that differ (``code``, ``preset.train``, ...)."""
    names = []
    for key in sorted(one.keys() | other.keys()):
        a, b = one.get(key), other.get(key)
        if a == b:
            continue
        if (
            isinstance(a, dict)
            and isinstance(b, dict)
            and key in ("preset", "arguments")
        ):
            names += [f"{key}.{name}" for name in _differing(a, b)]
        else:
            names.append(key)
    return names


def merge_parts(paths: list[Path], *, command: str | None = None) -> dict:
    """The record of the run whose shards' run files are ``paths`` (see the module)."""
    if not paths:
        raise MergeError("name the run files to merge (PATH.K-of-N.partial)")
    parts = []
    for path in paths:
        try:
            document = read_run_file(Path(path))
        except ResumeError as error:
            raise MergeError(str(error)) from None
        if not isinstance(document.get("plan"), dict) or "experiment" not in document:
            raise MergeError(
                f"cannot merge {path}: it has no header (the experiment and its "
                "plan), so it was written by an older version; resume it with this "
                "one (--resume), which writes the header, then merge"
            )
        parts.append((Path(path), document))
    first_path, first = parts[0]
    plan: dict[str, dict] = first["plan"]
    for path, document in parts[1:]:
        if document["plan"].keys() != plan.keys():
            only = sorted(document["plan"].keys() ^ plan.keys())
            raise MergeError(
                f"cannot merge {path} with {first_path}: they are of different "
                f"experiments (their plans differ in {len(only)} units, such as "
                f"{_listed(only, 3)})"
            )
    disagree: dict[str, set[str]] = {}
    units: dict[str, dict] = {}
    for _, document in parts:
        for key, planned in document["plan"].items():
            if planned != plan[key]:
                disagree.setdefault(key, set()).update(_differing(plan[key], planned))
        for key, unit in document["units"].items():
            if key not in plan:
                continue  # a unit of an older plan, left in the file
            if unit["fingerprint"] != plan[key]:
                fields = _differing(plan[key], unit["fingerprint"])
                disagree.setdefault(key, set()).update(fields)
            elif key not in units:
                units[key] = unit
    if disagree:
        keys = [key for key in plan if key in disagree]
        fields = sorted(set().union(*disagree.values()))
        raise MergeError(
            f"cannot merge: the fingerprints of {len(keys)} units disagree between "
            f"the parts ({', '.join(fields)} differ): {_listed(keys)}; run those "
            "shards again with the same settings, code and device type"
        )
    missing = [key for key in plan if key not in units]
    if missing:
        raise MergeError(
            f"cannot merge: {len(missing)} of {len(plan)} units are in none of the "
            f"parts: {_listed(missing)}; run the shards that hold them (--resume "
            "keeps what a stopped one finished), then merge again"
        )
    try:
        preset = preset_from_dict(first["experiment"])
    except ExperimentError as error:
        raise MergeError(
            f"cannot merge {first_path}: its experiment: {error}"
        ) from None
    runner = Runner(preset, torch.device("cpu"), progress=False, read_corpus=False)
    metadata = dict(first.get("metadata", {}))
    if command is not None:
        metadata["command"] = command
    metadata["parts"] = [
        {
            "file": path.name,
            "shard": document.get("shard"),
            "units": sum(key in plan for key in document["units"]),
            **{
                k: document.get("metadata", {}).get(k)
                for k in ("device", "device_name", "date", "command")
            },
        }
        for path, document in parts
    ]
    return record(
        runner,
        {key: units[key]["result"] for key in plan},
        metadata=metadata,
        seconds=sum(units[key]["seconds"] for key in plan),
    )
