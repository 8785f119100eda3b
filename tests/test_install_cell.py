"""Every notebook's install cell (tools/install_cell.py): one template, a source that
exists, and everything the notebook imports that a fresh Colab runtime lacks (issue 46)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import install_cell  # noqa: E402

SOURCES = install_cell.sources()
MASTERS = [p for p in SOURCES if p.parent.name == "assignments"]
URL = install_cell.repository_url()


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_sources_are_the_chapters_and_the_masters():
    assert len(MASTERS) == 7
    assert len(SOURCES) - len(MASTERS) >= 11


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_notebook_starts_with_the_templates_install_cell(path):
    notebook = read(path)
    cell = install_cell.install_cell_of(notebook)
    assert install_cell.cell_source(cell) == install_cell.expected(notebook), (
        f"{path.name}: run python tools/install_cell.py --write"
    )
    assert install_cell.problems(notebook, path.name) == []
    if path.parent.name == "book":
        # it runs on Colab but is not part of the rendered page
        assert "remove-cell" in cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", MASTERS, ids=lambda p: p.name)
def test_an_assignment_installs_otter_in_the_range_the_package_accepts(path):
    package, needs = install_cell.parse(
        install_cell.cell_source(install_cell.install_cell_of(read(path)))
    )
    assert package == f"pe_tutorial @ git+{URL}"
    assert needs == {"otter": install_cell.otter_requirement()}
    assert re.fullmatch(r"otter-grader>=\d+,<\d+", needs["otter"])


def test_a_notebook_that_imports_what_it_does_not_install_is_named():
    notebook = read(MASTERS[0])
    cell = install_cell.install_cell_of(notebook)
    cell["source"] = install_cell.render(
        "source", install_cell.repository_package(), {}
    )
    found = install_cell.problems(notebook, "alibi.ipynb")
    assert found == [
        "alibi.ipynb: imports ['otter'], which a fresh Colab runtime lacks and its "
        "install cell does not install (add them to NEEDS)"
    ]


@pytest.mark.parametrize("name", ["pe-tutorial", "pe_tutorial", "pe-tutorial==0.3"])
def test_a_package_name_the_index_does_not_have_is_refused(name):
    notebook = read(SOURCES[0])
    cell = install_cell.install_cell_of(notebook)
    cell["source"] = install_cell.point_at(install_cell.cell_source(cell), name)
    (found,) = install_cell.problems(notebook, "x.ipynb")
    assert found.startswith(f"x.ipynb: PACKAGE = {name!r} is not a direct reference")


def test_a_notebook_without_an_install_cell_is_named():
    notebook = {"cells": [{"cell_type": "code", "source": "import torch"}]}
    assert install_cell.problems(notebook, "y.ipynb") == [
        'y.ipynb: the first code cell is not an install cell (no PACKAGE = "..." line)'
    ]


@pytest.mark.parametrize("form", ["source", "edition"])
@pytest.mark.parametrize("needs", [{}, {"otter": "otter-grader>=6,<8"}])
def test_a_rendered_cell_reads_back_and_compiles(form, needs):
    package = install_cell.repository_package("abc123")
    source = install_cell.render(form, package, needs)
    assert install_cell.parse(source) == (package, needs)
    compile(source, "cell", "exec")
    assert ("otter-grader" in source.split("PACKAGE")[0]) == bool(needs)


REAL_FIND_SPEC = importlib.util.find_spec


def run_cell(source: str, monkeypatch, tmp_path, missing: set[str]) -> list[list[str]]:
    """Execute an install cell in ``tmp_path`` with pip replaced by a recorder and the
    modules of ``missing`` not importable; return the pip commands it ran."""
    import subprocess

    calls = []
    real = REAL_FIND_SPEC
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in missing else real(name, *a),
    )
    monkeypatch.setattr(subprocess, "check_call", lambda command: calls.append(command))
    monkeypatch.chdir(tmp_path)
    exec(compile(source, "install", "exec"), {})
    return [command[3:] for command in calls]


def test_the_edition_cell_installs_the_pinned_commit_and_otter(monkeypatch, tmp_path):
    package = install_cell.repository_package("abc123")
    needs = {"otter": install_cell.otter_requirement()}
    source = install_cell.render("edition", package, needs)
    missing = {"pe_tutorial", "otter"}
    assert run_cell(source, monkeypatch, tmp_path, missing) == [
        ["install", "-q", package],
        ["install", "-q", needs["otter"]],
    ]
    # installed already: nothing to do
    assert run_cell(source, monkeypatch, tmp_path, set()) == []


def test_the_source_cell_takes_the_checkout_else_the_repository(monkeypatch, tmp_path):
    source = install_cell.expected(read(MASTERS[0]))
    missing = {"pe_tutorial", "otter"}
    (tmp_path / "alone").mkdir()
    commands = run_cell(source, monkeypatch, tmp_path / "alone", missing)
    assert commands[0] == ["install", "-q", f"pe_tutorial @ git+{URL}"]
    assert commands[1][-1].startswith("otter-grader>=")
    # from a chapter folder of a checkout: the checkout's root
    commands = run_cell(source, monkeypatch, ROOT / "book" / "assignments", missing)
    assert commands[0] == ["install", "-q", str(ROOT)]


def test_the_edition_form_keeps_what_the_master_needs():
    master = install_cell.cell_source(install_cell.install_cell_of(read(MASTERS[0])))
    pinned = install_cell.edition(master, install_cell.repository_package("r1"))
    assert install_cell.parse(pinned) == (
        f"pe_tutorial @ git+{URL}@r1",
        {"otter": install_cell.otter_requirement()},
    )
    assert "checkout" not in pinned


def test_no_instruction_installs_a_package_name_the_index_does_not_have():
    """The README, the course pages and the masters' requirements name the repository."""
    command = re.compile(r"pip install ([^\n`]*)")
    name = re.compile(r"""["']?pe[-_]tutorial([=<>~!\[][^\s"']*)?["']?""")
    for path in [
        ROOT / "README.md",
        ROOT / "book" / "instructors.md",
        ROOT / "book" / "intro.md",
        ROOT / "CONTRIBUTING.md",
    ]:
        for arguments in command.findall(path.read_text()):
            words = arguments.split()
            bare = [
                w
                for i, w in enumerate(words)
                if name.fullmatch(w) and words[i + 1 : i + 2] != ["@"]
            ]
            assert not bare, f"{path.name}: pip install {arguments}"
    requirements = (ROOT / "book" / "assignments" / "requirements.txt").read_text()
    lines = [line for line in requirements.splitlines() if not line.startswith("#")]
    assert lines == [install_cell.repository_package()]


def test_the_fresh_runtime_command_gives_each_notebook_its_own_folder(
    tmp_path, monkeypatch
):
    """A student and a solutions notebook share a name: each still runs in an empty
    folder of its own (the nightly run met a FileExistsError)."""
    import fresh_runtime

    roots = []

    def fake_run(notebook, root, *, wheel, timeout):
        (root / "content").mkdir(parents=True)  # as run_as_on_colab makes it
        roots.append(root)
        return type("Node", (), {"cells": []})()

    monkeypatch.setattr(fresh_runtime, "run_as_on_colab", fake_run)
    paths = []
    for version in ("student", "autograder"):
        (tmp_path / version).mkdir()
        path = tmp_path / version / "rope.ipynb"
        path.write_text(json.dumps({"cells": []}))
        paths.append(path)
    wheel = tmp_path / "pe_tutorial-0-py3-none-any.whl"
    fresh_runtime.main([*map(str, paths), "--wheel", str(wheel)])
    assert len(roots) == 2 and roots[0] != roots[1]


def test_a_wheel_folder_with_a_trailing_slash_is_the_same_folder(monkeypatch, tmp_path):
    """The install cell pointed at a folder (the build's, a checkout's) written with a
    trailing "/" passes the same checks and installs the same folder as without it, in
    both forms; the fresh runtime's command writes the same cell either way."""
    import fresh_runtime

    folder = tmp_path / "dist"
    folder.mkdir()
    (tmp_path / "alone").mkdir()  # outside any checkout: the cell installs PACKAGE
    master = read(MASTERS[0])
    path = tmp_path / "rope.ipynb"
    path.write_text(json.dumps(master))
    pointed = []

    def fake_run(notebook, root, *, wheel, timeout):
        cell = install_cell.install_cell_of(fresh_runtime.pointed_at(notebook, wheel))
        pointed.append(install_cell.parse(install_cell.cell_source(cell))[0])
        return type("Node", (), {"cells": []})()

    monkeypatch.setattr(fresh_runtime, "run_as_on_colab", fake_run)
    installed = {}
    for written in (str(folder), f"{folder}/"):
        source = install_cell.point_at(
            install_cell.cell_source(install_cell.install_cell_of(master)), written
        )
        for form, cell in (
            ("source", source),
            ("edition", install_cell.edition(source, written)),
        ):
            notebook = json.loads(json.dumps(master))
            install_cell.install_cell_of(notebook)["source"] = cell
            assert install_cell.problems(notebook, "x.ipynb") == [], (form, written)
            (command,) = run_cell(
                cell, monkeypatch, tmp_path / "alone", {"pe_tutorial"}
            )
            installed[form, written] = Path(command[-1])
        fresh_runtime.main([str(path), "--wheel", written])
    assert set(installed.values()) == {folder}
    assert list(map(Path, pointed)) == [folder, folder]
