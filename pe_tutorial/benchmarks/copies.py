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


# a copy is "from memory" when its bandwidth is within this factor of the largest copy's
MEMORY_BAND = 1.25


def copy_regimes(result) -> dict[str, float]:
    """Where copies stop fitting in cache, read from a ``copy_sizes`` run (chapter 10).

    ``memory_gb_s`` is the bandwidth of the largest copy; ``memory_from_bytes``
    the smallest size from which every larger copy is within ``MEMORY_BAND``
    of it (from there on, the caches no longer help); ``cache_gb_s`` the best
    bandwidth of any smaller copy. Measured, not read from sysfs: a virtual
    machine reports the whole chip's last-level cache, shared with other
    tenants, and a benchmark needs the size where the copy really slows down.
    """
    copies = sorted(
        (t for t in result.timings if t.is_copy), key=lambda t: t.bytes_moved
    )
    if len(copies) < 2:
        raise ValueError("copy_regimes needs a copy_sizes run of two sizes or more")
    memory = copies[-1].bandwidth_gb_s
    start = len(copies) - 1
    while start > 0 and copies[start - 1].bandwidth_gb_s <= MEMORY_BAND * memory:
        start -= 1
    smaller = [t.bandwidth_gb_s for t in copies[:start]] or [memory]
    return {
        "memory_gb_s": memory,
        "memory_from_bytes": copies[start].bytes_moved,
        "cache_gb_s": max(smaller),
    }


# the memory ceiling is read from copies at least this many times the largest
# copy that still ran from cache
CEILING_FACTOR = 4


def memory_ceiling(result) -> dict[str, float]:
    """The one memory bandwidth of a machine, from its ``copy_sizes`` run (chapter 10).

    ``cache_edge_bytes`` is the largest copy that still ran faster than memory
    (``copy_regimes``: more than ``MEMORY_BAND`` times the largest copy's
    bandwidth), measured rather than read from the system; ``gb_s`` is the
    median bandwidth of every copy of at least ``CEILING_FACTOR`` times that
    size, where no cache can hold a useful share of the bytes, and
    ``sizes`` says how many copies it is the median of. Every "share of the
    memory bandwidth" in the book divides by this one number. A run whose
    largest copy is not that far past the edge is a ValueError saying so.
    """
    regimes = copy_regimes(result)
    copies = sorted(
        (t for t in result.timings if t.is_copy), key=lambda t: t.bytes_moved
    )
    faster = [t for t in copies if t.bytes_moved < regimes["memory_from_bytes"]]
    edge = faster[-1].bytes_moved if faster else None
    floor = CEILING_FACTOR * edge if edge is not None else copies[0].bytes_moved
    plateau = [t.bandwidth_gb_s for t in copies if t.bytes_moved >= floor]
    if not plateau:
        raise ValueError(
            f"the largest copy ({bench.format_bytes(copies[-1].bytes_moved)}) is not "
            f"{CEILING_FACTOR} times the largest that ran from cache "
            f"({bench.format_bytes(edge)}); run copy_sizes with larger sizes"
        )
    return {
        "gb_s": statistics.median(plateau),
        "cache_edge_bytes": edge,
        "from_bytes": floor,
        "sizes": len(plateau),
    }
