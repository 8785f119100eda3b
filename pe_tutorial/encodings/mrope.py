"""Multimodal RoPE (M-RoPE, Qwen2-VL): sections of the pairs for time, height and width (chapter 13).

Each token gets three positions ``(t, h, w)`` instead of one. The pairs of a
head are split into three sections, ``sections = (s_t, s_h, s_w)`` with
``s_t + s_h + s_w = head_dim / 2`` (Qwen2-VL: ``(16, 24, 24)`` for 128), and
pair ``i`` of section ``a`` turns by ``pos_a * theta_i`` with RoPE's own
``theta_i = base ** (-2i / head_dim)``. Text tokens get ``t = h = w = n``, so
for text M-RoPE *is* RoPE. An image of ``H x W`` patches placed at position
``n`` gets ``t = n``, ``h = n + row``, ``w = n + column``, and the text after it
resumes at ``n + max(H, W)`` (``mrope_position_ids``). The pairing is the
half one (GPT-NeoX, Hugging Face), as in Qwen2-VL.

A video of ``F`` frames (temporal patches after merging) of ``H x W`` patches
at ``n`` counts its frames on the time axis: frame ``f`` has ``t = n + f``
(Qwen2-VL), or, with Qwen2.5-VL's time-tied ids, ``t = n + floor(f * r * s)``
for ``r`` = ``tokens_per_second`` and ``s`` the seconds one frame spans
(transformers' ``second_per_grid_ts``), so that the temporal id counts time,
not frames. Text after a video resumes one past the largest id on any axis,
as in Qwen's released code, with which the models were trained
(``text_resumes="past_max"``, the default); transformers 5's ``get_rope_index``
resumes at ``n + max(H, W)``, the rule for images (``text_resumes="spatial"``).
The two differ only after a video whose time ids reach past its rows and
columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from .._validation import require_positive_int
from .rope_core import check_rotary_dim, check_x, rope_frequencies, rotate

__all__ = ["QWEN2_VL_SECTIONS", "mrope_position_ids", "mrope_cos_sin", "apply_mrope"]

# Qwen2-VL's sections for head_dim 128: 16 pairs for time, 24 each for height and width
QWEN2_VL_SECTIONS = (16, 24, 24)


def check_sections(sections: Sequence[int], head_dim: int) -> tuple[int, int, int]:
    """Three positive section sizes that add up to ``head_dim / 2``."""
    check_rotary_dim(head_dim, None)
    sections = tuple(sections)
    if len(sections) != 3 or not all(
        isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sections
    ):
        raise ValueError(
            f"sections must be three positive integers (time, height, width), got "
            f"{sections}"
        )
    if sum(sections) != head_dim // 2:
        raise ValueError(
            f"sections {sections} add up to {sum(sections)} pairs, but a head of "
            f"{head_dim} channels has {head_dim // 2}: they must sum to half the "
            f"head dimension (Qwen2-VL: {QWEN2_VL_SECTIONS} for 128)"
        )
    return sections


def _grid(size, kind: str, axes: tuple[str, ...]) -> tuple[int, ...]:
    # (rows, columns) of an image or (frames, rows, columns) of a video
    if not (isinstance(size, tuple) and len(size) == len(axes)):
        raise ValueError(
            f"a{'n' if kind == 'image' else ''} {kind} segment needs "
            f"({', '.join(axes)}), got {size!r}"
        )
    return tuple(
        require_positive_int(n, f"a{'n' if kind == 'image' else ''} {kind}'s {axis}")
        for n, axis in zip(size, axes)
    )


def mrope_position_ids(
    segments: Sequence[tuple[str, object]],
    *,
    tokens_per_second: float | None = None,
    seconds_per_frame: Sequence[float] | None = None,
    text_resumes: Literal["past_max", "spatial"] = "past_max",
) -> torch.Tensor:
    """The ``(3, T)`` positions (time, height, width) of text, images and videos.

    ``segments`` lists the parts in order: ``("text", n)`` for ``n`` text
    tokens, ``("image", (rows, columns))`` for an image of that many patches
    (after any merging), read row by row, and ``("video", (frames, rows,
    columns))`` for a video, read frame by frame. A part placed at ``n`` has
    ``h = n + row`` and ``w = n + column``; an image has ``t = n``, a video's
    frame ``f`` has ``t = n + f`` (Qwen2-VL's ``get_rope_index`` with
    ``video_grid_thw``). With ``tokens_per_second = r`` (Qwen2.5-VL's time-tied
    ids) frame ``f`` of the ``v``-th video gets ``t = n + floor(f * r * s_v)``
    instead, ``s_v = seconds_per_frame[v]`` the seconds a frame spans (one per
    video, default 1 each, as transformers' ``second_per_grid_ts``; a frame
    is one temporal patch, 2 video frames in Qwen), ``r * s_v`` and its
    multiples in float32 as transformers computes them.

    Text counts on from where the last part ended: one past the previous text
    token, or, after an image or video, one past the largest id of the part on
    any axis (``text_resumes="past_max"``, the default: Qwen's released code,
    ``st_idx = max + 1``, with which the models were trained) or at ``n +
    max(rows, columns)`` (``"spatial"``, transformers 5's ``get_rope_index``).
    After an image the two agree; they differ after a video whose time ids
    reach past its rows and columns, where ``"spatial"`` gives the text the
    video's last times again.
    """
    _check_text_resumes(text_resumes)
    segments = list(segments)
    videos = sum(1 for kind, _ in segments if kind == "video")
    intervals = _video_intervals(tokens_per_second, seconds_per_frame, videos)
    parts, start = [], 0
    for kind, size in segments:
        if kind == "text":
            n = require_positive_int(size, "a text segment's length")
            parts.append(torch.arange(start, start + n).expand(3, n))
            start += n
            continue
        ids = start + _media_ids(kind, size, intervals)
        parts.append(ids)
        if text_resumes == "spatial":  # n + max(rows, columns)
            start = int(ids[1:].max()) + 1
        else:
            start = int(ids.max()) + 1
    if not parts:
        raise ValueError("give at least one segment")
    return torch.cat(parts, dim=1)


def _check_text_resumes(text_resumes: str) -> None:
    if text_resumes not in ("spatial", "past_max"):
        raise ValueError(
            f"text_resumes must be 'past_max' (Qwen's released code, the default) "
            f"or 'spatial' (transformers 5's get_rope_index), got {text_resumes!r}"
        )


def _media_ids(kind: str, size, intervals: list) -> torch.Tensor:
    """The (3, frames * rows * columns) ids (t, h, w) of an image or a video placed
    at 0, read frame by frame, row by row; takes the video's time step from
    ``intervals``."""
    if kind == "image":
        frames, (rows, columns) = 1, _grid(size, kind, ("rows", "columns"))
        time = torch.zeros(1, dtype=torch.long)
    elif kind == "video":
        frames, rows, columns = _grid(size, kind, ("frames", "rows", "columns"))
        # t = f (Qwen2-VL) or floor(f r s) in float32 (Qwen2.5-VL)
        interval = intervals.pop(0)
        time = torch.arange(frames)
        if interval is not None:
            time = (time * interval).long()
    else:
        raise ValueError(f"a segment is 'text', 'image' or 'video', got {kind!r}")
    t, h, w = torch.meshgrid(
        time, torch.arange(rows), torch.arange(columns), indexing="ij"
    )
    return torch.stack([t, h, w]).reshape(3, frames * rows * columns)


def _video_intervals(tokens_per_second, seconds_per_frame, videos) -> list:
    # the time-id step of each video: None for Qwen2-VL's frame index,
    # r * s_v for Qwen2.5-VL's time-tied ids
    if tokens_per_second is None:
        if seconds_per_frame is not None:
            raise ValueError(
                "seconds_per_frame ties time ids to seconds only with "
                "tokens_per_second (Qwen2.5-VL: 2); give both, or neither for "
                "Qwen2-VL's frame index"
            )
        return [None] * videos
    if isinstance(tokens_per_second, bool) or not (
        isinstance(tokens_per_second, (int, float)) and tokens_per_second > 0
    ):
        raise ValueError(
            f"tokens_per_second must be a positive number (time ids per second; "
            f"Qwen2.5-VL uses 2), got {tokens_per_second!r}"
        )
    seconds = [1.0] * videos if seconds_per_frame is None else list(seconds_per_frame)
    if len(seconds) != videos:
        raise ValueError(
            f"seconds_per_frame has {len(seconds)} values but there are {videos} "
            "videos; give one per video, in order"
        )
    for s in seconds:
        if isinstance(s, bool) or not (isinstance(s, (int, float)) and s > 0):
            raise ValueError(
                f"seconds_per_frame must be positive numbers (the seconds a frame "
                f"spans, e.g. 2 frames per patch / 2 fps = 1.0), got {s!r}"
            )
    # r * s_v in float32, as transformers multiplies the float32 tensor it gets
    return [torch.tensor(s, dtype=torch.float32) * tokens_per_second for s in seconds]


def mrope_cos_sin(
    position_ids: torch.Tensor,
    head_dim: int,
    *,
    sections: Sequence[int] = QWEN2_VL_SECTIONS,
    base: float = 10000.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of M-RoPE's angles, each ``position_ids.shape[1:] + (head_dim/2,)``.

    ``position_ids`` is ``(3, ..., T)``: time, height and width. Pair ``i`` of
    the section of axis ``a`` gets the angle ``position_ids[a] * theta_i``.
    """
    sections = check_sections(sections, head_dim)
    if position_ids.dim() < 2 or position_ids.shape[0] != 3:
        raise ValueError(
            f"position_ids must be (3, ..., T): time, height and width, got shape "
            f"{tuple(position_ids.shape)}"
        )
    theta = rope_frequencies(head_dim, base=base).to(position_ids.device)
    axis = torch.repeat_interleave(
        torch.arange(3, device=position_ids.device),
        torch.tensor(sections, device=position_ids.device),
    )  # the axis each pair reads
    # (..., T, D/2): pair i takes position_ids[axis[i]]
    chosen = position_ids.movedim(0, -1)[..., axis].float()
    angles = chosen * theta
    return angles.cos(), angles.sin()


def apply_mrope(
    x: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    sections: Sequence[int] = QWEN2_VL_SECTIONS,
    base: float = 10000.0,
) -> torch.Tensor:
    """Rotate ``x`` ``(..., T, head_dim)`` by M-RoPE at ``position_ids`` ``(3, ..., T)``.

    Half pairing, angles in float32; returns a tensor like ``x``.
    """
    check_x(x)
    if position_ids.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"position_ids has {position_ids.shape[-1]} positions but x has "
            f"{x.shape[-2]} tokens; give one (t, h, w) per token"
        )
    cos, sin = mrope_cos_sin(position_ids, x.shape[-1], sections=sections, base=base)
    return rotate(x, cos.to(x.device), sin.to(x.device), "half", x.shape[-1])
