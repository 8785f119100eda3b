"""The run file: a run's finished units on disk, written as they finish, read on resume.

``RunFile`` keeps each finished unit with its fingerprint (``units.py``);
``partial_path`` is where a run that writes its results keeps it meanwhile.
On resume, ``RunFile.review`` sorts the recorded units against the plan:

- the same fingerprint: reused;
- the same but for the code version: *refused* (``ResumeError``), since the
  code that computed them has changed since, unless ``keep_old_code`` (the
  CLI's ``--keep-old-code``) says to reuse them anyway;
- other settings (or a unit of an older file layout): run again, and the
  file's copy is replaced when it finishes.

A file that cannot be read (cut short, not JSON, not a run file) is a
``ResumeError`` that names it and says what to do; it is never written over.

Besides its units, the file holds a header (``RunFile.header``): the
experiment as its TOML document, the shard it ran (``--shard K/N``), the whole
plan's fingerprints by key and the run's metadata, so that ``merge`` can join
the files of several shards into one record, and check that they are of one
experiment (``read_run_file``).
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RunFile", "ResumeError", "Review", "partial_path", "read_run_file"]


class ResumeError(ValueError):
    """A run file that cannot be resumed as it stands; the message says what to do."""


def partial_path(final: Path, shard: tuple[int, int] | None = None) -> Path:
    """Where a run that will write ``final`` keeps its finished units meanwhile;
    shard K of N keeps its own, ``FINAL.K-of-N.partial``."""
    if shard is None:
        return final.with_name(final.name + ".partial")
    k, n = shard
    return final.with_name(f"{final.name}.{k}-of-{n}.partial")


def _without_code(fingerprint: dict) -> dict:
    return {k: v for k, v in fingerprint.items() if k != "code"}


def _match(recorded: dict | None, fingerprint: dict) -> str:
    """``"same"``, ``"old code"`` (all but the code version agree), ``"other"`` or ``"none"``."""
    if recorded is None:
        return "none"
    stored = recorded.get("fingerprint")
    if stored == fingerprint:
        return "same"
    if (
        isinstance(stored, dict)
        and "code" in stored
        and _without_code(stored) == _without_code(fingerprint)
    ):
        return "old code"
    return "other"


def _keys(keys: list[str]) -> str:
    """The keys, comma-separated, wrapped and indented."""
    return textwrap.fill(
        ", ".join(keys),
        width=96,
        initial_indent="  ",
        subsequent_indent="  ",
        break_on_hyphens=False,
    )


@dataclass
class Review:
    """What a resumed run does with each planned unit, by key."""

    path: Path | None
    planned: int
    current_version: str = ""  # the code version of the planned units
    reused: list[str] = field(default_factory=list)
    old_code: list[str] = field(default_factory=list)  # reused with --keep-old-code
    other_settings: list[str] = field(default_factory=list)
    old_versions: list[str] = field(default_factory=list)

    @property
    def to_run(self) -> int:
        return self.planned - len(self.reused) - len(self.old_code)

    def lines(self) -> list[str]:
        """What to print: how many units are reused (and which), and what runs again."""
        out = [
            f"resume {self.path}: {len(self.reused) + len(self.old_code)} of "
            f"{self.planned} units reused, {self.to_run} to run"
        ]
        if self.reused:
            out += [f"reused ({len(self.reused)}):", _keys(self.reused)]
        if self.old_code:
            out += [
                f"reused although recorded by other code, as --keep-old-code asks "
                f"(code version {', '.join(self.old_versions)} there, "
                f"{self.current_version} now) ({len(self.old_code)}):",
                _keys(self.old_code),
            ]
        if self.other_settings:
            out += [
                f"recorded with other settings, run again "
                f"({len(self.other_settings)}):",
                _keys(self.other_settings),
            ]
        return out


class RunFile:
    """The finished units of one run, on disk: rewritten after each unit, read by resume.

    The file maps each unit's key to ``{"fingerprint", "result", "seconds"}``;
    the fingerprint is everything the unit's result depends on, code version
    included (``units.fingerprint``). It is replaced atomically (a temporary
    file, then a rename), so a run stopped at any moment leaves every finished
    unit on disk. On resume a unit is reused only if its fingerprint is
    unchanged (``review``), so a preset that gains an experiment reuses what
    it had and runs the rest. Without a path it only keeps the units in memory.
    """

    def __init__(self, path: Path | None, *, resume: bool):
        self.path = path
        self.units: dict[str, dict] = {}
        # written before the units: what ``merge`` reads (the module's docstring)
        self.header: dict = {}
        if path is not None and resume and path.exists():
            self.units = self._read(path)

    @staticmethod
    def _read(path: Path) -> dict[str, dict]:
        return _read_document(path)["units"]

    def review(
        self, planned: list[tuple[str, dict]], *, keep_old_code: bool = False
    ) -> Review:
        """Sort the recorded units against ``planned`` (key, fingerprint) pairs.

        Raises ``ResumeError`` if some were recorded by other code, unless
        ``keep_old_code``.
        """
        current = {fingerprint.get("code", "") for _, fingerprint in planned}
        review = Review(self.path, len(planned), ", ".join(sorted(current)))
        old = set()
        for key, fingerprint in planned:
            recorded = self.units.get(key)
            match = _match(recorded, fingerprint)
            if match == "same":
                review.reused.append(key)
            elif match == "old code":
                review.old_code.append(key)
                old.add(recorded["fingerprint"]["code"])
            elif match == "other":
                review.other_settings.append(key)
        review.old_versions = sorted(old)
        if review.old_code and not keep_old_code:
            n = len(review.old_code)
            raise ResumeError(
                f"cannot resume from {self.path}: {n} of its finished units "
                f"{'was' if n == 1 else 'were'} recorded by other code (code version "
                f"{', '.join(review.old_versions)} there, {review.current_version} "
                f"now), so their results may not be what this code computes; add "
                f"--keep-old-code to reuse them anyway, or run without --resume to "
                f"compute every unit again (the file is then written over)"
            )
        return review

    def result(
        self, key: str, fingerprint: dict, *, keep_old_code: bool = False
    ) -> dict | None:
        """The unit's result if it finished with this fingerprint, else None.

        With ``keep_old_code``, a unit recorded by other code but otherwise the
        same is returned too.
        """
        match = _match(self.units.get(key), fingerprint)
        if match == "same" or (match == "old code" and keep_old_code):
            return self.units[key]["result"]
        return None

    def save(self, key: str, fingerprint: dict, result: dict, seconds: float) -> None:
        self.units[key] = {
            "fingerprint": fingerprint,
            "result": result,
            "seconds": seconds,
        }
        self.write()

    def write(self) -> None:
        """Write the header and the units as they stand (atomically; nothing
        without a path)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps({**self.header, "units": self.units}))
        os.replace(temporary, self.path)


_RESUME_ADVICE = (
    "it is left as it is: mend it, or move it aside and run without --resume to "
    "start afresh"
)


def _read_document(
    path: Path, advice: str | None = None, verb: str = "resume from"
) -> dict:
    """A run file's document, its units checked; a ``ResumeError`` naming the file."""
    advice = advice or _RESUME_ADVICE
    try:
        document = json.loads(path.read_text())
        units = document["units"]
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ResumeError(
            f"cannot {verb} {path}: it is not whole JSON ({error}), perhaps "
            f"cut short by a full disk or an interrupted copy; {advice}"
        ) from None
    except (KeyError, TypeError):
        units = None
    if not isinstance(units, dict) or not all(
        isinstance(u, dict) and {"fingerprint", "result", "seconds"} <= u.keys()
        for u in units.values()
    ):
        raise ResumeError(
            f"cannot {verb} {path}: it is JSON but not a run file (a "
            f'"units" mapping of fingerprint, result and seconds); {advice}'
        )
    return document


def read_run_file(path: Path) -> dict:
    """A run file's whole document, header and units, for ``merge``; a
    ``ResumeError`` that names the file if it is not one."""
    if not path.is_file():
        raise ResumeError(f"cannot merge {path}: there is no such file")
    return _read_document(
        path, "it is left as it is: mend it, or run its shard again", "merge"
    )
