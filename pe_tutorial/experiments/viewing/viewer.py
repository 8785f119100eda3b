"""The viewer: ``python -m pe_tutorial.experiments show FILE [--figures DIR] [--report DIR]``.

It prints the tables chapter 9 prints from a record of ``run_experiments``
(``--json`` or ``--record``): every section's means and spreads by length
with the seeds behind them (``n``), and the verdicts of ``lm.run_verdicts``
(each difference paired by seed, resampled by seed and file where the record
names the files, and corrected with Holm's rule within the family of claims
it prints, the family named above it; one seed gives no verdict). With
``--figures DIR`` it also writes the chapter's figures as PNG files
(``pages.plots``), the learning curves among them; with ``--report DIR``, a
report card (``report_card.py``): one Markdown page with the figures.

``FILE`` may be a run file that is still being written (``PATH.partial``,
``record.RunFile``): the viewer assembles the units that have finished
(``assemble_units``), says how many there are, and shows them, each entry
with the seeds it has so far, so a running experiment can be watched. A file
that is neither (cut short, not JSON, another program's) gets one line that
says so, and the exit status 2. Reading a file is ``run_files.py``'s, the
figures ``viewer_figures.py``'s; this module holds the tables' text and the
command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...lm.findings import mean_at
from ...lm.run_verdicts import brief, entry_verdict, length_verdict, scalar_verdict
from ...lm.verdicts import Verdict, claim_count, verdict_family
from ..records.results import SECTIONS, format_rows, summarise
from .run_files import (
    ViewError,
    assemble_units,
    entry_corpus,
    is_plain,
    load,
    own_corpus,
    plain_entries,
    readable,
)
from .viewer_figures import write_figures

__all__ = ["ViewError", "main", "load", "assemble_units", "report", "write_figures"]


PROG = "python -m pe_tutorial.experiments show"


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


def _family(name: str, claims: list[tuple[str, Verdict]]) -> list[str]:
    """The lines of one family of claims: its name and size, then each claim
    (``(row label, verdict)``) with its Holm-adjusted verdict."""
    if not claims:
        return []
    verdicts = verdict_family(name, [v for _, v in claims])
    lines = [f"  (family '{name}': {claim_count(len(verdicts))}, Holm-corrected)"]
    width = max(len(label) for label, _ in claims)
    for (label, _), verdict in zip(claims, verdicts):
        lines.append(f"  {label:{width}}  {brief(verdict)}")
    return lines


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
        "A verdict is a difference paired by seed (the two models trained on the "
        "same batches) with its 95% interval: the paired t-test over the n seeds, "
        "and where the record names each scored segment's file, a bootstrap over "
        "seeds x files as well (both must exclude 0; the wider interval shown). "
        "Each printed family of claims is corrected with Holm's rule: 'a real "
        "difference' when the adjusted p is below 0.05. One seed gives no verdict."
    )
    return lines


def _ranking(
    results: dict, entries: dict[str, dict], length: int, where: str
) -> list[str]:
    kept = [s for s, e in entries.items() if readable(e, length)]
    order = sorted(kept, key=lambda s: mean_at(entries[s], length))
    if len(order) == 1:
        return [f"  {order[0]} (alone)"]
    claims = [
        (
            f"{worse} - {better}",
            entry_verdict(
                results,
                entries[worse],
                entries[better],
                length,
                label=f"{worse} - {better}",
            ),
        )
        for better, worse in zip(order, order[1:])
    ]
    return _family(f"each scheme to the next at {length}{where}", claims)


def _language_model(results: dict) -> list[str]:
    settings = results["settings"]
    L = settings["train"]["seq_len"]
    out = ["", f"== {TITLES['language_model']} (mean ± std of n seeds; L = {L}) =="]
    out.append(_table(results, "language_model"))
    for corpus in dict.fromkeys(entry_corpus(e) for e in results["language_model"]):
        plain = plain_entries(results, corpus)
        if not plain:
            continue
        where = "" if corpus == own_corpus(results) else f", {corpus}"
        out += ["", f"-- At L = {L}{where}, best to worst; each gap to the next --"]
        out += _ranking(results, plain, L, where)
        out += [
            "",
            f"-- {_scored_split(results, corpus).capitalize()} minus training split "
            f"at L{where} (the train gap) --",
        ]
        width = max(len(s) for s in plain) + 2
        out.append(f"  {'scheme':{width}}{'scored':>8}{'train':>8}")
        claims = []
        for scheme, e in plain.items():
            if any("train_split_bpb" not in run for run in e["runs"]):
                continue
            scored = {r["seed"]: r["bpb"][str(L)] for r in e["runs"]}
            train = {r["seed"]: r["train_split_bpb"] for r in e["runs"]}
            out.append(
                f"  {scheme:{width}}{sum(scored.values()) / len(scored):8.3f}"
                f"{sum(train.values()) / len(train):8.3f}"
            )
            claims.append(
                (scheme, scalar_verdict(scored, train, label=f"{scheme} gap"))
            )
        out += _family(f"train gap at L{where}", claims)
        longest = max(int(n) for n in next(iter(plain.values()))["summary"])
        if longest > L:
            out += [
                "",
                f"-- From L to {longest // L}L{where}, per seed (the paired change) --",
            ]
            rises = {}
            for scheme, e in plain.items():
                if readable(e, longest) and readable(e, L):
                    rises[scheme] = length_verdict(
                        results, e, L, longest, label=f"{scheme} rise"
                    )
            ordered = sorted(rises.items(), key=lambda kv: kv[1].difference)
            out += _family(f"rise from L to {longest // L}L{where}", ordered)
            unread = [s for s in plain if s not in rises]
            if unread:
                out.append(f"  (cannot read {longest}: {', '.join(unread)})")
    others = [
        e
        for e in results["language_model"]
        if not is_plain(e, settings)
        and e["scheme"] in plain_entries(results, entry_corpus(e))
    ]
    if others:
        out += ["", f"-- Each variant against its scheme's plain variant at L = {L} --"]
        names = summarise(results, "language_model", others)
        claims = []
        for row, e in zip(names, others):
            plain = plain_entries(results, entry_corpus(e))[e["scheme"]]
            if readable(e, L) and readable(plain, L):
                label = row["variant"]
                claims.append((label, entry_verdict(results, e, plain, L, label=label)))
        out += _family(f"variants against their plain scheme at L = {L}", claims)
    return out


def _scored_split(results: dict, corpus: str) -> str:
    """The split a record's scores of ``corpus`` read (validation unless it says)."""
    corpora = (results.get("metadata") or {}).get("corpora") or {}
    return corpora.get(corpus, {}).get("scored_split", "validation")


def _curves(results: dict) -> list[str]:
    L = results["settings"]["train"]["seq_len"]
    with_curves = [e for e in results["language_model"] if e.get("curve")]
    split = _scored_split(results, own_corpus(results))
    out = [
        "",
        f"== Learning curves: {split} bits per byte at L = {L} during training ==",
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
    claims = []
    for stage, methods in by_stage.items():
        plain = methods.get("none")
        if plain is None or str(length) not in plain["summary"]:
            continue
        for method, e in methods.items():
            if method != "none" and readable(e, length) and readable(plain, length):
                label = f"{method} ({stage})"
                claims.append(
                    (label, entry_verdict(results, e, plain, length, label=label))
                )
    lines = _family(f"{section} scalings against none at {length}", claims)
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
    parser.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="write a report card here: report.md with the provenance, verdicts, "
        "tables and figures (PNG beside it)",
    )
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
    if args.report is not None:
        from .report_card import write_card

        try:
            page = write_card(results, args.report, text)
        except OSError as error:
            print(
                f"{PROG}: error: cannot write the report card: {error}", file=sys.stderr
            )
            return 2
        print(f"\nwrote the report card {page}")
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
