"""Multimodal RoPE (M-RoPE, Qwen2-VL): sections of the pairs for time, height and width (chapter 11).

Each token gets three positions ``(t, h, w)`` instead of one. The pairs of a
head are split into three sections, ``sections = (s_t, s_h, s_w)`` with
``s_t + s_h + s_w = head_dim / 2`` (Qwen2-VL: ``(16, 24, 24)`` for 128), and
pair ``i`` of section ``a`` turns by ``pos_a * theta_i`` with RoPE's own
``theta_i = base ** (-2i / head_dim)``. Text tokens get ``t = h = w = n``, so
for text M-RoPE *is* RoPE. An image of ``H x W`` patches placed at position
``n`` gets ``t = n``, ``h = n + row``, ``w = n + column``, and the text after it
resumes at ``n + max(H, W)`` (``mrope_position_ids``). The pairing is the
half one (GPT-NeoX, Hugging Face), as in Qwen2-VL.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def mrope_position_ids(segments: Sequence[tuple[str, object]]) -> torch.Tensor:
    """The ``(3, T)`` positions (time, height, width) of a sequence of text and images.

    ``segments`` lists the parts in order: ``("text", n)`` for ``n`` text
    tokens, ``("image", (rows, columns))`` for an image of that many patches
    (after any merging), read row by row. Text counts on from where the last
    part ended: one past the previous text token, or ``n + max(rows, columns)``
    after an image placed at ``n``.
    """
    parts, start = [], 0
    for kind, size in segments:
        if kind == "text":
            n = require_positive_int(size, "a text segment's length")
            parts.append(torch.arange(start, start + n).expand(3, n))
            start += n
        elif kind == "image":
            if not (isinstance(size, tuple) and len(size) == 2):
                raise ValueError(
                    f"an image segment needs (rows, columns), got {size!r}"
                )
            rows = require_positive_int(size[0], "an image's rows")
            columns = require_positive_int(size[1], "an image's columns")
            row, column = torch.meshgrid(
                torch.arange(rows), torch.arange(columns), indexing="ij"
            )
            time = torch.zeros(rows * columns, dtype=torch.long)
            parts.append(start + torch.stack([time, row.flatten(), column.flatten()]))
            start += max(rows, columns)
        else:
            raise ValueError(f"a segment is 'text' or 'image', got {kind!r}")
    if not parts:
        raise ValueError("give at least one segment")
    return torch.cat(parts, dim=1)


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
