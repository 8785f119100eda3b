"""What the checks of chapters 10 and 11 share: calling a learner's function that
returns something other than a tensor (a pair of tensors, a score_mod, a BlockMask,
a number), and saying where an attention mask goes wrong."""

from __future__ import annotations

import torch


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0..2, 5"``; ``"none"`` for an empty list."""
    if not indices:
        return "none"
    runs, start = [], indices[0]
    for previous, current in zip(indices, [*indices[1:], None]):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}..{previous}")
            start = current
    return ", ".join(runs)


def first_wrong_row(got: torch.Tensor, want: torch.Tensor, rule: str) -> str:
    """The first query (row) whose keys differ between boolean masks ``got`` and
    ``want``: which keys it sees and which it should, by ``rule``."""
    row = int((got != want).any(dim=1).nonzero()[0])
    seen = _ranges(got[row].nonzero().flatten().tolist())
    expected = _ranges(want[row].nonzero().flatten().tolist())
    return f"query {row} sees the keys {seen}, expected {expected} ({rule})"
