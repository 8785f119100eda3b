"""Which device to run on, what it is, and waiting for it: shared by training, timing
and attention.

- ``default_device``: the GPU when there is one, else the CPU (every timing
  cell and ``device="auto"``).
- ``resolve_device``: a user's choice (``"auto"``, ``"cpu"``, ``"cuda:1"``, ...)
  checked, with one clear error for a device that does not exist here.
- ``environment``: where, when and with what a measurement ran (device model,
  threads, versions, cache or memory size, a GPU's data-sheet bandwidth); every
  recorded timing and experiment carries it.
- ``sdpa_backend``: which of SDPA's kernels (FlashAttention, memory-efficient,
  cuDNN, math) torch picks for given inputs; ``sdpa_settings`` which it may
  pick at all; ``gpu_clocks`` a GPU's clocks, power and temperature as
  ``nvidia-smi`` reads them. A GPU record carries all three: a Flex against
  SDPA verdict can flip with the kernel, and a throttled clock slows every row.
- ``synchronize``: wait for the GPU's queued work (nothing to do on a CPU).
- ``cuda_capability`` and ``timing_dtype``: what a GPU can run. bfloat16
  arithmetic (and Triton's bfloat16) needs compute capability 8.0 (Ampere);
  Colab's free T4 is 7.5, so timing cells use float16 there and say so.
"""

from __future__ import annotations

import datetime as _dt
import functools
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "DEVICE_CHOICES",
    "BFLOAT16_CAPABILITY",
    "default_device",
    "resolve_device",
    "synchronize",
    "cuda_capability",
    "timing_dtype",
    "PeakBandwidth",
    "PEAK_BANDWIDTH",
    "peak_bandwidth",
    "cpu_name",
    "device_name",
    "sdpa_backend",
    "sdpa_settings",
    "gpu_clocks",
    "last_level_cache_bytes",
    "cpu_model",
    "environment",
]

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
# bfloat16 kernels (cuBLAS, Triton, FlexAttention's template) need Ampere or newer
BFLOAT16_CAPABILITY = (8, 0)


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU: the device every timing cell uses."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` (or None) picks CUDA when present, else the CPU; other names are checked."""
    if device is None or device == "auto":
        return default_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"unknown device {device!r}; choose one of {DEVICE_CHOICES}"
        ) from None
    if resolved.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unknown device {device!r}; choose one of {DEVICE_CHOICES}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} was asked for but this torch sees no CUDA GPU; "
            "use --device cpu (or auto)"
        )
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} is not available here; use cpu")
    return resolved


def synchronize(device: torch.device) -> None:
    """Wait until the device has finished its queued work (CUDA); a no-op elsewhere."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cuda_capability(device: torch.device | str) -> tuple[int, int] | None:
    """The compute capability ``(major, minor)`` of a CUDA device; None for other devices."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability(device))


def timing_dtype(name: str, device: torch.device | str) -> tuple[str, str | None]:
    """The dtype to time in on ``device``: ``name``, or a note on what replaced it.

    On a GPU older than compute capability 8.0 (a T4 is 7.5) bfloat16 becomes
    float16, which those GPUs run natively: returns ``("float16", why)``.
    Everywhere else ``(name, None)``.
    """
    capability = cuda_capability(device)
    if (
        name == "bfloat16"
        and capability is not None
        and capability < BFLOAT16_CAPABILITY
    ):
        major, minor = capability
        return "float16", (
            f"float16 instead of bfloat16: this GPU has compute capability "
            f"{major}.{minor}, and bfloat16 kernels need 8.0 or newer"
        )
    return name, None


@dataclass(frozen=True)
class PeakBandwidth:
    """A GPU's peak memory bandwidth from its vendor's data sheet."""

    gpu: str
    gb_per_s: float
    source: str


_A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (2021)"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023)"
# Peak DRAM bandwidth of the GPUs a learner meets (Colab, Kaggle, cloud), in GB/s
# (10^9 bytes/s). Keys are matched as whole words in torch.cuda.get_device_name.
PEAK_BANDWIDTH: dict[str, PeakBandwidth] = {
    "T4": PeakBandwidth("NVIDIA T4", 320.0, "NVIDIA T4 datasheet: 320+ GB/s GDDR6"),
    "L4": PeakBandwidth("NVIDIA L4", 300.0, "NVIDIA L4 datasheet: 300 GB/s GDDR6"),
    "A10G": PeakBandwidth("NVIDIA A10G", 600.0, "NVIDIA A10 datasheet: 600 GB/s"),
    "V100": PeakBandwidth("NVIDIA V100", 900.0, "NVIDIA V100 datasheet: 900 GB/s"),
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
    "H200": PeakBandwidth(
        "NVIDIA H200", 4800.0, "NVIDIA H200 Tensor Core GPU datasheet: 4.8 TB/s HBM3e"
    ),
}


def peak_bandwidth(name: str) -> PeakBandwidth | None:
    """The data-sheet bandwidth for a GPU named as ``torch.cuda.get_device_name`` does."""
    for key, peak in PEAK_BANDWIDTH.items():
        # whole-word match: "L4" must not match "NVIDIA L40S"
        if re.search(
            rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])",
            name,
            flags=re.IGNORECASE,
        ):
            return peak
    return None


# ---------------------------------------------------------------------------
# where a measurement ran
# ---------------------------------------------------------------------------


@functools.cache
def cpu_name() -> str:
    """The CPU's model name (Linux: ``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@functools.cache
def cpu_model() -> str | None:
    """What tells CPUs of one model name apart (Linux ``/proc/cpuinfo``): family,
    model and stepping as ``'6-167-1'``, or None where the system does not say.

    A virtual machine's CPU is often named only "Intel(R) Xeon(R) Processor",
    whatever the hardware under it; these numbers say which generation it is.
    """
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("cpu family", "model", "stepping") and key not in fields:
                fields[key] = value.strip()
            if not line.strip() and fields:
                break  # the first processor's block is enough
    except OSError:
        return None
    if not {"cpu family", "model"} <= fields.keys():
        return None
    parts = [fields["cpu family"], fields["model"], fields.get("stepping", "?")]
    return "-".join(parts)


def device_name(device: torch.device | str) -> str:
    """A human name for ``device``: the GPU model, or the CPU model."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


@functools.cache
def last_level_cache_bytes() -> int | None:
    """Size of the CPU's largest cache in bytes (Linux sysfs), or None if unknown.

    A copy of a tensor smaller than this can run from cache; a benchmark that
    wants memory bandwidth must move more.
    """
    folder = Path("/sys/devices/system/cpu/cpu0/cache")
    best: tuple[int, int] | None = None
    for index in folder.glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not match:
            continue
        scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]
        candidate = (level, int(match.group(1)) * scale)
        best = candidate if best is None or candidate > best else best
    return None if best is None else best[1]


def environment(device: torch.device | str) -> dict:
    """Where, when and with what a measurement was taken (the same keys everywhere).

    ``device`` is torch's name (``cpu``, ``cuda:0``), ``device_name`` the model.
    On a GPU it adds the memory and the data-sheet bandwidth; on a CPU its
    family-model-stepping (``cpu_model``) and the size of the last-level cache.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    env = {
        "device": str(device),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
    }
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory
        env["gpu_memory_gib"] = round(memory / 2**30, 1)
        peak = peak_bandwidth(env["device_name"])
        env["peak_gb_s"] = None if peak is None else peak.gb_per_s
        env["sdpa"] = sdpa_settings()
        env["clocks"] = gpu_clocks(device)
    else:
        env["cpu_model"] = cpu_model()
        env["last_level_cache_bytes"] = last_level_cache_bytes()
    return env


def sdpa_backend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
) -> str | None:
    """The kernel ``scaled_dot_product_attention`` picks for these inputs
    (``"FLASH_ATTENTION"``, ``"EFFICIENT_ATTENTION"``, ``"CUDNN_ATTENTION"``,
    ``"MATH"``...), asked of torch's own dispatcher; None where this torch
    cannot say."""
    try:
        from torch.nn.attention import SDPBackend

        choice = torch._fused_sdp_choice(q, k, v, attn_mask, 0.0, is_causal)
        return SDPBackend(choice).name
    except (AttributeError, ImportError, RuntimeError, TypeError, ValueError):
        return None


def sdpa_settings() -> dict:
    """Which of SDPA's CUDA kernels are switched on, and whether this build has
    FlashAttention and cuDNN attention at all."""
    backends = torch.backends.cuda
    found = {}
    for name in ("flash", "mem_efficient", "cudnn", "math"):
        enabled = getattr(backends, f"{name}_sdp_enabled", None)
        found[f"{name}_enabled"] = None if enabled is None else bool(enabled())
    flash = getattr(backends, "is_flash_attention_available", None)
    found["flash_built"] = None if flash is None else bool(flash())
    found["cudnn_version"] = torch.backends.cudnn.version()
    return found


# what gpu_clocks reads, in nvidia-smi's names; the reasons a clock is held
# down were renamed (throttle -> event) in newer drivers, and an unknown name
# fails the whole query, so each is tried in turn, then none
CLOCK_FIELDS = (
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
    "power.draw",
    "temperature.gpu",
)
CLOCK_REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active", None)


def gpu_clocks(device: torch.device | str) -> dict | None:
    """The GPU's clocks now and at most (MHz), its power draw (W) and
    temperature (C), and the bit mask of reasons its clocks are held down, as
    ``nvidia-smi`` reads them; None without ``nvidia-smi`` or when it cannot
    answer."""
    device = torch.device(device)
    if device.type != "cuda" or shutil.which("nvidia-smi") is None:
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    for reasons in CLOCK_REASONS:
        fields = CLOCK_FIELDS + ((reasons,) if reasons else ())
        command = [
            "nvidia-smi",
            f"--id={index}",
            f"--query-gpu={','.join(fields)}",
            "--format=csv,noheader,nounits",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode == 0 and done.stdout.strip():
            first = done.stdout.strip().splitlines()[0]
            values = [v.strip() for v in first.split(",")]
            if len(values) == len(fields):
                return dict(zip(fields, values, strict=True))
    return None
