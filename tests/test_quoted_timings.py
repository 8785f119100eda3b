"""Every timing a chapter quotes, read from the recorded files as the chapter reads it.

Chapter 10's rule is that no ratio or ordering is read from a row the table
marks noisy (``benchmarks.ratio_text`` refuses one). The book build would fail
on such a quote too, but only after executing every notebook; this runs each
chapter's quoting cells alone (the cells that call ``benchmarks.quoted``, their
live timing lines left out, with the imports and definitions of the cells
before them) in a few seconds, so a re-recorded suite whose quoted row turned
noisy, or a sentence that quotes one, fails here first.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import matplotlib
import pytest

import pe_tutorial as pe
from pe_tutorial import benchmarks

BOOK = Path(__file__).resolve().parent.parent / "book"
CHAPTERS = sorted(p for p in BOOK.glob("*.ipynb"))
# the live run and its table: timed afresh by the build, never quoted
LIVE = re.compile(r"^(\w+ = benchmarks\.run\(.*\)|benchmarks\.show\(\w+\))$")
# a cell that reads a recorded run, or words a ratio from one
QUOTES = re.compile(r"benchmarks\.(quoted|ratio_text|noise_text|check_quotable)\(")


def code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def definitions(source: str) -> str:
    """The cell's imports, functions and classes, nothing it runs."""
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    body = [node for node in ast.parse(source).body if isinstance(node, keep)]
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def quoting_cells(path: Path) -> list[tuple[bool, str]]:
    """The chapter's code up to its last quoting cell, as (quotes, source): the
    quoting cells with their live lines dropped, and of the cells between them
    only their definitions. Empty if the chapter quotes no recorded run."""
    cells = code_cells(path)
    last = max((i for i, cell in enumerate(cells) if QUOTES.search(cell)), default=-1)
    program = []
    for cell in cells[: last + 1]:
        if QUOTES.search(cell):
            lines = [line for line in cell.split("\n") if not LIVE.match(line.strip())]
            program.append((True, "\n".join(lines)))
        else:
            program.append((False, definitions(cell)))
    return program


QUOTING = [p for p in CHAPTERS if quoting_cells(p)]


def test_the_chapters_that_quote_timings_are_found():
    # a chapter whose quoting cell changed shape would silently drop out
    names = {p.stem[:2] for p in QUOTING}
    assert {
        "01",
        "02",
        "03",
        "04",
        "05",
        "06",
        "07",
        "08",
        "09",
        "10",
        "11",
        "12",
    } <= names


@pytest.mark.parametrize("path", QUOTING, ids=lambda p: p.stem)
def test_every_quoted_timing_reads_from_rows_the_table_trusts(path, monkeypatch):
    matplotlib.use("Agg")
    glued = {}
    monkeypatch.setattr(
        pe, "glue", lambda name, value, **_: glued.setdefault(name, value)
    )
    namespace: dict = {}
    try:
        for quotes, source in quoting_cells(path):
            code = compile(source, str(path), "exec")
            if quotes:
                exec(code, namespace)
                continue
            try:  # a definition may name what a cell not run here made
                exec(code, namespace)
            except NameError:
                pass
    except benchmarks.NoisyRow as error:
        pytest.fail(f"{path.name} quotes a noisy row: {error}")
    finally:
        matplotlib.pyplot.close("all")
    assert glued, f"{path.name}'s quoting cells glued nothing"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_ratio_glued_by_hand_is_held_to_the_same_rule(path):
    """A cell that glues a ratio it computed itself (``ratio_to``,
    ``ratio_to_copy``) instead of through ``ratio_text`` must pass its rows to
    ``benchmarks.check_quotable`` first."""
    for cell in code_cells(path):
        by_hand = [
            line
            for line in cell.split("\n")
            if "pe.glue(" in line and re.search(r"\.ratio_to(_copy)?\b", line)
        ]
        if by_hand:
            assert "benchmarks.check_quotable(" in cell, (
                f"{path.name} glues a ratio by hand without checking its rows: "
                f"{by_hand[0].strip()}"
            )
