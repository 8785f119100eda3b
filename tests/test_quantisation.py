"""Tests for pe_tutorial.encodings.quantisation against rounding written out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.encodings.quantisation import (
    FP8_MAX,
    fake_quantise,
    quantised_rope_scores,
    score_error_profiles,
)
from pe_tutorial.encodings.rope import apply_rope


def int8_by_hand(values: list[float]) -> list[float]:
    scale = max(abs(v) for v in values) / 127
    # Python's round() rounds half to even, as torch.round does
    return [max(-127, min(127, round(v / scale))) * scale for v in values]


def e4m3_by_hand(value: float) -> float:
    """Nearest float8_e4m3fn: 3 mantissa bits; subnormals below 2**-6 step by 2**-9."""
    if value == 0:
        return 0.0
    exponent = max(math.floor(math.log2(abs(value))), -6)
    step = 2.0 ** (exponent - 3)
    return round(value / step) * step


def test_int8_is_symmetric_rounding_with_one_scale_per_tensor_or_row():
    torch.manual_seed(0)
    x = torch.randn(4, 9, dtype=torch.float64)
    whole = fake_quantise(x, "int8")
    expected = torch.tensor(int8_by_hand(x.flatten().tolist())).view(4, 9)
    torch.testing.assert_close(whole, expected.double())
    rows = fake_quantise(x, "int8", per_row=True)
    for row, out in zip(x, rows):
        torch.testing.assert_close(
            out, torch.tensor(int8_by_hand(row.tolist())).double()
        )
    # at most 255 distinct levels, the largest value kept exactly
    assert whole.abs().max() == x.abs().max()
    assert fake_quantise(torch.zeros(3), "int8").eq(0).all()
    # a fixed limit instead of the largest value
    fixed = fake_quantise(torch.tensor([0.5, -0.25]), "int8", limit=1.0)
    torch.testing.assert_close(fixed, torch.tensor([64 / 127, -32 / 127]))
    with pytest.raises(ValueError, match="limit"):
        fake_quantise(torch.tensor([1.5]), "int8", limit=1.0)


def test_fp8_rounds_to_three_mantissa_bits():
    torch.manual_seed(0)
    # float32 inputs, so the cast rounds once
    x = (torch.randn(500) * 4).to(torch.float64)
    x = torch.cat((x, torch.tensor([0.3, 1.0, -0.01, 0.001, 447.0])))
    expected = torch.tensor([e4m3_by_hand(v) for v in x.tolist()], dtype=torch.float64)
    torch.testing.assert_close(fake_quantise(x, "fp8"), expected, rtol=0, atol=0)
    assert fake_quantise(torch.tensor([0.3]), "fp8").item() == 0.3125
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        fake_quantise(torch.tensor([FP8_MAX * 1.1]), "fp8")


def test_fake_quantise_checks_its_arguments():
    with pytest.raises(ValueError, match="fmt must be one of"):
        fake_quantise(torch.ones(2), "int4")
    with pytest.raises(ValueError, match="floating-point"):
        fake_quantise(torch.ones(2, dtype=torch.int64), "int8")
    x = torch.tensor([1.0, 1 / 3])
    assert (
        fake_quantise(x, "bfloat16")[1].item() == torch.tensor(1 / 3).bfloat16().item()
    )


def test_exact_scores_are_rope_scores_and_depend_on_the_offset_only():
    torch.manual_seed(0)
    q, k = torch.randn(2, 40, 16, dtype=torch.float64)
    exact = quantised_rope_scores(q, k)
    # against the package's rotation (float32 angles, so a float32 tolerance)
    reference = apply_rope(q.float()) @ apply_rope(k.float()).T
    torch.testing.assert_close(exact, reference.double(), atol=1e-4, rtol=1e-4)
    # the same vector at every position: each diagonal n - m is constant
    same = quantised_rope_scores(q[:1].expand(40, 16), k[:1].expand(40, 16))
    for r in (-7, 0, 5):
        diagonal = same.diagonal(r)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))


def test_a_quantised_table_rotates_by_the_rounded_cos_and_sin():
    torch.manual_seed(0)
    q, k = torch.randn(2, 30, 8, dtype=torch.float64)
    scores = quantised_rope_scores(q, k, table="int8")
    theta = [10000.0 ** (-2 * i / 8) for i in range(4)]

    def rotate(x, m):
        out = x.clone()
        for i, t in enumerate(theta):
            c = round(math.cos(m * t) * 127) / 127  # the table's max is 1
            s = round(math.sin(m * t) * 127) / 127
            out[i] = x[i] * c - x[i + 4] * s
            out[i + 4] = x[i + 4] * c + x[i] * s
        return out

    for m, n in ((0, 0), (3, 17), (29, 2)):
        expected = rotate(q[m], m) @ rotate(k[n], n)
        assert scores[m, n].item() == pytest.approx(expected.item(), abs=1e-9)


def test_quantised_vectors_are_the_rotated_vectors_rounded_per_token():
    torch.manual_seed(0)
    q, k = torch.randn(2, 20, 8, dtype=torch.float64)
    exact_q = apply_rope(q.float()).double()
    exact_k = apply_rope(k.float()).double()
    expected = (
        fake_quantise(exact_q, "int8", per_row=True)
        @ fake_quantise(exact_k, "int8", per_row=True).T
    )
    scores = quantised_rope_scores(q, k, vectors="int8")
    torch.testing.assert_close(scores, expected, atol=2e-3, rtol=1e-3)
    with pytest.raises(ValueError, match="vectors must be None"):
        quantised_rope_scores(q, k, vectors="int4")
    with pytest.raises(ValueError, match="must be even"):
        quantised_rope_scores(q[:, :7], k[:, :7])
    with pytest.raises(ValueError, match="both be"):
        quantised_rope_scores(q, k[:5])


def test_error_profiles_average_the_causal_pairs_by_position_and_distance():
    torch.manual_seed(0)
    error = torch.randn(9, 9)
    by_position, by_distance = score_error_profiles(error)
    for m in range(9):
        values = [abs(error[m, n].item()) for n in range(m + 1)]
        assert by_position[m].item() == pytest.approx(sum(values) / len(values))
    for r in range(9):
        values = [abs(error[m, m - r].item()) for m in range(r, 9)]
        assert by_distance[r].item() == pytest.approx(sum(values) / len(values))
    with pytest.raises(ValueError, match="square"):
        score_error_profiles(torch.zeros(3, 4))
