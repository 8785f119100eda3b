"""StreamingLLM's rolling cache with attention sinks, and gpt-oss's learned sinks (chapter 11).

The cache is checked against a literal reference: a loop over the tokens that
keeps a Python list of cached tokens, evicts the oldest non-sink token when
the list is full, and computes each query's attention with RoPE (or ALiBi)
written out by hand at the tokens' *slots* in that list. Then the special
cases that tie it to plain attention (no sinks: a sliding window; a cache
larger than the sequence: causal attention), a whole model decoded token by
token with a cache per layer, and the losses against chapter 9's
``length_losses`` and ``window_reference_losses``.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import pe_tutorial.attention.streaming as streaming
from pe_tutorial.attention.core import AttentionConfig, MultiHeadAttention, attend
from pe_tutorial.attention.layer_patterns import LocalAttentionScheme
from pe_tutorial.attention.local_global import sliding_window_mask
from pe_tutorial.attention.position_scheme import NoPositionScheme
from pe_tutorial.attention.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from pe_tutorial.attention.streaming import (
    RollingCache,
    learned_sink_softmax,
    rolling_cache,
)
from pe_tutorial.encodings.absolute import SinusoidalPositionalEmbedding
from pe_tutorial.encodings.alibi import ALiBiBias
from pe_tutorial.encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
)
from pe_tutorial.encodings.rope import RotaryEmbedding
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.scoring import length_losses, window_reference_losses
from pe_tutorial.lm.streaming import rolling_cache_losses

BASE = 10_000.0
HEADS, HEAD_DIM = 4, 8

# ---------------------------------------------------------------------------
# the literal reference
# ---------------------------------------------------------------------------


def streamed_caches(length: int, window: int, sinks: int) -> list[list[int]]:
    """The cache at each query, by simulation: append the token, evict the oldest non-sink."""
    cache, caches = [], []
    for i in range(length):
        cache.append(i)
        if len(cache) > sinks + window:
            del cache[
                sinks
            ]  # the first token after the sinks is the oldest in the window
        caches.append(list(cache))
    return caches


def rope_by_hand(x: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """RoPE, half pairing: pair c is (x_c, x_{c + D/2}) times e^{i m theta_c}, float64."""
    D = x.shape[-1]
    theta = BASE ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angle = torch.tensor(positions, dtype=torch.float64)[:, None] * theta  # (n, D/2)
    x = x.double()
    z = torch.complex(x[..., : D // 2], x[..., D // 2 :])
    z = z * torch.complex(angle.cos(), angle.sin())
    return torch.cat([z.real, z.imag], dim=-1)


def alibi_slope(h: int, num_heads: int) -> float:
    """m_h = 2^(-8 (h + 1) / H), H a power of two (Press et al., 2022)."""
    return 2.0 ** (-8.0 * (h + 1) / num_heads)


def streaming_reference(q, k, v, window, sinks, encoding):
    """Every query over its simulated cache; positions are the slots of the cache list.

    ``encoding`` is ``"rope"`` (q and k rotated at their slots) or ``"alibi"``
    (``-m_h (slot of query - slot of key)`` on the scores). Naive softmax, float64.
    """
    B, H, T, D = q.shape
    out = torch.zeros(B, H, T, D, dtype=torch.float64)
    for i, cache in enumerate(streamed_caches(T, window, sinks)):
        slots = list(range(len(cache)))  # the key in slot s sits at position s
        query_slot = slots[-1]  # the query is the newest token in the cache
        keys, values = k[:, :, cache].double(), v[:, :, cache].double()
        query = q[:, :, i : i + 1].double()
        if encoding == "rope":
            query, keys = rope_by_hand(query, [query_slot]), rope_by_hand(keys, slots)
        scores = query @ keys.transpose(-2, -1) / math.sqrt(D)  # (B, H, 1, n)
        if encoding == "alibi":
            for h in range(H):
                distance = torch.tensor([query_slot - s for s in slots]).double()
                scores[:, h] -= alibi_slope(h, H) * distance
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        out[:, :, i] = (weights @ values)[:, :, 0]
    return out


def qkv(length: int, seed: int = 0, batch: int = 2):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, batch, HEADS, length, HEAD_DIM, generator=generator).unbind(0)


def rope_scheme() -> RotaryScheme:
    return RotaryScheme(RotaryEmbedding(HEAD_DIM, base=BASE))


def alibi_scheme() -> ALiBiScheme:
    return ALiBiScheme(ALiBiBias(HEADS))


SCHEMES = {"rope": rope_scheme, "alibi": alibi_scheme}

# (window, sinks, T): T < C, T = C, T >> C, no sinks, a window of one, sinks only past C
SHAPES = [(4, 2, 5), (4, 2, 6), (4, 2, 23), (3, 0, 12), (1, 1, 9), (5, 4, 30)]


def test_the_simulated_cache_is_the_closed_form():
    """The reference's eviction loop keeps what the paper says: sinks, then the last window,
    and RollingCache.kept lists the same tokens in the same slots."""
    window, sinks = 4, 2
    size = window + sinks
    for i, cache in enumerate(streamed_caches(40, window, sinks)):
        assert RollingCache(window, sinks).kept(i) == cache
        if i < size:
            assert cache == list(range(i + 1))
            continue
        assert cache[:sinks] == [0, 1]
        for slot, j in enumerate(cache[sinks:], start=sinks):
            # window key j at C - 1 - (i - j): its distance to the query is i - j
            assert slot == size - 1 - (i - j)
        assert len(cache) == size


@pytest.mark.parametrize("encoding", ["rope", "alibi"])
@pytest.mark.parametrize("window,sinks,length", SHAPES)
def test_rolling_cache_matches_the_literal_reference(encoding, window, sinks, length):
    q, k, v = qkv(length, seed=length)
    got = RollingCache(window, sinks).attend(q, k, v, SCHEMES[encoding]())
    expected = streaming_reference(q, k, v, window, sinks, encoding)
    assert got.shape == q.shape
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_chunked_queries_give_the_same_rows(monkeypatch, kernel):
    """Queries past C are read a few at a time; chunks of 1, 3 or all give one result."""
    q, k, v = qkv(40)
    cache = RollingCache(5, 3)
    whole = cache.attend(q, k, v, rope_scheme(), kernel=kernel)
    for chunk in (1, 3):
        monkeypatch.setattr(streaming, "_CHUNK_QUERIES", chunk)
        torch.testing.assert_close(
            cache.attend(q, k, v, rope_scheme(), kernel=kernel), whole
        )
    expected = streaming_reference(q, k, v, 5, 3, "rope")
    torch.testing.assert_close(whole.double(), expected, atol=1e-5, rtol=1e-5)


def test_the_sinks_keep_their_positions_as_the_stream_goes_on():
    """With a sink, a query far down the stream still gives it weight (its distance stays
    C - 1 - s); without the sink the same query's output is different."""
    q, k, v = qkv(30)
    with_sink = RollingCache(4, 1).attend(q, k, v, rope_scheme())
    without = RollingCache(4, 0).attend(q, k, v, rope_scheme())
    # before the cache fills the sink changes nothing
    torch.testing.assert_close(with_sink[:, :, :4], without[:, :, :4])
    assert (with_sink[:, :, 5:] - without[:, :, 5:]).abs().amin() > 0


# ---------------------------------------------------------------------------
# equal to plain attention where it should be
# ---------------------------------------------------------------------------


def relative_schemes() -> dict[str, object]:
    return {
        "rope": rope_scheme,
        "alibi": alibi_scheme,
        "t5": lambda: T5BiasScheme(T5RelativeBias(HEADS, bidirectional=False)),
        "shaw": lambda: ShawScheme(ShawRelativePosition(3, HEAD_DIM, values=True)),
        "cope": lambda: CoPEScheme(ContextualPositionBias(12, HEAD_DIM)),
        "nope": NoPositionScheme,
    }


@pytest.mark.parametrize("name", list(relative_schemes()))
@pytest.mark.parametrize("window", [1, 3, 7])
def test_no_sinks_is_the_sliding_window_for_a_relative_scheme(name, window):
    """sinks=0: query i sees i - window < j <= i, at distances i - j, as attend's window mask."""
    torch.manual_seed(0)
    scheme = relative_schemes()[name]()
    kernel = "naive" if scheme.needs_weights else "sdpa"
    q, k, v = qkv(20, seed=window)
    got = RollingCache(window).attend(q, k, v, scheme, kernel=kernel)
    mask = sliding_window_mask(20, window)
    expected = attend(q, k, v, scheme, mask=mask, causal=True, kernel=kernel)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["rope", "alibi", "nope"])
@pytest.mark.parametrize("window,sinks", [(8, 2), (10, 0), (3, 9)])
def test_a_cache_as_long_as_the_sequence_is_causal_attention(name, window, sinks):
    scheme = relative_schemes()[name]()
    q, k, v = qkv(10)
    got = RollingCache(window, sinks).attend(q, k, v, scheme)
    torch.testing.assert_close(got, attend(q, k, v, scheme, causal=True))


def test_values_may_be_wider_than_queries_and_keys():
    q, k, _ = qkv(20)
    v = torch.randn(2, HEADS, 20, 3)
    got = RollingCache(5).attend(q, k, v, rope_scheme())
    mask = sliding_window_mask(20, 5)
    torch.testing.assert_close(
        got, attend(q, k, v, rope_scheme(), mask=mask, causal=True)
    )


def test_rows_before_the_cache_fills_are_causal_attention():
    """The prefill rows i < C are plain causal rows, whatever follows them."""
    q, k, v = qkv(30)
    got = RollingCache(5, 3).attend(q, k, v, rope_scheme())
    plain = attend(q, k, v, rope_scheme(), causal=True)
    torch.testing.assert_close(got[:, :, :8], plain[:, :, :8])
    assert not torch.allclose(got[:, :, 8:], plain[:, :, 8:])


def test_gradients_flow_through_the_gathered_cache():
    q, k, v = (t.requires_grad_() for t in qkv(16))
    RollingCache(4, 2).attend(q, k, v, rope_scheme()).sum().backward()
    # key 7 is in the windows of queries 7 .. 10 only, but every grad is finite
    assert all(t.grad is not None and t.grad.isfinite().all() for t in (q, k, v))
    assert k.grad[:, :, 0].abs().sum() > 0  # a sink: seen by every query


# ---------------------------------------------------------------------------
# a whole model
# ---------------------------------------------------------------------------


def lively_model(scheme: str = "rope", num_layers: int = 2, **options):
    """A small ByteTransformer with weights large enough that attention matters."""
    torch.manual_seed(0)
    config = ModelConfig(
        scheme=scheme,
        d_model=32,
        num_heads=2,
        num_layers=num_layers,
        max_positions=32,
        **options,
    )
    model = ByteTransformer(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                module.weight.normal_(0.0, 0.3)
    return model


def tokens(length: int, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(
        0, 256, (batch, length), generator=torch.Generator().manual_seed(seed)
    )


def decode_token_by_token(model, x_tokens, window, sinks):
    """Logits of a pre-norm ByteTransformer decoded one token at a time with a rolling
    cache per layer: unrotated keys and values appended, the oldest non-sink evicted,
    the new query attending to the cache (``attend`` puts it at the cache's last slot)."""
    caches = [([], []) for _ in model.blocks]
    logits = []
    for t in range(x_tokens.shape[1]):
        x = model.embed(x_tokens[:, t : t + 1]) * model.embed_scale  # (B, 1, d)
        for block, (keys, values) in zip(model.blocks, caches, strict=True):
            layer = block.attention
            q, k, v = layer.heads(block.norm1(x))  # (B, H, 1, D) each
            keys.append(k)
            values.append(v)
            if len(keys) > sinks + window:
                del keys[sinks], values[sinks]
            y = attend(
                q, torch.cat(keys, 2), torch.cat(values, 2), layer.scheme, causal=True
            )
            x = x + layer.out(y.transpose(1, 2).reshape(x.shape))
            x = x + block.mlp(block.norm2(x))
        logits.append(F.linear(model.final_norm(x), model.embed.weight))
    return torch.cat(logits, dim=1)


@torch.no_grad()
@pytest.mark.parametrize("scheme", ["rope", "alibi"])
@pytest.mark.parametrize("window,sinks", [(4, 2), (6, 0)])
def test_one_pass_is_token_by_token_decoding(scheme, window, sinks):
    """Every layer's rolling cache in one pass equals decoding with a cache per layer,
    each token's hidden states computed with its own cache in the layers below."""
    model = lively_model(scheme, num_layers=2)
    x = tokens(20)
    with rolling_cache(model, window, sinks):
        got = model(x)
    expected = decode_token_by_token(model, x, window, sinks)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@torch.no_grad()
@pytest.mark.parametrize("scheme", ["rope", "alibi", "t5", "nope", "local-global"])
def test_a_cache_longer_than_the_text_changes_nothing(scheme):
    model = lively_model(scheme, local_window=4, global_every=2)
    x = tokens(24)
    with rolling_cache(model, window=24, sinks=3):
        got = model(x)
    torch.testing.assert_close(got, model(x))


@torch.no_grad()
def test_no_sinks_is_every_layer_windowed():
    """sinks=0 is the same model with every layer's scheme wrapped in the window."""
    model = lively_model("rope")
    windowed = copy.deepcopy(model)
    for block in windowed.blocks:
        block.attention.scheme = LocalAttentionScheme(block.attention.scheme, 5)
    x = tokens(30)
    with rolling_cache(model, window=5):
        got = model(x)
    torch.testing.assert_close(got, windowed(x), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, model(x), atol=1e-3)


@torch.no_grad()
def test_irope_layers_read_through_the_cache():
    """Llama 4's pattern (chunked RoPE layers, tempered NoPE layers) runs through the
    cache; its windows and query scale are evaluated at cache positions."""
    model = lively_model("irope", local_window=4, global_every=2)
    x = tokens(30)
    with rolling_cache(model, window=6, sinks=2):
        got = model(x)
    assert got.isfinite().all()
    torch.testing.assert_close(got[:, :8], model(x)[:, :8])


def layers(model):
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


@torch.no_grad()
def test_the_context_restores_plain_attention_even_after_an_error():
    model = lively_model("rope")
    x = tokens(30)
    plain = model(x)
    with rolling_cache(model, window=4, sinks=1) as cache:
        assert all(layer.cache is cache for layer in layers(model))
        assert str(cache) == "rolling cache: 1 sinks + a window of 4"
        with rolling_cache(model, window=8) as inner:
            assert all(layer.cache is inner for layer in layers(model))
        assert all(layer.cache is cache for layer in layers(model))
    assert all(layer.cache is None for layer in layers(model))
    torch.testing.assert_close(model(x), plain)
    with pytest.raises(RuntimeError, match="boom"):
        with rolling_cache(model, window=4):
            raise RuntimeError("boom")
    assert all(layer.cache is None for layer in layers(model))
    torch.testing.assert_close(model(x), plain)


# ---------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------


def segments(num: int = 3, span: int = 32, seed: int = 2) -> torch.Tensor:
    return torch.randint(
        0, 256, (num, span + 1), generator=torch.Generator().manual_seed(seed)
    )


def test_a_cache_as_long_as_the_segment_is_length_losses():
    model, data = lively_model("rope"), segments()
    got = rolling_cache_losses(model, data, window=32, sinks=4)
    expected = length_losses(model, data, [32])[32]
    assert got.shape == (3, 32) and got.dtype == torch.float64
    torch.testing.assert_close(got, expected)
    assert all(layer.cache is None for layer in layers(model))


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_one_layer_without_sinks_is_the_sliding_reference(scheme):
    """One layer: the keys in the cache come from the embeddings alone, so re-reading
    each target's window (stride 1) gives the same context and positions."""
    model, data = lively_model(scheme, num_layers=1), segments()
    got = rolling_cache_losses(model, data, window=8)
    expected = window_reference_losses(model, data, 8, stride=1)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_two_layers_without_sinks_differ_from_the_sliding_reference():
    """Two layers: the cache keeps layer-2 keys computed from each token's own cache,
    reaching back up to 2 (window - 1) bytes; a re-read window recomputes them from its
    own bytes. Equal before the first eviction, different after."""
    model, data = lively_model("rope", num_layers=2), segments()
    got = rolling_cache_losses(model, data, window=8)
    reference = window_reference_losses(model, data, 8, stride=1)
    torch.testing.assert_close(got[:, :8], reference[:, :8], atol=1e-5, rtol=1e-5)
    assert (got[:, 8:] - reference[:, 8:]).abs().amin() > 1e-4


def test_sinks_change_the_losses_past_the_first_eviction():
    model, data = lively_model("rope"), segments()
    with_sinks = rolling_cache_losses(model, data, window=8, sinks=2)
    without = rolling_cache_losses(model, data, window=10)
    # the same cache size: equal until the first eviction (p < 10), then different
    torch.testing.assert_close(with_sinks[:, :10], without[:, :10])
    assert not torch.allclose(with_sinks[:, 10:], without[:, 10:])


# ---------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window,sinks,message",
    [
        (0, 0, "window must be a positive integer, got 0"),
        (2.0, 0, "window must be a positive integer"),
        (4, -1, "sinks must be a non-negative integer .* got -1"),
        (4, True, "sinks must be a non-negative integer"),
    ],
)
def test_bad_cache_sizes_are_refused(window, sinks, message):
    with pytest.raises(ValueError, match=message):
        RollingCache(window, sinks)
    with pytest.raises(ValueError, match=message):
        with rolling_cache(lively_model(), window, sinks):
            pass
    with pytest.raises(ValueError, match=message):
        rolling_cache_losses(lively_model(), segments(), window, sinks)


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal"])
def test_a_model_with_an_input_table_is_refused(scheme):
    model = lively_model(scheme)
    with pytest.raises(
        ValueError, match="absolute position table to its token embeddings"
    ):
        with rolling_cache(model, window=4):
            pass
    with pytest.raises(ValueError, match="cannot re-assign"):
        rolling_cache_losses(model, segments(), window=4)
    assert all(layer.cache is None for layer in layers(model))


def test_a_scheme_that_adds_to_the_input_is_refused():
    table = SinusoidalPositionalEmbedding(HEADS * HEAD_DIM)
    q, k, v = qkv(8)
    for scheme in (
        AbsoluteScheme(table),
        LocalAttentionScheme(AbsoluteScheme(table), 4),
    ):
        with pytest.raises(
            ValueError, match="AbsoluteScheme adds positions to the input"
        ):
            RollingCache(4).attend(q, k, v, scheme)
    model = lively_model("learned", absolute="every_layer")
    with pytest.raises(ValueError, match="AbsoluteScheme adds positions to the input"):
        with rolling_cache(model, window=4):
            pass
    assert all(layer.cache is None for layer in layers(model))


def test_a_mask_with_a_cache_is_refused():
    layer = MultiHeadAttention(AttentionConfig(16, 2), rope_scheme_for(8))
    x = torch.randn(1, 6, 16)
    layer.cache = RollingCache(4)
    with pytest.raises(
        ValueError, match="decides which keys each query sees, so it takes no mask"
    ):
        layer(x, mask=torch.ones(6, 6, dtype=torch.bool))
    bidirectional = MultiHeadAttention(AttentionConfig(16, 2, causal=False))
    bidirectional.cache = RollingCache(4)
    with pytest.raises(ValueError, match="built with causal=False"):
        bidirectional(x)


def rope_scheme_for(head_dim: int) -> RotaryScheme:
    return RotaryScheme(RotaryEmbedding(head_dim))


def test_other_bad_inputs_are_refused():
    q, k, v = qkv(8)
    with pytest.raises(ValueError, match="share batch, heads and length"):
        RollingCache(4).attend(q[:, :, -1:], k, v)
    with pytest.raises(ValueError, match="shape \\(batch, heads, seq, head_dim\\)"):
        RollingCache(4).attend(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="no MultiHeadAttention layer"):
        with rolling_cache(nn.Linear(2, 2), window=4):
            pass
    with pytest.raises(
        ValueError, match=r"i must be a non-negative integer \(a token index\)"
    ):
        RollingCache(4).kept(-1)
    with pytest.raises(ValueError, match="segments must be a 2-D tensor"):
        rolling_cache_losses(lively_model(), segments()[0], window=4)
    with pytest.raises(ValueError, match="need K >= 1 rows of S \\+ 1 >= 2 bytes"):
        rolling_cache_losses(lively_model(), segments()[:, :1], window=4)


class ShortModel(ByteTransformer):
    """A RoPE model that says it cannot read more than 16 bytes."""

    def check_length(self, seq_len):
        if seq_len > 16:
            raise ValueError("too long for this model")


def test_a_length_the_model_cannot_read_is_refused():
    model = ShortModel(ModelConfig(d_model=16, num_heads=2, num_layers=1))
    with pytest.raises(ValueError, match="cannot read segments of 32 bytes: too long"):
        rolling_cache_losses(model, segments(span=32), window=4)
    assert rolling_cache_losses(model, segments(span=16), window=4).shape == (3, 16)


# ---------------------------------------------------------------------------
# gpt-oss's learned sinks
# ---------------------------------------------------------------------------


def test_a_learned_sink_joins_the_denominator():
    scores = torch.randn(2, 3, 5, 7)
    sinks = torch.tensor([0.0, 2.0, -30.0])
    p = learned_sink_softmax(scores, sinks)
    expected = scores.exp() / (
        scores.exp().sum(-1, keepdim=True) + sinks.exp()[:, None, None]
    )
    torch.testing.assert_close(p, expected)
    assert (p[:, :2].sum(-1) < 0.99).all()  # the sink took the rest
    # a very negative sink gives (nearly) the plain softmax
    torch.testing.assert_close(p[:, 2], scores[:, 2].softmax(-1), atol=1e-6, rtol=1e-6)
    # a row with every key masked gives all its weight to the sink: zeros, not NaN
    masked = learned_sink_softmax(torch.full((1, 3, 1, 4), float("-inf")), sinks)
    assert torch.equal(masked, torch.zeros_like(masked))
    with pytest.raises(ValueError, match="one logit per head, shape \\(3,\\)"):
        learned_sink_softmax(scores, torch.zeros(4))


def test_learned_sinks_are_gpt_oss_eager_attention():
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    torch.manual_seed(0)
    B, H, T, D = 2, 4, 6, 8
    q, k, v = torch.randn(3, B, H, T, D).unbind(0)
    module = SimpleNamespace(
        sinks=torch.randn(H), num_key_value_groups=1, training=False
    )
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    additive = torch.zeros(B, 1, T, T).masked_fill(
        ~causal, torch.finfo(torch.float32).min
    )
    output, weights = gpt_oss.eager_attention_forward(
        module, q, k, v, additive, scaling=D**-0.5
    )
    scores = (q @ k.transpose(-2, -1) * D**-0.5).masked_fill(~causal, float("-inf"))
    ours = learned_sink_softmax(scores, module.sinks)
    torch.testing.assert_close(ours, weights)
    torch.testing.assert_close((ours @ v).transpose(1, 2), output)
