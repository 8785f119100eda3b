"""Train one small byte model with a learned absolute table and record what chapters
2 and 4 read from it (issue 38).

    python tools/record_learned_table.py [--out pe_tutorial/results/learned-table.json]

The model is chapter 9's ``ByteTransformer`` with ``scheme="learned"`` (128
rows, ``d_model`` 128, 3 layers, 4 heads), trained for 800 steps on windows of
128 bytes of Python's standard library, from seed 0, on the CPU at one thread
(about five minutes on the reference 2-core machine). The file holds:

- ``position_table``: the trained table, ``(128, 128)``, rounded to 5 decimals
  (chapter 4: do trained rows become similar to their neighbours?);
- ``token_embedding_norms`` and ``token_embedding_std``: ``||E[t]||`` of each
  of the 256 byte embeddings and the standard deviation of all their entries,
  and ``token_embedding_initial_std``, that deviation before training
  (chapter 2: how large are trained token embeddings next to an integer code?);
- ``model``, ``training`` and ``corpus``: the settings; ``initial_std``, the
  table's initial N(0, initial_std^2); ``final_train_loss`` and
  ``validation_bpb``, so a reader can see that the model learned something;
- ``environment``: device, versions and date (``pe_tutorial.devices``), and
  the command that wrote it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

from pe_tutorial.devices import environment
from pe_tutorial.lm.data import stdlib_corpus
from pe_tutorial.lm.model import ByteTransformer, ModelConfig
from pe_tutorial.lm.train import TrainConfig, bits_per_byte, train
from pe_tutorial.lm.windows import random_windows

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "pe_tutorial" / "results" / "learned-table.json"
MODEL = ModelConfig(
    scheme="learned", d_model=128, num_heads=4, num_layers=3, max_positions=128
)
TRAINING = TrainConfig(
    steps=800,
    batch_size=16,
    seq_len=128,
    learning_rate=3e-3,
    warmup_steps=80,
    seed=0,
)
CORPUS = {"max_train_bytes": 4_000_000, "max_validation_bytes": 1_000_000}
DECIMALS = 5


def rounded(values: torch.Tensor) -> list:
    return torch.round(values.double(), decimals=DECIMALS).tolist()


def record(out: Path, *, progress: bool = True) -> dict:
    torch.set_num_threads(1)
    corpus = stdlib_corpus(**CORPUS)
    torch.manual_seed(0)
    model = ByteTransformer(MODEL)
    initial_std = model.input_table.init_std
    initial_token_std = model.embed.weight.std().item()
    batches = functools.partial(
        random_windows, corpus.train, TRAINING.batch_size, TRAINING.seq_len
    )
    losses = train(model, batches, TRAINING, progress=progress)
    validation = bits_per_byte(
        model, corpus.validation, TRAINING.seq_len, num_targets=128 * 256
    )
    table = model.input_table.weight.detach()  # (128, 128)
    tokens = model.embed.weight.detach()  # (256, 128)
    result = {
        "what": (
            "a learned absolute table and the token embeddings of a byte model "
            "trained with it (chapters 2 and 4)"
        ),
        "model": MODEL.to_dict(),
        "training": TRAINING.to_dict(),
        "corpus": {**CORPUS, **corpus.describe()},
        "initial_std": initial_std,
        "final_train_loss": sum(losses[-50:]) / 50,
        "validation_bpb": validation,
        "position_table": rounded(table),
        "token_embedding_norms": rounded(tokens.norm(dim=-1)),
        "token_embedding_std": tokens.std().item(),
        "token_embedding_initial_std": initial_token_std,
        "environment": {
            **environment("cpu"),
            "command": "python tools/record_learned_table.py",
        },
    }
    out.write_text(dump(result))
    return result


def dump(result: dict) -> str:
    """JSON with one line per row of the table (not one per number)."""
    rows = result["position_table"]
    text = json.dumps({**result, "position_table": "ROWS"}, indent=1)
    compact = ",\n  ".join(json.dumps(row, separators=(",", ":")) for row in rows)
    return text.replace('"ROWS"', "[\n  " + compact + "\n ]") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    result = record(args.out, progress=not args.quiet)
    print(
        f"wrote {args.out}: final train loss {result['final_train_loss']:.3f} nats, "
        f"validation {result['validation_bpb']:.3f} bits per byte"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
