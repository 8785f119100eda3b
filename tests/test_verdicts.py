"""The verdict function (pe_tutorial.lm.verdicts, issue 47): Student's t against its
published values and closed forms, Holm against a worked example, and the verdicts on
simulated runs with known effects: nominal coverage, pairing, clustering by file, and
a family-wise error that stays at alpha (a seeded "always significant" bug is caught)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pe_tutorial.lm import verdicts
from pe_tutorial.lm.verdicts import (
    holm,
    paired_verdict,
    student_t_cdf,
    student_t_quantile,
    verdict_family,
)


# the two-sided 95% critical values of Student's t, as printed in every table
@pytest.mark.parametrize(
    "df, critical",
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (10, 2.228), (30, 2.042)],
)
def test_student_t_meets_the_published_critical_values(df, critical):
    assert student_t_cdf(critical, df) == pytest.approx(0.975, abs=2e-4)
    assert student_t_quantile(0.975, df) == pytest.approx(critical, abs=2e-3)
    assert student_t_cdf(-critical, df) == pytest.approx(0.025, abs=2e-4)


@pytest.mark.parametrize("t", [-7.0, -1.0, 0.0, 0.3, 2.0, 40.0])
def test_student_t_agrees_with_closed_forms(t):
    # one degree of freedom is Cauchy's; two have F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
    assert student_t_cdf(t, 2) == pytest.approx(
        0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12
    )


def test_holm_adjusts_a_worked_example():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_a_paired_verdict_is_the_paired_t_test():
    """Chapter 9's Shaw - T5 at L, seed by seed (the issue's numbers)."""
    shaw = {0: 2.000, 1: 2.010, 2: 2.020}
    t5 = {0: 2.011, 1: 2.026, 2: 2.035}
    d = np.array([shaw[s] - t5[s] for s in (0, 1, 2)])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    p = 2 * (1 - (0.5 + abs(t) / (2 * math.sqrt(2 + t * t))))  # df = 2, closed form
    half = 4.302653 * d.std(ddof=1) / math.sqrt(3)
    verdict = paired_verdict(shaw, t5, label="Shaw - T5 at L")
    assert verdict.difference == pytest.approx(d.mean())
    assert verdict.p == pytest.approx(p, rel=1e-6)
    assert (verdict.low, verdict.high) == pytest.approx(
        (d.mean() - half, d.mean() + half), rel=1e-5
    )
    assert verdict.n == 3 and verdict.files is None and verdict.real
    words = verdict.words
    assert words.startswith("Shaw - T5 at L: -0.014 (95% interval [")
    assert "paired by seed, n = 3" in words and "uncorrected" in words
    # with a family of 40 such claims, Holm asks for more than three seeds give
    family = verdict_family("ranking at L", [verdict] + [verdict] * 39)
    assert not family[0].real
    assert "Holm-adjusted p = " in family[0].words
    assert "in the family 'ranking at L' of 40 claims): not shown to differ" in str(
        family[0]
    )


def test_nominal_coverage_on_simulated_seeds():
    """95% intervals of 3 and of 8 seeds cover the true difference about 95% of the time."""
    generator = np.random.default_rng(1)
    for n in (3, 8):
        covered = 0
        trials = 1500
        for _ in range(trials):
            d = generator.normal(0.2, 1.0, n)
            v = paired_verdict({s: d[s] for s in range(n)}, {s: 0.0 for s in range(n)})
            covered += v.low <= 0.2 <= v.high
        assert abs(covered / trials - 0.95) < 3 * math.sqrt(0.95 * 0.05 / trials), n


def _unpaired_half_width(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's 95% half-width, as if the runs were independent."""
    error = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    df = error**4 / (
        (a.var(ddof=1) / len(a)) ** 2 / (len(a) - 1)
        + (b.var(ddof=1) / len(b)) ** 2 / (len(b) - 1)
    )
    return student_t_quantile(0.975, df) * error


def test_pairing_is_narrower_when_seeds_share_noise():
    """Runs of one seed share its batches: most of their noise cancels in d_r."""
    generator = np.random.default_rng(2)
    shared = generator.normal(0, 0.05, 5)  # what a seed does to both schemes
    a = 2.0 + shared + generator.normal(0, 0.003, 5)
    b = 2.01 + shared + generator.normal(0, 0.003, 5)
    v = paired_verdict(dict(enumerate(a)), dict(enumerate(b)))
    assert (v.high - v.low) / 2 < _unpaired_half_width(a, b) / 5
    assert v.real and v.difference < 0


def _clustered_runs(generator, seeds=3, files=12, per_file=5, effect=0.0):
    """Per-segment values of two schemes whose difference varies strongly by file."""
    file_effect = generator.normal(0, 0.05, files)
    segments = files * per_file
    file_of = np.repeat(np.arange(files), per_file)
    a, b = {}, {}
    for s in range(seeds):
        base = generator.normal(2.0, 0.1, segments)
        a[s] = list(
            base + effect + file_effect[file_of] + generator.normal(0, 0.005, segments)
        )
        b[s] = list(base)
    return a, b, [f"file{f}.py" for f in file_of]


def test_resampling_files_is_wider_than_segments_when_files_are_correlated():
    generator = np.random.default_rng(3)
    a, b, files = _clustered_runs(generator)
    by_file = paired_verdict(a, b, files=files)
    by_segment = paired_verdict(a, b, files=[f"segment{i}" for i in range(len(files))])
    assert by_file.files == 12 and by_segment.files == 60
    assert (by_file.high - by_file.low) > 1.5 * (by_segment.high - by_segment.low)
    assert "resampled by file (12 files)" in by_file.words


def _family_error_rate(trials: int = 300, claims: int = 8, seeds: int = 4) -> float:
    """Families of null claims (no difference anywhere): the share with any claim
    called real."""
    generator = np.random.default_rng(4)
    wrong = 0
    for _ in range(trials):
        family = [
            paired_verdict(
                dict(enumerate(generator.normal(0, 1, seeds))),
                dict(enumerate(generator.normal(0, 1, seeds))),
                label=f"claim {c}",
            )
            for c in range(claims)
        ]
        wrong += any(v.real for v in verdict_family("null", family))
    return wrong / trials


def test_the_family_wise_error_stays_at_alpha():
    rate = _family_error_rate()
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300), rate


def test_an_always_significant_bug_is_caught(monkeypatch):
    """The check above fails when the test says 'significant' to everything."""
    monkeypatch.setattr(
        verdicts, "_paired_t", lambda d, level: (d.mean(), d.mean(), 0.0)
    )
    assert _family_error_rate(trials=40) > 0.5


def test_the_crossed_bootstrap_needs_both_tests():
    """A difference every file shows in every seed is real; the same mean carried by
    one file alone is not, though the paired t-test on seed means cannot tell."""
    generator = np.random.default_rng(5)
    a, b, files = _clustered_runs(generator, effect=0.05)
    assert paired_verdict(a, b, files=files).real
    lopsided = {s: list(b[s]) for s in b}
    for s in lopsided:
        lopsided[s][:5] = [v + 0.6 for v in lopsided[s][:5]]  # file 0 only
    seed_only = paired_verdict(
        {s: float(np.mean(lopsided[s])) for s in b},
        {s: float(np.mean(b[s])) for s in b},
    )
    clustered = paired_verdict(lopsided, b, files=files)
    assert seed_only.real and not clustered.real


def _two_by_two():
    """Two seeds x two files (A: 2 segments, B: 6), b all 0. The file means of a are
    0.1, 0.3 (seed 0) and 0.4, 0.2 (seed 1): both seeds' means are 0.25, so the
    paired t-test's interval is a point, and every bootstrap draw is a weighted
    mean of the four file means, at least 0.1 (seed 0, file A) and at most 0.4
    (seed 1, file A), each drawn alone with chance 1/2^2 x 1/2^2 = 1/16 > 2.5%."""
    spread_a, spread_b = [-0.05, 0.05], [-0.1, -0.05, 0.0, 0.0, 0.05, 0.1]
    a = {
        0: [0.1 + e for e in spread_a] + [0.3 + e for e in spread_b],
        1: [0.4 + e for e in spread_a] + [0.2 + e for e in spread_b],
    }
    b = {s: [0.0] * 8 for s in a}
    return a, b, ["A.py"] * 2 + ["B.py"] * 6


def test_the_crossed_bootstrap_interval_is_known_in_closed_form():
    """The percentile interval of the 2 x 2 case is [0.1, 0.4], the extreme file
    means (a draw averages over the segments it holds: dividing by the number of
    files drawn instead makes it [0.2, 1.8])."""
    a, b, files = _two_by_two()
    v = paired_verdict(a, b, files=files, draws=4000)
    assert v.difference == pytest.approx(0.25)
    assert (v.low, v.high) == pytest.approx((0.1, 0.4), abs=1e-12)
    assert v.files == 2 and v.n == 2


def test_the_crossed_bootstrap_p_value_is_at_least_one_over_draws():
    """The 2 x 2 case's file means on six seeds, each a little apart (0.001 a seed):
    every bootstrap draw is above 0, so its p is 0 but for the floor 1 / draws, and
    the t-test's p (below 1e-6) is under the floor, so p is the floor."""
    a, b, files = _two_by_two()
    a = {s: [x + 0.001 * s for x in a[s % 2]] for s in range(6)}
    b = {s: [0.0] * 8 for s in a}
    assert paired_verdict(a, b).p < 1e-6  # per seed alone: no floor
    for draws in (50, 400):
        v = paired_verdict(a, b, files=files, draws=draws)
        assert v.p == pytest.approx(1 / draws, rel=1e-12)


def _naive_crossed_bootstrap(differences, files, draws, generator):
    """Seeds and files drawn with replacement, one draw at a time: the mean of every
    (seed, segment) the draw holds, with each file's segments together."""
    differences = np.asarray(differences)
    names = sorted(set(files))
    segments_of = {f: [i for i, g in enumerate(files) if g == f] for f in names}
    means = []
    for _ in range(draws):
        seeds = generator.integers(0, len(differences), len(differences))
        chosen = generator.integers(0, len(names), len(names))
        columns = [i for f in chosen for i in segments_of[names[f]]]
        means.append(differences[np.ix_(seeds, columns)].mean())
    return np.quantile(means, [0.025, 0.975])


def test_the_crossed_bootstrap_interval_matches_a_naive_loop():
    """On clustered runs (12 files of 5 segments), the interval's ends agree with a
    draw-by-draw resampling to a tenth of its width (Monte Carlo error ~2%); a
    bug that scales a draw by its files, not its segments, is 5 times wide."""
    a, b, files = _clustered_runs(np.random.default_rng(6), effect=0.02)
    differences = np.array([np.subtract(a[s], b[s]) for s in sorted(a)])
    low, high, _ = verdicts._crossed_bootstrap(differences, files, 0.95, 4000, 0)
    naive_low, naive_high = _naive_crossed_bootstrap(
        differences, files, 4000, np.random.default_rng(7)
    )
    width = naive_high - naive_low
    assert abs(low - naive_low) < 0.1 * width and abs(high - naive_high) < 0.1 * width


@pytest.mark.parametrize(
    "a, b, options, message",
    [
        (
            {0: 1.0, 1: 2.0},
            {0: 1.0, 2: 2.0},
            {},
            r"seeds \[1, 2\] are on one side only",
        ),
        # a seed of the second side alone (a one-sided set difference drops it)
        (
            {0: 1.0, 1: 2.0},
            {0: 1.0, 1: 2.0, 2: 3.0},
            {},
            r"seeds \[2\] are on one side only",
        ),
        ({}, {}, {}, "a must be a non-empty dict"),
        ({0: 1.0, 1: float("nan")}, {0: 1.0, 1: 2.0}, {}, "is not finite"),
        (
            {0: [1.0, 2.0]},
            {0: [1.0, 2.0]},
            {"files": ["x"]},
            "the file of each segment",
        ),
        (
            {0: [1.0, 2.0]},
            {0: [1.0, 2.0, 3.0]},
            {},
            "every seed of a and b must hold the",
        ),
        ({0: 1.0}, {0: 1.0}, {"level": 95}, r"level must be a number in \(0, 1\)"),
    ],
)
def test_bad_runs_are_refused_with_what_to_do(a, b, options, message):
    with pytest.raises(ValueError, match=message):
        paired_verdict(a, b, **options)


def test_one_seed_gives_no_verdict():
    v = paired_verdict({0: 2.0}, {0: 2.1})
    assert not v.real and v.words.endswith("one seed: no verdict")


def test_the_sign_flip_p_is_exact():
    """n identical differences: only the two uniform sign patterns are as extreme, so
    p = 2 / 2^n (0.25 with three seeds); otherwise it is the share of the 2^n
    patterns, counted here one by one."""
    import itertools

    assert verdicts.sign_flip_p([0.3, 0.3, 0.3]) == 0.25
    assert verdicts.sign_flip_p([-1.0] * 5) == 2 / 32
    assert verdicts.sign_flip_p([0.0, 0.0]) == 1.0
    d = np.random.default_rng(3).normal(0.2, 1.0, 7)
    patterns = list(itertools.product((1, -1), repeat=len(d)))
    extreme = sum(abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in patterns)
    assert verdicts.sign_flip_p(d) == extreme / len(patterns)
    with pytest.raises(ValueError, match="1 to 20 seeds, got 0"):
        verdicts.sign_flip_p([])


def test_the_same_difference_in_every_seed_is_weighed_by_the_sign_flip_test():
    """A passkey solved by one scheme and missed by the other in all three seeds: the
    t statistic is infinite, so p is the exact sign-flip test's 0.25, not 0, and no
    verdict is called real on three identical outcomes."""
    v = paired_verdict({0: 1.0, 1: 1.0, 2: 1.0}, {0: 0.0, 1: 0.0, 2: 0.0})
    assert v.p == 0.25 and v.sign_flip and not v.real
    assert (
        "n = 3, seeds only, the same difference in every seed: exact sign-flip p"
        in (v.words)
    )
    five = paired_verdict({s: 1.0 for s in range(5)}, {s: 0.5 for s in range(5)})
    assert five.p == pytest.approx(1 / 16) and not five.real
    spread = paired_verdict({0: 1.0, 1: 0.9, 2: 0.8}, {0: 0.0, 1: 0.0, 2: 0.0})
    assert not spread.sign_flip and "sign-flip" not in spread.words
    assert spread.method == "paired by seed, n = 3, seeds only"


def test_the_detectable_difference_is_found_with_about_the_stated_power():
    """Simulated seeds whose true difference is the detectable one (computed
    from the known spread, in a family of 4): the family's strictest test,
    a paired t at alpha / 4, calls it real in about 80% of trials; half of it,
    far less often."""
    from pe_tutorial.lm.verdicts import detectable_difference

    generator = np.random.default_rng(3)
    n, m, sd = 8, 4, 1.0
    # the formula's se from a verdict whose interval has the expected half-width
    half = student_t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    template = verdicts.Verdict("x", 0.0, -half, half, n, 0.5, 0.95, family_size=m)
    target = detectable_difference(template)
    expected = (
        (student_t_quantile(1 - 0.05 / (2 * m), n - 1) + student_t_quantile(0.8, n - 1))
        * sd
        / math.sqrt(n)
    )
    assert target == pytest.approx(expected)
    trials = 3000
    for effect, low, high in ((target, 0.72, 0.86), (target / 2, 0.0, 0.35)):
        found = 0
        for _ in range(trials):
            d = generator.normal(effect, sd, n)
            t = d.mean() / (d.std(ddof=1) / math.sqrt(n))
            p = 2.0 * (1.0 - verdicts.student_t_cdf(abs(t), n - 1))
            found += p < 0.05 / m
        assert low < found / trials < high, (effect, found / trials)


def test_the_detectable_difference_grows_with_the_family_and_needs_two_seeds():
    from pe_tutorial.lm.verdicts import detectable_difference

    one = verdicts.Verdict("x", 0.1, -0.2, 0.4, 5, 0.5, 0.95, family_size=1)
    eight = verdicts.Verdict("x", 0.1, -0.2, 0.4, 5, 0.5, 0.95, family_size=8)
    assert detectable_difference(eight) > detectable_difference(one) > 0
    alone = verdicts.Verdict("x", 0.1, 0.1, 0.1, 1, 1.0, 0.95)
    assert math.isnan(detectable_difference(alone))
    with pytest.raises(ValueError, match="power"):
        detectable_difference(one, power=1.0)
