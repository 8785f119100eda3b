"""pe_tutorial.checks for chapters 10 and 11 (the assignments performance and
long_context): each answer, written here as a learner would write it, passes
quietly, and each usual mistake fails with its own diagnosis."""

from __future__ import annotations

import math
import re

import pytest
import torch

from pe_tutorial import checks

flex = pytest.importorskip("torch.nn.attention.flex_attention")


def fails_saying(check, fn, says):
    with pytest.raises(AssertionError, match=re.escape(says)):
        check(fn)


# ---------------------------------------------------------------------------
# chapter 10: RoPE on q and k at once
# ---------------------------------------------------------------------------


def rope_qk_by_hand(q, k, positions=None, *, mistake=None):
    d, h = q.shape[-1], q.shape[-1] // 2
    if positions is None:
        positions = torch.arange(q.shape[-2])
    if mistake == "from 1":
        positions = positions + 1

    def tables():
        angles = positions[:, None].float() * 10000.0 ** (-2 * torch.arange(h) / d)
        cos, sin = angles.cos(), angles.sin()
        return (cos, -sin) if mistake == "sign" else (cos, sin)

    cos_sin = None if mistake == "twice" else tables()

    def rotate(x):
        cos, sin = tables() if mistake == "twice" else cos_sin
        a, b = x[..., :h], x[..., h:]
        if mistake == "interleaved":
            a, b = x[..., 0::2], x[..., 1::2]
        if mistake == "unfused":
            return torch.cat((a * cos - b * sin, b * cos + a * sin), -1)
        if mistake == "rotate_half":
            cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
            return x * cos + torch.cat((-b, a), -1) * sin
        y_a, y_b = (a * cos).addcmul(b, sin, value=-1), (b * cos).addcmul(a, sin)
        if mistake == "interleaved":
            return torch.stack((y_a, y_b), -1).flatten(-2)
        return torch.cat((y_a, y_b), -1)

    if mistake == "k unrotated":
        return rotate(q), k.clone()
    if mistake == "swapped":
        return rotate(k), rotate(q)
    if mistake == "one tensor":
        return torch.cat((rotate(q), rotate(k)), 1)
    if mistake == "in place":
        q.copy_(rotate(q))
        return q, rotate(k)
    return rotate(q), rotate(k)


def rope_qk_into_one_output(q, k, positions=None):
    """Each half written straight into an output made once (out=), then addcmul_."""
    d, h = q.shape[-1], q.shape[-1] // 2
    if positions is None:
        positions = torch.arange(q.shape[-2])
    angles = positions[:, None].float() * 10000.0 ** (-2 * torch.arange(h) / d)
    cos, sin = angles.cos(), angles.sin()
    results = []
    for x in (q, k):
        out = torch.empty_like(x)
        a, b = x[..., :h], x[..., h:]
        torch.mul(a, cos, out=out[..., :h]).addcmul_(b, sin, value=-1)
        torch.mul(b, cos, out=out[..., h:]).addcmul_(a, sin)
        results.append(out)
    return tuple(results)


@pytest.mark.parametrize("fn", [rope_qk_by_hand, rope_qk_into_one_output])
def test_rope_qk_by_hand_passes(fn):
    checks.check_rope_qk(fn)


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("sign", "the sign of sin is flipped"),
        ("interleaved", "this is the 'interleaved' pairing"),
        ("from 1", "the positions are off by one"),
        ("k unrotated", "k is returned as it was: rotate q and k both"),
        ("swapped", "the results are swapped: return (q_rot, k_rot)"),
        (
            "one tensor",
            "returned a tensor of shape (1, 4, 6, 8); return the pair (q_rot, k_rot)",
        ),
        ("in place", "changed q or k in place"),
        ("twice", "computes cos 2 times; compute cos and sin once"),
        ("unfused", "writes 4.07 times the bytes of q and k"),
        ("rotate_half", "writes 4.73 times the bytes of q and k"),
    ],
)
def test_rope_qk_mistakes_are_named(mistake, says):
    def wrong(q, k, positions=None):
        return rope_qk_by_hand(q, k, positions, mistake=mistake)

    fails_saying(checks.check_rope_qk, wrong, says)


def test_rope_qk_over_budget_names_the_operations_that_write_most():
    def unfused(q, k, positions=None):
        return rope_qk_by_hand(q, k, positions, mistake="unfused")

    with pytest.raises(AssertionError) as raised:
        checks.check_rope_qk(unfused)
    message = str(raised.value)
    assert "more than 3.5; the most: mul 2.02x, cat 1.00x" in message, message
    assert "addcmul(b, sin, value=-1)" in message


# ---------------------------------------------------------------------------
# chapter 10: ALiBi's score_mod and the causal block mask
# ---------------------------------------------------------------------------


def alibi_score_mod_by_hand(num_heads, *, mistake=None):
    first = {"h+1": 2, "h-1": 0}.get(mistake, 1)
    n = 8 if mistake == "eight heads" else num_heads
    slopes = torch.tensor([2 ** (-8 * (h + first) / n) for h in range(num_heads)])
    if mistake == "reversed":
        slopes = slopes.flip(0)

    def score_mod(score, b, h, q_idx, kv_idx):
        distance = q_idx - kv_idx
        if mistake == "bonus":
            return score + slopes[h] * distance
        if mistake == "bias alone":
            return -slopes[h] * distance
        if mistake == "python if":
            if q_idx >= kv_idx:
                return score - slopes[h] * distance
            return score
        return score - slopes[h] * distance

    return score_mod


def test_alibi_score_mod_by_hand_passes():
    checks.check_alibi_score_mod(alibi_score_mod_by_hand)
    # what happens beyond the mask is free: |i - j| or a clamp both pass

    def clamped(num_heads):
        slopes = torch.tensor(
            [2 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)]
        )
        return lambda s, b, h, i, j: s - slopes[h] * (i - j).clamp(min=0)

    checks.check_alibi_score_mod(clamped)


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("bonus", "a bonus instead of a penalty"),
        ("h+1", "head h uses the slope of head h + 1"),
        ("h-1", "head h uses the slope of head h - 1"),
        ("reversed", "the slopes are in reverse order"),
        ("eight heads", "the slopes are those of 8 heads whatever num_heads is"),
        ("bias alone", "returns the bias alone; return the score plus the bias"),
        ("python if", "no `if` on a tensor"),
    ],
)
def test_alibi_score_mod_mistakes_are_named(mistake, says):
    fails_saying(
        checks.check_alibi_score_mod,
        lambda n: alibi_score_mod_by_hand(n, mistake=mistake),
        says,
    )


def test_alibi_score_mod_must_return_a_function():
    fails_saying(
        checks.check_alibi_score_mod,
        lambda n: torch.zeros(n),
        "fn(8) returned a tensor of shape (8,); return the score_mod function itself",
    )


RULES = {
    None: lambda q, kv: kv <= q,
    "strict": lambda q, kv: kv < q,
    "no mask": lambda q, kv: kv >= 0,
    "reversed": lambda q, kv: kv >= q,
    "one off": lambda q, kv: kv <= q + 1,
}


def causal_block_mask_by_hand(seq_len, *, mistake=None):
    rule = RULES.get(mistake, RULES[None])

    def mask_mod(b, h, q_idx, kv_idx):
        return rule(q_idx, kv_idx)

    if mistake == "mask_mod":
        return mask_mod
    length = 128 if mistake == "fixed length" else seq_len
    return flex.create_block_mask(mask_mod, None, None, length, length, device="cpu")


def test_causal_block_mask_by_hand_passes():
    checks.check_causal_block_mask(causal_block_mask_by_hand)


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("strict", "the mask skips too much: a query must also see its own key"),
        ("no mask", "with no causal mask each query sees the keys after it"),
        ("reversed", "the mask is reversed: it keeps the keys after the query"),
        ("one off", "query 0 sees the keys 0..1, expected 0 (kv_idx <= q_idx)"),
        ("mask_mod", "returned a function (a mask_mod?), not a BlockMask"),
        ("fixed length", "is built for (q_len, kv_len) = (128, 128)"),
    ],
)
def test_causal_block_mask_mistakes_are_named(mistake, says):
    fails_saying(
        checks.check_causal_block_mask,
        lambda n: causal_block_mask_by_hand(n, mistake=mistake),
        says,
    )


# ---------------------------------------------------------------------------
# chapter 11: sliding windows and chunks
# ---------------------------------------------------------------------------


def local_mask_by_hand(length, size, *, rule):
    mask = torch.zeros(length, length, dtype=torch.bool)
    for i in range(length):
        for j in range(length):
            mask[i, j] = rule(i, j, size)
    return mask


SLIDING = {
    None: lambda i, j, w: i - w < j <= i,
    "w+1": lambda i, j, w: i - w <= j <= i,
    "w-1": lambda i, j, w: i - w + 1 < j <= i,
    "both sides": lambda i, j, w: abs(i - j) < w,
    "not itself": lambda i, j, w: i - w <= j < i,
    "transposed": lambda i, j, w: j - w < i <= j,
    "window ignored": lambda i, j, w: i - 6 < j <= i,
}


def test_sliding_window_by_hand_passes():
    checks.check_sliding_window_mask(
        lambda n, w: local_mask_by_hand(n, w, rule=SLIDING[None])
    )


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("w+1", "fn(8, 3): off by one: a query sees 4 keys, window + 1"),
        ("w-1", "fn(8, 3): off by one: a query sees 2 keys, window - 1"),
        ("both sides", "the window is not causal"),
        ("not itself", "a query does not see itself"),
        ("transposed", "the mask is transposed"),
        (
            "window ignored",
            "fn(8, 3) is wrong: query 3 sees the keys 0..3, expected 1..3 "
            "(i - window < j <= i)",
        ),
    ],
)
def test_sliding_window_mistakes_are_named(mistake, says):
    rule = SLIDING[mistake]
    fails_saying(
        checks.check_sliding_window_mask,
        lambda n, w: local_mask_by_hand(n, w, rule=rule),
        says,
    )


def test_a_mask_of_minus_infinity_is_told_to_be_boolean():
    def additive(length, window):
        i, j = torch.arange(length)[:, None], torch.arange(length)
        keep = (i - window < j) & (j <= i)
        return torch.zeros(length, length).masked_fill(~keep, -math.inf)

    fails_saying(
        checks.check_sliding_window_mask,
        additive,
        "returned a float mask of 0 and -inf, a bias; return booleans",
    )


CHUNKED = {
    None: lambda i, j, c: j <= i and i // c == j // c,
    "sliding": lambda i, j, c: i - c < j <= i,
    "not causal": lambda i, j, c: i // c == j // c,
    "edges +1": lambda i, j, c: j <= i and (i + 1) // c == (j + 1) // c,
    "edges -1": lambda i, j, c: j <= i and (i - 1) // c == (j - 1) // c,
    "chunk + 1": lambda i, j, c: j <= i and i // (c + 1) == j // (c + 1),
}


def test_chunked_by_hand_passes():
    checks.check_chunked_mask(lambda n, c: local_mask_by_hand(n, c, rule=CHUNKED[None]))


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("sliding", "this is a sliding window of chunk keys, not chunks"),
        ("not causal", "a query also sees the keys after it in its chunk"),
        (
            "edges +1",
            "fn(10, 4): the chunks' edges are off by one, so chunks cross them: "
            "with chunk = 4 the chunks are 0..3, 4..7, ...",
        ),
        (
            "edges -1",
            "fn(10, 4): the chunks' edges are off by one, so chunks cross them: "
            "with chunk = 4 the chunks are 0..3, 4..7, ...",
        ),
        (
            "chunk + 1",
            "fn(10, 4) is wrong: query 4 sees the keys 0..4, expected 4 "
            "(floor(i / chunk) == floor(j / chunk), j <= i)",
        ),
    ],
)
def test_chunked_mistakes_are_named(mistake, says):
    rule = CHUNKED[mistake]
    fails_saying(
        checks.check_chunked_mask,
        lambda n, c: local_mask_by_hand(n, c, rule=rule),
        says,
    )


# ---------------------------------------------------------------------------
# chapter 11: M-RoPE's position ids
# ---------------------------------------------------------------------------


def mrope_ids_by_hand(before, rows, columns, after, *, mistake=None):
    ids = [(n, n, n) for n in range(before)]
    start = 0 if mistake == "image at 0" else before
    if mistake == "by column":
        patches = [(r, c) for c in range(columns) for r in range(rows)]
    else:
        patches = [(r, c) for r in range(rows) for c in range(columns)]
    ids += [(start, start + r, start + c) for r, c in patches]
    resume = {
        "patches": before + rows * columns,
        "no +1": before + max(rows, columns) - 1,
        "one token": before + 1,
    }.get(mistake, before + max(rows, columns))
    ids += [(n, n, n) for n in range(resume, resume + after)]
    out = torch.tensor(ids).T
    if mistake == "hwt":
        out = out[[1, 2, 0]]
    if mistake == "twh":
        out = out[[0, 2, 1]]
    if mistake == "(T, 3)":
        out = out.T
    if mistake == "float":
        out = out.float()
    if mistake == "t of image":
        out[0, before : before + rows * columns] = torch.arange(rows * columns) + before
    return out


def test_mrope_ids_by_hand_pass():
    checks.check_mrope_position_ids(mrope_ids_by_hand)


@pytest.mark.parametrize(
    "mistake, says",
    [
        (
            "patches",
            "resumes at 15, n + rows * columns, as if every patch were a token",
        ),
        ("no +1", "resumes at 6, on the image's largest position"),
        ("one token", "resumes at 4, as if the image were one token"),
        ("image at 0", "the image's positions start at 0"),
        ("by column", "the patches are read column by column"),
        ("hwt", "the three rows are in the order (h, w, t); they are (t, h, w)"),
        ("twh", "the three rows are in the order (t, w, h)"),
        ("(T, 3)", "M-RoPE's ids are (3, T), one row per axis"),
        ("float", "positions are integers"),
        (
            "t of image",
            "fn(3, 3, 4, 2) is wrong from token 4: got (t, h, w) = (4, 3, 4), "
            "expected (3, 3, 4)",
        ),
    ],
)
def test_mrope_mistakes_are_named(mistake, says):
    fails_saying(
        checks.check_mrope_position_ids,
        lambda *args: mrope_ids_by_hand(*args, mistake=mistake),
        says,
    )


# ---------------------------------------------------------------------------
# chapter 11: YaRN's attention factor
# ---------------------------------------------------------------------------


def test_yarn_factor_by_hand_passes():
    checks.check_yarn_attention_factor(
        lambda s: 1.0 if s <= 1 else 0.1 * math.log(s) + 1
    )


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda s: 0.1 * math.log10(s) + 1, "the log is base 10"),
        (lambda s: 0.1 * math.log2(s) + 1, "the log is base 2"),
        (lambda s: 0.1 * math.log(s), "the + 1 is missing"),
        (lambda s: (0.1 * math.log(s) + 1) ** 2, "this is the factor's square"),
        (lambda s: 0.1 * math.log(s) + 1, "fn(0.5) = 0.930685: for s <= 1"),
        (
            lambda s: torch.tensor(0.1 * math.log(s) + 1),
            "returned a tensor of shape (); return a Python float",
        ),
        (lambda s: 0.2 * math.log(s) + 1, "fn(4) = 1.27726, expected 0.1 ln s + 1"),
    ],
    ids=["log10", "log2", "no +1", "squared", "s<=1", "tensor", "coefficient"],
)
def test_yarn_factor_mistakes_are_named(wrong, says):
    fails_saying(checks.check_yarn_attention_factor, wrong, says)


@pytest.mark.parametrize(
    "check, answer",
    [
        (checks.check_rope_qk, "pe_tutorial.encodings.fused_rope.apply_rope_qk"),
        (checks.check_sliding_window_mask, "pe_tutorial.sliding_window_mask"),
        (checks.check_mrope_position_ids, "pe_tutorial.mrope_position_ids"),
        (
            checks.check_yarn_attention_factor,
            "pe_tutorial.encodings.rope_scaling.yarn_attention_factor",
        ),
    ],
)
def test_the_packages_own_function_is_not_an_answer(check, answer):
    module, name = answer.rsplit(".", 1)
    fn = getattr(__import__(module, fromlist=[name]), name)
    fails_saying(check, fn, "this is pe_tutorial's implementation")
