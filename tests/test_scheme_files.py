"""A reader's own schemes from a file (``schemes_from``; issue 51)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import pytest
import torch
from tiny_runs import TINY

from pe_tutorial.experiments.configuration import scheme_files
from pe_tutorial.experiments.configuration.config import (
    ExperimentError,
    preset_from_dict,
    preset_to_dict,
    read_experiment,
)
from pe_tutorial.experiments.running import pool
from pe_tutorial.experiments.running.units import LANGUAGE_MODEL, fingerprint
from pe_tutorial.lm.registry import scheme_names, unregister_scheme

# a scheme as a reader writes it, against the public API only: ALiBi's bias with
# every slope halved (a name the book does not use)
HALF_ALIBI = """
import pe_tutorial as pe


class HalfSlopes(pe.PositionScheme):
    def __init__(self, num_heads):
        super().__init__()
        self.encoding = pe.ALiBiBias(num_heads)

    def bias(self, q, k, *, causal):
        return 0.5 * self.encoding(q.shape[-2], k.shape[-2], causal=causal)


pe.register_scheme(
    pe.ModelScheme(
        "{name}",
        "scores",
        9,
        "ALiBi with every slope halved",
        layer=lambda config, shared: HalfSlopes(config.num_heads),
    )
)
"""


@pytest.fixture
def write(tmp_path):
    """Write a scheme file; afterwards unregister what it registered."""
    before = set(scheme_names())

    def write(text: str, name: str = "my_pe.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    yield write
    for name in set(scheme_names()) - before:
        unregister_scheme(name)
    for source in [s for s in scheme_files._LOADED if s.startswith(str(tmp_path))]:
        del scheme_files._LOADED[source]


def experiment(tmp_path, sources, schemes) -> dict:
    data = preset_to_dict(replace(TINY, schemes=("rope",)))
    data.update(schemes_from=sources, schemes=schemes)
    return data


def test_an_experiment_file_trains_a_scheme_from_a_file_beside_it(write, tmp_path):
    write(HALF_ALIBI.format(name="half-alibi"))
    toml = tmp_path / "mine.toml"
    toml.write_text('schemes_from = ["my_pe.py"]\nschemes = ["rope", "half-alibi"]\n')
    data, base = read_experiment(toml)
    preset = preset_from_dict(data, base=base)
    assert preset.schemes == ("rope", "half-alibi")
    assert preset.schemes_from == (str(tmp_path / "my_pe.py"),)
    # loaded once per process: reading the experiment again registers nothing new
    assert preset_from_dict(data, base=base).schemes_from == preset.schemes_from


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "my_pe.py does not exist"),
        ("x = 1\n", "my_pe.py registers no scheme"),
        ("import nothing_of_that_name\n", "loading my_pe.py failed: ModuleNotFound"),
        (HALF_ALIBI.format(name="rope"), "name that is taken"),
    ],
)
def test_a_bad_scheme_file_gets_one_line_naming_it(write, tmp_path, text, message):
    if text is not None:
        write(text)
    with pytest.raises(ExperimentError, match=message):
        preset_from_dict(experiment(tmp_path, [str(tmp_path / "my_pe.py")], ["rope"]))


LOOKS_AHEAD = """
import pe_tutorial as pe


class NextByte(pe.PositionScheme):
    def add_to_input(self, x):  # each position sees the next one's embedding
        return x + x.roll(-1, dims=1)


pe.register_scheme(
    pe.ModelScheme(
        "peeks", "embeddings", 9, "looks one byte ahead",
        layer=lambda config, shared: NextByte(),
    )
)
"""


def test_a_scheme_that_looks_ahead_is_refused_before_anything_trains(write, tmp_path):
    write(LOOKS_AHEAD)
    with pytest.raises(ExperimentError, match="'peeks' of my_pe.py: it looks ahead"):
        preset_from_dict(experiment(tmp_path, [str(tmp_path / "my_pe.py")], ["peeks"]))


# a look-ahead at one place: the last byte but one sees the last byte (in every
# layer); no other output moves when a byte changes
LAST_PEEKS = """
import torch
import pe_tutorial as pe


class LastPeek(pe.PositionScheme):
    def add_to_input(self, x):
        peek = torch.zeros_like(x)
        peek[:, -2] = x[:, -1]
        return x + peek


pe.register_scheme(
    pe.ModelScheme(
        "last-peeks", "embeddings", 9, "the last byte but one sees the last",
        layer=lambda config, shared: LastPeek(),
    )
)
"""


def test_a_look_ahead_at_the_last_byte_alone_is_refused(write, tmp_path):
    """The probe reads 16 bytes: changing byte 15 moves output 14, and nothing else
    moves, so only a probe that changes the last byte catches it."""
    write(LAST_PEEKS)
    with pytest.raises(
        ExperimentError,
        match="'last-peeks' of my_pe.py: it looks ahead: the output at position 14 "
        "changed when only the byte at position 15 did",
    ):
        preset_from_dict(
            experiment(tmp_path, [str(tmp_path / "my_pe.py")], ["last-peeks"])
        )


# a look-ahead that reaches two places from byte 10: position 2 a little, position
# 6 a lot (and, through attention, every output from 2 to 9 moves)
TWO_PEEKS = """
import torch
import pe_tutorial as pe


class TwoPeeks(pe.PositionScheme):
    def add_to_input(self, x):
        peek = torch.zeros_like(x)
        if x.shape[1] > 10:
            peek[:, 2] = 0.01 * x[:, 10]
            peek[:, 6] = 10.0 * x[:, 10]
        return x + peek


pe.register_scheme(
    pe.ModelScheme(
        "two-peeks", "embeddings", 9, "positions 2 and 6 see byte 10",
        layer=lambda config, shared: TwoPeeks(),
    )
)
"""


def test_the_look_ahead_message_names_the_first_position_that_moved(write, tmp_path):
    """Not the one that moved most (6): a reader debugging the scheme starts from
    the first output that saw the future."""
    write(TWO_PEEKS)
    with pytest.raises(
        ExperimentError,
        match=r"it looks ahead: the output at position 2 \(the first of 8\) changed "
        "when only the byte at position 10 did",
    ):
        preset_from_dict(
            experiment(tmp_path, [str(tmp_path / "my_pe.py")], ["two-peeks"])
        )


# the embeddings "rotated" once at the input (an absolute scheme's shared module),
# right at every length but the probe's short one, 8 bytes
WRONG_AT_8 = """
import pe_tutorial as pe
from torch import nn


class Rotation(nn.Module):
    def forward(self, x, positions):
        return ({wrong}) if len(positions) == 8 else x


pe.register_scheme(
    pe.ModelScheme(
        "wrong-at-8", "embeddings", 9, "wrong at 8 bytes only",
        shared=lambda config: Rotation(), absolute=True, rotates_input=True,
    )
)
"""


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (
            "x[:, :-1]",
            r"logits of shape \(2, 7, 256\) for 2 rows of 8 bytes; "
            r"expected \(2, 8, 256\)",
        ),
        ("x / 0", "non-finite logits at length 8 "),
    ],
    ids=["shape", "non-finite"],
)
def test_a_scheme_wrong_at_the_short_length_only_is_refused(
    write, tmp_path, wrong, message
):
    write(WRONG_AT_8.format(wrong=wrong))
    with pytest.raises(ExperimentError, match="'wrong-at-8' of my_pe.py: " + message):
        preset_from_dict(
            experiment(tmp_path, [str(tmp_path / "my_pe.py")], ["wrong-at-8"])
        )


def test_a_changed_file_is_new_code_for_the_units(write, tmp_path):
    path = write(HALF_ALIBI.format(name="half-alibi"))
    preset = preset_from_dict(
        experiment(tmp_path, [str(path)], ["half-alibi"]), base=tmp_path
    )
    arguments = {"scheme": "half-alibi", "seed": 0}
    first = fingerprint(LANGUAGE_MODEL, preset, arguments, device_type="cpu", corpus={})
    assert first["scheme_files"] == {"my_pe.py": scheme_files.digest(str(path))}
    assert "schemes_from" not in first["preset"]  # the text counts, not the place
    path.write_text(path.read_text() + "\n# an edit\n")
    again = fingerprint(LANGUAGE_MODEL, preset, arguments, device_type="cpu", corpus={})
    assert again["scheme_files"] != first["scheme_files"]
    # this process holds the old scheme: reading the experiment again is refused
    with pytest.raises(ExperimentError, match="changed since this process loaded it"):
        preset_from_dict(experiment(tmp_path, [str(path)], ["half-alibi"]))


def test_a_worker_process_registers_the_schemes_again(write, tmp_path, monkeypatch):
    """A --jobs worker is a fresh process: ``pool._start`` loads the files before
    it plans the units (here: after the scheme was unregistered, as in a new process)."""
    path = write(HALF_ALIBI.format(name="half-alibi"))
    preset = preset_from_dict(experiment(tmp_path, [str(path)], ["half-alibi"]))
    unregister_scheme("half-alibi")
    scheme_files._LOADED.clear()

    class Queue:
        def get(self):
            return "cpu"

    planned = []
    monkeypatch.setattr(pool, "Runner", lambda p, device, progress: planned.append(p))
    with pytest.raises(AttributeError):  # the stand-in runner has no log
        pool._start(preset, Queue(), torch.get_num_threads())
    assert "half-alibi" in scheme_names() and planned == [preset]


def test_the_record_keeps_where_the_schemes_came_from(write, tmp_path):
    path = write(HALF_ALIBI.format(name="half-alibi"))
    preset = preset_from_dict(experiment(tmp_path, [str(path)], ["half-alibi"]))
    data = json.loads(json.dumps(preset_to_dict(preset)))
    assert data["schemes_from"] == [str(path)]
    assert preset_from_dict(data).schemes == ("half-alibi",)


# issue 69: a table of 200 positions, which raises past them; with ``declared`` it
# says so through the max_length hook, as the learned table does
STOPS_AT_200 = """
import pe_tutorial as pe


class Stops(pe.PositionScheme):
    def bias(self, q, k, *, causal):
        if k.shape[-2] > 200:
            raise RuntimeError(f"my table stops at 200 positions, got {{k.shape[-2]}}")
        return None


pe.register_scheme(
    pe.ModelScheme(
        "{name}", "scores", 9, "a table of 200 positions",
        layer=lambda config, shared: Stops(),
        max_length=lambda config: {longest},
    )
)
"""


def _load(write, name: str, longest: str) -> str:
    path = write(STOPS_AT_200.format(name=name, longest=longest), f"{name}.py")
    scheme_files.load([str(path)])  # the probe at 8 and 16 bytes passes
    return str(path)


def test_the_lengths_a_run_scores_are_read_before_training(write):
    """``probe_lengths`` reads one row at each length, the longest first: a
    forward pass that fails is one line naming the length and the error's first
    line; a length the scheme's max_length refuses is skipped (the run records it
    unread), but not the training length."""
    from pe_tutorial.lm.model import ModelConfig

    lengths = [128, 256, 512, 1024]
    path = _load(write, "stops", "None")
    config = ModelConfig(scheme="stops", d_model=32, num_heads=2, num_layers=2)
    with pytest.raises(ExperimentError) as caught:
        scheme_files.probe_lengths(
            "stops", path, config, lengths, trained=128, what="the models"
        )
    assert str(caught.value) == (
        "scheme 'stops' of stops.py: its model's forward pass failed at length 1024 "
        "(a length the models are scored at): RuntimeError: my table stops at 200 "
        "positions, got 1024"
    )
    scheme_files.probe_lengths("stops", path, config, [64, 128, 200], trained=128)
    declared = _load(write, "declares", "200")
    config = ModelConfig(scheme="declares", d_model=32, num_heads=2, num_layers=2)
    scheme_files.probe_lengths("declares", declared, config, lengths, trained=128)
    with pytest.raises(ExperimentError, match=r"train on rows of 256 bytes, which its"):
        scheme_files.probe_lengths(
            "declares", declared, config, [256, 512], trained=256
        )
