"""Which of RoPE's frequency bands break past the training length (chapter 9).

Pair ``i`` of a RoPE head turns by ``theta_i = base ** (-2i / D)`` per position,
so its wavelength is ``2 pi / theta_i`` positions. A model trained on windows
of ``L`` bytes sees query-key distances ``0 .. L - 1``, and pair ``i`` sees the
angles ``0 .. (L - 1) theta_i``:

- a *fast* pair (wavelength at most ``L``) has turned through the whole circle
  in training, so a longer window shows it no angle it has not seen;
- a *slow* pair (wavelength above ``L``) has seen only an arc, and a window of
  ``n > L`` takes it past the end of that arc.

The ablations below change the frequencies of one band of a trained model at
evaluation (``ByteTransformer.set_rope_frequencies``) for a window of ``n``:

``"hold-slow"``
    slow pairs turn ``L / n`` as fast, so their angles over the window stay
    inside the trained arc (position interpolation on the slow band only);
``"hold-fast"``
    the control: the same, on the fast band only;
``"drop-slow"``
    slow pairs do not turn at all (their channels carry no position).

If the first removes most of RoPE's rise past ``L`` and the control does not,
the rise comes from the slow band.

``p_rope_frequencies`` makes the drop permanent, as Barbero et al. (2025)
propose: p-RoPE trains with the lowest frequencies set to zero, so those pairs
are channels that carry content and no position at any distance (chapter 6).
"""

from __future__ import annotations

import math

import torch

from .._validation import require_fraction, require_positive_int
from .rope import rope_frequencies

__all__ = [
    "BAND_ABLATIONS",
    "rope_wavelengths",
    "slow_pairs",
    "band_frequencies",
    "p_rope_frequencies",
    "P_ROPE_FRACTION",
]

BAND_ABLATIONS: tuple[str, ...] = ("hold-slow", "hold-fast", "drop-slow")
# what p-RoPE's fraction means, for the errors of every place that checks one
P_ROPE_FRACTION = "p-RoPE's share of RoPE pairs that rotate; 1 is plain RoPE"


def rope_wavelengths(head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """``2 pi / theta_i`` for each pair, in positions, ``(head_dim / 2,)``."""
    return 2 * math.pi / rope_frequencies(head_dim, base=base)


def slow_pairs(
    head_dim: int, train_length: int, *, base: float = 10000.0
) -> torch.Tensor:
    """True for the pairs whose wavelength exceeds ``train_length`` (they never turned fully)."""
    require_positive_int(train_length, "train_length")
    return rope_wavelengths(head_dim, base=base) > train_length


def band_frequencies(
    head_dim: int,
    mode: str,
    *,
    train_length: int,
    length: int,
    base: float = 10000.0,
) -> torch.Tensor:
    """The frequencies of ablation ``mode`` (``BAND_ABLATIONS``) for a window of ``length``.

    At ``length <= train_length`` the two *hold* modes change nothing.
    """
    if mode not in BAND_ABLATIONS:
        raise ValueError(
            f"unknown band ablation {mode!r}; choose one of {BAND_ABLATIONS}"
        )
    require_positive_int(length, "length")
    theta = rope_frequencies(head_dim, base=base)
    slow = slow_pairs(head_dim, train_length, base=base)
    if mode == "drop-slow":
        return torch.where(slow, torch.zeros_like(theta), theta)
    band = slow if mode == "hold-slow" else ~slow
    shrink = min(1.0, train_length / length)
    return torch.where(band, theta * shrink, theta)


def p_rope_frequencies(
    head_dim: int, fraction: float, *, base: float = 10000.0
) -> torch.Tensor:
    """p-RoPE (Barbero et al., 2025): RoPE's frequencies, the lowest zeroed (chapter 6).

    The first ``floor(fraction * head_dim / 2)`` pairs, the fastest, keep
    ``theta_i = base ** (-2i / head_dim)``; every slower pair gets ``theta_i = 0``
    and is never rotated. ``fraction`` is the share of pairs that rotate, in
    ``(0, 1]``: 1 is RoPE, and the paper's "0.75-RoPE" drops the slowest quarter.
    Give the result to ``RotaryEmbedding(..., frequencies=...)``.
    """
    require_fraction(fraction, "fraction", P_ROPE_FRACTION)
    theta = rope_frequencies(head_dim, base=base)
    rotating = math.floor(fraction * (head_dim // 2))
    return torch.where(
        torch.arange(theta.numel()) < rotating, theta, torch.zeros_like(theta)
    )
