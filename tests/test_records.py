"""pe_tutorial.pages.records reads the recorded learned table as the file holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pe_tutorial.pages.records import learned_table_record

SHIPPED = (
    Path(__file__).resolve().parent.parent
    / "pe_tutorial"
    / "results"
    / "learned-table.json"
)


def test_the_shipped_record_is_read_as_the_json_holds_it():
    raw = json.loads(SHIPPED.read_text())
    record = learned_table_record()
    rows, d_model = raw["model"]["max_positions"], raw["model"]["d_model"]
    assert record["position_table"].shape == (rows, d_model)
    for p in (0, 17, rows - 1):
        assert record["position_table"][p].tolist() == raw["position_table"][p]
    assert record["token_embedding_norms"].tolist() == raw["token_embedding_norms"]
    assert len(raw["token_embedding_norms"]) == 256
    assert raw["model"]["scheme"] == "learned"
    # ByteTransformer draws its embeddings from N(0, 0.02^2)
    assert raw["token_embedding_initial_std"] == pytest.approx(0.02, abs=1e-3)
    for key in ("device_name", "torch", "date", "command"):
        assert raw["environment"][key]
    # the norms are of vectors whose entries have the recorded spread
    mean_square = (record["token_embedding_norms"] ** 2).mean() / d_model
    assert mean_square.sqrt().item() == pytest.approx(
        raw["token_embedding_std"], rel=0.05
    )


def test_a_file_that_is_not_a_record_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="record_learned_table"):
        learned_table_record(tmp_path / "missing.json")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"position_table": [[0.0]]}))
    with pytest.raises(ValueError, match="lacks"):
        learned_table_record(wrong)
    raw = json.loads(SHIPPED.read_text())
    raw["position_table"] = raw["position_table"][:-1]
    short = tmp_path / "short.json"
    short.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="the model it names"):
        learned_table_record(short)
    assert torch.is_tensor(learned_table_record(SHIPPED)["position_table"])
