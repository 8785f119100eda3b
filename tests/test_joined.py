"""join_seeds (chapter 12): a record and a later run of the same settings on new
seeds make the record one run with every seed would have made."""

from __future__ import annotations

import copy
import re
import statistics

import pytest

from pe_tutorial.experiments import JoinError, join_seeds, load_results


def record(seeds, accuracy, *, steps=2500, schemes=("rope", "irope")):
    """A small passkey record: each scheme's accuracy at 64 and 128 per seed,
    and a learning curve of two points."""

    def runs(offset):
        return [
            {
                "seed": s,
                "accuracy": {"64": a + offset, "128": a / 2},
                "curve": {"steps": [10, 20], "accuracy": [a / 4, a + offset]},
            }
            for s, a in zip(seeds, accuracy, strict=True)
        ]

    def entry(scheme, offset):
        made = runs(offset)
        mean = {
            n: statistics.mean(r["accuracy"][n] for r in made) for n in ("64", "128")
        }
        return {
            "scheme": scheme,
            "runs": made,
            "summary": {
                n: {"mean": m, "std": 0.0, "n": len(made)} for n, m in mean.items()
            },
            "curve": {"steps": [10, 20], "mean": [0, 0], "std": [0, 0], "n": [1, 1]},
        }

    return {
        "metadata": {"date": "2026-12-06", "device": "cpu"},
        "settings": {
            "seeds": list(seeds),
            "schemes": list(schemes),
            "passkey": {"steps": steps, "keys": 2},
            "model": {"d_model": 128},
        },
        "language_model": [],
        "passkey": [entry(s, 0.01 * i) for i, s in enumerate(schemes)],
    }


def test_the_joined_summary_is_the_summary_of_all_the_seeds():
    first = record([0, 1, 2], [0.5, 0.9, 0.4])
    more = record([3, 4, 5], [1.0, 0.45, 0.55])
    joined = join_seeds(first, more)
    rope = joined["passkey"][0]
    assert [r["seed"] for r in rope["runs"]] == [0, 1, 2, 3, 4, 5]
    values = [0.5, 0.9, 0.4, 1.0, 0.45, 0.55]
    assert rope["summary"]["64"]["mean"] == pytest.approx(statistics.mean(values))
    assert rope["summary"]["64"]["std"] == pytest.approx(statistics.stdev(values))
    assert rope["summary"]["64"]["n"] == 6
    # the curves' summary is made again from the six runs too
    assert rope["curve"]["mean"][1] == pytest.approx(statistics.mean(values))
    assert rope["curve"]["n"] == [6, 6]
    assert joined["settings"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert joined["metadata"]["joined"] == more["metadata"]


def test_an_entry_the_second_run_lacks_keeps_its_seeds_and_nothing_is_changed():
    first = record([0, 1, 2], [0.5, 0.9, 0.4], schemes=("rope", "irope", "p-rope"))
    more = record([3, 4], [1.0, 0.45], schemes=("rope", "irope"))
    kept = copy.deepcopy((first, more))
    joined = join_seeds(first, more)
    assert len(joined["passkey"][2]["runs"]) == 3
    assert joined["passkey"][2] == first["passkey"][2]
    assert (first, more) == kept  # neither argument is changed


@pytest.mark.parametrize(
    ("more", "said"),
    [
        (record([2, 3, 4], [0.1, 0.2, 0.3]), "seeds [2] are in both records"),
        (
            record([3, 4, 5], [0.1, 0.2, 0.3], steps=2000),
            "passkey.steps: 2500 against 2000",
        ),
        (record([3, 4], [0.1, 0.2], schemes=("kerple",)), "has no counterpart"),
    ],
)
def test_records_that_differ_in_more_than_their_seeds_are_refused(more, said):
    first = record([0, 1, 2], [0.5, 0.9, 0.4])
    with pytest.raises(JoinError, match=re.escape(said)):
        join_seeds(first, more)


def test_a_section_that_cannot_be_joined_is_refused():
    more = record([3], [0.5])
    more["rope_extension"] = [{"method": "yarn", "runs": [], "summary": {}}]
    with pytest.raises(JoinError, match="rope_extension"):
        join_seeds(record([0], [0.1]), more)


def test_the_shipped_multikey_records_join_as_chapter_12_reads_them():
    first, more = (
        load_results("frontier-multikey"),
        load_results("frontier-multikey-seeds"),
    )
    joined = join_seeds(first, more)
    by_scheme = {e["scheme"]: e for e in joined["passkey"]}
    for scheme in ("rope", "irope"):
        assert [r["seed"] for r in by_scheme[scheme]["runs"]] == [0, 1, 2, 3, 4, 5]
        assert by_scheme[scheme]["summary"]["64"]["n"] == 6
    assert len(by_scheme["p-rope"]["runs"]) == 3
