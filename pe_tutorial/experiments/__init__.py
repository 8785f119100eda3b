"""Chapter 9's experiments: every scheme trained, then read at 1x to 8x its training length.

Run from a shell::

    python -m pe_tutorial.experiments --preset quick|standard|frontier|full \\
        [--device auto|cpu|cuda|cuda:N|mps] [--json PATH] [--record] [--resume]
        [--keep-old-code]

Presets (``PRESETS``): ``quick`` runs inside chapter 9 on a laptop CPU (about
90 s on two cores), ``standard`` is the recorded CPU run (three seeds, about
two hours on two cores), ``frontier`` trains chapter 11's schemes beside RoPE
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
5. **Look-back.** The synthetic task of ``data.lookback_batch``: accuracy of
   predicting the symbol ``k`` back, at each length.
6. **Passkey.** ``data.passkey_batch``: a key hidden at a depth, recalled at the
   end; accuracy by length and depth, for every scheme and RoPE's scalings.

The parts, one idea each (each imports only those above it, and the floors
below ``experiments``):

- ``presets``     ``Preset``, ``Variant``, ``PRESETS``: what a run does
- ``units``       the kinds of unit, the preset fields each reads, and the
                  fingerprint derived from them with the code version
- ``measures``    small summaries of a unit's numbers (passkey depths, log text)
- ``extensions``  context extension on trained models (RoPE scalings and bands,
                  a learned table lengthened)
- ``tasks``       the look-back and passkey units
- ``runner``      the plan of units; the language models trained and scored
- ``record``      ``RunFile``: finished units on disk, and what resume reuses
- ``results``     where recorded results live; ``summarise`` and ``format_rows``
- ``run``         ``run_experiments``: the plan computed or read back, assembled
- ``cli``         ``main``, the command line (``__main__`` runs it)
"""

from __future__ import annotations

from .cli import main
from .presets import PRESETS, STANDARD_PASSKEY, Preset, Variant
from .record import ResumeError, RunFile, partial_path
from .results import (
    SECTIONS,
    format_rows,
    load_results,
    results_path,
    summarise,
)
from .run import run_experiments
from .runner import CORPORA

__all__ = [
    "Preset",
    "Variant",
    "PRESETS",
    "STANDARD_PASSKEY",
    "CORPORA",
    "run_experiments",
    "results_path",
    "load_results",
    "SECTIONS",
    "summarise",
    "format_rows",
    "RunFile",
    "ResumeError",
    "partial_path",
    "main",
]
