"""Randomised positional encodings (Ruoss et al., 2023; chapter 13).

A model trained on sequences of ``T`` tokens with positions ``0 .. T-1`` meets
larger positions only at test time. Ruoss et al. train instead with the
positions of each sequence drawn at random from a much longer range
``[0, max_position)`` and sorted, so the order is kept and every position up
to ``max_position`` is seen in training; at test time a longer sequence
gets positions from the same range. Any encoding can read them (the paper
used sinusoids, RoPE, ALiBi and learned tables).
"""

from __future__ import annotations

import torch

from .._validation import require_positive_int

__all__ = ["random_positions"]


def random_positions(
    seq_len: int,
    max_position: int,
    *,
    batch: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``seq_len`` distinct integers from ``[0, max_position)``, in increasing order.

    ``(seq_len,)``, or ``(batch, seq_len)`` with a separate draw per row.
    """
    require_positive_int(seq_len, "seq_len")
    require_positive_int(max_position, "max_position")
    if seq_len > max_position:
        raise ValueError(
            f"cannot draw {seq_len} distinct positions from range({max_position}); "
            "max_position must be at least the sequence length"
        )
    rows = 1 if batch is None else require_positive_int(batch, "batch")
    # the first seq_len of a random permutation: a uniform subset, then sorted
    keys = torch.rand(rows, max_position, generator=generator)
    drawn = keys.topk(seq_len, dim=-1).indices.sort(dim=-1).values
    return drawn[0] if batch is None else drawn
