"""The recorded timing runs the chapters quote match today's code (chapter 10).

A record is made once and read on every build; the suites keep changing. Each
quoted record must hold the rows today's suite times (a row added to a suite
since is a record to make again, not a row the page silently lacks), the
settings keys today's suite writes, the rounds per-round ratios need, and the
processes a recording is made in.
"""

from __future__ import annotations

import pytest
import torch

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks import SUITES

CPU = torch.device("cpu")


def _rows_today(name: str) -> tuple[list[str], set[str]]:
    """The names of the rows (copies left out) and the settings keys that suite
    ``name`` builds today on the CPU at its default sizes, as a recording builds
    it (building checks each row's result once and times nothing: about 40 s for
    all the suites on the project's 2-core machine, most of it the rope and
    attention suites' checks at full size)."""
    suite = SUITES[name]
    dtype = benchmarks.suites.check_dtype(suite, None, CPU)
    plan = suite.build(CPU, dtype)
    rows = [case.name for case in plan.cases if not case.is_copy]
    return rows, {"dtype", *plan.settings}


@pytest.mark.parametrize("name", sorted(SUITES))
def test_the_quoted_record_holds_todays_rows_and_settings(name):
    record = benchmarks.quoted(name)
    rows, keys = _rows_today(name)
    recorded = [t.name for t in record.timings if not t.is_copy]
    missing = [row for row in rows if row not in recorded]
    assert not missing, (
        f"the recorded {name} run lacks rows today's suite times: {missing}; record "
        f"it again: python -m pe_tutorial.benchmarks {name} --device cpu --record "
        "--processes 3"
    )
    gone = [row for row in recorded if row not in rows]
    assert not gone, f"the recorded {name} run has rows today's suite has not: {gone}"
    assert keys <= set(record.settings), (
        f"the recorded {name} run lacks settings keys: {sorted(keys - set(record.settings))}"
    )


@pytest.mark.parametrize("name", sorted(SUITES))
def test_the_quoted_record_was_made_for_per_round_ratios(name):
    record = benchmarks.quoted(name)
    assert record.environment.get("processes", 1) >= 3, name
    assert record.busy is None, f"{name}: {record.busy}"
    for row in record.timings:
        assert row.rounds is not None and row.process_counts, (name, row.name)
        assert len(row.process_counts) == record.environment["processes"]
        assert sum(row.process_counts) == len(row.times_ms)


def test_the_profile_record_spans_three_processes_of_fifteen_steps():
    record = benchmarks.quoted("train_step_profile")
    assert record.environment["processes"] >= 3
    assert record.settings["profile_steps"] >= 15
    profile = benchmarks.step_profile.StepProfile.from_dict(record.settings["profile"])
    assert profile is not None
