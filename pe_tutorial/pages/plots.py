"""Figure helpers the chapters share: a title, labelled axes, a colour bar, readable text."""

from __future__ import annotations

import math

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


def _mark_training_length(ax, train_length: int) -> None:
    ax.axvline(train_length, color="0.5", linestyle="--", linewidth=1)
    ax.annotate(
        "training length",
        (train_length, 1),
        xycoords=("data", "axes fraction"),
        xytext=(4, -14),
        textcoords="offset points",
        color="0.4",
    )


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
        low, high = limits if limits is not None else (-float("inf"), float("inf"))
        below = [min(s, m - low) for m, s in zip(mean, std)]
        above = [min(s, high - m) for m, s in zip(mean, std)]
        ax.errorbar(
            n,
            mean,
            yerr=[below, above],
            marker=markers[i % len(markers)],
            capsize=3,
            label=label,
        )
    _mark_training_length(ax, train_length)
    ax.set_xscale("log", base=2)
    lengths = sorted({int(n) for e in entries for n in e["summary"]})
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
):
    """Loss by position (chapter 9): bits per byte at each position of the longest window.

    Each entry's runs carry ``position_bpb``, the loss averaged over bins of
    ``position_bin`` positions; ``merge`` consecutive bins are averaged into
    one, for a smoother curve. The curve is the seeds' mean at each bin's
    centre, with the seeds' spread shaded. Entries whose runs have no curve
    (a learned table) are left out. The training length is marked.
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    for entry, label in zip(entries, labels):
        curves = [run["position_bpb"] for run in entry["runs"] if run["position_bpb"]]
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
        (line,) = ax.plot(centres, mean, label=label)
        if values.shape[0] > 1:
            spread = values.std(0)
            ax.fill_between(
                centres, mean - spread, mean + spread, color=line.get_color(), alpha=0.2
            )
    _mark_training_length(ax, train_length)
    ax.set(title=title, xlabel="position in the window (bytes)", ylabel="bits per byte")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
            ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=10)
    ax.set_xticks(range(len(lengths)), lengths)
    ax.set_yticks(range(len(depths)), [f"{float(d):.2f}" for d in depths])
    ax.set(title=title, xlabel="length (tokens)", ylabel="depth of the key")
    return ax


def passkey_grids(entries: dict[str, dict], *, title: str, columns: int = 4):
    """``passkey_grid`` for each labelled entry, side by side with one colour bar."""
    rows = -(-len(entries) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(3.2 * columns, 2.9 * rows),
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
    fig.colorbar(image, ax=axes, label="accuracy", shrink=0.8)
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
        _, ax = plt.subplots(figsize=(6.5, 4))
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


def rope_scaling_ratios(
    head_dim: int, factor: float, train_length: int, *, methods=None, ax=None
):
    """Each scaling method's frequencies over plain RoPE's, per pair (chapter 9).

    Dynamic NTK reads the current length; it is drawn at ``factor *
    train_length``, the length the others are set for. A method that also
    scales the logits says by how much in its label.
    """
    from ..encodings.rope_scaling import SCALING_METHODS, scaled_rope_frequencies

    methods = SCALING_METHODS if methods is None else methods
    plain, _ = scaled_rope_frequencies(head_dim, "linear", factor=1.0)
    pairs = torch.arange(head_dim // 2)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.2))
    for method, marker in zip(methods, "osD^vP*"):
        frequencies, scale = scaled_rope_frequencies(
            head_dim,
            method,
            factor=factor,
            original_max_positions=train_length,
            seq_len=int(factor * train_length),
        )
        label = method if scale == 1 else f"{method} (logits x {scale**2:.2f})"
        ax.plot(pairs, frequencies / plain, marker=marker, label=label)
    ax.set_yscale("log", base=2)
    ax.set(
        xlabel="pair i (0 = fastest)",
        ylabel="new frequency / old",
        title=f"RoPE scalings at s = {factor:g}, D = {head_dim}, L = {train_length}",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    return ax


def shift_arcs(
    shift_matrix: torch.Tensor,
    frequency: float,
    shift: int,
    *,
    starts=(0, 10, 20, 30),
    ax=None,
):
    """One sinusoid pair ``PE(p) = (sin p w, cos p w)`` on its circle, and the arc
    ``shift_matrix`` (the 2 x 2 ``M_k``) turns it through from each start (chapter 5).

    Grey dots are ``PE(p)`` for the positions of one turn; each coloured arc goes
    from ``PE(start)`` to ``M_k PE(start)``, drawn where ``M_k`` puts it.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 6))
    turn = torch.arange(int(2 * math.pi / frequency) + 1)
    ax.plot(
        torch.sin(turn * frequency),
        torch.cos(turn * frequency),
        "o",
        markersize=3,
        color="grey",
        label=f"PE(p), p = 0..{len(turn) - 1}",
    )
    for start, colour in zip(starts, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        here = torch.tensor([math.sin(start * frequency), math.cos(start * frequency)])
        arc = torch.linspace(start, start + shift, 30) * frequency
        ax.plot(
            torch.sin(arc),
            torch.cos(arc),
            color=colour,
            linewidth=3,
            label=f"$M_{{{shift}}}$: p = {start} → {start + shift}",
        )
        # the arrow ends where M_k puts PE(start)
        ax.annotate(
            "",
            xy=(shift_matrix @ here).tolist(),
            xytext=(float(torch.sin(arc[-3])), float(torch.cos(arc[-3]))),
            arrowprops=dict(arrowstyle="-|>", color=colour, lw=2),
        )
    ax.set(
        title=f"$M_{{{shift}}}$ turns PE(p) by the same arc everywhere (ω = {frequency})",
        xlabel="sin(pω)",
        ylabel="cos(pω)",
        aspect="equal",
        xlim=(-1.3, 1.3),
        ylim=(-1.3, 1.3),
    )
    # beside the circle, not on it
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return ax
