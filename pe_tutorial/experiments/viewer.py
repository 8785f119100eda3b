"""The viewer: ``python -m pe_tutorial.experiments show FILE [--figures DIR]``.

It prints the tables chapter 9 prints from a record of ``run_experiments``
(``--json`` or ``--record``): every section's means and spreads by length
with the seeds behind them (``n``), and the verdicts of ``lm.findings``
(each gap weighed against the seeds' spread, with its ``n``; one seed gives
no verdict). With ``--figures DIR`` it also writes the chapter's figures as
PNG files (``pages.plots``), the learning curves among them.

``FILE`` may be a run file that is still being written (``PATH.partial``,
``record.RunFile``): the viewer assembles the units that have finished
(``assemble_units``), says how many there are, and shows them, each entry
with the seeds it has so far, so a running experiment can be watched. A file
that is neither (cut short, not JSON, another program's) gets one line that
says so, and the exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from ..lm.findings import Gap, compare, mean_at, paired_change, scheme_rate, train_gap
from .config import ExperimentError, preset_from_dict
from .measures import mean_over_depths
from .results import SECTIONS, entry, format_rows, summarise
from .run import curve_summary, passkey_run
from .runner import Runner, position_bin

__all__ = ["ViewError", "main", "load", "assemble_units", "report", "write_figures"]

PROG = "python -m pe_tutorial.experiments show"


class ViewError(ValueError):
    """A file the viewer cannot show; the message says which and why."""


# ---------------------------------------------------------------------------
# reading a record or a run file
# ---------------------------------------------------------------------------


def load(path: str | Path) -> tuple[dict, str | None]:
    """The results in ``path`` and, for a run file, a line on how far it has got.

    A record (``run_experiments``'s dict) comes back as it is, with None; a
    run file (``{"units": ...}``, such as ``PATH.partial``) is assembled from
    its finished units (``assemble_units``). Raises ``ViewError`` for a file
    that is missing, not whole JSON, or neither of the two.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ViewError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ViewError(f"cannot show {path}: it is not text (not a record)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ViewError(
            f"cannot show {path}: it is not whole JSON ({error}), perhaps cut short "
            "while it was copied; a run file being written is replaced whole, so "
            "read it again"
        ) from None
    if isinstance(data, dict) and "units" in data:
        units = data["units"]
        if not isinstance(units, dict) or not all(
            isinstance(u, dict) and {"fingerprint", "result"} <= u.keys()
            for u in units.values()
        ):
            raise ViewError(
                f'cannot show {path}: its "units" are not those of a run file '
                "(each a fingerprint and a result)"
            )
        try:
            results = assemble_units(units, header=data)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise ViewError(
                f"cannot show {path}: a unit of this run file is not as "
                f"pe_tutorial.experiments writes them ({type(error).__name__}: "
                f"{error})"
            ) from None
        return results, _progress_line(units, data)
    if (
        isinstance(data, dict)
        and isinstance(data.get("settings"), dict)
        and isinstance(data.get("language_model"), list)
    ):
        return data, None
    raise ViewError(
        f"cannot show {path}: it is JSON but neither a record of "
        "pe_tutorial.experiments (settings and sections such as language_model) "
        'nor a run file ("units")'
    )


KIND_NAMES = {"lm": "language models", "lookback": "look-back", "passkey": "passkey"}


def _progress_line(units: dict, header: dict) -> str:
    """How many units a run file holds (of how many its header plans), by kind."""
    plan = header.get("plan")
    planned = list(plan) if isinstance(plan, dict) else None
    kinds: dict[str, list[int]] = {}
    for key in units if planned is None else planned:
        task = key.split("/")[0]
        counts = kinds.setdefault(KIND_NAMES.get(task, task), [0, 0])
        counts[0] += key in units
        counts[1] += 1
    if planned is None:
        parts = ", ".join(f"{done} {kind}" for kind, (done, _) in kinds.items())
        done, of = len(units), ""
    else:
        parts = ", ".join(f"{d} of {n} {kind}" for kind, (d, n) in kinds.items())
        done, of = sum(key in units for key in planned), f" of {len(planned)}"
    shard = header.get("shard")
    part = f" (shard {shard[0]} of {shard[1]})" if shard else ""
    return (
        f"a run file{part}: {done}{of} units done ({parts}); each entry below "
        "holds the seeds finished so far (its n)"
    )


def _by_seed(group: list[dict]) -> list[dict]:
    return sorted(group, key=lambda unit: unit["fingerprint"]["arguments"]["seed"])


def assemble_units(units: dict[str, dict], header: dict | None = None) -> dict:
    """Results as ``run.assemble`` makes them, from the finished units of a run file.

    Entries come in the order of their first unit (the plan's) and hold the
    seeds finished so far; the settings come from the units' fingerprints
    (the preset fields each kind reads), the preset's name, its corpus and the
    metadata from the file's ``header`` where it has one (``RunFile.header``).
    Sections no finished unit reaches are empty.
    """
    header = header or {}
    experiment = header.get("experiment")
    experiment = experiment if isinstance(experiment, dict) else {}
    own_corpus = experiment.get("corpus")
    sections: dict[str, list] = {name: [] for name in SECTIONS}
    settings: dict = {}
    groups: dict[tuple, list[dict]] = {}
    for key, unit in units.items():
        fingerprint = unit["fingerprint"]
        task = key.split("/")[0]
        arguments = fingerprint["arguments"]
        read = fingerprint.get("preset", {})
        for name in ("train", "model", "lookback", "passkey", "extension_factor"):
            if name in read:
                settings.setdefault(name, read[name])
        # a unit's fingerprint holds its own scheme's tuned fields only: join them
        settings.setdefault("tuned", {}).update(read.get("tuned", {}))
        if "multiples" in read and task == "lm":
            settings.setdefault("multiples", read["multiples"])
        settings.setdefault("seeds", set()).add(arguments["seed"])
        if task == "lm":
            variant = arguments["variant"]
            group = ("lm", json.dumps(variant, sort_keys=True))
        else:
            group = (task, arguments["scheme"])
        groups.setdefault(group, []).append({**unit, "key": key})
    train = settings.get("train", {})
    for (task, name), group in groups.items():
        group = _by_seed(group)
        results = [unit["result"] for unit in group]
        if task == "lm":
            variant = json.loads(name)
            rate = variant.get("learning_rate")
            fields = {
                "scheme": variant["scheme"],
                "norm": variant["norm"],
                "absolute": variant["absolute"],
                "corpus": variant.get("corpus") or own_corpus,
                "learning_rate": scheme_rate(settings, variant["scheme"])
                if rate is None
                else rate,
                "changes": {k: v for k, v in variant.get("changes", [])},
                "training": {k: v for k, v in variant.get("training", [])},
                "parameters": results[0].get("parameters"),
            }
            runs = [result["run"] for result in results]
            language = entry(fields, runs)
            curve = curve_summary(runs)
            if curve is not None:
                language["curve"] = curve
            sections["language_model"].append(language)
            _readings(sections["rope_extension"], results, "extension", "bpb")
            for mode, runs in _named(results, "bands").items():
                sections["rope_bands"].append(entry({"mode": mode}, runs))
            for stage, runs in _named(results, "table_extension").items():
                sections["learned_extension"].append(entry({"stage": stage}, runs))
        elif task == "lookback":
            runs = [result["run"] for result in results]
            sections["lookback"].append(entry({"scheme": name}, runs, "accuracy"))
        elif task == "passkey":
            runs = [
                {"seed": r["run"]["seed"], **passkey_run(r["run"])} for r in results
            ]
            passkey = entry({"scheme": name}, runs, "accuracy")
            curve = curve_summary(runs, "accuracy")
            if curve is not None:
                passkey["curve"] = curve
            sections["passkey"].append(passkey)
            _readings(sections["passkey_extension"], results, "extension", "accuracy")
    seq_len = train.get("seq_len")
    metadata = header.get("metadata")
    seeds = sorted(settings.get("seeds", ()))
    planned = _run_settings(experiment)
    if planned is None:  # no header (an older run file): what the units say
        planned = {
            "corpus": own_corpus,
            **{k: v for k, v in settings.items() if k != "multiples"},
            "lengths": [m * seq_len for m in settings.get("multiples", ())]
            if seq_len
            else [],
            "position_bin": position_bin(seq_len) if seq_len else 1,
        }
    return {
        "preset": experiment.get("name"),
        "metadata": metadata if isinstance(metadata, dict) else {},
        # the seeds finished so far: each entry's n says the same
        "settings": {**planned, "seeds": seeds},
        **sections,
    }


def _run_settings(experiment: dict) -> dict | None:
    """The settings the run's record will hold (``Runner.settings``, as ``merge``
    writes them), from the experiment in a run file's header; None without one."""
    if not experiment:
        return None
    try:
        preset = preset_from_dict(experiment)
    except ExperimentError:
        return None
    runner = Runner(preset, torch.device("cpu"), progress=False, read_corpus=False)
    return json.loads(json.dumps(runner.settings()))  # as the record file holds them


def _with_depths(seed: int, by_depth: dict) -> dict:
    return {"seed": seed, "accuracy": mean_over_depths(by_depth), "by_depth": by_depth}


def _named(results: list[dict], field: str) -> dict[str, list[dict]]:
    """Per reading name, ``{"seed", "bpb"}`` of each unit that has ``field``."""
    out: dict[str, list[dict]] = {}
    for result in results:
        for name, bpb in result.get(field, {}).items():
            out.setdefault(name, []).append({"seed": result["run"]["seed"], "bpb": bpb})
    return out


def _readings(section: list, results: list[dict], field: str, key: str) -> None:
    """The method/stage readings of RoPE (text or passkey) as entries of ``section``."""
    readings: dict[str, list[dict]] = {}
    for result in results:
        seed = result["run"]["seed"]
        for name, value in result.get(field, {}).items():
            run = (
                {"seed": seed, "bpb": value}
                if key == "bpb"
                else _with_depths(seed, value)
            )
            readings.setdefault(name, []).append(run)
    for name, runs in readings.items():
        method, stage = name.split("/")
        section.append(entry({"method": method, "stage": stage}, runs, key))


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

TITLES = {
    "language_model": "Language models: bits per byte by evaluation length",
    "rope_extension": "RoPE read with each scaling, zero-shot and fine-tuned: "
    "bits per byte",
    "rope_bands": "RoPE with one band of its frequencies changed at evaluation: "
    "bits per byte",
    "learned_extension": "A learned table lengthened by copying its rows or by "
    "random ones: bits per byte",
    "lookback": "Look-back task: accuracy by sequence length",
    "passkey": "Passkey retrieval: whole-key accuracy by length (mean over depths)",
    "passkey_extension": "Passkey with RoPE's scalings: accuracy by length",
}


def _n(entry: dict) -> int:
    counts = [s["n"] for s in entry["summary"].values() if s and "n" in s]
    return max(counts) if counts else len(entry.get("runs", ()))


def _table(results: dict, section: str, entries: list[dict] | None = None) -> str:
    """``summarise``'s rows as chapter 9 prints them, with a column of each row's n."""
    chosen = results[section] if entries is None else entries
    rows = summarise(results, section, chosen)
    lines = format_rows(rows).split("\n")
    lines[0] += f"{'n':>5}"
    for i, e in enumerate(chosen, start=1):
        lines[i] += f"{_n(e):>5}"
    return "\n".join(lines)


def _gap(gap: Gap) -> str:
    return f"{gap} [n = {gap.n}]"


def _is_plain(entry: dict, settings: dict) -> bool:
    return (
        entry["norm"] == "pre"
        and entry["absolute"] == "input"
        and entry.get("learning_rate") in (None, scheme_rate(settings, entry["scheme"]))
        and not entry.get("changes")
        and not entry.get("training")
    )


def _own(results: dict) -> str | None:
    """The run's own corpus (None where a run file does not name it)."""
    return results["settings"].get("corpus", "stdlib")


def _corpus(entry: dict) -> str | None:
    return entry.get("corpus", "stdlib")


def _plain(results: dict, corpus: str | None) -> dict[str, dict]:
    """The plain variant of each scheme on a corpus: pre-norm, table at the input,
    the scheme's own rate, no changes (chapter 9's ``language_entry`` default)."""
    return {
        e["scheme"]: e
        for e in results["language_model"]
        if _corpus(e) == corpus and _is_plain(e, results["settings"])
    }


def _readable(entry: dict, length: int) -> bool:
    return mean_at(entry, length) is not None


def _header(results: dict, note: str | None, path: str) -> list[str]:
    meta, settings = results.get("metadata") or {}, results["settings"]
    train, model = settings.get("train", {}), settings.get("model", {})
    lines = [f"{path}: preset {results.get('preset') or '(not named in the file)'}"]
    if note:
        lines.append(note)
    if meta:
        hours = meta.get("wall_seconds", 0) / 3600
        lines.append(
            f"recorded {meta.get('date', '?')} on {meta.get('device', '?')} "
            f"({meta.get('device_name', '?')}), {meta.get('threads', '?')} threads, "
            f"torch {meta.get('torch', '?')}: {hours:.1f} h of training and scoring"
        )
    if model and train:
        lines.append(
            f"model: d_model {model.get('d_model')}, {model.get('num_layers')} layers, "
            f"{model.get('num_heads')} heads; {train.get('steps')} steps of "
            f"{train.get('batch_size')} windows of {train.get('seq_len')} bytes at "
            f"learning rate {train.get('learning_rate'):g}; seeds "
            f"{', '.join(str(s) for s in settings.get('seeds', []))}"
        )
    for scheme, fields in settings.get("tuned", {}).items():
        tuned = ", ".join(f"{name} {value:g}" for name, value in fields.items())
        lines.append(f"  {scheme} trains with {tuned} (tuned)")
    lines.append(
        "A verdict weighs a difference against the seeds' spread (std_a + std_b, "
        "or the std of per-seed differences): 'beyond the seeds' spread' when it "
        "is larger, 'within noise' otherwise; n is the seeds behind it, and one "
        "seed gives no verdict."
    )
    return lines


def _ranking(entries: dict[str, dict], length: int) -> list[str]:
    readable = [s for s, e in entries.items() if _readable(e, length)]
    order = sorted(readable, key=lambda s: mean_at(entries[s], length))
    width = max((len(s) for s in order), default=0)
    lines = []
    for better, worse in zip(order, order[1:]):
        gap = compare(entries[worse], entries[better], length)
        lines.append(f"  {better:{width}} < {worse:{width}} by {_gap(gap)}")
    if len(order) == 1:
        lines.append(f"  {order[0]} (alone)")
    return lines


def _language_model(results: dict) -> list[str]:
    settings = results["settings"]
    L = settings["train"]["seq_len"]
    out = ["", f"== {TITLES['language_model']} (mean ± std of n seeds; L = {L}) =="]
    out.append(_table(results, "language_model"))
    for corpus in dict.fromkeys(_corpus(e) for e in results["language_model"]):
        plain = _plain(results, corpus)
        if not plain:
            continue
        where = "" if corpus == _own(results) else f", {corpus}"
        out += ["", f"-- At L = {L}{where}, best to worst; each gap to the next --"]
        out += _ranking(plain, L)
        out += [
            "",
            f"-- Validation minus training split at L{where} (the train gap) --",
        ]
        width = max(len(s) for s in plain) + 2
        out.append(f"  {'scheme':{width}}{'validation':>11}{'train':>8}  gap")
        for scheme, e in plain.items():
            if any("train_split_bpb" not in run for run in e["runs"]):
                continue
            gap = train_gap(e, L)
            valid = mean_at(e, L)
            out.append(
                f"  {scheme:{width}}{valid:11.3f}{valid - gap.difference:8.3f}  "
                f"{_gap(gap)}"
            )
        longest = max(int(n) for n in next(iter(plain.values()))["summary"])
        if longest > L:
            out += [
                "",
                f"-- From L to {longest // L}L{where}, per seed (the paired change) --",
            ]
            rises = {}
            for scheme, e in plain.items():
                try:
                    rises[scheme] = paired_change(e, L, longest)
                except ValueError:  # a length it cannot read
                    continue
            for scheme, rise in sorted(rises.items(), key=lambda kv: kv[1].difference):
                out.append(f"  {scheme:{width}}{_gap(rise)}")
            unread = [s for s in plain if s not in rises]
            if unread:
                out.append(f"  (cannot read {longest}: {', '.join(unread)})")
    others = [
        e
        for e in results["language_model"]
        if not _is_plain(e, settings) and e["scheme"] in _plain(results, _corpus(e))
    ]
    if others:
        out += ["", f"-- Each variant against its scheme's plain variant at L = {L} --"]
        names = summarise(results, "language_model", others)
        width = max(len(row["variant"]) for row in names) + 2
        for row, e in zip(names, others):
            plain = _plain(results, _corpus(e))[e["scheme"]]
            if _readable(e, L) and _readable(plain, L):
                gap = compare(e, plain, L)
                out.append(f"  {row['variant']:{width}}{_gap(gap)}")
    return out


def _curves(results: dict) -> list[str]:
    L = results["settings"]["train"]["seq_len"]
    with_curves = [e for e in results["language_model"] if e.get("curve")]
    out = [
        "",
        f"== Learning curves: validation bits per byte at L = {L} during training ==",
    ]
    if not with_curves:
        return out + ["  not recorded (this record predates learning curves)"]
    steps = with_curves[0]["curve"]["steps"]
    names = summarise(results, "language_model", with_curves)
    width = max(len(row["variant"]) for row in names) + 2
    out.append(f"  {'step':{width}}" + "".join(f"{s:>8}" for s in steps) + f"{'n':>5}")
    for row, e in zip(names, with_curves):
        curve = e["curve"]
        cells = "".join(f"{m:8.3f}" for m in curve["mean"])
        out.append(f"  {row['variant']:{width}}{cells}{max(curve['n']):>5}")
    out.append("  (the seeds' mean at each step; the spreads are in the figure)")
    return out


def _extensions(results: dict, section: str, length: int) -> list[str]:
    """Each method against plain RoPE at ``length``, in the same stage."""
    by_stage: dict[str, dict[str, dict]] = {}
    for e in results[section]:
        by_stage.setdefault(e["stage"], {})[e["method"]] = e
    lines = []
    names = [f"{e['method']} ({e['stage']})" for e in results[section]]
    width = max(len(name) for name in names)
    for stage, methods in by_stage.items():
        plain = methods.get("none")
        if plain is None or str(length) not in plain["summary"]:
            continue
        for method, e in methods.items():
            if method != "none" and _readable(e, length) and _readable(plain, length):
                gap = compare(e, plain, length)
                lines.append(f"  {f'{method} ({stage})':{width}}  {_gap(gap)}")
    if lines:
        lines.insert(
            0, f"-- Each scaling minus plain RoPE ('none') at {length}, same stage --"
        )
        lines.insert(0, "")
    return lines


def report(results: dict, *, note: str | None = None, path: str = "") -> str:
    """The tables and verdicts of every section the results hold, as text."""
    settings = results["settings"]
    out = _header(results, note, path)
    if results["language_model"]:
        out += _language_model(results)
        out += _curves(results)
    L = settings["train"]["seq_len"]
    factor = settings.get("extension_factor")
    task_length = {
        "lookback": (settings.get("lookback") or {}).get("seq_len"),
        "passkey": (settings.get("passkey") or {}).get("seq_len"),
        "passkey_extension": (settings.get("passkey") or {}).get("seq_len"),
    }
    for section in SECTIONS[1:]:
        if not results.get(section):
            continue
        out += ["", f"== {TITLES[section]} (mean ± std of n seeds) =="]
        out.append(_table(results, section))
        if section in ("rope_extension", "passkey_extension") and factor:
            base = L if section == "rope_extension" else task_length[section]
            if base:
                out += _extensions(results, section, int(factor * base))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# the figures
# ---------------------------------------------------------------------------


def write_figures(results: dict, folder: str | Path) -> list[Path]:
    """Chapter 9's figures of these results as PNG files in ``folder``; their paths.

    Each figure is drawn only where the results hold its section (a partial
    run's may hold few).
    """
    import matplotlib.pyplot as plt

    from ..pages import run_plots as plots

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    settings = results["settings"]
    L = settings["train"]["seq_len"]
    seeds = len(settings.get("seeds", [])) or "?"
    written: list[Path] = []

    def save(name: str, draw: Callable[[], object]) -> None:
        figure = draw()
        figure = getattr(figure, "figure", figure)
        path = folder / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)

    def axes(size=(8, 4.5)):
        return plt.subplots(figsize=size, constrained_layout=True)[1]

    def labels(section: str, entries: list[dict]) -> list[str]:
        return [row["variant"] for row in summarise(results, section, entries)]

    own = _own(results)
    for corpus in dict.fromkeys(_corpus(e) for e in results["language_model"]):
        plain = list(_plain(results, corpus).values())
        if not plain:
            continue
        suffix = "" if corpus == own else f"-{Path(str(corpus)).name}"
        save(
            f"lengths{suffix}",
            lambda plain=plain, corpus=corpus: plots.length_curves(
                plain,
                labels=labels("language_model", plain),
                train_length=L,
                title=f"Bits per byte by evaluation length ({corpus or 'own corpus'}), "
                f"mean ± std of {seeds} seeds",
                ax=axes(),
            ),
        )
    plain = [
        e
        for e in _plain(results, own).values()
        if any(r.get("position_bpb") for r in e["runs"])
    ]
    if plain:
        bins = len(
            next(r["position_bpb"] for r in plain[0]["runs"] if r["position_bpb"])
        )
        save(
            "positions",
            lambda: plots.position_curves(
                plain,
                labels=labels("language_model", plain),
                train_length=L,
                position_bin=settings.get("position_bin", 1),
                merge=4 if bins % 4 == 0 else 1,
                title=f"Loss by position in a window of {max(settings['lengths'] or [L])}",
                ax=axes((8, 4.8)),
            ),
        )
    curved = [e for e in _plain(results, own).values() if e.get("curve")] or [
        e for e in results["language_model"] if e.get("curve")
    ]
    if curved:
        save(
            "learning_curves",
            lambda: plots.learning_curves(
                curved,
                labels=labels("language_model", curved),
                title=f"Validation bits per byte at L = {L} during training",
                ax=axes(),
            ),
        )
    sweeps = _sweeps(results)
    if sweeps:
        save(
            "rate_sweep",
            lambda: plots.rate_sweep(
                sweeps, length=L, title="Each norm's best rate", ax=axes((6.5, 4))
            )[0],
        )
    rope = _plain(results, own).get("rope")
    if results.get("rope_bands") and rope is not None:
        bands = [rope, *results["rope_bands"]]
        save(
            "rope_bands",
            lambda: plots.length_curves(
                bands,
                labels=["plain RoPE", *(e["mode"] for e in results["rope_bands"])],
                train_length=L,
                title="RoPE band ablation at evaluation",
                ax=axes(),
            ),
        )
    for section, base, what in (
        ("rope_extension", L, {}),
        (
            "passkey_extension",
            (settings.get("passkey") or {}).get("seq_len"),
            {"ylabel": "accuracy", "xlabel": "sequence length (symbols)"},
        ),
    ):
        if results.get(section) and base:
            save(section, lambda s=section, b=base, w=what: _stages(results, s, b, w))
    task = settings.get("lookback") or {}
    if results.get("lookback") and task.get("seq_len"):
        look = results["lookback"]

        def lookback():
            ax = plots.length_curves(
                look,
                labels=[e["scheme"] for e in look],
                train_length=task["seq_len"],
                title=f"Look-back task (k = {task.get('lookback', '?')}): accuracy",
                ylabel="accuracy",
                xlabel="sequence length (symbols)",
                ax=axes(),
                limits=(0.0, 1.0),
            )
            if task.get("num_symbols"):
                ax.axhline(1 / task["num_symbols"], color="0.6", linestyle=":")
            return ax

        save("lookback", lookback)
    if results.get("passkey"):
        grids = {e["scheme"]: e for e in results["passkey"]}
        save(
            "passkey",
            lambda: plots.passkey_grids(grids, title="Passkey retrieval"),
        )
    return written


def _sweeps(results: dict) -> dict[str, dict[float, dict]]:
    """Per scheme and norm, ``{rate: entry}`` where more than one rate was trained."""
    sweeps: dict[str, dict[float, dict]] = {}
    for e in results["language_model"]:
        if (
            _corpus(e) == _own(results)
            and e["absolute"] == "input"
            and not e.get("changes")
            and not e.get("training")
            and e.get("learning_rate") is not None
            and _readable(e, results["settings"]["train"]["seq_len"])
        ):
            label = f"{e['scheme']} {e['norm']}-norm"
            sweeps.setdefault(label, {})[e["learning_rate"]] = e
    return {label: sweep for label, sweep in sweeps.items() if len(sweep) > 1}


def _stages(results: dict, section: str, base: int, what: dict):
    """RoPE's scalings in two panels, zero-shot and fine-tuned (chapter 9)."""
    import matplotlib.pyplot as plt

    from ..pages import run_plots as plots

    stages = list(dict.fromkeys(e["stage"] for e in results[section]))
    fig, axes = plt.subplots(
        len(stages),
        1,
        figsize=(8, 4 * len(stages)),
        constrained_layout=True,
        sharex=True,
        squeeze=False,
    )
    factor = results["settings"].get("extension_factor")
    accuracy = "ylabel" in what
    for ax, stage in zip(axes[:, 0], stages):
        chosen = [e for e in results[section] if e["stage"] == stage]
        plots.length_curves(
            chosen,
            labels=[e["method"] for e in chosen],
            train_length=base,
            title=f"{'Passkey' if accuracy else 'RoPE'} with each scaling, {stage}",
            ax=ax,
            limits=(0.0, 1.0) if accuracy else None,
            **what,
        )
        if factor:
            ax.axvline(factor * base, color="0.6", linestyle=":", linewidth=1)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    return fig


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``show FILE [--figures DIR]``; the exit status (2: a file it cannot show)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Print the tables of a recorded experiment (a --json or --record "
        "file, or the PATH.partial of a run still going) as chapter 9 prints them: "
        "means and spreads by length, and each verdict with the seeds behind it. "
        "With --figures DIR, also write the chapter's figures there as PNG files.",
    )
    parser.add_argument("file", type=Path, help="a record, or a run file (.partial)")
    parser.add_argument("--figures", type=Path, help="write the figures here (PNG)")
    args = parser.parse_args(argv)
    try:
        results, note = load(args.file)
        text = report(results, note=note, path=str(args.file))
    except ViewError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        print(
            f"{PROG}: error: cannot show {args.file}: it is not a record as "
            f"pe_tutorial.experiments writes them ({type(error).__name__}: {error})",
            file=sys.stderr,
        )
        return 2
    print(text, end="")
    if args.figures is not None:
        import matplotlib

        matplotlib.use("Agg")  # files only: no window, no display needed
        try:
            written = write_figures(results, args.figures)
        except OSError as error:
            print(f"{PROG}: error: cannot write the figures: {error}", file=sys.stderr)
            return 2
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            print(
                f"{PROG}: error: cannot draw the figures of {args.file}: it is not a "
                f"record as pe_tutorial.experiments writes them "
                f"({type(error).__name__}: {error})",
                file=sys.stderr,
            )
            return 2
        print(f"\nwrote {len(written)} figures to {args.figures}:")
        for path in written:
            print(f"  {path.name}")
    return 0
