"""Small argument checks shared by every module, so each error message says the same things."""

from __future__ import annotations

import torch


def require_positive_int(value, name: str) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` if it is not a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def require_non_negative_int(value, name: str, meaning: str = "") -> int:
    """Return ``value`` if it is an integer 0 or more, else raise ``ValueError``;
    ``meaning`` (optional) says what it counts, in parentheses in the message."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        said = f" ({meaning})" if meaning else ""
        raise ValueError(f"{name} must be a non-negative integer{said}, got {value!r}")
    return value


def require_even(value: int, name: str, why: str) -> int:
    """Raise ``ValueError`` if ``value`` is odd; ``why`` says what the even value is needed for."""
    if value % 2 != 0:
        raise ValueError(f"{name} must be even {why}, got {value}")
    return value


def require_positive_float(value, name: str) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` if it is not a positive finite number."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not as_float > 0 or as_float == float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return as_float


def require_fraction(value, name: str, meaning: str) -> float:
    """Return ``value`` if it is a number in ``(0, 1]``, else raise ``ValueError``.

    ``meaning`` says what the share is (it goes into the message in
    parentheses). A bool, a string or NaN is not such a number.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value <= 1
    ):
        raise ValueError(
            f"{name} must be a number in (0, 1] ({meaning}), got {value!r}"
        )
    return value


def require_integer_tensor(
    positions: torch.Tensor, name: str = "positions"
) -> torch.Tensor:
    """Raise ``ValueError`` unless ``positions`` is an integer tensor (positions are counted, not measured)."""
    if not isinstance(positions, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch.Tensor of integers, got {type(positions).__name__}"
        )
    if (
        positions.dtype.is_floating_point
        or positions.dtype.is_complex
        or positions.dtype == torch.bool
    ):
        raise ValueError(
            f"{name} must be an integer tensor (e.g. torch.arange(seq_len)), got dtype {positions.dtype}; "
            "build positions as integers and let the encoding cast them"
        )
    return positions
