"""The FLOPs of a training step (``lm.compute``) against a closed form."""

from __future__ import annotations

import pytest

from pe_tutorial.lm.compute import step_flops
from pe_tutorial.lm.model import ModelConfig

SIZES = dict(d_model=32, num_heads=4, num_layers=2, max_positions=16)


def closed_form(d: int, heads: int, layers: int, batch: int, length: int) -> int:
    """Forward: 2 B T x (weights of every linear map) + 4 B H T^2 d_h per layer's
    attention; the backward is twice the forward for every product."""
    linear = layers * (d * 3 * d + d * d + d * 4 * d + 4 * d * d) + d * 256
    attention = layers * 4 * batch * heads * length**2 * (d // heads)
    return 3 * (2 * batch * length * linear + attention)


@pytest.mark.parametrize("scheme", ["nope", "rope", "alibi", "learned", "sinusoidal"])
def test_a_step_without_position_products_is_the_closed_form(scheme):
    config = ModelConfig(scheme, **SIZES)
    assert step_flops(config, 3, 16) == closed_form(32, 4, 2, 3, 16)


def test_position_products_add_to_the_count_and_fused_attention_is_counted():
    plain = step_flops(ModelConfig("nope", **SIZES), 3, 16)
    # T5's bias and Shaw's key embeddings write attention out as bmm: the same
    # attention products as the fused kernel, and Shaw's q . a_(i-j) on top
    assert step_flops(ModelConfig("t5", **SIZES), 3, 16) == plain
    assert step_flops(ModelConfig("shaw", **SIZES), 3, 16) > plain
    assert step_flops(ModelConfig("cope", **SIZES), 3, 16) > plain


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="batch_size"):
        step_flops(ModelConfig("nope", **SIZES), 0, 16)
    with pytest.raises(ValueError, match="cannot encode"):
        step_flops(ModelConfig("learned", **SIZES), 2, 32)
