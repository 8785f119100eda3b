"""Tests for pe_tutorial.benchmarks.timing: statistics, bandwidth, metadata, recorded results, and a known delay."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from pe_tutorial.benchmarks import timing as bench


def make_timing(times, **kwargs):
    return bench.Timing(name="t", times_ms=list(times), **kwargs)


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
    assert timing.copy_ms is None


def test_measure_interleaves_the_cases_in_shuffled_rounds():
    order = []
    cases = [bench.Case(name, lambda name=name: order.append(name)) for name in "abcd"]
    timings = bench.measure(cases, device="cpu", warmup=1, repeats=12)
    assert [t.name for t in timings] == ["a", "b", "c", "d"]
    assert all(len(t.times_ms) == 12 for t in timings)
    assert "".join(order[:4]) == "abcd"  # the warm-up, in order
    rounds = ["".join(order[4 + 4 * r : 8 + 4 * r]) for r in range(12)]
    # every round calls every case once
    assert all(sorted(r) == list("abcd") for r in rounds)
    # not always the same case first, nor always the same neighbour before a case
    assert len({r[0] for r in rounds}) > 1
    for name in "abcd":
        before = {r[r.index(name) - 1] for r in rounds if r.index(name) > 0}
        assert len(before) > 1, f"{name} always follows {before}"
    # seeded: a second run calls them in the same order
    again = []
    cases = [bench.Case(name, lambda name=name: again.append(name)) for name in "abcd"]
    bench.measure(cases, device="cpu", warmup=1, repeats=12)
    assert again == order


def test_each_row_is_compared_with_a_copy_of_its_own_bytes_and_kind():
    cases = [
        bench.Case("small", lambda: None, bytes_moved=1024, allocates=False),
        bench.Case("also small", lambda: None, bytes_moved=1024, allocates=False),
        bench.Case("large", lambda: None, bytes_moved=4096, allocates=True),
        bench.Case("unsized", lambda: None),
    ]
    timings = bench.measure(cases, device="cpu", warmup=0, repeats=3)
    copies = [t for t in timings if t.is_copy]
    # one copy per distinct byte count and kind, after the cases: a row that
    # returns new tensors meets a clone (a new output each call)
    assert [t.bytes_moved for t in copies] == [1024, 4096]
    assert [t.allocates for t in copies] == [False, True]
    assert copies[1].name == "clone, 4.0 KiB moved (new output)"
    assert [t.name for t in timings[:4]] == ["small", "also small", "large", "unsized"]
    by_name = {t.name: t for t in timings}
    assert by_name["small"].copy_ms == copies[0].median_ms
    assert by_name["also small"].copy_ms == copies[0].median_ms
    assert by_name["large"].copy_ms == copies[1].median_ms
    assert (
        by_name["unsized"].copy_ms is None and by_name["unsized"].ratio_to_copy is None
    )


def test_a_row_with_bytes_must_say_whether_it_allocates():
    with pytest.raises(ValueError, match="allocates=True"):
        bench.measure([bench.Case("rope", lambda: None, bytes_moved=64)], repeats=1)


def test_a_clone_returns_a_new_tensor_each_call_and_a_copy_the_same_one():
    clone = bench.copy_case(4096, "cpu", allocating=True)
    copy = bench.copy_case(4096, "cpu")
    assert clone.fn().data_ptr() != 0 and clone.fn() is not clone.fn()
    assert copy.fn() is copy.fn()
    assert clone.allocates and not copy.allocates


def test_copy_case_moves_the_bytes_it_says():
    case = bench.copy_case(4096, "cpu")
    # read 2048 bytes (512 float32) and write as many
    assert case.bytes_moved == 4096 and case.shapes == {"x": [512]}
    assert case.is_copy and case.name == "copy, 4.0 KiB moved"
    with pytest.raises(ValueError, match="at least 8 bytes"):
        bench.copy_case(4, "cpu")


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


def test_environment_names_the_machine():
    env = bench.environment("cpu")
    assert env["device"] == "cpu" and env["device_name"] == bench.cpu_name()
    assert env["threads"] == torch.get_num_threads() and env["cuda"] is None
    for key in ("torch", "python", "platform", "date", "last_level_cache_bytes"):
        assert key in env


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_time_function_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError, match="need warmup >= 0 and repeats >= 1"):
        bench.time_function(lambda: None, name="x", device="cpu", **kwargs)


@pytest.mark.parametrize(
    "name, gb_per_s",
    [
        ("Tesla T4", 320.0),
        ("NVIDIA L4", 300.0),
        ("NVIDIA A100-SXM4-40GB", 1555.0),
        ("NVIDIA A100-SXM4-80GB", 2039.0),
        ("NVIDIA H100 80GB HBM3", 3350.0),
        ("NVIDIA H100 PCIe", 2000.0),
        ("NVIDIA H200", 4800.0),
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


def test_spread_marks_noisy_rows():
    assert make_timing([10.0, 10.0, 10.0, 10.0, 10.0]).spread == 0.0
    steady = make_timing([9.0, 10.0, 10.0, 10.0, 11.0])
    noisy = make_timing([5.0, 5.0, 10.0, 15.0, 15.0])
    # IQR 0 / 10 and 10 / 10
    assert not steady.noisy and noisy.noisy and noisy.spread == pytest.approx(1.0)


ENV = {
    "device": "cuda:0",
    "device_name": "NVIDIA H100 80GB HBM3",
    "threads": 16,
    "torch": "9.9",
    "date": "2026-01-02T03:04:05+00:00",
    "peak_gb_s": 3350.0,
}


def test_format_table_says_what_was_timed_and_compares_with_the_copy():
    shapes = {"q": [2, 16, 2048, 128]}
    rope = make_timing([2.0, 2.0, 2.0], bytes_moved=2 * 10**9, shapes=shapes)
    rope.dtype, rope.copy_ms = "bfloat16", 1.0
    copy = make_timing([1.0] * 3, bytes_moved=2 * 10**9, is_copy=True)
    copy.name, copy.copy_ms, copy.dtype = "copy, 1.9 GiB moved", 1.0, "float32"
    lines = bench.format_table([rope, copy], environment=ENV).splitlines()
    assert lines[0] == "NVIDIA H100 80GB HBM3 (cuda:0, 16 threads)"
    assert lines[1] == "torch 9.9, measured 2026-01-02 03:04 UTC"
    del lines[1]
    # what every row shares is said once: the dtype and shapes of the timed rows
    # and how every row was sampled
    assert lines[1] == "dtype bfloat16; q 2x16x2048x128; every time: single calls"
    # the quoted ratio first, after the name (a phone's column shows it)
    assert lines[2].split() == [
        "what",
        "x",
        "copy",
        "median",
        "ms",
        "IQR",
        "ms",
        "GB/s",
        "%",
        "peak",
    ]
    # twice the copy's time; 2e9 bytes in 2 ms = 1000 GB/s = 30% of 3350
    assert lines[4].split() == ["t", "2.00", "2.00", "2.00-2.00", "1000.0", "30%"]
    assert lines[5].split()[4] == "1.00"  # after the copy's name, 4 words
    assert lines[-1].startswith("x copy:")


def test_format_table_shows_each_rows_shapes_when_they_differ_and_marks_noise():
    a = make_timing([1.0, 1.0, 1.0], shapes={"x": [4]})
    b = make_timing([1.0, 2.0, 3.0], shapes={"x": [8]})
    b.name = "b"
    text = bench.format_table([a, b], reference="t")
    lines = text.splitlines()
    assert lines[0] == "every time: single calls"
    assert lines[3].startswith("t ") and lines[4] == "  x 4"
    assert lines[5].startswith("b *") and lines[5].split()[2] == "2.00"  # x ref
    assert lines[6] == "  x 8"
    assert "x ref: median over that of 't'" in text
    assert "too noisy to trust" in lines[-1]
    with pytest.raises(ValueError, match="at least one Timing"):
        bench.format_table([])
    with pytest.raises(ValueError, match="reference 'missing' is not a row"):
        bench.format_table([a], reference="missing")


def test_timing_round_trips_through_json():
    timing = bench.time_function(
        lambda: None, name="noop", device="cpu", repeats=3, bytes_moved=10
    )
    record = json.loads(json.dumps(timing.to_dict()))
    assert record["median_ms"] == timing.median_ms
    assert bench.Timing.from_dict(record) == timing


def test_format_bytes():
    assert bench.format_bytes(512) == "512 B"
    assert bench.format_bytes(3 * 2**20) == "3.0 MiB"
    assert bench.format_bytes(5 * 2**30) == "5.0 GiB"


def test_last_level_cache_is_read_when_the_system_says():
    size = bench.last_level_cache_bytes()
    assert size is None or size >= 2**16


def scripted(monkeypatch, script: dict[str, list[float]]):
    """Cases named after ``script``'s keys whose samples 'take' the scripted times
    (the last one repeats), so the rounds ``measure`` chooses can be checked."""
    samples = {name: 0 for name in script}
    batches = {name: [] for name in script}

    def fake_time_once(fn, device, calls=1):
        name = fn()
        times = script[name]
        samples[name] += 1
        batches[name].append(calls)
        return times[min(samples[name], len(times)) - 1], None

    monkeypatch.setattr(bench, "_time_once", fake_time_once)
    return [bench.Case(name, lambda name=name: name) for name in script], batches


def test_measure_repeats_while_a_row_is_noisy_up_to_its_caps(monkeypatch):
    # 'a' alternates 1 and 3 ms for 8 samples, then settles at 2 ms
    script = {"a": [1.0, 3.0] * 4 + [2.0], "b": [5.0]}
    cases, _ = scripted(monkeypatch, script)
    fixed = bench.measure(cases, device="cpu", warmup=0, repeats=4)
    assert [len(t.times_ms) for t in fixed] == [4, 4] and fixed[0].noisy
    cases, batches = scripted(monkeypatch, script)
    adaptive = bench.measure(
        cases, device="cpu", warmup=0, repeats=4, max_seconds=60, max_repeats=500
    )
    # noisy after 2 x 4 samples: every row starts again with samples of 4 calls
    # ('b', steady all along, too: one table, one way of sampling), and the
    # rounds stop once all have 4 steady ones
    assert adaptive[0].times_ms == [2.0] * 4 and adaptive[0].calls_per_sample == 4
    assert batches["a"] == batches["b"] == [1] * 8 + [4] * 4
    assert adaptive[1].times_ms == [5.0] * 4 and adaptive[1].calls_per_sample == 4
    # a row that never settles stops at max_repeats, its samples ever longer
    cases, batches = scripted(monkeypatch, {"a": [1.0, 3.0] * 1000})
    capped = bench.measure(
        cases, device="cpu", warmup=0, repeats=4, max_seconds=60, max_repeats=30
    )
    assert len(batches["a"]) == 30 and capped[0].noisy
    assert capped[0].calls_per_sample == 64 and len(capped[0].times_ms) == 6
    # and at the time cap: rounds beyond `repeats` only while time is left
    cases, _ = scripted(monkeypatch, {"a": [1.0, 3.0] * 1000})
    timed = bench.measure(cases, device="cpu", warmup=0, repeats=4, max_seconds=1e-9)
    assert len(timed[0].times_ms) == 4
    with pytest.raises(ValueError, match="max_seconds must be positive"):
        bench.measure(cases, device="cpu", max_seconds=0)


def test_a_row_that_the_time_cap_cuts_short_keeps_its_last_full_set(monkeypatch):
    # A busy machine, made deterministic: the copy's calls disagree (1 and 3 ms, so it
    # starts again with longer samples after 2 x 4 of them), and the time cap (a fake
    # clock that advances by what each sample took) runs out in that very round. The
    # copy used to come back with no times, and measure stopped at its median
    # ("no median for empty data"), as `--all --record` did beside two busy processes.
    script = {"rope": [2.0], "copy": [1.0, 3.0] * 1000}
    samples = {name: 0 for name in script}
    batches = {name: [] for name in script}
    clock = {"now": 0.0}

    def fake_time_once(fn, device, calls=1):
        name = fn()
        samples[name] += 1
        batches[name].append(calls)
        ms = script[name][min(samples[name], len(script[name])) - 1]
        clock["now"] += ms * calls / 1e3
        return ms, None

    monkeypatch.setattr(bench, "_time_once", fake_time_once)
    monkeypatch.setattr(
        bench, "time", SimpleNamespace(perf_counter=lambda: clock["now"])
    )
    cases = [
        bench.Case("rope", lambda: "rope", bytes_moved=64, allocates=False),
        bench.Case(
            "copy", lambda: "copy", bytes_moved=64, is_copy=True, allocates=False
        ),
    ]
    # 8 rounds take 32 ms: the cap of 30 ms ends them just as the copy starts again
    rope, copy = bench.measure(
        cases, device="cpu", warmup=0, repeats=4, max_seconds=0.030
    )
    assert batches["copy"] == [1] * 8  # no longer sample was ever taken
    assert copy.times_ms == [1.0, 3.0] * 4 and copy.calls_per_sample == 1
    assert copy.noisy  # and marked so in the table
    assert rope.times_ms == [2.0] * 8 and rope.copy_ms == copy.median_ms == 2.0
    assert rope.calls_per_sample == 1
    assert "copy *" in bench.format_table([rope, copy])
    # with time left, longer samples replace the noisy ones, in every row
    samples.update(rope=0, copy=0)
    clock["now"] = 0.0
    script["copy"] = [1.0, 3.0] * 4 + [2.0]
    rope, copy = bench.measure(cases, device="cpu", warmup=0, repeats=4, max_seconds=60)
    assert copy.times_ms == [2.0] * 4 and copy.calls_per_sample == 4
    assert rope.times_ms == [2.0] * 4 and rope.calls_per_sample == 4


def test_a_table_says_how_its_rows_were_sampled_and_unlike_rows_are_not_weighed():
    single = make_timing([1.0, 1.0, 1.0])
    batched = replace(make_timing([1.0, 1.0, 1.0]), name="b", calls_per_sample=16)
    assert "every time: single calls" in bench.format_table([single, single])
    assert "every time: the mean of 16 calls in a row" in bench.format_table([batched])
    mixed = bench.format_table([single, batched])
    assert (
        "sampled unlike (not comparable)" in mixed and "16 calls in a row (b)" in mixed
    )
    with pytest.raises(ValueError, match="cannot be weighed"):
        bench.within_noise(single, batched)
    with pytest.raises(ValueError, match="calls_per_sample must be a positive"):
        bench.measure([bench.Case("x", lambda: None)], calls_per_sample=0)


def test_rows_sampled_unlike_are_not_weighed_in_either_order():
    """A batched row against a single one, first or second (a check of one order
    only would weigh them the other way), and two batch sizes; rows batched alike
    are weighed as single ones are. ``ratio_text`` words neither unlike pair."""
    single = make_timing([1.0, 1.0, 1.0])
    batched = replace(make_timing([1.0, 1.0, 1.0]), name="b", calls_per_sample=16)
    fours = replace(make_timing([3.0, 3.0, 3.0]), name="f", calls_per_sample=4)
    unlike = [(single, batched), (fours, batched)]
    for a, b in unlike + [(b, a) for a, b in unlike]:
        with pytest.raises(ValueError, match="cannot be weighed"):
            bench.within_noise(a, b)
        with pytest.raises(ValueError, match="cannot be weighed"):
            bench.ratio_text(a, b)
    alike = replace(batched, name="c", times_ms=[3.0, 3.0, 3.0])
    assert bench.within_noise(batched, batched)
    assert not bench.within_noise(alike, batched)
    assert bench.ratio_text(alike, batched) == "3.00 times"


def test_cases_measured_apart_are_measured_again_until_sampled_alike(monkeypatch):
    """A suite whose cases run in groups of their own (plan.separate): a group that
    ended with single calls is measured again from the longest samples any group
    needed, so the suite's table is sampled alike."""
    from pe_tutorial.benchmarks import _core

    asked = []

    def fake_measure(group, *, calls_per_sample=1, **options):
        asked.append((group[0], calls_per_sample))
        # 'noisy' needs samples of 4 calls whatever it starts from
        calls = max(calls_per_sample, 4) if group[0] == "noisy" else calls_per_sample
        return [replace(make_timing([1.0, 1.0]), name=group[0], calls_per_sample=calls)]

    monkeypatch.setattr(_core.bench, "measure", fake_measure)
    timings = _core._measure_alike([["steady"], ["noisy"]], repeats=2)
    assert [t.calls_per_sample for t in timings] == [4, 4]
    assert asked == [("steady", 1), ("noisy", 1), ("steady", 4)]


def test_a_sample_of_several_calls_is_their_mean():
    calls = []
    mean, faults = bench._time_once(
        lambda: calls.append(1), torch.device("cpu"), calls=5
    )
    assert len(calls) == 5 and mean >= 0 and faults >= 0


def test_page_faults_per_call_are_counted_where_fresh_memory_is_written():
    """A new 64 MiB tensor written each call is handed over page by page, 4 KiB a
    fault (or 2 MiB with huge pages: then at least 32); writing into a tensor that
    exists faults nothing. Both counted per call, as the table shows them."""
    if bench.minor_faults() is None:
        pytest.skip("this system does not count page faults")
    target = torch.empty(2**24)
    fresh = bench.Case("fresh", lambda: torch.ones(2**24), allocates=True)
    given = bench.Case("given", lambda: target.fill_(1.0), allocates=False)
    timings = bench.measure(
        [fresh, given], device="cpu", warmup=1, repeats=3, copy_baselines=False
    )
    by_name = {t.name: t for t in timings}
    assert by_name["fresh"].faults_per_call >= 32
    assert by_name["given"].faults_per_call < 4
    assert "faults" in bench.format_table(timings)


def test_page_faults_are_per_call_whatever_the_calls_per_sample():
    """A sample of 1 call and one of 4 calls in a row give the same faults per call
    for a call that writes a fresh 64 MiB tensor each time (above glibc's largest
    mmap threshold, so its pages are returned when it is freed and every call faults
    them in again)."""
    if bench.minor_faults() is None:
        pytest.skip("this system does not count page faults")

    def fresh():
        torch.ones(2**24)

    def per_call(calls: int) -> float:
        samples = [
            bench._time_once(fresh, torch.device("cpu"), calls)[1] for _ in range(5)
        ]
        return statistics.median(samples)

    fresh()  # warm
    one, four = per_call(1), per_call(4)
    assert one >= 32, one  # 64 MiB: 16384 pages of 4 KiB, or 32 huge pages of 2 MiB
    assert 0.5 < four / one < 2, (one, four)


def test_rows_are_within_noise_when_their_interquartile_ranges_overlap():
    a = make_timing([9.0, 10.0, 10.0, 10.0, 11.0])  # IQR 10-10
    b = make_timing([9.5, 10.0, 10.5, 11.0, 11.5])  # IQR 10-11
    c = make_timing([11.0, 12.0, 12.0, 12.0, 13.0])  # IQR 12-12
    assert bench.within_noise(a, b) and bench.within_noise(b, a)
    assert not bench.within_noise(a, c) and not bench.within_noise(c, a)
    assert bench.within_noise(b, b)


def test_ratio_text_says_within_noise_where_the_rows_overlap():
    a = make_timing([9.0, 10.0, 10.0, 10.0, 11.0])
    b = make_timing([9.5, 10.0, 10.5, 11.0, 11.5])
    c = make_timing([19.0, 20.0, 20.0, 20.0, 21.0])
    assert bench.ratio_text(c, a) == "2.00 times"
    assert bench.ratio_text(b, a, digits=1) == "1.1 times (within noise)"


def test_no_ratio_is_worded_from_a_row_the_table_marks_noisy():
    """Chapter 10's rule: a starred row's median is not a finding, whether its
    calls disagree (interquartile range) or its recording processes do."""
    steady = make_timing([9.0, 10.0, 10.0, 10.0, 11.0])
    calls = make_timing([5.0, 5.0, 10.0, 15.0, 15.0])
    calls.name = "calls"
    # calls agree within each process, but one process ran four times slower
    runs = make_timing([1.0, 1.0, 1.0, 1.0, 1.0])
    runs.name = "runs"
    runs.process_medians_ms = [0.92, 0.94, 4.0]
    assert runs.spread == 0.0 and runs.process_spread > bench.NOISY_SPREAD
    assert calls.noisy and runs.noisy and not steady.noisy
    for noisy in (calls, runs):
        for a, b in ((noisy, steady), (steady, noisy)):
            with pytest.raises(bench.NoisyRow, match=f"'{noisy.name}'.*quiet machine"):
                bench.ratio_text(a, b)
    assert issubclass(bench.NoisyRow, ValueError)
    assert bench.noise_text(calls) == (
        "its calls' interquartile range is 100% of its median"
    )
    assert bench.noise_text(runs) == (
        "its calls' interquartile range is 0% of its median; "
        "its 3 processes' medians 0.920-4.00 ms"
    )
    # the table stars the row whose processes disagree, as it does the other
    steady.name = "steady"
    lines = bench.format_table([steady, runs]).splitlines()
    assert any(line.startswith("runs *") for line in lines)
    assert not any(line.startswith("steady *") for line in lines)


def test_a_table_too_wide_for_a_page_wraps_its_long_names():
    """Columns that would pass 88 characters wrap the long names under their row,
    indented, and keep every number in its column."""
    long = "a row whose name goes on and on, as peers' names do"
    rows = [
        bench.Timing(long, [1.0], bytes_moved=2**20, copy_ms=0.5, peak_bytes=2**20),
        bench.Timing("short", [2.0], bytes_moved=2**20, copy_ms=0.5, peak_bytes=2**20),
    ]
    for row in rows:
        row.faults_per_call, row.process_medians_ms = 3.0, [1.0, 1.1, 0.9]
    table = bench.format_table(rows)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= bench.TABLE_WIDTH
    first = next(i for i, line in enumerate(lines) if line.startswith("a row"))
    assert lines[first].rstrip().endswith("20")  # its numbers, runs % last
    # the rest of its name under it, indented: read back, the whole name
    rest = []
    for line in lines[first + 1 :]:
        if not line.startswith("  "):
            break
        rest.append(line.strip())
    assert rest
    assert " ".join([lines[first].split("  ")[0], *rest]) == long
    # a table that fits is left alone
    narrow = bench.format_table([bench.Timing(long, [1.0])])
    assert any(line.startswith(long + "  ") for line in narrow.splitlines())
