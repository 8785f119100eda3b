"""Models whose layers differ (chapter 11): Llama 4's chunked RoPE layers and
tempered NoPE layers, Gemma 3's sliding-window and global layers, p-RoPE.

The layers are checked against attention written out query by query with a
rotation by hand, against transformers' Llama 4 and Gemma 3 configurations,
masks and NoPE attention, and through whole models (what a local model can
and cannot see).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from pe_tutorial.attention.core import (
    AttentionConfig,
    MultiHeadAttention,
)
from pe_tutorial.attention.layer_patterns import (
    LocalAttentionScheme,
    TemperedNoPEScheme,
    global_layers,
    has_temperature,
    with_global_interpolation,
    without_temperature,
)
from pe_tutorial.attention.local_global import (
    layer_types,
    sliding_window_mask,
    window_overlay,
)
from pe_tutorial.attention.position_scheme import NoPositionScheme
from pe_tutorial.attention.schemes import ALiBiScheme, RotaryScheme
from pe_tutorial.encodings.alibi import ALiBiBias
from pe_tutorial.encodings.rope import RotaryEmbedding
from pe_tutorial.encodings.rope_bands import p_rope_frequencies
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.registry import ModelScheme, register_scheme, unregister_scheme

from reference import llama4_nope_layer


def rotate_by_hand(x: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE with the half pairing, as complex numbers: pair i is (x_i, x_{i + D/2})."""
    T, D = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    z = torch.complex(x[..., : D // 2], x[..., D // 2 :]) * torch.polar(
        torch.ones_like(angle), angle
    )
    return torch.cat([z.real, z.imag], dim=-1)


def near(i: int, j: int, window: int, kind: str) -> bool:
    if kind == "sliding":
        return i - window < j <= i
    return j <= i and i // window == j // window


def test_every_few_layers_one_is_global():
    assert global_layers(6, 3) == [False, False, True] * 2
    assert global_layers(4, 6) == [False] * 4
    assert layer_types(12) == [
        "full_attention" if g else "sliding_attention" for g in global_layers(12, 6)
    ]


def test_the_windows_by_hand_and_when_decoding():
    for kind in ("sliding", "chunked"):
        allowed = window_overlay(10, 10, 4, kind) & torch.ones(10, 10).bool().tril()
        expected = [[near(i, j, 4, kind) for j in range(10)] for i in range(10)]
        assert allowed.tolist() == expected
        # three queries against ten keys are the last three rows
        last_rows = window_overlay(10, 10, 4, kind)[7:]
        assert torch.equal(window_overlay(3, 10, 4, kind), last_rows)
    assert torch.equal(sliding_window_mask(7, 3), window_overlay(7, 7, 3).tril())


@pytest.mark.parametrize("kind", ["sliding", "chunked"])
@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_a_local_rope_layer_equals_attention_written_out(kind, kernel):
    torch.manual_seed(0)
    T, H, D, window = 11, 2, 8, 4
    rotary = RotaryEmbedding(D, base=100.0)
    layer = MultiHeadAttention(
        AttentionConfig(H * D, H, kernel=kernel),
        LocalAttentionScheme(RotaryScheme(rotary), window, kind),
    ).double()
    x = torch.randn(2, T, H * D, dtype=torch.float64)
    q, k, v = layer.heads(x)
    q, k = rotate_by_hand(q, 100.0), rotate_by_hand(k, 100.0)
    heads = torch.zeros_like(q)
    for i in range(T):
        keys = [j for j in range(T) if near(i, j, window, kind)]
        scores = q[..., i : i + 1, :] @ k[..., keys, :].transpose(-1, -2)
        weights = torch.softmax(scores / math.sqrt(D), dim=-1)
        heads[..., i, :] = (weights @ v[..., keys, :]).squeeze(-2)
    expected = layer.out(heads.transpose(1, 2).reshape(2, T, H * D))
    # the embedding keeps its angles in float32
    assert torch.allclose(layer(x), expected, atol=1e-6)


def test_the_window_bias_when_decoding_is_the_last_row():
    scheme = LocalAttentionScheme(NoPositionScheme(), 3, "chunked")
    q, k = torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    full = scheme.bias(q, k, causal=True)
    assert torch.equal(scheme.bias(q[..., -1:, :], k, causal=True), full[-1:])
    assert full[8].tolist() == [float("-inf")] * 6 + [0.0] * 3


def test_the_tempered_query_scale_when_decoding_is_the_last_row():
    scheme = TemperedNoPEScheme(floor_scale=4, attn_scale=0.5)
    q, k = torch.ones(1, 1, 12, 2), torch.ones(1, 1, 12, 2)
    full, _ = scheme.rotate(q, k)
    one, keys = scheme.rotate(q[..., -1:, :], k)
    assert torch.equal(one, full[..., -1:, :]) and torch.equal(keys, k)
    # 1 + 0.5 ln(1 + floor(12 / 4)) at the twelfth position
    assert one.flatten()[0].item() == pytest.approx(1 + 0.5 * math.log(4))


def test_a_tempered_nope_layer_equals_transformers_llama4():
    hf_layer = llama4_nope_layer(floor_scale=4, attn_scale=0.1, seed=1)
    ours = MultiHeadAttention(AttentionConfig(32, 2), TemperedNoPEScheme(4)).eval()
    with torch.no_grad():
        ours.qkv.weight.copy_(
            torch.cat(
                [hf_layer.q_proj.weight, hf_layer.k_proj.weight, hf_layer.v_proj.weight]
            )
        )
        ours.out.weight.copy_(hf_layer.o_proj.weight)
        T = 21
        x = torch.randn(1, T, 32)
        mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
        expected, _ = hf_layer(x, None, mask)
        assert torch.allclose(ours(x), expected, atol=1e-5)
        untempered = MultiHeadAttention(AttentionConfig(32, 2)).eval()
        untempered.load_state_dict(ours.state_dict())
        assert not torch.allclose(untempered(x), expected, atol=1e-3)


def test_the_layer_patterns_equal_transformers_configurations():
    transformers = pytest.importorskip("transformers")
    llama4 = transformers.Llama4TextConfig(num_hidden_layers=9)  # interval 4
    is_global = global_layers(9, 4)
    assert llama4.no_rope_layers == [int(not g) for g in is_global]
    assert llama4.layer_types == [
        "full_attention" if g else "chunked_attention" for g in is_global
    ]
    gemma3 = transformers.Gemma3TextConfig(num_hidden_layers=13)
    assert gemma3.layer_types == [
        "full_attention" if g else "sliding_attention" for g in global_layers(13, 6)
    ]


def test_both_windows_equal_transformers_masks():
    pytest.importorskip("transformers")
    from transformers import masking_utils

    T, zero = 14, torch.tensor(0)
    i, j = torch.arange(T)[:, None].expand(T, T), torch.arange(T)[None, :].expand(T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    sliding = masking_utils.sliding_window_causal_mask_function(5)
    chunked = masking_utils.chunked_causal_mask_function(
        5, torch.zeros(1, dtype=torch.long)
    )
    assert torch.equal(
        window_overlay(T, T, 5, "sliding") & causal, sliding(zero, zero, i, j)
    )
    assert torch.equal(
        window_overlay(T, T, 5, "chunked") & causal, chunked(zero, zero, i, j)
    )


def model(scheme: str, **fields) -> ByteTransformer:
    torch.manual_seed(0)
    sizes = {"d_model": 32, "num_heads": 2, "num_layers": 3, "max_positions": 32}
    return ByteTransformer(ModelConfig(scheme=scheme, **{**sizes, **fields})).eval()


def test_the_models_build_the_designs_layers():
    irope = model("irope", global_every=3, local_window=8)
    kinds = [type(block.attention.scheme).__name__ for block in irope.blocks]
    assert kinds == [
        "LocalAttentionScheme",
        "LocalAttentionScheme",
        "TemperedNoPEScheme",
    ]
    assert irope.blocks[0].attention.scheme.kind == "chunked"
    assert irope.blocks[2].attention.scheme.floor_scale == 8
    # the RoPE layers share one embedding
    assert (
        irope.blocks[0].attention.scheme.inner.encoding
        is irope.blocks[1].attention.scheme.inner.encoding
    )
    gemma = model("local-global", global_every=3, global_rope_base=5e5)
    local, last = gemma.blocks[0].attention.scheme, gemma.blocks[2].attention.scheme
    assert local.kind == "sliding" and local.inner.encoding.base == 10000.0
    assert isinstance(last, RotaryScheme) and last.encoding.base == 5e5
    p_rope = model("p-rope", rope_fraction=0.5).blocks[0].attention.scheme.encoding
    assert torch.equal(p_rope.inv_freq, p_rope_frequencies(16, 0.5))
    assert (p_rope.inv_freq[4:] == 0).all() and (p_rope.inv_freq[:4] > 0).all()


def test_gemmas_interpolation_slows_the_global_layers_only():
    """Gemma 3's linear x8 on its global layers, read on trained weights: the
    global layers' frequencies are base^(-2i/D) / 8, written out here; the model
    equals one whose global layers are given those frequencies outright; the
    local layers keep theirs; a model that is not the pattern is refused."""
    gemma = model("local-global", global_every=3, local_window=8, global_rope_base=5e5)
    scaled = with_global_interpolation(gemma, 8.0)
    D = gemma.config.head_dim
    by_hand = 5e5 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D) / 8
    last = scaled.blocks[2].attention.scheme
    assert torch.allclose(last.encoding.inv_freq.double(), by_hand, rtol=1e-6)
    for block, original in zip(scaled.blocks[:2], gemma.blocks[:2]):
        kept = original.attention.scheme.inner.encoding
        assert torch.equal(
            block.attention.scheme.inner.encoding.inv_freq, kept.inv_freq
        )
    assert gemma.blocks[2].attention.scheme.encoding.scaling is None  # a copy
    reference = copy.deepcopy(gemma)
    reference.blocks[2].attention.scheme.encoding = RotaryEmbedding(
        D, base=5e5, max_positions=32, frequencies=by_hand.float()
    )
    tokens = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(scaled(tokens), reference(tokens), atol=1e-5)
        assert not torch.allclose(scaled(tokens), gemma(tokens), atol=1e-5)
    for other in (model("rope"), model("irope", global_every=3)):
        with pytest.raises(ValueError, match="not Gemma 3's pattern"):
            with_global_interpolation(other, 8.0)


@pytest.mark.parametrize("scheme", ["irope", "local-global"])
def test_a_local_model_cannot_see_past_its_windows_and_a_global_layer_can(scheme):
    window, T = 4, 24
    tokens = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[0, 0] = (tokens[0, 0] + 1) % 256
    # no global layer (global_every > num_layers): three local layers reach at most
    # 3 * (window - 1) back with sliding windows, and never past the chunk
    local = model(scheme, global_every=4, local_window=window)
    reach = window if scheme == "irope" else 3 * (window - 1) + 1
    with torch.no_grad():
        same = (local(tokens) - local(changed)).abs().amax(-1)[0]
    assert (same[reach:] == 0).all() and (same[:reach] > 0).all()
    with_global = model(scheme, global_every=3, local_window=window)
    with torch.no_grad():
        moved = (with_global(tokens) - with_global(changed)).abs().amax(-1)[0]
    assert (moved > 0).all()


def test_a_long_model_runs_past_its_training_length():
    logits = model("irope", local_window=8)(torch.randint(0, 256, (1, 100)))
    assert logits.shape == (1, 100, 256) and torch.isfinite(logits).all()


@pytest.mark.parametrize(
    "field, value",
    [
        ("rope_fraction", 0),
        ("rope_fraction", 1.5),
        ("rope_fraction", True),
        ("global_every", 0),
        ("local_window", -2),
        ("global_rope_base", 0.0),
    ],
)
def test_bad_fields_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        ModelConfig(scheme="local-global", **{field: value})


def test_bad_schemes_are_named():
    with pytest.raises(ValueError, match="window kind"):
        LocalAttentionScheme(NoPositionScheme(), 4, "diagonal")
    with pytest.raises(ValueError, match="window"):
        LocalAttentionScheme(NoPositionScheme(), 0)
    with pytest.raises(ValueError, match="PositionScheme"):
        LocalAttentionScheme(RotaryEmbedding(8), 4)
    with pytest.raises(ValueError, match="causal"):
        LocalAttentionScheme(NoPositionScheme(), 4).bias(
            torch.randn(1, 1, 3, 2), torch.randn(1, 1, 3, 2), causal=False
        )
    with pytest.raises(ValueError, match="floor"):
        TemperedNoPEScheme(floor_scale=0)


def test_a_pattern_of_the_wrong_length_is_named():
    register_scheme(
        ModelScheme(
            "two-layers-only",
            "nowhere",
            11,
            "a broken pattern",
            layers=lambda config, shared: [NoPositionScheme()] * 2,
        )
    )
    try:
        with pytest.raises(
            ValueError, match="built 2 layers' schemes for a model of 3"
        ):
            model("two-layers-only")
    finally:
        unregister_scheme("two-layers-only")


@pytest.mark.parametrize("kind", ["sliding", "chunked"])
@pytest.mark.parametrize("q_len, k_len", [(10, 10), (3, 10), (1, 9)])
def test_a_wrapped_alibi_scheme_keeps_its_bias_inside_the_window(kind, q_len, k_len):
    """Issue 32: ``LocalAttentionScheme`` lets the inner scheme's bias through.
    Wrapping ALiBi (4 heads, slopes ``2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8`` by hand),
    every visible score inside the window gets ``-m_h (i - j)``, every one outside
    gets ``-inf``; also when the queries are the last ``q_len`` of ``k_len``."""
    window, slopes = 4, [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    scheme = LocalAttentionScheme(ALiBiScheme(ALiBiBias(4)), window, kind)
    q, k = torch.randn(1, 4, q_len, 8), torch.randn(1, 4, k_len, 8)
    bias = scheme.bias(q, k, causal=True)
    assert bias.shape[-2:] == (q_len, k_len)
    bias = bias.expand(4, q_len, k_len)
    for h, m in enumerate(slopes):
        for r in range(q_len):
            i = k_len - q_len + r  # the query's position
            for j in range(i + 1):  # the keys the causal mask leaves
                expected = -m * (i - j) if near(i, j, window, kind) else -math.inf
                assert float(bias[h, r, j]) == pytest.approx(expected), (h, i, j)


# --- issue 32: Llama 4's temperature floor is its own setting; one rule, one base


def test_the_temperature_floor_defaults_to_the_chunk_and_is_its_own_setting():
    tokens = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))
    default = model("irope", global_every=3, local_window=8)
    same = model("irope", global_every=3, local_window=8, temperature_floor=8)
    # None reproduces the models of before: the floor at the chunk size, same outputs
    assert default.config.temperature_floor is None
    assert default.blocks[2].attention.scheme.floor_scale == 8
    assert same.blocks[2].attention.scheme.floor_scale == 8
    for (name, a), (_, b) in zip(
        default.state_dict().items(), same.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    with torch.no_grad():
        assert torch.equal(default(tokens), same(tokens))
    # another floor changes the NoPE layer's scale only, not the chunks
    other = model("irope", global_every=3, local_window=8, temperature_floor=2)
    assert other.blocks[2].attention.scheme.floor_scale == 2
    assert [b.attention.scheme.window for b in other.blocks[:2]] == [8, 8]
    with torch.no_grad():
        assert not torch.allclose(other(tokens), default(tokens))
    for bad in (0, -4, 2.5, True, "8"):
        with pytest.raises(ValueError, match="temperature_floor must be a positive"):
            ModelConfig(scheme="irope", temperature_floor=bad)


def test_one_rule_says_which_layers_are_global():
    """``layer_types`` (transformers' names), the layer patterns' ``global_layers``
    and both models read the one rule of ``local_global.global_layers``."""
    from pe_tutorial.attention import layer_patterns, local_global

    assert layer_patterns.global_layers is local_global.global_layers
    for layers, every in ((12, 6), (9, 4), (7, 3), (4, 6), (5, 1)):
        rule = [(i + 1) % every == 0 for i in range(layers)]  # the last of each group
        assert global_layers(layers, every) == rule
        assert layer_types(layers, pattern=every) == [
            "full_attention" if g else "sliding_attention" for g in rule
        ]
        if layers > 4:
            continue  # keep the models small
        sizes = {"num_layers": layers, "global_every": every}
        irope = [type(b.attention.scheme) for b in model("irope", **sizes).blocks]
        gemma = [
            type(b.attention.scheme) for b in model("local-global", **sizes).blocks
        ]
        assert irope == [
            TemperedNoPEScheme if g else LocalAttentionScheme for g in rule
        ]
        assert gemma == [RotaryScheme if g else LocalAttentionScheme for g in rule]


def test_gemma3s_bases_have_one_source():
    """The local-global model's defaults turn its layers at ``GEMMA3_BASES``, the
    bases of ``layer_frequencies``: a default written out again and changed fails."""
    from pe_tutorial.attention.local_global import GEMMA3_BASES, layer_frequencies

    config = ModelConfig(scheme="local-global")
    assert config.global_rope_base == GEMMA3_BASES["full_attention"] == 1_000_000.0
    # the local layers use the model's RoPE base, whose default is Gemma 3's local one
    assert config.rope_base == GEMMA3_BASES["sliding_attention"] == 10_000.0
    gemma = model("local-global", global_every=3)
    local, last = gemma.blocks[0].attention.scheme, gemma.blocks[2].attention.scheme
    head_dim = gemma.config.head_dim
    assert torch.equal(
        local.inner.encoding.inv_freq, layer_frequencies("sliding_attention", head_dim)
    )
    assert torch.equal(
        last.encoding.inv_freq, layer_frequencies("full_attention", head_dim)
    )


def test_llama4s_scales_have_one_source():
    import inspect

    from pe_tutorial.attention import layer_patterns, temperature

    assert layer_patterns.LLAMA4_ATTN_SCALE is temperature.LLAMA4_ATTN_SCALE
    defaults = inspect.signature(temperature.llama4_query_scale).parameters
    assert defaults["attn_scale"].default == temperature.LLAMA4_ATTN_SCALE == 0.1
    assert defaults["floor_scale"].default == temperature.LLAMA4_FLOOR_SCALE == 8192
    assert TemperedNoPEScheme(8).attn_scale == temperature.LLAMA4_ATTN_SCALE


# --- issue 35: the Llama 4 pattern without its temperature, and with its QK-norm


def test_the_temperature_can_be_switched_off_and_qk_norm_on():
    """irope_temperature=False: the NoPE layer is plain NoPE (the ablation of
    Llama 4's scale); irope_qk_norm=True: each RoPE layer's q and k are rotated,
    then scaled to root mean square 1 per head (Llama4TextL2Norm after RoPE)."""
    from pe_tutorial.attention.layer_patterns import QKNormedScheme
    from pe_tutorial.attention.temperature import rms_normalize

    plain = model("irope", global_every=3, local_window=8, irope_temperature=False)
    assert isinstance(plain.blocks[2].attention.scheme, NoPositionScheme)
    normed = model("irope", global_every=3, local_window=8, irope_qk_norm=True)
    local = normed.blocks[0].attention.scheme
    assert isinstance(local.inner, QKNormedScheme) and local.window == 8
    # the same weights without the norm: the norm is all that differs
    unnormed = model("irope", global_every=3, local_window=8)
    unnormed.load_state_dict(normed.state_dict())
    g = torch.Generator().manual_seed(0)
    q, k = (
        torch.randn(2, 4, 10, 16, generator=g),
        torch.randn(2, 4, 10, 16, generator=g),
    )
    rotated = unnormed.blocks[0].attention.scheme.rotate(q, k)
    got = local.rotate(q, k)
    for a, b in zip(got, rotated, strict=True):
        torch.testing.assert_close(a, rms_normalize(b, eps=1e-5))
        torch.testing.assert_close(
            a.pow(2).mean(-1), torch.ones(2, 4, 10), atol=1e-4, rtol=0
        )
    plain.load_state_dict(unnormed.state_dict())
    tokens = torch.randint(0, 256, (1, 24), generator=g)
    with torch.no_grad():
        assert not torch.allclose(normed(tokens), unnormed(tokens))
        # the scale is 1 up to position floor - 2 = 6, so the first 7 agree
        tempered, untempered = unnormed(tokens), plain(tokens)
        torch.testing.assert_close(tempered[:, :7], untempered[:, :7])
        assert not torch.allclose(tempered[:, 7:], untempered[:, 7:])


def test_a_tempered_model_read_without_its_temperature_is_the_untempered_model():
    """The same weights, the NoPE layers' query scale taken away: equal to the model
    built with irope_temperature=False (the frontier run's passkey reading), and
    different from the tempered model past the scale's floor."""
    torch.manual_seed(0)
    settings = dict(
        scheme="irope",
        d_model=32,
        num_heads=2,
        num_layers=3,
        global_every=3,
        local_window=4,
        max_positions=16,
    )
    tempered = ByteTransformer(ModelConfig(**settings)).eval()
    plain = ByteTransformer(ModelConfig(**settings, irope_temperature=False)).eval()
    plain.load_state_dict(tempered.state_dict())
    tokens = torch.randint(0, 256, (2, 16))
    untempered = without_temperature(tempered)
    with torch.no_grad():
        assert torch.allclose(untempered(tokens), plain(tokens), atol=1e-6)
        # the scale is 1 below the floor (4 here), so only later positions change
        assert not torch.allclose(untempered(tokens), tempered(tokens), atol=1e-4)
    # the model it was given keeps its temperature
    assert any(isinstance(m, TemperedNoPEScheme) for m in tempered.modules())
    assert not any(isinstance(m, TemperedNoPEScheme) for m in untempered.modules())
    assert has_temperature(tempered)
    assert not has_temperature(untempered) and not has_temperature(plain)
    with pytest.raises(ValueError, match="no tempered NoPE layer"):
        without_temperature(plain)


def test_the_llama4_pattern_with_sliding_windows_is_rnope_swa():
    """irope_window="sliding": the RoPE layers attend over the last local_window
    keys (not their chunk); with the scale off that is Cohere's RNoPE-SWA. Three
    such layers reach 3 (window - 1) back, as the Gemma 3 pattern's do."""
    window, T = 4, 24
    swa = model("irope", global_every=4, local_window=window, irope_window="sliding")
    local = swa.blocks[0].attention.scheme
    assert local.kind == "sliding" and local.window == window
    assert model("irope", local_window=window).blocks[0].attention.scheme.kind == (
        "chunked"
    )
    tokens = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[0, 0] = (tokens[0, 0] + 1) % 256
    with torch.no_grad():
        moved = (swa(tokens) - swa(changed)).abs().amax(-1)[0]
    reach = 3 * (window - 1) + 1
    assert (moved[reach:] == 0).all() and (moved[:reach] > 0).all()
    rnope = model(
        "irope", global_every=3, irope_window="sliding", irope_temperature=False
    )
    assert isinstance(rnope.blocks[2].attention.scheme, NoPositionScheme)
    with pytest.raises(ValueError, match="irope_window"):
        ModelConfig(scheme="irope", irope_window="strided")
