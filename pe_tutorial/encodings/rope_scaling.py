"""Context extension for RoPE: rescaled frequencies for longer sequences (chapter 9).

A RoPE model trained on ``L`` positions has seen every fast pair turn many
times but its slow pairs only part of a turn; at ``n > L`` the slow pairs reach
angles it never saw. The methods here change the inverse frequencies
``theta_i = base ** (-2i / D)`` (and sometimes the attention temperature) so
that longer sequences stay inside, or close to, what was trained. Each is
defined exactly as Hugging Face transformers' ``rope_type`` of the same name
(``modeling_rope_utils``), so a checkpoint's ``rope_scaling`` means the same
thing here; ``"ntk"`` is the static NTK-aware rule that ``"dynamic"`` grew from.

- ``"linear"``, position interpolation (Chen et al., 2023): ``theta_i / s``, as
  if positions were divided by the factor ``s``.
- ``"ntk"``, NTK-aware (bloc97, 2023): a larger base,
  ``base * s ** (D / (D - 2))``; fast pairs barely change, the slowest is
  divided by ``s``.
- ``"dynamic"``, dynamic NTK (emozilla, 2023): the same with the factor taken
  from the current length ``n``: ``base * (s n / L - (s - 1)) ** (D / (D - 2))``
  for ``n > L`` and plain RoPE for ``n <= L``.
- ``"yarn"`` (Peng et al., 2023): pairs that turn more than ``beta_fast`` times
  within ``L`` keep their frequency, pairs that turn fewer than ``beta_slow``
  times are interpolated, with a linear ramp between; the logits are sharpened
  by ``attention_scale = 0.1 ln s + 1``.
- ``"llama3"`` (Meta, 2024): wavelengths shorter than ``L / high_freq_factor``
  keep their frequency, longer than ``L / low_freq_factor`` are divided by ``s``,
  and a smooth blend in between.

The attention scale multiplies cos and sin, as in transformers, so it reaches
the logits squared (once through q, once through k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._validation import require_even, require_positive_float, require_positive_int

__all__ = [
    "SCALING_METHODS",
    "RopeScaling",
    "scaled_rope_frequencies",
    "yarn_attention_factor",
]

SCALING_METHODS: tuple[str, ...] = ("linear", "ntk", "dynamic", "yarn", "llama3")
_NEEDS_ORIGINAL = ("dynamic", "yarn", "llama3")


def _plain_frequencies(dim: int, base: float) -> torch.Tensor:
    # theta_i = 1 / base^(2i/D) in float32, computed as transformers computes it
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
    return 1.0 / (base**exponents)


def _check_arguments(method, factor, original_max_positions) -> None:
    if method not in SCALING_METHODS:
        raise ValueError(
            f"unknown RoPE scaling method {method!r}; choose one of {SCALING_METHODS}"
        )
    require_positive_float(factor, "factor")
    if factor < 1:
        raise ValueError(
            f"factor={factor} is below 1; a scaling factor stretches the trained "
            "context (new length / trained length), so use factor >= 1"
        )
    if method in _NEEDS_ORIGINAL and original_max_positions is None:
        raise ValueError(
            f"method {method!r} needs original_max_positions, the context length the "
            "model was trained on (transformers' original_max_position_embeddings)"
        )
    if original_max_positions is not None:
        require_positive_int(original_max_positions, "original_max_positions")


def yarn_attention_factor(factor: float) -> float:
    """YaRN's ``0.1 ln s + 1`` for a context stretched ``s`` times (1 for ``s <= 1``).

    It multiplies cos and sin, so each of q and k: the logits by its square.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"factor must be a number, got {factor!r}")
    if not factor > 0:
        raise ValueError(f"factor must be > 0 (the context stretch s), got {factor}")
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def _yarn(dim, base, factor, original, beta_fast, beta_slow):
    def correction_dim(rotations: float) -> float:
        # the pair i that turns `rotations` times in `original` positions:
        # original * base^(-2i/dim) = 2 pi rotations, solved for i
        turns = original / (rotations * 2 * math.pi)
        return dim * math.log(turns) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001  # as transformers: avoid dividing by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(
        0, 1
    )
    keep = 1 - ramp  # 1: extrapolate (keep theta_i), 0: interpolate (theta_i / s)
    plain = _plain_frequencies(dim, base)
    inv_freq = plain / factor * (1 - keep) + plain * keep
    return inv_freq, yarn_attention_factor(factor)


def _llama3(dim, base, factor, original, low_freq_factor, high_freq_factor):
    plain = _plain_frequencies(dim, base)
    wavelength = 2 * math.pi / plain
    long_wavelength = original / low_freq_factor
    short_wavelength = original / high_freq_factor
    scaled = torch.where(wavelength > long_wavelength, plain / factor, plain)
    # 0 at the long end, 1 at the short end of the middle band
    smooth = (original / wavelength - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    middle = (wavelength >= short_wavelength) & (wavelength <= long_wavelength)
    return torch.where(middle, blended, scaled), 1.0


def scaled_rope_frequencies(
    head_dim: int,
    method: str,
    *,
    factor: float,
    base: float = 10000.0,
    original_max_positions: int | None = None,
    seq_len: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies ``(head_dim / 2,)`` (float32) and attention scale of a RoPE scaling.

    ``method`` is one of ``SCALING_METHODS`` (see the module docstring for each
    formula); ``factor >= 1`` is the new context over the trained one.
    ``original_max_positions`` is the trained context ``L`` ("dynamic", "yarn"
    and "llama3" need it); ``seq_len`` is the current length, read by
    "dynamic" only (None: ``L``, i.e. plain RoPE). ``head_dim`` is the number
    of rotated channels. At ``factor=1`` every method gives plain RoPE.
    """
    require_positive_int(head_dim, "head_dim")
    require_even(head_dim, "head_dim", "for RoPE (each frequency rotates a pair)")
    base = require_positive_float(base, "base")
    _check_arguments(method, factor, original_max_positions)
    dim = head_dim
    if method == "linear":
        return _plain_frequencies(dim, base) / factor, 1.0
    if method == "ntk":
        if dim == 2:
            raise ValueError("NTK-aware scaling needs head_dim > 2 (D / (D - 2))")
        return _plain_frequencies(dim, base * factor ** (dim / (dim - 2))), 1.0
    if method == "dynamic":
        if dim == 2:
            raise ValueError("dynamic NTK scaling needs head_dim > 2 (D / (D - 2))")
        original = original_max_positions
        n = (
            original
            if seq_len is None
            else max(require_positive_int(seq_len, "seq_len"), original)
        )
        scaled_base = base * (factor * n / original - (factor - 1)) ** (dim / (dim - 2))
        return _plain_frequencies(dim, scaled_base), 1.0
    if method == "yarn":
        return _yarn(
            dim,
            base,
            factor,
            original_max_positions,
            require_positive_float(beta_fast, "beta_fast"),
            require_positive_float(beta_slow, "beta_slow"),
        )
    low = require_positive_float(low_freq_factor, "low_freq_factor")
    high = require_positive_float(high_freq_factor, "high_freq_factor")
    if high <= low:
        raise ValueError(
            f"high_freq_factor={high} must be larger than low_freq_factor={low}"
        )
    return _llama3(dim, base, factor, original_max_positions, low, high)


@dataclass(frozen=True)
class RopeScaling:
    """A RoPE scaling as a value, for ``RotaryEmbedding(..., scaling=...)`` (chapter 9).

    The fields are ``scaled_rope_frequencies``'s keyword arguments; the
    arguments are checked when it is made. ``original_max_positions`` is the
    trained context; "dynamic" recomputes its frequencies from each call's
    sequence length.
    """

    method: str
    factor: float
    original_max_positions: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self):
        _check_arguments(self.method, self.factor, self.original_max_positions)

    @property
    def depends_on_length(self) -> bool:
        return self.method == "dynamic"

    def frequencies(
        self, rotary_dim: int, *, base: float, seq_len: int | None = None
    ) -> tuple[torch.Tensor, float]:
        """``scaled_rope_frequencies`` for these settings."""
        return scaled_rope_frequencies(
            rotary_dim,
            self.method,
            factor=self.factor,
            base=base,
            original_max_positions=self.original_max_positions,
            seq_len=seq_len,
            beta_fast=self.beta_fast,
            beta_slow=self.beta_slow,
            low_freq_factor=self.low_freq_factor,
            high_freq_factor=self.high_freq_factor,
        )
