"""The timing suites behind the chapters' timing cells, runnable from the command line to record results.

A chapter calls a suite for its live measurement; a GPU run records the same
suite into ``book/data/<suite>.json`` so the chapter can show both::

    python -m pe_tutorial.benchmarks absolute_tables            # prints, on the default device
    python -m pe_tutorial.benchmarks absolute_tables --record   # also writes book/data/absolute_tables.json

Each suite takes a device and returns ``(timings, baseline)``: the baseline is a
copy of as many bytes as the suite's result, the memory-bandwidth limit the
other rows are compared with.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from torch import nn

from . import bench
from .absolute import binary_encoding, integer_encoding, sinusoidal_encoding
from .attention import dot_product_attention

__all__ = ["SUITES", "absolute_tables", "self_attention_lengths", "main"]

Suite = Callable[[torch.device], "tuple[list[bench.Timing], bench.Timing]"]


def absolute_tables(
    device: torch.device, *, num_positions: int | None = None, dim: int = 512
):
    """Build each absolute table for ``num_positions x dim`` and look rows up from a stored one (chapters 2-4).

    Computing the sinusoidal table costs transcendental functions per entry;
    looking rows up from a stored table (what a learned table does, or a cached
    sinusoidal one) moves the same bytes as a copy.
    """
    device = torch.device(device)
    if num_positions is None:
        num_positions = 8192 if device.type == "cuda" else 2048
    shapes = {"num_positions": num_positions, "dim": dim}
    nbytes = num_positions * dim * 4  # one float32 table written
    stored = nn.Embedding(num_positions, dim).to(device)
    positions = torch.arange(num_positions, device=device)
    cases = {
        "integer table": lambda: integer_encoding(num_positions, dim, device=device),
        "binary table": lambda: binary_encoding(
            num_positions, num_bits=dim, device=device
        ),
        "sinusoidal table": lambda: sinusoidal_encoding(
            num_positions, dim, device=device
        ),
        "lookup in a stored table": lambda: stored(positions),
    }
    timings = [
        bench.time_function(
            fn,
            name=name,
            device=device,
            dtype=torch.float32,
            shapes=shapes,
            bytes_moved=nbytes,
        )
        for name, fn in cases.items()
    ]
    baseline = bench.copy_baseline(torch.empty(num_positions, dim, device=device))
    return timings, baseline


def self_attention_lengths(
    device: torch.device, *, lengths: list[int] | None = None, head_dim: int = 64
):
    """Naive single-head attention over growing sequence lengths: cost grows as ``seq_len^2`` (chapter 1)."""
    device = torch.device(device)
    if lengths is None:
        lengths = (
            [1024, 2048, 4096, 8192] if device.type == "cuda" else [128, 256, 512, 1024]
        )
    timings = []
    for seq_len in lengths:
        q, k, v = torch.randn(3, 1, seq_len, head_dim, device=device)
        timings.append(
            bench.time_function(
                lambda q=q, k=k, v=v: dot_product_attention(q, k, v),
                name=f"attention, seq_len={seq_len}",
                device=device,
                dtype=torch.float32,
                shapes={"q": [1, seq_len, head_dim]},
                repeats=10,
            )
        )
    baseline = bench.copy_baseline(
        torch.empty(1, lengths[-1], lengths[-1], device=device),
        name=f"copy of one {lengths[-1]}x{lengths[-1]} score matrix",
    )
    return timings, baseline


SUITES: dict[str, Suite] = {
    "absolute_tables": absolute_tables,
    "self_attention_lengths": self_attention_lengths,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=sorted(SUITES))
    parser.add_argument("--device", default=str(bench.default_device()))
    parser.add_argument(
        "--record", action="store_true", help="write book/data/<suite>.json"
    )
    parser.add_argument(
        "--out", default=None, help="folder for --record (default: book/data)"
    )
    args = parser.parse_args(argv)
    timings, baseline = SUITES[args.suite](torch.device(args.device))
    print(bench.format_table([*timings, baseline], baseline=baseline))
    if args.record:
        path = bench.save_results(
            args.suite,
            [*timings, baseline],
            directory=args.out,
            notes=f"python -m pe_tutorial.benchmarks {args.suite} --record",
        )
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
