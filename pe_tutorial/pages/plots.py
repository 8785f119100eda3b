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


# One colour per scheme in every figure (chapters 9 and 11): a curve whose label
# is a scheme's name takes its colour; any other label takes matplotlib's cycle.
SCHEME_COLOURS = {
    "nope": "#7f7f7f",
    "learned": "#8c564b",
    "sinusoidal": "#e377c2",
    "rope": "#1f77b4",
    "alibi": "#ff7f0e",
    "t5": "#2ca02c",
    "shaw": "#d62728",
    "cope": "#9467bd",
    "deberta": "#17becf",
    "p-rope": "#6baed6",
    "irope": "#bcbd22",
    "local-global": "#393b79",
}


# for curves whose labels name no scheme: none of the schemes' colours
OTHER_COLOURS = ("#000000", "#b8860b", "#008080", "#c71585", "#556b2f", "#4682b4")


def scheme_colour(label: str) -> str | None:
    """The colour of the scheme named ``label`` (``SCHEME_COLOURS``), else None."""
    return SCHEME_COLOURS.get(label)


def curve_colours(labels: list[str]) -> list[str]:
    """A colour per label: a scheme's own, else the next of ``OTHER_COLOURS``, so
    no other curve takes a scheme's colour."""
    others = iter(OTHER_COLOURS * (len(labels) // len(OTHER_COLOURS) + 1))
    return [SCHEME_COLOURS.get(label) or next(others) for label in labels]


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
    logx: bool = False,
    legend: str = "best",
    **style,
):
    """Plot several named curves over the same ``x``; returns the axes.

    ``legend`` is a matplotlib location inside the axes, or ``"below"``: under
    the axes, in a row, off data that fills every corner. A single curve gets
    no legend.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    for label, y in curves.items():
        y = y.detach().cpu() if isinstance(y, torch.Tensor) else y
        ax.plot(x.cpu() if isinstance(x, torch.Tensor) else x, y, label=label, **style)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if len(curves) > 1:
        _legend(ax, legend)
    ax.grid(alpha=0.3, which="both" if logx else "major")
    return ax


def _legend(ax, where: str) -> None:
    if where == "below":
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    else:
        ax.legend(loc=where)


def heatmap_stack(
    tables: dict,
    *,
    columns: int = 1,
    panel_size: tuple[float, float] = (7, 4.5),
    **style,
):
    """One ``heatmap`` per titled table, stacked in ``columns`` (panels stacked, not
    shrunk, so each reads at the column's width); returns the figure and its axes.

    ``style`` goes to every panel (labels, colour map, ``symmetric``,
    ``colorbar_label``). Each panel keeps its own colour scale.
    """
    rows = -(-len(tables) // columns)
    width, height = panel_size
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(min(width * columns, 8), height * rows),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, (title, table) in zip(axes.flat, tables.items()):
        heatmap(table, title=title, ax=ax, **style)
    for ax in list(axes.flat)[len(tables) :]:
        ax.set_visible(False)
    return fig, axes


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
        _, ax = plt.subplots(figsize=(8, 4.5))
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
        _, ax = plt.subplots(figsize=(8, 4.5))
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
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
    passkey entries, chapter 11); an entry's ``curve`` holds the ``steps`` at
    which the validation score was read and, per step, the seeds' ``mean``,
    ``std`` and ``n``. Entries without a curve (recorded before curves were)
    are left out. ``limits`` (low, high), such as ``(0, 1)`` for an accuracy,
    cuts each bar where the score cannot go, as in ``length_curves``. Where the curves cross, the ranking at the
    end of training is not the ranking all along: the budget decides it.
    """
    if len(entries) != len(labels):
        raise ValueError(f"{len(entries)} entries but {len(labels)} labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
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


def _two_panels(axes, height: float):
    # the two stacked axes a helper draws on: the given pair, or a new figure's
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(8, height), constrained_layout=True)
    if len(axes) != 2:
        raise ValueError(f"give two axes (top and bottom), got {len(axes)}")
    return axes


def wavelength_stretch_panels(
    plain: torch.Tensor,
    scaled: dict,
    *,
    lengths: dict,
    factor: float,
    axes=None,
):
    """Each pair's wavelength before and after a RoPE scaling (top) and its
    stretch, old frequency over new (bottom), per pair (chapter 11).

    ``plain`` is RoPE's ``(D/2,)`` frequencies, ``scaled`` maps a label to a
    scaling's ``(D/2,)`` frequencies. The top panel draws ``2 pi / theta_i``
    for RoPE and each scaling, with a dotted line at each of ``lengths``
    (``{label: positions}``, e.g. the trained and the extended length); the
    bottom one ``plain / new`` for each scaling, with a dotted line at the
    stretch ``factor``. Both on log axes, one legend (the top panel's) for
    both. Returns the two axes.
    """
    top, bottom = _two_panels(axes, 8.5)
    plain = plain.double()
    pairs = torch.arange(len(plain))
    colours = dict(zip(scaled, OTHER_COLOURS[1:]))
    top.plot(pairs, 2 * math.pi / plain, "o-", color="black", ms=3, label="RoPE")
    for label, frequencies in scaled.items():
        if frequencies.shape != plain.shape:
            raise ValueError(
                f"{label}: {tuple(frequencies.shape)} frequencies for "
                f"{tuple(plain.shape)} pairs"
            )
        style = dict(marker="o", ms=3, color=colours[label], label=label)
        top.plot(pairs, 2 * math.pi / frequencies.double(), **style)
        bottom.plot(pairs, plain / frequencies.double(), **style)
    for (label, n), grey in zip(lengths.items(), ("0.55", "0.3")):
        top.axhline(n, color=grey, linestyle=":", linewidth=1.5)
        top.annotate(
            f"{label} = {n:,}", (0, n), xytext=(2, 3), textcoords="offset points"
        )
    bottom.axhline(factor, color="0.4", linestyle=":", linewidth=1.5)
    bottom.annotate(
        f"s = {factor:g}", (0, factor), xytext=(2, 3), textcoords="offset points"
    )
    top.set(title="Wavelength of each pair", ylabel="wavelength (positions)")
    bottom.set(title="Stretch of each pair", ylabel="old frequency / new")
    for ax in (top, bottom):
        ax.set_yscale("log", base=2)
        ax.set_xlabel("pair i (0 = fastest)")
        ax.grid(alpha=0.3)
    # one legend for both (the same colours), where the rising wavelengths are low
    top.legend(loc="lower right", frameon=False)
    return top, bottom


def logit_scale_panels(keys: torch.Tensor, scales: dict, *, lead: float, axes=None):
    """Factors on the logits against the number of keys (top), and what they do
    to the weight of one key whose logit leads the others by ``lead`` (bottom)
    (chapter 11).

    ``keys`` holds numbers of keys ``n``; ``scales`` maps a label to the factor
    on the logits at each ``n``. The bottom panel draws the weight that key
    gets among ``n`` when every logit is multiplied by the factor ``c``,
    ``1 / (1 + (n - 1) exp(-c lead))``. Log axes for ``n``. Returns the axes.
    """
    top, bottom = _two_panels(axes, 8.0)
    n = keys.double()
    for label, scale in scales.items():
        if scale.shape != keys.shape:
            raise ValueError(
                f"{label}: {tuple(scale.shape)} factors for {tuple(keys.shape)} keys"
            )
        (line,) = top.plot(n, scale.double(), label=label)
        weight = 1 / (1 + (n - 1) * torch.exp(-scale.double() * lead))
        bottom.plot(n, weight, color=line.get_color(), label=label)
    top.set(title="Factor on the logits", ylabel="factor")
    bottom.set(
        title=f"Weight of a key that leads the others by {lead:.2f}",
        ylabel="attention weight",
        ylim=(0, 1),
    )
    # the factors start at 1 and the weights near 1: legends above and below them
    for ax, where in ((top, "upper left"), (bottom, "lower left")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("keys the query sees, n")
        ax.grid(alpha=0.3)
        ax.legend(loc=where, frameon=False)
    return top, bottom


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


def self_attention_weights(layer, x: torch.Tensor) -> torch.Tensor:
    """The attention weights of a one-head ``layer`` with projections ``w_q`` and
    ``w_k`` (chapter 1's ``SelfAttention``) on the rows of ``x``:
    ``softmax((x W_Q)(x W_K)^T / sqrt(d))``, ``(T, T)``, rows the queries."""
    q, k = x @ layer.w_q, x @ layer.w_k
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1).detach()


def word_order_panels(layer, inputs: dict, words: list[str], order: torch.Tensor):
    """Who attends to whom in two orderings of the same words, put side by side
    cell by cell, and their difference (chapter 1).

    ``inputs`` maps a column label ("with positions") to the ``(T, d)`` inputs
    of sentence A and of sentence B, the same words in another order: word
    ``i`` of A is word ``order[i]`` of B. Each column shows A's weights
    (``self_attention_weights``), B's with rows and columns put back in A's
    order, and the absolute difference, on one colour scale for every column.
    Returns the figure and, per label, the largest absolute difference.
    """
    fig, axes = plt.subplots(
        3, len(inputs), figsize=(8, 10), constrained_layout=True, squeeze=False
    )
    differences, largest = {}, {}
    for column, (label, (x_a, x_b)) in enumerate(inputs.items()):
        a = self_attention_weights(layer, x_a)
        b = self_attention_weights(layer, x_b)[order][:, order]
        differences[label] = (a - b).abs()
        largest[label] = differences[label].max().item()
        for row, (weights, name) in enumerate(((a, "A"), (b, "B, in A's order"))):
            image = axes[row, column].imshow(
                weights.numpy(), cmap="viridis", vmin=0, vmax=1
            )
            axes[row, column].set_title(f"{label}\nsentence {name}")
    # one scale for every difference, so that zero looks like zero
    top = max(max(largest.values()), 1e-3)
    for column, (label, difference) in enumerate(differences.items()):
        gap = axes[2, column].imshow(difference.numpy(), cmap="magma", vmin=0, vmax=top)
        axes[2, column].set_title(f"{label}\n|A - B|, largest {largest[label]:.2f}")
    for ax in axes.flat:
        ax.set_xticks(range(len(words)), words, rotation=45)
        ax.set_yticks(range(len(words)), words)
        ax.set(xlabel="key", ylabel="query")
    fig.colorbar(image, ax=axes[:2], label="attention weight", shrink=0.6)
    fig.colorbar(gap, ax=axes[2], label="|difference|", shrink=0.8)
    return fig, largest


def turning_arrows(
    vectors: torch.Tensor,
    labels: list[str],
    *,
    title: str,
    ax=None,
    xlabel: str = "channel a",
    ylabel: str = "channel b",
):
    """Each row of ``vectors`` (``(N, 2)``, one pair at N positions) as an arrow from
    the origin, labelled at its tip, on the dotted circle of the first one's
    length (chapter 6); the colours run from dark (first) to light (last)."""
    if vectors.ndim != 2 or vectors.shape[1] != 2 or len(labels) != len(vectors):
        raise ValueError(
            f"vectors must be (N, 2) with N labels, got {tuple(vectors.shape)} and "
            f"{len(labels)} labels"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    radius = float(vectors[0].norm())
    for n, (v, label) in enumerate(zip(vectors.tolist(), labels)):
        colour = plt.cm.viridis(n / len(vectors))
        ax.annotate(
            "", xy=v, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=colour)
        )
        ax.text(1.12 * v[0], 1.12 * v[1], label, ha="center", va="center")
    circle = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(radius * circle.cos(), radius * circle.sin(), ":", color="grey")
    limit = 1.4 * radius
    ax.set(
        title=title,
        xlabel=xlabel,
        ylabel=ylabel,
        aspect="equal",
        xlim=(-limit, limit),
        ylim=(-limit, limit),
    )
    return ax


def rope_base_panels(bases: dict, distances: torch.Tensor, edges: list[int]):
    """The base's two effects, one colour per base (chapter 6): top, each pair's
    wavelength; bottom, the relative upper bound against the distance on a log
    axis, faint, with its mean over each window of distance as a step.

    ``bases`` maps a label to ``(wavelengths, curve, means)``: the ``(D/2,)``
    wavelengths, the bound at each of ``distances``, and its mean over each
    window between consecutive ``edges``. Returns the figure.
    """
    fig, axes = plt.subplots(2, 1, figsize=(8, 8), constrained_layout=True)
    for label, (wavelengths, curve, means) in bases.items():
        if len(means) != len(edges) - 1:
            raise ValueError(
                f"{label}: {len(means)} means for {len(edges) - 1} windows"
            )
        (line,) = axes[0].semilogy(wavelengths, label=label)
        colour = line.get_color()
        axes[1].plot(distances[1:], curve[1:], color=colour, alpha=0.15, lw=0.5)
        # one step per window, no edges down to zero at the ends
        axes[1].stairs(
            means, edges, baseline=None, color=colour, linewidth=2, label=label
        )
    axes[0].set(
        title="Wavelength of each pair",
        xlabel="pair index i",
        ylabel=r"wavelength $2\pi/\theta_i$ (positions)",
    )
    axes[1].set(
        title="Relative upper bound, averaged over windows of distance (raw curve faint)",
        xlabel="distance |r| (log scale)",
        ylabel="relative upper bound",
        xscale="log",
    )
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    return fig


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
        _, ax = plt.subplots(figsize=(6.5, 0.42 * len(rows) + 1.6))
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
                fontsize=9,
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


def stacked_bars(
    rows: dict, *, title: str, xlabel: str, ax=None, colours: dict | None = None
):
    """Horizontal bars split into parts, one bar per row (chapter 10: a training
    step's time by group, per scheme).

    ``rows`` maps a bar's label to ``{part: value}``. Every bar has the same
    parts, drawn left to right in the first bar's order, one colour per part
    (``colours[part]`` where given, else the next of ``OTHER_COLOURS`` after
    black), with a legend under the axes. Bars go top to bottom in ``rows``'
    order, each with its total at its end. Returns the axes.
    """
    if not rows:
        raise ValueError("stacked_bars needs at least one row")
    parts = list(next(iter(rows.values())))
    for label, values in rows.items():
        if sorted(values) != sorted(parts):
            raise ValueError(
                f"row {label!r} has parts {sorted(values)}; every row needs {parts}"
            )
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 2), constrained_layout=True)
    labels = list(rows)[::-1]  # barh draws upwards: the first row on top
    left = [0.0] * len(labels)
    palette = iter(OTHER_COLOURS[1:] * (len(parts) // (len(OTHER_COLOURS) - 1) + 1))
    given = colours or {}
    for part in parts:
        colour = given[part] if part in given else next(palette)
        widths = [float(rows[label][part]) for label in labels]
        ax.barh(labels, widths, left=left, color=colour, label=part)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total:.1f}", va="center")
    ax.set_xlim(0, 1.12 * max(left))
    ax.set(title=title, xlabel=xlabel)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(parts))
    return ax
