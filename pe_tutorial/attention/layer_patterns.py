"""Models whose layers differ: Llama 4's interleaved NoPE layers and Gemma 3's local
and global layers, as schemes for the byte model (chapter 12).

Both designs keep most layers *local* and make every ``global_every``-th
layer (the last of each group) *global*, seeing every key:

==================  ======================================  ==========================
                    local layers                            global layers
==================  ======================================  ==========================
Llama 4 ("iRoPE")   RoPE, queries see their own chunk of    NoPE, each query scaled by
                    ``window`` keys                         ``llama4_query_scale``
                                                            (floor: the chunk size)
Gemma 3             RoPE at base 10 000, a sliding window   RoPE at base 1 000 000
                    of the last ``window`` keys
==================  ======================================  ==========================

transformers names the same layers in ``Llama4TextConfig.no_rope_layers``
(0 for NoPE, every ``no_rope_layer_interval``-th) and ``layer_types``, and in
``Gemma3TextConfig.layer_types``; ``local_global.global_layers`` follows that
rule (imported here, one rule for both designs), and ``local_global.window_overlay``
both windows.

``LocalAttentionScheme`` wraps a layer's scheme and adds the window, as a
bias of ``-inf`` outside it; ``TemperedNoPEScheme`` is Llama 4's NoPE layer.
``llama4_layers`` and ``gemma3_layers`` build a whole model's list of schemes
from a ``ModelConfig`` (``registry`` registers them as ``"irope"`` and
``"local-global"``).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .._validation import require_positive_int
from ..encodings.positions import query_positions
from ..encodings.rope import RotaryEmbedding
from ..encodings.rope_scaling import RopeScaling
from .local_global import check_window_kind, global_layers, window_overlay
from .position_scheme import NoPositionScheme, PositionScheme
from .schemes import RotaryScheme
from .temperature import LLAMA4_ATTN_SCALE, QKNorm, llama4_query_scale

# Llama 4's QK-norm: weightless, eps its rms_norm_eps
LLAMA4_QK_NORM_EPS = 1e-5

__all__ = [
    "has_temperature",
    "without_temperature",
    "with_global_interpolation",
    "LLAMA4_ATTN_SCALE",  # defined in temperature, the rule in local_global: re-exported
    "global_layers",
    "LocalAttentionScheme",
    "TemperedNoPEScheme",
    "QKNormedScheme",
    "llama4_layers",
    "gemma3_layers",
]


class LocalAttentionScheme(PositionScheme):
    """A layer's scheme, with each query limited to a window of keys (chapter 12).

    ``kind="sliding"``: the last ``window`` keys, ``i - window < j <= i``
    (Gemma 3's local layers); ``kind="chunked"``: the keys of the query's own
    block, ``floor(i / window) == floor(j / window)`` (Llama 4's RoPE layers).
    The inner scheme's rotation, bias and value term pass through; the window
    adds ``-inf`` to every score outside it. Causal attention only.
    """

    def __init__(self, inner: PositionScheme, window: int, kind: str = "sliding"):
        super().__init__()
        if not isinstance(inner, PositionScheme):
            raise ValueError(
                f"LocalAttentionScheme wraps a PositionScheme, got {type(inner).__name__}"
            )
        self.inner = inner
        self.window = require_positive_int(window, "window")
        self.kind = check_window_kind(kind)
        self.num_heads, self.head_dim = inner.num_heads, inner.head_dim
        self.d_model, self.needs_weights = inner.d_model, inner.needs_weights

    def rotate(self, q, k):
        return self.inner.rotate(q, k)

    def value_term(self, weights):
        return self.inner.value_term(weights)

    def bias(self, q, k, *, causal):
        if not causal:
            raise ValueError(
                "a local window is defined here for causal attention only; build the "
                "attention with causal=True"
            )
        near = window_overlay(
            q.shape[-2], k.shape[-2], self.window, self.kind, device=q.device
        )
        outside = torch.zeros(near.shape, device=q.device).masked_fill(
            ~near, float("-inf")
        )  # (Tq, Tk)
        inner = self.inner.bias(q, k, causal=causal)
        return outside if inner is None else inner + outside

    def extra_repr(self) -> str:
        return f"window={self.window}, kind={self.kind!r}"


class TemperedNoPEScheme(PositionScheme):
    """Llama 4's NoPE layer: no positions, the query at ``m`` scaled by
    ``1 + attn_scale * ln(1 + floor((m + 1) / floor_scale))`` (chapter 12).

    The scale is 1 up to position ``floor_scale - 2`` and then grows like the
    log of the position, so that attention over many keys stays sharp
    (``temperature.llama4_query_scale``; transformers' ``attn_temperature_tuning``).
    """

    def __init__(self, floor_scale: float, attn_scale: float = LLAMA4_ATTN_SCALE):
        super().__init__()
        llama4_query_scale(  # checks both numbers, naming them
            torch.arange(1), floor_scale=floor_scale, attn_scale=attn_scale
        )
        self.floor_scale, self.attn_scale = floor_scale, attn_scale

    def rotate(self, q, k):
        positions = query_positions(q.shape[-2], k.shape[-2], device=q.device)
        scale = llama4_query_scale(
            positions, floor_scale=self.floor_scale, attn_scale=self.attn_scale
        )
        return q * scale[:, None].to(q.dtype), k  # (B, H, Tq, D) * (Tq, 1)

    def extra_repr(self) -> str:
        return f"floor_scale={self.floor_scale}, attn_scale={self.attn_scale}"


class QKNormedScheme(PositionScheme):
    """A layer's scheme with q and k normalized after its rotation (chapter 12).

    ``rotate`` is the inner scheme's, then ``QKNorm`` on both, as Llama 4 does in
    its RoPE layers (``Llama4TextL2Norm`` after RoPE: each head's q and k end
    with root mean square 1); the inner scheme's bias and value term pass
    through. Normalizing after the rotation leaves the rotation's relative
    property intact, since a rotation keeps each vector's length.
    """

    def __init__(self, inner: PositionScheme, norm: QKNorm):
        super().__init__()
        if not isinstance(inner, PositionScheme) or not isinstance(norm, QKNorm):
            raise ValueError(
                "QKNormedScheme wraps a PositionScheme and a QKNorm, got "
                f"{type(inner).__name__} and {type(norm).__name__}"
            )
        self.inner, self.norm = inner, norm
        self.num_heads, self.head_dim = inner.num_heads, inner.head_dim
        self.d_model, self.needs_weights = inner.d_model, inner.needs_weights

    def rotate(self, q, k):
        return self.norm(*self.inner.rotate(q, k))

    def bias(self, q, k, *, causal):
        return self.inner.bias(q, k, causal=causal)

    def value_term(self, weights):
        return self.inner.value_term(weights)


def has_temperature(model: nn.Module) -> bool:
    """Whether ``model`` has a tempered NoPE layer (``TemperedNoPEScheme``), the
    query scale ``without_temperature`` takes away (chapter 12)."""
    return any(isinstance(m, TemperedNoPEScheme) for m in model.modules())


def without_temperature(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose tempered NoPE layers are plain NoPE (chapter 12).

    Llama 4 scales its NoPE layers' queries at inference; a model trained with
    the scale is read here without it, the same weights, to measure what the
    scale does to what the model learned (the frontier run's passkey units).
    Equal to the model built with ``irope_temperature=False`` and the same
    weights (the tests check it). A model without a ``TemperedNoPEScheme`` is a
    ValueError: there is no temperature to take away.
    """
    if not has_temperature(model):
        raise ValueError(
            f"{type(model).__name__} has no tempered NoPE layer (TemperedNoPEScheme): "
            "only Llama 4's pattern, 'irope' with irope_temperature=True, has one"
        )
    untempered = copy.deepcopy(model)
    for parent in list(untempered.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, TemperedNoPEScheme):
                setattr(parent, name, NoPositionScheme())
    return untempered


def _global_rotary_schemes(model: nn.Module) -> list[RotaryScheme]:
    """Gemma 3's global layers in ``model``: each ``RotaryScheme`` not inside a window."""
    local = {
        id(m.inner) for m in model.modules() if isinstance(m, LocalAttentionScheme)
    }
    return [
        m for m in model.modules() if isinstance(m, RotaryScheme) and id(m) not in local
    ]


def with_global_interpolation(model: nn.Module, factor: float) -> nn.Module:
    """A copy of a Gemma 3 pattern model whose global layers' RoPE is interpolated (chapter 12).

    Gemma 3 ships its global layers with a linear scaling of 8 (transformers'
    ``rope_scaling = {"rope_type": "linear", "factor": 8.0}`` on the
    full-attention layers only; the sliding ones keep base 10^4 unscaled):
    position ``m`` is rotated as ``m / factor`` would be, every frequency
    divided by ``factor`` (position interpolation, Chen et al., 2023). Here a
    trained model is read so, with the same weights: the global layers share
    one new ``RotaryEmbedding`` at their base with ``RopeScaling("linear",
    factor)``; the local layers are untouched. A model with no global RoPE
    layer (one outside a ``LocalAttentionScheme``) or with local RoPE layers
    only is a ValueError.
    """
    if not _global_rotary_schemes(model) or not any(
        isinstance(m, LocalAttentionScheme) for m in model.modules()
    ):
        raise ValueError(
            f"{type(model).__name__} is not Gemma 3's pattern: it needs local "
            "layers in a window and global RoPE layers outside one ('local-global')"
        )
    scaled = copy.deepcopy(model)
    schemes = _global_rotary_schemes(scaled)
    old = schemes[0].encoding
    rotary = RotaryEmbedding(
        old.head_dim,
        base=old.base,
        pairing=old.pairing,
        rotary_dim=old.rotary_dim,
        max_positions=max(old.cached_positions, 1),
        scaling=RopeScaling("linear", factor),
    ).to(old.inv_freq.device)
    for scheme in schemes:
        scheme.encoding = rotary
    return scaled


def llama4_layers(config, rotary: nn.Module) -> list[PositionScheme]:
    """Llama 4's layers for a ``ModelConfig``: RoPE (``rotary``, shared) in chunks of
    ``local_window``, and every ``global_every``-th layer NoPE over all keys, its
    queries scaled with the floor ``temperature_floor``; None puts the floor at
    the chunk size, as Llama 4 does (8192 and 8192).

    ``irope_temperature=False`` leaves the NoPE layers' queries unscaled (the
    temperature's ablation); ``irope_qk_norm=True`` normalizes q and k after
    RoPE in the RoPE layers, as Llama 4 does (``QKNormedScheme``);
    ``irope_window="sliding"`` gives the RoPE layers a sliding window of
    ``local_window`` keys in place of the chunks (with ``irope_temperature``
    off, Cohere's RNoPE-SWA)."""
    floor = config.temperature_floor
    floor = config.local_window if floor is None else floor

    def rope_layer() -> PositionScheme:
        scheme = RotaryScheme(rotary)
        if config.irope_qk_norm:
            norm = QKNorm(config.head_dim, eps=LLAMA4_QK_NORM_EPS, learned=False)
            scheme = QKNormedScheme(scheme, norm)
        return LocalAttentionScheme(scheme, config.local_window, config.irope_window)

    def nope_layer() -> PositionScheme:
        if config.irope_temperature:
            return TemperedNoPEScheme(floor)
        return NoPositionScheme()

    return [
        nope_layer() if is_global else rope_layer()
        for is_global in global_layers(config.num_layers, config.global_every)
    ]


def gemma3_layers(config, rotaries: nn.ModuleDict) -> list[PositionScheme]:
    """Gemma 3's layers for a ``ModelConfig``: RoPE at ``rotaries["local"]`` in a sliding
    window of ``local_window`` keys, and every ``global_every``-th layer RoPE at
    ``rotaries["global"]`` over all keys."""
    return [
        RotaryScheme(rotaries["global"])
        if is_global
        else LocalAttentionScheme(
            RotaryScheme(rotaries["local"]), config.local_window, "sliding"
        )
        for is_global in global_layers(config.num_layers, config.global_every)
    ]
