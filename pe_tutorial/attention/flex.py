"""FlexAttention for ``attend(..., kernel="flex")``: score_mods, block masks, compiling (chapters 7, 8 and 10).

FlexAttention (Dong et al., 2024) computes a scheme's bias one score at a
time from ``(batch, head, q_idx, kv_idx)`` (the scheme's ``score_mod``), so
no ``(seq x seq)`` bias is stored, and takes the masks as a *block mask*: a
``mask_mod`` such as ``kv_idx <= q_idx + (Tk - Tq)`` plus the list of tiles
it leaves visible, which the compiled kernel computes alone. This module
holds that plumbing: ``flex_block_mask`` (tables in closed form where it
can), the checks of a block mask and of when ``torch.compile`` can build
the kernel, and ``attend_flex``, the flex path that ``attention.attend``
takes. It knows no encoding.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

import torch

from .._validation import require_positive_int
from ..devices import cuda_capability
from ..encodings.positions import query_positions
from .inputs import check_mask_dtype, check_scores_shape
from .position_scheme import ScoreMod

__all__ = [
    "MaskMod",
    "flex_available",
    "flex_block_mask",
    "flex_compile_available",
    "flex_compile_problem",
    "attend_flex",
]

# Inductor's FlexAttention kernels fail on older GPUs (Turing, 7.5; pytorch#164813)
COMPILED_FLEX_CAPABILITY = (8, 0)

# FlexAttention's mask_mod: (batch, head, q_idx, kv_idx) -> bool, True = may attend
MaskMod = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor
]


def flex_available() -> bool:
    """True when this torch has FlexAttention (``torch.nn.attention.flex_attention``)."""
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


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
        check_mask_dtype(mask)
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
        capability = cuda_capability("cuda")
        if capability < COMPILED_FLEX_CAPABILITY:
            major, minor = capability
            return (
                f"compiled FlexAttention needs a GPU of compute capability 8.0 or newer "
                f"(this one has {major}.{minor}, as Colab's free T4 does); eager "
                "FlexAttention and SDPA still run"
            )
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
    return flex_compile_problem(device) is None


def flex_compile_problem(device: torch.device | str = "cpu") -> str | None:
    """Why compiled FlexAttention cannot run on ``device`` (one sentence), or None."""
    return _compile_problem(torch.device(device).type)


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


def attend_flex(q, k, v, scheme, mask, causal, block_mask, compiled):
    """FlexAttention: the scheme's score_mod adds the bias, a block mask masks.

    Masked tiles are skipped (by the compiled kernel); a query row with no
    visible key comes out as zeros from FlexAttention itself.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    if block_mask is None:
        if mask is not None:
            check_mask_dtype(mask)
            mask = check_scores_shape("mask", mask, q, k)
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
            bias = check_scores_shape("bias", bias, q, k)
            score_mod = _lookup(bias, (q.shape[0], q.shape[1], q_len, k_len))
    return _flex(q, k, v, score_mod, block_mask, compiled)
