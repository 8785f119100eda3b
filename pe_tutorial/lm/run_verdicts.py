"""Verdicts on recorded runs: ``verdicts.paired_verdict`` fed from a results dict (chapter 9).

A record of ``pe_tutorial.experiments`` keeps, for every language model and
seed, the bits per byte of each scored segment at each length
(``segment_bpb``), and (since the fourth edition) the file each scored segment
starts in (``metadata.corpora[corpus].segment_files``). The functions here
take the entries a chapter names and return a ``Verdict``:

- ``run_verdict(results, a, b, length)``: model ``a`` minus model ``b`` at a
  length, paired by seed (the two trained on the same batches) and segment
  (the same bytes), resampling seeds x files where the record names the
  files, seeds only where it does not (the method says which);
- ``length_verdict(results, entry, start, stop)``: one model read at two
  lengths, ``stop`` minus ``start``, paired the same way;
- ``gain_verdict(results, entry, length)``: a per-segment effect against 0,
  such as ``context_gain`` (the loss past L minus the same bytes' in an L
  window);
- ``scalar_verdict(a, b)``: two per-seed numbers (a passkey accuracy, a
  train-split gap), paired by seed;
- ``entry_verdict(results, a, b, length)``: the best a record allows, for any
  section: per segment and file where both entries keep segments, else per
  seed (``bpb`` or ``accuracy`` by length), on the seeds both have (a run
  still going may have more seeds of one than of the other).

A chapter then gathers the verdicts it states together in a ``Family``
under a name it prints, so each is corrected for the others (Holm), and
glues each claim's difference and verdict from it::

    claims = Family("the patterns on text")
    claims.add("fr_lg_rope", run_verdict(record, lg, rope, L, label="lg - rope"))
    ...
    claims.close()          # Holm across every claim added
    claims["fr_lg_rope"].real
    claims.glue()           # fr_lg_rope_gap, fr_lg_rope_verdict, ...

or, reading entries of one record, ``claims.compare(key, record, a, b, length)``
and ``claims.change(key, record, entry, start, stop)`` add the claims, and
``claims.settle()`` closes, glues and prints the family (chapters 11 and 12).
"""

from __future__ import annotations

import textwrap

from ..pages.glue import glue
from .verdicts import Verdict, claim_count, paired_verdict, verdict_family

# the width of a notebook's printed output on the book's page
PAGE_COLUMNS = 88

__all__ = [
    "Family",
    "scored_files",
    "seed_segments",
    "run_verdict",
    "length_verdict",
    "gain_verdict",
    "scalar_verdict",
    "entry_verdict",
    "seed_values",
    "phrase",
    "verdict_tag",
    "brief",
]


def scored_files(results: dict, corpus: str = "stdlib") -> list[str] | None:
    """The file each scored segment of ``corpus`` starts in, in order; None for a
    record made before files were recorded (its verdicts resample seeds only)."""
    described = results.get("metadata", {}).get("corpora", {}).get(corpus, {})
    files = described.get("segment_files")
    return list(files) if files else None


def seed_segments(
    entry: dict, length: int, key: str = "segment_bpb"
) -> dict[int, list[float]]:
    """``{seed: [one value per scored segment]}`` of an entry at ``length``.

    ``key`` is ``"segment_bpb"`` or ``"context_gain"``. A run that keeps no such
    values, or a length it could not read, is a ``ValueError`` that says which.
    """
    found = {}
    for run in entry["runs"]:
        by_length = run.get(key)
        if by_length is None:
            raise ValueError(
                f"seed {run['seed']} keeps no {key!r} (recorded before per-segment "
                "values were); record the experiment again"
            )
        values = by_length.get(str(length))
        if values is None:
            raise ValueError(
                f"seed {run['seed']} has no {key!r} at length {length}; it has "
                f"{sorted((k for k, v in by_length.items() if v is not None), key=int)}"
            )
        found[run["seed"]] = values
    return found


def _corpus(entry: dict) -> str:
    return entry.get("corpus") or "stdlib"


def run_verdict(
    results: dict,
    a: dict,
    b: dict,
    length: int,
    *,
    label: str,
    length_b: int | None = None,
    key: str = "segment_bpb",
) -> Verdict:
    """``a - b`` at ``length`` (``b`` at ``length_b`` if given): paired by seed and
    segment, seeds x files resampled where the record names the files."""
    if _corpus(a) != _corpus(b):
        raise ValueError(
            f"{label}: a reads {_corpus(a)!r} and b {_corpus(b)!r}; segments of two "
            "corpora cannot be paired"
        )
    return paired_verdict(
        seed_segments(a, length, key),
        seed_segments(b, length if length_b is None else length_b, key),
        label=label,
        files=scored_files(results, _corpus(a)),
    )


def length_verdict(
    results: dict, entry: dict, start: int, stop: int, *, label: str
) -> Verdict:
    """How one model's bits per byte move from ``start`` to ``stop`` (stop minus
    start): the same seeds, the same segments, read at two lengths (per seed
    where the record keeps no segments; ``entry_verdict``)."""
    return entry_verdict(results, entry, entry, stop, length_b=start, label=label)


def gain_verdict(
    results: dict, entry: dict, length: int, *, label: str, key: str = "context_gain"
) -> Verdict:
    """A per-segment effect of one model (``context_gain`` at ``length``) against 0."""
    values = seed_segments(entry, length, key)
    zeros = {seed: [0.0] * len(row) for seed, row in values.items()}
    return paired_verdict(
        values, zeros, label=label, files=scored_files(results, _corpus(entry))
    )


def scalar_verdict(a: dict, b: dict, *, label: str) -> Verdict:
    """Two per-seed numbers ``{seed: value}``, ``a - b`` paired by seed (paired t)."""
    return paired_verdict(a, b, label=label)


def seed_values(entry: dict, length: int, key: str | None = None) -> dict[int, float]:
    """``{seed: value}`` of an entry at ``length``: each run's ``key`` (``"bpb"``,
    else ``"accuracy"``, whichever the runs hold) by length; a seed that could
    not read the length is left out."""
    found = {}
    for run in entry["runs"]:
        name = key or ("bpb" if "bpb" in run else "accuracy")
        value = run[name].get(str(length))
        if value is not None:
            found[run["seed"]] = value
    return found


def _common_seeds(entry: dict, seeds: set) -> dict:
    return {**entry, "runs": [r for r in entry["runs"] if r["seed"] in seeds]}


def entry_verdict(
    results: dict,
    a: dict,
    b: dict,
    length: int,
    *,
    label: str,
    length_b: int | None = None,
) -> Verdict:
    """``a - b`` at ``length`` (``b`` at ``length_b``) on the seeds both entries have:
    ``run_verdict`` where both keep per-segment values there, else the paired
    t-test of the per-seed values. Fewer than two common seeds give no verdict
    (``Verdict.conclusion`` says so)."""
    length_b = length if length_b is None else length_b
    seeds = set(seed_values(a, length)) & set(seed_values(b, length_b))
    if not seeds:
        raise ValueError(f"{label}: no seed has a value on both sides")
    a, b = _common_seeds(a, seeds), _common_seeds(b, seeds)
    if _keeps_segments(a, length) and _keeps_segments(b, length_b):
        return run_verdict(results, a, b, length, label=label, length_b=length_b)
    return scalar_verdict(seed_values(a, length), seed_values(b, length_b), label=label)


def _keeps_segments(entry: dict, length: int) -> bool:
    return all(
        (run.get("segment_bpb") or {}).get(str(length)) is not None
        for run in entry["runs"]
    )


class Family:
    """The claims a chapter states together, corrected together (Holm).

    ``add(key, verdict)`` each claim, ``close()`` once all are in; then
    ``family[key]`` is the claim's adjusted ``Verdict``, and ``glue()`` glues,
    for each key, ``KEY_gap`` (the difference), ``KEY_verdict`` (its conclusion
    with interval, n, files and adjusted p, naming the family), ``KEY_tag`` (the
    short tag a sentence carries: ``verdict_tag``) and ``KEY_words``
    (``Verdict.words``). Reading a claim before ``close`` is an error: its p
    is not yet corrected for the claims added after it.
    """

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name the family (it is printed), got {name!r}")
        self.name = name
        self._claims: dict[str, Verdict] = {}
        self._closed: dict[str, Verdict] | None = None

    def add(self, key: str, verdict: Verdict) -> Verdict:
        if self._closed is not None:
            raise ValueError(
                f"the family {self.name!r} is closed; add {key!r} before close()"
            )
        if key in self._claims:
            raise ValueError(f"the family {self.name!r} already holds {key!r}")
        if not isinstance(verdict, Verdict):
            raise TypeError(f"add a Verdict, not {type(verdict).__name__}")
        self._claims[key] = verdict
        return verdict

    def compare(
        self,
        key: str,
        record: dict,
        a: dict,
        b: dict,
        length: int,
        *,
        length_b: int | None = None,
    ) -> Verdict:
        """Add the claim ``a - b`` at ``length`` (``b`` at ``length_b``), read from
        ``record`` with ``entry_verdict`` (per segment and file where it can)."""
        verdict = entry_verdict(record, a, b, length, length_b=length_b, label=key)
        return self.add(key, verdict)

    def change(
        self, key: str, record: dict, entry: dict, start: int, stop: int
    ) -> Verdict:
        """Add the claim that one model moves from ``start`` to ``stop`` (stop minus
        start, the same seeds and segments read at two lengths)."""
        return self.add(key, length_verdict(record, entry, start, stop, label=key))

    def settle(self) -> Family:
        """Close the family, glue every claim and print the family's table: what a
        chapter's cell does once all of a section's claims are added."""
        self.glue()
        print(self.table())
        return self

    def close(self) -> dict[str, Verdict]:
        if self._closed is None:
            adjusted = verdict_family(self.name, list(self._claims.values()))
            self._closed = dict(zip(self._claims, adjusted, strict=True))
        return self._closed

    def __getitem__(self, key: str) -> Verdict:
        if self._closed is None:
            raise ValueError(
                f"close() the family {self.name!r} before reading {key!r}: its "
                "p-value is corrected for every claim of the family"
            )
        return self._closed[key]

    def __len__(self) -> int:
        return len(self._claims)

    def table(self) -> str:
        """The family as the page prints it: a line naming it, its size, the
        correction and what its claims rest on, then one short line per claim
        (key and conclusion first, so a phone's column shows them, then the
        difference, interval and adjusted p). Claims resting on different seeds
        or files say so on their own line."""
        closed = self.close()
        width = max((len(key) for key in closed), default=0)
        rests = {_rests(v) for v in closed.values()}
        shared = rests.pop() if len(rests) == 1 else None
        head = f"family '{self.name}': {claim_count(len(closed))}, Holm-corrected"
        head += f"; each {shared}" if shared else ""
        # within a page's 88 columns: the head wraps, a claim's own seeds and files
        # go under it when its line would run past
        lines = textwrap.wrap(head, PAGE_COLUMNS, subsequent_indent="  ")
        for key, v in closed.items():
            if v.n < 2:
                lines.append(f"  {key:{width}}  {v.conclusion}  {v.difference:+.3f}")
                continue
            said = "real" if v.real else "not shown"
            line = (
                f"  {key:{width}}  {said:9}  {v.difference:+.3f}"
                f" [{v.low:+.3f}, {v.high:+.3f}]  p_Holm {v.p_adjusted:.2g}"
            )
            own = "" if shared else f"({_rests(v)})"
            if own and len(line) + 2 + len(own) > PAGE_COLUMNS:
                lines += [line, f"    {own}"]
            else:
                lines.append(f"{line}  {own}" if own else line)
        return "\n".join(lines)

    def glue(self) -> None:
        for key, verdict in self.close().items():
            glue(f"{key}_gap", verdict.difference)
            glue(f"{key}_verdict", phrase(verdict))
            glue(f"{key}_tag", verdict_tag(verdict))
            glue(f"{key}_words", verdict.words)


def _rests(verdict: Verdict) -> str:
    """What a verdict rests on: ``5 seeds x 27 files`` or ``3 seeds``."""
    files = f" \u00d7 {verdict.files} files" if verdict.files else ""
    return f"{verdict.n} seeds{files}"


def phrase(verdict: Verdict) -> str:
    """A verdict as a sentence's clause: the conclusion, then what it rests on.

    ``not shown to differ: 95% interval [-0.010, +0.030], 3 seeds x 31 files,
    Holm p = 0.41 among the 12 claims of 'the patterns on text'``.
    """
    if verdict.n < 2:
        return verdict.conclusion
    if verdict.p_adjusted is None:
        p = f"p = {verdict.p:.2g}, uncorrected"
    else:
        p = (
            f"Holm p = {verdict.p_adjusted:.2g} among the "
            f"{claim_count(verdict.family_size)} of '{verdict.family}'"
        )
    return (
        f"{verdict.conclusion}: {verdict.level * 100:g}% interval "
        f"[{verdict.low:+.3f}, {verdict.high:+.3f}], {_rests(verdict)}, {p}"
    )


def verdict_tag(verdict: Verdict) -> str:
    """A verdict as a sentence carries it (issue 68): ``real, Holm p 0.012`` or
    ``not shown, Holm p 0.41``; the printed family (``Family.table``) gives the
    interval, n and method beside it."""
    if verdict.n < 2:
        return verdict.conclusion
    said = "real" if verdict.real else "not shown"
    if verdict.p_adjusted is None:
        return f"{said}, p {verdict.p:.2g} uncorrected"
    return f"{said}, Holm p {verdict.p_adjusted:.2g}"


def brief(verdict: Verdict) -> str:
    """One table cell's worth: ``+0.045 [+0.028, +0.063] n = 3, 31 files,
    p_Holm = 0.042: a real difference``."""
    v = verdict
    if v.n < 2:
        return f"{v.difference:+.3f} (n = {v.n}): {v.conclusion}"
    p = "p" if v.p_adjusted is None else "p_Holm"
    value = v.p if v.p_adjusted is None else v.p_adjusted
    files = f", {v.files} files" if v.files else ""
    return (
        f"{v.difference:+.3f} [{v.low:+.3f}, {v.high:+.3f}] n = {v.n}{files}, "
        f"{p} = {value:.2g}: {v.conclusion}"
    )
