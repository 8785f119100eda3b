"""The command line: ``python -m pe_tutorial.benchmarks SUITE [options]`` or ``--all``.

Prints the suite's table (with its notes and, for ``rope`` and
``attention_bias``, the target ratios); ``--json PATH`` also writes the rows
and the environment; ``--record`` writes the recorded copy for this device
(``bench-<suite>--<device>.json``, in the package or ``--out DIR``), which the
chapters show beside their live runs. ``--all`` runs every suite in turn, with
a progress bar and the time each took (several names run those, in the order
given: the GPU command records chapter 10's first): ``--all --record`` adds a device to the
book in one step; a suite that fails there is reported and the others still
run (the exit status is then 1). ``--smoke`` runs each suite at tiny sizes for
one round (``Suite.smoke``): a check that every suite runs, not a measurement;
``--smoke-compiled`` keeps the compiled rows its sizes leave out, and with
``--processes`` smoke runs are merged too (the dry run of tools/gpu_evidence.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from tqdm import tqdm

from . import _core

# a recorded run times this many times the suite's rounds, then more while a
# row is noisy, up to RECORD_SECONDS a suite
RECORD_ROUNDS = 3
RECORD_SECONDS = 60.0


def _parser() -> argparse.ArgumentParser:
    suites = "\n".join(
        f"  {name:<22} chapter {s.chapter}: {s.description}"
        for name, s in sorted(_core.SUITES.items(), key=lambda kv: int(kv[1].chapter))
    )
    parser = argparse.ArgumentParser(
        prog="python -m pe_tutorial.benchmarks",
        description="Run a timing suite and print what it measured.",
        epilog="suites:\n" + suites,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "suite",
        nargs="*",
        help="which suite (listed below); several run one after the other, in order",
    )
    parser.add_argument(
        "--all", action="store_true", help="run every suite, one after the other"
    )
    parser.add_argument(
        "--device", default=None, help="cpu or cuda (default: cuda when present)"
    )
    parser.add_argument(
        "--dtype",
        default=None,
        help=f"one of {', '.join(_core.DTYPES)} (default: the suite's for the device)",
    )
    parser.add_argument("--json", default=None, metavar="PATH", help="also write JSON")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the package's recorded copy (pe_tutorial/results)",
    )
    parser.add_argument(
        "--out", default=None, help="folder for --record instead of the package's"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --record, keep a run even when the machine was busy",
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, one round: checks that each suite runs, measures nothing "
        "(with --record it needs --out)",
    )
    parser.add_argument(
        "--smoke-compiled",
        action="store_true",
        help="with --smoke, keep the compiled rows its tiny sizes leave out "
        "(torch.compile: seconds each on a CPU)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="with --record: run each suite in this many separate processes, one "
        "after the other, and record them merged (the table shows their spread)",
    )
    parser.add_argument(
        "--beside",
        default=None,
        metavar="TEXT",
        help="with --record: what else ran on the machine while it recorded, kept "
        "in the record's environment ('nothing' for a quiet machine)",
    )
    parser.add_argument(
        "--calls-per-sample", type=int, default=1, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="go on timing rounds while a row is noisy, up to this many seconds a "
        f"suite (default with --record: {RECORD_SECONDS:.0f})",
    )
    return parser


def _writable(folder: Path) -> str | None:
    """Why ``folder`` cannot take a file (None if it can); it is made if missing."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot make the folder {folder} ({error.strerror})"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} cannot be written"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.all == bool(args.suite):
        parser.error("name one suite, or give --all for every suite")
    if len(set(args.suite)) < len(args.suite):
        repeated = sorted({n for n in args.suite if args.suite.count(n) > 1})
        parser.error(f"a suite named twice: {', '.join(repeated)}")
    # several suites run as --all does: a bar, and one failure costs one suite
    many = args.all or len(args.suite) > 1
    if many and args.json:
        parser.error(
            "--json writes one suite; with --all or several use --record --out DIR"
        )
    names = sorted(_core.SUITES) if args.all else args.suite
    try:
        suites = [_core.check_suite(name) for name in names]
        device = _core.check_device(args.device)
        if many and args.dtype is not None and args.dtype not in _core.DTYPES:
            raise ValueError(
                f"unknown dtype {args.dtype!r}; use one of {', '.join(_core.DTYPES)}"
            )
        if not many:  # with several, a suite without that dtype runs in its own
            _core.check_dtype(suites[0], args.dtype, device)
        if args.repeats is not None and args.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
        if args.max_seconds is not None and not args.max_seconds > 0:
            raise ValueError(f"--max-seconds must be positive, got {args.max_seconds}")
        if args.processes < 1:
            raise ValueError(f"--processes must be at least 1, got {args.processes}")
        if args.processes > 1 and not args.record:
            raise ValueError("--processes N merges a recording: give it with --record")
        if args.beside is not None and not args.record:
            raise ValueError("--beside says what ran beside a recording: give --record")
        if args.smoke_compiled and not args.smoke:
            raise ValueError("--smoke-compiled goes with --smoke")
        if args.smoke and args.record and not args.out:
            raise ValueError(
                "--smoke records only into --out DIR: its tiny sizes are not a "
                "measurement, and never go into the package"
            )
    except ValueError as error:
        parser.error(str(error))
    targets = [Path(args.json).parent] if args.json else []
    if args.record:
        targets.append(Path(args.out) if args.out else _core.results_dir())
    for folder in targets:
        problem = _writable(folder)
        if problem:
            parser.error(problem)
    max_seconds = args.max_seconds
    if max_seconds is None and args.record:
        max_seconds = RECORD_SECONDS
    bar = tqdm(suites, desc="suites", unit="suite", disable=not many, file=sys.stderr)
    failed = []
    for suite in bar:
        bar.set_postfix(suite=suite.name)
        start = time.perf_counter()
        try:
            result = _run_suite(suite, device, args, max_seconds)
        except Exception as error:
            if not many:
                raise
            # one suite's failure (a path that breaks on a new GPU, say) costs
            # that suite's file, not the others'
            traceback.print_exc()
            failed.append(suite.name)
            print(f"FAILED: {suite.name}: {type(error).__name__}: {error}")
        else:
            if args.beside is not None:
                result.environment["ran_beside"] = args.beside
            _report(result, args)
        if many:
            print(f"{suite.name}: {time.perf_counter() - start:.0f} s\n", flush=True)
    if failed:
        print(f"suites that failed ({len(failed)}): {', '.join(failed)}")
        return 1
    return 0


def _run_suite(suite, device, args, max_seconds: float | None):
    """One suite's run as the command line asks: recorded, smoke or plain."""
    many = args.all or len(args.suite) > 1
    dtype = args.dtype if args.dtype in suite.dtypes or not many else None
    if args.smoke and args.processes > 1:  # the merging checked, nothing measured
        return _in_processes(suite, device, dtype, args.repeats or 1, None, args)
    if args.smoke:
        options = dict(suite.smoke)
        if args.smoke_compiled:  # the builder's default: its compiled rows
            options.pop("compiled", None)
        result = _core.run(
            suite.name,
            device,
            dtype,
            warmup=0,
            repeats=args.repeats or 1,
            probes=False,
            **options,
        )
        result.command += (
            " --smoke --smoke-compiled" if args.smoke_compiled else " --smoke"
        )
        result.settings["smoke"] = True
        result.notes.insert(
            0,
            "smoke run (--smoke): tiny sizes, one round; it checks that the suite "
            "runs, and measures nothing",
        )
        return result
    repeats = args.repeats
    if repeats is None and args.record:
        repeats = RECORD_ROUNDS * suite.default_repeats(device)
    if args.processes > 1:
        return _in_processes(suite, device, dtype, repeats, max_seconds, args)
    return _core.run(
        suite.name,
        device,
        dtype,
        repeats=repeats,
        max_seconds=max_seconds,
        calls_per_sample=args.calls_per_sample,
    )


def _in_processes(suite, device, dtype, repeats, max_seconds, args):
    """The suite run in ``args.processes`` separate processes, merged.

    Each process writes its result as JSON; a process that ended with
    shorter samples than another (``calls_per_sample``) runs again from the
    largest count, so that all are sampled alike (``_core.merge_runs``).
    """
    import subprocess
    import tempfile

    def run_process(i: int, calls: int):
        path = Path(folder) / f"run-{i}.json"
        command = [
            sys.executable,
            "-m",
            "pe_tutorial.benchmarks",
            suite.name,
            "--device",
            str(device),
            "--json",
            str(path),
            "--repeats",
            str(repeats),
            "--calls-per-sample",
            str(calls),
        ]
        if dtype is not None:
            command += ["--dtype", str(dtype)]
        if max_seconds is not None:
            command += ["--max-seconds", str(max_seconds)]
        if args.smoke:
            command += ["--smoke"] + (
                ["--smoke-compiled"] if args.smoke_compiled else []
            )
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        return _core.SuiteResult.from_dict(json.loads(path.read_text()))

    with tempfile.TemporaryDirectory() as folder:
        runs = _core.sample_alike(
            args.processes, run_process, lambda run: run.timings[0].calls_per_sample
        )
    merged = _core.merge_runs(runs)
    merged.command += f" --processes {args.processes}"
    return merged


def _report(result, args) -> None:
    """Print the table; write the JSON and the record as asked (a busy run refused)."""
    print(result.table())
    if args.json:
        path = Path(args.json)
        _core.write_atomically(path, json.dumps(result.to_dict(), indent=1) + "\n")
        print(f"wrote {path}")
    if args.record and result.busy and not args.force:
        print(
            f"NOT recorded: this machine was busy ({result.busy}); record on a "
            "quiet machine, or add --force to keep it anyway"
        )
    elif args.record:
        print(f"recorded in {_core.record(result, args.out)}")


if __name__ == "__main__":
    sys.exit(main())
