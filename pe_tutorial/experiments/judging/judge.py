"""Judge a reader's own scheme as chapter 9 judged the book's (issue 51).

``python -m pe_tutorial.experiments judge my_pe.py`` applies the chapter's
protocol to the scheme a file registers (``scheme_files.py``), in stages:

1. ``tune``: the ``tuning`` preset's model, training, data and seed with the
   new scheme alone, at the sweep's four learning rates, read on the
   validation split; a scheme with position parameters is also swept as
   ``tuning-position`` sweeps the book's (three rates, its position
   parameters at 10 and 30 times the rate), in ``tune-position``.
   Where the best setting sits at the sweep's edge, the grid goes on beyond
   it in rounds (``tune_to_the_edges``, ``configuration/tuning_edges.py``:
   stages ``tune-edge-K-rate`` and ``tune-edge-K-multiplier``), as chapter 9
   extended its own schemes' grids, for at most ``--edge-rounds`` rounds.
2. ``heldout``: the ``heldout`` preset's fresh seeds and test split, the scheme
   trained at its best setting (the lowest validation bits per byte at L,
   ``tuning.best_training``).
3. ``tasks``: the ``tuned`` preset's look-back and passkey tasks at that setting,
   on that record's seeds.

Each stage is an ordinary experiment file written into the judge's folder
(``STAGE.toml``) and run as any other, with ``--jobs``; its record is
``STAGE.json``, and a stopped stage resumes from ``STAGE.json.partial``.
With ``--shard K/N`` the judge runs shard K of the stage it has reached and
stops; once the shards are merged into ``STAGE.json`` (the command is
printed) it goes on to the next stage.

The book's schemes are judged against as they were recorded: their
entries are taken from the records the package ships (``heldout``,
``tuned``) when those records' settings, tuned rates, corpus and device
type match the stage's; otherwise they are trained in the same stage, at
the rates the book's tuning chose, and the card says which. ``judged.json``
holds the new scheme's entries beside the baselines', and the report card
(``report_card.py``) is written from it into ``card/``.

Before anything trains, the scheme reads one row at every length a stage
scores (``check_lengths``: the language models' 1x-8x L, each task's 1x-8x
its length), and a forward pass that fails there is one line naming the
length (issue 69). ``--plan`` prints the stages, the units each trains or
reuses and a time estimated from the book's records (``plan_text``) and
trains nothing; ``--smoke`` runs every stage at tiny sizes (``SMOKE``), the
baselines trained at the same sizes, into its own folder, and marks its
record and card "smoke: no verdict". Rerunning the same command resumes
(``--resume`` says so and changes nothing); a folder whose stages were made
by another scheme file, ``--set`` or code version is refused with what
changed (``what_changed``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import sys
import tomllib
from pathlib import Path

import torch

from ...devices import device_name
from ...lm.model import ByteTransformer, ModelConfig
from ...lm.train import resolve_device
from ..configuration import scheme_files
from ..configuration.arguments import jobs_argument, shard_argument
from ..configuration.config import (
    PRESETS,
    apply_setting,
    check_corpus,
    preset_from_dict,
    preset_to_dict,
)
from ..configuration.config_fields import ExperimentError
from ..configuration.presets import Preset, Variant, swept_variants, variants
from ..configuration.toml_text import toml_text
from ..configuration.tuning import best_training, sweep_points, tuned_table
from ..configuration.tuning_edges import EDGE_ROUNDS, edge_settings, edge_stages
from ..records.record import ResumeError, partial_path
from ..records.results import load_results, results_path
from ..running.merge import merge_parts
from ..running.pool import worker_threads
from ..running.run import run_experiments, run_units
from ..running.runner import Runner
from ..running.units import code_version
from .bridge import bridge_plan, here

__all__ = [
    "BOOK_SCHEMES",
    "SMOKE",
    "SMOKE_VERDICT",
    "main",
    "stage_presets",
    "baseline_sources",
    "assemble",
    "check_lengths",
    "plan_text",
    "what_changed",
]

PROG = "python -m pe_tutorial.experiments judge"

# chapter 9's nine schemes, the default baselines
BOOK_SCHEMES = (
    "nope",
    "learned",
    "sinusoidal",
    "rope",
    "alibi",
    "t5",
    "shaw",
    "cope",
    "deberta",
)
# stage: the book's preset it starts from, and the shipped record that holds
# the baselines it is read against (None: a tuning stage, read alone)
STAGES = {
    "tune": ("tuning", None),
    "tune-position": ("tuning-position", None),
    "heldout": ("heldout", "heldout"),
    "tasks": ("tuned", "tuned"),
}

# judge --smoke: every stage at tiny sizes, the sweep's settings kept (each
# still trains), the stage's first seed alone; lengths stay 1x-8x the (short)
# training length. Fields a stage does not have (a task it does not run, a
# test split) are left as they are.
SMOKE = {
    "train_bytes": 100_000,
    "validation_bytes": 20_000,
    "test_bytes": 20_000,
    "eval_windows": 2,
    "curve_points": 2,
    "model": {"d_model": 32, "num_heads": 2, "num_layers": 2},
    "train": {"steps": 4, "batch_size": 4, "seq_len": 32, "warmup_steps": 0},
    "lookback": {"seq_len": 16, "steps": 4},
    "passkey": {"seq_len": 16, "steps": 4, "batch_size": 4, "depths": [0.0, 1.0]},
}
SMOKE_VERDICT = "smoke: no verdict"
SMOKE_REASON = "a smoke run trains every baseline at its own tiny sizes"


def _shrink(data: dict) -> None:
    """A stage's document at ``SMOKE``'s sizes, in place."""
    for key, value in SMOKE.items():
        if isinstance(value, dict):
            if data.get(key):  # a task the stage runs; the model; the training
                data[key] = {**data[key], **value}
        elif key != "test_bytes" or data.get(key):
            data[key] = value
    data["seeds"] = list(data["seeds"])[:1]


def has_position_parameters(scheme: str) -> bool:
    """Whether a model with the scheme has parameters of its own for positions
    (``ByteTransformer.position_parameters``), which chapter 9 tunes apart."""
    config = ModelConfig(scheme=scheme, d_model=32, num_heads=2, num_layers=2)
    return bool(ByteTransformer(config).position_parameters())


def _stage_document(
    stage: str,
    scheme: str,
    source: str,
    retrain: tuple[str, ...],
    settings: list[str],
    best: dict | None,
    smoke: bool = False,
    sweep: dict | None = None,
) -> dict:
    """The experiment document of one stage (see the module's docstring); an
    edge stage (``tuning_edges.py``) is the ``tune`` stage's with its own
    ``sweep``."""
    edge = sweep is not None
    book = PRESETS[STAGES["tune" if edge else stage][0]]
    data = preset_to_dict(book)
    data["name"] = f"judge-{scheme}-{stage}" + ("-smoke" if smoke else "")
    data["schemes_from"] = [source]
    data["ablations"] = []
    data["post_norm_schemes"] = data["every_layer_schemes"] = []
    data["learning_rate_schemes"], data["learning_rates"] = [], []
    data["language_schemes"] = []
    tuning = edge or stage in ("tune", "tune-position")
    if tuning:
        data["schemes"] = [scheme]
    else:
        data["schemes"] = [scheme, *retrain]
        tuned = {s: data["tuned"][s] for s in retrain}
        data["tuned"] = {scheme: best, **tuned}
    if stage == "tasks":
        data["language_models"] = False
        data["analyses"]["extensions"] = False
    if smoke:  # before --set, so that a --set still changes a smoke run
        _shrink(data)
    for setting in settings:  # a sweep is the tuning stages' alone
        if (tuning and not edge) or not setting.strip().startswith("sweep."):
            apply_setting(data, setting)
    if edge:  # the settings beyond the grid's edge, whatever --set swept
        data["sweep"] = sweep
    return data


def stage_presets(
    scheme: str,
    source: str,
    *,
    settings: list[str] = (),
    best: dict | None = None,
    retrain: dict[str, tuple[str, ...]] | None = None,
    smoke: bool = False,
) -> dict[str, Preset]:
    """The tuning stages' presets (``best`` None), or the reading stages' at the
    best setting, each training the baselines ``retrain[stage]`` beside the
    scheme. ``settings`` are ``--set`` changes applied to every stage (those of
    ``sweep.`` to the tuning stages only); ``smoke``: at ``SMOKE``'s sizes."""
    retrain = retrain or {}
    if best is None:
        stages = ["tune"] + (
            ["tune-position"] if has_position_parameters(scheme) else []
        )
    else:
        stages = ["heldout", "tasks"]
    presets = {}
    for stage in stages:
        document = _stage_document(
            stage, scheme, source, retrain.get(stage, ()), list(settings), best, smoke
        )
        presets[stage] = preset_from_dict(document, name=document["name"])
    return presets


def edge_presets(
    scheme: str,
    source: str,
    sweeps: dict[str, dict],
    *,
    settings: list[str] = (),
    smoke: bool = False,
) -> dict[str, Preset]:
    """The presets of one round of edge stages (``tuning_edges.edge_stages``: each
    stage's sweep), trained as the ``tune`` stage is."""
    presets = {}
    for stage, sweep in sweeps.items():
        document = _stage_document(
            stage, scheme, source, (), list(settings), None, smoke, sweep=sweep
        )
        presets[stage] = preset_from_dict(document, name=document["name"])
    return presets


def tune_to_the_edges(
    scheme: str,
    source: str,
    records: dict[str, dict],
    run_stage,
    *,
    settings: list[str] = (),
    smoke: bool = False,
    most: int = EDGE_ROUNDS,
) -> tuple[list[dict], list[str]] | None:
    """Extend the tuning grid beyond its edges in rounds (``tuning_edges.py``),
    each stage run by ``run_stage(stage, preset)`` (its record, or None after a
    shard, which stops here: None) and added to ``records`` (stage -> record,
    the tuning stages' first). The rounds, ``[{"round", "stages", "settings"}]``,
    and why the grid stops where it does (empty: the best is inside it); at
    most ``most`` rounds (``--edge-rounds``)."""
    position = has_position_parameters(scheme)
    rounds, stopped = [], []
    for number in range(1, most + 2):
        found, limited = edge_settings(
            sweep_points(*records.values()), scheme, position
        )
        if not found:
            stopped = limited
            break
        if number > most:
            stopped = limited + [
                f"after {_count(most, 'round')} beyond the edge (--edge-rounds "
                f"{most}) the best setting still sits at one"
            ]
            break
        presets = edge_presets(
            scheme, source, edge_stages(number, found), settings=settings, smoke=smoke
        )
        for stage, preset in presets.items():
            record = run_stage(stage, preset)
            if record is None:
                return None
            records[stage] = record
        rounds.append(
            {
                "round": number,
                "stages": list(presets),
                "settings": [
                    {k: v for k, v in s.items() if k != "best"} for s in found
                ],
            }
        )
    return rounds, stopped


TASK_SETTINGS = ("model", "train", "seeds", "lookback", "passkey")


def _plain(settings: dict) -> dict:
    """Settings as a record holds them (JSON: tuples become lists)."""
    return json.loads(json.dumps(settings))


def _differing(a: dict, b: dict, keys) -> list[str]:
    """The keys of ``keys`` whose values differ; a table (``model``) is compared on
    the fields both sides hold, so a field the code gained after a record was
    made (and that the book's preset leaves at its default) is not a difference."""
    out = []
    for key in keys:
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            x, y = ({k: d[k] for k in set(x) & set(y)} for d in (x, y))
        if x != y:
            out.append(key)
    return sorted(out)


def baseline_sources(
    stage: str, preset: Preset, baselines: tuple[str, ...], device: torch.device
) -> dict[str, str | None]:
    """For each of ``baselines``: why it must be trained again for ``stage``
    (``preset``: the stage as planned), or None when the package's record of the
    book's preset can be reused. Reused means: the stage plans what the book's
    preset plans (the settings the tasks read, for ``tasks``); the record holds
    the settings the preset plans today (those it names: a setting added to the
    code since is left at its default by the preset), the baseline's entries
    and its tuned rates; it read the same corpus (source, Python version, sizes,
    split); and it trained on the same device type."""
    book = STAGES[stage][1]
    record = load_results(book)
    why = _whole_record(stage, preset, book, record, device)
    reasons = {}
    for baseline in baselines:
        if why is not None:
            reasons[baseline] = why
        elif baseline not in {e["scheme"] for e in record[_SECTION[stage]]}:
            reasons[baseline] = f"the recorded {book} run has no {baseline} model"
        elif record["settings"].get("tuned", {}).get(baseline) != _plain(
            dict(dict(PRESETS[book].tuned).get(baseline, ()))
        ):
            reasons[baseline] = (
                f"the recorded {book} run trained {baseline} at other rates"
            )
        else:
            reasons[baseline] = None
    return reasons


_SECTION = {"heldout": "language_model", "tasks": "passkey"}


def _baselines(
    plain: dict[str, Preset], against: tuple[str, ...], device, smoke: bool
) -> tuple[dict[str, dict[str, str | None]], dict[str, tuple[str, ...]]]:
    """Why each baseline of each reading stage is trained again (None: reused
    from the package's records, ``baseline_sources``), and the baselines each
    stage trains. A smoke run reuses none: the book's records are not at its
    sizes."""
    if smoke:
        reasons = {stage: dict.fromkeys(against, SMOKE_REASON) for stage in plain}
    else:
        reasons = {
            stage: baseline_sources(stage, preset, against, device)
            for stage, preset in plain.items()
        }
    retrain = {
        stage: tuple(b for b, why in why_not.items() if why)
        for stage, why_not in reasons.items()
    }
    return reasons, retrain


def _bridge(
    reasons: dict[str, dict[str, str | None]],
    device: torch.device,
    wanted: tuple[str, ...] | None,
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """The bridge (``bridge.py``): per reading stage, the reused baselines
    trained again to test the records' drift, and why."""
    books = {stage: load_results(STAGES[stage][1]) for stage in reasons}
    return bridge_plan(reasons, books, here(device), wanted)


def _with_bridge(
    retrain: dict[str, tuple[str, ...]], bridge: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Each stage's baselines to train: those not reused, then the bridge's."""
    return {s: (*retrain.get(s, ()), *bridge.get(s, ())) for s in retrain}


def _whole_record(
    stage: str, preset: Preset, book: str, record: dict | None, device: torch.device
) -> str | None:
    """Why no baseline of the record can be reused for the stage, or None."""
    if record is None:
        return f"the package ships no record of the {book} preset"
    runner = Runner(preset, device, progress=False)
    planned = _plain(runner.settings())
    today = _plain(Runner(PRESETS[book], device, progress=False).settings())
    recorded = record["settings"]
    keys = TASK_SETTINGS if stage == "tasks" else set(planned) - {"tuned"}
    changed = _differing(planned, today, keys)
    if changed:
        return f"this judge changes the {book} preset's {', '.join(changed)}"
    stale = _differing(recorded, today, [k for k in keys if k in recorded])
    if stale:
        return f"the recorded {book} run has other {', '.join(stale)} than its preset"
    meta = record["metadata"]
    if stage != "tasks":
        described = _plain(runner.data(preset.corpus).corpus.describe())
        kept = dict((meta.get("corpora") or {}).get(preset.corpus, {}))
        if any(kept.get(k) != v for k, v in described.items()):
            return (
                f"the recorded {book} run read another corpus: "
                f"{kept.get('source', '?')!r}, here {described.get('source', '?')!r}"
            )
    if meta.get("device") != device.type:
        return f"the recorded {book} run trained on {meta.get('device')}, this on {device.type}"
    return None


def _scored(scheme: str, stage: str, preset: Preset) -> list[tuple]:
    """What a stage reads with the scheme: ``(what, ModelConfig fields, lengths,
    training length)`` per kind of model (its language models, one per swept
    model change; its look-back and passkey models)."""
    found = []
    if preset.language_models:
        L = preset.train.seq_len
        for variant in swept_variants(scheme, preset.sweep):
            fields = {"max_positions": L, **preset.model, **dict(variant.changes)}
            found.append(
                (f"the {stage} stage's language models", fields, preset.lengths, L)
            )
    for task, words in (("lookback", "look-back"), ("passkey", "passkey")):
        if getattr(preset, task):
            L = getattr(preset, task)["seq_len"]
            found.append(
                (
                    f"the {stage} stage's {words} models",
                    {"max_positions": L, **preset.model},
                    [m * L for m in preset.multiples],
                    L,
                )
            )
    return found


def check_lengths(
    scheme: str, source: str, presets: dict[str, Preset]
) -> dict[str, list[int]]:
    """Before anything trains: the model each stage builds with the scheme reads
    one row of every length the stage scores, the longest first
    (``scheme_files.probe_lengths``); an ``ExperimentError`` names the first
    length that fails. The lengths checked, by what reads them."""
    checked, seen = {}, set()
    entries = [e for stage, p in presets.items() for e in _scored(scheme, stage, p)]
    for what, fields, lengths, trained in sorted(entries, key=lambda e: -max(e[2])):
        key = json.dumps([fields, sorted(lengths), trained], sort_keys=True)
        if key not in seen:
            seen.add(key)
            try:
                config = ModelConfig(scheme=scheme, **fields)
            except (TypeError, ValueError) as error:
                raise ExperimentError(f"{what}: {error}") from None
            scheme_files.probe_lengths(
                scheme, source, config, lengths, trained=trained, what=what
            )
        checked[what] = sorted(lengths)
    return checked


def _stand_in(scheme: str) -> tuple[str, dict]:
    """Before tuning, the setting the reading stages are planned at: the book's
    tuned rates of a scheme like it (T5's with position parameters, RoPE's
    without). Which units run and which baselines are reused do not depend on it."""
    like = "t5" if has_position_parameters(scheme) else "rope"
    return like, dict(dict(PRESETS["tuned"].tuned)[like])


def _units(preset: Preset) -> list[tuple[str, int]]:
    """Each unit a preset plans, as ``(scheme, bytes it trains on)``: steps x batch
    x window, the context extensions' fine-tuning steps included (``Runner.plan``'s
    units, counted without reading a corpus)."""
    p, units = preset, []
    finetune = p.finetune_steps * len(p.finetune_methods) if p.extensions else 0
    if p.language_models:
        for variant in variants(p):
            steps = p.train.steps
            if variant == Variant("rope"):
                steps += finetune
            elif variant == Variant("learned") and p.extensions:
                steps += p.finetune_steps
            size = steps * p.train.batch_size * p.train.seq_len
            units += [(variant.scheme, size)] * len(p.seeds)
    if p.lookback:
        task = p.lookback
        for s in p.schemes:
            size = task["steps"] * p.training_for(s).batch_size * task["seq_len"]
            units += [(s, size)] * len(p.seeds)
    if p.passkey:
        task = p.passkey
        for s in p.schemes:
            steps = task["steps"] + (finetune if s == "rope" else 0)
            units += [(s, steps * task["batch_size"] * task["seq_len"])] * len(p.seeds)
    return units


def _rate(stage: str) -> tuple[float, str] | None:
    """Seconds per byte trained on (scoring included) in the book's record of the
    stage's preset, and where that comes from; None without a record."""
    book = STAGES[stage][0]
    record = load_results(book)
    if record is None or not record["metadata"].get("wall_seconds"):
        return None
    meta, units = record["metadata"], _units(PRESETS[book])
    seconds = meta["wall_seconds"]
    where = (
        f"{stage} from {results_path(book).name} ({meta.get('device', '?')}, "
        f"{meta.get('device_name', '?')}, {_count(meta.get('threads', '?'), 'thread')} "
        f"a process, --jobs {meta.get('jobs') or 1}: {len(units)} units in "
        f"{seconds / 60:.0f} min summed)"
    )
    return seconds / sum(size for _, size in units), where


def _count(n, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _seeds(preset: Preset) -> str:
    seeds = list(preset.seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return f"{'seed' if len(seeds) == 1 else 'seeds'} {', '.join(map(str, seeds))}"


def _recorded_points(scheme: str, out: Path, stages: list[str]) -> list | None:
    """The sweep points of the folder's tuning stages and edge stages so far, if
    it holds every tuning stage's record; else None."""
    paths = [out / f"{stage}.json" for stage in stages]
    if not all(p.is_file() for p in paths):
        return None
    paths += sorted(out.glob("tune-edge-*.json"))
    return sweep_points(*(json.loads(p.read_text()) for p in paths))


def _edge_plan(scheme: str, points: list | None, most: int) -> str:
    """``--plan``'s line on the rounds beyond the grid's edge (``tuning_edges``)."""
    if most == 0:
        return "--edge-rounds 0: the grid is kept as swept, even if the best sits at its edge."
    if points is None:
        return (
            f"If {scheme}'s best setting sits at the grid's edge, the grid goes on "
            f"beyond it: up to {_count(most, 'round')} of tune-edge stages, each one "
            "new setting per edge at the tuning stages' size (not in the estimate)."
        )
    found, stopped = edge_settings(points, scheme, has_position_parameters(scheme))
    if found:
        named = "; ".join(
            f"learning rate {s['learning_rate']:g}, multiplier "
            f"{s['position_lr_multiplier']:g} ({s['why']})"
            for s in found
        )
        return (
            "The best setting recorded so far sits at the grid's edge: the next "
            f"tune-edge round trains {named} (up to {_count(most, 'round')} in all)."
        )
    return "The best setting recorded is inside the grid" + (
        f"; where it stops: {'; '.join(stopped)}." if stopped else "."
    )


def plan_text(
    scheme: str,
    source: str,
    *,
    against: tuple[str, ...],
    settings: list[str],
    device: torch.device,
    out: Path,
    jobs: int,
    smoke: bool = False,
    checked: dict[str, list[int]] | None = None,
    edge_rounds: int = EDGE_ROUNDS,
    bridge: tuple[str, ...] | None = None,
) -> str:
    """``judge --plan``: the stages, the units each would train and those it would
    reuse from the package's records, and an estimate of the time on this machine
    from the book's records of the stages' presets (each stage's units weighted by
    the bytes they train on, at its record's seconds per byte; summed over
    processes, then shared among ``jobs``). Trains nothing."""
    tuning = stage_presets(scheme, source, settings=settings, smoke=smoke)
    points = _recorded_points(scheme, out, list(tuning))
    best = None if points is None else tuned_table(best_training(points))[scheme]
    if best is None:
        like, stand_in = _stand_in(scheme)
    plain = stage_presets(
        scheme, source, settings=settings, best=best or stand_in, smoke=smoke
    )
    reasons, retrain = _baselines(plain, against, device, smoke)
    bridged, bridge_why = _bridge(reasons, device, bridge)
    reading = stage_presets(
        scheme,
        source,
        settings=settings,
        best=best or stand_in,
        retrain=_with_bridge(retrain, bridged),
        smoke=smoke,
    )
    everyone = stage_presets(
        scheme,
        source,
        settings=settings,
        best=best or stand_in,
        retrain=dict.fromkeys(plain, against),
        smoke=smoke,
    )
    machine = device_name(device)
    lines = [
        f"judge {scheme} ({scheme_files.label(source)})"
        + (" --smoke" if smoke else "")
        + f" into {out}/, on {device.type} ({machine}), --jobs {jobs}: the plan. "
        "Nothing is trained.",
    ]
    if checked:
        readers: dict[str, list[str]] = {}
        for what, lengths in checked.items():
            readers.setdefault(", ".join(map(str, lengths)), []).append(what)
        lines.append(
            "The scheme reads a row of every length the stages score (checked "
            "now): " + "; ".join(f"{n} ({', '.join(w)})" for n, w in readers.items())
        )
    summed, elapsed, sources = 0.0, 0.0, []
    for stage, preset in [*tuning.items(), *reading.items()]:
        done = (out / f"{stage}.json").is_file()
        trained = _units(preset)
        word = "to train" if not done else "recorded, read back"
        text = f"  {stage:<14} {len(trained)} units {word}: "
        if stage in tuning:
            settings_count = len(swept_variants(scheme, preset.sweep))
            text += f"{scheme} at {settings_count} settings, {_seeds(preset)}"
        else:
            names = [scheme, *retrain[stage]]
            names += [f"{b} (bridge)" for b in bridged.get(stage, ())]
            text += f"{', '.join(names)}, {_seeds(preset)}"
            reused = [b for b in against if b not in retrain[stage]]
            if reused:
                count = sum(1 for s, _ in _units(everyone[stage]) if s in set(reused))
                record = results_path(STAGES[stage][1]).name
                text += (
                    f"; {count} units reused from the package's {record}: "
                    + ", ".join(reused)
                )
            why = sorted({w for w in reasons[stage].values() if w})
            if why:
                text += f" (baselines trained again: {'; '.join(why)})"
            if stage in bridged:
                text += (
                    f"; the bridge trains {', '.join(bridged[stage])} again beside "
                    f"their records to test the records' drift ({bridge_why[stage]})"
                )
        if not done and (out / f"{stage}.json.partial").is_file():
            text += (
                f"; {stage}.json.partial holds a stopped run's finished units, "
                "which rerunning reads back"
            )
        lines.append(text)
        rate = _rate(stage)
        if rate is not None and not done:
            seconds = rate[0] * sum(size for _, size in trained)
            summed += seconds
            elapsed += seconds / max(1, min(jobs, len(trained)))
            sources.append(rate[1])
    lines.append(_edge_plan(scheme, points, edge_rounds))
    if best is None:
        rates = ", ".join(f"{k} {v:g}" for k, v in stand_in.items())
        lines.append(
            f"Before tuning, {scheme}'s best setting is unknown: the heldout and "
            f"tasks stages are counted with the book's tuned rates of {like} "
            f"({rates}) standing in for it; which units run and which baselines "
            "are reused do not depend on it."
        )
    else:
        rates = ", ".join(f"{k} {v:g}" for k, v in best.items())
        lines.append(
            f"Tuning is recorded in {out}/: {scheme}'s best setting is {rates}."
        )
    if sources and smoke:
        lines.append(
            "Estimated time: a smoke run's is start-up and scoring, which the book's "
            "records do not time; expect about a minute or less (KERPLE "
            "against all nine: 33 s on a 2-core AMD EPYC, --jobs 1)."
        )
    elif sources:
        threads = torch.get_num_threads() if jobs == 1 else worker_threads(jobs)
        lines.append(
            f"Estimated time on this machine: about {_minutes(elapsed)} with --jobs "
            f"{jobs} ({_minutes(summed)} of training and scoring summed over "
            "processes), each stage's units weighted by the bytes they train on at "
            "the seconds per byte of the book's record of its preset: "
            + "; ".join(sources)
            + f". This machine is {device.type} ({machine}), "
            f"{_count(threads, 'thread')} a process; a record made on another "
            "machine or thread count, or a --set that changes more than steps, "
            "batch and lengths, makes it a rough guide."
        )
    elif all((out / f"{s}.json").is_file() for s in [*tuning, *reading]):
        lines.append("Every stage is recorded: nothing is left to train.")
    lines.append(
        "Run the same command without --plan to start; rerunning it resumes"
        + (
            "."
            if smoke
            else "; --smoke first runs every stage at tiny sizes in about a minute."
        )
    )
    return "\n".join(lines)


def assemble(
    scheme: str,
    records: dict[str, dict],
    reused: dict[str, dict[str, str]],
    retrained: dict[str, dict[str, str]],
    tuning: list[dict],
    best: dict,
    source: str,
    command: str,
    seconds: dict[str, float],
    smoke: bool = False,
    edges: tuple[list[dict], list[str]] = ([], []),
    bridge: tuple[dict[str, tuple[str, ...]], dict[str, str]] = ({}, {}),
) -> dict:
    """``judged.json``: the held-out stage's record with the tasks' entries and the
    reused baselines' entries added, and a ``judge`` table saying what came from
    where. The bridge's baselines (``bridge.py``), trained here beside the
    reused records of themselves, are kept apart in ``judged["bridge"]`` (the
    verdicts pair with the recorded entries, as for every reused baseline). A
    ``smoke`` run's is marked ``SMOKE_VERDICT`` (``judge.verdict``), and its card
    gives no verdict."""
    judged = json.loads(json.dumps(records["heldout"]))
    bridged, bridge_why = bridge
    apart: dict[str, list] = {"language_model": [], "lookback": [], "passkey": []}
    text = set(bridged.get("heldout", ()))
    apart["language_model"] = [
        e for e in judged["language_model"] if e["scheme"] in text
    ]
    judged["language_model"] = [
        e for e in judged["language_model"] if e["scheme"] not in text
    ]
    judged["preset"] = f"judge-{scheme}" + ("-smoke" if smoke else "")
    judged["metadata"]["command"] = command
    # the whole judge's training and scoring, as a record's header reports it
    judged["metadata"]["wall_seconds"] = sum(seconds.values())
    tasks = records["tasks"]
    on_tasks = set(bridged.get("tasks", ()))
    for section in ("lookback", "passkey"):
        entries = list(tasks.get(section, []))
        apart[section] = [e for e in entries if e["scheme"] in on_tasks]
        judged[section] = [e for e in entries if e["scheme"] not in on_tasks]
        judged["settings"][section] = tasks["settings"][section]
    if bridged:
        judged["bridge"] = apart
    judged["settings"]["task_seeds"] = tasks["settings"]["seeds"]
    book = {stage: load_results(STAGES[stage][1]) for stage in reused if reused[stage]}
    sources = {  # where each reused baseline was recorded
        stage: {
            key: record["metadata"].get(key)
            for key in ("date", "device", "device_name", "code_version", "command")
        }
        for stage, record in book.items()
    }
    for stage, baselines in reused.items():
        sections = (
            ("language_model",) if stage == "heldout" else ("lookback", "passkey")
        )
        for section in sections:
            for entry in book.get(stage, {}).get(section, []):
                plain = not entry.get("changes") and entry.get("norm", "pre") == "pre"
                plain = plain and entry.get("absolute", "input") == "input"
                if entry["scheme"] in baselines and plain:
                    judged[section].append(entry)
    # a reused baseline trained at the rates its record's [tuned] table gives:
    # the judged record says so too, or a reader would take the one at a tuned
    # rate of its own (sinusoidal's 1e-2) for a variant and leave it out
    tuned = judged["settings"].setdefault("tuned", {})
    for stage, baselines in reused.items():
        rates = book.get(stage, {}).get("settings", {}).get("tuned", {})
        for name in baselines:
            if name in rates:
                tuned.setdefault(name, rates[name])
    judged["settings"]["judge"] = {
        "scheme": scheme,
        "scheme_file": scheme_files.label(source),
        "scheme_file_digest": scheme_files.digest(source),
        "tuning": tuning,
        # the rounds beyond the grid's edge, and why it stops where it does
        "edge_rounds": edges[0],
        "edge_stopped": edges[1],
        "best": best,
        "reused": reused,
        "reused_from": sources,
        "retrained": retrained,
        # the reused baselines trained again here to test the records' drift
        "bridge": {stage: list(names) for stage, names in bridged.items()},
        "bridge_why": bridge_why,
        "task_metadata": tasks["metadata"],
        "stage_seconds": seconds,
    }
    if smoke:
        judged["settings"]["judge"]["verdict"] = SMOKE_VERDICT
        judged["settings"]["judge"]["note"] = (
            f"{SMOKE_VERDICT}: a smoke run (judge --smoke), every stage at tiny sizes "
            "and the baselines trained at the same sizes; it checks that the scheme "
            "trains, scores and writes a card, and settles nothing"
        )
    return judged


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Judge your own position scheme as chapter 9 judges the book's: "
        "its learning-rate sweep (and position-rate sweep when it has position "
        "parameters), then fresh seeds at its best setting, read at 1x-8x on a "
        "test split, with the look-back and passkey tasks, beside the book's "
        "schemes (reused from the package's records when the settings match) with "
        "verdicts paired by seed; writes judged.json and a report card.",
    )
    parser.add_argument("file", help="a Python file (or module) registering the scheme")
    parser.add_argument(
        "--scheme", help="the scheme to judge, if the file registers several"
    )
    parser.add_argument(
        "--out", type=Path, help="the judge's folder (default judge-SCHEME)"
    )
    parser.add_argument(
        "--against",
        default=",".join(BOOK_SCHEMES),
        help="the book's schemes to judge against, comma-separated (default: the nine)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a field of every stage (the baselines are then trained again)",
    )
    parser.add_argument(
        "--edge-rounds",
        type=int,
        default=EDGE_ROUNDS,
        metavar="N",
        help="when the best setting sits at the sweep's edge, train beyond it for "
        f"at most N rounds (default {EDGE_ROUNDS}; 0: keep the grid as swept, and "
        "the card says the choice sits at its edge)",
    )
    parser.add_argument(
        "--bridge",
        metavar="NAMES",
        help="the reused baselines trained again to test the records' drift when "
        "they were made on another machine or code version (comma-separated; "
        "default: rope,t5)",
    )
    parser.add_argument(
        "--no-bridge",
        action="store_true",
        help="reuse the records without training any baseline again",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    parser.add_argument("--jobs", default="1", metavar="N", help="units at once")
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="run shard K of N of the stage reached",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the stages, the units each trains or reuses and an estimate of "
        "the time on this machine; train nothing",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="run every stage at tiny sizes (about a minute), the baselines trained "
        "at the same sizes, into judge-SCHEME-smoke: a check that the scheme trains, "
        "scores and writes a card, marked 'smoke: no verdict'",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="resume a stopped judge; the same as rerunning the same command, "
        "which always reads back the finished stages and units",
    )
    return parser


def _fail(message: object) -> int:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def _read_counts(args: argparse.Namespace) -> None:
    """``--jobs`` and ``--shard`` read by the run command's rules (``arguments.py``),
    a bad value one ``ExperimentError`` line (nothing printed by argparse)."""
    try:
        args.jobs = jobs_argument(args.jobs)
        args.shard = None if args.shard is None else shard_argument(args.shard)
    except argparse.ArgumentTypeError as error:
        which = "--jobs" if not isinstance(args.jobs, int) else "--shard"
        raise ExperimentError(f"{which} {error}") from None


def _pick_scheme(source: str, wanted: str | None) -> str:
    names = [n for found in scheme_files.load([source]).values() for n in found]
    if wanted is None:
        if len(names) > 1:
            raise ExperimentError(
                f"{scheme_files.label(source)} registers {', '.join(names)}; "
                "say which to judge with --scheme NAME"
            )
        return names[0]
    if wanted not in names:
        raise ExperimentError(
            f"--scheme {wanted}: {scheme_files.label(source)} registers "
            f"{', '.join(names)}"
        )
    return wanted


_HEADER = re.compile(
    r"^# Scheme files: (\{.*\}); pe_tutorial code version (\S+)\.$", re.MULTILINE
)


def _flat(table: dict, prefix: str = "") -> dict:
    """A TOML document's values by dotted key (``train.steps``)."""
    out = {}
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def what_changed(old: str, new: str) -> list[str]:
    """What differs between a stage file written before (``old``) and the one this
    judge would write (``new``): the scheme files' text, the package's code
    version, the stage's settings (a ``--set``, ``--against`` or ``--smoke``)."""
    changes = []
    was, now = _HEADER.search(old), _HEADER.search(new)
    if was and now:
        try:
            files_was, files_now = (ast.literal_eval(m.group(1)) for m in (was, now))
        except (ValueError, SyntaxError):
            files_was, files_now = {}, {}
        for name in sorted(set(files_was) | set(files_now)):
            a, b = files_was.get(name), files_now.get(name)
            if a != b:
                changes.append(
                    f"the scheme file {name} (sha256 {a or 'none'} when its stages "
                    f"ran, {b or 'none'} now)"
                )
        if was.group(2) != now.group(2):
            changes.append(
                f"the package's code version ({was.group(2)} when its stages ran, "
                f"{now.group(2)} now)"
            )
    elif was is None:
        changes.append("its header (not written by this judge)")
    try:
        before, after = _flat(tomllib.loads(old)), _flat(tomllib.loads(new))
    except tomllib.TOMLDecodeError:
        return [*changes, "its text (not TOML a judge wrote)"]
    keys = [
        k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)
    ]
    if keys:
        shown = ", ".join(
            f"{k} ({_short(before.get(k))} then, {_short(after.get(k))} now)"
            for k in keys[:3]
        )
        more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        changes.append(
            f"the stage's settings {shown}{more} (a --set, --against or --smoke "
            "differs)"
        )
    return changes


class _Stages:
    """Runs the stages of one judge in its folder, each once."""

    def __init__(self, out: Path, args: argparse.Namespace, device, argv):
        self.out, self.args, self.device, self.argv = out, args, device, argv

    def run(self, stage: str, preset: Preset) -> dict | None:
        """The stage's record: read if written, else run (None after a shard)."""
        # the header names the scheme file's text and the package's code, so a
        # finished stage is reused only for the same file and code
        sources = scheme_files.digests(preset.schemes_from)
        document = toml_text(
            preset_to_dict(preset),
            header=f"Stage {stage} of {PROG} (pe_tutorial/experiments/judging/judge.py).\n"
            f"Scheme files: {sources}; pe_tutorial code version {code_version()}.",
        )
        config, target = self.out / f"{stage}.toml", self.out / f"{stage}.json"
        if config.exists() and config.read_text() != document:
            changed = what_changed(config.read_text(), document) or ["its text"]
            raise ExperimentError(
                f"{config} describes another experiment: {'; '.join(changed)}. Its "
                "stages belong to that judge: rerun it as it was, judge into another "
                "--out folder, or delete the folder (the same command, unchanged, "
                "resumes)"
            )
        config.write_text(document)
        if target.exists():
            print(f"stage {stage}: recorded in {target}, read back", flush=True)
            return json.loads(target.read_text())
        shard = self.args.shard
        partial = partial_path(target, shard)
        options = dict(
            device=self.device,
            progress=not self.args.no_progress,
            log=lambda message: print(message, flush=True),
            partial=partial,
            resume=partial.exists(),
            jobs=self.args.jobs,
            command=f"{PROG} {shlex.join(self.argv)}  (stage {stage})",
        )
        resuming = f", resuming from {partial}" if partial.exists() else ""
        print(f"stage {stage}: {config}{resuming}", flush=True)
        if shard is not None:
            run_units(preset, shard=shard, **options)
            k, n = shard
            parts = [partial_path(target, (i, n)) for i in range(1, n + 1)]
            if all(p.exists() for p in parts):
                merged = merge_parts(parts, command=f"{PROG} (merge of {stage})")
                target.write_text(json.dumps(merged, indent=1) + "\n")
                return merged
            print(
                f"shard {k}/{n} of stage {stage} done; when every shard is, run this "
                "command again (it merges them) or "
                f"python -m pe_tutorial.experiments merge {target} "
                + " ".join(str(p) for p in parts)
            )
            return None
        results = run_experiments(preset, **options)
        target.write_text(json.dumps(results, indent=1) + "\n")
        partial.unlink(missing_ok=True)
        return results


def main(argv: list[str] | None = None) -> int:
    """``judge FILE [--scheme NAME] [--out DIR] [--plan | --smoke] ...``; the exit
    status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    from ..viewing.report_card import write_card
    from ..viewing.viewer import report

    smoke = args.smoke
    try:
        _read_counts(args)
        if args.no_bridge and args.bridge:
            raise ExperimentError("--bridge and --no-bridge: give one of them")
        if args.no_bridge:
            args.bridge = ()
        elif args.bridge is not None:
            args.bridge = tuple(s for s in args.bridge.split(",") if s)
            unknown = [s for s in args.bridge if s not in BOOK_SCHEMES]
            if unknown or not args.bridge:
                raise ExperimentError(
                    f"--bridge {','.join(args.bridge)}: name the book's schemes "
                    f"({', '.join(BOOK_SCHEMES)})"
                )
        if args.edge_rounds < 0:
            raise ExperimentError(
                f"--edge-rounds {args.edge_rounds}: give 0 (keep the grid as swept) "
                "or more rounds"
            )
        source = scheme_files.resolve(args.file, None)
        scheme = _pick_scheme(source, args.scheme)
        against = tuple(s for s in args.against.split(",") if s)
        unknown = [s for s in against if s not in BOOK_SCHEMES]
        if unknown:
            raise ExperimentError(
                f"--against: {', '.join(unknown)} not among the book's schemes "
                f"({', '.join(BOOK_SCHEMES)})"
            )
        device = resolve_device(args.device)
        out = args.out or Path(f"judge-{scheme}" + ("-smoke" if smoke else ""))
        # every length any stage scores, read before anything trains (the reading
        # stages' lengths do not depend on the setting tuning chooses)
        tuning_presets = stage_presets(scheme, source, settings=args.set, smoke=smoke)
        reading = stage_presets(
            scheme, source, settings=args.set, best=_stand_in(scheme)[1], smoke=smoke
        )
        for preset in [*tuning_presets.values(), *reading.values()]:
            check_corpus(preset)
        checked = check_lengths(scheme, source, {**tuning_presets, **reading})
        if args.plan:
            print(
                plan_text(
                    scheme,
                    source,
                    against=against,
                    settings=args.set,
                    device=device,
                    out=out,
                    jobs=args.jobs,
                    smoke=smoke,
                    checked=checked,
                    edge_rounds=args.edge_rounds,
                    bridge=args.bridge,
                )
            )
            return 0
        if args.resume and not list(out.glob("*.toml")):
            print(f"--resume: {out} holds no stage yet; the judge starts there")
        out.mkdir(parents=True, exist_ok=True)
        stages = _Stages(out, args, device, argv)
        tuning_records: dict[str, dict] = {}
        for stage, preset in tuning_presets.items():
            record = stages.run(stage, preset)
            if record is None:
                return 0
            tuning_records[stage] = record
        # a best setting at the grid's edge: the grid goes on beyond it
        extended = tune_to_the_edges(
            scheme,
            source,
            tuning_records,
            stages.run,
            settings=args.set,
            smoke=smoke,
            most=args.edge_rounds,
        )
        if extended is None:
            return 0
        points = sweep_points(*tuning_records.values())
        best = tuned_table(best_training(points))[scheme]
        plain = stage_presets(scheme, source, settings=args.set, best=best, smoke=smoke)
        reasons, retrain = _baselines(plain, against, device, smoke)
        bridge, bridge_why = _bridge(reasons, device, args.bridge)
        records = {}
        presets = stage_presets(
            scheme,
            source,
            settings=args.set,
            best=best,
            retrain=_with_bridge(retrain, bridge),
            smoke=smoke,
        )
        for stage, preset in presets.items():
            check_corpus(preset)
            records[stage] = stages.run(stage, preset)
            if records[stage] is None:
                return 0
    except (ExperimentError, ResumeError, ValueError) as error:
        return _fail(error)
    reused = {s: {b: s for b, why in r.items() if not why} for s, r in reasons.items()}
    retrained = {s: {b: why for b, why in r.items() if why} for s, r in reasons.items()}
    tuning = [
        {
            "learning_rate": p.learning_rate,
            "position_lr_multiplier": p.position_lr_multiplier,
            "bpb": p.bpb,
        }
        for p in points
    ]
    seconds = {
        stage: record["metadata"]["wall_seconds"]
        for stage, record in [*tuning_records.items(), *records.items()]
    }
    command = f"{PROG} {shlex.join(argv)}"
    judged = assemble(
        scheme,
        records,
        reused,
        retrained,
        tuning,
        best,
        source,
        command,
        seconds,
        smoke=smoke,
        edges=extended,
        bridge=(bridge, bridge_why),
    )
    (out / "judged.json").write_text(json.dumps(judged, indent=1) + "\n")
    tables = report(judged, path=str(out / "judged.json"))
    card = write_card(judged, out / "card", tables)
    print(
        f"wrote {out / 'judged.json'} and the report card {card}"
        + (f" ({SMOKE_VERDICT})" if smoke else "")
    )
    return 0
