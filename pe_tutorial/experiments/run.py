"""A run: a preset's plan of units computed (or read back), then its results assembled.

``run_experiments`` plans the units (``runner.py``), reads back those a
stopped run finished (``record.RunFile``), computes the rest with a bar of
the training steps left, and ``assemble`` makes the sections of the results
from the units.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from ..devices import environment
from ..encodings.rope_bands import BAND_ABLATIONS
from ..lm.train import resolve_device
from .measures import mean_over_depths
from .presets import Preset, Variant, check_preset
from .record import RunFile
from .results import SECTIONS, entry
from .runner import Runner
from .units import code_version

__all__ = ["run_experiments", "assemble"]


def _peak_memory_mib() -> float:
    # ru_maxrss is KiB on Linux and bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def run_experiments(
    preset: str | Preset = "quick",
    *,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    partial: str | Path | None = None,
    resume: bool = False,
    keep_old_code: bool = False,
) -> dict:
    """Run every experiment of a preset; return the results as a JSON-ready dict.

    ``results["language_model"]``, ``["rope_extension"]`` and ``["lookback"]``
    hold one entry per variant, each with its per-seed ``runs`` and a
    ``summary`` per length (mean, std, n; None where a length could not run).
    ``results["metadata"]`` says where, when and on what it ran.

    With ``partial`` (a path), every finished unit (one trained model and what
    is measured on it) is written there at once; with ``resume=True`` the
    units already in that file are read back instead of run again, so a
    stopped run continues where it stopped and ends with the same results.
    What is reused is logged (``log``). A unit recorded by other code (its
    code version differs) raises ``record.ResumeError`` before anything runs,
    unless ``keep_old_code=True``; one recorded with other settings runs again.
    A bar with the time left follows the units' training steps.
    """
    preset = check_preset(preset) if isinstance(preset, str) else preset
    device = resolve_device(device)
    run_file = RunFile(None if partial is None else Path(partial), resume=resume)
    runner = Runner(preset, device, progress)
    if log is not None:
        runner.log = log
    settings = runner.settings()
    plan = runner.plan()
    if resume and partial is not None:
        review = run_file.review(
            [(unit.key, unit.fingerprint) for unit in plan],
            keep_old_code=keep_old_code,
        )
        for line in review.lines():
            runner.log(line)
    bar = tqdm(
        total=sum(unit.steps for unit in plan),
        desc=f"{preset.name} preset",
        unit="step",
        disable=not progress,
        file=sys.stderr,
        mininterval=1.0,
    )
    results, seconds = {}, 0.0
    with bar:
        for unit in plan:
            key = unit.key
            result = run_file.result(key, unit.fingerprint, keep_old_code=keep_old_code)
            if result is None:
                start = time.perf_counter()
                result = unit.compute()
                run_file.save(
                    key, unit.fingerprint, result, time.perf_counter() - start
                )
            results[key] = result
            seconds += run_file.units[key]["seconds"]
            bar.update(unit.steps)
    return {
        "preset": preset.name,
        "metadata": {
            "command": f"python -m pe_tutorial.experiments --preset {preset.name}",
            **environment(device),
            # the units' own times, summed: a resumed run counts every part
            "wall_seconds": seconds,
            "peak_memory_mib": _peak_memory_mib(),
            "corpus": runner.corpus.describe(),
            "corpora": runner.corpora(),
            "code_version": code_version(),
        },
        "settings": settings,
        **assemble(runner, results),
    }


def assemble(runner: Runner, units: dict[str, dict]) -> dict:
    """The sections of the results, from a runner's finished units (by key)."""
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
            "corpus": variant.corpus,
            "learning_rate": runner.variant_training(variant).learning_rate,
            "changes": dict(variant.changes),
            "parameters": units[key.format(seed=p.seeds[0])]["parameters"],
        }
        runs = [unit["run"] for unit in per_seed(key, lambda unit: unit)]
        sections["language_model"].append(entry(fields, runs))
    rope = f"lm/{Variant('rope').key}/{{seed}}"
    if Variant("rope") in runner.variants():
        for method, stage in runner.extensions.stages():
            name = f"{method or 'none'}/{stage}"
            runs = per_seed(rope, lambda u, n=name: {"bpb": u["extension"][n]})
            fields = {"method": method or "none", "stage": stage}
            sections["rope_extension"].append(entry(fields, runs))
        for mode in BAND_ABLATIONS:
            runs = per_seed(rope, lambda u, m=mode: {"bpb": u["bands"][m]})
            sections["rope_bands"].append(entry({"mode": mode}, runs))
    if Variant("learned") in runner.variants():
        learned = f"lm/{Variant('learned').key}/{{seed}}"
        for stage in ("copy/zero-shot", "copy/fine-tuned"):
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
            lambda unit: with_depths(unit["run"]["by_depth"]),
        )
        sections["passkey"].append(entry({"scheme": scheme}, runs, "accuracy"))
    if p.passkey and "rope" in p.schemes:
        for method, stage in runner.extensions.stages():
            name = f"{method or 'none'}/{stage}"
            runs = per_seed(
                "passkey/rope/{seed}",
                lambda u, n=name: with_depths(u["extension"][n]),
            )
            fields = {"method": method or "none", "stage": stage}
            sections["passkey_extension"].append(entry(fields, runs, "accuracy"))
    return sections
