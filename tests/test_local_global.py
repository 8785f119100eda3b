"""Gemma 3's local and global layers: the pattern, the window and the two bases,
against transformers' Gemma 3 configuration, masks and rotary embedding."""

from __future__ import annotations

import pytest
import torch

from pe_tutorial.attention.core import dot_product_attention
from pe_tutorial.attention.local_global import (
    GEMMA3_BASES,
    layer_frequencies,
    layer_types,
    sliding_window_mask,
)


def test_five_local_layers_then_one_global():
    assert layer_types(12) == (["sliding_attention"] * 5 + ["full_attention"]) * 2
    assert layer_types(4, pattern=2) == ["sliding_attention", "full_attention"] * 2


def test_the_window_by_hand_and_what_a_local_query_cannot_see():
    mask = sliding_window_mask(6, 3)
    assert mask[5].tolist() == [False, False, False, True, True, True]
    assert mask[1].tolist() == [True, True, False, False, False, False]
    # a key outside the window changes nothing for the last query
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 1, 6, 8)
    far_v = v.clone()
    far_v[..., 0, :] += 100.0
    last = [dot_product_attention(q, k, vv, mask=mask)[..., -1, :] for vv in (v, far_v)]
    assert torch.allclose(last[0], last[1])


def test_each_kind_of_layer_has_its_base():
    assert torch.equal(
        layer_frequencies("full_attention", 64)[-1:],
        torch.tensor([1_000_000.0 ** (-62 / 64)]),
    )
    assert (
        layer_frequencies("sliding_attention", 64)[-1]
        > layer_frequencies("full_attention", 64)[-1]
    )


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown layer type"):
        layer_frequencies("chunked_attention", 64)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, 0)
    with pytest.raises(ValueError, match="pattern"):
        layer_types(4, pattern=0)


def test_equal_to_transformers_gemma3():
    transformers = pytest.importorskip("transformers")
    from transformers import masking_utils
    from transformers.models.gemma3 import modeling_gemma3

    config = transformers.Gemma3TextConfig(
        num_hidden_layers=13,
        head_dim=32,
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        sliding_window=5,
    )
    assert config.layer_types == layer_types(13)
    allowed = masking_utils.sliding_window_causal_mask_function(5)
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    zero = torch.tensor(0)
    expected = allowed(zero, zero, i.expand(12, 12), j.expand(12, 12))
    assert torch.equal(sliding_window_mask(12, 5), expected)
    rotary = modeling_gemma3.Gemma3RotaryEmbedding(config)
    for kind in GEMMA3_BASES:
        assert torch.allclose(
            getattr(rotary, f"{kind}_inv_freq"), layer_frequencies(kind, 32)
        )
