"""Paired verdicts drawn as they are read (issue 69): each claim's mean
difference with its 95% interval, one row per claim, a line at 0 and the
claims the family calls real filled. The judge's report card draws one panel
per family; an unpaired picture (each scheme's mean and spread) cannot show
what a paired verdict says."""

from __future__ import annotations

import matplotlib.pyplot as plt

from .plots import FIGURE_WIDTH

__all__ = ["paired_intervals"]


def paired_intervals(
    claims: list[tuple[str, object]],
    *,
    title: str,
    xlabel: str,
    ax=None,
    width: float = FIGURE_WIDTH,
):
    """Draw ``claims``, ``[(label, Verdict), ...]`` of one family (already
    Holm-adjusted: ``verdict_family``), top to bottom: a dot at each mean paired
    difference and a bar over its interval, filled where the family calls it a
    real difference, hollow where not; a dashed line at 0. Returns the axes."""
    if not claims:
        raise ValueError("paired_intervals needs at least one claim")
    if ax is None:
        height = 1.2 + 0.32 * len(claims)
        _, ax = plt.subplots(figsize=(width, height), constrained_layout=True)
    rows = list(range(len(claims)))[::-1]  # the first claim on top
    for y, (_, verdict) in zip(rows, claims, strict=True):
        colour = "#1f77b4" if verdict.real else "0.45"
        ax.plot([verdict.low, verdict.high], [y, y], color=colour, linewidth=2)
        ax.plot(
            verdict.difference,
            y,
            "o",
            color=colour,
            markerfacecolor=colour if verdict.real else "white",
            markersize=6,
        )
    ax.axvline(0.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_yticks(rows, [label for label, _ in claims])
    ax.set(title=title, xlabel=xlabel)
    ax.grid(alpha=0.3, axis="x")
    return ax
