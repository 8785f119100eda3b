"""Attention temperature at long context: entropy, YaRN's factor, Llama 4's query scale (chapter 11).

A query whose scores over ``n`` keys are all about equal spreads its weight
evenly, with entropy ``ln n``: the longer the context, the flatter the
attention, unless the logits grow with it. Two fixes in use:

- YaRN multiplies the logits by ``(0.1 ln s + 1)^2`` when the context is
  stretched by ``s`` (``yarn_attention_factor`` is the factor on cos and sin,
  hence on q and k each; defined and applied in ``rope_scaling``);
- Llama 4 scales each query of its NoPE layers by
  ``1 + attn_scale * ln(1 + floor((m + 1) / floor_scale))`` at position ``m``
  (``llama4_query_scale``): 1 for the first ``floor_scale - 1`` positions,
  then growing like the log of the position, after Scalable-Softmax
  (Nakanishi, 2025), which scales logits by ``ln n``.

``attention_entropies`` reads the entropy of every query of a trained
``ByteTransformer``'s layers.
"""

from __future__ import annotations

import torch

from .._validation import require_integer_tensor
from ..encodings.rope_scaling import yarn_attention_factor
from .core import attention_weights

__all__ = [
    "LLAMA4_FLOOR_SCALE",
    "LLAMA4_ATTN_SCALE",
    "attention_entropy",
    "yarn_attention_factor",
    "llama4_query_scale",
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


@torch.no_grad()
def attention_entropies(model, tokens: torch.Tensor) -> torch.Tensor:
    """The attention entropy of every layer, head and query of a ``ByteTransformer``.

    ``tokens`` ``(batch, T)``; returns ``(layers, batch, heads, T)`` in nats,
    from the weights each layer's scheme gives (its rotation and its bias,
    causal). Runs the model once, reading each attention layer's input.
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
    entropies = []
    for attention, x in inputs:
        q, k, _ = attention.heads(x)
        T = x.shape[1]
        # as attend does: rotate, then the bias of the rotated q and k
        q, k = attention.scheme.rotate(q, k)
        bias = attention.scheme.bias(q, k, causal=True)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        weights = attention_weights(q, k, bias=bias, mask=causal)
        entropies.append(attention_entropy(weights))
    return torch.stack(entropies)
