"""Copies from inside the caches to past them, and the memory ceiling (chapter 10).

``copy_sizes`` times copies from well inside the smallest cache to well past the
largest; ``copy_regimes`` reads where they stop fitting in cache, and
``memory_ceiling`` the one memory bandwidth every "share of the memory
bandwidth" in the book divides by.
"""

from __future__ import annotations

import statistics

import torch

from . import timing as bench
from ._core import Plan, Suite, register


def copy_sizes(
    device: torch.device,
    dtype: torch.dtype,
    *,
    sizes: list[int] | None = None,
) -> Plan:
    """Copies from well inside the cache to well past it: the two regimes (chapter 10).

    ``sizes`` are bytes moved per copy (half read, half written). By default
    they run from 256 KiB to four times the last-level cache on a CPU (64 MiB
    where sysfs does not say) and from 1 MiB to 4 GiB on a GPU.
    """
    if sizes is None:
        if device.type == "cuda":
            sizes = [2**p for p in range(20, 33, 2)]
        else:
            cache = bench.last_level_cache_bytes() or 2**24
            sizes = [2**p for p in range(18, 31) if 2**p <= 4 * cache]
    cases = [bench.copy_case(nbytes, device) for nbytes in sizes]
    # each size in its own rounds: interleaved, a large copy would evict what a
    # small one left in cache, and the small ones would never run from cache
    return Plan(cases, settings={"sizes": sizes}, separate=True)


register(
    Suite(
        "copy_sizes",
        "10",
        "copy bandwidth from cache to memory",
        copy_sizes,
        why="from inside the smallest cache to past the largest",
        smoke={"sizes": [2**10, 2**12]},
    )
)


# a copy is "from memory" when its bandwidth is within this factor of the memory
# bandwidth on either side: memory / MEMORY_BAND <= bandwidth <= MEMORY_BAND * memory
MEMORY_BAND = 1.25


def in_memory_band(gb_s: float, memory_gb_s: float) -> bool:
    """Whether a copy of ``gb_s`` is within ``MEMORY_BAND`` of ``memory_gb_s``,
    on both sides: ``memory / MEMORY_BAND <= gb_s <= MEMORY_BAND * memory``."""
    return memory_gb_s / MEMORY_BAND <= gb_s <= MEMORY_BAND * memory_gb_s


def copy_regimes(result) -> dict:
    """Where copies stop fitting in cache, read from a ``copy_sizes`` run (chapter 10).

    ``memory_gb_s`` is the bandwidth of the largest steady copy (the largest
    copy, unless its row is marked noisy, ``Timing.noisy``). A copy is in the
    memory regime when its bandwidth ``bw`` is within ``MEMORY_BAND`` of it on
    both sides::

        memory_gb_s / MEMORY_BAND <= bw <= MEMORY_BAND * memory_gb_s

    (``in_memory_band``): faster is a cache at work, slower a fixed cost per
    call that a small copy does not amortise (a GPU's launch-bound copies).
    The walk goes down from the largest size and stops at the first steady
    copy outside the band, ``outside_bytes`` (None when every steady copy is
    inside). ``memory_from_bytes`` is the smallest steady copy the walk
    passed inside the band: every steady copy from there to the largest is in
    the band. A noisy row is neither inside nor outside and is never the
    edge: the walk steps over it, and ``noisy_bytes`` lists the sizes it
    stepped over (largest first). A noisy size below ``memory_from_bytes``
    lies between the edge and ``outside_bytes``: the regime of that size is
    not determined, and the edge is only known to lie above
    ``outside_bytes`` and at or below ``memory_from_bytes``.

    ``cache_gb_s`` is the best bandwidth of the steady copies smaller than
    ``memory_from_bytes`` (``memory_gb_s`` where there are none); on a GPU
    whose small copies are launch-bound and show no cache plateau it may be
    below ``memory_gb_s``. Measured, not read from sysfs: a virtual machine
    reports the whole chip's last-level cache, shared with other tenants,
    and a benchmark needs the size where the copy really slows down. A
    ValueError for a run of fewer than two sizes or without a steady copy.
    """
    copies = sorted(
        (t for t in result.timings if t.is_copy), key=lambda t: t.bytes_moved
    )
    if len(copies) < 2:
        raise ValueError("copy_regimes needs a copy_sizes run of two sizes or more")
    steady = [t for t in copies if not t.noisy]
    if not steady:
        raise ValueError(
            "every copy of the copy_sizes run is marked noisy: no memory "
            "bandwidth and no regime edge can be read from it; record it again"
        )
    memory = steady[-1].bandwidth_gb_s
    edge, outside, noisy = steady[-1], None, []
    for t in reversed(copies):
        if t.noisy:
            noisy.append(t.bytes_moved)
        elif not in_memory_band(t.bandwidth_gb_s, memory):
            outside = t
            break
        else:
            edge = t
    smaller = [
        t.bandwidth_gb_s for t in steady if t.bytes_moved < edge.bytes_moved
    ] or [memory]
    return {
        "memory_gb_s": memory,
        "memory_from_bytes": edge.bytes_moved,
        "cache_gb_s": max(smaller),
        "outside_bytes": None if outside is None else outside.bytes_moved,
        "noisy_bytes": noisy,
    }


# the memory ceiling is read from copies at least this many times the largest
# steady copy outside the memory band (on a CPU, the largest that ran from cache)
CEILING_FACTOR = 4


def memory_ceiling(result) -> dict[str, float]:
    """The one memory bandwidth of a machine, from its ``copy_sizes`` run (chapter 10).

    ``cache_edge_bytes`` is where ``copy_regimes``' walk down from the largest
    copy left the memory band (``outside_bytes``): the largest steady copy
    outside it, on a CPU one that still ran from cache, faster than memory,
    on a GPU possibly a launch-bound one, slower; a noisy row is never the
    edge. It is measured rather than read from the system. ``gb_s`` is the
    median bandwidth of every copy of at least ``CEILING_FACTOR`` times that
    size (``from_bytes``; ``copy_regimes``' ``memory_from_bytes`` where every
    steady copy is in the band and there is no edge), where no cache can
    hold a useful share of the bytes, and ``sizes`` says how many copies it
    is the median of. Every "share of the memory bandwidth" in the book
    divides by this one number. A run whose largest copy is not that far
    past the edge is a ValueError saying so.
    """
    regimes = copy_regimes(result)
    copies = sorted(
        (t for t in result.timings if t.is_copy), key=lambda t: t.bytes_moved
    )
    edge = regimes["outside_bytes"]
    floor = CEILING_FACTOR * edge if edge is not None else regimes["memory_from_bytes"]
    plateau = [t.bandwidth_gb_s for t in copies if t.bytes_moved >= floor]
    if not plateau:
        raise ValueError(
            f"the largest copy ({bench.format_bytes(copies[-1].bytes_moved)}) is not "
            f"{CEILING_FACTOR} times the largest that ran from cache, or "
            f"launch-bound, outside the memory band ({bench.format_bytes(edge)}); "
            "run copy_sizes with larger sizes"
        )
    return {
        "gb_s": statistics.median(plateau),
        "cache_edge_bytes": edge,
        "from_bytes": floor,
        "sizes": len(plateau),
    }
