"""Tests for pe_tutorial.encodings.rope: naive float64 loops, hand-built matrices, sympy."""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.encodings import symbolic
from pe_tutorial.encodings.absolute import sinusoidal_frequencies
from pe_tutorial.encodings.rope import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_complex,
    apply_rope_matrix,
    apply_rope_nd,
    convert_pairing,
    grid_positions,
    pairing_permutation,
    rope_angles,
    rope_decay_curve,
    rope_frequencies,
    rope_matrix,
)

PAIRINGS = ["half", "interleaved"]
FAST = settings(max_examples=30, deadline=None)


# ---------------------------------------------------------------------------
# independent references, written with Python floats and explicit loops
# ---------------------------------------------------------------------------


def pair_channels(head_dim: int, pairing: str) -> list[tuple[int, int]]:
    """The (a, b) channels of each pair, spelled out: (i, i + D/2) or (2i, 2i + 1)."""
    half = head_dim // 2
    if pairing == "half":
        return [(i, i + half) for i in range(half)]
    return [(2 * i, 2 * i + 1) for i in range(half)]


def naive_rope(
    x: torch.Tensor,
    positions: list[int],
    *,
    base=10000.0,
    pairing="half",
    rotary_dim=None,
):
    """RoPE of x (seq, head_dim) in float64 with a loop over tokens and pairs."""
    seq, head_dim = x.shape
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    out = x.to(torch.float64).clone()
    for t in range(seq):
        for i, (a, b) in enumerate(pair_channels(rotary_dim, pairing)):
            angle = positions[t] * base ** (-2 * i / rotary_dim)
            xa, xb = float(x[t, a]), float(x[t, b])
            out[t, a] = xa * math.cos(angle) - xb * math.sin(angle)
            out[t, b] = xa * math.sin(angle) + xb * math.cos(angle)
    return out


def hand_block_diagonal(position: int, head_dim: int, base=10000.0) -> torch.Tensor:
    """R_{Theta,m} of Su et al. eq. (15): 2x2 rotation blocks on the diagonal, float64."""
    blocks = []
    for i in range(head_dim // 2):
        angle = position * base ** (-2 * i / head_dim)
        c, s = math.cos(angle), math.sin(angle)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def interleaved_to_half_by_hand(head_dim: int) -> list[int]:
    """Channel order that takes the interleaved layout to the half layout: evens first, then odds."""
    return list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))


def atol_for(max_position: int) -> float:
    """float32 angles are off by about |position| * 2^-24 rad per pair, so values by |x| times that."""
    return 1e-5 + 5e-7 * abs(max_position)


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q.double() @ k.double().transpose(-2, -1)


head_dims = st.sampled_from([2, 4, 8, 16, 64])
pairings = st.sampled_from(PAIRINGS)
seeds = st.integers(0, 2**16)


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=dtype
    )


# ---------------------------------------------------------------------------
# frequencies and angles
# ---------------------------------------------------------------------------


def test_frequencies_reference_values():
    inv_freq = rope_frequencies(8, base=10000.0)
    assert inv_freq.dtype == torch.float32
    torch.testing.assert_close(
        inv_freq, torch.tensor([1.0, 0.1, 0.01, 0.001]), rtol=1e-6, atol=0
    )


def test_frequencies_are_the_sinusoidal_ones():
    for head_dim, base in [(2, 10000.0), (64, 10000.0), (128, 500000.0), (16, 100.0)]:
        assert torch.equal(
            rope_frequencies(head_dim, base=base),
            sinusoidal_frequencies(head_dim, base=base),
        )
        expected = torch.tensor(
            [base ** (-2 * i / head_dim) for i in range(head_dim // 2)],
            dtype=torch.float64,
        )
        torch.testing.assert_close(
            rope_frequencies(head_dim, base=base).double(), expected, rtol=1e-6, atol=0
        )


def test_angles_are_float32_products_of_integer_positions():
    positions = torch.tensor([[0, 1, 7], [100, 4096, 32768]])
    angles = rope_angles(positions, 8)
    assert angles.dtype == torch.float32 and angles.shape == (2, 3, 4)
    expected = positions.double()[..., None] * torch.tensor(
        [1.0, 0.1, 0.01, 0.001], dtype=torch.float64
    )
    torch.testing.assert_close(angles.double(), expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# apply_rope against references
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("head_dim", [2, 6, 8, 32])
def test_apply_rope_matches_naive_loop(pairing, head_dim):
    x = randn(7, head_dim, seed=head_dim)
    positions = [0, 1, 2, 5, 13, 100, 2047]
    y = apply_rope(x, torch.tensor(positions), pairing=pairing)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(
        y.double(),
        naive_rope(x, positions, pairing=pairing),
        rtol=0,
        atol=atol_for(2047),
    )


@pytest.mark.parametrize("base", [100.0, 10000.0, 500000.0])
def test_apply_rope_base_matches_naive_loop(base):
    x = randn(5, 16, seed=1)
    positions = [0, 3, 17, 250, 999]
    y = apply_rope(x, torch.tensor(positions), base=base, pairing="half")
    torch.testing.assert_close(
        y.double(), naive_rope(x, positions, base=base), rtol=0, atol=atol_for(999)
    )


def test_interleaved_equals_hand_built_block_diagonal():
    x = randn(4, 8, seed=2)
    positions = [0, 1, 9, 300]
    y = apply_rope(x, torch.tensor(positions), pairing="interleaved")
    for t, position in enumerate(positions):
        torch.testing.assert_close(
            y[t].double(),
            hand_block_diagonal(position, 8) @ x[t].double(),
            rtol=1e-5,
            atol=1e-5,
        )


def test_half_equals_block_diagonal_in_permuted_coordinates():
    # half pairing = the block-diagonal rotation applied after moving channels (i, i + D/2) next to each other
    x = randn(4, 8, seed=3)
    order = [0, 4, 1, 5, 2, 6, 3, 7]  # half layout -> pairs side by side
    back = [order.index(j) for j in range(8)]
    y = apply_rope(x, torch.tensor([0, 1, 9, 300]), pairing="half")
    for t, position in enumerate([0, 1, 9, 300]):
        rotated = hand_block_diagonal(position, 8) @ x[t, order].double()
        torch.testing.assert_close(y[t].double(), rotated[back], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rope_matrix_equals_hand_built_matrix(pairing):
    matrices = rope_matrix(torch.tensor([0, 3, 77]), 8, pairing=pairing)
    assert matrices.shape == (3, 8, 8)
    order = list(range(8)) if pairing == "interleaved" else [0, 4, 1, 5, 2, 6, 3, 7]
    for matrix, position in zip(matrices, [0, 3, 77]):
        expected = hand_block_diagonal(position, 8)
        # undo the channel order: M[a, b] for a, b in the layout's channel numbering
        torch.testing.assert_close(
            matrix.double()[order][:, order], expected, rtol=1e-6, atol=1e-6
        )


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_matrix_and_complex_versions_equal_apply_rope(pairing):
    x = randn(2, 3, 11, 16, seed=4)
    positions = torch.arange(11) * 37
    expected = apply_rope(x, positions, pairing=pairing)
    torch.testing.assert_close(
        apply_rope_matrix(x, positions, pairing=pairing), expected, rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(
        apply_rope_complex(x, positions, pairing=pairing),
        expected,
        rtol=1e-5,
        atol=1e-5,
    )


def test_complex_version_is_multiplication_by_a_phase():
    x = randn(5, 4, seed=5)
    y = apply_rope_complex(x, torch.arange(5), pairing="interleaved")
    for t in range(5):
        for i, theta in enumerate([1.0, 0.01]):
            z = complex(float(x[t, 2 * i]), float(x[t, 2 * i + 1])) * complex(
                math.cos(t * theta), math.sin(t * theta)
            )
            assert abs(complex(float(y[t, 2 * i]), float(y[t, 2 * i + 1])) - z) < 1e-5


def test_default_positions_are_arange():
    x = randn(2, 3, 9, 8, seed=6)
    torch.testing.assert_close(
        apply_rope(x), apply_rope(x, torch.arange(9)), rtol=0, atol=0
    )
    torch.testing.assert_close(
        apply_rope(x)[0, 0].double(),
        naive_rope(x[0, 0], list(range(9))),
        rtol=1e-5,
        atol=1e-5,
    )
    # every implementation has the same default pairing ("half")
    torch.testing.assert_close(
        apply_rope_complex(x), apply_rope(x), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(
        apply_rope_matrix(x), apply_rope(x), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(RotaryEmbedding(8)(x), apply_rope(x), rtol=0, atol=0)


def test_per_row_positions_for_left_padding():
    x = randn(3, 2, 6, 8, seed=7)
    # (B, 1, T)
    positions = torch.tensor(
        [[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3], [0, 0, 0, 0, 0, 1]]
    )[:, None, :]
    y = apply_rope(x, positions)
    for b in range(3):
        for h in range(2):
            expected = naive_rope(x[b, h], positions[b, 0].tolist())
            torch.testing.assert_close(y[b, h].double(), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# properties the book claims (hypothesis)
# ---------------------------------------------------------------------------


@FAST
@given(
    head_dim=head_dims,
    pairing=pairings,
    m=st.integers(0, 10_000),
    n=st.integers(0, 10_000),
    shift=st.integers(-10_000, 50_000),
    seed=seeds,
)
def test_score_depends_only_on_relative_position(head_dim, pairing, m, n, shift, seed):
    m_s, n_s = m + shift, n + shift
    q, k = randn(1, head_dim, seed=seed), randn(1, head_dim, seed=seed + 1)
    score = scores(
        apply_rope(q, torch.tensor([m]), pairing=pairing),
        apply_rope(k, torch.tensor([n]), pairing=pairing),
    )
    shifted = scores(
        apply_rope(q, torch.tensor([m_s]), pairing=pairing),
        apply_rope(k, torch.tensor([n_s]), pairing=pairing),
    )
    # float32 angles are off by about |position| * 2^-24 rad per pair; the score moves by |q||k| times that
    largest = max(abs(m), abs(n), abs(m_s), abs(n_s)) + 1
    tolerance = 1e-5 * head_dim + float(q.norm() * k.norm()) * largest * 5e-7
    assert abs(float(score) - float(shifted)) <= tolerance
    # and it is q . R((n - m) theta) k, the form that names only n - m (a float64 reference)
    relative = (
        q.double()
        @ (
            hand_block_diagonal(n - m, head_dim)
            if pairing == "interleaved"
            else _half_matrix(n - m, head_dim)
        )
        @ k.double().T
    )
    assert abs(float(score) - float(relative)) <= tolerance


def _half_matrix(position: int, head_dim: int) -> torch.Tensor:
    """The rotation in the half layout.

    y_half = y_inter[perm] and x_inter[perm] = x_half give R_inter[perm][:, perm].
    """
    perm = interleaved_to_half_by_hand(head_dim)
    return hand_block_diagonal(position, head_dim)[perm][:, perm]


@FAST
@given(
    head_dim=head_dims,
    pairing=pairings,
    seed=seeds,
    offset=st.integers(-100_000, 100_000),
)
def test_norms_are_preserved(head_dim, pairing, seed, offset):
    x = randn(2, 5, head_dim, seed=seed)
    y = apply_rope(x, torch.arange(5) + offset, pairing=pairing)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)
    # and each pair keeps its own length (a rotation per pair, not a mixing of pairs)
    for a, b in pair_channels(head_dim, pairing):
        torch.testing.assert_close(
            y[..., [a, b]].norm(dim=-1),
            x[..., [a, b]].norm(dim=-1),
            rtol=1e-5,
            atol=1e-5,
        )


@FAST
@given(head_dim=head_dims, pairing=pairings, seed=seeds)
def test_position_zero_is_the_identity(head_dim, pairing, seed):
    x = randn(3, 4, head_dim, seed=seed)
    assert torch.equal(
        apply_rope(x, torch.zeros(4, dtype=torch.long), pairing=pairing), x
    )


@FAST
@given(head_dim=head_dims, seed=seeds, offset=st.integers(0, 5000))
def test_pairings_agree_after_the_permutation(head_dim, seed, offset):
    x = randn(2, 6, head_dim, seed=seed)
    positions = torch.arange(6) + offset
    perm = pairing_permutation(head_dim, source="interleaved", target="half")
    assert perm.tolist() == interleaved_to_half_by_hand(head_dim)
    back = pairing_permutation(head_dim, source="half", target="interleaved")
    assert torch.equal(perm[back], torch.arange(head_dim))
    torch.testing.assert_close(
        apply_rope(x[..., perm], positions, pairing="half"),
        apply_rope(x, positions, pairing="interleaved")[..., perm],
        rtol=0,
        atol=0,
    )
    torch.testing.assert_close(
        apply_rope(x[..., back], positions, pairing="interleaved"),
        apply_rope(x, positions, pairing="half")[..., back],
        rtol=0,
        atol=0,
    )


@FAST
@given(
    head_dim=st.sampled_from([4, 8, 16]),
    num_heads=st.integers(1, 3),
    seed=seeds,
    source=pairings,
    target=pairings,
)
def test_converted_projections_give_the_same_scores(
    head_dim, num_heads, seed, source, target
):
    d_model, seq = 12, 7
    x = randn(seq, d_model, seed=seed, dtype=torch.float64).float()
    w_q = randn(num_heads * head_dim, d_model, seed=seed + 1)
    w_k = randn(num_heads * head_dim, d_model, seed=seed + 2)

    def head_scores(wq, wk, pairing):
        q = (x @ wq.T).view(seq, num_heads, head_dim).transpose(0, 1)  # (H, T, D)
        k = (x @ wk.T).view(seq, num_heads, head_dim).transpose(0, 1)
        # (H, T, T)
        return scores(apply_rope(q, pairing=pairing), apply_rope(k, pairing=pairing))

    before = head_scores(w_q, w_k, source)
    converted = {
        name: convert_pairing(w, head_dim=head_dim, source=source, target=target)
        for name, w in (("q", w_q), ("k", w_k))
    }
    after = head_scores(converted["q"], converted["k"], target)
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-3)
    if source != target:
        # running the unconverted checkpoint with the other pairing silently changes the scores
        wrong = head_scores(w_q, w_k, target)
        assert (wrong - before).abs().max() > 1e-2


@FAST
@given(
    head_dim=head_dims,
    pairing=pairings,
    seed=seeds,
    prompt=st.integers(1, 6),
    steps=st.integers(1, 5),
)
def test_decoding_token_by_token_with_offsets_equals_the_full_pass(
    head_dim, pairing, seed, prompt, steps
):
    x = randn(2, 3, prompt + steps, head_dim, seed=seed)  # (B, H, T, D)
    full = apply_rope(x, pairing=pairing)
    module = RotaryEmbedding(head_dim, pairing=pairing, max_positions=2)
    pieces = [apply_rope(x[..., :prompt, :], torch.arange(prompt), pairing=pairing)]
    from_module = [module(x[..., :prompt, :])]
    for t in range(prompt, prompt + steps):
        # one new token at position t (the KV cache holds 0 .. t-1)
        offset = torch.arange(1) + t
        pieces.append(apply_rope(x[..., t : t + 1, :], offset, pairing=pairing))
        from_module.append(module(x[..., t : t + 1, :], offset))
    torch.testing.assert_close(torch.cat(pieces, dim=-2), full, rtol=0, atol=0)
    torch.testing.assert_close(
        torch.cat(from_module, dim=-2), full, rtol=1e-6, atol=1e-6
    )


# ---------------------------------------------------------------------------
# precision
# ---------------------------------------------------------------------------


def _phase_error(
    y: torch.Tensor, x: torch.Tensor, position: int, head_dim: int
) -> torch.Tensor:
    """|phase(y_pair) - phase(x_pair) - position theta_i| wrapped to [0, pi], against float64 angles."""
    theta = torch.tensor(
        [10000.0 ** (-2 * i / head_dim) for i in range(head_dim // 2)],
        dtype=torch.float64,
    )
    x64, y64 = x.double(), y.double()
    turned = torch.atan2(y64[..., 1::2], y64[..., 0::2]) - torch.atan2(
        x64[..., 1::2], x64[..., 0::2]
    )
    error = turned - position * theta
    return (torch.remainder(error + math.pi, 2 * math.pi) - math.pi).abs()


def test_bf16_input_at_position_32768_has_small_phase_error():
    head_dim, position = 128, 32768
    x = randn(64, 1, head_dim, seed=8).to(torch.bfloat16)
    y = apply_rope(x, torch.tensor([position]), pairing="interleaved")
    assert y.dtype == torch.bfloat16
    error = _phase_error(y, x, position, head_dim)
    # well under 0.01 rad; most of it is bf16 rounding of the output
    assert float(error.max()) < 5e-3
    # the test can see a wrong implementation: angles formed in bf16 are off by radians
    bad_angles = (
        torch.tensor([position], dtype=torch.bfloat16)[:, None]
        * rope_frequencies(head_dim).to(torch.bfloat16)
    ).float()
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    bad = torch.stack(
        (
            x1 * bad_angles.cos() - x2 * bad_angles.sin(),
            x1 * bad_angles.sin() + x2 * bad_angles.cos(),
        ),
        -1,
    ).flatten(-2)
    assert (
        float(_phase_error(bad.to(torch.bfloat16), x, position, head_dim).max()) > 0.1
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_output_keeps_the_input_dtype(dtype):
    x = randn(2, 5, 8, seed=9).to(dtype)
    for fn in (apply_rope, apply_rope_matrix, apply_rope_complex):
        assert fn(x).dtype == dtype
    assert RotaryEmbedding(8)(x).dtype == dtype


# ---------------------------------------------------------------------------
# partial rotary
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_partial_rotary_rotates_the_first_channels_and_passes_the_rest(pairing):
    x = randn(6, 16, seed=10)
    positions = [0, 1, 4, 9, 50, 700]
    y = apply_rope(x, torch.tensor(positions), pairing=pairing, rotary_dim=4)
    assert torch.equal(y[:, 4:], x[:, 4:])
    # the rotated part uses frequencies base^(-2i / rotary_dim), as GPT-NeoX and GPT-J do
    torch.testing.assert_close(
        y[:, :4].double(),
        naive_rope(x[:, :4], positions, pairing=pairing),
        rtol=1e-5,
        atol=1e-5,
    )
    torch.testing.assert_close(
        y.double(),
        naive_rope(x, positions, pairing=pairing, rotary_dim=4),
        rtol=1e-5,
        atol=1e-5,
    )


def test_partial_rotary_module_and_permutation():
    x = randn(2, 5, 12, seed=11)
    module = RotaryEmbedding(12, rotary_dim=8, pairing="interleaved")
    torch.testing.assert_close(
        module(x), apply_rope(x, pairing="interleaved", rotary_dim=8), rtol=0, atol=0
    )
    perm = pairing_permutation(12, source="interleaved", target="half", rotary_dim=8)
    assert perm.tolist() == [0, 2, 4, 6, 1, 3, 5, 7, 8, 9, 10, 11]
    torch.testing.assert_close(
        apply_rope(x[..., perm], pairing="half", rotary_dim=8),
        apply_rope(x, pairing="interleaved", rotary_dim=8)[..., perm],
        rtol=0,
        atol=0,
    )


# ---------------------------------------------------------------------------
# RotaryEmbedding
# ---------------------------------------------------------------------------


def test_module_buffers_are_not_persistent():
    module = RotaryEmbedding(8)
    assert dict(module.state_dict()) == {}
    assert {name for name, _ in module.named_buffers()} == {
        "inv_freq",
        "cos_cached",
        "sin_cached",
    }
    torch.testing.assert_close(module.inv_freq, torch.tensor([1.0, 0.1, 0.01, 0.001]))


def test_module_grows_past_its_table_instead_of_truncating():
    module = RotaryEmbedding(8, max_positions=16)
    assert module.cached_positions == 16
    x = randn(1, 40, 8, seed=12)
    positions = torch.arange(40) + 1000
    y = module(x, positions)
    assert module.cached_positions >= 1040
    torch.testing.assert_close(y, apply_rope(x, positions), rtol=1e-6, atol=1e-6)
    # positions the table does not hold at all (negative) are computed, not clipped
    negative = torch.arange(40) - 20
    torch.testing.assert_close(
        module(x, negative), apply_rope(x, negative), rtol=1e-6, atol=1e-6
    )


def test_module_table_is_keyed_by_position_not_length():
    module = RotaryEmbedding(8, max_positions=64)
    x = randn(3, 8, seed=13)
    # the same short sequence at different offsets must get different rotations
    assert not torch.allclose(
        module(x, torch.arange(3)), module(x, torch.arange(3) + 10)
    )
    torch.testing.assert_close(
        module(x, torch.arange(3) + 10), apply_rope(x, torch.arange(3) + 10)
    )


def test_module_keeps_float32_table_after_a_dtype_cast():
    module = RotaryEmbedding(64, max_positions=8).to(torch.bfloat16)
    x = randn(2, 300, 64, seed=14).to(torch.bfloat16)
    positions = torch.arange(300) + 30000
    y = module(x, positions)
    assert module.cos_cached.dtype == torch.float32
    torch.testing.assert_close(y, apply_rope(x, positions), rtol=0, atol=0)


def test_module_table_grows_only_through_extend_to_and_never_shrinks():
    module = RotaryEmbedding(8, max_positions=4)
    module.extend_to(10)
    assert module.cached_positions == 10
    module.extend_to(3)
    assert module.cached_positions == 10
    # the grown table holds the closed form cos(m theta_i), sin(m theta_i)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = torch.arange(10, dtype=torch.float64)[:, None] * theta
    torch.testing.assert_close(
        module.cos_cached.double(), angles.cos(), atol=1e-6, rtol=0
    )
    torch.testing.assert_close(
        module.sin_cached.double(), angles.sin(), atol=1e-6, rtol=0
    )
    with pytest.raises(ValueError, match="num_positions must be a positive integer"):
        module.extend_to(0)


def test_module_rejects_inputs_on_another_device_instead_of_copying():
    module = RotaryEmbedding(8)
    with pytest.raises(
        ValueError, match=r"positions are on meta .* move the module with \.to"
    ):
        module.cos_sin(torch.arange(4, device="meta"))
    with pytest.raises(ValueError, match="the inputs are on meta"):
        module(torch.empty(2, 4, 8, device="meta"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_module_follows_to_device():
    module = RotaryEmbedding(8).to("cuda")
    assert module.inv_freq.is_cuda and module.cos_cached.is_cuda
    x = randn(2, 10, 8, seed=15)
    y = module(x.cuda(), torch.arange(10, device="cuda") + 5000)
    assert y.is_cuda and module.cos_cached.is_cuda
    torch.testing.assert_close(
        y.cpu(), apply_rope(x, torch.arange(10) + 5000), rtol=1e-5, atol=1e-5
    )


# ---------------------------------------------------------------------------
# n-D (axial) RoPE
# ---------------------------------------------------------------------------


def test_grid_positions_row_major():
    assert grid_positions(2, 3).tolist() == [
        [0, 0],
        [0, 1],
        [0, 2],
        [1, 0],
        [1, 1],
        [1, 2],
    ]
    assert grid_positions(4).tolist() == [[0], [1], [2], [3]]
    assert grid_positions(2, 2, 2).shape == (8, 3)


def test_axial_rope_rotates_each_chunk_by_its_axis():
    x = randn(6, 16, seed=16)
    positions = grid_positions(2, 3)  # (6, 2)
    y = apply_rope_nd(x, positions)
    rows, cols = positions[:, 0].tolist(), positions[:, 1].tolist()
    torch.testing.assert_close(
        y[:, :8].double(), naive_rope(x[:, :8], rows), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(
        y[:, 8:].double(), naive_rope(x[:, 8:], cols), rtol=1e-5, atol=1e-5
    )


@FAST
@given(
    seed=seeds,
    a=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    b=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    shift=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_axial_scores_depend_only_on_the_2d_offset(seed, a, b, shift):
    q, k = randn(1, 16, seed=seed), randn(1, 16, seed=seed + 1)
    pos = lambda p: torch.tensor([p])  # noqa: E731  (1, 2)
    moved = lambda p: torch.tensor([[p[0] + shift[0], p[1] + shift[1]]])  # noqa: E731
    score = scores(apply_rope_nd(q, pos(a)), apply_rope_nd(k, pos(b)))
    shifted = scores(apply_rope_nd(q, moved(a)), apply_rope_nd(k, moved(b)))
    torch.testing.assert_close(score, shifted, rtol=1e-4, atol=1e-4)
    # while a 1-D RoPE over the flattened index would not see the grid: only the row offset and column
    # offset together determine the score, so swapping them generally changes it
    if a[0] - b[0] != a[1] - b[1]:
        swapped = scores(
            apply_rope_nd(q, torch.tensor([[a[1], a[0]]])),
            apply_rope_nd(k, torch.tensor([[b[1], b[0]]])),
        )
        assert not torch.allclose(score, swapped, atol=1e-6)


def test_axial_positions_on_a_batch():
    x = randn(2, 4, 12, 8, seed=17)  # (B, H, T, D), T = 3 x 4 patches
    positions = grid_positions(3, 4)
    y = apply_rope_nd(x, positions, pairing="interleaved")
    for b in range(2):
        torch.testing.assert_close(
            y[b], apply_rope_nd(x[b], positions, pairing="interleaved"), rtol=0, atol=0
        )


# ---------------------------------------------------------------------------
# long-term decay
# ---------------------------------------------------------------------------


def test_decay_curve_matches_sympy_and_a_direct_sum():
    distances = torch.arange(0, 200, 7, dtype=torch.float64)
    curve = rope_decay_curve(distances, 16)
    expr = sp.lambdify(symbolic.r, symbolic.rope_decay_bound(16), "math")
    torch.testing.assert_close(
        curve, torch.tensor([expr(float(d)) for d in distances], dtype=torch.float64)
    )
    direct = []
    for d in distances.tolist():
        partial, total = 0j, 0.0
        for i in range(8):
            partial += complex(
                math.cos(d * 10000 ** (-i / 8)), math.sin(d * 10000 ** (-i / 8))
            )
            total += abs(partial)
        direct.append(total / 8)
    torch.testing.assert_close(curve, torch.tensor(direct, dtype=torch.float64))
    assert curve[0] == pytest.approx((8 + 1) / 2)  # every S_j(0) = j


def test_decay_curve_falls_with_distance():
    curve = rope_decay_curve(torch.arange(0, 1000, dtype=torch.float64), 128)
    assert curve[0] == pytest.approx(32.5)
    assert float(curve[500:].max()) < 0.5 * float(curve[0])


@FAST
@given(seed=seeds, m=st.integers(0, 3000), n=st.integers(0, 3000))
def test_decay_bound_holds_for_real_scores(seed, m, n):
    head_dim = 32
    q, k = randn(1, head_dim, seed=seed), randn(1, head_dim, seed=seed + 1)
    score = float(
        scores(
            apply_rope(q, torch.tensor([m]), pairing="interleaved"),
            apply_rope(k, torch.tensor([n]), pairing="interleaved"),
        )
    )
    h = [
        complex(float(q[0, 2 * i]), float(q[0, 2 * i + 1]))
        * complex(float(k[0, 2 * i]), -float(k[0, 2 * i + 1]))
        for i in range(head_dim // 2)
    ] + [0j]
    largest_step = max(abs(h[i + 1] - h[i]) for i in range(head_dim // 2))
    bound = (
        largest_step
        * (head_dim // 2)
        * float(rope_decay_curve(torch.tensor([float(m - n)]), head_dim))
    )
    assert abs(score) <= bound * (1 + 1e-6) + 1e-4


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_odd_head_dim_is_rejected():
    with pytest.raises(ValueError, match="head_dim must be even"):
        apply_rope(torch.randn(3, 7))
    with pytest.raises(ValueError, match="head_dim must be even"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match="head_dim must be even"):
        rope_frequencies(5)


def test_bad_rotary_dim_is_rejected():
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        apply_rope(torch.randn(3, 8), rotary_dim=3)
    with pytest.raises(ValueError, match="rotary_dim=16 is larger than head_dim=8"):
        apply_rope(torch.randn(3, 8), rotary_dim=16)
    with pytest.raises(ValueError, match="larger than head_dim"):
        RotaryEmbedding(8, rotary_dim=10)


def test_float_positions_are_rejected():
    with pytest.raises(ValueError, match="integer tensor"):
        apply_rope(torch.randn(3, 8), torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="integer tensor"):
        RotaryEmbedding(8)(torch.randn(3, 8), torch.tensor([0.5, 1.0, 2.0]))
    with pytest.raises(ValueError, match="integer tensor"):
        apply_rope_nd(torch.randn(3, 8), torch.zeros(3, 2))


def test_positions_that_do_not_broadcast_are_rejected():
    x = torch.randn(2, 4, 5, 8)
    with pytest.raises(
        ValueError, match=r"do not broadcast to x's \(\.\.\., seq\) = \(2, 4, 5\)"
    ):
        apply_rope(x, torch.arange(6))
    with pytest.raises(ValueError, match="batch, 1, seq_len"):
        apply_rope(x, torch.zeros(2, 5, dtype=torch.long))  # (B, T) needs a heads axis
    with pytest.raises(ValueError, match="do not broadcast"):
        # would add a dimension
        apply_rope(x, torch.zeros(3, 2, 4, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="do not broadcast"):
        RotaryEmbedding(8)(x, torch.arange(4))


@pytest.mark.parametrize("base", [0.0, -10000.0, float("nan"), float("inf")])
def test_non_positive_base_is_rejected(base):
    with pytest.raises(ValueError, match="base must be a positive"):
        apply_rope(torch.randn(3, 8), base=base)
    with pytest.raises(ValueError, match="base must be a positive"):
        RotaryEmbedding(8, base=base)


def test_other_bad_input_is_rejected():
    with pytest.raises(ValueError, match="pairing must be 'half'"):
        apply_rope(torch.randn(3, 8), pairing="neox")
    with pytest.raises(ValueError, match="floating-point"):
        apply_rope(torch.arange(24).view(3, 8))
    with pytest.raises(ValueError, match=r"shape \(\.\.\., seq, head_dim\)"):
        apply_rope(torch.randn(8))
    with pytest.raises(ValueError, match="divisible by 2 \\* n_axes = 4"):
        apply_rope_nd(torch.randn(6, 6), grid_positions(2, 3))
    with pytest.raises(ValueError, match="n_axes"):
        apply_rope_nd(torch.randn(6, 8), torch.arange(6))
    with pytest.raises(ValueError, match="not a multiple of head_dim"):
        convert_pairing(
            torch.randn(10, 4), head_dim=8, source="interleaved", target="half"
        )
    with pytest.raises(ValueError, match="built for 8"):
        RotaryEmbedding(8)(torch.randn(3, 16))


def test_default_positions_reuse_one_cos_sin_table():
    from pe_tutorial.encodings import rope

    x = torch.randn(2, 3, 7, 8)
    before = rope._arange_cos_sin.cache_info().hits
    first = apply_rope(x)
    second = apply_rope(x * 2)
    assert rope._arange_cos_sin.cache_info().hits >= before + 1
    # the same numbers as explicit positions 0 .. T-1, bit for bit
    assert torch.equal(first, apply_rope(x, torch.arange(7)))
    assert torch.equal(second, apply_rope(x * 2, torch.arange(7)))
    # another length, base or rotary_dim is another table
    assert torch.equal(
        apply_rope(x[..., :5, :]), apply_rope(x[..., :5, :], torch.arange(5))
    )
    assert torch.equal(
        apply_rope(x, base=500.0, rotary_dim=4),
        apply_rope(x, torch.arange(7), base=500.0, rotary_dim=4),
    )


def test_clear_rope_caches_frees_the_kept_tables():
    from pe_tutorial.encodings import rope, rope_core

    apply_rope(torch.randn(1, 1, 5, 8))
    assert rope._arange_cos_sin.cache_info().currsize >= 1
    assert rope_core._cached_frequencies.cache_info().currsize >= 1
    rope.clear_rope_caches()
    assert rope._arange_cos_sin.cache_info().currsize == 0
    assert rope_core._cached_frequencies.cache_info().currsize == 0
    # and the rotation is the same afterwards
    x = torch.randn(1, 1, 5, 8)
    assert torch.equal(apply_rope(x), apply_rope(x, torch.arange(5)))
