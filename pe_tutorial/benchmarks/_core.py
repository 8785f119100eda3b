"""The runner of the suites: ``run`` times a suite's plan with ``bench.measure``
and says whether the machine was busy (``busy_reason``); ``sample_alike`` keeps
parts measured apart sampled alike, and ``merge_runs`` joins runs made in
separate processes.

The suites' vocabulary (``Plan``, ``Suite``, ``SuiteResult``, the registry) is
``suites.py``; recorded runs on disk, ``quoted`` and ``show`` are
``recorded.py``. Both are re-exported here, where the suites import them from.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from ..devices import environment, timing_dtype
from . import timing as bench
from .recorded import (
    INVITATION,
    QUOTED_DEVICE,
    RESULTS_FOLDER,
    RESULTS_PACKAGE,
    device_slug,
    load_recorded,
    load_recorded_runs,
    quoted,
    record,
    results_dir,
    results_path,
    show,
    write_atomically,
)
from .suites import (
    DTYPES,
    SUITES,
    Plan,
    Suite,
    SuiteResult,
    WrongResult,
    check_device,
    check_dtype,
    check_result,
    check_suite,
    compile_counts,
    compile_note,
    register,
)

__all__ = [
    "INVITATION",
    "QUOTED_DEVICE",
    "RESULTS_FOLDER",
    "RESULTS_PACKAGE",
    "device_slug",
    "load_recorded",
    "load_recorded_runs",
    "quoted",
    "record",
    "results_dir",
    "results_path",
    "show",
    "write_atomically",
    "DTYPES",
    "SUITES",
    "Plan",
    "Suite",
    "SuiteResult",
    "WrongResult",
    "check_device",
    "check_dtype",
    "check_result",
    "check_suite",
    "compile_counts",
    "compile_note",
    "register",
    "BUSY_FACTOR",
    "busy_reason",
    "run",
    "sample_alike",
    "merge_runs",
]

# a probe more than this factor slower (than itself, or than the recorded one)
BUSY_FACTOR = 1.5


def busy_reason(result: SuiteResult, recorded: list[SuiteResult]) -> str | None:
    """Why ``result``'s machine was busy, from its copy probes, or None if it was not.

    Two signs, each a copy of ``bench.PROBE_BYTES`` timed before and after the
    suite: the two probes differ by more than ``BUSY_FACTOR`` (the load
    changed during the run), or both are that much slower than the probe of a
    recorded run on the same device (the load was there all along). A busy
    row can look steady, since contention slows every call alike; the probes
    see it.
    """
    probe = result.environment.get("copy_probe_ms")
    if not probe:
        return None
    before, after = probe["before"], probe["after"]
    if max(before, after) > BUSY_FACTOR * min(before, after):
        return (
            f"a {bench.format_bytes(bench.PROBE_BYTES)} copy took {before:.2f} ms "
            f"before the suite and {after:.2f} ms after it: the load changed while "
            "it ran"
        )
    slug = device_slug(result.environment)
    for run in recorded:
        quiet = run.environment.get("copy_probe_ms")
        if run is result or not quiet or device_slug(run.environment) != slug:
            continue
        # a probe of another size (a run recorded before the probe grew) is no floor
        if quiet.get("bytes", 64 * 2**20) != probe.get("bytes", 64 * 2**20):
            continue
        floor = min(quiet["before"], quiet["after"])
        if min(before, after) > BUSY_FACTOR * floor:
            return (
                f"copies ran {min(before, after) / floor:.1f}x slower than in the "
                f"recorded run on this device ({run.environment.get('date', '')[:10]})"
            )
    return None


def run(
    name: str,
    device: torch.device | str | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    warmup: int | None = None,
    repeats: int | None = None,
    max_seconds: float | None = None,
    probes: bool = True,
    calls_per_sample: int = 1,
    **options,
) -> SuiteResult:
    """Run suite ``name`` on ``device`` (default: the GPU if any) and return its result.

    ``repeats`` rounds are timed (the suite's default for the device); with
    ``max_seconds``, more follow while a row is noisy, up to that time
    (``bench.measure``), as a recording does. ``options`` go to the suite's
    builder (sizes; see each suite's docstring). ``probes=False`` leaves out
    the copies that tell a busy machine (a smoke run, which measures nothing).
    ``calls_per_sample``: how many calls in a row a sample starts at
    (``bench.measure``; a recording in several processes sets it so that
    they all sample alike).
    """
    suite = check_suite(name)
    device = check_device(device)
    # the device's default dtype may have replaced the suite's (a T4's float16)
    substituted = timing_dtype(suite.gpu_dtype, device)[1] if dtype is None else None
    dtype = check_dtype(suite, dtype, device)
    plan = suite.build(device, dtype, **options)
    if repeats is None:
        repeats = suite.default_repeats(device)
    before = bench.copy_probe(device) if probes else None
    groups = [[case] for case in plan.cases] if plan.separate else [plan.cases]
    timings = _measure_alike(
        groups,
        device=device,
        warmup=suite.warmup if warmup is None else warmup,
        repeats=repeats,
        max_seconds=None if max_seconds is None else max_seconds / len(groups),
        calls=calls_per_sample,
    )
    after = bench.copy_probe(device) if probes else None
    command = f"python -m pe_tutorial.benchmarks {name} --device {device.type}"
    result = SuiteResult(
        suite=name,
        environment=environment(device),
        timings=timings,
        notes=list(plan.notes),
        settings={"dtype": str(dtype).replace("torch.", ""), **plan.settings},
        reference=plan.reference,
        command=command,
    )
    if probes:
        result.environment["copy_probe_ms"] = {
            "before": before,
            "after": after,
            "bytes": bench.PROBE_BYTES,
        }
        result.busy = busy_reason(result, load_recorded_runs(name))
    if substituted is not None:
        result.notes.insert(0, substituted)
    if suite.report is not None:
        lines = suite.report(result)
        result.notes.extend(lines)
        result.report_notes = len(lines)
    return result


def _measure_alike(
    groups: list[list], *, calls: int = 1, **options
) -> list[bench.Timing]:
    """``bench.measure`` of each group, every row of every group sampled alike.

    Each ``measure`` samples its own rows alike, but groups measured apart may
    end at different ``calls_per_sample``: those that ended with fewer are
    measured again from the largest count, until all agree (a count only
    grows, so this ends).
    """
    measured = sample_alike(
        len(groups),
        lambda i, calls: bench.measure(groups[i], calls_per_sample=calls, **options),
        lambda timings: timings[0].calls_per_sample,
        calls=calls,
    )
    return [t for timings in measured for t in timings]


def sample_alike(
    parts: int,
    measure: Callable[[int, int], Any],
    calls_of: Callable[[Any], int],
    *,
    calls: int = 1,
) -> list:
    """``measure(i, calls)`` for each part ``i < parts``, every part sampled alike.

    A part measures its own rows alike and says with how many calls in a row it
    ended (``calls_of``, at least ``calls``, more while a row stayed noisy); the
    parts that ended with fewer than another are measured again from the largest
    count, until all agree (a count only grows, so this ends). Parts are groups
    of rows measured apart (``_measure_alike``) or processes (``cli``'s
    ``--processes``).
    """
    results: list = [None] * parts
    while True:
        for i in range(parts):
            if results[i] is None or calls_of(results[i]) < calls:
                results[i] = measure(i, calls)
        counts = {calls_of(result) for result in results}
        if len(counts) == 1:
            return results
        calls = max(counts)


def merge_runs(runs: list[SuiteResult]) -> SuiteResult:
    """One result from runs of one suite made in separate processes.

    Each row keeps every process's samples (``times_ms``, so its median and
    interquartile range are those of all the calls) and each process's
    median (``Timing.process_medians_ms``: the table's ``runs %`` column is
    their range, what a single process cannot show: the state a process
    starts in, its allocator and its place in memory). Rows must match and
    be sampled alike (the same ``calls_per_sample``), or this is a
    ValueError. Copies are matched to rows again; the settings are the first
    process's, or the suite's ``merge_settings`` of every process's (the
    profile's steps from all of them); the suite's report is computed from the
    merged rows; the run is busy if any process was.
    """
    if not runs:
        raise ValueError("merge_runs needs at least one run")
    first = runs[0]
    names = [t.name for t in first.timings]
    for run in runs[1:]:
        if run.suite != first.suite or [t.name for t in run.timings] != names:
            raise ValueError(
                f"runs of {first.suite!r} ({names}) and {run.suite!r} "
                f"({[t.name for t in run.timings]}) have different rows"
            )
    counts = {t.calls_per_sample for run in runs for t in run.timings}
    if len(counts) > 1:
        raise ValueError(
            f"the runs were sampled unlike (calls in a row: {sorted(counts)}); "
            "measure them again from the largest count"
        )
    timings = []
    for i, row in enumerate(first.timings):
        rows = [run.timings[i] for run in runs]
        faults = [t.faults_per_call for t in rows if t.faults_per_call is not None]
        merged = bench.Timing.from_dict(row.to_dict())
        merged.times_ms = [ms for t in rows for ms in t.times_ms]
        merged.process_medians_ms = [t.median_ms for t in rows]
        merged.process_counts = [len(t.times_ms) for t in rows]
        merged.faults_per_call = statistics.median(faults) if faults else None
        timings.append(merged)
    bench.attach_copies(timings)
    suite = SUITES.get(first.suite)
    report = suite.report if suite is not None else None
    # the first run's notes without what its report wrote: the report is done
    # again on the merged rows (a report may also measure, as the profile does)
    notes = list(first.notes[: len(first.notes) - first.report_notes])
    environment = dict(first.environment)
    environment["processes"] = len(runs)
    probes = [run.environment.get("copy_probe_ms") for run in runs]
    if all(probes):
        environment["copy_probe_ms"] = {
            **probes[0],
            "after": probes[-1]["after"],
            "each": probes,
        }
    merge_settings = suite.merge_settings if suite is not None else None
    settings = (
        merge_settings([run.settings for run in runs])
        if merge_settings is not None
        else dict(first.settings)
    )
    merged_run = SuiteResult(
        suite=first.suite,
        environment=environment,
        timings=timings,
        notes=notes,
        settings=settings,
        reference=first.reference,
        command=first.command,
        busy=next((run.busy for run in runs if run.busy), None),
    )
    merged_run.notes.append(
        f"recorded as {len(runs)} separate processes, one after the other: each "
        "row's times are all of theirs (notes such as compile times are the first's)"
    )
    if report is not None:
        lines = report(merged_run)
        merged_run.notes.extend(lines)
        merged_run.report_notes = len(lines)
    return merged_run
