"""The chapter-9 reading helpers, on entries built by hand (values worked out below)."""

import math

import numpy as np
import pytest

import pe_tutorial as pe
from pe_tutorial.experiments.records.results import entry as run_entry
from pe_tutorial.lm.findings import (
    ONE_SEED,
    Gap,
    Interval,
    bootstrap_interval,
    change,
    compare,
    find,
    language_entry,
    mean_at,
    paired_change,
    position_mean,
    reading_entry,
    scheme_rate,
    segment_interval,
    spread_rule_rates,
    stats_at,
    train_gap,
)


def entry(name, by_seed, train_split=None):
    """An entry like the recorder's: one run per list of values at lengths 4 and 8."""
    runs = [
        {
            "seed": s,
            "bpb": {"4": v4, "8": v8},
            "train_split_bpb": (train_split or [0] * 9)[s],
        }
        for s, (v4, v8) in enumerate(by_seed)
    ]
    return run_entry({"scheme": name, "norm": "pre"}, runs)


A = entry("a", [(2.0, 2.1), (2.2, 2.3), (2.1, 2.2)], train_split=[1.9, 2.0, 2.1])
B = entry("b", [(2.5, None), (2.6, None), (2.4, None)])
RESULTS = {"language_model": [A, B], "settings": {}}


def test_the_summary_is_mean_and_sample_std():
    stats = stats_at(A, 4)
    assert stats["mean"] == pytest.approx(2.1)
    assert stats["std"] == pytest.approx(0.1)  # deviations -0.1, 0.1, 0: sqrt(0.02 / 2)
    assert mean_at(B, 8) is None


def test_compare_weighs_the_gap_against_both_spreads():
    gap = compare(A, B, 4)
    assert gap.difference == pytest.approx(-0.4)
    assert gap.spread == pytest.approx(0.2)
    assert gap.n == 3 and gap.weighed
    assert gap.separated and gap.verdict == "beyond the seeds' spread"
    close = Gap(0.15, 0.2, 3)
    assert not close.separated and "within noise" in str(close)
    # exactly at the spread is not beyond it
    assert not Gap(-0.2, 0.2, 2).separated


def test_paired_change_uses_the_spread_of_the_differences():
    # every seed rises by exactly 0.1: no spread at all, so it is separated
    gap = paired_change(A, 4, 8)
    assert gap.difference == pytest.approx(0.1)
    assert gap.spread == pytest.approx(0.0, abs=1e-12)
    assert gap.n == 3 and gap.separated
    # unpaired, the same change is lost in the spread of the two lengths
    assert not change(A, 4, 8).separated


def test_train_gap_is_validation_minus_train_split_per_seed():
    gap = train_gap(A, 4)
    # differences 0.1, 0.2, 0.0
    assert gap.difference == pytest.approx(0.1)
    assert gap.spread == pytest.approx(0.1)
    assert gap.n == 3


def test_find_names_one_entry_or_says_why_not():
    assert find(RESULTS, "language_model", scheme="b") is B
    with pytest.raises(ValueError, match="2 entries of 'language_model'"):
        find(RESULTS, "language_model", norm="pre")
    with pytest.raises(ValueError, match="no section 'passkey'.*language_model"):
        find(RESULTS, "passkey", scheme="a")


def test_missing_lengths_are_clear_errors():
    with pytest.raises(ValueError, match="no length 16.*'4', '8'"):
        stats_at(A, 16)
    with pytest.raises(ValueError, match="no value at length 8"):
        compare(A, B, 8)
    with pytest.raises(ValueError, match="no value at length 4 or 8"):
        paired_change(B, 4, 8)


def test_gap_text_has_the_sign_and_the_verdict():
    assert str(Gap(0.25, 0.1, 3)) == "+0.250 (spread 0.100: beyond the seeds' spread)"
    assert math.isclose(Gap(-0.3, 0.1, 3).difference, -0.3)


def test_position_mean_averages_the_bins_then_the_seeds():
    runs = [
        {"position_bpb": [1.0, 2.0, 3.0, 4.0]},  # bins of 2 positions: 0-1, 2-3, ...
        {"position_bpb": [3.0, 4.0, 5.0, 6.0]},
    ]
    curve = {"runs": runs}
    assert position_mean(curve, 0, 4, 2) == pytest.approx((1.5 + 3.5) / 2)
    assert position_mean(curve, 4, 8, 2) == pytest.approx((3.5 + 5.5) / 2)
    assert position_mean({"runs": [{"position_bpb": None}]}, 0, 2, 2) is None
    with pytest.raises(ValueError, match="on the bin edges"):
        position_mean(curve, 1, 4, 2)
    with pytest.raises(ValueError, match="covers 8 positions, not 10"):
        position_mean(curve, 0, 10, 2)
    # the context gain by position, read the same way; a run without it is an error
    gains = {"runs": [{"position_gain": [0.0, 0.0, 0.5, 1.5]}]}
    assert position_mean(gains, 4, 8, 2, key="position_gain") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="keep no 'position_gain'"):
        position_mean(curve, 0, 4, 2, key="position_gain")


def test_language_entry_defaults_to_the_plain_variant():
    fields = {"norm": "pre", "absolute": "input", "corpus": "stdlib", "changes": {}}
    plain = {**A, **fields, "learning_rate": 3e-3}
    fast = {**A, **fields, "learning_rate": 1e-2}
    ablated = {**A, **fields, "learning_rate": 3e-3, "changes": {"t5_max_distance": 9}}
    results = {
        "language_model": [plain, fast, ablated],
        "settings": {"train": {"learning_rate": 3e-3}},
    }
    assert language_entry(results, "a") is plain
    assert language_entry(results, "a", learning_rate=1e-2) is fast
    assert language_entry(results, "a", changes={"t5_max_distance": 9}) is ablated
    with pytest.raises(ValueError, match="0 entries"):
        language_entry(results, "a", norm="post")
    # a scheme tuned to its own rate ([tuned]): its plain variant is the one at it
    results["settings"]["tuned"] = {"a": {"learning_rate": 1e-2}}
    assert scheme_rate(results["settings"], "a") == 1e-2
    assert scheme_rate(results["settings"], "b") == 3e-3
    assert language_entry(results, "a") is fast


# one seed (the quick preset): a std of 0 for want of a second run, not agreement
ONE_A = entry("a", [(2.0, 2.1)], train_split=[1.9])
ONE_B = entry("b", [(2.5, 2.9)])


def test_one_seed_gives_no_verdict_of_spread():
    gaps = {
        "compare": compare(ONE_A, ONE_B, 4),
        "change": change(ONE_A, 4, 8),
        "paired_change": paired_change(ONE_B, 4, 8),
        "train_gap": train_gap(ONE_A, 4),
        # one side of three seeds, the other of one: the gap rests on one
        "mixed": compare(A, ONE_B, 4),
    }
    for name, gap in gaps.items():
        assert gap.n == 1 and not gap.weighed, name
        assert gap.verdict == ONE_SEED == "one seed: no spread to weigh", name
        assert "beyond" not in gap.verdict and "beyond" not in str(gap), name
        assert "within noise" not in str(gap), name
        # neither claim can be made: asking raises instead of answering False
        with pytest.raises(ValueError, match="one seed.*no spread to weigh"):
            _ = gap.separated
    assert gaps["compare"].difference == pytest.approx(-0.5)
    assert str(gaps["compare"]) == "-0.500 (one seed: no spread to weigh)"
    # a large difference is no more separated on one seed than a small one
    assert Gap(5.0, 0.0, 1).verdict == ONE_SEED


def test_two_seeds_or_more_keep_the_rule():
    assert Gap(0.25, 0.1, 2).separated and Gap(0.25, 0.1, 2).weighed
    assert not Gap(0.05, 0.1, 2).separated
    assert Gap(0.01, 0.0, 2).verdict == "beyond the seeds' spread"
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n .the seeds behind the gap."):
            Gap(0.1, 0.1, n)


def test_a_constant_difference_has_a_zero_width_interval_at_it():
    a = [[1.25 + k for k in range(50)] for _ in range(3)]
    b = [[1.0 + k for k in range(50)] for _ in range(3)]
    interval = bootstrap_interval(a, b)
    assert (
        interval.mean == interval.low == interval.high == pytest.approx(0.25, abs=1e-12)
    )
    assert (interval.seeds, interval.segments, interval.level) == (3, 50, 0.95)
    assert interval.excludes_zero and interval.verdict == "0 outside the 95% interval"


def test_the_interval_is_written_and_read_plainly():
    interval = Interval(
        mean=0.023, low=0.011, high=0.035, seeds=3, segments=64, level=0.95
    )
    assert str(interval) == "+0.023 [+0.011, +0.035] (95%, 3 seeds × 64 segments)"
    straddling = Interval(
        mean=0.01, low=-0.02, high=0.04, seeds=1, segments=1, level=0.9
    )
    assert not straddling.excludes_zero
    assert straddling.verdict == "0 inside the 90% interval (within noise)"
    assert str(straddling) == "+0.010 [-0.020, +0.040] (90%, 1 seed × 1 segment)"
    assert Interval(-0.3, -0.4, -0.2, 3, 64, 0.95).excludes_zero


def test_segment_noise_gives_the_textbook_width_and_covers_the_mean():
    """Segments differ by N(0, sigma) and seeds agree: the interval is the mean +- 1.96 sigma / sqrt(K)."""
    mu, sigma, seeds, segments = 0.3, 1.0, 5, 400
    textbook = 2 * 1.96 * sigma / math.sqrt(segments)
    covered = 0
    for trial in range(40):
        generator = np.random.default_rng(trial)
        per_segment = generator.normal(mu, sigma, segments)
        values = per_segment + generator.normal(0, 0.05, (seeds, segments))
        interval = bootstrap_interval(values.tolist(), draws=1000, seed=trial)
        assert textbook / 1.5 < interval.high - interval.low < textbook * 1.5
        covered += interval.low <= mu <= interval.high
    assert covered >= 34  # about 95% of 40


def test_cell_noise_is_counted_at_both_levels_so_the_interval_is_wider():
    """Independent N(mu, sigma) in every cell: about sqrt(3) times the textbook width, never narrower."""
    mu, sigma, seeds, segments = -0.2, 1.0, 10, 400
    values = np.random.default_rng(7).normal(mu, sigma, (seeds, segments))
    interval = bootstrap_interval(values.tolist())
    textbook = 2 * 1.96 * sigma / math.sqrt(seeds * segments)
    assert interval.low <= mu <= interval.high
    assert 1.3 * textbook < interval.high - interval.low < 2.2 * textbook
    assert interval == bootstrap_interval(values.tolist())  # seeded: the same again


def test_pairing_by_segment_removes_the_shared_segment_component():
    generator = np.random.default_rng(3)
    shared = generator.normal(0, 1.0, 200)  # how hard each segment is, for both models
    a = shared + 0.1 + generator.normal(0, 0.01, (3, 200))
    b = shared + generator.normal(0, 0.01, (3, 200))
    paired = bootstrap_interval(a.tolist(), b.tolist())
    alone_a, alone_b = bootstrap_interval(a.tolist()), bootstrap_interval(b.tolist())
    unpaired_width = math.hypot(alone_a.high - alone_a.low, alone_b.high - alone_b.low)
    assert paired.mean == pytest.approx(0.1, abs=0.005)
    assert paired.high - paired.low < 0.1 * unpaired_width
    assert paired.excludes_zero


@pytest.mark.parametrize(
    "a, b, options, message",
    [
        ([], None, {}, "values_a must be a non-empty list"),
        ([[]], None, {}, "same, non-zero number of segments"),
        (
            [[1.0, 2.0], [1.0]],
            None,
            {},
            r"same, non-zero number of segments .*\[2, 1\]",
        ),
        (
            [[1.0, 2.0]],
            [[1.0, 2.0], [3.0, 4.0]],
            {},
            "values_a has 1 seeds x 2 segments",
        ),
        ([[1.0, 2.0]], [[1.0, 2.0, 3.0]], {}, "and values_b 1 x 3"),
        ([[1.0, float("nan")]], None, {}, "not finite"),
        ([[1.0, "x"]], None, {}, r"values_a\[0\] must be a list of numbers"),
        ([[1.0, 2.0]], None, {"level": 1.0}, "level must be a number in \\(0, 1\\)"),
        ([[1.0, 2.0]], None, {"draws": 0}, "draws must be a positive integer"),
    ],
)
def test_bad_values_are_refused(a, b, options, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(a, b, **options)


def test_segment_interval_reads_an_entry_s_segments_at_a_length():
    def runs(offset):
        return [
            {
                "segment_bpb": {"16": [2.0 + offset, 2.2 + offset, 2.4 + offset]},
                "context_gain": {"32": [-0.1, -0.1, -0.1]},
            }
            for _ in range(3)
        ]

    a, b = {"runs": runs(0.5)}, {"runs": runs(0.0)}
    alone = segment_interval(a, 16)
    assert alone.mean == pytest.approx(2.7) and (alone.seeds, alone.segments) == (3, 3)
    # b's segments sit 0.5 below a's, segment by segment: no spread at all
    paired = segment_interval(a, 16, b)
    assert paired.mean == pytest.approx(0.5) and paired.low == pytest.approx(0.5)
    gain = segment_interval(a, 32, key="context_gain")
    assert gain.high == pytest.approx(-0.1) and gain.excludes_zero
    with pytest.raises(ValueError, match="no 'segment_bpb' at length 64; it has"):
        segment_interval(a, 64)
    with pytest.raises(ValueError, match="keep no 'segment_bpb'"):
        segment_interval({"runs": [{"bpb": {}}]}, 16)
    with pytest.raises(ValueError, match="could not read length 16"):
        segment_interval({"runs": [{"segment_bpb": {"16": None}}]}, 16)


# ---------------------------------------------------------------------------
# what the spread rule means: its false alarms and its power, by simulation
# ---------------------------------------------------------------------------


def test_two_seeds_false_alarm_matches_the_solid_angle():
    """With two seeds a sample std is |x1 - x2| / sqrt(2), a |N(0, 1)|, and the mean
    gap is N(0, 1) independent of both, so a false alarm is |Z0| > |Z1| + |Z2| for
    three standard normals: by rotational symmetry the share of the sphere in that
    double square cone, 2 * 4 arcsin(1/3) / (4 pi) = 0.2163."""
    exact = 2 * math.asin(1 / 3) / math.pi
    rate = spread_rule_rates(2, (0.0,), draws=200_000)[0.0]
    assert rate == pytest.approx(exact, abs=0.004)


def test_the_simulated_rule_is_the_rule_compare_applies():
    """The same draws, put through compare() as entries of seeds: the same calls."""
    seeds, draws, difference = 3, 300, 1.0
    generator = np.random.default_rng(5)
    a = generator.standard_normal((draws, seeds))
    b = generator.standard_normal((draws, seeds))
    called = 0
    for row_a, row_b in zip(a + difference, b):
        ea = entry("a", [(float(v), 0.0) for v in row_a])
        eb = entry("b", [(float(v), 0.0) for v in row_b])
        called += compare(ea, eb, 4).separated
    rates = spread_rule_rates(seeds, (difference,), draws=draws, seed=5)
    assert rates[difference] == called / draws


def test_more_seeds_fewer_false_alarms_and_larger_gaps_seen_more_often():
    rates = {n: spread_rule_rates(n, (0.0, 1.0, 3.0), draws=40_000) for n in (2, 3, 6)}
    assert rates[2][0.0] > rates[3][0.0] > rates[6][0.0]
    for by_gap in rates.values():
        assert by_gap[0.0] < by_gap[1.0] < by_gap[3.0]


@pytest.mark.parametrize(
    "arguments, message",
    [((1,), "two seeds or more"), ((3, (math.nan,)), "finite"), ((0,), "seeds")],
)
def test_the_rates_refuse_what_has_no_answer(arguments, message):
    with pytest.raises(ValueError, match=message):
        spread_rule_rates(*arguments, draws=10)


def test_a_reading_recorded_beside_a_run_is_an_entry_like_any_other():
    """Gemma 3's pattern read with its global layers interpolated (chapter 12):
    the runs' second reading, with the summary a recorded entry would have."""
    runs = [
        {"seed": s, "bpb": {"8": 2.0}, "global_interpolation": {"8": {"8": v, "16": w}}}
        for s, v, w in ((0, 2.1, 2.5), (1, 2.3, 2.9), (2, 2.2, None))
    ]
    read = reading_entry({"runs": runs}, "global_interpolation", "8")
    assert [r["seed"] for r in read["runs"]] == [0, 1, 2]
    assert read["runs"][1]["bpb"] == {"8": 2.3, "16": 2.9}
    expected = run_entry({}, [{"bpb": {"8": v}} for v in (2.1, 2.3, 2.2)])
    assert read["summary"]["8"] == pytest.approx(expected["summary"]["8"])
    assert read["summary"]["16"] is None  # a seed could not read it
    assert mean_at(read, 8) == pytest.approx(2.2)
    with pytest.raises(KeyError, match="seed 0 has no reading global_interpolation/4"):
        reading_entry({"runs": runs}, "global_interpolation", "4")


def _curve_entry(steps, mean):
    return {"curve": {"steps": steps, "mean": mean, "std": [0.0] * len(steps)}}


def test_end_slope_is_the_least_squares_fall_of_the_last_tenth():
    steps = list(range(100, 3300, 100))  # 32 readings, as the long-budget run's
    # a curve falling 0.02 per 100 steps, then 0.005 over the last tenth
    mean = [
        3.0 - 0.0002 * s if s < 2900 else 2.42 - 0.00005 * (s - 2900) for s in steps
    ]
    assert pe.end_slope(_curve_entry(steps, mean)) == pytest.approx(0.005)
    # over the last half the early, steeper fall weighs in
    assert pe.end_slope(_curve_entry(steps, mean), share=0.5) > 0.01


def test_end_slope_against_numpy_polyfit_on_a_noisy_curve():
    rng = np.random.default_rng(0)
    steps = list(range(40, 840, 40))  # 720, the last tenth's first step, is read
    mean = list(3 - np.log(np.array(steps)) / 5 + rng.normal(0, 0.01, len(steps)))
    last = [(s, y) for s, y in zip(steps, mean) if s >= 0.9 * 800]
    slope = np.polyfit([s for s, _ in last], [y for _, y in last], 1)[0]
    assert pe.end_slope(_curve_entry(steps, mean)) == pytest.approx(-100 * slope)


def test_end_slope_is_zero_on_a_flat_curve_and_negative_on_a_rising_one():
    steps = [100, 200, 300, 400]
    assert pe.end_slope(_curve_entry(steps, [2.0] * 4), share=0.5) == 0
    assert pe.end_slope(_curve_entry(steps, [2.0, 2.1, 2.2, 2.3]), share=0.5) < 0


@pytest.mark.parametrize(
    "entry, share, message",
    [
        (_curve_entry([100, 200, 300, 400], [3, 2, 1, 0]), 0.1, "holds 1 reading"),
        ({"runs": []}, 0.1, "no learning curve"),
        (_curve_entry([100, 200], [3, 2]), 0, "fraction of training"),
    ],
)
def test_end_slope_refuses_what_it_cannot_read(entry, share, message):
    with pytest.raises(ValueError, match=message):
        pe.end_slope(entry, share=share)
