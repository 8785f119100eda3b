"""Recorded runs the pages read that are neither timings nor chapter 9's experiments.

- ``learned_table_record``: the learned absolute table and the token embeddings
  of one small byte model trained with it, written by
  ``tools/record_learned_table.py`` to ``pe_tutorial/results/learned-table.json``
  (chapter 2: trained embedding scales; chapter 4: a trained table is smooth).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import torch

__all__ = ["LEARNED_TABLE_FILE", "learned_table_record"]

LEARNED_TABLE_FILE = "learned-table.json"
REGENERATE = "python tools/record_learned_table.py"


def learned_table_record(path: str | Path | None = None) -> dict:
    """The recorded learned-table run, with its arrays as float64 tensors.

    Returns the file's dictionary with ``position_table`` as a ``(rows, d_model)``
    tensor and ``token_embedding_norms`` as a ``(256,)`` tensor; the rest
    (``model``, ``training``, ``corpus``, ``initial_std``,
    ``token_embedding_std``, ``token_embedding_initial_std``,
    ``final_train_loss``, ``validation_bpb``, ``environment``) as recorded. ``path``: another file of the same form
    (default: the one shipped in ``pe_tutorial/results``).
    """
    if path is None:
        source = resources.files("pe_tutorial") / "results" / LEARNED_TABLE_FILE
    else:
        source = Path(path)
    try:
        record = json.loads(source.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no recorded learned table at {source}; write one with `{REGENERATE}`"
        ) from None
    missing = {
        "position_table",
        "token_embedding_norms",
        "token_embedding_std",
        "token_embedding_initial_std",
        "model",
        "environment",
    } - set(record)
    if missing:
        raise ValueError(
            f"{source} is not a learned-table record: it lacks {sorted(missing)}"
        )
    table = torch.tensor(record["position_table"], dtype=torch.float64)
    rows, d_model = record["model"]["max_positions"], record["model"]["d_model"]
    if table.shape != (rows, d_model):
        raise ValueError(
            f"{source}: the table is {tuple(table.shape)}, but the model it names "
            f"has {rows} rows of {d_model}"
        )
    norms = torch.tensor(record["token_embedding_norms"], dtype=torch.float64)
    return {**record, "position_table": table, "token_embedding_norms": norms}
