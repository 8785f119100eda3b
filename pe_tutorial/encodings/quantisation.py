"""RoPE in low precision: int8 and fp8 cos/sin tables and rotated queries and keys
(chapter 6, after the bfloat16 angles).

- ``fake_quantise``: a tensor rounded to int8 (symmetric, one scale per tensor
  or per row), to fp8 (``float8_e4m3fn``) or to bfloat16 and read back, in its
  own dtype.
- ``quantised_rope_scores``: the RoPE score of every query position with every key
  position, in float64, with the cos/sin table and/or the rotated q and k
  rounded on the way, as a model that stores them in 8 bits would.
- ``score_error_profiles``: the mean absolute error of a causal score matrix by
  the query's position and by the distance back to the key.
"""

from __future__ import annotations

import torch

from .._validation import require_even, require_positive_float

__all__ = [
    "QUANTISED_FORMATS",
    "FP8_MAX",
    "fake_quantise",
    "quantised_rope_scores",
    "score_error_profiles",
]

QUANTISED_FORMATS = ("int8", "fp8", "bfloat16")
# the largest finite float8_e4m3fn: 1.75 * 2**8
FP8_MAX = 448.0
INT8_MAX = 127


def fake_quantise(
    x: torch.Tensor, fmt: str, *, per_row: bool = False, limit: float | None = None
) -> torch.Tensor:
    """``x`` stored in 8 bits and read back, in ``x``'s dtype.

    ``"int8"``: symmetric, ``s = max|x| / 127`` over the whole tensor, or over
    each row (the last dimension) with ``per_row``, or ``s = limit / 127`` for
    values known to lie in ``[-limit, limit]`` (cos and sin: 1);
    ``x -> round(x / s) * s``, rounding half to even. ``"fp8"``: cast to
    ``torch.float8_e4m3fn`` (3 mantissa bits, so a relative step of ``2**-3``
    within each power of two) and back, without a scale; values beyond
    ``FP8_MAX`` (448), which the cast does not saturate, are refused.
    ``"bfloat16"``: cast to bfloat16 (8 significant bits) and back.
    """
    if fmt not in QUANTISED_FORMATS:
        raise ValueError(f"fmt must be one of {QUANTISED_FORMATS}, got {fmt!r}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"fake_quantise needs a floating-point tensor, got {x.dtype}")
    if fmt == "fp8":
        if bool((x.abs() > FP8_MAX).any()):
            raise ValueError(
                f"values beyond ±{FP8_MAX} do not fit float8_e4m3fn; scale them first"
            )
        return x.to(torch.float8_e4m3fn).to(x.dtype)
    if fmt == "bfloat16":
        return x.to(torch.bfloat16).to(x.dtype)
    if limit is not None:
        limit = require_positive_float(limit, "limit")
        if bool((x.abs() > limit).any()):
            raise ValueError(f"values beyond ±{limit} do not fit the given limit")
        largest = torch.tensor(limit, dtype=x.dtype, device=x.device)
    elif per_row:
        largest = x.abs().amax(dim=-1, keepdim=True)
    else:
        largest = x.abs().amax()
    # an all-zero row keeps scale 1 (it rounds to zeros either way)
    scale = torch.where(largest > 0, largest / INT8_MAX, torch.ones_like(largest))
    return (torch.round(x / scale).clamp(-INT8_MAX, INT8_MAX) * scale).to(x.dtype)


def quantised_rope_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    base: float = 10000.0,
    table: str | None = None,
    vectors: str | None = None,
) -> torch.Tensor:
    """``S[m, n] = (R_m q_m) . (R_n k_n)`` for positions ``0 .. T-1`` (chapter 6).

    ``q``, ``k``: ``(T, D)``; pairs ``(i, i + D/2)`` are turned by ``m theta_i``,
    ``theta_i = base ** (-2i / D)``, everything in float64. ``table``: round
    ``cos(m theta_i)`` and ``sin(m theta_i)`` with ``fake_quantise`` (int8 with
    the fixed scale ``1/127``, since both lie in ``[-1, 1]``). ``vectors``:
    round the rotated ``R_m q_m`` and ``R_n k_n`` (int8 with one scale per
    token, ``per_row``, as a per-token int8 KV cache stores keys). None:
    exact. Returns ``(T, T)``: query positions down, key positions across.
    """
    if q.ndim != 2 or q.shape != k.shape:
        raise ValueError(
            f"q and k must both be (seq, head_dim), got {tuple(q.shape)} and "
            f"{tuple(k.shape)}"
        )
    seq, head_dim = q.shape
    require_even(head_dim, "head_dim", "for RoPE (each frequency rotates a pair)")
    base = require_positive_float(base, "base")
    for name, fmt in (("table", table), ("vectors", vectors)):
        if fmt is not None and fmt not in QUANTISED_FORMATS:
            raise ValueError(
                f"{name} must be None or one of {QUANTISED_FORMATS}, got {fmt!r}"
            )
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    cos, sin = angles.cos(), angles.sin()
    if table is not None:
        bound = 1.0 if table == "int8" else None
        cos = fake_quantise(cos, table, limit=bound)
        sin = fake_quantise(sin, table, limit=bound)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        a, b = x.to(torch.float64).chunk(2, dim=-1)  # the pairs (i, i + D/2)
        rotated = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        if vectors is None:
            return rotated
        return fake_quantise(rotated, vectors, per_row=vectors == "int8")

    return rotate(q) @ rotate(k).T


def score_error_profiles(error: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean ``|E[m, n]|`` over causal pairs ``n <= m``, by query position and distance.

    ``error`` is ``(T, T)`` (query positions down, key positions across).
    Returns ``(by_position, by_distance)``, each ``(T,)`` in float64:
    ``by_position[m]`` is the mean over the keys ``n = 0 .. m``, and
    ``by_distance[r]`` the mean over the ``T - r`` pairs with ``m - n = r``.
    """
    if error.ndim != 2 or error.shape[0] != error.shape[1]:
        raise ValueError(
            f"error must be a square (T, T) matrix, got {tuple(error.shape)}"
        )
    size = error.shape[0]
    magnitude = error.detach().abs().to(torch.float64)
    causal = torch.ones(size, size, dtype=torch.bool).tril()
    by_position = (magnitude * causal).sum(-1) / causal.sum(-1)
    by_distance = torch.stack([magnitude.diagonal(-r).mean() for r in range(size)])
    return by_position, by_distance
