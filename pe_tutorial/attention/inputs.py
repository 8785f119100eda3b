"""Checks of attention's inputs, shared by every kernel (``attention``, ``flex``).

Each raises ``ValueError`` naming the shapes or dtype it got and what it
needed, before any matrix product can fail less clearly.
"""

from __future__ import annotations

import torch

__all__ = ["check_qkv", "check_scores_shape", "check_mask_dtype"]


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None) -> None:
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


def check_scores_shape(
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


def check_mask_dtype(mask: torch.Tensor) -> None:
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}"
        )
