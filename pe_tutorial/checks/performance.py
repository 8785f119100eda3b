"""Checks for chapter 10: RoPE fused over q and k, and ALiBi in FlexAttention."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from ..encodings.rope import apply_rope
from ..memory import tensors_written
from ._common import call_any, check_dtype, check_shape, close, described, diagnose
from ._helpers import first_wrong_row
from .rope import rope_mistakes

__all__ = [
    "ROPE_QK_BUDGET",
    "check_rope_qk",
    "check_alibi_score_mod",
    "check_causal_block_mask",
]

# What a fused rope_qk may write, in copies of q and k (tensors_written): a product
# and an addcmul per half of the pairs (2), the results put together (1: torch.cat,
# or torch.empty_like filled with out=), cos and sin (small). One more full-size
# intermediate (a product and a sum unfused, a rotated copy of x) goes past it; the
# rotate-half formula writes 4.5 (book/instructors.md says so; a test holds both).
ROPE_QK_BUDGET = 3.5


def _rotated_pair(fn, what, q, k, positions):
    """``fn(q, k[, positions])``, which must return two tensors and leave q and k as they were."""
    copies = q.clone(), k.clone()
    args = (*copies, positions) if positions is not None else copies
    out = call_any(fn, what, *args)
    if not (
        isinstance(out, tuple | list)
        and len(out) == 2
        and all(isinstance(t, torch.Tensor) for t in out)
    ):
        raise AssertionError(
            f"{what} returned {described(out)}; return the pair (q_rot, k_rot), "
            "two tensors"
        )
    if not (torch.equal(copies[0], q) and torch.equal(copies[1], k)):
        raise AssertionError(
            f"{what} changed q or k in place; leave them as they were and return new "
            "tensors (no x[...] = ..., x.mul_(...) or x.copy_(...) on the inputs)"
        )
    return out


def check_rope_qk(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Check ``fn(q, k, positions=None)`` (chapter 10): RoPE on queries and keys at once.

    It returns ``(apply_rope(q, positions), apply_rope(k, positions))``, half
    pairing, base 10000, for q ``(B, H, T, D)`` and k ``(B, H_kv, T, D)`` in
    float32 (``H_kv`` may be smaller: grouped-query attention), computes cos and
    sin once for both, and writes at most ``ROPE_QK_BUDGET`` times the bytes of
    q and k in all (``pe_tutorial.memory.tensors_written``: every tensor an operation
    writes, the results included).
    """
    generator = torch.Generator().manual_seed(0)
    cases = [
        ((1, 2, 6, 8), (1, 2, 6, 8), None, "left out (0, 1, ..., 5)"),
        ((2, 4, 5, 16), (2, 2, 5, 16), torch.arange(5) + 37, "37, 38, ..., 41"),
    ]
    for q_shape, k_shape, positions, named in cases:
        q = torch.randn(q_shape, generator=generator)
        k = torch.randn(k_shape, generator=generator)
        what = f"fn(q of shape {q_shape}, k of shape {k_shape}, positions {named})"
        got = _rotated_pair(fn, what, q, k, positions)
        at = torch.arange(q_shape[-2]) if positions is None else positions
        results = (("q", "first", q, got[0], k), ("k", "second", k, got[1], q))
        for name, nth, x, y, other in results:
            where = f"{what}: {name}_rot, the {nth} result"
            check_shape(y, x.shape, where)
            check_dtype(y, x.dtype, where)
            want = apply_rope(x, at)
            if close(y, want, 1e-4):
                continue
            mistakes = [
                (
                    x,
                    f"{name} is returned as it was: rotate q and k both, by the same angles",
                ),
                *rope_mistakes(x, at, "half"),
            ]
            if other.shape == x.shape:
                swapped = "the results are swapped: return (q_rot, k_rot), q's first"
                mistakes.insert(0, (apply_rope(other, at), swapped))
            diagnose(where, y, want, mistakes, 1e-4)
    # what it writes, on tensors big enough that cos and sin are a small part of it
    q, k = torch.randn(2, 8, 64, 64), torch.randn(2, 4, 64, 64)
    positions = torch.arange(64)
    what = "fn(q of shape (2, 8, 64, 64), k of shape (2, 4, 64, 64), positions 0..63)"
    ops = tensors_written(lambda: call_any(fn, what, q, k, positions))
    computed = Counter(op.split(".")[0].rstrip("_") for op, _ in ops)
    for trig in ("cos", "sin"):
        if computed[trig] > 1:
            raise AssertionError(
                f"{what} computes {trig} {computed[trig]} times; compute cos and sin "
                "once and use them for q and for k (the same positions turn both by "
                "the same angles)"
            )
    copy = (q.numel() + k.numel()) * q.element_size()
    ratio = sum(nbytes for _, nbytes in ops) / copy
    if ratio > ROPE_QK_BUDGET:
        per_op = Counter()
        for op, nbytes in ops:
            per_op[op.split(".")[0]] += nbytes / copy
        top = ", ".join(f"{op} {share:.2f}x" for op, share in per_op.most_common(4))
        raise AssertionError(
            f"{what} writes {ratio:.2f} times the bytes of q and k, more than "
            f"{ROPE_QK_BUDGET}; the most: {top}. Every operation writes a tensor "
            "that the next one reads back: fuse each product with its sum (a * cos "
            "- b * sin writes three tensors, (a * cos).addcmul(b, sin, value=-1) "
            "two), and build no rotated copy of x (rotate_half's negation and "
            "concatenation)"
        )


# ---------------------------------------------------------------------------
# FlexAttention: ALiBi's score_mod and the causal block mask
# ---------------------------------------------------------------------------


def score_mod_grid(score_mod: Callable, score: torch.Tensor) -> torch.Tensor:
    """``score_mod`` at every ``(b, h, q_idx, kv_idx)`` of ``score`` ``(B, H, Tq, Tk)``,
    called as FlexAttention calls it: on 0-d tensors, under ``torch.vmap``."""
    fn = score_mod
    for dims in (
        (0, None, None, None, 0),
        (0, None, None, 0, None),
        (0, None, 0, None, None),
        (0, 0, None, None, None),
    ):
        fn = torch.vmap(fn, in_dims=dims)
    return fn(score, *(torch.arange(n) for n in score.shape))


def _vmap_hint(error: Exception) -> str:
    if "vmap" not in str(error):
        return ""
    return (
        ". FlexAttention calls it on 0-d tensors under torch.vmap: use tensor "
        "operations (slopes[h], torch.where), no `if` on a tensor and no .item()"
    )


def _geometric(num_heads: int, start: int) -> torch.Tensor:
    h = torch.arange(num_heads, dtype=torch.float64)
    return 2.0 ** (-8.0 * (h + start) / num_heads)


def _causal_part(scores: torch.Tensor) -> torch.Tensor:
    """``scores`` ``(..., T, T)`` where ``kv_idx <= q_idx``, 0 where the causal mask removes them."""
    kept = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    return torch.where(kept, scores.double(), 0.0)


def _penalty(slopes: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``-slopes[h] (i - j)`` for every ``(b, h, i, j)`` of ``shape``, 0 where ``j > i``."""
    i = torch.arange(shape[-2], dtype=torch.float64)[:, None]
    j = torch.arange(shape[-1], dtype=torch.float64)[None, :]
    return _causal_part((-slopes[:, None, None] * (i - j)).expand(shape))


def check_alibi_score_mod(fn: Callable[[int], Callable]) -> None:
    """Check ``fn(num_heads)``, which returns ALiBi's FlexAttention ``score_mod`` (chapter 10).

    ``score_mod(score, b, h, q_idx, kv_idx) = score - m_h (q_idx - kv_idx)``
    with ``m_h = 2 ** (-8 (h + 1) / num_heads)`` (num_heads a power of two).
    Only the keys the causal mask keeps (``kv_idx <= q_idx``) are compared.
    """
    generator = torch.Generator().manual_seed(0)
    for num_heads in (8, 4, 16):
        what = f"fn({num_heads})"
        score_mod = call_any(fn, what, num_heads)
        if not callable(score_mod) or isinstance(score_mod, type):
            raise AssertionError(
                f"{what} returned {described(score_mod)}; return the score_mod "
                "function itself (def score_mod(score, b, h, q_idx, kv_idx): ..., "
                "then return score_mod)"
            )
        score = torch.randn(2, num_heads, 12, 12, generator=generator)
        what = f"the score_mod of {what}"
        try:
            out = score_mod_grid(score_mod, score)
        except Exception as error:  # noqa: BLE001  (reported to the learner)
            raise AssertionError(
                f"{what} raised {type(error).__name__}: {error}{_vmap_hint(error)}"
            ) from error
        check_shape(out, score.shape, what)
        bias = _causal_part(out - score)
        slopes = _geometric(num_heads, 1)
        want = _penalty(slopes, score.shape)
        if close(bias, want, 1e-5):
            continue
        what = f"{what}, minus the score, where kv_idx <= q_idx"
        if close(_causal_part(out), want, 1e-5):
            raise AssertionError(
                f"{what}: the score_mod returns the bias alone; return the score "
                "plus the bias, score - m_h (q_idx - kv_idx)"
            )
        mistakes = [
            (
                -want,
                "the bias has the wrong sign: a bonus instead of a penalty. A key d "
                "positions back must score m_h d lower: score - m_h (q_idx - kv_idx)",
            ),
            (
                _penalty(_geometric(num_heads, 2), score.shape),
                "head h uses the slope of head h + 1: m_h = 2 ** (-8 (h + 1) / n) "
                "with h counted from 0, so head 0's slope is 2 ** (-8 / n)",
            ),
            (
                _penalty(_geometric(num_heads, 0), score.shape),
                "head h uses the slope of head h - 1: head 0's slope is "
                "2 ** (-8 / n), not 1 (h counts from 0 in 2 ** (-8 (h + 1) / n))",
            ),
            (
                _penalty(slopes.flip(0), score.shape),
                "the slopes are in reverse order: head 0 has the steepest slope, "
                "2 ** (-8 / n)",
            ),
        ]
        if num_heads < 8:
            mistakes.append(
                (
                    _penalty(_geometric(8, 1)[:num_heads], score.shape),
                    "the slopes are those of 8 heads whatever num_heads is: "
                    "m_h = 2 ** (-8 (h + 1) / num_heads)",
                )
            )
        diagnose(what, bias, want, mistakes, 1e-5)


def _dense(block_mask, seq_len: int, what: str) -> torch.Tensor:
    from torch.nn.attention.flex_attention import create_mask

    try:
        mask = create_mask(block_mask.mask_mod, 1, 1, seq_len, seq_len, device="cpu")
    except Exception as error:  # noqa: BLE001  (reported to the learner)
        raise AssertionError(
            f"the mask_mod of {what} raised {type(error).__name__}: {error}"
            f"{_vmap_hint(error)}"
        ) from error
    return mask[0, 0]


def check_causal_block_mask(fn: Callable[[int], object]) -> None:
    """Check ``fn(seq_len)``, a FlexAttention ``BlockMask`` of the causal mask (chapter 10).

    Its ``mask_mod(b, h, q_idx, kv_idx)`` keeps ``kv_idx <= q_idx``, and it is
    built for ``(seq_len, seq_len)`` (``create_block_mask(mask_mod, None, None,
    seq_len, seq_len, device="cpu")``).
    """
    from torch.nn.attention.flex_attention import BlockMask

    for seq_len in (200, 7, 256):
        what = f"fn({seq_len})"
        got = call_any(fn, what, seq_len)
        if not isinstance(got, BlockMask):
            given = (
                "a function (a mask_mod?)"
                if callable(got) and not isinstance(got, type)
                else described(got)
            )
            raise AssertionError(
                f"{what} returned {given}, not a BlockMask; build it from your "
                "mask_mod with create_block_mask(mask_mod, None, None, seq_len, "
                'seq_len, device="cpu") and return that'
            )
        if tuple(got.seq_lengths) != (seq_len, seq_len):
            raise AssertionError(
                f"{what} is built for (q_len, kv_len) = {tuple(got.seq_lengths)}; "
                f"give create_block_mask the lengths {seq_len}, {seq_len}"
            )
        mask = _dense(got, seq_len, what)
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
        if torch.equal(mask, causal):
            continue
        mistakes = [
            (
                causal.tril(-1),
                "the mask skips too much: a query must also see its own key, "
                "kv_idx <= q_idx, not kv_idx < q_idx (query 0 would see no key at all)",
            ),
            (
                torch.ones_like(causal),
                "the mask keeps every key: with no causal mask each query sees the "
                "keys after it; keep kv_idx <= q_idx",
            ),
            (
                causal.T,
                "the mask is reversed: it keeps the keys after the query "
                "(kv_idx >= q_idx); the causal mask keeps kv_idx <= q_idx",
            ),
            (
                causal.T.triu(1),
                "the mask is reversed: it keeps the keys after the query "
                "(kv_idx > q_idx); the causal mask keeps kv_idx <= q_idx",
            ),
        ]
        for candidate, message in mistakes:
            if torch.equal(mask, candidate):
                raise AssertionError(f"the mask_mod of {what}: {message}")
        raise AssertionError(
            f"the mask_mod of {what} is wrong: "
            + first_wrong_row(mask, causal, "kv_idx <= q_idx")
        )
