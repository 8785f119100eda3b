"""Judge a reader's own scheme as chapter 9 judged the book's (issue 51).

``python -m pe_tutorial.experiments judge my_pe.py`` applies the chapter's
protocol to the scheme a file registers (``scheme_files.py``), in stages:

1. ``tune``: the ``tuning`` preset's model, training, data and seed with the
   new scheme alone, at the sweep's four learning rates, read on the
   validation split; a scheme with position parameters is also swept as
   ``tuning-position`` sweeps the book's (three rates, its position
   parameters at 10 and 30 times the rate), in ``tune-position``.
2. ``heldout``: the ``heldout`` preset's fresh seeds and test split, the scheme
   trained at its best setting (the lowest validation bits per byte at L,
   ``tuning.best_training``).
3. ``tasks``: the ``tuned`` preset's look-back and passkey tasks at that setting,
   on that record's seeds.

Each stage is an ordinary experiment file written into the judge's folder
(``STAGE.toml``) and run as any other, with ``--jobs``; its record is
``STAGE.json``, and a stopped stage resumes from ``STAGE.json.partial``.
With ``--shard K/N`` the judge runs shard K of the stage it has reached and
stops; once the shards are merged into ``STAGE.json`` (the command is
printed) it goes on to the next stage.

The book's schemes are judged against as they were recorded: their
entries are taken from the records the package ships (``heldout``,
``tuned``) when those records' settings, tuned rates, corpus and device
type match the stage's; otherwise they are trained in the same stage, at
the rates the book's tuning chose, and the card says which. ``judged.json``
holds the new scheme's entries beside the baselines', and the report card
(``report_card.py``) is written from it into ``card/``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

from ...lm.model import ByteTransformer, ModelConfig
from ...lm.train import resolve_device
from ..configuration import scheme_files
from ..configuration.arguments import jobs_argument, shard_argument
from ..configuration.config import (
    PRESETS,
    apply_setting,
    check_corpus,
    preset_from_dict,
    preset_to_dict,
)
from ..configuration.config_fields import ExperimentError
from ..configuration.presets import Preset
from ..configuration.toml_text import toml_text
from ..configuration.tuning import best_training, sweep_points, tuned_table
from ..records.record import ResumeError, partial_path
from ..records.results import load_results
from ..running.merge import merge_parts
from ..running.run import run_experiments, run_units
from ..running.runner import Runner
from ..running.units import code_version

__all__ = ["BOOK_SCHEMES", "main", "stage_presets", "baseline_sources", "assemble"]

PROG = "python -m pe_tutorial.experiments judge"

# chapter 9's nine schemes, the default baselines
BOOK_SCHEMES = (
    "nope",
    "learned",
    "sinusoidal",
    "rope",
    "alibi",
    "t5",
    "shaw",
    "cope",
    "deberta",
)
# stage: the book's preset it starts from, and the shipped record that holds
# the baselines it is read against (None: a tuning stage, read alone)
STAGES = {
    "tune": ("tuning", None),
    "tune-position": ("tuning-position", None),
    "heldout": ("heldout", "heldout"),
    "tasks": ("tuned", "tuned"),
}


def has_position_parameters(scheme: str) -> bool:
    """Whether a model with the scheme has parameters of its own for positions
    (``ByteTransformer.position_parameters``), which chapter 9 tunes apart."""
    config = ModelConfig(scheme=scheme, d_model=32, num_heads=2, num_layers=2)
    return bool(ByteTransformer(config).position_parameters())


def _stage_document(
    stage: str,
    scheme: str,
    source: str,
    retrain: tuple[str, ...],
    settings: list[str],
    best: dict | None,
) -> dict:
    """The experiment document of one stage (see the module's docstring)."""
    book = PRESETS[STAGES[stage][0]]
    data = preset_to_dict(book)
    data["name"] = f"judge-{scheme}-{stage}"
    data["schemes_from"] = [source]
    data["ablations"] = []
    data["post_norm_schemes"] = data["every_layer_schemes"] = []
    data["learning_rate_schemes"], data["learning_rates"] = [], []
    data["language_schemes"] = []
    if stage in ("tune", "tune-position"):
        data["schemes"] = [scheme]
    else:
        data["schemes"] = [scheme, *retrain]
        tuned = {s: data["tuned"][s] for s in retrain}
        data["tuned"] = {scheme: best, **tuned}
    if stage == "tasks":
        data["language_models"] = False
        data["analyses"]["extensions"] = False
    tuning = stage in ("tune", "tune-position")
    for setting in settings:  # a sweep is the tuning stages' alone
        if tuning or not setting.strip().startswith("sweep."):
            apply_setting(data, setting)
    return data


def stage_presets(
    scheme: str,
    source: str,
    *,
    settings: list[str] = (),
    best: dict | None = None,
    retrain: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Preset]:
    """The tuning stages' presets (``best`` None), or the reading stages' at the
    best setting, each training the baselines ``retrain[stage]`` beside the
    scheme. ``settings`` are ``--set`` changes applied to every stage (those of
    ``sweep.`` to the tuning stages only)."""
    retrain = retrain or {}
    if best is None:
        stages = ["tune"] + (
            ["tune-position"] if has_position_parameters(scheme) else []
        )
    else:
        stages = ["heldout", "tasks"]
    presets = {}
    for stage in stages:
        document = _stage_document(
            stage, scheme, source, retrain.get(stage, ()), list(settings), best
        )
        presets[stage] = preset_from_dict(document, name=document["name"])
    return presets


TASK_SETTINGS = ("model", "train", "seeds", "lookback", "passkey")


def _plain(settings: dict) -> dict:
    """Settings as a record holds them (JSON: tuples become lists)."""
    return json.loads(json.dumps(settings))


def _differing(a: dict, b: dict, keys) -> list[str]:
    """The keys of ``keys`` whose values differ; a table (``model``) is compared on
    the fields both sides hold, so a field the code gained after a record was
    made (and that the book's preset leaves at its default) is not a difference."""
    out = []
    for key in keys:
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            x, y = ({k: d[k] for k in set(x) & set(y)} for d in (x, y))
        if x != y:
            out.append(key)
    return sorted(out)


def baseline_sources(
    stage: str, preset: Preset, baselines: tuple[str, ...], device: torch.device
) -> dict[str, str | None]:
    """For each of ``baselines``: why it must be trained again for ``stage``
    (``preset``: the stage as planned), or None when the package's record of the
    book's preset can be reused. Reused means: the stage plans what the book's
    preset plans (the settings the tasks read, for ``tasks``); the record holds
    the settings the preset plans today (those it names: a setting added to the
    code since is left at its default by the preset), the baseline's entries
    and its tuned rates; it read the same corpus (source, Python version, sizes,
    split); and it trained on the same device type."""
    book = STAGES[stage][1]
    record = load_results(book)
    why = _whole_record(stage, preset, book, record, device)
    reasons = {}
    for baseline in baselines:
        if why is not None:
            reasons[baseline] = why
        elif baseline not in {e["scheme"] for e in record[_SECTION[stage]]}:
            reasons[baseline] = f"the recorded {book} run has no {baseline} model"
        elif record["settings"].get("tuned", {}).get(baseline) != _plain(
            dict(dict(PRESETS[book].tuned).get(baseline, ()))
        ):
            reasons[baseline] = (
                f"the recorded {book} run trained {baseline} at other rates"
            )
        else:
            reasons[baseline] = None
    return reasons


_SECTION = {"heldout": "language_model", "tasks": "passkey"}


def _whole_record(
    stage: str, preset: Preset, book: str, record: dict | None, device: torch.device
) -> str | None:
    """Why no baseline of the record can be reused for the stage, or None."""
    if record is None:
        return f"the package ships no record of the {book} preset"
    runner = Runner(preset, device, progress=False)
    planned = _plain(runner.settings())
    today = _plain(Runner(PRESETS[book], device, progress=False).settings())
    recorded = record["settings"]
    keys = TASK_SETTINGS if stage == "tasks" else set(planned) - {"tuned"}
    changed = _differing(planned, today, keys)
    if changed:
        return f"this judge changes the {book} preset's {', '.join(changed)}"
    stale = _differing(recorded, today, [k for k in keys if k in recorded])
    if stale:
        return f"the recorded {book} run has other {', '.join(stale)} than its preset"
    meta = record["metadata"]
    if stage != "tasks":
        described = _plain(runner.data(preset.corpus).corpus.describe())
        kept = dict((meta.get("corpora") or {}).get(preset.corpus, {}))
        if any(kept.get(k) != v for k, v in described.items()):
            return (
                f"the recorded {book} run read another corpus: "
                f"{kept.get('source', '?')!r}, here {described.get('source', '?')!r}"
            )
    if meta.get("device") != device.type:
        return f"the recorded {book} run trained on {meta.get('device')}, this on {device.type}"
    return None


def assemble(
    scheme: str,
    records: dict[str, dict],
    reused: dict[str, dict[str, str]],
    retrained: dict[str, dict[str, str]],
    tuning: list[dict],
    best: dict,
    source: str,
    command: str,
    seconds: dict[str, float],
) -> dict:
    """``judged.json``: the held-out stage's record with the tasks' entries and the
    reused baselines' entries added, and a ``judge`` table saying what came from
    where."""
    judged = json.loads(json.dumps(records["heldout"]))
    judged["preset"] = f"judge-{scheme}"
    judged["metadata"]["command"] = command
    # the whole judge's training and scoring, as a record's header reports it
    judged["metadata"]["wall_seconds"] = sum(seconds.values())
    tasks = records["tasks"]
    for section in ("lookback", "passkey"):
        judged[section] = list(tasks.get(section, []))
        judged["settings"][section] = tasks["settings"][section]
    judged["settings"]["task_seeds"] = tasks["settings"]["seeds"]
    book = {stage: load_results(STAGES[stage][1]) for stage in reused if reused[stage]}
    sources = {  # where each reused baseline was recorded
        stage: {
            key: record["metadata"].get(key)
            for key in ("date", "device", "device_name", "code_version", "command")
        }
        for stage, record in book.items()
    }
    for stage, baselines in reused.items():
        sections = (
            ("language_model",) if stage == "heldout" else ("lookback", "passkey")
        )
        for section in sections:
            for entry in book.get(stage, {}).get(section, []):
                plain = not entry.get("changes") and entry.get("norm", "pre") == "pre"
                plain = plain and entry.get("absolute", "input") == "input"
                if entry["scheme"] in baselines and plain:
                    judged[section].append(entry)
    # a reused baseline trained at the rates its record's [tuned] table gives:
    # the judged record says so too, or a reader would take the one at a tuned
    # rate of its own (sinusoidal's 1e-2) for a variant and leave it out
    tuned = judged["settings"].setdefault("tuned", {})
    for stage, baselines in reused.items():
        rates = book.get(stage, {}).get("settings", {}).get("tuned", {})
        for name in baselines:
            if name in rates:
                tuned.setdefault(name, rates[name])
    judged["settings"]["judge"] = {
        "scheme": scheme,
        "scheme_file": scheme_files.label(source),
        "scheme_file_digest": scheme_files.digest(source),
        "tuning": tuning,
        "best": best,
        "reused": reused,
        "reused_from": sources,
        "retrained": retrained,
        "task_metadata": tasks["metadata"],
        "stage_seconds": seconds,
    }
    return judged


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Judge your own position scheme as chapter 9 judges the book's: "
        "its learning-rate sweep (and position-rate sweep when it has position "
        "parameters), then fresh seeds at its best setting, read at 1x-8x on a "
        "test split, with the look-back and passkey tasks, beside the book's "
        "schemes (reused from the package's records when the settings match) with "
        "verdicts paired by seed; writes judged.json and a report card.",
    )
    parser.add_argument("file", help="a Python file (or module) registering the scheme")
    parser.add_argument(
        "--scheme", help="the scheme to judge, if the file registers several"
    )
    parser.add_argument(
        "--out", type=Path, help="the judge's folder (default judge-SCHEME)"
    )
    parser.add_argument(
        "--against",
        default=",".join(BOOK_SCHEMES),
        help="the book's schemes to judge against, comma-separated (default: the nine)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a field of every stage (the baselines are then trained again)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    parser.add_argument("--jobs", default="1", metavar="N", help="units at once")
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="run shard K of N of the stage reached",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _fail(message: object) -> int:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def _read_counts(args: argparse.Namespace) -> None:
    """``--jobs`` and ``--shard`` read by the run command's rules (``arguments.py``),
    a bad value one ``ExperimentError`` line (nothing printed by argparse)."""
    try:
        args.jobs = jobs_argument(args.jobs)
        args.shard = None if args.shard is None else shard_argument(args.shard)
    except argparse.ArgumentTypeError as error:
        which = "--jobs" if not isinstance(args.jobs, int) else "--shard"
        raise ExperimentError(f"{which} {error}") from None


def _pick_scheme(source: str, wanted: str | None) -> str:
    names = [n for found in scheme_files.load([source]).values() for n in found]
    if wanted is None:
        if len(names) > 1:
            raise ExperimentError(
                f"{scheme_files.label(source)} registers {', '.join(names)}; "
                "say which to judge with --scheme NAME"
            )
        return names[0]
    if wanted not in names:
        raise ExperimentError(
            f"--scheme {wanted}: {scheme_files.label(source)} registers "
            f"{', '.join(names)}"
        )
    return wanted


class _Stages:
    """Runs the stages of one judge in its folder, each once."""

    def __init__(self, out: Path, args: argparse.Namespace, device, argv):
        self.out, self.args, self.device, self.argv = out, args, device, argv

    def run(self, stage: str, preset: Preset) -> dict | None:
        """The stage's record: read if written, else run (None after a shard)."""
        # the header names the scheme file's text and the package's code, so a
        # finished stage is reused only for the same file and code
        sources = scheme_files.digests(preset.schemes_from)
        document = toml_text(
            preset_to_dict(preset),
            header=f"Stage {stage} of {PROG} (pe_tutorial/experiments/judging/judge.py).\n"
            f"Scheme files: {sources}; pe_tutorial code version {code_version()}.",
        )
        config, target = self.out / f"{stage}.toml", self.out / f"{stage}.json"
        if config.exists() and config.read_text() != document:
            raise ExperimentError(
                f"{config} describes another experiment (another scheme file, "
                "--set or code): judge into another --out folder, or delete it"
            )
        config.write_text(document)
        if target.exists():
            return json.loads(target.read_text())
        shard = self.args.shard
        partial = partial_path(target, shard)
        options = dict(
            device=self.device,
            progress=not self.args.no_progress,
            log=lambda message: print(message, flush=True),
            partial=partial,
            resume=partial.exists(),
            jobs=self.args.jobs,
            command=f"{PROG} {shlex.join(self.argv)}  (stage {stage})",
        )
        print(f"stage {stage}: {config}", flush=True)
        if shard is not None:
            run_units(preset, shard=shard, **options)
            k, n = shard
            parts = [partial_path(target, (i, n)) for i in range(1, n + 1)]
            if all(p.exists() for p in parts):
                merged = merge_parts(parts, command=f"{PROG} (merge of {stage})")
                target.write_text(json.dumps(merged, indent=1) + "\n")
                return merged
            print(
                f"shard {k}/{n} of stage {stage} done; when every shard is, run this "
                "command again (it merges them) or "
                f"python -m pe_tutorial.experiments merge {target} "
                + " ".join(str(p) for p in parts)
            )
            return None
        results = run_experiments(preset, **options)
        target.write_text(json.dumps(results, indent=1) + "\n")
        partial.unlink(missing_ok=True)
        return results


def main(argv: list[str] | None = None) -> int:
    """``judge FILE [--scheme NAME] [--out DIR] ...``; the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    from ..viewing.report_card import write_card
    from ..viewing.viewer import report

    try:
        _read_counts(args)
        source = scheme_files.resolve(args.file, None)
        scheme = _pick_scheme(source, args.scheme)
        against = tuple(s for s in args.against.split(",") if s)
        unknown = [s for s in against if s not in BOOK_SCHEMES]
        if unknown:
            raise ExperimentError(
                f"--against: {', '.join(unknown)} not among the book's schemes "
                f"({', '.join(BOOK_SCHEMES)})"
            )
        device = resolve_device(args.device)
        out = args.out or Path(f"judge-{scheme}")
        out.mkdir(parents=True, exist_ok=True)
        stages = _Stages(out, args, device, argv)
        tuning_records, stage_names = [], []
        for stage, preset in stage_presets(scheme, source, settings=args.set).items():
            stage_names.append(stage)
            check_corpus(preset)
            record = stages.run(stage, preset)
            if record is None:
                return 0
            tuning_records.append(record)
        points = sweep_points(*tuning_records)
        best = tuned_table(best_training(points))[scheme]
        plain = stage_presets(scheme, source, settings=args.set, best=best)
        reasons = {
            stage: baseline_sources(stage, preset, against, device)
            for stage, preset in plain.items()
        }
        retrain = {
            stage: tuple(b for b, why in why_not.items() if why)
            for stage, why_not in reasons.items()
        }
        records = {}
        presets = stage_presets(
            scheme, source, settings=args.set, best=best, retrain=retrain
        )
        for stage, preset in presets.items():
            check_corpus(preset)
            records[stage] = stages.run(stage, preset)
            if records[stage] is None:
                return 0
    except (ExperimentError, ResumeError, ValueError) as error:
        return _fail(error)
    reused = {s: {b: s for b, why in r.items() if not why} for s, r in reasons.items()}
    retrained = {s: {b: why for b, why in r.items() if why} for s, r in reasons.items()}
    tuning = [
        {
            "learning_rate": p.learning_rate,
            "position_lr_multiplier": p.position_lr_multiplier,
            "bpb": p.bpb,
        }
        for p in points
    ]
    seconds = {
        stage: record["metadata"]["wall_seconds"]
        for stage, record in [*zip(stage_names, tuning_records), *records.items()]
    }
    command = f"{PROG} {shlex.join(argv)}"
    judged = assemble(
        scheme, records, reused, retrained, tuning, best, source, command, seconds
    )
    (out / "judged.json").write_text(json.dumps(judged, indent=1) + "\n")
    tables = report(judged, path=str(out / "judged.json"))
    card = write_card(judged, out / "card", tables)
    print(f"wrote {out / 'judged.json'} and the report card {card}")
    return 0
