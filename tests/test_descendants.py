"""RoPE's other descendants, each by its defining property (chapter 11): xPos decays
per pair with the distance alone, FIRE reads a distance in [0, 1] at any length,
randomised positions are sorted distinct draws from a long range."""

from __future__ import annotations

import cmath
import math

import pytest
import torch

from pe_tutorial.encodings.fire import FIREBias
from pe_tutorial.encodings.random_positions import random_positions
from pe_tutorial.encodings.rope import apply_rope
from pe_tutorial.encodings.xpos import apply_xpos, xpos_decay


def test_xpos_decay_by_hand():
    zeta = xpos_decay(8)  # (2i + 3.2) / 11.2
    assert zeta.tolist() == pytest.approx(
        [3.2 / 11.2, 5.2 / 11.2, 7.2 / 11.2, 9.2 / 11.2]
    )


def test_xpos_scores_are_ropes_times_zeta_to_the_distance_per_pair():
    torch.manual_seed(0)
    head_dim, gamma = 16, 512.0
    q, k = torch.randn(2, 1, head_dim, dtype=torch.float64)
    zeta = xpos_decay(head_dim).double()
    for m, n in ((40, 3), (700, 100), (5, 5)):
        qx, kx = apply_xpos(
            q, k, torch.tensor([m]), torch.tensor([n]), scale_base=gamma
        )
        qr, kr = apply_rope(q, torch.tensor([m])), apply_rope(k, torch.tensor([n]))
        pair = (qr * kr)[0].view(2, -1).sum(0)  # RoPE's score, pair by pair (half)
        expected = (zeta ** ((m - n) / gamma) * pair).sum()
        assert float((qx @ kx.T).squeeze()) == pytest.approx(float(expected), rel=1e-5)


def test_xpos_is_relative_and_stays_finite_far_out():
    torch.manual_seed(1)
    q, k = torch.randn(2, 6, 32)
    positions = torch.arange(6)
    near = apply_xpos(q, k, positions, positions)
    far = apply_xpos(q, k, positions + 100_000, positions + 100_000)
    scores = [a @ b.T for a, b in (near, far)]
    assert all(torch.isfinite(s).all() for s in scores)
    # the same scores, up to RoPE's float32 angles at 100 000 (spacing ~0.008 rad)
    assert torch.allclose(scores[0], scores[1], atol=2e-2)


def test_xpos_bad_input_is_named():
    with pytest.raises(ValueError, match="head_dim must be even"):
        xpos_decay(7)
    with pytest.raises(ValueError, match="scale_base"):
        apply_xpos(torch.randn(2, 8), torch.randn(2, 8), scale_base=0)


def test_fire_reads_a_distance_in_zero_one_at_any_length():
    fire = FIREBias(2, threshold=16.0)
    for length in (8, 64, 1000):
        x = fire.normalised_distance(length).detach()
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        assert float(x[causal].min()) == 0.0 and float(x[causal].max()) <= 1.0 + 1e-6
    # the last query of a long sequence reaches 1 at its first key
    assert float(fire.normalised_distance(1000)[-1, 0].detach()) == pytest.approx(1.0)


def test_fire_bias_by_hand():
    torch.manual_seed(2)
    fire = FIREBias(3, hidden=4, threshold=4.0)
    bias = fire(10)
    c = torch.nn.functional.softplus(fire.raw_c).item()
    for i, j in ((9, 2), (3, 1), (7, 7)):
        x = math.log(c * (i - j) + 1) / math.log(c * max(4.0, i) + 1)
        expected = fire.mlp(torch.tensor([[x]], dtype=torch.float32))[0]
        assert torch.allclose(bias[:, i, j], expected, atol=1e-5)
    assert torch.all(bias[:, 2, 5] == 0)  # a future key: left to the mask


def test_fire_bad_sizes_are_named():
    with pytest.raises(ValueError, match="num_heads"):
        FIREBias(0)
    with pytest.raises(ValueError, match="threshold"):
        FIREBias(2, threshold=0.0)


def test_random_positions_are_sorted_distinct_and_in_range():
    generator = torch.Generator().manual_seed(0)
    drawn = random_positions(64, 4096, batch=32, generator=generator)
    assert drawn.shape == (32, 64)
    assert torch.all(drawn[:, 1:] > drawn[:, :-1])  # increasing, so distinct
    assert int(drawn.min()) >= 0 and int(drawn.max()) < 4096
    # training meets positions far past the sequence length
    assert int(drawn.max()) > 3000
    assert random_positions(5, 5).tolist() == [0, 1, 2, 3, 4]


def test_random_positions_bad_input_is_named():
    with pytest.raises(ValueError, match="at least the sequence length"):
        random_positions(10, 5)
    with pytest.raises(ValueError, match="seq_len"):
        random_positions(0, 5)


def test_xpos_scores_of_many_keys_at_a_non_default_base_by_the_papers_formula():
    """Issue 32: xPos's score of query m and key n, over several keys at several
    positions and non-default bases, is the paper's per-pair sum written out here:
    ``sum_i zeta_i ** (m / gamma) * zeta_i ** (-n / gamma) * Re(z_q z_k^* e^{i (m - n)
    theta_i})`` with ``zeta_i = (2i + 0.4 D) / (1.4 D)`` and ``theta_i = base **
    (-2i / D)``, half pairing. Pins the sign of the key's exponent, the key's use of
    ``scale_base`` (gamma), and the rotation's ``base`` (a single key at the default
    base pins none of them)."""
    torch.manual_seed(3)
    D, gamma, base = 8, 16.0, 100.0
    q_positions = torch.tensor([2, 9, 30])
    k_positions = torch.tensor([0, 5, 9, 21, 37])  # keys past the queries too
    q = torch.randn(len(q_positions), D, dtype=torch.float64)
    k = torch.randn(len(k_positions), D, dtype=torch.float64)
    qx, kx = apply_xpos(q, k, q_positions, k_positions, scale_base=gamma, base=base)
    ours = qx @ kx.T
    expected = torch.zeros(len(q_positions), len(k_positions), dtype=torch.float64)
    undecayed = torch.zeros_like(expected)
    for a, m in enumerate(q_positions.tolist()):
        for b, n in enumerate(k_positions.tolist()):
            for i in range(D // 2):
                zeta = (2 * i + 0.4 * D) / (1.4 * D)
                theta = base ** (-2 * i / D)
                # pair i is channels (i, i + D/2); as complex numbers z = x_i + i x_{i+D/2}
                zq = complex(q[a, i], q[a, i + D // 2])
                zk = complex(k[b, i], k[b, i + D // 2])
                rope_term = (zq * zk.conjugate() * cmath.exp(1j * (m - n) * theta)).real
                expected[a, b] += zeta ** (m / gamma) * zeta ** (-n / gamma) * rope_term
                undecayed[a, b] += rope_term
    # RoPE's angles are float32: about 1e-6 relative at these positions
    assert torch.allclose(ours, expected, rtol=1e-5, atol=1e-5)
    # the decay is far from 1 here (zeta_0 ** (-35 / 16) ~ 15): the check has teeth
    assert float((expected - undecayed).abs().max()) > 1.0
