"""Baselines proven comparable (issue 69): when the judge reuses records made on
another machine or code version, two of those baselines train again here and
the card tests their drift with the chapter's verdict function."""

from __future__ import annotations

import copy

import pytest

from pe_tutorial.experiments import load_judged, load_results
from pe_tutorial.experiments.configuration.config_fields import ExperimentError
from pe_tutorial.experiments.judging.bridge import bridge_plan, differences
from pe_tutorial.experiments.viewing import report_card
from pe_tutorial.experiments.viewing.bridge_card import bridge_claims, bridge_drift

SCHEMES = ("nope", "rope", "alibi", "t5", "shaw")


def _machine(record: dict, **changed) -> dict:
    meta = record["metadata"]
    now = {k: meta.get(k) for k in ("device", "device_name", "cpu_model")}
    return {**now, "code_version": meta["code_version"], **changed}


@pytest.fixture(scope="module")
def books():
    return {"heldout": load_results("heldout"), "tasks": load_results("tuned")}


def test_a_record_differs_by_machine_model_or_code(books):
    record = books["heldout"]
    meta = record["metadata"]
    assert differences(meta, _machine(record)) == []
    assert differences(meta, _machine(record, device_name="AMD EPYC")) == [
        "recorded on Intel(R) Xeon(R) Processor, here AMD EPYC"
    ]
    assert differences(meta, _machine(record, cpu_model="6-143-8")) == [
        "recorded on Intel(R) Xeon(R) Processor, CPU model 6-167-1, here CPU model "
        "6-143-8"
    ]
    assert differences(meta, _machine(record, code_version="abc")) == [
        f"recorded by code version {meta['code_version']}, here abc"
    ]


def test_the_bridge_trains_rope_and_t5_where_a_record_came_from_elsewhere(books):
    """The held-out record made here, by this code: no bridge; the task record by
    another code version: RoPE and T5 again."""
    reasons = {stage: dict.fromkeys(SCHEMES) for stage in books}
    now = _machine(books["heldout"])
    bridge, why = bridge_plan(reasons, books, now)
    assert bridge == {"tasks": ("rope", "t5")}
    assert why == {  # that record names no CPU model either
        "tasks": "recorded on Intel(R) Xeon(R) Processor, CPU model not named, here "
        f"CPU model 6-167-1; recorded by code version "
        f"{books['tasks']['metadata']['code_version']}, here {now['code_version']}"
    }
    # RoPE trained again anyway (not reused): T5 and the first other reused one
    reasons["tasks"]["rope"] = "a --set changes it"
    assert bridge_plan(reasons, books, now)[0] == {"tasks": ("t5", "nope")}
    assert bridge_plan(reasons, books, now, ("alibi",))[0] == {"tasks": ("alibi",)}
    assert bridge_plan(reasons, books, now, ()) == ({}, {})  # --no-bridge
    with pytest.raises(ExperimentError, match="--bridge: rope not reused by the tasks"):
        bridge_plan(reasons, books, now, ("rope",))


def _bridged(record: dict, shift: float) -> dict:
    """The KERPLE record with a bridge: RoPE's text entry 'trained again' with
    every segment's bits per byte moved by ``shift``, and T5's passkey entry as
    recorded (no drift)."""
    record = copy.deepcopy(record)
    rope = next(
        e
        for e in record["language_model"]
        if e["scheme"] == "rope" and not e["changes"]
    )
    fresh = copy.deepcopy(rope)
    for run in fresh["runs"]:
        for n, values in run["segment_bpb"].items():
            if values is not None:
                run["segment_bpb"][n] = [v + shift for v in values]
                run["bpb"][n] += shift
    t5 = next(e for e in record["passkey"] if e["scheme"] == "t5")
    record["bridge"] = {
        "language_model": [fresh],
        "passkey": [copy.deepcopy(t5)],
        "lookback": [],
    }
    judge = record["settings"]["judge"]
    judge["bridge"] = {"heldout": ["rope"], "tasks": ["t5"]}
    judge["bridge_why"] = {
        "heldout": "recorded elsewhere",
        "tasks": "recorded elsewhere",
    }
    return record


def test_the_card_reads_each_bridge_baseline_against_its_record():
    """A shift of +0.05 bits on every segment is drift, at L and 8L; an entry
    equal to its record is none. The differences are the shift itself."""
    record = _bridged(load_judged("kerple-log"), 0.05)
    families = dict(bridge_claims(record))
    text = families["the bridge, trained here minus recorded: bits per byte"]
    assert [(b, n) for b, n, _ in text] == [("rope", 128), ("rope", 1024)]
    for _, _, v in text:
        assert v.difference == pytest.approx(0.05, abs=1e-9)
    (key,) = families["the bridge, trained here minus recorded: passkey accuracy"]
    assert key[:2] == ("t5", 64) and key[2].difference == 0
    drift = bridge_drift(list(families.items()))
    assert [(m, b, n) for m, b, n, _ in drift] == [
        ("bits per byte", "rope", 128),
        ("bits per byte", "rope", 1024),
    ]
    card = report_card.card_text(record, [], "tables")
    first = card[card.index("## Read first") : card.index("## The protocol")]
    assert "**A reused baseline drifted**: `rope` trained here" in first
    assert "Not bridged" not in first
    assert "## The bridge: do the reused baselines hold here?" in card
    assert "**Drift shown** in 2 of 3 claims" in card


def test_a_bridge_without_drift_says_so():
    record = _bridged(load_judged("kerple-log"), 0.0)
    card = report_card.card_text(record, [], "tables")
    assert "drifted" not in card
    assert "**No drift shown**" in card
