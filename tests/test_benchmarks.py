"""The chapters' timing suites run, name what they measured, and record loadable results (sizes tiny)."""

from __future__ import annotations

import torch

from pe_tutorial import bench, benchmarks


def test_absolute_tables_suite():
    timings, baseline = benchmarks.absolute_tables(
        torch.device("cpu"), num_positions=64, dim=16
    )
    assert [t.name for t in timings] == [
        "integer table",
        "binary table",
        "sinusoidal table",
        "lookup in a stored table",
    ]
    assert all(
        t.shapes == {"num_positions": 64, "dim": 16} and t.bytes_moved == 64 * 16 * 4
        for t in timings
    )
    assert baseline.bytes_moved == 2 * 64 * 16 * 4


def test_self_attention_suite():
    timings, baseline = benchmarks.self_attention_lengths(
        torch.device("cpu"), lengths=[8, 16], head_dim=4
    )
    assert [t.shapes["q"] for t in timings] == [[1, 8, 4], [1, 16, 4]]
    assert baseline.shapes == {"x": [1, 16, 16]}


def test_command_line_records_a_loadable_file(tmp_path, capsys, monkeypatch):
    def small(device):
        return benchmarks.absolute_tables(device, num_positions=32, dim=8)

    monkeypatch.setitem(benchmarks.SUITES, "absolute_tables", small)
    benchmarks.main(
        ["absolute_tables", "--device", "cpu", "--record", "--out", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    assert printed.startswith("device: CPU") and "recorded in" in printed
    environment, timings = bench.load_results("absolute_tables", directory=tmp_path)
    assert environment["device_type"] == "cpu"
    assert [t.name for t in timings][-1] == "copy (same bytes)"
