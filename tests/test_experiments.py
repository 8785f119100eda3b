"""The experiments runner on a tiny preset, its CLI, and the recorded results that ship with the package."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tiny_runs import TINY, run_tiny

from pe_tutorial import experiments
from pe_tutorial.experiments import (
    PRESETS,
    Preset,
    ResumeError,
    Variant,
    cli,
    load_results,
    main,
    results_path,
    run_experiments,
    summarise,
)
from pe_tutorial.experiments.configuration import presets
from pe_tutorial.experiments.configuration.config import (
    ExperimentError,
    preset_from_dict,
    preset_to_dict,
)
from pe_tutorial.experiments.records.results import summary
from pe_tutorial.experiments.running import runner as experiments_runner
from pe_tutorial.experiments.running import units
from pe_tutorial.experiments.running.extensions import fine_tuning
from pe_tutorial.experiments.running.measures import (
    VALUES_KEPT,
    position_parameter_values,
)
from pe_tutorial.experiments.running.runner import Runner
from pe_tutorial.experiments.running.tasks import TaskUnits, keys_by_step
from pe_tutorial.lm.data import shakespeare_corpus, stdlib_corpus
from pe_tutorial.lm.model import SCHEMES, ByteTransformer, ModelConfig
from pe_tutorial.lm.train import TrainConfig
from pe_tutorial.pages.glue import glue

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread for this module's runs. A ``--jobs`` worker takes this
    process's threads shared out (one each), and torch's CPU sums depend on the
    number of threads (a tiny model's scores move in the eighth digit between one
    and two), so a unit computed here and one computed by a worker agree exactly
    only with the same number."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny preset's results, and the run file of its 22 finished units."""
    return run_tiny(TINY, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tiny_results(tiny_run):
    return tiny_run[0]


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


def test_a_scheme_with_position_parameters_keeps_them_as_it_started_and_trained(
    tiny_results,
):
    """The learned tables (at the input and in every layer) keep their values as
    the seeded model built them and as training left them; RoPE and ALiBi, whose
    positions are buffers, keep none."""
    names = {"input": "input_table.weight", "every_layer": None}
    for entry in tiny_results["language_model"]:
        for run in entry["runs"]:
            kept = run.get("position_parameters")
            if entry["scheme"] != "learned":
                assert kept is None
                continue
            (name,) = kept["start"]
            assert set(kept["trained"]) == {name}
            if names[entry["absolute"]]:
                assert name == names[entry["absolute"]]
            else:
                assert name.startswith("blocks.0.attention.scheme")
            start, trained = kept["start"][name], kept["trained"][name]
            assert start["shape"] == trained["shape"] == [16, 16]  # L x d_model
            config = ModelConfig(
                scheme="learned",
                absolute=entry["absolute"],
                max_positions=16,
                **TINY.model,
            )
            torch.manual_seed(run["seed"])
            built = dict(ByteTransformer(config).named_position_parameters())[name]
            assert torch.tensor(start["values"]) == pytest.approx(
                built.detach(), abs=6e-5
            )
            moved = torch.tensor(trained["values"]) - torch.tensor(start["values"])
            assert moved.abs().max() > 1e-3  # three steps of Adam moved the table


def test_a_large_position_parameter_is_kept_by_its_root_mean_square():
    model = ByteTransformer(
        ModelConfig(
            scheme="learned", d_model=32, num_heads=2, num_layers=1, max_positions=64
        )
    )
    table = model.input_table.weight
    assert table.numel() > VALUES_KEPT
    kept = position_parameter_values(model)["input_table.weight"]
    assert "values" not in kept and kept["shape"] == [64, 32]
    assert kept["rms"] == pytest.approx(
        math.sqrt(
            sum(v * v for v in table.detach().flatten().tolist()) / table.numel()
        ),
        rel=1e-5,
    )
    assert (
        position_parameter_values(
            ByteTransformer(ModelConfig(scheme="rope", d_model=32, num_heads=2))
        )
        == {}
    )


def test_every_run_keeps_its_segments_and_the_same_targets_in_an_L_window(
    tiny_results,
):
    """Per-segment scores (for intervals over seeds and segments) and the context
    gain: each target read with more than L bytes against itself in an L window."""
    L = TINY.train.seq_len
    for entry in tiny_results["language_model"]:
        for run in entry["runs"]:
            for n, values in run["segment_bpb"].items():
                if run["bpb"][n] is None:
                    assert values is None
                    continue
                assert len(values) == TINY.eval_windows
                assert sum(values) / len(values) == pytest.approx(
                    run["bpb"][n], abs=1e-4
                )
            assert set(run["context_gain"]) == {
                str(m * L) for m in TINY.multiples if m > 1
            }
            gain = run["position_gain"]
            if gain is None:  # a learned table: nothing past L to read
                assert entry["scheme"] == "learned"
                assert set(run["context_gain"].values()) == {None}
                continue
            bins = L // (L // 16 or 1)
            # the first L positions have the same context in both readings
            assert gain[:bins] == [0.0] * bins
            assert len(run["context_gain"]["32"]) == TINY.eval_windows


def test_the_scored_bytes_are_spread_over_the_validation_split():
    runner = Runner(TINY, device=torch.device("cpu"), progress=False)
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


def test_a_learned_table_extended_by_copies_or_random_rows_reads_longer_windows(
    tiny_results,
):
    plain = tiny_results["language_model"][0]
    stages = {e["stage"]: e for e in tiny_results["learned_extension"]}
    assert list(stages) == [
        "copy/zero-shot",
        "copy/fine-tuned",
        "random/zero-shot",
        "random/fine-tuned",
    ]
    for rows in ("copy", "random"):
        zero_shot = stages[f"{rows}/zero-shot"]["runs"]
        for run, base in zip(zero_shot, plain["runs"], strict=True):
            # rows 0..15 are the trained ones: the training length scores the same
            assert run["bpb"]["16"] == pytest.approx(base["bpb"]["16"], abs=1e-9)
            assert run["bpb"]["32"] is not None
        tuned = stages[f"{rows}/fine-tuned"]["runs"]
        assert all(run["bpb"]["32"] is not None for run in tuned)
    # other rows past 16, other scores there
    copied, drawn = (stages[f"{r}/zero-shot"]["runs"][0] for r in ("copy", "random"))
    assert copied["bpb"]["32"] != drawn["bpb"]["32"]


def test_learning_rates_and_ablations_add_variants():
    preset = replace(
        TINY,
        learning_rate_schemes=("rope",),
        learning_rates=(1e-3,),
        ablations=(("alibi", (("num_layers", 2),)),),
    )
    runner = Runner(preset, device=torch.device("cpu"), progress=False)
    keys = [v.key for v in runner.variants()]
    assert "rope/pre/input/lr=0.001" in keys and "rope/post/input/lr=0.001" in keys
    assert "alibi/pre/input/num_layers=2" in keys
    ablated = Variant("alibi", changes=(("num_layers", 2),))
    assert runner.variant_config(ablated).num_layers == 2
    swept = Variant("rope", "post", learning_rate=1e-3)
    assert runner.variant_training(swept).learning_rate == 1e-3
    assert len({unit[0] for unit in runner.plan()}) == len(runner.plan())


def test_a_tuned_scheme_trains_at_its_own_rates_everywhere():
    """[tuned]: every model of the scheme starts from its fields (language model,
    task, fine-tunes); a variant's own rate still wins; other schemes keep [train]."""
    tuned = (("rope", (("learning_rate", 1e-2), ("position_lr_multiplier", 10.0))),)
    runner = Runner(replace(TINY, tuned=tuned), torch.device("cpu"), progress=False)
    rope = runner.variant_training(Variant("rope"))
    assert (rope.learning_rate, rope.position_lr_multiplier) == (1e-2, 10.0)
    assert rope.steps == TINY.train.steps and rope.seq_len == TINY.train.seq_len
    assert runner.variant_training(Variant("alibi")) == TINY.train
    own = runner.variant_training(Variant("rope", learning_rate=1e-3))
    assert (own.learning_rate, own.position_lr_multiplier) == (1e-3, 10.0)
    with runner.reading(units.PASSKEY):
        passkey = runner.tasks.passkey_training(0, "rope")
        assert passkey.learning_rate == 1e-2 and passkey.position_lr_multiplier == 10
        assert runner.tasks.passkey_training(0, "alibi").learning_rate == 3e-3
    with runner.reading(units.ROPE_LANGUAGE_MODEL):
        text_tune = runner.extensions.finetune_config(0, "rope")
    # a fine-tune runs at a third of its model's rate, text and passkey alike
    passkey_tune = fine_tuning(passkey, 48, TINY.finetune_steps, 0)
    assert text_tune.learning_rate == passkey_tune.learning_rate == 1e-2 / 3
    assert text_tune.seq_len == int(TINY.extension_factor * TINY.train.seq_len)
    # the same bytes a step as pre-training, where a whole window fits
    assert text_tune.batch_size == max(
        1, TINY.train.batch_size * TINY.train.seq_len // text_tune.seq_len
    )
    assert (passkey_tune.steps, passkey_tune.seed) == (TINY.finetune_steps, 1000)


def test_passkey_accuracy_by_length_and_depth(tiny_results):
    entries = {e["scheme"]: e for e in tiny_results["passkey"]}
    assert list(entries) == ["learned", "rope", "alibi"]
    for run in entries["rope"]["runs"]:
        assert set(run["by_depth"]) == {"12", "24"}
        assert set(run["by_depth"]["12"]) == {"0.0", "1.0"}
        depths = run["by_depth"]["24"].values()
        assert run["accuracy"]["24"] == pytest.approx(sum(depths) / 2)
        assert all(0 <= a <= 1 for a in depths)
        # each digit's accuracy too; the whole key needs every digit, so it is at
        # most the first digit's
        digits = run["digits"]["12"]["0.0"]
        assert len(digits) == TINY.passkey["key_len"]
        assert run["by_depth"]["12"]["0.0"] <= min(digits)
    assert entries["learned"]["summary"]["24"] is None
    assert all(run["digits"]["24"] is None for run in entries["learned"]["runs"])
    # a learning curve of whole-key accuracy at the task's length; its last point
    # is the final score there, read on the same batches
    for entry in entries.values():
        for run in entry["runs"]:
            curve = run["curve"]
            assert curve["steps"][-1] == TINY.passkey["steps"]
            assert curve["accuracy"][-1] == run["accuracy"]["12"]
        assert entry["curve"]["n"] == [len(TINY.seeds)] * len(entry["curve"]["steps"])
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
    shakespeare = functools.partial(shakespeare_corpus, root=tmp_path)
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
    assert main(["--preset", "huge"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1  # one line
    assert f"choose one of {tuple(PRESETS)}" in error and "'quick'" in error
    assert main(["--device", "tpu"]) == 2
    assert "unknown device 'tpu'" in capsys.readouterr().err


def test_cli_writes_json_and_records(tmp_path, monkeypatch):
    recorded = tmp_path / "recorded.json"
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    monkeypatch.setattr(cli, "results_path", lambda preset: recorded)
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
        Runner,
        "language_model_unit",
        _recording(Runner.language_model_unit, ran),
    )
    resumed = run_experiments(
        TINY, device="cpu", progress=False, partial=partial, resume=True
    )
    # five variants of two seeds: only the seven not finished before the stop
    assert len(ran) == 5 * len(TINY.seeds) - 3
    assert without_times(resumed) == without_times(tiny_results)


def _same_record(record: dict, expected: dict) -> None:
    """Two records agree: the JSON less the metadata (times, dates, the command),
    and what the metadata says was computed (corpora, code, device, threads)."""
    assert without_times(record) == without_times(expected)
    for key in ("corpus", "corpora", "code_version", "device", "threads"):
        assert record["metadata"][key] == expected["metadata"][key], key


def test_jobs_give_the_record_of_one_process(tiny_results, tmp_path, monkeypatch):
    """Two worker processes of one thread each compute what this one does."""
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    out = tmp_path / "out.json"
    command = ["--json", str(out), "--jobs", "2", "--device", "cpu", "--no-progress"]
    assert main(command) == 0
    record = json.loads(out.read_text())
    assert record["metadata"]["jobs"] == 2 and record["metadata"]["threads"] == 1
    _same_record(record, tiny_results)
    assert not (tmp_path / "out.json.partial").exists()


def test_ctrl_c_stops_every_worker_and_keeps_the_finished_units(monkeypatch):
    """KeyboardInterrupt in the calling process (here raised as the first unit
    comes back) stops the workers (``stop_workers``) rather than waiting for
    their units, the finished unit having been handed over."""
    import multiprocessing

    from pe_tutorial.experiments.running import pool

    stopped = []
    real = pool.stop_workers
    monkeypatch.setattr(pool, "stop_workers", lambda: stopped.append(real()))
    units = Runner(TINY, torch.device("cpu"), progress=False).plan()[:6]
    handed = []

    def finished(unit, result, seconds):
        handed.append(unit.key)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pool.compute_in_processes(
            TINY, torch.device("cpu"), units, 2, finished, lambda line: None
        )
    assert len(handed) == 1 and handed[0] in {unit.key for unit in units}
    assert len(stopped) == 1 and multiprocessing.active_children() == []


def _sleep(seconds):  # a worker busy with a long unit
    import time

    time.sleep(seconds)


def test_stop_workers_ends_a_busy_worker_at_once():
    import multiprocessing
    import time

    from pe_tutorial.experiments.running import pool

    worker = multiprocessing.get_context("spawn").Process(target=_sleep, args=(60,))
    worker.start()
    start = time.perf_counter()
    assert pool.stop_workers() == [worker.pid]
    assert not worker.is_alive() and time.perf_counter() - start < 15


def test_ctrl_c_is_said_in_one_line(monkeypatch, capsys):
    from pe_tutorial.experiments import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_run", interrupted)
    assert cli.main(["--preset", "quick"]) == 130
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "stopped (Ctrl-C)" in said[0] and "--resume" in said[0]


def test_a_worker_takes_its_share_of_threads_and_a_gpu_in_turn(monkeypatch):
    from pe_tutorial.experiments.running import pool

    monkeypatch.setattr(torch, "get_num_threads", lambda: 16)
    assert pool.worker_threads(4) == 4 and pool.worker_threads(32) == 1
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    cuda = torch.device("cuda")
    assert pool.worker_devices(cuda, 3) == ["cuda:0", "cuda:1", "cuda:0"]
    assert pool.worker_devices(torch.device("cuda:1"), 2) == ["cuda:1"] * 2
    assert pool.worker_devices(torch.device("cpu"), 2) == ["cpu"] * 2


@pytest.fixture(scope="module")
def tiny_shards(tmp_path_factory):
    """The tiny preset run as two shards from the command line: their files, and
    what the commands printed."""
    folder = tmp_path_factory.mktemp("shards")
    out = folder / "out.json"
    printed = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(experiments.PRESETS, "quick", TINY)
        patch.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(a)))
        for k in (1, 2):
            command = ["--json", str(out), "--shard", f"{k}/2", "--device", "cpu"]
            assert main([*command, "--no-progress"]) == 0
    parts = [folder / f"out.json.{k}-of-2.partial" for k in (1, 2)]
    assert not out.exists()
    return out, parts, "\n".join(printed)


def test_shards_merged_give_the_record_of_one_process(tiny_shards, tiny_results):
    out, parts, printed = tiny_shards
    assert f"merge {out} {parts[0]} {parts[1]}" in printed
    held = [json.loads(part.read_text()) for part in parts]
    keys = [list(part["units"]) for part in held]
    plan = list(held[0]["plan"])
    # every other unit of the plan, in its order, from the first or the second
    assert keys == [plan[0::2], plan[1::2]] and len(plan) == 22
    assert [part["shard"] for part in held] == [[1, 2], [2, 2]]
    assert main(["merge", str(out), *map(str, parts)]) == 0
    merged = json.loads(out.read_text())
    _same_record(merged, tiny_results)
    seconds = sum(u["seconds"] for part in held for u in part["units"].values())
    assert merged["metadata"]["wall_seconds"] == pytest.approx(seconds)
    assert [p["shard"] for p in merged["metadata"]["parts"]] == [[1, 2], [2, 2]]
    assert merged["metadata"]["command"].startswith(
        "python -m pe_tutorial.experiments merge"
    )


def test_a_unit_in_two_parts_is_taken_from_the_first(
    tiny_shards, tmp_path, monkeypatch
):
    """As merge.py promises: a shard run twice (here with another result for one unit)
    gives the unit of the file named first, whichever order the files come in."""
    _, parts, _ = tiny_shards
    document = json.loads(parts[1].read_text())
    key = next(iter(document["units"]))
    result = document["units"][key]["result"]
    assert isinstance(result, dict) and result
    marked = {**result, "marked": "the second run"}
    document["units"][key]["result"] = marked
    again = tmp_path / "again.partial"
    again.write_text(json.dumps(document))

    from pe_tutorial.experiments.running import merge

    def unit_result(order: list[Path]) -> dict:
        """The result the merge hands to ``record`` for the unit ``key``."""
        chosen = {}
        monkeypatch.setattr(
            merge, "record", lambda runner, results, **kw: chosen.update(results)
        )
        merge.merge_parts(order)
        return chosen[key]

    assert unit_result([parts[0], parts[1], again]) == result
    assert unit_result([parts[0], again, parts[1]]) == marked


def _merge_fails(capsys, out: Path, parts: list[Path]) -> str:
    """Merging ``parts`` fails with one line and writes nothing; the line."""
    assert main(["merge", str(out), *map(str, parts)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and not out.exists()
    prefix = "python -m pe_tutorial.experiments merge: error: "
    assert error.startswith(prefix)
    return error.removeprefix(prefix).strip()


def test_merge_names_the_units_no_part_holds(tiny_shards, tmp_path, capsys):
    _, parts, _ = tiny_shards
    error = _merge_fails(capsys, tmp_path / "out.json", parts[:1])
    missing = list(json.loads(parts[1].read_text())["units"])
    assert error.startswith("cannot merge: 11 of 22 units are in none of the parts: ")
    assert ", ".join(missing[:12]) in error and "--resume" in error


def test_merge_refuses_units_whose_fingerprints_disagree(tiny_shards, tmp_path, capsys):
    _, parts, _ = tiny_shards
    other = tmp_path / "other.partial"
    document = json.loads(parts[1].read_text())
    key = next(iter(document["units"]))
    document["units"][key]["fingerprint"]["code"] = "0123456789abcdef"
    other.write_text(json.dumps(document))
    error = _merge_fails(capsys, tmp_path / "out.json", [parts[0], other])
    assert error.startswith("cannot merge: the fingerprints of 1 units disagree")
    assert f"(code differ): {key};" in error
    # a part planned on another device type: every unit of its plan disagrees
    document = json.loads(parts[1].read_text())
    for fingerprint in document["plan"].values():
        fingerprint["device_type"] = "cuda"
    other.write_text(json.dumps(document))
    error = _merge_fails(capsys, tmp_path / "out.json", [parts[0], other])
    assert "the fingerprints of 22 units disagree" in error
    assert "(device_type differ)" in error


def test_merge_refuses_parts_of_other_experiments_and_files_it_cannot_read(
    tiny_shards, tiny_run, tmp_path, capsys
):
    _, parts, _ = tiny_shards
    other = tmp_path / "other.partial"
    document = json.loads(parts[1].read_text())
    del document["plan"]["lm/rope/pre/input/0"]
    other.write_text(json.dumps(document))
    error = _merge_fails(capsys, tmp_path / "out.json", [parts[0], other])
    assert error.startswith(f"cannot merge {other} with {parts[0]}: they are of ")
    other.write_text(parts[1].read_text()[:100])
    error = _merge_fails(capsys, tmp_path / "out.json", [parts[0], other])
    assert error.startswith(f"cannot merge {other}: it is not whole JSON")
    old = json.loads(tiny_run[1].read_text())
    other.write_text(json.dumps({"units": old["units"]}))  # before headers
    error = _merge_fails(capsys, tmp_path / "out.json", [other])
    assert "it has no header" in error and "--resume" in error
    error = _merge_fails(capsys, tmp_path / "out.json", [tmp_path / "missing"])
    assert error == f"cannot merge {tmp_path / 'missing'}: there is no such file"


def _recording(method, calls):
    def wrapper(self, **arguments):
        calls.append(arguments)
        return method(self, **arguments)

    return wrapper


def _copy_run_file(tiny_run, path: Path, old_code: str = "") -> Path:
    """The tiny run's file of finished units at ``path``; with ``old_code``, the
    units whose key starts with it as if other code had recorded them."""
    stored = json.loads(tiny_run[1].read_text())
    for key, unit in stored["units"].items():
        if old_code and key.startswith(old_code):
            unit["fingerprint"]["code"] = "0123456789abcdef"
    path.write_text(json.dumps(stored))
    return path


def _nothing_runs(monkeypatch) -> list:
    """Record every unit computed (language model, look-back, passkey)."""
    ran = []
    for owner, name in (
        (Runner, "language_model_unit"),
        (TaskUnits, "lookback"),
        (TaskUnits, "passkey"),
    ):
        monkeypatch.setattr(owner, name, _recording(getattr(owner, name), ran))
    return ran


def test_a_unit_recorded_with_other_settings_is_run_again(
    tiny_run, tmp_path, monkeypatch
):
    partial = tmp_path / "run.json.partial"
    # recorded by other code as well: other settings come first, it runs again
    _copy_run_file(tiny_run, partial, old_code="lookback/")
    stored = json.loads(partial.read_text())
    assert len(stored["units"]) == 5 * 2 + 3 * 2 + 3 * 2  # models, look-back, passkey
    # a longer lookback training changes only the lookback units' fingerprints
    longer = replace(TINY, lookback={**TINY.lookback, "steps": 4})
    ran = _nothing_runs(monkeypatch)
    lines = []
    run_experiments(
        longer,
        device="cpu",
        progress=False,
        partial=partial,
        resume=True,
        log=lines.append,
    )
    assert len(ran) == 6 and all(set(args) == {"scheme", "seed"} for args in ran)
    assert lines[0] == f"resume {partial}: 16 of 22 units reused, 6 to run"
    assert "recorded with other settings, run again (6):" in lines
    again = lines[lines.index("recorded with other settings, run again (6):") + 1]
    assert " ".join(again.split()) == ", ".join(
        f"lookback/{scheme}/{seed}" for scheme in TINY.schemes for seed in TINY.seeds
    )
    # the file now holds the new look-back units
    fingerprints = json.loads(partial.read_text())["units"]["lookback/rope/1"]
    assert fingerprints["fingerprint"]["preset"]["lookback"]["steps"] == 4


def test_resume_says_what_it_reuses(tiny_run, tiny_results, tmp_path, monkeypatch):
    partial = _copy_run_file(tiny_run, tmp_path / "run.json.partial")
    ran = _nothing_runs(monkeypatch)
    lines = []
    resumed = run_experiments(
        TINY,
        device="cpu",
        progress=False,
        partial=partial,
        resume=True,
        log=lines.append,
    )
    assert ran == []
    assert without_times(resumed) == without_times(tiny_results)
    assert lines[:2] == [
        f"resume {partial}: 22 of 22 units reused, 0 to run",
        "reused (22):",
    ]
    listed = " ".join(lines[2:]).replace(",", " ").split()
    assert listed == list(json.loads(partial.read_text())["units"])


def test_resume_refuses_units_recorded_by_other_code(
    tiny_run, tiny_results, tmp_path, monkeypatch
):
    partial = _copy_run_file(tiny_run, tmp_path / "run.json.partial", old_code="lm/")
    before = partial.read_bytes()
    ran = _nothing_runs(monkeypatch)
    with pytest.raises(ResumeError) as refused:
        run_experiments(
            TINY, device="cpu", progress=False, partial=partial, resume=True
        )
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"cannot resume from {partial}: 10 of its finished ")
    assert "recorded by other code (code version 0123456789abcdef there, " in message
    assert f"{units.code_version()} now)" in message
    assert "add --keep-old-code to reuse them anyway" in message
    assert "run without --resume" in message
    assert ran == [] and partial.read_bytes() == before

    lines = []
    kept = run_experiments(
        TINY,
        device="cpu",
        progress=False,
        partial=partial,
        resume=True,
        keep_old_code=True,
        log=lines.append,
    )
    assert ran == []
    assert without_times(kept) == without_times(tiny_results)
    assert lines[0] == f"resume {partial}: 22 of 22 units reused, 0 to run"
    assert lines[1] == "reused (12):"
    said = next(line for line in lines if "--keep-old-code" in line)
    assert said.startswith("reused although recorded by other code, as --keep-old-code")
    assert said.endswith("(10):")


@pytest.mark.parametrize(
    "damage, problem",
    [
        # json's own reason follows in brackets; it depends on where the cut falls
        (lambda text: text[: len(text) // 2], "it is not whole JSON ("),
        (lambda text: "[]", "it is JSON but not a run file"),
        (lambda text: '{"units": {"lm/x/0": 1}}', "it is JSON but not a run file"),
    ],
    ids=["truncated", "a list", "units of another shape"],
)
def test_a_damaged_run_file_is_named_and_left_alone(
    tiny_run, tmp_path, monkeypatch, capsys, damage, problem
):
    partial = tmp_path / "out.json.partial"
    partial.write_text(damage(tiny_run[1].read_text()))
    before = partial.read_bytes()
    ran = _nothing_runs(monkeypatch)
    with pytest.raises(ResumeError) as refused:
        run_experiments(
            TINY, device="cpu", progress=False, partial=partial, resume=True
        )
    message = str(refused.value)
    assert message.startswith(f"cannot resume from {partial}: {problem}")
    assert message.endswith(
        "it is left as it is: mend it, or move it aside and run without --resume "
        "to start afresh"
    )
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    out = tmp_path / "out.json"
    assert main(["--json", str(out), "--resume", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert error == f"python -m pe_tutorial.experiments: error: {message}\n"
    assert ran == [] and partial.read_bytes() == before and not out.exists()


def test_cli_resume_refuses_other_code_unless_told_to_keep_it(
    tiny_run, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(experiments.PRESETS, "quick", TINY)
    out = tmp_path / "out.json"
    partial = _copy_run_file(tiny_run, tmp_path / "out.json.partial", old_code="p")
    before = partial.read_bytes()
    ran = _nothing_runs(monkeypatch)
    command = ["--json", str(out), "--resume", "--device", "cpu", "--no-progress"]
    assert main(command) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1  # one line
    assert error.startswith(
        f"python -m pe_tutorial.experiments: error: cannot resume from {partial}: "
        "6 of its finished units were recorded by other code"
    )
    assert partial.read_bytes() == before and not out.exists()

    assert main([*command, "--keep-old-code"]) == 0
    printed = capsys.readouterr().out
    assert f"resume {partial}: 22 of 22 units reused, 0 to run" in printed
    assert "reused although recorded by other code, as --keep-old-code asks" in printed
    assert ran == [] and out.is_file() and not partial.exists()

    assert main(["--json", str(out), "--keep-old-code"]) == 2
    assert "--keep-old-code goes with --resume" in capsys.readouterr().err


def _changed(value):
    """Another value of the same kind, for walking a preset's fields."""
    if value is None:
        return 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 if value else 1
    if isinstance(value, float):
        return value / 2
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, tuple):
        assert value, "give the walked preset a non-empty value here"
        return value[:-1]
    raise TypeError(f"no change for {value!r}: teach _changed its type")


# set by the variant (scheme, norm, placement); the switches (None by default,
# such as rope_scaling) only the schemes that read them may set, so a preset
# sets them through an ablation, a Variant's changes (a unit's argument)
RUNNER_SETS = {"scheme", "norm", "absolute"}
# a field of named choices changes to another of them
OTHER_CHOICE = {"deberta_terms": "c2p", "irope_window": "sliding"}


def _field_changes(preset: Preset):
    """(preset field, what changed, the changed preset) for every field of ``preset``:
    the TrainConfig field by field, every ModelConfig field the ``model`` dict may
    set, every key of a task's dict, any other field as a whole."""
    for field in dataclasses.fields(Preset):
        name, value = field.name, getattr(preset, field.name)
        if name == "sweep":  # its values reach a unit as its variant's (a test below)
            sweep = (("train.warmup_steps", (2, 3)),)
            yield name, name, replace(preset, sweep=sweep)
        elif (
            name == "scored_split"
        ):  # the other split (the walked preset holds one out)
            other = "validation" if value == "test" else "test"
            yield name, name, replace(preset, scored_split=other)
        elif name == "model":
            built = ModelConfig(**{"max_positions": preset.train.seq_len, **value})
            for f in dataclasses.fields(ModelConfig):
                if f.name not in RUNNER_SETS and f.default is not None:
                    other = OTHER_CHOICE.get(f.name) or _changed(getattr(built, f.name))
                    model = {**value, f.name: other}
                    yield name, f"model[{f.name!r}]", replace(preset, model=model)
        elif dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                changed = replace(value, **{f.name: _changed(getattr(value, f.name))})
                yield name, f"{name}.{f.name}", replace(preset, **{name: changed})
        elif isinstance(value, dict):
            assert value, f"give the walked preset a {name}"
            for key, item in value.items():
                changed = {**value, key: _changed(item)}
                yield name, f"{name}[{key!r}]", replace(preset, **{name: changed})
        else:
            yield name, name, replace(preset, **{name: _changed(value)})


def test_each_setting_a_unit_reads_is_in_its_fingerprint_and_no_other(
    monkeypatch, tmp_path
):
    """Walk every Preset field (TrainConfig and ModelConfig fields one by one): a
    change moves the fingerprint of exactly the units whose kind reads the field.
    A unit cannot read a field its kind leaves out (the next test), so every
    setting a unit reads is in its fingerprint, a field added later included."""
    cached = functools.cache(stdlib_corpus)
    monkeypatch.setitem(experiments.CORPORA, "stdlib", cached)
    monkeypatch.setitem(experiments.CORPORA, "shakespeare", cached)
    # the preset's corpus changed: other bytes (the files in another order)
    other = functools.partial(cached, seed=1)
    monkeypatch.setitem(experiments.CORPORA, "stdlib-changed", other)
    # every kind of unit, and every tuple field non-empty (a change drops its last)
    walked = replace(
        TINY,
        learning_rate_schemes=("rope",),
        learning_rates=(1e-3,),
        ablations=(("alibi", (("num_layers", 2),)),),
        language_schemes=("alibi",),
        tuned=(("alibi", (("learning_rate", 1e-2),)),),
        test_bytes=5_000,
        global_interpolation=(8.0,),
        # a declared family of claims: read by no unit, so in no fingerprint
        families=(("a family", ("alibi - rope at 1L",), "holm"),),
        # a reader's scheme file: its text is what the fingerprints hold
        schemes_from=(str(tmp_path / "walk_pe.py"),),
    )
    (tmp_path / "walk_pe.py").write_text("# a scheme file (its text is hashed)\n")

    def fingerprints(preset):
        plan = Runner(preset, torch.device("cpu"), progress=False).plan()
        return {unit.key: (unit.kind, unit.fingerprint) for unit in plan}

    base = fingerprints(walked)
    assert {kind for kind, _ in base.values()} == set(units.KINDS)
    read = {name for kind in units.KINDS for name in kind.reads}
    walked_fields = set()
    for name, what, changed in _field_changes(walked):
        walked_fields.add(name)
        after = fingerprints(changed)
        common = base.keys() & after.keys()
        # a sweep replaces the schemes' plain variants; language_models = false
        # leaves the tasks' units only (no unit reads it: it makes the plan)
        if name not in ("sweep", "language_models"):
            assert {base[key][0] for key in common} == set(units.KINDS), what
        for key in sorted(common):
            kind, before = base[key]
            moved = after[key][1] != before
            # the preset's corpus is in no kind's reads: the corpus itself is in the
            # fingerprint of each unit that reads it (described and hashed)
            own_corpus = (
                kind.corpus and before["arguments"]["variant"]["corpus"] is None
            )
            reads = name in kind.reads
            if name == "tuned":  # a unit holds its own scheme's tuned fields only
                reads = reads and "/alibi/" in key
            assert moved == (reads or (name == "corpus" and own_corpus)), (
                f"changing {what} {'moved' if moved else 'left'} the fingerprint "
                f"of {key} ({kind.name}, which reads {kind.reads})"
            )
    assert walked_fields == {f.name for f in dataclasses.fields(Preset)}
    assert "finetune_steps" in read and "eval_windows" in read and "name" not in read


def test_a_unit_reads_only_what_its_kind_declares():
    runner = Runner(TINY, torch.device("cpu"), progress=False)
    narrow = units.UnitKind("narrow look-back", ("model", "train", "multiples"))
    with runner.reading(narrow), pytest.raises(units.UndeclaredRead) as refused:
        runner.tasks.lookback(scheme="rope", seed=0)
    assert str(refused.value) == (
        "a narrow look-back unit read the preset's 'lookback', which its kind does "
        "not declare, so its fingerprint would not see a change of it: add "
        "'lookback' to the kind's reads in pe_tutorial/experiments/running/units.py"
    )
    # a property reads through the view; so do the corpora, read before the unit
    with runner.reading(units.UnitKind("no lengths", ("train",))):
        with pytest.raises(units.UndeclaredRead, match="'multiples'"):
            _ = runner.preset.lengths
    with runner.reading(units.LOOKBACK):
        with pytest.raises(units.UndeclaredRead, match="a look-back unit read"):
            runner.data("stdlib")
    with runner.reading(units.LANGUAGE_MODEL):
        assert runner.data("stdlib").segments.shape == (TINY.eval_windows, 33)
    assert runner.preset is TINY  # outside a unit, the preset itself


def test_a_fingerprint_holds_the_arguments_the_corpus_the_device_and_the_code():
    variant = Variant(
        "rope", "post", "every_layer", 1e-3, (("num_layers", 2),), "x", (("steps", 5),)
    )

    def printed(variant=variant, seed=0, device_type="cpu", corpus=None):
        return units.fingerprint(
            units.LANGUAGE_MODEL,
            TINY,
            {"variant": variant, "seed": seed},
            device_type=device_type,
            corpus=corpus or {"source": "stdlib", "sha256": "0"},
        )

    base = printed()
    assert base["code"] == units.code_version() and base["kind"] == "language model"
    assert base == json.loads(json.dumps(base))  # as its file holds it
    for field in dataclasses.fields(Variant):
        value = _changed(getattr(variant, field.name))
        assert printed(replace(variant, **{field.name: value})) != base, field.name
    assert printed(seed=1) != base
    assert printed(device_type="cuda") != base
    assert printed(corpus={"source": "stdlib", "sha256": "1"}) != base
    with pytest.raises(ValueError, match="takes a corpus if and only if"):
        units.fingerprint(units.LOOKBACK, TINY, {}, device_type="cpu", corpus={})


def test_the_code_version_ignores_docstrings_comments_and_layout_but_not_code():
    source = (
        '"""A module."""\n\nclass A:\n    """A class."""\n\n'
        '    def f(self, x):\n        """Doc."""\n        return x + 1\n'
    )
    edited = (
        '"""Another text."""\n# a comment\n\n\nclass A:\n    """Other."""\n\n'
        "    def f(self, x):  # why\n        return (x +\n                1)\n"
    )
    changed = source.replace("x + 1", "x + 2")
    assert units.source_digest(source) == units.source_digest(edited)
    assert units.source_digest(source) != units.source_digest(changed)


def test_the_code_version_covers_the_modules_the_units_run(tmp_path, monkeypatch):
    names = {p.relative_to(units.PACKAGE).as_posix() for p in units.code_files()}
    assert {
        "_validation.py",
        "devices.py",
        "encodings/rope.py",
        "encodings/rope_scaling.py",
        "encodings/rope_bands.py",
        "attention/core.py",
        "lm/model.py",
        "lm/registry.py",
        "lm/data.py",
        "lm/train.py",
        "experiments/configuration/presets.py",
        "experiments/running/units.py",
        "experiments/running/runner.py",
        "experiments/running/extensions.py",
        "experiments/running/tasks.py",
    } <= names
    # the layers the units run, and not what stores units, reads results or times
    assert {name.split("/")[0] for name in names} <= {
        "_validation.py",
        "_lazy.py",  # the folders' loaders of submodules (figures, sympy)
        "devices.py",
        "encodings",
        "attention",
        "lm",
        "experiments",
    }
    assert not names & {
        "__init__.py",
        "experiments/__init__.py",
        "experiments/cli.py",
        "experiments/records/record.py",
        "experiments/records/results.py",
        "experiments/running/run.py",
    }
    # on a copy of the package: a docstring edit keeps the version, code does not
    copy = tmp_path / "pe_tutorial"
    shutil.copytree(
        units.PACKAGE, copy, ignore=shutil.ignore_patterns("results", "__pycache__")
    )
    monkeypatch.setattr(units, "PACKAGE", copy)
    version = units.code_version.__wrapped__
    assert version() == units.code_version()
    model = copy / "lm" / "model.py"
    text = model.read_text()
    model.write_text(text.replace('"""', '"""Edited. ', 1) + "\n# a comment\n")
    assert version() == units.code_version()
    model.write_text(text + "\nNEW_CONSTANT = 1\n")
    assert version() != units.code_version()
    (copy / "experiments" / "cli.py").write_text("CHANGED = 1\n")
    model.write_text(text)
    assert version() == units.code_version()


def test_cli_resume_needs_a_run_to_resume_and_a_place_to_write(tmp_path, capsys):
    assert main(["--resume"]) == 2
    assert "add --record or --json" in capsys.readouterr().err
    assert main(["--json", str(tmp_path / "out.json"), "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert main(["--json", str(tmp_path / "missing" / "out.json")]) == 2
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
    assert "experiments/presets/*.toml" in package_data


@pytest.mark.parametrize("name", ["standard", "frontier", "streaming", "tuned"])
def test_the_recorded_runs_are_of_the_presets_as_they_stand(name):
    """Chapters 9 and 11 read them: a preset changed since its recording (its file,
    presets/NAME.toml) must be recorded again."""
    results = load_results(name)
    assert results is not None, (
        f"record it: python -m pe_tutorial.experiments --preset {name} --record"
    )
    preset = PRESETS[name]
    settings = results["settings"]
    # a TrainConfig field added since the recording reads as its default, which
    # trains as before it existed (position_lr_multiplier 1.0)
    assert TrainConfig(**settings["train"]) == preset.train
    assert settings["seeds"] == list(preset.seeds) and len(preset.seeds) >= 3
    assert {k: settings["model"][k] for k in preset.model} == preset.model
    assert settings["lengths"] == preset.lengths
    assert settings["eval_segments"] == preset.eval_windows
    assert settings["extension_factor"] == preset.extension_factor
    assert settings["finetune_steps"] == preset.finetune_steps
    # recorded before the rolling cache existed: none read
    assert settings.get("cache_window", 0) == preset.cache_window
    if preset.cache_window:
        assert settings["cache_sinks"] == list(preset.cache_sinks)
    for task in ("lookback", "passkey"):
        assert settings[task] == json.loads(json.dumps(getattr(preset, task))), task
        scored = [e["scheme"] for e in results[task]]
        assert scored == (list(preset.schemes) if getattr(preset, task) else [])
    planned = [
        (
            v.scheme,
            v.norm,
            v.absolute,
            v.corpus or preset.corpus,
            v.learning_rate or preset.training_for(v.scheme).learning_rate,
            dict(v.changes),
        )
        for v in presets.variants(preset)
    ]
    recorded = [
        tuple(e[k] for k in ("scheme", "norm", "absolute", "corpus"))
        + (e["learning_rate"], e["changes"])
        for e in results["language_model"]
    ]
    assert recorded == planned
    stages = [(m or "none", "zero-shot") for m in (None, *preset.extension_methods)]
    stages += [(m or "none", "fine-tuned") for m in preset.finetune_methods]
    stages = stages if preset.extensions else []  # off: no extension analyses
    assert [(e["method"], e["stage"]) for e in results["rope_extension"]] == stages
    corpus = results["metadata"]["corpus"]
    assert (corpus["train_bytes"], corpus["validation_bytes"]) == (
        preset.train_bytes,
        preset.validation_bytes,
    )
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
    assert summary([3.5]) == {"mean": 3.5, "std": 0.0, "n": 1}
    assert summary([1.0, None]) is None
    assert summary([]) is None


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


def test_a_notebook_gets_one_progress_bar(monkeypatch, capsys):
    """In a Jupyter kernel (Colab's) only the run's bar is drawn, no bar per model;
    a terminal also shows each model's training (issue 37)."""
    import sys
    import types

    from pe_tutorial.experiments.running import run as run_module

    one = replace(TINY, schemes=("nope",), lookback={}, passkey={}, extensions=False)
    kernel = types.SimpleNamespace(kernel=object())
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: kernel
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert run_module.in_notebook()
    run_experiments(one, device="cpu", progress=True)
    drawn = capsys.readouterr().err
    assert "tiny preset" in drawn and "nope pre-norm seed 0" not in drawn

    monkeypatch.setitem(sys.modules, "IPython", None)
    assert not run_module.in_notebook()
    run_experiments(one, device="cpu", progress=True)
    assert "seed 0" in capsys.readouterr().err


def test_a_tempered_model_is_also_read_without_its_temperature():
    """Llama 4's pattern: its language-model and passkey units also score the same
    trained model without the NoPE layer's query scale (chapter 11), and the
    record keeps both; a model without the scale records no such reading."""
    preset = replace(
        TINY,
        model={"d_model": 16, "num_heads": 2, "num_layers": 2, "global_every": 2},
        schemes=("irope", "rope"),
        seeds=(0,),
        post_norm_schemes=(),
        every_layer_schemes=(),
        extension_methods=(),
        finetune_methods=(),
        lookback={},
    )
    results = run_experiments(preset, device="cpu", progress=False)
    lm = {entry["scheme"]: entry["runs"][0] for entry in results["language_model"]}
    untempered = lm["irope"]["without_temperature"]
    assert set(untempered["bpb"]) == set(lm["irope"]["bpb"])
    assert "without_temperature" not in lm["rope"]
    keys = {entry["scheme"]: entry["runs"][0] for entry in results["passkey"]}
    reading = keys["irope"]["without_temperature"]
    assert set(reading["accuracy"]) == set(keys["irope"]["accuracy"])
    assert "without_temperature" not in keys["rope"]


def text_models_only(**changes):
    """TINY with one seed and its language models alone: no post-norm or every-layer
    variants, no extensions, no tasks; ``changes`` set on top."""
    return replace(
        TINY,
        seeds=(0,),
        post_norm_schemes=(),
        every_layer_schemes=(),
        extensions=False,
        lookback={},
        passkey={},
        **changes,
    )


def test_a_preset_with_a_cache_window_reads_each_model_through_a_rolling_cache(
    monkeypatch,
):
    """StreamingLLM's reading (chapter 11): each language model is also read at the
    longest length through a rolling cache with each number of sinks, beside a
    window read afresh; the record keeps them by name, binned as position_bpb."""
    calls = []
    real = experiments_runner.rolling_cache_losses

    def spied(model, segments, window, sinks, **options):
        calls.append((window, sinks, tuple(segments.shape)))
        return real(model, segments, window, sinks, **options)

    monkeypatch.setattr(experiments_runner, "rolling_cache_losses", spied)
    preset = text_models_only(
        model={"d_model": 16, "num_heads": 2, "num_layers": 2},
        schemes=("rope",),
        cache_window=8,
        cache_sinks=(0, 2),
    )
    results = run_experiments(preset, device="cpu", progress=False)
    run = results["language_model"][0]["runs"][0]
    longest = max(preset.lengths)
    assert calls == [(8, 0, (2, longest + 1)), (8, 2, (2, longest + 1))]
    readings = run["rolling_cache"]
    assert list(readings) == ["sinks=0", "sinks=2", "recomputed"]
    for reading in readings.values():
        assert len(reading["position_bpb"]) == len(run["position_bpb"])
        assert reading["bpb"] == pytest.approx(
            sum(reading["position_bpb"]) / len(reading["position_bpb"]), abs=1e-3
        )
    # two layers: the cache without sinks is not the window read afresh
    assert readings["sinks=0"]["bpb"] != readings["recomputed"]["bpb"]
    assert results["settings"]["cache_window"] == 8
    # and the sink probe (lm.sinks) on windows of the training length: the first
    # key and the first four, per layer and head, queries L/2 .. L-1
    L = preset.train.seq_len
    probe = run["sink_probe"]
    assert list(probe) == ["1", "4"]
    for k, reading in probe.items():
        assert [len(heads) for heads in reading["weight"]] == [2, 2]
        even = sum(int(k) / (i + 1) for i in range(L // 2, L)) / (L - L // 2)
        assert reading["even"] == pytest.approx(even, abs=1e-4)
    plain = run_experiments(replace(preset, cache_window=0), progress=False)
    assert "rolling_cache" not in plain["language_model"][0]["runs"][0]
    assert "sink_probe" not in plain["language_model"][0]["runs"][0]


def test_a_start_byte_begins_every_window_the_models_train_and_are_scored_on(
    monkeypatch,
):
    """StreamingLLM's sink to learn (chapter 11): with start_byte every training
    window and every scored segment starts with that byte, and the settings say so."""
    seen = []
    real = experiments_runner.train

    def spied(model, batches, config, **options):
        seen.append(batches(torch.Generator().manual_seed(0))[0])
        return real(model, batches, config, **options)

    monkeypatch.setattr(experiments_runner, "train", spied)
    preset = text_models_only(schemes=("rope",), start_byte=2)
    runner = Runner(preset, device=torch.device("cpu"), progress=False)
    assert (runner.segments[:, 0] == 2).all()
    assert (runner.data().train_segments[:, 0] == 2).all()
    results = run_experiments(preset, device="cpu", progress=False)
    assert len(seen) == 1 and (seen[0][:, 0] == 2).all()
    assert results["settings"]["start_byte"] == 2
    plain = Runner(
        replace(preset, start_byte=None), torch.device("cpu"), progress=False
    )
    assert not (plain.segments[:, 0] == 2).all()
    assert torch.equal(plain.segments[:, 1:], runner.segments[:, 1:])


def test_gemmas_pattern_is_also_read_interpolated_and_tasks_can_run_alone(
    monkeypatch,
):
    """global_interpolation reads each local-global model again with its global
    layers interpolated by the factor given (the record keeps it by factor, other
    schemes have no such reading); language_models = false trains the passkey
    models only, here with two named keys and a one-key curriculum."""
    factors = []
    real = experiments_runner.with_global_interpolation

    def spied(model, factor):
        factors.append(factor)
        return real(model, factor)

    monkeypatch.setattr(experiments_runner, "with_global_interpolation", spied)
    preset = text_models_only(
        model={"d_model": 16, "num_heads": 2, "num_layers": 2, "global_every": 2},
        schemes=("local-global", "rope"),
        global_interpolation=(8.0,),
    )
    results = run_experiments(preset, device="cpu", progress=False)
    assert factors == [8.0]  # the local-global model, once, at the factor given
    lm = {entry["scheme"]: entry["runs"][0] for entry in results["language_model"]}
    reading = lm["local-global"]["global_interpolation"]
    assert list(reading) == ["8"] and set(reading["8"]) == set(
        lm["local-global"]["bpb"]
    )
    assert reading["8"] != lm["local-global"]["bpb"]
    assert "global_interpolation" not in lm["rope"]
    tasks_only = replace(
        preset,
        language_models=False,
        global_interpolation=(),
        passkey={**TINY.passkey, "keys": 2, "seq_len": 24, "one_key_steps": 1},
    )
    results = run_experiments(tasks_only, device="cpu", progress=False)
    assert results["language_model"] == []
    assert [e["scheme"] for e in results["passkey"]] == ["local-global", "rope"]
    assert results["settings"]["passkey"]["keys"] == 2
    assert results["settings"]["passkey"]["one_key_steps"] == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"start_byte": 256}, "start_byte: 256; give a byte value"),
        ({"global_interpolation": (0.5,)}, "global_interpolation: 0.5; give factors"),
        ({"global_interpolation": (8.0,)}, 'no variant is "local-global"'),
        ({"language_models": False, "lookback": {}, "passkey": {}}, "nothing would"),
        ({"passkey": {**TINY.passkey, "keys": 9}}, "passkey: keys=9"),
        ({"passkey": {**TINY.passkey, "keys": 3}}, "passkey: seq_len=12 is too short"),
        ({"passkey": {**TINY.passkey, "one_key_steps": 2}}, "but keys is 1; give keys"),
        ({"passkey": {**TINY.passkey, "ask_every_key": True}}, "but keys is 1; give"),
        (
            {"passkey": {**TINY.passkey, "keys": 2, "seq_len": 24, "one_key_steps": 8}},
            "one_key_steps=8 leaves none of the 3 steps",
        ),
        (
            {"passkey": {**TINY.passkey, "keys": 2, "seq_len": 24, "one_key_steps": 0}},
            "passkey.one_key_steps: 0; give 1 or more",
        ),
    ],
)
def test_the_controls_settings_are_checked_before_anything_trains(changes, message):
    data = preset_to_dict(replace(TINY, **changes))
    with pytest.raises(ExperimentError, match=message):
        preset_from_dict(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cache_window": -1}, "cache_window: -1; give 0"),
        ({"cache_window": 8, "cache_sinks": ()}, "cache_sinks: \\[\\]"),
        ({"cache_window": 8, "cache_sinks": (0, -1)}, "whole numbers 0 or more"),
        ({"cache_window": 8}, "add positions to the input"),
    ],
)
def test_a_rolling_cache_reading_is_checked_before_anything_trains(changes, message):
    data = preset_to_dict(replace(TINY, **changes))
    with pytest.raises(ExperimentError, match=message):
        preset_from_dict(data)


def test_the_multi_key_curriculum_trains_one_key_first_then_the_tasks_keys():
    task = {**TINY.passkey, "keys": 3, "one_key_steps": 2}
    keys = keys_by_step(task)
    assert [keys() for _ in range(5)] == [1, 1, 3, 3, 3]
    plain = keys_by_step({**TINY.passkey, "keys": 3})
    assert [plain() for _ in range(3)] == [3, 3, 3]


def test_training_rows_ask_every_key_and_the_scored_rows_one(monkeypatch):
    """``ask_every_key`` (chapter 12): after the one-key curriculum, each training
    batch asks every key; the scored batches keep the one question of the
    multi-key needle, so the accuracy read is the same task's."""
    from pe_tutorial.experiments.running import tasks

    calls = []
    real = tasks.passkey_batch

    def spied(size, n, generator, **kw):
        calls.append((size, kw["keys"], kw.get("ask_every_key", False)))
        return real(size, n, generator, **kw)

    monkeypatch.setattr(tasks, "passkey_batch", spied)
    task = {**TINY.passkey, "keys": 2, "seq_len": 32, "steps": 4}
    preset = replace(
        TINY,
        schemes=("rope",),
        seeds=(0,),
        language_models=False,
        extensions=False,
        passkey={**task, "one_key_steps": 1, "ask_every_key": True},
    )
    results = run_experiments(preset, device="cpu", progress=False)
    assert results["settings"]["passkey"]["ask_every_key"] is True
    trained = [c for c in calls if c[0] != 64]
    scored = [c for c in calls if c[0] == 64]
    assert trained == [(trained[0][0], 1, False)] + [(trained[0][0], 2, True)] * 3
    assert scored and all(c[1:] == (2, False) for c in scored)
