"""The book's figure style and the plots every chapter shares: its colours (one per
scheme, kept in every figure), heat maps and line plots with a title, labelled axes,
a colour bar and readable text, stacked bars. The figures of a recorded run are in
``run_plots.py``, those of the mechanisms in ``mechanism_plots.py``."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.transforms import ScaledTranslation

# The widest a figure is drawn, in inches (issue 67). Saved at 100 dpi it is
# about 640 px: at 1280 px it sits in the text column at its own size, and on a
# phone (a column 358 px wide at a 390 px viewport) it is shown whole at about
# 0.55 of it, so its smallest text (MIN_FONT_PT) still comes out at 8 CSS px or
# more. tools/phone_check.py measures this on every built page.
FIGURE_WIDTH = 6.4
# The smallest text a figure may set, in points (tests/test_project.py holds
# the chapters to it; legends use it).
MIN_FONT_PT = 11

BOOK_STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "legend.fontsize": MIN_FONT_PT,
    "figure.figsize": (FIGURE_WIDTH, 4.0),
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
    "rope-input": "#08306b",
    "learned-qk": "#843c39",
    "sinusoidal-qk": "#7b4173",
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
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4))
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
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.5))
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
        legend_below(ax)
    else:
        ax.legend(loc=where)


def legend_below(ax, *, columns: int | None = None, **options):
    """The axes' legend centred just under its x axis (under its tick labels and
    label), in rows of ``columns`` entries (by default as many as fit a row of
    ``FIGURE_WIDTH``: 3, or 2 when a label is long), so the plot keeps the
    figure's whole width: a legend beside the axes narrows it, and on a phone the
    figure is only a column wide. Call it once the axes are labelled. ``options``
    go to ``Axes.legend``; returns the legend.

    The gap under the axes is measured in points (the tick labels' and the x
    label's height), so it holds when a layout engine resizes the axes; the
    legend counts in the figure's layout and in its saved bounding box."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        raise ValueError("legend_below: the axes have no labelled artist to list")
    if columns is None:
        longest = max(len(label) for label in labels)
        columns = min(len(labels), 3 if longest <= 16 else 2)
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    below = ax.get_window_extent(renderer).y0 - ax.get_tightbbox(renderer).y0
    gap = (below + 4) / fig.dpi  # inches
    options.setdefault("frameon", False)
    return ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=ax.transAxes + ScaledTranslation(0, -gap, fig.dpi_scale_trans),
        ncols=columns,
        **options,
    )


def heatmap_stack(
    tables: dict,
    *,
    columns: int = 1,
    panel_size: tuple[float, float] = (FIGURE_WIDTH, 4.5),
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
        figsize=(min(width * columns, FIGURE_WIDTH), height * rows),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, (title, table) in zip(axes.flat, tables.items()):
        heatmap(table, title=title, ax=ax, **style)
    for ax in list(axes.flat)[len(tables) :]:
        ax.set_visible(False)
    return fig, axes


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
        _, ax = plt.subplots(
            figsize=(FIGURE_WIDTH, 0.5 * len(rows) + 2), constrained_layout=True
        )
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
    legend_below(ax)
    return ax
