"""An experiment as a TOML file or flags (``experiments/configuration/config.py``): the shipped presets
as files, --set, sweeps, the checks made before anything trains, a reader's own
corpus (``lm.data.text_corpus``), --dry-run, and the show command's hand-over."""

from __future__ import annotations

import json
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pe_tutorial.experiments import (
    PRESETS,
    ExperimentError,
    Preset,
    cli,
    main,
    preset_from_dict,
    preset_to_dict,
    summarise,
)
from pe_tutorial.experiments.configuration import presets
from pe_tutorial.experiments.configuration.config import apply_setting, parse_value
from pe_tutorial.experiments.running import units
from pe_tutorial.experiments.running.runner import Runner
from pe_tutorial.lm.data import text_corpus, text_files
from pe_tutorial.lm.train import TrainConfig

PROG = "python -m pe_tutorial.experiments"
CPU = torch.device("cpu")

# Today's Python definitions of the presets, before they became files, written
# out with the defaults they relied on then. Fields added since (corpus,
# extensions, sweep, curve_points) take their defaults.
SCHEMES = ("nope", "learned", "sinusoidal", "rope", "alibi", "t5", "shaw", "cope")
METHODS = ("linear", "ntk", "dynamic", "yarn", "llama3")
PASSKEY = {
    "seq_len": 64,
    "steps": 600,
    "batch_size": 32,
    "key_len": 4,
    "depths": (0.0, 0.25, 0.5, 0.75, 1.0),
}
STANDARD_VARIANTS = {
    "post_norm_schemes": ("learned", "rope", "alibi"),
    "every_layer_schemes": ("learned", "sinusoidal"),
    "learning_rate_schemes": ("rope",),
    "learning_rates": (1e-3, 1e-2),
    "language_schemes": ("nope", "learned", "sinusoidal", "rope", "alibi", "t5"),
}
TODAY = {
    "quick": Preset(
        name="quick",
        model={"d_model": 64, "num_heads": 4, "num_layers": 2},
        train=TrainConfig(steps=200, batch_size=16, seq_len=64, warmup_steps=20),
        seeds=(0,),
        multiples=(1, 2, 4, 8),
        eval_windows=16,
        train_bytes=2_000_000,
        validation_bytes=400_000,
        schemes=SCHEMES,
        post_norm_schemes=("rope", "alibi"),
        every_layer_schemes=("sinusoidal",),
        extension_factor=4.0,
        extension_methods=METHODS,
        finetune_methods=(None, "linear", "yarn"),
        finetune_steps=40,
        lookback={"seq_len": 32, "lookback": 5, "steps": 150, "num_symbols": 16},
        passkey={},
    ),
    "standard": Preset(
        name="standard",
        model={"d_model": 128, "num_heads": 4, "num_layers": 3},
        train=TrainConfig(steps=800, batch_size=16, seq_len=128, warmup_steps=80),
        seeds=(0, 1, 2),
        eval_windows=64,
        train_bytes=4_000_000,
        validation_bytes=1_000_000,
        schemes=SCHEMES,
        **STANDARD_VARIANTS,
        ablations=(("t5", (("t5_max_distance", 1024),)),),
        extension_methods=METHODS,
        finetune_methods=(None, "linear", "yarn"),
        finetune_steps=150,
        lookback={"seq_len": 32, "lookback": 5, "steps": 400, "num_symbols": 16},
        passkey=PASSKEY,
    ),
    "frontier": Preset(
        name="frontier",
        model={"d_model": 128, "num_heads": 4, "num_layers": 3, "global_every": 3},
        train=TrainConfig(steps=800, batch_size=16, seq_len=128, warmup_steps=80),
        seeds=(0, 1, 2),
        eval_windows=64,
        train_bytes=4_000_000,
        validation_bytes=1_000_000,
        schemes=("nope", "rope", "p-rope", "irope", "local-global"),
        post_norm_schemes=(),
        every_layer_schemes=(),
        ablations=(
            ("rope", (("rope_base", 1e6),)),
            ("irope", (("irope_temperature", False),)),
            ("irope", (("irope_qk_norm", True),)),
            ("p-rope", (("rope_fraction", 0.375),)),
        ),
        extension_methods=(),
        finetune_methods=(None, "linear", "ntk", "yarn"),
        finetune_steps=40,
        passkey={**PASSKEY, "steps": 1800},
    ),
    "streaming": Preset(
        name="streaming",
        model={"d_model": 128, "num_heads": 4, "num_layers": 3},
        train=TrainConfig(steps=800, batch_size=16, seq_len=128, warmup_steps=80),
        seeds=(0, 1, 2),
        eval_windows=32,
        train_bytes=4_000_000,
        validation_bytes=1_000_000,
        schemes=("nope", "rope", "alibi"),
        post_norm_schemes=(),
        every_layer_schemes=(),
        extensions=False,
        cache_window=64,
        cache_sinks=(0, 1, 4),
    ),
    "full": Preset(
        name="full",
        model={"d_model": 256, "num_heads": 8, "num_layers": 6},
        train=TrainConfig(steps=3000, batch_size=32, seq_len=256, warmup_steps=300),
        seeds=(0, 1, 2),
        eval_windows=64,
        train_bytes=20_000_000,
        validation_bytes=2_000_000,
        schemes=SCHEMES,
        **STANDARD_VARIANTS,
        ablations=(("t5", (("t5_max_distance", 2048),)),),
        extension_methods=METHODS,
        finetune_methods=(None, "linear", "yarn"),
        finetune_steps=400,
        lookback={"seq_len": 64, "lookback": 5, "steps": 1000, "num_symbols": 16},
        passkey={**PASSKEY, "seq_len": 128, "steps": 1500},
    ),
}

# A small experiment as a reader writes one: two schemes, their own text
TINY_TOML = """
name = "two-schemes"
corpus = "texts"
schemes = ["rope", "alibi"]
seeds = [0]
multiples = [1, 2]
eval_windows = 2
train_bytes = 20_000
validation_bytes = 5_000

[model]
d_model = 16
num_heads = 2
num_layers = 1

[train]
steps = 3
batch_size = 2
seq_len = 16
warmup_steps = 1

[analyses]
extensions = false
"""


def _texts(folder: Path, files: int = 12) -> Path:
    """A folder of small text files, each of its own words."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        line = f"Line {i}: the quick brown fox number {i} jumps over the lazy dog.\n"
        (folder / f"note-{i:02d}.txt").write_text(line * 30)
    return folder


@pytest.fixture
def experiment(tmp_path) -> Path:
    """The small experiment's file, beside its folder of text."""
    _texts(tmp_path / "texts")
    path = tmp_path / "two-schemes.toml"
    path.write_text(TINY_TOML)
    return path


def test_the_presets_are_the_files_and_today_s_values():
    # the presets written out here come first (PRESET_ORDER); the others
    # (chapter 9's tuning sweeps) are files only
    assert list(PRESETS)[: len(TODAY)] == list(TODAY)
    for name, preset in TODAY.items():
        assert PRESETS[name] == preset, name
    folder = Path(presets.__file__).parents[1] / "presets"
    assert sorted(p.stem for p in folder.glob("*.toml")) == sorted(PRESETS)
    for path in folder.glob("*.toml"):
        data = tomllib.loads(path.read_text())
        assert preset_from_dict(data) == PRESETS[path.stem]


def test_a_preset_written_out_reads_back_the_same(tmp_path):
    swept = replace(
        PRESETS["standard"],
        name="swept",
        corpus=str(tmp_path),
        extensions=False,
        sweep=(("train.learning_rate", (1e-3, 1e-2)), ("model.num_heads", (2, 4))),
        tuned=(("t5", (("learning_rate", 1e-2), ("position_lr_multiplier", 30.0))),),
    )
    for preset in (*PRESETS.values(), swept):
        data = preset_to_dict(preset)
        assert json.loads(json.dumps(data)) == data  # JSON-ready: a run file holds it
        assert preset_from_dict(data) == preset, preset.name


def test_set_reads_toml_values_bare_words_and_dotted_keys():
    assert parse_value("1e-3") == 0.001 and parse_value("true") is True
    assert parse_value("[rope, t5]") == ["rope", "t5"]
    assert parse_value('["rope", "t5"]') == ["rope", "t5"]
    assert parse_value("rope") == "rope" and parse_value("/some/path") == "/some/path"
    assert parse_value("{ t5_max_distance = 1024 }") == {"t5_max_distance": 1024}
    data = {"train": {"steps": 5}}
    apply_setting(data, "train.learning_rate=1e-3")
    apply_setting(data, "sweep.model.num_heads=[2, 4]")
    assert data == {
        "train": {"steps": 5, "learning_rate": 0.001},
        "sweep": {"model": {"num_heads": [2, 4]}},
    }
    with pytest.raises(ExperimentError, match="train.steps is not a table"):
        apply_setting(data, "train.steps.x=1")
    preset = preset_from_dict(
        {**preset_to_dict(PRESETS["quick"]), "analyses": {"passkey": True}}
    )
    assert preset.passkey == presets.STANDARD_PASSKEY  # switched on: its defaults


def test_a_sweep_trains_each_scheme_at_every_value_and_names_it(
    experiment, monkeypatch
):
    data = tomllib.loads(experiment.read_text())
    data["corpus"] = "stdlib"
    data["sweep"] = {
        "train": {"learning_rate": [1e-3, 1e-2]},
        "model": {"mlp_ratio": [2, 4]},
    }
    preset = preset_from_dict(data)
    assert preset.sweep == (
        ("train.learning_rate", (1e-3, 1e-2)),
        ("model.mlp_ratio", (2, 4)),
    )
    found = presets.variants(preset)
    assert [v.key for v in found[:4]] == [
        "rope/pre/input/lr=0.001/mlp_ratio=2",
        "rope/pre/input/lr=0.001/mlp_ratio=4",
        "rope/pre/input/lr=0.01/mlp_ratio=2",
        "rope/pre/input/lr=0.01/mlp_ratio=4",
    ]
    assert len(found) == 8 and found[4].key.startswith("alibi/")
    assert found[1].label == "rope pre-norm lr 0.001 mlp_ratio=4"
    # the swept values are the unit's arguments, so in its fingerprint
    runner = Runner(preset, CPU, progress=False)
    plan = {unit.key: unit for unit in runner.plan()}
    one = plan["lm/rope/pre/input/lr=0.001/mlp_ratio=2/0"]
    other = plan["lm/rope/pre/input/lr=0.01/mlp_ratio=2/0"]
    variant = one.fingerprint["arguments"]["variant"]
    assert variant["learning_rate"] == 1e-3 and variant["changes"] == [["mlp_ratio", 2]]
    assert {
        k for k in one.fingerprint if one.fingerprint[k] != other.fingerprint[k]
    } == {"arguments"}
    # and they reach the model and its training
    seen = []
    train_model = Runner.train_model

    def spy(self, config, seed, label, training, *args, **options):
        seen.append((config.mlp_ratio, training.learning_rate))
        return train_model(self, config, seed, label, training, *args, **options)

    monkeypatch.setattr(Runner, "train_model", spy)
    other.compute()
    assert seen == [(2, 1e-2)]
    # a TrainConfig field other than the rate is the variant's training
    data["sweep"] = {"train": {"warmup_steps": [1, 2]}}
    swept = presets.variants(preset_from_dict(data))[1]
    assert swept.key == "rope/pre/input/train.warmup_steps=2"
    assert runner.variant_training(swept).warmup_steps == 2


def test_a_unit_of_a_swept_value_has_it_in_its_fingerprint():
    """Through units.fingerprint: every swept value moves the unit's fingerprint."""
    base = preset_from_dict(preset_to_dict(PRESETS["quick"]))
    for path, values in (
        ("train.learning_rate", (1e-3, 2e-3)),
        ("model.mlp_ratio", (2, 3)),
    ):
        swept = presets.swept_variants("rope", ((path, values),))
        printed = [
            units.fingerprint(
                units.LANGUAGE_MODEL,
                base,
                {"variant": v, "seed": 0},
                device_type="cpu",
                corpus={"sha256": "0"},
            )
            for v in swept
        ]
        assert printed[0] != printed[1], path


def _refused(
    monkeypatch, capsys, folder: Path, *arguments: str, corpus_read: bool = False
) -> str:
    """The command fails at once with one line, exit 2, having trained and written
    nothing; the message after ``error:``. ``corpus_read``: it fails once the
    corpus is read, before the plan."""

    def trained(*args, **kwargs):
        raise AssertionError("it began to run")

    monkeypatch.undo()  # a guard of an earlier call
    if corpus_read:
        monkeypatch.setattr(Runner, "plan", trained)
    else:
        monkeypatch.setattr(cli, "run_experiments", trained)
        monkeypatch.setattr(cli, "run_units", trained)
    before = sorted(folder.rglob("*"))
    out = folder / "out.json"
    command = [*arguments, "--json", str(out), "--device", "cpu", "--no-progress"]
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"{PROG}: error: ")
    assert sorted(folder.rglob("*")) == before  # no record, no partial file
    return captured.err.removeprefix(f"{PROG}: error: ").strip()


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "schemes=[rope, ropee]",
            "schemes: unknown scheme 'ropee'; choose from nope, learned, sinusoidal, "
            "rope, alibi, t5, shaw, cope,",
        ),
        (
            "train.lerning_rate=1e-3",
            "train.lerning_rate: no such field; TrainConfig has steps, batch_size, "
            "seq_len, learning_rate, warmup_steps, weight_decay, grad_clip",
        ),
        (
            "model.num_head=8",
            "model.num_head: no such field; ModelConfig has d_model, num_heads, "
            "num_layers,",
        ),
        ("lerning_rate=1e-3", "lerning_rate: no such field; an experiment has name,"),
        (
            "learning_rate=1e-3",
            "learning_rate: no such field (did you mean train.learning_rate, in "
            "[train]?); an experiment has",
        ),
        (
            "analyses.passkeys=true",
            "analyses.passkeys: no such analysis; choose from extensions, lookback, "
            "passkey (length curves and loss by position always run)",
        ),
        (
            "lookback.step=3",
            "lookback.step: no such field; [lookback] has seq_len, lookback, steps, "
            "num_symbols",
        ),
        (
            "multiples=[0.5, 1, 2]",
            "multiples: 0.5 reads 32 bytes, below the training window train.seq_len "
            "= 64; give whole numbers 1 or more",
        ),
        ("multiples=[1, 3, 4]", "multiples: 3 does not divide 4, the largest"),
        (
            "train.learning_rate=[1e-3, 1e-2]",
            "train.learning_rate: one value expected (a number), got a list [0.001, "
            "0.01]; to train at each of them, sweep it: [sweep] train.learning_rate "
            "= [0.001, 0.01]",
        ),
        (
            "eval_windows=[4, 8]",
            "eval_windows: one value expected (a whole number), got a list [4, 8]",
        ),
        (
            "train.steps=many",
            "train.steps: expected a whole number, got 'many' (a string)",
        ),
        ("seeds=3", "seeds: expected a list of whole numbers, got 3 (a whole number)"),
        ("train.steps=0", "train: steps must be a positive integer, got 0"),
        (
            "model.num_heads=3",
            "model: nope: d_model=64 is not divisible by num_heads=3",
        ),
        ("model.scheme=rope", "model.scheme: set by each variant, not in [model]"),
        ("train.seed=3", "train.seed: each unit sets its own from seeds"),
        (
            "finetune_methods=[none, yarm]",
            "finetune_methods: unknown method 'yarm'; choose from none (plain RoPE), "
            "linear, ntk, dynamic, yarn, llama3",
        ),
        (
            "every_layer_schemes=[rope]",
            "every_layer_schemes: 'rope' has no absolute table to add in every layer; "
            "choose from learned, sinusoidal",
        ),
        (
            "sweep.train.seq_len=[32, 64]",
            "sweep.train.seq_len: cannot be swept: the lengths read are multiples of it",
        ),
        (
            "sweep.train.lerning_rate=[1e-3]",
            "sweep.train.lerning_rate: no such field; TrainConfig has steps,",
        ),
        (
            "sweep.train.learning_rate=1e-3",
            "sweep.train.learning_rate: a sweep takes a list",
        ),
        (
            "lookback.lookback=40",
            "lookback: lookback=40 leaves nothing to predict in 32",
        ),
        ("train=5", "train: expected a table, got 5 (a whole number)"),
        (
            "passkey.depth=[0.5]",
            "passkey.depth: no such field; [passkey] has seq_len, steps, batch_size, "
            "key_len, depths",
        ),
        (
            "ablations=[{scheme = 't5', model = {t5_max_distanc = 1024}}]",
            "ablations[0].model.t5_max_distanc: no such field; ModelConfig has d_model,",
        ),
        (
            "ablations=[{scheme = 't6', model = {t5_max_distance = 1024}}]",
            "ablations[0].scheme: unknown scheme 't6'; choose from nope,",
        ),
        (
            "tuned.t6={learning_rate = 1e-2}",
            "tuned.t6: unknown scheme 't6'; choose from nope,",
        ),
        (
            "tuned.t5={lr = 1e-2}",
            "tuned.t5.lr: no such field; TrainConfig has steps,",
        ),
        (
            "tuned.t5={seq_len = 64}",
            "tuned.t5.seq_len: the same for every scheme of a run; set it in [train]",
        ),
        ("tuned.t5={}", "tuned.t5: empty; give the fields this scheme trains with"),
        # a value listed twice in a sweep: its own message, naming field and value
        # (without it, the repeated variants were refused later under another name)
        (
            "sweep.train.learning_rate=[1e-3, 3e-3, 0.001]",
            "sweep.train.learning_rate: 0.001 given twice",
        ),
        (
            "sweep.model.num_heads=[2, 4, 4]",
            "sweep.model.num_heads: 4 given twice",
        ),
        (
            "tuned.t5={learning_rate = -1.0}",
            "tuned.t5: learning_rate must be a positive finite number",
        ),
        ('scored_split="tests"', "scored_split: 'tests'; give \"validation\" or"),
        (
            'scored_split="test"',
            'scored_split: "test" needs a test split; set test_bytes',
        ),
        ("test_bytes=-1", "test_bytes: -1; give 0 (no test split) or more"),
        ("noequals", "--set noequals: expected KEY=VALUE"),
        ("name=", "--set: give a value after the ="),
    ],
)
def test_a_bad_field_is_one_line_before_anything_runs(
    setting, message, tmp_path, monkeypatch, capsys
):
    error = _refused(monkeypatch, capsys, tmp_path, "--set", setting)
    assert error.startswith(message), error


def test_a_missing_corpus_bad_files_and_bad_combinations_are_one_line(
    experiment, tmp_path, monkeypatch, capsys
):
    folder = experiment.parent
    error = _refused(
        monkeypatch, capsys, folder, "--config", str(experiment), "--set", "corpus=gone"
    )
    assert error.startswith(f"corpus: no folder or file at {Path.cwd() / 'gone'}; give")
    moved = folder / "moved.toml"
    moved.write_text(TINY_TOML.replace('"texts"', '"elsewhere"'))
    error = _refused(monkeypatch, capsys, folder, "--config", str(moved))
    assert error.startswith(f"corpus: no folder or file at {folder / 'elsewhere'}")
    broken = folder / "broken.toml"
    broken.write_text("schemes = [rope")
    assert _refused(monkeypatch, capsys, folder, "--config", str(broken)).startswith(
        f"{broken}: not TOML: "
    )
    error = _refused(monkeypatch, capsys, folder, "--config", str(folder / "no.toml"))
    assert error == f"--config: no file at {folder / 'no.toml'}"
    error = _refused(
        monkeypatch, capsys, folder, "--preset", "quick", "--config", str(experiment)
    )
    assert error.startswith("--preset and --config: give one")
    error = _refused(
        monkeypatch, capsys, folder, "--config", str(experiment), "--record"
    )
    assert error.startswith("--record writes the package's record of a preset as it")
    # a corpus too small for the scoring: said once the corpus is read, still before
    _texts(folder / "few", files=2)
    error = _refused(
        monkeypatch,
        capsys,
        folder,
        "--config",
        str(experiment),
        "--set",
        f"corpus={folder / 'few'}",
        "--set",
        "eval_windows=400",
        corpus_read=True,
    )
    assert "cannot hold 400 segments" in error


def test_record_says_it_replaces_the_shipped_record(capsys):
    """From a notebook, --record writes into the runtime's package, over the record
    the chapters read: it says so, and names the way to keep a run (issue 46)."""
    assert main(["--preset", "tuned", "--record", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "--record would replace " in out
    assert "experiments-tuned.json, the record the package ships" in out
    assert "give --json PATH in a folder that lasts" in out
    assert main(["--preset", "tuned", "--json", "x.json", "--dry-run"]) == 0
    assert "would replace" not in capsys.readouterr().out


def test_shard_needs_json_and_a_shard_is_k_of_n(tmp_path, capsys):
    assert main(["--shard", "1/2", "--dry-run"]) == 2
    assert "--shard K/N keeps its units beside --json PATH" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--shard", "3/2"])
    assert "give K/N, shard K of N with 1 <= K <= N" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--jobs", "0"])
    assert "give a whole number 1 or more" in capsys.readouterr().err


def test_dry_run_lists_the_units_and_writes_nothing(tmp_path, capsys):
    command = [
        "--set",
        "sweep.train.learning_rate=[1e-3, 1e-2]",
        "--set",
        "schemes=[rope]",
    ]
    out = tmp_path / "out.json"
    assert main([*command, "--json", str(out), "--dry-run", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("experiment quick: 6 units, ")
    assert (
        printed[1].strip()
        == "lm/rope/pre/input/lr=0.001/0  (language model, 200 steps)"
    )
    assert "lookback/rope/0" in printed[-1]
    assert list(tmp_path.iterdir()) == []
    assert main([*command, "--json", str(out), "--dry-run", "--shard", "2/3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("experiment quick: 2 units (shard 2/3 of 6), ")


def test_extensions_off_leaves_rope_and_the_learned_table_plain():
    preset = replace(
        preset_from_dict(preset_to_dict(PRESETS["quick"])),
        extensions=False,
        passkey=dict(presets.STANDARD_PASSKEY),
    )
    plan = Runner(preset, CPU, progress=False).plan()
    kinds = {unit.kind for unit in plan}
    assert kinds == {units.LANGUAGE_MODEL, units.LOOKBACK, units.PASSKEY}


def test_a_folder_of_text_is_split_by_file_and_read_as_bytes(tmp_path):
    folder = _texts(tmp_path / "texts", files=12)
    (folder / ".hidden.txt").write_text("secret")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("x")
    (folder / "image.png").write_bytes(b"\x89PNG\0\0\0")
    (folder / "sub").mkdir()
    (folder / "sub" / "more.md").write_text("more words\n" * 50)
    names = text_files(folder)
    assert names == sorted([f"note-{i:02d}.txt" for i in range(12)] + ["sub/more.md"])
    corpus = text_corpus(folder)
    train = {name for name, _ in corpus.train_files}
    validation = {name for name, _ in corpus.validation_files}
    assert train and validation and not train & validation
    assert train | validation == set(names)
    assert corpus.train.numel() == sum((folder / n).stat().st_size for n in train)
    assert corpus.source.startswith("the folder texts (13 text files, ")
    assert text_corpus(folder, max_train_bytes=100).train.numel() == 100
    # two files: one each side, whatever their hashes
    pair = _texts(tmp_path / "pair", files=2)
    corpus = text_corpus(pair)
    assert len(corpus.train_files) == len(corpus.validation_files) == 1
    # one file: its start trains, its end validates
    one = pair / "note-00.txt"
    data = one.read_bytes()
    corpus = text_corpus(one)
    cut = len(data) * 90 // 100
    assert bytes(corpus.train.tolist()) == data[:cut]
    assert bytes(corpus.validation.tolist()) == data[cut:]
    with pytest.raises(ValueError, match="no folder or file at"):
        text_corpus(tmp_path / "gone")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no text files under"):
        text_corpus(tmp_path / "empty")


def test_a_reader_s_experiment_on_their_own_text_runs_from_one_command(
    experiment, capsys
):
    out = experiment.parent / "out.json"
    command = ["--config", str(experiment), "--json", str(out), "--device", "cpu"]
    assert main([*command, "--no-progress"]) == 0
    record = json.loads(out.read_text())
    texts = str(experiment.parent / "texts")
    assert record["preset"] == "two-schemes" and record["settings"]["corpus"] == texts
    entries = record["language_model"]
    assert [(e["scheme"], e["corpus"]) for e in entries] == [
        ("rope", texts),
        ("alibi", texts),
    ]
    assert [row["variant"] for row in summarise(record)] == ["rope", "alibi"]
    assert record["metadata"]["corpus"]["source"].startswith("the folder texts (12 ")
    assert record["rope_extension"] == [] and record["lookback"] == []
    assert record["metadata"]["command"] == f"{PROG} {' '.join(command)} --no-progress"


def test_the_same_text_at_another_path_is_the_same_unit(experiment, tmp_path):
    data = tomllib.loads(experiment.read_text())
    here = preset_from_dict(data, base=experiment.parent)
    shutil.copytree(experiment.parent / "texts", tmp_path / "copy" / "texts")
    there = preset_from_dict(data, base=tmp_path / "copy")
    assert here.corpus != there.corpus

    def printed(preset):
        return {u.key: u.fingerprint for u in Runner(preset, CPU, False).plan()}

    assert printed(here) == printed(there)
    (tmp_path / "copy" / "texts" / "note-03.txt").write_text("other words\n" * 40)
    assert printed(here) != printed(there)


def test_show_hands_over_to_the_viewer_or_says_it_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(cli, "find_spec", lambda name: None)
    assert main(["show", "results.json"]) == 2
    assert capsys.readouterr().err == (
        f"{PROG} show: error: the viewer is not installed "
        "(pe_tutorial/experiments/viewing/viewer.py is missing from this copy of the package)\n"
    )
    monkeypatch.undo()
    viewer = pytest.importorskip("pe_tutorial.experiments.viewing.viewer")
    calls = []
    monkeypatch.setattr(viewer, "main", lambda argv: calls.append(argv) or 0)
    assert main(["show", "results.json", "--figures", "figs"]) == 0
    assert calls == [["results.json", "--figures", "figs"]]
