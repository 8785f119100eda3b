"""The figure helpers draw what the results and the formulas hold."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from pe_tutorial.attention.core import attention_weights  # noqa: E402
from pe_tutorial.attention.equivariance import SelfAttention  # noqa: E402
from pe_tutorial.encodings.rope import rope_frequencies  # noqa: E402
from pe_tutorial.lm.registry import scheme_names  # noqa: E402
from pe_tutorial.pages.mechanism_plots import (  # noqa: E402
    logit_scale_panels,
    rope_base_panels,
    rope_scaling_ratios,
    self_attention_weights,
    shift_arcs,
    turning_arrows,
    wavelength_stretch_panels,
    word_order_panels,
)
from pe_tutorial.pages.plots import (  # noqa: E402
    OTHER_COLOURS,
    SCHEME_COLOURS,
    heatmap_stack,
    legend_below,
    line_plot,
    stacked_bars,
)
from pe_tutorial.pages.run_plots import (  # noqa: E402
    learning_curves,
    length_curves,
    passkey_grid,
    passkey_grids,
    position_curves,
    rate_sweep,
    sweep_grid,
)


def run(seed, curve):
    return {"seed": seed, "position_bpb": curve}


def test_loss_by_position_is_the_seeds_mean_at_each_bin_centre():
    entries = [
        {"runs": [run(0, [3.0, 2.0, 1.0]), run(1, [5.0, 4.0, 3.0])]},
        {"runs": [run(0, None), run(1, None)]},  # a learned table: no curve
    ]
    ax = position_curves(
        entries,
        labels=["rope", "learned"],
        train_length=8,
        position_bin=4,
        title="t",
    )
    lines = [line for line in ax.get_lines() if line.get_label() == "rope"]
    assert len(lines) == 1 and not any(
        line.get_label() == "learned" for line in ax.get_lines()
    )
    x, y = lines[0].get_data()
    assert list(x) == [2.0, 6.0, 10.0] and list(y) == [4.0, 3.0, 2.0]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="2 entries but 1 labels"):
        position_curves(entries, labels=["x"], train_length=8, position_bin=4, title="")


def test_loss_by_position_can_merge_bins():
    entries = [{"runs": [run(0, [3.0, 1.0, 2.0, 4.0])]}]
    ax = position_curves(
        entries, labels=["rope"], train_length=8, position_bin=4, title="t", merge=2
    )
    x, y = ax.get_lines()[0].get_data()
    assert list(x) == [4.0, 12.0] and list(y) == [2.0, 3.0]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="merge=3 does not divide the 4 bins"):
        position_curves(
            entries, labels=["r"], train_length=8, position_bin=4, title="", merge=3
        )


def test_passkey_grid_shows_the_mean_accuracy_by_length_and_depth():
    entry = {
        "runs": [
            {"by_depth": {"64": {"0.0": 1.0, "1.0": 0.5}, "128": None}},
            {"by_depth": {"64": {"0.0": 0.5, "1.0": 0.5}, "128": None}},
        ]
    }
    ax = passkey_grid(entry, title="passkey")
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["0.50", "0.75", "n/a", "n/a"]
    plt.close(ax.figure)


def test_accuracy_error_bars_stop_at_the_limits():
    entry = {"summary": {"32": {"mean": 0.95, "std": 0.2, "n": 3}}}
    ax = length_curves(
        [entry], labels=["shaw"], train_length=32, title="t", limits=(0.0, 1.0)
    )
    bars = ax.containers[0]
    segments = bars.lines[2][0].get_segments()
    (low, high) = segments[0][:, 1]
    assert low == pytest.approx(0.75) and high == pytest.approx(1.0)
    plt.close(ax.figure)


def summary_entry(mean, std=0.01):
    return {"summary": {"128": {"mean": mean, "std": std, "n": 3}}}


def test_rate_sweep_draws_each_norm_and_finds_its_best_rate():
    sweeps = {
        "pre": {
            1e-3: summary_entry(2.3),
            3e-3: summary_entry(2.1),
            1e-2: summary_entry(2.2),
        },
        "post": {1e-2: summary_entry(2.25), 1e-3: summary_entry(2.4)},
    }
    ax, best = rate_sweep(sweeps, length=128, title="t")
    assert best == {"pre": 3e-3, "post": 1e-2}
    x, y = ax.get_lines()[0].get_data()
    assert list(x) == [1e-3, 3e-3, 1e-2] and list(y) == [2.3, 2.1, 2.2]
    plt.close(ax.figure)


def test_rope_scaling_ratios_are_the_new_frequencies_over_the_old():
    ax = rope_scaling_ratios(16, 4.0, 64, methods=("linear", "ntk"))
    linear, ntk = (line.get_data()[1] for line in ax.get_lines())
    assert linear == pytest.approx([0.25] * 8)
    # NTK: the base grows to b s^(D/(D-2)); pair i's ratio is that factor^(-2i/D)
    plain = rope_frequencies(16)
    new = rope_frequencies(16, base=10000.0 * 4.0 ** (16 / 14))
    assert ntk == pytest.approx((new / plain).tolist(), rel=1e-5)
    assert ntk[0] == pytest.approx(1.0) and ntk[-1] == pytest.approx(0.25, rel=1e-4)
    plt.close(ax.figure)


def test_passkey_grids_put_each_scheme_in_its_own_panel():
    entry = {"runs": [{"by_depth": {"64": {"0.0": 1.0, "1.0": 0.25}}}]}
    fig = passkey_grids({"a": entry, "b": entry, "c": entry}, title="t", columns=2)
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert [ax.get_title() for ax in visible] == ["a", "b", "c"]
    assert sorted(t.get_text() for t in visible[2].texts) == ["0.25", "1.00"]
    # one colour bar for all, and the empty fourth panel hidden
    assert sum(1 for ax in fig.axes if ax.get_label() == "<colorbar>") == 1
    plt.close(fig)


def test_a_tall_passkey_grid_keeps_its_colour_bar_under_the_last_row():
    """Ten schemes, five rows: the bar sits just under the last row's labels,
    with no blank band between (the KERPLE card's grid had 1.3 inches)."""
    entry = {
        "runs": [{"by_depth": {n: {"0.0": 1.0, "1.0": 0.5} for n in ("64", "128")}}]
    }
    fig = passkey_grids({str(i): entry for i in range(10)}, title="t", columns=2)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    bar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    panels = [ax for ax in fig.axes if ax.images and ax is not bar]
    lowest = min(ax.get_tightbbox(renderer).y0 for ax in panels)
    gap_inches = (lowest - bar.get_tightbbox(renderer).y1) / fig.dpi
    assert 0 <= gap_inches < 0.35
    plt.close(fig)


def test_shift_arcs_end_where_the_matrix_puts_each_start():
    w, shift = 0.15, 5
    angle = shift * w
    M = torch.tensor(
        [[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]]
    )
    ax = shift_arcs(M, w, shift, starts=(0, 10))
    dots, *arcs = ax.get_lines()
    assert len(dots.get_xdata()) == 42  # one turn of positions at w = 0.15
    ends = [a.xy for a in ax.findobj(matplotlib.text.Annotation)]
    for start, end, arc in zip((0, 10), ends, arcs):
        p = start + shift
        assert end == pytest.approx([math.sin(p * w), math.cos(p * w)], abs=1e-6)
        # the arc runs from PE(start) to PE(start + shift)
        assert arc.get_xdata()[0] == pytest.approx(math.sin(start * w))
        assert arc.get_xdata()[-1] == pytest.approx(math.sin(p * w), abs=1e-6)
    plt.close(ax.figure)


def test_learning_curves_draw_each_entrys_mean_at_its_steps():
    curve = {"steps": [2, 4, 6], "mean": [5.0, 3.0, 2.5], "std": [0.2, 0.1, 0.0]}
    entries = [
        {"curve": {**curve, "n": [3, 3, 3]}},
        {"summary": {}},  # recorded before curves were: left out
    ]
    ax = learning_curves(entries, labels=["rope", "old"], title="t")
    (line,) = ax.get_lines()[:1]
    x, y = line.get_data()
    assert list(x) == [2, 4, 6] and list(y) == [5.0, 3.0, 2.5]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rope"]
    segments = ax.containers[0].lines[2][0].get_segments()
    bars = [value for s in segments for value in s[:, 1]]  # low, high per step
    assert bars == pytest.approx([4.8, 5.2, 2.9, 3.1, 2.5, 2.5])
    assert ax.get_xlabel() == "training step"
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="2 entries but 1 labels"):
        learning_curves(entries, labels=["x"], title="")


def test_learning_curves_cut_the_bars_at_the_limits():
    """An accuracy's bars stop at 0 and 1 (chapter 11's passkey curves)."""
    curve = {"steps": [1, 2], "mean": [0.05, 0.95], "std": [0.2, 0.2], "n": [3, 3]}
    ax = learning_curves([{"curve": curve}], labels=["a"], title="", limits=(0, 1))
    segments = ax.containers[0].lines[2][0].get_segments()
    bars = [value for s in segments for value in s[:, 1]]
    assert bars == pytest.approx([0.0, 0.25, 0.75, 1.0])
    plt.close(ax.figure)


def test_self_attention_weights_are_the_heads_softmax():
    layer = SelfAttention(8, seed=1)
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    got = self_attention_weights(layer, x)
    want = attention_weights(x @ layer.w_q, x @ layer.w_k)
    assert torch.allclose(got, want.detach(), atol=1e-6)
    assert torch.allclose(got.sum(-1), torch.ones(5))


def test_word_order_panels_put_b_back_in_as_order_and_draw_the_difference():
    layer = SelfAttention(8, seed=0)
    generator = torch.Generator().manual_seed(0)
    words = ["w0", "w1", "w2", "w3"]
    embedding = torch.randn(4, 8, generator=generator)
    # B holds A's words in the order 2, 0, 3, 1 (not its own inverse)
    b_words = torch.tensor([2, 0, 3, 1])
    order = b_words.argsort()  # A's word i is B's word order[i]
    assert [b_words[j].item() for j in order] == [0, 1, 2, 3]
    positions = torch.randn(4, 8, generator=generator)
    inputs = {
        "without": (embedding, embedding[b_words]),
        "with": (embedding + positions, embedding[b_words] + positions),
    }
    fig, largest = word_order_panels(layer, inputs, words, order)
    images = {
        ax.get_title(): torch.as_tensor(ax.images[0].get_array().data)
        for ax in fig.axes
        if ax.images
    }
    a = self_attention_weights(layer, embedding)
    # without positions B's weights, put back in A's order, are A's
    assert torch.allclose(images["without\nsentence B, in A's order"], a)
    assert largest["without"] < 1e-6
    # with positions they differ, and the bottom panel is the difference
    a_pos = self_attention_weights(layer, embedding + positions)
    b_pos = self_attention_weights(layer, inputs["with"][1])[order][:, order]
    difference = (a_pos - b_pos).abs()
    assert largest["with"] == pytest.approx(difference.max().item())
    title = f"with\n|A - B|, largest {largest['with']:.2f}"
    assert torch.allclose(images[title], difference)
    # the two difference panels share one colour scale
    gaps = [ax.images[0] for ax in fig.axes if "|A - B|" in ax.get_title()]
    assert {image.get_clim() for image in gaps} == {(0, largest["with"])}
    plt.close(fig)


def test_turning_arrows_point_at_each_vector_on_the_first_ones_circle():
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-0.6, 0.8]])
    ax = turning_arrows(vectors, ["a", "b", "c"], title="t")
    tips = [a.xy for a in ax.findobj(matplotlib.text.Annotation) if a.arrow_patch]
    assert tips == [pytest.approx(v) for v in vectors.tolist()]
    labels = {t.get_text(): t.get_position() for t in ax.texts if t.get_text()}
    assert labels["c"] == pytest.approx((-0.672, 0.896))
    (circle,) = ax.get_lines()
    x, y = circle.get_data()
    assert (x**2 + y**2) == pytest.approx([1.0] * len(x), abs=1e-6)
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="N labels"):
        turning_arrows(vectors, ["a"], title="t")


def test_rope_base_panels_draw_the_wavelengths_and_the_window_means():
    distances = torch.arange(0, 11, dtype=torch.float64)
    edges = [1, 5, 11]
    bases = {
        "base 10": (torch.tensor([1.0, 10.0]), distances * 2, torch.tensor([3.0, 4.0])),
        "base 100": (torch.tensor([1.0, 99.0]), distances, torch.tensor([1.0, 2.0])),
    }
    fig = rope_base_panels(bases, distances, edges)
    top, bottom = fig.axes
    assert [line.get_ydata().tolist() for line in top.get_lines()] == [
        [1.0, 10.0],
        [1.0, 99.0],
    ]
    steps = [patch for patch in bottom.patches]
    assert len(steps) == 2 and steps[0].get_label() == "base 10"
    assert steps[0].get_data().values.tolist() == [3.0, 4.0]
    assert steps[0].get_data().edges.tolist() == edges
    # the raw curves, faint, from distance 1 on (the log axis has no 0)
    faint = [line for line in bottom.get_lines() if line.get_alpha() == 0.15]
    assert faint[0].get_xdata()[0] == 1 and bottom.get_xscale() == "log"
    plt.close(fig)
    with pytest.raises(ValueError, match="1 means for 2 windows"):
        rope_base_panels({"x": (distances, distances, [1.0])}, distances, edges)


def test_line_plot_can_put_its_legend_below_and_use_log_axes():
    x = torch.tensor([1.0, 10.0, 100.0])
    curves = {"a": x, "b": 2 * x}
    ax = line_plot(x, curves, title="t", xlabel="x", ylabel="y", logx=True, logy=True)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    plt.close(ax.figure)
    ax = line_plot(x, curves, title="t", xlabel="x", ylabel="y", legend="below")
    legend = ax.get_legend()
    # under the axes: anchored below their bottom edge
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.y0 < 0 and [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    plt.close(ax.figure)


@pytest.mark.parametrize("constrained", [False, True])
def test_legend_below_sits_under_the_x_label_and_keeps_the_axes_width(constrained):
    fig, axes = plt.subplots(2, 1, figsize=(6.4, 7), constrained_layout=constrained)
    for ax in axes:
        for name in ("one curve", "another", "a third"):
            ax.plot([0, 1], [0, 1], label=name)
        ax.set(xlabel="a label under the ticks", title="t")
        legend_below(ax)
    fig.canvas.draw()  # the layout engine has placed everything
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        legend = ax.get_legend().get_window_extent(renderer)
        label = ax.xaxis.label.get_window_extent(renderer)
        frame = ax.get_window_extent(renderer)
        # below the x label (and so the ticks), centred on the axes, within them
        assert legend.y1 <= label.y0 + 1
        assert abs((legend.x0 + legend.x1) / 2 - (frame.x0 + frame.x1) / 2) < 2
        assert legend.x0 >= frame.x0 - 1 and legend.x1 <= frame.x1 + 1
        # three short names: one row
        assert legend.height < 2 * label.height + 10
    if constrained:  # the layout makes room: clear of the bottom axes' title
        top = axes[0].get_legend().get_window_extent(renderer)
        assert top.y0 >= axes[1].title.get_window_extent(renderer).y1 - 1
    plt.close(fig)
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="no labelled artist"):
        legend_below(ax)
    plt.close("all")


def test_heatmap_stack_draws_each_table_in_its_own_titled_panel():
    tables = {"one": torch.eye(3), "two": torch.ones(2, 4), "three": torch.zeros(2, 2)}
    fig, axes = heatmap_stack(tables, columns=2, xlabel="key", cmap="viridis")
    shown = [ax for ax in axes.flat if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["one", "two", "three"]
    assert shown[1].images[0].get_array().tolist() == torch.ones(2, 4).tolist()
    assert all(ax.get_xlabel() == "key" for ax in shown)
    assert shown[0].images[0].get_cmap().name == "viridis"
    # four panels for three tables: the last hidden; the figure no wider than 8 in
    assert axes.shape == (2, 2) and not axes[1, 1].get_visible()
    assert fig.get_figwidth() <= 8
    plt.close(fig)


def test_every_scheme_has_its_own_colour_in_every_curve():
    """One colour per scheme in every figure: each registered scheme has a colour of
    its own, and the curve helpers draw a scheme's label in it."""
    assert set(scheme_names()) <= set(SCHEME_COLOURS)
    assert len(set(SCHEME_COLOURS.values())) == len(SCHEME_COLOURS)
    summary = {"16": {"mean": 2.0, "std": 0.1}, "32": {"mean": 2.5, "std": 0.1}}
    entry = {
        "summary": summary,
        "runs": [run(0, [1.0, 2.0])],
        "curve": {"steps": [1, 2], "mean": [3.0, 2.0], "std": [0.0, 0.0]},
    }
    for draw in (
        lambda: length_curves(
            [entry] * 2, labels=["t5", "mine"], train_length=16, title=""
        ),
        lambda: position_curves(
            [entry] * 2,
            labels=["t5", "mine"],
            train_length=16,
            position_bin=8,
            title="",
        ),
        lambda: learning_curves([entry] * 2, labels=["t5", "mine"], title=""),
    ):
        ax = draw()
        # a curve is a line, or an error-bar container whose first line is the curve
        drawn = [(c.get_label(), c.lines[0]) for c in ax.containers]
        drawn += [(line.get_label(), line) for line in ax.get_lines()]
        colours = {
            label: matplotlib.colors.to_hex(line.get_color())
            for label, line in drawn
            if label in ("t5", "mine")
        }
        assert colours["t5"] == SCHEME_COLOURS["t5"]
        assert colours["mine"] not in SCHEME_COLOURS.values()  # none of theirs
        plt.close(ax.figure)


def test_the_context_gain_is_drawn_against_zero():
    entry = {"runs": [{"seed": 0, "position_gain": [0.0, 0.0, -0.2, 0.4]}]}
    ax = position_curves(
        [entry],
        labels=["alibi"],
        train_length=8,
        position_bin=4,
        title="",
        key="position_gain",
        ylabel="gain",
    )
    curve = next(line for line in ax.get_lines() if line.get_label() == "alibi")
    assert list(curve.get_ydata()) == [0.0, 0.0, -0.2, 0.4]
    zero = [line for line in ax.get_lines() if list(line.get_ydata()) == [0, 0]]
    assert zero and ax.get_ylabel() == "gain"
    plt.close(ax.figure)


class _Point:
    def __init__(self, scheme, rate, multiplier, bpb):
        self.scheme, self.learning_rate = scheme, rate
        self.position_lr_multiplier, self.bpb = multiplier, bpb


def test_the_sweep_grid_shows_every_setting_and_frames_each_scheme_s_best():
    points = [
        _Point("rope", 1e-3, 1.0, 2.3),
        _Point("rope", 3e-3, 1.0, 2.1),
        _Point("t5", 1e-3, 1.0, 2.9),
        _Point("t5", 3e-3, 1.0, 2.5),
        _Point("t5", 3e-3, 30.0, 2.2),
    ]
    ax, labels = sweep_grid(points, schemes=["rope", "t5"], title="")
    assert labels == ["rope", "t5", "t5, position ×30"]
    grid = ax.images[0].get_array()
    assert grid[0].tolist() == [2.3, 2.1] and grid[1].tolist() == [2.9, 2.5]
    assert bool(grid.mask[2, 0]) and grid[2, 1] == 2.2  # ×30 at 1e-3: not trained
    assert sorted(t.get_text() for t in ax.texts) == [
        "2.10",
        "2.20",
        "2.30",
        "2.50",
        "2.90",
    ]
    framed = [(p.get_x() + 0.5, p.get_y() + 0.5) for p in ax.patches]
    assert framed == [(1.0, 0.0), (1.0, 2.0)]  # rope at 3e-3, t5 ×30 at 3e-3
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="no sweep point of scheme 'alibi'"):
        sweep_grid(points, schemes=["alibi"], title="")


def test_stacked_bars_put_each_part_after_the_last_and_label_the_totals():
    rows = {
        "nope": {"position": 0.0, "attention": 2.0, "rest": 6.0},
        "rope": {"attention": 2.5, "position": 3.0, "rest": 6.5},
    }
    ax = stacked_bars(rows, title="a step", xlabel="ms")
    drawn = {}
    for container in ax.containers:
        for label, patch in zip(["rope", "nope"], container.patches, strict=True):
            drawn[label, container.get_label()] = (patch.get_x(), patch.get_width())
    # the first row's parts, left to right, in every bar; the first row on top
    assert drawn["nope", "position"] == (0.0, 0.0)
    assert drawn["nope", "attention"] == (0.0, 2.0)
    assert drawn["nope", "rest"] == (2.0, 6.0)
    assert drawn["rope", "attention"] == (3.0, 2.5)
    assert drawn["rope", "rest"] == (5.5, 6.5)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rope", "nope"]
    assert sorted(t.get_text().strip() for t in ax.texts) == ["12.0", "8.0"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["position", "attention", "rest"]
    colours = {c.get_label(): c.patches[0].get_facecolor() for c in ax.containers}
    assert len(set(colours.values())) == 3  # a colour per part
    plt.close(ax.figure)
    grey = {"rest": "#d0d0d0"}
    ax = stacked_bars(rows, title="", xlabel="", colours=grey)
    drawn = {c.get_label(): c.patches[0].get_facecolor() for c in ax.containers}
    assert matplotlib.colors.to_hex(drawn["rest"]) == "#d0d0d0"
    assert matplotlib.colors.to_hex(drawn["position"]) == OTHER_COLOURS[1]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="row 'rope' has parts"):
        stacked_bars({"nope": {"a": 1.0}, "rope": {"b": 1.0}}, title="", xlabel="")
    with pytest.raises(ValueError, match="at least one row"):
        stacked_bars({}, title="", xlabel="")


def test_wavelength_stretch_panels_draw_wavelengths_and_old_over_new():
    plain = torch.tensor([1.0, 0.1, 0.01])
    scaled = {"a": plain / torch.tensor([1.0, 2.0, 4.0]), "b": plain / 8}
    top, bottom = wavelength_stretch_panels(
        plain, scaled, lengths={"L": 64, "sL": 512}, factor=8.0
    )
    curves = {line.get_label(): line.get_ydata() for line in top.get_lines()}
    two_pi = 2 * math.pi
    assert curves["RoPE"] == pytest.approx([two_pi, 10 * two_pi, 100 * two_pi])
    assert curves["a"] == pytest.approx([two_pi, 20 * two_pi, 400 * two_pi])
    stretch = {line.get_label(): line.get_ydata() for line in bottom.get_lines()}
    assert stretch["a"] == pytest.approx([1.0, 2.0, 4.0])
    assert stretch["b"] == pytest.approx([8.0] * 3)
    # dotted lines at the two lengths (top) and at the factor (bottom)
    dotted = [line.get_ydata()[0] for line in top.get_lines() if line.get_ls() == ":"]
    assert dotted == [64, 512]
    assert [line.get_ydata()[0] for line in bottom.get_lines()][-1] == 8.0
    assert top.get_yscale() == bottom.get_yscale() == "log"
    plt.close(top.figure)
    with pytest.raises(ValueError, match=r"b: \(2,\) frequencies for \(3,\) pairs"):
        wavelength_stretch_panels(plain, {"b": plain[:2]}, lengths={}, factor=2.0)


def test_logit_scale_panels_draw_the_factor_and_the_leading_keys_weight():
    keys = torch.tensor([1, 4, 16, 64])
    scales = {"none": torch.ones(4), "double": torch.full((4,), 2.0)}
    top, bottom = logit_scale_panels(keys, scales, lead=math.log(4))
    assert [line.get_ydata().tolist() for line in top.get_lines()] == [
        [1.0] * 4,
        [2.0] * 4,
    ]
    none, double = (line.get_ydata() for line in bottom.get_lines())
    # e^lead = 4: the key gets 4 / (4 + n - 1); with the logits doubled, 16 / (16 + n - 1)
    assert none == pytest.approx([1.0, 4 / 7, 4 / 19, 4 / 67])
    assert double == pytest.approx([1.0, 16 / 19, 16 / 31, 16 / 79])
    assert top.get_xscale() == bottom.get_xscale() == "log"
    plt.close(top.figure)
    with pytest.raises(ValueError, match="give two axes"):
        logit_scale_panels(keys, scales, lead=1.0, axes=[top])
