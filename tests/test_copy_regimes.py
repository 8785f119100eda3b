"""Where the memory regime of copies starts (``copies.copy_regimes``, issue 65).

The band is two-sided: a GPU's small copies are launch-bound, slower than
memory, and must not count as memory; the walk down from the largest copy
stops at the first size outside the band; a noisy row is never the edge.
"""

from __future__ import annotations

import statistics

import pytest

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks.copies import (
    MEMORY_BAND,
    copy_regimes,
    in_memory_band,
    memory_ceiling,
)
from pe_tutorial.benchmarks.timing import Timing

MIB = 2**20


def copy(nbytes: int, gb_s: float, *, noisy: bool = False) -> Timing:
    """A copy row moving ``nbytes`` at a median of ``gb_s``; ``noisy``: its calls'
    interquartile range is 40% of the median (``Timing.noisy``)."""
    ms = nbytes / (gb_s * 1e9) * 1e3
    spread = (0.6, 0.8, 1.0, 1.2, 1.4) if noisy else (0.98, 1.0, 1.02)
    row = Timing(
        f"copy, {nbytes} B", [ms * f for f in spread], bytes_moved=nbytes, is_copy=True
    )
    assert row.noisy == noisy
    assert row.bandwidth_gb_s == pytest.approx(gb_s)
    return row


def run(*rows: Timing) -> benchmarks.SuiteResult:
    return benchmarks.SuiteResult("copy_sizes", {"device": "cuda"}, list(rows))


def test_the_band_is_two_sided():
    assert in_memory_band(100.0, 100.0)
    assert in_memory_band(100.0 * MEMORY_BAND, 100.0)
    assert in_memory_band(100.0 / MEMORY_BAND, 100.0)
    assert not in_memory_band(100.0 * MEMORY_BAND * 1.01, 100.0)
    assert not in_memory_band(100.0 / MEMORY_BAND / 1.01, 100.0)


def test_launch_bound_small_copies_are_not_the_memory_regime():
    """A GPU-like curve (copy_sizes' GPU sizes, 1 MiB to 4 GiB): the small copies
    pay a launch each and run far below HBM's bandwidth. The one-sided band took
    them for memory, down to the smallest size, and the ceiling for their median."""
    result = run(
        copy(1 * MIB, 200.0),
        copy(4 * MIB, 700.0),
        copy(16 * MIB, 1800.0),
        copy(64 * MIB, 2600.0),
        copy(256 * MIB, 2700.0),
        copy(1024 * MIB, 2800.0),
        copy(4096 * MIB, 2850.0),
    )
    regimes = copy_regimes(result)
    assert regimes["memory_from_bytes"] == 64 * MIB
    assert regimes["memory_gb_s"] == pytest.approx(2850.0)
    assert regimes["outside_bytes"] == 16 * MIB
    assert regimes["noisy_bytes"] == []
    # no cache plateau: the best smaller copy is slower than memory
    assert regimes["cache_gb_s"] == pytest.approx(1800.0)
    ceiling = memory_ceiling(result)
    assert ceiling["cache_edge_bytes"] == 16 * MIB
    assert ceiling["from_bytes"] == 64 * MIB
    assert ceiling["gb_s"] == pytest.approx(statistics.median([2600, 2700, 2800, 2850]))


def test_the_walk_stops_at_the_first_size_outside_the_band():
    """Down from 256 MiB: 16 MiB is slower than the band, 4 MiB back inside it and
    1 MiB faster (a cache). The edge is above the first exit, not the re-entry."""
    result = run(
        copy(1 * MIB, 100.0),
        copy(4 * MIB, 25.0),
        copy(16 * MIB, 12.0),
        copy(64 * MIB, 24.0),
        copy(256 * MIB, 25.0),
    )
    regimes = copy_regimes(result)
    assert regimes["memory_from_bytes"] == 64 * MIB
    assert regimes["outside_bytes"] == 16 * MIB
    # only the steady copies below the edge count as "smaller": 100 GB/s at 1 MiB
    assert regimes["cache_gb_s"] == pytest.approx(100.0)


def test_a_noisy_row_is_not_the_edge():
    """The recorded CPU run's shape: 64 MiB from cache, a starred 128 MiB copy just
    inside the band, steady memory from 256 MiB. The one-sided walk put the edge
    on the starred row; it is stepped over and reported instead."""
    result = run(
        copy(16 * MIB, 44.8),
        copy(64 * MIB, 45.3),
        copy(128 * MIB, 27.2, noisy=True),
        copy(256 * MIB, 21.2),
        copy(512 * MIB, 21.1, noisy=True),
        copy(1024 * MIB, 22.0),
    )
    regimes = copy_regimes(result)
    assert regimes["memory_from_bytes"] == 256 * MIB
    assert regimes["outside_bytes"] == 64 * MIB
    # every noisy row the walk stepped over, largest first; the one below the
    # edge sits where the regime is not determined
    assert regimes["noisy_bytes"] == [512 * MIB, 128 * MIB]
    assert regimes["cache_gb_s"] == pytest.approx(45.3)
    # the ceiling's edge is the steady 64 MiB copy, not the starred 128 MiB one
    ceiling = memory_ceiling(result)
    assert ceiling["cache_edge_bytes"] == 64 * MIB
    assert ceiling["from_bytes"] == 256 * MIB


def test_the_memory_bandwidth_is_not_read_from_a_noisy_largest_copy():
    result = run(
        copy(64 * MIB, 45.0),
        copy(256 * MIB, 21.0),
        copy(1024 * MIB, 22.0),
        copy(4096 * MIB, 60.0, noisy=True),
    )
    regimes = copy_regimes(result)
    assert regimes["memory_gb_s"] == pytest.approx(22.0)
    assert regimes["memory_from_bytes"] == 256 * MIB
    assert regimes["noisy_bytes"] == [4096 * MIB]
    with pytest.raises(ValueError, match="every copy .* is marked noisy"):
        copy_regimes(run(copy(MIB, 20.0, noisy=True), copy(4 * MIB, 20.0, noisy=True)))


@pytest.mark.parametrize(
    "recorded",
    benchmarks.load_recorded_runs("copy_sizes"),
    ids=lambda r: str(r.environment.get("device_name")),
)
def test_the_recorded_runs_edge_is_a_steady_row(recorded):
    """Each shipped copy_sizes run: the edge, the walk's exit and the memory
    reference are steady rows, and every steady copy from the edge up is in the
    two-sided band."""
    copies = {t.bytes_moved: t for t in recorded.timings if t.is_copy}
    regimes = copy_regimes(recorded)
    edge = copies[regimes["memory_from_bytes"]]
    assert not edge.noisy, f"the edge {edge.name} is marked noisy"
    if regimes["outside_bytes"] is not None:
        outside = copies[regimes["outside_bytes"]]
        assert not outside.noisy
        assert outside.bytes_moved < edge.bytes_moved
        assert not in_memory_band(outside.bandwidth_gb_s, regimes["memory_gb_s"])
    for nbytes, row in copies.items():
        if nbytes >= edge.bytes_moved and not row.noisy:
            assert in_memory_band(row.bandwidth_gb_s, regimes["memory_gb_s"])
        if row.noisy and nbytes > (regimes["outside_bytes"] or 0):
            assert nbytes in regimes["noisy_bytes"]
