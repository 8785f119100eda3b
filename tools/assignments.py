"""Build, check and grade the course assignments with Otter-Grader (issue 11).

Each master notebook ``book/assignments/NAME.ipynb`` is in Otter Assign's
format: questions, reference solutions, public tests (``pe_tutorial.checks``,
which name the usual mistake) and hidden tests. From the repository root::

    python tools/assignments.py build [--out _build/assignments] [--fast] [NAME ...]
    python tools/assignments.py grade NAME SUBMISSIONS [--out grades.csv]
    python tools/assignments.py check-colab [--built _build/assignments] [NAME ...]

``build`` runs ``otter assign`` on every master (or the NAMEs given) and writes

- ``OUT/NAME/student/NAME.ipynb``: the notebook to hand out, without the
  solutions or the hidden tests;
- ``OUT/NAME/autograder/``: the solutions notebook and
  ``NAME-autograder_*.zip``, which grades a submission.

It then checks each student notebook: no line of a solution, no hidden test,
no MyST syntax (Colab shows it raw). Unless ``--fast``, Otter grades the
solutions notebook with every test and stops if one fails.

``grade`` grades every ``.ipynb`` or ``.zip`` (what ``grader.export()``
writes) in SUBMISSIONS with that autograder, locally (no Docker: each
submission runs in a kernel of this Python, in a process of its own with a
time limit), and appends to a grade table as each one finishes: one row per
submission with its status (graded, failed, timed out), points per question
and the reason when it was not graded. A feedback file per student holds the
checks' diagnoses. A run that stops continues where it stopped.

``check-colab`` runs each built student and solutions notebook as on a fresh
Colab runtime (``tools/fresh_runtime.py``): a new environment holding only
Colab's preinstalled packages (no otter-grader, no pe_tutorial), the install
cell pointed at the build's wheel, the notebook's file absent from the
kernel's working directory, an empty folder, and a kernel whose shell is a
``google.colab._shell.Shell``, so that ``google.colab`` imports and Otter takes
it for Colab. No cell may raise, every ``grader.check`` of the solutions must
pass, and the last cell must say how to hand in on Colab.

This file is the command; the work is in ``assignment_build.py`` (assigning and
pinning), ``assignment_grading.py`` (grading a folder) and
``assignment_checks.py`` (the autograder zips alone, the notebooks on a fresh
Colab runtime).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from assignment_build import (  # noqa: F401  (the command's pieces, also for the tests)
    MASTERS,
    ROOT,
    autograder_zip,
    build,
    masters,
    refresh_package_tests,
    student_problems,
    student_tests,
    test_files,
)
from assignment_checks import (  # noqa: F401
    check_autograders,
    check_colab,
    colab_problems,
    zip_environment,
)
from assignment_grading import GRADE_TIMEOUT, grade, grade_one  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser(
        "build", help="otter assign every master, then check"
    )
    build_parser.add_argument(
        "names", nargs="*", help="masters to build (default: all)"
    )
    build_parser.add_argument(
        "--out", type=Path, default=ROOT / "_build" / "assignments"
    )
    build_parser.add_argument(
        "--fast",
        action="store_true",
        help="skip grading the solutions (otter's run_tests)",
    )
    build_parser.add_argument(
        "--keep-package",
        action="store_true",
        help="leave the package's copy of the public tests as it is",
    )
    grade_parser = commands.add_parser("grade", help="grade a folder of submissions")
    grade_parser.add_argument("name", help="the assignment, e.g. rope")
    grade_parser.add_argument(
        "submissions", type=Path, help="folder of .ipynb or .zip files"
    )
    grade_parser.add_argument(
        "--built", type=Path, default=ROOT / "_build" / "assignments"
    )
    grade_parser.add_argument(
        "--out", type=Path, default=None, help="CSV (default: SUBMISSIONS/grades.csv)"
    )
    zips_parser = commands.add_parser(
        "check-autograders",
        help="grade each solutions notebook with its zip alone, in a clean venv",
    )
    zips_parser.add_argument(
        "--built", type=Path, default=ROOT / "_build" / "assignments"
    )
    zips_parser.add_argument(
        "--venv", type=Path, default=ROOT / "_build" / "autograder-venv"
    )
    zips_parser.add_argument(
        "--jobs", type=int, default=1, help="gradings at once (default 1)"
    )
    colab_parser = commands.add_parser(
        "check-colab",
        help="run each student and solutions notebook as on Colab (its file absent)",
    )
    colab_parser.add_argument(
        "names", nargs="*", help="assignments to check (default: all built)"
    )
    colab_parser.add_argument(
        "--built", type=Path, default=ROOT / "_build" / "assignments"
    )
    one_parser = commands.add_parser("grade-one", help=argparse.SUPPRESS)
    one_parser.add_argument("submission", type=Path)
    one_parser.add_argument("autograder", type=Path)
    grade_parser.add_argument(
        "--timeout",
        type=float,
        default=GRADE_TIMEOUT,
        help=f"seconds for one submission (default {GRADE_TIMEOUT})",
    )
    args = parser.parse_args(argv)
    if args.command == "grade-one":  # a child of grade_isolated: JSON on stdout
        print(json.dumps(grade_one(args.submission, args.autograder)))
        return
    if args.command == "check-autograders":
        problems = check_autograders(args.built, args.venv, args.jobs)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        if problems:
            raise SystemExit(1)
        return
    if args.command == "check-colab":
        names = args.names or sorted(
            p.name for p in args.built.iterdir() if (p / "student").is_dir()
        )
        problems = []
        wheel = next((args.built / "wheels").glob("pe_tutorial-*.whl"))
        for name in names:
            found = check_colab(args.built / name, wheel)
            print(f"{name}: {'ok' if not found else 'FAILED'} on Colab")
            problems += found
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        if problems:
            raise SystemExit(1)
        return
    if args.command == "build":
        refresh = not args.keep_package
        build(args.names, args.out, run_tests=not args.fast, refresh_package=refresh)
    else:
        masters([args.name])
        grade(
            args.built / args.name,
            args.submissions,
            args.out or args.submissions / "grades.csv",
            timeout=args.timeout,
        )


if __name__ == "__main__":
    main()
