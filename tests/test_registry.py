"""The scheme registry: one entry builds a model; the book's schemes are all there."""

from __future__ import annotations

import pytest
import torch

import pe_tutorial.lm.model as model_module
from pe_tutorial.attention.position_scheme import PositionScheme
from pe_tutorial.attention.schemes import DisentangledScheme
from pe_tutorial.lm.model import SCHEMES, ByteTransformer, ModelConfig
from pe_tutorial.lm.registry import (
    ModelScheme,
    register_scheme,
    registered,
    scheme_names,
    unregister_scheme,
)

SMALL = {"d_model": 32, "num_heads": 4, "num_layers": 2, "max_positions": 16}


class PreviousTokenBonus(PositionScheme):
    """A test scheme: a fixed bonus on the score of the token just before the query."""

    def __init__(self, bonus: float):
        super().__init__()
        self.bonus = bonus

    def bias(self, q, k, *, causal):
        q_len, k_len = q.shape[-2], k.shape[-2]
        rows = torch.arange(k_len - q_len, k_len)[:, None]
        return self.bonus * (torch.arange(k_len)[None, :] == rows - 1).float()


@pytest.fixture
def previous_token_scheme():
    scheme = register_scheme(
        ModelScheme(
            "previous-token",
            "scores",
            chapter=0,
            summary="a test bias",
            layer=lambda config, shared: PreviousTokenBonus(float(config.num_heads)),
        )
    )
    yield scheme
    unregister_scheme("previous-token")


def test_one_registration_makes_a_scheme_a_model_can_use(previous_token_scheme):
    assert "previous-token" in scheme_names()
    torch.manual_seed(0)
    model = ByteTransformer(ModelConfig(scheme="previous-token", **SMALL))
    schemes = [block.attention.scheme for block in model.blocks]
    assert all(isinstance(s, PreviousTokenBonus) and s.bonus == 4.0 for s in schemes)
    tokens = torch.randint(0, 256, (2, 10))
    assert model(tokens).shape == (2, 10, 256)
    # the bias reaches the scores: without it the logits differ
    for s in schemes:
        s.bonus = 0.0
    assert not torch.allclose(model(tokens), ByteTransformer(model.config)(tokens))
    # chapter 9's list is the book's own, not every registered scheme
    assert "previous-token" not in SCHEMES


def test_names_are_unique_and_unknown_ones_list_the_choices(previous_token_scheme):
    with pytest.raises(ValueError, match="'previous-token' is already registered"):
        register_scheme(previous_token_scheme)
    with pytest.raises(ValueError, match="unknown scheme 'nonsense'.*'previous-token'"):
        ModelConfig(scheme="nonsense")
    with pytest.raises(ValueError, match="no scheme named 'nonsense'"):
        unregister_scheme("nonsense")
    with pytest.raises(ValueError, match="enters must be one of"):
        ModelScheme("x", "keys", 0, "")
    with pytest.raises(ValueError, match="absolute table enters at the embeddings"):
        ModelScheme("x", "scores", 0, "", absolute=True)


def test_the_book_schemes_are_registered_in_chapter_order():
    names = scheme_names()
    assert names[: len(SCHEMES)] == SCHEMES
    assert SCHEMES == (
        "nope", "learned", "sinusoidal", "rope", "alibi", "t5", "shaw", "cope"
    )  # fmt: skip
    chapters = [registered(n).chapter for n in names]
    assert chapters == sorted(chapters)
    assert registered("deberta").studied is False


def test_every_registered_scheme_is_in_the_model_docs():
    for name in scheme_names():
        assert f'``"{name}"``' in model_module.__doc__, name


def test_deberta_is_selectable():
    torch.manual_seed(0)
    model = ByteTransformer(ModelConfig(scheme="deberta", **SMALL))
    scheme = model.blocks[0].attention.scheme
    assert isinstance(scheme, DisentangledScheme)
    assert scheme.encoding.span == SMALL.get("max_relative_position", 16)
    assert model(torch.randint(0, 256, (1, 40))).shape == (1, 40, 256)
