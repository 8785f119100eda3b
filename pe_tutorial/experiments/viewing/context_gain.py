"""Context gain on the judge's report card: the extrapolation measure (issue 69).

Chapter 9 reads what a model does past its training length L by its context
gain (``lm.scoring.context_gain``): at a length n > L, the mean over the
targets read with more than L bytes of context of

    loss(target read in a window of n) - loss(the same target in a window of L)

in bits, per scored segment. Negative: the model uses the context past L;
zero: it ignores it (a bias that drowns far keys); positive: it is hurt by
it. The fall of bits per byte from L to 8L mixes this with the early
positions' high loss, which a longer window dilutes whatever the model does,
so the card reads extrapolation from the gain:

- ``gain_claims``: the judged scheme's gain against none (0) at each length
  above L, and its gain minus each baseline's at the longest length, both
  per seed and segment with files resampled (``run_verdicts``);
- ``gain_table``: each scheme's mean gain by length, for the reader's eye.
"""

from __future__ import annotations

from ...lm.run_verdicts import gain_verdict, run_verdict
from ...lm.verdicts import Verdict
from .run_files import own_corpus, plain_entries

__all__ = ["NO_GAIN", "gain_claims", "gain_table", "gain_lengths"]

# the "baseline" of the judged scheme's own gain: reading L bytes, which gains 0
NO_GAIN = "no gain (0)"
KEY = "context_gain"


def gain_lengths(entry: dict) -> list[int]:
    """The lengths above L at which every run of ``entry`` keeps its per-segment
    gain (none for a model that cannot read past L, or a record made before
    gains were kept)."""
    runs = entry.get("runs") or []
    if not runs:
        return []
    lengths = [int(n) for n in (runs[0].get(KEY) or {})]
    return sorted(
        n for n in lengths if all((r.get(KEY) or {}).get(str(n)) for r in runs)
    )


def _seeds(entry: dict) -> set:
    return {run["seed"] for run in entry["runs"]}


def _on(entry: dict, seeds: set) -> dict:
    return {**entry, "runs": [r for r in entry["runs"] if r["seed"] in seeds]}


def gain_claims(results: dict) -> list[tuple[str, list[tuple[str, int, Verdict]]]]:
    """The judged scheme's two families of context-gain claims, as
    ``report_card.judged_claims`` lists its families (empty where its runs keep
    no gains): against ``NO_GAIN`` at each length above L, and against each
    baseline that reads the longest length, there, on the seeds both have."""
    mine = results["settings"]["judge"]["scheme"]
    text = plain_entries(results, own_corpus(results))
    own = text.get(mine)
    lengths = gain_lengths(own) if own else []
    if not lengths:
        return []
    alone = [
        (
            NO_GAIN,
            n,
            gain_verdict(results, own, n, label=f"{mine}'s context gain at {n}"),
        )
        for n in lengths
    ]
    top, against = max(lengths), []
    for scheme, entry in text.items():
        seeds = _seeds(own) & _seeds(entry)
        if scheme == mine or len(seeds) < 2 or top not in gain_lengths(entry):
            continue
        verdict = run_verdict(
            results,
            _on(own, seeds),
            _on(entry, seeds),
            top,
            label=f"{mine} - {scheme}",
            key=KEY,
        )
        against.append((scheme, top, verdict))
    families = [(f"{mine} against reading L bytes: context gain", alone)]
    if against:
        families.append((f"{mine} against the book's schemes: context gain", against))
    return families


def gain_table(results: dict) -> list[str]:
    """Each scheme's mean context gain by length above L (over seeds and scored
    segments, bits per byte) as Markdown lines; empty when none keeps it."""
    text = plain_entries(results, own_corpus(results))
    rows = {s: gain_lengths(e) for s, e in text.items()}
    lengths = sorted({n for found in rows.values() for n in found})
    if not lengths:
        return []
    lines = [
        "| scheme | " + " | ".join(f"gain at {n}" for n in lengths) + " |",
        "|---|" + "---:|" * len(lengths),
    ]
    for scheme, entry in text.items():
        cells = []
        for n in lengths:
            if n not in rows[scheme]:
                cells.append("-")
                continue
            values = [v for run in entry["runs"] for v in run[KEY][str(n)]]
            cells.append(f"{sum(values) / len(values):+.4f}")
        lines.append(f"| `{scheme}` | " + " | ".join(cells) + " |")
    return lines
