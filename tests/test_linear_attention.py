"""RoPE in linear attention against a loop over query-key pairs, and its relative property."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.attention.linear_attention import elu_feature_map, linear_attention


def rotate_pair_loop(x, position, base=10000.0):
    """RoPE of one vector, half pairing, with Python floats."""
    D = len(x)
    out = list(x)
    for i in range(D // 2):
        angle = position * base ** (-2 * i / D)
        a, b = x[i], x[i + D // 2]
        out[i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + D // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def loop_reference(q, k, v, *, causal, offset=0):
    """y_i = sum_j (R phi q_i . R phi k_j) v_j / sum_j phi q_i . phi k_j, one pair at a time."""
    phi_q, phi_k = elu_feature_map(q).tolist(), elu_feature_map(k).tolist()
    out = []
    for i, fq in enumerate(phi_q):
        rq = rotate_pair_loop(fq, i + offset)
        numerator = [0.0] * v.shape[-1]
        denominator = 0.0
        for j, fk in enumerate(phi_k):
            if causal and j > i:
                continue
            rk = rotate_pair_loop(fk, j + offset)
            weight = sum(a * b for a, b in zip(rq, rk))
            numerator = [n + weight * float(x) for n, x in zip(numerator, v[j])]
            denominator += sum(a * b for a, b in zip(fq, fk))
        out.append([n / (denominator + 1e-6) for n in numerator])
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_the_loop(causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(7, 8, generator=g, dtype=torch.float64) for _ in range(3))
    out = linear_attention(q, k, v, causal=causal)
    torch.testing.assert_close(out, loop_reference(q, k, v, causal=causal))


@settings(max_examples=20, deadline=None)
@given(shift=st.integers(1, 5000), causal=st.booleans())
def test_shifting_every_position_changes_nothing(shift, causal):
    """The numerator's weights depend on j - i only, and the denominator on no position."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(2, 6, 16, generator=g, dtype=torch.float64) for _ in range(3)
    )
    positions = torch.arange(6)
    base = linear_attention(q, k, v, causal=causal)
    moved = linear_attention(
        q,
        k,
        v,
        causal=causal,
        q_positions=positions + shift,
        k_positions=positions + shift,
    )
    # the angles p * theta are formed in float32 (chapter 6): each is off by up to
    # half an ulp, about p * 2^-24 radians for theta <= 1, in q and in k; a wrong
    # relative property moves the output by O(1), far above this
    tol = 1e-5 + 4 * (shift + 6) * 2**-24
    torch.testing.assert_close(moved, base, rtol=tol, atol=tol)


def test_without_rope_the_output_ignores_order():
    """Plain linear attention (non-causal) is permutation-equivariant, like softmax attention."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    perm = torch.tensor([3, 1, 4, 0, 2])
    plain = linear_attention(q, k, v, rope=False)
    permuted = linear_attention(q[perm], k[perm], v[perm], rope=False)
    torch.testing.assert_close(permuted, plain[perm])
    with_rope = linear_attention(q[perm], k[perm], v[perm])
    assert not torch.allclose(with_rope, linear_attention(q, k, v)[perm])


def test_bad_shapes_say_what_is_wrong():
    with pytest.raises(ValueError, match="do not fit"):
        linear_attention(torch.randn(3, 8), torch.randn(3, 6), torch.randn(3, 4))
    with pytest.raises(ValueError, match="as many queries as keys"):
        linear_attention(
            torch.randn(2, 8), torch.randn(3, 8), torch.randn(3, 4), causal=True
        )
