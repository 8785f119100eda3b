"""The chapter-9 reading helpers, on entries built by hand (values worked out below)."""

import math

import pytest

from pe_tutorial.experiments.results import entry as run_entry
from pe_tutorial.lm.findings import (
    ONE_SEED,
    Gap,
    change,
    compare,
    find,
    glue_gap,
    language_entry,
    mean_at,
    paired_change,
    position_mean,
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


def test_glue_gap_glues_the_difference_and_its_verdict():
    from pe_tutorial.pages.glue import GLUED

    gap = glue_gap("a_b", A, B, 4)
    assert gap == compare(A, B, 4)
    assert GLUED["a_b_gap"] == pytest.approx(-0.4)
    assert GLUED["a_b_verdict"] == "beyond the seeds' spread"


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


def test_glue_gap_on_one_seed_glues_that_there_is_no_verdict():
    from pe_tutorial.pages.glue import GLUED

    gap = glue_gap("one_a_b", ONE_A, ONE_B, 4)
    assert gap.n == 1
    assert GLUED["one_a_b_verdict"] == ONE_SEED
