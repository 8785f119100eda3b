"""Tests for pe_tutorial.encodings.alibi: published slopes, naive loops, and the properties chapter 7 claims."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.encodings.alibi import ALiBiBias, alibi_bias, alibi_slopes
from pe_tutorial.encodings.positions import query_positions


def reference_slopes(n):
    """The recursive rule from the ALiBi paper's code (Press et al., 2022), in plain Python floats."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_slopes(2 * closest)[0::2][: n - closest]


def test_slopes_for_8_heads_are_half_to_1_over_256():
    expected = torch.tensor([2.0**-e for e in range(1, 9)])
    assert torch.equal(alibi_slopes(8), expected)


def test_slopes_for_12_heads_append_the_odd_half_powers_in_order():
    exponents = [1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5]
    expected = torch.tensor([2.0**-e for e in exponents])
    assert torch.allclose(alibi_slopes(12), expected, rtol=1e-7, atol=0)


@pytest.mark.parametrize(
    "num_heads", [1, 2, 3, 5, 6, 7, 8, 12, 16, 20, 24, 32, 40, 64, 96, 112]
)
def test_slopes_match_the_papers_recursive_rule(num_heads):
    expected = torch.tensor(reference_slopes(num_heads), dtype=torch.float32)
    slopes = alibi_slopes(num_heads)
    assert slopes.dtype == torch.float32 and slopes.shape == (num_heads,)
    assert torch.allclose(slopes, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("num_heads", [1, 2, 4, 16, 32])
def test_power_of_two_slopes_are_geometric_with_start_equal_to_ratio(num_heads):
    slopes = alibi_slopes(num_heads).double()
    ratio = 2.0 ** (-8.0 / num_heads)
    assert math.isclose(slopes[0].item(), ratio, rel_tol=1e-6)
    assert torch.allclose(
        slopes[1:] / slopes[:-1],
        torch.full((num_heads - 1,), ratio, dtype=torch.float64),
    )
    # the smallest slope is always 1/256
    assert math.isclose(slopes[-1].item(), 2.0**-8, rel_tol=1e-6)


@pytest.mark.parametrize("num_heads", [3, 12, 20, 48])
def test_non_power_of_two_slopes_are_distinct_and_in_zero_one(num_heads):
    slopes = alibi_slopes(num_heads)
    assert len(set(slopes.tolist())) == num_heads
    assert bool((slopes > 0).all() and (slopes < 1).all())


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8", None])
def test_bad_num_heads_raise(bad):
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        alibi_slopes(bad)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        alibi_bias(bad, 4)


def test_more_queries_than_keys_raise():
    with pytest.raises(ValueError, match="q_len=5 is larger than k_len=3"):
        alibi_bias(4, 5, 3)


def naive_bias(num_heads, q_len, k_len, causal):
    slopes = reference_slopes(num_heads)
    offset = k_len - q_len
    out = torch.zeros(num_heads, q_len, k_len, dtype=torch.float64)
    for h in range(num_heads):
        for row in range(q_len):
            i = row + offset
            for j in range(k_len):
                if causal:
                    out[h, row, j] = -slopes[h] * (i - j) if j <= i else 0.0
                else:
                    out[h, row, j] = -slopes[h] * abs(i - j)
    return out


@settings(max_examples=30, deadline=None)
@given(
    num_heads=st.integers(1, 12),
    k_len=st.integers(1, 12),
    q_drop=st.integers(0, 11),
    causal=st.booleans(),
)
def test_bias_matches_a_loop_over_i_and_j(num_heads, k_len, q_drop, causal):
    q_len = max(1, k_len - q_drop)
    bias = alibi_bias(num_heads, q_len, k_len, causal=causal)
    assert bias.shape == (num_heads, q_len, k_len) and bias.dtype == torch.float32
    assert torch.allclose(
        bias.double(), naive_bias(num_heads, q_len, k_len, causal), atol=1e-5
    )


def test_k_len_defaults_to_q_len_and_decoding_row_is_the_last_row():
    full = alibi_bias(8, 10)
    assert full.shape == (8, 10, 10)
    # one new token against a cache of 10
    assert torch.equal(alibi_bias(8, 1, 10), full[:, -1:, :])
    assert torch.equal(query_positions(3, 10), torch.tensor([7, 8, 9]))


@settings(max_examples=30, deadline=None)
@given(
    num_heads=st.integers(1, 8), seq_len=st.integers(1, 16), seed=st.integers(0, 2**16)
)
def test_causal_bias_equals_key_position_only_bias_after_softmax(
    num_heads, seq_len, seed
):
    """-m (i - j) = m j - m i; the -m i is constant along a row, and softmax ignores row constants."""
    torch.manual_seed(seed)
    scores = torch.randn(num_heads, seq_len, seq_len, dtype=torch.float64)
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    slopes = alibi_slopes(num_heads).double()
    # m_h * j, same on every row
    key_only = slopes[:, None, None] * torch.arange(seq_len, dtype=torch.float64)
    a = torch.softmax(
        (scores + alibi_bias(num_heads, seq_len).double()).masked_fill(
            ~causal, -math.inf
        ),
        -1,
    )
    b = torch.softmax((scores + key_only).masked_fill(~causal, -math.inf), -1)
    assert torch.allclose(a, b, atol=1e-6)
    # and the difference between the two biases is constant along every row
    diff = (alibi_bias(num_heads, seq_len).double() - key_only).masked_fill(~causal, 0)
    row_constant = -slopes[:, None] * torch.arange(seq_len)  # -m_h * i
    assert torch.allclose(
        diff,
        row_constant[:, :, None].expand_as(diff).masked_fill(~causal, 0),
        atol=1e-4,
    )


@settings(max_examples=30, deadline=None)
@given(num_heads=st.integers(1, 8), seq_len=st.integers(1, 20))
def test_bidirectional_bias_is_symmetric_around_the_query(num_heads, seq_len):
    bias = alibi_bias(num_heads, seq_len, causal=False)
    assert torch.equal(bias, bias.transpose(-1, -2))
    for i in range(seq_len):
        for d in range(1, min(i, seq_len - 1 - i) + 1):
            assert torch.equal(bias[:, i, i - d], bias[:, i, i + d])


def test_bias_is_zero_on_the_diagonal_and_falls_linearly_with_distance():
    bias = alibi_bias(4, 6)
    assert torch.equal(bias.diagonal(dim1=-2, dim2=-1), torch.zeros(4, 6))
    slopes = alibi_slopes(4)
    # one step further back costs exactly one slope
    assert torch.allclose(
        bias[:, 5, :5] - bias[:, 5, 1:6], -slopes[:, None].expand(4, 5)
    )
    # causal future entries are left at 0 (the causal mask removes them)
    assert torch.equal(bias[:, 0, 1:], torch.zeros(4, 5))


def test_alibi_module_holds_the_slopes_once_and_builds_the_same_bias():
    module = ALiBiBias(6)
    assert dict(module.state_dict()) == {}
    # published values for 6 heads: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3
    torch.testing.assert_close(
        module.slopes, 2.0 ** -torch.tensor([2.0, 4, 6, 8, 1, 3])
    )
    torch.testing.assert_close(
        module(3, 5, causal=False), alibi_bias(6, 3, 5, causal=False)
    )
    module.slopes.mul_(2.0)
    torch.testing.assert_close(module(4), 2.0 * alibi_bias(6, 4))


def test_scaled_slopes_scale_every_penalty_and_are_checked():
    """Chapter 9's slope test: slope_scale s gives -s m_h |i - j|, the published
    slopes times s (4 heads at 1/4: 2^-4 .. 2^-10), and a model passes it on."""
    from pe_tutorial.lm.model import ByteTransformer, ModelConfig

    module = ALiBiBias(4, slope_scale=0.25)
    torch.testing.assert_close(module.slopes, 2.0 ** -torch.tensor([4.0, 6, 8, 10]))
    # distance 7 back from query 9 costs 7 slopes, nothing else
    bias = module(10)
    torch.testing.assert_close(
        bias[:, 9, 2], -7 * 2.0 ** -torch.tensor([4.0, 6, 8, 10])
    )
    assert "slope_scale=0.25" in repr(module)
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="slope_scale must be a positive"):
            ALiBiBias(4, slope_scale=bad)
    with pytest.raises(ValueError, match="alibi_slope_scale must be a positive"):
        ModelConfig(scheme="alibi", alibi_slope_scale=0.0)
    model = ByteTransformer(ModelConfig(scheme="alibi", alibi_slope_scale=0.25))
    scaled = [m for m in model.modules() if isinstance(m, ALiBiBias)]
    assert scaled and all(m.slope_scale == 0.25 for m in scaled)
