"""Ratios formed inside each round: what a page quotes of two timed rows (chapter 10).

``measure`` times every row once per round, in a shuffled order. On a shared
machine the rows' absolute times drift together (a neighbour's load, a clock
change, the state a process starts in), so a row's interquartile range over
its median can be wide while the ratio of two rows *taken in the same round*
barely moves: the drift cancels. Comparing alternatives by many interleaved
rounds and reading their ratios round by round is the Randomized Multiple
Interleaved Trials method (Abedi and Brecht, "Conducting Repeatable
Experiments in Highly Variable Cloud Computing Environments", ICPE 2017).

For rows ``a`` and ``b`` sampled in the same rounds, the per-round ratio is

    r_k = a_k / b_k,   k = 1 .. rounds (every process's rounds),

and what is quoted is its median, with two spreads:

- the interquartile range of the ``r_k`` over their median (the rounds
  disagree), and
- the range of the per-process medians of ``r_k`` over the median (separate
  processes disagree: their allocator, their place in memory).

A ratio is *noisy* when either passes ``NOISY_SPREAD``, the limit a row's own
samples have (``Timing.noisy``). ``ratio_text`` in ``quoting`` words a ratio
from here whenever the two rows were sampled in the same rounds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

Timing = Any  # a ``timing.Timing`` (timing imports this module's users)

__all__ = [
    "NOISY_SPREAD",
    "quartiles",
    "RoundRatio",
    "unpaired_reason",
    "round_ratio",
    "per_round",
]

# A row whose interquartile range, or whose processes' medians, spread over more
# than this fraction of its median is marked noisy; so is a per-round ratio
# (``tables`` and ``timing`` re-export it).
NOISY_SPREAD = 0.25


def quartiles(values: list[float]) -> tuple[float, float]:
    """25th and 75th percentiles of ``values`` (the single value twice for one)."""
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class RoundRatio:
    """``numerator``'s time over ``denominator``'s, round by round.

    ``ratios`` holds one ratio per round, process after process;
    ``process_counts`` how many rounds each process gave (None: one process).
    """

    numerator: str
    denominator: str
    ratios: tuple[float, ...]
    calls_per_sample: int = 1
    process_counts: tuple[int, ...] | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def quartiles(self) -> tuple[float, float]:
        """25th and 75th percentiles of the per-round ratios."""
        return quartiles(list(self.ratios))

    @property
    def spread(self) -> float:
        """Interquartile range of the per-round ratios over their median."""
        q1, q3 = self.quartiles
        return (q3 - q1) / self.median if self.median > 0 else 0.0

    @property
    def process_medians(self) -> list[float] | None:
        """Each process's median per-round ratio (None for one process)."""
        counts = self.process_counts
        if not counts or len(counts) < 2:
            return None
        medians, start = [], 0
        for count in counts:
            medians.append(statistics.median(self.ratios[start : start + count]))
            start += count
        return medians

    @property
    def process_spread(self) -> float | None:
        """Range of the per-process medians over the median (None for one process)."""
        medians = self.process_medians
        if medians is None or self.median <= 0:
            return None
        return (max(medians) - min(medians)) / self.median

    @property
    def noisy(self) -> bool:
        """The rounds, or the processes, disagree by more than ``NOISY_SPREAD``
        of the median."""
        runs = self.process_spread or 0.0
        return self.spread > NOISY_SPREAD or runs > NOISY_SPREAD

    @property
    def within_noise(self) -> bool:
        """Whether 1 lies inside the per-round ratios' interquartile range: then
        neither row can be said to be the faster."""
        q1, q3 = self.quartiles
        return q1 <= 1.0 <= q3

    def range_text(self) -> str:
        """``'1.38-1.47 per round'`` (the interquartile range)."""
        q1, q3 = self.quartiles
        return f"{q1:.2f}-{q3:.2f} per round"

    def noise_text(self) -> str:
        """What makes the ratio noisy, for a sentence: ``'the middle half of its
        rounds runs from 0.11 to 0.29 times, 53% of its median; its 3 processes'
        medians 0.17-0.29'``."""
        q1, q3 = self.quartiles
        parts = [
            f"the middle half of its rounds runs from {q1:.2g} to {q3:.2g} times, "
            f"{self.spread:.0%} of its median"
        ]
        medians = self.process_medians
        if medians:
            parts.append(
                f"its {len(medians)} processes' medians "
                f"{min(medians):.2f}-{max(medians):.2f}"
            )
        return "; ".join(parts)


def unpaired_reason(a: Timing, b: Timing) -> str | None:
    """Why ``a`` and ``b`` were not sampled in the same rounds, or None if they were.

    Rows are paired when one ``measure`` call timed both (the same ``rounds``
    token), with the same calls per sample, the same number of samples and,
    for a recording merged from processes, the same samples per process.
    """
    if getattr(a, "rounds", None) is None or getattr(b, "rounds", None) is None:
        return "a row carries no rounds (recorded before per-round ratios)"
    if a.rounds != b.rounds:
        return "the two rows were timed in separate measurements"
    if a.calls_per_sample != b.calls_per_sample:
        return "the two rows were sampled unlike (calls in a row differ)"
    if len(a.times_ms) != len(b.times_ms) or a.process_counts != b.process_counts:
        return "the two rows have different numbers of rounds"
    return None


def round_ratio(a: Timing, b: Timing) -> RoundRatio:
    """``a``'s time over ``b``'s in each round they were both timed in.

    A ``ValueError`` that says why, when the two rows were not sampled in the
    same rounds (``unpaired_reason``): then no per-round ratio exists.
    """
    reason = unpaired_reason(a, b)
    if reason is not None:
        raise ValueError(
            f"no per-round ratio of {a.name!r} to {b.name!r}: {reason}. Time both "
            "in one measurement (bench.measure) and record it again"
        )
    ratios = tuple(x / y for x, y in zip(a.times_ms, b.times_ms))
    counts = tuple(a.process_counts) if a.process_counts else None
    return RoundRatio(a.name, b.name, ratios, a.calls_per_sample, counts)


def per_round(a: Timing, b: Timing) -> RoundRatio | None:
    """``round_ratio(a, b)``, or None where the rows were not sampled in the
    same rounds (a table then shows the ratio of medians)."""
    if unpaired_reason(a, b) is not None:
        return None
    return round_ratio(a, b)
