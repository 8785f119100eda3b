"""Units spread over processes on one machine: ``--jobs N``.

The units of a plan are independent trained models, so N of them can run at
once. ``compute_in_processes`` starts N worker processes (``spawn``: a fresh
interpreter each, as CUDA needs), each of which builds the preset's runner
once and then computes the units it is handed, by key, and sends back the
result, its seconds and its log lines; the calling process keeps the run
file and the bar. Each worker takes ``max(1, T // N)`` of the caller's ``T``
torch threads, so N workers share the cores rather than fight over them; with
CUDA each worker takes a GPU in turn (``cuda:0``, ``cuda:1``, ... and round
again when there are more workers than GPUs).

Ctrl-C is the calling process's: the workers ignore it, and the caller stops
them at once (``stop_workers``: a unit part-way through is dropped, the units
already handed to ``finished`` are kept) and raises ``KeyboardInterrupt`` for
the command line to say so in one line.

A unit seeds everything it draws, so its result does not depend on which
process computes it or what that process computed before; it can depend on
the number of threads, which sets the order of some sums on a CPU. A worker
with the same number of threads as one process computes the same numbers.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import signal
import time
from collections.abc import Callable

import torch

from ..configuration import scheme_files
from ..configuration.presets import Preset
from .runner import Runner
from .units import Unit

__all__ = ["compute_in_processes", "stop_workers", "worker_devices", "worker_threads"]

_WORKER: dict = {}  # in a worker: its runner's units by key, and its log lines


def worker_devices(device: torch.device, jobs: int) -> list[str]:
    """The device of each of ``jobs`` workers: the GPUs in turn for a bare ``cuda``,
    else ``device`` for all."""
    if device.type == "cuda" and device.index is None:
        count = max(1, torch.cuda.device_count())
        return [f"cuda:{i % count}" for i in range(jobs)]
    return [str(device)] * jobs


def worker_threads(jobs: int) -> int:
    """Each worker's torch threads: this process's, shared out (at least one)."""
    return max(1, torch.get_num_threads() // jobs)


def _start(preset: Preset, devices, threads: int) -> None:
    # Ctrl-C reaches every process of the terminal; the caller stops the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)
    # a fresh process: the reader's own schemes are registered here again
    scheme_files.load(preset.schemes_from)
    runner = Runner(preset, torch.device(devices.get()), progress=False)
    lines: list[str] = []
    runner.log = lines.append
    _WORKER.update(units={unit.key: unit for unit in runner.plan()}, lines=lines)


def _compute(key: str) -> tuple[dict, float, list[str]]:
    lines = _WORKER["lines"]
    lines.clear()
    start = time.perf_counter()
    result = _WORKER["units"][key].compute()
    return result, time.perf_counter() - start, list(lines)


def compute_in_processes(
    preset: Preset,
    device: torch.device,
    units: list[Unit],
    jobs: int,
    finished: Callable[[Unit, dict, float], None],
    log: Callable[[str], None],
) -> None:
    """Compute ``units`` in ``jobs`` worker processes, ``finished(unit, result,
    seconds)`` for each as it ends (in this process), its log lines passed to ``log``.

    An error in a unit stops the rest (those running finish first) and is
    raised here; the units finished before it have been handed to ``finished``.
    Ctrl-C (``KeyboardInterrupt``) stops every worker at once (``stop_workers``)
    and is raised again.
    """
    if not units:
        return
    context = multiprocessing.get_context("spawn")
    devices = context.Queue()
    for name in worker_devices(device, jobs):
        devices.put(name)
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_start,
        initargs=(preset, devices, worker_threads(jobs)),
    )
    try:
        futures = {pool.submit(_compute, unit.key): unit for unit in units}
        for future in concurrent.futures.as_completed(futures):
            result, seconds, lines = future.result()
            for line in lines:
                log(line)
            finished(futures[future], result, seconds)
    except KeyboardInterrupt:
        stop_workers()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def stop_workers() -> list[int]:
    """End this process's worker processes now (a unit part-way through is lost);
    their process ids."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    for child in children:
        child.join(timeout=10)
    return [child.pid for child in children]
