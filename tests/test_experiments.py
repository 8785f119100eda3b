"""The experiments runner on a tiny preset, its CLI, and the recorded results that ship with the package."""

from __future__ import annotations

import functools
import json
import tomllib
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from pe_tutorial import experiments
from pe_tutorial.experiments import (
    PRESETS,
    load_results,
    main,
    results_path,
    run_experiments,
    summarise,
)
from pe_tutorial.lm.model import SCHEMES
from pe_tutorial.lm.train import TrainConfig
from pe_tutorial.pages.glue import glue

ROOT = Path(__file__).resolve().parents[1]

TINY = replace(
    PRESETS["quick"],
    name="tiny",
    model={"d_model": 16, "num_heads": 2, "num_layers": 1},
    train=TrainConfig(steps=3, batch_size=2, seq_len=16, warmup_steps=1),
    seeds=(0, 1),
    multiples=(1, 2),
    eval_windows=2,
    train_bytes=20_000,
    validation_bytes=5_000,
    schemes=("learned", "rope", "alibi"),
    post_norm_schemes=("alibi",),
    every_layer_schemes=("learned",),
    extension_methods=("linear", "dynamic"),
    finetune_methods=(None, "yarn"),
    finetune_steps=2,
    lookback={"seq_len": 8, "lookback": 2, "steps": 3, "num_symbols": 4},
    passkey={
        "seq_len": 12,
        "steps": 3,
        "batch_size": 2,
        "key_len": 2,
        "depths": (0.0, 1.0),
    },
)


@pytest.fixture(scope="module")
def tiny_results():
    return run_experiments(TINY, device="cpu", progress=False)


def test_tiny_preset_runs_every_experiment(tiny_results):
    r = tiny_results
    variants = [(e["scheme"], e["norm"], e["absolute"]) for e in r["language_model"]]
    assert variants == [
        ("learned", "pre", "input"),
        ("rope", "pre", "input"),
        ("alibi", "pre", "input"),
        ("alibi", "post", "input"),
        ("learned", "pre", "every_layer"),
    ]
    assert [(e["method"], e["stage"]) for e in r["rope_extension"]] == [
        ("none", "zero-shot"),
        ("linear", "zero-shot"),
        ("dynamic", "zero-shot"),
        ("none", "fine-tuned"),
        ("yarn", "fine-tuned"),
    ]
    assert [e["scheme"] for e in r["lookback"]] == ["learned", "rope", "alibi"]
    json.dumps(r)  # JSON-ready


def test_a_learned_table_is_reported_as_null_with_a_note(tiny_results):
    learned = tiny_results["language_model"][0]
    for run in learned["runs"]:
        assert run["bpb"]["16"] is not None
        assert run["bpb"]["32"] is None
        assert "cannot encode 32 positions" in run["notes"]["32"]
    assert learned["summary"]["32"] is None
    lookback = tiny_results["lookback"][0]
    assert lookback["summary"]["16"] is None


def test_every_run_records_its_train_split_score_and_its_loss_by_position(
    tiny_results,
):
    for entry in tiny_results["language_model"]:
        for run in entry["runs"]:
            assert 0 < run["train_split_bpb"] < 9
            curve = run["position_bpb"]
            if entry["scheme"] == "learned":
                assert curve is None  # it cannot read the longest window
                continue
            # bins of one position (training length 16 / 16) over the window of 32
            assert len(curve) == 32
            assert sum(curve) / 32 == pytest.approx(run["bpb"]["32"], abs=1e-3)
    assert tiny_results["settings"]["eval_segments"] == TINY.eval_windows
    assert tiny_results["settings"]["position_bin"] == 1


def test_the_scored_bytes_are_spread_over_the_validation_split():
    runner = experiments._Runner(TINY, device=torch.device("cpu"), progress=False)
    validation = runner.corpus.validation
    assert runner.segments.shape == (TINY.eval_windows, 32 + 1)
    # the second segment starts in the second half of the split
    stream = bytes(validation.tolist())
    starts = [stream.find(bytes(row.tolist())) for row in runner.segments]
    assert starts[0] < validation.numel() // 2 <= starts[1]


def test_band_ablation_changes_nothing_at_the_training_length(tiny_results):
    plain = tiny_results["language_model"][1]  # rope
    assert plain["scheme"] == "rope"
    modes = {e["mode"]: e for e in tiny_results["rope_bands"]}
    assert set(modes) == {"hold-slow", "hold-fast", "drop-slow"}
    for mode in ("hold-slow", "hold-fast"):
        for run, base in zip(modes[mode]["runs"], plain["runs"], strict=True):
            assert run["bpb"]["16"] == pytest.approx(base["bpb"]["16"], abs=1e-9)
            assert run["bpb"]["32"] != pytest.approx(base["bpb"]["32"], abs=1e-9)


def test_a_learned_table_extended_by_copies_reads_longer_windows(tiny_results):
    plain = tiny_results["language_model"][0]
    stages = {e["stage"]: e for e in tiny_results["learned_extension"]}
    zero_shot = stages["copy/zero-shot"]["runs"]
    for run, base in zip(zero_shot, plain["runs"], strict=True):
        # rows 0..15 are the trained ones: the training length scores the same
        assert run["bpb"]["16"] == pytest.approx(base["bpb"]["16"], abs=1e-9)
        assert run["bpb"]["32"] is not None
    tuned = stages["copy/fine-tuned"]["runs"]
    assert all(run["bpb"]["32"] is not None for run in tuned)


def test_learning_rates_and_ablations_add_variants():
    preset = replace(
        TINY,
        learning_rate_schemes=("rope",),
        learning_rates=(1e-3,),
        ablations=(("alibi", (("num_layers", 2),)),),
    )
    runner = experiments._Runner(preset, device=torch.device("cpu"), progress=False)
    keys = [v.key for v in runner.variants()]
    assert "rope/pre/input/lr=0.001" in keys and "rope/post/input/lr=0.001" in keys
    assert "alibi/pre/input/num_layers=2" in keys
    ablated = experiments.Variant("alibi", changes=(("num_layers", 2),))
    assert runner.variant_config(ablated).num_layers == 2
    swept = experiments.Variant("rope", "post", learning_rate=1e-3)
    assert runner.variant_training(swept).learning_rate == 1e-3
    assert len({unit[0] for unit in runner.plan()}) == len(runner.plan())


def test_passkey_accuracy_by_length_and_depth(tiny_results):
    entries = {e["scheme"]: e for e in tiny_results["passkey"]}
    assert list(entries) == ["learned", "rope", "alibi"]
    for run in entries["rope"]["runs"]:
        assert set(run["by_depth"]) == {"12", "24"}
        assert set(run["by_depth"]["12"]) == {"0.0", "1.0"}
        depths = run["by_depth"]["24"].values()
        assert run["accuracy"]["24"] == pytest.approx(sum(depths) / 2)
        assert all(0 <= a <= 1 for a in depths)
    assert entries["learned"]["summary"]["24"] is None
    stages = [(e["method"], e["stage"]) for e in tiny_results["passkey_extension"]]
    assert stages == [(e["method"], e["stage"]) for e in tiny_results["rope_extension"]]
    assert [r["variant"] for r in summarise(tiny_results, "passkey")] == list(entries)


def test_natural_language_variants_train_and_score_on_their_own_corpus(
    tmp_path, monkeypatch
):
    for i in range(30):
        (tmp_path / f"play-{i:02d}.md").write_text(
            f"# Play {i}\n\n" + "**A**  \nTo be, or not to be.\n\n" * 40
        )
    shakespeare = functools.partial(experiments.shakespeare_corpus, root=tmp_path)
    monkeypatch.setitem(experiments.CORPORA, "shakespeare", shakespeare)
    preset = replace(
        TINY,
        schemes=("rope",),
        post_norm_schemes=(),
        every_layer_schemes=(),
        language_schemes=("rope",),
        lookback={},
        passkey={},
        finetune_methods=(),
        extension_methods=(),
    )
    results = run_experiments(preset, device="cpu", progress=False)
    entries = results["language_model"]
    assert [(e["scheme"], e["corpus"]) for e in entries] == [
        ("rope", "stdlib"),
        ("rope", "shakespeare"),
    ]
    # a line repeated forty times is easy to predict; Python source is not
    assert entries[1]["summary"]["16"]["mean"] < entries[0]["summary"]["16"]["mean"]
    assert "30 plays" in results["metadata"]["corpora"]["shakespeare"]["source"]
    assert summarise(results)[1]["variant"] == "shakespeare: rope"


def test_rows_print_as_aligned_columns():
    rows = [
        {"variant": "rope", "64": "2.100 ± 0.010", "128": "2.500 ± 0.020"},
        {"variant": "learned (post-norm)", "64": "2.300", "128": "n/a"},
    ]
    lines = experiments.format_rows(rows, first=20, width=15).splitlines()
    assert lines[0] == " " * 20 + f"{'64':>15}{'128':>15}"
    assert lines[2] == f"{'learned (post-norm)':20}{'2.300':>15}{'n/a':>15}"
    assert len({len(line) for line in lines}) == 1
    # by default the first column fits the longest name, plus two spaces
    auto = experiments.format_rows(rows).splitlines()
    assert auto[2] == f"{'learned (post-norm)':21}{'2.300':>15}{'n/a':>15}"


def test_summaries_are_mean_and_spread_of_the_seeds(tiny_results):
    rope = tiny_results["language_model"][1]
    values = [run["bpb"]["16"] for run in rope["runs"]]
    stats = rope["summary"]["16"]
    assert stats["n"] == 2
    assert stats["mean"] == pytest.approx(sum(values) / 2)
    assert stats["std"] == pytest.approx(abs(values[0] - values[1]) / 2**0.5)
    # plain zero-shot RoPE is the trained model itself
    plain = tiny_results["rope_extension"][0]["summary"]
    assert plain["16"]["mean"] == pytest.approx(stats["mean"])


def test_metadata_says_where_and_when(tiny_results):
    meta = tiny_results["metadata"]
    for key in ("date", "device", "device_name", "torch", "python", "wall_seconds"):
        assert meta[key]
    assert meta["corpus"]["train_bytes"] == 20_000
    assert tiny_results["settings"]["lengths"] == [16, 32]


def test_summarise_rows(tiny_results):
    rows = summarise(tiny_results)
    assert rows[0]["variant"] == "learned" and rows[0]["32"] == "n/a"
    assert "±" in rows[1]["16"]
    assert rows[3]["variant"] == "alibi (post-norm)"
    assert rows[4]["variant"] == "learned (every layer)"
    assert (
        summarise(tiny_results, "rope_extension")[4]["variant"] == "yarn (fine-tuned)"
    )
    with pytest.raises(ValueError, match="unknown section"):
        summarise(tiny_results, "nope")
    chosen = tiny_results["language_model"][3:5]
    assert [r["variant"] for r in summarise(tiny_results, entries=chosen)] == [
        "alibi (post-norm)",
        "learned (every layer)",
    ]
    with pytest.raises(ValueError, match="entries must be entries of"):
        summarise(tiny_results, "lookback", entries=chosen)


def test_cli_rejects_unknown_preset_and_device(capsys):
    with pytest.raises(SystemExit):
        main(["--preset", "huge"])
    assert (
        "choose one of ('quick', 'standard', 'frontier', 'full')"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["--device", "tpu"])
    assert "unknown device 'tpu'" in capsys.readouterr().err


def test_cli_writes_json_and_records(tmp_path, monkeypatch):
    recorded = tmp_path / "recorded.json"
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    monkeypatch.setattr(experiments, "results_path", lambda preset: recorded)
    out = tmp_path / "out.json"
    assert (
        main(["--preset", "quick", "--json", str(out), "--record", "--no-progress"])
        == 0
    )
    assert json.loads(out.read_text())["preset"] == "tiny"
    assert recorded.read_text() == out.read_text()


def without_times(results: dict) -> dict:
    """The results as their JSON file holds them, less the metadata (times, dates)."""
    as_json = json.loads(json.dumps(results))
    return {key: value for key, value in as_json.items() if key != "metadata"}


def test_a_stopped_run_resumed_gives_the_same_results(
    tmp_path, monkeypatch, tiny_results
):
    """Stop after three finished units; --resume reads them back and runs the rest."""
    partial = tmp_path / "run.json.partial"
    save = experiments.RunFile.save
    saved = []

    def save_then_stop(self, key, fingerprint, unit, seconds):
        save(self, key, fingerprint, unit, seconds)
        saved.append(key)
        if len(saved) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(experiments.RunFile, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run_experiments(TINY, device="cpu", progress=False, partial=partial)
    assert set(json.loads(partial.read_text())["units"]) == set(saved)

    monkeypatch.setattr(experiments.RunFile, "save", save)
    ran = []
    monkeypatch.setattr(
        experiments._Runner,
        "language_model_unit",
        _recording(experiments._Runner.language_model_unit, ran),
    )
    resumed = run_experiments(
        TINY, device="cpu", progress=False, partial=partial, resume=True
    )
    # five variants of two seeds: only the seven not finished before the stop
    assert len(ran) == 5 * len(TINY.seeds) - 3
    assert without_times(resumed) == without_times(tiny_results)


def _recording(method, calls):
    def wrapper(self, *args):
        calls.append(args)
        return method(self, *args)

    return wrapper


def test_a_unit_recorded_with_other_settings_is_run_again(tmp_path, monkeypatch):
    partial = tmp_path / "run.json.partial"
    run_experiments(TINY, device="cpu", progress=False, partial=partial)
    stored = json.loads(partial.read_text())
    assert len(stored["units"]) == 5 * 2 + 3 * 2 + 3 * 2  # models, look-back, passkey
    # a longer lookback training changes only the lookback units' fingerprints
    longer = replace(TINY, lookback={**TINY.lookback, "steps": 4})
    ran = []
    monkeypatch.setattr(
        experiments._TaskUnits,
        "lookback",
        _recording(experiments._TaskUnits.lookback, ran),
    )
    monkeypatch.setattr(
        experiments._Runner,
        "language_model_unit",
        _recording(experiments._Runner.language_model_unit, ran),
    )
    run_experiments(longer, device="cpu", progress=False, partial=partial, resume=True)
    assert len(ran) == 6 and all(len(args) == 2 for args in ran)  # (scheme, seed)


def test_cli_resume_needs_a_run_to_resume_and_a_place_to_write(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--resume"])
    assert "add --record or --json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--json", str(tmp_path / "out.json"), "--resume"])
    assert "nothing to resume" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--json", str(tmp_path / "missing" / "out.json")])
    assert "does not exist" in capsys.readouterr().err


def test_cli_keeps_finished_units_and_removes_them_when_done(tmp_path, monkeypatch):
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    out = tmp_path / "out.json"
    seen = []
    save = experiments.RunFile.save

    def save_and_look(self, key, fingerprint, unit, seconds):
        save(self, key, fingerprint, unit, seconds)
        seen.append((tmp_path / "out.json.partial").is_file())

    monkeypatch.setattr(experiments.RunFile, "save", save_and_look)
    assert main(["--json", str(out), "--no-progress"]) == 0
    assert seen and all(seen)
    assert not (tmp_path / "out.json.partial").exists()


def test_the_recorded_standard_run_ships_with_the_package():
    results = load_results("standard")
    assert results is not None, (
        "record it: python -m pe_tutorial.experiments --preset standard --record"
    )
    assert results_path("standard").is_file()
    assert results["preset"] == "standard"
    assert len(results["settings"]["seeds"]) >= 3
    assert {e["scheme"] for e in results["language_model"]} == set(SCHEMES)
    assert results["metadata"]["device_name"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]["pe_tutorial"]
    assert "results/*.json" in package_data


def test_the_recorded_frontier_run_is_of_the_preset_as_it_stands():
    """Chapter 11 reads it: a preset changed since the recording must be recorded again."""
    results = load_results("frontier")
    assert results is not None, (
        "record it: python -m pe_tutorial.experiments --preset frontier --record"
    )
    preset = PRESETS["frontier"]
    settings = results["settings"]
    assert settings["train"] == json.loads(json.dumps(asdict(preset.train)))
    assert settings["seeds"] == list(preset.seeds) and len(preset.seeds) >= 3
    assert {k: settings["model"][k] for k in preset.model} == preset.model
    assert [e["scheme"] for e in results["language_model"]] == list(preset.schemes)
    assert [e["scheme"] for e in results["passkey"]] == list(preset.schemes)
    assert settings["passkey"] == json.loads(json.dumps(preset.passkey))
    assert results["metadata"]["device_name"] and results["metadata"]["date"]


def test_unknown_preset_in_the_api():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        load_results("huge")


def test_glue_without_myst_nb_runs_and_can_display(monkeypatch, capsys):
    import sys

    from pe_tutorial.pages.glue import GLUED

    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as on Colab
    glue("quiet", 1.5)
    assert capsys.readouterr().out == ""
    assert GLUED["quiet"] == 1.5  # kept for the reader, not dropped
    glue("shown", 2.5, display=True)
    assert "2.5" in capsys.readouterr().out
    with pytest.raises(ValueError, match="non-empty name"):
        glue("", 1)


def test_glue_with_myst_nb_hands_the_value_over(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: calls.append((name, value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    glue("x", 3)
    assert calls == [("x", 3, False)]


def test_summary_of_one_seed_has_no_spread_and_a_missing_value_gives_none():
    assert experiments._summary([3.5]) == {"mean": 3.5, "std": 0.0, "n": 1}
    assert experiments._summary([1.0, None]) is None
    assert experiments._summary([]) is None


def test_the_final_training_loss_is_recorded_in_bits(tiny_results):
    # final_train_bpb is the mean of the last training losses, in bits; the
    # training split scored after training is the same kind of number, so the
    # two agree far better than nats (a factor ln 2 = 0.69) and bits would
    for entry in tiny_results["language_model"]:
        for run in entry["runs"]:
            assert run["final_train_bpb"] == pytest.approx(
                run["train_split_bpb"], abs=0.5
            )
            assert 3 < run["final_train_bpb"] < 8
