"""The bridge on the judge's report card: do the reused baselines still hold?

When the judge reused records made on another machine or by another code
version, it trained two of those baselines again here, from the same seeds
(``judging/bridge.py``), and kept them apart (``judged["bridge"]``). Each
is then read against its own record with the chapter's verdict function,
trained here minus recorded, paired by seed (the same batches) and, on text,
by scored segment with files resampled (``run_verdicts.entry_verdict``):

- on text, bits per byte at L and at the longest length;
- on the tasks, accuracy at each task's own length;

one Holm family per measure (``bridge_claims``). A real difference is drift
the judged scheme's verdicts against the reused baselines may carry; none
shown, with the smallest difference the seeds could detect beside it, is the
evidence that pairing across machines and code versions holds.
"""

from __future__ import annotations

from ...lm.run_verdicts import entry_verdict
from ...lm.verdicts import Verdict, verdict_family

__all__ = ["bridge_claims", "bridge_drift"]

SECTIONS = (
    ("language_model", "bits per byte"),
    ("passkey", "passkey accuracy"),
    ("lookback", "look-back accuracy"),
)


def _recorded(results: dict, section: str, scheme: str) -> dict | None:
    """The reused (recorded) plain entry of ``scheme`` in ``section``."""
    for entry in results.get(section, []):
        plain = not entry.get("changes") and entry.get("norm", "pre") == "pre"
        plain = plain and entry.get("absolute", "input") == "input"
        if entry["scheme"] == scheme and plain:
            return entry
    return None


def bridge_claims(results: dict) -> list[tuple[str, list[tuple[str, int, Verdict]]]]:
    """The bridge's families: ``[(name, [(baseline, length, Verdict), ...])]``,
    each claim a bridge baseline trained here minus its record (empty when the
    judge had no bridge)."""
    bridge = results.get("bridge") or {}
    settings = results["settings"]
    L, top = settings["train"]["seq_len"], max(settings["lengths"])
    families = []
    for section, measure in SECTIONS:
        claims = []
        lengths = (
            (L, top) if section == "language_model" else (settings[section]["seq_len"],)
        )
        for fresh in bridge.get(section, []):
            recorded = _recorded(results, section, fresh["scheme"])
            if recorded is None:
                continue
            for n in lengths:
                label = f"{fresh['scheme']} here - recorded"
                claims.append(
                    (
                        fresh["scheme"],
                        n,
                        entry_verdict(results, fresh, recorded, n, label=label),
                    )
                )
        if claims:
            families.append(
                (f"the bridge, trained here minus recorded: {measure}", claims)
            )
    return families


def bridge_drift(families: list) -> list[tuple[str, str, int, Verdict]]:
    """The claims of ``families`` (``bridge_claims``) shown real after Holm:
    ``(measure, baseline, length, adjusted Verdict)``."""
    drift = []
    for name, claims in families:
        adjusted = verdict_family(name, [v for *_, v in claims])
        for (baseline, n, _), v in zip(claims, adjusted, strict=True):
            if v.real:
                drift.append((name.rpartition(": ")[2], baseline, n, v))
    return drift
