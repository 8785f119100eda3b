"""Checks for chapter 8: T5's relative-position buckets and the bias a bucket table gives."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..encodings.relative import t5_relative_position_bucket
from ._common import call, call_checked, check_shape, close, first_difference

__all__ = ["check_t5_bucket", "check_t5_bias"]


def _check_integer(got: torch.Tensor, what: str) -> None:
    if got.dtype == torch.bool or got.is_floating_point() or got.is_complex():
        fractional = got.is_floating_point() and bool((got != got.floor()).any())
        detail = (
            f", with fractional buckets such as {float(got[got != got.floor()][0]):g}"
            "; the logarithmic bucket is floored"
            if fractional
            else ""
        )
        raise AssertionError(
            f"{what} returned {got.dtype}{detail}. Buckets index a table: return an "
            "integer tensor (torch.long), e.g. convert with .long() after the floor"
        )


def check_t5_bucket(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(relative_position, *, bidirectional, num_buckets, max_distance)``
    against ``t5_relative_position_bucket`` (chapter 8), with relative
    positions ``key - query`` from -300 to 300: an integer tensor of buckets."""
    relative = torch.arange(-300, 301)
    for bidirectional in (True, False):
        for num_buckets, max_distance in ((32, 128), (8, 20)):
            options = dict(
                bidirectional=bidirectional,
                num_buckets=num_buckets,
                max_distance=max_distance,
            )
            what = f"fn(key - query in -300..300, {options})"
            got = call(fn, what, relative.clone(), **options)
            check_shape(got, relative.shape, what)
            _check_integer(got, what)
            want = t5_relative_position_bucket(relative, **options)
            if torch.equal(got.long(), want):
                continue
            got = got.long()
            if torch.equal(got, t5_relative_position_bucket(-relative, **options)):
                raise AssertionError(
                    f"{what}: the relative position is reversed; T5 buckets "
                    "key - query (memory_position - query_position), not "
                    "query - key"
                )
            n = relative.abs()
            near = n < num_buckets // (2 if bidirectional else 1) // 2
            if torch.equal(got[near], want[near]) and not torch.equal(
                got[~near], want[~near]
            ):
                far = int(relative[(got != want)][0])
                raise AssertionError(
                    f"{what}: the exact buckets are right but the logarithmic ones "
                    f"are not (first at key - query = {far}: got "
                    f"{int(got[relative == far][0])}, expected "
                    f"{int(want[relative == far][0])}); check the log formula, the "
                    "floor (not round) and the cap at the last bucket"
                )
            first = int(relative[got != want][0])
            raise AssertionError(
                f"{what} is wrong from key - query = {first}: got "
                f"{int(got[relative == first][0])}, expected "
                f"{int(want[relative == first][0])}"
            )


def _bias_buckets(seq_len: int, num_buckets: int) -> torch.Tensor:
    """Bucket of key j - query i at [i, j], bidirectional, max_distance 128."""
    positions = torch.arange(seq_len)
    relative = positions[None, :] - positions[:, None]  # key j - query i
    return t5_relative_position_bucket(relative, num_buckets=num_buckets)


def check_t5_bias(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(table, seq_len)``: ``bias[h, i, j] = table[bucket(j - i), h]`` (chapter 8).

    ``table`` has shape ``(num_buckets, num_heads)``; the buckets are
    bidirectional with ``num_buckets = table.shape[0]`` and ``max_distance =
    128``. The result has shape ``(num_heads, seq_len, seq_len)`` and the
    table's dtype, and gradients reach the table (it is learned).
    """
    generator = torch.Generator().manual_seed(0)
    for num_buckets, num_heads, seq_len in ((32, 4, 20), (16, 3, 40), (8, 2, 50)):
        table = torch.randn(num_buckets, num_heads, generator=generator)
        what = f"fn(table of shape ({num_buckets}, {num_heads}), {seq_len})"
        leaf = table.clone().requires_grad_()
        try:
            got = call_checked(
                fn,
                what,
                leaf,
                seq_len,
                shape=(num_heads, seq_len, seq_len),
                dtype=table.dtype,
            )
        except AssertionError as error:
            if isinstance(error.__cause__, IndexError) and num_buckets != 32:
                raise AssertionError(
                    f"{error}. The table has {num_buckets} rows, so there are "
                    f"{num_buckets} buckets: pass num_buckets=table.shape[0]"
                ) from error
            raise
        buckets = _bias_buckets(seq_len, num_buckets)
        want = table[buckets].permute(2, 0, 1)
        if not close(got.detach(), want, 1e-6):
            if close(got.detach(), want.transpose(-1, -2), 1e-6):
                raise AssertionError(
                    f"{what}: the relative position is reversed, or the query and "
                    "key axes are swapped: bias[h, i, j] = table[bucket(j - i), h] "
                    "with query i on the rows and key j on the columns (note that "
                    ".T on a 3-D tensor reverses all three axes; use "
                    "permute(2, 0, 1))"
                )
            raise AssertionError(
                f"{what} is wrong; {first_difference(got.detach(), want)}"
            )
        # the table is learned: every use of a bucket must send its gradient back
        if not got.requires_grad:
            raise AssertionError(
                f"{what}: no gradient reaches the table, so T5 could not learn it. "
                "Index the table with the tensor of buckets (table[buckets]); "
                ".item(), .tolist(), torch.tensor(...) and .detach() cut the graph"
            )
        got.sum().backward()
        uses = torch.bincount(buckets.flatten(), minlength=num_buckets)
        expected = uses[:, None].expand(num_buckets, num_heads).to(table.dtype)
        if leaf.grad is None or not torch.allclose(leaf.grad, expected):
            raise AssertionError(
                f"{what}: the gradient reaching the table is wrong: the sum of the "
                "bias should send each entry table[b, h] one unit per (i, j) in "
                "bucket b"
            )
