"""The decode, forward + backward and memory measurements of chapter 10 (issue 36).

The suites ``rope_decode``, ``rope_backward`` and ``attention_backward`` at tiny
sizes: what they time, that every row is checked against an independent
reference (a seeded bug stops the suite, naming the row), that their results
round-trip through JSON; ``memory.peak_memory`` against allocations of known
size; compile times marked cold or warm; ``fused_rope.apply_rope_qk_to_cache``
against a loop over the sequences.
"""

from __future__ import annotations

import json

import pytest
import torch

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks import _core, backward, decode, suites
from pe_tutorial.benchmarks import timing as bench
from pe_tutorial.encodings import fused_rope
from pe_tutorial.encodings.rope import apply_rope
from pe_tutorial.memory import PEAK_METHOD, peak_memory

NEW_SUITES = ("rope_decode", "rope_backward", "attention_backward")
MiB = 2**20


@pytest.fixture(autouse=True)
def steady_copy_probe(monkeypatch):
    """The busy-machine probe reads a steady copy (tests run beside each other)."""
    monkeypatch.setattr(bench, "copy_probe", lambda device, **options: 1.0)


def smoke_run(name, **options):
    suite = benchmarks.SUITES[name]
    return benchmarks.run(
        name, "cpu", warmup=0, repeats=2, **{**suite.smoke, **options}
    )


# ---------------------------------------------------------------------------
# registered, listed, runnable from the command line
# ---------------------------------------------------------------------------


def test_the_new_suites_are_registered_listed_and_small_when_smoked(capsys):
    for name in NEW_SUITES:
        suite = benchmarks.SUITES[name]
        assert suite.chapter == "10" and suite.smoke and len(suite.why) < 88
        # a smoke run never compiles: compiling on a CPU takes seconds
        assert suite.smoke["compiled"] is False
    with pytest.raises(SystemExit) as exit_info:
        benchmarks.main(["--help"])
    assert exit_info.value.code == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in NEW_SUITES)


@pytest.mark.parametrize("name", NEW_SUITES)
def test_each_new_suite_smokes_from_the_command_line(name, capsys):
    assert benchmarks.main([name, "--device", "cpu", "--smoke"]) == 0
    printed = capsys.readouterr().out
    assert "smoke run (--smoke)" in printed and "peak MiB" in printed
    assert "disagrees" not in printed


@pytest.mark.parametrize("name", NEW_SUITES)
def test_new_results_round_trip_through_json_and_records(name, tmp_path):
    result = smoke_run(name)
    document = json.loads(json.dumps(result.to_dict()))
    again = benchmarks.SuiteResult.from_dict(document)
    assert again.to_dict() == document
    assert again.table() == result.table()
    rows = [t for t in again.timings if not t.is_copy]
    assert rows and all(t.peak_bytes is not None for t in rows)
    benchmarks.record(result, tmp_path)
    assert benchmarks.load_recorded(name, tmp_path).to_dict() == document


# ---------------------------------------------------------------------------
# rope_decode
# ---------------------------------------------------------------------------


def test_rope_decode_times_each_path_against_a_copy_of_its_bytes():
    result = smoke_run("rope_decode")
    names = [t.name for t in result.timings if not t.is_copy]
    assert names == [
        "apply_rope on q, then on k",
        decode.ROTATION,
        decode.TWO_STEPS,
        decode.ONE_CALL,
    ]
    # q, k (4, 2, 1, 16) float32 read and written, and 4 int64 offsets read
    assert {t.bytes_moved for t in result.timings} == {2 * 2 * 4 * 2 * 16 * 4 + 4 * 8}
    settings = result.settings
    assert len(settings["offsets"]) == 4 and max(settings["offsets"]) < 8
    assert len(set(settings["offsets"])) > 1  # the sequences' lengths differ
    notes = "\n".join(result.notes)
    assert "Triton kernel: skipped, it runs on CUDA GPUs" in notes
    assert f"{decode.GRAPHED}: skipped, CUDA graphs need a CUDA GPU" in notes
    assert f"{decode.TWO_STEPS}: " in notes and "the time of" in notes
    # q_rot and k_rot, 256 bytes each, are the least any row holds
    assert all(t.peak_bytes >= 512 for t in result.timings if not t.is_copy)


def _bad_angles(monkeypatch, shift=1):
    """A seeded bug: the decode rotation uses each sequence's offset plus ``shift``."""
    real = fused_rope.angles_cos_sin

    def shifted(positions, rotary_dim, base):
        return real(positions + shift, rotary_dim, base)

    monkeypatch.setattr(fused_rope, "angles_cos_sin", shifted)


def test_a_wrong_offset_in_the_decode_rotation_stops_the_suite(monkeypatch):
    _bad_angles(monkeypatch)
    with pytest.raises(
        benchmarks.WrongResult,
        match="one call: apply_rope_qk_to_cache: its rotated q disagrees with "
        "apply_rope at each sequence's own offset",
    ):
        smoke_run("rope_decode")


def test_a_key_written_into_the_wrong_cache_row_stops_the_suite(monkeypatch):
    def one_row_late(k_cache, k_rot, positions):
        batch = torch.arange(k_rot.shape[0])[:, None]
        rows = (positions + 1) % k_cache.shape[2]
        k_cache.transpose(1, 2)[batch, rows] = k_rot.transpose(1, 2)

    monkeypatch.setattr(fused_rope, "_write_rows", one_row_late)
    with pytest.raises(
        benchmarks.WrongResult,
        match="one call: apply_rope_qk_to_cache: its KV cache after the write",
    ):
        smoke_run("rope_decode")


def test_the_decode_report_pairs_rows_doing_the_same_work():
    rows = {
        "apply_rope on q, then on k": [3.0, 3.0, 3.0, 3.0],
        decode.ROTATION: [2.0, 2.0, 2.0, 2.0],
        decode.TWO_STEPS: [4.0, 4.0, 4.2, 4.2],
        decode.ONE_CALL: [4.0, 4.1, 4.1, 4.2],
        decode.GRAPHED: [1.0, 1.0, 3.0, 3.0],  # its calls disagree: marked noisy
    }
    result = benchmarks.SuiteResult(
        "rope_decode",
        {"device": "cpu"},
        [bench.Timing(name, times) for name, times in rows.items()],
    )
    lines = decode.report(result)
    assert lines == [
        f"apply_rope on q, then on k: 1.50x the time of {decode.ROTATION}",
        f"{decode.TWO_STEPS}: 1.00x the time of {decode.ONE_CALL} (within noise)",
        f"{decode.ONE_CALL}: 2.05x the time of {decode.GRAPHED} (the ratio is "
        "noisy: not a finding)",
    ]
    # timed in the same rounds, the pair is weighed by its per-round ratios: the
    # graphed row's drift (1 ms, then 3 ms) is shared by the row it meets
    paired = {
        decode.ONE_CALL: [2.0, 2.1, 6.0, 6.3],
        decode.GRAPHED: [1.0, 1.0, 3.0, 3.0],
    }
    result = benchmarks.SuiteResult(
        "rope_decode",
        {"device": "cpu"},
        [bench.Timing(name, times, rounds="1-0") for name, times in paired.items()],
    )
    assert decode.report(result) == [
        f"{decode.ONE_CALL}: 2.05x the time of {decode.GRAPHED}"
    ]


# ---------------------------------------------------------------------------
# rope_backward and attention_backward
# ---------------------------------------------------------------------------


def test_rope_backward_checks_gradients_and_counts_both_passes():
    result = smoke_run("rope_backward")
    names = [t.name for t in result.timings if not t.is_copy]
    assert names == ["apply_rope on q, then on k", "fused: q and k, cos/sin once"]
    assert any(n.startswith("Triton kernel: left out") for n in result.notes)
    # q, k (1, 2, 8, 16) float32: read, written, gradient read, gradient written;
    # cos and sin (8 x 8 each) read forward and backward
    assert {t.bytes_moved for t in result.timings} == {4 * 2 * 256 * 4 + 2 * 8 * 16 * 4}


def test_the_float64_reference_is_the_transposed_rotation():
    g = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    x = torch.randn(1, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    # <R x, g> = <x, R^T g>: the reference's two halves are each other's adjoint
    forward = backward.rope_forward_reference(x, 100.0)
    (grad,) = torch.autograd.grad(forward, x, g)
    torch.testing.assert_close(grad, backward.rope_transpose_reference(g, 100.0))
    # the package turns by float32 angles, the reference by float64 ones
    torch.testing.assert_close(
        forward, apply_rope(x.detach(), base=100.0), rtol=1e-5, atol=1e-5
    )


def test_a_backward_that_rotates_the_gradient_the_wrong_way_stops_the_suite(
    monkeypatch,
):
    class RotatesForward(torch.autograd.Function):
        """The forward of RoPE, with a backward that turns g by +m, not -m."""

        @staticmethod
        def forward(ctx, x):
            return apply_rope(x)

        @staticmethod
        def backward(ctx, g):
            return apply_rope(g)

    monkeypatch.setattr(
        backward, "apply_rope", lambda x, base=10000.0: RotatesForward.apply(x)
    )
    with pytest.raises(
        benchmarks.WrongResult,
        match="apply_rope on q, then on k: its dq disagrees with the float64 reference",
    ):
        smoke_run("rope_backward")


def test_attention_backward_differentiates_t5s_table_and_skips_cpu_flex():
    result = smoke_run("attention_backward")
    names = [t.name for t in result.timings]
    assert names == [
        "SDPA, causal mask only",
        "SDPA + materialised ALiBi",
        "SDPA + materialised T5",
    ]
    assert result.reference == "SDPA, causal mask only" and "x ref" in result.table()
    notes = "\n".join(result.notes)
    assert "Flex eager, ALiBi: skipped, FlexAttention does not support backward" in (
        notes
    )
    assert "ALiBi in SDPA, forward + backward: " in notes
    # the T5 row returns the output, dq, dk, dv and the bias table's gradient
    t5 = benchmarks.SUITES["attention_backward"].build(
        torch.device("cpu"), torch.float32, shape=(1, 2, 8, 4), compiled=False
    )
    outputs = next(c for c in t5.cases if c.name.endswith("T5")).fn()
    assert len(outputs) == 5 and outputs[-1].shape[-1] == 2  # (buckets, heads)


def test_a_backward_that_drops_half_of_dv_stops_the_suite(monkeypatch):
    real = backward.attend

    class HalvesTheGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            return g / 2

    def alibi_halves_dv(q, k, v, scheme=None, **options):
        if options.get("kernel") == "sdpa" and isinstance(scheme, backward.ALiBiScheme):
            v = HalvesTheGradient.apply(v)
        return real(q, k, v, scheme, **options)

    monkeypatch.setattr(backward, "attend", alibi_halves_dv)
    with pytest.raises(
        benchmarks.WrongResult,
        match="SDPA \\+ materialised ALiBi: its dv disagrees with the float64",
    ):
        smoke_run("attention_backward")


# ---------------------------------------------------------------------------
# peak memory
# ---------------------------------------------------------------------------


def test_peak_memory_counts_what_a_call_holds_at_once(capfd):
    def one_then_two_twice():
        a = torch.empty(MiB // 4)  # 1 MiB, freed before the rest
        del a
        b = torch.empty(MiB // 2)  # 2 MiB
        return b * 2  # 2 MiB more, while b is alive

    assert peak_memory(one_then_two_twice, "cpu") == pytest.approx(4 * MiB, abs=1024)
    x = torch.zeros(MiB // 4)
    assert peak_memory(lambda: x.mul_(2), "cpu") < 1024  # in place: nothing
    assert peak_memory(lambda: None, "cpu") == 0
    kept = [torch.zeros(MiB // 4)]
    # freeing what was there before the call does not lower its peak below zero
    assert peak_memory(kept.clear, "cpu") == 0
    # the profiler's own lines on stderr are dropped
    assert "profiler_start" not in capfd.readouterr().err


def test_peak_memory_on_a_gpu_reads_the_allocators_peak(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 100)
    monkeypatch.setattr(
        torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append(1)
    )
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 350)
    assert peak_memory(lambda: None, "cuda") == 250 and calls == [1]
    with pytest.raises(ValueError, match="measures on 'cpu' or 'cuda'"):
        peak_memory(lambda: None, "meta")


def test_the_table_shows_peak_memory_in_mib_and_says_how_it_was_measured():
    rows = [
        bench.Timing("alloc", [1.0], peak_bytes=3 * MiB // 2),
        bench.Timing("unmeasured", [1.0]),
    ]
    for device, method in (("cpu", "torch.profiler"), ("cuda:0", "max_memory")):
        text = bench.format_table(rows, environment={"device": device})
        lines = {line.split()[0]: line for line in text.splitlines() if line}
        assert lines["what"].split()[-2:] == ["peak", "MiB"]
        assert lines["alloc"].split()[-1] == "1.50"
        assert lines["unmeasured"].split()[-1] != "1.50"  # left empty
        words = " ".join(text.split())
        assert method in PEAK_METHOD[device[:4]] and method in words
        assert "above what was allocated before it, outputs included" in words
        assert max(len(line) for line in text.splitlines()) <= 88
    assert "peak MiB" not in bench.format_table([bench.Timing("x", [1.0])])


def test_rope_and_attention_bias_rows_carry_their_peak_memory():
    rope = benchmarks.run(
        "rope", "cpu", warmup=0, repeats=1, shape=(1, 2, 8, 16), compiled=False
    )
    peaks = {t.name: t.peak_bytes for t in rope.timings if not t.is_copy}
    assert all(p is not None for p in peaks.values())
    # new outputs hold q and k's 1 KiB each; out= and in place hold next to nothing
    assert peaks["fused: q and k, cos/sin once"] >= 2 * 1024
    assert peaks["fused, into given outputs (out=)"] < 1024
    assert "peak MiB" in rope.table()
    bias = benchmarks.run(
        "attention_bias",
        "cpu",
        warmup=0,
        repeats=1,
        shape=(1, 2, 16, 8),
        compiled=False,
    )
    assert all(t.peak_bytes is not None for t in bias.timings)


# ---------------------------------------------------------------------------
# compile times, cold or warm
# ---------------------------------------------------------------------------


def test_compile_times_say_cold_or_warm(monkeypatch):
    counts = iter([(1, 0, 1), (3, 1, 1), (3, 1, 1)])
    monkeypatch.setattr(suites, "compile_counts", lambda: next(counts))
    cold = _core.compile_note("compiled, new outputs", 4.44, (0, 0, 0))
    assert cold == (
        "compiled, new outputs: compiling took 4.4 s (cold: the first compile in "
        "this process; 1 built afresh), not in its row"
    )
    warm = _core.compile_note("Flex", 0.2, (1, 0, 1))
    assert "(warm: 1 graph(s) compiled before it in this process; 1 loaded from " in (
        warm
    )
    again = _core.compile_note("Flex", 0.01, (3, 1, 1))
    assert "already compiled in this process: no graph built" in again
    # the real counters are numbers, and exist before anything has compiled
    monkeypatch.undo()
    assert all(isinstance(n, int) for n in _core.compile_counts())


# ---------------------------------------------------------------------------
# fused_rope.apply_rope_qk_to_cache
# ---------------------------------------------------------------------------


def _decode_inputs(batch=3, heads=4, kv_heads=2, new=1, head_dim=8, max_len=10, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, new, head_dim, generator=generator)
    k = torch.randn(batch, kv_heads, new, head_dim, generator=generator)
    cache = torch.randn(batch, kv_heads, max_len, head_dim, generator=generator)
    offsets = torch.tensor([0, 5, max_len - new])[:batch]
    return q, k, cache, offsets


def _loop_reference(q, k, cache, offsets, **options):
    """Each sequence alone: apply_rope at its own positions, its rows set one by one."""
    cache = cache.clone()
    rotated_q = []
    for b, offset in enumerate(offsets.tolist()):
        positions = torch.arange(q.shape[2]) + offset
        rotated_q.append(apply_rope(q[b], positions, **options))
        rotated_k = apply_rope(k[b], positions, **options)
        for t, position in enumerate(positions.tolist()):
            cache[b, :, position] = rotated_k[:, t]
    return torch.stack(rotated_q), cache


@pytest.mark.parametrize(
    "options",
    [{}, {"pairing": "interleaved"}, {"rotary_dim": 6}, {"base": 500.0}],
    ids=["half", "interleaved", "partial", "base"],
)
@pytest.mark.parametrize("new", [1, 2])
def test_the_cache_write_equals_a_loop_over_the_sequences(options, new):
    q, k, cache, offsets = _decode_inputs(new=new)
    want_q, want_cache = _loop_reference(q, k, cache, offsets, **options)
    with torch.no_grad():
        got_q, got_cache = fused_rope.apply_rope_qk_to_cache(
            q, k, cache, offsets, **options
        )
    assert got_cache is cache
    torch.testing.assert_close(got_q, want_q)
    # the new rows rotated, every other row exactly as it was
    torch.testing.assert_close(cache, want_cache, rtol=1e-6, atol=1e-6)


def test_the_cache_write_keeps_bfloat16_and_rejects_what_does_not_fit():
    q, k, cache, offsets = _decode_inputs()
    q16, k16, cache16 = (t.bfloat16() for t in (q, k, cache))
    want_q, want_cache = _loop_reference(q16, k16, cache16, offsets)
    with torch.no_grad():
        got_q, _ = fused_rope.apply_rope_qk_to_cache(q16, k16, cache16, offsets)
    assert got_q.dtype == torch.bfloat16
    torch.testing.assert_close(got_q, want_q)
    torch.testing.assert_close(cache16, want_cache)
    write = fused_rope.apply_rope_qk_to_cache
    with torch.no_grad():
        with pytest.raises(ValueError, match="every offset must lie in 0 .. "):
            write(q, k, cache, torch.tensor([0, 5, 10]))
        with pytest.raises(ValueError, match="every offset must lie in 0 .. "):
            write(q, k, cache, torch.tensor([-1, 5, 9]))
        with pytest.raises(ValueError, match="one integer per sequence"):
            write(q, k, cache, torch.tensor([0, 5]))
        with pytest.raises(ValueError, match="offsets must be an integer tensor"):
            write(q, k, cache, torch.tensor([0.0, 5.0, 9.0]))
        with pytest.raises(ValueError, match="k_cache must be \\(batch, kv_heads"):
            write(q, k, cache[:, :1], offsets)
        with pytest.raises(ValueError, match="must share batch, seq"):
            write(q[:2], k, cache, offsets)
        with pytest.raises(ValueError, match="shares memory with q or k"):
            write(q, cache[:, :, :1], cache, offsets)
    with pytest.raises(ValueError, match="under torch.no_grad"):
        write(q.requires_grad_(), k, cache, offsets)


# torch's own modules warn while compiling
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch")
def test_the_compiled_cache_write_equals_the_loop():
    q, k, cache, offsets = _decode_inputs(new=2, seed=1)
    want_q, want_cache = _loop_reference(q, k, cache, offsets, rotary_dim=6)
    with torch.no_grad():
        got_q, got_cache = fused_rope.compiled_apply_rope_qk_to_cache(
            q, k, cache, offsets, rotary_dim=6
        )
    assert got_cache is cache
    torch.testing.assert_close(got_q, want_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cache, want_cache, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "suite", ["alibi_attention", "relative_attention", "attention_bias"]
)
def test_attention_suites_record_which_sdpa_kernel_ran(suite):
    result = smoke_run(suite)
    kernels = result.settings["sdpa_kernel"]
    assert set(kernels) == {"causal, no bias", "float bias"}
    assert all(kernel for kernel in kernels.values())
    assert any(
        note.startswith("SDPA's kernel (torch's choice") for note in result.notes
    )


def test_the_backward_suite_records_that_a_learned_bias_leaves_sdpa_unfused():
    # on the CPU, SDPA's fused kernel gives no gradient for a mask (chapter 10)
    result = smoke_run("attention_backward")
    assert result.settings["sdpa_kernel"]["float bias"] == "MATH"
