"""Recorded results: where they live, and their sections as rows of a table.

``results_path`` and ``load_results`` find a preset's recorded run inside the
installed package (``pe_tutorial/results/``); ``SECTIONS`` names the sections
of a results dict, ``summarise`` turns one into rows (``mean ± std`` per
length) and ``format_rows`` prints them. ``entry``, ``summary`` and
``curve_summary`` make a section's entries from its per-seed runs.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from ...lm.findings import mean_and_std, scheme_rate
from ..configuration.config import check_preset

__all__ = [
    "SECTIONS",
    "entry",
    "summary",
    "curve_summary",
    "results_path",
    "load_results",
    "load_judged",
    "summarise",
    "format_rows",
]

RESULTS_PACKAGE = "pe_tutorial"
RESULTS_FOLDER = "results"


def summary(values: list[float | None]) -> dict | None:
    """Mean, sample standard deviation and count of the runs' values (None if any is missing)."""
    if not values or any(v is None for v in values):
        return None
    mean, spread = mean_and_std(values)
    return {"mean": mean, "std": spread, "n": len(values)}


def _summarise_runs(runs: list[dict], key: str) -> dict[str, dict | None]:
    lengths = runs[0][key].keys()
    return {n: summary([run[key][n] for run in runs]) for n in lengths}


def entry(fields: dict, runs: list[dict], key: str = "bpb") -> dict:
    """A section's entry: what names it, its per-seed runs, and their summary by length."""
    return {**fields, "runs": runs, "summary": _summarise_runs(runs, key)}


def curve_summary(runs: list[dict], key: str = "bpb") -> dict | None:
    """The learning curves of an entry's runs, per point: ``{"steps", "mean", "std", "n"}``.

    ``key`` names the curve's values (``"bpb"`` for a language model,
    ``"accuracy"`` for a passkey model). Runs without a curve (recorded before
    curves were) are left out, and so is one read at other steps than the
    first; None when no run has a curve.
    """
    curves = [run["curve"] for run in runs if run.get("curve")]
    if not curves:
        return None
    steps = curves[0]["steps"]
    curves = [curve for curve in curves if curve["steps"] == steps]
    points = [summary([curve[key][i] for curve in curves]) for i in range(len(steps))]
    return {
        "steps": list(steps),
        **{name: [point[name] for point in points] for name in ("mean", "std", "n")},
    }


def _results_folder():
    """The installed package's ``results`` folder (a ``resources`` traversable)."""
    return resources.files(RESULTS_PACKAGE) / RESULTS_FOLDER


def results_path(preset: str) -> Path:
    """Where ``--record`` writes a preset's results: inside the installed package."""
    check_preset(preset)
    return Path(str(_results_folder())) / f"experiments-{preset}.json"


def load_results(preset: str) -> dict | None:
    """The recorded results of a preset, or None if none were recorded."""
    check_preset(preset)
    resource_file = _results_folder() / f"experiments-{preset}.json"
    if not resource_file.is_file():
        return None
    return json.loads(resource_file.read_text())


def load_judged(scheme: str) -> dict:
    """The judge's record of a scheme that ships with the package
    (``judged-<scheme>.json``: ``python -m pe_tutorial.experiments judge``'s
    ``judged.json``, copied in; chapter 9 reads KERPLE's, ``kerple-log``).

    FileNotFoundError naming the schemes that ship, if ``scheme`` is not one.
    """
    folder = _results_folder()
    resource_file = folder / f"judged-{scheme}.json"
    if not resource_file.is_file():
        shipped = sorted(
            f.name.removeprefix("judged-").removesuffix(".json")
            for f in folder.iterdir()
            if f.name.startswith("judged-") and f.name.endswith(".json")
        )
        raise FileNotFoundError(
            f"no judged record of {scheme!r} ships with the package; it has "
            f"{', '.join(map(repr, shipped)) or 'none'}. A judge's own record is its "
            "folder's judged.json (python -m pe_tutorial.experiments judge FILE)"
        )
    return json.loads(resource_file.read_text())


SECTIONS = (
    "language_model",
    "rope_extension",
    "rope_bands",
    "learned_extension",
    "lookback",
    "passkey",
    "passkey_extension",
)


def summarise(
    results: dict, section: str = "language_model", entries: list[dict] | None = None
) -> list[dict]:
    """Flat rows of one section for a table: the variant's name and ``mean ± std`` per length.

    ``entries`` (entries of that section) limits the rows to those, in that order.
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; choose one of {SECTIONS}")
    chosen = results[section] if entries is None else entries
    if any(not any(e is entry for e in results[section]) for entry in chosen):
        raise ValueError(f"entries must be entries of results[{section!r}]")
    rows = []
    for entry in chosen:
        if section == "language_model":
            corpus = entry.get("corpus", "stdlib")
            own = results["settings"].get("corpus", "stdlib")
            name = ("" if corpus == own else f"{corpus}: ") + entry["scheme"]
            if entry["norm"] == "post":
                name += " (post-norm)"
            if entry["absolute"] == "every_layer":
                name += " (every layer)"
            own_rate = scheme_rate(results["settings"], entry["scheme"])
            if entry.get("learning_rate") not in (None, own_rate):
                name += f" (lr {entry['learning_rate']:g})"
            for field_name, value in entry.get("changes", {}).items():
                name += f" ({field_name} {value})"
            for field_name, value in entry.get("training", {}).items():
                name += f" (train.{field_name} {value})"
        elif section in ("rope_extension", "passkey_extension"):
            name = f"{entry['method']} ({entry['stage']})"
        elif section == "rope_bands":
            name = entry["mode"]
        elif section == "learned_extension":
            name = entry["stage"]
        else:
            name = entry["scheme"]
        row = {"variant": name}
        for length, stats in entry["summary"].items():
            if stats is None:
                row[length] = "n/a"
            elif stats["n"] > 1:
                row[length] = f"{stats['mean']:.3f} ± {stats['std']:.3f}"
            else:
                row[length] = f"{stats['mean']:.3f}"
        rows.append(row)
    return rows


def format_rows(rows: list[dict], *, first: int | None = None, width: int = 15) -> str:
    """``summarise``'s rows as aligned text: the variant, then one column per length.

    ``first`` is the width of the variant's column (None: the longest name's, plus 2).
    """
    if not rows:
        return ""
    if first is None:
        first = max(len(row["variant"]) for row in rows) + 2
    lengths = [key for key in rows[0] if key != "variant"]
    lines = [" " * first + "".join(f"{n:>{width}}" for n in lengths)]
    for row in rows:
        cells = "".join(f"{row[n]:>{width}}" for n in lengths)
        lines.append(f"{row['variant']:{first}}{cells}")
    return "\n".join(lines)
