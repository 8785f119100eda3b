"""The ``roofline`` suite: the ceilings this device reaches, not its data sheet's (chapter 10).

A roofline needs two ceilings: how many flop/s the device does and how many
bytes/s it moves. Data sheets give peaks no kernel reaches (a GPU's dense
tensor-core peak needs the shapes and dtypes that feed it perfectly). This
suite measures what a large matrix product reaches, ``2 n^3`` flop a call, and
what a copy of memory-sized tensors reaches (the copy row of the same
bytes), so the ridge point drawn from them is one that kernels here can hit.
"""

from __future__ import annotations

import torch

from ._core import Plan, Suite, register
from .timing import Case


def matmul_flops(n: int) -> int:
    """Floating-point operations of an ``n x n`` by ``n x n`` product: ``2 n^3``."""
    return 2 * n**3


def roofline_suite(
    device: torch.device, dtype: torch.dtype, *, size: int | None = None
) -> Plan:
    """A square matrix product of ``size`` (2048 on a CPU, 8192 on a GPU).

    Large enough that the product runs at the speed of the arithmetic, and
    its bytes (three matrices: two read, one written) are timed as a copy too,
    of memory size on every machine the book has met.
    """
    if size is None:
        size = 8192 if device.type == "cuda" else 2048
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(size, size, device=device, dtype=dtype)
    nbytes = 3 * size * size * a.element_size()
    dtype_name = str(dtype).replace("torch.", "")
    case = Case(
        f"matrix product, {size} x {size}",
        lambda: torch.mm(a, b, out=out),
        shapes={"a, b": [size, size]},
        dtype=dtype_name,
        bytes_moved=nbytes,
        allocates=False,  # into a given output: the product's own time
    )
    return Plan([case], settings={"size": size, "flop": matmul_flops(size)})


def ceilings(result, memory_gb_s: float | None = None) -> dict[str, float]:
    """``flop_per_s`` of the product, ``bytes_per_s``, and their ratio ``ridge``
    (flop per byte): below it a kernel is limited by memory.

    ``memory_gb_s`` is the machine's one memory ceiling
    (``copies.memory_ceiling`` of its ``copy_sizes`` run), which a page
    should pass; without it the copy of the product's own bytes timed in the
    same run stands in, which on a CPU may be a cache size (48 MiB for the
    2048 x 2048 product) that reads as memory only because the product
    evicted it.
    """
    product = next(t for t in result.timings if not t.is_copy)
    flop_per_s = result.settings["flop"] / (product.median_ms * 1e-3)
    if memory_gb_s is not None:
        bytes_per_s = memory_gb_s * 1e9
    else:
        bytes_per_s = product.bytes_moved / (product.copy_ms * 1e-3)
    return {
        "flop_per_s": flop_per_s,
        "bytes_per_s": bytes_per_s,
        "ridge": flop_per_s / bytes_per_s,
    }


def report(result) -> list[str]:
    c = ceilings(result)
    return [
        f"reached: {c['flop_per_s'] / 1e9:.0f} Gflop/s in the product, "
        f"{c['bytes_per_s'] / 1e9:.1f} GB/s in the copy of its bytes (the machine's "
        "memory ceiling is copy_sizes' plateau, chapter 10); ridge point "
        f"{c['ridge']:.0f} flop per byte"
    ]


register(
    Suite(
        "roofline",
        "10",
        "the flop/s and bytes/s this device reaches",
        roofline_suite,
        why="a square product large enough to run at the speed of the arithmetic",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=2,
        repeats=20,
        cpu_repeats=10,
        report=report,
        smoke={"size": 32},
    )
)
