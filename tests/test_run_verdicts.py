"""Verdicts read from a record (``lm.run_verdicts``): the record's values go to
``paired_verdict`` by seed and segment, with the files the record names."""

from __future__ import annotations

import numpy as np
import pytest

from pe_tutorial.lm.run_verdicts import (
    entry_verdict,
    gain_verdict,
    length_verdict,
    run_verdict,
    scalar_verdict,
    scored_files,
    seed_segments,
    seed_values,
)
from pe_tutorial.lm.verdicts import paired_verdict

FILES = ["a.py", "a.py", "b.py", "c.py", "c.py", "c.py"]


def _entry(scheme, offset, seeds=(10, 11, 12), corpus="stdlib"):
    rng = np.random.default_rng(len(scheme))
    runs = []
    for seed in seeds:
        noise = rng.normal(0, 0.05, len(FILES))
        at = {
            "128": list(2.0 + offset + noise + 0.01 * seed),
            "256": list(2.2 + offset + noise + 0.01 * seed),
        }
        runs.append(
            {
                "seed": seed,
                "segment_bpb": at,
                "bpb": {k: float(np.mean(v)) for k, v in at.items()},
                "context_gain": {"256": list(0.1 + noise)},
            }
        )
    return {"scheme": scheme, "corpus": corpus, "runs": runs}


def _results(files=FILES):
    corpora = {"stdlib": {"source": "x"}}
    if files is not None:
        corpora["stdlib"]["segment_files"] = files
    return {"metadata": {"corpora": corpora}}


def test_a_run_verdict_is_the_paired_verdict_of_the_recorded_segments():
    a, b = _entry("rope", 0.1), _entry("t5", 0.0)
    verdict = run_verdict(_results(), a, b, 128, label="rope - t5")
    by_hand = paired_verdict(
        {r["seed"]: r["segment_bpb"]["128"] for r in a["runs"]},
        {r["seed"]: r["segment_bpb"]["128"] for r in b["runs"]},
        label="rope - t5",
        files=FILES,
    )
    assert verdict == by_hand
    assert verdict.files == 3 and "resampled by file (3 files)" in verdict.words
    assert verdict.difference == pytest.approx(
        np.mean(a["runs"][0]["segment_bpb"]["128"])
        - np.mean(b["runs"][0]["segment_bpb"]["128"]),
        abs=0.05,
    )


def test_a_record_without_files_resamples_seeds_only_and_says_so():
    verdict = run_verdict(
        _results(None), _entry("rope", 0.1), _entry("t5", 0.0), 128, label="d"
    )
    assert scored_files(_results(None)) is None
    assert verdict.files is None and "resampled" not in verdict.method


def test_one_model_at_two_lengths_and_a_gain_against_zero():
    rope = _entry("rope", 0.0)
    rise = length_verdict(_results(), rope, 128, 256, label="rise")
    assert rise.difference == pytest.approx(0.2)
    assert rise.real
    gain = gain_verdict(_results(), rope, 256, label="gain")
    assert gain.difference == pytest.approx(
        np.mean([r["context_gain"]["256"] for r in rope["runs"]])
    )


def test_unpairable_entries_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="segments of two corpora cannot be paired"):
        run_verdict(
            _results(),
            _entry("rope", 0.0),
            _entry("t5", 0.0, corpus="shakespeare"),
            128,
            label="d",
        )
    with pytest.raises(ValueError, match="seeds \\[12\\] are on one side only"):
        run_verdict(
            _results(),
            _entry("rope", 0.0),
            _entry("t5", 0.0, seeds=(10, 11)),
            128,
            label="d",
        )
    with pytest.raises(ValueError, match="no 'segment_bpb' at length 512"):
        seed_segments(_entry("rope", 0.0), 512)
    old = _entry("rope", 0.0)
    del old["runs"][0]["segment_bpb"]
    with pytest.raises(ValueError, match="record the experiment again"):
        seed_segments(old, 128)


def test_a_seed_of_the_second_record_alone_is_refused_or_left_out_as_documented():
    """An extra seed in b, not only in a: run_verdict refuses it (a one-sided set
    difference would drop it silently), entry_verdict pairs the common seeds."""
    two, three = _entry("rope", 0.1, seeds=(10, 11)), _entry("t5", 0.0)
    with pytest.raises(ValueError, match="seeds \\[12\\] are on one side only"):
        run_verdict(_results(), two, three, 128, label="d")
    verdict = entry_verdict(_results(), two, three, 128, label="d")
    by_hand = [
        np.mean(r["segment_bpb"]["128"]) - np.mean(q["segment_bpb"]["128"])
        for r, q in zip(two["runs"], three["runs"][:2], strict=True)
    ]
    assert verdict.n == 2 and verdict.files == 3
    assert verdict.difference == pytest.approx(np.mean(by_hand), rel=1e-12)


def test_per_seed_numbers_are_the_paired_t_test():
    verdict = scalar_verdict(
        {1: 0.9, 2: 0.8, 3: 0.95}, {1: 0.5, 2: 0.45, 3: 0.6}, label="accuracy"
    )
    assert verdict.difference == pytest.approx(0.3667, abs=1e-3)
    assert verdict.files is None and verdict.n == 3


def test_an_entry_verdict_pairs_the_common_seeds_and_falls_back_to_per_seed():
    a, b = _entry("rope", 0.1), _entry("t5", 0.0, seeds=(10, 11))
    verdict = entry_verdict(_results(), a, b, 128, label="d")
    assert verdict.n == 2 and verdict.files == 3
    # no segments kept (an extension's runs): the per-seed values, paired
    plain = {"runs": [{"seed": s, "bpb": {"128": 2.0 + s / 100}} for s in (1, 2, 3)]}
    scaled = {"runs": [{"seed": s, "bpb": {"128": 1.9 + s / 90}} for s in (1, 2, 3)]}
    verdict = entry_verdict(_results(), scaled, plain, 128, label="yarn - none")
    assert verdict == scalar_verdict(
        seed_values(scaled, 128), seed_values(plain, 128), label="yarn - none"
    )
    with pytest.raises(ValueError, match="no seed has a value on both sides"):
        entry_verdict(_results(), a, _entry("t5", 0.0, seeds=(1,)), 128, label="x")


def test_a_family_corrects_its_claims_together_and_glues_each(monkeypatch):
    from pe_tutorial.lm import run_verdicts

    glued = {}
    monkeypatch.setattr(run_verdicts, "glue", lambda k, v: glued.__setitem__(k, v))
    rope, t5, cope = (
        _entry(s, o) for s, o in (("rope", 0.1), ("t5", 0.0), ("cope", 0.0))
    )
    claims = run_verdicts.Family("the test's claims")
    claims.add("rope_t5", run_verdict(_results(), rope, t5, 128, label="rope - t5"))
    with pytest.raises(ValueError, match="before reading 'rope_t5'"):
        claims["rope_t5"]
    claims.add("t5_cope", run_verdict(_results(), t5, cope, 128, label="t5 - cope"))
    with pytest.raises(ValueError, match="already holds 'rope_t5'"):
        claims.add("rope_t5", claims._claims["rope_t5"])
    claims.glue()
    alone = claims._claims["rope_t5"]
    assert claims["rope_t5"].p_adjusted >= alone.p and len(claims) == 2
    assert claims["rope_t5"].family_size == 2
    assert glued["rope_t5_gap"] == alone.difference
    assert glued["rope_t5_verdict"].startswith(claims["rope_t5"].conclusion)
    assert ", 3 seeds \u00d7 3 files, " in glued["rope_t5_verdict"]
    table = claims.table()
    assert table.startswith("family 'the test's claims': 2 claims, Holm-corrected")
    assert "each 3 seeds \u00d7 3 files" in table and "rope_t5" in table
    assert "among the 2 claims of 'the test's claims'" in glued["rope_t5_verdict"]
    # the short tag a sentence carries: the conclusion and the adjusted p alone
    said = "real" if claims["rope_t5"].real else "not shown"
    assert glued["rope_t5_tag"] == f"{said}, Holm p {claims['rope_t5'].p_adjusted:.2g}"
    with pytest.raises(ValueError, match="is closed"):
        claims.add("late", alone)


def test_a_family_reads_claims_from_a_record_and_settles_them(monkeypatch, capsys):
    from pe_tutorial.lm import run_verdicts

    glued = {}
    monkeypatch.setattr(run_verdicts, "glue", lambda k, v: glued.__setitem__(k, v))
    record, rope, t5 = _results(), _entry("rope", 0.1), _entry("t5", 0.0)
    claims = run_verdicts.Family("read from a record")
    compared = claims.compare("rope_t5", record, rope, t5, 128)
    assert compared == run_verdict(record, rope, t5, 128, label="rope_t5")
    across = claims.compare("rope_256_t5", record, rope, t5, 256, length_b=128)
    assert across == run_verdict(
        record, rope, t5, 256, length_b=128, label="rope_256_t5"
    )
    moved = claims.change("rope_rise", record, rope, 128, 256)
    assert moved == length_verdict(record, rope, 128, 256, label="rope_rise")
    assert moved.difference == pytest.approx(0.2)
    assert claims.settle() is claims
    printed = capsys.readouterr().out
    assert printed.startswith("family 'read from a record': 3 claims, Holm-corrected")
    assert claims["rope_rise"].family_size == 3 and "rope_rise_verdict" in glued


def test_a_family_of_claims_on_different_seeds_and_files_says_each_ones():
    """Holm over claims that rest on 3 seeds x 3 files, 2 seeds x 3 files and 3
    seeds (no files): the adjusted p-values are Holm's, worked by hand from the
    claims' own, and the table names what each claim rests on, not one for all
    (every other family here shares its seeds and files)."""
    from pe_tutorial.lm import run_verdicts

    rope, t5 = _entry("rope", 0.1), _entry("t5", 0.0)
    alibi = _entry("alibi", 0.05, seeds=(10, 11))
    claims = run_verdicts.Family("mixed")
    claims.add("rope_t5", run_verdict(_results(), rope, t5, 128, label="a"))
    claims.add("rope_alibi", entry_verdict(_results(), rope, alibi, 128, label="b"))
    claims.add(
        "accuracy",
        scalar_verdict({1: 0.9, 2: 0.8, 3: 0.95}, {1: 0.5, 2: 0.7, 3: 0.6}, label="c"),
    )
    raw = {key: v.p for key, v in claims._claims.items()}
    # Holm by hand: the i-th smallest p times (m - i), never below a smaller one's
    ranked = sorted(raw, key=raw.get)
    expected = {}
    for i, key in enumerate(ranked):
        expected[key] = max(min(1.0, (3 - j) * raw[ranked[j]]) for j in range(i + 1))
    claims.close()
    for key in raw:
        assert claims[key].p_adjusted == pytest.approx(expected[key], rel=1e-12), key
        assert claims[key].family_size == 3
    lines = claims.table().split("\n")
    assert lines[0] == "family 'mixed': 3 claims, Holm-corrected"
    rests = {
        "rope_t5": "(3 seeds \u00d7 3 files)",
        "rope_alibi": "(2 seeds \u00d7 3 files)",
        "accuracy": "(3 seeds)",
    }
    for key, line in zip(rests, lines[1:], strict=True):
        assert line.lstrip().startswith(key) and line.endswith(rests[key]), line
        assert rests[key][1:-1] in run_verdicts.phrase(claims[key])


def _with_length(entry, length, offset):
    """``entry`` with every seed scored at ``length`` too: its 128 values plus
    ``offset`` (None: a length it cannot read, as a learned table past L)."""
    for run in entry["runs"]:
        at = run["segment_bpb"]["128"]
        values = None if offset is None else [v + offset for v in at]
        run["segment_bpb"][str(length)] = values
        run["bpb"][str(length)] = None if values is None else float(np.mean(values))
    return entry


def test_the_second_record_is_read_at_its_own_length_where_only_it_has_it():
    """RoPE at 8L against a learned table at L, which has no 8L, in both orders:
    b is read at ``length_b`` (reading it at ``length``, or asking both records
    for both lengths, gives no verdict or the wrong one)."""
    rope = _with_length(_entry("rope", 0.1), 1024, 0.3)
    learned = _with_length(_entry("learned", 0.0), 1024, None)

    def by_hand(a, a_length, b, b_length):
        return np.mean(
            [
                np.subtract(r["segment_bpb"][a_length], q["segment_bpb"][b_length])
                for r, q in zip(a["runs"], b["runs"], strict=True)
            ]
        )

    for a, b, length, length_b in (
        (rope, learned, 1024, 128),
        (learned, rope, 128, 1024),
    ):
        verdict = entry_verdict(_results(), a, b, length, length_b=length_b, label="d")
        assert verdict.n == 3 and verdict.files == 3  # per segment and file
        assert verdict.difference == pytest.approx(
            by_hand(a, str(length), b, str(length_b)), rel=1e-12
        )
        assert verdict == run_verdict(
            _results(), a, b, length, length_b=length_b, label="d"
        )
    # the learned table at L against RoPE at 8L: RoPE's own 8L, 0.3 above its L
    gap = entry_verdict(_results(), learned, rope, 128, length_b=1024, label="d")
    assert gap.difference == pytest.approx(by_hand(learned, "128", rope, "128") - 0.3)


def test_a_family_of_one_claim_is_named_in_the_singular():
    from pe_tutorial.lm import run_verdicts

    alone = run_verdicts.Family("one question")
    alone.add(
        "rope_t5",
        run_verdict(_results(), _entry("rope", 0.1), _entry("t5", 0.0), 128, label="x"),
    )
    assert alone.table().startswith("family 'one question': 1 claim, Holm-corrected")
    assert "among the 1 claim of 'one question'" in run_verdicts.phrase(
        alone["rope_t5"]
    )
    assert "'one question' of 1 claim)" in alone["rope_t5"].words


def test_a_printed_family_keeps_within_the_pages_88_columns():
    """A long family name wraps; a claim resting on its own seeds and files puts
    them on the next line when its line would run past 88 columns."""
    from pe_tutorial.lm import run_verdicts

    rope, t5 = _entry("rope", 0.1), _entry("t5", 0.0)
    claims = run_verdicts.Family("a family whose name is long enough " * 3)
    claims.add(
        "a_rather_long_claim_key",
        run_verdict(_results(), rope, t5, 128, label="rope - t5"),
    )
    claims.add(
        "by_seed_alone",
        scalar_verdict({0: 1.0, 1: 1.2, 2: 0.9}, {0: 0.5, 1: 0.4, 2: 0.6}, label="x"),
    )
    lines = claims.table().splitlines()
    assert max(len(line) for line in lines) <= run_verdicts.PAGE_COLUMNS
    assert lines[1].startswith("  ")  # the name went on, indented
    assert any(line.strip() == "(3 seeds × 3 files)" for line in lines)
