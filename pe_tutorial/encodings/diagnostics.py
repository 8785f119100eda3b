"""Measurements that show what an encoding does to the token embeddings it is added to (chapters 2-3)."""

from __future__ import annotations

import torch

__all__ = ["norm_ratio", "mean_token_cosine", "trailing_ones"]


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
