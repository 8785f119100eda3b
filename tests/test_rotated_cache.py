"""A decoder's cache of rotated keys and LongRoPE's switch (``attention.rotated_cache``).

The reference is written out here: rotate-half RoPE with the angles
``m * theta_i / lambda_i`` (``lambda`` the short or the long list, chosen by
the length of the call that turns the key), cos and sin times LongRoPE's
``sqrt(1 + ln s / ln L)``, and a softmax over the keys in a loop.
"""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.attention.rotated_cache import RotatedKeyCache
from pe_tutorial.encodings.rope import RotaryEmbedding
from pe_tutorial.encodings.rope_scaling import LongRopeScaling, RopeScaling

D, L, BASE = 8, 6, 10000.0
SHORT = (1.0, 1.1, 1.3, 1.6)
LONG = (1.2, 1.9, 3.5, 6.0)
PHI = LongRopeScaling(SHORT, LONG, original_max_positions=L, factor=4.0)


def turned(x: torch.Tensor, positions, factors, scale: float = 1.0) -> torch.Tensor:
    """Rotate-half RoPE at ``positions`` with frequencies theta_i / factor_i."""
    half = D // 2
    theta = torch.tensor(
        [BASE ** (-2 * i / D) / factors[i] for i in range(half)], dtype=torch.float64
    )
    angles = torch.tensor(positions, dtype=torch.float64)[:, None] * theta
    cos, sin = angles.cos() * scale, angles.sin() * scale
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def attention_of_last(q_row, keys, values) -> torch.Tensor:
    """softmax(q . k_j / sqrt(D)) over every key j, in a loop."""
    scores = [float(q_row @ keys[j]) / math.sqrt(D) for j in range(len(keys))]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    return sum(w / total * values[j].double() for j, w in enumerate(weights))


def sequence(n: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 1, n, D, generator=generator) for _ in range(3)]


SCALE = math.sqrt(1 + math.log(4.0) / math.log(L))


def read_at_once(q, k, v, n: int) -> torch.Tensor:
    """The query at position n - 1 over keys 0 .. n - 1, every one turned in one
    call of n tokens (the list of that length): what re-encoding gives."""
    factors = LONG if n > L else SHORT
    keys = turned(k[0, 0, :n], range(n), factors, SCALE)
    query = turned(q[0, 0, n - 1 : n], [n - 1], factors, SCALE)[0]
    return attention_of_last(query, keys, v[0, 0, :n])


def decode(cache: RotatedKeyCache, q, k, v, prompt: int, stop: int) -> list:
    """Feed the prompt in one call, then one token a step; the last output of each call."""
    outputs = [cache.step(q[..., :prompt, :], k[..., :prompt, :], v[..., :prompt, :])]
    for n in range(prompt, stop):
        outputs.append(
            cache.step(q[..., n : n + 1, :], k[..., n : n + 1, :], v[..., n : n + 1, :])
        )
    return [o[0, 0, -1].double() for o in outputs]


def test_plain_rope_decoding_step_by_step_is_the_whole_sequence_read_at_once():
    q, k, v = sequence(9)
    outputs = decode(RotatedKeyCache(RotaryEmbedding(D)), q, k, v, 3, 9)
    for n, out in zip(range(3, 10), outputs):
        keys = turned(k[0, 0, :n], range(n), (1.0,) * (D // 2))
        query = turned(q[0, 0, n - 1 : n], [n - 1], (1.0,) * (D // 2))[0]
        want = attention_of_last(query, keys, v[0, 0, :n])
        assert torch.allclose(out, want, atol=1e-5), n


def test_recompute_re_encodes_the_prefix_once_at_the_switch_as_phi3_does():
    q, k, v = sequence(12)
    cache = RotatedKeyCache(RotaryEmbedding(D, scaling=PHI), at_switch="recompute")
    outputs = decode(cache, q, k, v, 4, 12)
    for n, out in zip(range(4, 13), outputs):
        assert torch.allclose(out, read_at_once(q, k, v, n), atol=1e-5), n
    # the step at position L met a cache of L short-list keys and re-encoded them
    assert cache.recomputed == L and cache.long_list and len(cache) == 12
    want = turned(k[0, 0], range(12), LONG, SCALE)
    assert torch.allclose(cache.keys[0, 0].double(), want, atol=1e-5)


def test_keep_mixes_the_lists_and_refuse_says_what_to_do():
    q, k, v = sequence(9)
    kept = RotatedKeyCache(RotaryEmbedding(D, scaling=PHI), at_switch="keep")
    outputs = decode(kept, q, k, v, L, 9)
    # the step at position L: its query and key by the long list, the L cached
    # keys still by the short one
    keys = torch.cat(
        (
            turned(k[0, 0, :L], range(L), SHORT, SCALE),
            turned(k[0, 0, L : L + 1], [L], LONG, SCALE),
        )
    )
    query = turned(q[0, 0, L : L + 1], [L], LONG, SCALE)[0]
    mixed = attention_of_last(query, keys, v[0, 0, : L + 1])
    assert torch.allclose(outputs[1], mixed, atol=1e-5)
    assert (outputs[1] - read_at_once(q, k, v, L + 1)).abs().max() > 1e-2
    assert kept.recomputed == 0 and not kept.long_list
    refused = RotatedKeyCache(RotaryEmbedding(D, scaling=PHI), at_switch="refuse")
    refused.step(q[..., :L, :], k[..., :L, :], v[..., :L, :])
    with pytest.raises(ValueError, match=r"position 6, past .* re-encode the prefix"):
        refused.step(q[..., L : L + 1, :], k[..., L : L + 1, :], v[..., L : L + 1, :])


def test_a_prompt_longer_than_l_never_meets_the_switch():
    q, k, v = sequence(10)
    for at_switch in ("recompute", "refuse", "keep"):
        cache = RotatedKeyCache(RotaryEmbedding(D, scaling=PHI), at_switch=at_switch)
        outputs = decode(cache, q, k, v, L + 2, 10)
        for n, out in zip(range(L + 2, 11), outputs):
            assert torch.allclose(out, read_at_once(q, k, v, n), atol=1e-5)
        assert cache.recomputed == 0 and cache.long_list


def test_bad_settings_and_shapes_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="at every length past"):
        RotatedKeyCache(
            RotaryEmbedding(
                D, scaling=RopeScaling("dynamic", factor=2.0, original_max_positions=L)
            )
        )
    with pytest.raises(ValueError, match="at_switch must be one of"):
        RotatedKeyCache(RotaryEmbedding(D), at_switch="drop")
    with pytest.raises(ValueError, match="must be a RotaryEmbedding"):
        RotatedKeyCache(torch.nn.Identity())
    cache = RotatedKeyCache(RotaryEmbedding(D))
    q, k, v = sequence(2)
    with pytest.raises(ValueError, match="same new tokens"):
        cache.step(q, k[..., :1, :], v)
    with pytest.raises(ValueError, match=r"\(batch, heads, new tokens, head_dim\)"):
        cache.step(q[0], k[0], v[0])
    cache.step(q, k, v)
    with pytest.raises(ValueError, match="batch and heads"):
        cache.step(*(t.expand(2, 1, 2, D) for t in (q, k, v)))
