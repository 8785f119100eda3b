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

from ._core import QUOTED_DEVICE, Plan, Suite, device_slug, load_recorded_runs, register
from .copies import memory_ceiling
from .rope import fastest_own, own_rows
from .timing import Case


def matmul_flops(n: int) -> int:
    """Floating-point operations of an ``n x n`` by ``n x n`` product: ``2 n^3``."""
    return 2 * n**3


def rope_bytes_and_flops(shape, bytes_per_element: int) -> tuple[int, int]:
    """Bytes moved and flop of rotating q and k of ``shape`` (B, H, T, D) (chapter 10).

    ``bytes = 2 * 2 N s + 2 * T * (D / 2) * 4`` (q and k read and written, ``s``
    bytes an element, plus float32 cos and sin tables) and ``flop = 2 * 3 N``
    (four multiplications and two additions a pair), with ``N = B H T D``.
    """
    batch, heads, seq, head_dim = shape
    n = batch * heads * seq * head_dim
    nbytes = 4 * n * bytes_per_element + 2 * seq * (head_dim // 2) * 4
    return nbytes, 6 * n


def rope_point(run) -> dict:
    """Where the fastest steady own row of a recorded ``rope`` run sits on its roof:
    ``intensity`` (flop per byte), ``flop_per_s`` and the row's ``name``.

    A point is an absolute speed, so it needs a steady row: the fastest row
    (``fastest_own``) when it is not marked noisy, else the fastest of the own
    rows that are not; a ``ValueError`` when none is."""
    fastest = fastest_own(run)
    if fastest.noisy:
        steady = [t for t in own_rows(run, None) if not t.noisy]
        if not steady:
            raise ValueError("every own row of the rope run is marked noisy")
        fastest = min(steady, key=lambda t: t.median_ms)
    size = torch.finfo(getattr(torch, run.settings["dtype"])).bits // 8
    nbytes, flops = rope_bytes_and_flops(run.settings["shape"], size)
    return {
        "intensity": flops / nbytes,
        "flop_per_s": flops / (fastest.median_ms * 1e-3),
        "name": fastest.name,
    }


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


def _steady_rope_point(run) -> dict | None:
    if run is None:
        return None
    try:
        return rope_point(run)
    except ValueError:  # every own row noisy: its median says nothing
        return None


def recorded_roofs(directory=None) -> list[dict]:
    """The roof of every device with a recorded ``roofline`` run, the quoted CPU first.

    Each is ``ceilings`` of that device's product run, its memory ceiling
    ``copies.memory_ceiling`` of the same device's ``copy_sizes`` run, so a GPU's
    recorded runs draw a GPU's roof beside the CPU's (chapter 10). Keys beyond
    ``ceilings``': ``device`` (the file's device slug), ``device_name``, ``dtype``
    of the product, ``quoted`` (the machine the prose quotes) and ``memory``: how
    the memory ceiling was found (a device whose copies never left its caches
    falls back on the copy of the product's own bytes, and says so); ``rope``:
    ``rope_point`` of the device's recorded ``rope`` run, None without one or
    where every one of its own rows is marked noisy (no point to draw).
    """
    copies = {
        device_slug(run.environment): run
        for run in load_recorded_runs("copy_sizes", directory)
    }
    ropes = {
        device_slug(run.environment): run
        for run in load_recorded_runs("rope", directory)
    }
    roofs = []
    for run in load_recorded_runs("roofline", directory):
        slug = device_slug(run.environment)
        memory_gb_s, how = None, "no copy_sizes run: the copy of the product's bytes"
        if slug in copies:
            try:
                memory_gb_s = memory_ceiling(copies[slug])["gb_s"]
                how = "copy_sizes' plateau (the memory ceiling)"
            except ValueError as error:
                how = f"the copy of the product's bytes ({error})"
        roofs.append(
            {
                **ceilings(run, memory_gb_s=memory_gb_s),
                "device": slug,
                "device_name": run.environment.get("device_name", slug),
                "dtype": run.settings.get("dtype", "float32"),
                "quoted": slug == QUOTED_DEVICE,
                "memory": how,
                "rope": _steady_rope_point(ropes.get(slug)),
            }
        )
    return sorted(roofs, key=lambda roof: not roof["quoted"])


def report(result) -> list[str]:
    c = ceilings(result)
    return [
        f"reached: {c['flop_per_s'] / 1e9:.0f} Gflop/s in the product, "
        f"{c['bytes_per_s'] / 1e9:.1f} GB/s in the copy of its bytes; ridge point "
        f"{c['ridge']:.0f} flop per byte against that copy (chapter 10's roof "
        "divides by the machine's memory ceiling, copy_sizes' plateau, so its "
        "ridge may differ)"
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
