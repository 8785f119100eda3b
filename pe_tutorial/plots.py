"""Figure helpers the chapters share: a title, labelled axes, a colour bar, readable text."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

# Chapters draw figures 7 to 9 inches wide, shown scaled to the text column
# (about 730 px at a 1280 px window); 12 pt text then comes out about as large
# as the page's own text.
BOOK_STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "legend.fontsize": 11,
}


def use_book_style() -> None:
    """Set matplotlib's text sizes so figure text reads like the page's text (every chapter)."""
    plt.rcParams.update(BOOK_STYLE)


def heatmap(
    table: torch.Tensor,
    *,
    title: str,
    xlabel: str = "channel",
    ylabel: str = "position",
    ax=None,
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    colorbar_label: str = "value",
):
    """Draw a 2-D tensor (rows down the y axis) with a colour bar; returns the axes.

    ``symmetric`` centres the colour scale on zero so that sign is readable.
    """
    if table.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D tensor, got shape {tuple(table.shape)}")
    values = table.detach().float().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    limit = float(values.abs().max()) or 1.0
    kwargs = {"vmin": -limit, "vmax": limit} if symmetric else {}
    image = ax.imshow(
        values.numpy(), aspect="auto", cmap=cmap, interpolation="nearest", **kwargs
    )
    ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return ax


def line_plot(
    x,
    curves: dict,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    ax=None,
    logy: bool = False,
    **style,
):
    """Plot several named curves over the same ``x``; returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    for label, y in curves.items():
        y = y.detach().cpu() if isinstance(y, torch.Tensor) else y
        ax.plot(x.cpu() if isinstance(x, torch.Tensor) else x, y, label=label, **style)
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if len(curves) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax


def length_curves(
    entries: list[dict],
    *,
    labels: list[str],
    train_length: int,
    title: str,
    ylabel: str = "bits per byte",
    xlabel: str = "evaluation length (bytes)",
    ax=None,
):
    """Mean (and seed spread as error bars) of each entry's ``summary`` over the lengths (chapter 9).

    ``entries`` are result entries of ``pe_tutorial.experiments``; lengths a
    variant could not run are left out of its curve. The training length is
    marked, and the legend sits outside the axes, right of the data.
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    markers = "osD^vP*Xh<>"
    for i, (entry, label) in enumerate(zip(entries, labels)):
        points = [
            (int(n), stats["mean"], stats["std"])
            for n, stats in entry["summary"].items()
            if stats is not None
        ]
        if not points:
            continue
        n, mean, std = zip(*points)
        ax.errorbar(
            n, mean, yerr=std, marker=markers[i % len(markers)], capsize=3, label=label
        )
    ax.axvline(train_length, color="0.5", linestyle="--", linewidth=1)
    ax.annotate(
        "training length",
        (train_length, 1),
        xycoords=("data", "axes fraction"),
        xytext=(4, -14),
        textcoords="offset points",
        color="0.4",
    )
    ax.set_xscale("log", base=2)
    lengths = sorted({int(n) for e in entries for n in e["summary"]})
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    return ax
