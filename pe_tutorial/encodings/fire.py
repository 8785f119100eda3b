"""FIRE: a learned function of the normalised distance (Li et al., 2024; chapter 13).

FIRE adds to the score of query ``i`` and key ``j <= i`` the bias

    b_h(i, j) = f_h( psi(i - j) / psi(max(L, i)) ),     psi(x) = ln(c x + 1),

where ``f`` is a small MLP with one output per head, and ``c > 0`` and the
threshold ``L`` are learned. The argument of ``f`` lies in ``[0, 1]`` at every
length: the distance is measured as a fraction of how far back the query can
see (with ``psi`` stretching short distances, and ``L`` keeping the fraction
from jumping about for the first queries). A model trained on short sequences
therefore meets no argument at test time that it has not met in training,
only a finer sampling of the same interval.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .._validation import require_positive_int

__all__ = ["FIREBias"]


class FIREBias(nn.Module):
    """FIRE's bias ``(heads, T, T)`` for a causal sequence of ``T`` tokens (chapter 13).

    ``forward(length)``; entries above the diagonal (future keys) are 0, for
    the causal mask to remove. ``normalised_distance(length)`` is the MLP's
    input, in ``[0, 1]``.
    """

    def __init__(self, num_heads: int, *, hidden: int = 32, threshold: float = 512.0):
        super().__init__()
        require_positive_int(num_heads, "num_heads")
        require_positive_int(hidden, "hidden")
        if not threshold > 0:
            raise ValueError(f"threshold must be > 0 (L, in tokens), got {threshold}")
        self.mlp = nn.Sequential(
            nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, num_heads)
        )
        # c = softplus(raw) > 0, starting at 1; L learned, in tokens
        self.raw_c = nn.Parameter(torch.tensor(0.5413))  # softplus(0.5413) = 1.0
        self.threshold = nn.Parameter(torch.tensor(float(threshold)))

    def _psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(F.softplus(self.raw_c) * x + 1)

    def normalised_distance(self, length: int) -> torch.Tensor:
        """``psi(i - j) / psi(max(L, i))`` for ``j <= i`` (0 above the diagonal), ``(T, T)``."""
        require_positive_int(length, "length")
        i = torch.arange(length, dtype=torch.float32)[:, None]
        j = torch.arange(length, dtype=torch.float32)[None, :]
        distance = (i - j).clamp(min=0)
        reach = torch.maximum(self.threshold, i)
        return self._psi(distance) / self._psi(reach)

    def forward(self, length: int) -> torch.Tensor:
        x = self.normalised_distance(length)
        bias = self.mlp(x[..., None]).permute(2, 0, 1)  # (heads, T, T)
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        return bias.masked_fill(future, 0.0)
