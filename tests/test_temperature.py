"""Attention temperature: entropy, YaRN's factor and Llama 4's query scale, the last
checked against transformers' Llama 4 attention."""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.attention.core import attention_weights, dot_product_attention
from pe_tutorial.attention.temperature import (
    attention_entropies,
    attention_entropy,
    llama4_query_scale,
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
