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

An experiment is a TOML file (``config.py`` gives its keys and the sweep
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

The parts, one idea each (each imports only those above it, and the floors
below ``experiments``):

- ``presets``     ``Preset``, ``Variant``: what a run does, its variants and sweeps
- ``units``       the kinds of unit, the preset fields each reads, and the
                  fingerprint derived from them with the code version
- ``measures``    small summaries of a unit's numbers (passkey depths, log text)
- ``extensions``  context extension on trained models (RoPE scalings and bands,
                  a learned table lengthened)
- ``tasks``       the look-back and passkey units
- ``run_data``    the corpora a run reads, and the segments it scores them on
- ``runner``      the plan of units; the language models trained and scored
- ``pool``        units computed in several processes at once (``--jobs``)
- ``record``      ``RunFile``: finished units on disk, and what resume reuses
- ``config``      an experiment as a TOML file or flags, checked; ``PRESETS``
- ``results``     where recorded results live; ``summarise`` and ``format_rows``
- ``run``         ``run_experiments``: the plan (or a shard) computed or read back,
                  assembled
- ``merge``       the run files of a sharded run joined into one record
- ``viewer``      ``show``: a record's tables and figures
- ``report_card`` ``show --report``: a record as one Markdown page with its figures
- ``judge``       ``judge``: a reader's own scheme through chapter 9's protocol, in
                  stages (each an experiment file, ``toml_text``), against the
                  book's recorded schemes
- ``cli``         ``main``, the command line (``__main__`` runs it)
"""

from __future__ import annotations

from .cli import main
from .config import (
    PRESETS,
    ExperimentError,
    preset_from_dict,
    preset_to_dict,
    read_experiment,
)
from .merge import MergeError, merge_parts
from .presets import STANDARD_PASSKEY, Preset, Variant
from .record import ResumeError, RunFile, partial_path
from .report_card import judged_claims
from .results import (
    SECTIONS,
    format_rows,
    load_judged,
    load_results,
    results_path,
    summarise,
)
from .run import run_experiments, run_units
from .runner import CORPORA

__all__ = [
    "Preset",
    "Variant",
    "PRESETS",
    "STANDARD_PASSKEY",
    "CORPORA",
    "run_experiments",
    "run_units",
    "ExperimentError",
    "preset_from_dict",
    "preset_to_dict",
    "read_experiment",
    "MergeError",
    "merge_parts",
    "results_path",
    "load_results",
    "load_judged",
    "judged_claims",
    "SECTIONS",
    "summarise",
    "format_rows",
    "RunFile",
    "ResumeError",
    "partial_path",
    "main",
]
