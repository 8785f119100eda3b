"""Checking the built assignments the hard way (issues 11 and 46): each autograder zip
alone grades its solutions in a clean virtual environment made from what it lists, and
each student and solutions notebook runs as on a fresh Colab runtime
(``fresh_runtime.py``), its problems named (a cell that raised, a check that failed,
no word on how to hand in)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from assignment_build import AUTOGRADER_SOURCE, autograder_zip
from assignment_grading import diagnosis
from fresh_runtime import CellDeadline, run_as_on_colab
from install_cell import cell_source

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


def requirements_key(requirements: list[str], source: Path) -> str:
    """What names an environment made from ``requirements``: those under ``source`` (the
    unpacked zip) by their contents, so the same wheel unpacked elsewhere has one key."""
    digest = hashlib.sha256()
    for requirement in sorted(requirements):
        path = Path(requirement)
        if path.is_file() and path.is_relative_to(source):
            digest.update(path.read_bytes())
        else:
            digest.update(requirement.encode())
    return digest.hexdigest()[:16]


def clean_venv(venv: Path, requirements: list[str], source: Path) -> Path:
    """A virtual environment holding only ``requirements`` (remade when they change,
    ``requirements_key``)."""
    key = requirements_key(requirements, source)
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


def _grade_in_venv(result: Path, archive: Path, python: Path, venv: Path, folder: Path):
    """Grade ``result``'s solutions with ``archive`` in the environment of ``python``,
    working in ``folder``; returns (problems, the line to print)."""
    work = folder / "grading"
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
        return [f"{result.name}: grading failed: {diagnosis(done.stderr)}"], None
    graded = json.loads(done.stdout.strip().splitlines()[-1])
    problems = []
    if not graded["package"].startswith(str(venv)):
        problems.append(f"{result.name}: pe_tutorial came from {graded['package']}")
    if graded["total"] != graded["possible"]:
        problems.append(
            f"{result.name}: the solutions scored {graded['total']:g} of "
            f"{graded['possible']:g} in the clean environment"
        )
    line = f"{result.name}: {graded['total']:g} / {graded['possible']:g} from the zip alone"
    return problems, line


def check_autograders(built: Path, venv: Path, jobs: int = 1) -> list[str]:
    """Grade each assignment's solutions with its autograder zip alone: in a clean venv
    made from what the zip lists, in a folder outside the checkout. Returns the problems.

    The environment is made once for every zip that lists the same requirements (the
    same wheel and pins), one zip at a time; the gradings in it then run ``jobs`` at a
    time (each in its own folder and process)."""
    results = sorted(p for p in built.iterdir() if (p / "autograder").is_dir())
    if not results:
        raise SystemExit(f"no built assignments in {built}: run build first")
    venv = venv.resolve()
    problems = []
    here = ".".join(platform.python_version_tuple()[:2])
    with tempfile.TemporaryDirectory() as temporary:
        graded = []  # _grade_in_venv's arguments for each, in order
        waiting_for = None  # the requirements' key of those
        for result in results:
            archive = autograder_zip(result).resolve()  # graded from another folder
            folder = Path(temporary) / result.name
            source = folder / "source"
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(source)
            python_version, requirements = zip_environment(archive, source)
            if python_version != here:
                problems.append(
                    f"{result.name}: the zip wants Python {python_version}, this is {here}"
                )
                continue
            # a zip with other requirements remakes the environment: the ones waiting
            # for the present environment are graded first
            key = requirements_key(requirements, source)
            if graded and key != waiting_for:
                problems += _grade_all(graded, jobs)
                graded = []
            waiting_for = key
            python = clean_venv(venv, requirements, source)
            graded.append((result, archive, python, venv, folder))
        problems += _grade_all(graded, jobs)
    return problems


def _grade_all(graded: list, jobs: int) -> list[str]:
    """Grade each of ``graded`` (``_grade_in_venv``'s arguments), ``jobs`` at a time,
    printing their lines in order; returns their problems."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda arguments: _grade_in_venv(*arguments), graded))
    problems = []
    for found, line in outcomes:
        problems += found
        if line is not None:
            print(line)
    return problems


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


COLAB_VERSIONS = ("student", "solutions")


def check_colab(
    result: Path, wheel: Path, versions: tuple[str, ...] = COLAB_VERSIONS
) -> list[str]:
    """Run assignment ``result``'s student and solutions notebooks (or those of
    ``versions``) as on a fresh Colab runtime, each alone in an empty folder and a new
    environment holding only Colab's preinstalled packages, its install cell pointed at
    ``wheel`` (the package's build); return the problems (none: each installed what it
    needs, ran with no cell error, the solutions passed every check, and each said how
    to hand in)."""
    unknown = set(versions) - set(COLAB_VERSIONS)
    if unknown:
        raise ValueError(f"versions {sorted(unknown)}: each is one of {COLAB_VERSIONS}")
    name = result.name
    paths = {
        "student": result / "student" / f"{name}.ipynb",
        "solutions": result / "autograder" / f"{name}.ipynb",
    }
    problems = []
    with tempfile.TemporaryDirectory() as temporary:
        for version in versions:
            path = paths[version]
            root = Path(temporary) / version
            try:
                node = run_as_on_colab(json.loads(path.read_text()), root, wheel=wheel)
            except CellDeadline as late:
                problems.append(f"{name} ({version}, on Colab): {late}")
                continue
            problems += colab_problems(node, name, version, root / "content")
    return problems
