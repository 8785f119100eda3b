"""Checks for chapters 4 and 5: the sinusoidal table and the matrix that shifts it.

Two tables put all the sines first and then all the cosines. With this book's
frequencies ``omega_i = 10000 ** (-2i / dim)`` that is the same columns in
another order (the concatenated layout): as good for a model, but not the
layout asked for. tensor2tensor's ``get_timing_signal_1d`` and fairseq's
``SinusoidalPositionalEmbedding`` concatenate too, but space their frequencies
as ``10000 ** (-i / (dim/2 - 1))``, which "differs slightly from the
description in Section 3.5" of the paper (fairseq's docstring): their columns
are other columns, not these in another order. The check names each.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..encodings.absolute import (
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
    tensor2tensor_encoding,
)
from ._common import call_checked, close, diagnose

__all__ = ["check_sinusoidal", "check_shift_matrix"]


def _omega(dim: int, exponent) -> torch.Tensor:
    i = torch.arange(dim // 2, dtype=torch.float64)
    return 10000.0 ** (-exponent(i) / dim)


def _sinusoidal_variant(num_positions, dim, *, exponent, layout, swap=False):
    """Wrong tables the usual mistakes produce, from the same angles p * omega_i."""
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * _omega(
        dim, exponent
    )
    first, second = (
        (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    )
    if layout == "concatenated":
        return torch.cat((first, second), dim=-1)
    return torch.stack((first, second), dim=-1).flatten(-2)


def _two_i(i):
    return 2 * i


def check_sinusoidal(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(num_positions, dim)`` against ``sinusoidal_encoding`` (chapter 4).

    ``PE[p, 2i] = sin(p omega_i)``, ``PE[p, 2i + 1] = cos(p omega_i)`` with
    ``omega_i = 10000 ** (-2i / dim)``; float32, shape ``(num_positions, dim)``.
    """
    for num_positions, dim in ((8, 4), (64, 16), (512, 64)):
        what = f"fn({num_positions}, {dim})"
        got = call_checked(
            fn,
            what,
            num_positions,
            dim,
            shape=(num_positions, dim),
            dtype=torch.float32,
        )
        want = sinusoidal_encoding(num_positions, dim)
        if close(got, want, 1e-4):
            continue
        # right near position 0, drifting further along: rounding, not a formula
        if close(got, want, 0.05) and close(got[:8], want[:8], 1e-3):
            raise AssertionError(
                f"{what}: the values are close but not equal, and the error grows "
                "with the position: precision lost to a low-precision dtype; "
                "compute the angles p * omega_i in float32 (or float64), not in "
                "float16 or bfloat16"
            )

        def variant(n=num_positions, d=dim, **kw):
            return _sinusoidal_variant(n, d, **kw)

        mistakes = [
            (
                variant(exponent=_two_i, layout="concatenated"),
                "all sines come first and then all cosines: the concatenated "
                "layout, the same columns in another order (as good for a "
                "model), but not the one asked for here, the interleaved layout "
                "of this book: column 2i is sin(p omega_i), column 2i + 1 is "
                "cos(p omega_i)",
            ),
            (
                tensor2tensor_encoding(num_positions, dim),
                "this is tensor2tensor's and fairseq's table: all sines first, "
                "then all cosines, with omega_i = 10000 ** (-i / (dim/2 - 1)), "
                "which differs slightly from the paper's, so its columns are not "
                "this book's in another order. Here column 2i is sin(p omega_i) "
                "and column 2i + 1 is cos(p omega_i), with omega_i = 10000 ** "
                "(-2i / dim)",
            ),
            (
                variant(exponent=_two_i, layout="interleaved", swap=True),
                "sin and cos are swapped: column 2i is sin(p omega_i) and column "
                "2i + 1 is cos(p omega_i)",
            ),
            (
                variant(exponent=_two_i, layout="concatenated", swap=True),
                "all cosines come first and then all sines; the table interleaves "
                "them, sine first: column 2i is sin(p omega_i), column 2i + 1 is "
                "cos(p omega_i)",
            ),
            (
                variant(n=num_positions + 1, exponent=_two_i, layout="interleaved")[1:],
                "the positions start at 1; row p is position p, and the first row "
                "is position 0 (all sines 0, all cosines 1)",
            ),
            (
                variant(exponent=lambda i: i, layout="interleaved"),
                "the frequencies are off: omega_i = 10000 ** (-2i / dim), with the "
                "pair index i counted once per pair; yours look like 10000 ** "
                "(-i / dim)",
            ),
            (
                variant(exponent=lambda i: 4 * i, layout="interleaved"),
                "the frequencies are off: omega_i = 10000 ** (-2i / dim), where i "
                "runs over the dim / 2 pairs; yours look like 10000 ** (-4i / dim) "
                "(i counted per column, then doubled again?)",
            ),
        ]
        diagnose(what, got, want, mistakes, 1e-4)


def _shift_variant(k: int, dim: int, *, exponent=_two_i, halves=False) -> torch.Tensor:
    """M_k as the usual mistakes build it: other frequencies, or blocks on the
    channel pairs (i, i + dim/2) instead of (2i, 2i + 1)."""
    angle = k * _omega(dim, exponent)
    i = torch.arange(dim // 2)
    a, b = (i, i + dim // 2) if halves else (2 * i, 2 * i + 1)
    m = torch.zeros(dim, dim, dtype=torch.float64)
    m[a, a], m[a, b] = angle.cos(), angle.sin()
    m[b, a], m[b, b] = -angle.sin(), angle.cos()
    return m


def check_shift_matrix(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(k, dim)`` against ``sinusoidal_shift_matrix`` (chapters 4, 5).

    ``M_k`` is block diagonal, one block per frequency acting on the pair
    ``(sin, cos)`` in channels ``(2i, 2i + 1)``, with ``PE(p + k) = M_k PE(p)``;
    float32, shape ``(dim, dim)``, for negative ``k`` too.
    """
    for k, dim in ((1, 4), (5, 16), (-3, 16), (12, 6), (0, 8)):
        what = f"fn({k}, {dim})"
        got = call_checked(fn, what, k, dim, shape=(dim, dim), dtype=torch.float32)
        want = sinusoidal_shift_matrix(k, dim)
        if close(got, want, 1e-5):
            continue
        mistakes = [
            (
                sinusoidal_shift_matrix(-k, dim),
                f"this is M_{-k}, the transpose of M_{k}: it moves the table back. "
                "In each 2x2 block, row 2i gives sin((p + k) w) = sin(p w) cos(k w) "
                "+ cos(p w) sin(k w), so +sin(k w) sits on the right of the top row",
            ),
            (
                _shift_variant(k, dim, halves=True),
                "the blocks act on channels (i, i + dim/2), but the table "
                "interleaves: frequency i sits in channels 2i (sin) and 2i + 1 (cos)",
            ),
        ]
        if k != 0:
            mistakes.append(
                (
                    _shift_variant(k, dim, exponent=lambda i: i),
                    "the frequencies are off: omega_i = 10000 ** (-2i / dim) with i "
                    "over the dim / 2 pairs; yours look like 10000 ** (-i / dim)",
                )
            )
        if k not in (0, 1):
            mistakes.append(
                (
                    sinusoidal_shift_matrix(1, dim),
                    "this is M_1 whatever k is: every angle in a block is k "
                    "omega_i, not omega_i",
                )
            )
        diagnose(what, got, want, mistakes, 1e-5)
