"""Recorded runs on disk: one JSON file per suite and device in the package's
``results/`` folder (``record``, ``load_recorded_runs``), the run the prose
quotes (``quoted``, on ``QUOTED_DEVICE``) and ``show``, which prints the
recorded runs beside the live one.

Recorded GPU results ship inside the package (``pe_tutorial/results/``), so an
installed package (Colab) shows them too.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from importlib import resources
from pathlib import Path

from .suites import SuiteResult, check_suite

RESULTS_PACKAGE = "pe_tutorial"
RESULTS_FOLDER = "results"


def results_dir() -> Path:
    """The package's ``results`` folder, where recorded runs ship (and ``--record`` writes)."""
    return Path(str(resources.files(RESULTS_PACKAGE) / RESULTS_FOLDER))


def device_slug(environment: dict) -> str:
    """A file-name part naming where a run was measured: ``cuda-nvidia-h100-80gb-hbm3``,
    ``cpu-intel-r-xeon-r-processor-6-143-8-llc-105mib-2-threads``.

    On a CPU the name alone can be generic (a virtual machine's "Intel(R) Xeon(R)
    Processor" covers several generations), so the slug adds what tells
    hardware apart where the run recorded it: family-model-stepping, the
    last-level cache, and the threads (a CPU's speed depends on them). A busy
    machine is judged only against recorded runs of the same slug.
    """
    kind = str(environment.get("device", "cpu")).split(":")[0]
    words = f"{kind} {environment.get('device_name', 'unknown')}"
    if kind == "cpu":
        if environment.get("cpu_model"):
            words += f" {environment['cpu_model']}"
        cache = environment.get("last_level_cache_bytes")
        if environment.get("cpu_model") and cache:
            words += f" llc {round(cache / 2**20)}mib"
        words += f" {environment.get('threads', '?')} threads"
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def results_path(
    name: str, directory: str | Path | None = None, environment: dict | None = None
) -> Path:
    """``bench-<suite>--<device>.json``: one file per suite and device, so recording
    on one machine never overwrites another's (``bench-<suite>.json`` without one)."""
    folder = Path(directory) if directory is not None else results_dir()
    device = "" if environment is None else f"--{device_slug(environment)}"
    return folder / f"bench-{name}{device}.json"


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def record(result: SuiteResult, directory: str | Path | None = None) -> Path:
    """Write ``result`` to ``bench-<suite>--<device>.json`` in the package (or ``directory``)."""
    path = results_path(result.suite, directory, result.environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(result.to_dict(), indent=1) + "\n")
    return path


def load_recorded_runs(
    name: str, directory: str | Path | None = None
) -> list[SuiteResult]:
    """Every recorded run of suite ``name``, one per device: GPUs first, then by name."""
    check_suite(name)
    folder = Path(directory) if directory is not None else results_dir()
    paths = sorted(
        {*folder.glob(f"bench-{name}--*.json"), *folder.glob(f"bench-{name}.json")}
    )
    runs = [SuiteResult.from_dict(json.loads(path.read_text())) for path in paths]
    return sorted(
        runs,
        key=lambda r: (
            not str(r.environment.get("device", "")).startswith("cuda"),
            str(r.environment.get("device_name", "")),
        ),
    )


def load_recorded(name: str, directory: str | Path | None = None) -> SuiteResult | None:
    """The first recorded run of suite ``name`` (a GPU's when there is one), or None."""
    runs = load_recorded_runs(name, directory)
    return runs[0] if runs else None


# The machine whose recorded runs the chapters' prose quotes: a 2-core CPU of the
# kind the book is built on. Its numbers are fixed in the package, so the text
# says the same on every build; the live run is shown beside them.
QUOTED_DEVICE = "cpu-amd-epyc-25-17-1-llc-32mib-2-threads"


def quoted(name: str, directory: str | Path | None = None) -> SuiteResult:
    """The recorded run of suite ``name`` that the book's prose quotes (``QUOTED_DEVICE``).

    A chapter reads its numbers, verdicts and asserts from this run, never
    from the live one, so two builds on different machines or days print the
    same sentences. FileNotFoundError, saying how to record it, if the
    package has none.
    """
    check_suite(name)
    folder = Path(directory) if directory is not None else results_dir()
    path = folder / f"bench-{name}--{QUOTED_DEVICE}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded run of {name!r} on the quoted machine ({QUOTED_DEVICE}) in "
            f"{folder}; record it there with: python -m pe_tutorial.benchmarks "
            f"{name} --device cpu --record"
        )
    return SuiteResult.from_dict(json.loads(path.read_text()))


def _title(run: SuiteResult, what: str) -> str:
    env = run.environment
    return (
        f"{what}: {env.get('device_name')}, {env.get('date', '')[:10]} ({run.command}):"
    )


# The invitation to record a GPU is printed once per process: once per chapter.
_invited: set[str] = set()
INVITATION = (
    "On a GPU (Colab's included), one command times every suite and writes one file\n"
    "per suite for your device. In a notebook cell (a shell drops the '!'):\n"
    "  !python -m pe_tutorial.benchmarks --all --record --out pe-timings\n"
    "On Colab the runtime's files go when it ends: give --out a folder of your mounted\n"
    "Drive, or download pe-timings/. To add your device's tables to the book, open a\n"
    "pull request that puts those files in pe_tutorial/results/ (README: Timing suites)."
)


def show(result: SuiteResult, *, directory: str | Path | None = None) -> None:
    """Print the recorded runs of ``result``'s suite, then ``result`` as "this machine".

    First the run the text quotes (``quoted``), then every other recorded
    device (GPUs first), then the live run. A live run whose machine was busy
    is headed by why (its numbers are not evidence). Where no GPU run is
    recorded, an invitation to add one is printed, once per process (a
    chapter's kernel).
    """
    recorded = load_recorded_runs(result.suite, directory)
    first = [r for r in recorded if device_slug(r.environment) == QUOTED_DEVICE]
    others = [r for r in recorded if r not in first]
    for run in first:
        print(run.table(_title(run, "recorded run, quoted in the text")))
        print()
    for run in others:
        print(run.table(_title(run, "recorded run")))
        print()
    if result.busy:
        warning = (
            f"This machine was busy while the suite ran: {result.busy}. Its numbers "
            "are not evidence; the text reads the recorded run."
        )
        print(textwrap.fill(warning, width=88))
    print(result.table("this machine, now:"))
    on_gpu = any(
        str(r.environment.get("device", "")).startswith("cuda") for r in recorded
    )
    if not on_gpu and "gpu" not in _invited:
        _invited.add("gpu")
        print()
        print(INVITATION)
    # a process forked later (a compiler's worker) must not inherit these lines
    # unwritten and print them again when it exits
    sys.stdout.flush()
