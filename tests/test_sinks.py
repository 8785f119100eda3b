"""The sink probe (chapter 12): the weight a byte model's late queries put on its
first keys, against a written-out loop and the closed form of an even spread."""

from __future__ import annotations

import re

import pytest
import torch

from pe_tutorial import ByteTransformer, ModelConfig, attention_maps
from pe_tutorial.lm.sinks import SINK_PROBE_KEYS, first_key_weights


def tiny(scheme="rope", **fields):
    torch.manual_seed(0)
    config = ModelConfig(scheme, d_model=16, num_heads=2, num_layers=2, **fields)
    return ByteTransformer(config)


def windows(K=5, T=12):
    return torch.randint(0, 256, (K, T), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("scheme", ["rope", "alibi", "nope"])
def test_the_probe_is_a_loop_over_windows_queries_and_keys(scheme):
    model, tokens = tiny(scheme, max_positions=12), windows()
    probe = first_key_weights(model, tokens, keys=(1, 3), batch_size=2)
    maps = attention_maps(model, tokens)  # (layers, K, heads, T, T)
    L, K, H, T, _ = maps.shape
    for k in (1, 3):
        for layer in range(L):
            for head in range(H):
                total, count = 0.0, 0
                for w in range(K):
                    for i in range(T // 2, T):
                        total += sum(
                            maps[layer, w, head, i, j].item() for j in range(k)
                        )
                        count += 1
                got = probe[str(k)]["weight"][layer][head]
                assert got == pytest.approx(total / count, abs=1e-4)
        even = sum(k / (i + 1) for i in range(T // 2, T)) / (T - T // 2)
        assert probe[str(k)]["even"] == pytest.approx(even, abs=1e-4)


def test_attention_spread_evenly_gets_exactly_the_even_share():
    """With the queries zeroed every score is 0 (RoPE turns a zero query into
    zero), so each query spreads its weight evenly over the i + 1 keys it sees:
    the probe must read the even share, in every layer and head."""
    model = tiny("rope", max_positions=16)
    with torch.no_grad():
        for block in model.blocks:
            d = model.config.d_model
            block.attention.qkv.weight[:d].zero_()  # the rows that make q
    probe = first_key_weights(model, windows(T=16))
    for k in SINK_PROBE_KEYS:
        even = probe[str(k)]["even"]
        assert even == pytest.approx(
            sum(k / (i + 1) for i in range(8, 16)) / 8, abs=1e-4
        )
        for layer in probe[str(k)]["weight"]:
            assert layer == pytest.approx([even] * 2, abs=1e-4)


def test_the_probe_leaves_the_model_in_its_mode():
    model = tiny(max_positions=12)
    model.train()
    first_key_weights(model, windows())
    assert model.training


@pytest.mark.parametrize(
    ("tokens", "keys", "said"),
    [
        (torch.zeros(12, dtype=torch.long), (1,), "a (K, T) tensor"),
        (torch.zeros(3, 12, dtype=torch.long), (7,), "at most 6 keys"),
        (torch.zeros(3, 12, dtype=torch.long), (0,), "positive integer"),
    ],
)
def test_bad_windows_or_key_counts_are_refused_saying_what_to_give(tokens, keys, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        first_key_weights(tiny(max_positions=12), tokens, keys)
