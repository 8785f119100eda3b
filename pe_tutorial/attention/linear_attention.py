"""Linear attention with RoPE (RoFormer, Su et al., section 3.3), explained in book/06_rope.

Linear attention replaces ``exp(q . k)`` by ``phi(q) . phi(k)`` for a
positive feature map ``phi`` (here ``elu(x) + 1``, Katharopoulos et al., 2020),
so the output of query ``i`` is::

    y_i = sum_j (phi(q_i) . phi(k_j)) v_j  /  sum_j phi(q_i) . phi(k_j)

and the sums over ``j`` can be computed once, as ``phi(K)^T V``, without ever
forming the ``(T x T)`` score matrix. That is why an additive position bias
has nowhere to go: there is no score matrix to add it to. RoPE still works,
because it acts on the vectors: RoFormer rotates ``phi(q_i)`` and ``phi(k_j)``
in the numerator, whose weights then depend on positions only through
``j - i``, and keeps the denominator unrotated so that it stays positive.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..encodings.rope import apply_rope

__all__ = ["elu_feature_map", "check_linear_inputs", "linear_attention"]


def check_linear_inputs(q, k, v, causal: bool) -> None:
    """q, k and v that fit, ``(..., Tq, D)``, ``(..., Tk, D)``, ``(..., Tk, Dv)``; causal
    attention as many queries as keys (its running sums pair them by position)."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not "
            "fit: q and k need the same last size, k and v the same length"
        )
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError("causal linear attention needs as many queries as keys")


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``phi(x) = elu(x) + 1``: positive, so the normaliser never vanishes."""
    return F.elu(x) + 1


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rope: bool = True,
    causal: bool = False,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    base: float = 10000.0,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Linear attention, optionally with RoPE on the features: ``(..., Tq, Dv)``.

    ``q`` and ``k`` are ``(..., Tq, D)`` and ``(..., Tk, D)`` with ``D`` even,
    ``v`` is ``(..., Tk, Dv)``. With ``rope=True`` the numerator uses
    ``R(m) phi(q_i) . R(n) phi(k_j)`` (half pairing); the denominator uses
    ``phi(q_i) . phi(k_j)``. Positions default to ``arange``; ``causal=True``
    sums only over ``j <= i`` (then q and k must have the same positions), as a
    running sum, still without a score matrix.
    """
    check_linear_inputs(q, k, v, causal)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    if rope:
        num_q = apply_rope(phi_q, q_positions, base=base)
        num_k = apply_rope(phi_k, k_positions, base=base)
    else:
        num_q, num_k = phi_q, phi_k
    if causal:
        # running sums over j <= i: (..., T, D, Dv) and (..., T, D)
        kv = torch.cumsum(num_k[..., :, None] * v[..., None, :], dim=-3)
        k_sum = torch.cumsum(phi_k, dim=-2)
        numerator = torch.einsum("...td,...tdv->...tv", num_q, kv)
        denominator = (phi_q * k_sum).sum(-1, keepdim=True)
    else:
        numerator = num_q @ (num_k.transpose(-1, -2) @ v)  # (..., Tq, Dv)
        denominator = phi_q @ phi_k.sum(-2, keepdim=True).transpose(-1, -2)
    return numerator / (denominator + eps)
