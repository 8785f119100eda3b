"""Local and global layers with a RoPE base each (Gemma 3's pattern; chapter 12).

Gemma 3 alternates five *local* layers, whose queries see only the last
``window`` keys (a sliding window), with one *global* layer that sees them
all, and gives the two kinds different RoPE bases: 10 000 for the local
layers, whose distances stay short, and 1 000 000 for the global ones, whose
slowest pairs must not turn far within a long context (chapter 6's base,
chapter 11's wavelengths). Only the global layers' cache grows with the
context. ``layer_types`` names each layer as transformers does, and
``sliding_window_mask`` is the causal window ``i - window < j <= i``.

Llama 4 limits its RoPE layers another way, to *chunks*: a query sees the
keys of its own block of ``window`` positions, ``floor(i / window) ==
floor(j / window)``. ``window_overlay`` gives either rule for queries that
are the last ``q_len`` of ``k_len`` positions (decoding included); the
causal mask is laid over it, as in transformers' ``masking_utils``.
"""

from __future__ import annotations

import torch

from .._validation import require_positive_int
from ..encodings.positions import query_positions
from ..encodings.rope_core import rope_frequencies

__all__ = [
    "GEMMA3_BASES",
    "global_layers",
    "layer_types",
    "WINDOW_KINDS",
    "check_window_kind",
    "window_overlay",
    "sliding_window_mask",
    "layer_frequencies",
]

# transformers' defaults for Gemma 3: rope_local_base_freq and rope_theta
GEMMA3_BASES = {"sliding_attention": 10_000.0, "full_attention": 1_000_000.0}
# a sliding window (Gemma 3, Mistral) or fixed chunks (Llama 4's RoPE layers)
WINDOW_KINDS = ("sliding", "chunked")


def global_layers(num_layers: int, every: int) -> list[bool]:
    """True for every ``every``-th layer, the last of each group: ``(i + 1) % every == 0``.

    The one rule for which layers are global: Llama 4's NoPE layers
    (``no_rope_layer_interval = 4``) and Gemma 3's full-attention layers
    (``sliding_window_pattern = 6``) are chosen so, and ``layer_types`` and
    ``layer_patterns``' models read it from here.
    """
    require_positive_int(num_layers, "num_layers")
    require_positive_int(every, "global_every")
    return [(i + 1) % every == 0 for i in range(num_layers)]


def layer_types(num_layers: int, *, pattern: int = 6) -> list[str]:
    """``"full_attention"`` for every ``pattern``-th layer (the last of each group),
    ``"sliding_attention"`` for the others: Gemma 3's 5 local to 1 global."""
    require_positive_int(num_layers, "num_layers")
    require_positive_int(pattern, "pattern")
    return [
        "full_attention" if is_global else "sliding_attention"
        for is_global in global_layers(num_layers, pattern)
    ]


def check_window_kind(kind: str) -> str:
    """``kind`` if it names a window (``WINDOW_KINDS``), else a ``ValueError`` listing them."""
    if kind not in WINDOW_KINDS:
        raise ValueError(f"unknown window kind {kind!r}; choose one of {WINDOW_KINDS}")
    return kind


def window_overlay(
    q_len: int, k_len: int, window: int, kind: str = "sliding", *, device=None
) -> torch.Tensor:
    """``(q_len, k_len)`` booleans, True where query ``i`` is near enough to key ``j``.

    ``"sliding"``: ``j > i - window``; ``"chunked"``: ``floor(i / window) ==
    floor(j / window)``. Queries are the last ``q_len`` of the ``k_len``
    positions. Not causal by itself: lay the causal mask over it.
    """
    check_window_kind(kind)
    require_positive_int(window, "window")
    i = query_positions(q_len, k_len, device=device)[:, None]  # (Tq, 1)
    j = torch.arange(k_len, device=device)[None, :]  # (1, Tk)
    if kind == "sliding":
        return j > i - window
    return torch.div(i, window, rounding_mode="floor") == torch.div(
        j, window, rounding_mode="floor"
    )


def sliding_window_mask(length: int, window: int) -> torch.Tensor:
    """``(length, length)`` booleans, True where query ``i`` may see key ``j``:
    ``i - window < j <= i``, the last ``window`` keys including itself."""
    require_positive_int(length, "length")
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return causal & window_overlay(length, length, window, "sliding")


def layer_frequencies(
    layer_type: str, head_dim: int, *, bases: dict[str, float] = GEMMA3_BASES
) -> torch.Tensor:
    """RoPE's frequencies for a layer of ``layer_type``, at that type's base."""
    if layer_type not in bases:
        raise ValueError(
            f"unknown layer type {layer_type!r}; choose one of {tuple(bases)}"
        )
    return rope_frequencies(head_dim, base=bases[layer_type])
