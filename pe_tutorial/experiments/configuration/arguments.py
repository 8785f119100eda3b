"""The command line's shared argument types: ``--jobs N`` and ``--shard K/N``, read
alike by a run (``cli.py``) and a judge (``judge.py``); each bad value is one
line from argparse."""

from __future__ import annotations

import argparse

__all__ = ["jobs_argument", "shard_argument"]


def shard_argument(text: str) -> tuple[int, int]:
    k, slash, n = text.partition("/")
    try:
        shard = int(k), int(n)
    except ValueError:
        shard = None
    if not slash or shard is None or not 1 <= shard[0] <= shard[1]:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give K/N, shard K of N with 1 <= K <= N, such as 1/4"
        )
    return shard


def jobs_argument(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number 1 or more")
    return jobs
