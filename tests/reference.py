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

from pe_tutorial.attention.core import KERNELS, flex_available
from pe_tutorial.attention.layer_patterns import (
    LocalAttentionScheme,
    TemperedNoPEScheme,
)
from pe_tutorial.attention.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    QKTableScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from pe_tutorial.encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)
from pe_tutorial.encodings.relative import t5_relative_position_bucket
from pe_tutorial.encodings.rope import apply_rope

# every kernel this torch can run
AVAILABLE_KERNELS = KERNELS if flex_available() else ("naive", "sdpa")


def softmax_attention(q, k, v, bias=None, mask=None):
    """softmax(q k^T / sqrt(D) + bias) v in float64, rows with no visible key give zeros.

    q: (..., Tq, D), k and v: (..., Tk, D); bias and mask broadcast to (..., Tq, Tk).
    """
    return softmax_weights(q, k, bias, mask) @ v.double()


def softmax_weights(q, k, bias=None, mask=None):
    """softmax(q k^T / sqrt(D) + bias) in float64, (..., Tq, Tk); rows with no visible key are 0."""
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
    return weights


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
    biased = (ALiBiScheme, T5BiasScheme, ShawScheme, CoPEScheme, DisentangledScheme)
    if not isinstance(scheme, biased):
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
            elif isinstance(scheme, DisentangledScheme):
                out[:, r, j] = deberta_score(scheme.encoding, q[:, r], k[:, j], i, j, h)
                # the softmax below adds q.k / sqrt(D); DeBERTa's is q.k / sqrt(s D)
                out[:, r, j] -= (q[:, r] * k[:, j]).sum(-1) / math.sqrt(head_dim)
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


def deberta_row(table, distance):
    """d(i, j) for i - j = distance: DeBERTa's log bucket (if any), shifted and clipped."""
    span = table.span
    if table.position_buckets is not None:
        mid = table.position_buckets // 2
        n = abs(distance)
        if n > mid:
            ratio = math.log(n / mid) / math.log(
                (table.max_relative_positions - 1) / mid
            )
            distance = int(math.copysign(mid + math.ceil(ratio * (mid - 1)), distance))
    return min(max(distance + span, 0), 2 * span - 1)


def deberta_score(table, q_i, k_j, i, j, h):
    """DeBERTa's whole score (q.k + q.K_r[d] + k.Q_r[d]) / sqrt(s D) for head h, (B,) float64.

    The relative vectors are rebuilt from the table's embeddings and projections
    by hand: K_r = P W_kr^T + b_kr, split into heads by columns h D .. (h+1) D.
    """
    D = table.head_dim
    cols = slice(h * D, (h + 1) * D)
    s = 1 + (table.key_proj is not None) + (table.query_proj is not None)
    row = table.embeddings[deberta_row(table, i - j)].double()
    score = (q_i * k_j).sum(-1)
    if table.key_proj is not None:
        w, b = table.key_proj.weight.double(), table.key_proj.bias.double()
        score = score + q_i @ (row @ w.T + b)[cols]
    if table.query_proj is not None:
        w, b = table.query_proj.weight.double(), table.query_proj.bias.double()
        score = score + k_j @ (row @ w.T + b)[cols]
    return score / math.sqrt(s * D)


def shaw_value_loop(scheme, weights, q_len, k_len):
    """sum_j alpha_ij a^V[clip(j - i, -K, K) + K] with explicit positions, (..., Tq, D) float64."""
    table = scheme.encoding.value_weight.double()
    K = scheme.encoding.max_relative_position
    out = torch.zeros(*weights.shape[:-1], table.shape[-1], dtype=torch.float64)
    for r in range(q_len):
        i = k_len - q_len + r
        for j in range(k_len):
            row = table[min(max(j - i, -K), K) + K]
            out[..., r, :] += weights[..., r, j, None] * row
    return out


def window_visibility(scheme, q_len, k_len):
    """(Tq, Tk) boolean: a local layer's window with explicit positions; all True otherwise.

    Sliding: i - w < j; chunked: i // w == j // w (Gemma 3's and Llama 4's).
    """
    visible = torch.ones(q_len, k_len, dtype=torch.bool)
    if not isinstance(scheme, LocalAttentionScheme):
        return visible
    w = scheme.window
    for r in range(q_len):
        i = k_len - q_len + r
        for j in range(k_len):
            if scheme.kind == "sliding":
                visible[r, j] = j > i - w
            else:
                visible[r, j] = i // w == j // w
    return visible


def rotated(scheme, q, k):
    """q and k (..., T, D) rotated as RoPE prescribes, with explicit positions; others unchanged.

    A local layer rotates as its inner scheme; Llama 4's NoPE layer scales the
    query at i by 1 + a ln(1 + floor((i + 1) / f)).
    """
    if isinstance(scheme, LocalAttentionScheme):
        return rotated(scheme.inner, q, k)
    if isinstance(scheme, TemperedNoPEScheme):
        q_len, k_len = q.shape[-2], k.shape[-2]
        scale = [
            1
            + scheme.attn_scale * math.log(1 + math.floor((i + 1) / scheme.floor_scale))
            for i in range(k_len - q_len, k_len)
        ]
        return q * torch.tensor(scale, dtype=q.dtype)[:, None], k
    if isinstance(scheme, QKTableScheme):
        # the table's rows for positions 0 .. k_len - 1; queries are the last q_len
        q_len, k_len = q.shape[-2], k.shape[-2]
        table = table_rows(scheme.encoding, k_len, scheme.head_dim).to(q.dtype)
        return q + table[k_len - q_len :], k + table
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
    return x + table_rows(scheme.encoding, T, d)


def table_rows(table, T: int, d: int) -> torch.Tensor:
    """Rows 0 .. T - 1 of an absolute table of width d: a learned table's weights,
    or the sinusoidal code written out, sin and cos of p / base^(2i/d)."""
    if isinstance(table, LearnedPositionalEmbedding):
        return table.weight[:T]
    assert isinstance(table, SinusoidalPositionalEmbedding)
    pe = torch.zeros(T, d)
    for p in range(T):
        for i in range(d // 2):
            angle = p / table.base ** (2 * i / d)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def scheme_attention(scheme, q, k, v, *, causal, mask=None):
    """Attention with a scheme, head by head, from the references above: (B, H, Tq, D) float64."""
    q_rot, k_rot = rotated(scheme, q, k)
    visible = causal_visibility(q.shape[-2], k.shape[-2]) if causal else None
    if isinstance(scheme, LocalAttentionScheme):
        visible = visible & window_visibility(scheme, q.shape[-2], k.shape[-2])
    heads = []
    for h in range(q.shape[1]):
        bias = head_bias(scheme, q_rot[:, h], k_rot[:, h], h, causal=causal)
        head_mask = visible
        if mask is not None:
            m = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])[:, h]
            head_mask = m if head_mask is None else m & head_mask
        weights = softmax_weights(q_rot[:, h], k_rot[:, h], bias, head_mask)
        out = weights @ v[:, h].double()
        if isinstance(scheme, ShawScheme) and scheme.encoding.value_weight is not None:
            out = out + shaw_value_loop(scheme, weights, q.shape[-2], k.shape[-2])
        heads.append(out)
    return torch.stack(heads, dim=1)


def llama4_nope_layer(*, floor_scale: int, attn_scale: float, seed: int = 0):
    """transformers' Llama 4 attention as a NoPE layer with temperature tuning, eager,
    32 wide with two heads of 16 (skips the test when transformers is absent)."""
    import pytest

    transformers = pytest.importorskip("transformers")
    from transformers.models.llama4 import modeling_llama4

    config = transformers.Llama4TextConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=1,
        no_rope_layers=[0],  # 0: a NoPE layer, where the temperature tuning acts
        attn_temperature_tuning=True,
        floor_scale=floor_scale,
        attn_scale=attn_scale,
        attention_bias=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return modeling_llama4.Llama4TextAttention(config, layer_idx=0).eval()
