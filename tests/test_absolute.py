"""Tests for pe_tutorial.encodings.absolute against closed forms and naive Python loops."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pe_tutorial as pe
from pe_tutorial.encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
    binary_encoding,
    integer_encoding,
    neighbour_distances,
    position_term,
    sinusoidal_at,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)

FAST = settings(max_examples=40, deadline=None)
EVEN_DIMS = st.integers(1, 32).map(lambda half: 2 * half)


def naive_sinusoidal(
    num_positions: int, dim: int, base: float = 10000.0
) -> torch.Tensor:
    """The formula of Vaswani et al. written out with math.sin/cos, one entry at a time, in float64."""
    table = torch.empty(num_positions, dim, dtype=torch.float64)
    for p in range(num_positions):
        for i in range(dim // 2):
            angle = p / base ** (2 * i / dim)
            table[p, 2 * i] = math.sin(angle)
            table[p, 2 * i + 1] = math.cos(angle)
    return table


# ----- sinusoidal -----------------------------------------------------------------------------


def test_frequencies_reference_values():
    # base 10000, D = 8: omega_i = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001
    expected = torch.tensor([1.0, 0.1, 0.01, 0.001])
    torch.testing.assert_close(sinusoidal_frequencies(8), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    "dim, base", [(8, 10000.0), (16, 10000.0), (6, 500.0), (2, 10.0)]
)
def test_sinusoidal_matches_naive_loop(dim, base):
    table = sinusoidal_encoding(50, dim, base=base)
    assert table.dtype == torch.float32 and table.shape == (50, dim)
    torch.testing.assert_close(
        table.double(), naive_sinusoidal(50, dim, base), atol=2e-6, rtol=0
    )


def test_sinusoidal_layout_sin_in_even_cos_in_odd_channels():
    table = sinusoidal_encoding(3, 4)
    # position 0: sin(0) = 0 in even channels, cos(0) = 1 in odd channels
    torch.testing.assert_close(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    # position 1, pair 0: omega_0 = 1
    assert table[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-6)
    assert table[1, 1].item() == pytest.approx(math.cos(1.0), abs=1e-6)


def test_sinusoidal_at_any_shape_and_device_argument():
    positions = torch.tensor([[0, 5], [7, 100]])
    values = sinusoidal_at(positions, 8)
    assert values.shape == (2, 2, 8)
    torch.testing.assert_close(values[1, 1], sinusoidal_encoding(101, 8)[100])
    assert sinusoidal_encoding(4, 8, device="cpu").device.type == "cpu"


@FAST
@given(p=st.integers(0, 5000), k=st.integers(-2000, 2000), dim=EVEN_DIMS)
def test_dot_product_depends_only_on_offset(p, k, dim):
    # PE[p] . PE[p + k] = sum_i cos(k omega_i), whatever p is
    if p + k < 0:
        k = -p
    first, second = sinusoidal_at(torch.tensor([p, p + k]), dim).double()
    omega = sinusoidal_frequencies(dim).double()
    expected = torch.cos(k * omega).sum()
    # float32 angles of size ~p carry an absolute error of about p * 2^-24 per pair
    tolerance = 1e-5 + dim * (p + abs(k)) * 2e-7
    assert abs(float(first @ second - expected)) < tolerance


@FAST
@given(p=st.integers(0, 10**6), dim=EVEN_DIMS)
def test_every_position_has_norm_sqrt_half_dim(p, dim):
    norm_squared = float(sinusoidal_at(torch.tensor(p), dim).double().norm() ** 2)
    assert norm_squared == pytest.approx(dim / 2, rel=1e-5)


@FAST
@given(k=st.integers(-300, 300), dim=EVEN_DIMS)
def test_shift_matrix_moves_every_position_by_k(k, dim):
    positions = torch.arange(300, 400)
    M = sinusoidal_shift_matrix(k, dim)
    shifted = sinusoidal_at(positions, dim) @ M.T
    torch.testing.assert_close(
        shifted, sinusoidal_at(positions + k, dim), atol=2e-4, rtol=0
    )


def test_shift_matrix_blocks_built_by_hand():
    k, dim = 3, 4
    M = sinusoidal_shift_matrix(k, dim)
    expected = torch.zeros(4, 4, dtype=torch.float64)
    for i, omega in enumerate([1.0, 10000.0 ** (-2 / 4)]):
        c, s = math.cos(k * omega), math.sin(k * omega)
        expected[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(M.double(), expected, atol=1e-7, rtol=0)


@FAST
@given(a=st.integers(-500, 500), b=st.integers(-500, 500))
def test_shift_matrices_are_rotations_that_compose(a, b):
    Ma, Mb, Mab = (sinusoidal_shift_matrix(k, 16).double() for k in (a, b, a + b))
    torch.testing.assert_close(
        Ma @ Ma.T, torch.eye(16, dtype=torch.float64), atol=1e-6, rtol=0
    )
    assert float(torch.linalg.det(Ma)) == pytest.approx(1.0, abs=1e-5)
    torch.testing.assert_close(Ma @ Mb, Mab, atol=1e-5, rtol=0)


def test_shift_by_zero_is_identity():
    torch.testing.assert_close(sinusoidal_shift_matrix(0, 10), torch.eye(10))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: sinusoidal_encoding(0, 8), "num_positions must be a positive integer"),
        (lambda: sinusoidal_encoding(4, 0), "dim must be a positive integer"),
        (lambda: sinusoidal_encoding(4, 7), "dim must be even"),
        (lambda: sinusoidal_encoding(4, 8, base=0.0), "base must be a positive"),
        (lambda: sinusoidal_encoding(4, 8, base=-2.0), "base must be a positive"),
        (lambda: sinusoidal_at(torch.tensor([0.5]), 8), "integer tensor"),
        (lambda: sinusoidal_shift_matrix(1.5, 8), "k must be an integer"),
        (
            lambda: sinusoidal_encoding(4.0, 8),
            "num_positions must be a positive integer",
        ),
    ],
)
def test_sinusoidal_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----- integer ------------------------------------------------------------------------------


def test_integer_encoding_is_the_position_in_every_channel():
    table = integer_encoding(5, 3)
    for p in range(5):
        assert table[p].tolist() == [float(p)] * 3


def test_normalized_integer_encoding_depends_on_length():
    assert integer_encoding(5, normalize=True)[:, 0].tolist() == [
        0.0,
        0.25,
        0.5,
        0.75,
        1.0,
    ]
    assert integer_encoding(11, normalize=True)[3, 0].item() == pytest.approx(0.3)
    assert integer_encoding(1, normalize=True).tolist() == [[0.0]]


@pytest.mark.parametrize("args", [(0,), (-3,), (4, 0), (True,)])
def test_integer_encoding_rejects_bad_sizes(args):
    with pytest.raises(ValueError, match="must be a positive integer"):
        integer_encoding(*args)


# ----- binary -------------------------------------------------------------------------------


@pytest.mark.parametrize("num_positions", [1, 2, 3, 8, 9, 100])
def test_binary_matches_python_format(num_positions):
    table = binary_encoding(num_positions)
    bits = max(1, math.ceil(math.log2(num_positions)))
    assert table.shape == (num_positions, bits)
    for p in range(num_positions):
        # format(p, "b") is most significant bit first; the table is least significant first
        expected = [float(c) for c in reversed(format(p, f"0{bits}b"))]
        assert table[p].tolist() == expected


def test_binary_codes_are_unique_and_bounded():
    table = binary_encoding(256)
    assert len({tuple(row.tolist()) for row in table}) == 256
    assert set(table.unique().tolist()) == {0.0, 1.0}


def test_binary_with_extra_bits_pads_with_zeros():
    table = binary_encoding(4, num_bits=5)
    assert table[:, 2:].abs().sum() == 0 and table[3, :2].tolist() == [1.0, 1.0]


def test_binary_refuses_too_few_bits_and_names_the_minimum():
    with pytest.raises(
        ValueError, match=r"too few for 100 positions; use num_bits >= 7"
    ):
        binary_encoding(100, num_bits=6)
    with pytest.raises(ValueError, match="num_bits must be a positive integer"):
        binary_encoding(1, num_bits=0)


# ----- neighbour distances ------------------------------------------------------------------


def _commuting_form(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Block diagonal with blocks [[a_m, b_m], [-b_m, a_m]]: it commutes with every
    rotation of the sinusoidal pairs."""
    blocks = [torch.tensor([[x, y], [-y, x]]) for x, y in zip(a.tolist(), b.tolist())]
    return torch.block_diag(*blocks).double()


@FAST
@given(k=st.integers(0, 40), dim=EVEN_DIMS, seed=st.integers(0, 2**16))
def test_position_term_is_a_function_of_k_alone_for_a_commuting_form(k, dim, seed):
    table = sinusoidal_encoding(64, dim).double()
    a, b = torch.randn(2, dim // 2, generator=torch.Generator().manual_seed(seed))
    term = position_term(table, _commuting_form(a, b), k)
    # per pair (sin, cos) [[a, b], [-b, a]] (sin, cos)' = a cos(k w) - b sin(k w)
    omega = sinusoidal_frequencies(dim).double()
    closed_form = a.double() * torch.cos(k * omega) - b.double() * torch.sin(k * omega)
    assert term.shape == (64 - k,)
    assert torch.allclose(term, closed_form.sum().expand_as(term), atol=1e-5)
    # the identity: sum_m cos(k w_m), the dot product of two codes k apart
    identity = position_term(table, torch.eye(dim, dtype=torch.float64), k)
    assert torch.allclose(identity, torch.cos(k * omega).sum().expand_as(identity))


def test_position_term_matches_a_loop_and_moves_for_a_general_form():
    generator = torch.Generator().manual_seed(0)
    table = sinusoidal_encoding(50, 8).double()
    A = torch.randn(8, 8, generator=generator, dtype=torch.float64)
    k = 3
    loop = [float(table[i] @ A @ table[i + k]) for i in range(50 - k)]
    term = position_term(table, A, k)
    assert term.tolist() == pytest.approx(loop)
    # a form that does not commute with the rotations: the term moves with i
    assert term.max() - term.min() > 0.5
    # any table, not only a sinusoidal one
    rows = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    assert position_term(rows, torch.eye(4, dtype=torch.float64), 0).tolist() == (
        pytest.approx((rows**2).sum(-1).tolist())
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((torch.zeros(5, 4), torch.eye(3), 1), "A \\(dim, dim\\)"),
        ((torch.zeros(5), torch.eye(5), 1), "table must be"),
        (
            (torch.zeros(5, 4), torch.eye(4), 5),
            "k must be an integer offset from 0 to 4",
        ),
        ((torch.zeros(5, 4), torch.eye(4), -1), "k must be"),
        ((torch.zeros(5, 4), torch.eye(4), 1.0), "k must be"),
    ],
)
def test_position_term_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        position_term(*args)


def test_neighbour_distances_match_loop():
    table = torch.randn(20, 5)
    expected = [math.dist(table[p].tolist(), table[p + 1].tolist()) for p in range(19)]
    torch.testing.assert_close(
        neighbour_distances(table), torch.tensor(expected), atol=1e-5, rtol=0
    )


def test_neighbour_distances_binary_and_sinusoidal():
    # 7 -> 8 flips four bits; sinusoidal steps are all equal (sum_i 2 - 2 cos(omega_i))
    assert neighbour_distances(binary_encoding(16))[7].item() == pytest.approx(2.0)
    steps = neighbour_distances(sinusoidal_encoding(100, 16)).double()
    closed_form = math.sqrt(
        sum(2 - 2 * math.cos(w) for w in sinusoidal_frequencies(16).tolist())
    )
    torch.testing.assert_close(
        steps, torch.full_like(steps, closed_form), atol=1e-5, rtol=0
    )


def test_neighbour_distances_rejects_bad_shapes():
    with pytest.raises(ValueError, match="num_positions >= 2"):
        neighbour_distances(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="num_positions >= 2"):
        neighbour_distances(torch.zeros(4))


# ----- learned ------------------------------------------------------------------------------


def test_learned_table_looks_rows_up():
    table = LearnedPositionalEmbedding(10, 4)
    positions = torch.tensor([[0, 9], [3, 3]])
    out = table(positions)
    assert out.shape == (2, 2, 4)
    torch.testing.assert_close(out[0, 1], table.weight[9])
    assert out.requires_grad


def test_learned_table_initial_scale():
    table = LearnedPositionalEmbedding(512, 256, init_std=0.02)
    assert float(table.weight.detach().std()) == pytest.approx(0.02, rel=0.05)


def test_learned_table_refuses_positions_past_its_size():
    table = LearnedPositionalEmbedding(512, 8)
    with pytest.raises(
        ValueError,
        match=r"position 600 is past the learned table, which has 512 rows \(positions 0..511\)",
    ):
        table(torch.arange(601))
    with pytest.raises(ValueError, match="position 512 is past"):
        table(torch.tensor([512]))
    with pytest.raises(ValueError, match="non-negative"):
        table(torch.tensor([-1]))
    with pytest.raises(ValueError, match="integer tensor"):
        table(torch.tensor([1.0]))


@pytest.mark.parametrize("args", [(0, 4), (4, -1)])
def test_learned_table_rejects_bad_sizes(args):
    with pytest.raises(ValueError, match="must be a positive integer"):
        LearnedPositionalEmbedding(*args)


def test_sinusoidal_module_computes_any_position_like_the_function():
    module = SinusoidalPositionalEmbedding(8, base=100.0)
    positions = torch.tensor([[0, 5], [70000, 3]])
    torch.testing.assert_close(
        module(positions), sinusoidal_at(positions, 8, base=100.0)
    )
    assert dict(module.state_dict()) == {}
    with pytest.raises(ValueError, match="dim must be even"):
        SinusoidalPositionalEmbedding(7)


def test_tensor2tensor_table_against_a_loop():
    """tensor2tensor's get_timing_signal_1d, written out entry by entry."""
    num_positions, dim = 12, 8
    table = pe.tensor2tensor_encoding(num_positions, dim)
    half = dim // 2
    for p in range(num_positions):
        for i in range(half):
            omega = 10000.0 ** (-i / (half - 1))
            assert table[p, i].item() == pytest.approx(math.sin(p * omega), abs=1e-12)
            assert table[p, half + i].item() == pytest.approx(
                math.cos(p * omega), abs=1e-12
            )
    # its slowest frequency is exactly 1 / 10 000; the paper's stops short of it
    slowest = table[1, half - 1].item()
    assert slowest == pytest.approx(math.sin(1e-4), rel=1e-12)
    assert pe.sinusoidal_frequencies(dim)[-1].item() > 1.5e-4
    # the fastest pair is the only one the two tables share
    ours = pe.sinusoidal_encoding(num_positions, dim).double()
    assert torch.allclose(table[:, 0], ours[:, 0], atol=1e-6)
    assert not torch.allclose(table[:, 1], ours[:, 2], atol=1e-3)


@pytest.mark.parametrize("dim", [2, 5])
def test_tensor2tensor_table_refuses_a_width_it_cannot_space(dim):
    with pytest.raises(ValueError, match="dim must be"):
        pe.tensor2tensor_encoding(4, dim)


def test_trend_and_rest_against_a_loop():
    torch.manual_seed(0)
    table = torch.randn(10, 3, dtype=torch.float64)
    trend, rest = pe.trend_and_rest(table, window=5)
    last = table.shape[0] - 1
    for p in range(table.shape[0]):
        # the ends repeated: row index clamped into the table
        rows = [table[min(max(q, 0), last)] for q in range(p - 2, p + 3)]
        assert torch.allclose(trend[p], torch.stack(rows).mean(0), atol=1e-12)
    assert torch.allclose(trend + rest, table, atol=1e-12)
    # a straight line is all trend away from the ends
    line = torch.arange(20, dtype=torch.float64)[:, None].expand(20, 2)
    trend, rest = pe.trend_and_rest(line, window=7)
    assert rest[3:-3].abs().max().item() < 1e-12


@pytest.mark.parametrize("window", [1, 4, 11])
def test_trend_and_rest_refuses_a_window_it_cannot_centre(window):
    with pytest.raises(ValueError, match="window must be odd"):
        pe.trend_and_rest(torch.randn(10, 3), window=window)
