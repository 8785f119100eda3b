"""FAVOR+ random-feature attention (Performer, Choromanski et al., 2021) with RoPE (chapter 6).

Softmax attention weighs key ``j`` for query ``i`` by ``exp(q_i . k_j / sqrt(D))``.
FAVOR+ writes that kernel as an expectation over random directions
``w ~ N(0, I_D)``::

    exp(x . y) = E_w[ exp(w . x - |x|^2 / 2) exp(w . y - |y|^2 / 2) ]

so with ``m`` directions ``w_1 .. w_m`` the positive features
``phi(x)_r = exp(w_r . x - |x|^2 / 2) / sqrt(m)`` give an unbiased estimate
``phi(x) . phi(y)`` of ``exp(x . y)``, and attention becomes linear attention
with ``phi`` (``x = q / D^(1/4)``, ``y = k / D^(1/4)``). Every feature is
positive, so the normaliser is a sum of positive terms and never vanishes.

RoPE goes in *before* the features: rotate ``q_i`` and ``k_j`` by their
positions, then map them. Since ``R_m q . R_n k = q . R_(n-m) k``, the
expectation is exactly RoPE's softmax kernel, and the estimate approaches
softmax attention with RoPE as ``m`` grows (``tests/test_performer.py``).
The directions are drawn in orthogonal blocks, as the Performer does: the
estimate stays unbiased and its variance is lower.
"""

from __future__ import annotations

import math

import torch

from .._validation import require_positive_int
from ..encodings.rope import apply_rope
from .linear_attention import check_linear_inputs

__all__ = ["random_directions", "favor_features", "performer_attention"]


def random_directions(
    num_features: int,
    dim: int,
    *,
    seed: int = 0,
    orthogonal: bool = True,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``(num_features, dim)`` directions whose rows are each ``N(0, I_dim)``.

    With ``orthogonal`` (the default) the rows come in blocks of ``dim``
    mutually orthogonal ones (a QR factor of a Gaussian matrix), each scaled to
    the length of an independent Gaussian vector, so every row alone is still
    ``N(0, I)``.
    """
    require_positive_int(num_features, "num_features")
    require_positive_int(dim, "dim")
    generator = torch.Generator().manual_seed(seed)
    if not orthogonal:
        return torch.randn(
            num_features, dim, generator=generator, dtype=torch.float64
        ).to(dtype)
    blocks = []
    for _ in range(math.ceil(num_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        # QR fixes the signs of R's diagonal, which skews Q's columns; undoing that
        # makes Q uniformly random (Haar), so each row points anywhere alike
        q = q * torch.sign(torch.diagonal(r))
        blocks.append(q.T)  # rows orthonormal
    rows = torch.cat(blocks)[:num_features]
    lengths = torch.randn(
        num_features, dim, generator=generator, dtype=torch.float64
    ).norm(dim=-1)
    return (rows * lengths[:, None]).to(dtype)


def favor_features(
    x: torch.Tensor, directions: torch.Tensor, *, stabilise: str
) -> torch.Tensor:
    """``phi(x)_f = exp(w_f . x - |x|^2 / 2 - c) / sqrt(F)``: ``(..., T, F)``, for
    the ``F`` rows ``w_f`` of ``directions`` (chapter 6's names; the Performer
    paper calls their number ``m``).

    ``c`` keeps ``exp`` in range and cancels in attention's ratio: the largest
    exponent of each row for queries (``stabilise="row"``), of the whole
    tensor for keys (``"all"``), as the Performer's code does.
    """
    if x.shape[-1] != directions.shape[-1]:
        raise ValueError(
            f"x has {x.shape[-1]} channels but the directions have "
            f"{directions.shape[-1]}; draw them with dim={x.shape[-1]}"
        )
    directions = directions.to(device=x.device, dtype=x.dtype)
    exponent = x @ directions.T - 0.5 * (x * x).sum(-1, keepdim=True)
    if stabilise == "row":
        shift = exponent.amax(-1, keepdim=True)
    elif stabilise == "all":
        shift = exponent.amax(dim=(-2, -1), keepdim=True)
    else:
        raise ValueError(f"stabilise must be 'row' or 'all', got {stabilise!r}")
    return torch.exp(exponent - shift.detach()) / math.sqrt(directions.shape[0])


def performer_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    num_features: int | None = None,
    directions: torch.Tensor | None = None,
    rope: bool = False,
    causal: bool = False,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    base: float = 10000.0,
    seed: int = 0,
) -> torch.Tensor:
    """FAVOR+ attention, an unbiased estimate of ``softmax(q k^T / sqrt(D)) v``: ``(..., Tq, Dv)``.

    ``q`` ``(..., Tq, D)``, ``k`` ``(..., Tk, D)``, ``v`` ``(..., Tk, Dv)``.
    With ``rope=True``, q and k are rotated by their positions (``apply_rope``,
    half pairing; default ``arange``) before the feature map, so the estimate
    is of softmax attention with RoPE. ``causal=True`` sums over ``j <= i`` as
    running sums. Give ``num_features`` (drawn by ``random_directions`` with
    ``seed``) or the ``directions`` themselves, ``(m, D)``.

    With RoPE the estimate is relative only in distribution: moving every
    position by ``s`` is the same as turning the directions by ``R_s^T``,
    which leaves their distribution, not the draw, unchanged.
    """
    if (num_features is None) == (directions is None):
        raise ValueError(
            "give num_features (random directions are drawn) or directions, "
            "not both and not neither"
        )
    check_linear_inputs(q, k, v, causal)
    if rope:
        q = apply_rope(q, q_positions, base=base)
        k = apply_rope(k, k_positions, base=base)
    dim = q.shape[-1]
    if directions is None:
        directions = random_directions(num_features, dim, seed=seed, dtype=q.dtype)
    scale = dim**-0.25  # x . y = q . k / sqrt(D)
    phi_q = favor_features(q * scale, directions, stabilise="row")
    phi_k = favor_features(k * scale, directions, stabilise="all")
    if causal:
        kv = torch.cumsum(phi_k[..., :, None] * v[..., None, :], dim=-3)
        numerator = torch.einsum("...tm,...tmv->...tv", phi_q, kv)
        denominator = (phi_q * torch.cumsum(phi_k, dim=-2)).sum(-1, keepdim=True)
    else:
        numerator = phi_q @ (phi_k.transpose(-1, -2) @ v)
        denominator = phi_q @ phi_k.sum(-2, keepdim=True).transpose(-1, -2)
    return numerator / denominator
