"""The multi-head layer against a loop over heads rebuilt from its own weights, for every scheme and kernel.

The reference splits the layer's projection matrices by hand (head h owns rows
h*D .. (h+1)*D - 1 of W_q, W_k and W_v), adds the absolute table by hand,
attends head by head with the papers' formulas (reference.py), concatenates
the heads in order and applies W_o. A layer that merges heads in the wrong
order, forgets to add the absolute table, or hands a scheme the wrong
positions disagrees with it.
"""

import pytest
import torch

from pe_tutorial.attention.core import (
    AttentionConfig,
    MultiHeadAttention,
    padding_mask,
)
from pe_tutorial.attention.schemes import AbsoluteScheme
from pe_tutorial.encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)

from reference import scheme_attention, with_positions_added
from test_schemes import B, D, H, kernels_for, make_schemes

d_model = H * D


def all_schemes():
    torch.manual_seed(1)
    schemes = make_schemes()
    schemes["absolute-sinusoidal"] = AbsoluteScheme(
        SinusoidalPositionalEmbedding(d_model, base=100.0)
    )
    learned = LearnedPositionalEmbedding(16, d_model, init_std=1.0)
    schemes["absolute-learned"] = AbsoluteScheme(learned)
    return schemes


SCHEMES = all_schemes()


def per_head_loop(layer, x, *, causal, mask=None):
    """The layer's output rebuilt from its weights one head at a time, float64."""
    # (3d, d): rows of W_q, then W_k, then W_v
    w_qkv = layer.qkv.weight.detach().double()
    w_q, w_k, w_v = w_qkv[:d_model], w_qkv[d_model : 2 * d_model], w_qkv[2 * d_model :]
    x = with_positions_added(layer.scheme, x.double())
    # (B, H, T, D)
    q = torch.stack([x @ w_q[h * D : (h + 1) * D].T for h in range(H)], dim=1)
    k = torch.stack([x @ w_k[h * D : (h + 1) * D].T for h in range(H)], dim=1)
    v = torch.stack([x @ w_v[h * D : (h + 1) * D].T for h in range(H)], dim=1)
    heads = scheme_attention(
        layer.scheme, q.float(), k.float(), v.float(), causal=causal, mask=mask
    )
    # head 0's channels first, then head 1's, ...
    merged = torch.cat([heads[:, h] for h in range(H)], dim=-1)  # (B, T, d)
    return merged @ layer.out.weight.detach().double().T


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("name", list(SCHEMES))
def test_layer_equals_a_loop_over_heads_in_every_kernel(name, causal):
    if name == "cope" and not causal:
        pytest.skip("CoPE is causal only")
    torch.manual_seed(2)
    kernels = kernels_for(SCHEMES[name])
    layer = MultiHeadAttention(
        AttentionConfig(d_model, H, causal=causal, kernel=kernels[0]), SCHEMES[name]
    )
    x = torch.randn(B, 6, d_model)
    mask = padding_mask(torch.tensor([6, 4]), 6)
    expected = per_head_loop(layer, x, causal=causal, mask=mask)
    for kernel in kernels:
        with torch.no_grad():  # FlexAttention has no backward on the CPU
            got = layer(x, mask, kernel=kernel)
        torch.testing.assert_close(
            got.double(), expected, atol=1e-4, rtol=1e-4, msg=f"kernel {kernel}"
        )


def test_heads_are_not_interchangeable():
    """Swapping two heads' rows of W_q and W_k changes the output when their biases differ (ALiBi)."""
    torch.manual_seed(3)
    layer = MultiHeadAttention(AttentionConfig(d_model, H), SCHEMES["alibi"])
    x = torch.randn(1, 5, d_model)
    with torch.no_grad():
        before = layer(x)
        w = layer.qkv.weight
        for block in (0, d_model):  # the W_q rows, then the W_k rows
            head0 = w[block : block + D].clone()
            w[block : block + D] = w[block + D : block + 2 * D]
            w[block + D : block + 2 * D] = head0
        assert not torch.allclose(layer(x), before, atol=1e-4)


def test_gradients_reach_every_parameter_of_layer_and_scheme():
    torch.manual_seed(4)
    names = ("t5-causal", "shaw", "shaw-values", "deberta-buckets", "projected-c2p")
    for name in (*names, "cope", "absolute-learned"):
        kernel = "naive" if SCHEMES[name].needs_weights else "sdpa"
        config = AttentionConfig(d_model, H, kernel=kernel)
        layer = MultiHeadAttention(config, SCHEMES[name])
        layer(torch.randn(B, 5, d_model)).square().sum().backward()
        for pname, p in layer.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (
                f"{name}: {pname} gets no gradient"
            )
        layer.zero_grad()
