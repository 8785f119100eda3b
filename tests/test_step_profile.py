"""Where a training step's time goes (``benchmarks.step_profile``; chapters 9, 10).

A tiny model profiled on the CPU: each scheme's groups add up to its profiled
step, every profiled op counts in exactly one group, RoPE's position group
holds ops in the forward and the backward pass while NoPE's holds none, the
profiled step computes what the ``train_step`` suite's step computes, and the
``train_step_profile`` suite smokes from the command line and round-trips
through JSON.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from pe_tutorial import benchmarks
from pe_tutorial.benchmarks import _core
from pe_tutorial.benchmarks import step_profile as sp
from pe_tutorial.benchmarks import timing as bench
from pe_tutorial.benchmarks.train_step import train_step_fn
from pe_tutorial.lm.model import ByteTransformer, ModelConfig

TINY_MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1}
# the groups' sum against the profiled step: self times telescope to the step's
# total exactly when every event nests in its step; 1% leaves room for the
# profiler's bookkeeping (an event it could not nest) without hiding a lost op
SUM_TOLERANCE = 0.01


@pytest.fixture(autouse=True)
def steady_copy_probe(monkeypatch):
    """The busy-machine probe reads a steady copy (tests run beside each other)."""
    monkeypatch.setattr(bench, "copy_probe", lambda device, **options: 1.0)


@pytest.fixture(scope="module")
def tiny_profile():
    return sp.profile_train_step(
        "cpu",
        batch=2,
        seq_len=8,
        schemes=("nope", "rope", "alibi"),
        steps=2,
        warmup=1,
        model=TINY_MODEL,
    )


def tiny_model(scheme="rope"):
    torch.manual_seed(0)
    config = ModelConfig(scheme=scheme, max_positions=8, **TINY_MODEL)
    return ByteTransformer(config)


def test_the_groups_add_up_to_each_profiled_step(tiny_profile):
    for p in tiny_profile.schemes:
        assert p.steps == 2 and len(p.step_ms_all) == 2 and p.step_ms > 0
        assert p.grouped_ms() == pytest.approx(p.step_ms, rel=SUM_TOLERANCE)
        assert set(p.ms) <= set(sp.GROUPS)
        assert all(set(phases) <= set(sp.PHASES) for phases in p.ms.values())
        # the suite's step has no optimiser
        assert p.group_ms("optimizer") == 0


def test_every_op_of_a_step_counts_in_exactly_one_group():
    model = tiny_model("rope")
    tokens = torch.randint(0, 256, (2, 9))
    step = sp.profiled_step(model, tokens)
    with sp.labelled(model), profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
        step()
    events = [e for e in prof.events() if e.device_type == DeviceType.CPU]
    in_steps = [e for e in events if any(a.name == sp.STEP for a in sp._chain(e))]
    attributed, total_us, steps = sp.attribute(prof.events())
    assert steps == 2
    # one entry per event of the steps: none dropped, none twice
    assert len(attributed) == len(in_steps)
    assert sorted(a.name for a in attributed) == sorted(e.name for e in in_steps)
    assert all(a.group in sp.GROUPS and a.phase in sp.PHASES for a in attributed)
    grouped = sum(a.self_cpu_us for a in attributed)
    assert grouped == pytest.approx(total_us, rel=SUM_TOLERANCE)
    # the backward nodes found their forward ops: little is left to "other"
    backward = [a for a in attributed if a.phase == "backward"]
    assert backward and not [a for a in backward if a.group == "other"]
    assert {a.group for a in backward} >= {"position", "attention", "mlp", "norm"}


def test_ropes_position_group_holds_its_rotation_and_nopes_holds_nothing(
    tiny_profile,
):
    nope, rope = tiny_profile.scheme("nope"), tiny_profile.scheme("rope")
    # RoPE's rotation: ops in the forward pass and their gradients in the backward
    assert rope.ops.get("position", 0) > 0
    assert rope.ms["position"]["forward"] > 0 and rope.ms["position"]["backward"] > 0
    # NoPE's scheme methods run no op: only the ranges opened here, whose cost
    # is the profiler's own (a few microseconds each; not asserted as a share of
    # the step, which a busy machine moves past any bound: it failed once at 6%)
    assert nope.ops.get("position", 0) == 0
    assert nope.ms["position"].get("backward", 0.0) == 0
    # the difference from the reference, group by group, adds up
    difference = tiny_profile.difference("rope")
    assert set(difference) == set(sp.GROUPS)
    assert sum(difference.values()) == pytest.approx(
        rope.grouped_ms() - nope.grouped_ms(), abs=1e-9
    )
    assert difference["position"] > 0


def test_the_tables_say_what_each_scheme_spent_and_fit_a_page(tiny_profile):
    lines = tiny_profile.table_lines()
    assert max(len(line) for line in lines) <= 88
    text = "\n".join(lines)
    assert "rope step, profiled on cpu" in text and "vs nope" in text
    assert "rope - nope:" in text and "position" in text
    # no optimiser was profiled, so no optimiser column
    assert "optimizer" not in lines[1]


def test_an_optimizer_step_is_its_own_group():
    profiled = sp.profile_train_step(
        "cpu",
        batch=2,
        seq_len=8,
        schemes=("nope",),
        steps=1,
        warmup=0,
        optimizer=True,
        model=TINY_MODEL,
    )
    (nope,) = profiled.schemes
    assert nope.ms["optimizer"]["optimizer"] > 0
    assert nope.grouped_ms() == pytest.approx(nope.step_ms, rel=SUM_TOLERANCE)
    assert "optimizer" in profiled.table_lines()[1]


def test_the_profiled_step_is_the_suites_step_and_labelling_leaves_no_trace():
    tokens = torch.randint(0, 256, (2, 9))
    plain, labelled = tiny_model("rope"), tiny_model("rope")
    train_step_fn(plain, tokens)()
    with sp.labelled(labelled):
        sp.profiled_step(labelled, tokens)()
    for (name, a), b in zip(
        plain.named_parameters(), labelled.parameters(), strict=True
    ):
        assert torch.equal(a.grad, b.grad), name
    # hooks removed, the scheme's methods its class's again
    for module in labelled.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks
        assert not set(sp.SCHEME_METHODS) & set(vars(module))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"steps": 0}, "steps must be a positive integer"),
        ({"warmup": -1}, "warmup must be a non-negative integer"),
        ({"schemes": ()}, "at least one scheme"),
        ({"schemes": ("rope", "rope")}, "each scheme once"),
        ({"batch": 0}, "batch must be a positive integer"),
    ],
)
def test_bad_arguments_say_what_to_give(options, message):
    with pytest.raises(ValueError, match=message):
        sp.profile_train_step("cpu", **{"seq_len": 8, "model": TINY_MODEL, **options})


def test_bad_names_and_empty_profiles_are_refused(tiny_profile):
    with pytest.raises(ValueError, match="unknown group"):
        tiny_profile.scheme("rope").group_ms("rotation")
    with pytest.raises(ValueError, match="no scheme 'shaw'"):
        tiny_profile.scheme("shaw")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(2) + 1
    with pytest.raises(ValueError, match="no profiled step"):
        sp.attribute(prof.events())
    with pytest.raises(ValueError, match="profile_steps must be"):
        benchmarks.run("train_step_profile", "cpu", profile_steps=0)


def test_the_suite_smokes_and_keeps_its_profile_through_json(tmp_path, capsys):
    suite = benchmarks.SUITES["train_step_profile"]
    assert suite.chapter == "10" and len(suite.why) < 88
    argv = ["train_step_profile", "--device", "cpu", "--smoke", "--json"]
    assert benchmarks.main([*argv, str(tmp_path / "p.json")]) == 0
    printed = capsys.readouterr().out
    assert "train step, rope" in printed and "rope - nope:" in printed
    document = json.loads((tmp_path / "p.json").read_text())
    result = benchmarks.SuiteResult.from_dict(document)
    profiled = sp.recorded_profile(result)
    assert [p.scheme for p in profiled.schemes] == ["nope", "rope"]
    assert profiled.to_dict() == document["settings"]["profile"]
    assert profiled.scheme("rope").ops["position"] > 0
    with pytest.raises(ValueError, match="holds no profile"):
        sp.recorded_profile(benchmarks.SuiteResult("train_step", {}, []))


def _scheme_step(
    name: str, steps_ms: list[float], position_ms: float
) -> sp.SchemeProfile:
    median = sorted(steps_ms)[(len(steps_ms) - 1) // 2]
    return sp.SchemeProfile(
        name,
        len(steps_ms),
        median,
        {
            "position": {"forward": position_ms},
            "other": {"forward": median - position_ms},
        },
        step_ms_all=list(steps_ms),
    )


def _process(nope: list[float], rope: list[float], rope_position: float):
    return sp.StepProfile(
        "cpu",
        {"batch": 2},
        [_scheme_step("nope", nope, 0.0), _scheme_step("rope", rope, rope_position)],
        reference="nope",
    )


def test_profiles_of_several_processes_merge_into_every_step():
    """Each scheme keeps the breakdown of the process whose median step is the
    middle one, with every process's steps behind its spread."""
    processes = [
        _process([10, 11, 12], [20, 21, 22], 5.0),
        _process([14, 15, 16], [30, 31, 32], 9.0),
        _process([12, 13, 14], [25, 26, 27], 7.0),
    ]
    merged = sp.merge_profiles(processes)
    rope = merged.scheme("rope")
    assert rope.step_ms == 26 and rope.group_ms("position") == 7.0  # the middle one
    assert rope.steps == 9 and sorted(rope.step_ms_all) == [
        20,
        21,
        22,
        25,
        26,
        27,
        30,
        31,
        32,
    ]
    assert rope.process_step_ms == [21, 31, 26]
    assert merged.scheme("nope").step_ms == 13
    assert "median of 9 in 3 processes" in "\n".join(merged.table_lines())
    # the processes' own profiles are left as they were
    assert processes[2].scheme("rope").steps == 3
    with pytest.raises(ValueError, match="differ in schemes or settings"):
        sp.merge_profiles([processes[0], sp.StepProfile("cpu", {"batch": 4}, [])])


def test_an_even_number_of_processes_merges_to_the_lower_middle_one():
    """Four processes (RoPE's medians 21, 31, 26, 24) keep the breakdown of the
    one at 24, the lower of the middle two, not 26's; two keep the faster one's."""
    processes = [
        _process([10, 11, 12], [20, 21, 22], 5.0),
        _process([14, 15, 16], [30, 31, 32], 9.0),
        _process([12, 13, 14], [25, 26, 27], 7.0),
        _process([11, 12, 13], [23, 24, 25], 6.0),
    ]
    merged = sp.merge_profiles(processes)
    rope, nope = merged.scheme("rope"), merged.scheme("nope")
    assert rope.step_ms == 24 and rope.group_ms("position") == 6.0
    assert nope.step_ms == 12  # nope's medians 11, 15, 13, 12: 12 below 13
    assert rope.process_step_ms == [21, 31, 26, 24] and rope.steps == 12
    pair = sp.merge_profiles(processes[1:3]).scheme("rope")
    assert pair.step_ms == 26 and pair.group_ms("position") == 7.0


def test_a_profiled_difference_is_told_apart_only_outside_the_steps_spread():
    """``apart``: the interquartile ranges of two schemes' steps do not overlap."""
    clear = _process([10, 10.5, 11, 11.5, 12], [20, 20.5, 21, 21.5, 22], 5.0)
    assert clear.apart("rope") and clear.apart("nope", "rope")
    overlapping = _process([10, 11, 12, 13, 14], [12, 13, 14, 15, 16], 1.0)
    assert not overlapping.apart("rope")


def test_a_recording_in_three_processes_keeps_all_their_profiled_steps(monkeypatch):
    """merge_runs merges the processes' profiles (Suite.merge_settings) and the
    report prints them without profiling again in the merging process."""
    suite = benchmarks.SUITES["train_step_profile"]
    runs = _core.sample_alike(
        3,
        lambda i, calls: benchmarks.run(
            "train_step_profile",
            "cpu",
            repeats=2,
            calls_per_sample=calls,
            **suite.smoke,
        ),
        lambda result: result.timings[0].calls_per_sample,
    )
    calls = []
    monkeypatch.setattr(sp, "profile_train_step", lambda *a, **k: calls.append(1))
    merged = _core.merge_runs(runs)
    profile = sp.recorded_profile(merged)
    each = [sp.recorded_profile(run).scheme("rope").step_ms for run in runs]
    assert profile.scheme("rope").process_step_ms == each
    assert profile.scheme("rope").steps == 3 * suite.smoke["profile_steps"]
    assert not calls
