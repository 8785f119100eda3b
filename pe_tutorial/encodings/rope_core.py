"""The production RoPE rotation: argument checks, cos/sin, and the arithmetic, in one place.

``rope.apply_rope`` and ``RotaryEmbedding`` (chapter 6), ``fused_rope``'s eager
and compiled q/k rotation (chapter 10) and the Triton kernel's argument
handling all use these, so a fix here reaches every path:

- the checks of ``x``, ``pairing``, ``rotary_dim`` and ``positions``, and of a
  q/k call as a whole (``prepare_qk``: shapes, devices, ``cos_sin``,
  ``inplace`` and ``out=``);
- ``rope_frequencies`` ``theta_i = base ** (-2i / D)``, ``rope_angles`` and
  ``cos_sin``, in float32, the frequencies cached per device;
- ``rotate`` and ``rotate_into``: for each pair ``(a, b)`` of channels,
  ``(y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)``.

The teaching versions in ``rope`` (a matrix per token, complex numbers) are
written differently on purpose, and the Triton kernel has its own
arithmetic; the tests hold every one of them to these.
"""

from __future__ import annotations

import functools
from typing import Literal

import torch

from .._validation import (
    require_even,
    require_integer_tensor,
    require_positive_float,
    require_positive_int,
)
from .absolute import sinusoidal_frequencies

__all__ = [
    "Pairing",
    "PAIRINGS",
    "check_pairing",
    "check_rotary_dim",
    "check_x",
    "broadcasts_to",
    "resolve_positions",
    "rope_frequencies",
    "rope_angles",
    "cacheable",
    "clear_frequency_cache",
    "angles_cos_sin",
    "pair_views",
    "rotate_into",
    "rotate",
    "check_cos_sin",
    "tensors_overlap",
    "prepare_qk",
]

Pairing = Literal["half", "interleaved"]  # (i, i + D/2) vs (2i, 2i + 1)
PAIRINGS: tuple[str, ...] = ("half", "interleaved")


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------


def check_pairing(pairing: str) -> str:
    if pairing not in PAIRINGS:
        raise ValueError(
            f"pairing must be 'half' (pairs (i, i + D/2), GPT-NeoX / Hugging Face LLaMA) or "
            f"'interleaved' (pairs (2i, 2i + 1), GPT-J / Meta LLaMA), got {pairing!r}"
        )
    return pairing


def check_rotary_dim(head_dim: int, rotary_dim: int | None) -> int:
    """Return the number of rotated channels: ``rotary_dim``, or all of ``head_dim`` when None."""
    require_positive_int(head_dim, "head_dim")
    require_even(
        head_dim, "head_dim", "for RoPE (each frequency rotates a pair of channels)"
    )
    if rotary_dim is None:
        return head_dim
    require_positive_int(rotary_dim, "rotary_dim")
    require_even(
        rotary_dim, "rotary_dim", "for RoPE (each frequency rotates a pair of channels)"
    )
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim={rotary_dim} is larger than head_dim={head_dim}; "
            "rotary_dim counts the rotated channels of one head, so use rotary_dim <= head_dim"
        )
    return rotary_dim


def check_x(x: torch.Tensor, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor) or x.ndim < 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"{name} must be a tensor of shape (..., seq, head_dim), got {shape}"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor (queries or keys), "
            f"got dtype {x.dtype}"
        )


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target`` (cheaper than torch's)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def resolve_positions(
    positions: torch.Tensor | None, x: torch.Tensor, name: str = "x"
) -> torch.Tensor:
    """Default ``arange(seq)``; otherwise check that integer ``positions`` broadcast to ``x.shape[:-1]``."""
    target = tuple(x.shape[:-1])  # (..., T)
    if positions is None:
        return torch.arange(x.shape[-2], device=x.device)
    require_integer_tensor(positions)
    if not broadcasts_to(tuple(positions.shape), target):
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to "
            f"{name}'s (..., seq) = {target}; "
            "give one position per token, e.g. torch.arange(seq_len) + offset, or (batch, 1, seq_len) "
            f"per-row positions for {name} of shape (batch, heads, seq_len, head_dim)"
        )
    return positions.to(x.device)


# ---------------------------------------------------------------------------
# frequencies and angles
# ---------------------------------------------------------------------------


def rope_frequencies(head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """RoPE frequencies ``theta_i = base ** (-2i / head_dim)`` for ``i < head_dim / 2``, float32 (chapter 6).

    These are exactly the frequencies of the sinusoidal table of chapter 4
    (``sinusoidal_frequencies``): RoPE rotates by the same angles that the
    sinusoidal encoding writes down. ``head_dim=8, base=10000`` gives
    ``[1, 0.1, 0.01, 0.001]``.
    """
    check_rotary_dim(head_dim, None)
    require_positive_float(base, "base")
    return sinusoidal_frequencies(head_dim, base=base)


def rope_angles(
    positions: torch.Tensor, head_dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """Rotation angles ``positions[..., None] * theta``, float32, shape ``positions.shape + (head_dim/2,)``.

    ``positions`` are integers, cast to float32 here (exact below 2**24); the
    product is formed in float32 whatever dtype the queries have.
    """
    require_integer_tensor(positions)
    inv_freq = frequencies_on(head_dim, base, positions.device)
    # angle_{m,i} = m * theta_i; the integer positions are promoted to float32
    return positions.unsqueeze(-1) * inv_freq  # (..., T, D/2)


@functools.lru_cache(maxsize=64)
def _cached_frequencies(
    head_dim: int, base: float, device: torch.device
) -> torch.Tensor:
    return rope_frequencies(head_dim, base=base).to(device)


def clear_frequency_cache() -> None:
    """Drop the frequencies kept per (head_dim, base, device); ``rope.clear_rope_caches``."""
    _cached_frequencies.cache_clear()


def cacheable(base) -> bool:
    """Whether a table for ``base`` may be kept: a plain number, and not while tracing."""
    return type(base) in (int, float) and not torch.compiler.is_compiling()


def frequencies_on(head_dim: int, base: float, device: torch.device) -> torch.Tensor:
    """``rope_frequencies`` on ``device``, cached per (head_dim, base, device).

    Rebuilding the frequencies (a pow and two casts) on every call costs more
    than the rotation itself for a handful of tokens. Unhashable or odd
    arguments, and tracing under torch.compile, skip the cache.
    """
    if type(head_dim) is int and cacheable(base):
        return _cached_frequencies(head_dim, base, device)
    return rope_frequencies(head_dim, base=base).to(device)


def angles_cos_sin(
    positions: torch.Tensor, rotary_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``rope_angles``, float32, ``positions.shape + (R/2,)``."""
    angles = rope_angles(positions, rotary_dim, base=base)
    return angles.cos(), angles.sin()


# ---------------------------------------------------------------------------
# the vectorised rotation
# ---------------------------------------------------------------------------


def pair_views(
    x: torch.Tensor, pairing: str, rotary_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the channels ``a_i`` and ``b_i`` of the pairs, ``(..., T, R/2)``."""
    if pairing == "half":
        half = rotary_dim // 2
        return x[..., :half], x[..., half:rotary_dim]
    return x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]


def pairs_axis(
    x: torch.Tensor, pairing: str, rotary_dim: int
) -> tuple[torch.Tensor, int]:
    """The first ``rotary_dim`` channels of ``x`` with each pair along one axis of size 2.

    A view ``(..., 2, R/2)`` for the half pairing, ``(..., R/2, 2)`` for the
    interleaved one, and that axis (-2 or -1): ``view.select(axis, 0)`` holds
    the ``a_i`` of ``pair_views``, ``view.select(axis, 1)`` the ``b_i``.
    """
    # no slice when every channel rotates: inductor indexes a sliced view less
    # well (the compiled out= path ran about 10% slower with it)
    part = x if rotary_dim == x.shape[-1] else x[..., :rotary_dim]
    if pairing == "half":
        return part.unflatten(-1, (2, rotary_dim // 2)), -2
    return part.unflatten(-1, (rotary_dim // 2, 2)), -1


def rotate_into(
    out: torch.Tensor,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pairing: str,
    rotary_dim: int,
) -> torch.Tensor:
    """Write ``x`` into ``out`` with its first ``rotary_dim`` channels rotated and
    the rest copied through (partial rotary); returns ``out``.

    No autograd; ``out`` must not overlap ``x``. Four kernels and no
    temporaries when both are float32; otherwise the pairs are cast to
    float32 first.
    """
    x1, x2 = pair_views(x, pairing, rotary_dim)
    o1, o2 = pair_views(out, pairing, rotary_dim)
    if x.dtype == torch.float32 and out.dtype == torch.float32:
        # (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)
        torch.mul(x1, cos, out=o1).addcmul_(x2, sin, value=-1)
        torch.mul(x2, cos, out=o2).addcmul_(x1, sin)
    else:
        a, b = x1.to(torch.float32), x2.to(torch.float32)
        o1.copy_((a * cos).addcmul_(b, sin, value=-1))
        o2.copy_((b * cos).addcmul_(a, sin))
    if rotary_dim < x.shape[-1]:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
    return out


def rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str, rotary_dim: int
) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` channels of ``x``; cos, sin ``(..., T, R/2)``."""
    if not _needs_out_of_place(x, cos, sin):
        return _rotate_into_new(x, cos, sin, pairing, rotary_dim)
    # each pair (a, b) -> (a cos - b sin, b cos + a sin), in float32, out of place
    # so that autograd and tracing can follow it
    x1, x2 = pair_views(x.to(torch.float32), pairing, rotary_dim)
    y1 = (x1 * cos).addcmul(x2, sin, value=-1)
    y2 = (x2 * cos).addcmul(x1, sin)
    if pairing == "half":
        rotated = torch.cat((y1, y2), dim=-1)  # (..., T, R)
    else:
        # (..., T, R/2, 2) -> (..., T, R)
        rotated = torch.stack((y1, y2), dim=-1).flatten(-2)
    rotated = rotated.to(x.dtype)
    if rotary_dim == x.shape[-1]:
        return rotated
    # partial rotary: the rest passes through
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def _needs_out_of_place(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Autograd needs a graph, and torch.compile and torch.func (vmap, grad) need
    ops without ``out=``: then ``rotate`` cannot write into a new tensor."""
    needs_graph = torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    )
    return (
        needs_graph
        or torch.compiler.is_compiling()
        or torch._C._are_functorch_transforms_active()
    )


def _rotate_into_new(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str, rotary_dim: int
) -> torch.Tensor:
    """``rotate``'s arithmetic written straight into the result: no float32 copy
    of ``x``, no concatenation."""
    return rotate_into(torch.empty_like(x), x, cos, sin, pairing, rotary_dim)


# ---------------------------------------------------------------------------
# argument checks shared with rope_triton
# ---------------------------------------------------------------------------


def check_cos_sin(
    cos_sin, q: torch.Tensor, k: torch.Tensor, rotary_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check a precomputed (cos, sin) against q and k; return them in float32."""
    if not (
        isinstance(cos_sin, tuple | list)
        and len(cos_sin) == 2
        and all(isinstance(t, torch.Tensor) for t in cos_sin)
    ):
        raise ValueError(
            "cos_sin must be a pair of tensors (cos, sin), as rope_cos_sin returns, "
            f"got {type(cos_sin).__name__}"
        )
    cos, sin = cos_sin
    if not (cos.is_floating_point() and sin.is_floating_point()):
        raise ValueError(
            f"cos and sin must be floating-point, got {cos.dtype} and {sin.dtype}"
        )
    if cos.shape != sin.shape or cos.ndim == 0 or cos.shape[-1] != rotary_dim // 2:
        raise ValueError(
            f"cos and sin must both have shape (..., seq, rotary_dim / 2 = "
            f"{rotary_dim // 2}), got {tuple(cos.shape)} and {tuple(sin.shape)}; "
            "build them with rope_cos_sin(positions, rotary_dim)"
        )
    for name, x in (("q", q), ("k", k)):
        if not broadcasts_to(tuple(cos.shape[:-1]), tuple(x.shape[:-1])):
            raise ValueError(
                f"cos and sin of shape {tuple(cos.shape)} do not broadcast to "
                f"{name}'s (..., seq) = {tuple(x.shape[:-1])}"
            )
    if cos.device != q.device or sin.device != q.device:
        raise ValueError(
            f"cos and sin are on {cos.device} and {sin.device} but q is on "
            f"{q.device}; compute them where q and k are"
        )
    return cos.to(torch.float32), sin.to(torch.float32)


class _TooHard(Exception):
    pass


def _offsets_meet(terms: list[tuple[int, int]], target: int, budget: int) -> bool:
    """Whether ``sum_t c_t n_t == target`` for some integers ``0 <= n_t <= m_t``.

    ``terms`` holds the pairs ``(c_t, m_t)``. A depth-first search over the
    largest coefficients first, cut wherever the rest cannot reach the target;
    raises ``_TooHard`` after ``budget`` steps.
    """
    terms = sorted(terms, key=lambda term: -abs(term[0]))
    low, high = [0] * (len(terms) + 1), [0] * (len(terms) + 1)
    for i in range(len(terms) - 1, -1, -1):
        c, m = terms[i]
        low[i] = low[i + 1] + min(0, c * m)
        high[i] = high[i + 1] + max(0, c * m)
    steps = 0

    def search(i: int, rest: int) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            raise _TooHard
        if i == len(terms):
            return rest == 0
        c, m = terms[i]
        # the remaining terms must cover rest - c n, within [low[i+1], high[i+1]]
        lo, hi = rest - high[i + 1], rest - low[i + 1]
        if c > 0:
            first, last = -(-lo // c), hi // c
        else:
            first, last = -(-hi // c), lo // c
        return any(
            search(i + 1, rest - c * n) for n in range(max(first, 0), min(last, m) + 1)
        )

    return search(0, target)


def tensors_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether some element of ``a`` and some element of ``b`` share memory.

    Exact for the usual layouts (separate tensors, q and k split out of one
    fused qkv projection); True when it cannot tell.
    """
    if a.numel() == 0 or b.numel() == 0:
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    spans = []
    for x in (a, b):
        start = x.storage_offset() * x.element_size()
        extent = sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
        spans.append((start, start + (extent + 1) * x.element_size()))
    (a_start, a_end), (b_start, b_end) = spans
    if a_end <= b_start or b_end <= a_start:
        return False
    if a.dtype != b.dtype:
        return True
    terms = [(s, n - 1) for n, s in zip(a.shape, a.stride()) if n > 1]
    terms += [(-s, n - 1) for n, s in zip(b.shape, b.stride()) if n > 1]
    try:
        return _offsets_meet(terms, b.storage_offset() - a.storage_offset(), 100_000)
    except _TooHard:
        return True


def check_inplace(q: torch.Tensor, k: torch.Tensor) -> None:
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        raise ValueError(
            "inplace=True overwrites q and k, which autograd needs for the "
            "backward pass; use inplace=False when they require grad (or run "
            "under torch.no_grad() for inference)"
        )
    for name, x in (("q", q), ("k", k)):
        if any(n > 1 and s == 0 for n, s in zip(x.shape, x.stride())):
            raise ValueError(
                f"{name} has elements that share memory (an expanded tensor?), so it "
                f"cannot be rotated in place; use inplace=False or {name}.contiguous()"
            )
    if tensors_overlap(q, k):
        raise ValueError(
            "q and k share memory (the same tensor, or views that overlap), so "
            "rotating them in place would rotate some elements twice; use "
            "inplace=False, or pass non-overlapping views such as the q and k "
            "slices of a fused qkv projection"
        )


def prepare_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None,
    *,
    base: float,
    pairing: str,
    rotary_dim: int | None,
    cos_sin,
    inplace: bool,
    out=None,
) -> tuple[str, int, torch.Tensor, torch.Tensor]:
    """Check the arguments of a q/k rotation; return pairing, rotary_dim, cos, sin."""
    check_x(q, "q")
    check_x(k, "k")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same head_dim, got {q.shape[-1]} and "
            f"{k.shape[-1]}; RoPE turns a head's queries and keys pair by pair"
        )
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"q and k must have the same seq length, got {q.shape[-2]} and "
            f"{k.shape[-2]}; when decoding with a KV cache, rotate the new keys "
            "with the new queries (same positions) and append them to the cache"
        )
    if q.device != k.device:
        raise ValueError(f"q is on {q.device} but k is on {k.device}")
    if not isinstance(inplace, bool):
        raise ValueError(f"inplace must be True or False, got {inplace!r}")
    pairing = check_pairing(pairing)
    rotary_dim = check_rotary_dim(q.shape[-1], rotary_dim)
    if cos_sin is None:
        positions_q = resolve_positions(positions, q, "q")
        resolve_positions(positions, k, "k")
        cos, sin = angles_cos_sin(positions_q, rotary_dim, base)
    elif positions is not None:
        raise ValueError(
            "give positions or cos_sin, not both: cos_sin already holds the "
            "angles of the positions"
        )
    else:
        cos, sin = check_cos_sin(cos_sin, q, k, rotary_dim)
    if inplace:
        check_inplace(q, k)
    if out is not None:
        if inplace:
            raise ValueError(
                "give inplace=True or out=, not both: in place the results go "
                "into q and k themselves"
            )
        check_out(out, q, k)
    return pairing, rotary_dim, cos, sin


def check_out(out, q: torch.Tensor, k: torch.Tensor) -> None:
    """``out`` must be two tensors like q and k that share no memory with them."""
    if not (isinstance(out, tuple | list) and len(out) == 2):
        raise ValueError(
            "out must be a pair (q_out, k_out) of tensors like q and k, e.g. "
            f"(torch.empty_like(q), torch.empty_like(k)); got {type(out).__name__}"
        )
    for name, target, x in (("q_out", out[0], q), ("k_out", out[1], k)):
        like = (x.shape, x.dtype, x.device)
        if not isinstance(target, torch.Tensor) or (
            (target.shape, target.dtype, target.device) != like
        ):
            got = (
                (tuple(target.shape), target.dtype, target.device)
                if isinstance(target, torch.Tensor)
                else type(target).__name__
            )
            raise ValueError(
                f"{name} must have the shape, dtype and device of "
                f"{name[0]}, {(tuple(x.shape), x.dtype, x.device)}; got {got}"
            )
        if torch.is_grad_enabled() and x.requires_grad:
            raise ValueError(
                "out= writes into given tensors, which autograd cannot follow; "
                "use out=None when q or k require grad"
            )
    for a, b in ((out[0], out[1]), (out[0], q), (out[0], k), (out[1], q), (out[1], k)):
        if tensors_overlap(a, b):
            raise ValueError(
                "the out tensors share memory with q, k or each other; give "
                "separate tensors, or use inplace=True to overwrite q and k"
            )


# ---------------------------------------------------------------------------
