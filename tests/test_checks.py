"""pe_tutorial.checks: the reference passes quietly, and each usual mistake, written
out the way a learner would write it, fails with its own diagnosis."""

from __future__ import annotations

import functools
import math
import re

import pytest
import torch

from pe_tutorial import checks
from pe_tutorial.encodings.alibi import alibi_slopes
from pe_tutorial.encodings.relative import t5_relative_position_bucket
from pe_tutorial.encodings.rope import apply_rope


def passes_or_says(check, fn, says):
    """``check(fn)`` passes quietly when ``says`` is None, else fails saying ``says``."""
    if says is None:
        check(fn)
        return
    with pytest.raises(AssertionError, match=re.escape(says)):
        check(fn)


# ---------------------------------------------------------------------------
# sinusoidal tables, written by hand (not by the variants the checks compare with)
# ---------------------------------------------------------------------------


def sinusoidal_loop(num_positions, dim, *, mistake=None):
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    for p in range(num_positions):
        for i in range(dim // 2):
            exponent = {
                "i/d": i / dim,
                "4i/d": 4 * i / dim,
                # tensor2tensor's and fairseq's spacing of the frequencies
                "tensor2tensor": i / (dim // 2 - 1),
            }.get(mistake, 2 * i / dim)
            angle = p / 10000**exponent
            s, c = math.sin(angle), math.cos(angle)
            if mistake == "swap":
                s, c = c, s
            if mistake in ("concatenate", "tensor2tensor"):
                table[p, i], table[p, dim // 2 + i] = s, c
            else:
                table[p, 2 * i], table[p, 2 * i + 1] = s, c
    return table.float()


def sinusoidal_half_precision(num_positions, dim):
    # the angles in float16, the table converted to float32 only at the end
    p = torch.arange(num_positions, dtype=torch.float16)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float16)
    angles = p * 10000 ** (-2 * i / dim)
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(-2).float()


def test_the_reference_passes_every_check():
    # written in this file, as a learner's would be (the package's own are refused)
    checks.check_sinusoidal(lambda n, d: sinusoidal_loop(n, d))
    checks.check_apply_rope(lambda *args, **kwargs: apply_rope(*args, **kwargs))
    checks.check_alibi_slopes(lambda n: alibi_slopes(n))
    checks.check_t5_bucket(lambda r, **kw: t5_relative_position_bucket(r, **kw))


@pytest.mark.parametrize(
    "mistake, diagnosis",
    [
        (
            "concatenate",
            "all sines come first and then all cosines: the concatenated layout, "
            "the same columns in another order",
        ),
        (
            "tensor2tensor",
            "this is tensor2tensor's and fairseq's table: all sines first, then all "
            "cosines, with omega_i = 10000 ** (-i / (dim/2 - 1))",
        ),
        ("swap", "sin and cos are swapped"),
        ("i/d", "yours look like 10000 ** (-i / dim)"),
        ("4i/d", "yours look like 10000 ** (-4i / dim)"),
    ],
)
def test_sinusoidal_mistakes_are_named(mistake, diagnosis):
    with pytest.raises(AssertionError, match=re.escape(diagnosis)):
        checks.check_sinusoidal(lambda n, d: sinusoidal_loop(n, d, mistake=mistake))


def test_sinusoidal_precision_loss_is_named():
    with pytest.raises(AssertionError, match="precision lost to a low-precision dtype"):
        checks.check_sinusoidal(sinusoidal_half_precision)


def test_sinusoidal_shape_and_crash_are_reported():
    with pytest.raises(AssertionError, match=r"fn\(8, 4\) returned shape \(4, 8\)"):
        checks.check_sinusoidal(lambda n, d: torch.zeros(d, n))
    with pytest.raises(AssertionError, match=r"fn\(8, 4\) raised ZeroDivisionError"):
        checks.check_sinusoidal(lambda n, d: 1 / 0)


# ---------------------------------------------------------------------------
# RoPE, written out as learners write it
# ---------------------------------------------------------------------------


def rope_by_hand(x, positions=None, *, pairing="half", mistake=None):
    d = x.shape[-1]
    if positions is None:
        positions = torch.arange(x.shape[-2])
    if mistake == "from 1":
        positions = positions + 1
    exponent = {"i/D": torch.arange(d // 2) / d}.get(
        mistake, 2 * torch.arange(d // 2) / d
    )
    theta = 10000.0**-exponent
    if mistake == "no positions":
        positions = torch.arange(x.shape[-2])
    angles = positions[..., None].float() * theta  # (..., T, D/2)
    cos, sin = angles.cos(), angles.sin()
    if mistake == "sign":
        sin = -sin
    xf = x.float()
    use_half = (pairing == "half") != (mistake == "pairing")
    if use_half:
        a, b = xf[..., : d // 2], xf[..., d // 2 :]
    else:
        a, b = xf[..., 0::2], xf[..., 1::2]
    if mistake == "mixed angles":
        # full-width tables built for the other layout, then used with this one
        if use_half:
            full = angles.repeat_interleave(2, -1)
            rotated = torch.cat((-b, a), -1)
        else:
            full = torch.cat((angles, angles), -1)
            rotated = torch.stack((-b, a), -1).flatten(-2)
        return (xf * full.cos() + rotated * full.sin()).to(x.dtype)
    y_a, y_b = a * cos - b * sin, a * sin + b * cos
    if mistake == "write back":
        use_half = not use_half
    if use_half:
        out = torch.cat((y_a, y_b), -1)
    else:
        out = torch.stack((y_a, y_b), -1).flatten(-2)
    return out.to(x.dtype)


def rope_in_bfloat16(x, positions=None, *, pairing="half"):
    if positions is None:
        positions = torch.arange(x.shape[-2])
    d = x.shape[-1]
    theta = (10000.0 ** (-2 * torch.arange(d // 2) / d)).to(x.dtype)
    angles = positions[..., None].to(x.dtype) * theta  # rounded to bfloat16
    a, b = x[..., : d // 2], x[..., d // 2 :]
    if pairing != "half":
        a, b = x[..., 0::2], x[..., 1::2]
    y_a, y_b = a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()
    if pairing == "half":
        return torch.cat((y_a, y_b), -1)
    return torch.stack((y_a, y_b), -1).flatten(-2)


def test_rope_by_hand_is_right_without_a_mistake():
    checks.check_apply_rope(rope_by_hand)


@pytest.mark.parametrize(
    "mistake, diagnosis",
    [
        (
            "pairing",
            "this is the 'interleaved' pairing; pairing='half' pairs channel i",
        ),
        ("sign", "the sign of sin is flipped"),
        ("no positions", "the positions were ignored"),
        ("i/D", r"yours look like base \*\* \(-i / D\)"),
        ("mixed angles", "the two channels of a pair are turned by different angles"),
        ("from 1", "the positions are off by one"),
        ("write back", "written back in the other layout: put y_a to channel i"),
    ],
)
def test_rope_mistakes_are_named(mistake, diagnosis):
    def wrong(x, positions=None, *, pairing="half"):
        return rope_by_hand(x, positions, pairing=pairing, mistake=mistake)

    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_apply_rope(wrong)


def test_rope_precision_loss_is_named():
    with pytest.raises(AssertionError, match="precision lost to a low-precision dtype"):
        checks.check_apply_rope(rope_in_bfloat16)


# ---------------------------------------------------------------------------
# ALiBi slopes
# ---------------------------------------------------------------------------


def slopes_powers_of_two_only(n):
    return torch.tensor([2 ** (-8 * (h + 1) / n) for h in range(n)])


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (slopes_powers_of_two_only, "right for powers of two, wrong for 3 heads"),
        (
            lambda n: torch.tensor([2 ** (-8 * h / n) for h in range(n)]),
            "shifted by one head",
        ),
        (lambda n: alibi_slopes(n).flip(0), "in reverse order"),
    ],
)
def test_alibi_mistakes_are_named(wrong, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_alibi_slopes(wrong)


# ---------------------------------------------------------------------------
# T5 buckets
# ---------------------------------------------------------------------------


def test_t5_reversed_relative_position_is_named():
    def reversed_direction(relative_position, **options):
        return t5_relative_position_bucket(-relative_position, **options)

    with pytest.raises(AssertionError, match="the relative position is reversed"):
        checks.check_t5_bucket(reversed_direction)


def test_t5_wrong_log_buckets_are_named():
    def rounded(relative_position, *, bidirectional, num_buckets, max_distance):
        # the exact buckets right, the log ones rounded instead of floored
        n = relative_position.clone()
        offset = torch.zeros_like(n)
        if bidirectional:
            num_buckets //= 2
            offset = (n > 0).long() * num_buckets
            n = n.abs()
        else:
            n = (-n).clamp(min=0)
        exact = num_buckets // 2
        log = (
            exact
            + (
                torch.log(n.float().clamp(min=1) / exact)
                / math.log(max_distance / exact)
                * (num_buckets - exact)
            )
            .round()
            .long()
        )
        log = log.clamp(max=num_buckets - 1)
        return offset + torch.where(n < exact, n, log)

    with pytest.raises(AssertionError, match="the logarithmic ones are not"):
        checks.check_t5_bucket(rounded)


# ---------------------------------------------------------------------------
# context extension (chapter 9), frequencies written out as a learner would
# ---------------------------------------------------------------------------


def frequency_loop(head_dim, base):
    return torch.tensor([base ** (-2 * i / head_dim) for i in range(head_dim // 2)])


def interpolation(head_dim, *, factor, base=10000.0):
    return frequency_loop(head_dim, base) / factor


def ntk(head_dim, *, factor, base=10000.0):
    return frequency_loop(head_dim, base * factor ** (head_dim / (head_dim - 2)))


def test_scaled_frequencies_reference_passes():
    checks.check_scaled_frequencies(interpolation, "linear")
    checks.check_scaled_frequencies(ntk, "ntk")


@pytest.mark.parametrize(
    "method, wrong, diagnosis",
    [
        ("linear", lambda d, *, factor, base=1e4: frequency_loop(d, base), "ignored"),
        (
            "linear",
            lambda d, *, factor, base=1e4: frequency_loop(d, base) * factor,
            "multiplied by the factor",
        ),
        ("linear", ntk, "these are NTK-aware frequencies"),
        ("ntk", interpolation, "these are position-interpolation frequencies"),
        (
            "ntk",
            lambda d, *, factor, base=1e4: frequency_loop(d, base * factor),
            "factor ** (D / (D - 2))",
        ),
        (
            "ntk",
            lambda d, *, factor, base=1e4: frequency_loop(d, base + factor),
            "the largest difference is at index",
        ),
    ],
)
def test_scaling_mistakes_are_named(method, wrong, diagnosis):
    with pytest.raises(AssertionError, match=re.escape(diagnosis)):
        checks.check_scaled_frequencies(wrong, method)


def test_scaled_frequencies_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="method must be one of"):
        checks.check_scaled_frequencies(ntk, "yarn")


# ---------------------------------------------------------------------------
# what comes back: not a tensor, the wrong dtype, the input changed
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda n, d: None, "returned None: does the function end with a `return`?"),
        (
            lambda n, d: sinusoidal_loop(n, d).numpy(),
            "returned a numpy.ndarray, not a torch.Tensor; build the result with "
            "torch operations, or convert it at the end with torch.from_numpy(a)",
        ),
        (lambda n, d: sinusoidal_loop(n, d).tolist(), "returned a list, not a torch"),
        (
            lambda n, d: sinusoidal_loop(n, d).double(),
            "fn(8, 4) returned torch.float64, expected torch.float32",
        ),
        (
            lambda n, d: sinusoidal_loop(n, d).bfloat16(),
            "returned torch.bfloat16, expected torch.float32",
        ),
    ],
)
def test_what_comes_back_is_checked_before_its_values(wrong, says):
    with pytest.raises(AssertionError, match=re.escape(says)):
        checks.check_sinusoidal(wrong)


def test_rope_that_writes_into_its_input_is_told_so():
    def in_place(x, positions=None, *, pairing="half"):
        x.copy_(rope_by_hand(x, positions, pairing=pairing))
        return x

    with pytest.raises(AssertionError, match="changed its input in place"):
        checks.check_apply_rope(in_place)


def test_rope_without_default_positions_fails_on_the_default_case():
    def no_default(x, positions=None, *, pairing="half"):
        return rope_by_hand(x, positions[...], pairing=pairing)

    with pytest.raises(
        AssertionError, match=re.escape("positions left out (0, 1, ..., 5)")
    ):
        checks.check_apply_rope(no_default)


# ---------------------------------------------------------------------------
# the shift matrix M_k (chapter 5), built entry by entry
# ---------------------------------------------------------------------------


def shift_by_hand(k, dim, *, mistake=None):
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        w = 10000.0 ** (-(i if mistake == "i/d" else 2 * i) / dim)
        angle = (1 if mistake == "no k" else k) * w
        c, s = math.cos(angle), math.sin(angle)
        if mistake == "transposed":
            s = -s
        a, b = (i, i + dim // 2) if mistake == "halves" else (2 * i, 2 * i + 1)
        m[a, a], m[a, b], m[b, a], m[b, b] = c, s, -s, c
    return m.float()


@pytest.mark.parametrize(
    "mistake, says",
    [
        (None, None),
        ("transposed", "this is M_-1, the transpose of M_1"),
        ("no k", "this is M_1 whatever k is"),
        ("halves", "the blocks act on channels (i, i + dim/2)"),
        ("i/d", "yours look like 10000 ** (-i / dim)"),
    ],
)
def test_shift_matrix_mistakes_are_named(mistake, says):
    def fn(k, dim):
        return shift_by_hand(k, dim, mistake=mistake)

    passes_or_says(checks.check_shift_matrix, fn, says)


# ---------------------------------------------------------------------------
# RoPE frequencies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, says",
    [
        (lambda d, base=10000.0: frequency_loop(d, base), None),
        (lambda d, base=10000.0: frequency_loop(d, 10000.0), "the base is ignored"),
        (
            lambda d, base=10000.0: frequency_loop(2 * d, base)[: d // 2],
            "yours look like base ** (-i / D)",
        ),
        (lambda d, base=10000.0: frequency_loop(d, base).flip(0), "reverse order"),
    ],
)
def test_rope_frequency_mistakes_are_named(fn, says):
    passes_or_says(checks.check_rope_frequencies, fn, says)


# ---------------------------------------------------------------------------
# the ALiBi bias, as a double loop
# ---------------------------------------------------------------------------


def alibi_bias_loop(num_heads, seq_len, *, mistake=None, slopes=alibi_slopes):
    m = slopes(num_heads).tolist()
    if mistake == "reversed slopes":
        m = m[::-1]
    bias = torch.zeros(num_heads, seq_len, seq_len)
    for h in range(num_heads):
        for i in range(seq_len):
            for j in range(seq_len):
                if mistake == "no clamp":
                    bias[h, i, j] = -m[h] * (i - j)
                elif mistake == "abs":
                    bias[h, i, j] = -m[h] * abs(i - j)
                elif j <= i:
                    bias[h, i, j] = -m[h] * (i - j)
                elif mistake == "-inf":
                    bias[h, i, j] = float("-inf")
    if mistake == "transposed":
        bias = bias.transpose(1, 2)
    return bias


@pytest.mark.parametrize(
    "fn, says",
    [
        (alibi_bias_loop, None),
        (lambda h, t: alibi_bias_loop(h, t, mistake="no clamp"), "clamp the distance"),
        (lambda h, t: alibi_bias_loop(h, t, mistake="abs"), "bidirectional variant"),
        (lambda h, t: alibi_bias_loop(h, t, mistake="-inf"), "not -inf"),
        (lambda h, t: alibi_bias_loop(h, t, mistake="transposed"), "is transposed"),
        (
            lambda h, t: alibi_bias_loop(h, t, mistake="reversed slopes"),
            "the slopes are in reverse order",
        ),
        (
            lambda h, t: alibi_bias_loop(h, t, slopes=slopes_powers_of_two_only),
            "fn(12, 9): the distances are right but the slopes are not",
        ),
    ],
)
def test_alibi_bias_mistakes_are_named(fn, says):
    passes_or_says(checks.check_alibi_bias, fn, says)


# ---------------------------------------------------------------------------
# T5: buckets that are not whole numbers, and the bias a table gives
# ---------------------------------------------------------------------------


def test_t5_fractional_buckets_are_named():
    def no_floor(relative_position, **options):
        return t5_relative_position_bucket(relative_position, **options).float() + 0.25

    with pytest.raises(AssertionError, match="fractional buckets such as .*floored"):
        checks.check_t5_bucket(no_floor)


def t5_bias_loop(table, seq_len, *, num_buckets=None, detach=False):
    num_buckets = table.shape[0] if num_buckets is None else num_buckets
    bucket = {
        d: int(t5_relative_position_bucket(torch.tensor(d), num_buckets=num_buckets))
        for d in range(1 - seq_len, seq_len)
    }
    rows = []
    for h in range(table.shape[1]):
        for i in range(seq_len):
            for j in range(seq_len):
                value = table[bucket[j - i], h]
                rows.append(value.item() if detach else value)
    bias = torch.tensor(rows) if detach else torch.stack(rows)
    return bias.view(table.shape[1], seq_len, seq_len)


@pytest.mark.parametrize(
    "fn, says",
    [
        (t5_bias_loop, None),
        (
            lambda table, t: t5_bias_loop(table, t, num_buckets=32),
            "The table has 16 rows, so there are 16 buckets: pass "
            "num_buckets=table.shape[0]",
        ),
        (
            lambda table, t: t5_bias_loop(table, t, detach=True),
            "no gradient reaches the table",
        ),
        (
            lambda table, t: t5_bias_loop(table, t).transpose(1, 2),
            "the relative position is reversed, or the query and key axes are swapped",
        ),
    ],
)
def test_t5_bias_mistakes_are_named(fn, says):
    passes_or_says(checks.check_t5_bias, fn, says)


@pytest.mark.parametrize(
    "method, wrong, says",
    [
        (
            "linear",
            lambda d, *, factor, base=1e4: frequency_loop(d, base * factor),
            "position interpolation keeps the base and divides every theta_i",
        ),
        (
            "ntk",
            lambda d, *, factor, base=1e4: frequency_loop(
                d, base * factor ** ((d - 2) / d)
            ),
            "the exponent is upside down",
        ),
        (
            "ntk",
            lambda d, *, factor, base=1e4: ntk(d, factor=factor, base=base) / factor,
            "divided by the factor as well",
        ),
    ],
)
def test_scaling_messages_speak_of_the_method_asked_for(method, wrong, says):
    with pytest.raises(AssertionError, match=re.escape(says)):
        checks.check_scaled_frequencies(wrong, method)


@pytest.mark.parametrize(
    "check, answer, name",
    [
        (checks.check_apply_rope, apply_rope, "pe_tutorial.encodings.rope.apply_rope"),
        (
            checks.check_alibi_slopes,
            alibi_slopes,
            "pe_tutorial.encodings.alibi.alibi_slopes",
        ),
        (
            checks.check_t5_bucket,
            functools.partial(t5_relative_position_bucket),
            "pe_tutorial.encodings.relative.t5_relative_position_bucket",
        ),
    ],
    ids=["rope", "alibi slopes", "partial of t5 bucket"],
)
def test_the_packages_own_function_is_not_an_answer(check, answer, name):
    with pytest.raises(
        AssertionError,
        match=re.escape(f"pe_tutorial's implementation ({name}), not yours"),
    ):
        check(answer)


@pytest.mark.parametrize(
    "given, says",
    [
        (torch.zeros(2, 3), "it got a tensor of shape (2, 3)"),
        (None, "it got None"),
        (torch.nn.Linear, "it got the class Linear"),
        ("apply_rope", "it got a str"),
    ],
    ids=["tensor", "None", "class", "str"],
)
def test_something_that_is_not_a_function_gets_one_line(given, says):
    with pytest.raises(AssertionError, match=re.escape(says)) as error:
        checks.check_apply_rope(given)
    assert "\n" not in str(error.value)
    assert "passed by name without calling it" in str(error.value)


def poisoned(answer, value=float("nan")):
    """``answer`` with one entry in the middle of its output replaced by ``value``."""

    def fn(*args, **kwargs):
        out = answer(*args, **kwargs).clone()
        out.view(-1)[out.numel() // 2] = value
        return out

    return fn


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize(
    "check, answer",
    [
        (checks.check_sinusoidal, lambda n, d: sinusoidal_loop(n, d)),
        (checks.check_shift_matrix, lambda k, d: shift_by_hand(k, d)),
        (
            checks.check_rope_frequencies,
            lambda d, base=10000.0: frequency_loop(d, base),
        ),
        (checks.check_apply_rope, lambda *a, **k: rope_by_hand(*a, **k)),
        (checks.check_alibi_slopes, lambda n: alibi_slopes(n)),
        (checks.check_alibi_bias, lambda n, t: alibi_bias_loop(n, t)),
        (checks.check_t5_bias, lambda table, t: t5_bias_loop(table, t)),
        (
            functools.partial(checks.check_scaled_frequencies, method="linear"),
            interpolation,
        ),
    ],
    ids=["sinusoidal", "shift", "frequencies", "rope", "slopes", "alibi", "t5", "pi"],
)
def test_nan_or_inf_in_an_answer_is_located(check, answer, value):
    with pytest.raises(AssertionError, match=rf"holds {value} at index \("):
        check(poisoned(answer, value))


def test_rope_right_for_half_only_fails_on_interleaved():
    def half_only(x, positions=None, *, pairing="half"):
        return rope_by_hand(x, positions, pairing="half")

    with pytest.raises(AssertionError, match="pairing='interleaved'.*'half' pairing"):
        checks.check_apply_rope(half_only)
