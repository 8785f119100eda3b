"""Timing that names what it measured: the one helper every chapter's timing cell uses.

``time_function`` warms up, synchronises, times each call with CUDA events on a
GPU or ``time.perf_counter`` on the CPU, and returns a ``Timing`` with the
median and quartiles plus the device, dtype, shapes, thread count and library
versions. ``copy_baseline`` times a plain copy of the same bytes, the practical
limit for memory-bound work, so a kernel can be reported as a ratio to it
(ratios measured in one run are stable where absolute times are not).
Recorded results are saved as JSON under ``book/data/`` with that metadata.

Used from chapter 1 on; the performance chapter explains the method.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = [
    "Timing",
    "PeakBandwidth",
    "PEAK_BANDWIDTH",
    "default_device",
    "device_name",
    "environment",
    "time_function",
    "copy_baseline",
    "peak_bandwidth",
    "format_table",
    "recorded_results_dir",
    "save_results",
    "load_results",
]


@dataclass(frozen=True)
class PeakBandwidth:
    """A GPU's peak memory bandwidth from its vendor's data sheet."""

    gpu: str
    gb_per_s: float
    source: str


_A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (2021)"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023)"
# Peak DRAM bandwidth of the GPUs a learner meets (Colab, Kaggle, cloud), in GB/s (10^9 bytes/s).
PEAK_BANDWIDTH: dict[str, PeakBandwidth] = {
    "T4": PeakBandwidth(
        "NVIDIA T4", 320.0, "NVIDIA T4 Tensor Core GPU datasheet: 320+ GB/s GDDR6"
    ),
    "L4": PeakBandwidth(
        "NVIDIA L4", 300.0, "NVIDIA L4 Tensor Core GPU datasheet: 300 GB/s GDDR6"
    ),
    "A100-SXM4-40GB": PeakBandwidth(
        "NVIDIA A100 40GB SXM", 1555.0, _A100_SHEET + ": 1,555 GB/s HBM2"
    ),
    "A100-PCIE-40GB": PeakBandwidth(
        "NVIDIA A100 40GB PCIe", 1555.0, _A100_SHEET + ": 1,555 GB/s HBM2"
    ),
    "A100-SXM4-80GB": PeakBandwidth(
        "NVIDIA A100 80GB SXM", 2039.0, _A100_SHEET + ": 2,039 GB/s HBM2e"
    ),
    "A100 80GB PCIe": PeakBandwidth(
        "NVIDIA A100 80GB PCIe", 1935.0, _A100_SHEET + ": 1,935 GB/s HBM2e"
    ),
    "H100 80GB HBM3": PeakBandwidth(
        "NVIDIA H100 SXM", 3350.0, _H100_SHEET + ": 3.35 TB/s HBM3 (SXM)"
    ),
    "H100 PCIe": PeakBandwidth(
        "NVIDIA H100 PCIe", 2000.0, _H100_SHEET + ": 2 TB/s HBM2e (PCIe)"
    ),
}


def peak_bandwidth(name: str) -> PeakBandwidth | None:
    """The data-sheet bandwidth for a device name as ``torch.cuda.get_device_name`` spells it, or None."""
    for key, peak in PEAK_BANDWIDTH.items():
        # whole-word match: "L4" must not match "NVIDIA L40S"
        if re.search(
            rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])",
            name,
            flags=re.IGNORECASE,
        ):
            return peak
    return None


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU: the device every timing cell uses."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name(device: torch.device | str) -> str:
    """A human name for ``device``: the GPU model, or the CPU with its thread count."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    return f"CPU ({cpu}, {torch.get_num_threads()} threads)"


def environment(device: torch.device | str) -> dict:
    """Where and with what a measurement was taken: device, versions, threads, date (UTC)."""
    device = torch.device(device)
    return {
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_threads": torch.get_num_threads(),
        "date": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
    }


@dataclass
class Timing:
    """One measurement: per-call times in milliseconds and what was measured.

    ``bytes_moved`` (bytes read plus bytes written by one call), when given,
    turns the median time into an achieved bandwidth.
    """

    name: str
    times_ms: list[float]
    device: str
    dtype: str | None = None
    shapes: dict = field(default_factory=dict)
    bytes_moved: int | None = None
    env: dict = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def quartiles_ms(self) -> tuple[float, float]:
        """25th and 75th percentiles (equal to the single time when there is one)."""
        if len(self.times_ms) < 2:
            return self.times_ms[0], self.times_ms[0]
        q1, _, q3 = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        return q1, q3

    @property
    def bandwidth_gb_s(self) -> float | None:
        """Achieved bandwidth ``bytes_moved / median time`` in GB/s (10^9 bytes per second)."""
        if self.bytes_moved is None:
            return None
        return self.bytes_moved / (self.median_ms * 1e-3) / 1e9

    def ratio_to(self, other: Timing) -> float:
        """How many times longer this takes than ``other`` (median over median)."""
        return self.median_ms / other.median_ms

    def to_dict(self) -> dict:
        record = dataclasses.asdict(self)
        record.update(median_ms=self.median_ms, quartiles_ms=list(self.quartiles_ms))
        record["bandwidth_gb_s"] = self.bandwidth_gb_s
        return record

    @classmethod
    def from_dict(cls, record: dict) -> Timing:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in names})


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
    """Time ``fn()`` (no arguments) on ``device``: ``warmup`` untimed calls, then ``repeats`` timed ones.

    On a GPU each call is bracketed by CUDA events and the device is
    synchronised before reading them, so asynchronous launches are not
    mistaken for finished work; on the CPU each call is timed with
    ``time.perf_counter``.
    """
    if warmup < 0 or repeats < 1:
        raise ValueError(
            f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}"
        )
    device = torch.device(device) if device is not None else default_device()
    for _ in range(warmup):
        fn()
    _synchronize(device)
    times_ms: list[float] = []
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        for start, end in zip(starts, ends):
            start.record()
            fn()
            end.record()
        _synchronize(device)
        times_ms = [start.elapsed_time(end) for start, end in zip(starts, ends)]
    else:
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times_ms.append((time.perf_counter() - start) * 1e3)
    return Timing(
        name=name,
        times_ms=times_ms,
        device=device_name(device),
        dtype=str(dtype).replace("torch.", "") if dtype is not None else None,
        shapes=dict(shapes or {}),
        bytes_moved=bytes_moved,
        env=environment(device),
    )


def copy_baseline(
    like: torch.Tensor,
    *,
    name: str = "copy (same bytes)",
    warmup: int = 3,
    repeats: int = 20,
) -> Timing:
    """Time copying a tensor the size of ``like`` into a preallocated one: the memory-bandwidth limit.

    A copy reads and writes every byte once, so ``bytes_moved = 2 * nbytes``.
    A memory-bound kernel that reads one tensor and writes one of the same size
    cannot beat it; its ratio to this baseline says how close it comes.
    """
    source = (
        torch.empty_like(like).normal_() if like.is_floating_point() else like.clone()
    )
    target = torch.empty_like(source)
    return time_function(
        lambda: target.copy_(source),
        name=name,
        device=like.device,
        warmup=warmup,
        repeats=repeats,
        dtype=like.dtype,
        shapes={"x": list(like.shape)},
        bytes_moved=2 * like.numel() * like.element_size(),
    )


def format_table(timings: Sequence[Timing], *, baseline: Timing | None = None) -> str:
    """A plain-text table: median and quartiles in ms, bandwidth, and the ratio to ``baseline``.

    The header names the device, so a printed table always says where it ran.
    """
    if not timings:
        raise ValueError("format_table needs at least one Timing")
    devices = sorted({t.device for t in timings})
    rows = [("what", "median ms", "IQR ms", "GB/s", "x baseline" if baseline else "")]
    for t in timings:
        q1, q3 = t.quartiles_ms
        bandwidth = "" if t.bandwidth_gb_s is None else f"{t.bandwidth_gb_s:.1f}"
        ratio = f"{t.ratio_to(baseline):.2f}" if baseline else ""
        rows.append(
            (t.name, f"{t.median_ms:.4f}", f"{q1:.4f}-{q3:.4f}", bandwidth, ratio)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths).rstrip())
    env = timings[0].env
    header = f"device: {', '.join(devices)} | torch {env.get('torch', '?')}"
    if timings[0].dtype:
        header += f" | dtype {timings[0].dtype}"
    return "\n".join([header, *lines])


def recorded_results_dir() -> Path:
    """``book/data/`` of the checkout this package was installed from (editable installs and CI).

    On a runtime without the book (a wheel installed on Colab) the folder does
    not exist; ``load_results`` then says so instead of guessing.
    """
    return Path(__file__).resolve().parent.parent / "book" / "data"


def save_results(
    name: str,
    timings: Iterable[Timing],
    *,
    directory: str | Path | None = None,
    notes: str = "",
) -> Path:
    """Write ``timings`` to ``<directory>/<name>.json`` with the environment they were measured in."""
    timings = list(timings)
    if not timings:
        raise ValueError("save_results needs at least one Timing")
    directory = Path(directory) if directory is not None else recorded_results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    document = {
        "name": name,
        "environment": timings[0].env,
        "notes": notes,
        "results": [t.to_dict() for t in timings],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def load_results(
    name: str, *, directory: str | Path | None = None
) -> tuple[dict, list[Timing]] | None:
    """Read ``<directory>/<name>.json``: ``(environment, timings)``, or None if nothing was recorded."""
    directory = Path(directory) if directory is not None else recorded_results_dir()
    path = directory / f"{name}.json"
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    return document["environment"], [Timing.from_dict(r) for r in document["results"]]
