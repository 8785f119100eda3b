"""Checks for chapter 9: RoPE frequencies stretched for longer contexts."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..encodings.rope import rope_frequencies
from ..encodings.rope_scaling import scaled_rope_frequencies
from ._common import call_checked, diagnose

__all__ = ["check_scaled_frequencies"]

_SCALINGS = {
    "linear": "position interpolation: theta_i / factor",
    "ntk": "NTK-aware: base * factor ** (D / (D - 2)) in place of base",
}


def _mistakes(method, head_dim, factor, base):
    """The usual wrong frequencies for ``method``, each with what to do instead."""
    plain = rope_frequencies(head_dim, base=base).double()
    i = torch.arange(head_dim // 2, dtype=torch.float64)

    def with_base(b):
        return b ** (-2 * i / head_dim)

    ntk_base = base * factor ** (head_dim / (head_dim - 2))
    if method == "linear":
        return [
            (plain, "the factor is ignored: these are plain RoPE frequencies"),
            (
                plain * factor,
                "the frequencies are multiplied by the factor; to fit factor times "
                "more positions into the trained angles they must turn slower, so "
                "divide every theta_i by the factor",
            ),
            (
                with_base(base * factor),
                "the base is multiplied by the factor; position interpolation keeps "
                "the base and divides every theta_i by the factor",
            ),
            (
                with_base(ntk_base),
                "these are NTK-aware frequencies (a larger base); position "
                "interpolation keeps the base and divides every theta_i by the factor",
            ),
        ]
    return [
        (plain, "the factor is ignored: these are plain RoPE frequencies"),
        (
            plain / factor,
            "these are position-interpolation frequencies (every theta_i divided "
            "by the factor); NTK-aware scaling changes only the base, so theta_0 "
            "stays 1",
        ),
        (
            with_base(base * factor),
            "the base is multiplied by the factor itself; NTK-aware scaling uses "
            "factor ** (D / (D - 2)), so that the slowest pair turns exactly "
            "factor times slower",
        ),
        (
            with_base(base * factor ** ((head_dim - 2) / head_dim)),
            "the exponent is upside down: the base is multiplied by "
            "factor ** (D / (D - 2)), not factor ** ((D - 2) / D)",
        ),
        (
            with_base(ntk_base) / factor,
            "the frequencies are divided by the factor as well; NTK-aware scaling "
            "only changes the base",
        ),
    ]


def check_scaled_frequencies(fn: Callable[..., torch.Tensor], method: str) -> None:
    """Check ``fn(head_dim, *, factor, base)`` against ``scaled_rope_frequencies``
    with ``method`` ``"linear"`` (position interpolation) or ``"ntk"``
    (NTK-aware base), chapter 9: float32 inverse frequencies of shape
    ``(head_dim / 2,)``.
    """
    if method not in _SCALINGS:
        raise ValueError(f"method must be one of {sorted(_SCALINGS)}, got {method!r}")
    for head_dim, factor, base in (
        (8, 2.0, 10000.0),
        (64, 4.0, 10000.0),
        (128, 8.0, 5e5),
    ):
        what = f"fn({head_dim}, factor={factor}, base={base:g}), {_SCALINGS[method]}"
        got = call_checked(
            fn,
            what,
            head_dim,
            factor=factor,
            base=base,
            shape=(head_dim // 2,),
            dtype=torch.float32,
        )
        want, _ = scaled_rope_frequencies(head_dim, method, factor=factor, base=base)
        # relative tolerance: the slowest frequencies are tiny
        if torch.allclose(got.double(), want.double(), rtol=1e-5, atol=0):
            continue
        mistakes = _mistakes(method, head_dim, factor, base)
        diagnose(what, got, want, mistakes, 0, rtol=1e-5)
