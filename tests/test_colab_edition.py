"""The Colab edition (tools/colab_edition.py): what plain Jupyter and Colab show of each
chapter holds no MyST, the code the text discusses, readable citations, folded
solutions and the build's numbers (issue 11)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import colab_edition  # noqa: E402
import install_cell  # noqa: E402

URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("colab")
    written = colab_edition.build(out, executed=None, assignments=None, ref="abc123")
    return {p.name: json.loads(p.read_text()) for p in written}


def text(notebook: dict, kind: str = "markdown") -> str:
    return "\n".join(
        "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == kind
    )


def test_every_chapter_in_the_toc_has_an_edition(edition):
    assert sorted(edition) == sorted(p.name for p in colab_edition.chapters())
    assert len(edition) >= 10


def test_no_myst_is_left(edition):
    for name, notebook in edition.items():
        assert colab_edition.myst_left(notebook) == [], name
        assert not re.search(r"\{(cite|glue|numref|doc|ref)", text(notebook)), name
        assert not re.search(r"^\([\w-]+\)=", text(notebook), flags=re.M), name
    # a section's link keeps its words
    assert "skip to the timing section and the" in " ".join(
        text(edition["06_rope.ipynb"]).split()
    )


def test_the_detector_sees_myst():
    chapter = json.loads(colab_edition.chapters()[5].read_text())
    found = colab_edition.myst_left(chapter)
    assert any("literalinclude" in f for f in found)
    assert any(f.startswith("{cite:") for f in found)


def test_literalinclude_becomes_the_package_source(edition):
    import inspect

    from pe_tutorial.encodings import rope

    rope_text = text(edition["06_rope.ipynb"])
    assert (
        "```python\n" + inspect.getsource(rope.apply_rope).rstrip() + "\n```"
        in rope_text
    )
    # a method, by its dotted name, dedented
    relative = text(edition["08_relative_position.ipynb"])
    assert re.search(r"```python\ndef forward\(", relative)


def test_citations_read_as_text_with_a_reference_list(edition):
    rope_text = text(edition["06_rope.ipynb"])
    assert "(Su et al., 2024)" in rope_text
    last = "".join(edition["06_rope.ipynb"]["cells"][-1]["source"])
    assert last.startswith("## References")
    assert "RoFormer" in last


def test_solutions_are_folded_and_exercises_numbered(edition):
    chapter = text(edition["07_alibi.ipynb"])
    assert chapter.count("<details>") == chapter.count("</details>") == 3
    assert "<summary>Solution (click to open)</summary>" in chapter
    assert "**Exercise 1**" in chapter and "**Exercise 3**" in chapter
    # the solution body is inside the fold, not before it
    fold = chapter[chapter.index("<details>") : chapter.index("</details>")]
    assert len(fold) > 100


def test_install_cell_pins_the_commit_of_the_configured_repository(edition):
    for name, notebook in edition.items():
        first = next(c for c in notebook["cells"] if c["cell_type"] == "code")
        assert f'PACKAGE = "pe_tutorial @ git+{URL}@abc123"' in "".join(
            first["source"]
        ), name


def test_glue_values_are_the_builds_formatted(tmp_path):
    executed = tmp_path / "executed" / "book"
    executed.mkdir(parents=True)
    glue_names = re.findall(
        r"\{glue:text\}`([^`:]+)(?::([^`]*))?`",
        text(json.loads((ROOT / "book" / "09_experiments.ipynb").read_text())),
    )
    assert glue_names
    values = {name: {"data": {"text/plain": "1234.56789"}} for name, _ in glue_names}
    (executed / "09_experiments.glue.json").write_text(json.dumps(values))
    written = colab_edition.build(
        tmp_path / "out", executed=tmp_path / "executed", assignments=None, ref="r"
    )
    chapter = json.loads(
        next(p for p in written if p.name == "09_experiments.ipynb").read_text()
    )
    body = text(chapter)
    for name, _ in glue_names:
        assert f"`{name}`" not in body
    formatted = {format(1234.56789, spec) for _, spec in glue_names if spec}
    assert all(value in body for value in formatted), formatted
    assert "Numbers quoted in the text are those of the book's build" in body


def test_a_directive_without_a_colab_rendering_is_an_error():
    converter = colab_edition.Converter({})
    with pytest.raises(
        ValueError, match="no Colab rendering for the {figure} directive"
    ):
        converter.markdown("```{figure} a.png\n```", ROOT / "book")
    with pytest.raises(KeyError, match="not in references.bib"):
        converter.markdown("{cite:p}`nobody1999`", ROOT / "book")
    with pytest.raises(ValueError, match="unclosed"):
        converter.markdown("```{solution} ex\nbody", ROOT / "book")


def test_student_notebooks_join_the_edition(tmp_path):
    student = tmp_path / "assignments" / "rope" / "student"
    student.mkdir(parents=True)
    notebook = json.loads((ROOT / "book" / "assignments" / "rope.ipynb").read_text())
    (student / "rope.ipynb").write_text(json.dumps(notebook))
    written = colab_edition.build(
        tmp_path / "out", executed=None, assignments=tmp_path / "assignments", ref="r"
    )
    copied = tmp_path / "out" / "book" / "assignments" / "rope.ipynb"
    assert copied in written
    cells = ["".join(c["source"]) for c in json.loads(copied.read_text())["cells"]]
    assert any(f"git+{URL}@r" in c for c in cells)
    # what the master installs besides the package comes along
    assert any('NEEDS = {"otter": "otter-grader>=' in c for c in cells)
    grader = next(c for c in cells if "otter.Notebook" in c)
    # the public tests are written from the package, nothing is fetched
    assert grader.index('write_public_tests("rope")') < grader.index(
        'grader = otter.Notebook("rope.ipynb")'
    )
    assert "urlretrieve" not in "".join(cells)


def test_strict_mode_wants_every_glued_value(tmp_path):
    with pytest.raises(ValueError, match="glued no value"):
        colab_edition.build(
            tmp_path / "out", executed=tmp_path, assignments=None, ref="r", strict=True
        )


def test_only_the_chapters_that_use_a_gpu_ask_for_one_and_each_says_why(edition):
    """A free-tier user spends GPU quota on a GPU runtime: chapters 9 (a live training
    run) and 10 (timing is its subject) ask for one; the others open on the CPU
    runtime and say how to time on a GPU (issue 70)."""
    asking = set()
    for name, notebook in edition.items():
        first_cells = text({"cells": notebook["cells"][:3]})
        assert "timing cell" in first_cells, name
        if notebook["metadata"].get("accelerator") == "GPU":
            asking.add(name)
            assert notebook["metadata"]["colab"]["gpuType"] == "T4", name
            assert "asks Colab for a GPU runtime" in first_cells, name
            assert "spends your GPU quota" in first_cells, name
        else:
            assert "accelerator" not in notebook["metadata"], name
            assert "default CPU runtime, which spends no GPU quota" in first_cells, name
    assert asking == {"09_experiments.ipynb", "10_performance.ipynb"}


def test_the_install_cell_says_what_it_does_on_colab(edition):
    for name, notebook in edition.items():
        first = "".join(
            next(c for c in notebook["cells"] if c["cell_type"] == "code")["source"]
        )
        assert "checkout" not in first, name  # there is none on Colab
        assert first.startswith(
            "# What this notebook needs that a fresh runtime (Colab's) lacks"
        ), name
        assert "the commit this notebook was made from" in first, name
        compile(first, name, "exec")
        assert install_cell.problems(notebook, name) == []
