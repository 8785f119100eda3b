"""Scoring a trained byte model for chapter 9, in bits per byte and accuracy.

Bits per byte is the mean next-byte cross-entropy in nats divided by ``ln 2``:
a model that spreads its probability evenly over the 256 byte values scores
exactly 8, and every bit below that is structure the model has learned.

``length_bits_per_byte`` evaluates one model at several sequence lengths on
the *same* validation bytes: each length cuts the same segments (or stream)
into windows of its own size, so every length predicts exactly the same
targets and only the context the model sees differs; it also gives the loss at
each position of the window (``position_bits_per_byte`` alone). A model that
cannot read a length (a learned table past its end) gets ``None`` and the
reason, not a crash. ``length_losses`` keeps every target's loss (for
verdicts that resample files), ``window_reference_losses`` and
``context_gain`` read what a longer context buys, and the synthetic tasks are
scored by ``lookback_accuracy``, ``passkey_accuracy`` and
``passkey_digit_accuracy``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn
from torch.nn import functional as F

from .._validation import require_positive_int
from .data import IGNORE_INDEX
from .train import Batches

__all__ = [
    "bits_per_byte",
    "position_bits_per_byte",
    "length_bits_per_byte",
    "length_losses",
    "window_reference_losses",
    "context_gain",
    "lookback_accuracy",
    "passkey_accuracy",
    "passkey_digit_accuracy",
    "length_error",
    "check_segments",
]


def _windows(
    data: torch.Tensor, seq_len: int, num_targets: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-byte targets, ``(W, seq_len)``, cut from a stream or from segments."""
    require_positive_int(seq_len, "seq_len")
    if (
        data.dim() == 2
    ):  # segments: each row is a stream of its own (evaluation_segments)
        span = data.shape[1] - 1
        if span <= 0 or span % seq_len or num_targets is not None:
            raise ValueError(
                f"segments of {span} + 1 bytes must split into windows of {seq_len} "
                "(a multiple), and take no num_targets"
            )
        return (
            data[:, :-1].long().reshape(-1, seq_len),
            data[:, 1:].long().reshape(-1, seq_len),
        )
    if data.dim() != 1:
        raise ValueError(
            f"data must be a byte stream (N,) or segments (K, S + 1), got {data.dim()}-D"
        )
    available = (data.numel() - 1) // seq_len * seq_len
    n = available if num_targets is None else num_targets
    if n <= 0 or n % seq_len or n > available:
        raise ValueError(
            f"num_targets={n} must be a positive multiple of seq_len={seq_len} and at "
            f"most {available} (the bytes available)"
        )
    return data[:n].long().view(-1, seq_len), data[1 : n + 1].long().view(-1, seq_len)


@torch.no_grad()
def _token_losses(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    batch_size: int,
    device: torch.device | str,
) -> torch.Tensor:
    """Cross-entropy in nats of every target, ``(W, T)`` float64 on the CPU."""
    device = torch.device(device)
    model.to(device).eval()
    losses = []
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = targets[start : start + batch_size].to(device)
        logits = model(x).float()
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
        losses.append(loss.view(y.shape).double().cpu())
    return torch.cat(losses)


def bits_per_byte(
    model: nn.Module,
    data: torch.Tensor,
    seq_len: int,
    *,
    num_targets: int | None = None,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> float:
    """Mean cross-entropy / ln 2 of predicting each byte from the ``seq_len`` windows before it.

    ``data`` is a stream ``(N,)``: window ``w`` reads ``data[w T : (w + 1) T]``
    and predicts the bytes one further on, for ``num_targets`` targets (default:
    as many whole windows as fit; a multiple of ``seq_len``). Or it is segments
    ``(K, S + 1)`` (``windows.evaluation_segments``), each cut the same way, with
    ``S`` a multiple of ``seq_len``.
    """
    inputs, targets = _windows(data, seq_len, num_targets)
    losses = _token_losses(model, inputs, targets, batch_size, device)
    return losses.mean().item() / math.log(2)


def position_bits_per_byte(
    model: nn.Module,
    data: torch.Tensor,
    seq_len: int,
    *,
    num_targets: int | None = None,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Bits per byte at each position ``0 .. seq_len - 1`` of the window, ``(seq_len,)``.

    The windows are those of ``bits_per_byte``; position ``t`` averages the
    targets predicted with ``t + 1`` bytes of context. Its mean is
    ``bits_per_byte``. Plotted over a window longer than the training length it
    shows *where* an encoding breaks (loss by position).
    """
    inputs, targets = _windows(data, seq_len, num_targets)
    losses = _token_losses(model, inputs, targets, batch_size, device)
    return losses.mean(0) / math.log(2)


def length_error(model: nn.Module, length: int) -> str | None:
    """Why ``model`` cannot read ``length`` tokens (its ``check_length`` error), or None.

    A model without ``check_length`` (a plain ``nn.Module``) is taken to read
    any length: nothing is checked in advance, and an error it raises while
    reading a length propagates, so nothing is skipped or scored wrongly.
    """
    check = getattr(model, "check_length", None)
    try:
        if check is not None:
            check(length)
    except ValueError as error:
        return str(error)
    return None


def length_bits_per_byte(
    model: nn.Module,
    data: torch.Tensor,
    lengths: Iterable[int],
    *,
    num_targets: int | None = None,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> dict[int, dict]:
    """Bits per byte at each length on the same validation targets.

    ``data`` is segments ``(K, S + 1)`` whose ``S`` every length divides, or a
    stream ``(N,)`` of which the first ``num_targets`` targets are read (default:
    the most that the longest length fits). Returns ``{length: {"bpb": float |
    None, "by_position": (length,) tensor | None, "note": str | None}}``; a
    length the model rejects (its ``check_length`` raises ``ValueError``) gets
    ``None`` and the error as the note.
    """
    lengths = list(lengths)  # read twice: a generator would be spent after one length
    if data.dim() == 1 and num_targets is None:
        longest = max(lengths)
        num_targets = (data.numel() - 1) // longest * longest
    results = {}
    for length, losses, note in _losses_at_lengths(
        model, data, lengths, num_targets, batch_size, device
    ):
        if losses is None:
            results[length] = {"bpb": None, "by_position": None, "note": note}
            continue
        results[length] = {
            "bpb": losses.mean().item() / math.log(2),
            "by_position": losses.mean(0) / math.log(2),
            "note": None,
        }
    return results


def _losses_at_lengths(
    model: nn.Module,
    data: torch.Tensor,
    lengths: list[int],
    num_targets: int | None,
    batch_size: int,
    device: torch.device | str,
):
    """For each length: ``(length, losses, None)``, the loss in nats of every target
    of its windows ``(windows, length)`` (``_windows``), or ``(length, None, note)``
    where the model cannot read that length. Batches shrink as windows grow, so
    each batch holds about as many targets as one of the shortest length."""
    for length in lengths:
        note = length_error(model, length)
        if note is not None:
            yield length, None, note
            continue
        inputs, targets = _windows(data, length, num_targets)
        batch = max(1, batch_size * min(lengths) // length)
        yield length, _token_losses(model, inputs, targets, batch, device), None


def check_segments(segments: torch.Tensor) -> tuple[int, int]:
    """``(K, S)`` of validation segments ``(K, S + 1)``, or a ``ValueError`` saying what they must be."""
    if not isinstance(segments, torch.Tensor) or segments.dim() != 2:
        shape = (
            tuple(segments.shape)
            if isinstance(segments, torch.Tensor)
            else type(segments).__name__
        )
        raise ValueError(
            f"segments must be a 2-D tensor (K, S + 1) of bytes, one validation "
            f"segment a row (windows.evaluation_segments), got {shape}"
        )
    num_segments, span = segments.shape[0], segments.shape[1] - 1
    if num_segments == 0 or span <= 0:
        raise ValueError(
            f"segments (K, S + 1) need K >= 1 rows of S + 1 >= 2 bytes, got "
            f"{tuple(segments.shape)}"
        )
    return num_segments, span


def length_losses(
    model: nn.Module,
    segments: torch.Tensor,
    lengths: Iterable[int],
    *,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> dict[int, torch.Tensor | None]:
    """The loss in bits of every target at each length, ``{length: (K, S) | None}``.

    ``segments`` is ``(K, S + 1)`` with ``S`` a multiple of every length. At
    length ``n`` each segment is cut into ``S / n`` consecutive windows (those of
    ``length_bits_per_byte``), so entry ``[k, p]`` is
    ``-log2 P(segments[k, p + 1] | segments[k, n floor(p / n) : p + 1])``: the
    target at segment position ``p`` read with ``p mod n + 1`` bytes of context.
    Every length scores the same ``K x S`` targets; the mean of a length's
    tensor is its ``bpb`` in ``length_bits_per_byte``. A length the model
    cannot read (``length_error``) gets ``None``. Chapter 9 compares these
    target by target with ``window_reference_losses`` (``context_gain``).
    """
    num_segments, span = check_segments(segments)
    lengths = list(lengths)  # read twice: a generator would be spent after one length
    return {
        length: None
        if losses is None
        else losses.reshape(num_segments, span) / math.log(2)
        for length, losses, _ in _losses_at_lengths(
            model, segments, lengths, None, batch_size, device
        )
    }


def window_reference_losses(
    model: nn.Module,
    segments: torch.Tensor,
    window: int,
    *,
    stride: int | None = None,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The loss in bits of every target read in a sliding window of ``window`` bytes, ``(K, S)``.

    The reference for chapter 9's question "does reading more than the
    training length ``L`` help?": the same target, read with (nearly) a full
    ``L`` window of context. Windows of ``window`` bytes start at ``w = 0,
    stride, 2 stride, ..., S - window`` in each segment; the one at ``w`` reads
    bytes ``w .. w + window - 1`` and predicts the bytes one further on, the
    targets at segment positions ``p = w .. w + window - 1``. Each target is
    scored in the window where it is among the last ``stride``, so entry
    ``[k, p]`` is

        -log2 P(segments[k, p + 1] | segments[k, w(p) : p + 1]),
        w(p) = 0 for p < window, else the w with p - w in [window - stride, window),

    a context of ``p + 1`` bytes for ``p < window`` (exactly the plain
    ``window`` cut of ``length_losses``) and of ``window - stride + 1`` to
    ``window`` bytes beyond. The default ``stride = window // 8`` gives every
    target past the first window at least 7/8 of a window of context. For a
    target at ``p >= L``, ``length_losses(...)[n L][k, p] - reference[k, p]``
    is negative where the longer context helps that target and positive where
    it hurts (``context_gain``), which the mean bpb by length mixes up with the
    early targets' short context. ``stride`` must divide ``window`` and
    ``S - window``; the cost is ``window / stride`` times a plain pass.
    """
    window = require_positive_int(window, "window")
    if stride is None and window < 8:
        raise ValueError(
            f"window={window} is shorter than 8 bytes, so the default stride "
            "window // 8 is 0: pass a stride that divides the window"
        )
    stride = window // 8 if stride is None else stride
    stride = require_positive_int(stride, "stride")
    num_segments, span = check_segments(segments)
    if window % stride:
        raise ValueError(
            f"stride={stride} must divide window={window}, so that every target "
            f"is scored in exactly one window: choose a divisor of {window}, such as {window // 8 or 1}"
        )
    if span < window or (span - window) % stride:
        raise ValueError(
            f"segments of S={span} targets must hold one window of {window} and "
            f"then whole strides: S - window = {span - window} must be a "
            f"non-negative multiple of stride={stride}; choose a stride that "
            f"divides {span - window} (and the window) or segments of another length"
        )
    note = length_error(model, window)
    if note is not None:
        raise ValueError(f"the model cannot read a window of {window}: {note}")
    # (K, W, window): window j of segment k starts at j * stride
    inputs = segments[:, :-1].long().unfold(1, window, stride)
    targets = segments[:, 1:].long().unfold(1, window, stride)
    num_windows = inputs.shape[1]
    losses = _token_losses(
        model,
        inputs.reshape(-1, window),
        targets.reshape(-1, window),
        batch_size,
        device,
    ).view(num_segments, num_windows, window) / math.log(2)
    reference = torch.empty(num_segments, span, dtype=losses.dtype)
    reference[:, :window] = losses[:, 0]  # the first window: context p + 1
    # window j >= 1 gives its last `stride` targets, positions
    # j stride + window - stride .. j stride + window - 1: together window .. S - 1
    reference[:, window:] = losses[:, 1:, window - stride :].reshape(num_segments, -1)
    return reference


def context_gain(
    long_losses: torch.Tensor, reference: torch.Tensor, length: int, window: int
) -> torch.Tensor:
    """Per segment, the mean of ``long_losses - reference`` over the targets read past ``window``, ``(K,)``.

    ``long_losses`` is ``length_losses(...)[length]`` and ``reference``
    ``window_reference_losses(..., window)``, both ``(K, S)`` in bits. The
    targets averaged are those whose position inside their long window,
    ``p mod length``, is at least ``window``: read with more than ``window``
    bytes of context at ``length`` and with (nearly) ``window`` in the
    reference, so

        gain[k] = mean over {p : p mod length >= window} of long[k, p] - reference[k, p]

    is negative where the longer context helps the same targets and positive
    where it hurts (chapter 9: using context, not merely seeing more of it).
    """
    length = require_positive_int(length, "length")
    window = require_positive_int(window, "window")
    if length <= window:
        raise ValueError(
            f"length={length} must exceed window={window}: only a longer window "
            "reads targets past the reference window; pass the long length first"
        )
    if long_losses.dim() != 2 or long_losses.shape != reference.shape:
        raise ValueError(
            f"long_losses {tuple(long_losses.shape)} and reference "
            f"{tuple(reference.shape)} must be the same (K, S) targets of the same segments"
        )
    span = long_losses.shape[1]
    if span % length:
        raise ValueError(
            f"S={span} targets must split into windows of length={length}: pass "
            "the length long_losses was read at"
        )
    beyond = torch.arange(span) % length >= window
    return (long_losses - reference)[:, beyond].mean(1)


@torch.no_grad()
def _predictions(
    model: nn.Module, batches: Batches, seed: int, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The model's argmax on one seeded batch: predictions, targets, and which are scored."""
    device = torch.device(device)
    model.to(device).eval()
    inputs, targets = batches(torch.Generator().manual_seed(seed))
    predictions = model(inputs.to(device)).argmax(-1).cpu()
    return predictions, targets, targets != IGNORE_INDEX


def lookback_accuracy(
    model: nn.Module,
    batches: Batches,
    *,
    seed: int = 1234,
    device: torch.device | str = "cpu",
) -> float:
    """Fraction of the scored targets (not ``IGNORE_INDEX``) the model gets right."""
    predictions, targets, scored = _predictions(model, batches, seed, device)
    return (predictions[scored] == targets[scored]).float().mean().item()


def passkey_accuracy(
    model: nn.Module,
    batches: Batches,
    *,
    seed: int = 1234,
    device: torch.device | str = "cpu",
) -> float:
    """Fraction of rows whose every scored target is right (the whole key recalled)."""
    predictions, targets, scored = _predictions(model, batches, seed, device)
    right = (predictions == targets) | ~scored
    return right.all(dim=1).float().mean().item()


def passkey_digit_accuracy(
    model: nn.Module,
    batches: Batches,
    *,
    seed: int = 1234,
    device: torch.device | str = "cpu",
) -> list[float]:
    """The fraction right at each digit of the key, first to last (teacher-forced).

    The first digit is pure retrieval: nothing after ``QUERY`` hints at it,
    so guessing gets 1/10 of it right. The later ones are read with the true
    digits before them in the input, so a model that finds the first digit's
    match in the key and copies on (an induction head) gets them right even
    where it guessed the first. A whole-key accuracy of about 0.1 with later
    digits near 1 is that: a guess and a copy, not retrieval (chapter 9).
    Greedy generation would score the whole key the same (all digits right
    under teacher forcing is all right when generated), so the first digit's
    accuracy is the check a guess cannot pass.
    """
    predictions, targets, scored = _predictions(model, batches, seed, device)
    key_len = int(scored[0].sum())
    if not key_len or bool((scored.sum(1) != key_len).any()):
        raise ValueError(
            "every row must score the same number of key digits "
            "(synthetic.passkey_batch's targets)"
        )
    right = (predictions == targets)[scored].view(-1, key_len).float()
    return right.mean(0).tolist()
