"""ALiBi, attention with linear biases (Press et al., 2022). Explained in ``book/07_alibi``.

ALiBi adds no vector to the embeddings and rotates nothing. It adds a penalty
to every attention score that grows linearly with the distance between query
and key, with one slope ``m_h`` per head::

    score[h, i, j] = q_i . k_j / sqrt(D) - m_h * (i - j)      (causal, j <= i)
    score[h, i, j] = q_i . k_j / sqrt(D) - m_h * |i - j|      (bidirectional)

The slopes form a geometric sequence, so the heads cover a range of
"attention spans" from very local (large slope) to almost global (small slope).

Query ``i`` and key ``j`` are *absolute* positions in the key sequence: when
there are fewer queries than keys (decoding with a cache), the queries are the
last ``q_len`` positions, ``i = (k_len - q_len) + row``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import require_positive_float, require_positive_int
from .positions import relative_positions

__all__ = ["alibi_slopes", "alibi_bias", "alibi_bias_from_slopes", "ALiBiBias"]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope of every head, float32, shape ``(num_heads,)`` (chapter 7).

    For ``n`` heads, ``n`` a power of two, the slopes are the geometric sequence
    ``m_h = 2 ** (-8 (h + 1) / n)`` for ``h = 0 .. n - 1``: start and ratio are
    both ``2 ** (-8 / n)``, so 8 heads get ``1/2, 1/4, ..., 1/256``.

    For other head counts, Press et al. take the ``p`` slopes of the largest
    power of two ``p < num_heads`` and append every other slope of the
    sequence for ``2p`` heads, ``2 ** (-4 (2h + 1) / p)`` for
    ``h = 0 .. num_heads - p - 1``: 12 heads get ``2^-1 .. 2^-8`` and then
    ``2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5``.
    """
    require_positive_int(num_heads, "num_heads")
    # largest power of two <= num_heads
    power = 2 ** int(math.floor(math.log2(num_heads)))
    h = torch.arange(power, dtype=torch.float64)
    # m_h = 2^(-8 (h + 1) / p)
    slopes = 2.0 ** (-8.0 * (h + 1) / power)
    if power < num_heads:
        extra = torch.arange(num_heads - power, dtype=torch.float64)
        # every other slope of the 2p-head sequence:
        # 2^(-8 (2h + 1) / (2p)) = 2^(-4 (2h + 1) / p)
        slopes = torch.cat((slopes, 2.0 ** (-4.0 * (2 * extra + 1) / power)))
    return slopes.to(torch.float32)


def alibi_bias_from_slopes(
    slopes: torch.Tensor, q_len: int, k_len: int | None = None, *, causal: bool = True
) -> torch.Tensor:
    """``-slopes[h] * distance(i, j)``, float32, shape ``(H, q_len, k_len)`` (chapter 7).

    The distance is ``i - j`` clamped at 0 when ``causal`` (future keys get 0;
    the causal mask removes them) and ``|i - j|`` otherwise. The bias is built
    on the slopes' device; the queries are the last ``q_len`` positions.
    """
    if slopes.ndim != 1:
        raise ValueError(
            f"slopes must be 1-D, one per head, got shape {tuple(slopes.shape)}"
        )
    # i - j, integers, (Tq, Tk)
    distance = -relative_positions(q_len, k_len, device=slopes.device)
    distance = distance.clamp(min=0) if causal else distance.abs()
    # bias[h, i, j] = -m_h * distance(i, j)
    return -slopes.float()[:, None, None] * distance.to(torch.float32)[None]


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int | None = None,
    *,
    causal: bool = True,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The ALiBi bias added to the scores, float32, ``(num_heads, q_len, k_len)``.

    ``causal=True``: ``bias[h, i, j] = -m_h (i - j)`` for ``j <= i`` and 0 for
    ``j > i`` (those keys are removed by the causal mask, which this bias does
    not replace). ``causal=False``: ``bias[h, i, j] = -m_h |i - j|``.

    ``k_len`` defaults to ``q_len``; with ``q_len < k_len`` the queries are the
    last ``q_len`` positions (``query_positions``), as when decoding (chapter 7).
    """
    slopes = alibi_slopes(num_heads).to(device)
    return alibi_bias_from_slopes(slopes, q_len, k_len, causal=causal)


class ALiBiBias(nn.Module):
    """ALiBi as a module: the slopes of ``num_heads`` heads in one buffer (chapter 7).

    ``forward(q_len, k_len=None, *, causal=True)`` returns the bias of
    ``alibi_bias``, ``(num_heads, q_len, k_len)``, computed from the buffer
    ``slopes`` on its device. Nothing is learned; the buffer is not persistent,
    so the state dict stays empty and ``.to(device)`` moves it.

    ``slope_scale`` multiplies every slope (1: Press et al.'s). Chapter 9 uses
    it to test whether ALiBi trails RoPE at the training length because four
    heads' slopes are steep: scaled by 1/4, the gentlest head pays 1/4 of a
    logit per 256 bytes instead of one.
    """

    def __init__(self, num_heads: int, slope_scale: float = 1.0):
        super().__init__()
        self.num_heads = require_positive_int(num_heads, "num_heads")
        self.slope_scale = require_positive_float(slope_scale, "slope_scale")
        slopes = alibi_slopes(num_heads) * self.slope_scale
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(
        self, q_len: int, k_len: int | None = None, *, causal: bool = True
    ) -> torch.Tensor:
        return alibi_bias_from_slopes(self.slopes, q_len, k_len, causal=causal)

    def extra_repr(self) -> str:
        scale = "" if self.slope_scale == 1 else f", slope_scale={self.slope_scale:g}"
        return f"num_heads={self.num_heads}{scale}"
