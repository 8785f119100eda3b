"""RoPE for queries and keys as one Triton kernel, in place or not (chapter 10).

For every pair ``(a, b)`` of channels (``(i, i + R/2)`` for ``"half"``,
``(2i, 2i + 1)`` for ``"interleaved"``), position ``m`` and frequency
``theta_i = base ** (-2i / rotary_dim)``::

    y_a = x_a cos(m theta_i) - x_b sin(m theta_i)
    y_b = x_a sin(m theta_i) + x_b cos(m theta_i)

One program of the kernel takes a tile of ``BLOCK_T`` tokens of one
(batch, head) row, and all ``R/2`` pairs: it loads ``x_a`` and ``x_b`` (as
float32, whatever they are stored in), cos and sin, and stores ``y_a`` and
``y_b`` where ``x_a`` and ``x_b`` were, or into the output. Every element is
read once and written once, and a pair's two channels are both loaded before
either is stored, so rotating in place is safe. The kernel is launched once
for q and once for k, with the same cos and sin.

cos and sin come from ``fused_rope.rope_cos_sin`` (torch, float32, once for q
and k) or from the caller (``cos_sin``); the kernel reads them through
broadcast strides, so per-row positions cost no copies.

Triton is not a dependency of ``pe_tutorial``: it is imported on the first
call. ``triton_status(device, dtype)`` says whether the kernel can run: on a
CUDA (or ROCm) GPU, or anywhere with ``TRITON_INTERPRET=1`` (Triton's
interpreter, on CPU tensors, slow, for tests). On an NVIDIA GPU it checks the
compute capability first: Triton compiles for 7.0 and newer, and bfloat16
needs 8.0 (Ampere), so on Colab's T4 (7.5) bfloat16 q and k are refused with
what to do instead (float16, which a T4 runs natively, or the eager
``apply_rope_qk``) rather than meeting Triton's own compiler error. Triton reads ``TRITON_INTERPRET`` when a
kernel is defined; this one is defined at its first call in each mode and
calls no jit-compiled helper of ``triton.language`` (those were defined when
triton was imported), so the value at call time is the one that counts.
"""

from __future__ import annotations

import contextlib
import os

import torch

from .rope import Pairing
from .rope_core import prepare_qk

__all__ = ["triton_status", "apply_rope_qk_triton"]

_INSTEAD = (
    "use pe_tutorial.encodings.fused_rope.apply_rope_qk (eager) or compiled_apply_rope_qk "
    "(torch.compile), which compute the same result"
)

# one definition of the kernel per mode: compiled for the GPU, or interpreted
_KERNELS: dict[bool, object] = {}

# Triton compiles for NVIDIA GPUs of compute capability 7.0 and newer (torch.compile's
# inductor asks the same); its bfloat16 needs 8.0, as devices.BFLOAT16_CAPABILITY says
# for every bfloat16 kernel (encodings import nothing of the package but _validation,
# so the number is repeated here, and a test holds the two equal)
TRITON_CAPABILITY = (7, 0)
BFLOAT16_CAPABILITY = (8, 0)


def _interpreting() -> bool:
    try:
        from triton import knobs
    except ImportError:
        return os.environ.get("TRITON_INTERPRET", "0") == "1"
    return bool(knobs.runtime.interpret)


def triton_status(
    device: torch.device | str | None = None, dtype: torch.dtype | None = None
) -> tuple[bool, str]:
    """Whether the Triton RoPE kernel can run on ``device`` (default: a GPU if any)
    for q and k of ``dtype`` (None: any dtype the GPU can run).

    Returns ``(True, how)`` or ``(False, why not, and what to use instead)``.
    On an NVIDIA GPU older than compute capability 7.0 Triton compiles
    nothing; below 8.0 (a T4 is 7.5) it has no bfloat16, and bfloat16 q and
    k are refused with what to do: float16 (q.half(), k.half()), or the
    eager ``apply_rope_qk``, which runs bfloat16 on any GPU.
    """
    try:
        import triton  # noqa: F401
    except ImportError as err:
        return False, (
            f"triton is not installed ({err}); install it (pip install triton, "
            f"Linux with a GPU) or {_INSTEAD}"
        )
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if _interpreting():
        return True, (
            "TRITON_INTERPRET=1: the kernel runs in Triton's interpreter on the "
            "CPU, slowly (for checking, not for speed)"
        )
    if device.type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(device)
        problem = _capability_problem(device, dtype, name)
        if problem is not None:
            return False, problem
        return True, f"Triton compiles the kernel for {name}"
    return False, (
        f"Triton kernels run on CUDA or ROCm GPUs, and the tensors are on {device} "
        f"(CUDA available: {torch.cuda.is_available()}); set TRITON_INTERPRET=1 to "
        f"run the kernel in Triton's CPU interpreter (slow), or {_INSTEAD}"
    )


def _capability_problem(
    device: torch.device, dtype: torch.dtype | None, name: str
) -> str | None:
    """Why this NVIDIA GPU cannot run the kernel on ``dtype``, or None if it can.

    ROCm GPUs report their architecture, not a CUDA capability: they pass.
    """
    if torch.version.hip is not None:
        return None
    capability = tuple(torch.cuda.get_device_capability(device))
    have = f"{name} has compute capability {capability[0]}.{capability[1]}"
    if capability < TRITON_CAPABILITY:
        need = ".".join(map(str, TRITON_CAPABILITY))
        return (
            f"Triton compiles for NVIDIA GPUs of compute capability {need} or newer, "
            f"and {have}; use pe_tutorial.encodings.fused_rope.apply_rope_qk "
            "(eager), which computes the same result on any GPU"
        )
    if dtype == torch.bfloat16 and capability < BFLOAT16_CAPABILITY:
        need = ".".join(map(str, BFLOAT16_CAPABILITY))
        return (
            f"Triton's bfloat16 needs compute capability {need} or newer, and {have} "
            "(a T4 is 7.5); pass q and k in float16 (q.half(), k.half()), which "
            "this GPU runs natively, or use pe_tutorial.encodings.fused_rope."
            "apply_rope_qk (eager), which rotates bfloat16 on any GPU"
        )
    return None


def _define_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def rope_kernel(
        x_ptr,
        o_ptr,
        cos_ptr,
        sin_ptr,
        H,
        T,
        sx_b,
        sx_h,
        sx_t,
        sx_d,
        so_b,
        so_h,
        so_t,
        so_d,
        sc_b,
        sc_h,
        sc_t,
        half_rot,
        rotary_dim,
        head_dim,
        INTERLEAVED: tl.constexpr,
        COPY_REST: tl.constexpr,
        BLOCK_T: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_REST: tl.constexpr,
    ):
        # program -> (b, h, first token); int64 offsets, tensors may pass 2**31 elements
        # (no tl.cdiv: a jit helper, fixed to the mode triton was imported in)
        tile = tl.program_id(0)
        t_tiles = (T + BLOCK_T - 1) // BLOCK_T
        row = tile // t_tiles
        b = (row // H).to(tl.int64)
        h = (row % H).to(tl.int64)
        t = (tile % t_tiles) * BLOCK_T + tl.arange(0, BLOCK_T)  # [BLOCK_T]
        p = tl.arange(0, BLOCK_P)  # [BLOCK_P], the pair index i
        token_ok = t < T
        mask = token_ok[:, None] & (p < half_rot)[None, :]
        t = t.to(tl.int64)
        if INTERLEAVED:
            chan_a = 2 * p
            chan_b = 2 * p + 1
        else:
            chan_a = p
            chan_b = p + half_rot
        x_row = x_ptr + b * sx_b + h * sx_h + t[:, None] * sx_t
        o_row = o_ptr + b * so_b + h * so_h + t[:, None] * so_t
        cs = b * sc_b + h * sc_h + t[:, None] * sc_t + p[None, :]
        xa = tl.load(x_row + chan_a[None, :] * sx_d, mask=mask).to(tl.float32)
        xb = tl.load(x_row + chan_b[None, :] * sx_d, mask=mask).to(tl.float32)
        c = tl.load(cos_ptr + cs, mask=mask)
        s = tl.load(sin_ptr + cs, mask=mask)
        ya = xa * c - xb * s
        yb = xb * c + xa * s
        out_ty = o_ptr.dtype.element_ty
        tl.store(o_row + chan_a[None, :] * so_d, ya.to(out_ty), mask=mask)
        tl.store(o_row + chan_b[None, :] * so_d, yb.to(out_ty), mask=mask)
        if COPY_REST:
            # partial rotary, out of place: channels rotary_dim.. pass through
            rest = rotary_dim + tl.arange(0, BLOCK_REST)
            rest_mask = token_ok[:, None] & (rest < head_dim)[None, :]
            v = tl.load(x_row + rest[None, :] * sx_d, mask=rest_mask)
            tl.store(o_row + rest[None, :] * so_d, v, mask=rest_mask)

    return rope_kernel


def _kernel():
    mode = _interpreting()
    if mode not in _KERNELS:
        _KERNELS[mode] = _define_kernel()
    return _KERNELS[mode]


def _as_4d(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` viewed as ``(batch, heads, seq, last)``, sharing its memory."""
    if x.ndim <= 4:
        return x[(None,) * (4 - x.ndim)]
    try:
        return x.view(-1, *x.shape[-3:])
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {tuple(x.shape)} and strides {x.stride()} cannot be "
            "viewed as (-1, heads, seq, head_dim) without a copy; reshape it to 4 "
            "dimensions first"
        ) from None


def _table_4d(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """cos or sin ``(..., T, R/2)`` broadcast to x's ``(..., T)``: 4-D, last stride 1"""
    if t.stride(-1) != 1:
        t = t.contiguous()
    t = t.expand(*x.shape[:-1], t.shape[-1])
    if t.ndim <= 4:
        return t[(None,) * (4 - t.ndim)]
    return t.reshape(-1, *t.shape[-3:])


def apply_rope_qk_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rope_qk`` as a Triton kernel, launched for q and for k (chapter 10).

    Same arguments and results as ``fused_rope.apply_rope_qk``: positions
    (default ``arange(seq)``, offsets, per-row ``(batch, 1, seq)``) or a
    precomputed ``cos_sin``, both pairings, partial rotary, float32, bfloat16
    or float16 storage with float32 arithmetic. ``inplace=True`` overwrites q
    and k (no output allocated) and returns them. q and k may have any
    strides (e.g. views of a fused qkv projection) and up to 4 dimensions, or
    more when the leading ones can be merged without a copy.

    Raises ``RuntimeError`` when the kernel cannot run here, for example
    bfloat16 on a GPU older than compute capability 8.0 such as a T4 (see
    ``triton_status``), ``ValueError`` for bad arguments.
    """
    if isinstance(q, torch.Tensor):
        ready, why = triton_status(q.device, q.dtype)
        if not ready:
            raise RuntimeError(f"the Triton RoPE kernel cannot run: {why}")
    pairing, rotary_dim, cos, sin = prepare_qk(
        q,
        k,
        positions,
        base=base,
        pairing=pairing,
        rotary_dim=rotary_dim,
        cos_sin=cos_sin,
        inplace=inplace,
    )
    import triton

    head_dim, seq = q.shape[-1], q.shape[-2]
    q_out = q if inplace else torch.empty_like(q)
    k_out = k if inplace else torch.empty_like(k)
    if seq == 0 or (q.numel() == 0 and k.numel() == 0):
        return q_out, k_out
    half_rot = rotary_dim // 2
    block_p = triton.next_power_of_2(half_rot)
    block_t = max(1, min(triton.next_power_of_2(seq), 4096 // block_p))
    copy_rest = not inplace and rotary_dim < head_dim
    block_rest = triton.next_power_of_2(max(head_dim - rotary_dim, 1))

    kernel = _kernel()
    # Triton launches on the current CUDA device, which need not be q's
    on_device = torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext()
    for name, x, out in (("q", q, q_out), ("k", k, k_out)):
        if x.numel() == 0:
            continue
        x4, out4 = _as_4d(x, name), _as_4d(out, f"the output for {name}")
        cos4, sin4 = _table_4d(cos, x), _table_4d(sin, x)
        if cos4.stride() != sin4.stride():
            cos4, sin4 = cos4.contiguous(), sin4.contiguous()
        grid = (x4.shape[0] * x4.shape[1] * triton.cdiv(seq, block_t),)
        with on_device:
            kernel[grid](
                x4, out4, cos4, sin4, x4.shape[1], seq,
                *x4.stride(), *out4.stride(), *cos4.stride()[:3],
                half_rot, rotary_dim, head_dim,
                INTERLEAVED=pairing == "interleaved",
                COPY_REST=copy_rest,
                BLOCK_T=block_t,
                BLOCK_P=block_p,
                BLOCK_REST=block_rest,
            )  # fmt: skip
    return q_out, k_out
