"""Build, check and grade the course assignments with Otter-Grader (issue 11).

Each master notebook ``book/assignments/NAME.ipynb`` is in Otter Assign's
format: questions, reference solutions, public tests (``pe_tutorial.checks``,
which name the usual mistake) and hidden tests. From the repository root::

    python tools/assignments.py build [--out _build/assignments] [--fast] [NAME ...]
    python tools/assignments.py grade NAME SUBMISSIONS [--out grades.csv]

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
submission runs in a kernel of this Python), and writes a grade table, one
row per submission and one column per question.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from colab_edition import cell_source, myst_left

ROOT = Path(__file__).resolve().parent.parent
MASTERS = ROOT / "book" / "assignments"


def masters(names: list[str] | None = None) -> list[Path]:
    """The master notebooks, all of them or those named."""
    found = {p.stem: p for p in sorted(MASTERS.glob("*.ipynb"))}
    if not names:
        return list(found.values())
    unknown = sorted(set(names) - set(found))
    if unknown:
        raise SystemExit(f"no master notebook for {unknown}; there are {sorted(found)}")
    return [found[n] for n in names]


def assign(master: Path, out: Path, *, run_tests: bool = True) -> Path:
    """Run ``otter assign`` on ``master`` into ``out/NAME``; return that folder."""
    result = out / master.stem
    shutil.rmtree(result, ignore_errors=True)
    command = [sys.executable, "-m", "otter", "assign", str(master), str(result)]
    if not run_tests:
        command.insert(4, "--no-run-tests")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"otter assign failed on {master.name}:\n{done.stdout}\n{done.stderr}"
        )
    return result


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def solution_lines(master: Path) -> list[str]:
    """The lines of code between ``# BEGIN SOLUTION`` and ``# END SOLUTION``."""
    lines, inside = [], False
    for cell in _cells(master):
        if cell["cell_type"] != "code":
            continue
        for line in cell_source(cell).splitlines():
            marker = line.strip()
            if marker == "# BEGIN SOLUTION":
                inside = True
            elif marker == "# END SOLUTION":
                inside = False
            elif inside and marker and not marker.startswith("#"):
                lines.append(marker)
    return lines


def hidden_test_names(master: Path) -> list[str]:
    """The function names of the hidden test cells (first line ``# HIDDEN``)."""
    names = []
    for cell in _cells(master):
        source = cell_source(cell)
        if cell["cell_type"] == "code" and source.lstrip().startswith("# HIDDEN"):
            names += re.findall(r"^def (\w+)\(", source, re.M)
    return names


def student_problems(master: Path, student: Path) -> list[str]:
    """What is wrong with a student notebook: solutions, hidden tests or MyST left in."""
    text = student.read_text()
    solutions = solution_lines(master)
    problems = [
        f"solution line left in: {line!r}"
        for line in solutions
        # short fragments ("exact", "return out") may also be in the prompt or a stub
        if len(line) >= 12 and line in text
    ]
    problems += [
        f"hidden test left in: {name}"
        for name in hidden_test_names(master)
        if name in text
    ]
    problems += [
        f"MyST syntax Colab would show raw: {found!r}"
        for found in myst_left(json.loads(text))
    ]
    if not solutions:
        problems.append(f"{master.name} has no solution code: is the format right?")
    return problems


def build(names: list[str] | None, out: Path, *, run_tests: bool = True) -> list[Path]:
    """Assign every master and check its student notebook; return the result folders."""
    results = []
    for master in masters(names):
        result = assign(master, out, run_tests=run_tests)
        student = result / "student" / master.name
        problems = student_problems(master, student)
        if problems:
            raise RuntimeError(f"{student}:\n  " + "\n  ".join(problems))
        results.append(result)
        print(
            f"{master.stem}: {student.relative_to(out)} and {result.name}/autograder/"
        )
    return results


def autograder_zip(result: Path) -> Path:
    zips = sorted((result / "autograder").glob("*-autograder_*.zip"))
    if not zips:
        raise SystemExit(
            f"no autograder zip in {result / 'autograder'}: run build first"
        )
    return zips[-1]


def test_files(result: Path) -> dict[str, str]:
    """``{question: source}`` of the autograder's test files (public and hidden)."""
    with zipfile.ZipFile(autograder_zip(result)) as archive:
        return {
            Path(name).stem: archive.read(name).decode()
            for name in archive.namelist()
            if name.startswith("tests/") and name.endswith(".py")
        }


def grade(result: Path, submissions: Path, table: Path) -> list[dict]:
    """Grade every submission in ``submissions`` with the autograder in ``result``."""
    from otter.api import grade_submission

    files = sorted(
        p
        for p in submissions.iterdir()
        if p.suffix in (".ipynb", ".zip") and p.is_file()
    )
    if not files:
        raise SystemExit(f"no .ipynb or .zip submissions in {submissions}")
    rows = []
    for path in files:
        scores = grade_submission(str(path), str(autograder_zip(result)), quiet=True)
        row = {"submission": path.name}
        for name in sorted(scores.results):
            row[name] = scores.get_score(name)
        row["total"], row["possible"] = scores.total, scores.possible
        rows.append(row)
        print(f"{path.name}: {scores.total:g} / {scores.possible:g}")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    table.parent.mkdir(parents=True, exist_ok=True)
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(f"grade table: {table}")
    return rows


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
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.names, args.out, run_tests=not args.fast)
    else:
        masters([args.name])
        grade(
            args.built / args.name,
            args.submissions,
            args.out or args.submissions / "grades.csv",
        )


if __name__ == "__main__":
    main()
