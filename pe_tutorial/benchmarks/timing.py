"""Timing that names what it measured: the helpers behind every chapter's timing cell.

A measurement is a list of ``Case`` objects (a name, a function of no
arguments, the shapes and dtype it works on, and the bytes it reads plus the
bytes it writes). ``measure`` warms each case up, then times them *interleaved*
(each round calls every case once, in a shuffled order) so that a busy
neighbour or a change of clock speed hits every row alike. On a GPU each call
is bracketed by CUDA events and the device is synchronised before they are
read; on the CPU ``time.perf_counter`` times each call.

Every case that says how many bytes it moves is compared with a **copy of the
same number of bytes** timed in the same rounds: a copy reads and writes each
byte once, the practical limit of memory-bound work, so ``x copy`` (median over
the copy's median) says how far from that limit a kernel is. Ratios measured in
one run are stable where absolute times are not. A row whose interquartile
range, or the range of its recording processes' medians, is wider than
``NOISY_SPREAD`` of its median is marked as noisy, and ``ratio_text`` refuses
to word a ratio from it: a page may say such a row is noisy, never what it
shows (``NoisyRow``; the rule on quoting is ``quoting.py``, re-exported here). A
case may also carry ``peak_bytes``, the most memory one call held above what
was allocated before it (``memory.peak_memory``), shown as a column of MiB.

Like with like: a case that returns new tensors (``Case.allocates``) is
compared with a *clone* of its bytes (a copy into a new output), one that
writes into outputs it was given, or in place, with a copy into a given
output. On a CPU a new output is fresh memory the operating system may hand
over a page at a time, a fault per 4 KiB the first time each page is
written, and whether it does depends on what the process freed before; so
each row also counts the minor page faults of its calls (``faults / call``)
and the table shows them.

Chapter 10 explains the method; ``pe_tutorial.benchmarks`` holds the suites,
and ``tables`` prints a run (``format_table``, re-exported here).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

try:  # minor page faults per call; the module exists on Unix only
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

import torch

from ..devices import (
    PEAK_BANDWIDTH,
    PeakBandwidth,
    cpu_name,
    default_device,
    device_name,
    environment,
    last_level_cache_bytes,
    peak_bandwidth,
    synchronize,
)
from ..memory import peak_memory, tensors_written
from .quoting import (
    NoisyRow,
    check_quotable,
    check_ratio_quotable,
    fastest_group,
    fastest_text,
    faults_differ,
    noise_text,
    quartiles,
    ratio_noise_text,
    ratio_of,
    ratio_text,
    within_noise,
)
from .tables import NOISY_SPREAD, TABLE_WIDTH, format_table

__all__ = [
    "NOISY_SPREAD",
    "PeakBandwidth",
    "PEAK_BANDWIDTH",
    "Case",
    "Timing",
    "default_device",
    "device_name",
    "cpu_name",
    "last_level_cache_bytes",
    "environment",
    "peak_bandwidth",
    "copy_case",
    "copy_probe",
    "minor_faults",
    "PROBE_BYTES",
    "measure",
    "within_noise",
    "NoisyRow",
    "check_quotable",
    "check_ratio_quotable",
    "ratio_noise_text",
    "noise_text",
    "ratio_text",
    "ratio_of",
    "fastest_group",
    "fastest_text",
    "faults_differ",
    "time_function",
    "format_bytes",
    "format_table",
    "tensors_written",
    "with_peak_memory",
    "TABLE_WIDTH",
]

# how much longer the samples of a row that stays noisy get (bench.measure)
BATCH_GROWTH = 4


# ---------------------------------------------------------------------------
# what is timed, and what a timing holds
# ---------------------------------------------------------------------------


@dataclass
class Case:
    """One thing to time: ``fn()`` and what it works on.

    ``bytes_moved`` is what one call reads plus what it writes, counted from
    the tensors it must touch (not what an implementation happens to allocate).
    A case with ``bytes_moved`` must say whether it ``allocates`` its outputs
    (returns new tensors) or writes into outputs it was given (``out=``, in
    place): ``measure`` compares the first with a clone of its bytes and the
    second with a copy into a given output, like with like.
    ``peak_bytes`` is the most memory one call held above what was allocated
    before it, outputs included (``with_peak_memory``), where measured.
    """

    name: str
    fn: Callable[[], object]
    shapes: dict = field(default_factory=dict)
    dtype: str | None = None
    bytes_moved: int | None = None
    is_copy: bool = False
    peak_bytes: int | None = None
    allocates: bool | None = None


@dataclass
class Timing:
    """One measured row: times per call in milliseconds and what was measured.

    Each of ``times_ms`` is one call, or the mean of ``calls_per_sample``
    calls in a row where single calls disagreed too much (``measure``).

    ``copy_ms`` is the median time of a copy moving the same bytes, timed in
    the same run (None when the row has no byte count): a clone (into a new
    output) for a row that ``allocates``, a copy into a given output for one
    that does not. ``peak_bytes``: the case's, if it was measured (``Case``).
    ``faults_per_call``: the median over samples of the minor page faults per
    call (CPU only; None elsewhere). ``process_medians_ms``: for a recording
    made in several processes (``benchmarks --record --processes N``), each
    process's median; ``times_ms`` then holds every process's samples.
    """

    name: str
    times_ms: list[float]
    shapes: dict = field(default_factory=dict)
    dtype: str | None = None
    bytes_moved: int | None = None
    copy_ms: float | None = None
    is_copy: bool = False
    # each of times_ms is the mean of this many calls in a row (bench.measure)
    calls_per_sample: int = 1
    peak_bytes: int | None = None
    allocates: bool = False
    faults_per_call: float | None = None
    process_medians_ms: list[float] | None = None
    # the measurement that timed this row (one ``measure`` call): rows with the
    # same token were sampled in the same rounds, sample k of each in round k,
    # so their per-round ratios exist (``round_ratios``)
    rounds: str | None = None
    # for a recording merged from processes: how many of ``times_ms`` each gave
    process_counts: list[int] | None = None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def quartiles_ms(self) -> tuple[float, float]:
        """25th and 75th percentiles (equal to the single time when there is one)."""
        return quartiles(self.times_ms)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: how much the calls disagree."""
        q1, q3 = self.quartiles_ms
        return (q3 - q1) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def noisy(self) -> bool:
        """Marked ``*`` in the table: its samples (interquartile range) or its
        recording processes (range of their medians) disagree by more than
        ``NOISY_SPREAD`` of its median. No time is read from it; a ratio to a
        row timed in the same rounds is judged by its own rounds
        (``round_ratios``)."""
        runs = self.process_spread or 0.0
        return self.spread > NOISY_SPREAD or runs > NOISY_SPREAD

    @property
    def bandwidth_gb_s(self) -> float | None:
        """Achieved bandwidth ``bytes_moved / median time`` in GB/s (10^9 bytes/s)."""
        if self.bytes_moved is None or self.median_ms <= 0:
            return None
        return self.bytes_moved / (self.median_ms * 1e-3) / 1e9

    @property
    def ratio_to_copy(self) -> float | None:
        """Median time over the median of a copy of the same bytes (1 = copy speed)."""
        if self.copy_ms is None or self.copy_ms <= 0:
            return None
        return self.median_ms / self.copy_ms

    @property
    def process_spread(self) -> float | None:
        """Range of the processes' medians over the median of all samples (None
        for a run made in one process): how much separate runs disagree."""
        medians = self.process_medians_ms
        if not medians or len(medians) < 2 or self.median_ms <= 0:
            return None
        return (max(medians) - min(medians)) / self.median_ms

    def ratio_to(self, other: Timing) -> float:
        """How many times longer this takes than ``other`` (median over median)."""
        return self.median_ms / other.median_ms

    def to_dict(self) -> dict:
        record = dataclasses.asdict(self)
        record.update(
            median_ms=self.median_ms,
            quartiles_ms=list(self.quartiles_ms),
            bandwidth_gb_s=self.bandwidth_gb_s,
            ratio_to_copy=self.ratio_to_copy,
        )
        return record

    @classmethod
    def from_dict(cls, record: dict) -> Timing:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in names})


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------


def minor_faults() -> int | None:
    """Minor page faults of this process so far (threads included), or None
    where the system does not count them."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _time_once(
    fn: Callable[[], object], device: torch.device, calls: int = 1
) -> tuple[float, float | None]:
    """Milliseconds per call of ``calls`` calls in a row, the device synchronised
    before and after them, and the minor page faults per call (CPU; else None)."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls, None
    faults = minor_faults()
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - begin) * 1e3 / calls
    if faults is None:
        return elapsed, None
    return elapsed, (minor_faults() - faults) / calls


def format_bytes(nbytes: int) -> str:
    """``33554432`` -> ``'32.0 MiB'``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def copy_case(
    nbytes: int, device: torch.device | str, *, allocating: bool = False
) -> Case:
    """A copy that moves ``nbytes`` in all: read ``nbytes / 2``, write as many.

    The memory-bandwidth limit that a row moving ``nbytes`` is compared with:
    into an output that exists already, or, ``allocating``, into a new one
    each call (a clone), the floor of a row that returns new tensors.
    """
    if not isinstance(nbytes, int) or nbytes < 8:
        raise ValueError(f"a copy needs at least 8 bytes moved, got {nbytes!r}")
    device = torch.device(device)
    numel = max(1, nbytes // 8)  # float32 elements read (and as many written)
    source = torch.randn(numel, device=device)
    if allocating:
        name, fn = f"clone, {format_bytes(8 * numel)} moved (new output)", source.clone
    else:
        target = torch.empty_like(source)
        name = f"copy, {format_bytes(8 * numel)} moved"
        fn = lambda: target.copy_(source)  # noqa: E731
    return Case(
        name,
        fn,
        shapes={"x": [numel]},
        dtype="float32",
        bytes_moved=8 * numel,
        is_copy=True,
        allocates=allocating,
    )


# the copy that tells a busy machine from a quiet one: in the memory regime, at
# least four times the largest copy that still ran from cache on the machines the
# book has met (the recorded copy_sizes run; a test holds the two together), since
# contention for memory is what a busy neighbour causes and a cache-sized probe
# would barely see it
PROBE_BYTES = 256 * 2**20


def copy_probe(device: torch.device | str, *, nbytes: int = PROBE_BYTES) -> float:
    """Median milliseconds of a copy moving ``nbytes`` (7 calls after 2 to warm up).

    Timed before and after a suite (``benchmarks.run``): if the two disagree,
    or both are far slower than the same probe in the recorded run of this
    device, the machine was busy and its live numbers are not evidence.
    """
    device = torch.device(device)
    case = copy_case(nbytes, device)
    for _ in range(2):
        case.fn()
    synchronize(device)
    return statistics.median(_time_once(case.fn, device)[0] for _ in range(7))


def with_peak_memory(cases: Sequence[Case], device: torch.device | str) -> list[str]:
    """Measure each case's ``peak_bytes`` (``memory.peak_memory``, one call, untimed).

    Returns the notes to print under the table: where the measure cannot run
    here, one saying why (and the cases keep ``peak_bytes=None``).
    """
    device = torch.device(device)
    for case in cases:
        try:
            case.peak_bytes = peak_memory(case.fn, device)
        except RuntimeError as error:
            return [f"peak memory: not measured, {error}"]
    return []


def _spread(times_ms: list[float]) -> float:
    """Interquartile range over the median of ``times_ms`` (``Timing.spread``)."""
    return Timing("", times_ms).spread


def _check_counts(warmup: int, repeats: int) -> None:
    if not isinstance(warmup, int) or not isinstance(repeats, int):
        raise ValueError(
            f"warmup and repeats must be integers, got {warmup!r}, {repeats!r}"
        )
    if warmup < 0 or repeats < 1:
        raise ValueError(
            f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}"
        )


def measure(
    cases: Sequence[Case],
    *,
    device: torch.device | str | None = None,
    warmup: int = 3,
    repeats: int = 20,
    copy_baselines: bool = True,
    max_seconds: float | None = None,
    max_repeats: int = 1000,
    calls_per_sample: int = 1,
) -> list[Timing]:
    """Time ``cases`` interleaved, each against a copy of its own bytes.

    The copy is of the same kind as the case: a clone (a new output each
    call) for a case that ``allocates``, a copy into a given output for one
    that does not. On a CPU each sample also counts the minor page faults of
    its calls (``Timing.faults_per_call``, the median per call).

    Every case (and, with ``copy_baselines``, one copy per distinct byte count,
    listed after the cases) is called ``warmup`` times, then ``repeats``
    rounds follow; each round calls every case once, in an order shuffled
    afresh (seeded, so a run is repeatable), so no case always runs first or
    right after the same neighbour: a heavy row that leaves the caches cold
    or memory to be faulted back in does not always slow down the same row.

    With ``max_seconds``, rounds go on after the first ``repeats`` while any
    row is noisy (``Timing.noisy``), until every row is steady, the timed
    rounds have taken ``max_seconds`` or ``max_repeats`` rounds have run: a
    recorded run repeats as long as it needs to, within a time cap. When a
    row's calls still disagree after ``2 * repeats`` samples (some calls pay
    a page fault or a cache miss that others do not), *every* row starts
    again with samples that each average ``BATCH_GROWTH`` times as many calls
    in a row (``Timing.calls_per_sample``): the mean of a few calls varies
    less than one call, as in ``timeit``, and a call repeated in a row finds
    its data in cache where a single call may not, so rows are only
    comparable when they are sampled alike. Every row of the result has the
    same ``calls_per_sample`` (``calls_per_sample`` sets where it starts). If
    the caps end the rounds before the longer samples number ``repeats`` (a
    busy machine makes every call slow), every row keeps its last full set,
    noisy as it was: each comes back with at least ``repeats`` times.
    """
    cases = _checked_cases(cases, warmup, repeats, calls_per_sample, max_seconds)
    device = torch.device(device) if device is not None else default_device()
    everything = cases + (_copies_for(cases, device) if copy_baselines else [])
    for case in everything:
        for _ in range(warmup):
            case.fn()
    synchronize(device)
    calls, times, faults = _sample_rounds(
        everything, device, repeats, max_seconds, max_repeats, calls_per_sample
    )
    rounds = f"{os.getpid()}-{next(_MEASUREMENTS)}"
    timings = [_timing(*row, calls, rounds) for row in zip(everything, times, faults)]
    # a copy among the cases is its own baseline (and that of rows of its size)
    attach_copies(timings)
    return timings


# numbers the measurements of this process (``Timing.rounds``)
_MEASUREMENTS = itertools.count()


def _timing(
    case: Case, times: list[float], faults: list[float], calls: int, rounds: str
) -> Timing:
    """A case's row: its times, and the median of its page faults per call."""
    return Timing(
        case.name,
        times,
        shapes=dict(case.shapes),
        dtype=case.dtype,
        bytes_moved=case.bytes_moved,
        is_copy=case.is_copy,
        calls_per_sample=calls,
        peak_bytes=case.peak_bytes,
        allocates=bool(case.allocates),
        faults_per_call=statistics.median(faults) if faults else None,
        rounds=rounds,
    )


def _sample_rounds(
    everything: list[Case],
    device: torch.device,
    repeats: int,
    max_seconds: float | None,
    max_repeats: int,
    calls: int,
) -> tuple[int, list[list[float]], list[list[float]]]:
    """``measure``'s rounds: every case once a round, in a shuffled order, until
    the counts and caps say stop; the calls each sample averages, and every
    row's times and page faults."""
    times: list[list[float]] = [[] for _ in everything]
    faults: list[list[float]] = [[] for _ in everything]
    # the rows' last full sets of samples (at least `repeats` each) before they
    # started again with longer ones: what they keep if the caps end the rounds
    # before the new sets are full (on a busy machine), so no row comes back
    # without times, and all of them sampled alike
    kept: tuple[int, list[list[float]], list[list[float]]] | None = None
    order = random.Random(0)
    start = time.perf_counter()
    rounds = 0
    while rounds < repeats or (
        max_seconds is not None
        and rounds < max_repeats
        and time.perf_counter() - start < max_seconds
        and any(len(row) < repeats or _spread(row) > NOISY_SPREAD for row in times)
    ):
        for i in order.sample(range(len(everything)), len(everything)):
            elapsed, row_faults = _time_once(everything[i].fn, device, calls)
            times[i].append(elapsed)
            if row_faults is not None:
                faults[i].append(row_faults)
        rounds += 1
        if max_seconds is not None and any(
            len(row) >= 2 * repeats and _spread(row) > NOISY_SPREAD for row in times
        ):
            # every row starts again, each sample averaging more calls in a row
            kept = (calls, [list(row) for row in times], [list(r) for r in faults])
            calls *= BATCH_GROWTH
            for row in times + faults:
                row.clear()
    if kept is not None and any(len(row) < repeats for row in times):
        return kept
    return calls, times, faults


def _checked_cases(
    cases: Sequence[Case],
    warmup: int,
    repeats: int,
    calls_per_sample: int,
    max_seconds: float | None,
) -> list[Case]:
    """``measure``'s arguments checked; the cases as a list."""
    _check_counts(warmup, repeats)
    if isinstance(calls_per_sample, bool) or not (
        isinstance(calls_per_sample, int) and calls_per_sample >= 1
    ):
        raise ValueError(
            f"calls_per_sample must be a positive integer, got {calls_per_sample!r}"
        )
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds!r}")
    cases = list(cases)
    if not cases:
        raise ValueError("measure needs at least one Case")
    return cases


def _copies_for(cases: list[Case], device: torch.device) -> list[Case]:
    """One copy per distinct (byte count, allocates) of the cases that move bytes,
    unless a case is that copy itself; a case that gives its bytes must say
    whether it allocates."""
    for case in cases:
        if case.bytes_moved is not None and case.allocates is None and not case.is_copy:
            raise ValueError(
                f"case {case.name!r} says how many bytes it moves but not whether it "
                "allocates its outputs: give Case(..., allocates=True) if it returns "
                "new tensors (it is then compared with a clone of its bytes), or "
                "allocates=False if it writes into outputs it was given or in place"
            )
    own = {(case.bytes_moved, bool(case.allocates)) for case in cases if case.is_copy}
    copies: dict[tuple[int, bool], Case] = {}
    for case in cases:
        key = (case.bytes_moved, bool(case.allocates))
        if key[0] is not None and key not in own and key not in copies:
            copies[key] = copy_case(key[0], device, allocating=key[1])
    return list(copies.values())


def attach_copies(timings: list[Timing]) -> None:
    """Set each row's ``copy_ms`` to the median of the copy row of its bytes and
    kind (a clone for a row that allocates), where the table has one."""
    copy_median = {
        (t.bytes_moved, t.allocates): t.median_ms for t in timings if t.is_copy
    }
    for timing in timings:
        key = (timing.bytes_moved, timing.allocates)
        if key in copy_median:
            timing.copy_ms = copy_median[key]


def time_function(
    fn: Callable[[], object],
    *,
    name: str,
    device: torch.device | str | None = None,
    warmup: int = 3,
    repeats: int = 20,
    dtype: torch.dtype | str | None = None,
    shapes: dict | None = None,
    bytes_moved: int | None = None,
) -> Timing:
    """Time one function alone: ``warmup`` untimed calls, then ``repeats`` timed ones."""
    case = Case(
        name,
        fn,
        shapes=dict(shapes or {}),
        dtype=None if dtype is None else str(dtype).replace("torch.", ""),
        bytes_moved=bytes_moved,
    )
    return measure(
        [case], device=device, warmup=warmup, repeats=repeats, copy_baselines=False
    )[0]
