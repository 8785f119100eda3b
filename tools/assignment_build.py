"""Building the course assignments (issue 11): ``otter assign`` on each master, the
student notebook checked (no solution, no hidden test, no MyST), the install cells of
the student and solutions notebooks pinned to this commit, and each autograder zip made
with a pinned environment and the package's own wheel. ``tools/assignments.py`` is the
command."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import install_cell
from colab_edition import current_commit, myst_left
from fresh_runtime import build_wheel
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
    return build_wheel(out / "wheels")


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
