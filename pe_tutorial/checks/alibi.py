"""Checks for chapter 7: ALiBi's slopes and the causal bias they give."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..encodings.alibi import alibi_bias, alibi_slopes
from ._common import call, call_checked, close, diagnose, first_difference

__all__ = ["check_alibi_slopes", "check_alibi_bias"]


def _geometric(num_heads: int, start: int) -> torch.Tensor:
    h = torch.arange(num_heads, dtype=torch.float64)
    return 2.0 ** (-8.0 * (h + start) / num_heads)


def check_alibi_slopes(fn: Callable[[int], torch.Tensor]) -> None:
    """Check ``fn(num_heads)`` against ``alibi_slopes`` (chapter 7).

    ``m_h = 2 ** (-8 (h + 1) / n)`` for n a power of two; otherwise the slopes
    of the largest power of two p below n, then every other slope of 2p.
    Float32, shape ``(num_heads,)``.
    """
    powers, others = (1, 2, 4, 8, 16, 32), (3, 6, 12, 20, 24)
    for num_heads in powers + others:
        what = f"fn({num_heads})"
        got = call_checked(fn, what, num_heads, shape=(num_heads,), dtype=torch.float32)
        want = alibi_slopes(num_heads)
        if close(got, want, 1e-6):
            continue
        if num_heads in others and all(
            close(call(fn, f"fn({n})", n).reshape(-1), alibi_slopes(n), 1e-6)
            for n in powers
        ):
            raise AssertionError(
                f"{what}: right for powers of two, wrong for {num_heads} heads. "
                "Press et al. take the slopes of the largest power of two p below "
                "num_heads and append every other slope of the sequence for 2p "
                "heads (2 ** (-4 (2h + 1) / p))"
            )
        mistakes = [
            (
                _geometric(num_heads, 0),
                "the slopes are shifted by one head: the first is "
                "2 ** (-8 / num_heads), not 1 (h starts at 0 in 2 ** (-8 (h + 1) / n))",
            ),
            (
                _geometric(num_heads, 2),
                "the slopes are shifted by one head: the first is "
                "2 ** (-8 / num_heads), not 2 ** (-16 / num_heads)",
            ),
            (
                want.flip(0),
                "the slopes are in reverse order: head 0 has the steepest slope",
            ),
        ]
        diagnose(what, got, want, mistakes, 1e-6)


def check_alibi_bias(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(num_heads, seq_len)`` against the causal ``alibi_bias`` (chapter 7).

    ``bias[h, i, j] = -m_h (i - j)`` for keys ``j <= i`` and 0 for ``j > i``
    (the causal mask removes those separately), query ``i`` on the rows;
    float32, shape ``(num_heads, seq_len, seq_len)``.
    """
    for num_heads, seq_len in ((8, 6), (4, 17), (12, 9)):
        what = f"fn({num_heads}, {seq_len})"
        got = call_checked(
            fn,
            what,
            num_heads,
            seq_len,
            shape=(num_heads, seq_len, seq_len),
            dtype=torch.float32,
        )
        want = alibi_bias(num_heads, seq_len)
        if close(got, want, 1e-6):
            continue
        bad = ~torch.isfinite(got)
        if bad.any():
            above = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
            if (bad & ~above).any():  # below the diagonal too: no masking mistake
                raise AssertionError(f"{what} is wrong; {first_difference(got, want)}")
            raise AssertionError(
                f"{what} holds inf or nan: put 0 above the diagonal (keys j > i), "
                "not -inf; the causal mask removes those keys separately, and the "
                "bias is added to scores that are already masked"
            )
        slopes = alibi_slopes(num_heads).double()[:, None, None]
        i = torch.arange(seq_len, dtype=torch.float64)[:, None]
        j = torch.arange(seq_len, dtype=torch.float64)[None, :]
        distance = (i - j).clamp(min=0)
        mistakes = [
            (
                want.transpose(-1, -2),
                "the bias is transposed: rows are queries i, columns keys j, and "
                "the keys before the query (j < i) get the penalty",
            ),
            (
                -want,
                "the sign is flipped: farther keys must score lower (-m_h (i - j))",
            ),
            (
                -slopes * (i - j),
                "keys after the query (j > i) must get 0, not -m_h (i - j), which is "
                "positive there: clamp the distance at 0",
            ),
            (
                -slopes * (i - j).abs(),
                "keys after the query (j > i) must get 0, not -m_h |i - j| (that is "
                "the bidirectional variant); clamp i - j at 0",
            ),
            (
                -slopes.flip(0) * distance,
                "the slopes are in reverse order: head 0 has the steepest slope",
            ),
        ]
        # the slope each head used, read off its farthest key (i = T - 1, j = 0)
        used = got.double()[:, -1:, :1] / -(seq_len - 1)
        if torch.all(got.double().triu(1) == 0) and close(
            got.double(), used * -distance, 1e-6
        ):
            mistakes.append(
                (
                    got,
                    "the distances are right but the slopes are not: head h's "
                    "penalty is alibi_slopes(num_heads)[h] times i - j",
                )
            )
        diagnose(what, got, want, mistakes, 1e-6)
