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


def rotated_by_hand(x: torch.Tensor, theta: list[float]) -> torch.Tensor:
    """RoPE with the half pairing, float64: pair i = (x_i, x_{i + D/2}) turned by
    ``t * theta[i]`` at position t = 0 .. T - 1 (theta 0: not turned)."""
    T, half = x.shape[-2], x.shape[-1] // 2
    angle = torch.arange(T, dtype=torch.float64)[:, None] * torch.tensor(
        theta, dtype=torch.float64
    )
    a, b = x[..., :half], x[..., half:]
    return torch.cat(
        [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1
    )


# bases other than the defaults (10 000 and 1 000 000), and different from each other
LOCAL_BASE, GLOBAL_BASE = 300.0, 20_000.0
D = 8  # head_dim of the models below
ROPE = [LOCAL_BASE ** (-2 * i / D) for i in range(D // 2)]
GLOBAL_ROPE = [GLOBAL_BASE ** (-2 * i / D) for i in range(D // 2)]
NONE = [0.0] * (D // 2)
# every layer's frequencies, by the registry's docs, for 4 layers, every 2nd global;
# p-RoPE at fraction 0.5: floor(0.5 * 4) = 2 pairs turn, the slower 2 are frozen
EXPECTED_FREQUENCIES = {
    "rope": [ROPE] * 4,
    "p-rope": [ROPE[:2] + [0.0, 0.0]] * 4,
    "irope": [ROPE, NONE, ROPE, NONE],  # the global layers are NoPE
    "local-global": [ROPE, GLOBAL_ROPE, ROPE, GLOBAL_ROPE],
}


# the schemes that enter at the queries and keys by adding a table, not rotating
TABLES_ON_QK = {"learned-qk", "sinusoidal-qk"}


def test_every_rotary_scheme_is_listed_below():
    """Every registered scheme that rotates queries and keys has its expected
    frequencies in ``EXPECTED_FREQUENCIES`` (a new one must be added there)."""
    on_qk = {n for n in scheme_names() if registered(n).enters == "queries and keys"}
    assert on_qk - TABLES_ON_QK == set(EXPECTED_FREQUENCIES)
    assert TABLES_ON_QK <= on_qk


@pytest.mark.parametrize("name", list(EXPECTED_FREQUENCIES))
def test_each_layer_rotates_at_the_base_its_config_names(name):
    """Issue 32: built at non-default ``rope_base`` (and ``global_rope_base``), each
    layer of a RoPE-family scheme turns key pair i by ``t * base ** (-2i / D)``
    at position t, with the base its config field names: ``rope_base`` for RoPE,
    p-RoPE's turning pairs (its frozen ones: 0), iRoPE's chunked layers and
    Gemma 3's local layers; ``global_rope_base`` for Gemma 3's global layers; no
    turn in iRoPE's NoPE layers. Written out here, not read off the modules."""
    config = ModelConfig(
        scheme=name,
        d_model=16,
        num_heads=2,
        num_layers=4,
        max_positions=16,
        rope_base=LOCAL_BASE,
        global_rope_base=GLOBAL_BASE,
        rope_fraction=0.5,
        global_every=2,
        local_window=4,
    )
    model = ByteTransformer(config)
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 2, 12, D, dtype=torch.float64, generator=g) for _ in "qk")
    for layer, (block, theta) in enumerate(
        zip(model.blocks, EXPECTED_FREQUENCIES[name], strict=True)
    ):
        q_turned, k_turned = block.attention.scheme.rotate(q, k)
        # the tables are float32: angles up to 11 rad to about 1e-6
        assert torch.allclose(k_turned, rotated_by_hand(k, theta), atol=1e-5), layer
        if theta is not NONE:  # a NoPE layer scales its queries (temperature)
            assert torch.allclose(q_turned, rotated_by_hand(q, theta), atol=1e-5)


# --- issue 32: a scheme's options are the ModelConfig fields it reads, and are read


class ReadingConfig:
    """A ModelConfig that records which fields the scheme's builders read."""

    def __init__(self, config: ModelConfig):
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self.config, name)


@pytest.mark.parametrize("name", scheme_names())
def test_each_scheme_reads_exactly_its_options(name):
    """``options`` is not a comment that drifts: building the scheme (shared module,
    every layer, its length limit) reads those fields and no other, besides the
    sizes every model has (``GENERAL_FIELDS``)."""
    from pe_tutorial.lm.registry import GENERAL_FIELDS

    spec = registered(name)
    config = ReadingConfig(ModelConfig(scheme=name, **{**SMALL, "num_layers": 4}))
    shared = spec.shared(config)
    if spec.layers is not None:
        spec.layers(config, shared)
    else:
        spec.layer(config, shared)
    spec.max_length(config)
    assert config.read - set(GENERAL_FIELDS) == set(spec.options)
    assert len(set(spec.options)) == len(spec.options)


def test_every_config_field_is_general_or_some_schemes_option():
    """No ModelConfig field is read by no scheme, and no option names a non-field."""
    from dataclasses import fields

    from pe_tutorial.lm.registry import GENERAL_FIELDS

    names = {f.name for f in fields(ModelConfig)} | {"head_dim"}
    options = {o for n in scheme_names() for o in registered(n).options}
    assert options <= names
    assert names - set(GENERAL_FIELDS) == options
    assert set(GENERAL_FIELDS) <= names


def test_a_switch_a_scheme_does_not_read_is_refused():
    """The fields None by default switch something on; for a scheme whose options
    do not name them they are errors that say which schemes read them."""
    from pe_tutorial.encodings.rope_scaling import RopeScaling
    from pe_tutorial.lm.registry import check_options

    linear = RopeScaling("linear", factor=2.0)
    with pytest.raises(ValueError, match="rope_scaling applies to scheme 'rope' only"):
        ModelConfig(scheme="p-rope", rope_scaling=linear)
    with pytest.raises(
        ValueError,
        match="temperature_floor applies to scheme 'irope' only, not 'local-global'",
    ):
        ModelConfig(scheme="local-global", temperature_floor=8)
    # the schemes that read them take them
    assert ModelConfig(scheme="rope", rope_scaling=linear).rope_scaling == linear
    assert ModelConfig(scheme="irope", temperature_floor=8).temperature_floor == 8
    # the check itself, for any field
    check_options("t5", ["t5_max_distance", "d_model"])
    with pytest.raises(
        ValueError,
        match=r"max_relative_position applies to the schemes \('shaw', 'deberta'\), "
        "not 'nope', which reads no options",
    ):
        check_options("nope", ["max_relative_position"])
    with pytest.raises(ValueError, match="which reads only \\('t5_buckets'"):
        check_options("t5", ["rope_base"])
    with pytest.raises(ValueError, match="options must be a tuple of ModelConfig"):
        ModelScheme("x", "scores", 0, "", options=("d_model",))
    with pytest.raises(ValueError, match="options must be a tuple"):
        ModelScheme("x", "scores", 0, "", options="rope_base")


class LearnedPreviousTokenBonus(PreviousTokenBonus):
    """The test scheme with its bonus a parameter, per head: a position parameter."""

    def __init__(self, bonus: torch.nn.Parameter):
        super().__init__(0.0)
        self.weight = bonus

    def bias(self, q, k, *, causal):
        return self.weight[:, None, None] * super().bias(q, k, causal=causal).bool()


@pytest.mark.parametrize("shared", [True, False])
def test_a_registered_schemes_parameters_are_its_position_parameters(shared):
    """Wherever the entry puts them (one module shared by the layers, or one in each
    layer), the scheme's parameters are the model's position parameters."""

    def bonus(config):
        return torch.nn.Parameter(torch.ones(config.num_heads))

    if shared:
        options = {
            "shared": lambda c: torch.nn.ParameterList([bonus(c)]),
            "layer": lambda c, table: LearnedPreviousTokenBonus(table[0]),
        }
    else:
        options = {"layer": lambda c, table: LearnedPreviousTokenBonus(bonus(c))}
    register_scheme(
        ModelScheme(
            "learned-previous-token", "scores", 0, "a learned test bias", **options
        )
    )
    try:
        model = ByteTransformer(ModelConfig(scheme="learned-previous-token", **SMALL))
    finally:
        unregister_scheme("learned-previous-token")
    names = [name for name, _ in model.named_position_parameters()]
    layers = range(1 if shared else SMALL["num_layers"])
    assert names == [f"blocks.{i}.attention.scheme.weight" for i in layers]
    assert all(p.shape == (4,) for p in model.position_parameters())
