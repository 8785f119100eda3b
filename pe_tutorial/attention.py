"""Scaled dot-product attention, written out: the reference every faster path is checked against.

``softmax(q k^T / sqrt(head_dim) + bias) v`` with an optional boolean mask.
Tensors use the book's layout ``(batch, heads, seq, head_dim)``; any leading
dimensions work. Chapter 1 (``book/01_why_position``) uses it to show that
attention without positions cannot tell word order.
"""

from __future__ import annotations

import math

import torch

__all__ = ["dot_product_attention", "attention_weights"]


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
