"""Which device to run on, and waiting for it: shared by training, timing and attention.

- ``default_device``: the GPU when there is one, else the CPU (every timing
  cell and ``device="auto"``).
- ``resolve_device``: a user's choice (``"auto"``, ``"cpu"``, ``"cuda:1"``, ...)
  checked, with one clear error for a device that does not exist here.
- ``synchronize``: wait for the GPU's queued work (nothing to do on a CPU).
"""

from __future__ import annotations

import torch

__all__ = ["DEVICE_CHOICES", "default_device", "resolve_device", "synchronize"]

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


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
