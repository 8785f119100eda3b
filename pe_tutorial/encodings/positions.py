"""Where queries and keys sit: the one definition every relative scheme and the causal mask share.

Queries are the last ``q_len`` of ``k_len`` positions (equal lengths for a
full pass, fewer queries when decoding against a KV cache), and relative
positions are ``key - query``. Used by ALiBi (``book/07_alibi``), the Shaw,
T5 and contextual biases (``book/08_relative_position``) and ``attention``.
"""

from __future__ import annotations

import torch

from .._validation import require_positive_int

__all__ = ["query_positions", "relative_positions"]


def query_positions(
    q_len: int, k_len: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Absolute positions of the queries when they are the last ``q_len`` of ``k_len`` keys, ``(q_len,)``.

    ``q_len == k_len`` gives ``0 .. k_len - 1``; one query against a cache of
    ``k_len`` keys (decoding) sits at ``k_len - 1``. Shared by every relative
    scheme (ALiBi, T5, Shaw) so they agree on where a query is.
    """
    require_positive_int(q_len, "q_len")
    require_positive_int(k_len, "k_len")
    if q_len > k_len:
        raise ValueError(
            f"q_len={q_len} is larger than k_len={k_len}; the queries must be the last q_len of the keys "
            "(pass k_len >= q_len, e.g. the cache length plus the new tokens)"
        )
    return torch.arange(q_len, device=device) + (k_len - q_len)


def relative_positions(
    q_len: int, k_len: int | None = None, *, device=None
) -> torch.Tensor:
    """``rel[i, j] = key_position_j - query_position_i``, int64, shape ``(q_len, k_len)`` (chapter 8).

    Negative for keys in the past, positive for keys in the future; a causal
    model may attend where ``rel <= 0``.
    """
    k_len = q_len if k_len is None else k_len
    i = query_positions(q_len, k_len, device=device)  # (Tq,)
    j = torch.arange(k_len, device=device)  # (Tk,)
    return j[None, :] - i[:, None]  # (Tq, Tk)
