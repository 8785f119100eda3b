"""One record from two runs of the same experiment on different seeds (chapter 12).

A run recorded with three seeds can be given more later: a second preset with
the same settings and new seeds (``frontier-multikey-seeds`` beside
``frontier-multikey``). ``join_seeds(record, more)`` returns the record a run
with every seed would have made for the sections it can join: each entry of
``more`` joins the entry of ``record`` named the same (its scheme, changes and
the other fields that name an entry), its runs added and its summary by
length (and of its learning curves, where it has them) computed again from
all of them (``results.entry``, ``results.curve_summary``). Entries that only
``record`` has keep their seeds. Nothing is joined unless

- the settings agree but for ``seeds`` and ``schemes`` (a field that only one
  record has inside ``model``, ``train`` or a task's settings, one added to
  the code since, is allowed; a value that differs is not);
- the seeds are disjoint, so no seed counts twice;
- every entry of ``more`` has its counterpart, and ``more`` has nothing in a
  section that cannot be joined (the extensions' sections).

The verdicts pair by seed (``entry_verdict``): a claim between an entry with
six seeds and one with three rests on the three they share.
"""

from __future__ import annotations

import copy

from .results import SECTIONS, curve_summary, entry

__all__ = ["JoinError", "join_seeds"]

# the sections joined, and the value each one's summary is of
_JOINED = {"language_model": "bpb", "passkey": "accuracy", "lookback": "accuracy"}
_FREE = ("seeds", "schemes")


class JoinError(ValueError):
    """Two records that cannot be joined; the message says what differs."""


def _differences(first: dict, second: dict, where: str = "") -> list[str]:
    found = []
    for key in sorted(set(first) & set(second)):
        a, b = first[key], second[key]
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{where}{key}.")
        elif a != b:
            found.append(f"{where}{key}: {a!r} against {b!r}")
    return found


# what an entry holds that is made from its runs, not what names it
_MADE = ("runs", "summary", "curve")


def _name(item: dict) -> tuple:
    """What names an entry: every field but its runs and what is made from them."""
    fields = {k: v for k, v in item.items() if k not in _MADE}
    return tuple(sorted((k, repr(v)) for k, v in fields.items()))


def join_seeds(record: dict, more: dict) -> dict:
    """``record`` with the runs of ``more`` (new seeds of the same settings) added.

    Returns a new record (neither argument is changed): the joined sections'
    entries hold both records' runs in seed order with their summaries made
    again, ``settings["seeds"]`` lists every seed, and ``metadata["joined"]``
    keeps the second record's metadata. Raises ``JoinError`` where the records
    differ in more than seeds and schemes, share a seed, or ``more`` holds an
    entry ``record`` has no counterpart for.
    """
    settings, extra = record["settings"], more["settings"]
    shared = [k for k in set(settings) & set(extra) if k not in _FREE]
    differ = _differences(
        {k: settings[k] for k in shared}, {k: extra[k] for k in shared}
    )
    if differ:
        raise JoinError(
            "the records' settings differ in more than seeds and schemes: "
            + "; ".join(differ)
            + ". Join only a run of the same settings on new seeds"
        )
    twice = sorted(set(settings["seeds"]) & set(extra["seeds"]))
    if twice:
        raise JoinError(
            f"seeds {twice} are in both records; record the second run on new "
            "seeds, so that no seed counts twice"
        )
    for section in SECTIONS:
        if section not in _JOINED and more.get(section):
            raise JoinError(
                f"the second record has entries in {section!r}, which cannot be "
                f"joined; join sections {sorted(_JOINED)} only"
            )
    joined = copy.deepcopy(record)
    for section, key in _JOINED.items():
        entries = {_name(e): i for i, e in enumerate(joined.get(section, []))}
        for added in more.get(section, []):
            name = _name(added)
            if name not in entries:
                raise JoinError(
                    f"{section}: the second record's entry "
                    f"{dict((k, v) for k, v in name)} has no counterpart in the first"
                )
            at = entries[name]
            old = joined[section][at]
            runs = sorted(
                [*old["runs"], *copy.deepcopy(added["runs"])], key=lambda r: r["seed"]
            )
            fields = {k: v for k, v in old.items() if k not in _MADE}
            joined[section][at] = entry(fields, runs, key)
            if "curve" in old:  # the learning curves' summary, made again
                joined[section][at]["curve"] = curve_summary(runs, key)
    joined["settings"]["seeds"] = sorted({*settings["seeds"], *extra["seeds"]})
    joined["metadata"] = {
        **joined["metadata"],
        "joined": copy.deepcopy(more["metadata"]),
    }
    return joined
