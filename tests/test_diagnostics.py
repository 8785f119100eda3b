"""Tests for pe_tutorial.encodings.diagnostics against naive loops and closed forms."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.encodings.absolute import sinusoidal_encoding
from pe_tutorial.encodings.diagnostics import (
    cosine_similarity_matrix,
    mean_token_cosine,
    nearest_rows,
    norm_ratio,
    similarity_by_distance,
    sinusoidal_distance,
    sinusoidal_float32_error,
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


def test_similarity_by_distance_is_the_mean_cosine_of_rows_d_apart():
    torch.manual_seed(0)
    table = torch.randn(12, 5)
    expected = []
    for d in range(12):
        pairs = [
            float(torch.cosine_similarity(table[p], table[p + d], dim=0))
            for p in range(12 - d)
        ]
        expected.append(sum(pairs) / len(pairs))
    measured = similarity_by_distance(table)
    torch.testing.assert_close(measured, torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(similarity_by_distance(table, 3), measured[:4])
    matrix = cosine_similarity_matrix(table)
    for p, q in ((0, 0), (2, 7), (11, 4)):
        cosine = float(torch.cosine_similarity(table[p], table[q], dim=0))
        assert matrix[p, q].item() == pytest.approx(cosine, abs=1e-6)


def test_similarity_by_distance_tells_a_smooth_table_from_noise():
    torch.manual_seed(0)
    smooth = sinusoidal_encoding(256, 64)
    noise = torch.randn(256, 64)
    assert similarity_by_distance(smooth, 32)[1] > 0.9
    assert similarity_by_distance(noise, 32)[1:].abs().max() < 0.1


def test_similarity_checks_its_arguments():
    with pytest.raises(ValueError, match="num_positions >= 2"):
        similarity_by_distance(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="at most 9"):
        similarity_by_distance(torch.randn(10, 4), 10)
    with pytest.raises(ValueError, match="max_distance must be a positive"):
        similarity_by_distance(torch.randn(10, 4), 0)
    with pytest.raises(ValueError, match="all zeros"):
        cosine_similarity_matrix(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


@pytest.mark.parametrize("chunk_size", [1, 3, 512])
def test_nearest_rows_matches_a_loop_over_every_pair(chunk_size):
    torch.manual_seed(1)
    table = torch.randn(17, 3)
    # plant a close pair that is not neighbouring
    table[13] = table[4] + 1e-3
    best = min(
        (float((table[p] - table[q]).double().norm()), p, q)
        for p in range(17)
        for q in range(p + 1, 17)
    )
    distance, p, q = nearest_rows(table, chunk_size=chunk_size)
    assert (p, q) == best[1:] == (4, 13)
    assert distance == pytest.approx(best[0], rel=1e-9)
    with pytest.raises(ValueError, match="chunk_size"):
        nearest_rows(table, chunk_size=0)


@pytest.mark.parametrize("dim", [8, 64])
def test_sinusoidal_distance_is_the_distance_between_codes_k_apart(dim):
    offsets = torch.tensor([0, 1, 2, 7, 100, 3000])
    omega = [10000.0 ** (-2 * i / dim) for i in range(dim // 2)]

    def code(p):
        return [f(p * w) for w in omega for f in (math.sin, math.cos)]

    for k, measured in zip(offsets.tolist(), sinusoidal_distance(offsets, dim)):
        for p in (0, 5, 40):
            a, b = code(p), code(p + k)
            expected = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
            assert measured.item() == pytest.approx(expected, abs=1e-9)


def test_sinusoidal_distance_gives_the_nearest_pair_of_a_table():
    table = sinusoidal_encoding(600, 16).double()
    distance, p, q = nearest_rows(table)
    offsets = torch.arange(1, 600)
    closest = sinusoidal_distance(offsets, 16)
    assert distance == pytest.approx(closest.min().item(), abs=1e-5)
    assert q - p == offsets[closest.argmin()].item()
    with pytest.raises(ValueError, match="must be even"):
        sinusoidal_distance(offsets, 7)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_distance(offsets, 8, base=-1.0)


def test_sinusoidal_float32_error_grows_with_the_position():
    dim = 32
    omega = [10000.0 ** (-2 * i / dim) for i in range(dim // 2)]
    positions = torch.tensor([0, 3, 10**4, 10**6])
    errors = sinusoidal_float32_error(positions, dim)
    # channel by channel: float32 frequencies, float32 product, then sin and cos
    for p, error in zip(positions.tolist(), errors):
        total = 0.0
        for w in omega:
            angle32 = torch.tensor(float(p)) * torch.tensor(w, dtype=torch.float32)
            exact = p * w
            total += (math.sin(angle32.item()) - math.sin(exact)) ** 2
            total += (math.cos(angle32.item()) - math.cos(exact)) ** 2
        assert error.item() == pytest.approx(math.sqrt(total), rel=1e-3, abs=1e-6)
    assert errors[0] == 0 and errors[1] < 1e-6 < errors[2] < errors[3]
