"""Tests for pe_tutorial.attention.schemes: each adapter against the papers' formulas, in every kernel.

The references in reference.py use explicit absolute positions and plain
loops, so a scheme that misplaces its queries when decoding, drops a parameter
(RoPE's base, its pairing, ALiBi's slopes) or adds its bias to the wrong head
fails here even when all three kernels agree with each other.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial.attention.core import (
    AttentionConfig,
    MultiHeadAttention,
    attend,
    padding_mask,
)
from pe_tutorial.attention.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    NoPositionScheme,
    QKTableScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from pe_tutorial.encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)
from pe_tutorial.encodings.alibi import ALiBiBias
from pe_tutorial.encodings.disentangled import DisentangledRelativeBias
from pe_tutorial.encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
)
from pe_tutorial.encodings.rope import RotaryEmbedding

from reference import (
    AVAILABLE_KERNELS,
    causal_visibility,
    scheme_attention,
    softmax_attention,
)

B, H, D = 2, 4, 8


def make_schemes():
    """One of every scheme, with non-default settings and learned tables large enough to matter."""
    torch.manual_seed(0)
    made = {
        "none": NoPositionScheme(),
        "rope-half-base-500": RotaryScheme(RotaryEmbedding(D, base=500.0)),
        "rope-interleaved-partial": RotaryScheme(
            RotaryEmbedding(D, pairing="interleaved", rotary_dim=4, base=50.0)
        ),
        "alibi": ALiBiScheme(ALiBiBias(H)),
        "t5-bidirectional": T5BiasScheme(
            T5RelativeBias(H, num_buckets=8, max_distance=12)
        ),
        "t5-causal": T5BiasScheme(
            T5RelativeBias(H, bidirectional=False, num_buckets=8, max_distance=12)
        ),
        "shaw": ShawScheme(ShawRelativePosition(2, D)),
        "shaw-values": ShawScheme(ShawRelativePosition(2, D, values=True)),
        "deberta-buckets": DisentangledScheme(
            DisentangledRelativeBias(H, D, position_buckets=4, max_relative_positions=8)
        ),
        "projected-c2p": DisentangledScheme(
            DisentangledRelativeBias(H, D, max_relative_positions=2, terms=("c2p",))
        ),
        "cope": CoPEScheme(ContextualPositionBias(4, D)),
    }
    for scheme in made.values():
        for p in scheme.parameters():
            torch.nn.init.normal_(p)
    return made


def kernels_for(scheme):
    """The kernels a scheme runs on: a value-side term needs the naive kernel's probabilities."""
    return ("naive",) if scheme.needs_weights else AVAILABLE_KERNELS


SCHEMES = make_schemes()


def qkv(q_len, k_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, n, D, generator=g) for n in (q_len, k_len, k_len))


CASES = [
    (name, causal)
    for name in SCHEMES
    for causal in (True, False)
    if causal or name != "cope"  # CoPE is causal only
]


@pytest.mark.parametrize("name, causal", CASES)
@pytest.mark.parametrize("q_len, k_len", [(6, 6), (2, 6)], ids=["full", "decoding"])
def test_every_scheme_in_every_kernel_matches_the_papers_formula(
    name, causal, q_len, k_len
):
    q, k, v = qkv(q_len, k_len, seed=1)
    scheme = SCHEMES[name]
    mask = padding_mask(torch.tensor([k_len, k_len - 1]), k_len)
    expected = scheme_attention(scheme, q, k, v, causal=causal, mask=mask)
    for kernel in kernels_for(scheme):
        with torch.no_grad():
            got = attend(q, k, v, scheme, mask=mask, causal=causal, kernel=kernel)
        torch.testing.assert_close(
            got.double(), expected, atol=1e-5, rtol=0, msg=f"kernel {kernel}"
        )


@pytest.mark.parametrize("name", [n for n, _ in CASES if _])
def test_decoding_equals_the_last_rows_of_the_full_pass(name):
    """Queries are the last q_len positions: one step against a cache sees what the full pass saw."""
    q, k, v = qkv(7, 7, seed=2)
    scheme = SCHEMES[name]
    kernel = kernels_for(scheme)[-1]
    full = attend(q, k, v, scheme, causal=True, kernel=kernel)
    for q_len in (1, 3):
        step = attend(q[:, :, -q_len:], k, v, scheme, causal=True, kernel=kernel)
        torch.testing.assert_close(step, full[:, :, -q_len:], atol=1e-5, rtol=0)


def test_rope_decoding_rotates_the_query_by_its_own_position():
    """With one query against 6 keys, the query is rotated by 5, not 0 (checked with a plain formula)."""
    rope = RotaryEmbedding(2, base=10.0)
    q = torch.tensor([1.0, 0.0]).expand(1, 1, 1, 2)
    k = torch.zeros(1, 1, 6, 2)
    q_rot, _ = RotaryScheme(rope).rotate(q, k)
    # head_dim 2: one pair, theta = 1; (1, 0) turned by 5 radians
    torch.testing.assert_close(
        q_rot[0, 0, 0], torch.tensor([math.cos(5.0), math.sin(5.0)])
    )


@settings(max_examples=15, deadline=None)
@given(shift=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_rope_scheme_scores_depend_only_on_relative_position(shift, seed):
    """Prepend `shift` masked-out keys: the last 4 queries attend exactly as before."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(1, 1, 4, D) for _ in range(3))
    pad = torch.randn(1, 1, shift, D)
    scheme = SCHEMES["rope-half-base-500"]
    q_long, k_long, v_long = (torch.cat((pad, t), dim=2) for t in (q, k, v))
    mask = (torch.arange(shift + 4) >= shift)[None, None, None, :]
    shifted = attend(q_long, k_long, v_long, scheme, mask=mask, kernel="naive")[
        :, :, shift:
    ]
    assert torch.allclose(shifted, attend(q, k, v, scheme, kernel="naive"), atol=1e-4)


def test_alibi_scheme_is_not_permutation_equivariant_but_nope_is():
    q, k, v = qkv(6, 6, seed=5)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    nope = attend(q[:, :, perm], k[:, :, perm], v[:, :, perm], NoPositionScheme())
    assert torch.allclose(
        nope, attend(q, k, v, NoPositionScheme())[:, :, perm], atol=1e-6
    )
    alibi = attend(q[:, :, perm], k[:, :, perm], v[:, :, perm], SCHEMES["alibi"])
    assert not torch.allclose(
        alibi, attend(q, k, v, SCHEMES["alibi"])[:, :, perm], atol=1e-3
    )


def test_alibi_dense_bias_and_flex_read_the_one_slopes_buffer():
    """Change the slopes buffer: every kernel follows it, so none keeps a copy of its own."""
    scheme = ALiBiScheme(ALiBiBias(H))
    assert [name for name, _ in scheme.named_buffers()] == ["encoding.slopes"]
    new_slopes = torch.tensor([0.9, 0.5, 0.3, 0.1])
    scheme.encoding.slopes.copy_(new_slopes)
    q, k, v = qkv(5, 5, seed=3)
    i = torch.arange(5)
    # (H, T, T)
    bias = -new_slopes[:, None, None] * (i[:, None] - i[None, :]).clamp(min=0)
    expected = softmax_attention(q, k, v, bias, causal_visibility(5, 5))
    for kernel in AVAILABLE_KERNELS:
        with torch.no_grad():
            got = attend(q, k, v, scheme, causal=True, kernel=kernel)
        torch.testing.assert_close(
            got.double(), expected, atol=1e-5, rtol=0, msg=kernel
        )


def test_shaw_attention_is_q_dot_k_plus_a():
    """Shaw et al.'s score q_i . (k_j + a_ij) / sqrt(D), with the a_ij tensor built explicitly."""
    q, k, v = qkv(5, 5, seed=4)
    scheme = SCHEMES["shaw"]
    index = (torch.arange(5)[None, :] - torch.arange(5)[:, None]).clamp(-2, 2) + 2
    a = scheme.encoding.weight[index]  # (T, T, D): every a_ij
    scores = torch.einsum("bhid,bhijd->bhij", q, k[:, :, None, :, :] + a) / math.sqrt(D)
    expected = torch.softmax(scores, -1) @ v
    assert torch.allclose(attend(q, k, v, scheme, kernel="sdpa"), expected, atol=1e-5)


@pytest.mark.parametrize(
    "name", ["alibi", "t5-bidirectional", "shaw", "shaw-values", "deberta-buckets"]
)
def test_padding_is_the_same_as_dropping_the_padded_keys(name):
    q, k, v = qkv(7, 7, seed=6)
    mask = padding_mask(torch.tensor([7, 4]), 7)
    kernel = kernels_for(SCHEMES[name])[-1]
    padded = attend(q, k, v, SCHEMES[name], mask=mask, kernel=kernel)
    # sequence 1 alone, truncated to its 4 real tokens (queries at positions 0..3 as before)
    alone = attend(
        q[1:, :, :4], k[1:, :, :4], v[1:, :, :4], SCHEMES[name], kernel="naive"
    )
    assert torch.allclose(padded[1:, :, :4], alone, atol=1e-5)


@pytest.mark.parametrize("kernel", AVAILABLE_KERNELS)
@pytest.mark.parametrize("name", list(SCHEMES))
def test_padded_queries_get_zeros_and_finite_gradients(name, kernel):
    q, k, v = (t.requires_grad_(True) for t in qkv(6, 6))
    mask = padding_mask(torch.tensor([6, 2]), 6, queries=True)
    # FlexAttention has no backward on the CPU (torch 2.13): run it on detached inputs
    inputs = (q, k, v) if kernel != "flex" else (q.detach(), k.detach(), v.detach())
    if kernel not in kernels_for(SCHEMES[name]):
        with pytest.raises(ValueError, match="kernel='naive'"):
            attend(*inputs, SCHEMES[name], mask=mask, causal=True, kernel=kernel)
        return
    out = attend(*inputs, SCHEMES[name], mask=mask, causal=True, kernel=kernel)
    assert not out.isnan().any()
    assert torch.equal(out[1, :, 2:], torch.zeros(H, 4, D))
    if kernel != "flex":
        (grad,) = torch.autograd.grad(out.sum(), q)
        assert torch.isfinite(grad).all() and torch.equal(
            grad[1, :, 2:], torch.zeros(H, 4, D)
        )


# ---------------------------------------------------------------------------
# the absolute scheme
# ---------------------------------------------------------------------------


def test_absolute_scheme_adds_the_closed_form_sinusoids():
    x = torch.zeros(2, 5, 6)
    added = AbsoluteScheme(SinusoidalPositionalEmbedding(6, base=100.0)).add_to_input(x)
    for p in range(5):
        for i in range(3):
            angle = p / 100.0 ** (2 * i / 6)
            assert added[1, p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert added[1, p, 2 * i + 1].item() == pytest.approx(
                math.cos(angle), abs=1e-6
            )


def test_learned_absolute_scheme_adds_its_rows_and_refuses_positions_past_its_table():
    table = LearnedPositionalEmbedding(4, 6)
    x = torch.randn(2, 3, 6)
    torch.testing.assert_close(
        AbsoluteScheme(table).add_to_input(x), x + table.weight[:3]
    )
    with pytest.raises(ValueError, match="past the learned table"):
        AbsoluteScheme(table).add_to_input(torch.zeros(1, 5, 6))


# ---------------------------------------------------------------------------
# bad input: schemes that do not fit, wrong modules, wrong devices
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scheme, config, message",
    [
        (
            ALiBiScheme(ALiBiBias(8)),
            AttentionConfig(32, 4),
            "built for num_heads=8.*has num_heads=4",
        ),
        (
            T5BiasScheme(T5RelativeBias(2)),
            AttentionConfig(32, 4),
            "built for num_heads=2.*has num_heads=4",
        ),
        (
            RotaryScheme(RotaryEmbedding(16)),
            AttentionConfig(32, 4),
            "built for head_dim=16.*has head_dim=8",
        ),
        (
            ShawScheme(ShawRelativePosition(3, 4)),
            AttentionConfig(32, 4),
            "built for head_dim=4.*has head_dim=8",
        ),
        (
            CoPEScheme(ContextualPositionBias(5, 16)),
            AttentionConfig(32, 4),
            "built for head_dim=16.*has head_dim=8",
        ),
        (
            AbsoluteScheme(SinusoidalPositionalEmbedding(16)),
            AttentionConfig(32, 4),
            "built for d_model=16.*has d_model=32",
        ),
    ],
)
def test_a_scheme_that_does_not_fit_the_layer_fails_at_construction(
    scheme, config, message
):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(config, scheme)


def test_attend_checks_the_scheme_against_q():
    q, k, v = qkv(4, 4)
    with pytest.raises(ValueError, match="built for num_heads=8.*has num_heads=4"):
        attend(q, k, v, ALiBiScheme(ALiBiBias(8)))


def test_unknown_pairing_fails_when_the_rope_scheme_is_built():
    with pytest.raises(ValueError, match="pairing must be 'half'"):
        RotaryScheme(RotaryEmbedding(8, pairing="neox"))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RotaryScheme(8), "RotaryScheme wraps a RotaryEmbedding, got int"),
        (lambda: ALiBiScheme(ALiBiBias), "ALiBiScheme wraps a ALiBiBias, got type"),
        (
            lambda: AbsoluteScheme(torch.nn.Embedding(4, 4)),
            "SinusoidalPositionalEmbedding or LearnedPositional",
        ),
    ],
)
def test_a_scheme_wraps_its_own_encoding_module(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_cope_needs_causal_attention():
    with pytest.raises(ValueError, match="needs causal=True"):
        attend(*qkv(4, 4), SCHEMES["cope"], causal=False)


def test_a_scheme_on_another_device_than_q_raises():
    q, k, v = (t.to("meta") for t in qkv(4, 4))
    with pytest.raises(
        ValueError, match=r"ALiBiScheme is on cpu but the queries are on meta"
    ):
        attend(q, k, v, ALiBiScheme(ALiBiBias(H)))


# --- the survey's table on queries and keys (chapter 9; chapter 4's A = I) -------


def test_a_table_on_queries_and_keys_gives_the_four_terms_of_chapter_4():
    """(q_i + P[i]) . (k_j + P[j]) = q_i.k_j + q_i.P[j] + P[i].k_j + P[i].P[j], term
    by term in a loop; with the sinusoidal table the last term is sum cos((i-j) w)."""
    torch.manual_seed(0)
    D, T = 8, 6
    table = SinusoidalPositionalEmbedding(D)
    q, k = torch.randn(2, 1, 1, T, D, dtype=torch.float64)
    q_in, k_in = QKTableScheme(table).rotate(q, k)
    scores = q_in @ k_in.transpose(-1, -2)
    omega = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    P = table(torch.arange(T)).double()
    for i in range(T):
        for j in range(T):
            position_term = torch.cos((i - j) * omega).sum()
            assert torch.allclose(P[i] @ P[j], position_term)
            four = q[0, 0, i] @ k[0, 0, j] + q[0, 0, i] @ P[j] + P[i] @ k[0, 0, j]
            assert torch.allclose(scores[0, 0, i, j], four + position_term)


def test_a_table_on_queries_and_keys_puts_a_decoding_query_at_the_last_position():
    torch.manual_seed(0)
    table = LearnedPositionalEmbedding(10, 4)
    q, k = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 7, 4)
    q_in, k_in = QKTableScheme(table).rotate(q, k)
    assert torch.equal(q_in, q + table.weight[6])
    assert torch.equal(k_in, k + table.weight[:7])
    with pytest.raises(ValueError, match="QKTableScheme wraps a"):
        QKTableScheme(ALiBiBias(2))
