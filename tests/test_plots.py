"""Chapter 9's figure helpers draw what the results hold."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from pe_tutorial.plots import length_curves, passkey_grid, position_curves  # noqa: E402


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
