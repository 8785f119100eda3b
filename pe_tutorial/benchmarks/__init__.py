"""The timing suites: one per chapter, and chapter 10's on RoPE and attention biases.

Chapter 10's: ``rope``, ``rope_in_cache``, ``rope_decode`` (one token per
sequence, written into the KV cache), ``attention_bias``, and forward plus
backward, ``rope_backward`` and ``attention_backward``; where a training
step's time goes, ``train_step_profile`` (``torch.profiler``, by group).

A chapter's timing cell is one call::

    from pe_tutorial import benchmarks
    benchmarks.show(benchmarks.run("absolute_tables"))

which prints every recorded run of the suite that ships with the package (one
per device), then the live table as "this machine". The prose quotes the
recorded run of one reference machine, ``benchmarks.quoted(name)``, so it reads
the same on every build. From a shell::

    python -m pe_tutorial.benchmarks rope --device cpu --json out.json
    python -m pe_tutorial.benchmarks --all --record

``--record`` writes ``pe_tutorial/results/bench-<suite>--<device>.json``, the
files the chapters read (``--processes 3`` records three separate processes
merged). Every row is timed interleaved with the others, its page faults
counted, and compared with a copy of its own bytes and kind: a clone for a row
that returns new tensors (``timing``, whose ``ratio_text`` and ``within_noise``
the prose uses through this package).
"""

from __future__ import annotations

from ..memory import peak_memory
from . import (  # noqa: F401  (register the suites)
    attention_bias,
    backward,
    chapters,
    copies,
    decode,
    long_context,
    roofline,
    rope,
    step_profile,
    train_step,
)
from ._core import (
    SUITES,
    Plan,
    Suite,
    SuiteResult,
    WrongResult,
    load_recorded,
    load_recorded_runs,
    quoted,
    record,
    results_dir,
    run,
    show,
)
from .cli import main
from .round_ratios import RoundRatio, round_ratio
from .timing import (
    PROBE_BYTES,
    NoisyRow,
    check_quotable,
    check_ratio_quotable,
    fastest_group,
    fastest_text,
    noise_text,
    ratio_noise_text,
    ratio_of,
    ratio_text,
    tensors_written,
    within_noise,
)

__all__ = [
    "SUITES",
    "Plan",
    "Suite",
    "SuiteResult",
    "WrongResult",
    "run",
    "show",
    "record",
    "load_recorded",
    "load_recorded_runs",
    "quoted",
    "results_dir",
    "main",
    "ratio_text",
    "ratio_of",
    "fastest_group",
    "fastest_text",
    "within_noise",
    "RoundRatio",
    "round_ratio",
    "NoisyRow",
    "check_quotable",
    "check_ratio_quotable",
    "ratio_noise_text",
    "noise_text",
    "tensors_written",
    "PROBE_BYTES",
    "peak_memory",
]
