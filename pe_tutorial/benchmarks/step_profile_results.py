"""A profiled training step's results: milliseconds by group, per scheme (chapter 10).

``step_profile`` measures (the ranges, the attribution of every op, the
suite); this module holds what it produces and how it reads: ``SchemeProfile``
(one scheme's step by group and phase), ``StepProfile`` (every scheme's, the
tables a page prints, the difference from NoPE, and ``apart``: whether two
schemes' profiled steps can be told apart) and ``merge_profiles`` (one profile
from several processes' recordings).
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass, field

from .quoting import quartiles, quartiles_overlap

# the groups of a step, in the order the tables list them
GROUPS: tuple[str, ...] = (
    "position",
    "attention",
    "attention projections",
    "mlp",
    "norm",
    "residual",
    "embedding & output",
    "loss",
    "param grads",
    "autograd engine",
    "optimizer",
    "other",
)
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")


@dataclass
class SchemeProfile:
    """One scheme's step: milliseconds by group and phase (CPU self time).

    ``step_ms`` is the profiled step's CPU time (the ``step`` range); the
    groups add up to it, up to the profiler's bookkeeping between events.
    ``steps`` steps were profiled, with totals ``step_ms_all``; the groups are
    those of the median one.
    ``device_ms`` holds the kernels' time the same way on a GPU (empty on a CPU);
    ``ops`` the number of profiled ops per group and step (ranges opened here
    not counted).
    """

    scheme: str
    steps: int
    step_ms: float
    ms: dict[str, dict[str, float]]
    device_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    ops: dict[str, float] = field(default_factory=dict)
    step_ms_all: list[float] = field(default_factory=list)
    # a profile merged from several processes (``merge_profiles``): each one's
    # median step; empty for one process
    process_step_ms: list[float] = field(default_factory=list)

    @property
    def step_quartiles_ms(self) -> tuple[float, float]:
        """25th and 75th percentiles of the profiled steps' totals."""
        return quartiles(self.step_ms_all or [self.step_ms])

    def group_ms(self, group: str) -> float:
        if group not in GROUPS:
            raise ValueError(f"unknown group {group!r}; the groups are {GROUPS}")
        return sum(self.ms.get(group, {}).values())

    def grouped_ms(self) -> float:
        """The groups' sum (equal to ``step_ms`` but for the profiler's bookkeeping)."""
        return sum(self.group_ms(g) for g in GROUPS)

    def share(self, group: str) -> float:
        return self.group_ms(group) / self.step_ms if self.step_ms else 0.0

    def to_dict(self) -> dict:
        return {
            "scheme": self.scheme,
            "steps": self.steps,
            "step_ms": self.step_ms,
            "ms": self.ms,
            "device_ms": self.device_ms,
            "ops": self.ops,
            "step_ms_all": self.step_ms_all,
            "process_step_ms": self.process_step_ms,
        }

    @classmethod
    def from_dict(cls, document: dict) -> SchemeProfile:
        return cls(**document)


@dataclass
class StepProfile:
    """The profile of every scheme's step, with the sizes it ran at."""

    device: str
    settings: dict
    schemes: list[SchemeProfile]
    reference: str | None = None

    def scheme(self, name: str) -> SchemeProfile:
        for profile_ in self.schemes:
            if profile_.scheme == name:
                return profile_
        known = [p.scheme for p in self.schemes]
        raise ValueError(f"no scheme {name!r} in this profile; it has {known}")

    def apart(self, scheme: str, reference: str | None = None) -> bool:
        """Whether the profiled steps of ``scheme`` and ``reference`` can be told
        apart: their interquartile ranges of step totals do not overlap (the
        rule ``timing.within_noise`` applies to timed rows). A sentence that
        says one scheme's profiled step took longer than another's rests on it
        (chapter 10)."""
        reference = reference or self.reference
        return not quartiles_overlap(
            self.scheme(scheme).step_quartiles_ms,
            self.scheme(reference).step_quartiles_ms,
        )

    def difference(self, scheme: str, reference: str | None = None) -> dict[str, float]:
        """Milliseconds per step of ``scheme`` minus ``reference``'s, per group."""
        reference = reference or self.reference
        if reference is None:
            raise ValueError("name the reference scheme to subtract")
        a, b = self.scheme(scheme), self.scheme(reference)
        return {g: a.group_ms(g) - b.group_ms(g) for g in GROUPS}

    def table_lines(self) -> list[str]:
        """One table per scheme (each line at most 88 characters): ms per step and
        share by group, forward and backward apart, and the difference from the
        reference scheme per group."""
        lines = []
        reference = None
        if self.reference is not None:
            reference = self.scheme(self.reference)
        # the optimiser's column only where an optimiser step was profiled
        phases = [ph for ph in PHASES if any(_phase_ms(p, ph) for p in self.schemes)]
        phases = phases or ["forward"]
        for p in self.schemes:
            spread = p.step_ms_all or [p.step_ms]
            where = (
                f" in {len(p.process_step_ms)} processes" if p.process_step_ms else ""
            )
            head = (
                f"{p.scheme} step, profiled on {self.device}: {p.step_ms:.2f} ms "
                f"(median of {p.steps}{where}, {min(spread):.2f}-{max(spread):.2f})"
            )
            compare = reference is not None and p is not reference
            if compare:
                ratio = p.step_ms / reference.step_ms if reference.step_ms else 0.0
                head += f", {ratio:.2f}x {reference.scheme}'s"
            lines.append(head)
            columns = ["group", *phases, "total", "share"]
            if compare:
                columns.append(f"vs {reference.scheme}")
            rows = [columns]
            for group in GROUPS:
                ms = p.ms.get(group, {})
                total = p.group_ms(group)
                if not total and not (compare and reference.group_ms(group)):
                    continue
                row = [
                    group,
                    *(f"{ms.get(phase, 0.0):.3f}" for phase in phases),
                    f"{total:.3f}",
                    f"{100 * p.share(group):.1f}%",
                ]
                if compare:
                    row.append(f"{total - reference.group_ms(group):+.3f}")
                rows.append(row)
            row = ["all groups", *(f"{_phase_ms(p, ph):.3f}" for ph in phases)]
            row += [f"{p.grouped_ms():.3f}", f"{100 * p.grouped_ms() / p.step_ms:.1f}%"]
            if compare:
                row.append(f"{p.grouped_ms() - reference.grouped_ms():+.3f}")
            rows.append(row)
            lines += _aligned(rows)
            if compare:
                lines += self._made_of(p, reference)
        return lines

    def _made_of(self, p: SchemeProfile, reference: SchemeProfile) -> list[str]:
        extra = p.grouped_ms() - reference.grouped_ms()
        parts = sorted(
            self.difference(p.scheme, reference.scheme).items(),
            key=lambda kv: -abs(kv[1]),
        )[:3]
        said = ", ".join(f"{g} {ms:+.2f}" for g, ms in parts)
        text = f"{p.scheme} - {reference.scheme}: {extra:+.2f} ms a step; most: {said}"
        return textwrap.wrap(text, width=88, subsequent_indent="  ")

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "settings": self.settings,
            "reference": self.reference,
            "schemes": [p.to_dict() for p in self.schemes],
        }

    @classmethod
    def from_dict(cls, document: dict) -> StepProfile:
        return cls(
            device=document["device"],
            settings=dict(document["settings"]),
            schemes=[SchemeProfile.from_dict(p) for p in document["schemes"]],
            reference=document.get("reference"),
        )


def merge_profiles(profiles: list[StepProfile]) -> StepProfile:
    """One profile from several processes' profiles of the same schemes and sizes.

    Each scheme's breakdown is that of the process whose median step is the
    median of the processes' (the lower middle of an even count); its
    ``step_ms_all`` holds every process's steps, ``steps`` their count and
    ``process_step_ms`` each process's median step, so ``apart`` reads the
    steps of all of them.
    """
    if not profiles:
        raise ValueError("merge_profiles needs at least one profile")
    first = profiles[0]
    names = [p.scheme for p in first.schemes]
    for other in profiles[1:]:
        if [
            p.scheme for p in other.schemes
        ] != names or other.settings != first.settings:
            raise ValueError(
                "the profiles differ in schemes or settings: "
                f"{names} {first.settings} against "
                f"{[p.scheme for p in other.schemes]} {other.settings}"
            )
    merged = []
    for name in names:
        each = [other.scheme(name) for other in profiles]
        middle = sorted(each, key=lambda p: p.step_ms)[(len(each) - 1) // 2]
        merged.append(
            dataclasses.replace(  # a new profile; the processes' stay as they were
                middle,
                steps=sum(p.steps for p in each),
                step_ms_all=[ms for p in each for ms in (p.step_ms_all or [p.step_ms])],
                process_step_ms=[p.step_ms for p in each],
            )
        )
    return StepProfile(first.device, dict(first.settings), merged, first.reference)


def merge_profile_settings(settings: list[dict]) -> dict:
    """``Suite.merge_settings``: the processes' profiles merged (``merge_profiles``)."""
    merged = dict(settings[0])
    profiles = [s["profile"] for s in settings if "profile" in s]
    if len(profiles) == len(settings):
        merged["profile"] = merge_profiles(
            [StepProfile.from_dict(p) for p in profiles]
        ).to_dict()
    return merged


def _phase_ms(p: SchemeProfile, phase: str) -> float:
    return sum(p.ms.get(g, {}).get(phase, 0.0) for g in GROUPS)


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
