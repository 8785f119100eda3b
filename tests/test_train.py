"""Bits per byte on constructed models, evaluation across lengths, devices and configs."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from pe_tutorial.lm.data import IGNORE_INDEX, random_windows
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.train import (
    TrainConfig,
    bits_per_byte,
    length_bits_per_byte,
    lookback_accuracy,
    passkey_accuracy,
    position_bits_per_byte,
    resolve_device,
    train,
)


class Uniform(nn.Module):
    def forward(self, tokens):
        return torch.zeros(*tokens.shape, 256)


class NextByteHalf(nn.Module):
    """Puts probability 1/2 on ``token + 1`` and spreads the rest evenly."""

    def forward(self, tokens):
        probs = torch.full((*tokens.shape, 256), 0.5 / 255)
        probs.scatter_(-1, ((tokens + 1) % 256)[..., None], 0.5)
        return probs.log()


class Bigram(nn.Module):
    """A fixed random table of logits indexed by the current byte only (no context)."""

    def __init__(self):
        super().__init__()
        self.table = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))

    def forward(self, tokens):
        return self.table[tokens]


def test_a_uniform_model_scores_exactly_eight_bits():
    data = torch.randint(0, 256, (1025,), dtype=torch.uint8)
    # ln(256) / ln(2) = 8, up to float32 rounding of the log-softmax
    assert bits_per_byte(Uniform(), data, 64) == pytest.approx(8.0, abs=1e-5)


def test_half_on_the_right_byte():
    # p = 1/2 on every target: -log2(1/2) = 1 bit per byte
    data = (torch.arange(1 + 64 * 8) % 256).to(torch.uint8)
    assert bits_per_byte(NextByteHalf(), data, 64) == pytest.approx(1.0, abs=1e-6)


def test_bits_per_byte_is_cross_entropy_over_ln2_by_hand():
    data = torch.randint(
        0, 256, (1 + 32 * 3,), generator=torch.Generator().manual_seed(2)
    )
    data = data.to(torch.uint8)
    model = Bigram()
    total = 0.0
    for t in range(96):
        logits = model.table[int(data[t])]
        total -= torch.log_softmax(logits, -1)[int(data[t + 1])].item()
    assert bits_per_byte(model, data, 32) == pytest.approx(
        total / 96 / math.log(2), rel=1e-6
    )


def test_every_length_scores_the_same_targets():
    """A model without context gives the same bpb at every length only if the targets agree."""
    data = torch.randint(0, 256, (1 + 512,), generator=torch.Generator().manual_seed(3))
    results = length_bits_per_byte(
        Bigram(), data.to(torch.uint8), [32, 64, 128, 256], num_targets=512
    )
    values = [r["bpb"] for r in results.values()]
    assert max(values) - min(values) < 1e-5


class ContextCounter(nn.Module):
    """Probability (t + 1) / (t + 2) on the right next byte at window position t.

    Its loss at position t is -log2((t + 1) / (t + 2)) bits whatever the data,
    so the loss by position has a closed form.
    """

    def forward(self, tokens):
        T = tokens.shape[-1]
        right = (torch.arange(T, dtype=torch.float64) + 1) / (torch.arange(T) + 2)
        probs = ((1 - right) / 255)[:, None].expand(T, 256).clone()
        probs = probs.expand(*tokens.shape, 256).clone()
        probs.scatter_(
            -1, ((tokens + 1) % 256)[..., None], right[:, None].expand(*tokens.shape, 1)
        )
        return probs.log().float()


def test_loss_by_position_has_the_closed_form():
    data = (torch.arange(1 + 16 * 6) % 256).to(torch.uint8)  # next byte = this + 1
    curve = position_bits_per_byte(ContextCounter(), data, 16)
    t = torch.arange(16, dtype=torch.float64)
    expected = -torch.log2((t + 1) / (t + 2))
    assert torch.allclose(curve, expected, atol=1e-6)
    assert bits_per_byte(ContextCounter(), data, 16) == pytest.approx(
        expected.mean().item(), abs=1e-6
    )


def test_segments_are_cut_into_windows_row_by_row():
    """Each segment is its own stream: no window reads across two segments."""
    rows = torch.randint(
        0, 256, (3, 1 + 64), generator=torch.Generator().manual_seed(4)
    )
    rows = rows.to(torch.uint8)
    model = Bigram()
    from_segments = bits_per_byte(model, rows, 32)
    one_by_one = [bits_per_byte(model, row, 32) for row in rows]
    assert from_segments == pytest.approx(sum(one_by_one) / 3, rel=1e-9)
    results = length_bits_per_byte(model, rows, [16, 32, 64])
    values = [r["bpb"] for r in results.values()]
    assert max(values) - min(values) < 1e-9  # a context-free model: the same targets
    assert results[64]["by_position"].shape == (64,)
    with pytest.raises(ValueError, match="multiple"):
        bits_per_byte(model, rows, 48)
    with pytest.raises(ValueError, match="no num_targets"):
        bits_per_byte(model, rows, 32, num_targets=64)


def test_lengths_may_be_a_generator():
    """Every length is scored, not only the first (min(lengths) once spent a generator)."""
    data = torch.randint(0, 256, (1 + 256,), generator=torch.Generator().manual_seed(5))
    results = length_bits_per_byte(
        Bigram(), data.to(torch.uint8), (n for n in [32, 64, 128])
    )
    assert sorted(results) == [32, 64, 128]
    assert all(r["bpb"] is not None for r in results.values())


def test_a_length_the_model_cannot_read_is_reported_not_raised():
    torch.manual_seed(0)
    model = ByteTransformer(
        ModelConfig(
            scheme="learned", d_model=16, num_heads=2, num_layers=1, max_positions=32
        )
    )
    data = torch.randint(0, 256, (1 + 256,), dtype=torch.uint8)
    results = length_bits_per_byte(model, data, [32, 64], num_targets=256)
    assert results[32]["bpb"] is not None and results[32]["note"] is None
    assert results[64]["bpb"] is None
    assert "learned position table of 32 rows" in results[64]["note"]


def test_num_targets_must_fit_the_windows():
    data = torch.zeros(100, dtype=torch.uint8)
    with pytest.raises(ValueError, match="multiple of seq_len=32"):
        bits_per_byte(Uniform(), data, 32, num_targets=40)
    with pytest.raises(ValueError, match="at most 96"):
        bits_per_byte(Uniform(), data, 32, num_targets=128)


def test_lookback_accuracy_of_an_oracle_and_of_a_guess():
    class Oracle(nn.Module):
        def forward(self, tokens):
            logits = torch.zeros(*tokens.shape, 256)
            logits[:, 2:].scatter_(-1, tokens[:, :-2, None], 1.0)
            return logits

    def batches(generator):
        inputs = torch.randint(0, 8, (4, 20), generator=generator)
        targets = torch.full_like(inputs, IGNORE_INDEX)
        targets[:, 2:] = inputs[:, :-2]
        return inputs, targets

    assert lookback_accuracy(Oracle(), batches) == 1.0
    assert lookback_accuracy(Uniform(), batches) < 0.5


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="unknown device 'tpu'; choose one of"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU"):
            resolve_device("cuda")


def test_train_config_is_checked():
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="learning_rate must be a positive"):
        TrainConfig(learning_rate=-1.0)


def test_passkey_accuracy_of_a_copier_and_of_a_model_that_misses_one_digit():
    from pe_tutorial.lm.data import PASSKEY_SYMBOLS, passkey_batch

    class Copier(nn.Module):
        """Finds the KEY marker and says the digit after the one it is asked for."""

        def __init__(self, wrong_last: bool = False):
            super().__init__()
            self.wrong_last = wrong_last

        def forward(self, tokens):
            B, T = tokens.shape
            logits = torch.zeros(B, T, 256)
            start = (tokens == PASSKEY_SYMBOLS["key"]).float().argmax(1)
            for row in range(B):
                key = tokens[row, start[row] + 1 : start[row] + 5]
                answer = key.clone()
                if self.wrong_last:
                    digit = answer[-1] - PASSKEY_SYMBOLS["digits"]
                    answer[-1] = PASSKEY_SYMBOLS["digits"] + (digit + 1) % 10
                logits[row, T - 4 + torch.arange(4), answer] = 1.0
            return logits

    batches = functools.partial(passkey_batch, 16, 48)
    assert passkey_accuracy(Copier(), batches) == 1.0
    assert passkey_accuracy(Copier(wrong_last=True), batches) == 0.0
    # digit by digit the second one is right three times in four
    assert lookback_accuracy(Copier(wrong_last=True), batches) == pytest.approx(0.75)


def test_a_fresh_model_starts_near_ln_256_nats_a_byte():
    # train() returns the mean loss per predicted byte, in nats: a fresh model
    # with near-zero logits sits at ln 256; a summed loss would be T * B times that
    torch.manual_seed(0)
    config = ModelConfig(
        scheme="rope", d_model=32, num_heads=2, num_layers=1, max_positions=16
    )
    data = torch.randint(0, 256, (4096,), dtype=torch.uint8)
    losses = train(
        ByteTransformer(config),
        functools.partial(random_windows, data, 4, 16),
        TrainConfig(steps=2, batch_size=4, seq_len=16, warmup_steps=1),
        progress=False,
    )
    assert losses[0] == pytest.approx(math.log(256), abs=0.3)
