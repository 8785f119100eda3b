"""The fresh runtime (tools/fresh_runtime.py) without making one: what its failure message
names, and when the environment it keeps in _build/colab-runtime is made again (issue 46)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fresh_runtime  # noqa: E402
import install_cell  # noqa: E402


def executed(*cells: tuple[str, str | None]) -> nbformat.NotebookNode:
    """A notebook as ``execute`` returns it: ``(cell_type, error)`` each, an error
    ``"Name: message"`` stored as the cell's output when given."""
    node = nbformat.v4.new_notebook()
    for kind, error in cells:
        if kind == "markdown":
            node.cells.append(nbformat.v4.new_markdown_cell("# words"))
            continue
        cell = nbformat.v4.new_code_cell("x = 1")
        cell.outputs.append(nbformat.v4.new_output("stream", text="ran\n"))
        if error:
            ename, evalue = error.split(": ", 1)
            cell.outputs.append(
                nbformat.v4.new_output(
                    "error", ename=ename, evalue=evalue, traceback=[]
                )
            )
        node.cells.append(cell)
    return node


def test_a_failure_names_the_failing_cell_counting_every_cell_from_one(
    tmp_path, monkeypatch
):
    """Cell N is the notebook's Nth cell, markdown cells counted, as the message of the
    autograder's Colab check counts (tools/assignment_checks.py: cell N of M)."""
    node = executed(
        ("markdown", None),
        ("code", None),
        ("markdown", None),
        ("code", "NameError: name 'pe' is not defined"),
        ("code", None),
        ("code", "ModuleNotFoundError: No module named 'otter'"),
    )
    assert fresh_runtime.errors(node) == [
        "cell 4: NameError: name 'pe' is not defined",
        "cell 6: ModuleNotFoundError: No module named 'otter'",
    ]
    # the command's message: the notebook and its failing cell
    monkeypatch.setattr(
        fresh_runtime, "run_as_on_colab", lambda notebook, root, *, wheel, timeout: node
    )
    path = tmp_path / "rope.ipynb"
    path.write_text(json.dumps({"cells": []}))
    with pytest.raises(SystemExit) as failed:
        fresh_runtime.main([str(path), "--wheel", str(tmp_path / "pe_tutorial.whl")])
    assert str(failed.value).splitlines() == [
        f"{path}: cell 4: NameError: name 'pe' is not defined",
        f"{path}: cell 6: ModuleNotFoundError: No module named 'otter'",
    ]


def test_the_base_runtime_is_made_again_when_colabs_package_list_changes(
    tmp_path, monkeypatch
):
    """The environment kept in _build/colab-runtime holds Colab's preinstalled packages:
    its key names them, so a changed list makes it again (with pip replaced by a recorder)."""
    made = []

    def fake_run(*command):
        command = list(map(str, command))
        if command[1:3] == ["-m", "venv"]:
            Path(command[3]).mkdir(parents=True)
        made.append(command)

    monkeypatch.setattr(fresh_runtime, "_run", fake_run)
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    venv = tmp_path / "colab-runtime"

    def installed() -> list[list[str]]:
        """The pip installs of the base runtime (none: the kept one was used)."""
        made.clear()
        fresh_runtime.base_runtime(venv, torch_spec="torch==2.13.0")
        return [c[c.index("-q") + 1 :] for c in made if "pip" in c]

    colab = install_cell.colab_requirements()
    assert installed() == [["torch==2.13.0"], colab]
    assert installed() == []  # kept
    # Colab's list gains a package: made again with it
    more = (*install_cell.COLAB_PREINSTALLED, "scipy")
    monkeypatch.setattr(install_cell, "COLAB_PREINSTALLED", more)
    assert installed() == [["torch==2.13.0"], install_cell.colab_requirements()]
    assert "scipy" in install_cell.colab_requirements()
    assert installed() == []
    # Colab moves a pin: made again with the new version
    pins = {**install_cell.COLAB_PINS, "ipykernel": "6.99.0"}
    monkeypatch.setattr(install_cell, "COLAB_PINS", pins)
    assert "ipykernel==6.99.0" in installed()[1]
    assert installed() == []
    # another Python (a 3.11 runtime met a 3.13 wheelhouse): made again by it
    monkeypatch.setattr(sys, "version", "3.13.0 (another Python)")
    assert installed()[0] == ["torch==2.13.0"]
    assert installed() == []
    assert len(list(venv.glob(".colab-*"))) == 1  # made again from nothing


def test_the_base_runtime_holds_colabs_jupyter_stack_at_colabs_versions():
    """IPython, ipykernel, ipywidgets, notebook and tornado as Colab has them, read in
    one place with where and when (issue 70); every other package by name."""
    wanted = install_cell.colab_requirements()
    for name in ("ipython", "ipykernel", "ipywidgets", "notebook", "tornado"):
        assert f"{name}=={install_cell.COLAB_PINS[name]}" in wanted
    assert install_cell.COLAB_PINS["ipython"].startswith("7.")
    assert "numpy" in wanted and "ipykernel" not in wanted
    assert "a724079" in install_cell.COLAB_PINS_READ


def test_a_cell_past_its_deadline_stops_the_run_naming_it(tmp_path):
    """A hung cell fails with its number and first line within the deadline (with the
    synchronous kernel manager the deadline never fired: a 15 s cell given 3 s ran
    to its end), in a real kernel of Colab's class."""
    import time

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# a hung cell"),
        nbformat.v4.new_code_cell("print('first')"),
        nbformat.v4.new_code_cell("import time\ntime.sleep(60)"),
    ]
    kernels = fresh_runtime.fake_colab_kernel(tmp_path / "kernel")
    folder = tmp_path / "content"
    folder.mkdir()
    start = time.monotonic()
    with pytest.raises(
        fresh_runtime.CellDeadline,
        match=r"^cell 3 of 3 ran past its deadline of 3 s: 'import time'$",
    ):
        fresh_runtime.execute(json.loads(nbformat.writes(notebook)), folder, kernels, 3)
    assert time.monotonic() - start < 45


def test_the_kernel_draws_figures_inline_as_colab_does(tmp_path):
    """With the fresh runtime's kernel environment a figure is an image in the cell's
    outputs (with Agg, which the check used before, it was none); images() counts
    them and an error is not one."""
    env = fresh_runtime.kernel_environment(tmp_path)
    assert env["MPLBACKEND"] == "module://matplotlib_inline.backend_inline"
    assert env["PIP_NO_INDEX"] == "1" and env["PIP_FIND_LINKS"] == str(tmp_path)
    # as on Colab: pip reaches the index, figures still inline
    from_index = fresh_runtime.kernel_environment(None)
    assert "PIP_NO_INDEX" not in from_index and "PIP_FIND_LINKS" not in from_index
    assert from_index["MPLBACKEND"] == env["MPLBACKEND"]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()"
        ),
        nbformat.v4.new_code_cell("plt.plot([1, 0]);"),
        nbformat.v4.new_code_cell("1 / 0"),
    ]
    kernels = fresh_runtime.fake_colab_kernel(tmp_path / "kernel", env=env)
    folder = tmp_path / "content"
    folder.mkdir()
    node = fresh_runtime.execute(json.loads(nbformat.writes(notebook)), folder, kernels)
    assert fresh_runtime.images(node) == 2
    assert fresh_runtime.errors(node) == ["cell 3: ZeroDivisionError: division by zero"]


def test_a_chapter_that_draws_another_number_of_images_than_the_book_is_named(
    tmp_path,
):
    def showing(count: int) -> nbformat.NotebookNode:
        node = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("plt.show()")
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})
            for _ in range(count)
        ] + [nbformat.v4.new_output("stream", text="words\n")]
        node.cells = [cell, nbformat.v4.new_markdown_cell("# words")]
        return node

    built = tmp_path / "04_sinusoidal.ipynb"
    nbformat.write(showing(6), built)
    assert fresh_runtime.images(showing(6)) == 6
    assert fresh_runtime.image_problems(showing(6), "04_sinusoidal", built) == []
    assert fresh_runtime.image_problems(showing(0), "04_sinusoidal", built) == [
        "04_sinusoidal: showed 0 images where the built book shows 6"
    ]
