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
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import install_cell
from colab_edition import current_commit, myst_left
from fresh_runtime import run_as_on_colab
from install_cell import PACKAGE_LINE, cell_source

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


# What an autograder installs, pinned to the versions the solutions were graded with here
# (otter-grader's own line is added by otter assign). The package itself goes in as a
# wheel inside the zip: no release of it is published.
GRADER_PACKAGES = ("torch", "numpy", "matplotlib", "sympy", "tqdm")
AUTOGRADER_SOURCE = "/autograder/source"  # where Gradescope and `otter grade` unpack it


def package_wheel(out: Path) -> Path:
    """Build this checkout's wheel into ``out/wheels`` (once per build); return it."""
    folder = out / "wheels"
    shutil.rmtree(folder, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        str(folder),
    ]
    # setuptools builds in the checkout's build/ folder: two builds at once (the
    # test workers) collide there, so one waits for the other
    lock = ROOT / "_build" / ".wheel.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        subprocess.run([*command, str(ROOT)], check=True, capture_output=True)
    return next(folder.glob("pe_tutorial-*.whl"))


def grader_requirements(wheel: Path) -> str:
    """requirements.txt of an autograder: pinned packages and the package's wheel."""
    from importlib.metadata import version

    lines = [f"{name}=={version(name).split('+')[0]}" for name in GRADER_PACKAGES]
    lines.append(
        f"{AUTOGRADER_SOURCE}/files/wheels/{wheel.name}"
    )  # files/: otter puts it there
    return "\n".join(lines) + "\n"


def assign(
    master: Path, out: Path, *, run_tests: bool = True, wheel: Path | None = None
) -> Path:
    """Run ``otter assign`` on ``master`` into ``out/NAME``; return that folder.

    The master is assigned from a staging folder that holds it with a
    generated requirements.txt and the package's ``wheel`` (built when not
    given), which its config puts in the autograder zip: the zip then grades
    without the repository and without a published release.
    """
    result = out / master.stem
    shutil.rmtree(result, ignore_errors=True)
    wheel = wheel or package_wheel(out)
    stage = out / "staging" / master.stem
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "wheels").mkdir(parents=True)
    shutil.copy(master, stage / master.name)
    shutil.copy(wheel, stage / "wheels" / wheel.name)
    (stage / "requirements.txt").write_text(grader_requirements(wheel))
    command = [
        sys.executable,
        "-m",
        "otter",
        "assign",
        str(stage / master.name),
        str(result),
    ]
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
    """What is wrong with a student notebook: solutions, hidden tests or MyST left in.

    The public test files beside it (``tests/*.py``) count as handed out too.
    """
    notebook = student.read_text()
    tests = sorted((student.parent / "tests").glob("*.py"))
    text = notebook + "".join(path.read_text() for path in tests)
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
        for found in myst_left(json.loads(notebook))
    ]
    if not solutions:
        problems.append(f"{master.name} has no solution code: is the format right?")
    return problems


def student_tests(result: Path) -> dict[str, str]:
    """``{question: source}`` of the public test files ``otter assign`` wrote for students."""
    folder = result / "student" / "tests"
    return {path.stem: path.read_text() for path in sorted(folder.glob("*.py"))}


def refresh_package_tests(results: list[Path]) -> Path:
    """Write every assignment's public tests into the package (``pe_tutorial.course``)."""
    path = ROOT / "pe_tutorial" / "course" / "assignment_tests.json"
    tests = {result.name: student_tests(result) for result in sorted(results)}
    path.write_text(json.dumps(tests, indent=1, sort_keys=True) + "\n")
    return path


def pin_install(notebook_path: Path, ref: str) -> None:
    """Point a built notebook's install cell at this repository's commit ``ref``.

    The master's cell installs the checkout it sits in, else the repository's
    default branch; no release of the package is published, so a notebook handed
    out alone (an LMS, a drive, Colab), student or solutions, installs the commit
    it was built from instead, and otter-grader as the master asks.
    """
    notebook = json.loads(notebook_path.read_text())
    package = install_cell.repository_package(ref)
    for cell in notebook["cells"]:
        source = cell_source(cell)
        if cell["cell_type"] == "code" and PACKAGE_LINE.search(source):
            cell["source"] = install_cell.edition(source, package)
    notebook_path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def build(
    names: list[str] | None,
    out: Path,
    *,
    run_tests: bool = True,
    refresh_package: bool = False,
) -> list[Path]:
    """Assign every master and check its student notebook; return the result folders.

    With ``refresh_package`` (``make assignments``, all masters), the public
    tests are also written into the package, where student notebooks opened
    alone read them.
    """
    results = []
    wheel = package_wheel(out)
    for master in masters(names):
        result = assign(master, out, run_tests=run_tests, wheel=wheel)
        student = result / "student" / master.name
        problems = student_problems(master, student)
        if problems:
            raise RuntimeError(f"{student}:\n  " + "\n  ".join(problems))
        for built in (student, result / "autograder" / master.name):
            pin_install(built, current_commit())
        results.append(result)
        print(
            f"{master.stem}: {student.relative_to(out)} and {result.name}/autograder/"
        )
    if refresh_package and not names:
        print(f"public tests for the package: {refresh_package_tests(results)}")
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


GRADE_TIMEOUT = 300  # seconds for one submission, its kernel included


def grade_one(submission: Path, autograder: Path) -> dict:
    """Grade one submission with Otter, in this process: scores and feedback, as JSON-ready data.

    ``{"scores": {question: points}, "total", "possible", "feedback": {question:
    [message, ...]}}``; the feedback of a failed public test is its message (the
    check's diagnosis), a failed hidden test is only counted.
    """
    from otter.api import grade_submission

    results = grade_submission(str(submission), str(autograder), quiet=True)
    scores, feedback = {}, {}
    for name in sorted(results.results):
        scores[name] = results.get_score(name)
        failed = [r for r in results.results[name].test_case_results if not r.passed]
        messages = [
            (r.message or "failed").strip() for r in failed if not r.test_case.hidden
        ]
        hidden = sum(1 for r in failed if r.test_case.hidden)
        if hidden:
            messages.append(f"{hidden} hidden test(s) failed")
        if messages:
            feedback[name] = messages
    return {
        "scores": scores,
        "total": results.total,
        "possible": results.possible,
        "feedback": feedback,
    }


def diagnosis(message: str) -> str:
    """The line of an Otter failure message that says what went wrong (the check's diagnosis)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^\w*(Error|Exception)\b.*:", line)]
    if not errors:
        return lines[-1] if lines else "failed"
    return re.sub(r"^AssertionError:\s*", "", errors[-1])


def _problem_of(error: str) -> str:
    """A short reason for a grading that raised, from the last line of its error."""
    last = error.strip().splitlines()[-1] if error.strip() else "unknown error"
    if "NotJSONError" in error or "not valid JSON" in last or "BadZipFile" in error:
        return "not a notebook"
    return f"error: {last[:200]}"


def grade_isolated(submission: Path, autograder: Path, timeout: float) -> dict:
    """``grade_one`` in a child process of its own, stopped after ``timeout`` seconds.

    Returns ``grade_one``'s data with ``status`` "graded", or ``{"status": ...,
    "reason": ...}`` for a submission that is not a notebook, raised, or ran
    out of time (its whole process group, kernel included, is killed).
    """
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "grade-one",
        str(submission),
        str(autograder),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"status": "timed out", "reason": f"timed out after {timeout:g} s"}
    if process.returncode != 0:
        return {"status": "failed", "reason": _problem_of(err)}
    data = json.loads(out.strip().splitlines()[-1])
    return {"status": "graded", "reason": "", **data}


def _graded_already(table: Path) -> dict[str, dict]:
    if not table.is_file():
        return {}
    with table.open(newline="") as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


def grade(
    result: Path, submissions: Path, table: Path, *, timeout: float = GRADE_TIMEOUT
) -> list[dict]:
    """Grade every submission in ``submissions`` with the autograder in ``result``.

    Each submission is graded in a process of its own with a time limit, so a
    corrupt notebook, an error or an endless loop costs only its own row:
    ``status`` is graded, failed or timed out, and ``reason`` says why. Rows are
    appended to ``table`` as they finish, and submissions already in it are
    skipped, so an interrupted run continues where it stopped (delete the table
    to grade again). Each graded submission with a failed question gets
    ``feedback/NAME.txt`` beside the table: the check's diagnosis per question.
    """
    files = sorted(
        p
        for p in submissions.iterdir()
        if p.suffix in (".ipynb", ".zip") and p.is_file()
    )
    if not files:
        raise SystemExit(f"no .ipynb or .zip submissions in {submissions}")
    autograder = autograder_zip(result)
    questions = sorted(test_files(result))
    columns = ["submission", "status", *questions, "total", "possible", "reason"]
    done = _graded_already(table)
    if done and list(next(iter(done.values()))) != columns:
        raise SystemExit(
            f"{table} has other columns than this assignment's; delete it or name "
            "another with --out"
        )
    table.parent.mkdir(parents=True, exist_ok=True)
    feedback_folder = table.parent / "feedback"
    new_table = not table.is_file()
    rows = list(done.values())
    with table.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        if new_table:
            writer.writeheader()
        for path in files:
            if path.name in done:
                print(f"{path.name}: already in {table.name}, skipped")
                continue
            graded = grade_isolated(path, autograder, timeout)
            row = {"submission": path.name, "status": graded["status"]}
            row["reason"] = graded["reason"]
            if graded["status"] == "graded":
                # the first diagnosis of each question lost, cut to a line
                row["reason"] = "; ".join(
                    f"{question}: {diagnosis(messages[0])[:160]}"
                    for question, messages in graded["feedback"].items()
                )
                row.update(graded["scores"])
                row["total"], row["possible"] = graded["total"], graded["possible"]
                print(f"{path.name}: {graded['total']:g} / {graded['possible']:g}")
                if graded["feedback"]:
                    feedback_folder.mkdir(exist_ok=True)
                    lines = [
                        f"{path.name}: {graded['total']:g} / {graded['possible']:g}"
                    ]
                    for question, messages in graded["feedback"].items():
                        lines.append(f"\n{question}:")
                        lines += [f"  - {m}" for m in messages]
                    (feedback_folder / f"{path.stem}.txt").write_text(
                        "\n".join(lines) + "\n"
                    )
            else:
                print(f"{path.name}: {graded['status']} ({graded['reason']})")
            writer.writerow(row)
            handle.flush()
            rows.append(row)
    counts = {
        status: sum(1 for row in rows if row["status"] == status)
        for status in ("graded", "failed", "timed out")
    }
    print(
        f"grade table: {table} ({counts['graded']} graded, {counts['failed']} failed, "
        f"{counts['timed out']} timed out)"
    )
    return rows


GRADE_IN_VENV = """
import json, sys
from otter.api import grade_submission
import pe_tutorial
results = grade_submission(sys.argv[1], sys.argv[2], quiet=True)
print(json.dumps({"total": results.total, "possible": results.possible,
                  "package": pe_tutorial.__file__}))
"""


def zip_environment(zip_path: Path, source: Path) -> tuple[str, list[str]]:
    """An autograder zip's Python version and pip requirements, with the paths under
    ``/autograder/source`` pointing at ``source``, where the zip was unpacked."""
    import yaml

    with zipfile.ZipFile(zip_path) as archive:
        environment = yaml.safe_load(archive.read("environment.yml"))
    dependencies = environment["dependencies"]
    python = next(
        d.split("=", 1)[1]
        for d in dependencies
        if isinstance(d, str) and d.startswith("python=")
    )
    pip = next(d["pip"] for d in dependencies if isinstance(d, dict) and "pip" in d)
    return str(python), [r.replace(AUTOGRADER_SOURCE, str(source)) for r in pip]


def clean_venv(venv: Path, requirements: list[str], source: Path) -> Path:
    """A virtual environment holding only ``requirements`` (remade when they change).

    Requirements under ``source`` (the unpacked zip) are keyed by their contents,
    so the same wheel unpacked elsewhere reuses the environment.
    """
    digest = hashlib.sha256()
    for requirement in sorted(requirements):
        path = Path(requirement)
        if path.is_file() and path.is_relative_to(source):
            digest.update(path.read_bytes())
        else:
            digest.update(requirement.encode())
    key = digest.hexdigest()[:16]
    python = venv / "bin" / "python"
    if (venv / f".installed-{key}").exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *requirements],
        check=True,
    )
    (venv / f".installed-{key}").touch()
    return python


def check_autograders(built: Path, venv: Path) -> list[str]:
    """Grade each assignment's solutions with its autograder zip alone: in a clean venv
    made from what the zip lists, in a folder outside the checkout. Returns the problems."""
    problems = []
    results = sorted(p for p in built.iterdir() if (p / "autograder").is_dir())
    if not results:
        raise SystemExit(f"no built assignments in {built}: run build first")
    for result in results:
        archive = autograder_zip(result).resolve()  # graded from another folder
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "source"
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(source)
            python_version, requirements = zip_environment(archive, source)
            here = ".".join(platform.python_version_tuple()[:2])
            if python_version != here:
                problems.append(
                    f"{result.name}: the zip wants Python {python_version}, this is {here}"
                )
                continue
            python = clean_venv(venv.resolve(), requirements, source)
            work = Path(folder) / "grading"
            work.mkdir()
            shutil.copy(
                result / "autograder" / f"{result.name}.ipynb", work / "solutions.ipynb"
            )
            done = subprocess.run(
                [str(python), "-c", GRADE_IN_VENV, "solutions.ipynb", str(archive)],
                cwd=work,
                capture_output=True,
                text=True,
                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            )
            if done.returncode != 0:
                problems.append(
                    f"{result.name}: grading failed: {diagnosis(done.stderr)}"
                )
                continue
            graded = json.loads(done.stdout.strip().splitlines()[-1])
            if not graded["package"].startswith(str(venv.resolve())):
                problems.append(
                    f"{result.name}: pe_tutorial came from {graded['package']}"
                )
            if graded["total"] != graded["possible"]:
                problems.append(
                    f"{result.name}: the solutions scored {graded['total']:g} of "
                    f"{graded['possible']:g} in the clean environment"
                )
            print(
                f"{result.name}: {graded['total']:g} / {graded['possible']:g} from the zip alone"
            )
    return problems


# --- the notebooks under Colab's conditions -------------------------------------------
# tools/fresh_runtime.py: a fresh runtime (only Colab's preinstalled packages), Colab's
# kernel and shell classes, an empty working folder.


def _outputs_text(cell) -> str:
    return "".join(
        output.get("text", "") + output.get("data", {}).get("text/plain", "")
        for output in cell.get("outputs", [])
        if output["output_type"] != "error"
    )


def _failing_line(traceback: list[str]) -> str:
    """The line of the cell where an error was raised (IPython marks it ``---> N``
    under ``Cell In[K], line N``; frames of libraries and chained errors are skipped)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(traceback))
    found = re.search(r"^Cell In\[\d+\].*\n(?:.*\n)*?-*>\s*\d+\s+(.*)$", text, re.M)
    return found.group(1).strip() if found else ""


def colab_problems(node, name: str, version: str, folder: Path) -> list[str]:
    """What went wrong when ``node`` ran under Colab's conditions (``run_as_on_colab``)."""
    from pe_tutorial.course import COLAB_HAND_IN

    where = f"{name} ({version}, on Colab)"
    code = [cell for cell in node.cells if cell.cell_type == "code"]
    errors = [
        (index, output)
        for index, cell in enumerate(node.cells)
        for output in cell.get("outputs", [])
        if output["output_type"] == "error"
    ]
    problems = []
    if errors:
        index, first = errors[0]
        line = _failing_line(first.get("traceback", []))
        at = f" at `{line}`" if line else ""
        later = (
            f" (and {len(errors) - 1} later cell(s) raised too)"
            if len(errors) > 1
            else ""
        )
        problems.append(
            f"{where}: cell {index + 1} of {len(node.cells)}{at} raised "
            f"{first['ename']}: {first['evalue']}{later}"
        )
    checks = [
        (cell, re.findall(r"^(\w+) results:(.*)$", _outputs_text(cell), re.M))
        for cell in code
        if cell_source(cell).lstrip().startswith("grader.check")
    ]
    for cell, results in checks:
        if not results and not errors:
            problems.append(f"{where}: `{cell_source(cell).strip()}` showed no results")
    if version == "solutions":
        for cell, results in checks:
            failed = [q for q, rest in results if "All test cases passed" not in rest]
            if failed:
                problems.append(
                    f"{where}: `{cell_source(cell).strip()}` failed {', '.join(failed)}:\n"
                    + _outputs_text(cell)
                )
    last_raised = code and any(o["output_type"] == "error" for o in code[-1].outputs)
    if not last_raised and (not code or COLAB_HAND_IN not in _outputs_text(code[-1])):
        problems.append(
            f"{where}: the last cell did not say how to hand in on Colab "
            f"(did Otter take the kernel for Colab's?); it showed {_outputs_text(code[-1])!r}"
            if code
            else f"{where}: no code cell"
        )
    written = sorted(p.name for p in (folder / "tests").glob("*.py"))
    if not written:
        problems.append(f"{where}: no public tests were written into ./tests")
    if (folder / f"{name}.ipynb").exists():
        problems.append(f"{where}: {name}.ipynb appeared in the working directory")
    return problems


def check_colab(result: Path, wheel: Path) -> list[str]:
    """Run assignment ``result``'s student and solutions notebooks as on a fresh Colab
    runtime, each alone in an empty folder and a new environment holding only Colab's
    preinstalled packages, its install cell pointed at ``wheel`` (the package's build);
    return the problems (none: both installed what they need, ran with no cell error,
    the solutions passed every check, and both said how to hand in)."""
    name = result.name
    versions = {
        "student": result / "student" / f"{name}.ipynb",
        "solutions": result / "autograder" / f"{name}.ipynb",
    }
    problems = []
    with tempfile.TemporaryDirectory() as temporary:
        for version, path in versions.items():
            root = Path(temporary) / version
            node = run_as_on_colab(json.loads(path.read_text()), root, wheel=wheel)
            problems += colab_problems(node, name, version, root / "content")
    return problems


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
        problems = check_autograders(args.built, args.venv)
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
