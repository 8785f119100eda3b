"""Relative position schemes that change the attention scores. Explained in ``book/08_relative_position``.

Three ways to let the score of query ``i`` and key ``j`` see where they are:

- **Shaw et al. (2018)**: a learned vector ``a_{ij} = w[clip(j - i, -K, K)]``
  from a table of ``2K + 1`` rows joins the key, ``e_ij = q_i . (k_j + a_ij) / sqrt(D)``.
  The relative part ``q_i . a_ij`` depends on the query: a *contextual* bias.
  A second table may join the values, ``z_i = sum_j alpha_ij (v_j + a^V_ij)``.
- **T5 (Raffel et al., 2020)**: ``j - i`` is put into one of ``num_buckets``
  buckets (exact for small distances, logarithmic up to ``max_distance``), and
  each head learns one scalar per bucket, ``e_ij = q_i . k_j / sqrt(D) + b_h[bucket(j - i)]``.
- **CoPE (Golovneva et al., 2024)**, contextual position encoding: the
  position of key ``j`` seen from query ``i`` is not counted in tokens but in
  gates ``p_ij = sum_{t=j}^{i} sigmoid(q_i . k_t / sqrt(D))``, and the bias is
  ``q_i . e[p_ij]`` with ``e`` interpolated between integer rows.

Every bias comes out with shape ``(batch, heads, q_len, k_len)`` (or
``(heads, q_len, k_len)`` for T5, which does not depend on the batch), ready
to be added to the scaled scores; ``pe_tutorial.attention.schemes`` plugs them into attention.
Relative positions are ``key - query`` throughout, with the queries being the
last ``q_len`` of the ``k_len`` positions (``pe_tutorial.encodings.positions``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import require_positive_float, require_positive_int
from .positions import relative_positions

__all__ = [
    "shaw_relative_indices",
    "shaw_relative_scores",
    "shaw_value_term",
    "ShawRelativePosition",
    "t5_relative_position_bucket",
    "T5RelativeBias",
    "t5_untrained_share",
    "cope_positions",
    "cope_bias",
    "ContextualPositionBias",
]


# ---------------------------------------------------------------------------
# Shaw et al. (2018): clipped relative embeddings
# ---------------------------------------------------------------------------


def _require_max_relative_position(max_relative_position) -> int:
    if isinstance(max_relative_position, bool) or not isinstance(
        max_relative_position, int
    ):
        raise ValueError(
            f"max_relative_position (K) must be an integer >= 0, got {max_relative_position!r}"
        )
    if max_relative_position < 0:
        raise ValueError(
            f"max_relative_position (K) must be >= 0, got {max_relative_position}; "
            "K is the largest distance the table tells apart (Shaw et al. use K = 16 or so)"
        )
    return max_relative_position


def shaw_relative_indices(
    q_len: int, k_len: int | None, max_relative_position: int, *, device=None
) -> torch.Tensor:
    """Row of the Shaw table for every (query, key): ``clip(j - i, -K, K) + K``, shape ``(q_len, k_len)`` (chapter 8).

    Row ``K`` is "same position"; rows ``0`` and ``2K`` collect every key at
    least ``K`` positions before or after the query.
    """
    K = _require_max_relative_position(max_relative_position)
    rel = relative_positions(q_len, k_len, device=device)  # (Tq, Tk), j - i
    return rel.clamp(-K, K) + K


def shaw_relative_scores(
    q: torch.Tensor, table: torch.Tensor, k_len: int | None = None
) -> torch.Tensor:
    """The relative part of Shaw et al.'s score, ``q_i . a_ij / sqrt(D)`` (chapter 8).

    Returns ``(..., q_len, k_len)``.

    ``q``: ``(..., q_len, head_dim)``; ``table``: ``(2K + 1, head_dim)`` with
    ``a_ij = table[clip(j - i, -K, K) + K]``. Computed without a loop and
    without building the ``(q_len, k_len, head_dim)`` tensor of all ``a_ij``:
    first ``q_i . w_r`` for the ``2K + 1`` rows, then gather by index.
    """
    if table.ndim != 2 or table.shape[0] % 2 != 1:
        raise ValueError(
            f"table must have shape (2K + 1, head_dim), got {tuple(table.shape)}"
        )
    if q.shape[-1] != table.shape[-1]:
        raise ValueError(
            f"q has head_dim {q.shape[-1]} but the table rows have "
            f"{table.shape[-1]}; they must match"
        )
    q_len = q.shape[-2]
    k_len = q_len if k_len is None else k_len
    K = (table.shape[0] - 1) // 2
    index = shaw_relative_indices(q_len, k_len, K, device=q.device)  # (Tq, Tk)
    # s[..., i, r] = q_i . w_r / sqrt(D): one small matmul, (..., Tq, 2K+1)
    per_row = (q.float() @ table.float().T) / math.sqrt(q.shape[-1])
    # pick, for each (i, j), the row r = index[i, j]
    return per_row.gather(-1, index.expand(*per_row.shape[:-1], k_len))  # (..., Tq, Tk)


def shaw_value_term(weights: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Shaw et al.'s value-side term ``sum_j alpha_ij a^V_ij``, ``(..., q_len, D)``.

    Chapter 8. ``weights``: attention probabilities ``(..., q_len, k_len)``;
    ``table``: ``(2K + 1, head_dim)`` with ``a^V_ij = table[clip(j - i, -K, K) + K]``.
    The weights of the keys that share a row are summed first (a scatter into
    ``(..., q_len, 2K + 1)``), then one matmul with the table.
    """
    if table.ndim != 2 or table.shape[0] % 2 != 1:
        raise ValueError(
            f"table must have shape (2K + 1, head_dim), got {tuple(table.shape)}"
        )
    q_len, k_len = weights.shape[-2:]
    index = shaw_relative_indices(
        q_len, k_len, (table.shape[0] - 1) // 2, device=weights.device
    )
    per_row = weights.new_zeros(*weights.shape[:-1], table.shape[0])
    per_row.scatter_add_(-1, index.expand(weights.shape), weights)
    return per_row @ table.to(weights.dtype)


class ShawRelativePosition(nn.Module):
    """Shaw et al.'s learned relative embeddings, one table shared by all heads (chapter 8).

    ``forward(q, k_len)`` returns the key-side bias ``q_i . a^K_ij / sqrt(D)``
    with shape ``(..., q_len, k_len)``, so that ``q k^T / sqrt(D) + bias``
    equals ``q_i . (k_j + a^K_ij) / sqrt(D)``. With ``values=True`` a second
    table ``a^V`` joins the values (Shaw et al.'s equation 3),
    ``z_i = sum_j alpha_ij (v_j + a^V_ij)``: ``value_term(weights)``. Distances
    beyond ``K`` share the edge rows, so the module works at any length.
    """

    def __init__(
        self,
        max_relative_position: int,
        head_dim: int,
        *,
        values: bool = False,
        init_std: float = 0.02,
    ):
        super().__init__()
        self.max_relative_position = _require_max_relative_position(
            max_relative_position
        )
        self.head_dim = require_positive_int(head_dim, "head_dim")
        std = require_positive_float(init_std, "init_std")
        rows = 2 * self.max_relative_position + 1
        self.weight = nn.Parameter(torch.empty(rows, head_dim))
        nn.init.normal_(self.weight, std=std)
        self.value_weight = None
        if values:
            self.value_weight = nn.Parameter(torch.empty(rows, head_dim))
            nn.init.normal_(self.value_weight, std=std)

    def forward(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        return shaw_relative_scores(q, self.weight, k_len)

    def value_term(self, weights: torch.Tensor) -> torch.Tensor:
        """``sum_j alpha_ij a^V_ij`` for attention probabilities ``(..., q_len, k_len)``."""
        if self.value_weight is None:
            raise ValueError(
                "this ShawRelativePosition has no value table; build it with "
                "values=True"
            )
        return shaw_value_term(weights, self.value_weight)

    def extra_repr(self) -> str:
        return (
            f"max_relative_position={self.max_relative_position}, "
            f"head_dim={self.head_dim}, values={self.value_weight is not None}"
        )


# ---------------------------------------------------------------------------
# T5 (Raffel et al., 2020): bucketed relative bias
# ---------------------------------------------------------------------------


def _check_bucket_arguments(bidirectional: bool, num_buckets, max_distance) -> int:
    """Validate the bucket settings; return ``max_exact``, the number of exactly represented distances."""
    if (
        isinstance(num_buckets, bool)
        or not isinstance(num_buckets, int)
        or num_buckets < 4
        or num_buckets % 2
    ):
        raise ValueError(
            f"num_buckets must be an even integer >= 4, got {num_buckets!r}; "
            "half the buckets (per direction) hold exact distances, the other half logarithmic ranges (T5 uses 32)"
        )
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, int)
        or max_distance <= max_exact
    ):
        raise ValueError(
            f"max_distance must be an integer larger than the exact range ({max_exact} for "
            f"num_buckets={num_buckets}, bidirectional={bidirectional}), got {max_distance!r}; "
            "increase max_distance (T5 uses 128) or use fewer buckets"
        )
    return max_exact


def t5_relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket of each relative position ``key - query`` (chapter 8).

    Bidirectional: half the buckets for keys at or before the query, half for
    keys after it (offset ``num_buckets / 2``). Causal: every bucket for keys
    at or before the query; keys after it all fall into bucket 0. Within a
    direction of ``N`` buckets, with ``n = |distance|`` and ``E = N / 2``::

        bucket = n                                        if n < E
        bucket = min(E + floor(log(n / E) / log(max_distance / E) * (N - E)), N - 1)
                                                          otherwise

    so distances below ``E`` each have a bucket, larger ones share buckets
    whose width grows geometrically, and everything from about
    ``max_distance`` on shares the last bucket.
    """
    max_exact = _check_bucket_arguments(bidirectional, num_buckets, max_distance)
    relative_position = _relative_positions(relative_position)
    if bidirectional:
        per_direction = num_buckets // 2
        # keys after the query use the upper half
        offset = (relative_position > 0).long() * per_direction
        n = relative_position.abs()
    else:
        per_direction = num_buckets
        offset = torch.zeros_like(relative_position)
        n = (-relative_position).clamp(min=0)  # keys after the query: distance 0
    # log-spaced buckets for n >= E (the clamp keeps log away from 0 where n < E),
    # in T5's order of operations, so that float rounding puts n where T5 does
    log_ratio = torch.log(n.clamp(min=max_exact).float() / max_exact)
    spread = (
        log_ratio / math.log(max_distance / max_exact) * (per_direction - max_exact)
    )
    large = (max_exact + spread.long()).clamp(max=per_direction - 1)
    return offset + torch.where(n < max_exact, n, large)


def _relative_positions(relative_position) -> torch.Tensor:
    """``t5_relative_position_bucket``'s offsets, checked, as int64."""
    if (
        not isinstance(relative_position, torch.Tensor)
        or relative_position.is_floating_point()
    ):
        raise ValueError(
            "relative_position must be an integer tensor of key - query positions"
        )
    return relative_position.long()


def t5_untrained_share(
    train_length: int,
    length: int,
    *,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> float:
    """The share of causal (query, key) pairs in a window of ``length`` whose bucket
    no pair in a window of ``train_length`` reached (chapter 9).

    A causal model trained on windows of ``L`` sees distances ``0 .. L - 1``;
    a window of ``n`` holds ``n - d`` pairs at distance ``d``. The pairs whose
    distance falls in a bucket none of ``0 .. L - 1`` falls in read a bias
    that training never changed.
    """
    require_positive_int(train_length, "train_length")
    require_positive_int(length, "length")

    def bucket(distances: torch.Tensor) -> torch.Tensor:
        return t5_relative_position_bucket(
            -distances,
            bidirectional=False,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )

    trained = bucket(torch.arange(train_length)).unique()
    distances = torch.arange(length)
    pairs = length - distances
    untrained = ~torch.isin(bucket(distances), trained)
    return (pairs * untrained).sum().item() / pairs.sum().item()


class T5RelativeBias(nn.Module):
    """A learned scalar per head and bucket, T5's relative attention bias (chapter 8).

    ``forward(q_len, k_len=None)`` returns ``(num_heads, q_len, k_len)`` with
    ``bias[h, i, j] = weight[bucket(j - i), h]``; ``weight`` has shape
    ``(num_buckets, num_heads)`` as in T5 checkpoints. ``relative_bias`` gives
    the same values as a function of the relative position only,
    ``(num_heads, q_len + k_len - 1)``, which is all a fused kernel needs.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
        init_std: float = 0.02,
    ):
        super().__init__()
        self.num_heads = require_positive_int(num_heads, "num_heads")
        _check_bucket_arguments(bidirectional, num_buckets, max_distance)
        self.bidirectional, self.num_buckets, self.max_distance = (
            bidirectional,
            num_buckets,
            max_distance,
        )
        self.weight = nn.Parameter(torch.empty(num_buckets, num_heads))
        nn.init.normal_(self.weight, std=require_positive_float(init_std, "init_std"))

    def bucket(self, relative_position: torch.Tensor) -> torch.Tensor:
        return t5_relative_position_bucket(
            relative_position,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def relative_bias(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """Bias for every relative position ``r = -(k_len - 1) .. q_len - 1``: ``(num_heads, q_len + k_len - 1)``.

        Those are all the values ``j - i`` takes when the queries are the last
        ``q_len`` positions; column ``c`` holds ``r = c - (k_len - 1)``.
        """
        k_len = q_len if k_len is None else k_len
        # every j - i that occurs
        r = torch.arange(-(k_len - 1), q_len, device=self.weight.device)
        return self.weight[self.bucket(r)].T  # (H, R)

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        rel = relative_positions(q_len, k_len, device=self.weight.device)  # (Tq, Tk)
        # (Tq, Tk, H) -> (H, Tq, Tk)
        return self.weight[self.bucket(rel)].permute(2, 0, 1)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


# ---------------------------------------------------------------------------
# CoPE (Golovneva et al., 2024): contextual positions
# ---------------------------------------------------------------------------


def cope_positions(
    q: torch.Tensor, k: torch.Tensor, *, max_position: float | None = None
) -> torch.Tensor:
    """CoPE's positions ``p_ij = sum_{t=j}^{i} sigmoid(q_i . k_t / sqrt(D))``, j <= i.

    Chapter 8. ``q``: ``(..., q_len, D)``, ``k``: ``(..., k_len, D)``; returns
    float32 ``(..., q_len, k_len)``, 0 for keys after the query. With every
    gate equal to 1 this is ``i - j + 1``, the token count; gates near 0 let a
    query skip tokens it does not want to count. ``max_position`` clips ``p``.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    # (Tq, Tk): key j <= query i
    causal = relative_positions(q_len, k_len, device=q.device) <= 0
    # g_it = sigmoid(q_i . k_t / sqrt(D)), only for t <= i
    gates = (
        torch.sigmoid(
            (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        )
        * causal
    )
    # p_ij = sum_{t >= j} g_it: a cumulative sum from the right
    positions = gates.flip(-1).cumsum(-1).flip(-1)  # (..., Tq, Tk)
    if max_position is not None:
        positions = positions.clamp(max=max_position)
    return positions


def cope_bias(q: torch.Tensor, k: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """CoPE bias ``q_i . e[p_ij] / sqrt(D)`` with ``e`` linearly interpolated between rows (chapter 8).

    ``table``: ``(num_positions, D)``, positions clipped to ``num_positions - 1``.
    Since ``q . e[p]`` is linear in ``e``, interpolating the scores
    ``z[r] = q . e[r]`` at ``floor(p)`` and ``ceil(p)`` equals scoring the
    interpolated vector, and needs only ``(..., q_len, num_positions)`` dot products.
    Returns float32 ``(..., q_len, k_len)``; keys after the query get 0 (mask them).
    """
    if table.ndim != 2 or table.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"table must have shape (num_positions, head_dim={q.shape[-1]}), got {tuple(table.shape)}"
        )
    positions = cope_positions(q, k, max_position=table.shape[0] - 1)  # (..., Tq, Tk)
    # z[..., i, r] = q_i . e_r / sqrt(D)
    z = (q.float() @ table.float().T) / math.sqrt(q.shape[-1])  # (..., Tq, P)
    low = positions.floor().long()
    high = positions.ceil().long()
    frac = positions - low
    # linear interpolation between the scores of the neighbouring integer positions
    return (1 - frac) * z.gather(-1, low) + frac * z.gather(-1, high)


class ContextualPositionBias(nn.Module):
    """CoPE, contextual position encoding (Golovneva et al., 2024), causal attention only (chapter 8).

    ``forward(q, k)`` returns the bias ``q_i . e[p_ij] / sqrt(D)`` of
    ``cope_bias``, shape ``(..., q_len, k_len)``, with a learned table ``e`` of
    ``num_positions`` rows (positions past the last row are clipped to it).
    The table is shared by the heads; the *positions* differ per head because
    they come from that head's queries and keys.
    """

    def __init__(self, num_positions: int, head_dim: int, *, init_std: float = 0.02):
        super().__init__()
        self.num_positions = require_positive_int(num_positions, "num_positions")
        self.head_dim = require_positive_int(head_dim, "head_dim")
        self.weight = nn.Parameter(torch.empty(num_positions, head_dim))
        nn.init.normal_(self.weight, std=require_positive_float(init_std, "init_std"))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return cope_bias(q, k, self.weight)

    def extra_repr(self) -> str:
        return f"num_positions={self.num_positions}, head_dim={self.head_dim}"
