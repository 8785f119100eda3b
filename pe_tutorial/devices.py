"""Which device to run on, and waiting for it: shared by training, timing and attention.

- ``default_device``: the GPU when there is one, else the CPU (every timing
  cell and ``device="auto"``).
- ``resolve_device``: a user's choice (``"auto"``, ``"cpu"``, ``"cuda:1"``, ...)
  checked, with one clear error for a device that does not exist here.
- ``synchronize``: wait for the GPU's queued work (nothing to do on a CPU).
- ``cuda_capability`` and ``timing_dtype``: what a GPU can run. bfloat16
  arithmetic (and Triton's bfloat16) needs compute capability 8.0 (Ampere);
  Colab's free T4 is 7.5, so timing cells use float16 there and say so.
"""

from __future__ import annotations

import torch

__all__ = [
    "DEVICE_CHOICES",
    "BFLOAT16_CAPABILITY",
    "default_device",
    "resolve_device",
    "synchronize",
    "cuda_capability",
    "timing_dtype",
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
