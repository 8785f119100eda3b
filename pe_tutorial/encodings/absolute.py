"""Absolute position encodings: integer, binary, sinusoidal and learned tables.

Each function returns a table with one row per position, ``(num_positions, dim)``,
to be added to (or concatenated with) the token embeddings.

Explained in the book: integers in ``book/02_integer_positions``, binary in
``book/03_binary_positions``, sinusoidal (Vaswani et al., 2017) and learned
(BERT, GPT-2) tables in ``book/04_sinusoidal``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import (
    require_even,
    require_integer_tensor,
    require_positive_float,
    require_positive_int,
)

__all__ = [
    "integer_encoding",
    "binary_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_at",
    "sinusoidal_encoding",
    "tensor2tensor_encoding",
    "sinusoidal_shift_matrix",
    "position_term",
    "neighbour_distances",
    "SinusoidalPositionalEmbedding",
    "LearnedPositionalEmbedding",
]


def integer_encoding(
    num_positions: int,
    dim: int = 1,
    *,
    normalize: bool = False,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The position itself as the encoding: ``PE[p, :] = p`` (chapter 2).

    With ``normalize=True`` the positions are squeezed into [0, 1] as
    ``p / (num_positions - 1)``, which bounds them but makes the encoding of a
    position depend on the length of the sequence it sits in.

    Returns a float32 tensor of shape ``(num_positions, dim)``.
    """
    require_positive_int(num_positions, "num_positions")
    require_positive_int(dim, "dim")
    positions = torch.arange(num_positions, dtype=torch.int64, device=device).to(
        torch.float32
    )
    if normalize:
        # p / (T - 1); a one-token sequence sits at 0
        positions = positions / max(num_positions - 1, 1)
    return positions[:, None].expand(num_positions, dim).clone()


def binary_encoding(
    num_positions: int,
    num_bits: int | None = None,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Bits of the position, least significant first (chapter 3).

    ``PE[p, b] = (p >> b) & 1``.

    ``num_bits`` defaults to the fewest bits that give every position its own
    code, ``ceil(log2(num_positions))`` (at least 1).

    Returns a float32 tensor of 0s and 1s of shape ``(num_positions, num_bits)``.
    """
    require_positive_int(num_positions, "num_positions")
    needed = max(1, math.ceil(math.log2(num_positions)))
    if num_bits is None:
        num_bits = needed
    require_positive_int(num_bits, "num_bits")
    if num_bits < needed:
        raise ValueError(
            f"num_bits={num_bits} gives only {2**num_bits} codes, too few for "
            f"{num_positions} positions; "
            f"use num_bits >= {needed} (or leave it as None)"
        )
    positions = torch.arange(num_positions, dtype=torch.int64, device=device)
    bits = torch.arange(num_bits, dtype=torch.int64, device=device)
    # (T, 1) >> (1, B), then keep the lowest bit
    return ((positions[:, None] >> bits[None, :]) & 1).to(torch.float32)


def sinusoidal_frequencies(dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """Angular frequencies of the sinusoidal table: ``omega_i = base ** (-2i / dim)`` for i < dim/2.

    Returned in float32, shape ``(dim // 2,)``; ``omega_0 = 1`` and they fall
    geometrically towards ``1 / base``.
    """
    require_positive_int(dim, "dim")
    require_even(
        dim,
        "dim",
        "for sinusoidal encodings (each frequency fills a sin/cos pair of channels)",
    )
    base = require_positive_float(base, "base")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float64) / dim
    # omega_i = base^(-2i/D), computed in float64 and stored in float32
    return torch.pow(torch.tensor(base, dtype=torch.float64), -exponents).to(
        torch.float32
    )


def sinusoidal_at(
    positions: torch.Tensor, dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """Sinusoidal encodings of integer ``positions`` of any shape ``S``: ``S + (dim,)``.

    ``PE[p, 2i] = sin(p * omega_i)`` and ``PE[p, 2i + 1] = cos(p * omega_i)``
    with ``omega_i = base ** (-2i / dim)``. The angles are computed in float32.
    """
    require_integer_tensor(positions)
    inv_freq = sinusoidal_frequencies(dim, base=base).to(positions.device)
    angles = positions.to(torch.float32)[..., None] * inv_freq  # S + (D/2,)
    # interleave: channel 2i holds sin, channel 2i+1 holds cos
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # S + (D,)


def sinusoidal_encoding(
    num_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The sinusoidal table of Vaswani et al. (2017), shape ``(num_positions, dim)``, float32.

    ``PE[p, 2i] = sin(p / base ** (2i / dim))``,
    ``PE[p, 2i + 1] = cos(p / base ** (2i / dim))``.

    ``dim`` must be even: every frequency owns a (sin, cos) pair of channels.
    The table is built on ``device`` (default: the CPU).
    """
    require_positive_int(num_positions, "num_positions")
    return sinusoidal_at(torch.arange(num_positions, device=device), dim, base=base)


def tensor2tensor_encoding(num_positions: int, dim: int) -> torch.Tensor:
    """The sinusoidal table as tensor2tensor's ``get_timing_signal_1d`` and fairseq
    build it (chapter 4), shape ``(num_positions, dim)``, float64.

    All the sines first, then all the cosines, of the angles ``p * omega_i`` with
    ``omega_i = 10000 ** (-i / (dim/2 - 1))``, ``i = 0 .. dim/2 - 1``: the
    slowest frequency is exactly 1/10000, where the paper's ``10000 ** (-2i /
    dim)`` stops short of it. Not the paper's table with its channels reordered:
    only the fastest pair (``omega_0 = 1``) is shared. ``dim`` even, at least 4
    (two frequencies, so that the spacing is defined).
    """
    require_positive_int(num_positions, "num_positions")
    require_even(dim, "dim", "(the sines and the cosines take half each)")
    if dim < 4:
        raise ValueError(
            f"dim must be at least 4 for tensor2tensor's spacing "
            f"(omega_i = 10000 ** (-i / (dim/2 - 1)) needs two frequencies), got {dim}"
        )
    i = torch.arange(dim // 2, dtype=torch.float64)
    omega = 10000.0 ** (-i / (dim // 2 - 1))
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * omega
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


def sinusoidal_shift_matrix(k: int, dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """The matrix ``M_k`` with ``PE(p + k) = M_k @ PE(p)`` for every p (chapters 4, 5).

    It is block diagonal; the block for frequency ``omega_i`` acts on the pair
    ``(sin, cos)`` and follows from the angle-addition identities::

        [sin((p + k) w)]   [ cos(k w)  sin(k w)] [sin(p w)]
        [cos((p + k) w)] = [-sin(k w)  cos(k w)] [cos(p w)]

    Returns a float32 tensor of shape ``(dim, dim)``. ``k`` may be negative.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"k must be an integer offset, got {k!r}")
    inv_freq = sinusoidal_frequencies(dim, base=base).to(torch.float64)
    angle = k * inv_freq  # (D/2,)
    cos, sin = angle.cos(), angle.sin()
    # (D/2, 2, 2)
    blocks = torch.stack(
        (torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2
    )
    return torch.block_diag(*blocks).to(torch.float32)


def position_term(table: torch.Tensor, A: torch.Tensor, k: int) -> torch.Tensor:
    """The position-position term of an additive score at offset ``k``, for every query
    position: ``p_i A p_(i+k)^T`` for each row ``p_i`` of ``table`` (chapter 4).

    With the rows of a table added to the tokens, attention scores
    ``(x_i + p_i) A (x_j + p_j)^T`` with ``A = W_Q W_K^T``; this is the term
    that involves the positions alone. For a sinusoidal table and an ``A``
    that commutes with the rotations (the identity, or 2 x 2 blocks
    ``[[a, b], [-b, a]]``) it is the same for every ``i``,
    ``sum_m a_m cos(k w_m) - b_m sin(k w_m)``; a learned ``A`` in general
    makes it move with ``i``.

    ``table`` is ``(num_positions, dim)``, ``A`` is ``(dim, dim)`` and ``k`` a
    non-negative offset less than ``num_positions``; the result has one
    entry per query position ``i = 0 .. num_positions - k - 1``.
    """
    if table.ndim != 2 or A.shape != (table.shape[1], table.shape[1]):
        raise ValueError(
            f"table must be (num_positions, dim) and A (dim, dim), got "
            f"{tuple(table.shape)} and {tuple(A.shape)}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(table):
        raise ValueError(
            f"k must be an integer offset from 0 to {len(table) - 1}, got {k!r}"
        )
    queries, keys = table[: len(table) - k], table[k:]
    # p_i A p_(i+k)^T, row by row
    return ((queries @ A) * keys).sum(-1)


def neighbour_distances(table: torch.Tensor) -> torch.Tensor:
    """Euclidean distance between the encodings of neighbouring positions, ``||PE[p+1] - PE[p]||``.

    ``table`` has shape ``(num_positions, dim)``; the result has shape
    ``(num_positions - 1,)``. A smooth encoding has distances that change
    slowly; the binary code jumps whenever a carry flips many bits (chapter 3).
    """
    if table.ndim != 2 or table.shape[0] < 2:
        raise ValueError(
            f"table must have shape (num_positions >= 2, dim), got {tuple(table.shape)}"
        )
    return (table[1:] - table[:-1]).norm(dim=-1)


class SinusoidalPositionalEmbedding(nn.Module):
    """The sinusoidal table as a module with the same call as a learned one (chapter 4).

    ``forward(positions)``: integer ``positions`` of any shape ``S`` give
    ``S + (dim,)``, ``sinusoidal_at(positions, dim, base=base)``, computed
    from the position (so any position works) on the positions' device.
    Nothing is learned and nothing is stored.
    """

    def __init__(self, dim: int, *, base: float = 10000.0):
        super().__init__()
        self.dim = require_even(
            require_positive_int(dim, "dim"), "dim", "for sinusoidal encodings"
        )
        self.base = require_positive_float(base, "base")

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal_at(positions, self.dim, base=self.base)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}"


# how ``LearnedPositionalEmbedding.extend`` starts the rows it adds
EXTENSION_ROWS = ("copy", "random")


class LearnedPositionalEmbedding(nn.Module):
    """A learned absolute table, one row per position, as in BERT and GPT-2 (chapter 4).

    ``forward(positions)`` looks rows up: integer ``positions`` of any shape
    ``S`` give ``S + (dim,)``. The table has ``max_positions`` rows and no row
    for anything beyond, so it cannot extrapolate: asking for a position past
    the table raises ``ValueError`` instead of silently wrapping or clipping.

    Rows are initialised from N(0, init_std**2); 0.02 is BERT's and GPT-2's
    ``initializer_range``.
    """

    def __init__(self, max_positions: int, dim: int, *, init_std: float = 0.02):
        super().__init__()
        self.max_positions = require_positive_int(max_positions, "max_positions")
        self.dim = require_positive_int(dim, "dim")
        self.init_std = require_positive_float(init_std, "init_std")
        self.weight = nn.Parameter(torch.empty(max_positions, dim))
        nn.init.normal_(self.weight, mean=0.0, std=self.init_std)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        require_integer_tensor(positions)
        if positions.numel() > 0:
            low, high = int(positions.min()), int(positions.max())
            if low < 0:
                raise ValueError(f"positions must be non-negative, got {low}")
            if high >= self.max_positions:
                raise ValueError(
                    f"position {high} is past the learned table, which has "
                    f"{self.max_positions} rows "
                    f"(positions 0..{self.max_positions - 1}); "
                    "a learned table cannot extrapolate: train with longer sequences, "
                    "or use an encoding computed from the position "
                    "(sinusoidal, RoPE, ALiBi)"
                )
        return self.weight[positions]

    @torch.no_grad()
    def extend(
        self,
        max_positions: int,
        new_rows: str = "copy",
        generator: torch.Generator | None = None,
    ) -> None:
        """Grow the table to ``max_positions`` rows in place; the trained rows stay.

        ``new_rows="copy"``: row ``p`` of the longer table starts as row ``p mod
        L`` of the old one (``L`` rows), the initialisation Longformer used to
        lengthen RoBERTa's table before fine-tuning on longer windows (Beltagy
        et al., 2020). ``"random"``: the new rows are drawn as a fresh table's
        are, N(0, init_std**2) (from ``generator``), the plain way to add rows.
        Either way the new rows only mean something after fine-tuning on longer
        windows (chapter 9 compares the two).
        """
        require_positive_int(max_positions, "max_positions")
        if max_positions <= self.max_positions:
            raise ValueError(
                f"the table has {self.max_positions} rows already; extend it to more"
            )
        if new_rows not in EXTENSION_ROWS:
            raise ValueError(
                f"new_rows must be one of {EXTENSION_ROWS}, got {new_rows!r}"
            )
        old = self.weight
        if new_rows == "copy":
            rows = torch.arange(max_positions, device=old.device) % self.max_positions
            weight = old[rows].clone()
        else:
            extra = torch.randn(
                max_positions - self.max_positions, self.dim, generator=generator
            )
            weight = torch.cat((old, (extra * self.init_std).to(old)))
        self.weight = nn.Parameter(weight)
        self.max_positions = max_positions

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}, dim={self.dim}"
