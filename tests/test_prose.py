"""Schemes named in sentences (pages.prose), as chapter 9's glued lists use them."""

import pytest

import pe_tutorial as pe


def test_lists_join_as_english():
    assert pe.scheme_list(["rope"]) == "RoPE"
    assert pe.scheme_list(["t5", "shaw"]) == "T5 and Shaw"
    assert pe.scheme_list(["learned", "sinusoidal", "alibi"]) == (
        "the learned table, the sinusoidal table and ALiBi"
    )


def test_a_name_it_does_not_know_is_written_as_given():
    assert pe.scheme_list(["rope", "kerple-log"]) == "RoPE and kerple-log"


def test_every_scheme_of_the_ranking_has_a_name():
    assert set(pe.PRESETS["tuned"].schemes) <= set(pe.SCHEME_NAMES)


@pytest.mark.parametrize("bad, error", [([], ValueError), ("rope", TypeError)])
def test_an_empty_list_or_a_string_is_refused(bad, error):
    with pytest.raises(error, match="empty case|list of scheme names"):
        pe.scheme_list(bad)
