"""Multi-head latent attention with decoupled RoPE (DeepSeek-V2 and V3, chapter 12).

MLA caches one small latent per token, ``c = RMSNorm(x W_dkv)`` of
``kv_rank`` numbers, and makes each head's keys and values from it,
``k_h = c W_uk_h``, ``v_h = c W_uv_h``. At inference ``W_uk_h`` can be
*absorbed* into the query, ``q_h . (c W_uk_h) = (q_h W_uk_h^T) . c``, so the
cache is never expanded. RoPE breaks that: rotating the key puts ``R_n``
between ``c`` and ``W_uk_h``, and ``q^T R_m^T R_n W_uk_h^T c = q^T R_(n-m)
W_uk_h^T c`` has a different matrix for every distance, so no single matrix
can be absorbed (``coupled_absorption_error`` measures how wrong pretending
is). DeepSeek's answer is to *decouple* position from content: a few extra
channels per head, ``q_rope_h`` and one key ``k_rope`` shared by all heads
(cached beside ``c``), carry RoPE; the content channels carry none::

    score_h(m, n) = (q_nope_h . k_nope_h + R_m q_rope_h . R_n k_rope) / sqrt(d_nope + d_rope)

``LatentAttention`` holds the same parameters, under the same names, as
transformers' ``DeepseekV3Attention`` (with ``q_lora_rank``), and computes
the layer both ways, expanded and absorbed. DeepSeek rotates interleaved
pairs ``(2i, 2i + 1)`` (``rope_interleave`` in transformers).
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import require_even, require_positive_int
from ..encodings.rope import apply_rope

__all__ = ["LatentAttention", "coupled_absorption_error"]


class LatentAttention(nn.Module):
    """One MLA layer, causal, with DeepSeek's decoupled RoPE (chapter 12).

    ``forward(x, positions, absorbed=False)`` for ``x`` ``(batch, T, d_model)``
    gives ``(batch, T, d_model)``; ``absorbed=True`` scores the queries against
    the cached latents directly, with ``W_uk`` folded into the queries and
    ``W_uv`` applied after the weights, and gives the same result.
    ``cache_size()`` is what a token costs in the cache: ``kv_rank + rope_dim``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        q_rank: int,
        kv_rank: int,
        nope_dim: int,
        rope_dim: int,
        v_dim: int,
        base: float = 10000.0,
        eps: float = 1e-6,
    ):
        super().__init__()
        for name, value in (
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("q_rank", q_rank),
            ("kv_rank", kv_rank),
            ("nope_dim", nope_dim),
            ("rope_dim", rope_dim),
            ("v_dim", v_dim),
        ):
            require_positive_int(value, name)
        require_even(rope_dim, "rope_dim", "(RoPE turns pairs of channels)")
        self.num_heads, self.kv_rank = num_heads, kv_rank
        self.nope_dim, self.rope_dim, self.v_dim, self.base = (
            nope_dim,
            rope_dim,
            v_dim,
            base,
        )
        self.q_a_proj = nn.Linear(d_model, q_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_rank, eps=eps)
        self.q_b_proj = nn.Linear(q_rank, num_heads * (nope_dim + rope_dim), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d_model, kv_rank + rope_dim, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_rank, eps=eps)
        self.kv_b_proj = nn.Linear(kv_rank, num_heads * (nope_dim + v_dim), bias=False)
        self.o_proj = nn.Linear(num_heads * v_dim, d_model, bias=False)

    def cache_size(self) -> int:
        """Numbers cached per token and layer: the latent and the shared rotated key."""
        return self.kv_rank + self.rope_dim

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return apply_rope(x, positions, base=self.base, pairing="interleaved")

    def queries(self, x: torch.Tensor, positions: torch.Tensor):
        """``q_nope`` ``(B, H, T, nope_dim)`` and the rotated ``q_rope`` ``(B, H, T, rope_dim)``."""
        batch, length, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(batch, length, self.num_heads, -1).transpose(1, 2)
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        return q_nope, self._rotate(q_rope, positions)

    def latents(self, x: torch.Tensor, positions: torch.Tensor):
        """What the cache holds: ``c`` ``(B, T, kv_rank)`` and the rotated ``k_rope``
        ``(B, T, rope_dim)``, one for all heads."""
        c, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_rank, self.rope_dim], -1)
        return self.kv_a_layernorm(c), self._rotate(k_rope, positions)

    def _up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_uk`` ``(H, nope_dim, kv_rank)`` and ``W_uv`` ``(H, v_dim, kv_rank)``."""
        weight = self.kv_b_proj.weight.view(self.num_heads, -1, self.kv_rank)
        return weight.split([self.nope_dim, self.v_dim], dim=1)

    def _attend(self, q_nope, q_rope, c, k_rope, mask, absorbed: bool):
        """Attention of the queries over the latents ``c`` and the shared ``k_rope``."""
        w_uk, w_uv = self._up_projections()
        rope_scores = q_rope @ k_rope[:, None].transpose(-1, -2)  # (B, H, Tq, T)
        if absorbed:
            # q_nope . (c W_uk^T) = (q_nope W_uk) . c: score the cached latents
            q_latent = torch.einsum("bhtd,hdr->bhtr", q_nope, w_uk)
            content_scores = q_latent @ c[:, None].transpose(-1, -2)
        else:
            k_nope = torch.einsum("btr,hdr->bhtd", c, w_uk)
            content_scores = q_nope @ k_nope.transpose(-1, -2)
        scores = (content_scores + rope_scores) * (
            self.nope_dim + self.rope_dim
        ) ** -0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        if absorbed:
            # weights . (c W_uv^T) = (weights . c) W_uv^T
            out = torch.einsum("bhtr,hvr->bhtv", weights @ c[:, None], w_uv)
        else:
            out = weights @ torch.einsum("btr,hvr->bhtv", c, w_uv)
        batch, _, length, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        absorbed: bool = False,
    ) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"x must be (batch, T, d_model), got {tuple(x.shape)}")
        length = x.shape[1]
        if positions is None:
            positions = torch.arange(length, device=x.device)
        q_nope, q_rope = self.queries(x, positions)
        c, k_rope = self.latents(x, positions)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        return self._attend(q_nope, q_rope, c, k_rope, causal, absorbed)

    def decode(
        self,
        x_new: torch.Tensor,
        c: torch.Tensor,
        k_rope: torch.Tensor,
        *,
        absorbed: bool,
    ) -> torch.Tensor:
        """One decoding step: the newest token ``x_new`` ``(B, 1, d_model)``, at
        position ``T - 1``, against a cache (``latents``) of ``T`` tokens that
        already holds it. Absorbed, it reads the cache as it is; expanded, it
        first makes every cached token's keys and values, as a plain cache of
        the up-projected heads would store them."""
        position = torch.tensor([c.shape[1] - 1], device=x_new.device)
        q_nope, q_rope = self.queries(x_new, position)
        return self._attend(q_nope, q_rope, c, k_rope, None, absorbed)


def coupled_absorption_error(
    layer: LatentAttention, x: torch.Tensor, positions: torch.Tensor | None = None
) -> float:
    """How far absorbing ``W_uk`` is from right when RoPE rotates the content keys.

    The scores with each head's key ``k_h = c W_uk_h`` rotated by its position
    (RoPE on the content channels, as a plain model would do) against the
    scores of one absorbed matrix, the query rotated by ``R_m`` and folded
    into ``c`` unrotated: the largest difference. Zero only where the rotation
    does nothing (every position 0).
    """
    batch, length, _ = x.shape
    if positions is None:
        positions = torch.arange(length, device=x.device)
    q_nope, _ = layer.queries(x, positions)
    c, _ = layer.latents(x, positions)
    w_uk, _ = layer._up_projections()
    rotate = layer._rotate
    k_nope = torch.einsum("btr,hdr->bhtd", c, w_uk)
    coupled = rotate(q_nope, positions) @ rotate(k_nope, positions).transpose(-1, -2)
    q_latent = torch.einsum("bhtd,hdr->bhtr", rotate(q_nope, positions), w_uk)
    absorbed = q_latent @ c[:, None].transpose(-1, -2)
    return float((coupled - absorbed).abs().max())
