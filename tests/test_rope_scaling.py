"""RoPE context extension against Hugging Face's values, the papers' closed forms and plain RoPE."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.attention.schemes import RotaryScheme
from pe_tutorial.encodings.rope import RotaryEmbedding, rope_frequencies
from pe_tutorial.encodings.rope_scaling import (
    SCALING_METHODS,
    LongRopeScaling,
    RopeScaling,
    longrope_attention_factor,
    longrope_frequencies,
    scaled_rope_frequencies,
)

FAST = settings(max_examples=30, deadline=None)
HF = json.loads(
    (Path(__file__).parent / "fixtures" / "hf_rope_scaling.json").read_text()
)


@pytest.mark.parametrize(
    "case", HF["cases"], ids=lambda c: f"{c['rope_type']}-{c['head_dim']}"
)
def test_matches_transformers(case):
    """The values transformers' ROPE_INIT_FUNCTIONS gave (fixture written by make_hf_rope_scaling.py)."""
    parameters = dict(case["parameters"])
    factor = parameters.pop("factor")
    original = parameters.pop(
        "original_max_position_embeddings", case["max_position_embeddings"]
    )
    inv_freq, scale = scaled_rope_frequencies(
        case["head_dim"],
        case["rope_type"],
        factor=factor,
        base=case["base"],
        original_max_positions=original,
        seq_len=case["seq_len"],
        **parameters,
    )
    expected = torch.tensor(case["inv_freq"], dtype=torch.float64)
    torch.testing.assert_close(inv_freq.double(), expected, rtol=1e-6, atol=0)
    assert scale == pytest.approx(case["attention_factor"], rel=1e-12)


def plain(head_dim, base):
    return rope_frequencies(head_dim, base=base).double()


@FAST
@given(
    half=st.integers(2, 64),
    base=st.sampled_from([100.0, 10000.0, 500000.0]),
    method=st.sampled_from(SCALING_METHODS),
    original=st.integers(8, 8192),
)
def test_factor_one_is_plain_rope(half, base, method, original):
    inv_freq, scale = scaled_rope_frequencies(
        2 * half, method, factor=1.0, base=base, original_max_positions=original
    )
    torch.testing.assert_close(
        inv_freq.double(), plain(2 * half, base), rtol=1e-6, atol=0
    )
    assert scale == 1.0


@FAST
@given(
    half=st.integers(2, 64),
    factor=st.floats(1.0, 64.0),
    original=st.integers(8, 4096),
    fraction=st.floats(0.01, 1.0),
)
def test_dynamic_is_plain_up_to_the_original_length(half, factor, original, fraction):
    seq_len = max(1, int(fraction * original))
    inv_freq, _ = scaled_rope_frequencies(
        2 * half,
        "dynamic",
        factor=factor,
        original_max_positions=original,
        seq_len=seq_len,
    )
    torch.testing.assert_close(
        inv_freq.double(), plain(2 * half, 10000.0), rtol=1e-6, atol=0
    )


def test_dynamic_grows_the_base_past_the_original_length():
    # base' = base (s n / L - (s - 1))^(D / (D - 2)); the slowest pair turns
    # base'^(-(D - 2) / D) = base^(-(D - 2)/D) / (s n / L - s + 1)
    D, L, s, n = 32, 100, 2.0, 300
    inv_freq, _ = scaled_rope_frequencies(
        D, "dynamic", factor=s, original_max_positions=L, seq_len=n
    )
    slowest = 10000.0 ** (-(D - 2) / D) / (s * n / L - s + 1)
    assert inv_freq[-1].item() == pytest.approx(slowest, rel=1e-5)
    assert inv_freq[0].item() == pytest.approx(1.0)


@FAST
@given(half=st.integers(2, 64), factor=st.floats(1.0, 100.0))
def test_ntk_keeps_the_fastest_pair_and_divides_the_slowest(half, factor):
    # base * s^(D/(D-2)): theta_0 = 1 always; theta_{D/2-1} = base^(-(D-2)/D) / s
    D = 2 * half
    inv_freq, _ = scaled_rope_frequencies(D, "ntk", factor=factor)
    assert inv_freq[0].item() == pytest.approx(1.0)
    expected = 10000.0 ** (-(D - 2) / D) / factor
    assert inv_freq[-1].item() == pytest.approx(expected, rel=1e-4)


@FAST
@given(half=st.integers(1, 64), factor=st.floats(1.0, 100.0))
def test_linear_divides_every_frequency(half, factor):
    inv_freq, _ = scaled_rope_frequencies(2 * half, "linear", factor=factor)
    torch.testing.assert_close(
        inv_freq.double(), plain(2 * half, 10000.0) / factor, rtol=1e-6, atol=0
    )


def test_yarn_by_rotation_counts():
    """YaRN (Peng et al. 2023, eq. 18-20): pairs turning > beta_fast times within L keep
    theta, pairs turning < beta_slow times get theta / s, and the scale is 0.1 ln s + 1."""
    D, L, s, base = 64, 4096, 8.0, 10000.0
    inv_freq, scale = scaled_rope_frequencies(
        D, "yarn", factor=s, original_max_positions=L
    )
    assert scale == pytest.approx(0.1 * math.log(s) + 1)
    theta = plain(D, base)
    checked = 0
    for i in range(D // 2):
        rotations = L * theta[i].item() / (2 * math.pi)
        if rotations > 32 * 1.5:  # well inside the extrapolated band
            assert inv_freq[i].item() == pytest.approx(theta[i].item(), rel=1e-6)
            checked += 1
        elif rotations < 1 / 1.5:  # well inside the interpolated band
            assert inv_freq[i].item() == pytest.approx(theta[i].item() / s, rel=1e-6)
            checked += 1
        else:
            lo, hi = theta[i].item() / s, theta[i].item()
            assert lo * (1 - 1e-6) <= inv_freq[i].item() <= hi * (1 + 1e-6)
    assert checked >= D // 4


def test_llama3_by_wavelength():
    """Llama 3.1: wavelengths below L/high keep theta, above L/low get theta / s."""
    D, L, s, base = 128, 8192, 8.0, 500000.0
    inv_freq, scale = scaled_rope_frequencies(
        D, "llama3", factor=s, base=base, original_max_positions=L
    )
    assert scale == 1.0
    theta = plain(D, base)
    for i in range(D // 2):
        wavelength = 2 * math.pi / theta[i].item()
        if wavelength < L / 4:
            assert inv_freq[i].item() == pytest.approx(theta[i].item(), rel=1e-6)
        elif wavelength > L / 1:
            assert inv_freq[i].item() == pytest.approx(theta[i].item() / s, rel=1e-6)
        else:
            # smooth = (L / wavelength - 1) / 3 blends theta / s and theta
            smooth = (L / wavelength - 1) / 3
            blend = (1 - smooth) * theta[i].item() / s + smooth * theta[i].item()
            assert inv_freq[i].item() == pytest.approx(blend, rel=1e-5)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(
        ValueError, match="choose one of .*linear.*ntk.*dynamic.*yarn.*llama3"
    ):
        scaled_rope_frequencies(16, "longrope", factor=2.0)


def test_factor_below_one_is_rejected():
    with pytest.raises(ValueError, match="factor=0.5 is below 1"):
        scaled_rope_frequencies(16, "linear", factor=0.5)
    with pytest.raises(ValueError, match="factor=0.5 is below 1"):
        RopeScaling("linear", factor=0.5)


@pytest.mark.parametrize("method", ["dynamic", "yarn", "llama3"])
def test_methods_that_need_the_trained_length_say_so(method):
    with pytest.raises(ValueError, match="needs original_max_positions"):
        scaled_rope_frequencies(16, method, factor=2.0)


def test_rotary_embedding_rejects_a_dict_as_scaling():
    with pytest.raises(ValueError, match="scaling must be a RopeScaling"):
        RotaryEmbedding(16, scaling={"method": "linear", "factor": 2.0})


# ---------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------


@FAST
@given(
    factor=st.integers(1, 8),
    positions=st.lists(st.integers(0, 500), min_size=1, max_size=20),
)
def test_interpolated_positions_equal_scaled_positions(factor, positions):
    """Position interpolation at factor s rotates position s p exactly as plain RoPE rotates p."""
    torch.manual_seed(0)
    x = torch.randn(len(positions), 16)
    p = torch.tensor(positions)
    scaled = RotaryEmbedding(16, scaling=RopeScaling("linear", factor=float(factor)))
    plain_rope = RotaryEmbedding(16)
    torch.testing.assert_close(
        scaled(x, p * factor), plain_rope(x, p), rtol=1e-4, atol=1e-4
    )


def test_attention_scale_multiplies_the_logits_squared():
    torch.manual_seed(0)
    q, k = torch.randn(6, 32), torch.randn(6, 32)
    yarn = RopeScaling("yarn", factor=4.0, original_max_positions=16)
    inv_freq, scale = yarn.frequencies(32, base=10000.0)
    module = RotaryEmbedding(32, scaling=yarn)
    positions = torch.arange(6)
    # rotate by hand with the scaled frequencies, then compare the logits
    angles = positions[:, None].float() * inv_freq

    def rotate(x):
        x1, x2 = x[:, :16], x[:, 16:]
        c, s = angles.cos(), angles.sin()
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)

    logits = module(q, positions) @ module(k, positions).T
    expected = scale**2 * (rotate(q) @ rotate(k).T)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)


def test_dynamic_module_follows_the_sequence_length():
    dynamic = RopeScaling("dynamic", factor=2.0, original_max_positions=8)
    module = RotaryEmbedding(16, scaling=dynamic)
    plain_module = RotaryEmbedding(16)
    torch.manual_seed(0)
    short, long_ = torch.randn(8, 16), torch.randn(20, 16)
    # at or below the trained length: plain RoPE
    torch.testing.assert_close(module(short), plain_module(short))
    # past it: the frequencies of seq_len = 20
    inv_freq, _ = scaled_rope_frequencies(
        16, "dynamic", factor=2.0, original_max_positions=8, seq_len=20
    )
    angles = torch.arange(20)[:, None].float() * inv_freq
    x1, x2 = long_[:, :8], long_[:, 8:]
    c, s = angles.cos(), angles.sin()
    expected = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    torch.testing.assert_close(module(long_), expected, rtol=1e-5, atol=1e-5)


def test_scaled_module_survives_a_cast_and_reports_its_scaling():
    module = RotaryEmbedding(16, scaling=RopeScaling("linear", factor=2.0)).half()
    assert module.inv_freq.dtype == torch.float32
    torch.testing.assert_close(module.inv_freq, rope_frequencies(16) / 2)
    assert "linear" in repr(module)


def test_rotary_scheme_uses_the_scaling():
    scaling = RopeScaling("linear", factor=2.0)
    scheme = RotaryScheme(RotaryEmbedding(16, scaling=scaling))
    torch.manual_seed(0)
    q = torch.randn(1, 2, 4, 16)
    rotated_q, _ = scheme.rotate(q, q)
    # at factor 2, position 2 is rotated like plain position 1
    expected = RotaryEmbedding(16)(q[:, :, 2:3], torch.tensor([1]))
    torch.testing.assert_close(rotated_q[:, :, 2:3], expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# LongRoPE (Phi-3): per-pair factors, a short and a long list
# ---------------------------------------------------------------------------


def phi3_config(head_dim, short, long_, *, original, max_positions, base, **extra):
    """A Phi-3 config with LongRoPE (skips the test when transformers is absent)."""
    transformers = pytest.importorskip("transformers")
    rope = {"rope_type": "longrope", "rope_theta": base}
    rope.update(short_factor=list(short), long_factor=list(long_), **extra)
    return transformers.Phi3Config(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        original_max_position_embeddings=original,
        rope_parameters=rope,
    )


def factor_lists(pairs, seed):
    # short lists near 1 (Phi-3's are 1.0 .. 1.2), long ones growing to ~40
    g = torch.Generator().manual_seed(seed)
    short = (1 + 0.2 * torch.rand(pairs, generator=g)).tolist()
    long_ = torch.linspace(1, 40, pairs) * (1 + 0.1 * torch.rand(pairs, generator=g))
    return short, long_.tolist()


LONGROPE_CASES = [
    # head_dim, L, max positions (s = max / L), base, explicit attention_factor
    (16, 64, 256, 10000.0, None),
    (32, 4096, 131072, 10000.0, None),  # Phi-3-mini-128k's L and s = 32
    (64, 100, 100, 500000.0, None),  # s = 1: attention factor 1
    (128, 8192, 65536, 10000.0, 1.5),
]


@pytest.mark.parametrize(
    "head_dim, original, max_positions, base, attention", LONGROPE_CASES
)
def test_longrope_equals_transformers(
    head_dim, original, max_positions, base, attention
):
    """Frequencies and attention factor = transformers' ROPE_INIT_FUNCTIONS["longrope"],
    short list at and below L, long list past it."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    short, long_ = factor_lists(head_dim // 2, seed=head_dim)
    extra = {} if attention is None else {"attention_factor": attention}
    config = phi3_config(
        head_dim,
        short,
        long_,
        original=original,
        max_positions=max_positions,
        base=base,
        **extra,
    )
    for seq_len in (None, 1, original, original + 1, 4 * original):
        want, want_scale = ROPE_INIT_FUNCTIONS["longrope"](
            config, "cpu", seq_len=seq_len
        )
        ours, scale = longrope_frequencies(
            head_dim,
            short_factor=short,
            long_factor=long_,
            original_max_positions=original,
            factor=max_positions / original,
            base=base,
            seq_len=seq_len,
            attention_factor=attention,
        )
        torch.testing.assert_close(ours, want, rtol=1e-6, atol=0)
        assert scale == pytest.approx(want_scale, rel=1e-12)


def test_longrope_module_switch_equals_phi3_rotary_embedding():
    """Phi-3's rotary embedding picks the list from max(position) + 1 of each call:
    our cos and sin (angles of the chosen list, times the factor) equal its own."""
    hf = pytest.importorskip("transformers.models.phi3.modeling_phi3")
    head_dim, L = 32, 16
    short, long_ = factor_lists(head_dim // 2, seed=3)
    config = phi3_config(
        head_dim, short, long_, original=L, max_positions=8 * L, base=10000.0
    )
    rotary = hf.Phi3RotaryEmbedding(config)
    scaling = LongRopeScaling(short, long_, original_max_positions=L, factor=8.0)
    x = torch.zeros(1, 1, head_dim)
    for length in (5, L, L + 1, 3 * L, L):  # back to short after a long call
        positions = torch.arange(length)
        cos, sin = rotary(x, positions[None])
        inv_freq, scale = scaling.frequencies(head_dim, base=10000.0, seq_len=length)
        angles = positions[:, None].float() * inv_freq
        ours_cos = torch.cat([angles.cos(), angles.cos()], -1) * scale
        ours_sin = torch.cat([angles.sin(), angles.sin()], -1) * scale
        torch.testing.assert_close(ours_cos, cos[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours_sin, sin[0], rtol=1e-5, atol=1e-6)
        assert scaling.uses_long_factors(length) == (length > L)


def test_a_rotary_embedding_with_longrope_equals_phi3_rotary_embedding():
    """RotaryEmbedding(scaling=LongRopeScaling(...)) rotates as Phi-3 does: the short
    list (cached) for calls up to L, the long one past it, the attention factor on
    both; a short call after a long one reads the short list again."""
    hf = pytest.importorskip("transformers.models.phi3.modeling_phi3")
    head_dim, L = 16, 12
    short, long_ = factor_lists(head_dim // 2, seed=7)
    config = phi3_config(
        head_dim, short, long_, original=L, max_positions=4 * L, base=10000.0
    )
    theirs = hf.Phi3RotaryEmbedding(config)
    ours = RotaryEmbedding(
        head_dim,
        max_positions=L,
        scaling=LongRopeScaling(short, long_, original_max_positions=L, factor=4.0),
    )
    g = torch.Generator().manual_seed(0)
    for length in (L, 3 * L, 5, L + 1):
        q = torch.randn(1, 2, length, head_dim, generator=g)
        positions = torch.arange(length)
        cos, sin = theirs(q, positions[None])
        want, _ = hf.apply_rotary_pos_emb(q, q, cos, sin)
        torch.testing.assert_close(ours(q, positions), want, rtol=1e-5, atol=1e-5)


def test_longrope_by_its_formula():
    """theta_i / lambda_i with theta_i = base^(-2i/D), and sqrt(1 + ln s / ln L)."""
    D, L, s, base = 8, 512, 16.0, 10000.0
    short, long_ = [1.0, 1.5, 2.0, 3.0], [1.0, 4.0, 9.0, 16.0]
    for seq_len, lambdas in ((L, short), (L + 1, long_)):
        inv_freq, scale = longrope_frequencies(
            D,
            short_factor=short,
            long_factor=long_,
            original_max_positions=L,
            factor=s,
            base=base,
            seq_len=seq_len,
        )
        expected = [base ** (-2 * i / D) / lam for i, lam in enumerate(lambdas)]
        assert inv_freq.tolist() == pytest.approx(expected, rel=1e-6)
        assert scale == pytest.approx(math.sqrt(1 + math.log(s) / math.log(L)))
    assert longrope_attention_factor(1.0, L) == 1.0
    # all factors 1: plain RoPE
    ones = [1.0] * 4
    inv_freq, _ = longrope_frequencies(
        D, short_factor=ones, long_factor=ones, original_max_positions=L, factor=1.0
    )
    torch.testing.assert_close(inv_freq.double(), plain(D, base), rtol=1e-6, atol=0)


def test_longrope_is_not_a_scaling_method():
    # chapter 9's experiments iterate SCALING_METHODS with one factor each
    assert "longrope" not in SCALING_METHODS


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(short_factor=[1.0, 1.0, 1.0]),
            "short_factor has 3 factors but .* 4 pairs",
        ),
        (dict(long_factor=[1.0] * 5), "long_factor has 5 factors but .* 4 pairs"),
        (
            dict(long_factor=[1.0, 0.0, 2.0, 2.0]),
            r"long_factor\[1\] = 0.0 is not a positive",
        ),
        (dict(short_factor=[1.0, -2.0, 1.0, 1.0]), r"short_factor\[1\] = -2.0 is not"),
        (dict(short_factor=[1.0, float("nan"), 1.0, 1.0]), r"short_factor\[1\] = nan"),
        (
            dict(short_factor=[1.0, "2", 1.0, 1.0]),
            r"short_factor\[1\] must be a number",
        ),
        (dict(short_factor=2.0), "short_factor must be a list of 4 numbers"),
        (dict(factor=0.5), "factor=0.5 is below 1"),
        (dict(attention_factor=0.0), "attention_factor must be a positive"),
        (dict(original_max_positions=0), "original_max_positions must be a positive"),
        (dict(seq_len=0), "seq_len must be a positive"),
    ],
)
def test_longrope_bad_input_is_named(change, message):
    arguments = dict(
        short_factor=[1.0] * 4,
        long_factor=[2.0] * 4,
        original_max_positions=64,
        factor=4.0,
    )
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        longrope_frequencies(8, **arguments)


def test_longrope_scaling_checks_its_lists():
    with pytest.raises(
        ValueError, match="short_factor has 2 factors and long_factor 3"
    ):
        LongRopeScaling(
            [1.0, 1.0], [1.0, 2.0, 3.0], original_max_positions=8, factor=2.0
        )
    with pytest.raises(ValueError, match=r"long_factor\[0\] = -1"):
        LongRopeScaling([1.0], [-1.0], original_max_positions=8, factor=2.0)
    scaling = LongRopeScaling(
        [1.0, 1.0], [1.0, 2.0], original_max_positions=8, factor=2.0
    )
    assert scaling.short_factor == (1.0, 1.0) and scaling.depends_on_length
    with pytest.raises(ValueError, match="2 factors but the rotated dimension has 4"):
        scaling.frequencies(8, base=10000.0)
