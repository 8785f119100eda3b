"""One adapter per encoding: how each position encoding enters attention (chapters 7 to 9).

An encoding's own module holds its math and parameters (``RotaryEmbedding``,
``ALiBiBias``, ``T5RelativeBias``, ...). Its scheme here *wraps* that one
module, as ``scheme.encoding``, and adds only the way it reaches the scores,
so every parameter has one source of truth::

    AbsoluteScheme(SinusoidalPositionalEmbedding(d_model))   x + PE[t] at the input
    AbsoluteScheme(LearnedPositionalEmbedding(L, d_model))   the same, learned
    QKTableScheme(LearnedPositionalEmbedding(L, head_dim))   q + P[i], k + P[j]
    RotaryScheme(RotaryEmbedding(head_dim))                  rotate q and k
    ALiBiScheme(ALiBiBias(num_heads))                        -m_h (i - j) on the scores
    T5BiasScheme(T5RelativeBias(num_heads))                  b_h[bucket(j - i)]
    ShawScheme(ShawRelativePosition(K, head_dim))            q_i . a_clip(j - i)
    DisentangledScheme(DisentangledRelativeBias(H, D))       DeBERTa: c2p + p2c
    CoPEScheme(ContextualPositionBias(P, head_dim))          q_i . e[p_ij], causal only

Each scheme records the sizes it was built for, so ``MultiHeadAttention``
rejects one that does not fit (``PositionScheme.check_fits``). Queries are the
last ``q_len`` of the ``k_len`` positions (``pe_tutorial.encodings.positions``), which is
what decoding against a cache needs.
"""

from __future__ import annotations

import math

import torch

from ..encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)
from ..encodings.alibi import ALiBiBias
from ..encodings.disentangled import DisentangledRelativeBias
from ..encodings.positions import query_positions
from ..encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
)
from ..encodings.rope import RotaryEmbedding
from .position_scheme import NoPositionScheme, PositionScheme, ScoreMod

__all__ = [
    "NoPositionScheme",
    "AbsoluteScheme",
    "QKTableScheme",
    "RotaryScheme",
    "ALiBiScheme",
    "T5BiasScheme",
    "ShawScheme",
    "DisentangledScheme",
    "CoPEScheme",
]


def _require_module(scheme: str, encoding, *expected: type) -> None:
    if not isinstance(encoding, expected):
        names = " or ".join(t.__name__ for t in expected)
        raise ValueError(
            f"{scheme} wraps a {names}, got {type(encoding).__name__}; "
            f"for example {scheme}({expected[0].__name__}(...))"
        )


class AbsoluteScheme(PositionScheme):
    """An absolute table added to the input, ``x_t + PE[t]`` (Vaswani et al., 2017; chapter 4).

    Wraps a ``SinusoidalPositionalEmbedding`` or a ``LearnedPositionalEmbedding``
    whose ``dim`` is the model width. In a full model this happens once, at
    the embedding layer; a model may also apply it in every layer (chapter 9).
    A learned table raises for positions past its length.
    """

    def __init__(
        self, encoding: SinusoidalPositionalEmbedding | LearnedPositionalEmbedding
    ):
        super().__init__()
        _require_module(
            "AbsoluteScheme",
            encoding,
            SinusoidalPositionalEmbedding,
            LearnedPositionalEmbedding,
        )
        self.encoding = encoding
        self.d_model = encoding.dim

    def add_to_input(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device)
        # (B, T, d) + (T, d)
        return x + self.encoding(positions).to(x.dtype)


class QKTableScheme(PositionScheme):
    """An absolute table added to every head's queries and keys after projection,
    ``q_i + P[i]`` and ``k_j + P[j]``, in every layer (chapter 4's ``A = I`` case).

    The survey of chapter 9 adds its learned or fixed table this way in each
    layer: the score ``(q_i + P[i]) . (k_j + P[j])`` then holds the content
    term, two content-position terms and ``P[i] . P[j]`` with no projection
    between the two codes. Wraps a ``SinusoidalPositionalEmbedding`` or a
    ``LearnedPositionalEmbedding`` whose ``dim`` is the head's, one table
    shared by every head (and, in a model, every layer). Keys sit at
    ``0 .. k_len - 1``, queries at the last ``q_len`` of those positions.
    """

    def __init__(
        self, encoding: SinusoidalPositionalEmbedding | LearnedPositionalEmbedding
    ):
        super().__init__()
        _require_module(
            "QKTableScheme",
            encoding,
            SinusoidalPositionalEmbedding,
            LearnedPositionalEmbedding,
        )
        self.encoding = encoding
        self.head_dim = encoding.dim

    def rotate(self, q, k):
        k_len = k.shape[-2]
        table = self.encoding(torch.arange(k_len, device=k.device))  # (Tk, D)
        q_rows = table[query_positions(q.shape[-2], k_len, device=q.device)]
        return q + q_rows.to(q.dtype), k + table.to(k.dtype)


class RotaryScheme(PositionScheme):
    """RoPE: rotate q and k by their positions (Su et al., 2024; chapter 6).

    Wraps a ``RotaryEmbedding``, which holds the base, the pairing (checked
    when it is built), ``rotary_dim`` and the cos/sin table. Keys sit at
    ``0 .. k_len - 1`` and queries at the last ``q_len`` of those positions,
    so one decoding step against a cache of ``k_len - 1`` keys rotates its
    query by ``k_len - 1``.
    """

    def __init__(self, encoding: RotaryEmbedding):
        super().__init__()
        _require_module("RotaryScheme", encoding, RotaryEmbedding)
        self.encoding = encoding
        self.head_dim = encoding.head_dim

    def rotate(self, q, k):
        q_len, k_len = q.shape[-2], k.shape[-2]
        q_positions = query_positions(q_len, k_len, device=q.device)  # (Tq,)
        k_positions = torch.arange(k_len, device=k.device)  # (Tk,)
        return self.encoding(q, q_positions), self.encoding(k, k_positions)


class ALiBiScheme(PositionScheme):
    """ALiBi: ``-m_h (i - j)`` on head h's scores, or ``-m_h |i - j|`` (chapter 7).

    Wraps an ``ALiBiBias``; the dense bias and the FlexAttention
    ``score_mod`` both read its one ``slopes`` buffer.
    """

    def __init__(self, encoding: ALiBiBias):
        super().__init__()
        _require_module("ALiBiScheme", encoding, ALiBiBias)
        self.encoding = encoding
        self.num_heads = encoding.num_heads

    def bias(self, q, k, *, causal):
        # (H, Tq, Tk)
        return self.encoding(q.shape[-2], k.shape[-2], causal=causal)

    def score_mod(self, q, k, *, causal) -> ScoreMod:
        slopes = self.encoding.slopes
        # queries are the last q_len positions
        offset = k.shape[-2] - q.shape[-2]

        def alibi(score, b, h, q_idx, kv_idx):
            # i - j
            distance = q_idx + offset - kv_idx
            distance = distance.clamp(min=0) if causal else distance.abs()
            return score - slopes[h] * distance

        return alibi


class T5BiasScheme(PositionScheme):
    """T5's learned bias per head and bucket of ``j - i`` (Raffel et al., 2020; chapter 8).

    Wraps a ``T5RelativeBias``. Whether its buckets are bidirectional is fixed
    when the table is built, as in T5 (encoder: True, decoder: False),
    independently of the causal mask.
    """

    def __init__(self, encoding: T5RelativeBias):
        super().__init__()
        _require_module("T5BiasScheme", encoding, T5RelativeBias)
        self.encoding = encoding
        self.num_heads = encoding.num_heads

    def bias(self, q, k, *, causal):
        return self.encoding(q.shape[-2], k.shape[-2])  # (H, Tq, Tk)

    def score_mod(self, q, k, *, causal) -> ScoreMod:
        q_len, k_len = q.shape[-2], k.shape[-2]
        # (H, Tq + Tk - 1): one value per relative position, O(T) not O(T^2)
        per_distance = self.encoding.relative_bias(q_len, k_len)
        offset = k_len - q_len

        def t5(score, b, h, q_idx, kv_idx):
            # r = j - i sits in column r + (k_len - 1)
            return score + per_distance[h, kv_idx - (q_idx + offset) + (k_len - 1)]

        return t5


class ShawScheme(PositionScheme):
    """Shaw et al.'s clipped relative embeddings, ``q_i . (k_j + a_ij)`` (chapter 8).

    Wraps a ``ShawRelativePosition``, one table of ``2K + 1`` rows shared by
    the heads; the relative part ``q_i . a_ij / sqrt(D)`` is the bias. If the
    encoding has a value table, ``sum_j alpha_ij a^V_ij`` joins the output,
    which needs the probabilities: such a scheme runs on the naive kernel only.
    """

    def __init__(self, encoding: ShawRelativePosition):
        super().__init__()
        _require_module("ShawScheme", encoding, ShawRelativePosition)
        self.encoding = encoding
        self.head_dim = encoding.head_dim
        self.needs_weights = encoding.value_weight is not None

    def value_term(self, weights):
        if not self.needs_weights:
            return None
        return self.encoding.value_term(weights)  # (B, H, Tq, D)

    def bias(self, q, k, *, causal):
        return self.encoding(q, k.shape[-2])  # (B, H, Tq, Tk)

    def score_mod(self, q, k, *, causal) -> ScoreMod:
        K = self.encoding.max_relative_position
        # q_i . w_r / sqrt(D) for the 2K + 1 rows: (B, H, Tq, 2K + 1), O(T K)
        weight = self.encoding.weight.float()
        per_row = (q.float() @ weight.T) / math.sqrt(q.shape[-1])
        offset = k.shape[-2] - q.shape[-2]

        def shaw(score, b, h, q_idx, kv_idx):
            row = (kv_idx - (q_idx + offset)).clamp(-K, K) + K
            return score + per_row[b, h, q_idx, row]

        return shaw


class DisentangledScheme(PositionScheme):
    """DeBERTa's disentangled attention, ``(q.k + c2p + p2c) / sqrt(s D)`` (He et al., 2021; chapter 8).

    Wraps a ``DisentangledRelativeBias``, whose relative terms are the bias.
    DeBERTa divides the content score by ``sqrt(s D)`` too, not ``sqrt(D)``:
    ``rotate`` scales the queries by ``1 / sqrt(s)`` so that every kernel's
    ``q . k / sqrt(D)`` is that score.
    """

    def __init__(self, encoding: DisentangledRelativeBias):
        super().__init__()
        _require_module("DisentangledScheme", encoding, DisentangledRelativeBias)
        self.encoding = encoding
        self.num_heads = encoding.num_heads
        self.head_dim = encoding.head_dim

    def rotate(self, q, k):
        return q / math.sqrt(self.encoding.scale_factor), k

    def bias(self, q, k, *, causal):
        # q arrives scaled by rotate; the relative terms use the layer's own q
        return self.encoding(q * math.sqrt(self.encoding.scale_factor), k)


class CoPEScheme(PositionScheme):
    """CoPE, positions counted by query-dependent gates (Golovneva et al., 2024; chapter 8).

    Wraps a ``ContextualPositionBias``. Causal only. Its positions ``p_ij`` are
    sums over a whole row of gates, so it has no per-score formula: the Flex
    kernel looks its materialised bias up.
    """

    def __init__(self, encoding: ContextualPositionBias):
        super().__init__()
        _require_module("CoPEScheme", encoding, ContextualPositionBias)
        self.encoding = encoding
        self.head_dim = encoding.head_dim

    def bias(self, q, k, *, causal):
        if not causal:
            raise ValueError(
                "CoPE counts the keys between j and i, so it needs causal=True "
                "attention"
            )
        return self.encoding(q, k)  # (B, H, Tq, Tk)
