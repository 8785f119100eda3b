"""Tests for pe_tutorial.attention.core: the reference attention, masks, the three kernels, the config.

Every scheme-specific check lives in test_schemes.py, and the multi-head layer
against a per-head loop in test_multi_head.py; here the bias is a plain tensor.
"""

import ast
import math
from pathlib import Path

import pytest
import torch

from pe_tutorial.attention.core import (
    DEFAULT_KERNEL,
    KERNELS,
    AttentionConfig,
    MultiHeadAttention,
    attend,
    attention_weights,
    causal_mask,
    dot_product_attention,
    padding_mask,
)
from pe_tutorial.attention.position_scheme import PositionScheme

from reference import AVAILABLE_KERNELS

B, H, D = 2, 4, 8


def qkv(q_len, k_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, n, D, generator=g) for n in (q_len, k_len, k_len))


def loop_attention(q, k, v, bias=None, mask=None):
    """softmax(q k^T / sqrt(D) + bias) v with explicit loops over batch, head, query and key."""
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(q.shape[2]):
                logits = []
                for j in range(k.shape[2]):
                    if mask is not None and not mask[b, h, i, j]:
                        continue
                    s = (q[b, h, i].double() @ k[b, h, j].double()).item() / math.sqrt(
                        q.shape[-1]
                    )
                    logits.append(
                        (j, s + (0.0 if bias is None else bias[b, h, i, j].item()))
                    )
                if not logits:
                    continue  # no key: zeros
                top = max(s for _, s in logits)
                weights = [(j, math.exp(s - top)) for j, s in logits]
                total = sum(w for _, w in weights)
                for j, w in weights:
                    out[b, h, i] += w / total * v[b, h, j].double()
    return out


# ---------------------------------------------------------------------------
# the reference attention of chapter 1
# ---------------------------------------------------------------------------


def test_dot_product_attention_matches_a_loop_with_bias_and_mask():
    q, k, v = qkv(5, 5)
    bias = torch.randn(B, H, 5, 5)
    mask = torch.rand(B, H, 5, 5) > 0.3
    mask[0, 0, 2] = False  # one query with no key
    got = dot_product_attention(q, k, v, bias=bias, mask=mask)
    assert torch.allclose(got.double(), loop_attention(q, k, v, bias, mask), atol=1e-5)
    assert torch.equal(got[0, 0, 2], torch.zeros(D))
    weights = attention_weights(q, k, mask=mask)
    assert torch.allclose(
        weights.sum(-1)[mask.any(-1)], torch.ones(int(mask.any(-1).sum()))
    )


@pytest.mark.parametrize("where", ["q", "k", "bias"])
def test_a_nan_in_the_input_comes_out_as_nan_not_zeros(where):
    q, k, v = qkv(4, 4)
    bias = torch.zeros(B, H, 4, 4)
    {"q": q, "k": k, "bias": bias}[where][0, 0, 1, 0] = float("nan")
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    out = dot_product_attention(q, k, v, bias=bias, mask=mask)
    assert out[0, 0].isnan().any(), "the NaN was silently replaced"
    assert not out[1].isnan().any(), "the NaN leaked into another sequence"


def test_a_query_with_no_key_gets_zeros_and_a_finite_gradient():
    q, k, v = (t.requires_grad_(True) for t in qkv(3, 3))
    mask = torch.tensor(
        [[True, False, False], [False, False, False], [True, True, True]]
    )
    out = dot_product_attention(q, k, v, mask=mask)
    assert torch.equal(out[:, :, 1], torch.zeros(B, H, D))
    (grad,) = torch.autograd.grad(out.sum(), q)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("shape", [(5, 1), (1, 5), (1, 1), (H, 5, 5), (B, 1, 5, 5)])
def test_attention_weights_accept_every_broadcastable_bias(shape):
    q, k, _ = qkv(5, 5)
    bias = torch.randn(shape)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D) + bias, dim=-1)
    torch.testing.assert_close(attention_weights(q, k, bias=bias), expected)


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------


def test_causal_mask_is_lower_triangular_and_lets_the_last_query_see_every_key():
    assert torch.equal(causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril())
    # two decoding queries at positions 4 and 5 of six keys
    assert causal_mask(2, 6).tolist() == [[True] * 5 + [False], [True] * 6]


def test_padding_mask_marks_the_real_tokens():
    keys = padding_mask(torch.tensor([3, 1]), 4)
    assert keys.shape == (2, 1, 1, 4)
    assert keys[:, 0, 0].tolist() == [
        [True, True, True, False],
        [True, False, False, False],
    ]
    both = padding_mask(torch.tensor([2]), 3, queries=True)[0, 0]
    assert both.tolist() == [
        [True, True, False],
        [True, True, False],
        [False, False, False],
    ]


# ---------------------------------------------------------------------------
# the kernels, with a plain tensor bias
# ---------------------------------------------------------------------------


class FixedBias(PositionScheme):
    """A scheme whose bias is a given tensor, to test the kernels without any encoding."""

    def __init__(self, bias):
        super().__init__()
        self.fixed = bias

    def bias(self, q, k, *, causal):
        return self.fixed


@pytest.mark.parametrize("kernel", AVAILABLE_KERNELS)
@pytest.mark.parametrize("bias_shape", [None, (H, 3, 6), (B, H, 3, 6), (3, 1), (1, 6)])
def test_every_kernel_matches_the_loop_with_bias_padding_and_causal_decoding(
    kernel, bias_shape
):
    q, k, v = qkv(3, 6, seed=1)
    bias = (
        None
        if bias_shape is None
        else torch.randn(bias_shape, generator=torch.Generator().manual_seed(2))
    )
    padding = padding_mask(torch.tensor([6, 4]), 6)  # (B, 1, 1, 6)
    got = attend(q, k, v, FixedBias(bias), mask=padding, causal=True, kernel=kernel)
    # queries are the last 3 of 6 positions: query row r sits at 3 + r
    visible = torch.zeros(B, H, 3, 6, dtype=torch.bool)
    for b, length in enumerate((6, 4)):
        for r in range(3):
            visible[b, :, r, : min(3 + r + 1, length)] = True
    full_bias = None if bias is None else bias.expand(B, H, 3, 6)
    torch.testing.assert_close(
        got.double(), loop_attention(q, k, v, full_bias, visible), atol=1e-5, rtol=0
    )


def test_attend_and_the_layer_share_one_default_kernel():
    assert DEFAULT_KERNEL in KERNELS
    assert attend.__kwdefaults__["kernel"] == DEFAULT_KERNEL
    assert AttentionConfig(d_model=8, num_heads=2).kernel == DEFAULT_KERNEL


@pytest.mark.parametrize("kernel", AVAILABLE_KERNELS)
def test_padded_queries_get_zeros_in_every_kernel(kernel):
    q, k, v = qkv(6, 6)
    mask = padding_mask(torch.tensor([6, 2]), 6, queries=True)  # (B, 1, T, T)
    with torch.no_grad():
        out = attend(q, k, v, mask=mask, causal=True, kernel=kernel)
    assert not out.isnan().any()
    assert torch.equal(out[1, :, 2:], torch.zeros(H, 4, D))


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(H, 6, 5), (H + 1, 6, 6), (3, H, 6, 6), (1, 1, 1, 6, 6), (6,)]
)
@pytest.mark.parametrize("kernel", AVAILABLE_KERNELS)
def test_bias_that_does_not_match_q_and_k_raises(shape, kernel):
    q, k, v = qkv(6, 6)
    with pytest.raises(ValueError, match="does not match q"):
        attend(q, k, v, FixedBias(torch.zeros(shape)), kernel=kernel)


def test_bad_masks_kernels_and_shapes_raise():
    q, k, v = qkv(4, 4)
    with pytest.raises(ValueError, match="mask must be boolean"):
        attend(q, k, v, mask=torch.ones(4, 4))
    with pytest.raises(ValueError, match="mask has shape"):
        attend(q, k, v, mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="kernel must be one of"):
        attend(q, k, v, kernel="cuda")
    with pytest.raises(ValueError, match=r"\(batch, heads, seq, head_dim\)"):
        attend(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="must share head_dim"):
        attention_weights(q, k[..., :4])
    with pytest.raises(ValueError, match="lengths must be a 1-D integer tensor"):
        padding_mask(torch.tensor([[3]]), 4)
    with pytest.raises(ValueError, match="q_len=5 is larger than k_len=4"):
        attend(*qkv(5, 4), causal=True)


def test_config_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        AttentionConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        AttentionConfig(d_model=32, num_heads=0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        AttentionConfig(d_model=32, num_heads=4, kernel="fast")
    assert AttentionConfig(d_model=32, num_heads=4).head_dim == 8


def test_layer_rejects_input_of_the_wrong_width():
    layer = MultiHeadAttention(AttentionConfig(d_model=16, num_heads=2))
    with pytest.raises(
        ValueError, match=r"x must have shape \(batch, seq, d_model=16\)"
    ):
        layer(torch.zeros(1, 3, 8))


def test_attention_modules_import_no_encoding():
    """core.py, flex.py and inputs.py import no encoding module but positions."""
    allowed = {
        "pe_tutorial._validation",
        "pe_tutorial.devices",
        "pe_tutorial.encodings.positions",
        "pe_tutorial.attention.inputs",
        "pe_tutorial.attention.flex",
        "pe_tutorial.attention.position_scheme",
    }
    folder = Path(__file__).resolve().parent.parent / "pe_tutorial" / "attention"
    for name in ("core.py", "flex.py", "inputs.py"):
        imported = set()
        for node in ast.walk(ast.parse((folder / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = ["pe_tutorial", "attention"][: 3 - node.level]
                imported.add(".".join(base + [node.module]))
        assert imported <= allowed, (name, imported - allowed)
