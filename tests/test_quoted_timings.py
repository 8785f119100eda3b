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
QUOTES = re.compile(
    r"benchmarks\.(quoted|ratio_text|ratio_of|noise_text|check_quotable"
    r"|check_ratio_quotable)\("
)


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
        "13",
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


# a ratio computed by hand: a row's ratio methods, benchmarks.ratio_of, or one
# median divided by (or dividing) another
BY_HAND = re.compile(
    r"\.ratio_to(_copy)?\b|\bratio_of\(|median_ms\s*/|/\s*[\w\[\]\"'.]+\.median_ms"
)
# a ranking: the least or the most of rows by their medians, or two medians compared
RANKING = re.compile(r"\b(sorted|min|max)\(.*median_ms|median_ms\s*[<>]")
CHECKS = ("benchmarks.check_quotable(", "benchmarks.check_ratio_quotable(")
WEIGHS = ("benchmarks.within_noise(", "benchmarks.fastest_group(")


def _offending(path: Path, pattern: re.Pattern, needed: tuple[str, ...]) -> list[str]:
    """The lines of code cells matching ``pattern`` in cells that call none of
    ``needed``."""
    lines = []
    for cell in code_cells(path):
        if any(call in cell for call in needed):
            continue
        lines += [line.strip() for line in cell.split("\n") if pattern.search(line)]
    return lines


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_ratio_computed_by_hand_is_held_to_the_same_rule(path):
    """A cell that computes a ratio itself (``ratio_to``, ``ratio_to_copy``,
    ``ratio_of``, a median over a median), anywhere in the cell and whatever it
    does with it (glued, asserted, printed), instead of through ``ratio_text``
    must pass its rows to ``benchmarks.check_ratio_quotable`` (or
    ``check_quotable``) first."""
    offending = _offending(path, BY_HAND, CHECKS)
    assert not offending, (
        f"{path.name} computes a ratio by hand without checking it: {offending[0]}"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_ranking_is_weighed_against_the_noise(path):
    """A cell that ranks rows by their medians (the least or most of them, or two
    medians compared) must also ask whether the run can tell them apart
    (``benchmarks.within_noise``) or name the group the run cannot order
    (``benchmarks.fastest_group``)."""
    offending = _offending(path, RANKING, WEIGHS)
    assert not offending, (
        f"{path.name} ranks rows without weighing the noise: {offending[0]}"
    )


def test_the_rules_catch_what_they_are_for():
    """Each pattern matches the forms the chapters had before the rule, and the
    checks they ask for are what the package calls them."""
    for line in (
        "met = hf.ratio_to(new_outputs) >= 8",
        'timed_extra = 1 - timed["nope"].median_ms / timed["rope"].median_ms',
        "x = a.ratio_to_copy",
        "x = benchmarks.ratio_of(a, b)",
    ):
        assert BY_HAND.search(line), line
    for line in (
        "slowest = max(steps, key=lambda s: steps[s].median_ms)",
        "assert t5_row.median_ms > alibi_row.median_ms",
    ):
        assert RANKING.search(line), line
    assert not BY_HAND.search("pe.glue('x', benchmarks.ratio_text(a, b))")
    for call in CHECKS + WEIGHS:
        assert callable(getattr(benchmarks, call.split(".")[1].rstrip("(")))


def test_a_printed_table_recomputes_its_report_from_the_numbers():
    """A recorded run's notes written by its suite's report are computed again by
    today's code whenever the run is printed: a stored sentence never is."""
    shown = 0
    for name, suite in benchmarks.SUITES.items():
        if suite.report is None:
            continue
        for run in benchmarks.load_recorded_runs(name):
            stored = run.notes[len(run.notes) - run.report_notes :]
            run.notes[len(run.notes) - run.report_notes :] = [
                "STALE: " + note for note in stored
            ]
            table = run.table()
            assert "STALE" not in table, name
            flat = " ".join(table.split())
            for line in suite.report(run):
                assert " ".join(line.split())[:60] in flat, name
            shown += 1
    assert shown >= 6
