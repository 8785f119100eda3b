"""The book's first GPU run, prepared: one command that gathers the evidence a GPU can give.

    python tools/gpu_evidence.py --out DIR            # or: make gpu-evidence
    python tools/gpu_evidence.py --out DIR --bundle B # also B/gpu-evidence.tar.gz

On a machine with one CUDA GPU it runs six steps, each in a process of its own
under a wall-clock budget, so that a step that fails, hangs or crashes is
written down and the next one still runs. The whole run, the final kill
grace included, ends within ``--budget`` seconds of the start (480 by
default: at least a minute before a runner's 10-minute limit). In the order
they run, most valuable first:

1. ``environment``: Python, torch, CUDA, Triton and the peers' versions (read
   from the installed packages' metadata), ``nvidia-smi``'s GPU, driver,
   compute capability and clocks, the checkout's commit when git can say it,
   and the suites the record steps should write.
2. ``record-chapter-10``: what chapter 10 reads (``CHAPTER_10``: its suites
   and chapter 9's ``train_step``, those its claims need most first, the
   ones that compile FlexAttention last), ``python -m pe_tutorial.benchmarks SUITE ...
   --record --force --out DIR/results --max-seconds 10``: one
   ``bench-SUITE--DEVICE.json`` each, written as each suite ends, the files
   chapter 10 reads. Each record carries the GPU's clocks and SDPA's kernels
   (``pe_tutorial.devices``). ``--force`` keeps a run whose copy probes say
   the machine was busy (a GPU's clocks ramping up can look like that); such
   a file says so in its ``busy`` key, and the summary lists it.
3. ``agreement`` (``tools/gpu_agreement.py``): the paths that must compute the
   same thing do, on the GPU, in float32, float16 and bfloat16.
4. ``tests`` (``tools/gpu_tests.py``): the tests that concern CUDA, with
   pytest's JUnit report.
5. ``repeat-chapter-10``: the suites whose ratios chapter 10 quotes most
   (``THREE_PROCESSES``) recorded again in three separate processes merged
   (the tables' runs column), replacing their one-process files suite by
   suite as each completes.
6. ``record-others``: every other chapter's suites, as step 2.

Everything goes into ``DIR``, and the summaries and the bundle are written
again after every step and every ``TICK_SECONDS`` during one, so a run cut
short by its runner keeps what it finished::

    DIR/summary.json, DIR/summary.txt   device, versions, each step's result and time,
                                        each check, each suite's file, the tests'
                                        counts, and a sanity line per GPU copy
    DIR/agreement.json                  every check with its largest difference
    DIR/results/bench-*.json            the recorded suites (commit these into
                                        pe_tutorial/results/)
    DIR/logs/*.log, DIR/logs/tests.xml  each step's output

The sanity lines hold each record's largest copy against the device's
nominal bandwidth: a copy below half of it (``gpu_summary.SANITY_SHARE``) is flagged,
since every ratio to a copy rests on it (clocks held down, another job on
the GPU, or a table with the wrong peak).

``--bundle B`` also writes ``B/gpu-evidence.tar.gz`` (all of DIR) and copies
the two summaries there: three files, for a runner that brings back only a
few. The exit status is 0 when every step passed (skips allowed), else 1.

On a machine without a GPU, or with ``--dry-run``, every step runs on the CPU
at tiny sizes and says what it skipped: the suites are timed with
``--smoke`` (one round, tiny sizes, one process: not a measurement), the
Triton kernel runs in Triton's CPU interpreter, compiling is left out unless
``--cpu-compile`` (the unit tests check it), and of the tests only those that
skip without a GPU are collected (and skip). It takes about 30 s
(tests/test_gpu_evidence.py runs it).

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
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))  # its steps and summary, when run as a script

from gpu_summary import (  # noqa: E402
    read_json,
    sanity_lines,
    suite_states,
    summary_text,
    test_counts,
)

# (step, its own budget in seconds), in the order they run; a step gets at
# most what is left once the steps after it have RESERVE each
STEPS = (
    ("environment", 30),
    ("record-chapter-10", 200),
    ("agreement", 75),
    ("tests", 75),
    ("repeat-chapter-10", 120),
    ("record-others", 90),
)
# what chapter 10 reads (its suites and chapter 9's train_step), those its
# claims need most first, and the suites that compile FlexAttention (the
# longest cold start) last
CHAPTER_10 = (
    "rope_decode",
    "train_step",
    "train_step_profile",
    "rope",
    "copy_sizes",
    "roofline",
    "rope_in_cache",
    "rope_backward",
    "attention_bias",
    "attention_backward",
)
# recorded again in this many processes where the time allows
THREE_PROCESSES = ("rope", "rope_decode", "copy_sizes")
PROCESSES = 3
# the runner's limit the default budget is set against, and the margin kept
LIMIT = 600.0
MARGIN = 60.0
TOTAL_BUDGET = 480.0
# a step out of time gets SIGTERM, then SIGKILL, each with half of this to end
KILL_GRACE = 20.0
# seconds kept back for each step still to come when one step's timeout is set
RESERVE = 15.0
# a step with less time than this left is skipped, not started
MIN_STEP_SECONDS = 5.0
# the summaries and the bundle are written again this often during a step
TICK_SECONDS = 20.0
# how long the parent waits to learn whether torch sees a GPU
HAS_GPU_SECONDS = 60.0
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
    """The summary, written again (and bundled) after every step and every
    ``TICK_SECONDS`` during one, so that a run cut short keeps it."""

    def __init__(
        self,
        out: Path,
        dry_run: bool,
        budget: float,
        *,
        started: float | None = None,
        bundle_to: Path | None = None,
    ):
        self.out = out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic() if started is None else started
        self.deadline = self.started + budget
        self.bundle_to = bundle_to
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
            "sanity": [],
            "tests": None,
            "skipped": [],
            "ok": None,
        }

    def step(
        self,
        name: str,
        command: list[str],
        own_budget: float,
        later: int,
        env=None,
        on_tick=None,
    ):
        """Run one step's command under its budget; record its status and time.

        The budget leaves ``RESERVE`` for each of the ``later`` steps and the
        kill grace, so even a step that must be killed has ended by the
        deadline. ``on_tick()`` runs every ``TICK_SECONDS`` while it runs,
        before the summaries and the bundle are written again.
        """
        left = self.deadline - time.monotonic() - RESERVE * later - KILL_GRACE
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
        code = None
        with open(log, "w") as handle:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            while True:
                remaining = start + budget - time.monotonic()
                if remaining <= 0:
                    _stop(process)
                    code = None
                    break
                try:
                    code = process.wait(timeout=min(TICK_SECONDS, remaining))
                    break
                except subprocess.TimeoutExpired:
                    if on_tick is not None:
                        on_tick()
                    self.write()
        entry["seconds"] = round(time.monotonic() - start, 1)
        if code is None:
            entry.update(status="timed out", detail=f"stopped after {budget:.0f} s")
        elif code == 0:
            entry.update(status="passed", detail="")
        else:
            entry.update(status="failed", detail=f"exit status {code}; see {log.name}")
        self.summary["steps"].append(entry)
        if on_tick is not None:
            on_tick()
        self.write()
        return entry, code

    def write(self) -> None:
        steps = self.summary["steps"]
        self.summary["ok"] = bool(steps) and all(s["status"] == "passed" for s in steps)
        self.summary["seconds"] = round(time.monotonic() - self.started, 1)
        _write_json(self.out / "summary.json", self.summary)
        (self.out / "summary.txt").write_text(summary_text(self.summary))
        if self.bundle_to is not None:
            bundle(self.out, self.bundle_to)


def _stop(process: subprocess.Popen) -> None:
    """End a step that ran out of time, and what it started (its own session):
    SIGTERM, then SIGKILL, each given half of ``KILL_GRACE``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=KILL_GRACE / 2)
            return
        except subprocess.TimeoutExpired:
            continue


def _write_json(path: Path, document) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(temporary, path)


def _record_command(python: str, suites, results: Path, args, processes: int = 1):
    command = [python, "-m", "pe_tutorial.benchmarks", *suites, "--record"]
    command += ["--out", str(results)]
    if args.dry_run:  # tiny sizes, one round, one process: not a measurement
        return command + ["--smoke", "--device", "cpu"]
    command += ["--force", "--max-seconds", str(args.suite_seconds)]
    if processes > 1:
        command += ["--processes", str(processes)]
    return command


def step_commands(args, out: Path, evidence: Evidence) -> dict[str, list[str]]:
    """Each step's command line."""
    from gpu_tests import cuda_test_files

    python = sys.executable
    results = out / "results"
    others = [name for name in _all_suites() if name not in CHAPTER_10]
    agreement = [python, str(TOOLS / "gpu_agreement.py"), "--out", str(out)]
    if args.dry_run:
        agreement.append("--dry-run")
    if args.cpu_compile:
        agreement.append("--cpu-compile")
    tests = [python, "-m", "pytest", *cuda_test_files(marked_only=args.dry_run)]
    tests += ["-p", "gpu_tests", "-q", "-rs", "-p", "no:cacheprovider"]
    tests += ["--junitxml", str(evidence.logs / "tests.xml")]
    return {
        "environment": [python, str(Path(__file__).resolve()), "--step"]
        + ["environment", "--out", str(out)],
        "record-chapter-10": _record_command(python, CHAPTER_10, results, args),
        "agreement": agreement,
        "tests": tests,
        "repeat-chapter-10": _record_command(
            python, THREE_PROCESSES, results, args, processes=PROCESSES
        ),
        "record-others": _record_command(python, others, results, args),
    }


def _all_suites() -> list[str]:
    """The suites' names, read from the package's files (torch is not imported
    in the parent: a broken install must not take it down)."""
    folder = ROOT / "pe_tutorial" / "benchmarks"
    text = "\n".join(path.read_text() for path in sorted(folder.glob("*.py")))
    return sorted(set(re.findall(r'Suite\(\s*"(\w+)",', text)))


def run(args, started: float | None = None) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("summary.json", "summary.txt", "agreement.json"):
        (out / stale).unlink(missing_ok=True)
    results = out / "results"
    shutil.rmtree(results, ignore_errors=True)
    shutil.rmtree(out / "logs", ignore_errors=True)
    bundle_to = Path(args.bundle).resolve() if args.bundle else None
    evidence = Evidence(
        out, args.dry_run, args.budget, started=started, bundle_to=bundle_to
    )
    summary = evidence.summary
    commands = step_commands(args, out, evidence)
    recording_steps = [n for n, _ in STEPS if n.startswith(("record", "repeat"))]
    record_logs = [evidence.logs / f"{name}.log" for name in recording_steps]

    def suites_so_far():
        expected = (summary["environment"] or {}).get("suites")
        summary["suites"] = suite_states(results, record_logs, expected)
        summary["sanity"] = sanity_lines(results)

    names = [name for name, _ in STEPS]
    for index, (name, own) in enumerate(STEPS):
        later = len(names) - index - 1
        # the dry run's tests: those skipped for want of a GPU alone (quick)
        marked = {"GPU_EVIDENCE_TESTS": "marked"} if args.dry_run else {}
        recording = name in recording_steps
        evidence.step(
            name,
            commands[name],
            own,
            later,
            env=marked,
            on_tick=suites_so_far if recording else None,
        )
        if name == "environment":
            summary["environment"] = read_json(out / "environment.json")
        elif name == "agreement":
            agreement = read_json(out / "agreement.json") or {}
            summary["device"] = agreement.get("device")
            summary["checks"] = agreement.get("checks", [])
            summary["skipped"] += agreement.get("skipped", [])
        elif name == "tests":
            summary["tests"] = test_counts(evidence.logs / "tests.xml")
        evidence.write()
    if args.dry_run:
        summary["skipped"] += [
            "suites timed with --smoke (tiny sizes, one round, one process): the "
            "files in results/ are not measurements, never commit them",
            "the tests that need a GPU skip on the CPU (their count is under tests)",
        ]
    evidence.write()
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
# the environment step, run in a process of its own
# ---------------------------------------------------------------------------


def step_environment(out: Path) -> int:
    environment = _environment()
    try:  # the suites that the record steps should write, and the GPU's clocks
        import torch

        from pe_tutorial.benchmarks import SUITES
        from pe_tutorial.devices import gpu_clocks

        environment["suites"] = sorted(SUITES)
        if torch.cuda.is_available():
            environment["clocks"] = gpu_clocks("cuda:0")
    except Exception as error:  # torch or the package broken here: said, not fatal
        environment["suites"] = f"{type(error).__name__}: {error}"
    _write_json(out / "environment.json", environment)
    print(json.dumps(environment, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()  # the budget counts from here, the GPU probe included
    parser = argparse.ArgumentParser(
        prog="python tools/gpu_evidence.py",
        description="On a GPU: chapter 10's suites recorded first, then the paths' "
        "agreement, the CUDA tests and the other suites, into one folder. Without "
        "one (or --dry-run): the same on the CPU at tiny sizes.",
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
        help=f"seconds for the whole run, kill grace included (default "
        f"{TOTAL_BUDGET:.0f}: {LIMIT - TOTAL_BUDGET:.0f} s inside a {LIMIT:.0f} s limit)",
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
        help="also write DIR/gpu-evidence.tar.gz and the two summaries, after "
        "every step",
    )
    parser.add_argument(
        "--cpu-compile",
        action="store_true",
        help="on the CPU, check the compiled paths too (slow)",
    )
    parser.add_argument("--step", choices=("environment",), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.budget > 0 or not args.suite_seconds > 0:
        parser.error("--budget and --suite-seconds must be positive")
    if args.step == "environment":
        return step_environment(Path(args.out))
    if not args.dry_run and not _has_gpu():
        args.dry_run = True
    return run(args, started)


def _has_gpu() -> bool:
    """Whether torch sees a CUDA GPU, asked in a process of its own (a broken driver
    must not take this one down)."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], timeout=HAS_GPU_SECONDS, cwd=ROOT
        )
    except subprocess.SubprocessError:
        return False
    return done.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
