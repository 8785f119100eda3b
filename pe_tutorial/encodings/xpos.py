"""xPos: RoPE with an exponential decay per pair (Sun et al., 2023; chapter 13).

xPos rotates q and k as RoPE does and also scales pair ``i`` of the query at
position ``m`` by ``zeta_i ** (m / gamma)`` and of the key at ``n`` by
``zeta_i ** (-n / gamma)``, with ``zeta_i = (2i + 0.4 D) / (1.4 D)`` (below 1,
smallest for the fastest pairs) and ``gamma = scale_base = 512``. In the score
the two meet as ``zeta_i ** ((m - n) / gamma)``: pair ``i``'s contribution
still depends only on the distance, and now shrinks exponentially with it,
fastest for the fast pairs, whose rotation is the least stable far away.

The scales alone would overflow on long sequences (``zeta ** (-n / gamma)``
for large ``n``); since any shift of all positions cancels in every score,
``apply_xpos`` measures positions from the middle of the keys' positions, as
the reference implementations (torchscale, rotary-embedding-torch) do.
The pairing is the half one.
"""

from __future__ import annotations

import torch

from .rope import apply_rope
from .rope_core import check_rotary_dim

__all__ = ["xpos_decay", "apply_xpos"]


def xpos_decay(head_dim: int) -> torch.Tensor:
    """``zeta_i = (2i + 0.4 D) / (1.4 D)`` for each pair ``i``, float32 ``(D/2,)``."""
    check_rotary_dim(head_dim, None)
    return (torch.arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim)


def apply_xpos(
    q: torch.Tensor,
    k: torch.Tensor,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    *,
    scale_base: float = 512.0,
    base: float = 10000.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q ``(..., Tq, D)`` and k ``(..., Tk, D)`` rotated by RoPE and scaled by xPos.

    Positions default to ``arange``. The score of the results is
    ``sum_i zeta_i ** ((m - n) / scale_base) * (RoPE's pair-i term)``.
    """
    if not scale_base > 0:
        raise ValueError(
            f"scale_base must be > 0 (gamma, 512 in xPos), got {scale_base}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k need the same head_dim, got {q.shape[-1]} and {k.shape[-1]}"
        )
    head_dim = q.shape[-1]
    if q_positions is None:
        q_positions = torch.arange(q.shape[-2], device=q.device)
    if k_positions is None:
        k_positions = torch.arange(k.shape[-2], device=k.device)
    zeta = xpos_decay(head_dim).to(q.device).double()
    middle = k_positions.double().mean()  # cancels in every score
    power_q = (q_positions.double() - middle)[..., None] / scale_base
    power_k = (k_positions.double() - middle)[..., None] / scale_base
    # (..., T, D/2) per pair, repeated for the two halves of the half pairing
    scale_q = torch.cat([zeta**power_q] * 2, dim=-1).to(q.dtype)
    scale_k = torch.cat([zeta ** (-power_k)] * 2, dim=-1).to(k.dtype)
    q_rot = apply_rope(q, q_positions, base=base) * scale_q
    k_rot = apply_rope(k, k_positions, base=base) * scale_k
    return q_rot, k_rot
