"""2-D RoPE with mixed, learnable frequencies (RoPE-Mixed, Heo et al., 2024; chapter 13).

Axial 2-D RoPE (chapter 6, ``apply_rope_nd``) turns half of a head's pairs
with the row and the other half with the column, so the score of two patches
is a sum of a function of the row offset and a function of the column
offset: it cannot single out a diagonal direction. RoPE-Mixed gives every
pair ``i`` a frequency for each axis, ``(theta_i^x, theta_i^y)``, learned, and
turns it by

    angle_i(x, y) = theta_i^x * x + theta_i^y * y,

so each pair measures the offset along its own direction in the plane. The
score still depends only on the offset ``(dx, dy)`` between two patches.
``MixedRoPE2d`` starts each pair at RoPE's frequency for its magnitude in a
random direction. Half pairing.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import require_integer_tensor
from .rope_core import check_rotary_dim, check_x, rope_frequencies, rotate

__all__ = ["MixedRoPE2d"]


class MixedRoPE2d(nn.Module):
    """``forward(x, positions)``: ``x`` ``(..., T, head_dim)``, ``positions``
    ``(..., T, 2)`` integer (x, y) coordinates; returns a tensor like ``x``.

    ``frequencies`` is the learned ``(2, head_dim / 2)``: row 0 the x
    frequencies, row 1 the y ones.
    """

    def __init__(self, head_dim: int, *, base: float = 100.0, seed: int = 0):
        super().__init__()
        self.head_dim = check_rotary_dim(head_dim, None)
        magnitude = rope_frequencies(head_dim, base=base)
        generator = torch.Generator().manual_seed(seed)
        direction = torch.rand(head_dim // 2, generator=generator) * 2 * math.pi
        self.frequencies = nn.Parameter(
            torch.stack([magnitude * direction.cos(), magnitude * direction.sin()])
        )

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        check_x(x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x has head_dim {x.shape[-1]}; this MixedRoPE2d was built for "
                f"{self.head_dim}"
            )
        if positions.shape[-1] != 2 or positions.shape[-2] != x.shape[-2]:
            raise ValueError(
                f"positions must be (..., T, 2), one (x, y) per token of x's "
                f"{x.shape[-2]}, got {tuple(positions.shape)}"
            )
        require_integer_tensor(positions)
        angles = positions.float() @ self.frequencies  # (..., T, D/2)
        return rotate(x, angles.cos(), angles.sin(), "half", self.head_dim)
