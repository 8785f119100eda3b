"""The rule on quoting a timing in prose (chapter 10): what a page may say of two rows.

``within_noise`` says whether two rows' interquartile ranges overlap (then no
ordering is read from them); ``ratio_text`` words a ratio for a sentence and
refuses a row the table marks noisy (``NoisyRow``), which ``check_quotable``
enforces for ratios computed by hand; ``noise_text`` words what makes a row
noisy, which is all a page may say of it. Rows are ``timing.Timing`` objects
(not imported here: ``timing`` re-exports these names).
"""

from __future__ import annotations

import statistics

from .tables import Timing, format_ms

__all__ = [
    "quartiles",
    "quartiles_overlap",
    "within_noise",
    "NoisyRow",
    "noise_text",
    "check_quotable",
    "ratio_text",
]


def quartiles(values: list[float]) -> tuple[float, float]:
    """25th and 75th percentiles of ``values`` (the single value twice for one)."""
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def quartiles_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two interquartile ranges overlap: then neither side can be said to
    be the larger (timed rows: ``within_noise``; profiled steps:
    ``StepProfile.apart``)."""
    (a1, a3), (b1, b3) = a, b
    return a1 <= b3 and b1 <= a3


def within_noise(a: Timing, b: Timing) -> bool:
    """Whether the interquartile ranges of ``a`` and ``b`` overlap.

    Then half the calls of each fall inside the range of the other's middle
    half, and the run cannot say which is faster: a page says "within noise"
    and draws no ranking from them (chapter 10). Only rows sampled alike
    (the same ``calls_per_sample``) can be weighed; others are a ``ValueError``.
    """
    if a.calls_per_sample != b.calls_per_sample:
        raise ValueError(
            f"{a.name!r} was sampled as the mean of {a.calls_per_sample} calls in a "
            f"row and {b.name!r} of {b.calls_per_sample}: calls in a row keep their "
            "data in cache, so the two cannot be weighed against each other; measure "
            "them in one table (bench.measure samples every row alike)"
        )
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

    Every ratio a page words goes through here (``ratio_text``), so no chapter
    can quote a ratio or an ordering from a row its own table stars.
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


def ratio_text(a: Timing, b: Timing, digits: int = 2) -> str:
    """``a``'s median over ``b``'s for a sentence: ``'1.42 times'``, or
    ``'1.08 times (within noise)'`` when their interquartile ranges overlap.

    A page glues this instead of the bare ratio, so a sentence never ranks
    two rows that the run cannot tell apart (chapter 10); a row marked noisy
    is refused (``NoisyRow``), since its median is not a finding.
    """
    check_quotable(a, b)
    text = f"{a.ratio_to(b):.{digits}f} times"
    return text + " (within noise)" if within_noise(a, b) else text
