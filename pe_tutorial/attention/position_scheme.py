"""How a position encoding enters attention: the small base class every scheme shares.

A position scheme is an *adapter*: it wraps one encoding's own module (a
``RotaryEmbedding``, an ``ALiBiBias``, a ``T5RelativeBias``, ...) and says how
that encoding reaches the attention scores. It may do any of these things:

- ``add_to_input(x)``: add a vector per position to the input, ``(B, T, d_model)``
  (absolute tables, chapter 4);
- ``rotate(q, k)``: transform queries and keys, ``(B, H, T, D)`` each, before
  the scores: rotate them (RoPE, chapter 6) or rescale them (DeBERTa, chapter 8);
- ``bias(q, k, causal=...)``: a float tensor broadcastable to ``(B, H, Tq, Tk)``
  added to the scaled scores (ALiBi, T5, Shaw, CoPE, DeBERTa; chapters 7 and 8),
  and optionally ``score_mod``, the same values one score at a time for
  FlexAttention;
- ``value_term(weights)``: a vector per query added to the output, computed
  from the attention probabilities (Shaw et al.'s value table, chapter 8).
  Only the naive kernel has the probabilities, so such a scheme sets
  ``needs_weights = True`` and the other kernels refuse it.

This base class does none of them: it is NoPE, attention without positions
(chapter 1). ``pe_tutorial.attention.core`` depends on this module only, never on
an encoding; the adapters live in ``pe_tutorial.attention.schemes``.

Queries are the last ``q_len`` of the ``k_len`` positions (decoding with a
cache); ``pe_tutorial.encodings.positions`` is the one definition.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["ScoreMod", "PositionScheme", "NoPositionScheme"]

# FlexAttention's score_mod: (score, batch, head, q_idx, kv_idx) -> score
ScoreMod = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor
]


class PositionScheme(nn.Module):
    """How attention learns where tokens are; this base class adds nothing (NoPE).

    Subclasses set the sizes they were built for, ``num_heads``, ``head_dim``
    and ``d_model`` (None: any size works), and ``check_fits`` compares them
    with the attention they are used in, so a mismatch fails when the layer is
    built, naming both numbers, instead of deep inside a matrix product.
    """

    num_heads: int | None = None
    head_dim: int | None = None
    d_model: int | None = None
    # True when value_term needs the attention probabilities (naive kernel only)
    needs_weights: bool = False

    def add_to_input(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model) -> (B, T, d_model)``; unchanged here."""
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, H, Tq, D), (B, H, Tk, D)`` rotated by position; unchanged here."""
        return q, k

    def value_term(self, weights: torch.Tensor) -> torch.Tensor | None:
        """Added to the output ``(B, H, Tq, D)`` from the probabilities ``(B, H, Tq, Tk)``; None here."""
        return None

    def bias(
        self, q: torch.Tensor, k: torch.Tensor, *, causal: bool
    ) -> torch.Tensor | None:
        """Score bias broadcastable to ``(B, H, Tq, Tk)``, or None for no bias."""
        return None

    def score_mod(
        self, q: torch.Tensor, k: torch.Tensor, *, causal: bool
    ) -> ScoreMod | None:
        """The bias one score at a time for FlexAttention, or None.

        None means "no per-score formula": attention then materialises
        ``bias(q, k)`` and looks each score's value up in it.
        """
        return None

    def check_fits(
        self,
        *,
        num_heads: int | None = None,
        head_dim: int | None = None,
        d_model: int | None = None,
    ) -> None:
        """Raise ``ValueError`` if this scheme was built for other sizes than these."""
        given = {"num_heads": num_heads, "head_dim": head_dim, "d_model": d_model}
        for name, size in given.items():
            built_for = getattr(self, name)
            if size is not None and built_for is not None and size != built_for:
                raise ValueError(
                    f"{type(self).__name__} was built for {name}={built_for}, but the "
                    f"attention it is used in has {name}={size}; build the scheme with "
                    f"{name}={size} (the attention layer's)"
                )

    def check_device(self, device: torch.device) -> None:
        """Raise ``ValueError`` if this scheme's tensors live on another device."""
        # the first parameter or buffer stands for all (.to() moves them together)
        tensor = next(itertools.chain(self.parameters(), self.buffers()), None)
        if tensor is not None and tensor.device != device:
            raise ValueError(
                f"{type(self).__name__} is on {tensor.device} but the queries are "
                f"on {device}; move it with .to({str(device)!r}) (or move the "
                "model that holds it)"
            )


class NoPositionScheme(PositionScheme):
    """NoPE: no position information at all; attention sees a set of tokens (chapter 1).

    With a causal mask a model can still infer positions by counting
    (Haviv et al., 2022; Kazemnejad et al., 2023), which chapter 1 shows.
    """
