"""Schemes named in sentences (chapter 9 and its More experiments section).

A page that builds a sentence from a record ("ahead of RoPE: T5, Shaw and
DeBERTa") needs each scheme's name as prose says it and a list joined the way
English joins one: ``"a"``, ``"a and b"``, ``"a, b and c"``.
"""

from __future__ import annotations

__all__ = ["SCHEME_NAMES", "scheme_list"]

# each scheme as a sentence names it; a name not here is written as it is
SCHEME_NAMES = {
    "nope": "NoPE",
    "learned": "the learned table",
    "rope": "RoPE",
    "sinusoidal": "the sinusoidal table",
    "alibi": "ALiBi",
    "t5": "T5",
    "shaw": "Shaw",
    "cope": "CoPE",
    "deberta": "DeBERTa",
}


def scheme_list(schemes) -> str:
    """The schemes' names joined as a sentence lists them: ``["rope"]`` gives
    ``"RoPE"``, ``["t5", "shaw", "cope"]`` gives ``"T5, Shaw and CoPE"``.

    An empty list has no sentence to fill, so it raises ``ValueError``: say what
    the empty case means ("no scheme is shown ahead") where the list is used.
    """
    if isinstance(schemes, str):
        raise TypeError(f"give a list of scheme names, not the string {schemes!r}")
    names = [SCHEME_NAMES.get(s, s) for s in schemes]
    if not names:
        raise ValueError(
            "no schemes to list: write the sentence for the empty case yourself"
        )
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
