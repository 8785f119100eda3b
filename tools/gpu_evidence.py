"""The book's first GPU run, prepared: one command that gathers the evidence a GPU can give.

    python tools/gpu_evidence.py --out DIR            # or: make gpu-evidence
    python tools/gpu_evidence.py --out DIR --bundle B # also B/gpu-evidence.tar.gz
    python tools/gpu_evidence.py --out DIR --dry-run  # the rehearsal on a CPU

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
   and chapter 9's ``train_step``; the copies every ratio rests on and the
   ``rope`` suite first, before the cold compiles of the others, the ones
   that compile FlexAttention last), ``python -m pe_tutorial.benchmarks SUITE ...
   --record --force --out DIR/results --max-seconds 10``: one
   ``bench-SUITE--DEVICE.json`` each, written as each suite ends, the files
   chapter 10 reads. Each record carries the GPU's clocks and SDPA's kernels
   (``pe_tutorial.devices``). ``--force`` keeps a run whose copy probes say
   the machine was busy (a GPU's clocks ramping up can look like that); such
   a file says so in its ``busy`` key, and the summary lists it.
3. ``agreement`` (``tools/gpu_agreement.py``): the paths that must compute the
   same thing do, on the GPU, in float32, float16 and bfloat16.
4. ``tests`` (``tools/gpu_tests.py``): the tests that concern CUDA (not this
   tool's own, whose dry run takes minutes), with pytest's JUnit report.
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

Where torch sees no CUDA GPU the command stops at once with one line and
exit status 2, saying why: ``nvidia-smi`` sees a GPU that this Python's torch
cannot use (``.venv``'s pinned CPU build, say: ``make gpu-evidence`` runs it
in a venv of its own with torch's CUDA build), or there is no GPU at all.

``--dry-run`` rehearses every step on the CPU, and says so at its start, in
its result line and in its summaries: the suites run with ``--smoke`` (one
round at tiny sizes, not a measurement) and ``--smoke-compiled`` (their
compiled rows, compiled FlexAttention where ``pe_tutorial.attention`` can
compile it on the CPU, kept); ``rope_decode``'s CUDA-graph row runs with
CUDA graphs mocked (``cpu_cuda_graphs``: the capture records the operators
one call runs, a replay runs them again into the same tensors); the repeat
step merges three processes (uncompiled, for time); the agreement compiles
(``--cpu-compile``) and runs the Triton kernel in Triton's CPU interpreter;
of the tests only those that skip without a GPU are collected (and skip).
Each step gets twice its own budget (``DRY_RUN_STEP_FACTOR``). It takes 2 to
3 minutes on a busy 2-core machine, most of it compiling and starting the
processes (tests/test_gpu_evidence.py runs it).

What the GPU machine needs: this checkout (``pe_tutorial/``, ``tests/``,
``tools/``, ``pyproject.toml``) and a Python with torch (2.5 or later, CUDA
build), numpy, matplotlib, sympy, tqdm, pytest and hypothesis; Triton comes
with torch's CUDA build. The command installs nothing and reaches no network.
Optional, for the ``rope`` suite's peers (skipped with a note when missing):
transformers, rotary-embedding-torch, liger-kernel, flash-attn; on a machine
without a network they travel as wheels beside the checkout and are put on
``PYTHONPATH`` before the command (never installed by it): each step's
``PYTHONPATH`` is the checkout's folders, then the caller's. On a runner that
runs a command in the checkout and brings back a few files from ``$OUT``::

    python3 tools/gpu_evidence.py --out /tmp/gpu-evidence --bundle "$OUT"
"""

from __future__ import annotations

import argparse
import contextlib
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
# what chapter 10 reads (its suites and chapter 9's train_step): the copies every
# ratio rests on and the rope suite first (a first run's cold compiles of the
# others must not cost them their time), those its claims need most next, and
# the suites that compile FlexAttention (the longest cold start) last
CHAPTER_10 = (
    "copy_sizes",
    "roofline",
    "rope",
    "rope_decode",
    "train_step",
    "train_step_profile",
    "rope_in_cache",
    "rope_backward",
    "attention_bias",
    "attention_backward",
)
# recorded again in this many processes where the time allows
THREE_PROCESSES = ("copy_sizes", "rope", "rope_decode")
PROCESSES = 3
# the runner's limit the default budget is set against, and the margin kept
LIMIT = 600.0
MARGIN = 60.0
TOTAL_BUDGET = 480.0
# a step out of time gets SIGTERM, then SIGKILL, each with half of this to end
KILL_GRACE = 20.0
# a dry run's step gets this many times its own budget (the whole run's is the same)
DRY_RUN_STEP_FACTOR = 2
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
# the venv `make gpu-evidence` makes with torch's CUDA build (the Makefile's GPU_VENV)
GPU_VENV = "_build/venv-gpu"
# the dry run's record steps run the benchmarks' command line through this step
SUITES_STEP = "suites"
# this tool's own tests, left out of the tests step (the dry run they hold takes minutes)
OWN_TESTS = "tests/test_gpu_evidence.py"
DRY_RUN_LINE = (
    "DRY RUN (--dry-run): every step on the CPU at tiny sizes, a rehearsal of the "
    "GPU run's code paths; nothing here is GPU evidence, commit none of it"
)


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
        # the checkout first, then the caller's own (the peers' wheels, say)
        ours = [str(ROOT), str(TOOLS)]
        theirs = env.get("PYTHONPATH", "").split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(
            ours + [path for path in theirs if path and path not in ours]
        )
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
        (self.out / "summary.txt").write_text(text_of(self.summary))
        if self.bundle_to is not None:
            bundle(self.out, self.bundle_to)


def text_of(summary: dict) -> str:
    """``summary.txt``: ``gpu_summary.summary_text``, and a dry run said loudly, in
    its first line and its result line."""
    text = summary_text(summary)
    if not summary["dry_run"]:
        return text
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("result: "):
            lines[i] = f"{line} (in a DRY RUN on the CPU: not GPU evidence)"
            break
    return "\n".join([DRY_RUN_LINE, *lines]) + "\n"


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
    if args.dry_run:
        # tiny sizes, one round: not a measurement. Through the step that mocks CUDA
        # graphs on the CPU; the compiled rows kept in one process, and the merging
        # of several processes checked on the uncompiled ones (each process pays
        # its own imports and compiles: a minute more on a busy CPU)
        command = [python, str(Path(__file__).resolve()), "--step", SUITES_STEP]
        command += [*suites, "--record", "--out", str(results)]
        command += ["--smoke", "--device", "cpu"]
        if processes > 1:
            return command + ["--processes", str(processes)]
        return command + ["--smoke-compiled"]
    command = [python, "-m", "pe_tutorial.benchmarks", *suites, "--record"]
    command += ["--out", str(results)]
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
    if args.dry_run:  # the compiled paths too, as on the GPU
        agreement += ["--dry-run", "--cpu-compile"]
    # of the files that mention CUDA, not this tool's own tests (they run it)
    files = cuda_test_files(marked_only=args.dry_run)
    files = [name for name in files if name != OWN_TESTS]
    tests = [python, "-m", "pytest", *files]
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
        if args.dry_run:  # the CPU compiles and starts processes slower
            own *= DRY_RUN_STEP_FACTOR
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
            "suites timed with --smoke (tiny sizes, one round; compiled rows kept, "
            f"the {PROCESSES} processes of {' '.join(THREE_PROCESSES)} uncompiled): "
            "the files in results/ are not measurements, never commit them",
            "CUDA graphs: rope_decode's graph row ran with the graph mocked on the "
            "CPU (see logs/record-chapter-10.log); no graph was captured",
            "the tests that need a GPU skip on the CPU (their count is under tests)",
        ]
    evidence.write()
    print(text_of(summary), end="")
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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["--step", SUITES_STEP]:
        return step_suites(argv[2:])
    parser = argparse.ArgumentParser(
        prog="python tools/gpu_evidence.py",
        description="On a GPU: chapter 10's suites recorded first, then the paths' "
        "agreement, the CUDA tests and the other suites, into one folder. With "
        "--dry-run: the same on the CPU at tiny sizes. Without a GPU torch can use "
        "(and without --dry-run) it stops, saying why in one line (exit status 2).",
    )
    parser.add_argument("--out", required=True, help="the folder for everything")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="rehearse every step on the CPU at tiny sizes, the compiled paths, "
        "mocked CUDA graphs and 3 processes included: not GPU evidence",
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
    parser.add_argument("--step", choices=("environment",), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.budget > 0 or not args.suite_seconds > 0:
        parser.error("--budget and --suite-seconds must be positive")
    if args.step == "environment":
        return step_environment(Path(args.out))
    if args.dry_run:
        print(f"{DRY_RUN_LINE} (starting: its summary follows)", flush=True)
    else:
        problem = gpu_problem()
        if problem is not None:
            print(f"tools/gpu_evidence.py: {problem}", file=sys.stderr)
            return 2
    return run(args, started)


def gpu_problem() -> str | None:
    """Why this Python cannot make the GPU run (one sentence), or None when its
    torch sees a CUDA GPU. ``nvidia-smi`` says whether there is a GPU at all."""
    usable, torch_says = _torch_cuda()
    if usable:
        return None
    gpus, smi_says = _nvidia_smi_gpus()
    if gpus:
        return (
            f"nvidia-smi sees a GPU ({gpus[0]}) but {torch_says}: run it with a "
            "torch built for CUDA (`make gpu-evidence` makes and uses "
            f"{GPU_VENV}, torch's CUDA build from PyPI), or give --dry-run to "
            "rehearse on the CPU"
        )
    return (
        f"no GPU here ({smi_says}; {torch_says}): there is nothing to record; give "
        "--dry-run to rehearse every step on the CPU at tiny sizes"
    )


def _torch_cuda() -> tuple[bool, str]:
    """Whether this Python's torch can use a CUDA GPU, and what it says, asked in a
    process of its own (a broken driver must not take this one down)."""
    code = (
        "import json, warnings, torch\n"
        "with warnings.catch_warnings(record=True) as said:\n"
        "    warnings.simplefilter('always')\n"
        "    ok = torch.cuda.is_available()\n"
        "print(json.dumps([torch.__version__, torch.version.cuda, ok,"
        " [str(w.message) for w in said]]))"
    )
    python = sys.executable
    try:
        done = subprocess.run(
            [python, "-c", code],
            timeout=HAS_GPU_SECONDS,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except subprocess.TimeoutExpired:
        return False, f"{python}'s torch did not answer in {HAS_GPU_SECONDS:.0f} s"
    except OSError as error:
        return False, f"{python} cannot run ({error.strerror})"
    try:
        version, cuda, usable, said = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"{python} cannot import torch ({last[:200]})"
    if usable:
        return True, f"torch {version} sees a CUDA GPU"
    if cuda is None:
        return False, f"{python}'s torch {version} is built without CUDA"
    hint = f" ({said[0].splitlines()[0][:200]})" if said else ""
    return False, (
        f"{python}'s torch {version} (CUDA {cuda}) cannot use it: "
        f"torch.cuda.is_available() is False{hint}"
    )


def _nvidia_smi_gpus() -> tuple[list[str], str]:
    """The GPUs ``nvidia-smi -L`` lists (none where it is missing or fails), and
    what it said, in a few words."""
    if shutil.which("nvidia-smi") is None:
        return [], "no nvidia-smi"
    try:
        done = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError) as error:
        return [], f"nvidia-smi failed ({type(error).__name__})"
    if done.returncode != 0:
        return [], f"nvidia-smi failed (exit status {done.returncode})"
    gpus = [line.strip() for line in done.stdout.splitlines() if line.startswith("GPU")]
    return gpus, f"nvidia-smi lists {len(gpus)} GPU(s)"


# ---------------------------------------------------------------------------
# the dry run's record steps: the benchmarks' command line, CUDA graphs mocked
# ---------------------------------------------------------------------------

MOCKED_GRAPH_NOTE = (
    "MOCKED on the CPU by the dry run (tools/gpu_evidence.py): the capture recorded "
    "the operators one call ran and each replay runs them again into the same "
    "tensors; the suite's capture, checks and report ran, no CUDA graph did"
)


def step_suites(argv: list[str]) -> int:
    """``python -m pe_tutorial.benchmarks ARGV`` with CUDA graphs mocked on the CPU
    (``cpu_cuda_graphs``): the dry run's record steps."""
    from pe_tutorial.benchmarks import cli

    with cpu_cuda_graphs():
        return cli.main(argv)


@contextlib.contextmanager
def cpu_cuda_graphs():
    """While open, ``rope_decode``'s CUDA-graph row runs on the CPU, mocked.

    The suite's own capture code (``decode._graphed_cases``) runs as on a GPU,
    with ``torch.cuda``'s streams and graphs replaced: the capture records each
    aten operator one call runs (with the tensors it read and wrote) and
    refuses those that wait for the device, as a real capture does (``.item()``,
    ``nonzero``); a replay runs them again, each writing into the tensors the
    capture's wrote (a graph's fixed addresses). The row is then checked
    against its reference, timed and reported as on a GPU, with a note that
    says it was mocked.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from pe_tutorial.benchmarks import decode

    waits = {"aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero"}
    waits.add("aten::equal")

    class Recorder(TorchDispatchMode):
        def __init__(self, calls: list):
            super().__init__()
            self.calls = calls

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func._schema.name in waits:
                raise RuntimeError(
                    f"{func._schema.name} waits for the device, which a CUDA "
                    "graph's capture does not allow (mocked on the CPU)"
                )
            out = func(*args, **kwargs)
            self.calls.append((func, args, kwargs, out))
            return out

    def tensors(value) -> list:
        values = value if isinstance(value, (tuple, list)) else [value]
        return [v if isinstance(v, torch.Tensor) else None for v in values]

    class Graph:
        def __init__(self, *args, **kwargs):
            self.calls: list = []

        def replay(self) -> None:
            for func, args, kwargs, out in self.calls:
                again = func(*args, **kwargs)
                for old, new in zip(tensors(out), tensors(again), strict=True):
                    if old is None or new is None:
                        continue
                    # a view or an in-place result shares the old one's memory
                    if new.untyped_storage().data_ptr() != (
                        old.untyped_storage().data_ptr()
                    ):
                        old.copy_(new)

    class Stream:
        def __init__(self, *args, **kwargs):
            pass

        def wait_stream(self, other) -> None:
            pass

    class SeenAsCuda:
        """The suite's inputs, their q reporting a CUDA device."""

        def __init__(self, x):
            self._x = x
            self.q = type("Q", (), {"device": torch.device("cuda")})()

        def __getattr__(self, name):
            return getattr(self._x, name)

    real = decode._graphed_cases

    def graphed(x, one_call, notes):
        if x.q.device.type == "cuda":
            return real(x, one_call, notes)
        from unittest import mock

        with mock.patch.multiple(
            torch.cuda,
            Stream=Stream,
            CUDAGraph=Graph,
            current_stream=lambda *args, **kwargs: Stream(),
            stream=lambda *args, **kwargs: contextlib.nullcontext(),
            graph=lambda graph, *args, **kwargs: Recorder(graph.calls),
        ):
            cases = real(SeenAsCuda(x), one_call, notes)
        notes.append(f"{decode.GRAPHED}: {MOCKED_GRAPH_NOTE}")
        return cases

    decode._graphed_cases = graphed
    try:
        yield
    finally:
        decode._graphed_cases = real


if __name__ == "__main__":
    sys.exit(main())
