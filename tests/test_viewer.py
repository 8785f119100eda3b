"""The viewer (``show FILE``) on a tiny run, on its run file, and on the shipped record;
and the learning curves the language-model units record for it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import tiny_runs
import torch

from pe_tutorial import experiments
from pe_tutorial.experiments import (
    Variant,
    results_path,
)
from pe_tutorial.experiments.running.runner import Runner
from pe_tutorial.experiments.running.units import LANGUAGE_MODEL
from pe_tutorial.experiments.viewing import viewer
from pe_tutorial.lm.run_verdicts import entry_verdict, scored_files
from pe_tutorial.lm.train import TrainConfig

# a run of every section in seconds: two seeds, so verdicts weigh a spread
TINY = replace(
    tiny_runs.TINY,
    name="viewer-tiny",
    train=TrainConfig(steps=4, batch_size=2, seq_len=16, warmup_steps=1),
    curve_points=2,
    # two schemes at rates of their own: a run file's units each hold their own
    # scheme's, and the viewer must join them
    tuned=(("rope", (("learning_rate", 2e-3),)), ("alibi", (("learning_rate", 5e-3),))),
    every_layer_schemes=(),
    learning_rate_schemes=("rope",),
    learning_rates=(1e-2,),
    language_schemes=(),
    extension_methods=("linear",),
    finetune_methods=(None,),
    finetune_steps=1,
    lookback={**tiny_runs.TINY.lookback, "steps": 2},
    passkey={**tiny_runs.TINY.passkey, "steps": 2},
)
TITLES = viewer.TITLES


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny run's record (as its JSON file holds it) and its file paths."""
    folder = tmp_path_factory.mktemp("viewer")
    results, partial = tiny_runs.run_tiny(TINY, folder)
    path = folder / "run.json"
    path.write_text(json.dumps(results, indent=1))
    return json.loads(path.read_text()), path, partial


def show(capsys, *argv) -> tuple[int, str, str]:
    status = viewer.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def line_of(text: str, start: str) -> str:
    """The first line of ``text`` that starts with ``start``."""
    return next(line for line in text.splitlines() if line.startswith(start))


# ---------------------------------------------------------------------------
# the learning curves in the record
# ---------------------------------------------------------------------------


def test_each_language_model_records_its_learning_curve(tiny):
    record = tiny[0]
    for e in record["language_model"]:
        for run in e["runs"]:
            # curve_points = 2 over 4 steps: after steps 2 and 4
            assert run["curve"]["steps"] == [2, 4]
            assert all(0 < bpb < 9 for bpb in run["curve"]["bpb"])
            # read on the final score's windows at L: its last point is that score
            assert run["curve"]["bpb"][-1] == run["bpb"]["16"]
        # the entry's summary per point: the seeds' mean, std and n
        points = [run["curve"]["bpb"] for run in e["runs"]]
        curve = e["curve"]
        assert curve["steps"] == [2, 4] and curve["n"] == [2, 2]
        assert curve["mean"] == pytest.approx([sum(p) / 2 for p in zip(*points)])
        assert curve["std"] == pytest.approx(
            [abs(a - b) / 2**0.5 for a, b in zip(*points)]
        )


def _unit(preset) -> dict:
    """The run of an alibi language model's unit, seed 0."""
    runner = Runner(preset, torch.device("cpu"), progress=False)
    with runner.reading(LANGUAGE_MODEL):
        return runner.language_model_unit(Variant("alibi"), 0)["run"]


def test_a_unit_read_during_training_scores_what_one_not_read_scores():
    """A unit trained with a curve scores what one without scores, to the bit."""
    run = _unit(replace(TINY, curve_points=3))
    assert run["curve"]["steps"] == [1, 3, 4]
    assert run["curve"]["bpb"][-1] == run["bpb"]["16"]
    without = _unit(replace(TINY, curve_points=0))
    assert "curve" not in without
    assert without == {k: v for k, v in run.items() if k != "curve"}


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------


def test_show_prints_every_section_with_its_numbers_and_verdicts(tiny, capsys):
    record, path, _ = tiny
    status, out, err = show(capsys, path)
    assert status == 0 and err == ""
    for section, title in TITLES.items():
        assert (title in out) == bool(record[section]), section
    # each row holds the record's mean ± std per length, and its n
    rope = next(e for e in record["language_model"] if e["scheme"] == "rope")
    row = line_of(out, "rope  ")
    for stats in rope["summary"].values():
        assert f"{stats['mean']:.3f} ± {stats['std']:.3f}" in row
    assert row.split()[-1] == "2"
    assert line_of(out, "learned  ").count("n/a") == 1  # past its table
    # verdicts paired by seed, resampled by file, in named Holm families
    assert "-- At L = 16, best to worst; each gap to the next --" in out
    verdicts = [line for line in out.splitlines() if "p_Holm = " in line]
    assert len(verdicts) >= 10
    assert all(" n = 2" in line for line in verdicts)
    # segments are resampled by the files the record names (per-seed numbers,
    # such as the train gap, by seed alone)
    ranking = out[out.index("-- At L = 16") : out.index("-- Validation minus")]
    assert ranking.count(" files, p_Holm") == ranking.count("p_Holm") > 0
    assert "(family 'each scheme to the next at 16': " in out
    assert "(cannot read 32: learned)" in out
    assert "alibi (post-norm)" in line_of(out, "  alibi (post-norm)  ")
    # the learning curves: the seeds' mean after each step read
    curves = out[out.index("== Learning curves") :]
    assert line_of(curves, "  step").split()[1:] == ["2", "4", "n"]
    cells = line_of(curves, "  rope  ").split()
    assert cells[1:] == [f"{m:.3f}" for m in rope["curve"]["mean"]] + ["2"]


def test_the_command_line_hands_show_to_the_viewer(tiny, capsys):
    assert experiments.main(["show", str(tiny[1])]) == 0
    assert TITLES["language_model"] in capsys.readouterr().out


def test_figures_are_written_as_png_files(tiny, tmp_path, capsys):
    folder = tmp_path / "figures"
    status, out, _ = show(capsys, tiny[1], "--figures", folder)
    assert status == 0
    names = {p.name for p in folder.iterdir()}
    assert {
        "lengths.png",
        "positions.png",
        "learning_curves.png",
        "rate_sweep.png",
        "rope_bands.png",
        "rope_extension.png",
        "lookback.png",
        "passkey.png",
        "passkey_extension.png",
    } == names
    for name in names:
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"  {name}" in out
    assert f"wrote {len(names)} figures to {folder}" in out


# ---------------------------------------------------------------------------
# run files: a run being watched
# ---------------------------------------------------------------------------


def _without_metadata(results: dict) -> dict:
    return {k: v for k, v in results.items() if k not in ("metadata", "settings")}


def test_a_finished_run_file_assembles_to_the_record(tiny):
    record, _, partial = tiny
    document = json.loads(partial.read_text())
    results, note = viewer.load(partial)
    assert _without_metadata(results) == _without_metadata(record)
    assert results["settings"]["seeds"] == [0, 1]
    # every key, as the runner records it (a wrong position_bin would put the
    # figures' positions on the wrong scale)
    assert results["settings"] == record["settings"]
    assert f"{len(document['units'])} of {len(document['units'])} units done" in note


def test_a_run_file_being_written_shows_what_has_finished(tiny, tmp_path, capsys):
    """Seed 0 of every language model done, seed 1 of none, no task yet: the
    tables hold one seed each, so no verdict weighs a spread."""
    document = json.loads(tiny[2].read_text())
    done = {
        k: u
        for k, u in document["units"].items()
        if k.startswith("lm/") and k.endswith("/0")
    }
    path = tmp_path / "run.json.partial"
    path.write_text(json.dumps({**document, "units": done}))
    status, out, err = show(capsys, path)
    assert status == 0 and err == ""
    planned = len(document["plan"])
    lm = sum(key.startswith("lm/") for key in document["plan"])
    assert (
        f"{len(done)} of {planned} units done ({len(done)} of {lm} language models, "
        "0 of 6 look-back, 0 of 6 passkey)"
    ) in out
    rope = next(e for e in tiny[0]["language_model"] if e["scheme"] == "rope")
    row = line_of(out, "rope  ")
    assert f"{rope['runs'][0]['bpb']['16']:.3f}" in row and row.split()[-1] == "1"
    assert "(n = 1): one seed: no verdict" in out and " n = 2" not in out
    assert TITLES["passkey"] not in out
    # a run file of an older layout (units only, no header) is read too
    path.write_text(json.dumps({"units": done}))
    status, out, _ = show(capsys, path)
    assert status == 0 and f"{len(done)} units done" in out


# ---------------------------------------------------------------------------
# the shipped record (no learning curves) and files that are not records
# ---------------------------------------------------------------------------


def test_show_reads_the_shipped_standard_record(tmp_path, capsys):
    path = results_path("standard")
    record = json.loads(path.read_text())
    status, out, err = show(capsys, path, "--figures", tmp_path)
    assert status == 0 and err == ""
    rope = next(
        e
        for e in record["language_model"]
        if (e["scheme"], e["norm"], e["learning_rate"], e["corpus"])
        == ("rope", "pre", 0.003, "stdlib")
    )
    row = line_of(out, "rope  ")
    for stats in rope["summary"].values():
        assert f"{stats['mean']:.3f} ± {stats['std']:.3f}" in row
    # it predates per-segment values: paired by seed only, and said so
    shaw = next(
        e
        for e in record["language_model"]
        if (e["scheme"], e["norm"], e["corpus"]) == ("shaw", "pre", "stdlib")
        and not e["changes"]
    )
    verdict = entry_verdict(record, rope, shaw, 128, label="rope - shaw")
    assert verdict.files is None and scored_files(record)
    assert (
        f"  rope - shaw        {verdict.difference:+.3f} [{verdict.low:+.3f}, "
        f"{verdict.high:+.3f}] n = 3, p_Holm = "
    ) in out
    assert "not recorded (this record predates learning curves)" in out
    for section, title in TITLES.items():
        assert title in out, section
    pngs = sorted(p.name for p in tmp_path.iterdir())
    assert "lengths.png" in pngs and "learning_curves.png" not in pngs
    assert all((tmp_path / n).read_bytes()[:4] == b"\x89PNG" for n in pngs)


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "cannot read"),
        ('{"units": {"lm/rope/pre/input/0": {"finger', "it is not whole JSON"),
        ('{"hello": "world"}', "neither a record of pe_tutorial.experiments"),
        ('{"units": {"lm/x/0": 3}}', "not those of a run file"),
        (
            '{"units": {"lm/x/0": {"fingerprint": {}, "result": {}}}}',
            "a unit of this run file is not as pe_tutorial.experiments writes them",
        ),
        ('{"settings": {}, "language_model": []}', "not a record as"),
        (b"\xff\xfe\x00binary", "it is not text"),
    ],
)
def test_a_damaged_or_foreign_file_gets_one_line_and_status_2(
    tmp_path, capsys, content, says
):
    path = tmp_path / "run.json.partial"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    status, out, err = show(capsys, path)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and says in err and str(path) in err


def test_an_older_record_is_given_the_files_its_run_would_have_recorded(tiny, tmp_path):
    """tools/add_segment_files.py: the files added after the fact are those the
    runner records, and a corpus read otherwise than the record's is refused."""
    import copy
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import add_segment_files as tool

    record = tiny[0]
    assert record["metadata"]["corpora"]["stdlib"]["segment_files"]
    older = copy.deepcopy(record)
    for described in older["metadata"]["corpora"].values():
        del described["segment_files"], described["scored_split"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(older))
    assert tool.main([str(path)]) == 0
    given = json.loads(path.read_text())
    assert given["metadata"]["corpora"] == record["metadata"]["corpora"]
    assert given["metadata"]["segment_files_added"]["by"] == tool.TOOL
    # a second pass changes nothing
    assert tool.main([str(path)]) == 0 and json.loads(path.read_text()) == given
    other = copy.deepcopy(older)
    other["metadata"]["corpora"]["stdlib"]["source"] = "Python 3.99.0 standard library"
    with pytest.raises(tool.CorpusChanged, match="the record read"):
        tool.add_segment_files(other)
