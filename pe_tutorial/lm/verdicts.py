"""Turning runs into verdicts: paired by seed, resampled by what is independent, corrected
for the family of claims, and worded by the same function (chapter 9, issue 47).

Two models trained with the same seed see the same batches in the same order,
so their runs are *paired*: the difference ``d_r = a_r - b_r`` of seed ``r``
cancels what the two share (the data order, the initial draw of the common
parts), and the question "is A below B?" is a question about the mean of the
``d_r``. Three rules follow.

1. **Pair by seed.** ``paired_verdict`` takes each side's values by seed and
   uses only their differences. With one number per seed the test is the
   paired t-test: ``t = mean(d) / (sd(d) / sqrt(n))`` with ``n - 1`` degrees
   of freedom, and the interval ``mean(d) +- t_{n-1} sd(d) / sqrt(n)``.
2. **Resample what is independent.** Validation *segments* are not
   independent draws: several come from one file, and bytes of one file are
   alike. With per-segment values and the file each segment comes from,
   ``paired_verdict`` also draws seeds and *files* with replacement (a
   file's segments go together), the crossed bootstrap of seeds x files; the
   verdict then needs both the paired t-test and the bootstrap to exclude 0,
   and its p-value is the larger of the two, so it is never below the
   t-test's: the bootstrap can only widen what the t-test says, which is what
   keeps the rule sound where the bootstrap alone is not (with three seeds,
   below). The interval shown is the wider.
3. **Correct for the family.** A chapter that states forty verdicts at 5%
   each would state about two false ones by chance. ``verdict_family`` adjusts
   the p-values of a named family of claims with Holm's step-down rule (the
   family-wise error stays at ``alpha`` under any dependence), and a claim is
   *real* only when its adjusted p-value is below ``alpha``.

``Verdict.words`` says the difference, its interval, ``n``, the pairing, the
resampling (files, or seeds only), the adjusted p-value with its family, and
the conclusion, so a sentence glued from it cannot say more than the statistics.

What each test is worth with the book's three to five seeds:

- The **paired t-test** is exact when the per-seed differences are normal; with
  n = 3 it has 2 degrees of freedom, so its 95% interval is mean +- 4.30 sd /
  sqrt(3), wide, and a skewed difference can still mislead it. It is the only
  test here that can reject at 5% with three seeds.
- When every seed gives the same difference (sd = 0: a passkey solved by one
  scheme and missed by the other in every seed), the t statistic is infinite
  and says nothing. The p-value is then the **sign-flip test's**, exact under
  the one assumption that the differences are symmetric about 0 when the
  schemes are alike: the 2^n sign patterns are equally likely and only the two
  uniform ones are as extreme, so p = 2 / 2^n: 0.25 with three seeds, 0.0625
  with five. Such a claim is never real at 5% below six seeds, which is the
  honest reading of n identical outcomes.
- The **crossed bootstrap** resamples files, which the t-test cannot see; with
  three seeds it draws from only ten multisets of seeds, so its percentile
  interval is too narrow on its own. It is used only beside the t-test (the
  larger p, the wider interval), to widen what clustered segments hide, never
  to narrow it.

The distribution function of Student's t is computed here from the
regularised incomplete beta function (continued fraction, as in Numerical
Recipes, section 6.4), with no dependency beyond numpy; tests hold it to the
published 95% critical values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .._validation import require_positive_int

__all__ = [
    "Verdict",
    "detectable_difference",
    "holm",
    "paired_verdict",
    "sign_flip_p",
    "student_t_cdf",
    "student_t_quantile",
    "verdict_family",
]

ALPHA = 0.05


def claim_count(count: int) -> str:
    """``"1 claim"`` or ``"12 claims"``: a family's size as the page prints it."""
    return f"{count} claim" if count == 1 else f"{count} claims"


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified
    Lentz's method); converges fast for ``x < (a + 1) / (a + b + 2)``."""
    tiny, epsilon = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < epsilon:
            return h
    raise ArithmeticError(f"incomplete beta ({a}, {b}, {x}) did not converge")


def _regularised_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the regularised incomplete beta function, for ``0 <= x <= 1``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b)
        - math.lgamma(a)
        - math.lgamma(b)
        + a * math.log(x)
        + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom:
    ``1 - I_{df / (df + t^2)}(df / 2, 1 / 2) / 2`` for ``t >= 0``, by symmetry below."""
    if not df > 0:
        raise ValueError(f"df must be positive, got {df!r}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _regularised_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The ``t`` with ``student_t_cdf(t, df) == p`` (bisection to 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    low, high = -1.0, 1.0
    while student_t_cdf(low, df) > p:
        low *= 2.0
    while student_t_cdf(high, df) < p:
        high *= 2.0
    while high - low > 1e-12 * max(1.0, abs(high)):
        middle = (low + high) / 2.0
        if student_t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


@dataclass(frozen=True)
class Verdict:
    """One claim ``a - b``: its mean paired difference, interval, p-values and words.

    ``n`` seeds were paired; ``files`` is the number of files the bootstrap
    resampled (None: per-seed values only, seeds only); ``sign_flip`` says the
    seeds all gave the same difference, so the paired part of ``p`` is the
    exact sign-flip test's (the module). ``p`` is the claim's own p-value,
    ``p_adjusted`` the family's (Holm; equal to ``p`` until ``verdict_family``
    has adjusted it, with ``family`` and ``family_size`` naming the family).
    """

    label: str
    difference: float
    low: float
    high: float
    n: int
    p: float
    level: float
    files: int | None = None
    sign_flip: bool = (
        False  # every seed the same difference: p is the exact sign-flip test's
    )
    p_adjusted: float | None = None
    family: str | None = None
    family_size: int = 1
    alpha: float = ALPHA

    @property
    def real(self) -> bool:
        """True when the (family-adjusted) p-value is below ``alpha``."""
        return (self.p if self.p_adjusted is None else self.p_adjusted) < self.alpha

    @property
    def conclusion(self) -> str:
        if self.n < 2:
            return "one seed: no verdict"
        return "a real difference" if self.real else "not shown to differ"

    @property
    def method(self) -> str:
        if self.files:
            resampled = f", resampled by file ({self.files} files)"
        else:
            resampled = ", seeds only"
        exact = (
            ", the same difference in every seed: exact sign-flip p"
            if self.sign_flip
            else ""
        )
        return f"paired by seed, n = {self.n}{resampled}{exact}"

    @property
    def words(self) -> str:
        """The sentence a chapter glues: number, interval, n, method, p, family, verdict."""
        interval = f"{self.level * 100:g}% interval [{self.low:+.3f}, {self.high:+.3f}]"
        if self.p_adjusted is None:
            p = f"p = {self.p:.2g}, uncorrected"
        else:
            p = (
                f"Holm-adjusted p = {self.p_adjusted:.2g} in the family "
                f"'{self.family}' of {claim_count(self.family_size)}"
            )
        return (
            f"{self.label}: {self.difference:+.3f} ({interval}; {self.method}; "
            f"{p}): {self.conclusion}"
        )

    def __str__(self) -> str:
        return self.words


def _by_seed(values, side: str) -> dict:
    if not isinstance(values, dict) or not values:
        raise ValueError(
            f"{side} must be a non-empty dict {{seed: value}} (or {{seed: [one value per "
            f"segment]}}), got {values!r:.80}"
        )
    return values


def sign_flip_p(differences) -> float:
    """The exact two-sided sign-flip p-value of per-seed differences: the share of
    the ``2^n`` sign patterns whose mean is at least as far from 0 as the observed
    one (each equally likely when the differences are symmetric about 0)."""
    d = np.asarray(differences, float).ravel()
    n = len(d)
    if not 1 <= n <= 20:
        raise ValueError(f"the exact sign-flip test takes 1 to 20 seeds, got {n}")
    signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    means = np.abs(signs @ np.abs(d)) / n
    observed = abs(d.mean())
    return float((means >= observed - 1e-12 * max(1.0, observed)).mean())


def _paired_t(differences: np.ndarray, level: float) -> tuple[float, float, float]:
    """``(low, high, p)`` of the paired t-test on per-seed differences; where every
    seed gave the same difference (sd = 0, the t statistic infinite or 0/0), the
    point and the exact sign-flip p (``sign_flip_p``: ``2 / 2^n``, or 1 at 0)."""
    n = len(differences)
    mean = float(differences.mean())
    sd = float(differences.std(ddof=1))
    if sd == 0.0:
        return mean, mean, sign_flip_p(differences)
    error = sd / math.sqrt(n)
    half = student_t_quantile((1 + level) / 2, n - 1) * error
    t = mean / error
    p = 2.0 * (1.0 - student_t_cdf(abs(t), n - 1))
    return mean - half, mean + half, min(1.0, p)


def _crossed_bootstrap(
    differences: np.ndarray,
    files: list,
    level: float,
    draws: int,
    seed: int,
) -> tuple[float, float, float]:
    """``(low, high, p)``: seeds and files drawn with replacement (a file's segments
    together), the mean difference of each draw; a percentile interval, and the
    two-sided p-value ``2 min(P(draw <= 0), P(draw >= 0))`` (at least ``1 / draws``)."""
    names = sorted(set(files), key=str)
    index = {name: i for i, name in enumerate(names)}
    which = np.array([index[f] for f in files])
    num_seeds, num_files = differences.shape[0], len(names)
    # per (seed, file): the sum of the differences and the number of segments
    sums = np.zeros((num_seeds, num_files))
    for f in range(num_files):
        sums[:, f] = differences[:, which == f].sum(axis=1)
    counts = np.bincount(which, minlength=num_files).astype(float)
    generator = np.random.default_rng(seed)
    seed_draws = generator.multinomial(
        num_seeds, np.full(num_seeds, 1 / num_seeds), draws
    )
    file_draws = generator.multinomial(
        num_files, np.full(num_files, 1 / num_files), draws
    )
    totals = ((seed_draws @ sums) * file_draws).sum(axis=1)
    segments = seed_draws.sum(axis=1) * (file_draws @ counts)
    means = totals / segments
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    p = 2.0 * min((means <= 0).mean(), (means >= 0).mean())
    return float(low), float(high), float(min(1.0, max(p, 1.0 / draws)))


def paired_verdict(
    a: dict,
    b: dict,
    *,
    label: str = "a - b",
    files: list | None = None,
    level: float = 0.95,
    alpha: float = ALPHA,
    draws: int = 10_000,
    seed: int = 0,
) -> Verdict:
    """The verdict on ``a - b`` from runs paired by seed (see the module).

    ``a`` and ``b`` map each seed to its value, or to its list of per-segment
    values (the same segments for both, in the same order); only seeds in both
    are paired, and a seed in one alone is a ``ValueError`` (pairing needs both
    runs). With per-segment values, ``files`` gives the file of each segment,
    and seeds x files are resampled as well (the verdict needs both tests).
    """
    for value, name in ((level, "level"), (alpha, "alpha")):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < 1
        ):
            raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    draws = require_positive_int(draws, "draws")
    a, b = _by_seed(a, "a"), _by_seed(b, "b")
    if set(a) != set(b):
        raise ValueError(
            f"pair runs by seed: seeds {sorted(set(a) ^ set(b), key=str)} are on one "
            "side only; train both schemes on the same seeds"
        )
    seeds = sorted(a, key=str)
    per_segment = isinstance(a[seeds[0]], (list, tuple, np.ndarray))
    if per_segment:
        if len({len(side[s]) for side in (a, b) for s in seeds}) != 1:
            raise ValueError("every seed of a and b must hold the same segments")
        differences = np.stack(
            [np.asarray(a[s], float) - np.asarray(b[s], float) for s in seeds]
        )
    else:
        differences = np.array([[float(a[s]) - float(b[s])] for s in seeds])
    if not np.isfinite(differences).all():
        raise ValueError(f"{label}: a value is not finite; fix or drop that run")
    if files is not None and (not per_segment or len(files) != differences.shape[1]):
        raise ValueError(
            f"files must name the file of each segment ({differences.shape[1]} "
            f"of them), got {len(files)}"
        )
    n = len(seeds)
    by_seed = differences.mean(axis=1)
    mean = float(differences.mean())
    if n < 2:
        return Verdict(label, mean, mean, mean, n, 1.0, level, alpha=alpha)
    # every seed holds the same segments, so the mean of the seeds' means is ``mean``
    low, high, p = _paired_t(by_seed, level)
    sign_flip = bool(by_seed.std(ddof=1) == 0.0)
    resampled = None
    if files is not None:
        b_low, b_high, b_p = _crossed_bootstrap(
            differences, list(files), level, draws, seed
        )
        low, high, p = min(low, b_low), max(high, b_high), max(p, b_p)
        resampled = len(set(files))
    return Verdict(
        label,
        mean,
        low,
        high,
        n,
        p,
        level,
        files=resampled,
        sign_flip=sign_flip,
        alpha=alpha,
    )


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: sort the ``m`` p-values, multiply the ``i``-th
    smallest by ``m - i`` (``i`` from 0), keep them non-decreasing, cap at 1; returned
    in the input's order. Rejecting where the adjusted value is below ``alpha``
    keeps the chance of any false rejection in the family at most ``alpha``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def verdict_family(name: str, verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts of one family of claims (what a chapter states together, named on
    the page), their p-values adjusted with ``holm``."""
    if not verdicts:
        raise ValueError(f"the family {name!r} has no claims")
    adjusted = holm([v.p for v in verdicts])
    return [
        replace(v, p_adjusted=q, family=name, family_size=len(verdicts))
        for v, q in zip(verdicts, adjusted, strict=True)
    ]


DETECTION_POWER = 0.8


def detectable_difference(verdict: Verdict, *, power: float = DETECTION_POWER) -> float:
    """The smallest true difference that ``verdict``'s seeds would call real with
    probability ``power``, at the strictest level of its family (Holm tests the
    smallest p against ``alpha / m``, ``m = verdict.family_size``; chapter 9,
    the report card).

    The usual normal-theory bound on a paired t-test: with ``se`` the standard
    error of the mean difference, read back from the interval's half-width
    (``half / t_{(1 + level)/2, n-1}``),

        detectable = (t_{1 - alpha / (2m), n-1} + t_{power, n-1}) * se.

    It is approximate (it ignores the noncentral t's skew, so it runs a little
    low at small ``n``) and, on text, the interval also resamples files. A
    claim whose interval is a point (every seed the same) gives 0; with under
    two seeds there is nothing to say (``nan``)."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be between 0 and 1, got {power}")
    if verdict.n < 2:
        return math.nan
    df = verdict.n - 1
    half = (verdict.high - verdict.low) / 2
    se = half / student_t_quantile((1 + verdict.level) / 2, df)
    strictest = verdict.alpha / max(1, verdict.family_size)
    return (
        student_t_quantile(1 - strictest / 2, df) + student_t_quantile(power, df)
    ) * se
