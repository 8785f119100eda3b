"""Figures of a recorded run (chapters 9 and 11): bits per byte against length, by
position and by training step, the passkey grids, the rate sweeps, each scheme in its
colour (``plots.SCHEME_COLOURS``) with the seeds' spread as error bars."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from .plots import (
    FIGURE_WIDTH,
    MIN_FONT_PT,
    curve_colours,
    legend_below,
)


def _mark_training_length(ax, train_length: int) -> None:
    # named in the legend, not written on the axes, where it sat on the curves
    # (a scheme's accuracy near 1 at the training length)
    ax.axvline(
        train_length,
        color="0.5",
        linestyle="--",
        linewidth=1,
        label="training length",
    )


def _error_bars(mean, std, limits: tuple[float, float] | None) -> list[list[float]]:
    """``yerr`` of ``mean ± std`` cut at ``limits`` (low, high): a bar reaches no
    further than the value can (an accuracy between 0 and 1); None: uncut."""
    low, high = limits if limits is not None else (-math.inf, math.inf)
    below = [min(s, m - low) for m, s in zip(mean, std)]
    above = [min(s, high - m) for m, s in zip(mean, std)]
    return [below, above]


def length_curves(
    entries: list[dict],
    *,
    labels: list[str],
    train_length: int,
    title: str,
    ylabel: str = "bits per byte",
    xlabel: str = "evaluation length (bytes)",
    ax=None,
    limits: tuple[float, float] | None = None,
):
    """Mean (and seed spread as error bars) of each entry's ``summary`` over the lengths (chapter 9).

    ``entries`` are result entries of ``pe_tutorial.experiments``; lengths a
    variant could not run are left out of its curve. The training length is
    marked, and the legend sits outside the axes, right of the data.
    ``limits`` (low, high) cuts the error bars at what the value can be (an
    accuracy between 0 and 1).
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5), constrained_layout=True)
    markers = "osD^vP*Xh<>"
    colours = curve_colours(labels)
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
            n,
            mean,
            yerr=_error_bars(mean, std, limits),
            marker=markers[i % len(markers)],
            capsize=3,
            label=label,
            color=colours[i],
        )
    _mark_training_length(ax, train_length)
    ax.set_xscale("log", base=2)
    lengths = sorted({int(n) for e in entries for n in e["summary"]})
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    legend_below(ax)
    ax.grid(alpha=0.3)
    return ax


def position_curves(
    entries: list[dict],
    *,
    labels: list[str],
    train_length: int,
    position_bin: int,
    title: str,
    ax=None,
    merge: int = 1,
    key: str = "position_bpb",
    ylabel: str = "bits per byte",
):
    """Loss by position (chapter 9): bits per byte at each position of the longest window.

    Each entry's runs carry ``position_bpb``, the loss averaged over bins of
    ``position_bin`` positions; ``merge`` consecutive bins are averaged into
    one, for a smoother curve. The curve is the seeds' mean at each bin's
    centre, with the seeds' spread shaded. Entries whose runs have no curve
    (a learned table) are left out. The training length is marked.
    ``key="position_gain"`` draws instead each position's loss minus the same
    bytes' loss read in a window of the training length (zero marked): below
    zero the longer context helps, above it hurts.
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5), constrained_layout=True)
    for entry, label, colour in zip(entries, labels, curve_colours(labels)):
        curves = [run[key] for run in entry["runs"] if run.get(key)]
        if not curves:
            continue
        values = torch.tensor(curves, dtype=torch.float64)  # (seeds, bins)
        if values.shape[1] % merge:
            raise ValueError(
                f"merge={merge} does not divide the {values.shape[1]} bins of a curve"
            )
        values = values.view(values.shape[0], -1, merge).mean(-1)
        centres = (torch.arange(values.shape[1]) + 0.5) * position_bin * merge
        mean = values.mean(0)
        (line,) = ax.plot(centres, mean, label=label, color=colour)
        if values.shape[0] > 1:
            spread = values.std(0)
            ax.fill_between(
                centres, mean - spread, mean + spread, color=line.get_color(), alpha=0.2
            )
    _mark_training_length(ax, train_length)
    if key == "position_gain":
        ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set(title=title, xlabel="position in the window (bytes)", ylabel=ylabel)
    legend_below(ax)
    ax.grid(alpha=0.3)
    return ax


def learning_curves(
    entries: list[dict],
    *,
    labels: list[str],
    title: str,
    ylabel: str = "bits per byte at the training length",
    ax=None,
    limits: tuple[float, float] | None = None,
):
    """Each entry's learning curve: its score during training, seeds' mean ± std (chapter 9).

    ``entries`` are language-model entries of ``pe_tutorial.experiments`` (or
    passkey entries, chapter 12); an entry's ``curve`` holds the ``steps`` at
    which the validation score was read and, per step, the seeds' ``mean``,
    ``std`` and ``n``. Entries without a curve (recorded before curves were)
    are left out. ``limits`` (low, high), such as ``(0, 1)`` for an accuracy,
    cuts each bar where the score cannot go, as in ``length_curves``. Where the curves cross, the ranking at the
    end of training is not the ranking all along: the budget decides it.
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5), constrained_layout=True)
    markers = "osD^vP*Xh<>"
    colours = curve_colours(labels)
    for i, (entry, label) in enumerate(zip(entries, labels)):
        curve = entry.get("curve")
        if not curve:
            continue
        ax.errorbar(
            curve["steps"],
            curve["mean"],
            yerr=_error_bars(curve["mean"], curve["std"], limits),
            marker=markers[i % len(markers)],
            markersize=4,
            capsize=3,
            label=label,
            color=colours[i],
        )
    ax.set(title=title, xlabel="training step", ylabel=ylabel)
    legend_below(ax)
    ax.grid(alpha=0.3)
    return ax


def passkey_grid(entry: dict, *, title: str, ax=None, colorbar: bool = True):
    """Passkey accuracy by length (columns) and depth of the key (rows), seeds' mean (chapter 9).

    ``entry`` is a ``results["passkey"]`` entry: each run has ``by_depth``,
    ``{length: {depth: accuracy} | None}``. Each cell prints its value; a
    length the model cannot read is marked n/a.
    """
    runs = entry["runs"]
    lengths = list(runs[0]["by_depth"])
    depths = next(list(v) for v in runs[0]["by_depth"].values() if v is not None)
    grid = torch.full((len(depths), len(lengths)), float("nan"))
    for j, n in enumerate(lengths):
        if any(run["by_depth"][n] is None for run in runs):
            continue
        for i, depth in enumerate(depths):
            grid[i, j] = sum(run["by_depth"][n][depth] for run in runs) / len(runs)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="accuracy")
    for i in range(len(depths)):
        for j in range(len(lengths)):
            value = grid[i, j].item()
            text = "n/a" if value != value else f"{value:.2f}"
            if value != value:  # n/a on the blank cell
                colour = "0.35"
            else:
                colour = "black" if value > 0.6 else "white"
            ax.text(
                j, i, text, ha="center", va="center", color=colour, fontsize=MIN_FONT_PT
            )
    ax.set_xticks(range(len(lengths)), lengths)
    ax.set_yticks(range(len(depths)), [f"{float(d):.2f}" for d in depths])
    ax.set(title=title, xlabel="length (tokens)", ylabel="depth of the key")
    return ax


def passkey_grids(entries: dict[str, dict], *, title: str, columns: int = 2):
    """``passkey_grid`` for each labelled entry, ``columns`` to a row (two fit a
    figure ``FIGURE_WIDTH`` wide with their cells' numbers readable), with one
    colour bar under them."""
    rows = -(-len(entries) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(FIGURE_WIDTH, 2.9 * rows * 2 / columns + 0.8),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, (label, entry) in zip(axes.flat, entries.items()):
        passkey_grid(entry, title=label, ax=ax, colorbar=False)
    for ax in list(axes.flat)[len(entries) :]:
        ax.set_visible(False)
    for ax in axes.flat:
        if ax.get_visible() and ax not in axes[:, 0]:
            ax.set_ylabel("")
    image = axes.flat[0].images[0]
    # the bar's room in the layout is a fraction of the figure's height: a fixed
    # half inch, so a tall grid of many schemes leaves no blank band above it
    height = fig.get_figheight()
    fig.colorbar(
        image,
        ax=axes,
        label="accuracy",
        shrink=0.6,
        location="bottom",
        aspect=40,
        fraction=0.5 / height,
        pad=0.1 / height,
    )
    fig.suptitle(title)
    return fig


def rate_sweep(
    sweeps: dict[str, dict[float, dict]], *, length: int, title: str, ax=None
):
    """Score at one length against the learning rate, a curve per label (chapter 9).

    ``sweeps`` maps a label (a norm) to ``{learning rate: entry}``; each point
    is the entry's seeds' mean at ``length`` with the std as its error bar.
    Returns the axes and, per label, the rate with the lowest mean.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4))
    best = {}
    for (label, sweep), marker in zip(sweeps.items(), "osD^v"):
        rates = sorted(sweep)
        stats = [sweep[rate]["summary"][str(length)] for rate in rates]
        means = [s["mean"] for s in stats]
        ax.errorbar(
            rates,
            means,
            yerr=[s["std"] for s in stats],
            marker=marker,
            capsize=3,
            label=label,
        )
        best[label] = rates[means.index(min(means))]
    ax.set_xscale("log")
    every_rate = sorted({rate for sweep in sweeps.values() for rate in sweep})
    ax.set_xticks(every_rate, [f"{rate:g}" for rate in every_rate])
    ax.minorticks_off()
    ax.set(
        title=title, xlabel="peak learning rate", ylabel=f"bits per byte at {length}"
    )
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return ax, best


def sweep_grid(points, *, schemes: list[str], title: str, ax=None):
    """A tuning sweep as a table of colours (chapter 9): bits per byte at L for
    every scheme (a row per position-parameter rate above 1) and learning rate.

    ``points`` have ``scheme``, ``learning_rate``, ``position_lr_multiplier`` and
    ``bpb`` (``experiments.tuning.SweepPoint``); ``schemes`` gives the rows'
    order. Each cell shows its score; each scheme's lowest is framed, the
    setting the three-seed run trains at. Settings not trained stay blank.
    Returns the axes and the rows' labels.
    """
    rows: list[tuple[str, float]] = []
    for scheme in schemes:
        multipliers = sorted(
            {p.position_lr_multiplier for p in points if p.scheme == scheme}
        )
        if not multipliers:
            raise ValueError(f"no sweep point of scheme {scheme!r}")
        rows += [(scheme, m) for m in multipliers]
    rates = sorted({p.learning_rate for p in points})
    grid = torch.full((len(rows), len(rates)), float("nan"), dtype=torch.float64)
    for p in points:
        if (p.scheme, p.position_lr_multiplier) in rows:
            grid[
                rows.index((p.scheme, p.position_lr_multiplier)),
                rates.index(p.learning_rate),
            ] = p.bpb
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 0.42 * len(rows) + 1.6))
    finite = grid[~grid.isnan()]
    # the colour scale spans the good scores: a diverged model stays dark, not a
    # scale that makes every other cell look alike
    high = min(float(finite.max()), float(finite.min()) + 1.0)
    image = ax.imshow(
        grid.numpy(),
        cmap="viridis_r",
        vmin=float(finite.min()),
        vmax=high,
        aspect="auto",
    )
    for i, (scheme, _) in enumerate(rows):
        best = min((p for p in points if p.scheme == scheme), key=lambda p: p.bpb)
        for j, rate in enumerate(rates):
            value = grid[i, j].item()
            if math.isnan(value):
                continue
            dark = value > (float(finite.min()) + high) / 2
            ax.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=MIN_FONT_PT,
                color="white" if dark else "black",
            )
            if (best.position_lr_multiplier, best.learning_rate) == (rows[i][1], rate):
                ax.add_patch(
                    plt.Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        fill=False,
                        edgecolor="red",
                        linewidth=2.5,
                    )
                )
    labels = [s if m == 1 else f"{s}, position ×{m:g}" for s, m in rows]
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
    ax.set(title=title, xlabel="peak learning rate")
    ax.figure.colorbar(image, ax=ax, label="bits per byte at L")
    return ax, labels
