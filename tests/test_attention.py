"""Tests for pe_tutorial.attention: the reference attention, the three kernels, every position scheme, masks."""

import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.absolute import sinusoidal_encoding
from pe_tutorial.alibi import alibi_slopes
from pe_tutorial.attention import (
    KERNELS,
    ALiBiPosition,
    AbsolutePosition,
    AttentionConfig,
    ContextualPosition,
    MultiHeadAttention,
    NoPosition,
    PositionScheme,
    RotaryPosition,
    ShawPosition,
    T5Position,
    attend,
    attention_weights,
    dot_product_attention,
    flex_available,
    padding_mask,
)

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
needs_flex = pytest.mark.skipif(not flex_available(), reason="this torch has no FlexAttention")

B, H, D = 2, 4, 8


def schemes():
    """One instance of every scheme, with learned tables set to values large enough to matter."""
    torch.manual_seed(0)
    made = {
        "none": NoPosition(),
        "absolute": AbsolutePosition(H * D),
        "rope": RotaryPosition(),
        "alibi": ALiBiPosition(H),
        "t5-bidirectional": T5Position(H, num_buckets=8, max_distance=12),
        "t5-causal": T5Position(H, bidirectional=False, num_buckets=8, max_distance=12),
        "shaw": ShawPosition(3, D),
        "cope": ContextualPosition(6, D),
    }
    for scheme in made.values():
        for p in scheme.parameters():
            torch.nn.init.normal_(p)
    return made


SCHEMES = schemes()


def qkv(q_len, k_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, n, D, generator=g) for n in (q_len, k_len, k_len))


# ---------------------------------------------------------------------------
# the reference attention of chapter 1 keeps its behaviour
# ---------------------------------------------------------------------------


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
                    s = (q[b, h, i] @ k[b, h, j]).item() / math.sqrt(q.shape[-1])
                    logits.append((j, s + (0.0 if bias is None else bias[b, h, i, j].item())))
                if not logits:
                    continue  # no key: zeros
                top = max(s for _, s in logits)
                weights = [(j, math.exp(s - top)) for j, s in logits]
                total = sum(w for _, w in weights)
                for j, w in weights:
                    out[b, h, i] += w / total * v[b, h, j].double()
    return out


def test_dot_product_attention_matches_a_loop_with_bias_and_mask():
    q, k, v = qkv(5, 5)
    bias = torch.randn(B, H, 5, 5)
    mask = torch.rand(B, H, 5, 5) > 0.3
    mask[0, 0, 2] = False  # one query with no key
    got = dot_product_attention(q, k, v, bias=bias, mask=mask)
    assert torch.allclose(got.double(), loop_attention(q, k, v, bias, mask), atol=1e-5)
    assert torch.equal(got[0, 0, 2], torch.zeros(D))
    weights = attention_weights(q, k, mask=mask)
    assert torch.allclose(weights.sum(-1)[mask.any(-1)], torch.ones(int(mask.any(-1).sum())))


# ---------------------------------------------------------------------------
# the three kernels agree, for every scheme
# ---------------------------------------------------------------------------


# the absolute scheme acts on the input (tested with MultiHeadAttention); CoPE is causal only
CASES = [(name, causal) for name in SCHEMES if name != "absolute" for causal in (True, False)
         if causal or name != "cope"]


@pytest.mark.parametrize("name, causal", CASES)
@pytest.mark.parametrize("q_len, k_len", [(7, 7), (3, 7)])
def test_kernels_agree_for_every_scheme(name, causal, q_len, k_len):
    q, k, v = qkv(q_len, k_len)
    scheme = SCHEMES[name]
    kernels = KERNELS if flex_available() else ("naive", "sdpa")
    mask = padding_mask(torch.tensor([k_len, k_len - 3]), k_len)
    outs = {kernel: attend(q, k, v, scheme, mask=mask, causal=causal, kernel=kernel) for kernel in kernels}
    for kernel, out in outs.items():
        assert out.shape == (B, H, q_len, D)
        assert torch.allclose(out, outs["naive"], atol=1e-5), kernel


@pytest.mark.parametrize("name", ["alibi", "t5-causal", "shaw", "rope", "cope"])
def test_naive_kernel_with_a_scheme_matches_a_loop(name):
    """Build each scheme's score by hand, pair by pair, and run the loop attention on it."""
    q, k, v = qkv(6, 6, seed=3)
    scheme = SCHEMES[name]
    bias = torch.zeros(B, H, 6, 6)
    q_used, k_used = q, k
    for b in range(B):
        for h in range(H):
            for i in range(6):
                for j in range(i + 1):
                    if name == "alibi":
                        bias[b, h, i, j] = -alibi_slopes(H)[h] * (i - j)
                    elif name == "t5-causal":
                        table = scheme.table
                        bias[b, h, i, j] = table.weight[table.bucket(torch.tensor(j - i)), h]
                    elif name == "shaw":
                        a_ij = scheme.table.weight[min(max(j - i, -3), 3) + 3]
                        bias[b, h, i, j] = q[b, h, i] @ a_ij / math.sqrt(D)
                    elif name == "cope":
                        gates = [torch.sigmoid(q[b, h, i] @ k[b, h, t] / math.sqrt(D)).item() for t in range(j, i + 1)]
                        p = min(sum(gates), 5.0)
                        e = scheme.table.weight
                        lo, hi = math.floor(p), math.ceil(p)
                        bias[b, h, i, j] = q[b, h, i] @ ((1 - (p - lo)) * e[lo] + (p - lo) * e[hi]) / math.sqrt(D)
    if name == "rope":
        from pe_tutorial.rope import apply_rope

        q_used, k_used = apply_rope(q), apply_rope(k)
    causal = torch.ones(6, 6, dtype=torch.bool).tril().expand(B, H, 6, 6)
    expected = loop_attention(q_used, k_used, v, bias, causal)
    got = attend(q, k, v, scheme, causal=True, kernel="naive")
    assert torch.allclose(got.double(), expected, atol=1e-5)


def test_shaw_attention_is_q_dot_k_plus_a():
    """Shaw et al.'s score q_i . (k_j + a_ij) / sqrt(D), written with the a_ij tensor built explicitly."""
    q, k, v = qkv(5, 5, seed=4)
    scheme = SCHEMES["shaw"]
    index = (torch.arange(5)[None, :] - torch.arange(5)[:, None]).clamp(-3, 3) + 3
    a = scheme.table.weight[index]  # (T, T, D): every a_ij
    scores = torch.einsum("bhid,bhijd->bhij", q, k[:, :, None, :, :] + a) / math.sqrt(D)
    expected = torch.softmax(scores, -1) @ v
    assert torch.allclose(attend(q, k, v, scheme, kernel="sdpa"), expected, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(shift=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_rope_scheme_scores_depend_only_on_relative_position(shift, seed):
    """Rotating by positions m and n leaves scores that see only n - m: prepend `shift` keys and compare."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(1, 1, 4, D) for _ in range(3))
    pad = torch.randn(1, 1, shift, D)
    scheme = SCHEMES["rope"]
    # the last 4 queries over all keys, with keys before them masked out, equal the unshifted attention
    q_long, k_long, v_long = (torch.cat((pad, t), dim=2) for t in (q, k, v))
    mask = (torch.arange(shift + 4) >= shift)[None, None, None, :]
    shifted = attend(q_long, k_long, v_long, scheme, mask=mask, kernel="naive")[:, :, shift:]
    assert torch.allclose(shifted, attend(q, k, v, scheme, kernel="naive"), atol=1e-4)


def test_alibi_scheme_is_shift_invariant_but_nope_is_permutation_equivariant():
    q, k, v = qkv(6, 6, seed=5)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    nope = attend(q[:, :, perm], k[:, :, perm], v[:, :, perm], NoPosition())
    assert torch.allclose(nope, attend(q, k, v, NoPosition())[:, :, perm], atol=1e-6)
    alibi = attend(q[:, :, perm], k[:, :, perm], v[:, :, perm], SCHEMES["alibi"])
    assert not torch.allclose(alibi, attend(q, k, v, SCHEMES["alibi"])[:, :, perm], atol=1e-3)


# ---------------------------------------------------------------------------
# masks: padding works with every scheme, empty rows give zeros
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in SCHEMES if n != "absolute"])
def test_padded_queries_get_zeros_and_no_nan_in_every_kernel(name):
    q, k, v = qkv(6, 6)
    for tensor in (q, k, v):
        tensor.requires_grad_(True)
    mask = padding_mask(torch.tensor([6, 2]), 6, queries=True)  # (B, 1, T, T)
    kernels = KERNELS if flex_available() else ("naive", "sdpa")
    for kernel in kernels:
        # FlexAttention has no backward on the CPU (torch 2.13): run it on detached inputs
        inputs = (q, k, v) if kernel != "flex" else (q.detach(), k.detach(), v.detach())
        out = attend(*inputs, SCHEMES[name], mask=mask, causal=True, kernel=kernel)
        assert not out.isnan().any(), kernel
        assert torch.equal(out[1, :, 2:], torch.zeros(H, 4, D)), kernel
        if kernel != "flex":
            (grad,) = torch.autograd.grad(out.sum(), q)
            assert torch.isfinite(grad).all() and torch.equal(grad[1, :, 2:], torch.zeros(H, 4, D)), kernel


@pytest.mark.parametrize("name", ["alibi", "t5-bidirectional", "shaw"])
def test_padding_is_the_same_as_dropping_the_padded_keys(name):
    q, k, v = qkv(7, 7, seed=6)
    mask = padding_mask(torch.tensor([7, 4]), 7)
    padded = attend(q, k, v, SCHEMES[name], mask=mask, kernel="sdpa")
    # sequence 1 alone, truncated to its 4 real tokens (queries are then at positions 0..3 as before)
    alone = attend(q[1:, :, :4], k[1:, :, :4], v[1:, :, :4], SCHEMES[name], kernel="naive")
    assert torch.allclose(padded[1:, :, :4], alone, atol=1e-5)


# ---------------------------------------------------------------------------
# the module and bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SCHEMES))
def test_multi_head_attention_runs_every_scheme_and_kernels_agree(name):
    torch.manual_seed(0)
    layer = MultiHeadAttention(AttentionConfig(d_model=H * D, num_heads=H, causal=True), SCHEMES[name])
    x = torch.randn(B, 7, H * D)
    mask = padding_mask(torch.tensor([7, 5]), 7)
    with torch.no_grad():  # FlexAttention has no backward on the CPU
        out = layer(x, mask)
        assert out.shape == x.shape
        assert torch.allclose(layer(x, mask, kernel="naive"), out, atol=1e-5)
        if flex_available():
            assert torch.allclose(layer(x, mask, kernel="flex"), out, atol=1e-5)


def test_absolute_scheme_adds_the_sinusoidal_table_to_the_input():
    x = torch.zeros(2, 5, 16)
    assert torch.equal(AbsolutePosition(16).add_to_input(x), sinusoidal_encoding(5, 16).expand(2, 5, 16))


def test_config_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        AttentionConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        AttentionConfig(d_model=32, num_heads=0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        AttentionConfig(d_model=32, num_heads=4, kernel="fast")
    assert AttentionConfig(d_model=32, num_heads=4).head_dim == 8


class WrongBias(PositionScheme):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def bias(self, q, k, *, causal):
        return torch.zeros(self.shape)


@pytest.mark.parametrize("shape", [(H, 6, 5), (H + 1, 6, 6), (3, H, 6, 6), (1, 1, 1, 6, 6)])
@pytest.mark.parametrize("kernel", ["naive", "sdpa", "flex"])
def test_bias_that_does_not_match_q_and_k_raises(shape, kernel):
    if kernel == "flex" and not flex_available():
        pytest.skip("no FlexAttention")
    q, k, v = qkv(6, 6)
    with pytest.raises(ValueError, match="does not match q"):
        attend(q, k, v, WrongBias(shape), kernel=kernel)


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
    with pytest.raises(ValueError, match="needs causal=True"):
        attend(q, k, v, SCHEMES["cope"], causal=False)
    with pytest.raises(ValueError, match="lengths must be a 1-D integer tensor"):
        padding_mask(torch.tensor([[3]]), 4)
