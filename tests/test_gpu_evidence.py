"""tools/gpu_evidence.py, the prepared GPU run: its dry run on the CPU end to end (the
compiled paths, CUDA graphs mocked and three processes included), its refusal where
torch cannot use a GPU, the order of its steps and suites, that a step keeps the
caller's PYTHONPATH, that a step that fails or runs out of time is written down while
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
from pe_tutorial.attention.flex import flex_compile_available  # noqa: E402
from pe_tutorial.benchmarks import decode  # noqa: E402
from pe_tutorial.encodings import fused_rope  # noqa: E402


def test_the_dry_run_does_every_step_on_the_cpu_and_says_what_it_skipped(tmp_path):
    out, bundle = tmp_path / "evidence", tmp_path / "bundle"
    done = subprocess.run(
        [sys.executable, "tools/gpu_evidence.py", "--dry-run"]
        + ["--out", str(out), "--bundle", str(bundle)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads((out / "summary.json").read_text())
    steps = {step["name"]: step for step in summary["steps"]}
    assert done.returncode == 0, (done.stdout, [s["detail"] for s in steps.values()])
    # it says it is a dry run as it starts, and in its summary's first and result lines
    assert done.stdout.startswith(gpu_evidence.DRY_RUN_LINE)
    assert list(steps) == [name for name, _ in gpu_evidence.STEPS]
    assert list(steps)[:2] == ["environment", "record-chapter-10"]
    assert all(s["status"] == "passed" and s["seconds"] >= 0 for s in steps.values())
    assert summary["dry_run"] and summary["ok"] and summary["device"]["device"] == "cpu"
    # the package's metadata holds the public version; torch's own adds the build
    # (2.13.0+cu130 from PyPI's CUDA wheel, 2.13.0+cpu from the CPU index)
    recorded = summary["environment"]["versions"]["torch"]
    assert recorded.split("+")[0] == torch.__version__.split("+")[0]
    # agreement: the eager, compiled, Triton (interpreted) and Flex paths ran and
    # agree, compiled Flex where it compiles on this CPU
    checks = {c["name"]: c for c in summary["checks"]}
    assert not [c for c in checks.values() if c["status"] == "failed"]
    for path in (
        "apply_rope_qk, in place",
        "compiled_apply_rope_qk",
        "Triton kernel",
        "Triton, in place",
    ):
        assert checks[f"RoPE bfloat16, half pairs, offset positions: {path}"][
            "status"
        ] == ("passed")
    assert checks["attention float16, causal, ALiBi: Flex eager"]["status"] == "passed"
    flex_compiles = flex_compile_available("cpu")
    assert checks["attention float32, causal, ALiBi: Flex compiled"]["status"] == (
        "passed" if flex_compiles else "skipped"
    )
    skipped = " ".join(summary["skipped"])
    assert "compiled paths" not in skipped and "Triton's interpreter" in skipped
    assert "never commit them" in skipped and "mocked" in skipped
    # record: every suite, in the files the chapters read, marked as smoke runs
    assert set(summary["suites"]) == set(benchmarks.SUITES)
    assert summary["environment"]["suites"] == sorted(benchmarks.SUITES)
    assert all(state.startswith("recorded") for state in summary["suites"].values())
    files = sorted((out / "results").glob("bench-*--cpu-*.json"))
    assert len(files) == len(benchmarks.SUITES)
    documents = {}
    for path in files:
        document = json.loads(path.read_text())
        assert (
            document["settings"]["smoke"] is True and "--smoke" in document["command"]
        )
        benchmarks.SuiteResult.from_dict(document).table()
        documents[document["suite"]] = document

    def rows(suite):
        return [row["name"] for row in documents[suite]["results"]]

    # the compiled rows ran: the files of the suites recorded once keep them, the
    # first step's log shows those of the suites recorded again in three processes
    assert "--smoke-compiled" in documents["rope_backward"]["command"]
    assert "compiled: q and k" in rows("rope_backward")
    assert ("Flex compiled, ALiBi" in rows("attention_bias")) is flex_compiles
    first_log = " ".join((out / "logs" / "record-chapter-10.log").read_text().split())
    for row in ("compiled, new outputs", "compiled: q and k", decode.ONE_LOOP):
        assert f"{row}: compiling took" in first_log
    # rope_decode's CUDA-graph row, with the graph mocked on the CPU
    assert f"{decode.GRAPHED}: MOCKED on the CPU" in first_log
    assert f"the time of {decode.GRAPHED}" in first_log
    # the suites recorded again: three processes merged
    for suite in gpu_evidence.THREE_PROCESSES:
        assert documents[suite]["environment"]["processes"] == 3
        assert documents[suite]["command"].endswith("--smoke --processes 3")
    # tests: the GPU-only ones were selected, and skip here
    assert summary["tests"]["selected"] >= 1 and summary["tests"]["failed"] == 0
    assert summary["tests"]["skipped"] >= 1
    text = (out / "summary.txt").read_text()
    assert "DRY RUN" in text and "every step passed" in text and "agreement" in text
    assert text.startswith(gpu_evidence.DRY_RUN_LINE + "\n")
    assert "result: every step passed (in a DRY RUN on the CPU: not GPU" in text
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


def _fake_nvidia_smi(folder: Path, script: str | None) -> str:
    """A PATH whose nvidia-smi runs ``script`` (None: a PATH without one)."""
    folder.mkdir()
    if script is None:
        return str(folder)
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script + "\n")
    smi.chmod(0o755)
    return os.pathsep.join([str(folder), os.environ["PATH"]])


@pytest.mark.parametrize(
    "smi, says",
    [
        (
            "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'",
            "nvidia-smi sees a GPU (GPU 0: NVIDIA H100 80GB HBM3",
        ),
        ("echo 'NVIDIA-SMI has failed' >&2; exit 9", "no GPU here (nvidia-smi failed"),
        (None, "no GPU here (no nvidia-smi;"),
    ],
)
def test_without_a_gpu_torch_can_use_the_run_stops_in_one_line(tmp_path, smi, says):
    """No silent dry run: a GPU that this torch cannot use (.venv's CPU build), or
    none at all, stops the command with one line saying what to do."""
    env = dict(
        os.environ,
        PATH=_fake_nvidia_smi(tmp_path / "bin", smi),
        CUDA_VISIBLE_DEVICES="",  # torch sees no GPU, even on a machine with one
    )
    done = subprocess.run(
        [sys.executable, "tools/gpu_evidence.py", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    assert len(lines) == 1 and says in lines[0] and "give --dry-run" in lines[0]
    if torch.version.cuda is None:  # .venv's pin
        assert f"torch {torch.__version__} is built without CUDA" in lines[0]
    if smi is not None and "GPU 0" in smi:
        assert "make gpu-evidence" in lines[0] and gpu_evidence.GPU_VENV in lines[0]
    assert done.stdout == "" and not (tmp_path / "out" / "summary.json").exists()


def test_a_step_keeps_the_callers_pythonpath_after_the_checkouts(tmp_path, monkeypatch):
    """The peers' wheels put on PYTHONPATH (the docstring's advice) reach the steps."""
    peers = tmp_path / "peers"
    metadata = peers / "liger_kernel-9.9.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: liger-kernel\nVersion: 9.9\n"
    )
    (peers / "a_peer.py").write_text("NAME = 'a peer'\n")
    monkeypatch.setenv("PYTHONPATH", str(peers))
    monkeypatch.setattr(gpu_evidence, "MIN_STEP_SECONDS", 0.1)
    evidence = gpu_evidence.Evidence(tmp_path / "out", dry_run=True, budget=60)
    code = (
        "import os, importlib.metadata, a_peer, gpu_summary, pe_tutorial; "
        "print(os.environ['PYTHONPATH']); "
        "print(a_peer.NAME, importlib.metadata.version('liger-kernel'))"
    )
    entry, status = evidence.step("path", [sys.executable, "-c", code], 30, 0)
    printed = (tmp_path / "out" / "logs" / "path.log").read_text().splitlines()
    assert status == 0 and entry["status"] == "passed", printed
    assert printed[0].split(os.pathsep) == [str(ROOT), str(ROOT / "tools"), str(peers)]
    assert printed[1] == "a peer 9.9"


def test_the_copies_and_rope_are_recorded_before_the_suites_that_compile_cold():
    """On a first run the copies every ratio rests on and the rope suite come first,
    not after rope_decode's and the training steps' cold starts."""
    evidence = gpu_evidence.Evidence(Path("/tmp/unused-evidence"), False, 480)
    for dry_run in (False, True):
        args = gpu_evidence.argparse.Namespace(
            dry_run=dry_run, cpu_compile=False, suite_seconds=10.0
        )
        commands = gpu_evidence.step_commands(args, Path("/tmp/e"), evidence)
        for step, expected in (
            ("record-chapter-10", gpu_evidence.CHAPTER_10),
            ("repeat-chapter-10", gpu_evidence.THREE_PROCESSES),
        ):
            named = [word for word in commands[step] if word in benchmarks.SUITES]
            assert named == list(expected)
            assert named[0] == "copy_sizes"
        named = [w for w in commands["record-chapter-10"] if w in benchmarks.SUITES]
        assert named[:3] == ["copy_sizes", "roofline", "rope"]
        # the suites that compile FlexAttention stay last
        assert named[-2:] == ["attention_bias", "attention_backward"]


def test_the_dry_runs_steps_compile_mock_cuda_graphs_and_merge_three_processes():
    evidence = gpu_evidence.Evidence(Path("/tmp/unused-evidence"), True, 480)
    args = gpu_evidence.argparse.Namespace(
        dry_run=True, cpu_compile=False, suite_seconds=10.0
    )
    commands = gpu_evidence.step_commands(args, Path("/tmp/e"), evidence)
    first = commands["record-chapter-10"]
    # through the step that mocks CUDA graphs, the compiled rows kept
    assert first[1:4] == [str(ROOT / "tools" / "gpu_evidence.py"), "--step", "suites"]
    assert {"--smoke", "--smoke-compiled", "--record"} <= set(first)
    assert "--processes" not in first
    repeat = commands["repeat-chapter-10"]
    assert "--smoke" in repeat and repeat[repeat.index("--processes") + 1] == "3"
    assert "--cpu-compile" in commands["agreement"]
    others = commands["record-others"]
    assert "--smoke-compiled" in others and "--processes" not in others


@pytest.mark.parametrize("dry_run", [False, True])
def test_the_tests_step_leaves_out_this_file_whose_dry_run_takes_minutes(dry_run):
    """This file mentions CUDA, so the tests step would pick it, and run the whole
    dry run inside the GPU run's tests step (its budget is 75 s)."""
    evidence = gpu_evidence.Evidence(Path("/tmp/unused-evidence"), dry_run, 480)
    args = gpu_evidence.argparse.Namespace(
        dry_run=dry_run, cpu_compile=False, suite_seconds=10.0
    )
    tests = gpu_evidence.step_commands(args, Path("/tmp/e"), evidence)["tests"]
    files = [word for word in tests if word.startswith("tests/")]
    assert "tests/test_gpu_evidence.py" in gpu_tests.cuda_test_files()
    assert "tests/test_gpu_evidence.py" not in files and "tests/test_rope.py" in files


def _smoked_decode():
    suite = benchmarks.SUITES["rope_decode"]
    return benchmarks.run(
        "rope_decode", "cpu", warmup=0, repeats=1, probes=False, **suite.smoke
    )


def test_mocked_cuda_graphs_run_the_decode_suites_graph_row_on_the_cpu():
    with gpu_evidence.cpu_cuda_graphs():
        result = _smoked_decode()
    names = [t.name for t in result.timings]
    # captured, checked against its reference (the cache rows the replay wrote),
    # timed and reported, and said to be mocked
    assert decode.GRAPHED in names
    notes = " ".join(result.notes)
    assert gpu_evidence.MOCKED_GRAPH_NOTE in notes
    assert f"{decode.ONE_CALL}: " in notes and f"the time of {decode.GRAPHED}" in notes
    # outside it, the CPU skips the row as before
    assert decode.GRAPHED not in [t.name for t in _smoked_decode().timings]


def test_a_mocked_capture_refuses_what_waits_for_the_device(monkeypatch):
    """A call that reads a value back (``.item()``) cannot be captured on a GPU: the
    mock refuses it too, and the row is skipped with the suite's note."""
    real = fused_rope.apply_rope_qk_to_cache

    def reads_back(q, k, k_cache, offsets, **options):
        int(offsets.max())
        return real(q, k, k_cache, offsets, **options)

    monkeypatch.setattr(fused_rope, "apply_rope_qk_to_cache", reads_back)
    with gpu_evidence.cpu_cuda_graphs():
        result = _smoked_decode()
    assert decode.GRAPHED not in [t.name for t in result.timings]
    assert (
        f"{decode.GRAPHED}: skipped, capture failed (aten::_local_scalar_dense waits "
        "for the device" in " ".join(result.notes)
    )


def test_the_summary_of_a_dry_run_says_so_first_and_in_its_result():
    summary = {
        "dry_run": True,
        "started": "now",
        "budget_s": 480,
        "steps": [],
        "ok": True,
    }
    lines = gpu_evidence.text_of(summary).splitlines()
    assert lines[0] == gpu_evidence.DRY_RUN_LINE
    result = [line for line in lines if line.startswith("result: ")]
    assert result == [
        "result: every step passed (in a DRY RUN on the CPU: not GPU evidence)"
    ]
    assert gpu_evidence.text_of({**summary, "dry_run": False}) == (
        gpu_summary.summary_text({**summary, "dry_run": False})
    )


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
