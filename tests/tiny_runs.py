"""The tiny experiment that the experiment tests and the viewer tests run: every section
in seconds, two seeds so that verdicts weigh a spread."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pe_tutorial.experiments import PRESETS, run_experiments
from pe_tutorial.lm.train import TrainConfig

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


def run_tiny(preset, folder: Path) -> tuple[dict, Path]:
    """Run ``preset`` on the CPU with its run file in ``folder``: the results and the
    run file (``run.json.partial``, every unit finished)."""
    partial = folder / "run.json.partial"
    results = run_experiments(preset, device="cpu", progress=False, partial=partial)
    return results, partial
