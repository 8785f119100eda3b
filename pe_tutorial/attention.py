"""Attention, from the written-out reference to multi-head attention with a pluggable position scheme.

``dot_product_attention`` is ``softmax(q k^T / sqrt(head_dim) + bias) v`` with
an optional boolean mask, written out: the reference every faster path is
checked against. Chapter 1 (``book/01_why_position``) uses it to show that
attention without positions cannot tell word order.

The rest of the module (chapters 7 and 8) lets every position method of the
book plug into one attention. A ``PositionScheme`` does at most three things:
add a vector to the input (absolute tables), rotate q and k (RoPE), or add a
bias to the scores (ALiBi, T5, Shaw, CoPE). ``attend`` runs it through one of
three kernels that agree within float tolerance:

- ``"naive"``: the explicit softmax above, with the bias materialised;
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the
  bias (and mask) materialised as its float ``attn_mask``;
- ``"flex"``: FlexAttention (Dong et al., 2024) with a ``score_mod`` that
  computes the bias from ``(batch, head, q_idx, kv_idx)``, so no
  ``(seq x seq)`` bias is stored (only CoPE still needs one).

Tensors use the book's layout ``(batch, heads, seq, head_dim)``. Masks are
boolean, True where a query may attend to a key; a query with no key left
gets zeros, never NaN, in every kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import require_positive_float, require_positive_int
from .absolute import sinusoidal_at
from .alibi import alibi_bias, alibi_slopes
from .positions import query_positions, relative_positions
from .relative import ContextualPositionBias, ShawRelativePosition, T5RelativeBias

__all__ = [
    "dot_product_attention",
    "attention_weights",
    "Kernel",
    "KERNELS",
    "flex_available",
    "padding_mask",
    "PositionScheme",
    "NoPosition",
    "AbsolutePosition",
    "RotaryPosition",
    "ALiBiPosition",
    "T5Position",
    "ShawPosition",
    "ContextualPosition",
    "attend",
    "AttentionConfig",
    "MultiHeadAttention",
]


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None) -> None:
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(f"q and k need shape (..., seq, head_dim), got {tuple(q.shape)} and {tuple(k.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share head_dim, got {q.shape[-1]} and {k.shape[-1]}")
    if v is not None and v.shape[-2] != k.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys, got {k.shape[-2]} and {v.shape[-2]}")


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention probabilities ``softmax(q k^T / sqrt(D) + bias)``, shape ``(..., q_len, k_len)``.

    ``bias`` is added to the scores and must broadcast to ``(..., q_len, k_len)``.
    ``mask`` is boolean, True where a query may attend to a key. A query whose
    keys are all masked gets a row of zeros (not NaN).
    """
    _check_qkv(q, k, None)
    q_len, k_len = q.shape[-2], k.shape[-2]
    # s_ij = q_i . k_j / sqrt(D), in float32 whatever the input dtype
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    for name, extra in (("bias", bias), ("mask", mask)):
        if extra is not None and extra.shape[-2:] not in ((q_len, k_len), (1, k_len), (q_len, 1), (1, 1)):
            raise ValueError(
                f"{name} must broadcast to (..., q_len={q_len}, k_len={k_len}), got shape {tuple(extra.shape)}"
            )
    if bias is not None:
        scores = scores + bias.float()
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # rows with every key masked are NaN after softmax; they attend to nothing
    return torch.nan_to_num(weights, nan=0.0)


def dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Naive attention ``softmax(q k^T / sqrt(D) + bias) v``, shape ``(..., q_len, v_dim)``, in q's dtype."""
    _check_qkv(q, k, v)
    weights = attention_weights(q, k, bias=bias, mask=mask)
    return (weights @ v.float()).to(q.dtype)


# ---------------------------------------------------------------------------
# masks and kernels
# ---------------------------------------------------------------------------

Kernel = Literal["naive", "sdpa", "flex"]
KERNELS: tuple[str, ...] = ("naive", "sdpa", "flex")
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def flex_available() -> bool:
    """True when this torch has FlexAttention (``torch.nn.attention.flex_attention``, torch >= 2.5)."""
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def padding_mask(lengths: torch.Tensor, seq_len: int, *, queries: bool = False) -> torch.Tensor:
    """Boolean mask for right-padded sequences of the given ``lengths``, True = may attend (chapters 7 and 8).

    ``queries=False``: ``(batch, 1, 1, seq_len)``, key ``j`` is visible when
    ``j < lengths[b]``. ``queries=True``: ``(batch, 1, seq_len, seq_len)``,
    padded queries see nothing either (their outputs become zeros).
    """
    require_positive_int(seq_len, "seq_len")
    if lengths.ndim != 1 or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be a 1-D integer tensor (one length per sequence), got {lengths}")
    valid = torch.arange(seq_len, device=lengths.device)[None, :] < lengths[:, None]  # (B, T)
    if queries:
        return (valid[:, :, None] & valid[:, None, :])[:, None]  # (B, 1, T, T)
    return valid[:, None, None, :]  # (B, 1, 1, T)


def _check_4d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "attend needs q, k, v of shape (batch, heads, seq, head_dim), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"q, k, v must share batch and heads, and k, v the number of keys; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    _check_qkv(q, k, v)


def _check_against(name: str, extra: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raise unless ``extra`` broadcasts to ``(B, H, Tq, Tk)`` with its last two sizes exact; return it 4-D."""
    B, H, q_len, _ = q.shape
    k_len = k.shape[-2]
    target = (B, H, q_len, k_len)
    ok = extra.ndim <= 4 and tuple(extra.shape[-2:]) in ((q_len, k_len), (1, k_len))
    if ok:
        extra = extra.reshape((1,) * (4 - extra.ndim) + tuple(extra.shape))
        ok = all(size in (1, want) for size, want in zip(extra.shape[:2], (B, H)))
    if not ok:
        raise ValueError(
            f"{name} has shape {tuple(extra.shape)}, which does not match q {tuple(q.shape)} and k {tuple(k.shape)}: "
            f"it must broadcast to (batch, heads, q_len, k_len) = {target} with the last two sizes "
            "(q_len or 1, k_len); build it for this q_len and k_len"
        )
    return extra


def _combined_mask(mask: torch.Tensor | None, causal: bool, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """The user's mask and the causal mask as one boolean ``(B|1, H|1, Tq, Tk)`` tensor, or None."""
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        mask = _check_against("mask", mask, q, k)
    if causal:
        # key j is visible from query i when j - i <= 0
        lower = (relative_positions(q.shape[-2], k.shape[-2], device=q.device) <= 0)[None, None]  # (1, 1, Tq, Tk)
        mask = lower if mask is None else mask & lower
    return mask


def _naive(q, k, v, bias, mask, score_mod):
    return dot_product_attention(q, k, v, bias=bias, mask=mask)


def _sdpa(q, k, v, bias, mask, score_mod):
    if bias is None:
        attn_mask = mask  # boolean: SDPA shares the convention True = may attend
    else:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, float("-inf"))  # broadcast to (B|1, H|1, Tq, Tk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def _flex(q, k, v, bias, mask, score_mod):
    from torch.nn.attention.flex_attention import flex_attention

    if mask is not None:
        mask = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])  # a view; indexed per score
        inner = score_mod

        def score_mod(score, b, h, q_idx, kv_idx):
            score = score if inner is None else inner(score, b, h, q_idx, kv_idx)
            return torch.where(mask[b, h, q_idx, kv_idx], score, float("-inf"))

    return flex_attention(q, k, v, score_mod=score_mod)


_KERNEL_FUNCTIONS = {"naive": _naive, "sdpa": _sdpa, "flex": _flex}


# ---------------------------------------------------------------------------
# position schemes
# ---------------------------------------------------------------------------


class PositionScheme(nn.Module):
    """How attention learns where tokens are; this base class adds nothing: NoPE (chapters 1, 7, 8).

    A scheme overrides any of three hooks:

    - ``add_to_input(x)``: ``(B, T, d_model) -> (B, T, d_model)``, absolute tables;
    - ``rotate(q, k)``: ``(B, H, T, D)`` each, RoPE;
    - ``bias(q, k, causal=...)``: a float tensor broadcastable to
      ``(B, H, Tq, Tk)`` added to the scaled scores (ALiBi, T5, Shaw, CoPE),
      with ``score_mod`` computing the same values one score at a time for
      FlexAttention.

    Queries are the last ``q_len`` of the ``k_len`` positions (decoding with a
    cache); see ``positions.query_positions``.
    """

    def add_to_input(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def bias(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> torch.Tensor | None:
        return None

    def score_mod(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> ScoreMod | None:
        """``(score, b, h, q_idx, kv_idx) -> score`` for FlexAttention; this default looks a materialised bias up."""
        bias = self.bias(q, k, causal=causal)
        if bias is None:
            return None
        bias = _check_against("bias", bias, q, k).expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        return lambda score, b, h, q_idx, kv_idx: score + bias[b, h, q_idx, kv_idx]


class NoPosition(PositionScheme):
    """NoPE: no position information at all; attention sees a set of tokens (chapter 1)."""


class AbsolutePosition(PositionScheme):
    """The sinusoidal table added to the input, ``x + PE[:T]`` (Vaswani et al., 2017; chapter 4).

    In a full model this happens once, at the embedding layer; here the
    attention module does it so that every scheme plugs into one place.
    """

    def __init__(self, d_model: int, *, base: float = 10000.0):
        super().__init__()
        self.d_model = require_positive_int(d_model, "d_model")
        self.base = require_positive_float(base, "base")

    def add_to_input(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device)
        return x + sinusoidal_at(positions, self.d_model, base=self.base).to(x.dtype)  # (B, T, d) + (T, d)


class RotaryPosition(PositionScheme):
    """RoPE: rotate q and k by their positions (Su et al., 2024; chapter 6), via ``rope.apply_rope``."""

    def __init__(self, *, base: float = 10000.0, pairing: str = "half"):
        super().__init__()
        self.base = require_positive_float(base, "base")
        self.pairing = pairing

    def rotate(self, q, k):
        from .rope import apply_rope  # imported here: RoPE lives in its own chapter and module

        q_pos = query_positions(q.shape[-2], k.shape[-2], device=q.device)  # (Tq,)
        k_pos = torch.arange(k.shape[-2], device=k.device)  # (Tk,)
        return (
            apply_rope(q, q_pos, base=self.base, pairing=self.pairing),
            apply_rope(k, k_pos, base=self.base, pairing=self.pairing),
        )

    def extra_repr(self) -> str:
        return f"base={self.base}, pairing={self.pairing!r}"


class ALiBiPosition(PositionScheme):
    """ALiBi: ``-m_h (i - j)`` (causal) or ``-m_h |i - j|`` added to head h's scores (chapter 7)."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = require_positive_int(num_heads, "num_heads")
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def bias(self, q, k, *, causal):
        return alibi_bias(self.num_heads, q.shape[-2], k.shape[-2], causal=causal, device=q.device)  # (H, Tq, Tk)

    def score_mod(self, q, k, *, causal):
        slopes = self.slopes.to(q.device)
        offset = k.shape[-2] - q.shape[-2]  # queries are the last q_len positions

        def alibi(score, b, h, q_idx, kv_idx):
            distance = q_idx + offset - kv_idx  # i - j
            distance = distance.clamp(min=0) if causal else distance.abs()
            return score - slopes[h] * distance

        return alibi

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"


class T5Position(PositionScheme):
    """T5's learned bias per head and bucket of ``j - i`` (Raffel et al., 2020; chapter 8).

    ``bidirectional`` is fixed at construction, as in T5 (encoder: True,
    decoder: False), independently of the causal mask.
    """

    def __init__(self, num_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.table = T5RelativeBias(
            num_heads, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )

    def bias(self, q, k, *, causal):
        return self.table(q.shape[-2], k.shape[-2])  # (H, Tq, Tk)

    def score_mod(self, q, k, *, causal):
        q_len, k_len = q.shape[-2], k.shape[-2]
        per_distance = self.table.relative_bias(q_len, k_len)  # (H, Tq + Tk - 1): O(T), not O(T^2)
        offset = k_len - q_len

        def t5(score, b, h, q_idx, kv_idx):
            # column of r = j - i is r + (k_len - 1)
            return score + per_distance[h, kv_idx - (q_idx + offset) + (k_len - 1)]

        return t5


class ShawPosition(PositionScheme):
    """Shaw et al.'s clipped relative key embeddings, ``q_i . (k_j + a_ij)`` (chapter 8)."""

    def __init__(self, max_relative_position: int, head_dim: int):
        super().__init__()
        self.table = ShawRelativePosition(max_relative_position, head_dim)

    def bias(self, q, k, *, causal):
        return self.table(q, k.shape[-2])  # (B, H, Tq, Tk)

    def score_mod(self, q, k, *, causal):
        K = self.table.max_relative_position
        # q_i . w_r / sqrt(D) for the 2K + 1 rows: (B, H, Tq, 2K + 1), O(T K), not O(T^2)
        per_row = (q.float() @ self.table.weight.float().T) / math.sqrt(q.shape[-1])
        offset = k.shape[-2] - q.shape[-2]

        def shaw(score, b, h, q_idx, kv_idx):
            row = (kv_idx - (q_idx + offset)).clamp(-K, K) + K
            return score + per_row[b, h, q_idx, row]

        return shaw


class ContextualPosition(PositionScheme):
    """CoPE, positions counted by query-dependent gates (Golovneva et al., 2024; chapter 8). Causal only.

    Its positions ``p_ij`` are sums over a whole row of gates, so the Flex path
    looks up a materialised bias (the inherited ``score_mod``) instead of
    computing it per score.
    """

    def __init__(self, num_positions: int, head_dim: int):
        super().__init__()
        self.table = ContextualPositionBias(num_positions, head_dim)

    def bias(self, q, k, *, causal):
        if not causal:
            raise ValueError("CoPE counts the keys between j and i, so it needs causal=True attention")
        return self.table(q, k)  # (B, H, Tq, Tk)


# ---------------------------------------------------------------------------
# attention with a scheme
# ---------------------------------------------------------------------------


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scheme: PositionScheme | None = None,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    kernel: Kernel = "naive",
) -> torch.Tensor:
    """Attention with a position scheme through one of three kernels, ``(B, H, Tq, D)`` (chapters 7 and 8).

    ``softmax(R(q) R(k)^T / sqrt(D) + bias) v`` where ``R`` is the scheme's
    rotation and ``bias`` its score bias. ``mask`` is boolean and broadcasts to
    ``(B, H, Tq, Tk)`` (True = may attend); ``causal`` adds ``j <= i``. The
    kernel is ``"naive"``, ``"sdpa"`` or ``"flex"`` (see the module docstring).
    A query whose keys are all masked gets a zero output. (With torch 2.13,
    FlexAttention has no backward pass on the CPU: use it there for inference.)
    """
    if kernel not in _KERNEL_FUNCTIONS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "flex" and not flex_available():
        raise ValueError(f"kernel='flex' needs torch >= 2.5 with FlexAttention; this is torch {torch.__version__}")
    _check_4d(q, k, v)
    scheme = NoPosition() if scheme is None else scheme
    q, k = scheme.rotate(q, k)
    mask = _combined_mask(mask, causal, q, k)
    empty = None
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # (B|1, H|1, Tq, 1): rows with no key left
        # let such rows attend anywhere (no NaN, finite gradients), then zero their output below
        mask = mask | empty
    bias = score_mod = None
    if kernel == "flex":
        score_mod = scheme.score_mod(q, k, causal=causal)
    else:
        bias = scheme.bias(q, k, causal=causal)
        if bias is not None:
            bias = _check_against("bias", bias, q, k)
    out = _KERNEL_FUNCTIONS[kernel](q, k, v, bias, mask, score_mod)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out


@dataclass(frozen=True)
class AttentionConfig:
    """The shape of a multi-head attention layer and how it runs (chapters 7 and 8)."""

    d_model: int
    num_heads: int
    causal: bool = True
    kernel: Kernel = "sdpa"

    def __post_init__(self):
        require_positive_int(self.d_model, "d_model")
        require_positive_int(self.num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                "each head gets d_model / num_heads channels"
            )
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with a pluggable ``PositionScheme`` (chapters 7 and 8).

    ``forward(x, mask=None)``: ``x`` is ``(B, T, d_model)``, the result too.
    The scheme may add to ``x``, rotate q and k, or bias the scores; the
    kernel named in the config computes the attention.
    """

    def __init__(self, config: AttentionConfig, scheme: PositionScheme | None = None):
        super().__init__()
        self.config = config
        self.scheme = NoPosition() if scheme is None else scheme
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, kernel: Kernel | None = None):
        B, T, d_model = x.shape
        H, D = self.config.num_heads, self.config.head_dim
        x = self.scheme.add_to_input(x)
        # (B, T, 3d) -> 3 x (B, T, H, D) -> 3 x (B, H, T, D)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        y = attend(q, k, v, self.scheme, mask=mask, causal=self.config.causal, kernel=kernel or self.config.kernel)
        return self.out(y.transpose(1, 2).reshape(B, T, d_model))  # (B, H, T, D) -> (B, T, d)
