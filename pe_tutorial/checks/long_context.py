"""Checks for chapters 11 to 13: YaRN's factor; local attention masks (12); M-RoPE's ids (13)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ..attention.local_global import sliding_window_mask, window_overlay
from ..encodings.mrope import mrope_position_ids
from ..encodings.rope_scaling import yarn_attention_factor
from ._common import call, call_any, check_shape, described
from ._helpers import first_wrong_row

__all__ = [
    "check_sliding_window_mask",
    "check_chunked_mask",
    "check_mrope_position_ids",
    "check_yarn_attention_factor",
]


def _mask(fn, what, length, size) -> torch.Tensor:
    """``fn(length, size)``: a boolean ``(length, length)`` tensor, queries on the rows."""
    got = call(fn, what, length, size)
    check_shape(got, (length, length), what)
    if got.dtype != torch.bool:
        additive = got.is_floating_point() and bool(torch.isinf(got).any())
        kind = "a float mask of 0 and -inf, a bias" if additive else f"{got.dtype}"
        raise AssertionError(
            f"{what} returned {kind}; return booleans, True where query i may see "
            "key j (comparisons such as j <= i give them)"
        )
    return got


def _grid(length):
    i = torch.arange(length)[:, None]
    return i, torch.arange(length)[None, :]


def _named(what, got, want, mistakes, rule):
    """Raise with the first mistake ``got`` equals, else with its first wrong query."""
    for candidate, message in mistakes:
        if torch.equal(got, candidate):
            raise AssertionError(f"{what}: {message}")
    raise AssertionError(f"{what} is wrong: {first_wrong_row(got, want, rule)}")


def check_sliding_window_mask(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(length, window)``: True where ``i - window < j <= i`` (chapter 12).

    Gemma 3's local layers: query ``i`` (the rows) sees the last ``window``
    keys, itself included; a boolean ``(length, length)`` tensor, like
    ``local_global.sliding_window_mask``.
    """
    for length, window in ((8, 3), (10, 4), (6, 1), (5, 8)):
        what = f"fn({length}, {window})"
        got = _mask(fn, what, length, window)
        want = sliding_window_mask(length, window)
        if torch.equal(got, want):
            continue
        i, j = _grid(length)
        w = window
        mistakes = [
            (
                (i - w <= j) & (j <= i),
                f"off by one: a query sees {w + 1} keys, window + 1; the window is the "
                "last window keys, the query itself included: i - window < j <= i",
            ),
            (
                (i - w + 1 < j) & (j <= i),
                f"off by one: a query sees {w - 1} keys, window - 1; the window is the "
                "last window keys, the query itself included: i - window < j <= i",
            ),
            (
                (i - j).abs() < w,
                "the window is not causal: a query also sees the keys after it; keep "
                "i - window < j <= i",
            ),
            (
                (i - w <= j) & (j < i),
                "a query does not see itself: the window is the last window keys "
                "with the query included, i - window < j <= i",
            ),
            (
                want.T,
                "the mask is transposed: queries i are the rows, keys j the columns",
            ),
        ]
        _named(what, got, want, mistakes, "i - window < j <= i")


def check_chunked_mask(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(length, chunk)``: True where ``floor(i / chunk) == floor(j / chunk)``
    and ``j <= i`` (chapter 12).

    Llama 4's RoPE layers: the positions are cut into chunks ``0..C-1``,
    ``C..2C-1``, ... and query ``i`` sees the keys before it in its own chunk
    only; a boolean ``(length, length)`` tensor.
    """
    for length, chunk in ((10, 4), (12, 3), (7, 7), (5, 8)):
        what = f"fn({length}, {chunk})"
        got = _mask(fn, what, length, chunk)
        i, j = _grid(length)
        causal = j <= i
        want = causal & window_overlay(length, length, chunk, "chunked")
        if torch.equal(got, want):
            continue
        c = chunk
        edges_off = (
            f"the chunks' edges are off by one, so chunks cross them: with chunk = {c} "
            f"the chunks are 0..{c - 1}, {c}..{2 * c - 1}, ..., floor(i / chunk) with "
            "positions counted from 0"
        )
        mistakes = [
            (
                causal & (i - c < j),
                "this is a sliding window of chunk keys, not chunks: chunks have "
                "fixed edges at multiples of chunk, and a query sees only the keys "
                "of its own chunk (floor(j / chunk) == floor(i / chunk)), so the "
                "first query of a chunk sees itself alone",
            ),
            (
                window_overlay(length, length, chunk, "chunked"),
                "a query also sees the keys after it in its chunk: the chunks are "
                "causal inside, and the chunk rule with j <= i",
            ),
            (
                causal & ((i + 1) // c == (j + 1) // c),
                edges_off,
            ),
            (
                causal & ((i - 1) // c == (j - 1) // c),
                edges_off,
            ),
        ]
        _named(
            what, got, want, mistakes, "floor(i / chunk) == floor(j / chunk), j <= i"
        )


def _ids(
    before, rows, columns, after, *, resume=None, order=(0, 1, 2), by="row", at=None
):
    """M-RoPE's ids of text, an image and text, with one rule changed for a mistake:
    text resuming at ``resume``, the axes in ``order``, the patches read ``by`` column,
    or the image placed at ``at``."""
    start = before if at is None else at
    patch = torch.arange(rows * columns)
    if by == "row":
        row, column = patch // columns, patch % columns
    else:
        row, column = patch % rows, patch // rows
    image = torch.stack([torch.zeros_like(patch), row, column]) + start
    resume = before + max(rows, columns) if resume is None else resume
    first = torch.arange(before).expand(3, -1)
    last = torch.arange(resume, resume + after).expand(3, -1)
    return torch.cat([first, image, last], dim=1)[list(order)]


def check_mrope_position_ids(fn: Callable[[int, int, int, int], torch.Tensor]) -> None:
    """Check ``fn(text_before, rows, columns, text_after)`` (chapter 13): M-RoPE's
    ``(3, T)`` integer positions (time, height, width) of text, one image and text.

    Qwen2-VL's rule (``get_rope_index``, ``mrope_position_ids``): text token
    ``n`` gets ``t = h = w = n``; the image, placed at ``n = text_before``, gets
    ``t = n``, ``h = n + row``, ``w = n + column`` for its patches read row by
    row; the text after it resumes at ``n + max(rows, columns)``, one past the
    image's largest position.
    """
    for before, rows, columns, after in ((3, 3, 4, 2), (1, 2, 5, 3), (4, 4, 2, 1)):
        what = f"fn({before}, {rows}, {columns}, {after})"
        total = before + rows * columns + after
        got = call(fn, what, before, rows, columns, after)
        if tuple(got.shape) == (total, 3):
            raise AssertionError(
                f"{what} returned shape {tuple(got.shape)}; M-RoPE's ids are (3, T), "
                "one row per axis (t, h, w): transpose"
            )
        check_shape(got, (3, total), what)
        if got.is_floating_point() or got.dtype == torch.bool or got.is_complex():
            raise AssertionError(
                f"{what} returned {got.dtype}; positions are integers: return a "
                "torch.long tensor"
            )
        segments = [("text", before), ("image", (rows, columns)), ("text", after)]
        want = mrope_position_ids(segments)
        if torch.equal(got.long(), want):
            continue
        got = got.long()
        n, top = before, before + max(rows, columns)
        case = (before, rows, columns, after)
        resumed = int(got[0, before + rows * columns])
        mistakes = [
            (
                _ids(*case, resume=n + rows * columns),
                f"the text after the image resumes at {resumed}, n + rows * columns, "
                "as if every patch were a token; it resumes one past the image's "
                f"largest position, n + max(rows, columns) = {top}",
            ),
            (
                _ids(*case, resume=top - 1),
                f"the text after the image resumes at {resumed}, on the image's "
                "largest position; it resumes one past it, n + max(rows, columns) "
                f"= {top}",
            ),
            (
                _ids(*case, resume=n + 1),
                f"the text after the image resumes at {resumed}, as if the image were "
                f"one token; it resumes at n + max(rows, columns) = {top}",
            ),
            (
                _ids(*case, at=0, resume=max(rows, columns)),
                "the image's positions start at 0; the image placed after n text "
                "tokens starts at n: t = n, h = n + row, w = n + column",
            ),
            (
                _ids(*case, at=0),
                "the image's positions start at 0; the image placed after n text "
                "tokens starts at n: t = n, h = n + row, w = n + column",
            ),
            (
                _ids(*case, by="column"),
                "the patches are read column by column; they come row by row: patch "
                "k has row k // columns and column k % columns",
            ),
        ]
        for order in ((0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
            named = ", ".join("thw"[a] for a in order)
            mistakes.append(
                (
                    _ids(*case, order=order),
                    f"the three rows are in the order ({named}); they are (t, h, w): "
                    "time, then height (the row), then width (the column)",
                )
            )
        for candidate, message in mistakes:
            if torch.equal(got, candidate):
                raise AssertionError(f"{what}: {message}")
        token = int((got != want).any(dim=0).nonzero()[0])
        raise AssertionError(
            f"{what} is wrong from token {token}: got (t, h, w) = "
            f"{tuple(got[:, token].tolist())}, expected {tuple(want[:, token].tolist())}"
        )


def check_yarn_attention_factor(fn: Callable[[float], float]) -> None:
    """Check ``fn(s)``: YaRN's attention factor ``0.1 ln s + 1`` for a context stretched
    ``s`` times, and 1 for ``s <= 1`` (chapter 11); a Python number.

    It multiplies cos and sin, so q and k each, and the logits by its square.
    """
    for s in (4.0, 2.0, 8.0, 32.0, 1.0, 0.5):
        what = f"fn({s:g})"
        got = call_any(fn, what, s)
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            raise AssertionError(
                f"{what} returned {described(got)}; return a Python float (math.log "
                "works on floats; a 0-d tensor converts with float(...))"
            )
        want = yarn_attention_factor(s)
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        mistakes = [
            (
                0.1 * math.log10(s) + 1,
                "the log is base 10; YaRN's is the natural log, math.log(s)",
            ),
            (
                0.1 * math.log2(s) + 1,
                "the log is base 2; YaRN's is the natural log, math.log(s)",
            ),
            (
                0.1 * math.log(s),
                "the + 1 is missing: 0.1 ln s + 1, which is 1 at s = 1",
            ),
            (
                (0.1 * math.log(s) + 1) ** 2,
                "this is the factor's square, what the logits get; YaRN's factor "
                "multiplies cos and sin, q and k each: 0.1 ln s + 1",
            ),
            (
                0.1 * math.log(s) + 1,
                "for s <= 1 nothing is stretched and the factor is 1; 0.1 ln s + 1 "
                "only for s > 1",
            ),
        ]
        for candidate, message in mistakes:
            if math.isclose(got, candidate, rel_tol=1e-6):
                raise AssertionError(f"{what} = {got:.6g}: {message}")
        raise AssertionError(f"{what} = {got:.6g}, expected 0.1 ln s + 1 = {want:.6g}")
