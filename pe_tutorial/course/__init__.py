"""The course assignments' public tests, shipped with the package (book/instructors.md).

A student notebook checks its answers with Otter's ``grader.check``, which
reads the public tests from a ``tests`` folder beside the notebook. Opened
alone (Colab, a JupyterHub, a laptop) there is no such folder, and Otter can
neither read tests from the notebook on Colab nor fetch them from a URL there.
So the public tests ``otter assign`` writes (no hidden ones) ship inside this
package (``assignment_tests.json``, refreshed by ``make assignments``), and each
student notebook's setup cell calls ``write_public_tests(NAME)``.

The notebook's setup cell gives Otter the notebook's path only when that file
is in the working directory: on Colab it is not (the kernel runs in
``/content``; the notebook lives in Drive or in the browser), and Otter 7 reads
the path it is given. ``export(grader)`` is the notebook's last cell: Otter's
zip where Otter can export, and on Colab, where it cannot, how to hand in the
notebook itself (File > Download > Download .ipynb).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

__all__ = ["assignments", "public_tests", "write_public_tests", "export"]

TESTS_FILE = "assignment_tests.json"
COLAB_HAND_IN = (
    "On Colab, Otter cannot write the zip. Hand in the notebook itself: save it, "
    "then File > Download > Download .ipynb, and submit that file."
)


def _all_tests() -> dict[str, dict[str, str]]:
    text = (resources.files("pe_tutorial.course") / TESTS_FILE).read_text(
        encoding="utf-8"
    )
    return json.loads(text)


def assignments() -> list[str]:
    """The names of the assignments whose public tests ship with the package."""
    return sorted(_all_tests())


def public_tests(name: str) -> dict[str, str]:
    """``{question: test file source}`` of assignment ``name``'s public tests."""
    tests = _all_tests()
    if name not in tests:
        raise ValueError(f"no assignment {name!r}; the assignments are {sorted(tests)}")
    return tests[name]


def write_public_tests(name: str, folder: str | Path = ".") -> Path:
    """Write assignment ``name``'s public tests into ``folder/tests``; return that folder.

    Test files already there are left as they are (an instructor's own copy wins).
    """
    tests = Path(folder) / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for question, source in public_tests(name).items():
        path = tests / f"{question}.py"
        if not path.exists():
            path.write_text(source, encoding="utf-8")
    return tests


NO_NOTEBOOK_FILE = (
    "Otter cannot tell which notebook to put in the zip: this notebook's file is not "
    "in the working directory under its own name, alone. Hand in the notebook itself: "
    "save it and submit the .ipynb file, or call grader.export('NAME.ipynb') with its name."
)


def export(grader) -> None:
    """Otter's submission zip (tests run first); on Colab, how to hand in the notebook.

    Off Colab, a notebook whose file Otter cannot find (renamed, beside other
    notebooks) gets the same advice instead of a traceback.
    """
    from otter.check.utils import IPythonInterpreter

    if grader.interpreter is IPythonInterpreter.COLAB:
        print(COLAB_HAND_IN)
        return
    try:
        grader.export(pdf=False, run_tests=True)
    except ValueError as error:
        if "Could not resolve notebook path" not in str(error):
            raise
        print(NO_NOTEBOOK_FILE)
