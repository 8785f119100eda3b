"""Chapter 9's experiments: every scheme trained, then read at 1x to 8x its training length.

Run from a shell::

    python -m pe_tutorial.experiments [--preset quick|standard|frontier|full |
        --config FILE.toml] [--set KEY=VALUE ...] [--device auto|cpu|cuda|cuda:N|mps]
        [--json PATH] [--record] [--resume] [--keep-old-code] [--jobs N]
        [--shard K/N] [--dry-run]
    python -m pe_tutorial.experiments merge OUT.json PART ...
    python -m pe_tutorial.experiments show FILE [--figures DIR] [--report DIR]
    python -m pe_tutorial.experiments judge my_pe.py [--scheme NAME] [--out DIR]
        [--against rope,alibi,...] [--set KEY=VALUE ...] [--jobs N] [--shard K/N]
        [--plan | --smoke] [--edge-rounds N] [--bridge NAMES | --no-bridge]

An experiment is a TOML file (``configuration/config.py`` gives its keys and the sweep
rule: a list under ``[sweep]`` trains each scheme at every value), or a
preset, which is such a file shipped in the package (``presets/*.toml``), with
fields changed by ``--set`` (``train.learning_rate=1e-3``); it is checked
before anything trains. ``--jobs N`` computes N units at once on one machine;
``--shard K/N`` runs every N-th unit so that N workers share a run, and
``merge`` joins their files into the record one process would have written.

Presets (``PRESETS``): ``quick`` runs inside chapter 9 on a laptop CPU (about
90 s on two cores), ``standard`` is the recorded CPU run (three seeds, about
two hours on two cores), ``frontier`` trains chapters 11 and 12's schemes beside RoPE
and NoPE with the standard model (recorded, about an hour on two cores),
``full`` is for a GPU (a larger model and longer training). ``--record``
writes the results into the installed package (``pe_tutorial/results/``),
where the chapter reads them, so they ship with ``pip install`` and reach
Colab. A run is a plan of units, one trained model
and what is measured on it; with ``--record`` or ``--json`` each finished unit
is kept on disk at once, and ``--resume`` continues a stopped run (``RunFile``):
it reuses a unit whose fingerprint (the settings it reads and the code version)
is unchanged, runs again one recorded with other settings, and refuses units
recorded by other code unless ``--keep-old-code``.

The experiments, on the standard-library byte corpus unless said otherwise:

1. **Schemes.** A byte language model per scheme (``model.SCHEMES``), pre-norm,
   absolute tables at the input: bits per byte at each length on segments
   spread over the validation split, the train-split score at the training
   length (the gap), and the loss at each position of the longest window.
2. **Variants.** Some schemes with post-norm, with the absolute tables in
   every layer, at other learning rates (both norms), with a ModelConfig
   field changed (``ablations``), and on Shakespeare's plays (natural language).
3. **RoPE.** The trained model with each ``rope_scaling.SCALING_METHODS``
   method, zero-shot and after a short fine-tune at the target length; and
   with one band of its frequencies changed at evaluation (``rope_bands``).
4. **A learned table lengthened** by copying its rows, before and after a fine-tune.
5. **Look-back.** The synthetic task of ``synthetic.lookback_batch``: accuracy of
   predicting the symbol ``k`` back, at each length.
6. **Passkey.** ``synthetic.passkey_batch``: a key hidden at a depth, recalled at the
   end; accuracy by length and depth, for every scheme and RoPE's scalings.

The parts live in five rooms, each importing only from the rooms above it in
this list (and the folders below ``experiments``); each room's ``__init__``
lists its modules:

- ``configuration`` what a run is asked to do: ``Preset``, the TOML files and
                    flags, their checks, a reader's scheme file, the tuned rates
- ``records``       runs on disk: the run file resume reads, the recorded results
- ``running``       the plan of units, computed in one process or several, and
                    assembled into a record; shards merged
- ``viewing``       ``show``: a record's tables, figures and report card
- ``judging``       ``judge``: a reader's own scheme through chapter 9's protocol,
                    in stages, against the book's recorded schemes

and on top ``cli`` (``main``, the command line; ``__main__`` runs it).
"""

from __future__ import annotations

from .cli import main
from .configuration.config import (
    PRESETS,
    ExperimentError,
    declared_families,
    preset_from_dict,
    preset_to_dict,
    read_experiment,
)
from .configuration.presets import STANDARD_PASSKEY, Preset, Variant
from .records.joined import JoinError, join_seeds
from .records.record import ResumeError, RunFile, partial_path
from .records.results import (
    SECTIONS,
    format_rows,
    load_judged,
    load_results,
    results_path,
    summarise,
)
from .running.merge import MergeError, merge_parts
from .running.run import run_experiments, run_units
from .running.runner import CORPORA
from .viewing.bridge_card import bridge_claims
from .viewing.report_card import at_the_edge, judged_claims

__all__ = [
    "Preset",
    "Variant",
    "PRESETS",
    "STANDARD_PASSKEY",
    "CORPORA",
    "run_experiments",
    "run_units",
    "ExperimentError",
    "declared_families",
    "preset_from_dict",
    "preset_to_dict",
    "read_experiment",
    "MergeError",
    "merge_parts",
    "results_path",
    "load_results",
    "join_seeds",
    "JoinError",
    "load_judged",
    "judged_claims",
    "bridge_claims",
    "at_the_edge",
    "SECTIONS",
    "summarise",
    "format_rows",
    "RunFile",
    "ResumeError",
    "partial_path",
    "main",
]
