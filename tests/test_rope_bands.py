"""RoPE's bands (rope_bands), explicit frequencies, and a learned table lengthened by copies."""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.encodings.absolute import LearnedPositionalEmbedding
from pe_tutorial.encodings.rope import RotaryEmbedding, apply_rope, rope_frequencies
from pe_tutorial.encodings.rope_bands import (
    BAND_ABLATIONS,
    band_frequencies,
    p_rope_frequencies,
    rope_wavelengths,
    slow_pairs,
)
from pe_tutorial.encodings.rope_scaling import RopeScaling
from pe_tutorial.lm.model import ByteTransformer, ModelConfig


def test_wavelengths_and_the_slow_band_by_hand():
    # D = 8, base 10000: theta_i = 10000 ** (-i / 4), wavelength 2 pi / theta_i
    expected = [2 * math.pi * 10000 ** (i / 4) for i in range(4)]
    assert rope_wavelengths(8).tolist() == pytest.approx(expected, rel=1e-5)
    # 6.28, 62.8, 628, 6283: at L = 64 the last two never turned fully
    assert slow_pairs(8, 64).tolist() == [False, False, True, True]


def test_each_ablation_changes_its_band_only():
    theta = 10000 ** (-torch.arange(4) / 4)
    hold_slow = band_frequencies(8, "hold-slow", train_length=64, length=512)
    assert torch.allclose(hold_slow, torch.cat([theta[:2], theta[2:] / 8]))
    hold_fast = band_frequencies(8, "hold-fast", train_length=64, length=512)
    assert torch.allclose(hold_fast, torch.cat([theta[:2] / 8, theta[2:]]))
    drop = band_frequencies(8, "drop-slow", train_length=64, length=64)
    assert torch.allclose(drop, torch.cat([theta[:2], torch.zeros(2)]))
    # at the training length the two hold modes change nothing
    for mode in ("hold-slow", "hold-fast"):
        same = band_frequencies(8, mode, train_length=64, length=64)
        assert torch.allclose(same, theta)


def test_held_slow_pairs_stay_inside_the_trained_arc():
    """Over a window of n, a held slow pair turns less than it did over L in training."""
    L, n = 64, 512
    theta = 10000 ** (-torch.arange(8) / 8)
    slow = slow_pairs(16, L)
    held = band_frequencies(16, "hold-slow", train_length=L, length=n)
    assert ((n - 1) * held[slow] < L * theta[slow]).all()


def test_unknown_ablation_is_named():
    with pytest.raises(ValueError, match="unknown band ablation 'hold-all'"):
        band_frequencies(8, "hold-all", train_length=64, length=128)
    assert BAND_ABLATIONS == ("hold-slow", "hold-fast", "drop-slow")


def test_explicit_frequencies_rotate_like_the_formula():
    x = torch.randn(2, 5, 8)
    positions = torch.arange(5)
    default = RotaryEmbedding(8)
    given = RotaryEmbedding(8, frequencies=10000 ** (-torch.arange(4) / 4))
    assert torch.allclose(given(x), default(x), atol=1e-6)
    slower = torch.tensor([1.0, 0.5, 0.0, 0.0])
    rotated = RotaryEmbedding(8, frequencies=slower)(x)
    # the pairs with frequency 0 are left as they are ("half" pairing: i, i + 4)
    assert torch.equal(rotated[..., [2, 3, 6, 7]], x[..., [2, 3, 6, 7]])
    # pair 0 turns by 1 radian per position, as apply_rope with theta_0 = 1 does
    assert torch.allclose(
        rotated[..., [0, 4]], apply_rope(x, positions)[..., [0, 4]], atol=1e-6
    )


def test_explicit_frequencies_are_checked():
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        RotaryEmbedding(8, frequencies=torch.ones(3))
    with pytest.raises(ValueError, match="not both"):
        RotaryEmbedding(
            8, frequencies=torch.ones(4), scaling=RopeScaling("linear", 2.0)
        )


def tiny(scheme: str) -> ByteTransformer:
    torch.manual_seed(0)
    return ByteTransformer(
        ModelConfig(
            scheme=scheme, d_model=16, num_heads=2, num_layers=2, max_positions=8
        )
    )


def test_set_rope_frequencies_reaches_every_layer_and_none_restores():
    model = tiny("rope")
    tokens = torch.randint(0, 256, (1, 8))
    before = model(tokens)
    model.set_rope_frequencies(torch.zeros(4))  # no rotation: NoPE in every layer
    encodings = {id(block.attention.scheme.encoding) for block in model.blocks}
    assert len(encodings) == 1
    assert not torch.allclose(model(tokens), before)
    model.set_rope_frequencies(None)
    assert torch.allclose(model(tokens), before, atol=1e-6)
    with pytest.raises(ValueError, match="needs a RoPE model"):
        tiny("alibi").set_rope_frequencies(None)


def test_a_learned_table_grows_by_copying_its_rows():
    table = LearnedPositionalEmbedding(4, 3)
    old = table.weight.detach().clone()
    table.extend(10)
    assert table.weight.shape == (10, 3) and table.max_positions == 10
    assert torch.equal(table.weight[7], old[3]) and torch.equal(table.weight[4], old[0])
    assert table.weight.requires_grad
    with pytest.raises(ValueError, match="has 10 rows already"):
        table.extend(8)


def test_a_learned_table_grows_by_random_rows_drawn_as_a_fresh_table_s():
    """The seed's way: the trained rows stay, the new ones are N(0, init_std^2)."""
    table = LearnedPositionalEmbedding(4, 2000, init_std=0.05)
    old = table.weight.detach().clone()
    table.extend(10, "random", torch.Generator().manual_seed(0))
    assert table.weight.shape == (10, 2000) and table.weight.requires_grad
    assert torch.equal(table.weight[:4], old)
    new = table.weight[4:].detach()
    # 12 000 draws: the std within 3% of init_std, and no new row a copy of an old one
    assert new.std().item() == pytest.approx(0.05, rel=0.03)
    assert abs(new.mean().item()) < 0.002
    assert not any(torch.equal(new[i], old[i % 4]) for i in range(6))
    again = LearnedPositionalEmbedding(4, 2000, init_std=0.05)
    again.weight.data.copy_(old)
    again.extend(10, "random", torch.Generator().manual_seed(0))
    assert torch.equal(again.weight, table.weight)  # the generator decides the rows
    with pytest.raises(
        ValueError, match=r"new_rows must be one of \('copy', 'random'\)"
    ):
        table.extend(12, "zeros")


@pytest.mark.parametrize("absolute", ["input", "every_layer"])
def test_a_learned_model_reads_longer_windows_once_extended(absolute):
    torch.manual_seed(0)
    model = ByteTransformer(
        ModelConfig(
            scheme="learned",
            d_model=16,
            num_heads=2,
            num_layers=2,
            max_positions=8,
            absolute=absolute,
        )
    )
    tokens = torch.randint(0, 256, (1, 8))
    before = model(tokens)
    with pytest.raises(ValueError, match="cannot encode 16 positions"):
        model(torch.randint(0, 256, (1, 16)))
    model.extend_learned_table(16)
    assert model.config.max_positions == 16
    assert torch.allclose(model(tokens), before, atol=1e-6)  # rows 0..7 unchanged
    assert model(torch.randint(0, 256, (1, 16))).shape == (1, 16, 256)
    with pytest.raises(ValueError, match="needs a learned-table model"):
        tiny("rope").extend_learned_table(16)


def paper_p_rope_angles(positions, head_dim, rope_percentage, max_wavelength=10000.0):
    """The p-RoPE listing of Barbero et al. (2025), transcribed loop by loop: the
    first int(p * head_dim // 2) pairs keep RoPE's timescales, the rest get an
    infinite timescale; the angle is position / timescale."""
    rope_angles = int(rope_percentage * head_dim // 2)
    timescales = [max_wavelength ** (2 * i / head_dim) for i in range(rope_angles)]
    timescales += [math.inf] * (head_dim // 2 - rope_angles)
    return torch.tensor(
        [[float(m) / s for s in timescales] for m in positions], dtype=torch.float64
    )


@pytest.mark.parametrize("head_dim, fraction", [(128, 0.75), (64, 0.25), (16, 1.0)])
def test_p_rope_matches_the_papers_listing(head_dim, fraction):
    positions = [0, 1, 7, 300, 4095]
    theta = p_rope_frequencies(head_dim, fraction).double()
    ours = torch.tensor(positions, dtype=torch.float64)[:, None] * theta
    reference = paper_p_rope_angles(positions, head_dim, fraction)
    assert torch.allclose(ours, reference, rtol=1e-6)
    kept = int(fraction * head_dim // 2)
    assert int((theta > 0).sum()) == kept
    assert torch.equal(theta[:kept], rope_frequencies(head_dim)[:kept].double())


def test_full_p_rope_is_rope_and_its_dropped_pairs_carry_no_position():
    assert torch.equal(p_rope_frequencies(32, 1.0), rope_frequencies(32))
    theta = p_rope_frequencies(32, 0.5)
    rotary = RotaryEmbedding(32, frequencies=theta)
    q, k = torch.randn(2, 32, generator=torch.Generator().manual_seed(0))
    dropped = torch.cat([torch.arange(8, 16), torch.arange(24, 32)])  # half pairing
    scores = []
    for m in (0, 5, 900):  # the same content at distance m
        qm = rotary(q[None].expand(m + 1, 32))[-1]
        k0 = rotary(k[None])[0]
        scores.append(float(qm[dropped] @ k0[dropped]))
    # the dropped channels' score is their plain dot product at every distance
    assert scores == pytest.approx([float(q[dropped] @ k[dropped])] * 3, abs=1e-5)


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan")])
def test_a_p_rope_fraction_outside_zero_one_is_named(fraction):
    with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\]"):
        p_rope_frequencies(64, fraction)


@pytest.mark.parametrize("fraction", ["0.5", True, None])
def test_a_p_rope_fraction_must_be_a_number(fraction):
    # a ValueError, as ModelConfig's rope_fraction: one check (_validation) for both
    with pytest.raises(ValueError, match="fraction must be a number in .*share"):
        p_rope_frequencies(64, fraction)


@pytest.mark.parametrize("fraction", [0, 1.5, float("nan"), True, "0.5"])
def test_p_rope_and_the_model_config_reject_the_same_fractions(fraction):
    """Issue 32: the function and ModelConfig's rope_fraction share one check."""
    from pe_tutorial.lm.model import ModelConfig

    with pytest.raises(ValueError) as in_function:
        p_rope_frequencies(64, fraction)
    with pytest.raises(ValueError) as in_config:
        ModelConfig(scheme="p-rope", rope_fraction=fraction)
    assert str(in_config.value) == str(in_function.value).replace(
        "fraction", "rope_fraction", 1
    )


@pytest.mark.parametrize(
    "fraction, turning",
    # 16 pairs: floor(fraction * 16), never rounded to nearest nor up
    [(0.3, 4), (0.33, 5), (0.5, 8), (0.1, 1), (0.75, 12), (0.99, 15), (0.05, 0)],
)
def test_p_rope_rounds_the_count_of_turning_pairs_down(fraction, turning):
    """Issue 32: p-RoPE's docstring keeps the first ``floor(fraction * head_dim / 2)``
    pairs turning. At head_dim 32, fractions that give no whole number of pairs
    (4.8, 5.28, 1.6, 15.84, 0.8) round *down*; the counts are worked out by hand.
    The turning pairs keep ``10000 ** (-2i / 32)``, the rest are exactly 0."""
    theta = p_rope_frequencies(32, fraction)
    expected = [10000 ** (-2 * i / 32) if i < turning else 0.0 for i in range(16)]
    assert theta.tolist() == pytest.approx(expected, rel=1e-6, abs=0.0)
    assert int((theta != 0).sum()) == turning


THETA8 = [
    10000 ** (-i / 4) for i in range(4)
]  # D = 8: wavelengths 6.28, 62.8, 628, 6283


@pytest.mark.parametrize(
    "train_length, length, mode, expected",
    [
        # L = 63: pairs 0, 1 fast (wavelength <= 63), pairs 2, 3 slow
        (63, 16, "hold-slow", THETA8),  # a window below L: nothing held
        (63, 16, "hold-fast", THETA8),
        (63, 62, "hold-slow", THETA8),  # one short of L: still nothing
        (63, 16, "drop-slow", THETA8[:2] + [0.0, 0.0]),  # dropped at any length
        (63, 252, "hold-slow", THETA8[:2] + [t / 4 for t in THETA8[2:]]),
        (63, 252, "hold-fast", [t / 4 for t in THETA8[:2]] + THETA8[2:]),
        (63, 252, "drop-slow", THETA8[:2] + [0.0, 0.0]),
        # L = 62: pair 1's wavelength, 62.83, is now above the line: slow
        (62, 31, "hold-slow", THETA8),
        (62, 31, "drop-slow", THETA8[:1] + [0.0] * 3),
        (62, 124, "hold-slow", THETA8[:1] + [t / 2 for t in THETA8[1:]]),
        (62, 124, "hold-fast", [THETA8[0] / 2] + THETA8[1:]),
    ],
)
def test_each_band_mode_below_and_above_the_lines_by_hand(
    train_length, length, mode, expected
):
    """Issue 32: what each ablation does to pairs on either side of the lines. A
    pair is slow when its wavelength ``2 pi / theta_i`` exceeds ``train_length``;
    the *hold* modes turn their band ``min(1, L / n)`` as fast, so a window ``n``
    shorter than ``L`` changes nothing (never speeds a pair up); ``drop-slow``
    zeroes the slow band at any window. Each row is worked out by hand."""
    theta = band_frequencies(8, mode, train_length=train_length, length=length)
    assert theta.tolist() == pytest.approx(expected, rel=1e-6, abs=0.0)
