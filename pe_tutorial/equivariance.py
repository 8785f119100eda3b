"""Why attention needs positions: it is permutation-equivariant (chapter 1, ``book/01_why_position``).

For self-attention ``f`` and any permutation matrix ``P`` of the tokens,
``f(P X) = P f(X)``: shuffling the input shuffles the output the same way and
changes nothing else. So the same token gets the same output wherever it
stands, and "dog bites man" and "man bites dog" produce the same set of vectors.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .attention import dot_product_attention

__all__ = ["SelfAttention", "WordEmbedder", "equivariance_gap"]


class SelfAttention(nn.Module):
    """One head of self-attention with learned projections: ``softmax(X Wq (X Wk)^T / sqrt(d)) X Wv``.

    Input and output have shape ``(..., seq, d_model)``; nothing in it depends
    on where a token stands.
    """

    def __init__(self, d_model: int, *, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        scale = d_model ** -0.5
        self.w_q = nn.Parameter(torch.randn(d_model, d_model, generator=generator) * scale)
        self.w_k = nn.Parameter(torch.randn(d_model, d_model, generator=generator) * scale)
        self.w_v = nn.Parameter(torch.randn(d_model, d_model, generator=generator) * scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dot_product_attention(x @ self.w_q, x @ self.w_k, x @ self.w_v)


class WordEmbedder:
    """Deterministic random embeddings for whole words, so chapters can attend over real sentences.

    ``embedder(["the", "dog"])`` returns a float32 tensor ``(2, dim)``; the same
    word always gets the same vector (row ``i`` of a seeded N(0, 1) table, in
    the order words are first seen).
    """

    def __init__(self, dim: int, *, seed: int = 0, max_words: int = 1024):
        self.dim = dim
        self.table = torch.randn(max_words, dim, generator=torch.Generator().manual_seed(seed))
        self.vocabulary: dict[str, int] = {}

    def __call__(self, words: list[str]) -> torch.Tensor:
        for word in words:
            if word not in self.vocabulary:
                if len(self.vocabulary) == len(self.table):
                    raise ValueError(f"WordEmbedder holds at most {len(self.table)} words; raise max_words")
                self.vocabulary[word] = len(self.vocabulary)
        return self.table[[self.vocabulary[w] for w in words]]


def equivariance_gap(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> float:
    """Largest entry of ``|fn(x[perm]) - fn(x)[perm]|``, permuting the sequence axis (-2).

    Zero (up to rounding) means ``fn`` is permutation-equivariant for this input.
    """
    if sorted(perm.tolist()) != list(range(x.shape[-2])):
        raise ValueError(f"perm must be a permutation of range({x.shape[-2]}), got {perm.tolist()}")
    with torch.no_grad():
        permuted_then_fn = fn(x[..., perm, :])
        fn_then_permuted = fn(x)[..., perm, :]
    return float((permuted_then_fn - fn_then_permuted).abs().max())
