"""What ``show`` reads: a record of ``run_experiments``, or a run file being written.

``load`` returns a record as it is; a run file (``PATH.partial``,
``record.RunFile``) is assembled from the units that have finished
(``assemble_units``), each entry with the seeds it has so far, its settings
those the run's record will hold (``Runner.settings``, from the file's header).
A file that is neither gets a ``ViewError`` that says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ...lm.findings import mean_at, scheme_rate
from ..configuration.config import ExperimentError, preset_from_dict
from ..records.results import SECTIONS, curve_summary, entry
from ..running.measures import mean_over_depths
from ..running.run import passkey_run
from ..running.runner import Runner, position_bin

__all__ = [
    "ViewError",
    "assemble_units",
    "entry_corpus",
    "is_plain",
    "load",
    "own_corpus",
    "plain_entries",
    "readable",
]


class ViewError(ValueError):
    """A file the viewer cannot show; the message says which and why."""


def load(path: str | Path) -> tuple[dict, str | None]:
    """The results in ``path`` and, for a run file, a line on how far it has got.

    A record (``run_experiments``'s dict) comes back as it is, with None; a
    run file (``{"units": ...}``, such as ``PATH.partial``) is assembled from
    its finished units (``assemble_units``). Raises ``ViewError`` for a file
    that is missing, not whole JSON, or neither of the two.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ViewError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ViewError(f"cannot show {path}: it is not text (not a record)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ViewError(
            f"cannot show {path}: it is not whole JSON ({error}), perhaps cut short "
            "while it was copied; a run file being written is replaced whole, so "
            "read it again"
        ) from None
    if isinstance(data, dict) and "units" in data:
        units = data["units"]
        if not isinstance(units, dict) or not all(
            isinstance(u, dict) and {"fingerprint", "result"} <= u.keys()
            for u in units.values()
        ):
            raise ViewError(
                f'cannot show {path}: its "units" are not those of a run file '
                "(each a fingerprint and a result)"
            )
        try:
            results = assemble_units(units, header=data)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise ViewError(
                f"cannot show {path}: a unit of this run file is not as "
                f"pe_tutorial.experiments writes them ({type(error).__name__}: "
                f"{error})"
            ) from None
        return results, _progress_line(units, data)
    if (
        isinstance(data, dict)
        and isinstance(data.get("settings"), dict)
        and isinstance(data.get("language_model"), list)
    ):
        return data, None
    raise ViewError(
        f"cannot show {path}: it is JSON but neither a record of "
        "pe_tutorial.experiments (settings and sections such as language_model) "
        'nor a run file ("units")'
    )


KIND_NAMES = {"lm": "language models", "lookback": "look-back", "passkey": "passkey"}


def _progress_line(units: dict, header: dict) -> str:
    """How many units a run file holds (of how many its header plans), by kind."""
    plan = header.get("plan")
    planned = list(plan) if isinstance(plan, dict) else None
    kinds: dict[str, list[int]] = {}
    for key in units if planned is None else planned:
        task = key.split("/")[0]
        counts = kinds.setdefault(KIND_NAMES.get(task, task), [0, 0])
        counts[0] += key in units
        counts[1] += 1
    if planned is None:
        parts = ", ".join(f"{done} {kind}" for kind, (done, _) in kinds.items())
        done, of = len(units), ""
    else:
        parts = ", ".join(f"{d} of {n} {kind}" for kind, (d, n) in kinds.items())
        done, of = sum(key in units for key in planned), f" of {len(planned)}"
    shard = header.get("shard")
    part = f" (shard {shard[0]} of {shard[1]})" if shard else ""
    return (
        f"a run file{part}: {done}{of} units done ({parts}); each entry below "
        "holds the seeds finished so far (its n)"
    )


def _by_seed(group: list[dict]) -> list[dict]:
    return sorted(group, key=lambda unit: unit["fingerprint"]["arguments"]["seed"])


def assemble_units(units: dict[str, dict], header: dict | None = None) -> dict:
    """Results as ``run.assemble`` makes them, from the finished units of a run file.

    Entries come in the order of their first unit (the plan's) and hold the
    seeds finished so far; the settings come from the units' fingerprints
    (the preset fields each kind reads), the preset's name, its corpus and the
    metadata from the file's ``header`` where it has one (``RunFile.header``).
    Sections no finished unit reaches are empty.
    """
    header = header or {}
    experiment = header.get("experiment")
    experiment = experiment if isinstance(experiment, dict) else {}
    own_corpus = experiment.get("corpus")
    sections: dict[str, list] = {name: [] for name in SECTIONS}
    settings: dict = {}
    groups: dict[tuple, list[dict]] = {}
    for key, unit in units.items():
        fingerprint = unit["fingerprint"]
        task = key.split("/")[0]
        arguments = fingerprint["arguments"]
        read = fingerprint.get("preset", {})
        for name in ("train", "model", "lookback", "passkey", "extension_factor"):
            if name in read:
                settings.setdefault(name, read[name])
        # a unit's fingerprint holds its own scheme's tuned fields only: join them
        settings.setdefault("tuned", {}).update(read.get("tuned", {}))
        if "multiples" in read and task == "lm":
            settings.setdefault("multiples", read["multiples"])
        settings.setdefault("seeds", set()).add(arguments["seed"])
        if task == "lm":
            variant = arguments["variant"]
            group = ("lm", json.dumps(variant, sort_keys=True))
        else:
            group = (task, arguments["scheme"])
        groups.setdefault(group, []).append({**unit, "key": key})
    train = settings.get("train", {})
    for (task, name), group in groups.items():
        group = _by_seed(group)
        results = [unit["result"] for unit in group]
        if task == "lm":
            variant = json.loads(name)
            rate = variant.get("learning_rate")
            fields = {
                "scheme": variant["scheme"],
                "norm": variant["norm"],
                "absolute": variant["absolute"],
                "corpus": variant.get("corpus") or own_corpus,
                "learning_rate": scheme_rate(settings, variant["scheme"])
                if rate is None
                else rate,
                "changes": {k: v for k, v in variant.get("changes", [])},
                "training": {k: v for k, v in variant.get("training", [])},
                "parameters": results[0].get("parameters"),
            }
            runs = [result["run"] for result in results]
            language = entry(fields, runs)
            curve = curve_summary(runs)
            if curve is not None:
                language["curve"] = curve
            sections["language_model"].append(language)
            _readings(sections["rope_extension"], results, "extension", "bpb")
            for mode, runs in _named(results, "bands").items():
                sections["rope_bands"].append(entry({"mode": mode}, runs))
            for stage, runs in _named(results, "table_extension").items():
                sections["learned_extension"].append(entry({"stage": stage}, runs))
        elif task == "lookback":
            runs = [result["run"] for result in results]
            sections["lookback"].append(entry({"scheme": name}, runs, "accuracy"))
        elif task == "passkey":
            runs = [
                {"seed": r["run"]["seed"], **passkey_run(r["run"])} for r in results
            ]
            passkey = entry({"scheme": name}, runs, "accuracy")
            curve = curve_summary(runs, "accuracy")
            if curve is not None:
                passkey["curve"] = curve
            sections["passkey"].append(passkey)
            _readings(sections["passkey_extension"], results, "extension", "accuracy")
    seq_len = train.get("seq_len")
    metadata = header.get("metadata")
    seeds = sorted(settings.get("seeds", ()))
    planned = _run_settings(experiment)
    if planned is None:  # no header (an older run file): what the units say
        planned = {
            "corpus": own_corpus,
            **{k: v for k, v in settings.items() if k != "multiples"},
            "lengths": [m * seq_len for m in settings.get("multiples", ())]
            if seq_len
            else [],
            "position_bin": position_bin(seq_len) if seq_len else 1,
        }
    return {
        "preset": experiment.get("name"),
        "metadata": metadata if isinstance(metadata, dict) else {},
        # the seeds finished so far: each entry's n says the same
        "settings": {**planned, "seeds": seeds},
        **sections,
    }


def _run_settings(experiment: dict) -> dict | None:
    """The settings the run's record will hold (``Runner.settings``, as ``merge``
    writes them), from the experiment in a run file's header; None without one."""
    if not experiment:
        return None
    try:
        preset = preset_from_dict(experiment)
    except ExperimentError:
        return None
    runner = Runner(preset, torch.device("cpu"), progress=False, read_corpus=False)
    return json.loads(json.dumps(runner.settings()))  # as the record file holds them


def _with_depths(seed: int, by_depth: dict) -> dict:
    return {"seed": seed, "accuracy": mean_over_depths(by_depth), "by_depth": by_depth}


def _named(results: list[dict], field: str) -> dict[str, list[dict]]:
    """Per reading name, ``{"seed", "bpb"}`` of each unit that has ``field``."""
    out: dict[str, list[dict]] = {}
    for result in results:
        for name, bpb in result.get(field, {}).items():
            out.setdefault(name, []).append({"seed": result["run"]["seed"], "bpb": bpb})
    return out


def _readings(section: list, results: list[dict], field: str, key: str) -> None:
    """The method/stage readings of RoPE (text or passkey) as entries of ``section``."""
    readings: dict[str, list[dict]] = {}
    for result in results:
        seed = result["run"]["seed"]
        for name, value in result.get(field, {}).items():
            run = (
                {"seed": seed, "bpb": value}
                if key == "bpb"
                else _with_depths(seed, value)
            )
            readings.setdefault(name, []).append(run)
    for name, runs in readings.items():
        method, stage = name.split("/")
        section.append(entry({"method": method, "stage": stage}, runs, key))


# which entries a table or figure reads: the plain variant of each scheme on a corpus


def is_plain(entry: dict, settings: dict) -> bool:
    return (
        entry["norm"] == "pre"
        and entry["absolute"] == "input"
        and entry.get("learning_rate") in (None, scheme_rate(settings, entry["scheme"]))
        and not entry.get("changes")
        and not entry.get("training")
    )


def own_corpus(results: dict) -> str | None:
    """The run's own corpus (None where a run file does not name it)."""
    return results["settings"].get("corpus", "stdlib")


def entry_corpus(entry: dict) -> str | None:
    return entry.get("corpus", "stdlib")


def plain_entries(results: dict, corpus: str | None) -> dict[str, dict]:
    """The plain variant of each scheme on a corpus: pre-norm, table at the input,
    the scheme's own rate, no changes (chapter 9's ``language_entry`` default)."""
    return {
        e["scheme"]: e
        for e in results["language_model"]
        if entry_corpus(e) == corpus and is_plain(e, results["settings"])
    }


def readable(entry: dict, length: int) -> bool:
    return mean_at(entry, length) is not None
