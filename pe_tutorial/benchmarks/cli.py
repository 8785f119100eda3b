"""The command line: ``python -m pe_tutorial.benchmarks SUITE [options]``.

Prints the suite's table (with its notes and, for ``rope`` and
``attention_bias``, the target ratios); ``--json PATH`` also writes the rows
and the environment; ``--record`` writes the package's recorded copy, which
the chapters show beside their live runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import _core


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
    parser.add_argument("suite", help="which suite (listed below)")
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
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        suite = _core.check_suite(args.suite)
        device = _core.check_device(args.device)
        _core.check_dtype(suite, args.dtype, device)
        if args.repeats is not None and args.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    except ValueError as error:
        parser.error(str(error))
    result = _core.run(args.suite, device, args.dtype, repeats=args.repeats)
    print(result.table())
    if args.json:
        path = Path(args.json)
        path.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
        print(f"wrote {path}")
    if args.record:
        print(f"recorded in {_core.record(result, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
