"""Tests for pe_tutorial.bench: statistics, bandwidth, metadata, recorded results, and a known delay."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from pe_tutorial import bench

DATA = Path(__file__).resolve().parent.parent / "book" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def make_timing(times, **kwargs):
    return bench.Timing(name="t", times_ms=list(times), device="cpu", **kwargs)


def test_median_and_quartiles():
    timing = make_timing([5.0, 1.0, 3.0, 2.0, 4.0])
    assert timing.median_ms == 3.0
    assert timing.quartiles_ms == (2.0, 4.0)
    assert make_timing([7.0]).quartiles_ms == (7.0, 7.0)


def test_bandwidth_and_ratio():
    # 2e9 bytes in 2 ms is 1000 GB/s
    timing = make_timing([2.0, 2.0, 2.0], bytes_moved=2_000_000_000)
    assert timing.bandwidth_gb_s == pytest.approx(1000.0)
    assert make_timing([1.0]).bandwidth_gb_s is None
    assert timing.ratio_to(make_timing([0.5])) == pytest.approx(4.0)


def test_time_function_warms_up_then_times_each_repeat():
    calls = []
    timing = bench.time_function(
        lambda: calls.append(1),
        name="count",
        device="cpu",
        warmup=2,
        repeats=5,
        dtype=torch.float16,
        shapes={"x": [3, 4]},
    )
    assert len(calls) == 7
    assert len(timing.times_ms) == 5 and all(t >= 0 for t in timing.times_ms)
    assert timing.dtype == "float16" and timing.shapes == {"x": [3, 4]}
    assert timing.device.startswith("CPU") and "threads" in timing.device
    for key in ("device", "torch", "python", "cpu_threads", "date"):
        assert key in timing.env


def test_time_function_measures_a_known_delay_in_milliseconds():
    """A 4 ms sleep is timed as 4 ms: a unit slip (s, us) or a constant offset fails this."""
    timing = bench.time_function(
        lambda: time.sleep(0.004), name="sleep", device="cpu", warmup=1, repeats=15
    )
    # sleep never returns early; the fastest of 15 overshoots by well under 3 ms even
    # on a loaded 2-core machine (a median can be pushed far out by a busy neighbour)
    assert min(timing.times_ms) >= 4.0
    assert min(timing.times_ms) < 7.0
    # a call that does nothing is timed at (nearly) zero, so nothing is added to every call
    idle = bench.time_function(
        lambda: None, name="noop", device="cpu", warmup=1, repeats=15
    )
    assert min(idle.times_ms) < 0.5


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_time_function_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError, match="need warmup >= 0 and repeats >= 1"):
        bench.time_function(lambda: None, name="x", device="cpu", **kwargs)


def test_copy_baseline_counts_bytes_read_and_written():
    like = torch.empty(32, 16, dtype=torch.float32)
    baseline = bench.copy_baseline(like, repeats=3)
    assert baseline.bytes_moved == 2 * 32 * 16 * 4
    assert baseline.shapes == {"x": [32, 16]} and baseline.dtype == "float32"
    assert baseline.bandwidth_gb_s > 0


@pytest.mark.parametrize(
    "name, gb_per_s",
    [
        ("Tesla T4", 320.0),
        ("NVIDIA L4", 300.0),
        ("NVIDIA A100-SXM4-40GB", 1555.0),
        ("NVIDIA A100-SXM4-80GB", 2039.0),
        ("NVIDIA H100 80GB HBM3", 3350.0),
        ("NVIDIA H100 PCIe", 2000.0),
    ],
)
def test_peak_bandwidth_lookup(name, gb_per_s):
    peak = bench.peak_bandwidth(name)
    assert peak is not None and peak.gb_per_s == gb_per_s and "datasheet" in peak.source


@pytest.mark.parametrize(
    "name", ["NVIDIA L40S", "NVIDIA GeForce RTX 4090", "CPU (x86_64, 2 threads)"]
)
def test_peak_bandwidth_unknown_devices(name):
    assert bench.peak_bandwidth(name) is None


def test_format_table_names_device_and_ratios():
    fast, slow = (
        make_timing([1.0]),
        bench.Timing("slow", [3.0], "cpu", dtype="float32", env={"torch": "9.9"}),
    )
    table = bench.format_table([slow, fast], baseline=fast)
    assert table.splitlines()[0].startswith("device: cpu | torch 9.9 | dtype float32")
    # 3x the baseline
    assert table.splitlines()[3].split()[0] == "slow" and table.splitlines()[
        3
    ].endswith("3.00")
    with pytest.raises(ValueError):
        bench.format_table([])


def test_save_and_load_round_trip(tmp_path):
    timing = bench.time_function(
        lambda: None, name="noop", device="cpu", repeats=3, bytes_moved=10
    )
    path = bench.save_results("suite", [timing], directory=tmp_path, notes="test run")
    document = json.loads(path.read_text())
    assert (
        document["environment"]["device"] == timing.device
        and document["notes"] == "test run"
    )
    environment, loaded = bench.load_results("suite", directory=tmp_path)
    assert environment == timing.env
    assert loaded[0].times_ms == timing.times_ms and loaded[0].bytes_moved == 10
    assert bench.load_results("missing", directory=tmp_path) is None
    with pytest.raises(ValueError):
        bench.save_results("empty", [], directory=tmp_path)


def test_recorded_results_dir_is_the_books_data_folder():
    assert bench.recorded_results_dir() == DATA


def check_recorded_document(document):
    for key in ("device", "torch", "date", "python"):
        assert document["environment"].get(key), f"lacks environment.{key}"
    for record in document["results"]:
        assert record["times_ms"] and record["device"]
        assert record["median_ms"] == pytest.approx(
            bench.Timing.from_dict(record).median_ms
        )


def test_a_recorded_file_loads_with_its_metadata():
    """A results file as a GPU run writes it (tests/fixtures) loads into Timings that print."""
    check_recorded_document(json.loads((FIXTURES / "gpu_run.json").read_text()))
    environment, timings = bench.load_results("gpu_run", directory=FIXTURES)
    assert (
        environment["device"] == "NVIDIA H100 80GB HBM3"
        and environment["device_type"] == "cuda"
    )
    assert [t.name for t in timings] == ["sinusoidal table", "copy (same bytes)"]
    table = bench.format_table(timings, baseline=timings[-1])
    assert table.startswith("device: NVIDIA H100 80GB HBM3")
    # 0.02 ms over 0.01 ms
    assert table.splitlines()[3].endswith("2.00")


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_results_file_carries_its_metadata(path):
    check_recorded_document(json.loads(path.read_text()))
