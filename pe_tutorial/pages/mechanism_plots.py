"""Figures of the mechanisms the chapters explain (chapters 1, 5, 6 and 11): attention
weights over word orders, RoPE's turning pairs and bases, the shift as arcs, the context
extension methods' stretches and the logit scales."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from .plots import (
    FIGURE_WIDTH,
    OTHER_COLOURS,
    legend_below,
)


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
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.6), constrained_layout=True)
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
    legend_below(ax, columns=2)
    ax.grid(alpha=0.3)
    return ax


def _two_panels(axes, height: float):
    # the two stacked axes a helper draws on: the given pair, or a new figure's
    if axes is None:
        _, axes = plt.subplots(
            2, 1, figsize=(FIGURE_WIDTH, height), constrained_layout=True
        )
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
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 7.2), constrained_layout=True)
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
    # under the circle, not on it
    legend_below(ax, columns=2)
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
        3,
        len(inputs),
        figsize=(FIGURE_WIDTH, 10),
        constrained_layout=True,
        squeeze=False,
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
    fig, axes = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 8), constrained_layout=True)
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
        title="Relative upper bound, averaged over windows\nof distance (raw curve faint)",
        xlabel="distance |r| (log scale)",
        ylabel="relative upper bound",
        xscale="log",
    )
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    return fig
