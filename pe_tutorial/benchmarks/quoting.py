"""The rule on quoting a timing in prose (chapter 10): what a page may say of two rows.

``within_noise`` says whether two rows' interquartile ranges overlap (then no
ordering is read from them); ``ratio_text`` words a ratio for a sentence and
refuses a row the table marks noisy (``NoisyRow``), which ``check_quotable``
enforces for ratios computed by hand; ``noise_text`` words what makes a row
noisy, which is all a page may say of it. Two rows timed in the same rounds
are weighed by their per-round ratios (``round_ratios``: the ratio of the two
rows in each round, its median and interquartile range), which cancel the
drift that moves both rows alike; rows timed apart (or recorded before rounds
were kept) by their medians and interquartile ranges. Rows are
``timing.Timing`` objects (not imported here: ``timing`` re-exports these
names).
"""

from __future__ import annotations

from .round_ratios import per_round, quartiles
from .tables import Timing, format_ms

__all__ = [
    "quartiles",
    "quartiles_overlap",
    "within_noise",
    "NoisyRow",
    "noise_text",
    "check_quotable",
    "check_ratio_quotable",
    "ratio_noise_text",
    "ratio_text",
    "ratio_of",
    "fastest_group",
    "fastest_text",
    "faults_differ",
]

# page faults per call that differ by more than this factor make two rows unlike
# (one pays for fresh memory the other does not), unless both are below
# FAULTS_FLOOR per call (a few first touches, nothing next to the work)
FAULTS_FACTOR = 2.0
FAULTS_FLOOR = 8.0


def quartiles_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two interquartile ranges overlap: then neither side can be said to
    be the larger (timed rows: ``within_noise``; profiled steps:
    ``StepProfile.apart``)."""
    (a1, a3), (b1, b3) = a, b
    return a1 <= b3 and b1 <= a3


def within_noise(a: Timing, b: Timing) -> bool:
    """Whether the run cannot say which of ``a`` and ``b`` is faster.

    Rows timed in the same rounds: 1 lies inside the interquartile range of
    their per-round ratios (``round_ratios.RoundRatio.within_noise``). Rows
    timed apart: their interquartile ranges overlap, so half the calls of each
    fall inside the range of the other's middle half. Either way a page says
    "within noise" and draws no ranking from them (chapter 10). Only rows
    sampled alike (the same ``calls_per_sample``) can be weighed; others are a
    ``ValueError``.
    """
    if a.calls_per_sample != b.calls_per_sample:
        raise ValueError(
            f"{a.name!r} was sampled as the mean of {a.calls_per_sample} calls in a "
            f"row and {b.name!r} of {b.calls_per_sample}: calls in a row keep their "
            "data in cache, so the two cannot be weighed against each other; measure "
            "them in one table (bench.measure samples every row alike)"
        )
    ratio = per_round(a, b)
    if ratio is not None:
        return ratio.within_noise
    return quartiles_overlap(a.quartiles_ms, b.quartiles_ms)


class NoisyRow(ValueError):
    """A ratio or an ordering asked of a row the table marks noisy."""


def noise_text(t: Timing) -> str:
    """What makes ``t`` noisy, for a sentence: ``'its calls' interquartile range
    is 39% of its median; its 3 processes' medians 7.25-11.6 ms'``."""
    parts = [f"its calls' interquartile range is {t.spread:.0%} of its median"]
    medians = t.process_medians_ms
    if medians and len(medians) > 1:
        parts.append(
            f"its {len(medians)} processes' medians "
            f"{format_ms(min(medians))}-{format_ms(max(medians))} ms"
        )
    return "; ".join(parts)


def check_quotable(*timings: Timing) -> None:
    """Raise ``NoisyRow`` if any of ``timings`` is marked noisy (``Timing.noisy``).

    For an absolute time, or rows timed apart; a ratio of two rows timed in the
    same rounds goes through ``check_ratio_quotable``, which reads its rounds.
    """
    noisy = [t for t in timings if t.noisy]
    if noisy:
        rows = "; ".join(f"{t.name!r} ({noise_text(t)})" for t in noisy)
        raise NoisyRow(
            f"no ratio can be quoted from a row marked noisy: {rows}. Record the "
            "suite again on a quiet machine (python -m pe_tutorial.benchmarks SUITE "
            "--device cpu --record), or say that the row is noisy "
            "(benchmarks.noise_text) instead of what it shows"
        )


def check_ratio_quotable(a: Timing, b: Timing) -> None:
    """Raise ``NoisyRow`` unless ``a`` over ``b`` may be quoted.

    Rows timed in the same rounds: their per-round ratios must be steady (their
    interquartile range, and their processes' medians, within ``NOISY_SPREAD``
    of the median), whatever the rows' absolute times did. Rows timed apart:
    neither row may be noisy (``check_quotable``). Every ratio a page words goes
    through here (``ratio_text``).
    """
    ratio = per_round(a, b)
    if ratio is None:
        check_quotable(a, b)
        return
    if ratio.noisy:
        raise NoisyRow(
            f"no ratio can be quoted of {a.name!r} to {b.name!r}: "
            f"{ratio.noise_text()}. Record the suite again on a quiet machine "
            "(python -m pe_tutorial.benchmarks SUITE --device cpu --record "
            "--processes 3), or say that the ratio is noisy instead of what it is"
        )


def ratio_noise_text(a: Timing, b: Timing) -> str:
    """What makes ``a`` over ``b`` too noisy to quote, for a sentence: its rounds'
    spread where the rows were timed in the same rounds (``RoundRatio.noise_text``),
    else each noisy row's (``noise_text``). All a page may say of such a ratio."""
    ratio = per_round(a, b)
    if ratio is not None:
        return ratio.noise_text()
    return "; ".join(f"{t.name!r}: {noise_text(t)}" for t in (a, b) if t.noisy)


def ratio_text(a: Timing, b: Timing, digits: int = 2) -> str:
    """``a`` over ``b`` for a sentence, with its range where it has one.

    Rows timed in the same rounds: the median per-round ratio and its
    interquartile range, ``'1.42 times (1.38-1.47 per round)'``; rows timed
    apart: the ratio of medians, ``'1.42 times'``. ``' (within noise)'`` is
    added when the run cannot order the two (``within_noise``), so a sentence
    never ranks rows that the run cannot tell apart (chapter 10), and the two
    rows' page faults when they differ (``faults_differ``: one pays for fresh
    memory the other does not). A noisy ratio is refused (``NoisyRow``;
    ``check_ratio_quotable``).
    """
    check_ratio_quotable(a, b)
    ratio = per_round(a, b)
    if ratio is None:
        text = f"{a.ratio_to(b):.{digits}f} times"
    else:
        q1, q3 = ratio.quartiles
        text = f"{ratio.median:.{digits}f} times ({q1:.{digits}f}-{q3:.{digits}f} per round)"
    if within_noise(a, b):
        text += " (within noise)"
    if faults_differ(a, b):
        text += (
            f" (page faults per call differ: {a.faults_per_call:.0f} and "
            f"{b.faults_per_call:.0f})"
        )
    return text


def ratio_of(a: Timing, b: Timing) -> float:
    """``a`` over ``b`` as the book quotes it: the median of their per-round
    ratios where they were timed in the same rounds, else median over median."""
    ratio = per_round(a, b)
    return a.ratio_to(b) if ratio is None else ratio.median


def faults_differ(a: Timing, b: Timing) -> bool:
    """Whether ``a`` and ``b`` pay for fresh memory unlike: their minor page
    faults per call differ by more than ``FAULTS_FACTOR`` (and the larger is
    at least ``FAULTS_FLOOR``). Then a ratio between them weighs the operating
    system's page handling as much as the work, and a page says so."""
    fa, fb = a.faults_per_call, b.faults_per_call
    if fa is None or fb is None:
        return False
    low, high = sorted((fa, fb))
    return high >= FAULTS_FLOOR and high > FAULTS_FACTOR * low


def fastest_group(rows: list[Timing]) -> list[Timing]:
    """The fastest row of ``rows`` first, then every other row the run cannot
    tell from it: what "the fastest" may name.

    Rows timed in the same rounds are weighed by their per-round ratios, so a
    row starred for its own drift still takes part: a row is tied with the
    fastest when 1 lies inside the interquartile range of their per-round
    ratios (``within_noise``), even where those ratios are too noisy to quote.
    Rows timed apart are weighed by
    their own quartiles, and a noisy one is left out (a median that says
    nothing cannot be fastest). A ``ValueError`` if no row can be weighed."""
    rows = list(rows)
    paired = bool(rows) and all(per_round(t, rows[0]) is not None for t in rows[1:])
    candidates = rows if paired else [t for t in rows if not t.noisy]
    if not candidates:
        names = ", ".join(repr(t.name) for t in rows)
        raise ValueError(f"every row is marked noisy ({names}): none is the fastest")
    best = min(candidates, key=lambda t: t.median_ms)
    tied = []
    for t in candidates:
        if t is best:
            continue
        ratio = per_round(t, best)
        if ratio is not None and ratio.within_noise:
            tied.append(t)
        elif ratio is None and within_noise(t, best):
            tied.append(t)
    return [best, *tied]


def fastest_text(group: list[Timing]) -> str:
    """``fastest_group`` for a sentence: ``"'a'"``, or ``"'a' (within noise of
    it: 'b', 'c')"`` when the run cannot order them."""
    first, *tied = group
    text = repr(first.name)
    if tied:
        text += f" (within noise of it: {', '.join(repr(t.name) for t in tied)})"
    return text
