"""Why attention needs positions: it is permutation-equivariant (chapter 1, ``book/01_why_position``).

For self-attention ``f`` and any permutation matrix ``P`` of the tokens,
``f(P X) = P f(X)``: shuffling the input shuffles the output the same way and
changes nothing else. So the same token gets the same output wherever it
stands, and "dog bites man" and "man bites dog" produce the same set of vectors.
The layers that came before attention get order from their structure:
``RecurrentLayer`` from its recurrence, ``ConvolutionLayer`` from its kernel's
offsets; neither is equivariant.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import torch
from torch import nn

from .._validation import require_positive_int
from .core import dot_product_attention

__all__ = [
    "SelfAttention",
    "RecurrentLayer",
    "ConvolutionLayer",
    "WordEmbedder",
    "equivariance_gap",
    "to_torch_multihead",
]


class SelfAttention(nn.Module):
    """One head of self-attention with learned projections (chapter 1).

    ``softmax(X Wq (X Wk)^T / sqrt(d)) X Wv``.

    Input and output have shape ``(..., seq, d_model)``; nothing in it depends
    on where a token stands.
    """

    def __init__(self, d_model: int, *, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        scale = d_model**-0.5
        self.w_q = nn.Parameter(
            torch.randn(d_model, d_model, generator=generator) * scale
        )
        self.w_k = nn.Parameter(
            torch.randn(d_model, d_model, generator=generator) * scale
        )
        self.w_v = nn.Parameter(
            torch.randn(d_model, d_model, generator=generator) * scale
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dot_product_attention(x @ self.w_q, x @ self.w_k, x @ self.w_v)


class RecurrentLayer(nn.Module):
    """An Elman RNN that returns its state at every step (chapter 1).

    ``h_t = tanh(x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh)`` with ``h_(-1) = 0``,
    PyTorch's ``nn.RNN``. The state at ``t`` has read ``x_0 ... x_t`` in that
    order, so order is part of the computation. Input and output ``(seq, d_model)``
    or ``(batch, seq, d_model)``.
    """

    def __init__(self, d_model: int, *, seed: int = 0):
        super().__init__()
        require_positive_int(d_model, "d_model")
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.rnn = nn.RNN(d_model, d_model, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class ConvolutionLayer(nn.Module):
    """A 1-D convolution along the sequence, kernel size 3, zero-padded (chapter 1).

    ``y_t = b + W_(-1) x_(t-1) + W_0 x_t + W_1 x_(t+1)`` (``x`` is zero outside the
    sequence), PyTorch's ``nn.Conv1d``. Each weight belongs to an offset, so the
    layer tells the left neighbour from the right one. Input and output
    ``(seq, d_model)`` or ``(batch, seq, d_model)``.
    """

    def __init__(self, d_model: int, *, seed: int = 0):
        super().__init__()
        require_positive_int(d_model, "d_model")
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.conv = nn.Conv1d(d_model, d_model, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Conv1d wants (batch, channels, seq)
        return self.conv(x.transpose(-1, -2)).transpose(-1, -2)


class WordEmbedder:
    """Deterministic random embeddings for whole words, so chapters can attend over real sentences.

    ``embedder(["the", "dog"])`` returns a float32 tensor ``(2, dim)``. A
    word's vector is N(0, 1) noise drawn from a generator seeded by the word
    itself and ``seed`` (their CRC-32), so the same word gets the same vector in
    every call, every embedder with that seed, and whatever order words come in.
    """

    def __init__(self, dim: int, *, seed: int = 0):
        self.dim = require_positive_int(dim, "dim")
        self.seed = seed

    def vector(self, word: str) -> torch.Tensor:
        """The vector of one word, ``(dim,)``."""
        if not isinstance(word, str) or not word:
            raise ValueError(f"words must be non-empty strings, got {word!r}")
        # a stable 32-bit hash of seed and word (Python's hash() changes between runs)
        word_seed = zlib.crc32(f"{self.seed}:{word}".encode())
        generator = torch.Generator().manual_seed(word_seed)
        return torch.randn(self.dim, generator=generator)

    def __call__(self, words: list[str]) -> torch.Tensor:
        if isinstance(words, str):
            raise ValueError(
                "pass a list of words, e.g. sentence.split(), not one string"
            )
        if not words:
            return torch.empty(0, self.dim)
        return torch.stack([self.vector(word) for word in words])


def to_torch_multihead(attention: SelfAttention) -> nn.MultiheadAttention:
    """The same head as PyTorch's own layer: a one-head ``nn.MultiheadAttention`` (chapter 1).

    ``nn.Linear`` computes ``x W^T``, so the in-projection holds ``W_q^T``,
    ``W_k^T`` and ``W_v^T`` stacked, with no biases; the output projection is
    the identity. ``batch_first=True``, so ``layer(x, x, x)[0]`` takes and
    returns ``(batch, seq, d_model)`` and equals ``attention(x)``.
    """
    d_model = attention.w_q.shape[0]
    layer = nn.MultiheadAttention(d_model, num_heads=1, bias=False, batch_first=True)
    with torch.no_grad():
        layer.in_proj_weight.copy_(
            torch.cat([attention.w_q.T, attention.w_k.T, attention.w_v.T], dim=0)
        )
        layer.out_proj.weight.copy_(torch.eye(d_model))
    return layer


def equivariance_gap(
    fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor
) -> float:
    """Largest entry of ``|fn(x[perm]) - fn(x)[perm]|``, permuting the sequence axis (-2).

    Zero (up to rounding) means ``fn`` is permutation-equivariant for this input.
    """
    if sorted(perm.tolist()) != list(range(x.shape[-2])):
        raise ValueError(
            f"perm must be a permutation of range({x.shape[-2]}), got {perm.tolist()}"
        )
    with torch.no_grad():
        permuted_then_fn = fn(x[..., perm, :])
        fn_then_permuted = fn(x)[..., perm, :]
    return float((permuted_then_fn - fn_then_permuted).abs().max())
