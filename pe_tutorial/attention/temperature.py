"""Attention temperature at long context: entropy, query scales, QK-norm (chapter 11).

A query whose scores over ``n`` keys are all about equal spreads its weight
evenly, with entropy ``ln n``: the longer the context, the flatter the
attention, unless the logits grow with it. The fixes in use:

- YaRN multiplies the logits by ``(0.1 ln s + 1)^2`` when the context is
  stretched by ``s`` (``yarn_attention_factor`` is the factor on cos and sin,
  hence on q and k each; defined and applied in ``rope_scaling``);
- Llama 4 scales each query of its NoPE layers by
  ``1 + attn_scale * ln(1 + floor((m + 1) / floor_scale))`` at position ``m``
  (``llama4_query_scale``): 1 for the first ``floor_scale - 1`` positions,
  then growing like the log of the position, after Scalable-Softmax
  (Nakanishi, 2025), which multiplies the logits of a query that sees ``n`` keys by
  ``s ln n``, ``s`` a learned scalar;
- Qwen's log-n scaling (``logn_attn``, Qwen 2023) scales the query at
  position ``m``, which sees ``n = m + 1`` keys, by ``log_L(n) = ln n / ln L``
  when ``n`` exceeds the trained length ``L``, and by 1 up to it
  (``logn_query_scale``), at inference only;
- QK-norm (``QKNorm``) takes the scale out of q and k altogether: each
  head's query and key is divided by its root mean square over the head
  dimension, ``x / sqrt(mean(x^2) + eps)``, and multiplied by a learned
  weight per channel (Qwen3, Gemma 3, before RoPE) or by none (Llama 4's
  ``Llama4TextL2Norm``, after RoPE), so the size of a logit is set by the
  weights and ``head_dim``, not by how large q and k grow.

``attention_maps`` reads the weights of every query of a trained
``ByteTransformer``'s layers, ``attention_entropies`` their entropy.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import require_integer_tensor, require_positive_int
from ..encodings.rope_scaling import yarn_attention_factor
from .core import attention_weights

__all__ = [
    "LLAMA4_FLOOR_SCALE",
    "LLAMA4_ATTN_SCALE",
    "attention_entropy",
    "yarn_attention_factor",
    "llama4_query_scale",
    "logn_query_scale",
    "rms_normalize",
    "QKNorm",
    "attention_maps",
    "attention_entropies",
]

# transformers' Llama4TextConfig.floor_scale and .attn_scale
LLAMA4_FLOOR_SCALE = 8192
LLAMA4_ATTN_SCALE = 0.1


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """``-sum_j w_j ln w_j`` over the last axis, in nats (``0 ln 0 = 0``)."""
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(-1)


def llama4_query_scale(
    positions: torch.Tensor,
    *,
    floor_scale: float = LLAMA4_FLOOR_SCALE,
    attn_scale: float = LLAMA4_ATTN_SCALE,
) -> torch.Tensor:
    """Llama 4's factor on the query at each position (NoPE layers), float32.

    ``1 + attn_scale * ln(1 + floor((m + 1) / floor_scale))``; transformers'
    defaults are ``floor_scale = 8192`` and ``attn_scale = 0.1``.
    """
    if isinstance(floor_scale, bool) or not floor_scale > 0:
        raise ValueError(
            f"floor_scale must be a positive number of tokens (the temperature "
            f"floor; Llama 4 uses {LLAMA4_FLOOR_SCALE}), got {floor_scale}"
        )
    if not attn_scale >= 0:
        raise ValueError(f"attn_scale must be >= 0, got {attn_scale}")
    require_integer_tensor(positions)
    steps = torch.floor((positions.float() + 1.0) / floor_scale)
    return torch.log1p(steps) * attn_scale + 1.0


def logn_query_scale(positions: torch.Tensor, *, train_length: int) -> torch.Tensor:
    """Qwen's log-n factor on the query at each position, float32 (chapter 11).

    A query at position ``m`` sees ``n = m + 1`` keys (causal); its factor is
    ``log_L(n) = ln n / ln L`` for ``n > L = train_length`` and 1 for
    ``n <= L``, so the logits grow like ``ln n`` past the trained length and
    are untouched within it (Qwen's ``use_logn_attn`` with ``seq_length = L``,
    applied when not training; Qwen's own table stops at ``n = 32767``, this
    formula does not). The query alone is scaled: the logits by the factor
    once, not squared as with YaRN's factor on cos and sin.
    """
    require_positive_int(train_length, "train_length")
    if train_length < 2:
        raise ValueError(
            f"train_length must be at least 2 for log-n scaling (it is the base of "
            f"the logarithm log_L(n)), got {train_length}"
        )
    require_integer_tensor(positions)
    # n = m + 1 keys; log_L(n) past L, 1 up to it (clamped so log sees n >= 1)
    n = positions.float() + 1.0
    scale = torch.log(n.clamp(min=1.0)) / math.log(train_length)
    return torch.where(n > train_length, scale, torch.ones_like(scale))


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(
            f"eps must be a number >= 0 (added to the mean square; Qwen3 uses "
            f"1e-6), got {eps!r}"
        )
    return float(eps)


def rms_normalize(
    x: torch.Tensor, weight: torch.Tensor | None = None, *, eps: float = 1e-6
) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps)`` over the last axis, times ``weight`` if given.

    Computed in float32 (float64 stays float64), returned in ``x``'s dtype
    (chapter 11). Without a weight it is Llama 4's ``Llama4TextL2Norm``: despite the name,
    each vector ends with root mean square 1, so with length
    ``sqrt(head_dim)``, not 1. With one it is an RMSNorm (Qwen3's
    ``Qwen3RMSNorm``; Gemma 3's multiplies by ``1 + weight`` instead).
    """
    eps = _check_eps(eps)
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise ValueError("x must be a tensor whose last axis is the one normalized")
    if weight is not None and tuple(weight.shape) != (x.shape[-1],):
        raise ValueError(
            f"weight has shape {tuple(weight.shape)} but x's last axis has "
            f"{x.shape[-1]} channels; give one weight per channel"
        )
    h = x.float() if x.dtype != torch.float64 else x
    # x / sqrt(mean_j x_j^2 + eps)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        h = h * weight.to(h.dtype)
    return h.to(x.dtype)


class QKNorm(nn.Module):
    """QK-norm: each head's q and k RMS-normalized over the head dimension (ch. 11).

    ``forward(q, k)`` takes ``(..., T, head_dim)`` queries and keys (any
    lengths) and returns ``rms_normalize(q, w_q)`` and ``rms_normalize(k, w_k)``.
    ``learned=True`` gives each its own weight of ``head_dim`` channels,
    initialized to 1, shared by the heads (Qwen3's ``q_norm`` and ``k_norm``;
    Gemma 3's ``1 + w`` with ``w = 0`` is the same function). ``learned=False``
    is Llama 4's weightless norm (``Llama4TextL2Norm``), applied to both. Where
    it goes is the model's choice: Qwen3 and Gemma 3 normalize before RoPE,
    Llama 4 after it, in its RoPE layers only. ``eps``: Qwen3 and Gemma 3 use
    1e-6, Llama 4 its ``rms_norm_eps`` (1e-5).
    """

    def __init__(self, head_dim: int, *, eps: float = 1e-6, learned: bool = True):
        super().__init__()
        self.head_dim = require_positive_int(head_dim, "head_dim")
        self.eps = _check_eps(eps)
        self.learned = bool(learned)
        if self.learned:
            self.q_weight = nn.Parameter(torch.ones(head_dim))
            self.k_weight = nn.Parameter(torch.ones(head_dim))
        else:
            self.q_weight = self.k_weight = None

    def forward(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for name, x in (("q", q), ("k", k)):
            if x.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has {x.shape[-1]} channels per head but this QKNorm "
                    f"was built for head_dim={self.head_dim}"
                )
        return (
            rms_normalize(q, self.q_weight, eps=self.eps),
            rms_normalize(k, self.k_weight, eps=self.eps),
        )

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, eps={self.eps}, learned={self.learned}"


@torch.no_grad()
def attention_maps(model, tokens: torch.Tensor) -> torch.Tensor:
    """The attention weights of every layer and head of a ``ByteTransformer``.

    ``tokens`` ``(batch, T)``; returns ``(layers, batch, heads, T, T)``, row
    ``i`` the weights query ``i`` gives keys ``0 .. i`` (causal), from each
    layer's scheme (its rotation and its bias). Runs the model once, reading
    each attention layer's input. Chapter 11 reads the weight a model puts on
    its first tokens (StreamingLLM's attention sinks) from them.
    """
    inputs = []
    hooks = [
        block.attention.register_forward_pre_hook(
            lambda module, args: inputs.append((module, args[0]))
        )
        for block in model.blocks
    ]
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    maps = []
    for attention, x in inputs:
        q, k, _ = attention.heads(x)
        T = x.shape[1]
        # as attend does: rotate, then the bias of the rotated q and k
        q, k = attention.scheme.rotate(q, k)
        bias = attention.scheme.bias(q, k, causal=True)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        maps.append(attention_weights(q, k, bias=bias, mask=causal))
    return torch.stack(maps)


def attention_entropies(model, tokens: torch.Tensor) -> torch.Tensor:
    """The attention entropy of every layer, head and query of a ``ByteTransformer``.

    ``tokens`` ``(batch, T)``; returns ``(layers, batch, heads, T)`` in nats,
    the entropy of each row of ``attention_maps``.
    """
    return attention_entropy(attention_maps(model, tokens))
