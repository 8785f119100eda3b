"""The ``attention_bias`` suite: causal attention with ALiBi and T5 biases (chapter 10).

Rows, interleaved in one run, in three kernels, each with no bias and with
the biases it can take: SDPA with only the causal mask (the table's ``x ref``)
and with each bias materialised as a float ``attn_mask``; eager
FlexAttention with the causal block mask, without a ``score_mod`` and with
ALiBi's; compiled FlexAttention the same, plus T5's ``score_mod`` (compile
times reported apart). What a bias costs is read like with like: each biased
row over the same kernel's row without a bias (``bias_costs``); a compiled
kernel against an eager one says what compiling buys, not what the bias
costs. Every row is checked against the naive kernel on the same inputs
before it is timed, and one call of each is measured for the most memory it
holds (``peak MiB``; ``memory.peak_memory``).
"""

from __future__ import annotations

import warnings

import torch

from ..attention.core import (
    attend,
    compile_flex,
    flex_available,
    flex_block_mask,
    flex_compile_available,
    flex_compile_problem,
)
from ..attention.schemes import ALiBiScheme, T5BiasScheme
from ..encodings.alibi import ALiBiBias
from ..encodings.relative import T5RelativeBias
from . import timing as bench
from ._core import Plan, Suite, check_result, compile_counts, compile_note, register
from .chapters import attention_shape, sdpa_kernels, sdpa_note
from .timing import Case, with_peak_memory

REFERENCE = "SDPA, causal mask only"
# the target, at the shape it names: Flex with ALiBi at >= 0.85x SDPA's speed
GPU_TARGET = {"shape": [4, 16, 4096, 64], "speed": 0.85}


def _quiet(fn):
    """Call ``fn`` under no_grad, without eager Flex's warning that it is unfused."""

    def call():
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without")
            return fn()

    return call


def attention_bias_suite(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
    compiled: bool = True,
) -> Plan:
    """Causal attention of ``shape`` (B, H, T, D), default (1, 8, 1024, 64) on a CPU and
    (4, 16, 4096, 64) on a GPU (batch halved until eager Flex fits half its memory)."""
    if shape is None:
        shape = (1, 8, 1024, 64) if device.type == "cpu" else None
    batch, heads, seq, head_dim = attention_shape(device, shape, dtype)
    q, k, v = (
        torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype)
        for _ in range(3)
    )
    alibi = ALiBiScheme(ALiBiBias(heads)).to(device)
    t5 = T5BiasScheme(T5RelativeBias(heads, bidirectional=False)).to(device)
    notes: list[str] = []
    calls = {
        REFERENCE: lambda: attend(q, k, v, causal=True, kernel="sdpa"),
        "SDPA + materialised ALiBi": lambda: attend(
            q, k, v, alibi, causal=True, kernel="sdpa"
        ),
        "SDPA + materialised T5": lambda: attend(
            q, k, v, t5, causal=True, kernel="sdpa"
        ),
    }
    if not flex_available():
        notes.append(f"Flex rows: skipped, torch {torch.__version__} has none")
    else:
        blocks = flex_block_mask(seq, seq, causal=True, device=device)
        for label, scheme in (("no bias", None), ("ALiBi", alibi)):
            calls[f"Flex eager, {label}"] = lambda scheme=scheme: attend(
                q, k, v, scheme, causal=True, kernel="flex", block_mask=blocks
            )
        if compiled and flex_compile_available(device):
            for label, scheme in (("no bias", None), ("ALiBi", alibi), ("T5", t5)):
                before = compile_counts()
                with torch.no_grad():
                    seconds = compile_flex(
                        q, k, v, scheme, causal=True, block_mask=blocks
                    )
                notes.append(compile_note(f"compiled Flex, {label}", seconds, before))
                calls[f"Flex compiled, {label}"] = lambda scheme=scheme: attend(
                    q,
                    k,
                    v,
                    scheme,
                    causal=True,
                    kernel="flex",
                    block_mask=blocks,
                    compile=True,
                )
        elif compiled:
            notes.append(f"compiled Flex rows: skipped, {flex_compile_problem(device)}")
    reference_outputs = {}
    with torch.no_grad():
        for scheme_name, scheme in (("ALiBi", alibi), ("T5", t5), ("none", None)):
            reference_outputs[scheme_name] = attend(
                q.float(), k.float(), v.float(), scheme, causal=True, kernel="naive"
            )
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    cases = []
    shapes = {"q, k, v": [batch, heads, seq, head_dim]}
    dtype_name = str(dtype).replace("torch.", "")
    for name, fn in calls.items():
        fn = _quiet(fn)
        key = "ALiBi" if "ALiBi" in name else "T5" if "T5" in name else "none"
        check_result(
            name,
            fn().float(),
            reference_outputs[key],
            what="output",
            reference="the naive kernel",
            atol=tolerance,
            rtol=tolerance,
        )
        cases.append(Case(name, fn, shapes, dtype_name))
    notes += with_peak_memory(cases, device)
    kernels = sdpa_kernels(q, k, v, {"ALiBi": alibi, "T5": t5})
    notes.append(sdpa_note(kernels))
    return Plan(
        cases,
        notes=notes,
        settings={
            "shape": [batch, heads, seq, head_dim],
            "causal": True,
            "sdpa_kernel": kernels,
        },
        reference=REFERENCE,
    )


KERNELS = ("SDPA", "Flex eager", "Flex compiled")


def _unbiased(kernel: str) -> str:
    return REFERENCE if kernel == "SDPA" else f"{kernel}, no bias"


def _biased(kernel: str, bias: str) -> str:
    return f"SDPA + materialised {bias}" if kernel == "SDPA" else f"{kernel}, {bias}"


def bias_pairs(result) -> dict[tuple[str, str], tuple[bench.Timing, bench.Timing]]:
    """Each biased row with the same kernel's row without a bias (like with like):
    ``{(kernel, bias): (biased, unbiased)}``, for the rows this run has."""
    names = {t.name: t for t in result.timings}
    pairs = {}
    for kernel in KERNELS:
        plain = names.get(_unbiased(kernel))
        for bias in ("ALiBi", "T5"):
            biased = names.get(_biased(kernel, bias))
            if plain is not None and biased is not None:
                pairs[kernel, bias] = (biased, plain)
    return pairs


def bias_costs(result) -> dict[tuple[str, str], tuple[float, bool]]:
    """What each bias costs in each kernel: ``{(kernel, bias): (ratio, within_noise)}``.

    ``ratio`` is the biased row's time over the same kernel's without a bias
    (``bias_pairs``), per round where both were timed in the same rounds
    (``bench.ratio_of``); ``within_noise`` says whether the run cannot tell
    the bias's cost from nothing (``bench.within_noise``).
    """
    return {
        key: (bench.ratio_of(biased, plain), bench.within_noise(biased, plain))
        for key, (biased, plain) in bias_pairs(result).items()
    }


def report(result) -> list[str]:
    """The bias costs, like with like, then the GPU target."""
    lines = []
    for (kernel, bias), (ratio, noise) in bias_costs(result).items():
        verdict = " (within noise)" if noise else ""
        lines.append(
            f"{bias} in {kernel}: {ratio:.2f}x the same kernel without a bias{verdict}"
        )
    return lines + check_target(result)


def check_target(result) -> list[str]:
    """The GPU target: compiled Flex with ALiBi at >= 0.85x the speed of causal SDPA."""
    names = {t.name: t for t in result.timings}
    flex = names.get("Flex compiled, ALiBi")
    if flex is None:
        return []
    speed = names[REFERENCE].median_ms / flex.median_ms
    line = (
        f"target (GPU, q of {tuple(GPU_TARGET['shape'])}): Flex with ALiBi at "
        f"{GPU_TARGET['speed']:.2f}x the speed of SDPA without bias or better; "
        f"measured {speed:.2f}x"
    )
    if result.environment["device"].startswith("cuda"):
        met = speed >= GPU_TARGET["speed"]
        return [line + (": met" if met else ": NOT met")]
    return [line + " (a CPU run; the target is set for GPUs)"]


register(
    Suite(
        "attention_bias",
        "10",
        "ALiBi and T5 through SDPA and FlexAttention",
        attention_bias_suite,
        why="1024 tokens, 8 heads of 64 on a CPU; a batch of 4096-token sequences on a GPU",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=2,
        repeats=20,
        cpu_repeats=5,
        report=report,
        smoke={"shape": (1, 2, 8, 4), "compiled": False},
    )
)
