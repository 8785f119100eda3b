"""The timing suites: each chapter's runs at tiny sizes and says what it timed; the CLI
checks its arguments, writes JSON and records files that the chapters load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from printed_tables import cell

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks import _core, attention_bias, recorded
from pe_tutorial.benchmarks import timing as bench

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CPU = torch.device("cpu")

# every chapter's suite at a size that runs in well under a second
TINY = {
    "attention_lengths": {"lengths": [8, 16], "head_dim": 4},
    "integer_tables": {"num_positions": 16, "dim": 8},
    "binary_tables": {"num_positions": 16, "num_bits": 8},
    "absolute_tables": {"num_positions": 16, "dim": 8},
    "shift_matrix": {"num_positions": 16, "d_model": 8},
    "rope_implementations": {"shape": (1, 2, 8, 4)},
    "alibi_attention": {"shape": (1, 2, 8, 4)},
    "relative_attention": {"shape": (1, 2, 8, 4)},
    "train_step": {"batch": 2, "seq_len": 8, "schemes": ("nope", "rope")},
    "mrope_rotation": {"tokens": 64},
}


@pytest.fixture(autouse=True)
def steady_copy_probe(monkeypatch):
    """Suites here run beside other test workers, so the busy-machine probe would
    fire at random; it reads a steady copy (tests of the probe set their own)."""
    monkeypatch.setattr(bench, "copy_probe", lambda device, **options: 1.0)


def test_every_chapter_suite_is_registered():
    chapters = {s.chapter for s in benchmarks.SUITES.values()}
    assert {"1", "2", "3", "4", "5", "6", "7", "8", "9"} <= chapters
    assert set(TINY) <= set(benchmarks.SUITES)
    # each says in one line why it times the sizes it does
    assert all(s.why and len(s.why) < 88 for s in benchmarks.SUITES.values())


@pytest.mark.parametrize("name", sorted(TINY))
def test_each_chapter_suite_runs_and_says_what_it_timed(name):
    result = benchmarks.run(name, "cpu", warmup=0, repeats=2, **TINY[name])
    assert result.suite == name and result.environment["device"] == "cpu"
    rows = [t for t in result.timings if not t.is_copy]
    assert rows and all(len(t.times_ms) == 2 and t.shapes for t in rows)
    # a row with a byte count has a copy of exactly its bytes and kind beside it
    copies = {
        (t.bytes_moved, t.allocates): t.median_ms for t in result.timings if t.is_copy
    }
    for t in rows:
        if t.bytes_moved is not None:
            assert t.copy_ms == copies[t.bytes_moved, t.allocates]
    table = result.table()
    assert table.splitlines()[0].startswith(result.environment["device_name"])
    assert f"sizes: {benchmarks.SUITES[name].why}" in table
    # a long name may wrap onto indented lines under its row (test_bench checks
    # how); its first words start the row
    assert all(t.name.split()[0] in table for t in result.timings)
    assert max(len(line) for line in table.splitlines()) <= 88


def test_byte_counts_follow_the_formulas():
    tables = benchmarks.run(
        "absolute_tables", "cpu", warmup=0, repeats=1, num_positions=16, dim=8
    )
    # building writes 16 x 8 floats; a lookup reads and writes them
    assert tables.timing("sinusoidal table").bytes_moved == 16 * 8 * 4
    assert tables.timing("lookup in a stored table").bytes_moved == 2 * 16 * 8 * 4
    attention = benchmarks.run(
        "attention_lengths", "cpu", warmup=0, repeats=1, lengths=[8], head_dim=4
    )
    # (4 T^2 + 4 T D) float32 elements
    assert attention.timing("attention, T = 8").bytes_moved == (4 * 64 + 4 * 32) * 4
    bits = benchmarks.run(
        "binary_tables", "cpu", warmup=0, repeats=1, num_positions=16, num_bits=8
    )
    assert bits.timing("the same bits as uint8").bytes_moved == 16 * 8


def test_copy_for_finds_the_copy_of_a_rows_bytes():
    result = benchmarks.run(
        "absolute_tables", "cpu", warmup=0, repeats=1, num_positions=16, dim=8
    )
    lookup = result.timing("lookup in a stored table")
    copy = result.copy_for(lookup)
    assert copy.is_copy and copy.bytes_moved == lookup.bytes_moved
    # of its kind: the lookup returns a new tensor and meets a clone; the sines
    # written into given outputs meet a copy into a given output
    assert copy.allocates and copy.name.startswith("clone")
    sines = result.timing("sines and cosines alone (out=)")
    assert not result.copy_for(sines).allocates
    assert result.copy_for(sines).name.startswith("copy")
    with pytest.raises(ValueError, match="no copy of 'x'"):
        result.copy_for(bench.Timing("x", [1.0], bytes_moved=3))


def test_attention_suites_compare_with_the_unbiased_kernel():
    result = benchmarks.run(
        "alibi_attention", "cpu", warmup=0, repeats=1, **TINY["alibi_attention"]
    )
    assert result.reference == "causal SDPA, no bias"
    assert "x ref" in result.table()


def test_gpu_sizes_fit_a_t4(monkeypatch):
    """The attention suites' batch shrinks until the eager Flex scores fit half the GPU."""

    class Props:
        total_memory = 15 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props)
    from pe_tutorial.benchmarks.chapters import attention_shape

    shape = attention_shape(torch.device("cuda"), None, torch.float16)
    batch, heads, seq, _ = shape
    assert 3.5 * batch * heads * seq * seq * 4 <= 15 * 2**30 / 2
    assert shape == (2, 16, 4096, 64)
    Props.total_memory = 80 * 2**30
    assert attention_shape(torch.device("cuda"), None, torch.float16)[0] == 4


def test_the_device_slug_tells_cpus_of_one_name_apart():
    """A VM's generic name covers several generations: two CPUs named alike but of
    another model or cache get their own files, and are never judged busy against
    each other; an environment recorded before the fields existed keeps its slug."""
    base = {"device": "cpu", "device_name": "Intel(R) Xeon(R) Processor", "threads": 2}
    old = _core.device_slug(base)
    assert old == "cpu-intel-r-xeon-r-processor-2-threads"
    sapphire = {**base, "cpu_model": "6-143-8", "last_level_cache_bytes": 105 * 2**20}
    other = {**sapphire, "cpu_model": "6-106-6"}
    slugs = {old, _core.device_slug(sapphire), _core.device_slug(other)}
    assert len(slugs) == 3
    assert _core.device_slug(sapphire) == (
        "cpu-intel-r-xeon-r-processor-6-143-8-llc-105mib-2-threads"
    )
    gpu = {"device": "cuda:0", "device_name": "NVIDIA T4", "threads": 2}
    assert _core.device_slug(gpu) == "cuda-nvidia-t4"  # a GPU's name says its model


def test_results_round_trip_and_record(tmp_path):
    result = benchmarks.run(
        "integer_tables", "cpu", warmup=0, repeats=2, num_positions=8, dim=4
    )
    path = benchmarks.record(result, tmp_path)
    slug = _core.device_slug(result.environment)
    assert slug.startswith("cpu-") and slug.endswith(
        f"-{torch.get_num_threads()}-threads"
    )
    assert path == tmp_path / f"bench-integer_tables--{slug}.json"
    assert not list(tmp_path.glob("*.tmp"))
    loaded = benchmarks.load_recorded("integer_tables", tmp_path)
    assert loaded.to_dict() == json.loads(json.dumps(result.to_dict()))
    assert benchmarks.load_recorded("binary_tables", tmp_path) is None
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        benchmarks.load_recorded("nope", tmp_path)
    with pytest.raises(ValueError, match="no 'results' key"):
        benchmarks.SuiteResult.from_dict({"suite": "x", "environment": {}})


def test_show_prints_the_recorded_runs_then_this_machine(capsys):
    live = benchmarks.run(
        "absolute_tables", "cpu", warmup=0, repeats=1, num_positions=8, dim=4
    )
    benchmarks.show(live, directory=FIXTURES)
    printed = capsys.readouterr().out
    recorded_part, live_part = printed.split("this machine, now:")
    assert recorded_part.startswith("recorded run: NVIDIA H100 80GB HBM3, 2026-01-01")
    assert live_part.startswith("\n" + live.environment["device_name"])
    # the fixture's sinusoidal row is 0.02 ms against a 0.01 ms copy
    assert cell(recorded_part, "sinusoidal", "x copy") == "2.00"
    assert cell(recorded_part, "sinusoidal", "% peak") == "25%"


def test_the_quoted_run_comes_first_and_is_what_the_text_reads(
    tmp_path, capsys, monkeypatch
):
    live = benchmarks.run(
        "integer_tables", "cpu", warmup=0, repeats=1, num_positions=8, dim=4
    )
    with pytest.raises(FileNotFoundError, match="integer_tables --device cpu --record"):
        benchmarks.quoted("integer_tables", tmp_path)
    gpu = benchmarks.SuiteResult.from_dict(
        {**live.to_dict(), "environment": {"device": "cuda:0", "device_name": "T4"}}
    )
    benchmarks.record(gpu, tmp_path)
    benchmarks.record(live, tmp_path)
    monkeypatch.setattr(recorded, "QUOTED_DEVICE", _core.device_slug(live.environment))
    assert benchmarks.quoted("integer_tables", tmp_path).to_dict() == json.loads(
        json.dumps(live.to_dict())
    )
    benchmarks.show(live, directory=tmp_path)
    printed = capsys.readouterr().out
    # each table's title starts its first line (a long one wraps on, indented)
    titles = [
        line
        for line in printed.splitlines()
        if line.startswith(("recorded run", "this machine"))
    ]
    assert titles[0].startswith("recorded run, quoted in the text: ")
    assert titles[1].startswith("recorded run: T4")
    assert titles[2] == "this machine, now:"


def test_show_invites_a_gpu_run_once_per_process(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(recorded, "_invited", set())
    live = benchmarks.run(
        "integer_tables", "cpu", warmup=0, repeats=1, num_positions=8, dim=4
    )
    benchmarks.show(live, directory=tmp_path)
    first = capsys.readouterr().out
    assert "!python -m pe_tutorial.benchmarks --all --record --out pe-timings" in first
    assert "Drive" in first and "pe_tutorial/results/" in first  # kept, and given back
    benchmarks.show(live, directory=tmp_path)
    assert "--all --record" not in capsys.readouterr().out
    # a recorded GPU run is an answer already: no invitation beside it
    monkeypatch.setattr(recorded, "_invited", set())
    absolute = benchmarks.run(
        "absolute_tables", "cpu", warmup=0, repeats=1, num_positions=8, dim=4
    )
    benchmarks.show(absolute, directory=FIXTURES)
    assert "--all --record" not in capsys.readouterr().out


def test_every_device_records_its_own_file_and_shows_beside_the_others(tmp_path):
    result = benchmarks.run(
        "integer_tables", "cpu", warmup=0, repeats=1, num_positions=8, dim=4
    )
    gpu = benchmarks.SuiteResult.from_dict(
        {**result.to_dict(), "environment": {"device": "cuda:0", "device_name": "T4"}}
    )
    other_cpu = benchmarks.SuiteResult.from_dict(
        {**result.to_dict(), "environment": {**result.environment, "threads": 64}}
    )
    paths = {benchmarks.record(r, tmp_path) for r in (result, gpu, other_cpu)}
    assert len(paths) == 3  # nothing overwritten
    runs = _core.load_recorded_runs("integer_tables", tmp_path)
    assert runs[0].environment["device_name"] == "T4"  # GPUs first
    assert len(runs) == 3


def test_every_shipped_recorded_run_says_where_and_when():
    for path in sorted(_core.results_dir().glob("bench-*.json")):
        document = json.loads(path.read_text())
        result = benchmarks.SuiteResult.from_dict(document)
        assert result.suite in benchmarks.SUITES, path.name
        for key in ("device", "device_name", "torch", "date", "python"):
            assert result.environment.get(key), f"{path.name} lacks environment.{key}"
        assert all(t.times_ms for t in result.timings)


def test_command_line_prints_writes_json_and_records(tmp_path, capsys, monkeypatch):
    real_run = _core.run

    def small_run(name, device, dtype, **kwargs):
        return real_run(
            name, device, dtype, warmup=0, num_positions=8, dim=4, repeats=2
        )

    monkeypatch.setattr(_core, "run", small_run)
    out = tmp_path / "out.json"
    code = benchmarks.main(
        [
            "absolute_tables",
            "--device",
            "cpu",
            "--json",
            str(out),
            "--record",
            "--out",
            str(tmp_path),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "sinusoidal table" in printed and "recorded in" in printed
    document = json.loads(out.read_text())
    assert document["environment"]["device"] == "cpu"
    assert {"name", "median_ms", "shapes", "quartiles_ms"} <= set(
        document["results"][0]
    )
    assert (
        benchmarks.load_recorded("absolute_tables", tmp_path).suite == "absolute_tables"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nope"], "unknown suite 'nope'; the suites are: "),
        (["integer_tables", "--device", "tpu"], "unknown device 'tpu'"),
        (
            ["integer_tables", "--dtype", "float8"],
            "unknown dtype 'float8'; use one of float32",
        ),
        (["integer_tables", "--dtype", "float16"], "runs in float32, not 'float16'"),
        (["integer_tables", "--repeats", "0"], "--repeats must be at least 1"),
        ([], "name one suite, or give --all"),
        (["integer_tables", "--all"], "name one suite, or give --all"),
        (["--all", "--json", "x.json"], "with --all or several use --record --out"),
        (["rope", "roofline", "--json", "x.json"], "with --all or several use"),
        (["rope", "roofline", "rope"], "a suite named twice: rope"),
        (["rope", "no_such_suite"], "no_such_suite"),
        (["--all", "--dtype", "float8"], "unknown dtype 'float8'"),
        (
            ["integer_tables", "--record", "--out", "/proc/no-such-folder"],
            "cannot make the folder /proc/no-such-folder",
        ),
    ],
)
def test_command_line_rejects_bad_arguments_listing_the_valid_ones(
    argv, message, capsys
):
    with pytest.raises(SystemExit) as exit_info:
        benchmarks.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_all_records_one_file_per_suite_with_its_environment(
    tmp_path, monkeypatch, capsys
):
    real_run = _core.run
    ran = []
    asked = {}

    def small_run(name, device, dtype, **kwargs):
        ran.append(name)
        asked[name] = kwargs
        result = real_run(
            "integer_tables", device, None, warmup=0, repeats=1, num_positions=8, dim=4
        )
        result.suite = name  # stands in for that suite's run
        return result

    monkeypatch.setattr(_core, "run", small_run)
    # the stand-in rows are integer_tables', which the other suites' reports (run
    # afresh under every printed table) cannot read: print the stored notes
    monkeypatch.setattr(
        benchmarks.SuiteResult, "printed_notes", lambda self: list(self.notes)
    )
    out = tmp_path / "recorded"
    # several names run in the order given
    argv = ["rope", "copy_sizes", "--device", "cpu", "--record", "--out", str(out)]
    assert benchmarks.main(argv) == 0
    assert ran == ["rope", "copy_sizes"]
    ran.clear()
    argv = ["--all", "--device", "cpu", "--record", "--out", str(out)]
    assert benchmarks.main(argv) == 0
    assert ran == sorted(benchmarks.SUITES)
    # a recording times three times the suite's rounds, then more while noisy
    rope = benchmarks.SUITES["rope"]
    assert asked["rope"] == {
        "repeats": 3 * rope.cpu_repeats,
        "max_seconds": 60.0,
        "calls_per_sample": 1,
    }
    printed = capsys.readouterr().out
    assert all(f"{name}: " in printed for name in benchmarks.SUITES)  # time per suite
    files = sorted(out.glob("bench-*--cpu-*.json"))
    assert [f.name.split("--")[0] for f in files] == [
        f"bench-{name}" for name in sorted(benchmarks.SUITES)
    ]
    document = json.loads(files[0].read_text())
    assert document["environment"]["device"] == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_asking_for_cuda_without_a_gpu_says_so(capsys):
    with pytest.raises(SystemExit):
        benchmarks.main(["integer_tables", "--device", "cuda"])
    assert "sees no CUDA GPU; use --device cpu" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# chapter 10: rope and attention_bias
# ---------------------------------------------------------------------------


def test_rope_suite_checks_every_row_and_skips_what_cannot_run_here():
    result = benchmarks.run(
        "rope", "cpu", warmup=0, repeats=1, shape=(1, 2, 8, 16), compiled=False
    )
    names = [t.name for t in result.timings if not t.is_copy]
    assert names[:5] == [
        "naive: a dense D x D matrix per token",
        "apply_rope on q, then on k",
        "fused: q and k, cos/sin once",
        "fused, into given outputs (out=)",
        "fused, in place",
    ]
    assert "rotate-half formula, written out" in names
    notes = "\n".join(result.notes)
    assert "Triton kernel: skipped, it runs on CUDA GPUs" in notes
    assert "flash-attn apply_rotary_emb: skipped" in notes
    assert "disagrees" not in notes
    # q and k read and written, plus cos and sin: 4 * 1*2*8*16 * 4 + 8 * 16 * 4
    assert {t.bytes_moved for t in result.timings} == {4 * 256 * 4 + 8 * 16 * 4}
    assert any(
        line.startswith("target: within 1.5x of the copy") for line in result.notes
    )


def test_a_path_that_disagrees_stops_the_suite_and_says_which(monkeypatch):
    from pe_tutorial.benchmarks import WrongResult, peers

    def wrong(q, k, positions, base):
        return lambda: (q, k)  # forgets to rotate

    monkeypatch.setitem(peers.PEERS, "a wrong peer", (wrong, "half"))
    with pytest.raises(
        WrongResult, match="a wrong peer: its rotated q disagrees with apply_rope"
    ):
        benchmarks.run(
            "rope", "cpu", warmup=0, repeats=1, shape=(1, 1, 4, 8), compiled=False
        )


def _rope_result(rows, device="cpu", shape=(2, 16, 2048, 128), dtype="float32"):
    from pe_tutorial.benchmarks.rope import writes_into_given

    timings = [
        bench.Timing(
            name,
            [ms],
            copy_ms=copy,
            is_copy=name.startswith("copy"),
            allocates=not name.startswith("copy") and not writes_into_given(name),
        )
        for name, ms, copy in rows
    ]
    return benchmarks.SuiteResult(
        "rope",
        {"device": device},
        timings,
        settings={"shape": list(shape), "dtype": dtype},
    )


def test_rope_targets_are_judged_from_the_measured_ratios():
    from pe_tutorial.benchmarks.rope import check_targets

    met = check_targets(
        _rope_result(
            [
                ("fused, in place", 15.0, 10.0),
                ("compiled, new outputs", 18.0, 12.0),
                ("transformers apply_rotary_pos_emb", 180.0, 12.0),
                ("copy, 1 MiB moved", 10.0, 10.0),
            ]
        )
    )
    assert met[0] == "fastest of the package's rows: 'fused, in place'"
    assert met[1].endswith("measured 1.50x: met")
    # the peer returns new tensors: it meets the fastest row that does too
    assert "compiled, new outputs at least 8x faster" in met[2]
    assert met[2].endswith("measured 10.0x: met")
    # against the in-place row the peer would look 12x slower; like with like, 5x
    unlike = check_targets(
        _rope_result(
            [
                ("fused, in place", 15.0, 10.0),
                ("fused: q and k, cos/sin once", 36.0, 12.0),
                ("transformers apply_rotary_pos_emb", 180.0, 12.0),
            ]
        )
    )
    assert unlike[2].endswith("measured 5.0x: NOT met")
    too_slow = [
        ("fused, in place", 25.0, 10.0),
        ("apply_rope on q, then on k", 25.0, 10.0),
        ("rotate-half formula, written out", 150.0, 10.0),
        ("copy, 1 MiB moved", 10.0, 10.0),
    ]
    missed = check_targets(_rope_result(too_slow, shape=(1, 1, 8, 8)))
    # two rows the run cannot tell apart are both named, never one "fastest"
    assert missed[0].endswith(
        "'fused, in place' (within noise of it: 'apply_rope on q, then on k')"
    )
    assert "this run used other settings, so no verdict" in missed[1]
    assert missed[2].endswith("measured 2.50x")
    assert missed[3].endswith("(both return new tensors); measured 6.0x")
    missed_here = check_targets(_rope_result(too_slow))
    assert missed_here[1].endswith("measured 2.50x: NOT met")
    assert missed_here[2].endswith("measured 6.0x: NOT met")

    def on_gpu(in_place_ms):
        return check_targets(
            _rope_result(
                [
                    ("Triton kernel", 1.1, 1.0),
                    ("fused, in place", in_place_ms, 1.0),
                    ("Liger liger_rotary_pos_emb", 1.2, 1.0),
                    ("copy, 1 MiB moved", 1.0, 1.0),
                ],
                device="cuda:0",
                shape=(8, 32, 2048, 128),
                dtype="bfloat16",
            )
        )

    # 1 / 1.1 = 91% of the copy's bandwidth; Liger rotates in place, so it
    # meets the package's in-place row, not the faster Triton kernel's new outputs
    gpu = on_gpu(1.3)
    assert gpu[1].endswith("measured 91%: met")
    assert "Triton kernel (new outputs) and fused, in place (given" in gpu[2]
    assert gpu[2].endswith("of their kind that ran (1): NOT met")
    assert on_gpu(1.15)[2].endswith("(1): met")


def test_a_noisy_row_is_never_the_fastest_nor_judged_against_a_target():
    from pe_tutorial.benchmarks.rope import check_targets, fastest_own, noisy_own

    result = _rope_result(
        [
            ("fused, in place", 15.0, 10.0),
            ("compiled, new outputs", 12.0, 10.0),
            ("fused: q and k, cos/sin once", 36.0, 12.0),
            ("transformers apply_rotary_pos_emb", 180.0, 12.0),
        ]
    )
    fast = result.timing("compiled, new outputs")
    # a compiled peer is a peer: never the package's fastest row
    from pe_tutorial.benchmarks.rope import COMPILED_HF, is_peer

    assert is_peer(COMPILED_HF) and not is_peer("compiled, new outputs")
    with_peer = _rope_result([("fused, in place", 15.0, 10.0), (COMPILED_HF, 5.0, 9.0)])
    assert fastest_own(with_peer).name == "fused, in place"
    fast.process_medians_ms = [8.0, 12.0, 20.0]  # its processes disagree
    assert fastest_own(result).name == "fused, in place"
    assert fastest_own(result, allocates=True).name == "fused: q and k, cos/sin once"
    assert noisy_own(result, allocates=True) == [fast]
    assert noisy_own(result, allocates=False) == []
    lines = check_targets(result)
    assert lines[0] == "fastest of the package's rows: 'fused, in place'"
    assert "fused: q and k, cos/sin once at least 8x faster" in lines[2]
    for row in result.timings:
        row.process_medians_ms = [8.0, 12.0, 20.0]
    with pytest.raises(ValueError, match="marked noisy.*record the suite again"):
        fastest_own(result)
    assert check_targets(result)[0].startswith("no verdict on the targets: every row")


def test_attention_bias_suite_compares_with_unbiased_sdpa():
    result = benchmarks.run(
        "attention_bias",
        "cpu",
        warmup=0,
        repeats=1,
        shape=(1, 2, 16, 8),
        compiled=False,
    )
    names = [t.name for t in result.timings]
    assert names[0] == result.reference == "SDPA, causal mask only"
    assert {"SDPA + materialised ALiBi", "SDPA + materialised T5"} <= set(names)
    assert {"Flex eager, no bias", "Flex eager, ALiBi"} <= set(names)
    assert not any("disagrees" in note for note in result.notes)
    # each bias is read against the same kernel without one
    costs = attention_bias.bias_costs(result)
    assert set(costs) == {("SDPA", "ALiBi"), ("SDPA", "T5"), ("Flex eager", "ALiBi")}
    flex = result.timing("Flex eager, ALiBi")
    plain = result.timing("Flex eager, no bias")
    assert costs["Flex eager", "ALiBi"][0] == flex.median_ms / plain.median_ms
    assert any(line.startswith("ALiBi in Flex eager: ") for line in result.notes)


def test_like_with_like_bias_costs_say_when_a_cost_is_within_noise():
    rows = {
        "SDPA, causal mask only": [10.0, 10.0, 10.0, 10.0],
        "SDPA + materialised ALiBi": [20.0, 20.0, 20.0, 20.0],
        "Flex compiled, no bias": [5.0, 5.0, 6.0, 6.0],
        "Flex compiled, ALiBi": [5.5, 5.5, 6.5, 6.5],
    }
    result = benchmarks.SuiteResult(
        "attention_bias",
        {"device": "cpu"},
        [bench.Timing(name, times) for name, times in rows.items()],
    )
    costs = attention_bias.bias_costs(result)
    assert costs["SDPA", "ALiBi"] == (2.0, False)
    ratio, noise = costs["Flex compiled", "ALiBi"]
    assert ratio == pytest.approx(6.0 / 5.5) and noise
    lines = attention_bias.report(result)
    assert "ALiBi in Flex compiled: 1.09x the same kernel without a bias (within " in (
        "\n".join(lines)
    )


def test_copy_sizes_are_timed_each_in_rounds_of_its_own(monkeypatch):
    rounds = []
    real = bench.measure

    def spy(cases, **options):
        rounds.append([case.name for case in cases])
        return real(cases, **options)

    monkeypatch.setattr(bench, "measure", spy)
    result = benchmarks.run("copy_sizes", "cpu", warmup=0, repeats=2, sizes=[64, 128])
    assert rounds == [["copy, 64 B moved"], ["copy, 128 B moved"]]
    assert [t.bytes_moved for t in result.timings] == [64, 128]


def test_binary_table_is_sized_for_a_context_with_every_column_used():
    result = benchmarks.run("binary_tables", "cpu", warmup=0, repeats=1)
    assert result.settings["table"] == [2**16, 16]


def test_a_wrong_attention_path_stops_its_suite(monkeypatch):
    from pe_tutorial.benchmarks import attention_bias

    real = attention_bias.attend

    def sdpa_forgets_the_bias(q, k, v, scheme=None, **options):
        if options.get("kernel") == "sdpa":
            scheme = None
        return real(q, k, v, scheme, **options)

    monkeypatch.setattr(attention_bias, "attend", sdpa_forgets_the_bias)
    with pytest.raises(
        benchmarks.WrongResult,
        match="SDPA \\+ materialised ALiBi: its output disagrees with the naive kernel",
    ):
        benchmarks.run(
            "attention_bias",
            "cpu",
            warmup=0,
            repeats=1,
            compiled=False,
            shape=(1, 2, 16, 8),
        )


def _result_with_probe(before, after, device_name="Test CPU"):
    env = {
        "device": "cpu",
        "device_name": device_name,
        "threads": 2,
        "date": "2026-11-25",
    }
    env["copy_probe_ms"] = {"before": before, "after": after}
    return benchmarks.SuiteResult("rope", env, [bench.Timing("x", [1.0])])


def test_a_busy_machine_is_told_from_its_copy_probes():
    from pe_tutorial.benchmarks._core import busy_reason

    # steady and no record to compare with: quiet
    assert busy_reason(_result_with_probe(10.0, 11.0), []) is None
    # the load changed during the run
    assert "the load changed" in busy_reason(_result_with_probe(10.0, 20.0), [])
    # steady, but both probes twice as slow as the recorded run on this device
    recorded = _result_with_probe(5.0, 5.2)
    reason = busy_reason(_result_with_probe(10.0, 10.5), [recorded])
    assert reason.startswith("copies ran 2.0x slower than in the recorded run")
    # a record from another device says nothing about this one
    other = _result_with_probe(5.0, 5.0, device_name="Other CPU")
    assert busy_reason(_result_with_probe(10.0, 10.5), [other]) is None
    # nor a record whose probe copied another number of bytes (a 256 MiB probe
    # takes four times a 64 MiB one, and says nothing about a busy machine)
    small = _result_with_probe(2.5, 2.5)
    small.environment["copy_probe_ms"]["bytes"] = 64 * 2**20
    large = _result_with_probe(10.0, 10.5)
    large.environment["copy_probe_ms"]["bytes"] = 256 * 2**20
    assert busy_reason(large, [small]) is None
    small.environment["copy_probe_ms"]["bytes"] = 256 * 2**20
    assert busy_reason(large, [small]).startswith("copies ran 4.0x slower")
    # an old record without probes, or a result without them: no claim
    recorded.environment.pop("copy_probe_ms")
    assert busy_reason(_result_with_probe(10.0, 10.5), [recorded]) is None


def test_a_busy_run_is_shown_as_busy_and_kept_in_its_json(
    monkeypatch, capsys, tmp_path
):
    probes = iter([10.0, 30.0])
    monkeypatch.setattr(bench, "copy_probe", lambda device: next(probes))
    result = benchmarks.run(
        "rope", "cpu", warmup=0, repeats=1, shape=(1, 1, 4, 8), compiled=False
    )
    assert "the load changed" in result.busy
    assert result.environment["copy_probe_ms"] == {
        "before": 10.0,
        "after": 30.0,
        "bytes": bench.PROBE_BYTES,
    }
    again = benchmarks.SuiteResult.from_dict(result.to_dict())
    assert again.busy == result.busy
    benchmarks.show(result, directory=tmp_path)
    assert "This machine was busy while the suite ran" in capsys.readouterr().out


def test_a_busy_run_is_not_recorded_unless_forced(monkeypatch, tmp_path, capsys):
    from pe_tutorial.benchmarks.cli import main

    real_run = _core.run

    def small_busy_run(name, device, dtype, **kwargs):
        result = real_run(name, device, dtype, warmup=0, num_positions=8, dim=4)
        result.busy = "a test load"
        return result

    monkeypatch.setattr(_core, "run", small_busy_run)
    options = ["absolute_tables", "--device", "cpu", "--out", str(tmp_path)]
    assert main([*options, "--record"]) == 0
    assert (
        "NOT recorded: this machine was busy (a test load)" in capsys.readouterr().out
    )
    assert not list(tmp_path.glob("bench-absolute_tables*.json"))
    assert main([*options, "--record", "--force"]) == 0
    assert len(list(tmp_path.glob("bench-absolute_tables*.json"))) == 1


def _busy_machine(monkeypatch):
    """Every call of every row disagrees (1 and 3 ms, as on a machine with both cores
    taken), and the time cap runs out in the round where the rows start again with
    longer samples: what `--all --record --repeats 3` met beside two busy processes,
    made deterministic with a fake clock that jumps once a row has 2 x 2 samples."""
    from types import SimpleNamespace

    samples = {}

    def fake_time_once(fn, device, calls=1):
        samples[id(fn)] = samples.get(id(fn), 0) + 1
        return (1.0, 3.0)[samples[id(fn)] % 2], None

    def clock():
        return 1e9 if max(samples.values(), default=0) >= 4 else 0.0

    monkeypatch.setattr(bench, "_time_once", fake_time_once)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=clock))
    real_run = _core.run

    def small_run(name, device, dtype, **kwargs):
        return real_run(name, device, dtype, warmup=0, num_positions=8, dim=4, **kwargs)

    monkeypatch.setattr(_core, "run", small_run)
    return samples


@pytest.mark.parametrize("load_changed", [True, False])
def test_a_recording_on_a_busy_machine_refuses_or_finishes_never_crashes(
    monkeypatch, tmp_path, capsys, load_changed
):
    _busy_machine(monkeypatch)
    if load_changed:  # the copy probes before and after the suite disagree
        probes = iter([1.0, 3.0])
        monkeypatch.setattr(bench, "copy_probe", lambda device: next(probes))
    argv = ["absolute_tables", "--device", "cpu", "--record", "--out", str(tmp_path)]
    assert benchmarks.main([*argv, "--repeats", "2"]) == 0
    printed = capsys.readouterr().out
    files = list(tmp_path.glob("bench-absolute_tables--*.json"))
    if load_changed:
        assert (
            "NOT recorded: this machine was busy (a 256.0 MiB copy took 1.00 ms "
            in (printed)
        )
        assert not files
        return
    # the probes saw nothing: recorded, each row with its 2 x 2 single calls, and
    # every row marked too noisy to trust
    assert "recorded in" in printed and len(files) == 1
    result = benchmarks.SuiteResult.from_dict(json.loads(files[0].read_text()))
    assert all(len(t.times_ms) == 4 and t.noisy for t in result.timings)
    assert all(t.calls_per_sample == 1 for t in result.timings)
    assert "too noisy to trust" in result.table()


def test_all_goes_on_after_a_suite_that_fails_and_says_which(
    monkeypatch, tmp_path, capsys
):
    real_run = _core.run

    def run_or_fail(name, device, dtype, **kwargs):
        if name == "attention_lengths":
            raise RuntimeError("a path that breaks on this device")
        result = real_run(
            "integer_tables", device, None, warmup=0, repeats=1, num_positions=8, dim=4
        )
        result.suite = name
        return result

    monkeypatch.setattr(_core, "run", run_or_fail)
    # the stand-in rows are integer_tables': the other suites' reports cannot read them
    monkeypatch.setattr(
        benchmarks.SuiteResult, "printed_notes", lambda self: list(self.notes)
    )
    argv = ["--all", "--device", "cpu", "--record", "--out", str(tmp_path)]
    assert benchmarks.main(argv) == 1
    captured = capsys.readouterr()
    assert (
        "FAILED: attention_lengths: RuntimeError: a path that breaks on this device"
        in captured.out
    )
    assert "suites that failed (1): attention_lengths" in captured.out
    assert "Traceback" in captured.err
    recorded = {p.name.split("--")[0] for p in tmp_path.glob("bench-*.json")}
    assert recorded == {f"bench-{n}" for n in benchmarks.SUITES} - {
        "bench-attention_lengths"
    }
    # one suite alone raises, as before
    with pytest.raises(RuntimeError, match="breaks on this device"):
        benchmarks.main(["attention_lengths", "--device", "cpu"])


def test_a_smoke_run_is_tiny_marked_and_never_recorded_into_the_package(
    tmp_path, capsys
):
    with pytest.raises(SystemExit):
        benchmarks.main(["rope", "--device", "cpu", "--smoke", "--record"])
    assert "--smoke records only into --out DIR" in capsys.readouterr().err
    argv = ["rope", "--device", "cpu", "--smoke", "--record", "--out", str(tmp_path)]
    assert benchmarks.main(argv) == 0
    assert "smoke run (--smoke)" in capsys.readouterr().out
    (path,) = tmp_path.glob("bench-rope--*.json")
    document = json.loads(path.read_text())
    assert document["settings"]["smoke"] is True
    assert document["command"].endswith("--smoke")
    assert document["settings"]["shape"] == list(
        benchmarks.SUITES["rope"].smoke["shape"]
    )
    assert all(len(r["times_ms"]) == 1 for r in document["results"])
    # every suite has its tiny sizes
    assert all(suite.smoke for suite in benchmarks.SUITES.values())


def test_copy_regimes_are_found_where_the_bandwidth_drops():
    from pe_tutorial.benchmarks.copies import copy_regimes, memory_ceiling

    def copy(nbytes, gb_s):
        ms = nbytes / (gb_s * 1e9) * 1e3
        return bench.Timing(f"copy {nbytes}", [ms], bytes_moved=nbytes, is_copy=True)

    # a small copy's fixed cost, a cache plateau, then memory from 128 MiB on
    sizes = {
        2**18: 70.0,
        2**20: 137.0,
        2**23: 58.0,
        2**27: 27.8,
        2**28: 26.0,
        2**30: 26.9,
    }
    result = benchmarks.SuiteResult(
        "copy_sizes", {"device": "cpu"}, [copy(n, b) for n, b in sizes.items()]
    )
    regimes = copy_regimes(result)
    assert regimes["memory_from_bytes"] == 2**27
    assert regimes["memory_gb_s"] == pytest.approx(26.9)
    assert regimes["cache_gb_s"] == pytest.approx(137.0)
    # where every size is as slow as memory, memory starts at the smallest
    flat = benchmarks.SuiteResult(
        "copy_sizes", {"device": "cpu"}, [copy(n, 20.0) for n in (2**20, 2**24)]
    )
    assert copy_regimes(flat)["memory_from_bytes"] == 2**20
    with pytest.raises(ValueError, match="two sizes or more"):
        copy_regimes(benchmarks.SuiteResult("copy_sizes", {}, [copy(2**20, 1.0)]))
    # the one memory ceiling: the median of the copies of at least 4 times the
    # largest that ran from cache (8 MiB here): 2**27 is too close to the edge
    ceiling = memory_ceiling(result)
    assert ceiling["cache_edge_bytes"] == 2**23 and ceiling["from_bytes"] == 2**25
    assert ceiling["gb_s"] == pytest.approx(26.9) and ceiling["sizes"] == 4 - 1
    sizes_past = {2**20: 100.0, 2**23: 90.0, 2**25: 30.0, 2**26: 20.0, 2**27: 22.0}
    past = benchmarks.SuiteResult(
        "copy_sizes", {}, [copy(n, b) for n, b in sizes_past.items()]
    )
    # memory from 32 MiB (within 25% of the largest); edge 8 MiB: 32, 64, 128 MiB
    assert memory_ceiling(past)["gb_s"] == pytest.approx(22.0)
    short = benchmarks.SuiteResult(
        "copy_sizes", {}, [copy(2**20, 100.0), copy(2**23, 90.0), copy(2**24, 20.0)]
    )
    with pytest.raises(ValueError, match="4 times the largest that ran from cache"):
        memory_ceiling(short)


def test_the_busy_probe_copies_in_the_memory_regime_of_the_quoted_machine():
    """The probe must see memory contention, so it is at least 4 times the largest
    copy that still ran from cache in the recorded run the book quotes."""
    from pe_tutorial.benchmarks.copies import memory_ceiling

    ceiling = memory_ceiling(benchmarks.quoted("copy_sizes"))
    assert bench.PROBE_BYTES >= ceiling["from_bytes"]


def test_the_train_step_suite_times_chapter_9s_quick_model():
    """The suite keeps its own copy of the quick preset's model (it may not import the
    experiments, which sit on its floor); the two must not drift apart."""
    from pe_tutorial.benchmarks.train_step import QUICK_MODEL
    from pe_tutorial.experiments import PRESETS

    assert QUICK_MODEL == PRESETS["quick"].model


def test_the_roofline_ceilings_follow_their_closed_forms():
    """2 n^3 flop over the product's time; bytes/s from the machine's memory ceiling
    when given (else the product's own copy); the ridge is their ratio."""
    from pe_tutorial.benchmarks.roofline import ceilings, matmul_flops

    n = 1024
    nbytes = 3 * n * n * 4
    product = bench.Timing("product", [4.0], bytes_moved=nbytes, copy_ms=2.0)
    result = benchmarks.SuiteResult(
        "roofline", {"device": "cpu"}, [product], settings={"flop": matmul_flops(n)}
    )
    own = ceilings(result)
    assert own["flop_per_s"] == pytest.approx(2 * n**3 / 4e-3)
    assert own["bytes_per_s"] == pytest.approx(nbytes / 2e-3)
    ceiling = ceilings(result, memory_gb_s=25.0)
    assert ceiling["bytes_per_s"] == pytest.approx(25e9)
    assert ceiling["ridge"] == pytest.approx(2 * n**3 / 4e-3 / 25e9)


def _ten_times_faster(t: bench.Timing) -> bench.Timing:
    def tenth(times):
        return None if times is None else [x / 10 for x in times]

    return dataclasses.replace(
        t,
        times_ms=tenth(t.times_ms),
        process_medians_ms=tenth(t.process_medians_ms),
        copy_ms=None if t.copy_ms is None else t.copy_ms / 10,
    )


def test_each_recorded_device_draws_its_own_roof(tmp_path):
    """A GPU's recorded roofline, copies and rope runs give a roof of their own
    beside the quoted CPU's (chapter 10's figure), each from its own files; the
    RoPE point's bytes and flop follow the closed form."""
    from pe_tutorial.benchmarks.roofline import recorded_roofs, rope_bytes_and_flops

    for suite in ("roofline", "copy_sizes", "rope"):
        cpu = benchmarks.quoted(suite)
        benchmarks.record(cpu, tmp_path)
        gpu = dataclasses.replace(
            cpu,
            environment={"device": "cuda:0", "device_name": "NVIDIA Test GPU"},
            timings=[_ten_times_faster(t) for t in cpu.timings],
        )
        benchmarks.record(gpu, tmp_path)
    cpu_roof, gpu_roof = recorded_roofs(tmp_path)
    assert cpu_roof["quoted"] and not gpu_roof["quoted"]
    assert gpu_roof["device"] == "cuda-nvidia-test-gpu"
    assert gpu_roof["flop_per_s"] == pytest.approx(10 * cpu_roof["flop_per_s"])
    assert gpu_roof["bytes_per_s"] == pytest.approx(10 * cpu_roof["bytes_per_s"])
    assert gpu_roof["rope"]["flop_per_s"] == pytest.approx(
        10 * cpu_roof["rope"]["flop_per_s"]
    )
    # a device whose own RoPE rows are all noisy draws its roof without a point
    noisy = benchmarks.load_recorded_runs("rope", tmp_path)[0]
    for t in noisy.timings:
        t.times_ms = [1.0, 1.0, 5.0, 9.0]
    benchmarks.record(noisy, tmp_path)
    assert recorded_roofs(tmp_path)[1]["rope"] is None
    # q, k of (1, 1, 2, 4) in float32: 4 * 8 elements * 4 bytes + 2 * 2 * 2 * 4
    assert rope_bytes_and_flops((1, 1, 2, 4), 4) == (4 * 8 * 4 + 2 * 2 * 2 * 4, 48)


def _process_run(times, calls=1, copy_times=(1.0,)):
    rows = [
        bench.Timing(
            "rope", list(times), bytes_moved=64, allocates=True, calls_per_sample=calls
        ),
        bench.Timing(
            "clone",
            list(copy_times),
            bytes_moved=64,
            is_copy=True,
            allocates=True,
            calls_per_sample=calls,
        ),
    ]
    return benchmarks.SuiteResult(
        "integer_tables",
        {"device": "cpu", "copy_probe_ms": {"before": 1.0, "after": 1.1}},
        rows,
        notes=["a note"],
    )


def test_runs_in_separate_processes_merge_with_their_spread():
    from pe_tutorial.benchmarks._core import merge_runs

    merged = merge_runs(
        [_process_run([1.0, 1.2]), _process_run([2.0, 2.2]), _process_run([1.4, 1.6])]
    )
    rope = merged.timing("rope")
    assert rope.times_ms == [1.0, 1.2, 2.0, 2.2, 1.4, 1.6]
    assert rope.process_medians_ms == pytest.approx([1.1, 2.1, 1.5])
    # range of the medians (2.1 - 1.1) over the median of all six (1.5)
    assert rope.process_spread == pytest.approx(1.0 / 1.5)
    assert rope.copy_ms == merged.timing("clone").median_ms == 1.0
    assert merged.environment["processes"] == 3
    assert "runs %" in merged.table() and "3 separate processes" in merged.table()
    with pytest.raises(ValueError, match="sampled unlike"):
        merge_runs([_process_run([1.0]), _process_run([1.0], calls=4)])
    other = _process_run([1.0])
    other.timings[0].name = "other"
    with pytest.raises(ValueError, match="different rows"):
        merge_runs([_process_run([1.0]), other])


def test_a_recording_in_processes_merges_them(tmp_path, monkeypatch):
    """--record --processes 2 runs the suite twice in fresh processes and records
    one file whose rows hold both processes' medians."""
    argv = ["integer_tables", "--device", "cpu", "--record", "--out", str(tmp_path)]
    with pytest.raises(SystemExit):
        benchmarks.main(["integer_tables", "--processes", "2"])  # needs --record
    # short samples (--max-seconds): noisy rows beside the other tests would otherwise
    # sample for up to a minute in each process, and this tests the merging
    options = ["--repeats", "2", "--processes", "2", "--force", "--max-seconds", "2"]
    assert benchmarks.main([*argv, *options]) == 0
    (path,) = tmp_path.glob("bench-integer_tables--*.json")
    result = benchmarks.SuiteResult.from_dict(json.loads(path.read_text()))
    assert result.environment["processes"] == 2
    assert all(len(t.process_medians_ms) == 2 for t in result.timings)
    assert result.command.endswith("--processes 2")


def test_merging_redoes_the_report_once_even_when_it_measures(monkeypatch):
    """A report that measures (the profile) gives other lines each time: merging
    drops what the first run's report wrote, by count, and reports once."""
    from pe_tutorial.benchmarks import _core

    calls = []

    def measuring_report(result):
        calls.append(1)
        return [f"profile number {len(calls)}"]

    suite = _core.SUITES["integer_tables"]
    monkeypatch.setitem(
        _core.SUITES,
        "integer_tables",
        dataclasses.replace(suite, report=measuring_report),
    )
    runs = []
    for times in ([1.0], [2.0]):
        run = _process_run(times)
        run.notes.append(f"profile of its own process {len(runs)}")
        run.report_notes = 1
        runs.append(run)
    merged = _core.merge_runs(runs)
    assert merged.notes[0] == "a note" and merged.notes[-1] == "profile number 1"
    assert not any("of its own process" in note for note in merged.notes)
    assert merged.report_notes == 1 and len(calls) == 1
    again = benchmarks.SuiteResult.from_dict(merged.to_dict())
    assert again.report_notes == 1


def test_each_peer_gets_the_layout_its_library_expects_and_says_so():
    from pe_tutorial.benchmarks import peers
    from pe_tutorial.benchmarks.rope import writes_into_given

    q = torch.randn(1, 2, 8, 16)
    hf = peers._hugging_face_layout(q)
    # the same values, a (B, H, T, D) view of a tensor stored (B, T, H, D)
    assert torch.equal(hf, q) and not hf.is_contiguous()
    assert hf.transpose(1, 2).is_contiguous()
    assert writes_into_given("Liger liger_rotary_pos_emb")
    assert not writes_into_given("transformers apply_rotary_pos_emb")
    result = benchmarks.run(
        "rope", "cpu", warmup=0, repeats=1, shape=(1, 2, 8, 16), compiled=False
    )
    rows = {t.name: t for t in result.timings}
    row = rows["transformers apply_rotary_pos_emb"]
    assert row.shapes["layout"] == peers.HF_LAYOUT and row.allocates
    assert rows["rotary-embedding-torch"].shapes["layout"] == "q, k (B, H, T, D)"
    # the table names each peer's layout under its row
    assert peers.HF_LAYOUT in result.table()


def test_a_recording_says_what_ran_beside_it(tmp_path):
    argv = ["integer_tables", "--device", "cpu", "--record", "--out", str(tmp_path)]
    argv += ["--repeats", "2", "--max-seconds", "1", "--force"]
    assert benchmarks.main(argv + ["--beside", "a training run on both cores"]) == 0
    (path,) = tmp_path.glob("bench-integer_tables--*.json")
    run = benchmarks.SuiteResult.from_dict(json.loads(path.read_text()))
    assert run.environment["ran_beside"] == "a training run on both cores"
    assert "ran beside it: a training run on both cores" in run.table()
    with pytest.raises(SystemExit):  # said of a recording only
        benchmarks.main(["integer_tables", "--device", "cpu", "--beside", "nothing"])


def test_the_mrope_suite_rotates_text_an_image_and_text():
    """Chapter 13's suite: the same queries through RoPE and through M-RoPE at the
    ids of T/4 text tokens, an image of T/2 patches and T/4 text tokens; before
    the image M-RoPE's ids are RoPE's positions (the rows agree), under the
    image they are not."""
    from pe_tutorial.benchmarks.long_context import mrope_rotation

    plan = mrope_rotation(torch.device("cpu"), torch.float32, tokens=128)
    assert plan.settings == {"tokens": 128, "heads": 8, "head_dim": 128}
    rope_case, mrope_case = plan.cases
    assert mrope_case.shapes["ids"] == [3, 128]
    rope, mrope = rope_case.fn(), mrope_case.fn()
    assert torch.allclose(mrope[:, :32], rope[:, :32], atol=1e-5)
    assert not torch.allclose(mrope[:, 33:96], rope[:, 33:96], atol=1e-3)
    with pytest.raises(ValueError, match="multiple of 64"):
        mrope_rotation(torch.device("cpu"), torch.float32, tokens=100)
