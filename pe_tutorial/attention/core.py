"""Attention, from the written-out reference to multi-head attention with a position scheme.

``dot_product_attention`` is ``softmax(q k^T / sqrt(head_dim) + bias) v`` with
an optional boolean mask, written out: the reference every faster path is
checked against. Chapter 1 (``book/01_why_position``) uses it to show that
attention without positions cannot tell word order.

``attend`` runs attention with a ``PositionScheme`` (``pe_tutorial.attention.schemes``
has one per encoding) through one of three kernels that agree within float
tolerance:

- ``"naive"``: the explicit softmax above, with the bias materialised;
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the
  bias (and mask) materialised as its float ``attn_mask``, or, for causal
  attention with no mask and no bias, its own ``is_causal`` path
  (``sdpa_arguments`` says which);
- ``"flex"``: FlexAttention (Dong et al., 2024) with a ``score_mod`` that
  computes the bias from ``(batch, head, q_idx, kv_idx)`` where the scheme
  has a per-score formula, so no ``(seq x seq)`` bias is stored, and the
  masks as a block mask (``flex_block_mask``), which the compiled kernel
  (``attend(..., compile=True)``) skips tile by tile (chapter 10). Its
  plumbing lives in ``pe_tutorial.attention.flex``; this module re-exports its public
  names.

``MultiHeadAttention`` is the layer chapters 7 to 9 build models from. This
module knows no encoding: it depends on torch, ``positions``, the base class
in ``position_scheme``, the input checks in ``attention_inputs`` and
``flex`` only.

Tensors use the book's layout ``(batch, heads, seq, head_dim)``. Masks are
boolean, True where a query may attend to a key; a query with no key left
gets zeros in every kernel. A NaN in q, k, v or a bias stays a NaN.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import require_positive_int
from ..devices import synchronize
from ..encodings.positions import relative_positions
from .flex import (
    attend_flex,
    flex_available,
    flex_block_mask,
    flex_compile_available,
    flex_compile_problem,
)
from .inputs import check_mask_dtype, check_qkv, check_scores_shape
from .position_scheme import NoPositionScheme, PositionScheme

__all__ = [
    "dot_product_attention",
    "attention_weights",
    "Kernel",
    "KERNELS",
    "DEFAULT_KERNEL",
    "flex_available",
    "flex_compile_available",
    "flex_compile_problem",
    "flex_block_mask",
    "compile_flex",
    "causal_mask",
    "padding_mask",
    "attend",
    "sdpa_arguments",
    "AttentionConfig",
    "MultiHeadAttention",
]

Kernel = Literal["naive", "sdpa", "flex"]
KERNELS: tuple[str, ...] = ("naive", "sdpa", "flex")
# the kernel of attend() and of AttentionConfig when none is named
DEFAULT_KERNEL: Kernel = "sdpa"

# ---------------------------------------------------------------------------
# the reference attention (chapter 1)
# ---------------------------------------------------------------------------


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention probabilities ``softmax(q k^T / sqrt(D) + bias)``, ``(..., q_len, k_len)``.

    ``bias`` is added to the scores; ``mask`` is boolean, True where a query
    may attend to a key. Both broadcast to the scores (last two sizes exact
    or 1). A query whose keys are all masked gets a row of zeros; a NaN in the
    inputs comes out as NaN. Computed in float32 whatever the input dtype.
    """
    check_qkv(q, k, None)
    # s_ij = q_i . k_j / sqrt(D)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + check_scores_shape("bias", bias, q, k).float()
    if mask is None:
        return torch.softmax(scores, dim=-1)
    check_mask_dtype(mask)
    mask = check_scores_shape("mask", mask, q, k)
    # a query with no visible key would be all -inf (NaN after softmax): let it
    # see every key, then zero its row, so its gradient is finite too
    empty = ~mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~(mask | empty), float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)


def dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Naive attention ``softmax(q k^T / sqrt(D) + bias) v``, ``(..., q_len, v_dim)``.

    The result has q's dtype; see ``attention_weights`` for bias and mask.
    """
    check_qkv(q, k, v)
    weights = attention_weights(q, k, bias=bias, mask=mask)
    return (weights @ v.float()).to(q.dtype)


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------


def causal_mask(
    q_len: int, k_len: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean ``(q_len, k_len)``: query i may see key j when ``j - i <= 0``.

    The queries are the last ``q_len`` of the ``k_len`` positions
    (``positions.query_positions``), so one decoding query sees every key.
    """
    return relative_positions(q_len, k_len, device=device) <= 0


def padding_mask(
    lengths: torch.Tensor, seq_len: int, *, queries: bool = False
) -> torch.Tensor:
    """Boolean mask for right-padded sequences of the given ``lengths``, True = may attend.

    ``queries=False``: ``(batch, 1, 1, seq_len)``, key ``j`` is visible when
    ``j < lengths[b]``. ``queries=True``: ``(batch, 1, seq_len, seq_len)``,
    padded queries see nothing either (their outputs become zeros).
    """
    require_positive_int(seq_len, "seq_len")
    if lengths.ndim != 1 or lengths.dtype.is_floating_point:
        raise ValueError(
            "lengths must be a 1-D integer tensor (one length per sequence), "
            f"got {lengths}"
        )
    valid = torch.arange(seq_len, device=lengths.device)[None, :] < lengths[:, None]
    if queries:
        # (B, T, 1) & (B, 1, T) -> (B, 1, T, T)
        return (valid[:, :, None] & valid[:, None, :])[:, None]
    return valid[:, None, None, :]  # (B, 1, 1, T)


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------


def compile_flex(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scheme: PositionScheme | None = None,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    block_mask=None,
) -> float:
    """Compile FlexAttention for these inputs; return the seconds it took (chapter 10).

    Runs ``attend(q, k, v, scheme, kernel="flex", compile=True, ...)`` once
    and times it (synchronising a GPU), so a benchmark can report the
    compile time apart from the run time of the calls that follow. The
    compiled ``flex_attention`` is kept for the process; calls with the same
    shapes, dtypes and kinds of score_mod and mask_mod reuse its kernel, and
    the first new shape compiles again (then with dynamic shapes). The time
    includes one run, and building the block mask when ``mask`` is given
    without ``block_mask``; TorchInductor's on-disk cache makes a second
    process compile faster. Returns about the run time when already compiled.
    After ``torch._dynamo.config.recompile_limit`` (8) variants Dynamo stops
    compiling and runs eager FlexAttention, with a warning: raise the limit
    for a sweep over many sizes or schemes.
    """
    synchronize(q.device)
    start = time.perf_counter()
    attend(
        q,
        k,
        v,
        scheme,
        mask=mask,
        causal=causal,
        kernel="flex",
        block_mask=block_mask,
        compile=True,
    )
    synchronize(q.device)
    return time.perf_counter() - start


def _check_kernel(kernel: str) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "flex" and not flex_available():
        raise ValueError(
            "kernel='flex' needs a torch with FlexAttention (2.5 or later); "
            f"this is torch {torch.__version__}: use 'sdpa' or 'naive'"
        )


def _check_weights_kernel(scheme: PositionScheme, kernel: str) -> None:
    if scheme.needs_weights and kernel != "naive":
        raise ValueError(
            f"{type(scheme).__name__} adds a term computed from the attention "
            f"probabilities, which the {kernel!r} kernel never materialises; use "
            "kernel='naive' (in AttentionConfig or attend)"
        )


# ---------------------------------------------------------------------------
# attention with a scheme
# ---------------------------------------------------------------------------


def _check_4d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "attend needs q, k, v of shape (batch, heads, seq, head_dim), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            "q, k, v must share batch and heads, and k, v the number of keys; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    check_qkv(q, k, v)


def _combined_mask(
    mask: torch.Tensor | None, causal: bool, q: torch.Tensor, k: torch.Tensor
) -> torch.Tensor | None:
    """The user's mask and the causal mask as one boolean ``(B|1, H|1, Tq, Tk)``, or None."""
    if mask is not None:
        check_mask_dtype(mask)
        mask = check_scores_shape("mask", mask, q, k)
    if causal:
        lower = causal_mask(q.shape[-2], k.shape[-2], device=q.device)[None, None]
        mask = lower if mask is None else mask & lower
    return mask


def _open_empty_rows(
    mask: torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``mask`` with each query that sees no key opened to every key, and those
    queries, ``(B|1, H|1, Tq, 1)``, whose outputs ``attend`` zeroes (no NaN, and
    finite gradients); ``(None, None)`` for no mask."""
    if mask is None:
        return None, None
    empty = ~mask.any(dim=-1, keepdim=True)
    return mask | empty, empty


def _sdpa_call(
    q: torch.Tensor,
    k: torch.Tensor,
    bias: torch.Tensor | None,
    mask: torch.Tensor | None,
    causal: bool,
) -> tuple[dict, torch.Tensor | None]:
    """``sdpa_arguments``, and the queries with no key whose outputs become zeros."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    # SDPA's is_causal keeps j <= i counted from the top left; causal_mask keeps
    # the last q_len of k_len positions (bottom right): the same only when
    # q_len == k_len. A length of 0 goes on to causal_mask, which refuses it.
    if causal and mask is None and bias is None and 0 < q_len == k_len:
        return {"attn_mask": None, "is_causal": True}, None
    mask, empty = _open_empty_rows(_combined_mask(mask, causal, q, k))
    if bias is None:
        # boolean: SDPA shares the convention True = may attend
        return {"attn_mask": mask, "is_causal": False}, empty
    attn_mask = bias.to(q.dtype)
    if mask is not None:
        attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    return {"attn_mask": attn_mask, "is_causal": False}, empty


def sdpa_arguments(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    causal: bool = False,
) -> dict:
    """The ``attn_mask`` and ``is_causal`` that ``attend(..., kernel="sdpa")`` passes
    ``F.scaled_dot_product_attention``, as a dict of those two keywords.

    ``q`` and ``k`` as the kernel gets them (rotated by the scheme), ``bias``
    the scheme's bias (or None), ``mask`` the caller's boolean mask (or None)
    and ``causal`` as given to ``attend``. A benchmark asks
    ``devices.sdpa_backend(q, k, v, **sdpa_arguments(...))`` which kernel
    the timed call runs.

    Causal attention with no mask and no bias, with as many queries as keys,
    takes SDPA's own causal path: ``is_causal=True`` and no ``attn_mask``. On
    CUDA any ``attn_mask`` rules out FlashAttention, and with it the causal
    kernels' skipping of the tiles above the diagonal (about half of them at
    long lengths; chapter 10), so a causal reference given the mask instead
    would time a kernel that causal SDPA does not use. SDPA's
    ``is_causal`` counts ``j <= i`` from the top left, while ``causal_mask``
    makes the queries the last ``q_len`` positions (bottom right): the two
    masks are the same only when ``q_len == k_len``, so other lengths get the
    mask materialised. Otherwise the caller's mask and the causal one are
    combined, a query that sees no key is opened to every key (``attend``
    then zeroes its output), and the mask is passed as a boolean
    ``attn_mask``, or, with a bias, folded into it as ``-inf``.
    """
    if bias is not None:
        bias = check_scores_shape("bias", bias, q, k)
    return _sdpa_call(q, k, bias, mask, causal)[0]


def _scheme_bias(
    scheme: PositionScheme, q: torch.Tensor, k: torch.Tensor, causal: bool
) -> torch.Tensor | None:
    """The scheme's bias with leading 1s up to the scores' rank, or None."""
    bias = scheme.bias(q, k, causal=causal)
    return None if bias is None else check_scores_shape("bias", bias, q, k)


def _check_flex_options(kernel: str, block_mask, compile: bool, mask) -> None:
    if kernel != "flex" and (block_mask is not None or compile):
        given = "block_mask" if block_mask is not None else "compile=True"
        raise ValueError(
            f"{given} is for kernel='flex' (FlexAttention), got kernel={kernel!r}; "
            "pass kernel='flex' or leave it out"
        )
    if block_mask is not None and mask is not None:
        raise ValueError(
            "give either mask or block_mask, not both: build the block mask with "
            "flex_block_mask(q_len, k_len, mask=mask, causal=...)"
        )


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scheme: PositionScheme | None = None,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    kernel: Kernel = DEFAULT_KERNEL,
    block_mask=None,
    compile: bool = False,
) -> torch.Tensor:
    """Attention with a position scheme through one of three kernels, ``(B, H, Tq, D)``.

    ``softmax(R(q) R(k)^T / sqrt(D) + bias) v`` where ``R`` is the scheme's
    rotation and ``bias`` its score bias (chapters 7 and 8). q, k and v are
    ``(B, H, T, D)``; with fewer queries than keys the queries are the last
    ``q_len`` positions (decoding). ``mask`` is boolean and broadcasts to
    ``(B, H, Tq, Tk)`` (True = may attend); ``causal`` adds ``j <= i``. The
    kernel is ``"naive"``, ``"sdpa"`` or ``"flex"`` (see the module docstring).
    A query whose keys are all masked gets a zero output. (With torch 2.13,
    FlexAttention has no backward pass on the CPU: use it there for inference.)

    FlexAttention only (chapter 10): ``block_mask``, a ``BlockMask`` from
    ``flex_block_mask`` built with the same ``causal``, replaces ``mask`` so a
    loop can build it once; ``compile=True`` runs ``torch.compile``'s fused
    kernel, which skips masked tiles (see ``flex_compile_available`` and
    ``compile_flex``), where eager Flex materialises the ``(Tq, Tk)`` scores.
    """
    _check_kernel(kernel)
    _check_flex_options(kernel, block_mask, compile, mask)
    _check_4d(q, k, v)
    scheme = NoPositionScheme() if scheme is None else scheme
    _check_weights_kernel(scheme, kernel)
    scheme.check_fits(num_heads=q.shape[1], head_dim=q.shape[-1])
    scheme.check_device(q.device)
    q, k = scheme.rotate(q, k)
    if kernel == "flex":
        return attend_flex(q, k, v, scheme, mask, causal, block_mask, compile)
    if kernel == "sdpa":
        # a scheme that needs the weights was refused above
        arguments, empty = _sdpa_call(
            q, k, _scheme_bias(scheme, q, k, causal), mask, causal
        )
        out = F.scaled_dot_product_attention(q, k, v, **arguments)
    else:
        # rows with no key left attend anywhere, then their output is zeroed below
        mask, empty = _open_empty_rows(_combined_mask(mask, causal, q, k))
        bias = _scheme_bias(scheme, q, k, causal)
        if scheme.needs_weights:
            # z_i = sum_j alpha_ij v_j + the scheme's term from the same alpha
            weights = attention_weights(q, k, bias=bias, mask=mask)
            out = weights @ v.float() + scheme.value_term(weights)
            out = out.to(q.dtype)
        else:
            out = dot_product_attention(q, k, v, bias=bias, mask=mask)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out


# ---------------------------------------------------------------------------
# the multi-head layer
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionConfig:
    """The shape of a multi-head attention layer and how it runs (chapters 7 to 9)."""

    d_model: int
    num_heads: int
    causal: bool = True
    kernel: Kernel = DEFAULT_KERNEL

    def __post_init__(self):
        require_positive_int(self.d_model, "d_model")
        require_positive_int(self.num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by "
                f"num_heads={self.num_heads}; each head gets d_model / num_heads "
                "channels"
            )
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with a pluggable ``PositionScheme`` (chapters 7 to 9).

    ``forward(x, mask=None)``: ``x`` is ``(B, T, d_model)``, the result too.
    The scheme may add to ``x``, rotate q and k, or bias the scores; the
    kernel named in the config computes the attention. Head ``h`` owns
    channels ``h * head_dim .. (h + 1) * head_dim - 1`` of q, k and v, and the
    heads' outputs are concatenated in that order before the output projection.

    ``cache``: None (plain attention), or an object whose
    ``attend(q, k, v, scheme, *, kernel)`` replaces ``attend`` for the whole
    causal sequence, such as ``streaming.RollingCache`` (StreamingLLM's rolling
    cache with attention sinks, chapter 12; ``streaming.rolling_cache`` sets it
    for a whole model). It decides itself which keys each query sees, so
    ``forward`` refuses a mask while it is set.
    """

    # a class default, so that a layer pickled before the attribute existed has one
    cache = None

    def __init__(self, config: AttentionConfig, scheme: PositionScheme | None = None):
        super().__init__()
        self.config = config
        self.scheme = NoPositionScheme() if scheme is None else scheme
        self.scheme.check_fits(
            num_heads=config.num_heads,
            head_dim=config.head_dim,
            d_model=config.d_model,
        )
        _check_weights_kernel(self.scheme, config.kernel)
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def heads(self, x: torch.Tensor):
        """q, k and v of ``x`` ``(B, T, d_model)``, each ``(B, H, T, D)``, after the
        scheme's addition to the input (before its rotation or bias)."""
        B, T, _ = x.shape
        H, D = self.config.num_heads, self.config.head_dim
        x = self.scheme.add_to_input(x)
        # (B, T, 3d) -> 3 x (B, T, H, D) -> 3 x (B, H, T, D)
        return tuple(
            t.view(B, T, H, D).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1)
        )

    def _check_cache_call(self, mask: torch.Tensor | None) -> None:
        if mask is not None:
            raise ValueError(
                f"this layer attends through a cache ({type(self.cache).__name__}), "
                "which decides which keys each query sees, so it takes no mask: "
                "call it without one, or leave the cache's context first"
            )
        if not self.config.causal:
            raise ValueError(
                f"a cache ({type(self.cache).__name__}) serves causal decoding, but "
                "this layer was built with causal=False: build it with causal=True"
            )

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        kernel: Kernel | None = None,
    ) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.config.d_model:
            raise ValueError(
                f"x must have shape (batch, seq, d_model={self.config.d_model}), "
                f"got {tuple(x.shape)}"
            )
        B, T, d_model = x.shape
        kernel = kernel or self.config.kernel
        if self.cache is not None:
            self._check_cache_call(mask)
        q, k, v = self.heads(x)
        if self.cache is None:
            y = attend(
                q,
                k,
                v,
                self.scheme,
                mask=mask,
                causal=self.config.causal,
                kernel=kernel,
            )
        else:
            y = self.cache.attend(q, k, v, self.scheme, kernel=kernel)
        # (B, H, T, D) -> (B, T, H, D) -> (B, T, d): heads side by side, in order
        return self.out(y.transpose(1, 2).reshape(B, T, d_model))
