"""Relative embeddings projected into the score, and DeBERTa's disentangled attention (chapter 8).

A table of relative-position vectors ``P`` (one row per bucket of ``i - j``)
is projected like the content is, ``K_r = P W_{k,r}`` and ``Q_r = P W_{q,r}``
(split into heads), and enters the score of query ``i`` and key ``j`` as

- **content to position** (c2p): ``q_i . K_r[d(i, j)]``, the query asks
  "what sits at this distance?" (the projected form of Shaw et al.'s
  ``q_i . a_ij``, and Transformer-XL's ``q_i W_{k,R} R_{i-j}`` term);
- **position to content** (p2c): ``k_j . Q_r[d(i, j)]``, the key answers
  "who looks at me from that distance?".

DeBERTa (He et al., 2021) uses both beside the content score and divides
every term by ``sqrt(s D)``, ``s = 1 + number of relative terms``::

    A_ij = (q_i . k_j + q_i . K_r[d(i, j)] + k_j . Q_r[d(i, j)]) / sqrt(3 D)

The row ``d(i, j)`` is ``clip(i - j, -k, k - 1) + k`` for a span ``k``
(DeBERTa v1), optionally after DeBERTa v2's log buckets. The paper writes
``d(j, i)`` in the third term; the released code, and so every checkpoint,
uses ``d(i, j)`` for both, which is what this module does (tested against
Hugging Face transformers' implementation).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import require_positive_float, require_positive_int
from .positions import relative_positions

__all__ = [
    "TERMS",
    "deberta_log_bucket",
    "disentangled_rows",
    "DisentangledRelativeBias",
]

# the relative terms, in DeBERTa's names
TERMS: tuple[str, ...] = ("c2p", "p2c")


def deberta_log_bucket(
    relative_position: torch.Tensor, position_buckets: int, max_position: int
) -> torch.Tensor:
    """DeBERTa v2's log buckets of a relative position ``i - j``: exact near 0, logarithmic after.

    With ``mid = position_buckets // 2``, distances up to ``mid`` keep their
    value; a larger distance ``n`` becomes ``sign * (mid + ceil((mid - 1) *
    log(n / mid) / log((max_position - 1) / mid)))``, so distances up to
    ``max_position - 1`` fill the values up to ``2 mid - 1``.
    """
    mid = require_positive_int(position_buckets, "position_buckets") // 2
    if mid < 2 or max_position - 1 <= mid:
        raise ValueError(
            f"need position_buckets >= 4 and max_position > position_buckets / 2 "
            f"+ 1, got position_buckets={position_buckets}, max_position="
            f"{max_position} (DeBERTa v3 uses 256 and 512)"
        )
    n = relative_position.abs()
    # log(n / mid) for the distances beyond mid (others get mid: log 1 = 0), in
    # float32 as the released code computes it, so the ceil agrees at every n
    log_ratio = torch.log(n.clamp(min=mid).float() / mid)
    log_max = torch.log(torch.tensor((max_position - 1) / mid))
    far = mid + torch.ceil(log_ratio / log_max * (mid - 1))
    return torch.where(
        n <= mid, relative_position, relative_position.sign() * far.long()
    )


def disentangled_rows(
    q_len: int,
    k_len: int | None,
    *,
    span: int,
    position_buckets: int | None = None,
    max_position: int | None = None,
    device=None,
) -> torch.Tensor:
    """Row ``d(i, j)`` of the relative table for every (query, key), ``(q_len, k_len)``.

    ``d(i, j) = clip(b(i - j) + span, 0, 2 span - 1)`` where ``b`` is the
    identity, or ``deberta_log_bucket`` when ``position_buckets`` is given.
    Queries are the last ``q_len`` of the ``k_len`` positions.
    """
    # i - j: positive for keys before the query
    distance = -relative_positions(q_len, k_len, device=device)
    if position_buckets is not None:
        distance = deberta_log_bucket(distance, position_buckets, max_position)
    return (distance + span).clamp(0, 2 * span - 1)


class DisentangledRelativeBias(nn.Module):
    """DeBERTa's relative terms, c2p and p2c, over a shared table of relative embeddings.

    ``forward(q, k)`` takes one layer's queries and keys ``(B, H, T, D)`` and
    returns ``(c2p + p2c) / sqrt(s D)`` with shape ``(B, H, Tq, Tk)``, where
    ``s = 1 + len(terms)``; the content score must be divided by the same
    ``sqrt(s D)`` (``DisentangledScheme`` does that).

    ``terms=("c2p",)`` is the projected relative embedding alone,
    ``q_i . W_{k,r} r_{d(i, j)}``. With ``position_buckets=None`` the table
    has ``2 * max_relative_positions`` rows, one per distance (DeBERTa v1);
    otherwise ``2 * position_buckets`` rows over log buckets (v2 and v3).
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        *,
        max_relative_positions: int = 512,
        position_buckets: int | None = None,
        terms: tuple[str, ...] = TERMS,
        init_std: float = 0.02,
    ):
        super().__init__()
        self.num_heads = require_positive_int(num_heads, "num_heads")
        self.head_dim = require_positive_int(head_dim, "head_dim")
        self.max_relative_positions = require_positive_int(
            max_relative_positions, "max_relative_positions"
        )
        terms = tuple(terms)
        if not terms or len(set(terms)) != len(terms) or set(terms) - set(TERMS):
            raise ValueError(
                f"terms must be one or both of {TERMS} without repeats, got {terms!r}"
            )
        self.terms = terms
        self.position_buckets = position_buckets
        if position_buckets is not None:
            # checks the pair once, here, instead of at the first forward
            deberta_log_bucket(torch.zeros(1), position_buckets, max_relative_positions)
        self.span = position_buckets or max_relative_positions
        width = num_heads * head_dim
        self.embeddings = nn.Parameter(torch.empty(2 * self.span, width))
        nn.init.normal_(
            self.embeddings, std=require_positive_float(init_std, "init_std")
        )
        # W_{k,r} makes the keys of the positions (c2p), W_{q,r} their queries (p2c)
        self.key_proj = nn.Linear(width, width) if "c2p" in terms else None
        self.query_proj = nn.Linear(width, width) if "p2c" in terms else None

    @property
    def scale_factor(self) -> int:
        """``s`` in ``sqrt(s D)``: one for the content score, one per relative term."""
        return 1 + len(self.terms)

    def rows(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """``d(i, j)``, the table row of each (query, key), ``(q_len, k_len)``."""
        return disentangled_rows(
            q_len,
            k_len,
            span=self.span,
            position_buckets=self.position_buckets,
            max_position=self.max_relative_positions,
            device=self.embeddings.device,
        )

    def _per_head(self, projection: nn.Linear) -> torch.Tensor:
        # (2 span, H D) -> (H, 2 span, D)
        projected = projection(self.embeddings)
        return projected.view(2 * self.span, self.num_heads, self.head_dim).transpose(
            0, 1
        )

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        if q.ndim != 4 or k.ndim != 4 or q.shape[1] != self.num_heads:
            raise ValueError(
                f"q and k must be (batch, heads={self.num_heads}, seq, head_dim="
                f"{self.head_dim}), got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        q_len, k_len = q.shape[-2], k.shape[-2]
        rows = self.rows(q_len, k_len)  # (Tq, Tk)
        scale = math.sqrt(self.scale_factor * self.head_dim)
        score = 0
        if self.key_proj is not None:
            # q_i . K_r[r] for every row r: (B, H, Tq, 2 span), then pick r = d(i, j)
            per_row = q.float() @ self._per_head(self.key_proj).transpose(-1, -2)
            index = rows.expand(*per_row.shape[:-1], k_len)
            score = score + per_row.gather(-1, index) / scale
        if self.query_proj is not None:
            # k_j . Q_r[r]: (B, H, 2 span, Tk), then pick row d(i, j) in column j
            per_row = self._per_head(self.query_proj) @ k.float().transpose(-1, -2)
            index = rows.expand(*per_row.shape[:-2], q_len, k_len)
            score = score + per_row.gather(-2, index) / scale
        return score

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, terms={self.terms}, "
            f"span={self.span}, position_buckets={self.position_buckets}"
        )
