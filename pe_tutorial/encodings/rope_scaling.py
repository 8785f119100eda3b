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

LongRoPE (Ding et al., 2024; Phi-3, transformers' ``"longrope"``, chapter 11)
is here too but is not one of ``SCALING_METHODS``: it is not one number but
a searched factor per pair, ``theta_i / lambda_i``, with one list for
sequences up to the trained ``L`` and another past it
(``longrope_frequencies``, ``LongRopeScaling``). The experiments of chapter 9
iterate ``SCALING_METHODS`` with a single ``factor`` each, which cannot say
what LongRoPE's lists would be.
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
    "LongRopeScaling",
    "longrope_frequencies",
    "longrope_attention_factor",
]

SCALING_METHODS: tuple[str, ...] = ("linear", "ntk", "dynamic", "yarn", "llama3")
_NEEDS_ORIGINAL = ("dynamic", "yarn", "llama3")


def _plain_frequencies(dim: int, base: float) -> torch.Tensor:
    # theta_i = 1 / base^(2i/D) in float32, computed as transformers computes it
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
    return 1.0 / (base**exponents)


def _check_factor_at_least_one(factor) -> None:
    require_positive_float(factor, "factor")
    if factor < 1:
        raise ValueError(
            f"factor={factor} is below 1; a scaling factor stretches the trained "
            "context (new length / trained length), so use factor >= 1"
        )


def _check_arguments(method, factor, original_max_positions) -> None:
    if method not in SCALING_METHODS:
        raise ValueError(
            f"unknown RoPE scaling method {method!r}; choose one of {SCALING_METHODS}"
        )
    _check_factor_at_least_one(factor)
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


# ---------------------------------------------------------------------------
# LongRoPE: one searched factor per pair, a short and a long list (chapter 11)
# ---------------------------------------------------------------------------


def longrope_attention_factor(factor: float, original_max_positions: int) -> float:
    """LongRoPE's ``sqrt(1 + ln s / ln L)`` on cos and sin (1 for ``s <= 1``).

    ``s`` is the context stretch (Phi-3: ``max_position_embeddings /
    original_max_position_embeddings``), ``L`` the trained context; chapter 11.
    Like YaRN's it multiplies q and k each, so the logits by its square.
    """
    factor = require_positive_float(factor, "factor")
    require_positive_int(original_max_positions, "original_max_positions")
    if factor <= 1:
        return 1.0
    if original_max_positions < 2:
        raise ValueError(
            "original_max_positions must be at least 2 for LongRoPE's attention "
            f"factor sqrt(1 + ln s / ln L) (ln 1 = 0), got {original_max_positions}"
        )
    return math.sqrt(1 + math.log(factor) / math.log(original_max_positions))


def _factor_list(values, name: str, pairs: int | None) -> tuple[float, ...]:
    # a list, tuple or 1-D tensor of positive finite numbers, as floats;
    # `pairs` of them unless pairs is None
    if isinstance(values, torch.Tensor):
        if values.dim() != 1:
            raise ValueError(
                f"{name} must be one factor per rotated pair (1-D), got a tensor "
                f"of shape {tuple(values.shape)}"
            )
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(
            f"{name} must be a list of {pairs} numbers, one per rotated pair, "
            f"got {values!r}"
        )
    if pairs is not None and len(values) != pairs:
        raise ValueError(
            f"{name} has {len(values)} factors but the rotated dimension has "
            f"{pairs} pairs; give one factor per pair (head_dim / 2 of them)"
        )
    out = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name}[{i}] must be a number, got {value!r}")
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(
                f"{name}[{i}] = {value} is not a positive finite number; a pair's "
                "factor divides its frequency, so every factor must be > 0"
            )
        out.append(float(value))
    return tuple(out)


def longrope_frequencies(
    head_dim: int,
    *,
    short_factor,
    long_factor,
    original_max_positions: int,
    factor: float,
    base: float = 10000.0,
    seq_len: int | None = None,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    """LongRoPE's inverse frequencies ``(head_dim / 2,)`` (float32), attention factor.

    Pair ``i`` turns at ``theta_i / lambda_i = 1 / (lambda_i * base ** (2i / D))``
    (Ding et al., 2024; chapter 11), with ``lambda = long_factor`` when the
    sequence is longer than the trained context, ``seq_len > L =
    original_max_positions``, and ``lambda = short_factor`` otherwise (also
    for ``seq_len=None``). The length is ``max(position) + 1`` of the whole
    call, so one list serves every position of it, as in transformers'
    ``"longrope"`` (Phi-3). The attention factor is the same at every length:
    ``attention_factor`` if given, else ``sqrt(1 + ln s / ln L)`` for the
    stretch ``factor = s >= 1`` (Phi-3's ``max_position_embeddings / L``).
    ``head_dim`` is the number of rotated channels; each list has one
    positive factor per pair.
    """
    require_positive_int(head_dim, "head_dim")
    require_even(head_dim, "head_dim", "for RoPE (each frequency rotates a pair)")
    base = require_positive_float(base, "base")
    require_positive_int(original_max_positions, "original_max_positions")
    _check_factor_at_least_one(factor)
    pairs = head_dim // 2
    short = _factor_list(short_factor, "short_factor", pairs)
    long_ = _factor_list(long_factor, "long_factor", pairs)
    if attention_factor is None:
        scale = longrope_attention_factor(factor, original_max_positions)
    else:
        scale = require_positive_float(attention_factor, "attention_factor")
    if seq_len is not None:
        require_positive_int(seq_len, "seq_len")
    use_long = seq_len is not None and seq_len > original_max_positions
    lambdas = torch.tensor(long_ if use_long else short, dtype=torch.float32)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32)
    # theta_i / lambda_i = 1 / (lambda_i * base^(2i/D))
    return 1.0 / (lambdas * base ** (exponents / head_dim)), scale


@dataclass(frozen=True)
class LongRopeScaling:
    """LongRoPE's settings as a value: ``longrope_frequencies``'s arguments (ch. 11).

    ``short_factor`` and ``long_factor`` are stored as tuples and checked
    against the rotated dimension when ``frequencies`` is called (their
    values when the value is made). Its frequencies depend on the length:
    the short list up to ``original_max_positions``, the long one past it.
    """

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_positions: int
    factor: float
    attention_factor: float | None = None

    def __post_init__(self):
        short = _factor_list(self.short_factor, "short_factor", None)
        long_ = _factor_list(self.long_factor, "long_factor", None)
        if len(short) != len(long_):
            raise ValueError(
                f"short_factor has {len(short)} factors and long_factor {len(long_)}; "
                "both give one factor per rotated pair, so they must be as long"
            )
        require_positive_int(self.original_max_positions, "original_max_positions")
        _check_factor_at_least_one(self.factor)
        if self.attention_factor is not None:
            require_positive_float(self.attention_factor, "attention_factor")
        # frozen: set the checked tuples through object.__setattr__
        object.__setattr__(self, "short_factor", short)
        object.__setattr__(self, "long_factor", long_)

    @property
    def depends_on_length(self) -> bool:
        return True

    def uses_long_factors(self, seq_len: int | None) -> bool:
        """Whether a call of ``seq_len = max(position) + 1`` reads the long list."""
        return seq_len is not None and seq_len > self.original_max_positions

    def frequencies(
        self, rotary_dim: int, *, base: float, seq_len: int | None = None
    ) -> tuple[torch.Tensor, float]:
        """``longrope_frequencies`` for these settings."""
        return longrope_frequencies(
            rotary_dim,
            short_factor=self.short_factor,
            long_factor=self.long_factor,
            original_max_positions=self.original_max_positions,
            factor=self.factor,
            base=base,
            seq_len=seq_len,
            attention_factor=self.attention_factor,
        )
