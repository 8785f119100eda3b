"""The figure helpers draw what the results and the formulas hold."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from pe_tutorial.encodings.rope import rope_frequencies  # noqa: E402
from pe_tutorial.pages.plots import (  # noqa: E402
    length_curves,
    passkey_grid,
    passkey_grids,
    position_curves,
    rate_sweep,
    rope_scaling_ratios,
    shift_arcs,
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
