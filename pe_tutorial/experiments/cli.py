"""The command line: ``python -m pe_tutorial.experiments [run|merge|show|judge] ...``.

``main`` dispatches on its first argument: ``merge OUT.json PART ...`` joins
the run files of a sharded run into one record (``merge.py``), ``show FILE``
hands over to the viewer (``viewer.py``, imported only then), ``judge FILE``
judges a reader's own scheme by chapter 9's protocol (``judge.py``), and anything
else runs an experiment (``run`` may be said or left out). A run is a preset
(``--preset NAME``) or a TOML file (``--config FILE``), with fields changed by
``--set KEY=VALUE`` (``config.py``), all checked before anything trains. It
keeps each finished unit in ``PATH.partial`` while it runs; ``--resume``
continues a stopped run from there, and ``--keep-old-code`` lets it reuse
units that other code recorded. ``--jobs N`` computes N units at once
(``pool.py``); ``--shard K/N`` runs every N-th unit from the K-th and keeps
them in ``PATH.K-of-N.partial`` for ``merge``.

Every problem with the experiment, the arguments' values or a run file is
one line, ``python -m pe_tutorial.experiments: error: ...``, with exit status
2, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from importlib.util import find_spec
from pathlib import Path

import torch

from ..devices import device_name
from ..lm.train import resolve_device
from .configuration.arguments import jobs_argument, shard_argument
from .configuration.config import (
    PRESETS,
    ExperimentError,
    apply_setting,
    check_corpus,
    check_preset,
    preset_from_dict,
    preset_to_dict,
    read_experiment,
)
from .configuration.presets import Preset
from .records.record import ResumeError, partial_path
from .records.results import results_path
from .running.merge import MergeError, merge_parts
from .running.run import run_experiments, run_units, shard_units
from .running.runner import Runner

__all__ = ["main", "PROG"]

PROG = "python -m pe_tutorial.experiments"


def _writable_folder(path: Path) -> str | None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} cannot be written"
    return None


def _fail(prog: str, message: object) -> int:
    """Say what is wrong in one line; the exit status for it."""
    text = " ".join(str(message).split())
    print(f"{prog}: error: {text}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit status (2: a bad experiment, bad arguments,
    or a run file that cannot be resumed or merged, with one line saying why)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "merge":
            return _merge(argv[1:])
        if argv and argv[0] == "show":
            return _show(argv[1:])
        if argv and argv[0] == "judge":
            from .judging.judge import main as judge

            return judge(argv[1:])
        if argv and argv[0] == "run":
            argv = argv[1:]
        return _run(argv)
    except KeyboardInterrupt:
        print(STOPPED, file=sys.stderr)
        return 130


# Ctrl-C, said in one line (the workers are stopped: running/pool.py)
STOPPED = (
    f"{PROG}: stopped (Ctrl-C). The models finished before it are kept where the run "
    "writes them (its PATH.partial with --record or --json, a judge's folder); the "
    "same command with --resume goes on from them."
)


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train byte language models with position schemes and measure "
        "them at multiples of their training length (chapter 9). The experiment is "
        "a preset (--preset) or a TOML file (--config), with fields changed by --set; "
        "it is checked before anything trains. With --record or --json, each "
        "finished model is kept on disk at once (PATH.partial), and --resume "
        "continues a stopped run from there: it reuses the units recorded with the "
        "same settings and code, runs again those with other settings, and refuses "
        "to go on if some were recorded by other code (--keep-old-code).",
        epilog=f"Other commands: '{PROG} merge OUT.json PART ...' joins the run files "
        f"of --shard runs into one record; '{PROG} show FILE [--figures DIR] [--report "
        "DIR]' prints a record's tables (and writes its figures, or a report card); "
        f"'{PROG} judge my_pe.py' judges your own scheme as chapter 9 judges the "
        "book's. The experiment file's keys and "
        "the sweep rule: pe_tutorial/experiments/configuration/config.py, or the README.",
    )
    parser.add_argument(
        "--preset", help=f"one of {', '.join(PRESETS)} (default: quick)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="an experiment in a TOML file (a preset is one: "
        "pe_tutorial/experiments/presets/*.toml)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one field, the value read as TOML, e.g. train.learning_rate=1e-3, "
        'model.num_heads=8, \'schemes=["rope","t5"]\', corpus=PATH, '
        "sweep.train.learning_rate=[1e-3,3e-3] (repeat for several)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results into the package, where chapter 9 reads them "
        "(a preset as it ships only)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the stopped run whose finished units are in PATH.partial",
    )
    parser.add_argument(
        "--keep-old-code",
        action="store_true",
        help="with --resume, reuse finished units that other code recorded (their "
        "code version differs) instead of refusing to resume",
    )
    parser.add_argument(
        "--jobs",
        type=jobs_argument,
        default=1,
        metavar="N",
        help="compute N units at once, each in a process of its own with its share of "
        "the threads (with CUDA: the GPUs in turn)",
    )
    parser.add_argument(
        "--shard",
        type=shard_argument,
        metavar="K/N",
        help="run every N-th unit of the plan from the K-th, for N workers (a job "
        "array, several machines); each keeps its units in PATH.K-of-N.partial "
        "beside --json PATH, and merge joins them",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the experiment and list its units; train nothing, write nothing",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _experiment(args: argparse.Namespace) -> Preset:
    """The experiment the arguments describe, checked (``ExperimentError``)."""
    if args.preset is not None and args.config is not None:
        raise ExperimentError(
            "--preset and --config: give one (a preset is a file too, in "
            "pe_tutorial/experiments/presets/)"
        )
    if args.config is not None:
        data, _ = read_experiment(args.config)
    else:
        data = preset_to_dict(check_preset(args.preset or "quick"))
    for setting in args.set:
        apply_setting(data, setting)
    preset = preset_from_dict(data)
    check_corpus(preset)
    return preset


def _run(argv: list[str]) -> int:
    parser = _run_parser()
    args = parser.parse_args(argv)
    try:
        preset = _experiment(args)
    except ExperimentError as error:
        return _fail(parser.prog, error)
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        return _fail(parser.prog, error)
    if args.record and (
        args.config is not None or preset != PRESETS[args.preset or "quick"]
    ):
        return _fail(
            parser.prog,
            "--record writes the package's record of a preset as it ships; with "
            "--config or --set this is another experiment: write it with --json PATH",
        )
    if args.shard and (args.record or not args.json):
        return _fail(
            parser.prog,
            "--shard K/N keeps its units beside --json PATH (PATH.K-of-N.partial) for "
            "merge to join: give --json, not --record",
        )
    targets = [results_path(preset.name)] if args.record else []
    targets += [args.json] if args.json else []
    for target in targets:
        problem = _writable_folder(target)
        if problem:
            return _fail(parser.prog, f"cannot write {target}: {problem}")
    if args.resume and not targets:
        return _fail(
            parser.prog,
            "--resume continues a run that writes its results: add --record or --json",
        )
    if args.keep_old_code and not args.resume:
        return _fail(parser.prog, "--keep-old-code goes with --resume")
    partial = partial_path(targets[0], args.shard) if targets else None
    if args.resume and not partial.exists():
        return _fail(parser.prog, f"nothing to resume: {partial} does not exist")
    if args.record and targets[0].exists():
        # a notebook's `!` command writes into the runtime's copy of the package: on Colab
        # it is lost when the runtime ends, and it replaces what the chapters read
        print(
            f"--record {'would replace' if args.dry_run else 'replaces'} "
            f"{targets[0]}, the record the package ships (the chapters read it), when "
            "the run finishes; to keep your run beside it, and past the end of a Colab "
            "runtime, give --json PATH in a folder that lasts (a mounted Drive folder) "
            "instead of --record",
            flush=True,
        )
    if args.dry_run:
        return _dry_run(parser.prog, preset, device, args.shard)
    threads = os.environ.get("OMP_NUM_THREADS")
    print(
        f"experiment {preset.name} on {device} ({device_name(device)}), "
        f"{torch.get_num_threads()} threads"
        + (f" (OMP_NUM_THREADS={threads})" if threads else "")
        + (f", {args.jobs} jobs" if args.jobs > 1 else ""),
        flush=True,
    )
    if partial is not None:
        print(f"finished units are kept in {partial}", flush=True)
    options = dict(
        device=device,
        progress=not args.no_progress,
        log=lambda message: print(message, flush=True),
        partial=partial,
        resume=args.resume,
        keep_old_code=args.keep_old_code,
        jobs=args.jobs,
        command=f"{PROG} {shlex.join(argv)}".strip(),
    )
    try:
        if args.shard:
            done = run_units(preset, shard=args.shard, **options)
        else:
            results = run_experiments(preset, **options)
    except ResumeError as error:  # a damaged file, or units of other code
        return _fail(parser.prog, error)
    except ValueError as error:  # a corpus too small for the experiment
        return _fail(parser.prog, error)
    if args.shard:
        k, n = args.shard
        parts = " ".join(str(partial_path(args.json, (i, n))) for i in range(1, n + 1))
        print(
            f"shard {k}/{n}: {len(done.units)} of {len(done.plan)} units, kept in "
            f"{partial}\nwhen every shard is done: {PROG} merge {args.json} {parts}"
        )
        return 0
    text = json.dumps(results, indent=1) + "\n"
    for target in targets:
        target.write_text(text)
        print(f"wrote {target}")
    if partial is not None:
        partial.unlink(missing_ok=True)
    print(f"done: {results['metadata']['wall_seconds']:.0f} s of training and scoring")
    return 0


def _dry_run(
    prog: str, preset: Preset, device: torch.device, shard: tuple[int, int] | None
) -> int:
    """List the units the experiment would run (of the shard); write nothing."""
    try:
        plan = Runner(preset, device, progress=False).plan()
    except ValueError as error:
        return _fail(prog, error)
    units = shard_units(plan, shard)
    what = "" if shard is None else " (shard {}/{} of {})".format(*shard, len(plan))
    print(
        f"experiment {preset.name}: {len(units)} units{what}, "
        f"{sum(u.steps for u in units):,} training steps"
    )
    for unit in units:
        print(f"  {unit.key}  ({unit.kind.name}, {unit.steps} steps)")
    return 0


def _merge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} merge",
        description="Join the run files of a run spread with --shard K/N into one "
        "record, as one process would have written it. Refuses parts of other "
        "experiments, units whose fingerprints disagree, and names the units no "
        "part holds.",
    )
    parser.add_argument("out", type=Path, help="the record to write (JSON)")
    parser.add_argument(
        "parts", type=Path, nargs="+", help="the shards' run files, PATH.K-of-N.partial"
    )
    args = parser.parse_args(argv)
    problem = _writable_folder(args.out)
    if problem:
        return _fail(parser.prog, f"cannot write {args.out}: {problem}")
    if any(part.resolve() == args.out.resolve() for part in args.parts):
        return _fail(parser.prog, f"{args.out} is one of the parts; write elsewhere")
    try:
        results = merge_parts(args.parts, command=f"{PROG} merge {shlex.join(argv)}")
    except MergeError as error:
        return _fail(parser.prog, error)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    units = sum(len(e["runs"]) for e in results["language_model"])
    print(
        f"wrote {args.out}: {len(args.parts)} parts, {units} language models, "
        f"{results['metadata']['wall_seconds']:.0f} s of training and scoring"
    )
    return 0


def _show(argv: list[str]) -> int:
    if find_spec(f"{__package__}.viewing.viewer") is None:
        return _fail(
            f"{PROG} show",
            "the viewer is not installed (pe_tutorial/experiments/viewing/viewer.py is "
            "missing from this copy of the package)",
        )
    from .viewing import viewer

    return viewer.main(argv)
