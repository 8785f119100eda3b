"""tools/gpu_evidence.py, the prepared GPU run: its dry run on the CPU end to end, the
order of its steps, that a step that fails or runs out of time is written down while
the next still runs, that the run ends inside its budget and keeps its summaries and
bundle current, and the sanity line on a GPU's copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import gpu_agreement  # noqa: E402
import gpu_evidence  # noqa: E402
import gpu_summary  # noqa: E402
import gpu_tests  # noqa: E402

from pe_tutorial import benchmarks  # noqa: E402


def test_the_dry_run_does_every_step_on_the_cpu_and_says_what_it_skipped(tmp_path):
    out, bundle = tmp_path / "evidence", tmp_path / "bundle"
    done = subprocess.run(
        [sys.executable, "tools/gpu_evidence.py", "--dry-run"]
        + ["--out", str(out), "--bundle", str(bundle)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = json.loads((out / "summary.json").read_text())
    steps = {step["name"]: step for step in summary["steps"]}
    assert done.returncode == 0, (done.stdout, [s["detail"] for s in steps.values()])
    assert list(steps) == [name for name, _ in gpu_evidence.STEPS]
    assert list(steps)[:2] == ["environment", "record-chapter-10"]
    assert all(s["status"] == "passed" and s["seconds"] >= 0 for s in steps.values())
    assert summary["dry_run"] and summary["ok"] and summary["device"]["device"] == "cpu"
    # the package's metadata holds the public version; torch's own adds the build
    # (2.13.0+cu130 from PyPI's CUDA wheel, 2.13.0+cpu from the CPU index)
    recorded = summary["environment"]["versions"]["torch"]
    assert recorded.split("+")[0] == torch.__version__.split("+")[0]
    # agreement: the eager, Triton (interpreted) and Flex paths ran and agree; the
    # compiled ones are skipped, and the summary says so
    checks = {c["name"]: c for c in summary["checks"]}
    assert not [c for c in checks.values() if c["status"] == "failed"]
    for path in ("apply_rope_qk, in place", "Triton kernel", "Triton, in place"):
        assert checks[f"RoPE bfloat16, half pairs, offset positions: {path}"][
            "status"
        ] == ("passed")
    assert checks["attention float16, causal, ALiBi: Flex eager"]["status"] == "passed"
    assert checks["attention float32, causal, ALiBi: Flex compiled"]["status"] == (
        "skipped"
    )
    skipped = " ".join(summary["skipped"])
    assert "compiled paths" in skipped and "Triton's interpreter" in skipped
    assert "never commit them" in skipped
    # record: every suite, in the files the chapters read, marked as smoke runs
    assert set(summary["suites"]) == set(benchmarks.SUITES)
    assert summary["environment"]["suites"] == sorted(benchmarks.SUITES)
    assert all(state.startswith("recorded") for state in summary["suites"].values())
    files = sorted((out / "results").glob("bench-*--cpu-*.json"))
    assert len(files) == len(benchmarks.SUITES)
    for path in files:
        document = json.loads(path.read_text())
        assert (
            document["settings"]["smoke"] is True and "--smoke" in document["command"]
        )
        benchmarks.SuiteResult.from_dict(document).table()
    # tests: the GPU-only ones were selected, and skip here
    assert summary["tests"]["selected"] >= 1 and summary["tests"]["failed"] == 0
    assert summary["tests"]["skipped"] >= 1
    text = (out / "summary.txt").read_text()
    assert "DRY RUN" in text and "every step passed" in text and "agreement" in text
    # the bundle: the whole folder in one archive, and the two summaries
    assert sorted(p.name for p in bundle.iterdir()) == [
        "gpu-evidence.tar.gz",
        "summary.json",
        "summary.txt",
    ]
    with tarfile.open(bundle / "gpu-evidence.tar.gz") as tar:
        names = tar.getnames()
    assert "gpu-evidence/summary.json" in names
    assert sum(name.startswith("gpu-evidence/results/bench-") for name in names) == len(
        files
    )


def test_a_step_that_fails_or_runs_out_of_time_is_written_down_and_the_next_runs(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(gpu_evidence, "MIN_STEP_SECONDS", 0.1)
    evidence = gpu_evidence.Evidence(tmp_path, dry_run=True, budget=60)
    python = sys.executable
    failing, code = evidence.step("one", [python, "-c", "raise SystemExit(3)"], 30, 2)
    assert code == 3 and failing["status"] == "failed"
    slow, code = evidence.step(
        "two", [python, "-c", "import time; time.sleep(60)"], 0.5, 1
    )
    assert code is None and slow["status"] == "timed out" and slow["seconds"] < 30
    quick, code = evidence.step("three", [python, "-c", "print('ran')"], 30, 0)
    assert code == 0 and quick["status"] == "passed"
    assert (tmp_path / "logs" / "three.log").read_text() == "ran\n"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["status"] for s in summary["steps"]] == ["failed", "timed out", "passed"]
    assert summary["ok"] is False
    assert "NOT every step passed" in (tmp_path / "summary.txt").read_text()
    # past the whole budget a step is skipped, not started
    evidence.deadline = 0
    late, code = evidence.step("four", [python, "-c", "pass"], 30, 0)
    assert code is None and late["status"] == "skipped"
    assert late["detail"] == "no time left"


def test_a_suite_the_record_step_never_reached_is_listed_as_not_recorded(tmp_path):
    log = tmp_path / "record-chapter-10.log"
    log.write_text("FAILED: rope: RuntimeError: broken\n")
    (tmp_path / "bench-roofline--cuda-x.json").write_text(
        json.dumps({"busy": "the load changed", "settings": {}, "command": "x"})
    )
    (tmp_path / "bench-copy_sizes--cuda-x.json").write_text(
        json.dumps({"settings": {}, "command": "copy_sizes --processes 3"})
    )
    states = gpu_summary.suite_states(
        tmp_path,
        [log, tmp_path / "never-written.log"],
        ["rope", "roofline", "train_step", "copy_sizes"],
    )
    assert states["rope"].startswith("FAILED")
    assert states["roofline"] == "recorded, flagged busy: the load changed"
    assert states["copy_sizes"] == "recorded in 3 processes"
    assert states["train_step"].startswith("NOT recorded (no step reached it")


def test_a_check_that_disagrees_or_breaks_fails_without_stopping_the_others(tmp_path):
    checks = gpu_agreement.Checks(tmp_path, {"device": "cpu"}, dry_run=True)
    want = torch.ones(3)
    checks.compare("right", lambda: torch.ones(3) + 1e-5, want, 1e-4)
    checks.compare("wrong", lambda: (torch.ones(3) * 2,), (want,), 1e-4)
    checks.compare("broken", lambda: 1 / 0, want, 1e-4)
    checks.compare("nan", lambda: torch.full((3,), float("nan")), want, 1e-4)
    checks.skip("elsewhere", "needs a GPU")
    document = json.loads((tmp_path / "agreement.json").read_text())
    status = {c["name"]: (c["status"], c["detail"]) for c in document["checks"]}
    assert status["right"] == ("passed", "")
    assert status["wrong"] == ("failed", "largest difference 1 > 0.0001")
    assert status["broken"] == ("failed", "ZeroDivisionError: division by zero")
    assert status["nan"] == ("failed", "not finite")
    assert status["elsewhere"] == ("skipped", "needs a GPU")


@pytest.mark.parametrize("marked_only", [False, True])
def test_the_cuda_tests_are_found_in_the_files_that_mention_cuda(marked_only):
    files = gpu_tests.cuda_test_files(marked_only=marked_only)
    # test_rope.py holds a test skipped without a GPU
    assert "tests/test_rope.py" in files
    assert ("tests/test_devices.py" in files) is not marked_only
    assert all((ROOT / f).read_text().lower().count("cuda") for f in files)


def test_chapter_10s_suites_come_first_and_the_lists_match_the_package():
    chapter_10 = {n for n, s in benchmarks.SUITES.items() if s.chapter == "10"}
    chapter_10.add("train_step")  # chapter 9's, which chapter 10 reads too
    assert set(gpu_evidence.CHAPTER_10) == chapter_10
    assert len(gpu_evidence.CHAPTER_10) == len(chapter_10)
    assert set(gpu_evidence.THREE_PROCESSES) <= chapter_10
    assert gpu_evidence._all_suites() == sorted(benchmarks.SUITES)
    args = gpu_evidence.argparse.Namespace(
        dry_run=False, cpu_compile=False, suite_seconds=10.0
    )
    evidence = gpu_evidence.Evidence(Path("/tmp/unused-evidence"), False, 480)
    commands = gpu_evidence.step_commands(args, Path("/tmp/e"), evidence)
    first = commands["record-chapter-10"]
    assert first[3 : 3 + len(chapter_10)] == list(gpu_evidence.CHAPTER_10)
    assert "--force" in first and "--processes" not in first
    repeat = commands["repeat-chapter-10"]
    assert repeat[repeat.index("--processes") + 1] == "3"
    others = commands["record-others"]
    assert not set(others) & chapter_10 and "attention_lengths" in others


def test_the_default_budget_ends_a_minute_before_a_ten_minute_limit():
    # the whole run, the last step's kill grace included, ends by the budget
    assert gpu_evidence.TOTAL_BUDGET <= gpu_evidence.LIMIT - gpu_evidence.MARGIN
    assert gpu_evidence.LIMIT == 600 and gpu_evidence.MARGIN >= 60
    # the GPU probe counts against the budget too, and leaves the steps time
    assert gpu_evidence.HAS_GPU_SECONDS < gpu_evidence.TOTAL_BUDGET / 4


def test_a_step_that_ignores_sigterm_is_killed_inside_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_evidence, "KILL_GRACE", 1.0)
    monkeypatch.setattr(gpu_evidence, "MIN_STEP_SECONDS", 0.1)
    monkeypatch.setattr(gpu_evidence, "TICK_SECONDS", 0.3)
    ticks = []
    budget = 3.0
    evidence = gpu_evidence.Evidence(
        tmp_path / "out", dry_run=True, budget=budget, bundle_to=tmp_path / "bundle"
    )
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "import os; print(os.getpid(), flush=True); time.sleep(60)"
    )
    entry, code = evidence.step(
        "stubborn",
        [sys.executable, "-c", stubborn],
        60,
        0,
        on_tick=lambda: ticks.append(time.monotonic()),
    )
    elapsed = time.monotonic() - evidence.started
    assert code is None and entry["status"] == "timed out"
    assert elapsed <= budget + 0.5, elapsed  # SIGKILL ended it by the deadline
    pid = int((tmp_path / "out" / "logs" / "stubborn.log").read_text().split()[0])
    with pytest.raises(ProcessLookupError):  # gone, not left running
        os.kill(pid, 0)
    # while it ran, the summaries and the bundle were written again
    assert len(ticks) >= 3
    assert (tmp_path / "bundle" / "summary.txt").is_file()
    with tarfile.open(tmp_path / "bundle" / "gpu-evidence.tar.gz") as tar:
        assert "gpu-evidence/logs/stubborn.log" in tar.getnames()


def test_the_sanity_line_flags_a_gpu_copy_below_half_its_nominal_bandwidth(tmp_path):
    def record(name, peak, rows):
        document = {
            "suite": name,
            "environment": {"peak_gb_s": peak},
            "results": rows,
        }
        (tmp_path / f"bench-{name}--cuda-x.json").write_text(json.dumps(document))

    copy = {"is_copy": True, "name": "copy, 1.0 GiB moved", "bytes_moved": 2**30}
    small = {"is_copy": True, "name": "copy, 1.0 MiB moved", "bytes_moved": 2**20}
    record(
        "copy_sizes",
        4800.0,
        [{**small, "bandwidth_gb_s": 900.0}, {**copy, "bandwidth_gb_s": 4000.0}],
    )
    record(
        "rope",
        4800.0,
        [{**copy, "bandwidth_gb_s": 1800.0}, {"name": "rope", "bandwidth_gb_s": 100.0}],
    )
    record("roofline", None, [{**copy, "bandwidth_gb_s": 10.0}])  # a CPU record
    lines = gpu_summary.sanity_lines(tmp_path)
    assert len(lines) == 2
    # the largest copy of each record is the one held against the peak
    assert lines[0].startswith("copy_sizes: copy, 1.0 GiB moved at 4000 GB/s, 83%")
    assert "BELOW" not in lines[0]
    assert lines[1].startswith("rope: copy, 1.0 GiB moved at 1800 GB/s, 38%")
    assert "BELOW 50%" in lines[1]
    summary = {
        "dry_run": False,
        "started": "now",
        "budget_s": 480,
        "steps": [],
        "sanity": lines,
        "ok": False,
    }
    assert "BELOW 50%" in gpu_summary.summary_text(summary)
