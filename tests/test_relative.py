"""Tests for pe_tutorial.encodings.relative: T5 buckets (published values, a loop), Shaw's clipped table, CoPE."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.attention.core import AttentionConfig, MultiHeadAttention
from pe_tutorial.attention.schemes import ShawScheme
from pe_tutorial.encodings.positions import relative_positions
from pe_tutorial.encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
    cope_bias,
    cope_positions,
    shaw_relative_indices,
    shaw_relative_scores,
    shaw_value_term,
    t5_relative_position_bucket,
    t5_untrained_share,
)

# ---------------------------------------------------------------------------
# T5 buckets
# ---------------------------------------------------------------------------

REL = torch.tensor([-200, -128, -20, -8, -1, 0, 1, 8, 20, 128, 200])


def test_t5_buckets_match_published_values_bidirectional():
    got = t5_relative_position_bucket(
        REL, bidirectional=True, num_buckets=32, max_distance=128
    )
    assert got.dtype == torch.int64
    assert got.tolist() == [15, 15, 10, 8, 1, 0, 17, 24, 26, 31, 31]


def test_t5_buckets_match_published_values_causal():
    got = t5_relative_position_bucket(
        REL, bidirectional=False, num_buckets=32, max_distance=128
    )
    assert got.tolist() == [31, 31, 17, 8, 1, 0, 0, 0, 0, 0, 0]


def reference_bucket(r, bidirectional, num_buckets, max_distance):
    """T5's rule for one integer, in Python floats; also says whether the log term sits on an integer edge."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if r > 0 else 0
        n = abs(r)
    else:
        n = max(-r, 0)
    exact = num_buckets // 2
    if n < exact:
        return bucket + n, False
    value = math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    # float32 (as in T5) may round either way here
    on_edge = abs(value - round(value)) < 1e-4
    return bucket + min(exact + int(value), num_buckets - 1), on_edge


@settings(max_examples=30, deadline=None)
@given(half=st.integers(2, 32), bidirectional=st.booleans(), extra=st.integers(1, 300))
def test_t5_buckets_match_a_loop(half, bidirectional, extra):
    num_buckets = 2 * half
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = exact + extra
    r = torch.arange(-2 * max_distance - 5, 2 * max_distance + 6)
    got = t5_relative_position_bucket(
        r,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    for value, bucket in zip(r.tolist(), got.tolist()):
        expected, on_edge = reference_bucket(
            value, bidirectional, num_buckets, max_distance
        )
        assert bucket == expected or (on_edge and abs(bucket - expected) == 1), (
            value,
            bucket,
            expected,
        )


@settings(max_examples=30, deadline=None)
@given(half=st.integers(2, 32), bidirectional=st.booleans(), extra=st.integers(1, 300))
def test_t5_buckets_are_in_range_and_monotone_in_distance(half, bidirectional, extra):
    num_buckets = 2 * half
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = exact + extra
    kwargs = dict(
        bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    distance = torch.arange(0, 3 * max_distance)
    past = t5_relative_position_bucket(-distance, **kwargs)
    assert bool((past >= 0).all() and (past < num_buckets).all())
    # farther back never maps to a nearer bucket
    assert bool((past[1:] >= past[:-1]).all())
    assert torch.equal(past[:exact], distance[:exact])  # small distances are exact
    # far away: the last bucket
    assert past[-1] == (num_buckets // 2 if bidirectional else num_buckets) - 1
    future = t5_relative_position_bucket(distance, **kwargs)
    if bidirectional:
        upper = future[1:] - num_buckets // 2
        assert bool((upper >= 1).all() and (upper < num_buckets // 2).all())
        assert bool((future[1:][1:] >= future[1:][:-1]).all())
        # the two directions use the same bucket edges
        assert torch.equal(upper, past[1:])
    else:
        assert bool((future == 0).all())  # a causal model never looks ahead


@pytest.mark.parametrize("num_buckets", [3, 2, 0, -4, 31, 2.0])
def test_t5_rejects_bad_num_buckets(num_buckets):
    with pytest.raises(ValueError, match="num_buckets must be an even integer >= 4"):
        t5_relative_position_bucket(REL, num_buckets=num_buckets)


@pytest.mark.parametrize(
    "bidirectional, num_buckets, max_distance",
    [(True, 32, 8), (True, 32, 3), (False, 32, 16)],
)
def test_t5_rejects_max_distance_inside_the_exact_range(
    bidirectional, num_buckets, max_distance
):
    with pytest.raises(
        ValueError, match="max_distance must be an integer larger than the exact range"
    ):
        t5_relative_position_bucket(
            REL,
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
    with pytest.raises(ValueError, match="larger than the exact range"):
        T5RelativeBias(
            4,
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )


def test_t5_rejects_float_relative_positions():
    with pytest.raises(ValueError, match="integer tensor"):
        t5_relative_position_bucket(REL.float())


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("q_len, k_len", [(7, 7), (3, 9), (1, 5)])
def test_t5_bias_module_matches_a_loop(bidirectional, q_len, k_len):
    torch.manual_seed(0)
    module = T5RelativeBias(
        3, bidirectional=bidirectional, num_buckets=8, max_distance=10
    )
    bias = module(q_len, k_len)
    assert bias.shape == (3, q_len, k_len)
    offset = k_len - q_len
    for h in range(3):
        for row in range(q_len):
            for j in range(k_len):
                bucket, _ = reference_bucket(j - (row + offset), bidirectional, 8, 10)
                assert bias[h, row, j] == module.weight[bucket, h]
    # the per-distance vector holds the same values (what the Flex path indexes)
    per_distance = module.relative_bias(q_len, k_len)
    assert per_distance.shape == (3, q_len + k_len - 1)
    rel = relative_positions(q_len, k_len)
    assert torch.equal(per_distance[:, rel + k_len - 1], bias)


def test_relative_positions_are_key_minus_query():
    rel = relative_positions(2, 4)  # queries at positions 2 and 3
    assert rel.tolist() == [[-2, -1, 0, 1], [-3, -2, -1, 0]]


# ---------------------------------------------------------------------------
# Shaw et al.
# ---------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(k_len=st.integers(1, 12), q_drop=st.integers(0, 11), K=st.integers(0, 6))
def test_shaw_indices_clip_key_minus_query(k_len, q_drop, K):
    q_len = max(1, k_len - q_drop)
    index = shaw_relative_indices(q_len, k_len, K)
    offset = k_len - q_len
    for row in range(q_len):
        for j in range(k_len):
            assert index[row, j] == min(max(j - (row + offset), -K), K) + K


@settings(max_examples=30, deadline=None)
@given(
    k_len=st.integers(1, 10),
    q_drop=st.integers(0, 9),
    K=st.integers(0, 5),
    seed=st.integers(0, 2**16),
)
def test_shaw_scores_match_a_loop_over_i_and_j(k_len, q_drop, K, seed):
    torch.manual_seed(seed)
    q_len = max(1, k_len - q_drop)
    D = 4
    q = torch.randn(2, 3, q_len, D)
    table = torch.randn(2 * K + 1, D)
    got = shaw_relative_scores(q, table, k_len)
    assert got.shape == (2, 3, q_len, k_len)
    offset = k_len - q_len
    for row in range(q_len):
        for j in range(k_len):
            a_ij = table[min(max(j - (row + offset), -K), K) + K]
            assert torch.allclose(
                got[:, :, row, j], q[:, :, row] @ a_ij / math.sqrt(D), atol=1e-5
            )


def test_shaw_clipping_gives_far_keys_the_edge_rows():
    torch.manual_seed(0)
    module = ShawRelativePosition(2, 4)
    q = torch.randn(1, 1, 10, 4)
    bias = module(q)
    # every key 2 or more positions back from query 9 shares row 0, so its bias is the same
    assert torch.allclose(bias[0, 0, 9, :8], bias[0, 0, 9, 7].expand(8))
    # inside the window they differ
    assert not torch.allclose(bias[0, 0, 9, 7], bias[0, 0, 9, 8])
    # and the module works for any length: no row for length 1000 is needed
    assert module(torch.randn(1, 1, 1000, 4)).shape == (1, 1, 1000, 1000)


@pytest.mark.parametrize("K", [-1, -5, 1.5, True])
def test_shaw_rejects_negative_or_non_integer_K(K):
    with pytest.raises(ValueError, match="max_relative_position"):
        ShawRelativePosition(K, 8)
    with pytest.raises(ValueError, match="max_relative_position"):
        shaw_relative_indices(4, 4, K)


def test_shaw_rejects_a_table_that_does_not_match_q():
    with pytest.raises(ValueError, match="head_dim"):
        shaw_relative_scores(torch.randn(1, 1, 4, 8), torch.randn(5, 6))
    with pytest.raises(ValueError, match=r"\(2K \+ 1, head_dim\)"):
        shaw_relative_scores(torch.randn(1, 1, 4, 8), torch.randn(4, 8))


# ---------------------------------------------------------------------------
# CoPE
# ---------------------------------------------------------------------------


def naive_cope(q, k, table):
    """p_ij = sum_{t=j}^{i} sigmoid(q_i . k_t / sqrt(D)), bias = q_i . interp(e, p_ij) / sqrt(D), in loops."""
    q_len, k_len, D = q.shape[0], k.shape[0], q.shape[1]
    offset = k_len - q_len
    P = table.shape[0]
    positions = torch.zeros(q_len, k_len, dtype=torch.float64)
    bias = torch.zeros(q_len, k_len, dtype=torch.float64)
    for row in range(q_len):
        i = row + offset
        for j in range(i + 1):
            p = sum(
                torch.sigmoid(q[row] @ k[t] / math.sqrt(D)).item()
                for t in range(j, i + 1)
            )
            p = min(p, P - 1)
            positions[row, j] = p
            low, high = math.floor(p), math.ceil(p)
            e = (1 - (p - low)) * table[low] + (p - low) * table[high]
            bias[row, j] = (q[row] @ e).item() / math.sqrt(D)
    return positions, bias


@settings(max_examples=20, deadline=None)
@given(
    k_len=st.integers(1, 8),
    q_drop=st.integers(0, 7),
    num_positions=st.integers(1, 10),
    seed=st.integers(0, 2**16),
)
def test_cope_matches_a_loop(k_len, q_drop, num_positions, seed):
    torch.manual_seed(seed)
    q_len = max(1, k_len - q_drop)
    q, k = (
        torch.randn(q_len, 4, dtype=torch.float64) * 2,
        torch.randn(k_len, 4, dtype=torch.float64) * 2,
    )
    table = torch.randn(num_positions, 4, dtype=torch.float64)
    positions, bias = naive_cope(q, k, table)
    got_positions = cope_positions(q, k, max_position=num_positions - 1).double()
    got_bias = cope_bias(q, k, table).double()
    offset = k_len - q_len
    # j <= i
    causal = torch.arange(k_len)[None, :] <= (torch.arange(q_len) + offset)[:, None]
    assert torch.allclose(got_positions * causal, positions, atol=1e-5)
    assert torch.allclose(got_bias * causal, bias, atol=1e-5)


def released_cope_logits(q, k, pos_emb, *, nodiv=False):
    """The attention logits of CoPE's released code (facebookresearch/RAM,
    ``projects/cope/src/cope/context_position.py``, one head, causal), written
    out again: gates ``sigmoid(q k^T / sqrt(D))``, positions summed from the
    right, ``q . e`` interpolated; by default ``(q k^T + q . e[p]) / sqrt(D)``,
    with ``nodiv`` (``--cope-nodiv``, the paper's listing) ``q . e[p]`` undivided."""
    L, D = q.shape
    mask = torch.ones(L, L, dtype=q.dtype).tril()
    gate_logits = q @ k.T
    gates = torch.sigmoid(gate_logits / math.sqrt(D)) * mask
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1).clamp(max=pos_emb.shape[1] - 1)
    fixed = q @ pos_emb  # (L, npos)
    ceil, floor = positions.ceil().long(), positions.floor().long()
    weight = positions - floor
    pos_logits = fixed.gather(-1, ceil) * weight + fixed.gather(-1, floor) * (
        1 - weight
    )
    if nodiv:
        return gate_logits / math.sqrt(D) + pos_logits
    return (gate_logits + pos_logits) / math.sqrt(D)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cope_scales_the_position_term_as_the_released_code_does(seed):
    # chapter 8: the package divides q . e[p] by sqrt(D), the released code's
    # default; the paper's listing (--cope-nodiv) gives the same with e / sqrt(D)
    torch.manual_seed(seed)
    L, D, npos = 9, 8, 6
    q, k = torch.randn(2, L, D, dtype=torch.float64) * 2
    table = torch.randn(npos, D, dtype=torch.float64)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    ours = q @ k.T / math.sqrt(D) + cope_bias(q, k, table).double()
    released = released_cope_logits(q, k, table.T)
    assert torch.allclose(ours[causal], released[causal], atol=1e-5)
    listing = released_cope_logits(q, k, table.T / math.sqrt(D), nodiv=True)
    assert torch.allclose(ours[causal], listing[causal], atol=1e-5)
    # the undivided form with the same table is a different score
    undivided = released_cope_logits(q, k, table.T, nodiv=True)
    assert not torch.allclose(ours[causal], undivided[causal], atol=1e-3)


def test_cope_positions_count_gates_backwards_from_the_query():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
    p = cope_positions(q, k)
    lower = torch.ones(12, 12, dtype=torch.bool).tril()
    distance_plus_one = (
        torch.arange(12)[:, None] - torch.arange(12)[None, :] + 1
    ).float()
    # 0 < p_ij <= i - j + 1 (each gate is in (0, 1)), and 0 above the diagonal
    assert bool(
        (p[..., lower] > 0).all()
        and (p[..., lower] <= distance_plus_one[lower] + 1e-6).all()
    )
    assert bool((p[..., ~lower] == 0).all())
    # strictly decreasing in j for a fixed query: each step back adds a positive gate
    for i in range(1, 12):
        assert bool((p[..., i, :i] > p[..., i, 1 : i + 1]).all())
    # with gates pushed to 1 (large aligned q, k) the count becomes the token distance i - j + 1
    big = torch.ones(1, 1, 6, 4) * 10
    assert torch.allclose(
        cope_positions(big, big)[0, 0][torch.ones(6, 6, dtype=torch.bool).tril()],
        (torch.arange(6)[:, None] - torch.arange(6) + 1).float()[
            torch.ones(6, 6, dtype=torch.bool).tril()
        ],
    )


def test_cope_positions_depend_on_the_query():
    torch.manual_seed(1)
    q, k = torch.randn(1, 1, 6, 4), torch.randn(1, 1, 6, 4)
    module = ContextualPositionBias(8, 4)
    other_q = q.clone()
    other_q[..., 5, :] = -other_q[..., 5, :]
    assert not torch.allclose(
        cope_positions(q, k)[..., 5, :], cope_positions(other_q, k)[..., 5, :]
    )
    assert module(q, k).shape == (1, 1, 6, 6)


def test_cope_rejects_a_table_of_the_wrong_width():
    with pytest.raises(ValueError, match="table must have shape"):
        cope_bias(torch.randn(3, 4), torch.randn(3, 4), torch.randn(5, 6))


# ---------------------------------------------------------------------------
# Shaw et al.'s value-side table
# ---------------------------------------------------------------------------


def test_shaw_value_term_of_one_hot_weights_is_the_row_of_that_distance():
    """With all of query i's weight on key j, the term is a^V[clip(j - i, -K, K) + K]."""
    K, D = 2, 3
    table = torch.arange((2 * K + 1) * D, dtype=torch.float32).view(2 * K + 1, D)
    for i in range(6):
        for j in range(6):
            weights = torch.zeros(6, 6)
            weights[i, j] = 1.0
            got = shaw_value_term(weights, table)[i]
            assert torch.equal(got, table[min(max(j - i, -K), K) + K])


def test_shaw_value_term_averages_rows_by_the_weights():
    table = torch.randn(5, 4)
    weights = torch.softmax(torch.randn(2, 3, 7, 7), dim=-1)
    index = shaw_relative_indices(7, 7, 2)
    expected = (weights[..., None] * table[index]).sum(-2)
    torch.testing.assert_close(shaw_value_term(weights, table), expected)


def test_a_value_table_needs_the_naive_kernel_and_says_so():
    scheme = ShawScheme(ShawRelativePosition(2, 4, values=True))
    with pytest.raises(ValueError, match="kernel='naive'"):
        MultiHeadAttention(AttentionConfig(8, 2), scheme)
    MultiHeadAttention(AttentionConfig(8, 2, kernel="naive"), scheme)
    with pytest.raises(ValueError, match="values=True"):
        ShawRelativePosition(2, 4).value_term(torch.ones(3, 3))


@pytest.mark.parametrize(
    "train_length, length, max_distance",
    [(128, 1024, 128), (128, 1024, 1024), (8, 40, 32)],
)
def test_t5_untrained_share_matches_a_loop_over_pairs(
    train_length, length, max_distance
):
    def bucket(d):
        return reference_bucket(-d, False, 32, max_distance)[0]

    trained = {bucket(d) for d in range(train_length)}
    pairs = [(i, j) for i in range(length) for j in range(i + 1)]
    expected = sum(bucket(i - j) not in trained for i, j in pairs) / len(pairs)
    got = t5_untrained_share(train_length, length, max_distance=max_distance)
    assert got == pytest.approx(expected)


def test_t5_untrained_share_values_chapter_9_reads():
    # with max_distance at the training length, distance L - 1 already reaches
    # the last bucket, so nothing is untrained
    assert t5_untrained_share(128, 1024, max_distance=128) == 0
    assert t5_untrained_share(128, 1024, max_distance=1024) > 0.5
    with pytest.raises(ValueError, match="train_length"):
        t5_untrained_share(0, 8)
