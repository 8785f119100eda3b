"""The GPU command's agreement step: the paths that must compute the same thing do.

    python tools/gpu_agreement.py --out DIR [--dry-run] [--cpu-compile]

Run by ``tools/gpu_evidence.py`` in a process of its own. On the GPU, in
float32, float16 and bfloat16 (bfloat16 only from compute capability 8.0; a
T4's refusal is recorded with its reason): RoPE by ``apply_rope``, the fused
eager ``apply_rope_qk`` (new outputs, ``out=``, in place),
``compiled_apply_rope_qk`` and the Triton kernel, each against ``apply_rope``
in float32; causal attention with an ALiBi bias through the naive kernel,
SDPA, eager and compiled FlexAttention, each against the naive kernel in
float32. Every check, with its largest difference, goes into
``DIR/agreement.json`` as soon as it is done, so a step cut short keeps what
it checked. Without a GPU (or with ``--dry-run``) the same checks run on the
CPU at tiny sizes, the Triton kernel in Triton's CPU interpreter, and the
compiled paths only with ``--cpu-compile``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _write_json(path: Path, document) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(temporary, path)


class Checks:
    """The agreement checks, written to agreement.json after each one."""

    def __init__(self, out: Path, device, dry_run: bool):
        self.path = out / "agreement.json"
        self.document = {
            "device": device,
            "dry_run": dry_run,
            "checks": [],
            "skipped": [],
        }
        self.write()

    def write(self) -> None:
        _write_json(self.path, self.document)

    def skip(self, name: str, why: str) -> None:
        self.document["checks"].append(
            {"name": name, "status": "skipped", "detail": why}
        )
        print(f"skipped {name}: {why}", flush=True)
        self.write()

    def compare(self, name: str, compute, want, tolerance: float) -> None:
        """``compute()`` (a tensor or a tuple of them) against ``want`` in float32."""
        import torch

        entry = {"name": name, "tolerance": tolerance}
        start = time.perf_counter()
        try:
            got = compute()
            got = got if isinstance(got, tuple | list) else (got,)
            wanted = want if isinstance(want, tuple | list) else (want,)
            difference = max(
                (g.float() - w.float()).abs().max().item() if g.numel() else 0.0
                for g, w in zip(got, wanted, strict=True)
            )
            finite = all(bool(torch.isfinite(g).all()) for g in got)
            passed = finite and difference <= tolerance
            entry.update(
                status="passed" if passed else "failed",
                max_abs_diff=difference,
                detail=""
                if passed
                else (
                    f"largest difference {difference:.3g} > {tolerance:g}"
                    if finite
                    else "not finite"
                ),
            )
        except Exception as error:  # a path that breaks is a finding, not a crash
            first = (str(error).strip().splitlines() or [""])[0][:300]
            entry.update(status="failed", detail=f"{type(error).__name__}: {first}")
        entry["seconds"] = round(time.perf_counter() - start, 3)
        self.document["checks"].append(entry)
        print(f"{entry['status']:<7} {name} {entry.get('detail', '')}", flush=True)
        self.write()


# largest absolute difference allowed from the float32 reference (outputs of size ~1..5)
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 6e-2}


def step_agreement(out: Path, dry_run: bool, cpu_compile: bool) -> int:
    import torch

    from pe_tutorial.devices import cuda_capability, device_name, timing_dtype

    on_gpu = torch.cuda.is_available() and not dry_run
    device = torch.device("cuda" if on_gpu else "cpu")
    if not on_gpu:
        # the Triton kernel runs in Triton's CPU interpreter (read at its first call)
        os.environ["TRITON_INTERPRET"] = "1"
    capability = cuda_capability(device)
    info = {
        "device": str(device),
        "name": device_name(device),
        "capability": None if capability is None else "{}.{}".format(*capability),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    checks = Checks(out, info, dry_run=not on_gpu)
    if not on_gpu:
        why = "no CUDA GPU here" if not torch.cuda.is_available() else "--dry-run"
        checks.document["skipped"].append(
            f"every check ran on the CPU at tiny sizes ({why}); the Triton kernel in "
            "Triton's interpreter"
        )
    compile_here = on_gpu or cpu_compile
    if not compile_here:
        checks.document["skipped"].append(
            "compiled paths (torch.compile RoPE, compiled Flex): compiling on a CPU "
            "takes tens of seconds; the unit tests check them (--cpu-compile adds them)"
        )
    torch.manual_seed(0)
    with torch.no_grad():
        for name in ("float32", "float16", "bfloat16"):
            usable, why = timing_dtype(name, device)
            if why is not None:
                checks.skip(f"{name}: every path", why)
                continue
            dtype = getattr(torch, name)
            _rope_checks(checks, device, dtype, on_gpu, compile_here)
            _attention_checks(checks, device, dtype, on_gpu, compile_here)
    failed = [c for c in checks.document["checks"] if c["status"] == "failed"]
    print(f"{len(failed)} of {len(checks.document['checks'])} checks failed")
    return 1 if failed else 0


def _rope_checks(checks: Checks, device, dtype, on_gpu: bool, compile_here: bool):
    """RoPE by every path, in two settings, against apply_rope in float32."""
    import torch

    name = str(dtype).replace("torch.", "")
    batch, heads, seq, head_dim = (2, 16, 1024, 128) if on_gpu else (1, 2, 8, 16)
    q = torch.randn(batch, heads, seq, head_dim, device=device).to(dtype)
    k = torch.randn(batch, heads // 2, seq, head_dim, device=device).to(dtype)
    offsets = torch.arange(batch, device=device)[:, None, None] * 37
    settings = {
        # positions with an offset, as a decoding model's: half pairs, all rotated
        "half pairs, offset positions": dict(
            positions=torch.arange(seq, device=device) + 1000, pairing="half"
        ),
        # per-sequence positions, interleaved pairs, half the channels rotated
        "interleaved, per-row positions, partial": dict(
            positions=torch.arange(seq, device=device)[None, None, :] + offsets,
            pairing="interleaved",
            rotary_dim=head_dim // 2,
        ),
    }
    for label, options in settings.items():
        _rope_setting(checks, q, k, f"RoPE {name}, {label}:", options, compile_here)


def _rope_setting(checks: Checks, q, k, prefix: str, options: dict, compile_here):
    """Every RoPE path on one setting (positions, pairing, rotary_dim) of q and k."""
    import torch

    from pe_tutorial.encodings import fused_rope, rope_triton
    from pe_tutorial.encodings.rope import apply_rope

    tolerance = TOLERANCE[str(q.dtype).replace("torch.", "")]
    positions = options.pop("positions")
    want = tuple(apply_rope(x.float(), positions, **options) for x in (q, k))

    def clones():
        return q.clone(), k.clone()

    paths = {
        "apply_rope": lambda: tuple(
            apply_rope(x, positions, **options) for x in (q, k)
        ),
        "apply_rope_qk": lambda: fused_rope.apply_rope_qk(q, k, positions, **options),
        "apply_rope_qk, out=": lambda: fused_rope.apply_rope_qk(
            q, k, positions, out=(torch.empty_like(q), torch.empty_like(k)), **options
        ),
        "apply_rope_qk, in place": lambda: fused_rope.apply_rope_qk(
            *clones(), positions, inplace=True, **options
        ),
    }
    skipped = {}
    if compile_here:
        paths["compiled_apply_rope_qk"] = lambda: fused_rope.compiled_apply_rope_qk(
            q, k, positions, **options
        )
    else:
        skipped["compiled_apply_rope_qk"] = "not compiled here"
    ready, why = rope_triton.triton_status(q.device, q.dtype)
    if ready:
        for inplace, label in ((False, "Triton kernel"), (True, "Triton, in place")):
            paths[label] = lambda inplace=inplace: rope_triton.apply_rope_qk_triton(
                *clones(), positions, inplace=inplace, **options
            )
    else:
        skipped["Triton kernel"] = why
    for label, compute in paths.items():
        checks.compare(f"{prefix} {label}", compute, want, tolerance)
    for label, why in skipped.items():
        checks.skip(f"{prefix} {label}", why)


def _attention_checks(checks: Checks, device, dtype, on_gpu: bool, compile_here: bool):
    import torch

    from pe_tutorial.attention.core import (
        attend,
        flex_available,
        flex_block_mask,
        flex_compile_problem,
    )
    from pe_tutorial.attention.schemes import ALiBiScheme
    from pe_tutorial.encodings.alibi import ALiBiBias

    name = str(dtype).replace("torch.", "")
    batch, heads, seq, head_dim = (2, 8, 1024, 64) if on_gpu else (1, 2, 16, 8)
    tolerance = TOLERANCE[name]
    q, k, v = (
        torch.randn(batch, heads, seq, head_dim, device=device).to(dtype)
        for _ in range(3)
    )
    alibi = ALiBiScheme(ALiBiBias(heads)).to(device)
    want = attend(q.float(), k.float(), v.float(), alibi, causal=True, kernel="naive")
    prefix = f"attention {name}, causal, ALiBi:"
    for kernel in ("naive", "sdpa"):
        checks.compare(
            f"{prefix} {kernel}",
            lambda kernel=kernel: attend(q, k, v, alibi, causal=True, kernel=kernel),
            want,
            tolerance,
        )
    if not flex_available():
        checks.skip(f"{prefix} Flex", f"torch {torch.__version__} has no FlexAttention")
        return
    import warnings

    blocks = flex_block_mask(seq, seq, causal=True, device=device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without")
        checks.compare(
            f"{prefix} Flex eager",
            lambda: attend(
                q, k, v, alibi, causal=True, kernel="flex", block_mask=blocks
            ),
            want,
            tolerance,
        )
    problem = flex_compile_problem(device)
    if not compile_here:
        checks.skip(f"{prefix} Flex compiled", "not compiled here")
    elif problem is not None:
        checks.skip(f"{prefix} Flex compiled", problem)
    else:
        checks.compare(
            f"{prefix} Flex compiled",
            lambda: attend(
                q,
                k,
                v,
                alibi,
                causal=True,
                kernel="flex",
                block_mask=blocks,
                compile=True,
            ),
            want,
            tolerance,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/gpu_agreement.py",
        description="Check that every RoPE and attention path agrees with its "
        "reference, on the GPU (or the CPU at tiny sizes), into DIR/agreement.json.",
    )
    parser.add_argument("--out", required=True, help="the folder for agreement.json")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny")
    parser.add_argument(
        "--cpu-compile", action="store_true", help="on the CPU, the compiled paths too"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return step_agreement(out, args.dry_run, args.cpu_compile)


if __name__ == "__main__":
    sys.exit(main())
