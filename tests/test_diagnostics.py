"""Tests for pe_tutorial.encodings.diagnostics against naive loops and closed forms."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.encodings.diagnostics import (
    mean_token_cosine,
    norm_ratio,
    trailing_ones,
)


def test_norm_ratio_closed_form():
    positions = torch.tensor([[3.0, 4.0], [0.0, 1.0]])  # norms 5 and 1
    tokens = torch.tensor([[1.0, 0.0], [0.0, 3.0]])  # mean norm 2
    torch.testing.assert_close(norm_ratio(positions, tokens), torch.tensor([2.5, 0.5]))
    with pytest.raises(ValueError, match="must share dim"):
        norm_ratio(torch.zeros(2, 3), torch.zeros(2, 4))


def test_mean_token_cosine_matches_double_loop():
    tokens, position = torch.randn(6, 5), torch.randn(5)
    x = tokens + position
    pairs = [(a, b) for a in range(6) for b in range(6) if a != b]
    expected = sum(
        float(torch.cosine_similarity(x[a], x[b], dim=0)) for a, b in pairs
    ) / len(pairs)
    assert mean_token_cosine(tokens, position) == pytest.approx(expected, abs=1e-6)


def test_mean_token_cosine_approaches_one_as_position_grows():
    torch.manual_seed(0)
    tokens = 0.02 * torch.randn(200, 256)
    small, large = (
        mean_token_cosine(tokens, torch.zeros(256)),
        mean_token_cosine(tokens, torch.full((256,), 2.0)),
    )
    assert abs(small) < 0.05 and large > 0.999
    with pytest.raises(ValueError, match="vocab >= 2"):
        mean_token_cosine(torch.zeros(1, 4), torch.zeros(4))


def naive_trailing_ones(n: int) -> int:
    count = 0
    while n & 1:
        count, n = count + 1, n >> 1
    return count


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=20))
def test_trailing_ones_matches_loop(values):
    expected = [naive_trailing_ones(v) for v in values]
    assert trailing_ones(torch.tensor(values)).tolist() == expected


def test_trailing_ones_counts_flipped_bits():
    # counting p -> p + 1 flips trailing_ones(p) + 1 bits
    p = torch.arange(1000)
    flipped = [bin(a ^ (a + 1)).count("1") for a in range(1000)]
    assert (trailing_ones(p) + 1).tolist() == flipped
    with pytest.raises(ValueError, match="non-negative integers"):
        trailing_ones(torch.tensor([-1]))
    with pytest.raises(ValueError, match="non-negative integers"):
        trailing_ones(torch.tensor([1.0]))
