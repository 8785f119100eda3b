"""Windows and scoring segments cut from a corpus (chapter 9).

- ``random_windows``: the training batches, windows at random starts, inputs
  and next-byte targets;
- ``target_reads``: how many times a training run's windows predict each byte
  of the split, replayed from its seed (does a budget read a byte twice?);
- ``starting_with``: every window's first byte set to one value, a sink a model
  can learn to park attention on (chapter 12);
- ``evaluation_segments``: stretches of a split at seeded offsets spread evenly
  over all of it, so a score reads many files, not the first few;
  ``segment_starts`` says where they start, ``segment_files`` which files they
  read and ``segment_start_files`` the file each starts in (the unit a verdict
  resamples).
"""

from __future__ import annotations

import torch

from .._validation import require_positive_int
from .data import ByteCorpus

__all__ = [
    "random_windows",
    "target_reads",
    "evaluation_segments",
    "segment_starts",
    "segment_files",
    "segment_start_files",
    "starting_with",
]


def _window_starts(
    data_len: int, batch_size: int, seq_len: int, generator: torch.Generator
) -> torch.Tensor:
    """One batch's window starts, the only draw training makes from its generator
    (``random_windows`` cuts the windows, ``target_reads`` replays the draws)."""
    require_positive_int(batch_size, "batch_size")
    require_positive_int(seq_len, "seq_len")
    if data_len <= seq_len:
        raise ValueError(
            f"{data_len} bytes cannot hold a window of {seq_len} + 1 bytes"
        )
    return torch.randint(0, data_len - seq_len, (batch_size,), generator=generator)


def random_windows(
    data: torch.Tensor, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``data``: inputs and next-byte targets, ``(B, T)`` int64."""
    starts = _window_starts(data.numel(), batch_size, seq_len, generator)
    # (B, T + 1) windows, then inputs = first T, targets = last T
    index = starts[:, None] + torch.arange(seq_len + 1)
    windows = data[index].long()
    return windows[:, :-1], windows[:, 1:]


def target_reads(
    data_len: int, steps: int, batch_size: int, seq_len: int, seed: int
) -> torch.Tensor:
    """How many times training predicts each byte of a split of ``data_len``
    bytes: ``(data_len,)`` int32, replaying the run's windows.

    ``train`` seeds one generator with the run's seed and each step draws
    ``batch_size`` window starts from it (``random_windows``); nothing else
    draws from it. Replaying those draws gives every window's targets, bytes
    ``start + 1`` to ``start + seq_len``. Windows fall at random, so a budget
    that reads half a split's bytes' worth still predicts some bytes twice
    (chapter 9's long budget counts how many). Counts are summed with a
    difference array: +1 where a window's targets begin, -1 past their end.
    """
    require_positive_int(data_len, "data_len")
    require_positive_int(steps, "steps")
    generator = torch.Generator().manual_seed(seed)
    starts = torch.cat(
        [_window_starts(data_len, batch_size, seq_len, generator) for _ in range(steps)]
    )
    edges = torch.zeros(data_len + 1, dtype=torch.int32)
    ones = torch.ones_like(starts, dtype=torch.int32)
    edges.index_add_(0, starts + 1, ones)
    edges.index_add_(0, starts + 1 + seq_len, -ones)
    return edges.cumsum(0, dtype=torch.int32)[:data_len]


def starting_with(tokens: torch.Tensor, byte: int | None) -> torch.Tensor:
    """``tokens`` ``(B, T)`` with every row's first entry set to ``byte`` (a copy;
    None: ``tokens`` as they are).

    A byte every training window and scored segment starts with gives a model
    a fixed first token to learn to park attention on: the sink StreamingLLM
    trains in (Xiao et al., 2024, section 3.3; chapter 12).
    """
    if byte is None:
        return tokens
    if not 0 <= byte <= 255:
        raise ValueError(f"byte must be a byte value from 0 to 255, got {byte}")
    started = tokens.clone()
    started[:, 0] = byte
    return started


def evaluation_segments(
    data: torch.Tensor, num_segments: int, segment_len: int, *, seed: int = 0
) -> torch.Tensor:
    """``num_segments`` stretches of ``segment_len + 1`` bytes spread over all of ``data``.

    ``data`` is cut into ``num_segments`` equal strata, and each segment starts
    at a seeded random offset inside its own stratum, so the segments never
    overlap and reach from the start of the stream to its end (many files, not
    the first few). Returns ``(num_segments, segment_len + 1)``, the dtype of
    ``data``: inputs are ``[:, :-1]``, next-byte targets ``[:, 1:]``.
    """
    starts = segment_starts(data.numel(), num_segments, segment_len, seed=seed)
    return data[starts[:, None] + torch.arange(segment_len + 1)]


def segment_starts(
    num_bytes: int, num_segments: int, segment_len: int, *, seed: int = 0
) -> torch.Tensor:
    """Where ``evaluation_segments`` starts each segment in a stream of ``num_bytes``."""
    require_positive_int(num_segments, "num_segments")
    require_positive_int(segment_len, "segment_len")
    stratum = num_bytes // num_segments
    if stratum < segment_len + 1:
        raise ValueError(
            f"{num_bytes} bytes cannot hold {num_segments} segments of "
            f"{segment_len} + 1 bytes; ask for fewer or shorter segments, or "
            "read more validation bytes"
        )
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.randint(
        0, stratum - segment_len, (num_segments,), generator=generator
    )
    return torch.arange(num_segments) * stratum + offsets


def segment_files(
    corpus: ByteCorpus,
    num_segments: int,
    segment_len: int,
    *,
    side: str = "validation",
    seed: int = 0,
) -> list[str]:
    """The distinct files that ``evaluation_segments`` of a corpus side read, in stream order."""
    data, _ = corpus.side(side)
    starts = segment_starts(data.numel(), num_segments, segment_len, seed=seed)
    names: dict[str, None] = {}
    for start in starts.tolist():
        for name in corpus.files_between(side, start, start + segment_len + 1):
            names[name] = None
    return list(names)


def segment_start_files(
    corpus: ByteCorpus,
    num_segments: int,
    segment_len: int,
    *,
    side: str = "validation",
    seed: int = 0,
) -> list[str]:
    """For each of ``evaluation_segments``' segments in order, the file it starts in.

    Segments of one file are alike, so they are not independent draws; a
    verdict that resamples files (``verdicts.paired_verdict``) groups
    segments by this name. A segment that runs into the next file counts
    as its first file's. A corpus that is one text names no files: ``[]``.
    """
    data, listed = corpus.side(side)
    if not listed:
        return []
    starts = segment_starts(data.numel(), num_segments, segment_len, seed=seed)
    offsets = torch.tensor([offset for _, offset in listed])
    index = torch.searchsorted(offsets, starts, right=True) - 1
    return [listed[i][0] for i in index.tolist()]
