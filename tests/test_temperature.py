"""Attention temperature: entropy, YaRN's factor and Llama 4's query scale, the last
checked against transformers' Llama 4 attention."""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.attention.core import attention_weights, dot_product_attention
from pe_tutorial.attention.temperature import (
    QKNorm,
    attention_entropies,
    attention_entropy,
    attention_maps,
    llama4_query_scale,
    logn_query_scale,
    rms_normalize,
    yarn_attention_factor,
)
from pe_tutorial.encodings.rope_scaling import scaled_rope_frequencies
from pe_tutorial.lm.model import ByteTransformer, ModelConfig

from reference import llama4_nope_layer


def test_uniform_weights_have_entropy_ln_n_and_one_hot_zero():
    for n in (1, 4, 100):
        assert float(attention_entropy(torch.full((n,), 1.0 / n))) == pytest.approx(
            math.log(n)
        )
    assert float(attention_entropy(torch.tensor([0.0, 1.0, 0.0]))) == 0.0


def test_yarn_factor_is_the_one_rope_scaling_applies():
    for s in (1.0, 2.0, 8.0, 32.0):
        _, scale = scaled_rope_frequencies(
            64, "yarn", factor=s, original_max_positions=64
        )
        assert yarn_attention_factor(s) == pytest.approx(scale)
    assert yarn_attention_factor(8.0) == pytest.approx(0.1 * math.log(8.0) + 1)
    assert yarn_attention_factor(0.5) == 1.0
    with pytest.raises(ValueError, match="factor must be > 0"):
        yarn_attention_factor(0)


def test_llama4_scale_by_hand():
    positions = torch.tensor([0, 8190, 8191, 16383, 100_000])
    expected = [1 + 0.1 * math.log(1 + (m + 1) // 8192) for m in positions.tolist()]
    assert llama4_query_scale(positions).tolist() == pytest.approx(expected)
    assert llama4_query_scale(positions)[:2].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("floor_scale", [0, -8, float("nan")])
def test_a_temperature_floor_that_is_not_positive_is_named(floor_scale):
    with pytest.raises(ValueError, match="floor_scale must be a positive"):
        llama4_query_scale(torch.arange(4), floor_scale=floor_scale)


def test_llama4_scale_needs_integer_positions():
    with pytest.raises(ValueError, match="integer tensor"):
        llama4_query_scale(torch.arange(4.0))


def test_entropies_of_a_model_are_those_of_its_weights():
    torch.manual_seed(0)
    model = ByteTransformer(ModelConfig("alibi", d_model=16, num_heads=2, num_layers=2))
    tokens = torch.randint(0, 256, (1, 12))
    entropies = attention_entropies(model, tokens)
    assert entropies.shape == (2, 1, 2, 12)
    # the first query sees one key: entropy 0; none exceeds ln(its keys)
    assert torch.all(entropies[..., 0].abs() < 1e-6)
    assert torch.all(entropies <= torch.log(torch.arange(1, 13.0)) + 1e-5)
    # layer 0 by hand: its input is the first block's norm of the embeddings
    block = model.blocks[0]
    x = block.norm1(model.embed(tokens))
    q, k, _ = (
        t.view(1, 12, 2, 8).transpose(1, 2) for t in block.attention.qkv(x).chunk(3, -1)
    )
    bias = block.attention.scheme.bias(q, k, causal=True)
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    expected = attention_entropy(attention_weights(q, k, bias=bias, mask=causal))
    assert torch.allclose(entropies[0], expected.detach(), atol=1e-6)


def test_llama4_query_scale_equals_transformers_nope_layer():
    # a small floor, so that 20 positions cross several floors
    layer = llama4_nope_layer(floor_scale=4, attn_scale=0.5).double()
    T = 20
    x = torch.randn(1, T, 32, dtype=torch.float64)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        expected, _ = layer(x, None, mask)
        split = lambda w: (x @ w.weight.T).view(1, T, 2, 16).transpose(1, 2)  # noqa: E731
        q, k, v = split(layer.q_proj), split(layer.k_proj), split(layer.v_proj)
        scale = llama4_query_scale(torch.arange(T), floor_scale=4, attn_scale=0.5)
        causal = torch.ones(T, T, dtype=torch.bool).tril()

        def output(queries):
            out = dot_product_attention(queries, k, v, mask=causal)
            return layer.o_proj(out.transpose(1, 2).reshape(1, T, 32))

        ours, unscaled = output(q * scale.double()[:, None]), output(q)
    # the scale is float32, as transformers computes it
    assert torch.allclose(ours, expected, atol=1e-6)
    assert not torch.allclose(unscaled, expected, atol=1e-3)


def rope_by_hand(x: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE, half pairing, in float64: pair i is (x_i, x_{i + D/2}), turned by
    ``t * base ** (-2i / D)`` at position t = 0 .. T - 1."""
    T, D = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    a, b = x[..., : D // 2].double(), x[..., D // 2 :].double()
    return torch.cat(
        [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1
    )


def entropies_by_hand(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Causal softmax of ``q k^T / sqrt(D)`` and ``-sum p ln p``, query by query."""
    T, D = q.shape[-2], q.shape[-1]
    out = torch.zeros(q.shape[:-1], dtype=torch.float64)
    for i in range(T):
        scores = q[..., i : i + 1, :] @ k[..., : i + 1, :].transpose(-1, -2)
        p = torch.softmax(scores.squeeze(-2) / math.sqrt(D), dim=-1)
        out[..., i] = -torch.special.xlogy(p, p).sum(-1)  # 0 ln 0 = 0
    return out


def test_entropies_of_a_rope_model_are_those_of_its_rotated_scores():
    """Issue 32: ``attention_entropies`` reads each layer's weights *after* the
    scheme's rotation. On a RoPE model (base 100, so the rotation turns fast) every
    layer's entropies equal those written out here: the layer's q and k, rotated by
    a RoPE by hand, causal softmax, ``-sum p ln p``. (On ALiBi, ``rotate`` is the
    identity and a missing rotation goes unseen.)"""
    torch.manual_seed(0)
    config = ModelConfig(
        "rope", d_model=16, num_heads=2, num_layers=2, max_positions=16, rope_base=100.0
    )
    model = ByteTransformer(config)
    with torch.no_grad():  # sharper attention than the 0.02 init, so angles matter
        for block in model.blocks:
            block.attention.qkv.weight.normal_(0.0, 0.7)
    tokens = torch.randint(0, 256, (2, 12))
    entropies = attention_entropies(model, tokens)
    assert entropies.shape == (2, 2, 2, 12)
    with torch.no_grad():
        x = model.embed(tokens)  # RoPE: no table, no scale on the embeddings
        for layer, block in enumerate(model.blocks):
            h = block.norm1(x)
            q, k, _ = (
                t.view(2, 12, 2, 8).transpose(1, 2)
                for t in block.attention.qkv(h).chunk(3, -1)
            )
            expected = entropies_by_hand(rope_by_hand(q, 100.0), rope_by_hand(k, 100.0))
            assert torch.allclose(entropies[layer].double(), expected, atol=1e-5), layer
            # the rotation matters here: unrotated, the entropies are not these
            unrotated = entropies_by_hand(q.double(), k.double())
            assert (unrotated - expected).abs().max() > 1e-2
            x = block(x)  # the next layer's input


# --- Qwen's log-n scaling -----------------------------------------------------------


@pytest.mark.parametrize("L", [2, 8, 2048])
def test_logn_scale_by_qwen_table(L):
    """Qwen's use_logn_attn table: entry m is log(m + 1, L) if m + 1 > L else 1."""
    positions = torch.tensor(sorted({0, 1, L - 2, L - 1, L, L + 1, 3 * L, 32766}))
    expected = [math.log(m + 1, L) if m + 1 > L else 1 for m in positions.tolist()]
    ours = logn_query_scale(positions, train_length=L)
    assert ours.dtype == torch.float32
    assert ours.tolist() == pytest.approx(expected, rel=1e-6)


def test_logn_scale_is_one_up_to_the_trained_length_then_grows_like_ln_n():
    L = 64
    scale = logn_query_scale(torch.arange(4 * L), train_length=L)
    assert torch.all(scale[:L] == 1.0)
    assert torch.all(scale[L:] > 1.0) and torch.all(scale[L + 1 :] > scale[L:-1])
    # at n = L^2 keys the factor is exactly 2: log_L(L^2)
    assert float(logn_query_scale(torch.tensor([L * L - 1]), train_length=L)) == (
        pytest.approx(2.0)
    )


def test_logn_bad_input_is_named():
    with pytest.raises(ValueError, match="train_length must be a positive integer"):
        logn_query_scale(torch.arange(4), train_length=0)
    with pytest.raises(ValueError, match="at least 2 .* base of the logarithm"):
        logn_query_scale(torch.arange(4), train_length=1)
    with pytest.raises(ValueError, match="integer tensor"):
        logn_query_scale(torch.arange(4.0), train_length=8)


# --- QK-norm ------------------------------------------------------------------------


def test_qk_norm_equals_qwen3_rms_norm():
    """QKNorm's two learned norms = transformers' Qwen3RMSNorm as q_norm and k_norm."""
    pytest.importorskip("transformers")
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    torch.manual_seed(0)
    D = 16
    q_norm, k_norm = Qwen3RMSNorm(D, eps=1e-6), Qwen3RMSNorm(D, eps=1e-6)
    ours = QKNorm(D, eps=1e-6)
    with torch.no_grad():
        for hf, w in ((q_norm, ours.q_weight), (k_norm, ours.k_weight)):
            hf.weight.normal_(1.0, 0.3)
            w.copy_(hf.weight)
    q, k = 3 * torch.randn(2, 4, 7, D), 0.1 * torch.randn(2, 4, 9, D)
    q_ours, k_ours = ours(q, k)
    torch.testing.assert_close(q_ours, q_norm(q), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k_ours, k_norm(k), rtol=1e-6, atol=1e-6)
    # the two weights are separate: swapping them changes the result
    assert not torch.allclose(rms_normalize(q, ours.k_weight), q_ours, atol=1e-3)


def test_qk_norm_equals_gemma3_one_plus_weight():
    pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    torch.manual_seed(1)
    norm = Gemma3RMSNorm(8, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_(0.0, 0.5)
    x = torch.randn(3, 5, 8)
    ours = rms_normalize(x, 1.0 + norm.weight.detach(), eps=1e-6)
    torch.testing.assert_close(ours, norm(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weightless_qk_norm_equals_llama4_l2_norm(dtype):
    """learned=False is Llama 4's Llama4TextL2Norm on q and k, at its eps (1e-5)."""
    pytest.importorskip("transformers")
    from transformers.models.llama4.modeling_llama4 import Llama4TextL2Norm

    torch.manual_seed(2)
    hf = Llama4TextL2Norm(eps=1e-5)
    ours = QKNorm(32, eps=1e-5, learned=False)
    assert list(ours.parameters()) == []
    q, k = (5 * torch.randn(2, 3, 6, 32)).to(dtype), torch.randn(2, 3, 6, 32).to(dtype)
    q_ours, k_ours = ours(q, k)
    assert q_ours.dtype == dtype
    torch.testing.assert_close(q_ours, hf(q), rtol=0, atol=0)
    torch.testing.assert_close(k_ours, hf(k), rtol=0, atol=0)


def test_rms_normalize_by_hand():
    """Root mean square 1, so length sqrt(D) (not 1, whatever Llama 4's name says),
    and blind to the scale of x: the logits stop growing with |q| and |k|."""
    x = torch.tensor([[3.0, 4.0, 0.0, 0.0]], dtype=torch.float64)
    # mean square = 25 / 4, so x / 2.5
    expected = torch.tensor([[1.2, 1.6, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(rms_normalize(x, eps=0.0), expected)
    assert float(rms_normalize(x, eps=0.0).norm()) == pytest.approx(2.0)  # sqrt(4)
    torch.testing.assert_close(rms_normalize(100 * x, eps=0.0), expected)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.testing.assert_close(rms_normalize(x, w, eps=0.0), expected * w.double())


def test_qk_norm_bad_input_is_named():
    with pytest.raises(ValueError, match="built for head_dim=16"):
        QKNorm(16)(torch.randn(2, 16), torch.randn(2, 8))
    with pytest.raises(ValueError, match="eps must be a number >= 0"):
        QKNorm(16, eps=-1.0)
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        QKNorm(0)
    with pytest.raises(ValueError, match="one weight per channel"):
        rms_normalize(torch.randn(2, 8), torch.ones(4))


def test_attention_maps_are_the_weights_each_layer_attends_with():
    """``attention_maps`` (chapter 11's sinks): each layer's weights, times its
    values and through its output projection, give what the layer returned in
    the model's own forward pass; causal rows that sum to 1."""
    torch.manual_seed(0)
    config = ModelConfig(
        "rope", d_model=16, num_heads=2, num_layers=2, max_positions=16, rope_base=100.0
    )
    model = ByteTransformer(config)
    tokens = torch.randint(0, 256, (2, 10))
    seen = []
    hooks = [
        block.attention.register_forward_hook(
            lambda module, args, out: seen.append((module, args[0], out))
        )
        for block in model.blocks
    ]
    with torch.no_grad():
        model(tokens)
    for hook in hooks:
        hook.remove()
    maps = attention_maps(model, tokens)
    assert maps.shape == (2, 2, 2, 10, 10)
    assert torch.allclose(maps.sum(-1), torch.ones(2, 2, 2, 10), atol=1e-5)
    assert torch.all(maps.triu(1) == 0)
    with torch.no_grad():
        for layer, (attention, x, out) in enumerate(seen):
            _, _, v = attention.heads(x)
            y = (maps[layer] @ v).transpose(1, 2).reshape(2, 10, 16)
            assert torch.allclose(attention.out(y), out, atol=1e-5), layer
    assert torch.allclose(attention_entropies(model, tokens), attention_entropy(maps))
