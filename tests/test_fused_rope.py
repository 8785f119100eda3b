"""Tests for pe_tutorial.encodings.fused_rope: q and k rotated together, as apply_rope does."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rope import naive_rope

from pe_tutorial.encodings import fused_rope, rope_core
from pe_tutorial.encodings.fused_rope import (
    apply_rope_qk,
    compile_rope_qk,
    compiled_apply_rope_qk,
    rope_cos_sin,
)
from pe_tutorial.encodings.rope import RotaryEmbedding, apply_rope, rope_frequencies

PAIRINGS = ["half", "interleaved"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def expected(q, k, positions, **options):
    return apply_rope(q, positions, **options), apply_rope(k, positions, **options)


def positions_of(kind: str, batch: int, seq: int, offset: int = 0):
    if kind == "default":
        return None
    if kind == "offset":  # decoding after `offset` cached tokens
        return torch.arange(seq) + offset
    # per-row positions (left padding): (batch, 1, seq)
    rows = [torch.clamp(torch.arange(seq) - pad, min=0) for pad in range(batch)]
    return torch.stack(rows)[:, None, :] + offset


def max_allocation(fn) -> int:
    """The most CPU memory one op (with its children) allocates while ``fn`` runs."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        fn()
    return max((e.cpu_memory_usage for e in prof.events()), default=0)


# ---------------------------------------------------------------------------
# rope_cos_sin
# ---------------------------------------------------------------------------


def test_cos_sin_are_float32_cos_and_sin_of_the_angles():
    positions = torch.tensor([[0, 1, 7], [100, 4096, 30000]])
    cos, sin = rope_cos_sin(positions, 8, base=10000.0)
    assert cos.dtype == sin.dtype == torch.float32
    assert cos.shape == sin.shape == (2, 3, 4)
    # float64 reference angles m * base^(-2i/R)
    theta = torch.tensor(
        [10000.0 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64
    )
    angles = positions.double()[..., None] * theta
    # float32 angles are off by about |m| 2^-24 rad
    torch.testing.assert_close(cos.double(), angles.cos(), rtol=0, atol=5e-3)
    torch.testing.assert_close(sin.double(), angles.sin(), rtol=0, atol=5e-3)
    assert float((cos.double() ** 2 + sin.double() ** 2 - 1).abs().max()) < 1e-6


def test_cached_frequencies_are_not_the_returned_ones():
    # rope_frequencies hands out a fresh tensor; the cache behind apply_rope is kept
    x = randn(5, 8, seed=0)
    before = apply_rope(x, torch.arange(5) + 3)
    rope_frequencies(8).zero_()
    assert torch.equal(apply_rope(x, torch.arange(5) + 3), before)


def test_apply_rope_fast_path_equals_its_autograd_path():
    # without grad apply_rope writes with out= kernels, with grad out-of-place ops
    for pairing, rotary_dim in [("half", None), ("interleaved", 6)]:
        x = randn(2, 3, 7, 10, seed=1)
        fast = apply_rope(
            x, torch.arange(7) + 40, pairing=pairing, rotary_dim=rotary_dim
        )
        traced = apply_rope(
            x.clone().requires_grad_(),
            torch.arange(7) + 40,
            pairing=pairing,
            rotary_dim=rotary_dim,
        )
        assert traced.requires_grad
        assert torch.equal(traced.detach(), fast)


def test_apply_rope_under_vmap_and_func_grad():
    # torch.func transforms cannot run out= kernels: apply_rope goes out of place
    x = randn(3, 5, 8, seed=2)
    per_sample = torch.vmap(lambda t: apply_rope(t, pairing="interleaved"))(x)
    assert torch.equal(per_sample, apply_rope(x, pairing="interleaved"))
    # a rotation keeps the norm, so the gradient of |R x|^2 is 2x
    grad = torch.func.grad(lambda t: apply_rope(t, torch.arange(5) + 9).square().sum())(
        x
    )
    torch.testing.assert_close(grad, 2 * x, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# apply_rope_qk equals apply_rope on q and on k
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rotary_dim", [None, 6])
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_equals_apply_rope(pairing, rotary_dim, dtype, inplace):
    # grouped-query attention: k has fewer heads than q
    q, k = (
        randn(3, 4, 9, 10, seed=2, dtype=dtype),
        randn(3, 2, 9, 10, seed=3, dtype=dtype),
    )
    options = dict(pairing=pairing, rotary_dim=rotary_dim)
    for kind in ("default", "offset", "per_row"):
        positions = positions_of(kind, batch=3, seq=9, offset=1000)
        want_q, want_k = expected(q, k, positions, **options)
        q_in, k_in = q.clone(), k.clone()
        got_q, got_k = apply_rope_qk(q_in, k_in, positions, inplace=inplace, **options)
        assert got_q.dtype == got_k.dtype == dtype
        # the same float32 arithmetic as apply_rope, so bit for bit
        assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k), kind
        assert (got_q is q_in and got_k is k_in) == inplace
        if not inplace:
            assert torch.equal(q_in, q) and torch.equal(k_in, k)


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 3),
    heads=st.integers(1, 4),
    gqa=st.booleans(),
    seq=st.integers(1, 40),
    half_dim=st.integers(1, 12),
    rotary_half=st.integers(1, 12),
    pairing=st.sampled_from(PAIRINGS),
    offset=st.integers(-50, 100_000),
    kind=st.sampled_from(["offset", "per_row", "per_head", "one_position"]),
    inplace=st.booleans(),
    slab=st.sampled_from([16, 100, 1 << 16]),
    seed=st.integers(0, 2**16),
)
def test_equals_apply_rope_for_drawn_shapes(
    batch,
    heads,
    gqa,
    seq,
    half_dim,
    rotary_half,
    pairing,
    offset,
    kind,
    inplace,
    slab,
    seed,
):
    head_dim, rotary_dim = 2 * half_dim, 2 * min(rotary_half, half_dim)
    k_heads = 1 if gqa else heads
    q = randn(batch, heads, seq, head_dim, seed=seed)
    k = randn(batch, k_heads, seq, head_dim, seed=seed + 1)
    g = torch.Generator().manual_seed(seed)
    if kind == "per_head":  # (B, H, T), e.g. packed sequences
        positions = torch.randint(-10, 5000, (batch, k_heads, seq), generator=g)
    elif kind == "one_position":  # a 0-d tensor: every token at the same position
        positions = torch.tensor(offset)
    else:
        positions = positions_of(kind, batch, seq, offset)
    options = dict(pairing=pairing, rotary_dim=rotary_dim)
    want_q, want_k = expected(q, k, positions, **options)
    saved, fused_rope._SLAB = fused_rope._SLAB, slab  # in-place slabs of any size
    try:
        got_q, got_k = apply_rope_qk(q, k, positions, inplace=inplace, **options)
    finally:
        fused_rope._SLAB = saved
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


def test_cos_sin_once_for_both_and_for_every_layer():
    q, k = randn(2, 4, 6, 16, seed=4), randn(2, 4, 6, 16, seed=5)
    positions = torch.arange(6) + 17
    cos_sin = rope_cos_sin(positions, 16)
    want_q, want_k = expected(q, k, positions)
    for _ in range(2):  # two "layers" share the table
        got_q, got_k = apply_rope_qk(q, k, cos_sin=cos_sin)
        assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    # RotaryEmbedding's table gives the same angles
    module = RotaryEmbedding(16)
    got_q, _ = apply_rope_qk(q, k, cos_sin=module.cos_sin(positions))
    torch.testing.assert_close(got_q, want_q, rtol=1e-6, atol=1e-6)
    # a partial rotary table is (.., R/2) wide; float64 tables are cast to float32
    cos, sin = rope_cos_sin(positions, 8)
    got_q, _ = apply_rope_qk(q, k, cos_sin=(cos.double(), sin.double()), rotary_dim=8)
    assert torch.equal(got_q, apply_rope(q, positions, rotary_dim=8))


def test_matches_the_float64_loop_reference():
    # independent of apply_rope: test_rope's loop over tokens and pairs, in float64
    q, k = randn(1, 1, 7, 12, seed=6), randn(1, 1, 7, 12, seed=7)
    positions = [0, 1, 2, 5, 13, 100, 2047]
    for pairing in PAIRINGS:
        for inplace in (False, True):
            got_q, got_k = apply_rope_qk(
                q.clone(),
                k.clone(),
                torch.tensor(positions),
                pairing=pairing,
                rotary_dim=8,
                inplace=inplace,
            )
            for got, x in ((got_q, q), (got_k, k)):
                reference = naive_rope(
                    x[0, 0], positions, pairing=pairing, rotary_dim=8
                )
                torch.testing.assert_close(
                    got[0, 0].double(), reference, rtol=0, atol=1e-5 + 5e-7 * 2047
                )


def test_gradients_flow_out_of_place():
    q = randn(2, 2, 5, 8, seed=8).requires_grad_()
    k = randn(2, 2, 5, 8, seed=9).requires_grad_()
    got_q, got_k = apply_rope_qk(q, k, torch.arange(5) + 3)
    (got_q.square().sum() + (got_k * 2).sum()).backward()
    q2, k2 = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    want_q, want_k = expected(q2, k2, torch.arange(5) + 3)
    (want_q.square().sum() + (want_k * 2).sum()).backward()
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(k.grad, k2.grad)


# ---------------------------------------------------------------------------
# in place
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_inplace_writes_into_q_and_k_and_allocates_nothing_of_their_size(
    dtype, monkeypatch
):
    # small slabs, so that q spans many of them
    monkeypatch.setattr(fused_rope, "_SLAB", 1024)
    q, k = (
        randn(2, 4, 64, 32, seed=10, dtype=dtype),
        randn(2, 4, 64, 32, seed=11, dtype=dtype),
    )
    want_q, want_k = expected(q, k, torch.arange(64) + 5)
    pointers = q.data_ptr(), k.data_ptr()
    cos_sin = rope_cos_sin(torch.arange(64) + 5, 32)
    largest = max_allocation(lambda: apply_rope_qk(q, k, cos_sin=cos_sin, inplace=True))
    assert (q.data_ptr(), k.data_ptr()) == pointers
    assert torch.equal(q, want_q) and torch.equal(k, want_k)
    # temporaries of one slab (float32 copies of its halves at most)
    assert 0 < largest <= 1024 * 4 < q.nbytes // 4
    # out of place allocates the results
    assert max_allocation(lambda: apply_rope_qk(q, k, cos_sin=cos_sin)) >= q.nbytes


@pytest.mark.parametrize("slab", [16, 100])
@pytest.mark.parametrize("batch", [1, 2])
def test_inplace_slabs_take_the_matching_rows_of_cos_and_sin(batch, slab, monkeypatch):
    # slabs split q and k along batch, heads and tokens; cos and sin must follow
    monkeypatch.setattr(fused_rope, "_SLAB", slab)
    q, k = randn(batch, 3, 11, 8, seed=30), randn(batch, 1, 11, 8, seed=31)
    g = torch.Generator().manual_seed(32)
    for positions in (
        torch.arange(11) + 7,  # (T,)
        torch.randint(0, 500, (batch, 1, 11), generator=g),  # per row
        torch.randint(0, 500, (1, 1, 11), generator=g),  # size-1 leading axes
        torch.randint(0, 500, (batch, 1, 1, 11), generator=g)[
            0
        ],  # (1, 1, T) or (2, 1, T)
        torch.tensor(123),  # one position for every token
    ):
        for pairing in PAIRINGS:
            want_q, want_k = expected(q, k, positions, pairing=pairing, rotary_dim=6)
            got_q, got_k = apply_rope_qk(
                q.clone(),
                k.clone(),
                positions,
                pairing=pairing,
                rotary_dim=6,
                inplace=True,
            )
            assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


def test_inplace_on_views_of_a_fused_qkv_projection():
    batch, seq, heads, head_dim = 2, 5, 3, 8
    qkv = randn(batch, seq, 3 * heads * head_dim, seed=12)
    # (B, T, 3 H D) -> three (B, H, T, D) views with strides, as attention layers do
    q, k, v = (
        t.view(batch, seq, heads, head_dim).transpose(1, 2)
        for t in qkv.split(heads * head_dim, dim=-1)
    )
    want_q, want_k = expected(q, k, None, pairing="interleaved")
    v_before = v.clone()
    got_q, got_k = apply_rope_qk(q, k, pairing="interleaved", inplace=True)
    assert got_q is q and got_k is k
    assert torch.equal(q, want_q) and torch.equal(k, want_k)
    assert torch.equal(v, v_before)
    # per-head layout (B, T, H, 3, D): q and k interleave in memory but do not meet
    packed = randn(batch, seq, heads, 3, head_dim, seed=13)
    q, k = packed[..., 0, :].transpose(1, 2), packed[..., 1, :].transpose(1, 2)
    want_q, want_k = expected(q, k, None)
    apply_rope_qk(q, k, inplace=True)
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


def test_overlap_check_is_exact_on_simple_layouts():
    overlap = rope_core.tensors_overlap
    base = torch.zeros(4, 6, 8)
    assert overlap(base, base)
    assert overlap(base[:, :3], base[:, 2:])  # rows 2 shared
    assert not overlap(base[:, :3], base[:, 3:])
    assert not overlap(base[..., 0::2], base[..., 1::2])  # even / odd channels
    assert overlap(base[..., 0::2], base[..., 2::4])
    assert not overlap(base, torch.zeros(4, 6, 8))  # other storage
    assert not overlap(base[0, :0], base[0])  # empty


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_bad_input_is_rejected_with_a_reason():
    q, k = randn(2, 3, 5, 8, seed=14), randn(2, 3, 5, 8, seed=15)
    cases = [
        (dict(q=q.long()), "q must be a floating-point tensor"),
        (dict(k=k.to(torch.int32)), "k must be a floating-point tensor"),
        (
            dict(q=torch.randn(8)),
            r"q must be a tensor of shape \(\.\.\., seq, head_dim\)",
        ),
        (dict(k=randn(2, 3, 5, 6, seed=0)), "same head_dim, got 8 and 6"),
        (dict(k=randn(2, 3, 4, 8, seed=0)), "same seq length, got 5 and 4"),
        (dict(q=torch.randn(3, 7), k=torch.randn(3, 7)), "head_dim must be even"),
        (dict(rotary_dim=3), "rotary_dim must be even"),
        (dict(rotary_dim=10), "larger than head_dim"),
        (dict(pairing="neox"), "pairing must be 'half'"),
        (dict(base=0.0), "base must be a positive"),
        (dict(positions=torch.arange(5.0)), "integer tensor"),
        (dict(positions=torch.arange(6)), r"do not broadcast to q's \(\.\.\., seq\)"),
        # per-head positions for q's 3 heads do not fit k's 1 head
        (
            dict(
                k=randn(2, 1, 5, 8, seed=0),
                positions=torch.zeros(3, 5, dtype=torch.long),
            ),
            "do not broadcast to k's",
        ),
        (
            dict(positions=torch.arange(5), cos_sin=rope_cos_sin(torch.arange(5), 8)),
            "positions or cos_sin, not both",
        ),
        (dict(cos_sin=rope_cos_sin(torch.arange(5), 4)), r"rotary_dim / 2 = 4"),
        (dict(cos_sin=rope_cos_sin(torch.arange(6), 8)), "do not broadcast to q's"),
        (dict(cos_sin=torch.zeros(5, 4)), "pair of tensors"),
        (dict(inplace="yes"), "inplace must be True or False"),
    ]
    for overrides, message in cases:
        arguments = dict(q=q, k=k) | overrides
        with pytest.raises(ValueError, match=message):
            apply_rope_qk(**arguments)


def test_inplace_refuses_aliasing_expanded_and_grad_tensors():
    q = randn(2, 3, 5, 8, seed=16)
    with pytest.raises(ValueError, match="q and k share memory"):
        apply_rope_qk(q, q, inplace=True)
    with pytest.raises(ValueError, match="q and k share memory"):
        apply_rope_qk(q[:, :2], q[:, 1:], inplace=True)  # head 1 in both
    expanded = randn(1, 1, 5, 8, seed=17).expand(2, 3, 5, 8)
    with pytest.raises(ValueError, match="q has elements that share memory"):
        apply_rope_qk(expanded, q, inplace=True)
    with pytest.raises(ValueError, match="use inplace=False when they require grad"):
        apply_rope_qk(q.clone().requires_grad_(), q.clone(), inplace=True)
    # out of place all of these are fine
    q_rot, k_rot = apply_rope_qk(q, q)
    assert torch.equal(q_rot, k_rot) and torch.equal(q_rot, apply_rope(q))


# ---------------------------------------------------------------------------
# compiled (one small compile)
# ---------------------------------------------------------------------------


# torch's own modules warn while compiling
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch")
def test_compiled_equals_eager_and_reports_its_compile_time():
    q, k = randn(2, 4, 8, 16, seed=18), randn(2, 2, 8, 16, seed=19)
    positions = torch.arange(8) + 300
    options = dict(pairing="half", rotary_dim=12)
    fn, seconds = compile_rope_qk(q, k, positions, **options)
    assert math.isfinite(seconds) and seconds > 0
    want_q, want_k = expected(q, k, positions, **options)
    got_q, got_k = fn(q, k, positions)
    torch.testing.assert_close(got_q, want_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_k, want_k, rtol=1e-6, atol=1e-6)
    # other values, same shapes: the compiled code runs again, from either entry
    q2, k2 = randn(2, 4, 8, 16, seed=20), randn(2, 2, 8, 16, seed=21)
    got_q, got_k = compiled_apply_rope_qk(
        q2, k2, cos_sin=rope_cos_sin(positions, 12), **options
    )
    want_q, want_k = expected(q2, k2, positions, **options)
    torch.testing.assert_close(got_q, want_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_k, want_k, rtol=1e-6, atol=1e-6)


def test_compiled_inplace_function_writes_the_rotation_into_q_and_k():
    # the function compiled for inplace=True, run eagerly (no second compile here)
    q, k = randn(2, 3, 6, 10, seed=22), randn(2, 3, 6, 10, seed=23)
    want_q, want_k = expected(q, k, None, pairing="interleaved", rotary_dim=6)
    cos, sin = rope_cos_sin(torch.arange(6), 6)
    got_q, got_k = fused_rope._rotate_qk_inplace(q, k, cos, sin, "interleaved", 6)
    assert got_q is q and got_k is k
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


def test_a_failed_compile_says_what_to_use_instead(monkeypatch):
    from torch._inductor.exc import InductorError

    def broken(q, k, cos, sin, pairing, rotary_dim):
        raise InductorError(RuntimeError("no C++ compiler"), None)

    monkeypatch.setattr(fused_rope, "_compiled", lambda inplace: broken)
    q = randn(1, 1, 4, 8, seed=24)
    with pytest.raises(RuntimeError, match="apply_rope_qk computes the same result"):
        compiled_apply_rope_qk(q, q.clone())


# ---------------------------------------------------------------------------
# out=: results into given tensors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_out_receives_the_rotation_and_is_returned(pairing, dtype):
    q, k = (
        randn(2, 4, 6, 10, seed=30, dtype=dtype),
        randn(2, 2, 6, 10, seed=31, dtype=dtype),
    )
    positions = torch.arange(6) + 17
    options = dict(pairing=pairing, rotary_dim=8)
    q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    got_q, got_k = apply_rope_qk(q, k, positions, out=(q_out, k_out), **options)
    assert got_q is q_out and got_k is k_out
    want_q, want_k = expected(q, k, positions, **options)
    # the same arithmetic as apply_rope, so the same bits; pass-through channels too
    assert torch.equal(q_out, want_q) and torch.equal(k_out, want_k)


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("rotary_dim", [8, 6])
@pytest.mark.parametrize("kind", ["offset", "per-row"])
def test_the_compiled_out_function_stores_into_the_outputs(pairing, rotary_dim, kind):
    # the function compiled for out=, run eagerly (no compile here): every
    # pairing, partial rotary, per-row positions and fewer key heads (GQA)
    q, k = randn(2, 4, 5, 8, seed=32), randn(2, 2, 5, 8, seed=33)
    positions = positions_of(kind, batch=2, seq=5, offset=11)
    cos, sin = rope_cos_sin(positions, rotary_dim)
    q_out, k_out = torch.zeros_like(q), torch.zeros_like(k)
    got = fused_rope._rotate_qk_into(q, k, cos, sin, pairing, rotary_dim, q_out, k_out)
    want_q, want_k = expected(q, k, positions, pairing=pairing, rotary_dim=rotary_dim)
    assert got[0] is q_out and got[1] is k_out
    torch.testing.assert_close(q_out, want_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k_out, want_k, rtol=1e-6, atol=1e-6)


def test_pairs_axis_holds_the_channels_of_pair_views():
    x = torch.arange(2 * 10.0).reshape(2, 10)
    for pairing in PAIRINGS:
        pairs, axis = rope_core.pairs_axis(x, pairing, 8)
        a, b = rope_core.pair_views(x, pairing, 8)
        assert torch.equal(pairs.select(axis, 0), a)
        assert torch.equal(pairs.select(axis, 1), b)


def test_bad_out_is_rejected_with_a_reason():
    q, k = randn(1, 2, 4, 8, seed=34), randn(1, 2, 4, 8, seed=35)
    good = (torch.empty_like(q), torch.empty_like(k))
    with pytest.raises(ValueError, match="out must be a pair"):
        apply_rope_qk(q, k, out=torch.empty_like(q))
    with pytest.raises(ValueError, match="k_out must have the shape, dtype and device"):
        apply_rope_qk(q, k, out=(good[0], torch.empty(1, 2, 4, 6)))
    with pytest.raises(ValueError, match="q_out must have the shape, dtype and device"):
        apply_rope_qk(q, k, out=(good[0].double(), good[1]))
    with pytest.raises(ValueError, match="share memory with q, k or each other"):
        apply_rope_qk(q, k, out=(q, good[1]))
    with pytest.raises(ValueError, match="inplace=True or out=, not both"):
        apply_rope_qk(q, k, inplace=True, out=good)
    with pytest.raises(ValueError, match="autograd cannot follow"):
        apply_rope_qk(q.requires_grad_(), k, out=good)


@pytest.mark.parametrize("base", [500.0, 1e6])
def test_every_path_honours_a_non_default_base(base):
    # the float64 loop with the same base: a path that fell back to 10^4 fails
    q, k = randn(1, 2, 6, 8, seed=30), randn(1, 1, 6, 8, seed=31)
    positions = [0, 1, 3, 7, 40, 900]
    p = torch.tensor(positions)
    eager = apply_rope_qk(q, k, p, base=base)
    inplace = apply_rope_qk(q.clone(), k.clone(), p, base=base, inplace=True)
    into = apply_rope_qk(
        q, k, p, base=base, out=(torch.empty_like(q), torch.empty_like(k))
    )
    fn, _ = compile_rope_qk(q, k, p, base=base)
    compiled = fn(q, k, p)
    for name, (got_q, got_k) in {
        "eager": eager,
        "inplace": inplace,
        "out": into,
        "compiled": compiled,
    }.items():
        for got, x in ((got_q, q), (got_k, k)):
            for head in range(x.shape[1]):
                want = naive_rope(x[0, head], positions, base=base)
                torch.testing.assert_close(
                    got[0, head].double(), want, rtol=0, atol=1e-5, msg=name
                )
