"""The command line: ``python -m pe_tutorial.experiments --preset NAME ...``.

``main`` parses the arguments, checks where the results go, and runs the
preset (``run.run_experiments``), keeping each finished unit in
``PATH.partial`` while it runs; ``--resume`` continues a stopped run from
there, and ``--keep-old-code`` lets it reuse units that other code recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from ..devices import device_name
from ..lm.train import resolve_device
from .presets import PRESETS, check_preset
from .record import ResumeError, partial_path
from .results import results_path
from .run import run_experiments

__all__ = ["main"]


def _writable_folder(path: Path) -> str | None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} cannot be written"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit status (2: bad arguments, or a run file that
    cannot be resumed, with one line saying why and what to do)."""
    parser = argparse.ArgumentParser(
        prog="python -m pe_tutorial.experiments",
        description="Train byte language models with every position scheme and "
        "measure them at 1x to 8x their training length (chapter 9). With --record "
        "or --json, each finished model is kept on disk at once (PATH.partial), and "
        "--resume continues a stopped run from there: it reuses the units recorded "
        "with the same settings and code, runs again those with other settings, and "
        "refuses to go on if some were recorded by other code (--keep-old-code).",
    )
    parser.add_argument("--preset", default="quick", help=f"one of {tuple(PRESETS)}")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results into the package, where chapter 9 reads them",
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    try:
        preset = check_preset(args.preset)
        device = resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    targets = [results_path(preset.name)] if args.record else []
    targets += [args.json] if args.json else []
    for target in targets:
        problem = _writable_folder(target)
        if problem:
            parser.error(f"cannot write {target}: {problem}")
    if args.resume and not targets:
        parser.error(
            "--resume continues a run that writes its results: add --record or --json"
        )
    if args.keep_old_code and not args.resume:
        parser.error("--keep-old-code goes with --resume")
    partial = partial_path(targets[0]) if targets else None
    if args.resume and not partial.exists():
        parser.error(f"nothing to resume: {partial} does not exist")
    threads = os.environ.get("OMP_NUM_THREADS")
    print(
        f"preset {preset.name} on {device} ({device_name(device)}), "
        f"{torch.get_num_threads()} threads"
        + (f" (OMP_NUM_THREADS={threads})" if threads else ""),
        flush=True,
    )
    if partial is not None:
        print(f"finished units are kept in {partial}", flush=True)
    try:
        results = run_experiments(
            preset,
            device=device,
            progress=not args.no_progress,
            log=lambda message: print(message, flush=True),
            partial=partial,
            resume=args.resume,
            keep_old_code=args.keep_old_code,
        )
    except ResumeError as error:  # a damaged file, or units of other code
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # a corpus too small for the preset
        parser.error(str(error))
    text = json.dumps(results, indent=1) + "\n"
    for target in targets:
        target.write_text(text)
        print(f"wrote {target}")
    if partial is not None:
        partial.unlink(missing_ok=True)
    print(f"done: {results['metadata']['wall_seconds']:.0f} s of training and scoring")
    return 0
