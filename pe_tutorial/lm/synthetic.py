"""The synthetic tasks of chapters 9 and 12: batches that isolate position.

- ``lookback_batch``: random symbols whose target at position ``t`` is the
  symbol at ``t - k``. Solving it needs relative position and nothing else, so
  it shows plainly which schemes generalise to longer sequences.
- ``passkey_batch``: a key of digits hidden at a chosen depth in random
  filler, asked for at the end (passkey retrieval, the test long-context work
  reports); with several named keys, one asked for (RULER's multi-key needle).

Targets are ``IGNORE_INDEX`` wherever nothing is asked.
"""

from __future__ import annotations

import torch

from .._validation import require_positive_int
from .data import IGNORE_INDEX

__all__ = ["lookback_batch", "passkey_batch", "PASSKEY_SYMBOLS", "MAX_KEYS"]


def lookback_batch(
    batch_size: int,
    seq_len: int,
    generator: torch.Generator,
    *,
    lookback: int,
    num_symbols: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The look-back task: random symbols; the target at ``t`` is the symbol at ``t - k``.

    Inputs are ``(B, T)`` symbols in ``0 .. num_symbols - 1``; targets are the
    inputs shifted right by ``k = lookback``, with ``IGNORE_INDEX`` at the first
    ``k`` positions, which have nothing ``k`` back.
    """
    require_positive_int(lookback, "lookback")
    require_positive_int(num_symbols, "num_symbols")
    if lookback >= seq_len:
        raise ValueError(
            f"lookback={lookback} leaves nothing to predict in {seq_len} positions"
        )
    inputs = torch.randint(0, num_symbols, (batch_size, seq_len), generator=generator)
    targets = torch.full_like(inputs, IGNORE_INDEX)
    targets[:, lookback:] = inputs[:, :-lookback]
    return inputs, targets


# The passkey task's symbols: filler 0-15, digits 16-25, then the two markers, then
# the names that tell several keys apart (``keys`` > 1): 28 .. 28 + MAX_KEYS - 1.
PASSKEY_SYMBOLS = {"filler": 16, "digits": 16, "key": 26, "query": 27, "names": 28}
MAX_KEYS = 8


def passkey_batch(
    batch_size: int,
    seq_len: int,
    generator: torch.Generator,
    *,
    key_len: int = 4,
    depth: float | None = None,
    keys: int = 1,
    ask_every_key: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Passkey retrieval: find the key hidden in filler and say it at the end.

    Each row is random filler symbols with ``KEY d1 .. dk`` placed at
    ``depth`` (0: the start, 1: just before the question; None: a random depth
    per row), and ends with ``QUERY d1 .. d(k-1)``. The targets ask for the
    key after ``QUERY``, one digit at each of the last ``k`` positions
    (``IGNORE_INDEX`` elsewhere), so a model must copy from however far back
    the key is: content found at any distance, the point of the test
    (Mohtashami and Jaggi, 2023). Symbols are ``PASSKEY_SYMBOLS``.

    ``keys`` > 1 is the multi-key variant (RULER's multi-key needle, Hsieh et
    al., 2024; chapter 12): each row holds ``keys`` blocks ``KEY name d1 ..
    dk``, each with a different name (``PASSKEY_SYMBOLS["names"]`` onward, at
    most ``MAX_KEYS``), none overlapping, and asks ``QUERY name d1 .. d(k-1)``
    for one of them, the one placed at ``depth``; the others are at random
    places. A model must match the name, not just find the one marked block.

    ``ask_every_key`` asks for every key, one question after another in a
    random order (``QUERY name d1 .. d(k-1)`` each, its targets the key's
    digits from the name on, so ``dk`` is only a target): the supervision of
    multi-query associative recall (MQAR, Arora et al., 2023). Chapter 12
    trains on it and scores on one question. ``depth`` places one key's block,
    as above (the key a row of one question asks for); here that key is asked
    at a random place among the questions, not necessarily first.
    """
    require_positive_int(batch_size, "batch_size")
    require_positive_int(key_len, "key_len")
    require_positive_int(keys, "keys")
    if keys > MAX_KEYS:
        raise ValueError(
            f"keys={keys}: the task has {MAX_KEYS} names to tell keys apart; "
            f"ask for at most {MAX_KEYS}"
        )
    if depth is not None and not 0 <= depth <= 1:
        raise ValueError(f"depth must be between 0 and 1 (or None), got {depth}")
    if ask_every_key and keys == 1:
        raise ValueError(
            "ask_every_key asks each of several keys, but keys is 1; give keys = 2 "
            "or more, or drop ask_every_key"
        )
    if ask_every_key:
        return _every_key_batch(batch_size, seq_len, generator, key_len, depth, keys)
    if keys > 1:
        return _multi_key_batch(batch_size, seq_len, generator, key_len, depth, keys)
    last_start = seq_len - 2 * key_len - 1  # room for the key block and the question
    if last_start < 0:
        raise ValueError(
            f"seq_len={seq_len} cannot hold a key of {key_len} digits and the "
            f"question: it needs at least {2 * key_len + 1} positions"
        )
    s = PASSKEY_SYMBOLS
    tokens = torch.randint(
        0, s["filler"], (batch_size, seq_len + 1), generator=generator
    )
    key = s["digits"] + torch.randint(0, 10, (batch_size, key_len), generator=generator)
    if depth is None:
        starts = torch.randint(0, last_start + 1, (batch_size,), generator=generator)
    else:
        starts = torch.full((batch_size,), round(depth * last_start))
    rows = torch.arange(batch_size)[:, None]
    tokens[rows, starts[:, None]] = s["key"]
    tokens[rows, starts[:, None] + 1 + torch.arange(key_len)] = key
    tokens[:, seq_len - key_len] = s["query"]
    tokens[:, seq_len - key_len + 1 :] = key
    inputs = tokens[:, :-1]
    targets = torch.full_like(inputs, IGNORE_INDEX)
    targets[:, -key_len:] = key
    return inputs, targets


def _multi_key_batch(
    batch_size: int,
    seq_len: int,
    generator: torch.Generator,
    key_len: int,
    depth: float | None,
    keys: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``passkey_batch`` with ``keys`` > 1 named key blocks (its docstring)."""
    question = key_len + 1  # QUERY name d1 .. d(k-1)
    last_start = _last_block_start(seq_len, key_len, keys, asked=1)
    s = PASSKEY_SYMBOLS
    tokens = torch.randint(
        0, s["filler"], (batch_size, seq_len + 1), generator=generator
    )
    digits = torch.randint(0, 10, (batch_size, keys, key_len), generator=generator)
    digits = s["digits"] + digits
    for row in range(batch_size):
        names = _place_key_blocks(
            tokens[row], digits[row], last_start, depth, generator
        )
        tokens[row, seq_len - question] = s["query"]
        tokens[row, seq_len - key_len] = names[0]
        tokens[row, seq_len - key_len + 1 :] = digits[row, 0]
    inputs = tokens[:, :-1]
    targets = torch.full_like(inputs, IGNORE_INDEX)
    targets[:, -key_len:] = digits[:, 0]
    return inputs, targets


def _last_block_start(seq_len: int, key_len: int, keys: int, *, asked: int) -> int:
    """The latest start of a key block (``KEY name d1 .. dk``) in a row that ends
    with ``asked`` questions (``QUERY name d1 .. d(k-1)`` each); a ValueError if
    ``keys`` blocks placed at random might not fit before them."""
    block, question = key_len + 2, key_len + 1
    # each block placed rules out at most 2 * block - 1 starts of another, so
    # this many positions always leave a start free for every block
    needed = asked * question + block + (keys - 1) * (2 * block - 1)
    if seq_len < needed:
        questions = (
            f"the question of {question}"
            if asked == 1
            else f"{asked} questions of {question}"
        )
        raise ValueError(
            f"seq_len={seq_len} is too short for {keys} key blocks of {block} "
            f"positions placed at random and {questions}: it needs at least "
            f"{needed} positions; ask for fewer keys or a longer sequence"
        )
    return seq_len - asked * question - block


def _place_key_blocks(
    row: torch.Tensor,
    keys: torch.Tensor,
    last_start: int,
    depth: float | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """Write ``KEY name d1 .. dk`` for each key (``keys``: one per row of digit
    symbols) into ``row``, none overlapping, each starting at most at
    ``last_start``; the first at ``depth`` (None: at random), the others at random
    starts still free. Returns the names given, in the order of ``keys``."""
    s = PASSKEY_SYMBOLS
    count, key_len = keys.shape
    block = key_len + 2
    names = s["names"] + torch.randperm(MAX_KEYS, generator=generator)[:count]
    if depth is None:
        first = int(torch.randint(0, last_start + 1, (1,), generator=generator))
    else:
        first = round(depth * last_start)
    starts = [first]
    while len(starts) < count:  # each other block at a random start still free
        free = [
            start
            for start in range(last_start + 1)
            if all(abs(start - placed) >= block for placed in starts)
        ]
        starts.append(free[int(torch.randint(0, len(free), (1,), generator=generator))])
    for start, name, key in zip(starts, names, keys):
        row[start] = s["key"]
        row[start + 1] = name
        row[start + 2 : start + block] = key
    return names


def _every_key_batch(
    batch_size: int,
    seq_len: int,
    generator: torch.Generator,
    key_len: int,
    depth: float | None,
    keys: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``passkey_batch`` with ``ask_every_key``: the key blocks, then a question
    for each key in a random order (its docstring)."""
    question = key_len + 1  # QUERY name d1 .. d(k-1); dk is a target only
    asked_from = seq_len - keys * question  # the questions fill the row's end
    last_start = _last_block_start(seq_len, key_len, keys, asked=keys)
    s = PASSKEY_SYMBOLS
    tokens = torch.randint(0, s["filler"], (batch_size, seq_len), generator=generator)
    targets = torch.full_like(tokens, IGNORE_INDEX)
    digits = torch.randint(0, 10, (batch_size, keys, key_len), generator=generator)
    digits = s["digits"] + digits
    for row in range(batch_size):
        names = _place_key_blocks(
            tokens[row], digits[row], last_start, depth, generator
        )
        order = torch.randperm(keys, generator=generator).tolist()
        for j, i in enumerate(order):
            at = asked_from + j * question
            tokens[row, at] = s["query"]
            tokens[row, at + 1] = names[i]
            tokens[row, at + 2 : at + question] = digits[row, i, :-1]
            targets[row, at + 1 : at + question] = digits[row, i]
    return tokens, targets
