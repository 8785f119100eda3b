"""Measurements of position codes: what an encoding does to the token embeddings it
is added to (chapters 2-3), how alike the rows of a table are (chapter 4), and how
far apart the sinusoidal codes of different positions lie (chapter 4)."""

from __future__ import annotations

import torch

from .._validation import (
    require_even,
    require_integer_tensor,
    require_positive_float,
    require_positive_int,
)
from .absolute import sinusoidal_at

__all__ = [
    "norm_ratio",
    "mean_token_cosine",
    "trailing_ones",
    "cosine_similarity_matrix",
    "similarity_by_distance",
    "trend_and_rest",
    "nearest_rows",
    "sinusoidal_distance",
    "sinusoidal_float32_error",
]


def norm_ratio(
    position_table: torch.Tensor, token_embeddings: torch.Tensor
) -> torch.Tensor:
    """``||PE[p]|| / mean_t ||E[t]||`` for every position p: how loud the position is next to the token.

    ``position_table`` is ``(num_positions, dim)``, ``token_embeddings`` is
    ``(vocab, dim)``; the result has shape ``(num_positions,)``.
    """
    if position_table.shape[-1] != token_embeddings.shape[-1]:
        raise ValueError(
            f"position_table and token_embeddings must share dim, got {position_table.shape[-1]} "
            f"and {token_embeddings.shape[-1]}"
        )
    return position_table.norm(dim=-1) / token_embeddings.norm(dim=-1).mean()


def mean_token_cosine(
    token_embeddings: torch.Tensor, position_row: torch.Tensor
) -> float:
    """Mean cosine similarity between distinct tokens that sit at the same position.

    Every token ``E[t]`` gets the same ``position_row`` added; the result is the
    mean of ``cos(E[a] + PE, E[b] + PE)`` over pairs ``a != b``. Near 0 the
    tokens are still told apart; near 1 the position has drowned them out.
    """
    if token_embeddings.ndim != 2 or token_embeddings.shape[0] < 2:
        raise ValueError(
            f"token_embeddings must be (vocab >= 2, dim), got {tuple(token_embeddings.shape)}"
        )
    x = token_embeddings + position_row
    x = x / x.norm(dim=-1, keepdim=True)
    cosines = x @ x.T  # (V, V)
    vocab = x.shape[0]
    off_diagonal_sum = cosines.sum() - cosines.diagonal().sum()
    return float(off_diagonal_sum / (vocab * (vocab - 1)))


def trailing_ones(n: torch.Tensor) -> torch.Tensor:
    """Number of trailing 1 bits of each non-negative integer in ``n`` (e.g. 7 = 0b111 -> 3, 8 -> 0).

    Counting from p to p + 1 flips exactly ``trailing_ones(p) + 1`` bits.
    """
    if n.dtype.is_floating_point or bool((n < 0).any()):
        raise ValueError("trailing_ones needs non-negative integers")
    count = torch.zeros_like(n)
    rest = n.clone()
    while bool((rest & 1).any()):
        ones = rest & 1
        count += ones
        # keep shifting only the numbers whose low bit is still 1
        rest = torch.where(ones.bool(), rest >> 1, torch.zeros_like(rest))
    return count


def _require_table(table: torch.Tensor, name: str = "table") -> None:
    if not isinstance(table, torch.Tensor) or table.ndim != 2 or table.shape[0] < 2:
        shape = tuple(table.shape) if isinstance(table, torch.Tensor) else table
        raise ValueError(
            f"{name} must have shape (num_positions >= 2, dim), got {shape}"
        )


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """``S[p, q] = cos(row p, row q) = t_p . t_q / (||t_p|| ||t_q||)`` (chapter 4).

    ``table`` is ``(num_positions, dim)``; the result is ``(num_positions,
    num_positions)`` in float64. A row of zeros has no direction and is refused.
    """
    _require_table(table)
    rows = table.detach().to(torch.float64)
    norms = rows.norm(dim=-1, keepdim=True)
    if bool((norms == 0).any()):
        raise ValueError("a row of the table is all zeros: its cosine is undefined")
    unit = rows / norms
    return unit @ unit.T


def similarity_by_distance(
    table: torch.Tensor, max_distance: int | None = None
) -> torch.Tensor:
    """``s(k) = mean_p cos(row p, row p + k)``, ``k = 0 .. max_distance`` (chapter 4).

    The mean runs over the ``num_positions - k`` pairs at offset ``k`` (the
    ``k``-th diagonal of ``cosine_similarity_matrix``); ``s(0) = 1``. A table
    whose neighbouring rows are alike has ``s`` falling from near 1; a table
    of independent random rows has ``s(k)`` near 0 for every ``k > 0``.
    Default ``max_distance``: ``num_positions - 1``. Returns float64,
    ``(max_distance + 1,)``.
    """
    _require_table(table)
    last = table.shape[0] - 1
    if max_distance is None:
        max_distance = last
    require_positive_int(max_distance, "max_distance")
    if max_distance > last:
        raise ValueError(
            f"max_distance {max_distance} is more than the table's {table.shape[0]} "
            f"rows allow (at most {last})"
        )
    similarity = cosine_similarity_matrix(table)
    return torch.stack([similarity.diagonal(k).mean() for k in range(max_distance + 1)])


def trend_and_rest(
    table: torch.Tensor, window: int = 7
) -> tuple[torch.Tensor, torch.Tensor]:
    """A table split into a smooth trend and what is left (chapter 4).

    ``trend[p] = mean(table[p - h], ..., table[p + h])`` with ``h = window // 2``,
    each channel averaged over ``window`` neighbouring rows (the first and last
    rows repeated past the ends), and ``rest = table - trend``. A trained table
    whose neighbouring rows are alike puts most of its variance in the trend;
    noise of the initialisation stays in the rest. ``window`` odd, at least 3
    and at most the number of rows. Both float64, the table's shape.
    """
    _require_table(table)
    require_positive_int(window, "window")
    if window < 3 or window % 2 == 0 or window > table.shape[0]:
        raise ValueError(
            f"window must be odd, at least 3 and at most the table's "
            f"{table.shape[0]} rows, got {window}"
        )
    rows = table.detach().to(torch.float64)
    half = window // 2
    padded = torch.cat(
        (rows[:1].expand(half, -1), rows, rows[-1:].expand(half, -1)), dim=0
    )
    trend = padded.unfold(0, window, 1).mean(dim=-1)  # (num_positions, dim)
    return trend, rows - trend


def nearest_rows(
    table: torch.Tensor, *, chunk_size: int = 512
) -> tuple[float, int, int]:
    """The two closest distinct rows: ``(min_{p < q} ||t_p - t_q||, p, q)`` (chapter 4).

    Every pair is compared, in float64, ``chunk_size`` rows against the whole
    table at a time, so memory stays ``chunk_size x num_positions`` however long
    the table. Ties go to the first pair in row-major order.
    """
    _require_table(table)
    require_positive_int(chunk_size, "chunk_size")
    rows = table.detach().to(torch.float64)
    squared = rows.pow(2).sum(-1)  # (P,)
    best = (float("inf"), -1, -1)
    for start in range(0, rows.shape[0], chunk_size):
        block = rows[start : start + chunk_size]  # (C, dim)
        # ||a - b||^2 = |a|^2 + |b|^2 - 2 a.b; the winner's distance is
        # computed again directly below
        d2 = squared[start : start + len(block), None] + squared[None, :]
        d2 = d2 - 2 * block @ rows.T  # (C, P)
        p = torch.arange(start, start + len(block))[:, None]
        # only pairs p < q
        d2 = d2.masked_fill(torch.arange(rows.shape[0])[None, :] <= p, float("inf"))
        flat = int(d2.argmin())
        i, j = divmod(flat, rows.shape[0])
        distance = float((rows[start + i] - rows[j]).norm())
        if distance < best[0]:
            best = (distance, start + i, j)
    return best


def _exact_frequencies(dim: int, base: float) -> torch.Tensor:
    """``omega_i = base ** (-2i / dim)`` in float64, ``(dim / 2,)``."""
    require_positive_int(dim, "dim")
    require_even(dim, "dim", "for sinusoidal encodings (sin/cos pairs)")
    base = require_positive_float(base, "base")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_distance(
    offsets: torch.Tensor, dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """``||PE[p + k] - PE[p]|| = sqrt(dim - 2 sum_i cos(k omega_i))`` (chapter 4).

    From ``||PE[p]||^2 = dim / 2`` and ``PE[p] . PE[p + k] = sum_i cos(k
    omega_i)``, ``omega_i = base ** (-2i / dim)``: the distance between two codes
    depends on their offset alone, so the closest pair among N positions is the
    smallest value over ``k = 1 .. N - 1``. Float64, in exact arithmetic (no
    float32 angles), shape of ``offsets``.
    """
    require_integer_tensor(offsets)
    omega = _exact_frequencies(dim, base)
    angles = offsets.to(torch.float64)[..., None] * omega  # offsets.shape + (D/2,)
    squared = dim - 2 * angles.cos().sum(-1)
    # rounding can take k = 0 a hair below zero
    return squared.clamp(min=0).sqrt()


def sinusoidal_float32_error(
    positions: torch.Tensor, dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """``||sinusoidal_at(p) - PE_exact(p)||``, the float32 code's error (chapter 4).

    ``sinusoidal_at`` forms ``p * omega_i`` in float32 (chapter 4); the
    reference forms it in float64 from float64 frequencies. The float32
    product carries a relative error of about ``2**-24``, so the angle error,
    and this distance, grow in proportion to ``p``. Float64, shape of ``positions``.
    """
    require_integer_tensor(positions)
    omega = _exact_frequencies(dim, base)
    ours = sinusoidal_at(positions, dim, base=base).to(torch.float64)
    angles = positions.to(torch.float64)[..., None] * omega
    exact = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)
    return (ours - exact).norm(dim=-1)
