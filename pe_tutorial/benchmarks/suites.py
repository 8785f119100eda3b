"""The suites' vocabulary: a ``Plan`` (what to time on a device), a ``Suite`` (a
named builder of plans) in the registry ``SUITES``, a ``SuiteResult`` (one run's
rows, printing as a table and saving as JSON), the checks of a suite's name,
device and dtype, a path's result against its reference (``WrongResult``), and
compile notes (chapter 10: cold or warm).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..devices import timing_dtype
from . import timing as bench

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
            for note in why + self.printed_notes()
        ]
        return "\n".join([text, *notes])

    def printed_notes(self) -> list[str]:
        """The notes under the table: those written while the suite ran (rows
        skipped and why, compile times), then the suite's report computed *now*
        from this run's numbers by today's code (``Suite.report``), never the
        report's sentences stored when it was recorded, which would outlive the
        rule that wrote them."""
        kept = self.notes[: len(self.notes) - self.report_notes]
        suite = SUITES.get(self.suite)
        if suite is None or suite.report is None:
            return list(self.notes)
        return kept + suite.report(self)

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
