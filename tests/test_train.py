"""Bits per byte on constructed models, evaluation across lengths, devices and configs."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from pe_tutorial.lm.data import IGNORE_INDEX
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.scoring import (
    bits_per_byte,
    context_gain,
    length_bits_per_byte,
    length_losses,
    lookback_accuracy,
    passkey_accuracy,
    passkey_digit_accuracy,
    position_bits_per_byte,
    window_reference_losses,
)
from pe_tutorial.lm.synthetic import PASSKEY_SYMBOLS, passkey_batch
from pe_tutorial.lm.train import TrainConfig, curve_steps, resolve_device, train
from pe_tutorial.lm.windows import random_windows, target_reads


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
    # the model's log-probabilities are float32 (as a model's are), whose rounding
    # differs by up to a few 1e-6 bits between CPUs' vector units
    assert torch.allclose(curve, expected, atol=1e-5)
    assert bits_per_byte(ContextCounter(), data, 16) == pytest.approx(
        expected.mean().item(), abs=1e-5
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


def test_curve_steps_are_spread_evenly_and_end_at_the_last_step():
    assert curve_steps(800, 8) == [100, 200, 300, 400, 500, 600, 700, 800]
    assert curve_steps(10, 3) == [3, 7, 10]
    assert curve_steps(3, 8) == [1, 2, 3]  # fewer steps than points: every step
    assert curve_steps(5, 0) == []
    with pytest.raises(ValueError, match="points must be a non-negative integer"):
        curve_steps(10, -1)


def _t5() -> ByteTransformer:
    torch.manual_seed(0)
    return ByteTransformer(
        ModelConfig(
            scheme="t5", d_model=32, num_heads=2, num_layers=2, max_positions=16
        )
    )


TEXT = torch.tensor(list(b"def f(x):\n    return x + 1\n" * 60), dtype=torch.uint8)


def _train(model, config, **options):
    batches = functools.partial(random_windows, TEXT, config.batch_size, config.seq_len)
    return train(model, batches, config, progress=False, **options)


def _state(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.state_dict().items()}


def test_a_learning_curve_leaves_the_training_as_it_is():
    """The model trained with a curve read every other step is the same, to the bit,
    as without: the reading runs without gradients, in eval mode (training mode
    again after it), on a forked random state, so even a reading that draws from
    the global generator (this one does) leaves it where training left it."""
    config = TrainConfig(steps=6, batch_size=4, seq_len=16, warmup_steps=2, seed=1)
    windows = TEXT[: 4 * 16 + 1]
    plain = _t5()
    plain_losses = _train(plain, config)
    after_plain = torch.rand(3)  # what a dropout layer would draw next
    curve = []

    def score(model):
        torch.rand(100)  # a reading that consumes randomness
        curve.append(bits_per_byte(model, windows, 16))

    read = _t5()
    modes = []
    read.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    losses = _train(read, config, evaluate=score, evaluate_at=curve_steps(6, 3))
    assert torch.equal(torch.rand(3), after_plain)
    assert losses == plain_losses
    for name, value in _state(read).items():
        assert torch.equal(value, _state(plain)[name]), name
    # two training steps, then a reading (one batch of the four windows), thrice
    assert modes == [True, True, False] * 3
    # the last point is the trained model's score on the same windows
    assert len(curve) == 3 and curve[-1] == bits_per_byte(plain, windows, 16)


def test_evaluate_at_counts_steps_of_this_training():
    config = TrainConfig(steps=3, batch_size=2, seq_len=16, warmup_steps=1)
    with pytest.raises(ValueError, match="count steps from 1 to 3, got \\[0, 2\\]"):
        _train(_t5(), config, evaluate=lambda model: None, evaluate_at=[2, 0])
    with pytest.raises(ValueError, match="count steps from 1 to 3"):
        _train(_t5(), config, evaluate=lambda model: None, evaluate_at=[4])
    with pytest.raises(ValueError, match="evaluate_at needs an evaluate callable"):
        _train(_t5(), config, evaluate_at=[1])


def _train_as_before(model, config):
    """``train`` as it was before position parameters had a rate of their own: one
    AdamW group over every parameter, the same schedule, clip and batches."""
    from pe_tutorial.lm.train import _loss, learning_rate_at

    batches = functools.partial(random_windows, TEXT, config.batch_size, config.seq_len)
    model.train()
    optimiser = torch.optim.AdamW(
        model.parameters(),
        lr=config.learning_rate,
        weight_decay=config.weight_decay,
        betas=(0.9, 0.95),
    )
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for step in range(config.steps):
        for group in optimiser.param_groups:
            group["lr"] = learning_rate_at(config, step)
        inputs, targets = batches(generator)
        loss = _loss(model, inputs, targets)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimiser.step()
        losses.append(loss.item())
    return losses


def test_a_position_rate_multiplier_of_one_trains_as_before():
    config = TrainConfig(steps=5, batch_size=4, seq_len=16, warmup_steps=2)
    assert config.position_lr_multiplier == 1.0
    before, now = _t5(), _t5()
    assert _train_as_before(before, config) == _train(now, config)
    for name, value in _state(now).items():
        assert torch.equal(value, _state(before)[name]), name


def _moves(config) -> dict[str, torch.Tensor]:
    """How far each parameter moved in training (each once, shared or not)."""
    model = _t5()
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    _train(model, config)
    return {name: p.detach() - start[name] for name, p in model.named_parameters()}


def test_a_position_rate_multiplier_moves_the_t5_table_that_much_further():
    """Adam's step is about the learning rate whatever the gradient's size, so a
    table at ten times the rate moves ten times as far; the rest moves as before."""
    # T5's one bias table, shared by the layers: the model's only position parameter
    (table,) = [name for name, _ in _t5().named_position_parameters()]
    assert table == "blocks.0.attention.scheme.encoding.weight"
    one = TrainConfig(steps=1, batch_size=4, seq_len=16, warmup_steps=1)
    ten = replace(one, position_lr_multiplier=10.0)
    base, fast = _moves(one), _moves(ten)
    # the first step: exactly ten times (the decay scales with the rate too) ...
    # (to float32 rounding of weights near 0.02: atol 1e-7)
    torch.testing.assert_close(fast[table], 10 * base[table], rtol=1e-4, atol=1e-7)
    assert base[table].abs().max() == pytest.approx(one.learning_rate, rel=0.02)
    # ... and every other parameter moves to the bit as before
    for name in base:
        if name != table:
            assert torch.equal(fast[name], base[name]), name
    # over a few steps (the gradients now differ a little): about ten times
    one = TrainConfig(steps=5, batch_size=4, seq_len=16, warmup_steps=1)
    base, fast = _moves(one), _moves(replace(one, position_lr_multiplier=10.0))
    ratio = fast[table].norm() / base[table].norm()
    assert 9 < ratio < 11, ratio
    for name in base:
        if name != table and base[name].norm() > 0:
            change = (fast[name] - base[name]).norm() / base[name].norm()
            assert change < 0.1, (name, change)


def test_a_model_without_position_parameters_trains_alike_at_any_multiplier():
    config = TrainConfig(steps=3, batch_size=4, seq_len=16, warmup_steps=1)
    models = []
    for multiplier in (1.0, 10.0):
        torch.manual_seed(0)
        model = ByteTransformer(
            ModelConfig(scheme="rope", d_model=32, num_heads=2, num_layers=1)
        )
        assert model.position_parameters() == []
        _train(model, replace(config, position_lr_multiplier=multiplier))
        models.append(_state(model))
    for name, value in models[0].items():
        assert torch.equal(value, models[1][name]), name


def test_the_position_rate_multiplier_is_checked():
    with pytest.raises(ValueError, match="position_lr_multiplier must be a positive"):
        TrainConfig(position_lr_multiplier=0.0)
    config = TrainConfig(steps=1, batch_size=2, seq_len=8, position_lr_multiplier=2.0)
    with pytest.raises(ValueError, match="needs a model that names its position"):
        train(
            nn.Linear(2, 2),
            lambda generator: (torch.zeros(2, 8), torch.zeros(2, 8)),
            config,
            progress=False,
        )


def _tiny_rope() -> ByteTransformer:
    torch.manual_seed(0)
    return ByteTransformer(
        ModelConfig(
            scheme="rope", d_model=16, num_heads=2, num_layers=1, max_positions=16
        )
    )


def _segments(rows: int = 3, span: int = 64) -> torch.Tensor:
    data = torch.randint(
        0, 256, (rows, span + 1), generator=torch.Generator().manual_seed(6)
    )
    return data.to(torch.uint8)


def test_length_losses_put_every_target_at_its_segment_position():
    """Each length's (K, S) losses average to its bpb; a target sits at its segment position."""
    model, segments = _tiny_rope(), _segments()
    losses = length_losses(model, segments, [16, 32, 64])
    bpb = length_bits_per_byte(model, segments, [16, 32, 64])
    for length in (16, 32, 64):
        assert losses[length].shape == (3, 64)
        assert losses[length].mean().item() == pytest.approx(
            bpb[length]["bpb"], rel=1e-12
        )
    # target p of segment k, by hand: the model reads its own window of 32 up to p
    k, p = 1, 45
    start = p // 32 * 32
    logits = model(segments[k : k + 1, start : p + 1].long())[0, -1]
    by_hand = -torch.log_softmax(logits.double(), -1)[int(segments[k, p + 1])].item()
    assert losses[32][k, p].item() == pytest.approx(by_hand / math.log(2), abs=1e-5)


def test_length_losses_give_none_where_the_model_cannot_read():
    torch.manual_seed(0)
    model = ByteTransformer(
        ModelConfig(
            scheme="learned", d_model=16, num_heads=2, num_layers=1, max_positions=32
        )
    )
    losses = length_losses(model, _segments(2, 64), (n for n in [32, 64]))
    assert losses[32].shape == (2, 64) and losses[64] is None
    with pytest.raises(ValueError, match="2-D tensor"):
        length_losses(model, _segments(2, 64)[0], [32])


def _naive_reference(model, segments, window, stride):
    """Each target on its own: read from the earliest window start (a multiple of stride) that holds it."""
    span = segments.shape[1] - 1
    reference = torch.empty(segments.shape[0], span, dtype=torch.float64)
    for k in range(segments.shape[0]):
        for p in range(span):
            start = 0
            while start + window <= p:  # the window [start, start + window) misses p
                start += stride
            assert start + window <= span
            if p >= window - stride:
                assert window - stride + 1 <= p - start + 1 <= window
            logits = model(segments[k : k + 1, start : p + 1].long())[0, -1]
            loss = -torch.log_softmax(logits.double(), -1)[int(segments[k, p + 1])]
            reference[k, p] = loss.item() / math.log(2)
    return reference


@pytest.mark.parametrize("stride", [4, 16, None])
def test_the_window_reference_is_each_target_read_in_its_own_window(stride):
    model, segments = _tiny_rope(), _segments()
    with torch.no_grad():
        naive = _naive_reference(model.eval(), segments, 16, stride or 2)
    reference = window_reference_losses(
        model, segments, 16, stride=stride, batch_size=5
    )
    assert reference.shape == (3, 64)
    assert torch.allclose(reference, naive, atol=1e-5, rtol=0)
    # the first window is the plain cut of length 16: the same context, the same numbers
    plain = length_losses(model, segments, [16])[16]
    assert torch.allclose(reference[:, :16], plain[:, :16], atol=1e-12, rtol=0)
    # past it the reference reads more context than the plain cut's early positions,
    # unless the stride is the whole window: then the reference is the plain cut
    same_past_the_window = torch.allclose(reference[:, 16:], plain[:, 16:], atol=1e-5)
    assert same_past_the_window == (stride == 16)


def test_the_window_reference_stride_is_checked():
    model, segments = _tiny_rope(), _segments()
    with pytest.raises(ValueError, match="stride=5 must divide window=16"):
        window_reference_losses(model, segments, 16, stride=5)
    with pytest.raises(
        ValueError,
        match=r"S - window = 24 must be a non-negative multiple of stride=16",
    ):
        window_reference_losses(model, _segments(3, 40), 16, stride=16)
    with pytest.raises(ValueError, match="S=8 targets must hold one window of 16"):
        window_reference_losses(model, _segments(3, 8), 16, stride=4)
    with pytest.raises(ValueError, match="stride must be a positive integer"):
        window_reference_losses(model, segments, 16, stride=0)
    with pytest.raises(ValueError, match="default stride"):
        window_reference_losses(model, segments, 4)


def test_context_gain_averages_the_targets_past_the_window():
    # S = 8, length 4, window 2: positions p with p % 4 >= 2 are 2, 3, 6, 7
    reference = torch.zeros(2, 8, dtype=torch.float64)
    long = torch.tensor(
        [
            [9.0, 9.0, 1.0, 2.0, 9.0, 9.0, 3.0, 4.0],
            [9.0, 9.0, -1.0, -1.0, 9.0, 9.0, -1.0, -3.0],
        ],
        dtype=torch.float64,
    )
    gain = context_gain(long, reference + 0.5, 4, 2)
    assert torch.allclose(
        gain, torch.tensor([2.5 - 0.5, -1.5 - 0.5], dtype=torch.float64)
    )
    with pytest.raises(ValueError, match="length=2 must exceed window=2"):
        context_gain(long, reference, 2, 2)
    with pytest.raises(ValueError, match="must be the same"):
        context_gain(long, reference[:, :4], 4, 2)
    with pytest.raises(
        ValueError, match="S=8 targets must split into windows of length=3"
    ):
        context_gain(long, reference, 3, 2)


class _GuessAndCopy(nn.Module):
    """A passkey reader that guesses the first digit (always 0) and copies the rest:
    it finds the key after KEY and, at each later digit, says the one after."""

    def __init__(self, guess_first: bool):
        super().__init__()
        self.guess_first = guess_first

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        s = PASSKEY_SYMBOLS
        batch, length = inputs.shape
        logits = torch.zeros(batch, length, 256)
        key_len = int((inputs == s["query"]).nonzero()[0, 1].neg() + length)
        for row in range(batch):
            start = int((inputs[row] == s["key"]).nonzero()[0, 0]) + 1
            key = inputs[row, start : start + key_len]
            first = s["digits"] if self.guess_first else key[0]
            logits[row, length - key_len, first] = 1.0
            for i in range(1, key_len):
                logits[row, length - key_len + i, key[i]] = 1.0
        return logits


def test_the_first_digit_tells_retrieval_from_a_guess_and_a_copy():
    batches = functools.partial(passkey_batch, 400, 40, key_len=4)
    guesser = _GuessAndCopy(guess_first=True)
    digits = passkey_digit_accuracy(guesser, batches)
    whole = passkey_accuracy(guesser, batches)
    # a guess gets a tenth of first digits right, the copy every later one; the
    # whole key is right exactly where the guess was
    assert 0.05 < digits[0] < 0.16 and digits[1:] == [1.0, 1.0, 1.0]
    assert whole == pytest.approx(digits[0])
    assert (
        passkey_digit_accuracy(_GuessAndCopy(guess_first=False), batches) == [1.0] * 4
    )


def test_digit_accuracy_needs_the_same_key_length_in_every_row():
    def ragged(generator):
        inputs, targets = passkey_batch(2, 20, generator, key_len=3)
        targets[1, -3] = IGNORE_INDEX
        return inputs, targets

    with pytest.raises(ValueError, match="same number of key digits"):
        passkey_digit_accuracy(_GuessAndCopy(guess_first=False), ragged)


def test_the_schedule_warms_up_then_falls_to_a_tenth_and_sums_in_closed_form():
    """Warm-up: eta (s + 1) / W; then eta (0.1 + 0.45 (1 + cos(pi k / n))) for
    k = 0 .. n - 1, n = steps - W. The cosines over a half period sum to 1, so the
    whole schedule sums to eta ((W + 1) / 2 + 0.1 n + 0.45 (n + 1)): chapter 9's
    exercise, 436.95 eta for W = 80, n = 720."""
    from pe_tutorial.lm.train import learning_rate_at

    config = TrainConfig(steps=800, learning_rate=3e-3, warmup_steps=80)
    rates = [learning_rate_at(config, s) for s in range(config.steps)]
    assert rates[0] == pytest.approx(3e-3 / 80) and rates[79] == pytest.approx(3e-3)
    assert rates[80] == pytest.approx(3e-3) and rates[-1] == pytest.approx(
        3e-4, rel=1e-4
    )
    assert all(a >= b for a, b in zip(rates[80:], rates[81:]))
    assert sum(rates) == pytest.approx(3e-3 * (81 / 2 + 72 + 0.45 * 721), rel=1e-9)
    with pytest.raises(ValueError, match="past the schedule"):
        learning_rate_at(config, 800)
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        learning_rate_at(config, -1)


def test_target_reads_replays_what_training_predicted():
    """Chapter 9's count of bytes a budget reads twice: the windows a real
    ``train`` call draws (its batches recorded, positions as data, with a
    learning curve read on the way) predict each byte exactly as often as
    ``target_reads`` replays from the seed, and every read is counted once."""
    n, steps, batch, length, seed = 300, 12, 4, 16, 7
    positions = torch.arange(n)
    predicted = torch.zeros(n, dtype=torch.int32)

    def batches(generator):
        inputs, targets = random_windows(positions, batch, length, generator)
        predicted.index_add_(
            0, targets.flatten(), torch.ones(targets.numel(), dtype=torch.int32)
        )
        return inputs % 256, targets % 256

    torch.manual_seed(0)
    config = ModelConfig(
        scheme="rope", d_model=16, num_heads=2, num_layers=1, max_positions=length
    )
    train(
        ByteTransformer(config),
        batches,
        TrainConfig(steps=steps, batch_size=batch, seq_len=length, seed=seed),
        progress=False,
        evaluate=lambda model: model(torch.zeros(1, 4, dtype=torch.long)),
        evaluate_at=[6, 12],
    )
    reads = target_reads(n, steps, batch, length, seed)
    assert torch.equal(reads, predicted)
    assert int(reads.sum()) == steps * batch * length and reads[0] == 0
    # another seed draws other windows
    assert not torch.equal(target_reads(n, steps, batch, length, seed + 1), reads)


def test_target_reads_refuses_a_split_shorter_than_a_window():
    with pytest.raises(ValueError, match="cannot hold a window of 16"):
        target_reads(16, 1, 1, 16, 0)
    with pytest.raises(ValueError, match="steps"):
        target_reads(100, 0, 1, 16, 0)
