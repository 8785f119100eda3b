"""A record's report card: ``show FILE --report DIR`` writes ``DIR/report.md``.

One Markdown page to attach to a paper or a pull request: where, when and
with what code the record was made; for a judged scheme (``judge.py``) the
protocol it went through (its sweep and the setting chosen, the seeds and
split it was read on, which baselines were reused from the package's
records and which trained again, and why); the verdicts of the scheme
against each baseline (paired by seed, Holm-corrected within each family,
with their n); the scheme's learned position parameters
(``position_parameters.py``); the viewer's tables (``viewer.report``'s text, which the
caller passes: the viewer imports this module, not the reverse); and the
chapter's figures (``viewer_figures.write_figures``), as PNG files beside
the page. A smoke run's record (``judge --smoke``, its ``judge.verdict``
"smoke: no verdict") gets a card so titled, with no verdicts.
"""

from __future__ import annotations

from pathlib import Path

from ...lm.findings import mean_at
from ...lm.run_verdicts import brief, entry_verdict
from ...lm.verdicts import (
    DETECTION_POWER,
    claim_count,
    detectable_difference,
    verdict_family,
)
from ..configuration.config import PRESETS, preset_to_dict
from ..configuration.tuning import SweepPoint
from ..configuration.tuning_edges import edge_settings
from .bridge_card import bridge_claims, bridge_drift
from .context_gain import gain_claims, gain_table
from .position_parameters import parameter_figure, parameter_lines
from .run_files import own_corpus, plain_entries, readable
from .viewer_figures import write_figures

__all__ = [
    "write_card",
    "card_text",
    "judged_claims",
    "at_the_edge",
    "unlearned",
    "short_budgets",
]

# A model has learned a task when its mean accuracy over seeds at the task's own
# length reaches this (chapter 9's "never learn it": ALiBi and NoPE on look-back,
# above chance, below one half); two schemes that both stay under it have not
# been compared on the task, whatever their difference.
LEARNED_AT = 0.5
NOT_LEARNED = "not learned: no comparison"
# the tasks a judged record holds, and what the protocol trains them from: the
# book's presets the judge's stages start from (judge.STAGES)
TASKS = (("lookback", "look-back"), ("passkey", "passkey"))


def _provenance(results: dict) -> list[str]:
    meta = results.get("metadata") or {}
    judge = results["settings"].get("judge")
    lines = []
    if judge:
        lines.append(
            f"- **Scheme**: `{judge['scheme']}`, from `{judge['scheme_file']}` "
            f"(sha256 {judge['scheme_file_digest']})"
        )
    # a judge's header is its held-out stage's; its tasks stage ran last
    when = meta.get("date", "?")
    tasks = (judge or {}).get("task_metadata") or {}
    if tasks.get("date") and tasks["date"] != when:
        when = f"{when} (held-out stage) to {tasks['date']} (tasks stage)"
    lines += [
        f"- **Recorded** {when} on {meta.get('device', '?')} "
        f"({meta.get('device_name', '?')}), {_count(meta.get('threads', '?'), 'thread')}"
        f" a process, {meta.get('jobs', '1')} at once; torch {meta.get('torch', '?')}, "
        f"Python {meta.get('python', '?')}",
        f"- **Code**: pe_tutorial code version `{meta.get('code_version', '?')}`",
    ]
    if judge:
        spent = judge.get("stage_seconds") or {}
        total = meta.get("wall_seconds")
        summed = "of training and scoring, summed over processes"
        if spent:
            parts = ", ".join(f"{stage} {s / 60:.1f} min" for stage, s in spent.items())
            lines.append(f"- **Time**: {parts} {summed}")
        elif total is not None:  # a judge from before the stages were timed apart
            lines.append(
                f"- **Time**: {total / 60:.1f} min {summed} (not recorded per stage)"
            )
        else:
            lines.append("- **Time**: not recorded")
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
    lines += _edge_lines(judge)
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


def at_the_edge(judge: dict) -> tuple[list[dict], list[str]]:
    """Where the chosen setting of a judge's sweep (``judge.tuning``) sits at the
    grid's edge (``tuning_edges.edge_settings``: the settings a next round
    would train, each with why) and the edges not extended for a limit; read
    from the sweep itself, so a record made before the judge extended its
    grids is checked too."""
    scheme = judge["scheme"]
    points = [
        SweepPoint(scheme, p["learning_rate"], p["position_lr_multiplier"], p["bpb"], 1)
        for p in judge["tuning"]
    ]
    position = any(p.position_lr_multiplier != 1 for p in points)
    return edge_settings(points, scheme, position)


def _edge_lines(judge: dict) -> list[str]:
    rounds = judge.get("edge_rounds") or []
    found, limited = at_the_edge(judge)
    lines = []
    for r in rounds:
        trained = "; ".join(
            f"rate {s['learning_rate']:g} at {s['position_lr_multiplier']:g} times, "
            f"as {s['why']}"
            for s in r["settings"]
        )
        lines.append(f"   - Beyond the grid's edge, round {r['round']}: {trained}.")
    if found:
        why = "; ".join(s["why"] for s in found)
        said = "; ".join(judge.get("edge_stopped") or []) or (
            "this record was made before the judge extended its grids"
        )
        lines.append(
            f"   - **The chosen setting sits at the grid's edge** ({why}): a setting "
            f"beyond it was not tried ({said})."
        )
    else:
        lines.append(
            "   - The chosen setting is inside the grid: along each axis swept a "
            "setting on either side of it was tried and scored worse"
            + (f" (where it stops: {'; '.join(limited)})" if limited else "")
            + "."
        )
    return ["", *lines] if lines else []


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def unlearned(results: dict) -> dict[str, list[str]]:
    """Per task of a record (``"lookback"``, ``"passkey"``), the schemes whose mean
    accuracy at the task's own length is under ``LEARNED_AT``."""
    settings = results["settings"]
    found = {}
    for section, _ in TASKS:
        if not results.get(section) or section not in settings:
            continue
        n0 = settings[section]["seq_len"]
        found[section] = [
            e["scheme"]
            for e in results[section]
            if mean_at(e, n0) is not None and mean_at(e, n0) < LEARNED_AT
        ]
    return found


def short_budgets(results: dict) -> list[tuple[str, int, int]]:
    """``(what, steps here, the protocol's steps)`` for each part of a judged
    record trained for fewer steps than the judge's protocol (the book's
    ``heldout`` preset for text, ``tuned`` for the tasks)."""
    settings = results["settings"]
    text = preset_to_dict(PRESETS["heldout"])
    tasks = preset_to_dict(PRESETS["tuned"])
    parts = [("text", settings["train"]["steps"], text["train"]["steps"])]
    for section, what in TASKS:
        if section in settings and results.get(section):
            parts.append((what, settings[section]["steps"], tasks[section]["steps"]))
    return [(what, here, book) for what, here, book in parts if here < book]


def _unbridged(results: dict) -> list[str]:
    """The reading stages whose reused baselines were recorded on another
    machine or code version than the judge's, with no bridge to test them:
    ``"stage (recorded on X by code Y)"`` each."""
    judge, meta = results["settings"]["judge"], results["metadata"]
    if judge.get("bridge"):
        return []
    found = []
    for stage, where in (judge.get("reused_from") or {}).items():
        if not judge["reused"].get(stage):
            continue
        other = where.get("device_name") != meta.get("device_name")
        if other or where.get("code_version") != meta.get("code_version"):
            found.append(
                f"{stage} (recorded on {where.get('device_name', '?')} by code "
                f"{where.get('code_version', '?')})"
            )
    return found


def _bridge_first(results: dict, bridge: list) -> list[str]:
    # the bridge's drift, or its absence where the records came from elsewhere
    lines = []
    for measure, baseline, n, v in bridge_drift(bridge):
        lines.append(
            f"- **A reused baseline drifted**: `{baseline}` trained here differs from "
            f"its record on {measure} at {n} ({brief(v)}). The verdicts against "
            "reused baselines may carry a drift of this size."
        )
    unbridged = _unbridged(results)
    if unbridged:
        meta = results["metadata"]
        lines.append(
            "- **Not bridged**: the reused baselines of "
            + "; ".join(unbridged)
            + f" come from another machine or code version than this judge "
            f"({meta.get('device_name', '?')}, code {meta.get('code_version', '?')}), "
            "and no bridge trained any of them again here to test their drift"
            + (
                " (this record predates the bridge)."
                if "bridge" not in results["settings"]["judge"]
                else " (--no-bridge)."
            )
        )
    return lines


def _bridge_section(results: dict, bridge: list) -> list[str]:
    judge = results["settings"]["judge"]
    if not bridge:
        return []
    names = sorted({b for names in judge["bridge"].values() for b in names})
    lines = [
        "",
        "## The bridge: do the reused baselines hold here?",
        "",
        "The reused baselines were recorded elsewhere: "
        + "; ".join(f"{stage}: {why}" for stage, why in judge["bridge_why"].items())
        + ". Each pairs with this judge's seeds because a unit's batches and "
        "initial weights are drawn from its seed and the corpus, which the reuse "
        "conditions hold equal; another machine or code version can still change "
        "the arithmetic. So "
        + ", ".join(f"`{n}`" for n in names)
        + " were trained again here from the same seeds, and each is read against "
        "its record: trained here minus recorded, paired by seed (and on text by "
        "scored file), Holm within each measure. 'detectable' is as in the "
        "verdicts.",
    ]
    for name, claims in bridge:
        lines += _family_table(name, claims)
    drift = bridge_drift(bridge)
    lines += [
        "",
        (
            f"**Drift shown** in {len(drift)} of {sum(len(c) for _, c in bridge)} "
            "claims (see Read first)."
            if drift
            else "**No drift shown**: the reused records pair with this judge's "
            "models within the differences above."
        ),
    ]
    return lines


def _read_first(results: dict, bridge: list | None = None) -> list[str]:
    # what the verdicts below cannot say, before them
    bridge = bridge_claims(results) if bridge is None else bridge
    lines = []
    for what, here, book in short_budgets(results):
        lines.append(
            f"- **Short budget**: the {what} models trained {here} steps, where the "
            f"protocol trains {book}. Chapter 9 reads its headlines at the protocol's "
            "budget; a verdict at this one may not hold there."
        )
    judge = results["settings"]["judge"]
    edge, _ = at_the_edge(judge)
    if edge:
        lines.append(
            "- **Tuned at the grid's edge**: the chosen setting ("
            + ", ".join(f"{k} {v:g}" for k, v in judge["best"].items())
            + f") is at an edge of the sweep ({edge[0]['why']}); a setting beyond "
            "it may be better, so the scheme may be judged below its best."
        )
    lines += _bridge_first(results, bridge)
    mine = judge["scheme"]
    found = unlearned(results)
    for section, what in TASKS:
        below = found.get(section)
        if not below:
            continue
        verb = "scores" if len(below) == 1 else "score"
        listed = ", ".join(f"`{s}`" for s in below)
        if mine in below:
            others = [f"`{s}`" for s in below if s != mine]
            then = (
                f" `{mine}`'s claims against {', '.join(others)} are marked "
                f"'{NOT_LEARNED}': "
                "neither model did the task, so their difference says nothing about it."
                if others
                else ""
            )
        else:
            then = (
                f" `{mine}` learned it: its claims against "
                f"{'it' if len(below) == 1 else 'them'} compare a model that did the "
                "task with one that did not."
            )
        lines.append(
            f"- **Not learned**: on {what}, {listed} {verb} under {LEARNED_AT:g} at "
            f"the task's own length (mean of seeds).{then}"
        )
    return ["", "## Read first", "", *lines] if lines else []


def _no_comparison(results: dict, name: str) -> frozenset[str]:
    """The baselines of the family ``name`` (``judged_claims``) whose claims set
    two schemes that did not learn the task side by side: the judged scheme and
    the baseline both ``unlearned``; none when the family is not a task's or the
    judged scheme learned it."""
    mine = results["settings"]["judge"]["scheme"]
    measure = name.rpartition(": ")[2]
    section = next((s for s, what in TASKS if measure == f"{what} accuracy"), None)
    below = unlearned(results).get(section, [])
    return frozenset(below) - {mine} if mine in below else frozenset()


def _family_table(
    name: str,
    claims: list[tuple[str, str, object]],
    *,
    no_comparison: frozenset[str] = frozenset(),
) -> list[str]:
    """A family's claims as a Markdown table (baseline, length, verdict, and the
    smallest difference its seeds could call real: ``detectable_difference``); a
    claim against a baseline in ``no_comparison`` (``_no_comparison``) says
    ``NOT_LEARNED`` instead of its verdict."""
    if not claims:
        return []
    verdicts = verdict_family(name, [v for _, _, v in claims])
    lines = [
        "",
        f"**{name}** ({claim_count(len(verdicts))}, Holm-corrected):",
        "",
        "| against | at | difference [95% interval], n, p | detectable | verdict |",
        "|---|---:|---|---:|---|",
    ]
    for (against, length, _), v in zip(claims, verdicts):
        text = brief(v)
        number, _, conclusion = text.rpartition(": ")
        if against in no_comparison:
            conclusion = NOT_LEARNED
        detectable = detectable_difference(v)
        shown = "-" if detectable != detectable else f"{detectable:.3f}"
        lines.append(f"| `{against}` | {length} | {number} | {shown} | {conclusion} |")
    return lines


def judged_claims(results: dict) -> list[tuple[str, list[tuple[str, int, object]]]]:
    """A judged record's families of claims: ``[(family name, [(baseline, length,
    Verdict), ...]), ...]``, not yet corrected (``verdict_family`` or a
    ``pe.Family`` corrects each family as a whole).

    Each claim is the judged scheme minus one baseline at one length, paired by
    seed (``entry_verdict``; on text also resampled by scored file): bits per
    byte at the training length L and at the longest length read, then passkey
    and look-back accuracy at the task's length and the same multiple of it,
    then the context gain (``context_gain.gain_claims``: the scheme's own
    against none at each length above L, and against each baseline's at the
    longest). The report card and chapter 9 read the same families.
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
    families += gain_claims(results)
    return [(name, claims) for name, claims in families if claims]


def _verdicts(results: dict, families: list) -> list[str]:
    mine = results["settings"]["judge"]["scheme"]
    lines = [
        "",
        "## Verdicts",
        "",
        f"Each row is `{mine}` minus the baseline, paired by seed (the two models "
        "trained on the same batches), with its 95% interval; on text the interval "
        "also resamples the scored files. Lower bits per byte and lower context gain "
        "are better; higher accuracy is better. 'a real difference' means the Holm-adjusted p of its "
        "family is below 0.05. On text p is the larger of the paired t-test's and "
        "the bootstrap's, and a bootstrap's p is at least one over its number of "
        "draws (10,000), so several claims can share the smallest adjusted p. With "
        "three seeds a paired interval can reach past the +-1 an accuracy "
        "difference can take: it says how little three seeds settle. 'detectable' "
        "is the smallest true difference these seeds would call real "
        f"{DETECTION_POWER:.0%} of the time at the family's strictest level (Holm's "
        "first step, 0.05 over the number of claims), from the interval's width: "
        "a difference under it that is 'not shown to differ' may still be there.",
    ]
    explained = False
    for name, claims in families:
        if name.endswith(": context gain") and not explained:
            lines += _gain_text(results)
            explained = True
        lines += _family_table(
            name, claims, no_comparison=_no_comparison(results, name)
        )
    return lines


def _gain_text(results: dict) -> list[str]:
    L = results["settings"]["train"]["seq_len"]
    return [
        "",
        f"**Context past L.** The extrapolation measure: at a length n above L = {L}, "
        "a model's context gain is the mean, over the targets read with more than "
        "L bytes of context, of their loss in a window of n minus the same "
        "targets' loss in a sliding window of L, in bits per byte. Negative: the "
        "model uses the context past L; zero: it ignores it; positive: it is hurt "
        "by it. The fall of bits per byte from L to 8L (`lengths.png`) mixes this "
        "with the early positions' high loss, which a longer window dilutes "
        "whatever the model does. Means over seeds and scored segments:",
        "",
        *gain_table(results),
    ]


_SMOKE = (
    "this is a smoke run (`judge --smoke`): every stage at tiny sizes, one seed, "
    "the baselines trained at the same sizes. It shows that the scheme trains, "
    "scores at every length and writes this card; its numbers compare nothing. "
    "Run the judge without `--smoke` (`--plan` first says what it trains and how "
    "long it takes) for the verdicts."
)


def card_text(
    results: dict, figures: list[Path], tables: str, families: list | None = None
) -> str:
    """The page's Markdown: provenance, protocol, verdicts, the viewer's ``tables``
    (``viewer.report``'s text) and the figures. ``families``: a judged record's
    ``judged_claims``, where the caller has them already (else computed here)."""
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
    bridge = bridge_claims(results) if judge and not smoke else []
    if judge and not smoke:
        lines += _read_first(results, bridge)
    if judge:
        lines += _protocol(results)
        lines += _bridge_section(results, bridge)
        if smoke:
            lines += ["", "## Verdicts", "", f"{smoke}: {_SMOKE}"]
        else:
            lines += _verdicts(results, families or judged_claims(results))
        lines += parameter_lines(results, _judged_entry(results))[0]
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


def _judged_entry(results: dict) -> dict:
    """The judged scheme's plain entry on text (its own corpus)."""
    mine = results["settings"]["judge"]["scheme"]
    return plain_entries(results, own_corpus(results)).get(mine, {})


def _verdict_figures(results: dict, families: list, folder: Path) -> list[Path]:
    """One figure per family of a judged record (``families``: its
    ``judged_claims``): each claim's paired difference and interval
    (``pages.verdict_plots``), as the verdicts read them."""
    import matplotlib.pyplot as plt

    from ...pages.verdict_plots import paired_intervals

    mine = results["settings"]["judge"]["scheme"]
    written = []
    for number, (name, claims) in enumerate(families, start=1):
        adjusted = verdict_family(name, [v for *_, v in claims])
        measure = name.rpartition(": ")[2]
        skip = _no_comparison(results, name)
        labelled = [
            (f"{against} at {n}" + (" (not learned)" if against in skip else ""), v)
            for (against, n, _), v in zip(claims, adjusted, strict=True)
        ]
        ax = paired_intervals(
            labelled,
            title=f"{mine} minus each baseline: {measure}\n"
            "mean paired difference, 95% interval (filled: a real difference)",
            xlabel=f"difference in {measure}",
        )
        path = folder / f"verdicts-{number}.png"
        ax.figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(ax.figure)
        written.append(path)
    return written


def write_card(results: dict, folder: str | Path, tables: str) -> Path:
    """Write ``report.md`` and its figures into ``folder`` (``tables``: the
    viewer's text of the record); the page's path."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    judge = results["settings"].get("judge")
    # the families' verdicts, computed once for the figures and the page
    families = judged_claims(results) if judge and not judge.get("verdict") else []
    verdicts = _verdict_figures(results, families, folder) if families else []
    figures = verdicts + write_figures(results, folder)
    if judge:
        entry = _judged_entry(results)
        drawn = parameter_figure(
            results, entry, parameter_lines(results, entry)[1], folder
        )
        figures += [drawn] if drawn else []
    page = folder / "report.md"
    page.write_text(card_text(results, figures, tables, families or None))
    return page
