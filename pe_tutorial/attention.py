"""Attention, from the written-out reference to multi-head attention with a position scheme.

``dot_product_attention`` is ``softmax(q k^T / sqrt(head_dim) + bias) v`` with
an optional boolean mask, written out: the reference every faster path is
checked against. Chapter 1 (``book/01_why_position``) uses it to show that
attention without positions cannot tell word order.

``attend`` runs attention with a ``PositionScheme`` (``pe_tutorial.schemes``
has one per encoding) through one of three kernels that agree within float
tolerance:

- ``"naive"``: the explicit softmax above, with the bias materialised;
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the
  bias (and mask) materialised as its float ``attn_mask``;
- ``"flex"``: FlexAttention (Dong et al., 2024) with a ``score_mod`` that
  computes the bias from ``(batch, head, q_idx, kv_idx)`` where the scheme
  has a per-score formula, so no ``(seq x seq)`` bias is stored, and the
  masks as a block mask (``flex_block_mask``): a ``mask_mod`` such as
  ``kv_idx <= q_idx + (Tk - Tq)`` plus the list of tiles it leaves visible,
  which the compiled kernel (``attend(..., compile=True)``) computes alone
  (chapter 10).

``MultiHeadAttention`` is the layer chapters 7 to 9 build models from. This
module knows no encoding: it depends on torch, ``positions`` and the base
class in ``position_scheme`` only.

Tensors use the book's layout ``(batch, heads, seq, head_dim)``. Masks are
boolean, True where a query may attend to a key; a query with no key left
gets zeros in every kernel. A NaN in q, k, v or a bias stays a NaN.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import require_positive_int
from .devices import synchronize
from .position_scheme import NoPositionScheme, PositionScheme, ScoreMod
from .positions import query_positions, relative_positions

__all__ = [
    "dot_product_attention",
    "attention_weights",
    "Kernel",
    "KERNELS",
    "DEFAULT_KERNEL",
    "flex_available",
    "flex_compile_available",
    "flex_block_mask",
    "compile_flex",
    "causal_mask",
    "padding_mask",
    "attend",
    "AttentionConfig",
    "MultiHeadAttention",
]

Kernel = Literal["naive", "sdpa", "flex"]
KERNELS: tuple[str, ...] = ("naive", "sdpa", "flex")
# the kernel of attend() and of AttentionConfig when none is named
DEFAULT_KERNEL: Kernel = "sdpa"

# FlexAttention's mask_mod: (batch, head, q_idx, kv_idx) -> bool, True = may attend
MaskMod = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor
]


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None) -> None:
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(
            "q and k need shape (..., seq, head_dim), "
            f"got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share head_dim, got {q.shape[-1]} and {k.shape[-1]}"
        )
    if v is not None and v.shape[-2] != k.shape[-2]:
        raise ValueError(
            "k and v must have the same number of keys, "
            f"got {k.shape[-2]} and {v.shape[-2]}"
        )


def _check_scores_shape(
    name: str, extra: torch.Tensor, q: torch.Tensor, k: torch.Tensor
) -> torch.Tensor:
    """Raise unless ``extra`` (a bias or mask) broadcasts to the scores of q and k.

    The scores have shape ``q.shape[:-2] + (q_len, k_len)``; ``extra``'s last
    two sizes must each be exact or 1, and its leading sizes must broadcast to
    q's. Returns ``extra`` with leading 1s added up to the scores' rank.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    lead = tuple(q.shape[:-2])
    ok = (
        extra.ndim >= 2
        and extra.ndim <= q.ndim
        and extra.shape[-2] in (q_len, 1)
        and extra.shape[-1] in (k_len, 1)
    )
    if ok:
        extra = extra.reshape((1,) * (q.ndim - extra.ndim) + tuple(extra.shape))
        ok = all(size in (1, want) for size, want in zip(extra.shape[:-2], lead))
    if not ok:
        raise ValueError(
            f"{name} has shape {tuple(extra.shape)}, which does not match q "
            f"{tuple(q.shape)} and k {tuple(k.shape)}: it must broadcast to the "
            f"scores' shape {lead + (q_len, k_len)}, with its last two sizes "
            "(q_len or 1, k_len or 1); build it for this q_len and k_len"
        )
    return extra


def _check_mask_dtype(mask: torch.Tensor) -> None:
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}"
        )


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
    _check_qkv(q, k, None)
    # s_ij = q_i . k_j / sqrt(D)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + _check_scores_shape("bias", bias, q, k).float()
    if mask is None:
        return torch.softmax(scores, dim=-1)
    _check_mask_dtype(mask)
    mask = _check_scores_shape("mask", mask, q, k)
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
    _check_qkv(q, k, v)
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


def flex_available() -> bool:
    """True when this torch has FlexAttention (``torch.nn.attention.flex_attention``)."""
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def _naive(q, k, v, bias, mask):
    return dot_product_attention(q, k, v, bias=bias, mask=mask)


def _sdpa(q, k, v, bias, mask):
    if bias is None:
        # boolean: SDPA shares the convention True = may attend
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    attn_mask = bias.to(q.dtype)
    if mask is not None:
        attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


# ---------------------------------------------------------------------------
# FlexAttention: block masks and compilation (chapters 7, 8 and 10)
# ---------------------------------------------------------------------------


def _lookup(bias: torch.Tensor, shape: tuple[int, int, int, int]) -> ScoreMod:
    """A score_mod that adds a materialised bias, read at (b, h, q_idx, kv_idx)."""
    bias = bias.expand(shape)  # a view, indexed per score

    def add_bias(score, b, h, q_idx, kv_idx):
        return score + bias[b, h, q_idx, kv_idx]

    return add_bias


def _causal_mask_mod(offset: int) -> MaskMod:
    """``j <= i``: query row ``r`` sits at position ``i = r + offset``."""

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return causal


def _no_mask_mod() -> MaskMod:
    """Every key visible (the kernel itself keeps to the real lengths)."""

    def everything(b, h, q_idx, kv_idx):
        return b.new_ones((), dtype=torch.bool)

    return everything


def _tensor_mask_mod(mask: torch.Tensor, causal: MaskMod | None) -> MaskMod:
    """Read a boolean ``(B|1, H|1, Tq, Tk)`` mask per score, and-ed with ``causal``.

    FlexAttention calls a mask_mod with every batch and head index of q,
    whatever the block mask's own sizes, so a size-1 dimension is read at 0.
    """
    per_batch, per_head = mask.shape[0] > 1, mask.shape[1] > 1

    def read_mask(b, h, q_idx, kv_idx):
        allowed = mask[b if per_batch else 0, h if per_head else 0, q_idx, kv_idx]
        if causal is not None:
            allowed = allowed & causal(b, h, q_idx, kv_idx)
        return allowed

    return read_mask


def _ordered(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A dense 0/1 block table ``(..., rows, cols)`` -> (count per row, column order).

    The visited columns come first, in order, as in ``create_block_mask``.
    """
    blocks = blocks.to(torch.int32)
    count = blocks.sum(dim=-1, dtype=torch.int32)
    columns = torch.argsort(blocks, dim=-1, descending=True, stable=True)
    return count.contiguous(), columns.to(torch.int32).contiguous()


def _closed_form_block_mask(
    q_len: int,
    k_len: int,
    offset: int | None,
    block: int,
    lead: tuple[int, int],
    device: torch.device,
):
    """The block mask of ``j <= r + offset`` (or of no mask, ``offset=None``).

    Built from tile indices alone, ``O((Tq / block) (Tk / block))`` memory: no
    ``(Tq, Tk)`` mask is ever made. Tile ``(m, n)`` holds query rows
    ``m*block .. min((m+1)*block, Tq) - 1`` and keys ``n*block ..``; it is
    computed when its first key is visible from its last row, and *full* (the
    mask_mod is skipped) when its last key is visible from its first row and
    the tile lies inside both sequences. ``create_block_mask`` gives the same
    tables (tested).
    """
    from torch.nn.attention.flex_attention import BlockMask

    rows = -(-q_len // block)
    cols = -(-k_len // block)
    m = torch.arange(rows, device=device)[:, None]
    n = torch.arange(cols, device=device)[None, :]
    inside = ((m + 1) * block <= q_len) & ((n + 1) * block <= k_len)
    if offset is None:
        visited = torch.ones(rows, cols, dtype=torch.bool, device=device)
        full = inside
        mask_mod = _no_mask_mod()
    else:
        last_row = ((m + 1) * block).clamp(max=q_len) - 1
        visited = n * block <= last_row + offset
        full = inside & ((n + 1) * block - 1 <= m * block + offset)
        mask_mod = _causal_mask_mod(offset)
    partial = visited & ~full
    shape = lead + (rows, cols)
    kv_num, kv_index = _ordered(partial.expand(shape))
    full_num, full_index = _ordered(full.expand(shape))
    return BlockMask.from_kv_blocks(
        kv_num,
        kv_index,
        full_num,
        full_index,
        BLOCK_SIZE=(block, block),
        mask_mod=mask_mod,
        seq_lengths=(q_len, k_len),
    )


def _mask_lead(mask: torch.Tensor, q_len: int, k_len: int, batch, heads):
    """Check a mask for flex_block_mask; return it as ``(B', H', Tq, Tk)`` (a view)."""
    ok = (
        2 <= mask.ndim <= 4
        and mask.shape[-2] in (q_len, 1)
        and mask.shape[-1] in (k_len, 1)
    )
    if not ok:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)}, which does not broadcast to "
            f"(batch, heads, q_len={q_len}, k_len={k_len}): its last two sizes "
            "must each be exact or 1, with at most two leading sizes"
        )
    mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
    lead = []
    for name, size, given in (
        ("batch", mask.shape[0], batch),
        ("heads", mask.shape[1], heads),
    ):
        if given is not None and size not in (1, given):
            raise ValueError(
                f"mask has {name} size {size} but {name}={given} was asked for; "
                f"give a mask with {name} size {given} or 1"
            )
        lead.append(size if given is None else given)
    return mask.expand(*lead, q_len, k_len)


def flex_block_mask(
    q_len: int,
    k_len: int,
    *,
    causal: bool = False,
    mask: torch.Tensor | None = None,
    batch: int | None = None,
    heads: int | None = None,
    device: torch.device | str | None = None,
    block_size: int = 128,
):
    """FlexAttention's ``BlockMask`` for a causal and/or boolean mask (chapter 10).

    FlexAttention (Dong et al., 2024) cuts the ``(Tq, Tk)`` scores into tiles
    of ``block_size x block_size`` and, once compiled, computes only the tiles
    the block mask lists: with ``causal=True`` and ``T = n * block_size`` that
    is ``n (n + 1) / 2`` of the ``n^2`` tiles, the ``n`` diagonal ones
    *partial* (the ``mask_mod`` is applied) and the rest *full* (it is not).

    - ``causal``: ``mask_mod = kv_idx <= q_idx + (k_len - q_len)``, i.e.
      ``j <= i`` with the queries the last ``q_len`` positions (decoding), as in
      ``causal_mask``. With no ``mask`` the tables are computed in closed form
      from tile indices, so no ``(Tq, Tk)`` tensor is made.
    - ``mask``: boolean, True = may attend, broadcastable to
      ``(batch, heads, q_len, k_len)`` (e.g. ``padding_mask``); the mask_mod
      reads it, and-ed with the causal rule, and ``create_block_mask``
      evaluates it once over ``(B', H', Tq, Tk)``, ``B'`` and ``H'`` the
      mask's own leading sizes (1 stays 1: the block mask broadcasts).
    - ``batch``, ``heads``: give the block mask these leading sizes instead
      (a size-1 mask is broadcast to them).

    ``device`` is where it lives, that of the queries (default: the mask's,
    else the CPU). A query row whose keys are all masked gets a zero output
    from FlexAttention, never a NaN. Build the block mask once and pass it to
    ``attend(..., kernel="flex", block_mask=...)`` with the same ``causal``.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    require_positive_int(q_len, "q_len")
    require_positive_int(k_len, "k_len")
    require_positive_int(block_size, "block_size")
    for name, size in (("batch", batch), ("heads", heads)):
        if size is not None:
            require_positive_int(size, name)
    if device is None:
        device = mask.device if mask is not None else torch.device("cpu")
    device = torch.device(device)
    # the queries are the last q_len positions: row r sits at r + offset
    offset = int(query_positions(q_len, k_len)[0]) if causal else None
    if mask is None:
        lead = (batch or 1, heads or 1)
        block_mask = _closed_form_block_mask(
            q_len, k_len, offset, block_size, lead, device
        )
    else:
        _check_mask_dtype(mask)
        if mask.device != device:
            raise ValueError(
                f"mask is on {mask.device} but the block mask is built on {device}; "
                "move the mask to the queries' device"
            )
        mask = _mask_lead(mask, q_len, k_len, batch, heads)
        causal_mod = None if offset is None else _causal_mask_mod(offset)
        B, H = mask.shape[:2]
        block_mask = create_block_mask(
            _tensor_mask_mod(mask, causal_mod),
            B,
            H,
            q_len,
            k_len,
            device=device,
            BLOCK_SIZE=block_size,
        )
    # read back by attend, which refuses a block mask built for the other causal
    block_mask.mask_mod.pe_causal = causal
    return block_mask


def _check_block_mask(block_mask, q: torch.Tensor, k: torch.Tensor, causal: bool):
    from torch.nn.attention.flex_attention import BlockMask

    if not isinstance(block_mask, BlockMask):
        raise ValueError(
            "block_mask must be a FlexAttention BlockMask (from flex_block_mask or "
            f"create_block_mask), got {type(block_mask).__name__}"
        )
    q_len, k_len = q.shape[-2], k.shape[-2]
    if tuple(block_mask.seq_lengths) != (q_len, k_len):
        raise ValueError(
            f"block_mask was built for (q_len, k_len) = {tuple(block_mask.seq_lengths)}"
            f" but q and k have ({q_len}, {k_len}); build it with "
            f"flex_block_mask({q_len}, {k_len}, ...)"
        )
    lead = tuple(block_mask.kv_num_blocks.shape[:2])
    if any(size not in (1, want) for size, want in zip(lead, q.shape[:2])):
        raise ValueError(
            f"block_mask has (batch, heads) = {lead}, which does not broadcast to "
            f"q's {tuple(q.shape[:2])}"
        )
    if block_mask.kv_num_blocks.device != q.device:
        raise ValueError(
            f"block_mask is on {block_mask.kv_num_blocks.device} but q is on "
            f"{q.device}; build it with flex_block_mask(..., device=q.device)"
        )
    built_causal = getattr(block_mask.mask_mod, "pe_causal", None)
    if built_causal is not None and built_causal != causal:
        raise ValueError(
            f"block_mask was built with causal={built_causal} but attend was called "
            f"with causal={causal}; pass the same causal to both (it also picks the "
            "scheme's causal bias)"
        )


@functools.cache
def _compile_problem(device_type: str) -> str | None:
    """Why ``torch.compile`` cannot build FlexAttention on this device type, or None."""
    if not flex_available():
        return f"torch {torch.__version__} has no FlexAttention (2.5 or later)"
    if device_type == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available"
        from torch.utils._triton import has_triton

        if not has_triton():
            return "compiling FlexAttention for CUDA needs Triton, which is missing"
    elif device_type == "cpu":
        # TorchInductor's C++ FlexAttention template (torch >= 2.6)
        avx2 = getattr(torch.cpu, "_is_avx2_supported", lambda: True)()
        if sys.platform == "darwin" or not avx2:
            return "TorchInductor compiles FlexAttention only for x86 CPUs with AVX2"
        if os.environ.get("ATEN_CPU_CAPABILITY") == "default":
            return "ATEN_CPU_CAPABILITY=default turns off the AVX2 kernels it needs"
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except Exception as err:  # InvalidCxxCompiler, or an older torch
            return f"TorchInductor finds no C++ compiler for the CPU ({err!r})"
    return None  # another device: let torch try


def flex_compile_available(device: torch.device | str = "cpu") -> bool:
    """True when ``attend(..., kernel="flex", compile=True)`` can run on ``device``.

    CUDA needs Triton; the CPU needs an x86 CPU with AVX2 and a C++ compiler
    (TorchInductor's C++ template, inference only). Chapter 10.
    """
    return _compile_problem(torch.device(device).type) is None


def _check_compile(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    problem = _compile_problem(q.device.type)
    advice = "use compile=False (eager FlexAttention) or kernel='sdpa'"
    if problem is not None:
        raise ValueError(f"compile=True cannot run on {q.device}: {problem}; {advice}")
    if q.device.type == "cpu":
        if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise ValueError(
                "compiled FlexAttention on the CPU takes float32, float16 or "
                f"bfloat16, got {q.dtype}; {advice}"
            )
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            raise ValueError(
                "compiled FlexAttention on the CPU has no backward pass (torch "
                f"{torch.__version__}); run it under torch.no_grad() or "
                "torch.inference_mode(), or use kernel='sdpa' to train"
            )


@functools.cache
def _compiled_flex_attention():
    """``torch.compile(flex_attention)``, made on first use and kept for the process."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def _flex(q, k, v, score_mod, block_mask, compiled):
    if not compiled:
        from torch.nn.attention.flex_attention import flex_attention

        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    try:
        return _compiled_flex_attention()(
            q, k, v, score_mod=score_mod, block_mask=block_mask
        )
    except torch._dynamo.exc.BackendCompilerFailed as err:
        raise RuntimeError(
            f"torch.compile could not build FlexAttention on {q.device} "
            f"({type(err).__name__}, see above); use compile=False or kernel='sdpa'"
        ) from err


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


# the dense kernels; "flex" goes through _attend_flex
_KERNEL_FUNCTIONS = {"naive": _naive, "sdpa": _sdpa}


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
    _check_qkv(q, k, v)


def _combined_mask(
    mask: torch.Tensor | None, causal: bool, q: torch.Tensor, k: torch.Tensor
) -> torch.Tensor | None:
    """The user's mask and the causal mask as one boolean ``(B|1, H|1, Tq, Tk)``, or None."""
    if mask is not None:
        _check_mask_dtype(mask)
        mask = _check_scores_shape("mask", mask, q, k)
    if causal:
        lower = causal_mask(q.shape[-2], k.shape[-2], device=q.device)[None, None]
        mask = lower if mask is None else mask & lower
    return mask


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


def _attend_flex(q, k, v, scheme, mask, causal, block_mask, compiled):
    """FlexAttention: the scheme's score_mod adds the bias, a block mask masks.

    Masked tiles are skipped (by the compiled kernel); a query row with no
    visible key comes out as zeros from FlexAttention itself.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    if block_mask is None:
        if mask is not None:
            _check_mask_dtype(mask)
            mask = _check_scores_shape("mask", mask, q, k)
        if mask is not None or causal:
            block_mask = flex_block_mask(
                q_len, k_len, causal=causal, mask=mask, device=q.device
            )
    else:
        _check_block_mask(block_mask, q, k, causal)
    if compiled:
        _check_compile(q, k, v)
    score_mod = scheme.score_mod(q, k, causal=causal)
    if score_mod is None:
        bias = scheme.bias(q, k, causal=causal)
        if bias is not None:
            bias = _check_scores_shape("bias", bias, q, k)
            score_mod = _lookup(bias, (q.shape[0], q.shape[1], q_len, k_len))
    return _flex(q, k, v, score_mod, block_mask, compiled)


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
        return _attend_flex(q, k, v, scheme, mask, causal, block_mask, compile)
    mask = _combined_mask(mask, causal, q, k)
    empty = None
    if mask is not None:
        # rows with no key left attend anywhere (no NaN, finite gradients), then
        # their output is zeroed below
        empty = ~mask.any(dim=-1, keepdim=True)  # (B|1, H|1, Tq, 1)
        mask = mask | empty
    bias = scheme.bias(q, k, causal=causal)
    if bias is not None:
        bias = _check_scores_shape("bias", bias, q, k)
    if scheme.needs_weights:
        # z_i = sum_j alpha_ij v_j + the scheme's term from the same alpha
        weights = attention_weights(q, k, bias=bias, mask=mask)
        out = weights @ v.float() + scheme.value_term(weights)
        out = out.to(q.dtype)
    else:
        out = _KERNEL_FUNCTIONS[kernel](q, k, v, bias, mask)
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
    """

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
        H, D = self.config.num_heads, self.config.head_dim
        x = self.scheme.add_to_input(x)
        # (B, T, 3d) -> 3 x (B, T, H, D) -> 3 x (B, H, T, D)
        q, k, v = (
            t.view(B, T, H, D).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1)
        )
        y = attend(
            q,
            k,
            v,
            self.scheme,
            mask=mask,
            causal=self.config.causal,
            kernel=kernel or self.config.kernel,
        )
        # (B, H, T, D) -> (B, T, H, D) -> (B, T, d): heads side by side, in order
        return self.out(y.transpose(1, 2).reshape(B, T, d_model))
