"""Choosing each scheme's training from the tuning sweeps (chapter 9)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pe_tutorial.experiments.configuration.tuning import (
    SweepPoint,
    best_training,
    sweep_points,
    tuned_table,
)


def _entry(scheme, rate, bpb, *, multiplier=None, norm="pre", changes=None):
    training = {} if multiplier is None else {"position_lr_multiplier": multiplier}
    return {
        "scheme": scheme,
        "norm": norm,
        "absolute": "input",
        "corpus": "stdlib",
        "learning_rate": rate,
        "changes": changes or {},
        "training": training,
        "summary": {"128": {"mean": bpb, "std": 0.0, "n": 1}, "256": None},
    }


def _record(name, entries, steps=800):
    return {
        "preset": name,
        "settings": {
            "train": {"seq_len": 128, "steps": steps, "batch_size": 16},
            "model": {"d_model": 128, "num_layers": 3},
            "corpus": "stdlib",
        },
        "language_model": entries,
    }


RATES = _record(
    "tuning",
    [
        _entry("rope", 1e-3, 2.28),
        _entry("rope", 3e-3, 2.12),
        _entry("rope", 1e-2, 2.34),
        _entry("t5", 3e-3, 2.48),
        _entry("t5", 1e-2, 2.51),
        # not a plain model of the sweep: left out
        _entry("t5", 3e-3, 1.0, norm="post"),
        _entry("t5", 3e-3, 1.0, changes={"t5_max_distance": 1024}),
    ],
)
POSITION = _record(
    "tuning-position",
    [
        _entry("t5", 3e-3, 2.20, multiplier=10.0),
        _entry("t5", 1e-2, 2.10, multiplier=30.0),
    ],
)


def test_the_best_setting_is_the_lowest_score_at_L_over_both_sweeps():
    points = sweep_points(RATES, POSITION)
    assert len(points) == 7
    assert SweepPoint("t5", 1e-2, 30.0, 2.10, 1) in points
    best = best_training(points)
    assert best["rope"] == SweepPoint("rope", 3e-3, 1.0, 2.12, 1)
    assert best["t5"].bpb == 2.10
    # written as a preset's [tuned] table: the multiplier only where it is not 1
    assert tuned_table(best) == {
        "rope": {"learning_rate": 3e-3},
        "t5": {"learning_rate": 1e-2, "position_lr_multiplier": 30.0},
    }
    # without the position sweep, T5's best is its plain rate
    assert best_training(sweep_points(RATES))["t5"].learning_rate == 3e-3


def test_records_of_other_budgets_or_the_same_setting_twice_are_refused():
    with pytest.raises(ValueError, match="another budget"):
        sweep_points(RATES, _record("longer", [], steps=1600))
    with pytest.raises(ValueError, match="settings trained in two records"):
        sweep_points(RATES, RATES)
    with pytest.raises(ValueError, match="give the tuning records"):
        sweep_points()


@pytest.mark.parametrize(
    "name", ["tuning", "tuning-position", "tuning-edge", "tuning-below"]
)
def test_the_tuning_records_are_of_their_presets_as_they_stand(name):
    """Chapter 9 chooses every scheme's rates from these records: a sweep changed
    since its recording must be recorded again."""
    from pe_tutorial.experiments import PRESETS, load_results
    from pe_tutorial.lm.train import TrainConfig

    record = load_results(name)
    assert record is not None, (
        f"record it: python -m pe_tutorial.experiments --preset {name} --jobs 2 --record"
    )
    preset, settings = PRESETS[name], record["settings"]
    assert TrainConfig(**settings["train"]) == preset.train
    assert {k: settings["model"][k] for k in preset.model} == preset.model
    assert settings["sweep"] == {path: list(values) for path, values in preset.sweep}
    points = sweep_points(record)
    trained = {(p.scheme, p.learning_rate, p.position_lr_multiplier) for p in points}
    rates = dict(preset.sweep).get("train.learning_rate", (preset.train.learning_rate,))
    multipliers = dict(preset.sweep).get("train.position_lr_multiplier", (1.0,))
    assert trained == {
        (s, r, m) for s in preset.schemes for r in rates for m in multipliers
    }


def test_the_tuned_preset_trains_each_scheme_at_its_sweeps_best():
    """Chapter 9 ranks the schemes at the rates the sweeps chose: the tuned
    preset's [tuned] table is what best_training reads from the three records
    (learning rate, and the position parameters' rate where it is not 1), for
    every scheme the preset trains."""
    from pe_tutorial.experiments import PRESETS, load_results

    records = [
        load_results(name) for name in ("tuning", "tuning-position", "tuning-edge")
    ]
    assert all(records), "record the tuning sweeps first (README: --preset tuning)"
    chosen = tuned_table(best_training(sweep_points(*records)))
    preset = PRESETS["tuned"]
    assert {s: dict(fields) for s, fields in preset.tuned} == chosen
    assert set(preset.schemes) <= set(chosen)


@pytest.mark.parametrize("name", ["heldout", "heldout-long", "long-budget"])
def test_the_held_out_presets_train_at_the_four_sweeps_best(name):
    """Chapter 9's fourth edition ranks at the settings all four sweeps chose (the
    grid below 1 times the rate included); RoPE at the input takes RoPE's."""
    from pe_tutorial.experiments import PRESETS, load_results

    sweeps = ("tuning", "tuning-position", "tuning-edge", "tuning-below")
    records = [load_results(sweep) for sweep in sweeps]
    assert all(records), "record the tuning sweeps first (README: --preset tuning)"
    chosen = tuned_table(best_training(sweep_points(*records)))
    chosen["rope-input"] = chosen["rope"]
    preset = PRESETS[name]
    tuned = {s: dict(fields) for s, fields in preset.tuned}
    assert {s: tuned[s] for s in preset.schemes} == {
        s: chosen[s] for s in preset.schemes
    }


def test_the_long_budget_rate_check_is_the_long_budget_one_grid_step_lower():
    """long-budget-rates (issue 66) asks whether each tuned rate is still the best at
    3200 steps: the same run on long-budget's first seed, each scheme's peak rate one
    step lower on the tuning grid, its position multiplier kept."""
    from pe_tutorial.experiments import PRESETS

    grid = (1e-3, 3e-3, 1e-2, 3e-2)
    long, lower = PRESETS["long-budget"], PRESETS["long-budget-rates"]
    assert lower.seeds == long.seeds[:1]
    # its own name, seed and rates; no families (one seed gives no verdict); the
    # rest is long-budget's (the parent test below, its entry for this run)
    assert not lower.families
    tuned, checked = dict(long.tuned), dict(lower.tuned)
    assert set(checked) == set(tuned) == set(long.schemes)
    for scheme in long.schemes:
        mine, theirs = dict(tuned[scheme]), dict(checked[scheme])
        step_down = grid[grid.index(mine.pop("learning_rate")) - 1]
        assert theirs.pop("learning_rate") == step_down, scheme
        assert theirs == mine, scheme


def test_the_sinusoidal_rate_run_is_the_long_budget_at_the_checked_rate():
    """long-budget-sinusoidal (issue 66) trains the sinusoidal table at the rate the
    rate check found better, on the long budget's seeds the check did not use, and
    is otherwise the long budget: chapter 9 pairs it with long-budget by seed."""
    from pe_tutorial.experiments import PRESETS

    long, checked = PRESETS["long-budget"], PRESETS["long-budget-rates"]
    run = PRESETS["long-budget-sinusoidal"]
    assert run.schemes == ("sinusoidal",)
    assert run.seeds == long.seeds[1:] and not set(run.seeds) & set(checked.seeds)
    assert dict(run.tuned) == {"sinusoidal": dict(checked.tuned)["sinusoidal"]}
    assert dict(run.tuned)["sinusoidal"] != dict(long.tuned)["sinusoidal"]
    # the rest is long-budget's: the parent test below, its entry for this run


@pytest.mark.parametrize(
    ("name", "parent", "differ"),
    [
        # chapter 9's rate check and its sinusoidal follow-up (issue 66)
        ("long-budget-rates", "long-budget", ("seeds", "tuned", "families")),
        (
            "long-budget-sinusoidal",
            "long-budget",
            ("schemes", "seeds", "tuned", "families"),
        ),
        # three more seeds of RoPE and the Llama 4 pattern (issue 68)
        ("frontier-multikey-seeds", "frontier-multikey", ("seeds", "schemes")),
        # the streaming run's RoPE models again, for the sink probe
        ("streaming-probe", "streaming", ("schemes",)),
    ],
)
def test_added_runs_repeat_their_parents_but_for_what_they_name(name, parent, differ):
    """Chapters 9 and 12 pair these records with their parents' by seed, so nothing
    but the named fields may differ (seen failing with a changed step count)."""
    from pe_tutorial.experiments import PRESETS

    child, original = PRESETS[name], PRESETS[parent]
    assert all(getattr(child, f) != getattr(original, f) for f in differ)
    same = replace(
        child, name=original.name, **{f: getattr(original, f) for f in differ}
    )
    assert same == original


def test_the_narrow_controls_are_the_frontier_runs_text_models_at_windows_of_8():
    """frontier-narrow (issue 68): the frontier run's model, training, seeds and
    lengths, windows of 8 bytes (W/L = 1/16) in place of 32, text only."""
    from pe_tutorial.experiments import PRESETS

    narrow, frontier = PRESETS["frontier-narrow"], PRESETS["frontier"]
    assert narrow.model == {**frontier.model, "local_window": 8}
    assert narrow.train.seq_len // narrow.model["local_window"] == 16
    for field in ("train", "seeds", "lengths", "eval_windows", "corpus"):
        assert getattr(narrow, field) == getattr(frontier, field), field
    assert (narrow.train_bytes, narrow.validation_bytes) == (
        frontier.train_bytes,
        frontier.validation_bytes,
    )
    assert not narrow.passkey and set(narrow.schemes) == {"local-global", "irope"}
