"""A record's report card: ``show FILE --report DIR`` writes ``DIR/report.md``.

One Markdown page to attach to a paper or a pull request: where, when and
with what code the record was made; for a judged scheme (``judge.py``) the
protocol it went through (its sweep and the setting chosen, the seeds and
split it was read on, which baselines were reused from the package's
records and which trained again, and why); the verdicts of the scheme
against each baseline (paired by seed, Holm-corrected within each family,
with their n); the viewer's tables (``viewer.report``'s text, which the
caller passes: the viewer imports this module, not the reverse); and the
chapter's figures (``viewer_figures.write_figures``), as PNG files beside
the page. A smoke run's record (``judge --smoke``, its ``judge.verdict``
"smoke: no verdict") gets a card so titled, with no verdicts.
"""

from __future__ import annotations

from pathlib import Path

from ...lm.findings import mean_at
from ...lm.run_verdicts import brief, entry_verdict
from ...lm.verdicts import claim_count, verdict_family
from .run_files import own_corpus, plain_entries, readable
from .viewer_figures import write_figures

__all__ = ["write_card", "card_text", "judged_claims"]


def _provenance(results: dict) -> list[str]:
    meta = results.get("metadata") or {}
    judge = results["settings"].get("judge")
    lines = []
    if judge:
        lines.append(
            f"- **Scheme**: `{judge['scheme']}`, from `{judge['scheme_file']}` "
            f"(sha256 {judge['scheme_file_digest']})"
        )
    lines += [
        f"- **Recorded** {meta.get('date', '?')} on {meta.get('device', '?')} "
        f"({meta.get('device_name', '?')}), {_count(meta.get('threads', '?'), 'thread')}"
        f" a process, {meta.get('jobs', '1')} at once; torch {meta.get('torch', '?')}, "
        f"Python {meta.get('python', '?')}",
        f"- **Code**: pe_tutorial code version `{meta.get('code_version', '?')}`",
    ]
    if judge:
        spent = judge.get("stage_seconds", {})
        lines.append(
            "- **Time**: "
            + ", ".join(f"{stage} {s / 60:.1f} min" for stage, s in spent.items())
            + " of training and scoring, summed over processes"
        )
    lines += [
        f"- **Command**: `{meta.get('command', '?')}`",
    ]
    if judge and judge.get("note"):
        lines.append(f"- **Note**: {judge['note']}")
    return lines


def _protocol(results: dict) -> list[str]:
    settings, judge = results["settings"], results["settings"]["judge"]
    model, train = settings["model"], settings["train"]
    best = ", ".join(f"{k} {v:g}" for k, v in judge["best"].items())
    lines = [
        "",
        "## The protocol",
        "",
        "Chapter 9's, applied to this scheme alone:",
        "",
        f"1. **Tuning** on the validation split, seed 0: the model of "
        f"{_count(model['num_layers'], 'layer')} of width {model['d_model']} "
        f"({_count(model['num_heads'], 'head')}) trained "
        f"{train['steps']} steps on windows of {train['seq_len']} bytes at each "
        "setting below; the lowest bits per byte at L chose its training: "
        f"**{best}**.",
        "",
        "   | learning rate | position-rate multiplier | validation bpb at L |",
        "   |---:|---:|---:|",
    ]
    for point in sorted(
        judge["tuning"], key=lambda p: (p["position_lr_multiplier"], p["learning_rate"])
    ):
        lines.append(
            f"   | {point['learning_rate']:g} | {point['position_lr_multiplier']:g} "
            f"| {point['bpb']:.4f} |"
        )
    seeds = ", ".join(str(s) for s in settings["seeds"])
    task_seeds = ", ".join(str(s) for s in settings.get("task_seeds", []))
    split = (results["metadata"].get("corpora") or {}).get(own_corpus(results), {})
    lines += [
        "",
        f"2. **Held out**: trained again at that setting from seeds {seeds}, which "
        "chose nothing, and read on the test split "
        f"({split.get('source', 'the corpus the record names')}) at "
        f"{', '.join(str(n) for n in settings['lengths'])} bytes.",
        f"3. **Tasks**: look-back and passkey at that setting, seeds {task_seeds} "
        "(the seeds of the book's task record, so that each pairs with it).",
        "",
        "**Baselines.**",
    ]
    for stage, what in (("heldout", "text"), ("tasks", "the tasks")):
        reused = sorted(judge["reused"].get(stage, {}))
        if reused:
            where = judge.get("reused_from", {}).get(stage, {})
            lines.append(
                f"- On {what}, reused from the record the package ships "
                f"(`{'heldout' if stage == 'heldout' else 'tuned'}` preset, recorded "
                f"{where.get('date', '?')} on {where.get('device', '?')} "
                f"({where.get('device_name', '?')}), code "
                f"`{where.get('code_version', '?')}`): "
                + ", ".join(f"`{s}`" for s in reused)
            )
        for scheme, why in sorted(judge["retrained"].get(stage, {}).items()):
            lines.append(f"- On {what}, `{scheme}` trained again here: {why}")
    return lines


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _family_table(name: str, claims: list[tuple[str, str, object]]) -> list[str]:
    """A family's claims as a Markdown table (baseline, length, verdict)."""
    if not claims:
        return []
    verdicts = verdict_family(name, [v for _, _, v in claims])
    lines = [
        "",
        f"**{name}** ({claim_count(len(verdicts))}, Holm-corrected):",
        "",
        "| against | at | difference [95% interval], n, p | verdict |",
        "|---|---:|---|---|",
    ]
    for (against, length, _), v in zip(claims, verdicts):
        text = brief(v)
        number, _, conclusion = text.rpartition(": ")
        lines.append(f"| `{against}` | {length} | {number} | {conclusion} |")
    return lines


def judged_claims(results: dict) -> list[tuple[str, list[tuple[str, int, object]]]]:
    """A judged record's families of claims: ``[(family name, [(baseline, length,
    Verdict), ...]), ...]``, not yet corrected (``verdict_family`` or a
    ``pe.Family`` corrects each family as a whole).

    Each claim is the judged scheme minus one baseline at one length, paired by
    seed (``entry_verdict``; on text also resampled by scored file): bits per
    byte at the training length L and at the longest length read, then passkey
    and look-back accuracy at the task's length and the same multiple of it.
    The report card and chapter 9 read the same families.
    """
    settings = results["settings"]
    mine = settings["judge"]["scheme"]
    L, top = settings["train"]["seq_len"], max(settings["lengths"])
    text = plain_entries(results, own_corpus(results))
    families = [
        (
            f"{mine} against the book's schemes: bits per byte",
            [
                (
                    scheme,
                    n,
                    entry_verdict(
                        results, text[mine], e, n, label=f"{mine} - {scheme}"
                    ),
                )
                for n in (L, top)
                for scheme, e in text.items()
                if scheme != mine and readable(e, n) and readable(text[mine], n)
            ],
        )
    ]
    for section, what in (
        ("passkey", "passkey accuracy"),
        ("lookback", "look-back accuracy"),
    ):
        entries = {e["scheme"]: e for e in results.get(section, [])}
        if mine not in entries:
            continue
        n0 = settings[section]["seq_len"]
        lengths = [n0, n0 * (top // L)]  # the task's length and the same multiple
        claims = [
            (
                scheme,
                n,
                entry_verdict(results, entries[mine], e, n, label=f"{mine} - {scheme}"),
            )
            for n in lengths
            for scheme, e in entries.items()
            if scheme != mine
            and mean_at(e, n) is not None
            and mean_at(entries[mine], n) is not None
        ]
        families.append((f"{mine} against the book's schemes: {what}", claims))
    return [(name, claims) for name, claims in families if claims]


def _verdicts(results: dict) -> list[str]:
    mine = results["settings"]["judge"]["scheme"]
    lines = [
        "",
        "## Verdicts",
        "",
        f"Each row is `{mine}` minus the baseline, paired by seed (the two models "
        "trained on the same batches), with its 95% interval; on text the interval "
        "also resamples the scored files. Lower bits per byte is better; higher "
        "accuracy is better. 'a real difference' means the Holm-adjusted p of its "
        "family is below 0.05. On text p is the larger of the paired t-test's and "
        "the bootstrap's, and a bootstrap's p is at least one over its number of "
        "draws (10,000), so several claims can share the smallest adjusted p. With "
        "three seeds a paired interval can reach past the +-1 an accuracy "
        "difference can take: it says how little three seeds settle.",
    ]
    for name, claims in judged_claims(results):
        lines += _family_table(name, claims)
    return lines


_SMOKE = (
    "this is a smoke run (`judge --smoke`): every stage at tiny sizes, one seed, "
    "the baselines trained at the same sizes. It shows that the scheme trains, "
    "scores at every length and writes this card; its numbers compare nothing. "
    "Run the judge without `--smoke` (`--plan` first says what it trains and how "
    "long it takes) for the verdicts."
)


def card_text(results: dict, figures: list[Path], tables: str) -> str:
    """The page's Markdown: provenance, protocol, verdicts, the viewer's ``tables``
    (``viewer.report``'s text) and the figures."""
    judge = results["settings"].get("judge")
    title = (
        f"Report card: `{judge['scheme']}`"
        if judge
        else f"Report: the `{results.get('preset') or 'experiment'}` record"
    )
    # a smoke run (judge --smoke) is marked, and gives no verdict: its sizes
    # settle nothing
    smoke = (judge or {}).get("verdict")
    if smoke:
        title += f" ({smoke})"
    lines = [f"# {title}", ""] + _provenance(results)
    if judge:
        lines += _protocol(results)
        if smoke:
            lines += ["", "## Verdicts", "", f"{smoke}: {_SMOKE}"]
        else:
            lines += _verdicts(results)
    lines += [
        "",
        "## Tables",
        "",
        "As `python -m pe_tutorial.experiments show` prints them (means and spreads "
        "by length, n seeds, each family of verdicts named):",
        "",
        "```text",
        tables.rstrip(),
        "```",
    ]
    if figures:
        lines += ["", "## Figures", ""]
        for path in figures:
            name = path.stem.replace("-", " ").replace("_", " ")
            lines += [f"![{name}]({path.name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_card(results: dict, folder: str | Path, tables: str) -> Path:
    """Write ``report.md`` and its figures into ``folder`` (``tables``: the
    viewer's text of the record); the page's path."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figures = write_figures(results, folder)
    page = folder / "report.md"
    page.write_text(card_text(results, figures, tables))
    return page
