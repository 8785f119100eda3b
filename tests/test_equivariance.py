"""Chapter 1's claim, tested: self-attention without positions is permutation-equivariant."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_tutorial import sinusoidal_encoding
from pe_tutorial.attention.equivariance import (
    ConvolutionLayer,
    RecurrentLayer,
    SelfAttention,
    WordEmbedder,
    equivariance_gap,
)


@settings(max_examples=25, deadline=None)
@given(seq_len=st.integers(2, 16), seed=st.integers(0, 10_000))
def test_self_attention_is_permutation_equivariant(seq_len, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, seq_len, 8, generator=generator)
    perm = torch.randperm(seq_len, generator=generator)
    assert equivariance_gap(SelfAttention(8, seed=seed), x, perm) < 1e-5


def test_adding_positions_breaks_equivariance():
    attention = SelfAttention(8)
    x = torch.randn(10, 8)

    def with_positions(x):
        return attention(x + sinusoidal_encoding(x.shape[-2], 8))

    assert (
        equivariance_gap(
            with_positions, x, torch.tensor([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
        )
        > 0.01
    )


def test_gap_detects_a_position_dependent_function():
    # x + p is not equivariant: the check must be able to fail
    def add_position(x):
        return x + torch.arange(x.shape[-2], dtype=x.dtype)[:, None]

    assert (
        equivariance_gap(add_position, torch.zeros(4, 3), torch.tensor([1, 0, 2, 3]))
        == 1.0
    )


def test_gap_rejects_a_non_permutation():
    with pytest.raises(ValueError, match="must be a permutation"):
        equivariance_gap(lambda x: x, torch.zeros(3, 2), torch.tensor([0, 0, 1]))


def test_word_embedder_gives_a_word_one_vector_whatever_the_order():
    first = WordEmbedder(4, seed=1)(["the", "dog", "the"])
    torch.testing.assert_close(first[0], first[2])
    assert not torch.equal(first[0], first[1])
    # a fresh embedder that meets the words in the other order agrees word by word
    reversed_order = WordEmbedder(4, seed=1)(["dog", "cat", "the"])
    torch.testing.assert_close(reversed_order[0], first[1])
    torch.testing.assert_close(reversed_order[2], first[0])
    # another seed gives other vectors
    assert not torch.equal(WordEmbedder(4, seed=2)(["the"])[0], first[0])


@pytest.mark.parametrize("words", ["the dog", [""], [3]])
def test_word_embedder_rejects_what_is_not_a_list_of_words(words):
    with pytest.raises(ValueError, match="list of words|non-empty strings"):
        WordEmbedder(4)(words)


def test_torch_multihead_with_the_same_weights_computes_the_same_head():
    from pe_tutorial.attention.equivariance import to_torch_multihead

    attention = SelfAttention(8, seed=3)
    layer = to_torch_multihead(attention)
    x = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch_out, _ = layer(x, x, x)
        # by hand: softmax(x Wq (x Wk)^T / sqrt(8)) x Wv
        q, k, v = x @ attention.w_q, x @ attention.w_k, x @ attention.w_v
        expected = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, dim=-1) @ v
    torch.testing.assert_close(torch_out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch_out, attention(x).detach(), rtol=1e-5, atol=1e-5)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    assert equivariance_gap(lambda t: layer(t, t, t)[0], x, perm) < 1e-5


def test_the_recurrent_layer_is_the_elman_recurrence_step_by_step():
    layer = RecurrentLayer(6, seed=3)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(0))
    rnn = layer.rnn
    h, states = torch.zeros(6), []
    for x_t in x:  # h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh)
        h = torch.tanh(
            rnn.weight_ih_l0 @ x_t
            + rnn.bias_ih_l0
            + rnn.weight_hh_l0 @ h
            + rnn.bias_hh_l0
        )
        states.append(h)
    with torch.no_grad():
        assert torch.allclose(layer(x), torch.stack(states), atol=1e-6)
        assert torch.allclose(layer(x[None])[0], layer(x), atol=1e-6)


def test_the_convolution_layer_mixes_each_token_with_its_two_neighbours():
    layer = ConvolutionLayer(4, seed=1)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(2))
    weight, bias = layer.conv.weight, layer.conv.bias  # (out, in, offset -1, 0, +1)
    padded = torch.cat([torch.zeros(1, 4), x, torch.zeros(1, 4)])
    expected = torch.stack(
        [
            bias + sum(weight[:, :, s] @ padded[t + s] for s in range(3))
            for t in range(6)
        ]
    )
    with torch.no_grad():
        assert torch.allclose(layer(x), expected, atol=1e-6)


def test_recurrence_and_convolution_see_order_and_attention_does_not():
    x = torch.randn(7, 8, generator=torch.Generator().manual_seed(4))
    perm = torch.tensor([0, 4, 2, 3, 1, 6, 5])
    assert equivariance_gap(SelfAttention(8, seed=0), x, perm) < 1e-5
    assert equivariance_gap(RecurrentLayer(8, seed=0), x, perm) > 0.05
    assert equivariance_gap(ConvolutionLayer(8, seed=0), x, perm) > 0.05


def test_the_layers_are_seeded_and_reject_a_bad_width():
    x = torch.randn(3, 4)
    for layer in (RecurrentLayer, ConvolutionLayer):
        with torch.no_grad():
            assert torch.equal(layer(4, seed=5)(x), layer(4, seed=5)(x))
            assert not torch.equal(layer(4, seed=5)(x), layer(4, seed=6)(x))
        with pytest.raises(ValueError, match="d_model"):
            layer(0)
