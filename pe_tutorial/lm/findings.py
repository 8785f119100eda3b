"""Reading a recorded experiment (chapter 9): entries by name, means and spreads.

A results dict of ``pe_tutorial.experiments`` holds sections of entries; each
entry has per-seed ``runs`` and a ``summary`` per length (``mean``, sample
``std``, ``n``). The functions here find entries and read their numbers.

Verdicts do not come from here: the book's verdicts are ``lm.run_verdicts``
(paired by seed, files resampled, Holm across a named family). What stays is
the third edition's *spread rule*, which chapter 9 shows as a contrast
("What the earlier rules said") and whose error rates it simulates
(``spread_rule_rates``):

    A and B differ when |mean_A - mean_B| > std_A + std_B,

that is, when the bars mean ± std of the two do not overlap. It does not pair
the seeds, so it can call a gap that every seed shows "within noise".

The rule needs a spread, so it needs two seeds or more. One seed (the quick
preset) has a std of 0 because there is nothing to spread, not because runs
agree, so every ``Gap`` carries ``n``, the seeds it rests on, and with one
seed it gives no verdict: ``verdict`` reads "one seed: no spread to weigh"
and ``separated`` raises rather than answer either way.

Per-segment values (one number per validation segment and seed, such as
``scoring.context_gain``) are weighed differently, by ``bootstrap_interval``:
a hierarchical bootstrap over seeds and then segments, which gives an
``Interval`` and reads whether 0 lies outside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import require_positive_int

__all__ = [
    "reading_entry",
    "ONE_SEED",
    "Gap",
    "Interval",
    "bootstrap_interval",
    "segment_interval",
    "find",
    "language_entry",
    "scheme_rate",
    "stats_at",
    "mean_at",
    "compare",
    "change",
    "paired_change",
    "train_gap",
    "end_slope",
    "position_mean",
    "mean_and_std",
    "spread_rule_rates",
]


# the verdict of a gap that rests on one seed: there is no spread to weigh it against
ONE_SEED = "one seed: no spread to weigh"


@dataclass(frozen=True)
class Gap:
    """``a - b`` in the seeds' means, the spread it is weighed against, and its seeds.

    ``spread`` is std_a + std_b (or the std of per-seed differences), and ``n``
    the number of seeds behind the gap: the smaller side's count for
    ``compare``, the number of per-seed differences for ``paired_change`` and
    ``train_gap``. With ``n >= 2`` the gap is *separated* when ``|difference| >
    spread``. With one seed the spread is 0 for want of a second run, so
    ``weighed`` is False, ``verdict`` and the text say ``ONE_SEED``, and
    ``separated`` raises ``ValueError``: neither "beyond the spread" nor
    "within noise" is a claim one seed can back, and an ``assert gap.separated``
    or ``assert not gap.separated`` on such data should fail, not pass on nothing.
    """

    difference: float
    spread: float
    n: int

    def __post_init__(self):
        require_positive_int(self.n, "n (the seeds behind the gap)")

    @property
    def weighed(self) -> bool:
        """True when there is a spread to weigh the difference against (two seeds or more)."""
        return self.n >= 2

    @property
    def separated(self) -> bool:
        """True when the difference exceeds the spread: the bars do not overlap.

        Raises ``ValueError`` for a gap of one seed, which has no spread to
        exceed (check ``weighed`` first, or read ``verdict``).
        """
        if not self.weighed:
            raise ValueError(
                f"a gap of one seed ({self.difference:+.3f}) is neither beyond the "
                "seeds' spread nor within noise: there is no spread to weigh it "
                "against; run two seeds or more, or read .verdict"
            )
        return abs(self.difference) > self.spread

    @property
    def verdict(self) -> str:
        if not self.weighed:
            return ONE_SEED
        return "beyond the seeds' spread" if self.separated else "within noise"

    def __str__(self) -> str:
        if not self.weighed:
            return f"{self.difference:+.3f} ({ONE_SEED})"
        return f"{self.difference:+.3f} (spread {self.spread:.3f}: {self.verdict})"


def find(results: dict, section: str, **fields) -> dict:
    """The one entry of ``results[section]`` whose fields equal ``fields``.

    ``find(standard, "language_model", scheme="rope", norm="post")``. Fields
    not given are not compared, so ask for enough to name one entry.
    """
    if section not in results:
        raise ValueError(
            f"the results have no section {section!r}; they have "
            f"{[k for k, v in results.items() if isinstance(v, list)]}"
        )
    matches = [
        entry
        for entry in results[section]
        if all(entry.get(name) == value for name, value in fields.items())
    ]
    if len(matches) != 1:
        raise ValueError(
            f"{len(matches)} entries of {section!r} have {fields}; give fields "
            "that name exactly one"
        )
    return matches[0]


def language_entry(
    results: dict,
    scheme: str,
    *,
    norm: str = "pre",
    absolute: str = "input",
    corpus: str = "stdlib",
    learning_rate: float | None = None,
    changes: dict | None = None,
) -> dict:
    """The ``language_model`` entry of one variant; by default the plain one.

    Pre-norm, the table (if any) added once at the input, Python source, the
    scheme's own learning rate (``scheme_rate``) and no ``ModelConfig`` changes,
    unless given.
    """
    if learning_rate is None:
        learning_rate = scheme_rate(results["settings"], scheme)
    return find(
        results,
        "language_model",
        scheme=scheme,
        norm=norm,
        absolute=absolute,
        corpus=corpus,
        learning_rate=learning_rate,
        changes=changes or {},
    )


def reading_entry(entry: dict, *path: str, measure: str = "bpb") -> dict:
    """An entry made of a second reading that each run of ``entry`` records
    beside its own scores (chapter 12).

    ``run[path[0]][path[1]]...`` holds a value by length: Gemma 3's pattern
    read with its global layers interpolated (``reading_entry(pattern,
    "global_interpolation", "8")``), a tempered model read without its
    temperature (``reading_entry(irope, "without_temperature", "bpb")``).
    The new entry has the same seeds, the values under ``measure`` in each
    run, and a ``summary`` per length as a recorded entry's (mean, sample
    std, n), so ``mean_at``, ``stats_at`` and the verdicts read it like one.
    A run without the reading is a KeyError naming the path and the seed.
    """
    if not path:
        raise ValueError("name the reading: reading_entry(entry, 'key', ...)")
    runs = []
    for run in entry["runs"]:
        value = run
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(
                    f"the run of seed {run['seed']} has no reading {'/'.join(path)}; "
                    "was the record made with the setting that reads it?"
                )
            value = value[key]
        runs.append({"seed": run["seed"], measure: dict(value)})
    summary = {}
    for length in runs[0][measure]:
        values = [r[measure][length] for r in runs]
        if any(v is None for v in values):
            summary[length] = None
            continue
        mean, spread = mean_and_std(values)
        summary[length] = {"mean": mean, "std": spread, "n": len(values)}
    return {"reading": "/".join(path), "runs": runs, "summary": summary}


def scheme_rate(settings: dict, scheme: str) -> float:
    """The learning rate a run trained ``scheme`` at: its tuned rate (the preset's
    ``[tuned]``, recorded in ``settings["tuned"]``), else the run's own."""
    tuned = settings.get("tuned", {}).get(scheme, {})
    return tuned.get("learning_rate", settings["train"]["learning_rate"])


def stats_at(entry: dict, length: int) -> dict | None:
    """The summary (mean, std, n) of an entry at a length; None where it could not run."""
    key = str(length)
    if key not in entry["summary"]:
        raise ValueError(
            f"no length {length} in this entry; it has {list(entry['summary'])}"
        )
    return entry["summary"][key]


def mean_at(entry: dict, length: int) -> float | None:
    """The seeds' mean of an entry at a length (None where it could not run)."""
    stats = stats_at(entry, length)
    return None if stats is None else stats["mean"]


def _require(stats: dict | None, length: int) -> dict:
    if stats is None:
        raise ValueError(f"the entry has no value at length {length}")
    if "n" not in stats:
        raise ValueError(
            f"the summary at length {length} has no seed count n; record it again"
        )
    return stats


def compare(a: dict, b: dict, length: int, length_b: int | None = None) -> Gap:
    """``a`` minus ``b`` at a length (``b`` at ``length_b`` if given), with their spread.

    The gap's ``n`` is the smaller of the two summaries' seed counts: a side
    of one seed has no spread, so neither has the gap.
    """
    length_b = length if length_b is None else length_b
    sa = _require(stats_at(a, length), length)
    sb = _require(stats_at(b, length_b), length_b)
    return Gap(sa["mean"] - sb["mean"], sa["std"] + sb["std"], min(sa["n"], sb["n"]))


def change(entry: dict, start: int, stop: int) -> Gap:
    """How an entry's mean moves from length ``start`` to ``stop``, weighed unpaired."""
    return compare(entry, entry, stop, start)


def paired_change(entry: dict, start: int, stop: int, key: str = "bpb") -> Gap:
    """The per-seed change from ``start`` to ``stop``: mean of the differences, their std.

    Each seed is one model read at two lengths, so the differences are paired,
    and their spread is the spread of the change itself (``std`` of the
    per-seed differences), which can be far smaller than the two lengths'
    spreads added. The gap is separated from zero when the mean change
    exceeds that spread; its ``n`` is the number of runs (one: no verdict).
    """
    differences = []
    for run in entry["runs"]:
        values = run[key]
        low, high = values[str(start)], values[str(stop)]
        if low is None or high is None:
            raise ValueError(f"a run has no value at length {start} or {stop}")
        differences.append(high - low)
    return _gap_of(differences)


def train_gap(entry: dict, length: int) -> Gap:
    """Validation minus training-split bpb at the training length, per seed: the gap.

    Each run records ``train_split_bpb``, its score on as many training bytes,
    windows of the training length, as the validation score reads. The mean of
    the per-seed differences is returned with their std and the number of runs.
    """
    return _gap_of(
        [run["bpb"][str(length)] - run["train_split_bpb"] for run in entry["runs"]]
    )


def end_slope(entry: dict, share: float = 0.1) -> float:
    """How fast an entry's learning curve still falls at the end of training, in
    bits per byte per 100 steps (positive: still falling; 0: flat).

    The least-squares slope of the seeds' mean curve (``entry["curve"]``) over
    the readings in the last ``share`` of training, steps ``s`` with
    ``s >= (1 - share) * last step``, negated and scaled to 100 steps:

        slope = -100 * sum((s - s_bar)(y - y_bar)) / sum((s - s_bar)^2).

    Chapter 9 says per scheme how far from flat its curve is where it is read.
    It needs two readings or more in that stretch; a curve read too sparsely
    raises ``ValueError`` saying how many readings it has there.
    """
    if not 0 < share <= 1:
        raise ValueError(f"share is a fraction of training in (0, 1], got {share!r}")
    curve = entry.get("curve")
    if not curve:
        raise ValueError(
            "this entry has no learning curve (recorded before curves were, or "
            "with curve_points = 0): read a record made with curve points"
        )
    steps, mean = curve["steps"], curve["mean"]
    start = (1 - share) * steps[-1]
    points = [(s, y) for s, y in zip(steps, mean) if s >= start]
    if len(points) < 2:
        raise ValueError(
            f"the last {share:.0%} of training (steps {start:g} to {steps[-1]}) holds "
            f"{len(points)} reading of the curve; a slope needs two: pass a larger "
            "share or record more curve points"
        )
    s_bar = sum(s for s, _ in points) / len(points)
    y_bar = sum(y for _, y in points) / len(points)
    covariance = sum((s - s_bar) * (y - y_bar) for s, y in points)
    spread = sum((s - s_bar) ** 2 for s, _ in points)
    return -100 * covariance / spread


def _gap_of(differences: list[float]) -> Gap:
    """Per-seed differences as a Gap: their mean, their sample std as the spread, their n."""
    return Gap(*mean_and_std(differences), len(differences))


def mean_and_std(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of the seeds' values; 0 for one."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def position_mean(
    entry: dict,
    start: int,
    stop: int,
    position_bin: int,
    key: str = "position_bpb",
) -> float | None:
    """The seeds' mean bpb over positions ``[start, stop)`` of the loss-by-position curve.

    Each run's ``position_bpb`` holds the loss averaged over bins of
    ``position_bin`` positions; ``start`` and ``stop`` must fall on bin edges.
    ``key="position_gain"`` reads the context gain by position instead (each
    position's loss minus the same byte's in a window of L). None where the
    runs have no curve (a model that cannot read the window).
    """
    if start % position_bin or stop % position_bin or not 0 <= start < stop:
        raise ValueError(
            f"positions [{start}, {stop}) must be a non-empty range on the bin edges "
            f"(multiples of {position_bin})"
        )
    if any(key not in run for run in entry["runs"]):
        raise ValueError(
            f"the runs keep no {key!r} (recorded before it was kept); record the "
            "experiment again"
        )
    curves = [run[key] for run in entry["runs"]]
    if any(curve is None for curve in curves):
        return None
    first, last = start // position_bin, stop // position_bin
    if last > len(curves[0]):
        raise ValueError(
            f"the curve covers {len(curves[0]) * position_bin} positions, not {stop}"
        )
    means = [sum(curve[first:last]) / (last - first) for curve in curves]
    return sum(means) / len(means)


def spread_rule_rates(
    seeds: int,
    differences: tuple[float, ...] = (0.0, 1.0, 2.0),
    *,
    draws: int = 100_000,
    seed: int = 0,
) -> dict[float, float]:
    """How often the spread rule calls two schemes apart, by simulation (chapter 9).

    Each of ``draws`` draws gives schemes A and B ``seeds`` runs each, every
    run the scheme's true score plus independent normal noise of standard
    deviation sigma = 1, with A's true score ``difference`` sigmas above B's.
    The rule (``compare``, ``Gap.separated``) calls them apart when

        |mean_A - mean_B| > std_A + std_B   (sample stds, n - 1).

    Returns, per difference, the share of draws it does so: at 0 the rule's
    false-alarm rate (a "beyond the seeds' spread" for two equal schemes), above
    0 its power (how often it sees a real gap of that size). Normal noise of one
    sigma for both schemes is the assumption; real seeds need not follow it.
    """
    seeds = require_positive_int(seeds, "seeds")
    draws = require_positive_int(draws, "draws")
    if seeds < 2:
        raise ValueError(
            "the rule needs two seeds or more per scheme (one seed has no spread to "
            f"weigh), got seeds={seeds}"
        )
    generator = np.random.default_rng(seed)
    a = generator.standard_normal((draws, seeds))
    b = generator.standard_normal((draws, seeds))
    spread = a.std(axis=1, ddof=1) + b.std(axis=1, ddof=1)
    gap = a.mean(axis=1) - b.mean(axis=1)
    rates = {}
    for difference in differences:
        if not math.isfinite(difference):
            raise ValueError(f"a difference must be finite, got {difference!r}")
        rates[float(difference)] = float((np.abs(gap + difference) > spread).mean())
    return rates


@dataclass(frozen=True)
class Interval:
    """A mean and its bootstrap interval ``[low, high]`` at ``level``, from ``seeds`` x ``segments`` values.

    Made by ``bootstrap_interval`` (chapter 9). ``excludes_zero`` is True when
    0 lies outside the interval: the sign of the mean is then beyond the
    seed-and-segment noise that the bootstrap resamples; otherwise it is within
    noise. ``str`` reads ``+0.023 [+0.011, +0.035] (95%, 3 seeds × 64 segments)``.
    """

    mean: float
    low: float
    high: float
    seeds: int
    segments: int
    level: float

    @property
    def excludes_zero(self) -> bool:
        """True when 0 is outside ``[low, high]``: the whole interval has one sign."""
        return self.low > 0 or self.high < 0

    def _level(self) -> str:
        return f"{self.level * 100:g}%"

    @property
    def verdict(self) -> str:
        if self.excludes_zero:
            return f"0 outside the {self._level()} interval"
        return f"0 inside the {self._level()} interval (within noise)"

    def __str__(self) -> str:
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        segments = f"{self.segments} segment{'s' if self.segments != 1 else ''}"
        return (
            f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] "
            f"({self._level()}, {seeds} × {segments})"
        )


def _seed_by_segment(values, name: str) -> np.ndarray:
    """``values`` (one list per seed of one number per segment) as a float ``(seeds, segments)`` array."""
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(
            f"{name} must be a non-empty list with one list of per-segment values "
            f"per seed, got {values!r:.80}"
        )
    rows = []
    for seed, row in enumerate(values):
        try:
            rows.append([float(v) for v in row])
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}[{seed}] must be a list of numbers, one per segment, got {row!r:.80}"
            ) from None
    counts = sorted({len(row) for row in rows})
    if counts[0] == 0 or len(counts) > 1:
        raise ValueError(
            f"every seed of {name} must hold the same, non-zero number of segments "
            f"(the same validation segments), got {[len(row) for row in rows]}"
        )
    array = np.asarray(rows, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError(
            f"{name} holds a value that is not finite (NaN or inf); drop or fix that "
            "run before weighing it"
        )
    return array


def bootstrap_interval(
    values_a,
    values_b=None,
    *,
    draws: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The mean of ``a`` (or of ``a - b``) over seeds and segments, with a hierarchical bootstrap interval.

    ``values_a[r][k]`` is seed ``r``'s value on validation segment ``k``; the
    segments are the same for every seed and model, so with ``values_b`` the
    statistic is the mean of the paired differences

        mean = (1 / (R K)) sum_r sum_k (a[r][k] - b[r][k]),

    segment ``k`` of ``a`` against segment ``k`` of ``b``, and seed ``r``
    against seed ``r`` (an arbitrary pairing of independent runs; the counts
    must agree). Each of ``draws`` draws resamples the ``R`` seeds with
    replacement, then the ``K`` segment indices with replacement (the same
    indices for ``a`` and ``b``, which keeps the pairing), and takes the mean
    of the drawn values; ``low`` and ``high`` are the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles of the draws' means (a percentile interval).

    The interval says how far the mean could move if other seeds and other
    segments of the same kind had been drawn. Its limit: with three seeds the
    seed resampling is coarse (only 10 distinct multisets of 3), so the
    interval mostly reflects the segment-to-segment variation plus a coarse
    seed term, and one seed contributes no seed term at all. On values with no
    seed or segment structure (independent noise in every cell) resampling both
    levels counts the noise about three times, so the interval is then wider,
    by about sqrt(3), than the textbook ``mean +- 1.96 sigma / sqrt(R K)``:
    conservative, not optimistic. Chapter 9 reads ``excludes_zero`` as whether
    an effect (such as ``scoring.context_gain``) is beyond that noise.
    """
    draws = require_positive_int(draws, "draws")
    if (
        isinstance(level, bool)
        or not isinstance(level, (int, float))
        or not 0 < level < 1
    ):
        raise ValueError(
            f"level must be a number in (0, 1), the share the interval covers "
            f"(0.95 for 95%), got {level!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    values = _seed_by_segment(values_a, "values_a")
    if values_b is not None:
        other = _seed_by_segment(values_b, "values_b")
        if other.shape != values.shape:
            raise ValueError(
                f"values_a has {values.shape[0]} seeds x {values.shape[1]} segments and "
                f"values_b {other.shape[0]} x {other.shape[1]}: pair the same seed count "
                "on the same validation segments"
            )
        values = values - other
    num_seeds, num_segments = values.shape
    generator = np.random.default_rng(seed)
    # how often each seed and each segment is drawn: resampling n of n with
    # replacement, as multinomial counts, so every draw is one matrix product
    seed_counts = generator.multinomial(
        num_seeds, np.full(num_seeds, 1 / num_seeds), size=draws
    )
    segment_counts = generator.multinomial(
        num_segments, np.full(num_segments, 1 / num_segments), size=draws
    )
    # draw d's mean: sum_r sum_k seed_counts[d, r] values[r, k] segment_counts[d, k] / (R K)
    means = ((seed_counts @ values) * segment_counts).sum(axis=1) / (
        num_seeds * num_segments
    )
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Interval(
        mean=float(values.mean()),
        low=float(low),
        high=float(high),
        seeds=num_seeds,
        segments=num_segments,
        level=float(level),
    )


def segment_interval(
    a: dict, length: int, b: dict | None = None, *, key: str = "segment_bpb"
) -> Interval:
    """``bootstrap_interval`` of an entry's per-segment values at ``length``, or
    of ``a - b`` segment by segment (chapter 9).

    ``key`` is ``"segment_bpb"`` (each segment's bits per byte at that length)
    or ``"context_gain"`` (each segment's loss past L minus the same bytes' in
    an L window, for lengths above L). Each run of the entry holds them by
    length; a run recorded before they were kept, or a length the model could
    not read, is a ``ValueError`` that says which.
    """

    def values(entry: dict, side: str) -> list[list[float]]:
        found = []
        for run in entry["runs"]:
            by_length = run.get(key)
            if by_length is None:
                raise ValueError(
                    f"the runs of {side} keep no {key!r} (recorded before per-segment "
                    "values were); record the experiment again"
                )
            if str(length) not in by_length:
                raise ValueError(
                    f"{side} has no {key!r} at length {length}; it has "
                    f"{sorted(by_length, key=int)}"
                )
            if by_length[str(length)] is None:
                raise ValueError(f"{side} could not read length {length}")
            found.append(by_length[str(length)])
        return found

    return bootstrap_interval(values(a, "a"), None if b is None else values(b, "b"))
