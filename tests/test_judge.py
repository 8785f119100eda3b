"""Judging a reader's own scheme by chapter 9's protocol (issue 51): ``judge.py``,
``report_card.py``, ``toml_text.py`` and the KERPLE example in ``examples/``."""

from __future__ import annotations

import json
import math
import platform
import tomllib
from pathlib import Path

import pytest
import torch

from pe_tutorial.experiments.cli import main
from pe_tutorial.experiments.configuration import scheme_files
from pe_tutorial.experiments.configuration.config import (
    PRESETS,
    preset_from_dict,
    preset_to_dict,
    read_experiment,
)
from pe_tutorial.experiments.configuration.toml_text import toml_text
from pe_tutorial.experiments.judging import judge as judging
from pe_tutorial.experiments.viewing.run_files import plain_entries
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.registry import registered, scheme_names, unregister_scheme

KERPLE = str(Path(__file__).resolve().parents[1] / "examples" / "kerple.py")
CPU = torch.device("cpu")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as each --jobs worker has: torch's CPU sums depend on the
    number of threads, so only then do the two agree to the last digit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def kerple():
    """The example file loaded (its scheme registered) for the module's tests."""
    before = set(scheme_names())
    scheme_files.load([KERPLE])
    yield "kerple-log"
    for name in set(scheme_names()) - before:
        unregister_scheme(name)
    scheme_files._LOADED.pop(KERPLE, None)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``--set`` changes that make every stage tiny: a folder of six small text
    files for corpus, a one-layer model, two steps, two seeds, two rates."""
    corpus = tmp_path_factory.mktemp("corpus")
    generator = torch.Generator().manual_seed(0)
    for i in range(6):
        codes = torch.randint(97, 105, (6000,), generator=generator).tolist()
        (corpus / f"f{i}.txt").write_text("".join(map(chr, codes)))
    settings = {
        "corpus": str(corpus),
        "test_bytes": 0,
        "scored_split": "validation",
        "train_bytes": 20000,
        "validation_bytes": 5000,
        "eval_windows": 2,
        "curve_points": 2,
        "seeds": "[0,1]",
        "train.steps": 2,
        "train.batch_size": 2,
        "train.seq_len": 16,
        "train.warmup_steps": 0,
        "model.d_model": 16,
        "model.num_heads": 2,
        "model.num_layers": 1,
        "passkey.steps": 2,
        "passkey.seq_len": 12,
        "passkey.key_len": 2,
        "passkey.depths": "[0.0,1.0]",
        "lookback.steps": 2,
        "lookback.seq_len": 8,
        "sweep.train.learning_rate": "[1e-3,3e-3]",
    }
    sets = [part for k, v in settings.items() for part in ("--set", f"{k}={v}")]
    return [
        *sets,
        *("--against", "rope", "--device", "cpu", "--no-progress"),
        *("--edge-rounds", "1"),  # one round beyond the grid's edge at most
    ]


@pytest.fixture(scope="module")
def judged(kerple, tiny, tmp_path_factory):
    """The example judged in one process: its folder."""
    out = tmp_path_factory.mktemp("judge") / "kerple"
    assert main(["judge", KERPLE, "--out", str(out), *tiny]) == 0
    return out


def _same_judge(folder: Path, expected: Path) -> None:
    """Two judges agree: ``judged.json`` less its times, dates and commands."""

    def comparable(path: Path) -> dict:
        record = json.loads((path / "judged.json").read_text())
        record.pop("metadata")
        judge = record["settings"]["judge"]
        for key in ("task_metadata", "stage_seconds"):
            judge.pop(key)
        return record

    assert comparable(folder) == comparable(expected)


def test_the_example_is_kerples_log_bias_written_out(kerple):
    """-r1 log(1 + r2 |i - j|) per head, each parameter projected to 0.01 or more
    (the parameter itself, as the authors' code does), for queries that are the
    last of the keys; checked against a loop. One pair per head, shared by every
    layer of a model, as in the authors' code."""
    torch.manual_seed(0)
    scheme = registered(kerple)
    config = _config(3)
    shared = scheme.shared(config)
    layer = scheme.layer(config, shared)
    with torch.no_grad():
        shared.r1[0] = -0.5  # projected back to the floor before use
    r1s = [max(float(r), 0.01) for r in shared.r1.detach()]
    r2s = [max(float(r), 0.01) for r in shared.r2.detach()]
    q, k = torch.zeros(1, 3, 4, 8), torch.zeros(1, 3, 7, 8)
    bias = layer.bias(q, k, causal=True)
    assert bias.shape == (3, 4, 7)
    assert float(shared.r1.detach()[0]) == pytest.approx(0.01)  # the parameter moved
    bias.sum().backward()
    assert shared.r1.grad[0] != 0  # at the floor, it still learns
    for h in range(3):
        r1, r2 = r1s[h], r2s[h]
        for a in range(4):
            i = 3 + a  # the queries are keys 3..6
            for j in range(7):
                expected = -r1 * math.log(1 + r2 * abs(i - j))
                assert float(bias[h, a, j].detach()) == pytest.approx(
                    expected, abs=1e-6
                )
    assert judging.has_position_parameters(kerple)
    assert not judging.has_position_parameters("alibi")
    model = ByteTransformer(ModelConfig(scheme=kerple, d_model=24, num_heads=3))
    assert [p.numel() for p in model.position_parameters()] == [3, 3]  # not per layer


def _config(num_heads: int) -> ModelConfig:
    return ModelConfig(scheme="kerple-log", d_model=24, num_heads=num_heads)


def test_a_judge_runs_chapter_9s_protocol_on_the_scheme(judged, kerple):
    """Stage files a reader can run by hand; the tuning's lowest bpb at L chooses
    the held-out and task training; the baselines that could not be reused
    (settings changed by --set) are trained beside it, and the card says why."""
    files = sorted(p.name for p in judged.iterdir())
    stages = ["heldout", "tasks", "tune", "tune-position"]
    points = []
    for stage in ("tune", "tune-position"):
        record = json.loads((judged / f"{stage}.json").read_text())
        for entry in record["language_model"]:
            rate = dict(entry.get("training", {})).get("position_lr_multiplier", 1.0)
            points.append(
                (entry["summary"]["16"]["mean"], entry["learning_rate"], rate)
            )
    # the grid's edge, by hand: two rates at each multiplier, so the best rate is
    # always at one end; multipliers 1, 10, 30 at each rate, so 1 and 30 are ends
    _, rate, times = min(points)
    edges = ["tune-edge-1-rate"] + (["tune-edge-1-multiplier"] if times != 10 else [])
    assert files == sorted(
        [
            "card",
            "judged.json",
            *(f"{s}.json" for s in [*stages, *edges]),
            *(f"{s}.toml" for s in [*stages, *edges]),
        ]
    )
    edge_rate = json.loads((judged / "tune-edge-1-rate.json").read_text())
    (beyond,) = edge_rate["language_model"]
    assert beyond["learning_rate"] == (1e-2 if rate == 3e-3 else 3e-4)
    for stage in edges:
        record = json.loads((judged / f"{stage}.json").read_text())
        for entry in record["language_model"]:
            multiplier = dict(entry.get("training", {})).get(
                "position_lr_multiplier", 1.0
            )
            points.append(
                (entry["summary"]["16"]["mean"], entry["learning_rate"], multiplier)
            )
    presets = {
        s: preset_from_dict(read_experiment(judged / f"{s}.toml")[0]) for s in stages
    }
    assert presets["tune"].schemes == presets["tune-position"].schemes == (kerple,)
    assert dict(presets["tune-position"].sweep)["train.position_lr_multiplier"] == (
        10.0,
        30.0,
    )
    assert presets["heldout"].sweep == () and presets["heldout"].schemes == (
        kerple,
        "rope",
    )
    lowest = min(points)
    record = json.loads((judged / "judged.json").read_text())
    best = record["settings"]["judge"]["best"]
    assert best["learning_rate"] == lowest[1]
    assert best.get("position_lr_multiplier", 1.0) == lowest[2]
    assert dict(dict(presets["heldout"].tuned)[kerple]) == best
    assert dict(dict(presets["tasks"].tuned)[kerple]) == best
    assert len(record["settings"]["judge"]["tuning"]) == len(points) == 6 + len(edges)
    assert [r["stages"] for r in record["settings"]["judge"]["edge_rounds"]] == [edges]
    assert {e["scheme"] for e in record["language_model"]} == {kerple, "rope"}
    assert {e["scheme"] for e in record["passkey"]} == {kerple, "rope"}
    assert (
        "changes the heldout preset's"
        in record["settings"]["judge"]["retrained"]["heldout"]["rope"]
    )
    card = (judged / "card" / "report.md").read_text()
    assert "# Report card: `kerple-log`" in card
    for line in (
        "| `rope` | 16 |",
        "| `rope` | 128 |",
        "| `rope` | 12 |",
        "| `rope` | 8 |",
    ):
        assert line in card
    assert "On text, `rope` trained again here: this judge changes" in card
    for name in ("lengths.png", "learning_curves.png", "passkey.png"):
        assert (judged / "card" / name).is_file() and f"({name})" in card


def test_shards_merged_give_the_judge_of_one_process(judged, kerple, tiny, tmp_path):
    """Each call with --shard K/N runs that shard of the stage reached; the last
    shard of a stage merges it, and the judge goes on where it stopped."""
    out = tmp_path / "sharded"
    for _ in range(8):  # four stages and up to two beyond the edge, two shards each
        if (out / "judged.json").exists():
            break
        for k in (1, 2):
            assert (
                main(["judge", KERPLE, "--out", str(out), "--shard", f"{k}/2", *tiny])
                == 0
            )
    assert (out / "heldout.json.1-of-2.partial").exists()
    _same_judge(out, judged)


def test_jobs_give_the_judge_of_one_process(judged, kerple, tiny, tmp_path):
    out = tmp_path / "jobs"
    assert main(["judge", KERPLE, "--out", str(out), "--jobs", "2", *tiny]) == 0
    _same_judge(out, judged)


def test_the_books_records_are_reused_where_the_settings_match(kerple, monkeypatch):
    """At the book's settings every baseline comes from the shipped records; a
    changed setting, other tuned rates or another device trains it again."""
    best = {"learning_rate": 3e-3, "position_lr_multiplier": 10.0}
    stages = judging.stage_presets(kerple, KERPLE, best=best)
    # the text stage reads this Python's standard library: the book's records read
    # Python 3.11.7's, so under another Python its baselines are trained again
    recorded = judging.load_results("heldout")["metadata"]["corpora"]["stdlib"]
    same_python = recorded["source"].startswith(f"Python {platform.python_version()} ")
    for stage, preset in stages.items():
        reasons = judging.baseline_sources(stage, preset, judging.BOOK_SCHEMES, CPU)
        if stage == "tasks" or same_python:
            assert reasons == dict.fromkeys(judging.BOOK_SCHEMES), stage
        else:
            assert all(
                why.startswith(
                    "the recorded heldout run read another corpus: "
                    f"{recorded['source']!r}"
                )
                for why in reasons.values()
            ), reasons
    changed = judging.stage_presets(
        kerple, KERPLE, best=best, settings=["train.steps=5"]
    )
    why = judging.baseline_sources("heldout", changed["heldout"], ("rope",), CPU)[
        "rope"
    ]
    assert why == "this judge changes the heldout preset's train"
    on_gpu = judging.baseline_sources(
        "tasks", stages["tasks"], ("rope",), torch.device("cuda")
    )
    assert on_gpu["rope"] == "the recorded tuned run trained on cpu, this on cuda"
    real = judging.load_results

    def other_rates(name):
        record = real(name)
        record["settings"]["tuned"]["rope"] = {"learning_rate": 0.01}
        return record

    monkeypatch.setattr(judging, "load_results", other_rates)
    # the tasks stage reads no corpus, so it holds under any Python
    stage, book = ("heldout", "heldout") if same_python else ("tasks", "tuned")
    reasons = judging.baseline_sources(stage, stages[stage], ("rope", "alibi"), CPU)
    assert reasons == {
        "rope": f"the recorded {book} run trained rope at other rates",
        "alibi": None,
    }


def test_a_reused_baseline_is_the_books_plain_entry(judged, kerple):
    """``assemble`` adds the shipped record's entries of a reused baseline: the plain
    model (pre-norm, table at the input, no change), with all its seeds."""
    records = {
        s: json.loads((judged / f"{s}.json").read_text()) for s in ("heldout", "tasks")
    }
    reused = {"heldout": {"alibi": "heldout"}, "tasks": {"alibi": "tasks"}}
    judged_record = judging.assemble(
        kerple, records, reused, {}, [], {"learning_rate": 3e-3}, KERPLE, "judge", {}
    )
    book = judging.load_results("heldout")
    alibi = [e for e in judged_record["language_model"] if e["scheme"] == "alibi"]
    assert alibi == [
        e
        for e in book["language_model"]
        if e["scheme"] == "alibi" and not e["changes"] and e["norm"] == "pre"
    ]
    assert len(alibi[0]["runs"]) == len(book["settings"]["seeds"])
    tasks = judging.load_results("tuned")
    assert [e for e in judged_record["passkey"] if e["scheme"] == "alibi"] == [
        e for e in tasks["passkey"] if e["scheme"] == "alibi"
    ]
    assert (
        judged_record["settings"]["judge"]["reused_from"]["heldout"]["date"]
        == (book["metadata"]["date"])
    )
    # sinusoidal trained at its own tuned rate (1e-2): the judged record carries
    # that rate, so a reader takes its entry for the plain scheme, not a variant
    reused = {"heldout": {"sinusoidal": "heldout"}, "tasks": {}}
    judged_record = judging.assemble(
        kerple, records, reused, {}, [], {"learning_rate": 3e-3}, KERPLE, "judge", {}
    )
    rate = book["settings"]["tuned"]["sinusoidal"]
    assert judged_record["settings"]["tuned"]["sinusoidal"] == rate
    text = plain_entries(judged_record, "stdlib")  # the book's corpus
    assert text["sinusoidal"]["learning_rate"] == rate["learning_rate"] != 3e-3


def test_the_bridges_entries_are_kept_apart_from_the_reused_ones(judged, kerple):
    """A bridge baseline (here the tiny judge's RoPE, as if trained again beside
    its record) goes to ``judged["bridge"]``; the verdicts' sections hold the
    recorded entry alone, and the judge table names the bridge and why."""
    records = {
        s: json.loads((judged / f"{s}.json").read_text()) for s in ("heldout", "tasks")
    }
    reused = {"heldout": {"rope": "heldout"}, "tasks": {"rope": "tasks"}}
    bridge = {"heldout": ("rope",), "tasks": ("rope",)}
    why = {"heldout": "recorded elsewhere", "tasks": "recorded elsewhere"}
    judged_record = judging.assemble(
        kerple,
        records,
        reused,
        {},
        [],
        {"learning_rate": 3e-3},
        KERPLE,
        "judge",
        {},
        bridge=(bridge, why),
    )
    book, tasks = judging.load_results("heldout"), judging.load_results("tuned")
    for section, record in (
        ("language_model", records["heldout"]),
        ("passkey", records["tasks"]),
        ("lookback", records["tasks"]),
    ):
        here = [e for e in record[section] if e["scheme"] == "rope"]
        assert judged_record["bridge"][section] == here != []
        ropes = [e for e in judged_record[section] if e["scheme"] == "rope"]
        source = book if section == "language_model" else tasks
        assert len(ropes) == 1 and ropes[0] in source[section]
    judge = judged_record["settings"]["judge"]
    assert judge["bridge"] == {"heldout": ["rope"], "tasks": ["rope"]}
    assert judge["bridge_why"] == why


def test_the_judged_record_times_the_stages_summed(judged):
    """The judged record's header reports the whole judge's training and scoring:
    every stage's own record's time summed (the edge rounds' too), each stage's
    kept beside it."""
    stages = [p.stem for p in judged.glob("*.json") if p.name != "judged.json"]
    assert len(stages) > 4  # the edge round's
    seconds = {
        s: json.loads((judged / f"{s}.json").read_text())["metadata"]["wall_seconds"]
        for s in stages
    }
    assert all(t > 0 for t in seconds.values())
    record = json.loads((judged / "judged.json").read_text())
    assert record["settings"]["judge"]["stage_seconds"] == seconds
    assert record["metadata"]["wall_seconds"] == pytest.approx(sum(seconds.values()))


def _stage_record(seeds: list[int], sections: tuple[str, ...]) -> dict:
    """A stage's record by hand: one kerple-log entry per section, a run per seed."""
    record = {
        "preset": "a stage",
        "metadata": {"command": "a stage", "wall_seconds": 1.0},
        "settings": {
            "seeds": seeds,
            "lookback": {"seq_len": 8},
            "passkey": {"seq_len": 12},
        },
    }
    for section in ("language_model", "lookback", "passkey"):
        runs = [{"seed": seed} for seed in seeds] if section in sections else None
        record[section] = [{"scheme": "kerple-log", "runs": runs}] if runs else []
    return record


def test_each_stages_seeds_are_recorded_where_they_belong():
    """As the shipped card: the held-out stage trains seeds 10-14, the tasks 0-2
    (the book's task record's); the judged record keeps each stage's seeds with
    its own entries, the tasks' as ``task_seeds``."""
    records = {
        "heldout": _stage_record([10, 11, 12, 13, 14], ("language_model",)),
        "tasks": _stage_record([0, 1, 2], ("lookback", "passkey")),
    }
    judged_record = judging.assemble(
        "kerple-log",
        records,
        {"heldout": {}, "tasks": {}},
        {},
        [],
        {"learning_rate": 3e-3},
        KERPLE,
        "judge",
        {"heldout": 1.0, "tasks": 1.0},
    )
    settings = judged_record["settings"]
    assert settings["seeds"] == [10, 11, 12, 13, 14]
    assert settings["task_seeds"] == [0, 1, 2]
    seeds = {
        section: [[r["seed"] for r in e["runs"]] for e in judged_record[section]]
        for section in ("language_model", "lookback", "passkey")
    }
    assert seeds == {
        "language_model": [[10, 11, 12, 13, 14]],
        "lookback": [[0, 1, 2]],
        "passkey": [[0, 1, 2]],
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["no_such_file.py"], "no_such_file.py does not exist"),
        (
            [KERPLE, "--scheme", "kerple"],
            "--scheme kerple: kerple.py registers kerple-log",
        ),
        ([KERPLE, "--against", "rope,xpos"], "--against: xpos not among the book's"),
        (
            [KERPLE, "--jobs", "0"],
            "--jobs '0': give a whole number 1 or more",
        ),
        ([KERPLE, "--shard", "3/2"], "--shard '3/2': give K/N, shard K of N"),
        (
            [KERPLE, "--set", "train.lerning_rate=1"],
            "train.lerning_rate: no such field",
        ),
    ],
)
def test_a_bad_judge_gets_one_line_and_trains_nothing(
    kerple, arguments, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["judge", *arguments, "--out", str(tmp_path / "j")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m pe_tutorial.experiments judge: error: ")
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("j/*.json"))  # nothing trained


def test_a_file_with_several_schemes_needs_scheme(tmp_path, capsys):
    path = tmp_path / "two.py"
    path.write_text(
        "import pe_tutorial as pe\n"
        "class Flat(pe.PositionScheme):\n"
        "    def bias(self, q, k, *, causal):\n"
        "        return None\n"
        "for name in ('one-flat', 'two-flat'):\n"
        "    pe.register_scheme(pe.ModelScheme(name, 'scores', 9, 'no bias',\n"
        "        layer=lambda config, shared: Flat()))\n"
    )
    try:
        assert main(["judge", str(path), "--out", str(tmp_path / "j")]) == 2
        err = capsys.readouterr().err
        assert (
            "two.py registers one-flat, two-flat; say which to judge with --scheme"
            in err
        )
    finally:
        for name in ("one-flat", "two-flat"):
            if name in scheme_names():
                unregister_scheme(name)
        scheme_files._LOADED.pop(str(path), None)


def test_a_folder_of_another_judge_is_not_overwritten(judged, kerple, tiny, capsys):
    """The stage files say what was run; other settings into the same folder stop,
    and the line names the setting that changed, with both values."""
    changed = [*tiny, "--set", "train.steps=3"]
    assert main(["judge", KERPLE, "--out", str(judged), *changed]) == 2
    err = capsys.readouterr().err
    assert "tune.toml describes another experiment: the stage's settings " in err
    assert "train.steps (2 then, 3 now) (a --set, --against or --smoke differs)" in err
    assert "the scheme file" not in err and "code version" not in err


def test_a_changed_scheme_file_is_not_judged_from_old_stages(
    judged, kerple, tiny, capsys, monkeypatch
):
    """A finished stage is reused only for the same file and code: the stage file
    names both, so an edited scheme file stops instead of reading old records,
    and the line says it was the file."""
    real = scheme_files.digests
    monkeypatch.setattr(
        scheme_files, "digests", lambda sources: dict.fromkeys(real(sources), "edited")
    )
    assert main(["judge", KERPLE, "--out", str(judged), *tiny]) == 2
    err = capsys.readouterr().err
    digest = real([KERPLE])["kerple.py"]
    assert (
        "tune.toml describes another experiment: the scheme file kerple.py (sha256 "
        f"{digest} when its stages ran, edited now). Its stages belong to that judge"
    ) in err
    assert "settings" not in err and "code version" not in err
    header = (judged / "tune.toml").read_text().splitlines()[1]
    assert header == (
        f"# Scheme files: {real([KERPLE])}; pe_tutorial code version "
        f"{judging.code_version()}."
    )


def test_new_code_is_named_when_a_judge_is_refused(
    judged, kerple, tiny, capsys, monkeypatch
):
    """The package's code changed since the stages ran (another code version):
    the refusal says so, with both versions."""
    old = judging.code_version()
    monkeypatch.setattr(judging, "code_version", lambda: "0123456789abcdef")
    assert main(["judge", KERPLE, "--out", str(judged), *tiny]) == 2
    err = capsys.readouterr().err
    assert (
        f"describes another experiment: the package's code version ({old} when its "
        "stages ran, 0123456789abcdef now)."
    ) in err
    assert "the same command, unchanged, resumes" in err


def test_a_sweep_is_set_for_the_tuning_stages_only(kerple):
    best = {"learning_rate": 3e-3}
    sweep = ["sweep.train.learning_rate=[1e-3]", "train.steps=7"]
    tuning = judging.stage_presets(kerple, KERPLE, settings=sweep)
    assert dict(tuning["tune"].sweep) == {"train.learning_rate": (1e-3,)}
    reading = judging.stage_presets(kerple, KERPLE, settings=sweep, best=best)
    assert all(p.sweep == () and p.train.steps == 7 for p in reading.values())


def test_every_preset_written_as_toml_reads_back_the_same():
    for name, preset in PRESETS.items():
        text = toml_text(preset_to_dict(preset), header="a header\nof two lines")
        assert text.startswith("# a header\n# of two lines\n")
        assert preset_from_dict(tomllib.loads(text), name=name) == preset
    quoted = toml_text(
        {"name": 'a "b"', "tuned": {"my scheme": {"learning_rate": 0.1}}}
    )
    assert tomllib.loads(quoted) == {
        "name": 'a "b"',
        "tuned": {"my scheme": {"learning_rate": 0.1}},
    }
    with pytest.raises(ValueError, match="x: nan has no TOML form"):
        toml_text({"x": float("nan")})


def test_show_writes_a_report_card_of_any_record(tmp_path, capsys):
    from pe_tutorial.experiments.records.results import results_path

    record = results_path("survey-qk")
    assert main(["show", str(record), "--report", str(tmp_path / "card")]) == 0
    page = (tmp_path / "card" / "report.md").read_text()
    assert page.startswith("# Report: the `survey-qk` record\n")
    meta = json.loads(record.read_text())["metadata"]
    assert f"code version `{meta['code_version']}`" in page
    assert "learned-qk" in page and "== Language models" in page
    images = [
        line[line.index("(") + 1 : -1]
        for line in page.splitlines()
        if line.startswith("![")
    ]
    assert images and all((tmp_path / "card" / name).is_file() for name in images)


# the README's common mistakes: each as a file my_pe.py (None: no file)
MISTAKES = {
    "no file at the path": None,
    "the file never calls": """
        import pe_tutorial as pe

        class Mine(pe.PositionScheme):
            pass
        """,
    "a name the book uses": """
        import pe_tutorial as pe

        pe.register_scheme(pe.ModelScheme("alibi", "scores", 9, "mine"))
        """,
    "`enters` misspelt": """
        import pe_tutorial as pe

        pe.register_scheme(pe.ModelScheme("mine", "attention", 9, "mine"))
        """,
    "`layer` returns a plain module": """
        from torch import nn
        import pe_tutorial as pe

        pe.register_scheme(
            pe.ModelScheme("mine", "scores", 9, "mine", layer=lambda c, s: nn.Identity())
        )
        """,
    "a bias without its key axis": """
        import torch
        import pe_tutorial as pe

        class Mine(pe.PositionScheme):
            def bias(self, q, k, *, causal):
                return torch.zeros(q.shape[1], q.shape[2])

        pe.register_scheme(
            pe.ModelScheme("mine", "scores", 9, "mine", layer=lambda c, s: Mine())
        )
        """,
    "an input term that reads the whole row": """
        import pe_tutorial as pe

        class Mine(pe.PositionScheme):
            def add_to_input(self, x):
                return x + x.mean(dim=1, keepdim=True)

        pe.register_scheme(
            pe.ModelScheme("mine", "embeddings", 9, "mine", layer=lambda c, s: Mine())
        )
        """,
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_readmes_mistakes_get_the_lines_it_quotes(mistake, tmp_path):
    from textwrap import dedent

    from pe_tutorial.experiments.configuration.config import ExperimentError

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith(f"| {mistake}"))
    quoted = row.split("| `")[-1].removesuffix("` |")
    path = tmp_path / "my_pe.py"
    if MISTAKES[mistake] is not None:
        path.write_text(dedent(MISTAKES[mistake]))
    before = set(scheme_names())
    try:
        with pytest.raises(ExperimentError) as caught:
            scheme_files.load([str(path)])
    finally:
        for name in set(scheme_names()) - before:
            unregister_scheme(name)
        scheme_files._LOADED.pop(str(path), None)
    assert str(caught.value).replace(f"{tmp_path}/", "") == quoted


def test_the_readme_says_what_the_shipped_judge_of_kerple_found():
    """The README's paragraph on the worked example, held to the record it quotes
    (``judged-kerple-log.json``) and to the card in ``examples/``."""
    from pe_tutorial.experiments import judged_claims, load_judged
    from pe_tutorial.lm.verdicts import verdict_family

    root = Path(__file__).resolve().parents[1]
    readme = " ".join((root / "README.md").read_text().split())
    judged = load_judged("kerple-log")
    judge = judged["settings"]["judge"]
    assert judge["best"] == {"learning_rate": 3e-3, "position_lr_multiplier": 30.0}
    assert "a rate of 3e-3 with its parameters at 30 times it" in readme
    minutes = sum(judge["stage_seconds"].values()) / 60
    assert f"{minutes:.0f} minutes of training and scoring summed" in readme
    # one round beyond the edge (100x, worse), and the bridge found no drift
    from pe_tutorial.experiments import at_the_edge, bridge_claims

    (edge,) = judge["edge_rounds"]
    assert [s["position_lr_multiplier"] for s in edge["settings"]] == [100.0]
    assert at_the_edge(judge) == ([], [])
    assert "so 30 times is inside the grid" in readme
    for name, claims in bridge_claims(judged):
        assert not any(v.real for v in verdict_family(name, [v for *_, v in claims]))
    assert "The bridge showed no drift" in readme
    assert sorted(judge["reused"]["heldout"]) == sorted(judging.BOOK_SCHEMES)
    top = max(judged["settings"]["lengths"])
    shown = {}  # (measure, length) -> (ahead, behind), real differences only
    for name, claims in judged_claims(judged):
        verdicts = verdict_family(name, [v for *_, v in claims])
        lower_better = name.endswith(("bits per byte", "context gain"))
        for (against, length, _), v in zip(claims, verdicts, strict=True):
            sides = shown.setdefault((name.rpartition(": ")[2], length), ([], []))
            if v.real:
                sides[0 if (v.difference < 0) == lower_better else 1].append(against)
    assert shown["bits per byte", top] == (
        ["nope", "sinusoidal", "rope", "alibi"],
        ["t5", "shaw", "cope", "deberta"],
    )
    assert (
        "ahead of NoPE, the sinusoidal table, RoPE and ALiBi and behind T5, Shaw, CoPE "
        "and DeBERTa" in readme
    )
    passkey, lookback = judged["settings"]["passkey"], judged["settings"]["lookback"]
    assert shown["passkey accuracy", passkey["seq_len"]] == (["sinusoidal"], [])
    look = ["learned", "rope", "t5", "shaw", "cope", "deberta"]
    assert shown["look-back accuracy", lookback["seq_len"]] == ([], look)
    assert shown["passkey accuracy", 8 * passkey["seq_len"]] == ([], [])
    assert shown["look-back accuracy", 8 * lookback["seq_len"]] == (
        ["nope"],
        ["rope", "shaw", "deberta"],
    )
    # but KERPLE did not learn look-back, nor did NoPE: that lead compares nothing
    from pe_tutorial.experiments.viewing.report_card import unlearned

    assert {"kerple-log", "nope", "alibi"} <= set(unlearned(judged)["lookback"])
    assert "passkey at its length and nowhere at 8x" in readme
    assert "at 8x behind RoPE, Shaw and DeBERTa" in readme
    assert "did not learn look-back" in readme
    assert "at 8x ahead of NoPE" not in readme
    # what it does past L, from its context gain (issue 69), not from the fall
    own = dict(judged_claims(judged))[
        "kerple-log against reading L bytes: context gain"
    ]
    (at_top,) = [v for _, n, v in own if n == top]
    assert abs(at_top.difference) < 1e-4
    assert not verdict_family("own", [v for *_, v in own])[-1].real
    assert shown["context gain", top] == (
        ["nope", "sinusoidal", "rope", "t5", "shaw", "cope", "deberta"],
        [],
    )
    assert "ignores the context past the training length" in readme
    assert "context gain at 8x is under a ten-thousandth of a bit" in readme
    assert "costs every baseline but ALiBi" in readme
    card = root / "examples" / "kerple-card" / "report.md"
    assert judge["scheme_file_digest"] in card.read_text()


# issue 69: a quick look first (--plan, --smoke), the scheme read at every length
# before training, --resume, and a refusal that names what changed


def test_plan_prints_the_stages_units_and_time_and_trains_nothing(
    kerple, tmp_path, capsys
):
    """``judge --plan``: each stage with the units it would train and those it
    reuses from the package's records (at the book's settings under the records'
    Python every baseline is reused), the stand-in before tuning, and a time from
    the book's records of the stages' presets, naming them; no folder is made."""
    out = tmp_path / "j"
    arguments = [KERPLE, "--plan", "--out", str(out), "--device", "cpu"]
    assert main(["judge", *arguments, "--jobs", "2"]) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    lines = {line.split()[0]: line for line in text.splitlines() if line[:2] == "  "}
    assert list(lines) == ["tune", "tune-position", "heldout", "tasks"]
    assert "4 units to train: kerple-log at 4 settings, seed 0" in lines["tune"]
    assert "6 units to train: kerple-log at 6 settings" in lines["tune-position"]
    # the records were made by other code versions: the bridge trains RoPE and T5
    # again beside the scheme (5 seeds on text, 3 on each task)
    bridged = "kerple-log, rope (bridge), t5 (bridge)"
    assert f"15 units to train: {bridged}, seeds 10-14" in lines["heldout"]
    assert f"18 units to train: {bridged}, seeds 0-2" in lines["tasks"]
    for stage in ("heldout", "tasks"):
        assert "the bridge trains rope, t5 again beside their records" in lines[stage]
        assert "recorded by code version" in lines[stage]
    assert main(["judge", *arguments, "--jobs", "2", "--no-bridge"]) == 0
    unbridged = capsys.readouterr().out
    assert "5 units to train: kerple-log, seeds 10-14" in unbridged
    assert "6 units to train: kerple-log, seeds 0-2" in unbridged
    recorded = judging.load_results("heldout")["metadata"]["corpora"]["stdlib"]
    if recorded["source"].startswith(f"Python {platform.python_version()} "):
        assert (
            "45 units reused from the package's experiments-heldout.json: "
            in (lines["heldout"])
        )
    assert (
        "54 units reused from the package's experiments-tuned.json: nope, "
        in (lines["tasks"])
    )
    assert "the book's tuned rates of t5 (learning_rate 0.003, " in text
    assert "do not depend on it" in text
    estimate = next(line for line in text.splitlines() if "Estimated time" in line)
    for record in ("tuning", "tuning-position", "heldout", "tuned"):
        meta = judging.load_results(record)["metadata"]
        assert f"from experiments-{record}.json (cpu, {meta['device_name']}, " in (
            estimate
        )
    minutes = int(estimate.split("about ")[1].split(" min")[0])
    summed = int(estimate.split("--jobs 2 (")[1].split(" min")[0])
    assert 15 <= minutes <= 120 and abs(summed / 2 - minutes) <= 1  # bridge included
    # with one job the same units take twice the wall time
    assert main(["judge", *arguments, "--jobs", "1"]) == 0
    one = capsys.readouterr().out
    assert f"about {summed} min with --jobs 1 ({summed} min" in one
    assert "The scheme reads a row of every length the stages score" in text
    assert "128, 256, 512, 1024 (the tune stage's language models, the " in text


def test_smoke_runs_every_stage_tiny_and_gives_no_verdict(
    kerple, tmp_path, capsys, monkeypatch
):
    """``judge --smoke``: every stage at tiny sizes into judge-SCHEME-smoke, the
    baselines trained (never reused) at the same sizes; the record and the card
    say "smoke: no verdict" and the card holds no verdict."""
    monkeypatch.chdir(tmp_path)
    arguments = ["--against", "rope", "--device", "cpu", "--no-progress"]
    out = tmp_path / "judge-kerple-log-smoke"
    assert main(["judge", KERPLE, "--smoke", "--plan", *arguments]) == 0
    plan = capsys.readouterr().out
    assert "--smoke into judge-kerple-log-smoke/" in plan and not out.exists()
    assert "2 units to train: kerple-log, rope, seed 10 (baselines trained again: " in (
        plan
    )
    assert "a smoke run's is start-up and scoring" in plan
    assert main(["judge", KERPLE, "--smoke", *arguments]) == 0
    stages = ["tune", "tune-position", "heldout", "tasks"]
    assert all((out / f"{s}.json").is_file() for s in stages)
    for stage in stages:
        preset = preset_from_dict(read_experiment(out / f"{stage}.toml")[0])
        assert preset.train.steps == judging.SMOKE["train"]["steps"]
        assert preset.model["d_model"] == judging.SMOKE["model"]["d_model"]
        assert len(preset.seeds) == 1
    heldout = preset_from_dict(read_experiment(out / "heldout.toml")[0])
    assert heldout.schemes == (kerple, "rope") and max(heldout.lengths) == 256
    record = json.loads((out / "judged.json").read_text())
    judge = record["settings"]["judge"]
    assert judge["verdict"] == "smoke: no verdict"
    assert record["preset"] == "judge-kerple-log-smoke"
    assert judge["reused"] == {"heldout": {}, "tasks": {}}
    assert judge["retrained"]["heldout"]["rope"] == judging.SMOKE_REASON
    assert {e["scheme"] for e in record["passkey"]} == {kerple, "rope"}
    card = (out / "card" / "report.md").read_text()
    assert card.startswith("# Report card: `kerple-log` (smoke: no verdict)\n")
    verdicts = card.split("## Verdicts")[1].split("## Tables")[0]
    assert verdicts.strip().startswith("smoke: no verdict: this is a smoke run")
    for sentence in ("a real difference", "not shown to differ", "| verdict |"):
        assert sentence not in verdicts
    assert "not shown to differ" not in card and ": a real difference" not in card
    assert "(smoke: no verdict)" in capsys.readouterr().out


# a scheme whose own table stops at 200 positions: right at lengths 8 and 16 (the
# probe of scheme_files), wrong at any length the judge scores past 200
STOPS_AT_200 = """
import pe_tutorial as pe


class Stops(pe.PositionScheme):
    def bias(self, q, k, *, causal):
        if k.shape[-2] > 200:
            raise RuntimeError(
                f"my table stops at 200 positions, got {k.shape[-2]}\\nmore lines"
            )
        return None


pe.register_scheme(
    pe.ModelScheme(
        "stops-at-200", "scores", 9, "a table of 200 positions",
        layer=lambda config, shared: Stops(),
    )
)
"""


def test_a_scheme_that_fails_at_a_long_length_is_refused_before_training(
    tmp_path, capsys
):
    """The probe's lengths 8 and 16 pass; the judge reads one row at every length a
    stage scores, the longest first, and stops at 1024 (8L) with one line naming
    the length and the error's first line, before any stage file is written."""
    path = tmp_path / "stops.py"
    path.write_text(STOPS_AT_200)
    out = tmp_path / "j"
    try:
        assert main(["judge", str(path), "--out", str(out), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1
        assert (
            "scheme 'stops-at-200' of stops.py: its model's forward pass failed at "
            "length 1024 (a length the tune stage's language models are scored at): "
            "RuntimeError: my table stops at 200 positions, got 1024" in err
        )
        assert "more lines" not in err and not out.exists()
        # a smoke run scores 8 x 32 bytes at most: the same line, at 256
        assert main(["judge", str(path), "--smoke", "--out", str(out)]) == 2
        assert "failed at length 256 " in capsys.readouterr().err
        assert not out.exists()
    finally:
        if "stops-at-200" in scheme_names():
            unregister_scheme("stops-at-200")
        scheme_files._LOADED.pop(str(path), None)


def test_resume_is_accepted_and_reads_the_stages_back(judged, kerple, tiny, capsys):
    """Rerunning the same command resumes; ``--resume`` says the same thing and
    changes nothing: every finished stage is read back, nothing trained."""
    stages = ("tune", "tune-position", "heldout", "tasks")
    before = {s: (judged / f"{s}.json").stat().st_mtime_ns for s in stages}
    assert main(["judge", KERPLE, "--out", str(judged), "--resume", *tiny]) == 0
    printed = capsys.readouterr().out
    for stage in stages:
        assert f"stage {stage}: recorded in {judged / stage}.json, read back" in (
            printed
        )
    assert before == {s: (judged / f"{s}.json").stat().st_mtime_ns for s in stages}


def test_the_readme_leads_the_judge_with_plan_and_smoke(kerple, tmp_path, capsys):
    """The README's judge section: --plan and --smoke first, the stages
    numbered in order, resuming said plainly, and the plan's numbers for KERPLE
    as ``judge --plan`` prints them."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### Judge your own encoding")[1].split("\n## ")[0]
    block = section.split("```bash\n")[1].split("```")[0].splitlines()
    assert ["--plan" in block[0], "--smoke" in block[1], len(block)] == [
        True,
        True,
        3,
    ]
    assert "--plan" not in block[2] and "--smoke" not in block[2]
    assert "It runs its stages in this order" in section
    stages = ("tune", "tune-position", "tune-edge-K-rate", "heldout", "tasks")
    for i, stage in enumerate(stages, 1):
        assert f"\n{i}. `{stage}`" in section
    words = " ".join(section.split())
    assert "rerunning the same command resumes" in words
    assert "(`--resume` is accepted and does the same)" in words
    # the plan reuses the held-out baselines only under the records' Python
    recorded = judging.load_results("heldout")["metadata"]["corpora"]["stdlib"]
    if not recorded["source"].startswith(f"Python {platform.python_version()} "):
        return
    arguments = [KERPLE, "--plan", "--jobs", "2", "--out", str(tmp_path / "j")]
    assert main(["judge", *arguments, "--device", "cpu"]) == 0
    estimate = capsys.readouterr().out.split("Estimated time on this machine: ")[1]
    minutes = estimate.split("about ")[1].split(" min")[0]
    assert "For KERPLE it plans 43 units to train (4 + 6 tuning; 5 held out" in words
    assert (
        "10 held out, 6 look-back and 6 passkey) and 99 reused, about "
        f"{minutes} minutes with `--jobs 2`" in words
    )
