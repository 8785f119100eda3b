"""pe_tutorial.checks: the reference passes quietly, and each usual mistake, written
out the way a learner would write it, fails with its own diagnosis."""

from __future__ import annotations

import math
import re

import pytest
import torch

from pe_tutorial import checks
from pe_tutorial.alibi import alibi_slopes
from pe_tutorial.relative import t5_relative_position_bucket
from pe_tutorial.rope import apply_rope

# ---------------------------------------------------------------------------
# sinusoidal tables, written by hand (not by the variants the checks compare with)
# ---------------------------------------------------------------------------


def sinusoidal_loop(num_positions, dim, *, mistake=None):
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    for p in range(num_positions):
        for i in range(dim // 2):
            exponent = {"i/d": i / dim, "4i/d": 4 * i / dim}.get(mistake, 2 * i / dim)
            angle = p / 10000**exponent
            s, c = math.sin(angle), math.cos(angle)
            if mistake == "swap":
                s, c = c, s
            if mistake == "concatenate":
                table[p, i], table[p, dim // 2 + i] = s, c
            else:
                table[p, 2 * i], table[p, 2 * i + 1] = s, c
    return table.float()


def sinusoidal_half_precision(num_positions, dim):
    p = torch.arange(num_positions, dtype=torch.float16)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float16)
    angles = p * 10000 ** (-2 * i / dim)
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(-2)


def test_the_reference_passes_every_check():
    checks.check_sinusoidal(lambda n, d: sinusoidal_loop(n, d))
    checks.check_apply_rope(apply_rope)
    checks.check_alibi_slopes(alibi_slopes)
    checks.check_t5_bucket(t5_relative_position_bucket)


@pytest.mark.parametrize(
    "mistake, diagnosis",
    [
        ("concatenate", "all sines come first and then all cosines"),
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


def rope_by_hand(x, positions, *, pairing="half", mistake=None):
    d = x.shape[-1]
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
    if use_half:
        out = torch.cat((y_a, y_b), -1)
    else:
        out = torch.stack((y_a, y_b), -1).flatten(-2)
    return out.to(x.dtype)


def rope_in_bfloat16(x, positions, *, pairing="half"):
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
    ],
)
def test_rope_mistakes_are_named(mistake, diagnosis):
    def wrong(x, positions, *, pairing="half"):
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
