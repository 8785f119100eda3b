"""Per-round ratios (benchmarks.round_ratios): the ratio of two rows in each round
they were both timed in, checked against a loop written out here and numpy's
percentiles, and what the table and the quoting rule make of it (chapter 10)."""

from __future__ import annotations

import numpy as np
import pytest
from printed_tables import cell

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks import timing as bench
from pe_tutorial.benchmarks._core import merge_runs
from pe_tutorial.benchmarks.quoting import (
    NoisyRow,
    check_quotable,
    check_ratio_quotable,
    ratio_text,
    within_noise,
)
from pe_tutorial.benchmarks.round_ratios import (
    RoundRatio,
    per_round,
    round_ratio,
    unpaired_reason,
)

# a machine whose load drifts: every row's k-th sample is scaled by DRIFT[k]
DRIFT = [1.0, 1.9, 0.7, 2.6, 1.2, 3.1, 0.9, 1.5, 2.2, 1.1]


def _row(name, times, rounds="p-0", **kwargs):
    return bench.Timing(name, list(times), rounds=rounds, **kwargs)


def _drifting_pair(factor=2.0, jitter=None):
    jitter = jitter or [1.0] * len(DRIFT)
    fast = _row("fast", [d for d in DRIFT])
    slow = _row("slow", [factor * d * j for d, j in zip(DRIFT, jitter)])
    return slow, fast


def test_the_ratio_in_each_round_cancels_a_drift_that_stars_both_rows():
    slow, fast = _drifting_pair(2.0)
    assert slow.noisy and fast.noisy  # the drift spreads each row's own samples
    ratio = round_ratio(slow, fast)
    assert ratio.ratios == pytest.approx([2.0] * len(DRIFT))
    assert ratio.spread == 0.0 and not ratio.noisy
    # the rows' own rule would refuse; the per-round rule quotes, with its range
    with pytest.raises(NoisyRow):
        check_quotable(slow, fast)
    check_ratio_quotable(slow, fast)
    assert ratio_text(slow, fast) == "2.00 times (2.00-2.00 per round)"
    assert not within_noise(slow, fast)


def test_the_median_and_quartiles_match_a_loop_and_numpy():
    jitter = [1.0, 1.1, 0.95, 1.3, 1.02, 0.9, 1.2, 1.05, 0.97, 1.15]
    slow, fast = _drifting_pair(1.5, jitter)
    expected = []
    for k in range(len(DRIFT)):  # the ratio, round by round, written out
        expected.append(slow.times_ms[k] / fast.times_ms[k])
    ratio = round_ratio(slow, fast)
    assert list(ratio.ratios) == pytest.approx(expected)
    assert ratio.median == pytest.approx(float(np.median(expected)))
    q1, q3 = np.percentile(expected, [25, 75])
    assert ratio.quartiles == pytest.approx((q1, q3))
    assert ratio.spread == pytest.approx((q3 - q1) / np.median(expected))
    # the ratio of the medians is another number: the rounds are what is quoted
    assert abs(slow.median_ms / fast.median_ms - ratio.median) > 1e-3
    assert ratio_text(slow, fast).startswith(f"{np.median(expected):.2f} times (")


def test_a_ratio_whose_rounds_disagree_is_refused():
    jitter = [1.0, 2.0, 0.5, 1.8, 0.6, 2.2, 0.7, 1.9, 0.4, 1.0]
    slow, fast = _drifting_pair(2.0, jitter)
    assert round_ratio(slow, fast).noisy
    with pytest.raises(NoisyRow, match="the middle half of its rounds"):
        ratio_text(slow, fast)


def test_a_ratio_is_within_noise_when_its_rounds_straddle_one():
    jitter = [0.45, 0.55, 0.5, 0.52, 0.48, 0.56, 0.44, 0.51, 0.49, 0.53]
    slow, fast = _drifting_pair(2.0, jitter)  # about 1.0, either side
    ratio = round_ratio(slow, fast)
    assert ratio.quartiles[0] <= 1.0 <= ratio.quartiles[1] and ratio.within_noise
    assert within_noise(slow, fast)
    assert ratio_text(slow, fast).endswith("(within noise)")


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"rounds": None}, "no rounds"),
        ({"rounds": "p-1"}, "separate measurements"),
        ({"calls_per_sample": 4}, "sampled unlike"),
        ({"times_ms": DRIFT[:-1]}, "numbers of rounds"),
        ({"process_counts": [5, 5]}, "numbers of rounds"),
    ],
)
def test_rows_not_timed_in_the_same_rounds_have_no_per_round_ratio(change, reason):
    slow, fast = _drifting_pair(2.0)
    for key, value in change.items():
        setattr(fast, key, value)
    assert reason in unpaired_reason(slow, fast)
    assert per_round(slow, fast) is None
    with pytest.raises(ValueError, match="no per-round ratio"):
        round_ratio(slow, fast)


def test_rows_timed_apart_keep_the_ratio_of_medians_and_the_rows_rule():
    a = _row("a", [2.0, 2.1, 2.2, 2.0], rounds="p-0")
    b = _row("b", [1.0, 1.05, 1.0, 1.1], rounds="p-1")
    assert ratio_text(a, b) == f"{a.median_ms / b.median_ms:.2f} times"
    noisy = _row("n", [1.0, 3.0, 1.0, 3.0], rounds="p-2")
    with pytest.raises(NoisyRow, match="row marked noisy"):
        ratio_text(a, noisy)


def test_each_process_median_is_the_median_of_its_own_rounds():
    ratio = RoundRatio("a", "b", (1.0, 1.2, 1.1, 2.0, 2.4, 2.2), 1, (3, 3))
    assert ratio.process_medians == pytest.approx([1.1, 2.2])
    assert ratio.process_spread == pytest.approx((2.2 - 1.1) / ratio.median)
    assert ratio.noisy and "2 processes' medians 1.10-2.20" in ratio.noise_text()
    assert RoundRatio("a", "b", (1.0, 1.1), 1, None).process_medians is None


def test_measure_times_every_row_of_a_call_in_the_same_rounds(monkeypatch):
    """Sample k of every row is from round k: a clock that counts calls makes each
    row's samples rise round by round, and a round's samples sit within one
    round's calls of each other."""
    clock = iter(range(10_000))
    monkeypatch.setattr(
        bench, "_time_once", lambda fn, device, calls=1: (float(next(clock)), None)
    )
    cases = [bench.Case(name, lambda: None) for name in "abc"]
    rows = bench.measure(cases, device="cpu", warmup=0, repeats=6, copy_baselines=False)
    assert len({t.rounds for t in rows}) == 1 and rows[0].rounds is not None
    for k in range(6):
        in_round = [t.times_ms[k] for t in rows]
        assert max(in_round) - min(in_round) < len(rows)
        assert sorted(in_round) == [3 * k + i for i in range(3)]
    again = bench.measure(
        cases[:2], device="cpu", warmup=0, repeats=2, copy_baselines=False
    )
    assert again[0].rounds != rows[0].rounds  # another measurement, no pairing
    assert per_round(rows[0], again[0]) is None


def _process(times, copies, rounds):
    rows = [
        bench.Timing(
            "rope", list(times), bytes_moved=64, allocates=True, rounds=rounds
        ),
        bench.Timing(
            "clone",
            list(copies),
            bytes_moved=64,
            is_copy=True,
            allocates=True,
            rounds=rounds,
        ),
    ]
    return benchmarks.SuiteResult("integer_tables", {"device": "cpu"}, rows)


def test_a_recording_merged_from_processes_keeps_each_process_rounds():
    merged = merge_runs(
        [
            _process([2.0, 4.0, 2.2], [1.0, 2.0, 1.0], "10-0"),
            _process([3.0, 6.0], [1.0, 2.0], "11-0"),
        ]
    )
    rope, clone = merged.timing("rope"), merged.timing("clone")
    assert rope.process_counts == [3, 2] == clone.process_counts
    ratio = round_ratio(rope, clone)
    assert ratio.ratios == pytest.approx([2.0, 2.0, 2.2, 3.0, 3.0])
    assert ratio.process_medians == pytest.approx([2.0, 3.0])


def test_the_table_shows_per_round_ratios_and_stars_a_noisy_one():
    slow, fast = _drifting_pair(2.0)
    table = bench.format_table([slow, fast], reference="fast")
    # median/median would be 2.00 too: see below
    assert cell(table, "slow", "x ref") == "2.00"
    assert "ratios taken round by round" in table
    jitter = [1.0, 1.1, 0.95, 1.3, 1.02, 0.9, 1.2, 1.05, 0.97, 1.15]
    slow, fast = _drifting_pair(1.5, jitter)
    table = bench.format_table([slow, fast], reference="fast")
    assert cell(table, "slow", "x ref") == f"{round_ratio(slow, fast).median:.2f}"
    assert cell(table, "slow", "x ref") != f"{slow.median_ms / fast.median_ms:.2f}"
    jitter = [1.0, 2.0, 0.5, 1.8, 0.6, 2.2, 0.7, 1.9, 0.4, 1.0]
    slow, fast = _drifting_pair(2.0, jitter)
    table = bench.format_table([slow, fast], reference="fast")
    assert cell(table, "slow", "x ref").endswith(" *")
