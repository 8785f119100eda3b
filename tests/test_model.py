"""The byte Transformer: its wiring against a hand-written forward pass, training, lengths, switches."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch.nn import functional as F

from pe_tutorial.attention.position_scheme import NoPositionScheme
from pe_tutorial.attention.schemes import AbsoluteScheme
from pe_tutorial.encodings.absolute import LearnedPositionalEmbedding, sinusoidal_at
from pe_tutorial.encodings.rope import RotaryEmbedding
from pe_tutorial.encodings.rope_scaling import RopeScaling
from pe_tutorial.lm.model import SCHEMES, ByteTransformer, ModelConfig
from pe_tutorial.lm.registry import scheme_names
from pe_tutorial.lm.scoring import length_bits_per_byte
from pe_tutorial.lm.train import TrainConfig, train
from pe_tutorial.lm.windows import random_windows

from reference import scheme_attention, with_positions_added

SMALL = {"d_model": 32, "num_heads": 4, "num_layers": 2, "max_positions": 16}
# chapter 11's patterns: one local layer (windows of 4 of the 12 tokens), one global
SMALL.update(global_every=2, local_window=4)


def small(scheme: str, **switches) -> ByteTransformer:
    torch.manual_seed(0)
    return ByteTransformer(ModelConfig(scheme=scheme, **SMALL, **switches))


def reference_attention(attn, x: torch.Tensor) -> torch.Tensor:
    """Causal multi-head attention from the chapter-7 reference, not the model's.

    Only the weights are read from the layer: the projections, the scheme's
    tables. Heads are split by hand and attended head by head in float64 by
    ``reference.scheme_attention``, so a bug inside ``MultiHeadAttention``
    (the split, the mask, the scale, the scheme's wiring) shows up here.
    """
    B, T, d = x.shape
    H = attn.config.num_heads
    x = with_positions_added(attn.scheme, x)
    q, k, v = (x @ attn.qkv.weight.T).split(d, dim=-1)

    def heads(t):
        return torch.stack([t[..., h * d // H : (h + 1) * d // H] for h in range(H)], 1)

    y = scheme_attention(attn.scheme, heads(q), heads(k), heads(v), causal=True)
    merged = torch.cat([y[:, h] for h in range(H)], dim=-1).float()
    return merged @ attn.out.weight.T


def hand_forward(model: ByteTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """The forward pass written out from the model's parts, one formula per line."""
    c = model.config
    T = tokens.shape[1]
    x = model.embed.weight[tokens]  # (B, T, d)
    if c.scheme == "sinusoidal":
        x = x * math.sqrt(c.d_model)
    if c.scheme in ("learned", "sinusoidal") and c.absolute == "input":
        if c.scheme == "learned":
            x = x + model.input_table.weight[:T]
        else:
            x = x + sinusoidal_at(torch.arange(T), c.d_model)
    if c.scheme == "rope-input":
        # each embedding's channel pairs (i, i + d/2) turned by t * base^(-2i/d)
        half = c.d_model // 2
        angle = torch.arange(T)[:, None] * c.rope_base ** (
            -2 * torch.arange(half) / c.d_model
        )
        a, b = x[..., :half], x[..., half:]
        x = torch.cat(
            [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1
        )
    for block in model.blocks:
        attn, mlp = block.attention, block.mlp
        ln1, ln2 = block.norm1, block.norm2
        if c.norm == "pre":
            x = x + reference_attention(attn, ln1(x))
            x = x + mlp(ln2(x))
        else:
            x = ln1(x + reference_attention(attn, x))
            x = ln2(x + mlp(x))
    if c.norm == "pre":
        x = model.final_norm(x)
    return x @ model.embed.weight.T  # tied output layer


@pytest.mark.parametrize("scheme", scheme_names())
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_forward_matches_the_hand_written_pass(scheme, norm):
    model = small(scheme, norm=norm)
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    logits = model(tokens)
    assert logits.shape == (2, 12, 256)
    torch.testing.assert_close(
        logits, hand_forward(model, tokens), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal"])
def test_absolute_table_at_the_input_or_in_every_layer(scheme):
    at_input = small(scheme)
    assert at_input.input_table is not None
    assert all(
        isinstance(b.attention.scheme, NoPositionScheme) for b in at_input.blocks
    )
    every = small(scheme, absolute="every_layer")
    assert every.input_table is None
    schemes = [b.attention.scheme for b in every.blocks]
    assert all(isinstance(s, AbsoluteScheme) for s in schemes)
    # one table, shared by the layers
    assert schemes[0].encoding is schemes[1].encoding
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        every(tokens), hand_forward(every, tokens), rtol=1e-5, atol=1e-5
    )


def test_every_layer_adds_the_table_to_each_attention_input():
    """With the table in every layer, each attention sees x + PE (checked by hand)."""
    model = small("learned", absolute="every_layer")
    block = model.blocks[0]
    x = torch.randn(1, 10, 32)
    table = model.blocks[0].attention.scheme.encoding.weight[:10]
    attn = block.attention
    B, T, d = x.shape
    q, k, v = (attn.qkv(x + table)).chunk(3, dim=-1)

    def heads(t):
        return t.view(B, T, 4, 8).transpose(1, 2)

    y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    expected = attn.out(y.transpose(1, 2).reshape(B, T, d))
    torch.testing.assert_close(attn(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "scheme, switches",
    [(s, {}) for s in SCHEMES]
    + [("rope", {"norm": "post"}), ("learned", {"absolute": "every_layer"})],
)
def test_training_lowers_the_loss(scheme, switches):
    text = torch.tensor(list(b"the quick brown fox jumps over the lazy dog. " * 40))
    model = small(scheme, **switches)
    config = TrainConfig(steps=40, batch_size=8, seq_len=16, warmup_steps=5, seed=0)
    losses = train(
        model,
        functools.partial(random_windows, text, config.batch_size, config.seq_len),
        config,
        progress=False,
    )
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.7 * first, (scheme, first, last)


def test_the_same_seed_gives_the_same_numbers():
    text = torch.tensor(list(b"abcdefghij" * 50))
    config = TrainConfig(steps=10, batch_size=4, seq_len=8, warmup_steps=2, seed=3)

    def run():
        model = small("alibi")
        batches = functools.partial(random_windows, text, 4, 8)
        return train(model, batches, config, progress=False), model.embed.weight

    (losses1, w1), (losses2, w2) = run(), run()
    assert losses1 == losses2
    assert torch.equal(w1, w2)


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s != "learned"])
def test_every_scheme_but_a_learned_table_reads_past_its_training_length(scheme):
    model = small(scheme)
    tokens = torch.randint(0, 256, (1, 4 * SMALL["max_positions"]))
    model.check_length(tokens.shape[1])
    assert torch.isfinite(model(tokens)).all()


def test_a_learned_table_refuses_positions_past_its_end():
    model = small("learned")
    model(torch.zeros(1, 16, dtype=torch.long))
    with pytest.raises(ValueError, match="learned position table of 16 rows cannot"):
        model(torch.zeros(1, 17, dtype=torch.long))
    assert isinstance(model.input_table, LearnedPositionalEmbedding)


def test_a_learned_qk_table_refuses_positions_past_its_end_and_scoring_says_none():
    """As ``learned``: the model says why it cannot read past its 16 rows (without the
    registry's max_length the table's own lookup fails mid-forward), so scoring past
    L records None with that note instead of crashing."""
    model = small("learned-qk")
    model(torch.zeros(1, 16, dtype=torch.long))
    with pytest.raises(ValueError, match="learned-qk position table of 16 rows cannot"):
        model(torch.zeros(1, 17, dtype=torch.long))
    data = torch.randint(0, 256, (1 + 64,), generator=torch.Generator().manual_seed(0))
    scored = length_bits_per_byte(model, data.to(torch.uint8), [16, 32], num_targets=64)
    assert scored[16]["bpb"] is not None and scored[16]["note"] is None
    assert scored[32]["bpb"] is None and scored[32]["by_position"] is None
    assert "learned-qk position table of 16 rows" in scored[32]["note"]


def test_set_rope_scaling_replaces_the_shared_rotary_embedding():
    model = small("rope")
    tokens = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(0))
    before = model(tokens)
    model.set_rope_scaling(RopeScaling("linear", factor=1.0))
    torch.testing.assert_close(model(tokens), before)
    model.set_rope_scaling(RopeScaling("linear", factor=2.0))
    encodings = {id(b.attention.scheme.encoding) for b in model.blocks}
    assert len(encodings) == 1
    rotary = model.blocks[0].attention.scheme.encoding
    assert isinstance(rotary, RotaryEmbedding) and rotary.scaling.factor == 2.0
    assert model.config.rope_scaling.method == "linear"
    assert not torch.allclose(model(tokens), before)
    with pytest.raises(ValueError, match="needs a RoPE model"):
        small("alibi").set_rope_scaling(None)


def test_bad_configurations_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown scheme 'xpos'; choose one of"):
        ModelConfig(scheme="xpos")
    with pytest.raises(ValueError, match="unknown norm 'mid'"):
        ModelConfig(norm="mid")
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        ModelConfig(num_heads=0)
    with pytest.raises(
        ValueError, match="rope_scaling applies to scheme 'rope' only, not 'alibi'"
    ):
        ModelConfig(scheme="alibi", rope_scaling=RopeScaling("linear", factor=2.0))
    with pytest.raises(ValueError, match="temperature_floor must be a positive int"):
        ModelConfig(scheme="irope", temperature_floor=0)
    with pytest.raises(ValueError, match="integer tensor of shape"):
        small("nope")(torch.zeros(2, 3))


def _layers(*names: str) -> set[str]:
    """``names`` under each of SMALL's two layers' schemes."""
    return {
        f"blocks.{i}.attention.scheme.{name}"
        for i in range(SMALL["num_layers"])
        for name in names
    }


# Each registered scheme's position parameters, written out by hand: what the
# registry builds for the scheme and trains (fixed tables, RoPE's frequencies,
# ALiBi's slopes are buffers). A scheme registered later must be added here.
POSITION_PARAMETERS = {
    "nope": set(),
    "learned": {"input_table.weight"},
    "sinusoidal": set(),
    "rope": set(),
    "alibi": set(),
    # one table shared by the layers, named where the first layer holds it
    "t5": {"blocks.0.attention.scheme.encoding.weight"},
    "shaw": _layers("encoding.weight"),
    "cope": _layers("encoding.weight"),
    "rope-input": set(),
    "deberta": _layers(
        "encoding.embeddings",
        "encoding.key_proj.weight",
        "encoding.key_proj.bias",
        "encoding.query_proj.weight",
        "encoding.query_proj.bias",
    ),
    # the survey's table on queries and keys: one, shared by the layers
    "learned-qk": {"blocks.0.attention.scheme.encoding.weight"},
    "sinusoidal-qk": set(),
    "p-rope": set(),
    "irope": set(),
    "local-global": set(),
}


@pytest.mark.parametrize("scheme", scheme_names())
def test_position_parameters_are_the_schemes_own(scheme):
    assert scheme in POSITION_PARAMETERS, f"write out {scheme!r}'s position parameters"
    model = small(scheme)
    named = dict(model.named_position_parameters())
    assert set(named) == POSITION_PARAMETERS[scheme]
    # the model's own parameters, under the names it gives them, each once
    everything = dict(model.named_parameters())
    assert all(everything[name] is p for name, p in named.items())
    assert model.position_parameters() == list(named.values())
    sizes = {name: tuple(p.shape) for name, p in named.items()}
    if scheme == "t5":
        assert sizes == {name: (32, 4) for name in named}  # buckets x heads
    if scheme == "learned":
        assert sizes == {"input_table.weight": (16, 32)}  # max_positions x d_model
    if scheme == "learned-qk":
        assert sizes == {name: (16, 8) for name in named}  # max_positions x head_dim


def test_a_table_in_every_layer_is_one_position_parameter():
    model = small("learned", absolute="every_layer")
    assert model.input_table is None
    (name,) = dict(model.named_position_parameters())
    assert name == "blocks.0.attention.scheme.encoding.weight"
    assert set(POSITION_PARAMETERS) == set(scheme_names())
