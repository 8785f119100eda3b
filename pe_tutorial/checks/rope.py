"""Checks for chapter 6: RoPE's frequencies and the rotation itself."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..encodings.rope import apply_rope, rope_angles, rope_frequencies
from ._common import (
    call,
    call_keeping_inputs,
    check_dtype,
    check_shape,
    close,
    diagnose,
    first_difference,
)

__all__ = ["check_rope_frequencies", "check_apply_rope"]


def check_rope_frequencies(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(head_dim, base=...)`` against ``rope_frequencies`` (chapter 6).

    ``theta_i = base ** (-2i / D)`` for ``i < D / 2``, float32, shape ``(D / 2,)``;
    ``fn(8)`` uses the default base 10000: ``1, 0.1, 0.01, 0.001``.
    """
    for head_dim, base in ((8, None), (8, 100.0), (64, 10000.0), (128, 5e5)):
        if base is None:
            what, got = f"fn({head_dim})", call(fn, f"fn({head_dim})", head_dim)
            base = 10000.0
        else:
            what = f"fn({head_dim}, base={base:g})"
            got = call(fn, what, head_dim, base=base)
        check_shape(got, (head_dim // 2,), what)
        check_dtype(got, torch.float32, what)
        want = rope_frequencies(head_dim, base=base)
        if close(got, want, 0, rtol=1e-5):
            continue
        i = torch.arange(head_dim // 2, dtype=torch.float64)
        mistakes = [
            (
                rope_frequencies(head_dim),
                "the base is ignored: these are the frequencies of base 10000",
            ),
            (
                base ** (-i / head_dim),
                "the frequencies are off: theta_i = base ** (-2i / D); yours look "
                "like base ** (-i / D)",
            ),
            (
                want.flip(0),
                "the frequencies are in reverse order: theta_0 = 1 is the fastest",
            ),
            (
                base ** (2 * i / head_dim),
                "the exponent's sign is flipped: theta_i = base ** (-2i / D) gets "
                "smaller with i",
            ),
        ]
        diagnose(what, got, want, mistakes, 0, rtol=1e-5)


def _rope_mixed_angles(x, positions, pairing):
    """cos and sin taken from the wrong channels: the angles laid out for the other pairing."""
    angles = rope_angles(positions, x.shape[-1])  # (..., T, D/2)
    if pairing == "half":
        full = angles.repeat_interleave(2, dim=-1)  # each pair's angle, adjacent
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    else:
        full = torch.cat((angles, angles), dim=-1)  # each angle D/2 apart
        rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * full.cos() + rotated * full.sin()


def _rope_written_back_wrongly(x, positions, pairing):
    """Each pair rotated right, then written back in the other pairing's layout."""
    angles = rope_angles(positions, x.shape[-1])
    cos, sin = angles.cos(), angles.sin()
    half = x.shape[-1] // 2
    if pairing == "half":
        a, b = x[..., :half], x[..., half:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    ya, yb = a * cos - b * sin, a * sin + b * cos
    if pairing == "half":
        return torch.stack((ya, yb), dim=-1).flatten(-2)
    return torch.cat((ya, yb), dim=-1)


def rope_mistakes(x, positions, pairing):
    other = "interleaved" if pairing == "half" else "half"
    layout = (
        "channel i with i + D/2 (a = x[..., :D/2], b = x[..., D/2:])"
        if pairing == "half"
        else "channel 2i with 2i + 1 (a = x[..., 0::2], b = x[..., 1::2])"
    )
    put_back = (
        "y_a to channel i and y_b to i + D/2 (concatenate)"
        if pairing == "half"
        else "y_a to channel 2i and y_b to 2i + 1 (stack, then flatten)"
    )
    return [
        (
            apply_rope(x, positions, pairing=other),
            f"this is the {other!r} pairing; pairing={pairing!r} pairs {layout}",
        ),
        (
            apply_rope(x, -positions, pairing=pairing),
            "the rotation turns the wrong way: the sign of sin is flipped "
            "(y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos)",
        ),
        (
            apply_rope(x, positions + 1, pairing=pairing),
            "the positions are off by one: the token at position m turns by "
            "m theta_i, and without an offset the first position is 0",
        ),
        (
            apply_rope(x, pairing=pairing),
            "the positions were ignored: the rotation used 0, 1, 2, ... "
            "instead of the positions given (an offset when decoding)",
        ),
        (
            apply_rope(x, positions, pairing=pairing, base=10000.0**0.5),
            "the frequencies are off: theta_i = base ** (-2i / D); yours "
            "look like base ** (-i / D)",
        ),
        (
            apply_rope(x, positions, pairing=pairing, base=10000.0**2),
            "the frequencies are off: theta_i = base ** (-2i / D) with i "
            "over the D / 2 pairs; yours look like base ** (-4i / D)",
        ),
        (
            _rope_mixed_angles(x, positions, pairing),
            "the two channels of a pair are turned by different angles: "
            "cos and sin are laid out for the other pairing (repeat each "
            "angle to match how you pair the channels)",
        ),
        (
            _rope_written_back_wrongly(x, positions, pairing),
            "each pair is rotated right but written back in the other layout: "
            f"put {put_back}",
        ),
    ]


def check_apply_rope(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, positions=None, *, pairing=...)`` against ``apply_rope`` (chapter 6).

    Runs both pairings (``"half"``: pairs ``(i, i + D/2)``; ``"interleaved"``:
    ``(2i, 2i + 1)``), the default positions ``0 .. T - 1``, positions with an
    offset, one row of positions per batch, and a bfloat16 input at large
    positions (angles must be computed in float32). The result has ``x``'s
    shape and dtype, and ``x`` is left as it was.
    """
    generator = torch.Generator().manual_seed(0)
    cases = [
        ((1, 2, 6, 8), None, "left out (0, 1, ..., 5)"),
        ((1, 2, 6, 8), torch.arange(6), "0, 1, ..., 5"),
        ((2, 3, 5, 16), torch.arange(5) + 37, "37, 38, ..., 41"),
        (
            (2, 1, 5, 8),
            torch.tensor([[[0, 1, 2, 3, 4]], [[5, 6, 7, 8, 9]]]),
            "of shape (2, 1, 5), one row per batch: 0..4 and 5..9",
        ),
    ]
    for pairing in ("half", "interleaved"):
        for shape, positions, described in cases:
            x = torch.randn(shape, generator=generator)
            what = f"fn(x of shape {shape}, positions {described}, pairing={pairing!r})"
            if positions is None:
                got = call_keeping_inputs(fn, what, x, pairing=pairing)
                positions = torch.arange(shape[-2])
            else:
                got = call_keeping_inputs(fn, what, x, positions, pairing=pairing)
            check_shape(got, shape, what)
            check_dtype(got, x.dtype, what)
            want = apply_rope(x, positions, pairing=pairing)
            if close(got, want, 1e-4):
                continue
            diagnose(what, got, want, rope_mistakes(x, positions, pairing), 1e-4)
    # precision: bfloat16 storage, positions in the thousands
    x = torch.randn(1, 1, 4, 8, generator=generator).to(torch.bfloat16)
    positions = torch.arange(4) + 5000
    what = "fn(x in bfloat16, positions 5000..5003)"
    got = call_keeping_inputs(fn, what, x, positions, pairing="half")
    check_shape(got, x.shape, what)
    check_dtype(got, torch.bfloat16, what)
    want = apply_rope(x, positions, pairing="half")
    if not close(got, want, 0.02):
        raise AssertionError(
            f"{what} is far from the reference ({first_difference(got, want)}): "
            "precision lost to a low-precision dtype; compute the angles "
            "m * theta_i in float32 (bfloat16 keeps about 3 significant digits, so "
            "5000 * theta_0 loses its fractional part) and convert only the result "
            "back to bfloat16"
        )
