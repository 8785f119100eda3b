"""The book's first GPU run, prepared: one command that gathers the evidence a GPU can give.

    python tools/gpu_evidence.py --out DIR            # or: make gpu-evidence
    python tools/gpu_evidence.py --out DIR --bundle B # also B/gpu-evidence.tar.gz

On a machine with one CUDA GPU it runs four steps, each in a process of its
own under a wall-clock budget, so that a step that fails, hangs or crashes is
written down and the next one still runs (the whole run fits in 10 minutes:
``--budget``, 540 s by default):

1. ``environment``: Python, torch, CUDA, Triton and the peers' versions (read
   from the installed packages' metadata), ``nvidia-smi``'s GPU, driver and
   compute capability, the checkout's commit when git can say it, and the
   suites the record step should write.
2. ``agreement``: the paths that must compute the same thing do, on the GPU,
   in float32, float16 and bfloat16 (bfloat16 only from compute capability
   8.0; a T4's refusal is recorded with its reason): RoPE by ``apply_rope``,
   the fused eager ``apply_rope_qk`` (new outputs, ``out=``, in place),
   ``compiled_apply_rope_qk`` and the Triton kernel, each against
   ``apply_rope`` in float32; causal attention with an ALiBi bias through the
   naive kernel, SDPA, eager and compiled FlexAttention, each against the
   naive kernel in float32. Largest differences are kept.
3. ``record``: ``python -m pe_tutorial.benchmarks --all --record --force
   --out DIR/results --max-seconds 10``: every suite, one
   ``bench-SUITE--DEVICE.json`` each, the files the chapters read. ``--force``
   keeps a run whose copy probes say the machine was busy (a GPU's clocks
   ramping up can look like that); such a file says so in its ``busy`` key,
   and the summary lists it.
4. ``tests``: the tests that concern CUDA (those skipped without a GPU, those
   that mock one, those whose code names CUDA: see ``pytest_collection_modifyitems``
   below), from the test files that mention it, with pytest's JUnit report.

Everything goes into ``DIR``::

    DIR/summary.json, DIR/summary.txt   device, versions, each step's result and time,
                                        each check, each suite's file, the tests' counts
    DIR/agreement.json                  every check with its largest difference
    DIR/results/bench-*.json            the recorded suites (commit these into
                                        pe_tutorial/results/)
    DIR/logs/*.log, DIR/logs/tests.xml  each step's output

``--bundle B`` also writes ``B/gpu-evidence.tar.gz`` (all of DIR) and copies
the two summaries there: three files, for a runner that brings back only a
few. The exit status is 0 when every step passed (skips allowed), else 1.

On a machine without a GPU, or with ``--dry-run``, every step runs on the CPU
at tiny sizes and says what it skipped: the suites are timed with
``--smoke`` (one round, tiny sizes: not a measurement), the Triton kernel runs
in Triton's CPU interpreter, compiling is left out unless ``--cpu-compile``
(the unit tests check it), and of the tests only those that skip without a
GPU are collected (and skip). It takes about 30 s (tests/test_gpu_evidence.py
runs it).

What the GPU machine needs: this checkout (``pe_tutorial/``, ``tests/``,
``tools/``, ``pyproject.toml``) and a Python with torch (2.5 or later, CUDA
build), numpy, matplotlib, sympy, tqdm, pytest and hypothesis; Triton comes
with torch's CUDA build. The command installs nothing and reaches no network.
Optional, for the ``rope`` suite's peers (skipped with a note when missing):
transformers, rotary-embedding-torch, liger-kernel, flash-attn; on a machine
without a network they travel as wheels beside the checkout and are put on
``PYTHONPATH`` before the command (never installed by it). On a runner that
runs a command in the checkout and brings back a few files from ``$OUT``::

    python3 tools/gpu_evidence.py --out /tmp/gpu-evidence --bundle "$OUT"
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent

# (step, its own budget in seconds), in the order they run
STEPS = (("environment", 45), ("agreement", 150), ("record", 330), ("tests", 120))
TOTAL_BUDGET = 540.0
# seconds kept back for each step still to come when one step's timeout is set
RESERVE = 20.0
# a step with less time than this left is skipped, not started
MIN_STEP_SECONDS = 5.0
# a suite's timed rounds go on while a row is noisy up to this many seconds (on a GPU)
SUITE_SECONDS = 10.0
PEERS = ("transformers", "rotary-embedding-torch", "liger-kernel", "flash-attn")
VERSIONS = ("torch", "triton", "numpy", "pytest", "hypothesis", *PEERS)


# ---------------------------------------------------------------------------
# the parent: runs each step in a process of its own, under a budget
# ---------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _versions() -> dict[str, str | None]:
    """Installed versions, read from the packages' metadata (nothing is imported)."""
    found = {}
    for name in VERSIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    found["python"] = sys.version.split()[0]
    return found


def _command_output(command: list[str], timeout: float = 20) -> str | None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _environment() -> dict:
    """The machine as the shell sees it: versions, nvidia-smi, the commit."""
    smi = None
    if shutil.which("nvidia-smi"):
        query = "name,compute_cap,memory.total,driver_version"
        smi = _command_output(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"]
        ) or _command_output(["nvidia-smi", "-L"])
    commit = _command_output(["git", "rev-parse", "HEAD"])
    dirty = _command_output(["git", "status", "--porcelain", "--untracked-files=no"])
    return {
        "date": _now(),
        "versions": _versions(),
        "nvidia_smi": smi,
        "commit": commit,
        "uncommitted_changes": None if dirty is None else bool(dirty),
        "platform": sys.platform,
        "cpu_count": os.cpu_count(),
    }


class Evidence:
    """The summary, written again after every step so that a run cut short keeps it."""

    def __init__(self, out: Path, dry_run: bool, budget: float):
        self.out = out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = self.started + budget
        self.summary: dict = {
            "tool": "tools/gpu_evidence.py",
            "started": _now(),
            "dry_run": dry_run,
            "budget_s": budget,
            "device": None,
            "environment": None,
            "steps": [],
            "checks": [],
            "suites": {},
            "tests": None,
            "skipped": [],
            "ok": None,
        }

    def step(
        self, name: str, command: list[str], own_budget: float, later: int, env=None
    ):
        """Run one step's command under its budget; record its status and time."""
        left = self.deadline - time.monotonic() - RESERVE * later
        budget = min(own_budget, left)
        entry = {"name": name, "budget_s": round(max(budget, 0), 1), "log": None}
        if budget < MIN_STEP_SECONDS:
            entry.update(status="skipped", seconds=0.0, detail="no time left")
            self.summary["steps"].append(entry)
            self.write()
            return entry, None
        log = self.logs / f"{name}.log"
        entry["log"] = str(log.relative_to(self.out))
        env = dict(os.environ, **(env or {}), PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TOOLS)])
        start = time.monotonic()
        with open(log, "w") as handle:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code = process.wait(timeout=budget)
            except subprocess.TimeoutExpired:
                _stop(process)
                code = None
        entry["seconds"] = round(time.monotonic() - start, 1)
        if code is None:
            entry.update(status="timed out", detail=f"stopped after {budget:.0f} s")
        elif code == 0:
            entry.update(status="passed", detail="")
        else:
            entry.update(status="failed", detail=f"exit status {code}; see {log.name}")
        self.summary["steps"].append(entry)
        self.write()
        return entry, code

    def write(self) -> None:
        steps = self.summary["steps"]
        self.summary["ok"] = bool(steps) and all(s["status"] == "passed" for s in steps)
        self.summary["seconds"] = round(time.monotonic() - self.started, 1)
        _write_json(self.out / "summary.json", self.summary)
        (self.out / "summary.txt").write_text(summary_text(self.summary))


def _stop(process: subprocess.Popen) -> None:
    """End a step that ran out of time, and what it started (its own session)."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _write_json(path: Path, document) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(temporary, path)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summary_text(summary: dict) -> str:
    """The summary as a few lines to read: device, versions, steps, checks, suites, tests."""
    device = summary.get("device") or {}
    versions = (summary.get("environment") or {}).get("versions", {})
    kind = "DRY RUN on the CPU (tiny sizes)" if summary["dry_run"] else "GPU run"
    lines = [
        f"GPU evidence, {kind}, started {summary['started']} "
        f"({summary.get('seconds', 0):.0f} s of {summary['budget_s']:.0f})",
        f"device: {device.get('name', '?')} ({device.get('device', '?')}"
        + (f", capability {device['capability']}" if device.get("capability") else "")
        + ")",
        "versions: "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None),
        f"result: {'every step passed' if summary['ok'] else 'NOT every step passed'}",
        "",
        "steps:",
    ]
    for step in summary["steps"]:
        detail = f" ({step['detail']})" if step.get("detail") else ""
        lines.append(
            f"  {step['name']:<12} {step['status']:<10} {step['seconds']:6.1f} s"
            f" of {step['budget_s']:.0f}{detail}"
        )
    checks = summary.get("checks") or []
    if checks:
        failed = [c for c in checks if c["status"] == "failed"]
        counts = {
            s: sum(c["status"] == s for c in checks) for s in ("passed", "skipped")
        }
        lines += [
            "",
            f"agreement checks: {counts['passed']} passed, {len(failed)} failed, "
            f"{counts['skipped']} skipped",
        ]
        lines += [f"  FAILED {c['name']}: {c['detail']}" for c in failed]
    suites = summary.get("suites") or {}
    if suites:
        lines += ["", "suites:"]
        lines += [f"  {name:<22} {state}" for name, state in sorted(suites.items())]
    tests = summary.get("tests")
    if tests:
        lines += [
            "",
            f"tests: {tests['passed']} passed, {tests['failed']} failed, "
            f"{tests['skipped']} skipped, of {tests['selected']} selected",
        ]
        lines += [f"  FAILED {name}" for name in tests["failures"]]
    if summary.get("skipped"):
        lines += ["", "skipped here:"]
        lines += [f"  - {what}" for what in summary["skipped"]]
    return "\n".join(lines) + "\n"


def _suite_states(results: Path, log: Path, expected) -> dict[str, str]:
    """Each suite's fate, from the files written and the record step's output."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    states = {}
    for name in expected if isinstance(expected, list) else []:
        states[name] = "NOT recorded (the step stopped before it: see logs/record.log)"
    for name in re.findall(r"^FAILED: (\w+): ", text, flags=re.M):
        states[name] = "FAILED (see logs/record.log)"
    for path in sorted(results.glob("bench-*--*.json")):
        name = path.name[len("bench-") :].split("--")[0]
        document = _read_json(path) or {}
        busy = document.get("busy")
        if (document.get("settings") or {}).get("smoke"):
            states[name] = "recorded, smoke run (not a measurement)"
        else:
            states[name] = "recorded" + (f", flagged busy: {busy}" if busy else "")
    return states


def _test_counts(xml: Path) -> dict | None:
    try:
        root = ElementTree.parse(xml).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    cases = root.findall(".//testcase")
    failures = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in cases
        if case.find("failure") is not None or case.find("error") is not None
    ]
    skipped = sum(case.find("skipped") is not None for case in cases)
    return {
        "selected": len(cases),
        "failed": len(failures),
        "skipped": skipped,
        "passed": len(cases) - len(failures) - skipped,
        "failures": failures,
    }


def cuda_test_files(*, marked_only: bool = False) -> list[str]:
    """The test files that mention CUDA (the plugin below picks the tests inside);
    with ``marked_only``, those with a test skipped for want of a GPU (or for one)."""
    files = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        text = path.read_text()
        if marked_only:
            found = re.search(r"skipif\([^\n]*reason=[^\n]*(gpu|cuda)", text, re.I)
        else:
            found = "cuda" in text.lower()
        if found:
            files.append(str(path.relative_to(ROOT)))
    return files


def run(args) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("summary.json", "summary.txt", "agreement.json"):
        (out / stale).unlink(missing_ok=True)
    results = out / "results"
    shutil.rmtree(results, ignore_errors=True)
    shutil.rmtree(out / "logs", ignore_errors=True)
    evidence = Evidence(out, args.dry_run, args.budget)
    summary = evidence.summary
    python = sys.executable
    me = str(Path(__file__).resolve())
    dry = ["--dry-run"] if args.dry_run else []
    names = [name for name, _ in STEPS]
    for index, (name, own) in enumerate(STEPS):
        later = len(names) - index - 1
        if name == "environment":
            command = [python, me, "--step", "environment", "--out", str(out)]
        elif name == "agreement":
            command = [python, me, "--step", "agreement", "--out", str(out), *dry]
            if args.cpu_compile:
                command.append("--cpu-compile")
        elif name == "record":
            command = [python, "-m", "pe_tutorial.benchmarks", "--all", "--record"]
            command += ["--out", str(results)]
            if args.dry_run:
                command += ["--smoke", "--device", "cpu"]
            else:
                command += ["--force", "--max-seconds", str(args.suite_seconds)]
        else:
            files = cuda_test_files(marked_only=args.dry_run)
            command = [python, "-m", "pytest", *files, "-p", "gpu_evidence"]
            command += ["-q", "-rs", "-p", "no:cacheprovider"]
            command += ["--junitxml", str(evidence.logs / "tests.xml")]
        # the dry run's tests: those skipped for want of a GPU alone (quick)
        marked = {"GPU_EVIDENCE_TESTS": "marked"} if args.dry_run else {}
        evidence.step(name, command, own, later, env=marked)
        if name == "environment":
            summary["environment"] = _read_json(out / "environment.json")
        elif name == "agreement":
            agreement = _read_json(out / "agreement.json") or {}
            summary["device"] = agreement.get("device")
            summary["checks"] = agreement.get("checks", [])
            summary["skipped"] += agreement.get("skipped", [])
        elif name == "record":
            expected = (summary["environment"] or {}).get("suites")
            summary["suites"] = _suite_states(
                results, evidence.logs / "record.log", expected
            )
            if args.dry_run:
                summary["skipped"].append(
                    "suites timed with --smoke (tiny sizes, one round): the files in "
                    "results/ are not measurements, never commit them"
                )
        else:
            summary["tests"] = _test_counts(evidence.logs / "tests.xml")
            if args.dry_run:
                summary["skipped"].append(
                    "the tests that need a GPU skip on the CPU (their count is under "
                    "tests)"
                )
        evidence.write()
    if args.bundle:
        bundle(out, Path(args.bundle))
    print(summary_text(summary), end="")
    return 0 if summary["ok"] else 1


def bundle(out: Path, destination: Path) -> Path:
    """``destination/gpu-evidence.tar.gz`` of all of ``out``, and its two summaries."""
    destination.mkdir(parents=True, exist_ok=True)
    archive = destination / "gpu-evidence.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(out, arcname="gpu-evidence")
    for name in ("summary.json", "summary.txt"):
        if (out / name).resolve() != (destination / name).resolve():
            shutil.copyfile(out / name, destination / name)
    return archive


# ---------------------------------------------------------------------------
# the steps that run in their own process
# ---------------------------------------------------------------------------


def step_environment(out: Path) -> int:
    environment = _environment()
    try:  # the suites that the record step should write
        from pe_tutorial.benchmarks import SUITES

        environment["suites"] = sorted(SUITES)
    except Exception as error:  # torch or the package broken here: said, not fatal
        environment["suites"] = f"{type(error).__name__}: {error}"
    _write_json(out / "environment.json", environment)
    print(json.dumps(environment, indent=1))
    return 0


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


# ---------------------------------------------------------------------------
# pytest plugin (``-p gpu_evidence``): keep the tests that concern CUDA
# ---------------------------------------------------------------------------


def concerns_cuda(item, marked_only: bool = False) -> bool:
    """A test skipped without a GPU (or with one), one that pretends a GPU is there
    (a fixture with ``gpu`` in its name), or one whose code names CUDA; with
    ``marked_only`` (the dry run), the first kind alone."""
    for mark in item.iter_markers("skipif"):
        if re.search(r"gpu|cuda", str(mark.kwargs.get("reason", "")), re.I):
            return True
    if marked_only:
        return False
    if any("gpu" in name for name in getattr(item, "fixturenames", ())):
        return True
    try:
        source = inspect.getsource(item.function)
    except (AttributeError, OSError, TypeError):
        return False
    return "cuda" in source.lower()


def pytest_collection_modifyitems(config, items):
    marked_only = os.environ.get("GPU_EVIDENCE_TESTS") == "marked"
    selected = [item for item in items if concerns_cuda(item, marked_only)]
    deselected = [item for item in items if item not in selected]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected


# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/gpu_evidence.py",
        description="On a GPU: the CUDA tests, the paths' agreement and every suite "
        "recorded, into one folder. Without one (or --dry-run): the same on the CPU "
        "at tiny sizes.",
    )
    parser.add_argument("--out", required=True, help="the folder for everything")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="every step on the CPU at tiny sizes (also what happens without a GPU)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=TOTAL_BUDGET,
        help=f"seconds for all the steps together (default {TOTAL_BUDGET:.0f})",
    )
    parser.add_argument(
        "--suite-seconds",
        type=float,
        default=SUITE_SECONDS,
        help="--max-seconds for each recorded suite (default %(default)s)",
    )
    parser.add_argument(
        "--bundle",
        default=None,
        metavar="DIR",
        help="also write DIR/gpu-evidence.tar.gz and the two summaries",
    )
    parser.add_argument(
        "--cpu-compile",
        action="store_true",
        help="on the CPU, check the compiled paths too (slow)",
    )
    parser.add_argument(
        "--step", choices=("environment", "agreement"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if not args.budget > 0 or not args.suite_seconds > 0:
        parser.error("--budget and --suite-seconds must be positive")
    if args.step == "environment":
        return step_environment(Path(args.out))
    if args.step == "agreement":
        return step_agreement(Path(args.out), args.dry_run, args.cpu_compile)
    if not args.dry_run and not _has_gpu():
        args.dry_run = True
    return run(args)


def _has_gpu() -> bool:
    """Whether torch sees a CUDA GPU, asked in a process of its own (a broken driver
    must not take this one down)."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    try:
        done = subprocess.run([sys.executable, "-c", code], timeout=120, cwd=ROOT)
    except subprocess.SubprocessError:
        return False
    return done.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
