"""Tuning that does not stop at its grid's edge (issue 69): the judge's rule,
held to the book's own extensions and run on a known bowl."""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import pytest

from pe_tutorial.experiments import load_results
from pe_tutorial.experiments.configuration import scheme_files
from pe_tutorial.experiments.configuration.tuning import (
    SweepPoint,
    best_training,
    sweep_points,
)
from pe_tutorial.experiments.configuration.tuning_edges import (
    EDGE_ROUNDS,
    edge_settings,
    edge_stages,
    step,
)
from pe_tutorial.experiments.judging.judge import tune_to_the_edges
from pe_tutorial.lm.registry import scheme_names, unregister_scheme

KERPLE = str(Path(__file__).resolve().parents[1] / "examples" / "kerple.py")
POSITION = ("learned", "t5", "shaw", "cope", "deberta")


def test_step_walks_the_books_grids():
    assert [step(v, True) for v in (1e-3, 3e-3, 1e-2, 3e-2)] == [3e-3, 1e-2, 3e-2, 0.1]
    assert [step(v, True) for v in (1.0, 10.0, 30.0)] == [3.0, 30.0, 100.0]
    assert [step(v, False) for v in (1.0, 0.3, 3e-3)] == [0.3, 0.1, 1e-3]
    assert step(2e-3, True) == 3e-3 and step(2e-3, False) == 1e-3  # off the grid
    with pytest.raises(ValueError, match="not a positive rate"):
        step(0.0, True)


def _edges(points, scheme):
    found, _ = edge_settings(points, scheme, scheme in POSITION)
    return sorted((s["learning_rate"], s["position_lr_multiplier"]) for s in found)


def test_the_rule_extends_the_grid_where_the_book_did():
    """After the book's first two sweeps the rule asks for what the book then
    trained: T5, Shaw and CoPE at 100 times the rate (``tuning-edge``), the
    learned table and DeBERTa below 1 time (``tuning-below``: 0.3, then 0.1);
    the schemes without position parameters are inside their rate grid."""
    first = sweep_points(load_results("tuning"), load_results("tuning-position"))
    for scheme in ("t5", "shaw", "cope"):
        assert _edges(first, scheme) == [(3e-3, 100.0)]
    for scheme in ("learned", "deberta"):
        assert _edges(first, scheme) == [(3e-3, 0.3)]
    for scheme in ("nope", "sinusoidal", "rope", "alibi"):
        assert _edges(first, scheme) == []
    # with the book's extensions every best is inside: the tuned table's choices
    every = sweep_points(
        *(
            load_results(n)
            for n in ("tuning", "tuning-position", "tuning-edge", "tuning-below")
        )
    )
    for scheme in POSITION:
        assert _edges(every, scheme) == []


def test_an_extension_past_the_limits_is_said_not_trained():
    points = [SweepPoint("x", r, 1.0, b, 1) for r, b in ((0.1, 2.0), (0.3, 1.0))]
    found, stopped = edge_settings(points, "x", False)
    assert found == []
    assert stopped == [
        "the best setting's learning rate, 0.3, is the largest tried at "
        "position-rate multiplier 1; 1 would leave the range 1e-05-0.3"
    ]


def test_one_rounds_settings_go_into_a_stage_per_axis():
    best = {"learning_rate": 1e-2, "position_lr_multiplier": 100.0}
    found = [
        {"learning_rate": 3e-2, "position_lr_multiplier": 100.0, "best": best},
        {"learning_rate": 3e-3, "position_lr_multiplier": 100.0, "best": best},
        {"learning_rate": 1e-2, "position_lr_multiplier": 300.0, "best": best},
    ]
    assert edge_stages(2, found) == {
        "tune-edge-2-rate": {
            "train": {"learning_rate": [3e-3, 3e-2], "position_lr_multiplier": [100.0]}
        },
        "tune-edge-2-multiplier": {
            "train": {"position_lr_multiplier": [300.0], "learning_rate": [1e-2]}
        },
    }


def _record(template: dict, settings: list[tuple[float, float]], bowl) -> dict:
    """A tuning record of ``kerple-log`` at ``settings``, each scored ``bowl``."""
    record = copy.deepcopy(template)
    L = str(record["settings"]["train"]["seq_len"])
    record["language_model"] = [
        {
            "scheme": "kerple-log",
            "norm": "pre",
            "absolute": "input",
            "learning_rate": rate,
            "training": {} if times == 1 else {"position_lr_multiplier": times},
            "changes": {},
            "summary": {L: {"mean": bowl(rate, times), "n": 1}},
        }
        for rate, times in settings
    ]
    return record


def _run_on(bowl, template, trained):
    def run_stage(stage, preset):
        swept = dict(preset.sweep)
        rates = swept["train.learning_rate"]
        times = swept.get("train.position_lr_multiplier", (1.0,))
        trained.append((stage, sorted(itertools.product(rates, times))))
        return _record(template, list(itertools.product(rates, times)), bowl)

    return run_stage


@pytest.fixture(scope="module")
def template():
    """The book's tuning record (its settings), with KERPLE's example registered
    for the module's judge tests."""
    before = set(scheme_names())
    scheme_files.load([KERPLE])
    yield load_results("tuning")
    for name in set(scheme_names()) - before:
        unregister_scheme(name)
    scheme_files._LOADED.pop(KERPLE, None)


def _first_grid(template, bowl):
    return {
        "tune": _record(template, [(r, 1.0) for r in (1e-3, 3e-3, 1e-2, 3e-2)], bowl),
        "tune-position": _record(
            template,
            list(itertools.product((1e-3, 3e-3, 1e-2), (10.0, 30.0))),
            bowl,
        ),
    }


def test_the_judge_extends_in_rounds_until_the_best_is_inside(template):
    """A bowl whose lowest point is at rate 1e-2 and 100 times: the first grid's
    best (1e-2, 30) is its largest rate at 30 times and its largest multiplier
    at 1e-2, so round 1 trains 3e-2 at 30 times and 100 times at 1e-2; the new
    best (1e-2, 100) has no rate tried either side of it, nor a larger
    multiplier, so round 2 trains 3e-3 and 3e-2 at 100 times and 300 times at
    1e-2; then it is inside."""

    def bowl(rate, times):
        return 2 + math.log10(rate / 1e-2) ** 2 + 0.1 * math.log10(times / 100) ** 2

    records, trained = _first_grid(template, bowl), []
    rounds, stopped = tune_to_the_edges(
        "kerple-log", KERPLE, records, _run_on(bowl, template, trained)
    )
    assert trained == [
        ("tune-edge-1-rate", [(3e-2, 30.0)]),
        ("tune-edge-1-multiplier", [(1e-2, 100.0)]),
        ("tune-edge-2-rate", [(3e-3, 100.0), (3e-2, 100.0)]),
        ("tune-edge-2-multiplier", [(1e-2, 300.0)]),
    ]
    assert [r["round"] for r in rounds] == [1, 2] and stopped == []
    assert "multiplier, 30, is the largest" in rounds[0]["settings"][1]["why"]
    best = best_training(sweep_points(*records.values()))["kerple-log"]
    assert (best.learning_rate, best.position_lr_multiplier) == (1e-2, 100.0)


def test_the_judge_stops_after_its_rounds_and_says_why(template):
    # ever better with a faster position rate: no round finds the inside
    def bowl(rate, times):
        return 2 + math.log10(rate / 3e-3) ** 2 - 0.1 * math.log10(times)

    records, trained = _first_grid(template, bowl), []
    rounds, stopped = tune_to_the_edges(
        "kerple-log", KERPLE, records, _run_on(bowl, template, trained)
    )
    assert len(rounds) == EDGE_ROUNDS
    assert [t[1][-1][1] for t in trained if t[0].endswith("multiplier")] == [
        100.0,
        300.0,
        1000.0,
    ]
    # the multiplier at its limit, and the rates never tried at 1000 times
    assert stopped[0] == (
        "the best setting's position-rate multiplier, 1000, is the largest tried "
        "at learning rate 0.003; 3000 would leave the range 0.01-1000"
    )
    assert stopped[-1] == (
        f"after {EDGE_ROUNDS} rounds beyond the edge (--edge-rounds {EDGE_ROUNDS}) "
        "the best setting still sits at one"
    )
