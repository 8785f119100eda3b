"""A run: a preset's plan of units computed (or read back), then its results assembled.

``run_experiments`` plans the units (``runner.py``), reads back those a
stopped run finished (``record.RunFile``), computes the rest with a bar of
the training steps left, and ``assemble`` makes the sections of the results
from the units. ``run_units`` does all but the assembling, for one shard of
the plan (``--shard K/N``: every N-th unit from the K-th, ``shard_units``)
and in several processes at once (``--jobs N``, ``pool.py``).
"""

from __future__ import annotations

import inspect
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ...devices import environment
from ...encodings.rope_bands import BAND_ABLATIONS
from ...lm.train import resolve_device
from ..configuration.config import check_preset, preset_to_dict
from ..configuration.presets import Preset, Variant
from ..records.record import RunFile
from ..records.results import SECTIONS, curve_summary, entry
from .extensions import LEARNED_TABLE_STAGES
from .measures import mean_over_depths
from .pool import compute_in_processes, worker_threads
from .runner import Runner
from .units import Unit, code_version

__all__ = [
    "run_experiments",
    "run_units",
    "UnitsRun",
    "shard_units",
    "assemble",
    "record",
]


def _peak_memory_mib() -> float:
    """The largest resident size of this process or any of its finished workers."""
    # ru_maxrss is KiB on Linux and bytes on macOS
    peak = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def shard_units(plan: list[Unit], shard: tuple[int, int] | None) -> list[Unit]:
    """Shard ``K`` of ``N``: the plan's units ``K - 1``, ``K - 1 + N``, ... (all for None).

    The plan's order is fixed by the preset, so N workers with shards 1 to N
    run every unit once between them.
    """
    if shard is None:
        return list(plan)
    k, n = shard
    if not 1 <= k <= n:
        raise ValueError(f"shard {k}/{n}: K must be 1 to N")
    return plan[k - 1 :: n]


@dataclass
class UnitsRun:
    """What ``run_units`` leaves: the runner, the whole plan, the units it ran
    (its shard's), their results by key, and the run file that holds them."""

    runner: Runner
    plan: list[Unit]
    units: list[Unit]
    results: dict[str, dict]
    run_file: RunFile
    command: str
    jobs: int


def run_units(
    preset: str | Preset = "quick",
    *,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    partial: str | Path | None = None,
    resume: bool = False,
    keep_old_code: bool = False,
    jobs: int = 1,
    shard: tuple[int, int] | None = None,
    command: str | None = None,
) -> UnitsRun:
    """Compute (or read back) the units of a preset, or of one shard of its plan.

    ``device`` trains the models (``auto``: a GPU when there is one); ``progress``
    shows bars, ``log`` takes a line per finished unit. With ``partial`` (a
    path), every finished unit (one trained model and what is measured on it)
    is written there at once; with ``resume=True`` the units already in that
    file are read back instead of run again, so a stopped run continues where
    it stopped. A unit recorded by other code (its code version differs)
    raises ``record.ResumeError`` before anything runs, unless
    ``keep_old_code=True``; one recorded with other settings runs again.
    ``jobs`` computes that many units at once, each in a process of its own
    (``pool.compute_in_processes``); the results are the same. ``command`` is
    kept in the metadata. ``shard=(K, N)`` runs only ``shard_units(plan, (K,
    N))``. The run file holds, besides the units, a header with the
    experiment, the shard, every planned unit's fingerprint and the metadata,
    which ``merge`` reads.
    """
    preset = check_preset(preset) if isinstance(preset, str) else preset
    experiment = preset_to_dict(preset)  # the preset as the run file's header keeps it
    device = resolve_device(device)
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    command = command or f"python -m pe_tutorial.experiments --preset {preset.name}"
    run_file = RunFile(None if partial is None else Path(partial), resume=resume)
    # one bar in a notebook (the run's, as a widget where Jupyter or Colab has them); a
    # terminal also shows each model's training bar under it
    runner = Runner(preset, device, progress and jobs == 1 and not in_notebook())
    if log is not None:
        runner.log = log
    plan = runner.plan()
    units = shard_units(plan, shard)
    run_file.header = {
        "experiment": experiment,
        "shard": None if shard is None else list(shard),
        "plan": {unit.key: unit.fingerprint for unit in plan},
        "metadata": {
            "command": command,
            **environment(device),
            # each unit's threads: with jobs, a worker's share (pool.py)
            **({"threads": worker_threads(jobs)} if jobs > 1 else {}),
            "jobs": jobs,
            "corpus": runner.corpus.describe(),
            "corpora": runner.corpora(),
            "code_version": code_version(),
        },
    }
    if resume and partial is not None:
        review = run_file.review(
            [(unit.key, unit.fingerprint) for unit in units],
            keep_old_code=keep_old_code,
        )
        for line in review.lines():
            runner.log(line)
    run_file.write()  # the header now: a shard with nothing left to run has it too
    bar = tqdm(
        total=sum(unit.steps for unit in units),
        desc=f"{preset.name} preset"
        + ("" if shard is None else " shard {}/{}".format(*shard)),
        unit="step",
        disable=not progress,
        file=sys.stderr,
        mininterval=1.0,
    )
    results: dict[str, dict] = {}
    todo = []
    for unit in units:
        result = run_file.result(
            unit.key, unit.fingerprint, keep_old_code=keep_old_code
        )
        if result is None:
            todo.append(unit)
        else:
            results[unit.key] = result
            bar.update(unit.steps)

    def finished(unit: Unit, result: dict, seconds: float) -> None:
        run_file.save(unit.key, unit.fingerprint, result, seconds)
        results[unit.key] = result
        bar.update(unit.steps)

    with bar:
        if jobs == 1:
            for unit in todo:
                start = time.perf_counter()
                result = unit.compute()
                finished(unit, result, time.perf_counter() - start)
        else:
            compute_in_processes(preset, device, todo, jobs, finished, runner.log)
    results = {unit.key: results[unit.key] for unit in units}  # the plan's order
    return UnitsRun(runner, plan, units, results, run_file, command, jobs)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (Colab's included), where nested bars read badly."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def run_experiments(preset: str | Preset = "quick", **options) -> dict:
    """Run every experiment of a preset; return the results as a JSON-ready dict.

    ``results["language_model"]``, ``["rope_extension"]`` and ``["lookback"]``
    hold one entry per variant, each with its per-seed ``runs`` and a
    ``summary`` per length (mean, std, n; None where a length could not run).
    ``results["metadata"]`` says where, when and on what it ran.

    The options are ``run_units``'s (device, progress, log, partial, resume,
    keep_old_code, jobs, command; the signature shows them), but for ``shard``:
    a resumed run ends with the same results as one that never stopped, and a
    bar with the time left follows the units' training steps.
    """
    if "shard" in options:
        raise TypeError(
            "run_experiments runs the whole plan; run one shard with "
            "run_units(preset, shard=(K, N)) and join the shards with merge"
        )
    done = run_units(preset, **options)
    return record(
        done.runner,
        done.results,
        metadata=done.run_file.header["metadata"],
        seconds=sum(done.run_file.units[u.key]["seconds"] for u in done.plan),
    )


# run_experiments takes run_units' options but shard: its signature says which, for
# help() and editors, without a second copy of the list
run_experiments.__signature__ = inspect.signature(run_units).replace(
    parameters=[
        p for p in inspect.signature(run_units).parameters.values() if p.name != "shard"
    ],
    return_annotation="dict",
)


def record(
    runner: Runner, results: dict[str, dict], *, metadata: dict, seconds: float
) -> dict:
    """The record of a run: its preset's name, metadata, settings and sections.

    ``seconds`` is the units' own times, summed (a resumed or sharded run
    counts every part).
    """
    sections = assemble(runner, results)
    return {
        "preset": runner.whole_preset.name,
        "metadata": {
            **metadata,
            "wall_seconds": seconds,
            "peak_memory_mib": _peak_memory_mib(),
        },
        "settings": runner.settings(),
        **sections,
    }


def passkey_run(run: dict) -> dict:
    """A passkey unit's run as the record holds it: its accuracy by length (mean
    over depths) and by depth, and by digit and its learning curve where kept;
    a tempered model's accuracy read without its temperature too (chapter 12)."""
    by_depth = run["by_depth"]
    kept = {key: run[key] for key in ("digits", "curve") if key in run}
    if "without_temperature" in run:
        untempered = run["without_temperature"]
        kept["without_temperature"] = {
            "accuracy": mean_over_depths(untempered),
            "by_depth": untempered,
        }
    return {"accuracy": mean_over_depths(by_depth), "by_depth": by_depth, **kept}


def assemble(runner: Runner, units: dict[str, dict]) -> dict:
    """The sections of the results, from a runner's finished units (by key).

    A language-model entry whose runs recorded learning curves gets their
    summary per point as ``curve`` (``curve_summary``). The extension sections
    are empty while the preset's ``extensions`` is off.
    """
    p = runner.preset

    def per_seed(key: str, value: Callable[[dict], dict]) -> list[dict]:
        """``{"seed": s, **value(unit)}`` for the unit ``key.format(seed=s)`` of each seed."""
        return [{"seed": s, **value(units[key.format(seed=s)])} for s in p.seeds]

    def with_depths(by_depth: dict) -> dict:
        return {"accuracy": mean_over_depths(by_depth), "by_depth": by_depth}

    sections = {name: [] for name in SECTIONS}
    for variant in runner.variants():
        key = f"lm/{variant.key}/{{seed}}"
        fields = {
            "scheme": variant.scheme,
            "norm": variant.norm,
            "absolute": variant.absolute,
            "corpus": runner.corpus_name(variant.corpus),
            "learning_rate": runner.variant_training(variant).learning_rate,
            "changes": dict(variant.changes),
            "training": dict(variant.training),
            "parameters": units[key.format(seed=p.seeds[0])]["parameters"],
        }
        runs = [unit["run"] for unit in per_seed(key, lambda unit: unit)]
        language_entry = entry(fields, runs)
        curve = curve_summary(runs)
        if curve is not None:
            language_entry["curve"] = curve
        sections["language_model"].append(language_entry)
    rope = f"lm/{Variant('rope').key}/{{seed}}"
    if p.extensions and Variant("rope") in runner.variants():
        for method, stage in runner.extensions.stages():
            name = f"{method or 'none'}/{stage}"
            runs = per_seed(rope, lambda u, n=name: {"bpb": u["extension"][n]})
            fields = {"method": method or "none", "stage": stage}
            sections["rope_extension"].append(entry(fields, runs))
        for mode in BAND_ABLATIONS:
            runs = per_seed(rope, lambda u, m=mode: {"bpb": u["bands"][m]})
            sections["rope_bands"].append(entry({"mode": mode}, runs))
    if p.extensions and Variant("learned") in runner.variants():
        learned = f"lm/{Variant('learned').key}/{{seed}}"
        for stage in LEARNED_TABLE_STAGES:
            if stage not in units[learned.format(seed=p.seeds[0])]["table_extension"]:
                continue  # recorded before random rows were read
            runs = per_seed(
                learned, lambda u, s=stage: {"bpb": u["table_extension"][s]}
            )
            sections["learned_extension"].append(entry({"stage": stage}, runs))
    for scheme in p.schemes if p.lookback else ():
        runs = per_seed(f"lookback/{scheme}/{{seed}}", lambda unit: unit["run"])
        sections["lookback"].append(entry({"scheme": scheme}, runs, "accuracy"))
    for scheme in p.schemes if p.passkey else ():
        runs = per_seed(
            f"passkey/{scheme}/{{seed}}",
            lambda unit: passkey_run(unit["run"]),
        )
        passkey_entry = entry({"scheme": scheme}, runs, "accuracy")
        curve = curve_summary(runs, "accuracy")
        if curve is not None:
            passkey_entry["curve"] = curve
        sections["passkey"].append(passkey_entry)
    if p.extensions and p.passkey and "rope" in p.schemes:
        for method, stage in runner.extensions.stages():
            name = f"{method or 'none'}/{stage}"
            runs = per_seed(
                "passkey/rope/{seed}",
                lambda u, n=name: with_depths(u["extension"][n]),
            )
            fields = {"method": method or "none", "stage": stage}
            sections["passkey_extension"].append(entry(fields, runs, "accuracy"))
    return sections
