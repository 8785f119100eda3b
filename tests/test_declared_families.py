"""Families declared in an experiment file before its record is read (issue 66):
the claim sentences, the [[families]] table, and a declared family read from a
shipped record the same way a chapter reads it by hand."""

from __future__ import annotations

import tomllib

import pytest

from pe_tutorial.experiments import (
    PRESETS,
    ExperimentError,
    declared_families,
    load_results,
    preset_from_dict,
    preset_to_dict,
)
from pe_tutorial.lm.declared_families import Claim, FamilyDeclaration, parse_claim
from pe_tutorial.lm.findings import language_entry, mean_at
from pe_tutorial.lm.verdicts import holm


def test_a_claim_is_one_of_two_sentences():
    assert parse_claim("alibi - rope at 8L") == Claim(
        "alibi - rope at 8L", "alibi", "rope", 8
    )
    assert parse_claim("p-rope - rope at 1L").key == "p_rope_rope_1x"
    rise = parse_claim("rope from 1L to 8L")
    assert (rise.a, rise.b, rise.multiple, rise.stop) == ("rope", None, 1, 8)
    assert rise.key == "rope_1x_8x" and rise.multiples == (1, 8)


@pytest.mark.parametrize(
    "text, message",
    [
        ("alibi-rope at 8L", "write 'A - B at mL'"),
        ("alibi - rope at 8", "write 'A - B at mL'"),
        ("alibi - rope at 0L", "write 'A - B at mL'"),
        ("rope - rope at 1L", "a scheme against itself says nothing"),
        ("rope from 2L to 2L", "from a length to itself says nothing"),
        (3, "a claim is a string, got 3"),
    ],
)
def test_a_claim_that_is_not_one_says_what_to_write(text, message):
    with pytest.raises(ValueError, match=message):
        parse_claim(text)


def _experiment(families: list[dict]) -> dict:
    data = preset_to_dict(PRESETS["long-budget"])
    data["families"] = families
    return data


def test_an_experiment_file_declares_families_and_writes_them_back():
    text = """
[[families]]
name = "two claims"
claims = ["alibi - rope at 1L", "rope from 1L to 8L"]
"""
    data = _experiment(tomllib.loads(text)["families"])
    preset = preset_from_dict(data)
    assert preset.families == (
        ("two claims", ("alibi - rope at 1L", "rope from 1L to 8L"), "holm"),
    )
    assert preset_from_dict(preset_to_dict(preset)) == preset
    (family,) = declared_families(preset)
    assert [c.key for c in family.claims] == ["alibi_rope_1x", "rope_1x_8x"]


@pytest.mark.parametrize(
    "families, message",
    [
        (
            [{"name": "f", "claims": ["kerple - rope at 1L"]}],
            r"families\[0\] \('f'\): claim 'kerple - rope at 1L' names kerple, "
            "which this experiment does not train",
        ),
        (
            [{"name": "f", "claims": ["alibi - rope at 16L"]}],
            "reads 16L, which this experiment does not score; its multiples are "
            r"\[1, 2, 4, 8\]",
        ),
        (
            [
                {
                    "name": "f",
                    "claims": ["alibi - rope at 1L"],
                    "correction": "bonferroni",
                }
            ],
            r"families\[0\]: family 'f': correction 'bonferroni'; the one offered is "
            "'holm'",
        ),
        ([{"name": "f", "claims": []}], "declare at least one claim"),
        (
            [{"name": "f", "claims": ["alibi - rope at 1L", "alibi - rope at 1L"]}],
            r"claims \['alibi_rope_1x'\] declared twice",
        ),
        (
            [
                {"name": "f", "claims": ["alibi - rope at 1L"]},
                {"name": "f", "claims": ["t5 - rope at 1L"]},
            ],
            "families: f declared twice",
        ),
        ([{"name": "f", "claim": ["x"]}], r"not \['claim'\]"),
        ({"name": "f"}, "families: expected a list of tables"),
    ],
)
def test_a_wrong_declaration_is_refused_before_anything_runs(families, message):
    with pytest.raises(ExperimentError, match=message):
        preset_from_dict(_experiment(families))


def test_a_declared_family_reads_the_record_as_the_chapter_would():
    """On the shipped heldout-long record: the claims in the declared order, each
    difference the record's means apart (a claim on one model at two lengths, its
    own two means), Holm across exactly the declared claims."""
    record = load_results("heldout-long")
    schemes = ("nope", "alibi", "rope")
    entries = {s: language_entry(record, s) for s in schemes}
    L = record["settings"]["train"]["seq_len"]
    declared = FamilyDeclaration(
        "a test family",
        tuple(
            parse_claim(text)
            for text in (
                "nope - rope at 1L",
                "alibi - rope at 8L",
                "rope from 1L to 8L",
            )
        ),
    )
    family = declared.family(record, entries, L)
    verdicts = [family[key] for key in ("nope_rope_1x", "alibi_rope_8x", "rope_1x_8x")]
    expected = [
        mean_at(entries["nope"], L) - mean_at(entries["rope"], L),
        mean_at(entries["alibi"], 8 * L) - mean_at(entries["rope"], 8 * L),
        mean_at(entries["rope"], 8 * L) - mean_at(entries["rope"], L),
    ]
    # the record keeps per-segment values rounded, its means from the unrounded ones
    assert [v.difference for v in verdicts] == pytest.approx(expected, abs=1e-4)
    assert all(v.family == "a test family" and v.family_size == 3 for v in verdicts)
    assert [v.p_adjusted for v in verdicts] == holm([v.p for v in verdicts])
    assert all(v.n == 3 and v.files for v in verdicts)
    with pytest.raises(ValueError, match=r"claims on \['alibi', 'rope'\], which the"):
        declared.family(record, {"nope": entries["nope"]}, L)


def test_settle_says_where_the_family_was_declared(capsys):
    record = load_results("heldout-long")
    entries = {s: language_entry(record, s) for s in ("alibi", "rope")}
    declared = FamilyDeclaration("one claim", (parse_claim("alibi - rope at 1L"),))
    family = declared.settle(
        record, entries, 128, declared_in="presets/heldout-long.toml"
    )
    printed = capsys.readouterr().out
    assert printed.startswith(
        "declared in presets/heldout-long.toml before its record was read\n"
        "family 'one claim': 1 claim, Holm-corrected"
    )
    assert family["alibi_rope_1x"].family_size == 1


def test_the_long_budget_declares_its_families_before_its_record():
    """Chapter 9's long budget (issue 66): every scheme but RoPE against RoPE at L,
    nothing chosen from an order; each scheme that reads past L from L to 8L."""
    preset = PRESETS["long-budget"]
    ranking, past = declared_families(preset)
    others = [s for s in preset.schemes if s != "rope"]
    assert [(c.a, c.b, c.multiple) for c in ranking.claims] == [
        (s, "rope", 1) for s in others
    ]
    readable = [s for s in preset.schemes if s != "learned"]
    assert [(c.a, c.multiple, c.stop) for c in past.claims[:-1]] == [
        (s, 1, 8) for s in readable
    ]
    assert past.claims[-1].text == "nope - rope at 8L"


def test_the_same_claims_read_from_a_second_record_glue_under_their_own_keys():
    """Chapter 9 reads the long budget's declared claims at the short budget too:
    with a prefix and a name the second reading is its own family, the same
    claims, keys and name apart, its verdicts the record's own."""
    record = load_results("heldout-long")
    entries = {s: language_entry(record, s) for s in ("alibi", "rope")}
    declared = FamilyDeclaration(
        "long", (parse_claim("alibi - rope at 1L"), parse_claim("rope from 1L to 8L"))
    )
    plain = declared.family(record, entries, 128)
    short = declared.family(record, entries, 128, prefix="short_", name="at 800")
    assert set(short.close()) == {"short_alibi_rope_1x", "short_rope_1x_8x"}
    assert short["short_alibi_rope_1x"].family == "at 800"
    assert short["short_rope_1x_8x"].difference == plain["rope_1x_8x"].difference
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        declared.family(record, entries, 128, prefix="short-")
