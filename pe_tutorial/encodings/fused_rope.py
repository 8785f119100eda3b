"""RoPE for q and k together: one cos/sin table, in place or not, compiled (chapter 10).

For every pair ``(a, b)`` of channels (``pairing``), position ``m`` and
frequency ``theta_i = base ** (-2i / rotary_dim)``::

    y_a = x_a cos(m theta_i) - x_b sin(m theta_i)
    y_b = x_a sin(m theta_i) + x_b cos(m theta_i)

which is ``apply_rope`` of chapter 6. The queries and the keys of a sequence
are turned by the same angles, so ``rope_cos_sin`` computes cos and sin once
(float32, ``positions.shape + (rotary_dim/2,)``) and ``apply_rope_qk`` uses
them for both; a model can also keep them for all its layers (``cos_sin=``).

RoPE is memory bound: a handful of flops per element read, so what counts is
how many bytes each version moves (chapter 10):

- ``apply_rope_qk``, eager: each half of the pairs is written straight into
  the result (``out=``), no concatenation; ``inplace=True`` overwrites ``q``
  and ``k``, on the CPU in cache-sized slabs with temporaries of one slab;
- ``compiled_apply_rope_qk``: ``torch.compile`` fuses the rotation into one
  loop that reads each element once and writes it once (vectorised C++ on the
  CPU, Triton on the GPU); ``compile_rope_qk`` reports the compile time apart
  from the run time;
- ``pe_tutorial.encodings.rope_triton``: a hand-written Triton kernel that reads and
  writes each element once, in place or not;
- ``apply_rope_qk_to_cache``: decoding, the new tokens of a batch of sequences
  at their own offsets, the rotated keys written into a preallocated KV cache
  (``compiled_apply_rope_qk_to_cache``: each key rotated in the loop that
  stores it into its row, as vLLM's and FlashInfer's fused kernels do).

All of them return what ``apply_rope`` returns for ``q`` and for ``k``: the
angles and the arithmetic are float32 whatever the dtype of ``q`` and ``k``,
and the results come back in their dtypes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator

import torch

from .._validation import require_even, require_integer_tensor, require_positive_int
from .rope_core import (
    Pairing,
    angles_cos_sin,
    check_pairing,
    check_rotary_dim,
    check_x,
    pair_views,
    pairs_axis,
    prepare_qk,
    rotate,
    rotate_into,
    tensors_overlap,
)

__all__ = [
    "rope_cos_sin",
    "apply_rope_qk",
    "compiled_apply_rope_qk",
    "compile_rope_qk",
    "apply_rope_qk_to_cache",
    "compiled_apply_rope_qk_to_cache",
]

# Elements per slab of the eager in-place rotation on the CPU: a slab (256 KiB of
# float32) and its temporaries stay in cache through the five ops that rotate it,
# so memory sees each element read once and written once. Each op on a slab is
# too small for ATen to split across threads: 2**18 was twice as fast on idle
# cores, but 5 to 50 times slower when another process kept a core busy (every
# small parallel op waited for it), as in a notebook run beside the tests.
_SLAB = 1 << 16


def rope_cos_sin(
    positions: torch.Tensor, rotary_dim: int, *, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos(m theta_i)`` and ``sin(m theta_i)`` for integer positions m (chapter 10).

    ``theta_i = base ** (-2i / rotary_dim)``; the angles are formed and the
    trigonometry is done in float32, exactly as ``apply_rope`` does. Returns two
    float32 tensors of shape ``positions.shape + (rotary_dim / 2,)`` on the
    positions' device: compute them once per sequence and pass them as
    ``cos_sin`` to the queries' and the keys' rotation (and to every layer).
    """
    require_integer_tensor(positions)
    require_positive_int(rotary_dim, "rotary_dim")
    require_even(
        rotary_dim, "rotary_dim", "for RoPE (each frequency rotates a pair of channels)"
    )
    return angles_cos_sin(positions, rotary_dim, base)


# eager
# ---------------------------------------------------------------------------


def _along_dim0(t: torch.Tensor, x_ndim: int, index: int | slice) -> torch.Tensor:
    """The part of ``t`` (cos or sin, broadcast against x) for ``x[index]``."""
    if t.ndim < x_ndim:  # t has no axis for x's first dimension
        return t
    if t.shape[0] == 1:
        return t[0] if isinstance(index, int) else t
    return t[index]


def _slabs(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, limit: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Split ``x`` along leading dimensions into views of at most ``limit`` elements."""
    if x.numel() <= limit or x.ndim < 2:
        yield x, cos, sin
        return
    inner = x.numel() // x.shape[0]
    if inner > limit and x.ndim > 2:
        for i in range(x.shape[0]):
            yield from _slabs(
                x[i], _along_dim0(cos, x.ndim, i), _along_dim0(sin, x.ndim, i), limit
            )
        return
    step = max(1, limit // inner)
    for start in range(0, x.shape[0], step):
        rows = slice(start, start + step)
        yield x[rows], _along_dim0(cos, x.ndim, rows), _along_dim0(sin, x.ndim, rows)


def _rotate_inplace(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str, rotary_dim: int
) -> torch.Tensor:
    """Overwrite the first ``rotary_dim`` channels of ``x`` with their rotation;
    returns ``x``.

    On the CPU slab by slab, so the temporaries (a copy of ``x_a``, or float32
    copies of both halves for other dtypes) are one slab big and the slab is
    still in cache when it is written back; on a GPU in one go (small kernels
    would cost more than the temporaries). Same arithmetic as
    ``rope_core.rotate_into``.
    """
    limit = _SLAB if x.device.type == "cpu" else max(x.numel(), 1)
    for part, c, s in _slabs(x, cos, sin, limit):
        x1, x2 = pair_views(part, pairing, rotary_dim)
        if x.dtype == torch.float32:
            a = x1.clone()
            x1.mul_(c).addcmul_(x2, s, value=-1)  # x_a cos - x_b sin
            x2.mul_(c).addcmul_(a, s)  # x_b cos + x_a sin
        else:
            a, b = x1.to(torch.float32), x2.to(torch.float32)
            x1.copy_((a * c).addcmul_(b, s, value=-1))
            x2.copy_((b * c).addcmul_(a, s))
    return x


def apply_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k by the same angles, computing cos and sin once (chapter 10).

    Args:
        q: ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
        k: ``(..., seq, head_dim)`` with the same seq and head_dim (the number
            of heads may differ, as with grouped-query attention).
        positions: integer tensor broadcastable to the ``(..., seq)`` of both;
            default ``arange(seq)``; ``arange(seq) + offset`` when decoding,
            ``(batch, 1, seq)`` for per-row positions.
        base, pairing, rotary_dim: as for ``apply_rope``.
        cos_sin: ``rope_cos_sin(positions, rotary_dim, base=base)`` computed
            earlier (e.g. once for all layers), instead of ``positions``.
        inplace: overwrite ``q`` and ``k`` and return them. On the CPU the
            work goes in slabs of 2**16 elements and allocates nothing of
            their size; on a GPU it needs a copy of half the rotated channels
            (``rope_triton`` needs none). For inference only (not with
            tensors that require grad); ``q`` and ``k`` must not overlap
            (views of one fused qkv projection are fine).
        out: ``(q_out, k_out)``, tensors like q and k (sharing no memory
            with them) that receive the results, so nothing is allocated;
            for inference only.

    Returns ``(q_rot, k_rot)``, equal to ``apply_rope(q, ...)`` and
    ``apply_rope(k, ...)``, in the dtypes of q and k.
    """
    pairing, rotary_dim, cos, sin = prepare_qk(
        q,
        k,
        positions,
        base=base,
        pairing=pairing,
        rotary_dim=rotary_dim,
        cos_sin=cos_sin,
        inplace=inplace,
        out=out,
    )
    if inplace:
        return tuple(_rotate_inplace(x, cos, sin, pairing, rotary_dim) for x in (q, k))
    if out is not None:
        q_out, k_out = out
        rotate_into(q_out, q, cos, sin, pairing, rotary_dim)
        return q_out, rotate_into(k_out, k, cos, sin, pairing, rotary_dim)
    return tuple(rotate(x, cos, sin, pairing, rotary_dim) for x in (q, k))


# ---------------------------------------------------------------------------
# compiled
# ---------------------------------------------------------------------------


def _rotate_qk(q, k, cos, sin, pairing: str, rotary_dim: int):
    # traced by torch.compile, where rotate takes its out-of-place branch
    return (
        rotate(q, cos, sin, pairing, rotary_dim),
        rotate(k, cos, sin, pairing, rotary_dim),
    )


def _rotate_qk_into(q, k, cos, sin, pairing: str, rotary_dim: int, q_out, k_out):
    # each pair along an axis of size 2: y = x cos + flip(x) (-sin, sin), one
    # expression over the whole output, so inductor writes q_out and k_out in
    # one loop that reads each element of q and k once (writing the two halves
    # of the pairs as two expressions read them twice, about 5% slower on the
    # CPU at the rope suite's shape)
    _, axis = pairs_axis(q, pairing, rotary_dim)  # -2 (half) or -1 (interleaved)
    cos, signed_sin = cos.unsqueeze(axis), torch.stack([-sin, sin], axis)
    for x, out in ((q, q_out), (k, k_out)):
        pairs = pairs_axis(x, pairing, rotary_dim)[0].to(torch.float32)
        target = pairs_axis(out, pairing, rotary_dim)[0]
        target.copy_(pairs * cos + pairs.flip(axis) * signed_sin)
        if rotary_dim < x.shape[-1]:
            out[..., rotary_dim:].copy_(x[..., rotary_dim:])
    return q_out, k_out


def _rotate_qk_inplace(q, k, cos, sin, pairing: str, rotary_dim: int):
    for x in (q, k):
        x[..., :rotary_dim] = rotate(x[..., :rotary_dim], cos, sin, pairing, rotary_dim)
    return q, k


def _is_compile_error(err: Exception) -> bool:
    from torch._dynamo.exc import TorchDynamoException
    from torch._inductor.exc import InductorError

    return isinstance(err, TorchDynamoException | InductorError)


@functools.cache
def _compiled(mode: str) -> Callable:
    """The torch.compile'd rotation, built on first use; one per mode, reused."""
    fn = {"new": _rotate_qk, "inplace": _rotate_qk_inplace, "out": _rotate_qk_into}
    return torch.compile(fn[mode], dynamic=False)


def compiled_apply_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rope_qk`` with the rotation compiled by ``torch.compile`` (chapter 10).

    Same arguments and results. The checks and ``rope_cos_sin`` run eagerly;
    the rotation of q and k is one compiled function, built the first time it
    is called and reused (``dynamic=False``: every new shape, dtype, pairing
    or rotary_dim compiles again, and past
    ``torch._dynamo.config.recompile_limit`` of them torch falls back to
    eager). On the CPU, inductor writes one vectorised C++ loop (it needs a
    C++ compiler); on the GPU, a Triton kernel. Use ``compile_rope_qk`` to
    compile ahead and learn how long compiling took.

    ``inplace=True`` writes the results into q and k; inductor still computes
    them into a buffer of their size first and copies (it cannot prove that a
    pair's two channels are read before either is written), so the eager
    ``apply_rope_qk(..., inplace=True)`` and ``rope_triton`` are the
    allocation-free paths. ``out=(q_out, k_out)`` is the fastest: one loop
    reads q and k once and stores the results straight into the given
    tensors, with no allocation (on the CPU a fresh output of this size costs
    page faults, which a GPU's caching allocator avoids).

    Raises ``RuntimeError`` naming the cause when torch.compile cannot build
    the kernel here; ``apply_rope_qk`` computes the same thing eagerly.
    """
    pairing, rotary_dim, cos, sin = prepare_qk(
        q,
        k,
        positions,
        base=base,
        pairing=pairing,
        rotary_dim=rotary_dim,
        cos_sin=cos_sin,
        inplace=inplace,
        out=out,
    )
    mode = "inplace" if inplace else "new" if out is None else "out"
    try:
        compiled = _compiled(mode)
    except RuntimeError as err:  # torch.compile itself unavailable (e.g. this Python)
        raise RuntimeError(_cannot_compile(q.device, err)) from err
    extra = () if out is None else tuple(out)
    try:
        return compiled(q, k, cos, sin, pairing, rotary_dim, *extra)
    except Exception as err:
        if not _is_compile_error(err):
            raise
        raise RuntimeError(_cannot_compile(q.device, err)) from err


def _cannot_compile(device: torch.device, err: Exception) -> str:
    first_line = (str(err).strip().splitlines() or [""])[0]
    return (
        f"torch.compile could not build the RoPE kernel for {device} "
        f"({type(err).__name__}: {first_line}); on the CPU inductor needs a "
        "working C++ compiler, on the GPU Triton. apply_rope_qk computes the "
        "same result eagerly"
    )


def compile_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[Callable[..., tuple[torch.Tensor, torch.Tensor]], float]:
    """Compile the rotation for example q and k; return ``(fn, compile_seconds)``.

    ``fn(q, k, positions=None, *, cos_sin=None)`` is ``compiled_apply_rope_qk``
    with ``base``, ``pairing``, ``rotary_dim`` and ``inplace`` bound; calls on
    tensors of the example's shapes, dtypes, strides and device run the
    compiled code without compiling again. ``compile_seconds`` is the wall time
    of the first call (tracing, code generation and the C++ or Triton build,
    or a hit in inductor's on-disk cache, plus one run), so time ``fn``
    afterwards for the run time. With ``inplace=True`` the first call works on
    copies and the example q and k are left as they were. With ``out``, the
    results go into those tensors (``fn`` keeps them as its default ``out``).
    """
    fn = functools.partial(
        compiled_apply_rope_qk,
        base=base,
        pairing=pairing,
        rotary_dim=rotary_dim,
        inplace=inplace,
        out=out,
    )
    if inplace:
        # same shapes and strides, other memory
        q, k = (
            torch.empty_strided(
                x.shape, x.stride(), dtype=x.dtype, device=x.device
            ).copy_(x)
            for x in (q, k)
        )
    start = time.perf_counter()
    fn(q, k, positions, cos_sin=cos_sin)
    if q.device.type == "cuda":
        torch.cuda.synchronize(q.device)
    return fn, time.perf_counter() - start


# ---------------------------------------------------------------------------
# decoding: the new tokens rotated, their keys written into the KV cache
# ---------------------------------------------------------------------------


def _check_cache_write(q, k, k_cache, offsets, pairing, rotary_dim, check_offsets):
    """Check the arguments of ``apply_rope_qk_to_cache``; return pairing, rotary_dim."""
    for name, x in (("q", q), ("k", k), ("k_cache", k_cache)):
        check_x(x, name)
        if x.ndim != 4:
            raise ValueError(
                f"{name} must be 4-D, (batch, heads, seq, head_dim), got shape "
                f"{tuple(x.shape)}"
            )
    batch, kv_heads, new, head_dim = k.shape
    if q.shape[0] != batch or q.shape[2] != new or q.shape[3] != head_dim:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch, seq (the "
            "new tokens) and head_dim; only their numbers of heads may differ"
        )
    want = (batch, kv_heads, head_dim, k.dtype, k.device)
    got = (*k_cache.shape[:2], k_cache.shape[3], k_cache.dtype, k_cache.device)
    if got != want:
        raise ValueError(
            "k_cache must be (batch, kv_heads, max_len, head_dim) with k's batch, "
            f"heads, head_dim, dtype and device, {want}; got shape "
            f"{tuple(k_cache.shape)}, {k_cache.dtype} on {k_cache.device}"
        )
    if q.device != k.device:
        raise ValueError(f"q is on {q.device} but k is on {k.device}")
    require_integer_tensor(offsets, "offsets")
    if offsets.shape != (batch,) or offsets.device != k.device:
        raise ValueError(
            f"offsets must be one integer per sequence, shape ({batch},), on "
            f"{k.device}; got shape {tuple(offsets.shape)} on {offsets.device}"
        )
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        raise ValueError(
            "apply_rope_qk_to_cache writes into the cache, for decoding; run it "
            "under torch.no_grad() (training rotates with apply_rope_qk)"
        )
    if tensors_overlap(k_cache, k) or tensors_overlap(k_cache, q):
        raise ValueError(
            "k_cache shares memory with q or k; give the new tokens' q and k "
            "apart from the cache they are written into"
        )
    if check_offsets:
        max_len = k_cache.shape[2]
        # one device synchronisation on a GPU (check_offsets=False skips it)
        if bool(((offsets < 0) | (offsets > max_len - new)).any()):
            raise ValueError(
                f"every offset must lie in 0 .. max_len - new = {max_len - new}, so "
                f"that the {new} new token(s) fit the cache; got {offsets.tolist()}"
            )
    return check_pairing(pairing), check_rotary_dim(head_dim, rotary_dim)


def _cache_positions(offsets: torch.Tensor, new: int) -> torch.Tensor:
    """``(B, new)``: token t of sequence b sits at ``offsets[b] + t``, its RoPE
    position and its row of the cache."""
    return offsets[:, None] + torch.arange(new, device=offsets.device)


def _write_rows(k_cache: torch.Tensor, k_rot: torch.Tensor, positions) -> None:
    """``k_cache[b, :, positions[b, t]] = k_rot[b, :, t]`` for every b and t."""
    batch = torch.arange(k_rot.shape[0], device=k_rot.device)[:, None]  # (B, 1)
    # both sides as (B, new, H, D): the indexed dimensions first
    k_cache.transpose(1, 2)[batch, positions] = k_rot.transpose(1, 2)


def apply_rope_qk_to_cache(
    q: torch.Tensor,
    k: torch.Tensor,
    k_cache: torch.Tensor,
    offsets: torch.Tensor,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    check_offsets: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate the new tokens' q and k and write the keys into the KV cache (chapter 10).

    Decoding a batch of sequences of different lengths: sequence ``b`` has
    ``offsets[b]`` tokens in its cache, and its new tokens (one each, when
    decoding a token at a time) sit at positions ``offsets[b], offsets[b] + 1,
    ...``, which are both their RoPE positions and their rows of the cache::

        k_cache[b, :, offsets[b] + t] = RoPE(k[b, :, t], offsets[b] + t)
        q_rot[b, :, t] = RoPE(q[b, :, t], offsets[b] + t)

    Args:
        q: ``(batch, heads, new, head_dim)``, the new tokens' queries.
        k: ``(batch, kv_heads, new, head_dim)``, their keys (kv_heads may
            differ from heads, as with grouped-query attention).
        k_cache: ``(batch, kv_heads, max_len, head_dim)``, preallocated, k's
            dtype and device; written in place, no other row touched.
        offsets: ``(batch,)`` integers on k's device, each in
            ``0 .. max_len - new``.
        base, pairing, rotary_dim: as for ``apply_rope``.
        check_offsets: check that every offset fits the cache (costs one
            device synchronisation on a GPU; a decoding loop that knows its
            lengths fit passes False).

    Returns ``(q_rot, k_cache)``. Eagerly the keys are rotated into a buffer
    of k's size and then scattered into the cache (two passes over the new
    keys, with cos and sin computed once for q and k);
    ``compiled_apply_rope_qk_to_cache`` rotates each key in the loop that
    stores it into its row. For inference only (under
    ``torch.no_grad()``). The values cached for the new tokens, ``v``, are
    not rotated: write them with ``v_cache[b, :, offsets[b] + t] = v[b, :, t]``.
    """
    pairing, rotary_dim = _check_cache_write(
        q, k, k_cache, offsets, pairing, rotary_dim, check_offsets
    )
    positions = _cache_positions(offsets, k.shape[2])
    # (B, 1, new, R/2): the same angles for every head of q and of k
    cos, sin = angles_cos_sin(positions[:, None], rotary_dim, base)
    q_rot = rotate(q, cos, sin, pairing, rotary_dim)
    _write_rows(k_cache, rotate(k, cos, sin, pairing, rotary_dim), positions)
    return q_rot, k_cache


def _rotate_into_cache(q, k, k_cache, positions, cos, sin, pairing, rotary_dim):
    # traced by torch.compile: each pair along an axis of size 2 and rotated as
    # one expression, y = x cos + flip(x) (-sin, sin) (as in _rotate_qk_into), so
    # inductor computes each rotated key inside the loop that stores it into its
    # cache row, with no buffer of k's size between (a cat of the two halves
    # would be materialised first)
    _, axis = pairs_axis(q, pairing, rotary_dim)
    cos, signed_sin = cos.unsqueeze(axis), torch.stack([-sin, sin], axis)

    def rotated(x):
        pairs = pairs_axis(x, pairing, rotary_dim)[0].to(torch.float32)
        y = (pairs * cos + pairs.flip(axis) * signed_sin).flatten(-2).to(x.dtype)
        if rotary_dim < x.shape[-1]:
            # partial rotary: the rest passes through
            y = torch.cat((y, x[..., rotary_dim:]), dim=-1)
        return y

    _write_rows(k_cache, rotated(k), positions)
    return rotated(q)


@functools.cache
def _compiled_cache_write() -> Callable:
    """The torch.compile'd rotation and cache write, built on first use and reused."""
    return torch.compile(_rotate_into_cache, dynamic=False)


def compiled_apply_rope_qk_to_cache(
    q: torch.Tensor,
    k: torch.Tensor,
    k_cache: torch.Tensor,
    offsets: torch.Tensor,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
    check_offsets: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rope_qk_to_cache`` compiled: one loop rotates and writes the cache.

    Same arguments and results. The checks and the angles' cos and sin run
    eagerly; TorchInductor compiles the rest into one kernel (C++ on the CPU,
    Triton on a GPU) whose loop over the new keys rotates each and stores it
    straight into its row of ``k_cache``, with no buffer of k's size between,
    as vLLM's and FlashInfer's fused RoPE-and-cache kernels do (the rotated q
    is written by a loop of its own). Built on the first call for each shape,
    dtype and pairing (``dynamic=False``); the first call's time is the
    compile time.

    Raises ``RuntimeError`` naming the cause when torch.compile cannot build
    the kernel here; ``apply_rope_qk_to_cache`` computes the same eagerly.
    """
    pairing, rotary_dim = _check_cache_write(
        q, k, k_cache, offsets, pairing, rotary_dim, check_offsets
    )
    positions = _cache_positions(offsets, k.shape[2])
    cos, sin = angles_cos_sin(positions[:, None], rotary_dim, base)
    try:
        compiled = _compiled_cache_write()
    except RuntimeError as err:  # torch.compile itself unavailable (e.g. this Python)
        raise RuntimeError(_cannot_compile(q.device, err)) from err
    try:
        args = (q, k, k_cache, positions, cos, sin, pairing, rotary_dim)
        q_rot = compiled(*args)
    except Exception as err:
        if not _is_compile_error(err):
            raise
        raise RuntimeError(_cannot_compile(q.device, err)) from err
    return q_rot, k_cache
