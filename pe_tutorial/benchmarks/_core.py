"""The machinery of the suites: a registry, a runner, results that save and load.

A suite builds a ``Plan`` (the cases to time, plus notes such as rows skipped
on this device and compile times) for a device and dtype; ``run`` times it
with ``bench.measure`` and returns a ``SuiteResult`` that prints as a table,
saves as JSON and loads back. Recorded GPU results ship inside the package
(``pe_tutorial/results/bench-<suite>.json``), so an installed package (Colab)
shows them too.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from ..devices import environment, timing_dtype
from . import timing as bench

RESULTS_PACKAGE = "pe_tutorial"
RESULTS_FOLDER = "results"

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


class WrongResult(RuntimeError):
    """A path of a suite computed something other than its reference: a bug, not a row.

    Suites check each path's output before timing it; a wrong one stops the
    suite, naming the path, instead of being dropped from the table.
    """


def check_result(
    name: str,
    got: torch.Tensor | None,
    want: torch.Tensor,
    *,
    what: str,
    reference: str,
    atol: float,
    rtol: float = 0.0,
) -> None:
    """Raise ``WrongResult`` unless the row ``name``'s ``what`` (``got``) has ``want``'s
    shape and ``|got - want| <= atol + rtol |want|`` everywhere (compared in float64);
    the message names the row, what of it, the ``reference`` and the difference."""
    if got is None or got.shape != want.shape:
        shape = None if got is None else tuple(got.shape)
        raise WrongResult(
            f"{name}: its {what} has shape {shape} instead of {tuple(want.shape)}; "
            "fix that path, or remove it from the suite"
        )
    a, b = got.double(), want.double()
    if not torch.allclose(a, b, atol=atol, rtol=rtol):
        difference = (a - b).abs().max().item()
        largest = b.abs().max().item()
        raise WrongResult(
            f"{name}: its {what} disagrees with {reference} (largest difference "
            f"{difference:.3g}, largest value {largest:.3g}); fix that path, or "
            "remove it from the suite"
        )


@dataclass
class Plan:
    """What a suite will time on one device: cases, and what to say besides.

    ``notes`` are printed under the table (rows skipped here and why, compile
    times, which peer library versions ran); ``reference`` names the row the
    others are compared with when a copy is not the right yardstick.
    """

    cases: list[bench.Case]
    notes: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    reference: str | None = None
    # time each case in rounds of its own (copies of different sizes: a large
    # one flushes the cache a small one would otherwise find warm)
    separate: bool = False


@dataclass(frozen=True)
class Suite:
    """A named benchmark: ``build(device, dtype, **options) -> Plan``."""

    name: str
    chapter: str
    description: str
    build: Callable[..., Plan]
    dtypes: tuple[str, ...] = ("float32",)
    gpu_dtype: str = "float32"
    warmup: int = 3
    repeats: int = 20
    cpu_repeats: int = 10
    # lines printed under the table from the measured rows (e.g. targets met)
    report: Callable[[SuiteResult], list[str]] | None = None
    # why these sizes, in one line: what a model would use them for
    why: str = ""
    # builder options at which the suite runs in well under a second: a smoke run
    # (`--smoke`: every suite runs end to end, nothing is measured), the dry run of
    # tools/gpu_evidence.py on a CPU
    smoke: dict = field(default_factory=dict)
    # the settings of a run merged from several processes' (``merge_runs``), where
    # a suite keeps in its settings what its report measured (the profile): None
    # keeps the first process's
    merge_settings: Callable[[list[dict]], dict] | None = None

    def default_repeats(self, device: torch.device) -> int:
        """The rounds a run times on ``device`` unless told otherwise."""
        return self.repeats if device.type == "cuda" else self.cpu_repeats


SUITES: dict[str, Suite] = {}


def compile_counts() -> tuple[int, int, int]:
    """``(graphs, hits, misses)``: graphs torch.compile has built in this process, and
    the hits and misses of inductor's on-disk cache of compiled graphs so far."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return (
        counters["stats"]["unique_graphs"],
        inductor["fxgraph_cache_hit"],
        inductor["fxgraph_cache_miss"],
    )


def compile_note(name: str, seconds: float, before: tuple[int, int, int]) -> str:
    """The note for a compiled row: its compile time, marked cold or warm.

    ``before`` is ``compile_counts()`` taken just before compiling. Cold: the
    first graph torch.compile built in this process, which also pays for
    importing and starting the compiler (seconds on a CPU); warm: others were
    built before, and only this graph's own work is left. Inductor's on-disk
    cache (hits and misses) says whether the code itself was built or
    loaded, which depends on earlier processes on this machine.
    """
    graphs, hits, misses = compile_counts()
    if graphs == before[0]:
        state = "already compiled in this process: no graph built"
    elif before[0] == 0:
        state = "cold: the first compile in this process"
    else:
        state = f"warm: {before[0]} graph(s) compiled before it in this process"
    cache = []
    if hits > before[1]:
        cache.append(f"{hits - before[1]} loaded from inductor's disk cache")
    if misses > before[2]:
        cache.append(f"{misses - before[2]} built afresh")
    detail = f"{state}; {', '.join(cache)}" if cache else state
    return f"{name}: compiling took {seconds:.1f} s ({detail}), not in its row"


def register(suite: Suite) -> Suite:
    if suite.name in SUITES:
        raise ValueError(f"a suite named {suite.name!r} is already registered")
    SUITES[suite.name] = suite
    return suite


@dataclass
class SuiteResult:
    """One run of a suite: its rows, where it ran, and its notes."""

    suite: str
    environment: dict
    timings: list[bench.Timing]
    notes: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    reference: str | None = None
    command: str = ""
    # why this run's machine was busy (its numbers are not evidence), or None
    busy: str | None = None
    # how many of the last notes the suite's report wrote (merge_runs redoes them)
    report_notes: int = 0

    def table(self, title: str = "") -> str:
        text = bench.format_table(
            self.timings,
            environment=self.environment,
            title=title,
            reference=self.reference,
        )
        suite = SUITES.get(self.suite)
        why = [f"sizes: {suite.why}"] if suite is not None and suite.why else []
        notes = [
            textwrap.fill(note, width=88, subsequent_indent="  ")
            for note in why + self.notes
        ]
        return "\n".join([text, *notes])

    def timing(self, name: str) -> bench.Timing:
        """The row called ``name`` (ValueError listing the rows otherwise)."""
        for timing in self.timings:
            if timing.name == name:
                return timing
        names = [t.name for t in self.timings]
        raise ValueError(f"no row {name!r} in suite {self.suite!r}; rows: {names}")

    def copy_for(self, timing: bench.Timing) -> bench.Timing:
        """The copy row that moved the same bytes as ``timing`` in this run, of its
        kind: a clone for a row that allocates its outputs, else a copy into a
        given output."""
        for row in self.timings:
            if (
                row.is_copy
                and row.bytes_moved == timing.bytes_moved
                and row.allocates == timing.allocates
            ):
                return row
        raise ValueError(f"no copy of {timing.name!r}'s bytes in suite {self.suite!r}")

    def to_dict(self) -> dict:
        return {
            "suite": self.suite,
            "command": self.command,
            "environment": self.environment,
            "settings": self.settings,
            "reference": self.reference,
            "notes": self.notes,
            "busy": self.busy,
            "report_notes": self.report_notes,
            "results": [t.to_dict() for t in self.timings],
        }

    @classmethod
    def from_dict(cls, document: dict) -> SuiteResult:
        for key in ("suite", "environment", "results"):
            if key not in document:
                raise ValueError(f"not a suite result: no {key!r} key")
        return cls(
            suite=document["suite"],
            environment=document["environment"],
            timings=[bench.Timing.from_dict(r) for r in document["results"]],
            notes=list(document.get("notes", [])),
            settings=dict(document.get("settings", {})),
            reference=document.get("reference"),
            command=document.get("command", ""),
            busy=document.get("busy"),
            report_notes=document.get("report_notes", 0),
        )


def check_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ValueError(
            f"unknown suite {name!r}; the suites are: {', '.join(sorted(SUITES))}"
        )
    return SUITES[name]


def check_device(device: torch.device | str | None) -> torch.device:
    """``None`` means the default device; CUDA is refused where there is none."""
    if device is None:
        return bench.default_device()
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"unknown device {device!r}; use 'cpu' or 'cuda' (or 'cuda:N')"
        ) from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {str(device)!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was asked for but this torch sees no CUDA GPU; "
            "use --device cpu"
        )
    return device


def check_dtype(suite: Suite, dtype: str | torch.dtype | None, device) -> torch.dtype:
    """The dtype a suite runs in: the one asked for, else the device's default.

    A GPU's default is the suite's ``gpu_dtype``, moved to float16 where the
    GPU cannot run bfloat16 (``devices.timing_dtype``); asking for bfloat16
    there outright is an error that says what to use.
    """
    asked = dtype is not None
    if dtype is None:
        dtype = suite.gpu_dtype if device.type == "cuda" else "float32"
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
    if name not in suite.dtypes:
        raise ValueError(
            f"suite {suite.name!r} runs in {', '.join(suite.dtypes)}, not {name!r}"
        )
    usable, why = timing_dtype(name, device)
    if why is not None and asked:
        raise ValueError(f"cannot time in {name} here: {why}; use --dtype {usable}")
    return DTYPES[usable]


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


def results_dir() -> Path:
    """The package's ``results`` folder, where recorded runs ship (and ``--record`` writes)."""
    return Path(str(resources.files(RESULTS_PACKAGE) / RESULTS_FOLDER))


def device_slug(environment: dict) -> str:
    """A file-name part naming where a run was measured: ``cuda-nvidia-h100-80gb-hbm3``,
    ``cpu-intel-r-xeon-r-processor-6-143-8-llc-105mib-2-threads``.

    On a CPU the name alone can be generic (a virtual machine's "Intel(R) Xeon(R)
    Processor" covers several generations), so the slug adds what tells
    hardware apart where the run recorded it: family-model-stepping, the
    last-level cache, and the threads (a CPU's speed depends on them). A busy
    machine is judged only against recorded runs of the same slug.
    """
    kind = str(environment.get("device", "cpu")).split(":")[0]
    words = f"{kind} {environment.get('device_name', 'unknown')}"
    if kind == "cpu":
        if environment.get("cpu_model"):
            words += f" {environment['cpu_model']}"
        cache = environment.get("last_level_cache_bytes")
        if environment.get("cpu_model") and cache:
            words += f" llc {round(cache / 2**20)}mib"
        words += f" {environment.get('threads', '?')} threads"
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def results_path(
    name: str, directory: str | Path | None = None, environment: dict | None = None
) -> Path:
    """``bench-<suite>--<device>.json``: one file per suite and device, so recording
    on one machine never overwrites another's (``bench-<suite>.json`` without one)."""
    folder = Path(directory) if directory is not None else results_dir()
    device = "" if environment is None else f"--{device_slug(environment)}"
    return folder / f"bench-{name}{device}.json"


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def record(result: SuiteResult, directory: str | Path | None = None) -> Path:
    """Write ``result`` to ``bench-<suite>--<device>.json`` in the package (or ``directory``)."""
    path = results_path(result.suite, directory, result.environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(result.to_dict(), indent=1) + "\n")
    return path


def load_recorded_runs(
    name: str, directory: str | Path | None = None
) -> list[SuiteResult]:
    """Every recorded run of suite ``name``, one per device: GPUs first, then by name."""
    check_suite(name)
    folder = Path(directory) if directory is not None else results_dir()
    paths = sorted(
        {*folder.glob(f"bench-{name}--*.json"), *folder.glob(f"bench-{name}.json")}
    )
    runs = [SuiteResult.from_dict(json.loads(path.read_text())) for path in paths]
    return sorted(
        runs,
        key=lambda r: (
            not str(r.environment.get("device", "")).startswith("cuda"),
            str(r.environment.get("device_name", "")),
        ),
    )


def load_recorded(name: str, directory: str | Path | None = None) -> SuiteResult | None:
    """The first recorded run of suite ``name`` (a GPU's when there is one), or None."""
    runs = load_recorded_runs(name, directory)
    return runs[0] if runs else None


# The machine whose recorded runs the chapters' prose quotes: a 2-core CPU of the
# kind the book is built on. Its numbers are fixed in the package, so the text
# says the same on every build; the live run is shown beside them.
QUOTED_DEVICE = "cpu-intel-r-xeon-r-processor-6-167-1-llc-480mib-2-threads"


def quoted(name: str, directory: str | Path | None = None) -> SuiteResult:
    """The recorded run of suite ``name`` that the book's prose quotes (``QUOTED_DEVICE``).

    A chapter reads its numbers, verdicts and asserts from this run, never
    from the live one, so two builds on different machines or days print the
    same sentences. FileNotFoundError, saying how to record it, if the
    package has none.
    """
    check_suite(name)
    folder = Path(directory) if directory is not None else results_dir()
    path = folder / f"bench-{name}--{QUOTED_DEVICE}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded run of {name!r} on the quoted machine ({QUOTED_DEVICE}) in "
            f"{folder}; record it there with: python -m pe_tutorial.benchmarks "
            f"{name} --device cpu --record"
        )
    return SuiteResult.from_dict(json.loads(path.read_text()))


def _title(run: SuiteResult, what: str) -> str:
    env = run.environment
    return (
        f"{what}: {env.get('device_name')}, {env.get('date', '')[:10]} ({run.command}):"
    )


# The invitation to record a GPU is printed once per process: once per chapter.
_invited: set[str] = set()
INVITATION = (
    "On a GPU (Colab's included), one command times every suite and writes one file\n"
    "per suite for your device. In a notebook cell (a shell drops the '!'):\n"
    "  !python -m pe_tutorial.benchmarks --all --record --out pe-timings\n"
    "On Colab the runtime's files go when it ends: give --out a folder of your mounted\n"
    "Drive, or download pe-timings/. To add your device's tables to the book, open a\n"
    "pull request that puts those files in pe_tutorial/results/ (README: Timing suites)."
)


def show(result: SuiteResult, *, directory: str | Path | None = None) -> None:
    """Print the recorded runs of ``result``'s suite, then ``result`` as "this machine".

    First the run the text quotes (``quoted``), then every other recorded
    device (GPUs first), then the live run. A live run whose machine was busy
    is headed by why (its numbers are not evidence). Where no GPU run is
    recorded, an invitation to add one is printed, once per process (a
    chapter's kernel).
    """
    recorded = load_recorded_runs(result.suite, directory)
    first = [r for r in recorded if device_slug(r.environment) == QUOTED_DEVICE]
    others = [r for r in recorded if r not in first]
    for run in first:
        print(run.table(_title(run, "recorded run, quoted in the text")))
        print()
    for run in others:
        print(run.table(_title(run, "recorded run")))
        print()
    if result.busy:
        warning = (
            f"This machine was busy while the suite ran: {result.busy}. Its numbers "
            "are not evidence; the text reads the recorded run."
        )
        print(textwrap.fill(warning, width=88))
    print(result.table("this machine, now:"))
    on_gpu = any(
        str(r.environment.get("device", "")).startswith("cuda") for r in recorded
    )
    if not on_gpu and "gpu" not in _invited:
        _invited.add("gpu")
        print()
        print(INVITATION)
    # a process forked later (a compiler's worker) must not inherit these lines
    # unwritten and print them again when it exits
    sys.stdout.flush()
