"""Schemes from a reader's own files: an experiment's ``schemes_from`` (issue 51).

An experiment may name Python files, or importable modules, that register
position schemes through the public registry::

    schemes_from = ["my_pe.py"]      # relative to the experiment file
    schemes = ["rope", "my-bias"]    # "my-bias" registered by my_pe.py

A file is loaded wherever the experiment is read: where the run is planned,
in every ``--jobs`` worker (each a fresh process, ``pool._start``), for
``--shard``, ``merge`` and ``show``. Its source is part of the fingerprint of
every unit (``digests``), so a changed file is new code and ``--resume`` does
not reuse the units it made. Before anything trains, every scheme a file
registers is probed (``probe_scheme``): a small model built with it must give
finite logits of the right shape at two lengths, and no output may change
when only a later token does. Each problem (no such file, an error while
loading, no scheme registered, a name already taken, a failed probe) is one
``ExperimentError`` naming the file.

What a file must do is the registry's protocol (``lm.registry.ModelScheme``):
a name, where the positions enter (``enters``, words for the tables), the
chapter, a summary, and the hooks that build the model's parts: ``shared``
(one module for the whole model, or None), ``layer`` (each layer's
``PositionScheme``: ``add_to_input``, ``rotate``, ``bias`` or
``score_mod``), ``options`` (the ``ModelConfig`` fields those read) and
``max_length`` where a scheme cannot read past some length.

The probe reads short rows of a small model; a run then reads longer ones
(the judge reads 8 times the training length). ``probe_lengths`` builds the
model a stage trains and reads one row at each length it will score, the
longest first, skipping those the scheme's ``max_length`` says it cannot read
(the run records those as unread): a forward pass that fails there is one
``ExperimentError`` naming the length, before anything trains.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

from ...lm.model import VOCAB_SIZE, ByteTransformer, ModelConfig
from ...lm.registry import scheme_names
from ...lm.scoring import length_error
from .config_fields import ExperimentError

# source -> (digest of its text, the schemes it registered), per process
_LOADED: dict[str, tuple[str, tuple[str, ...]]] = {}


def resolve(source: str, base: Path | None) -> str:
    """A ``.py`` file as an absolute path (relative ones from ``base``, else the
    current folder); anything else is a module name, kept as given."""
    if not source.endswith(".py"):
        if not all(part.isidentifier() for part in source.split(".")):
            raise ExperimentError(
                f"schemes_from: {source!r} is neither a Python file (ending in .py) "
                "nor a module name (such as my_package.my_pe)"
            )
        return source
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return os.path.abspath(path)


def label(source: str) -> str:
    """How a message and a fingerprint name a source: a file by its name."""
    return Path(source).name if source.endswith(".py") else source


def _text(source: str) -> str:
    if source.endswith(".py"):
        if not Path(source).is_file():
            raise ExperimentError(
                f"schemes_from: {source} does not exist; give the path of a Python "
                "file (relative to the experiment file) or an importable module"
            )
        return Path(source).read_text()
    spec = importlib.util.find_spec(source)
    if spec is None or spec.origin is None or not Path(spec.origin).is_file():
        raise ExperimentError(
            f"schemes_from: no module named {source!r} can be imported here; "
            "install it or give the path of its .py file"
        )
    return Path(spec.origin).read_text()


def digest(source: str) -> str:
    """A hash of the source's text (16 hex digits)."""
    return hashlib.sha256(_text(source).encode()).hexdigest()[:16]


def digests(sources: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``{label: digest}`` of each source: what the units' fingerprints hold."""
    return {label(s): digest(s) for s in sources}


def _execute(source: str, name: str) -> None:
    if source.endswith(".py"):
        spec = importlib.util.spec_from_file_location(name, source)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # for pickling what the file defines
        spec.loader.exec_module(module)
    else:
        importlib.import_module(source)


def load(sources: tuple[str, ...] | list[str]) -> dict[str, tuple[str, ...]]:
    """Load each source once per process; the schemes each registered, by source.

    A source loaded before with the same text is not loaded again; one whose
    text changed since is an error (the process would hold the old scheme).
    """
    found = {}
    for source in sources:
        text_digest = digest(source)
        if source in _LOADED:
            loaded_digest, names = _LOADED[source]
            if loaded_digest != text_digest:
                raise ExperimentError(
                    f"schemes_from: {label(source)} changed since this process "
                    "loaded it; run the command again in a new process"
                )
            found[source] = names
            continue
        before = set(scheme_names())
        try:
            _execute(source, f"pe_tutorial_schemes_{text_digest}")
        except ExperimentError:
            raise
        except ValueError as error:
            if "already registered" in str(error):
                raise ExperimentError(
                    f"schemes_from: {label(source)} registers a scheme under a name "
                    f"that is taken ({error.args[0].split(';')[0]}); the book's "
                    "names are reserved: choose another name"
                ) from None
            raise _loading_failed(source, error) from None
        except Exception as error:  # the reader's code: any error, named
            raise _loading_failed(source, error) from None
        names = tuple(n for n in scheme_names() if n not in before)
        if not names:
            raise ExperimentError(
                f"schemes_from: {label(source)} registers no scheme; a scheme file "
                "calls pe.register_scheme(pe.ModelScheme(...)) for each scheme "
                "(see pe_tutorial.experiments.configuration.scheme_files)"
            )
        for name in names:
            probe_scheme(name, source)
        _LOADED[source] = (text_digest, names)
        found[source] = names
    return found


def _loading_failed(source: str, error: Exception) -> ExperimentError:
    return ExperimentError(
        f"schemes_from: loading {label(source)} failed: {type(error).__name__}: {error}"
    )


def _check_logits(
    logits: torch.Tensor, *, rows: int, length: int, where: str, why: str
) -> None:
    # the model's outputs for `rows` rows of `length` bytes: their shape, then finite
    expected = (rows, length, VOCAB_SIZE)
    if tuple(logits.shape) != expected:
        counted = "a row" if rows == 1 else f"{rows} rows"
        raise ExperimentError(
            f"{where}: logits of shape {tuple(logits.shape)} for {counted} of "
            f"{length} bytes; expected {expected}"
        )
    if not torch.isfinite(logits).all():
        raise ExperimentError(f"{where}: non-finite logits at length {length} ({why})")


def probe_scheme(name: str, source: str) -> None:
    """Build a small causal model with the scheme and check its outputs: finite
    logits shaped ``(batch, length, 256)`` at two lengths, and none that moves
    when only a later token changes (a look-ahead): each byte of the row is changed
    in turn, the last included, and every output before it compared."""
    where = f"schemes_from: scheme {name!r} of {label(source)}"
    try:
        torch.manual_seed(0)
        config = ModelConfig(
            scheme=name, d_model=32, num_heads=2, num_layers=2, max_positions=16
        )
        model = ByteTransformer(config).eval()
    except Exception as error:
        raise ExperimentError(
            f"{where}: a small model (d_model 32, 2 heads, 2 layers) could not be "
            f"built: {type(error).__name__}: {error}"
        ) from None
    tokens = torch.randint(
        0, VOCAB_SIZE, (2, 16), generator=torch.Generator().manual_seed(0)
    )

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        try:
            with torch.no_grad():
                return model(inputs)
        except Exception as error:
            raise ExperimentError(
                f"{where}: its model's forward pass failed: "
                f"{type(error).__name__}: {error}"
            ) from None

    short, full = forward(tokens[:, :8]), forward(tokens)
    for logits, length in ((short, 8), (full, 16)):
        _check_logits(
            logits,
            rows=2,
            length=length,
            where=where,
            why="a bias of -inf on every key of a row, or an overflow?",
        )
    # each byte of the row changed in turn, the last included (a look-ahead may reach
    # one position only), byte 10 first: the message a scheme that reads the whole
    # row gets; all of them in one batch
    later = [10, *(i for i in range(1, tokens.shape[1]) if i != 10)]
    changed = tokens.repeat(len(later), 1)
    for k, i in enumerate(later):
        rows = slice(2 * k, 2 * k + 2)
        changed[rows, i] = (tokens[:, i] + 1) % VOCAB_SIZE
    others = forward(changed)
    for k, i in enumerate(later):
        other = others[2 * k : 2 * k + 2]
        # allclose's test, position by position: the first that moved is named
        far = (full[:, :i] - other[:, :i]).abs() > 1e-5 + 1e-5 * other[:, :i].abs()
        moved = far.any(-1).any(0).nonzero()
        if len(moved):
            first = f"{int(moved[0])}" + (
                f" (the first of {len(moved)})" if len(moved) > 1 else ""
            )
            raise ExperimentError(
                f"{where}: it looks ahead: the output at position {first} changed "
                f"when only the byte at position {i} did; a causal model's output "
                "at i may depend on bytes 0..i only"
            )


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def probe_lengths(
    name: str,
    source: str,
    config: ModelConfig,
    lengths: list[int] | tuple[int, ...],
    *,
    trained: int,
    what: str = "the models of a run",
) -> None:
    """Read one row of each of ``lengths`` (the longest first) with the model of
    ``config`` (scheme ``name``, untrained): finite logits of the right shape, or
    one ``ExperimentError`` naming the length and the error's first line.

    A length the scheme says it cannot read (its ``max_length``: ``check_length``
    refuses it) is skipped, as the run skips it, except ``trained``, the length
    the model trains on, which it must read. ``what`` names the models read at these
    lengths for the message (``"the heldout stage's language models"``).
    """
    where = f"scheme {name!r} of {label(source)}"
    try:
        torch.manual_seed(0)
        model = ByteTransformer(config).eval()
    except Exception as error:
        raise ExperimentError(
            f"{where}: {what} could not be built "
            f"(d_model {config.d_model}, {config.num_heads} heads, "
            f"{config.num_layers} layers): {_first_line(error)}"
        ) from None
    generator = torch.Generator().manual_seed(0)
    for length in sorted(set(lengths), reverse=True):
        try:
            unreadable = length_error(model, length)
        except Exception as error:  # the reader's max_length hook
            raise ExperimentError(
                f"{where}: its max_length hook failed for {what}: {_first_line(error)}"
            ) from None
        if unreadable is not None:
            if length == trained:
                raise ExperimentError(
                    f"{where}: {what} train on rows of {length} bytes, which its "
                    f"max_length refuses: {unreadable.splitlines()[0]}"
                )
            continue
        tokens = torch.randint(0, VOCAB_SIZE, (1, length), generator=generator)
        try:
            with torch.no_grad():
                logits = model(tokens)
        except Exception as error:
            raise ExperimentError(
                f"{where}: its model's forward pass failed at length {length} "
                f"(a length {what} are scored at): "
                f"{_first_line(error)}"
            ) from None
        _check_logits(logits, rows=1, length=length, where=where, why=f"read by {what}")
