"""Families of claims declared before their record is read (chapter 9, issue 66).

Which claims are corrected together decides what a chapter may call real: the
same difference can be shown in a family of eight claims and not in one of
eleven. A family chosen after the numbers are seen (say, adding the neighbours
in the observed order) is a choice the reader cannot audit. So a run's families
can be declared in its experiment file, committed before the run records
anything, and the chapter reads them from there::

    [[families]]
    name = "the ranking at L, long budget"
    correction = "holm"            # the only one offered
    claims = ["nope - rope at 1L", "alibi - rope at 1L", "rope from 1L to 8L"]

A claim is one of two sentences about the run's language models, by scheme
name and a multiple of the training length L:

- ``"A - B at mL"``: model A minus model B at m L, paired by seed, segment and
  file (``run_verdicts.entry_verdict``); a scheme that cannot read m L (a
  learned table past L) is read where it can, as the chapter would;
- ``"A from mL to nL"``: model A read at n L minus the same model at m L
  (``run_verdicts.length_verdict``), its rise past the training length.

``FamilyDeclaration.settle`` turns a declaration into a ``Family`` from a
record's entries, in the declared order, prints it naming where it was
declared, and glues each claim under its ``Claim.key``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .run_verdicts import Family

__all__ = ["Claim", "FamilyDeclaration", "parse_claim", "CORRECTIONS"]

# Holm's step-down rule (``verdicts.holm``): valid under any dependence between claims
CORRECTIONS = ("holm",)

_SCHEME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_DIFFERENCE = re.compile(
    rf"^(?P<a>{_SCHEME}) - (?P<b>{_SCHEME}) at (?P<m>[1-9][0-9]*)L$"
)
_CHANGE = re.compile(
    rf"^(?P<a>{_SCHEME}) from (?P<m>[1-9][0-9]*)L to (?P<n>[1-9][0-9]*)L$"
)


@dataclass(frozen=True)
class Claim:
    """One declared claim: ``a - b`` at ``multiple`` L, or ``a`` from ``multiple`` L
    to ``stop`` L (``b`` None)."""

    text: str
    a: str
    b: str | None
    multiple: int
    stop: int | None = None

    @property
    def key(self) -> str:
        """The name the chapter reads and glues it by: ``alibi_rope_1x``,
        ``rope_1x_8x`` (hyphens become underscores)."""
        if self.b is None:
            parts = (self.a, f"{self.multiple}x", f"{self.stop}x")
        else:
            parts = (self.a, self.b, f"{self.multiple}x")
        return "_".join(parts).replace("-", "_").replace(".", "_")

    @property
    def schemes(self) -> tuple[str, ...]:
        return (self.a,) if self.b is None else (self.a, self.b)

    @property
    def multiples(self) -> tuple[int, ...]:
        return (self.multiple,) if self.stop is None else (self.multiple, self.stop)


def parse_claim(text: str) -> Claim:
    """A claim from its sentence; a ``ValueError`` naming both forms otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"a claim is a string, got {text!r}")
    found = _DIFFERENCE.match(text)
    if found:
        a, b = found["a"], found["b"]
        if a == b:
            raise ValueError(f"claim {text!r}: a scheme against itself says nothing")
        return Claim(text, a, b, int(found["m"]))
    found = _CHANGE.match(text)
    if found:
        start, stop = int(found["m"]), int(found["n"])
        if start == stop:
            raise ValueError(f"claim {text!r}: from a length to itself says nothing")
        return Claim(text, found["a"], None, start, stop)
    raise ValueError(
        f"claim {text!r}: write 'A - B at mL' (scheme A minus scheme B at m times "
        "the training length, e.g. 'alibi - rope at 8L') or 'A from mL to nL' (one "
        "scheme read at two lengths, e.g. 'rope from 1L to 8L')"
    )


@dataclass(frozen=True)
class FamilyDeclaration:
    """A family as an experiment file declares it: its name, its claims in order,
    its correction."""

    name: str
    claims: tuple[Claim, ...]
    correction: str = "holm"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name the family (it is printed), got {self.name!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(
                f"family {self.name!r}: correction {self.correction!r}; the one "
                f"offered is {CORRECTIONS[0]!r} (valid under any dependence)"
            )
        if not self.claims:
            raise ValueError(f"family {self.name!r}: declare at least one claim")
        keys = [claim.key for claim in self.claims]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"family {self.name!r}: claims {twice} declared twice")

    @classmethod
    def from_table(cls, table: dict) -> FamilyDeclaration:
        """From the TOML table ``{name, claims, correction?}``."""
        unknown = set(table) - {"name", "claims", "correction"}
        if unknown:
            raise ValueError(
                f"a family takes name, claims and correction, not {sorted(unknown)}"
            )
        if not isinstance(table.get("claims"), list):
            raise ValueError(
                f"family {table.get('name')!r}: claims must be a list of sentences "
                "such as ['alibi - rope at 1L', 'rope from 1L to 8L']"
            )
        return cls(
            table.get("name"),
            tuple(parse_claim(text) for text in table["claims"]),
            table.get("correction", "holm"),
        )

    @property
    def schemes(self) -> set[str]:
        return {s for claim in self.claims for s in claim.schemes}

    def family(
        self,
        record: dict,
        entries: dict[str, dict],
        length: int,
        *,
        prefix: str = "",
        name: str | None = None,
    ) -> Family:
        """The declared claims read from ``record``, whose entry for each scheme is
        ``entries[scheme]``, at multiples of the training length ``length``; closed.

        ``prefix`` goes before every claim's key and ``name`` replaces the
        family's printed name: the same declared claims read from a second record
        (chapter 9 reads its long budget's claims at the short budget too) glue
        under keys of their own and print under a name that says which run.
        """
        missing = sorted(self.schemes - set(entries))
        if missing:
            raise ValueError(
                f"family {self.name!r} declares claims on {missing}, which the "
                f"entries given do not hold (they hold {sorted(entries)})"
            )
        if not isinstance(prefix, str) or (prefix and not prefix.isidentifier()):
            raise ValueError(
                f"prefix {prefix!r}: a key's first part, letters, digits and "
                "underscores (such as 'short_')"
            )
        family = Family(self.name if name is None else name)
        for claim in self.claims:
            if claim.b is None:
                family.change(
                    prefix + claim.key,
                    record,
                    entries[claim.a],
                    claim.multiple * length,
                    claim.stop * length,
                )
            else:
                family.compare(
                    prefix + claim.key,
                    record,
                    entries[claim.a],
                    entries[claim.b],
                    claim.multiple * length,
                )
        family.close()
        return family

    def settle(
        self,
        record: dict,
        entries: dict[str, dict],
        length: int,
        *,
        declared_in: str,
        prefix: str = "",
        name: str | None = None,
    ) -> Family:
        """``family``, then glued and printed as ``Family.settle`` does, with a first
        line saying where the family was declared."""
        family = self.family(record, entries, length, prefix=prefix, name=name)
        print(f"declared in {declared_in} before its record was read")
        return family.settle()
