"""Independent references for the glue between encodings and attention, shared by the tests.

Everything here is written from the papers' formulas with plain loops and
explicit absolute positions (a query row r of q_len against k_len keys sits at
i = k_len - q_len + r), never through the scheme classes' own code paths, so a
mistake in how a scheme places its queries, reads its parameters or enters the
scores shows up as a difference.
"""

from __future__ import annotations

import math

import torch

from pe_tutorial.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)
from pe_tutorial.attention import KERNELS, flex_available
from pe_tutorial.relative import t5_relative_position_bucket
from pe_tutorial.rope import apply_rope
from pe_tutorial.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)

# every kernel this torch can run
AVAILABLE_KERNELS = KERNELS if flex_available() else ("naive", "sdpa")


def softmax_attention(q, k, v, bias=None, mask=None):
    """softmax(q k^T / sqrt(D) + bias) v in float64, rows with no visible key give zeros.

    q: (..., Tq, D), k and v: (..., Tk, D); bias and mask broadcast to (..., Tq, Tk).
    """
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.double()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(
            mask.any(-1, keepdim=True), weights, torch.zeros_like(weights)
        )
    return weights @ v.double()


def causal_visibility(q_len, k_len):
    """(Tq, Tk) boolean: query row r at position k_len - q_len + r sees keys j <= that position."""
    visible = torch.zeros(q_len, k_len, dtype=torch.bool)
    for r in range(q_len):
        visible[r, : k_len - q_len + r + 1] = True
    return visible


def alibi_slope(h, num_heads):
    """m_h = 2^(-8 (h + 1) / n) for n a power of two (Press et al., 2022)."""
    assert num_heads & (num_heads - 1) == 0, "the closed form holds for powers of two"
    return 2.0 ** (-8.0 * (h + 1) / num_heads)


def head_bias(scheme, q, k, h, *, causal):
    """The bias a scheme adds to head h's scores, by the papers' formulas, (B, Tq, Tk) float64.

    q: (B, Tq, D) and k: (B, Tk, D) are head h's (already rotated) queries and keys.
    Returns None for schemes that add no bias. Keys after the query (causal) get 0.
    """
    if not isinstance(scheme, (ALiBiScheme, T5BiasScheme, ShawScheme, CoPEScheme)):
        return None
    batch, q_len, head_dim = q.shape
    k_len = k.shape[1]
    out = torch.zeros(batch, q_len, k_len, dtype=torch.float64)
    q, k = q.double(), k.double()
    for r in range(q_len):
        i = k_len - q_len + r  # the query's absolute position
        for j in range(k_len):
            if causal and j > i:
                continue
            if isinstance(scheme, ALiBiScheme):
                slope = alibi_slope(h, scheme.encoding.num_heads)
                out[:, r, j] = -slope * (i - j if causal else abs(i - j))
            elif isinstance(scheme, T5BiasScheme):
                table = scheme.encoding
                bucket = t5_relative_position_bucket(
                    torch.tensor(j - i),
                    bidirectional=table.bidirectional,
                    num_buckets=table.num_buckets,
                    max_distance=table.max_distance,
                )
                out[:, r, j] = table.weight[bucket, h].double()
            elif isinstance(scheme, ShawScheme):
                K = scheme.encoding.max_relative_position
                a_ij = scheme.encoding.weight[min(max(j - i, -K), K) + K].double()
                out[:, r, j] = q[:, r] @ a_ij / math.sqrt(head_dim)
            else:  # CoPE: p_ij = sum_{t=j}^{i} sigmoid(q_i . k_t / sqrt(D)), e interpolated
                table = scheme.encoding.weight.double()
                for b in range(batch):
                    gates = [
                        torch.sigmoid(q[b, r] @ k[b, t] / math.sqrt(head_dim)).item()
                        for t in range(j, i + 1)
                    ]
                    p = min(sum(gates), table.shape[0] - 1)
                    low, high = math.floor(p), math.ceil(p)
                    e = (1 - (p - low)) * table[low] + (p - low) * table[high]
                    out[b, r, j] = q[b, r] @ e / math.sqrt(head_dim)
    return out


def rotated(scheme, q, k):
    """q and k (..., T, D) rotated as RoPE prescribes, with explicit positions; others unchanged."""
    if not isinstance(scheme, RotaryScheme):
        return q, k
    rope = scheme.encoding
    q_len, k_len = q.shape[-2], k.shape[-2]
    options = dict(base=rope.base, pairing=rope.pairing, rotary_dim=rope.rotary_dim)
    # queries are the last q_len of the k_len positions
    return (
        apply_rope(q, torch.arange(k_len - q_len, k_len), **options),
        apply_rope(k, torch.arange(k_len), **options),
    )


def with_positions_added(scheme, x):
    """x (B, T, d) plus the absolute table of positions 0..T-1, written out; others unchanged."""
    if not isinstance(scheme, AbsoluteScheme):
        return x
    T, d = x.shape[-2:]
    table = scheme.encoding
    if isinstance(table, LearnedPositionalEmbedding):
        return x + table.weight[:T]
    assert isinstance(table, SinusoidalPositionalEmbedding)
    pe = torch.zeros(T, d)
    for p in range(T):
        for i in range(d // 2):
            angle = p / table.base ** (2 * i / d)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return x + pe


def scheme_attention(scheme, q, k, v, *, causal, mask=None):
    """Attention with a scheme, head by head, from the references above: (B, H, Tq, D) float64."""
    q_rot, k_rot = rotated(scheme, q, k)
    visible = causal_visibility(q.shape[-2], k.shape[-2]) if causal else None
    heads = []
    for h in range(q.shape[1]):
        bias = head_bias(scheme, q_rot[:, h], k_rot[:, h], h, causal=causal)
        head_mask = visible
        if mask is not None:
            m = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])[:, h]
            head_mask = m if head_mask is None else m & head_mask
        heads.append(
            softmax_attention(q_rot[:, h], k_rot[:, h], v[:, h], bias, head_mask)
        )
    return torch.stack(heads, dim=1)
