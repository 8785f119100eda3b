"""The printed table of a timing run: what was timed, where, how it compares.

``format_table`` turns a list of ``timing.Timing`` rows into the plain text
every chapter's timing cell prints: a header with the device, threads, torch
and what the rows share (dtype, shapes, how they were sampled), then one line
per row (``x copy`` and ``x ref`` first, the ratios the chapters quote, then
median and interquartile range in ms, GB/s, share of the GPU's data-sheet
peak, peak memory, page faults, the spread of separate processes), each row's own settings under it, and a footer that
says what each column means. A row whose calls or processes disagree by more
than ``NOISY_SPREAD`` of its median is starred; chapter 10 explains the
method, and ``timing`` holds the measuring and the rule that no ratio is read
from a starred row.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..memory import PEAK_METHOD
from .round_ratios import NOISY_SPREAD, per_round

# a row: a ``timing.Timing`` (timing imports this module, not the reverse)
Timing = Any

__all__ = [
    "NOISY_SPREAD",
    "TABLE_WIDTH",
    "format_ms",
    "format_table",
    "sampling_text",
]


def _shape_text(shapes: dict) -> str:
    parts = []
    for key, value in shapes.items():
        if isinstance(value, list | tuple):
            value = "x".join(str(v) for v in value)
        parts.append(f"{key} {value}")
    return ", ".join(parts)


def _mib(nbytes: int) -> str:
    """Bytes as MiB with three significant digits or so: 0.250, 1.50, 64.0, 512."""
    return format_ms(nbytes / 2**20)


def format_ms(value: float) -> str:
    """Milliseconds with about three significant digits: 0.152, 3.96, 36.2, 149."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_table(
    timings: Sequence[Timing],
    *,
    environment: dict | None = None,
    title: str = "",
    reference: str | None = None,
) -> str:
    """A plain-text table that says what was timed, where, and how it compares.

    The header names the device, threads, torch and (when the rows share them)
    the dtype and shapes; otherwise each row shows its own. Columns: median and
    interquartile range in ms, achieved GB/s, the fraction of the GPU's
    data-sheet peak when known, and ``x copy`` (the ratio to a copy of the same
    bytes from the same run). With ``reference`` (a row's name), ``x ref`` is
    each row's median over that row's. Where rows measured their memory,
    ``peak MiB`` is the most one call held above what was allocated before it
    (the footer says how it was measured). Noisy rows carry ``*``.
    """
    timings = list(timings)
    if not timings:
        raise ValueError("format_table needs at least one Timing")
    names = [t.name for t in timings]
    if reference is not None and reference not in names:
        raise ValueError(f"reference {reference!r} is not a row; rows: {names}")
    ref = None if reference is None else timings[names.index(reference)]
    env = environment or {}
    header, show_dtype, shared = _table_header(timings, env, title)
    layout = _Columns.choose(timings, env.get("peak_gb_s"), ref)
    layout.device_type = str(env.get("device", "")).split(":")[0] or None
    rows = [layout.names]
    for t in timings:
        rows.append(layout.row(t))
        extra = _own_settings(t, shared, show_dtype)
        if extra:
            text = textwrap.wrap(
                "; ".join(extra),
                TABLE_WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
            rows += [[line] + [""] * (len(layout.names) - 1) for line in text]
    return "\n".join([*header, *_aligned(rows), *layout.footer(timings)])


def _table_header(
    timings: list[Timing], env: dict, title: str
) -> tuple[list[str], bool, dict]:
    """The lines above the table, whether rows must show their own dtype, and
    the shapes every timed row shares (said once, above the table)."""
    header = [title] if title else []
    if env:
        where = f"{env.get('device_name', '?')} ({env.get('device', '?')}"
        where += f", {env['threads']} threads)" if env.get("threads") else ")"
        header.append(where)
        when = str(env.get("date", ""))[:16].replace("T", " ")
        header.append(f"torch {env.get('torch', '?')}, measured {when} UTC")
        if env.get("ran_beside"):
            header.append(f"ran beside it: {env['ran_beside']}")
    timed = [t for t in timings if not t.is_copy]
    dtypes = {t.dtype for t in timed}
    # a key every timed row has with the same value is said once, above the
    # table; the rest under the rows that have them
    shared = dict(timed[0].shapes) if timed else {}
    shared = {
        k: v for k, v in shared.items() if all(t.shapes.get(k) == v for t in timed)
    }
    common = []
    show_dtype = not (len(dtypes) == 1 and None not in dtypes)
    if not show_dtype:
        common.append(f"dtype {dtypes.pop()}")
    if shared:
        common.append(_shape_text(shared))
    common.append(sampling_text(timings))
    header.append("; ".join(common))
    # each line within the table's width (a title naming its command, a long
    # "ran beside it"), continued indented
    header = [
        line
        for item in header
        for line in textwrap.wrap(item, TABLE_WIDTH, subsequent_indent="  ") or [""]
    ]
    return header, show_dtype, shared


def sampling_text(timings: list[Timing]) -> str:
    """How a table's rows were sampled, for its header: every row alike, or each
    count of calls in a row with its rows (a table joined from runs sampled apart)."""
    counts = sorted({t.calls_per_sample for t in timings})

    def each(calls: int) -> str:
        return "single calls" if calls == 1 else f"the mean of {calls} calls in a row"

    if len(counts) == 1:
        return f"every time: {each(counts[0])}"
    parts = [
        f"{each(c)} ({', '.join(t.name for t in timings if t.calls_per_sample == c)})"
        for c in counts
    ]
    return "sampled unlike (not comparable): " + "; ".join(parts)


def _own_settings(t: Timing, shared: dict, show_dtype: bool) -> list[str]:
    """A row's shapes and dtype, printed under it where the rows do not share them."""
    extra = []
    if t.is_copy:
        return extra
    own = {k: v for k, v in t.shapes.items() if k not in shared}
    if own:
        extra.append(_shape_text(own))
    if show_dtype and t.dtype:
        extra.append(t.dtype)
    return extra


@dataclass
class _Columns:
    """Which columns a table has, and each row's cells in them."""

    names: list[str]
    bandwidth: bool
    peak: float | None
    copy: bool
    ref: Timing | None
    memory: bool = False
    # "cpu" or "cuda": how the memory column was measured (the footer says)
    device_type: str | None = None
    faults: bool = False
    processes: int = 0
    # the copy row of each (bytes moved, allocates), the rows' ``x copy``
    copies: dict = field(default_factory=dict)
    # whether a ratio cell came from per-round ratios (the footer says so)
    per_round: bool = False

    @classmethod
    def choose(cls, timings: list[Timing], peak, ref: Timing | None) -> _Columns:
        # the ratios the chapters quote come right after the row's name, so a
        # phone's column (about 47 characters of the outputs' font) shows them
        names = ["what"]
        copy = any(t.copy_ms is not None for t in timings)
        if copy:
            names.append("x copy")
        if ref is not None:
            names.append("x ref")
        names += ["median ms", "IQR ms"]
        bandwidth = any(t.bytes_moved is not None for t in timings)
        if bandwidth:
            names.append("GB/s")
        if peak and bandwidth:
            names.append("% peak")
        else:
            peak = None
        memory = any(t.peak_bytes is not None for t in timings)
        if memory:
            names.append("peak MiB")
        faults = any(t.faults_per_call is not None for t in timings)
        if faults:
            names.append("faults")
        processes = max(len(t.process_medians_ms or []) for t in timings)
        if processes > 1:
            names.append("runs %")
        layout = cls(names, bandwidth, peak, copy, ref, memory, None, faults, processes)
        layout.copies = {(t.bytes_moved, t.allocates): t for t in timings if t.is_copy}
        return layout

    def ratio_cell(self, t: Timing, other: Timing | None) -> str:
        """``t`` over ``other``: the median of their per-round ratios where they
        were timed in the same rounds (``*`` when those rounds disagree), else
        the ratio of their medians."""
        if other is None:
            return ""
        if other is t:
            return "1.00"
        ratio = per_round(t, other)
        if ratio is None:
            return f"{t.median_ms / other.median_ms:.2f}"
        self.per_round = True
        return f"{ratio.median:.2f}" + (" *" if ratio.noisy else "")

    def row(self, t: Timing) -> list[str]:
        q1, q3 = t.quartiles_ms
        row = [t.name + (" *" if t.noisy else "")]
        if self.copy:
            copy = self.copies.get((t.bytes_moved, t.allocates))
            if copy is None and t.ratio_to_copy is not None:
                row.append(f"{t.ratio_to_copy:.2f}")  # a copy_ms set by hand
            else:
                row.append(self.ratio_cell(t, copy))
        if self.ref is not None:
            row.append(self.ratio_cell(t, self.ref))
        row += [format_ms(t.median_ms), f"{format_ms(q1)}-{format_ms(q3)}"]
        bandwidth = t.bandwidth_gb_s
        if self.bandwidth:
            row.append("" if bandwidth is None else f"{bandwidth:.1f}")
        if self.peak:
            row.append(
                "" if bandwidth is None else f"{100 * bandwidth / self.peak:.0f}%"
            )
        if self.memory:
            row.append("" if t.peak_bytes is None else _mib(t.peak_bytes))
        if self.faults:
            row.append("" if t.faults_per_call is None else f"{t.faults_per_call:.0f}")
        if self.processes > 1:
            spread = t.process_spread
            row.append("" if spread is None else f"{100 * spread:.0f}")
        return row

    def footer(self, timings: list[Timing]) -> list[str]:
        footer = []
        if self.copy:
            text = (
                "x copy: median over that of a copy moving the same bytes in this run"
            )
            if any(t.is_copy and t.allocates for t in timings):
                text += (
                    ": a clone (into a new output) for rows that return new tensors, "
                    "a copy into a given output for the others"
                )
            footer += textwrap.wrap(text, width=88, subsequent_indent="  ")
        if self.ref is not None:
            footer.append(f"x ref: median over that of {self.ref.name!r}")
        if self.per_round:
            text = (
                "x copy, x ref: the median of the two rows' ratios taken round by "
                "round (both rows timed in every round); a ratio marked * has "
                f"rounds or processes that disagree by more than {NOISY_SPREAD:.0%}"
            )
            footer += textwrap.wrap(text, width=88, subsequent_indent="  ")
        if self.memory:
            method = PEAK_METHOD.get(self.device_type or "")
            text = (
                "peak MiB: the most memory one call held above what was allocated "
                "before it, outputs included"
                + (f"; measured from {method}" if method else "")
            )
            footer += textwrap.wrap(text, width=88, subsequent_indent="  ")
        if self.faults:
            footer.append(
                "faults: minor page faults per call (fresh memory handed over a page "
                "at a time)"
            )
        if self.processes > 1:
            footer.append(
                f"runs %: range of the medians of {self.processes} separate processes, "
                "over the median of all"
            )
        if any(t.noisy for t in timings):
            text = (
                f"* interquartile range (or runs %) over {NOISY_SPREAD:.0%} of the "
                "median: too noisy to trust, run again"
            )
            footer += textwrap.wrap(text, width=88, subsequent_indent="  ")
        return footer


# the widest a table may print: a notebook's output column (chapter pages)
TABLE_WIDTH = 88


def _aligned(rows: list[list[str]]) -> list[str]:
    """Rows as text columns (names left, numbers right), a rule under the first.

    A row whose cells after the first are all empty is a row's own settings,
    printed as is.
    Where the columns would pass ``TABLE_WIDTH``, long names wrap onto lines
    of their own under the row (indented), so the numbers stay in columns.
    """
    widths = [
        max(len(row[i]) for row in rows if not (i == 0 and not any(row[1:])))
        for i in range(len(rows[0]))
    ]
    overflow = sum(widths) + 2 * (len(widths) - 1) - TABLE_WIDTH
    name_width = max(16, widths[0] - overflow) if overflow > 0 else widths[0]
    lines = []
    for row in rows:
        if not any(row[1:]) and row is not rows[0]:
            lines.append(row[0])  # a row's own shapes, under it
            continue
        # a noisy row's star stays with the last word of its name
        star = row[0].endswith(" *")
        name = row[0][:-2] if star else row[0]
        first, *rest = textwrap.wrap(name, name_width - 2 * star) or [""]
        if star:
            if rest:
                rest[-1] += " *"
            else:
                first += " *"
        widths[0] = max(widths[0] if overflow <= 0 else name_width, len(first))
        cells = [first.ljust(widths[0])]
        cells += [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        lines += ["  " + part for part in rest]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return lines
