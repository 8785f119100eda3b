"""The schemes a model can be built with, each registered once (chapter 9).

A ``ModelScheme`` says everything the byte model needs to know about one
position scheme: its name, where positions enter (``ENTRY_POINTS``), the
module every layer shares (made once per model), the ``PositionScheme`` each
attention layer gets, and the ``ModelConfig`` fields it reads (``options``;
``ModelConfig`` rejects a switch, a field None by default, set for a scheme
whose options do not name it, and a test checks that they are the fields the
builders read). The model,
the experiments and the timing suites all read this registry, so adding a
scheme is one ``register_scheme`` call (and its tests):

>>> register_scheme(ModelScheme(
...     "mine", enters="scores", chapter=11, summary="my bias",
...     layer=lambda config, shared: MyScheme(config.num_heads)))  # doctest: +SKIP

The book's schemes are registered below, in the order of the chapters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..attention.layer_patterns import gemma3_layers, llama4_layers
from ..attention.position_scheme import NoPositionScheme, PositionScheme
from ..attention.schemes import (
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    QKTableScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from ..encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
)
from ..encodings.alibi import ALiBiBias
from ..encodings.disentangled import DisentangledRelativeBias
from ..encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
)
from ..encodings.rope import RotaryEmbedding
from ..encodings.rope_bands import p_rope_frequencies

__all__ = [
    "ENTRY_POINTS",
    "GENERAL_FIELDS",
    "ModelScheme",
    "check_options",
    "register_scheme",
    "unregister_scheme",
    "registered",
    "scheme_names",
]

# where a scheme's positions enter the model
ENTRY_POINTS = (
    "nowhere",  # only the causal mask (NoPE)
    "embeddings",  # an absolute table added to the input (or to every layer's)
    "queries and keys",  # q and k rotated (RoPE)
    "scores",  # a bias added to the attention scores
)

# ModelConfig's sizes and switches that every model has: a scheme may read them
# without naming them in its options
GENERAL_FIELDS = (
    "scheme",
    "d_model",
    "num_heads",
    "head_dim",
    "num_layers",
    "mlp_ratio",
    "norm",
    "absolute",
)

# ModelConfig -> the module every layer shares, or None
Shared = Callable[[Any], nn.Module | None]
# (ModelConfig, shared module) -> this layer's PositionScheme
Layer = Callable[[Any, nn.Module | None], PositionScheme]
# (ModelConfig, shared module) -> every layer's PositionScheme, first to last
Layers = Callable[[Any, nn.Module | None], list[PositionScheme]]


def _none(config, shared=None):
    return None


@dataclass(frozen=True)
class ModelScheme:
    """One position scheme as the byte model builds it.

    ``absolute=True`` marks a table of positions: the model adds ``shared``
    to the embeddings (``absolute="input"``) or to every attention layer's
    input (``"every_layer"``), so ``layer`` is not used. ``max_length``
    gives the longest sequence the scheme can read (None: any).
    ``rotates_input`` marks an absolute scheme whose ``shared`` module rotates
    the embeddings (``shared(x, positions)``, RoPE applied once at the input,
    as the survey of chapter 9 trains it) in place of adding a table; it enters
    at the input only. ``scale_embeddings`` multiplies the token embeddings by sqrt(d_model)
    first, as Vaswani et al. do before adding their sinusoidal table.
    ``layers``, for a model whose layers differ (chapter 12's Llama 4 and
    Gemma 3 patterns), builds every layer's scheme at once in place of
    ``layer``. ``studied=False`` keeps a scheme out of the presets' default list.

    ``options`` names every ``ModelConfig`` field the builders (``shared``,
    ``layer``, ``layers``, ``max_length``) read besides ``GENERAL_FIELDS``.
    ``check_options`` reads it: ``ModelConfig`` refuses ``rope_scaling`` or
    ``temperature_floor`` (fields None by default, set only to switch
    something on) for a scheme whose options do not name them, and
    ``tests/test_registry.py`` builds each scheme and checks that the fields
    read are exactly these.
    """

    name: str
    enters: str
    chapter: int
    summary: str
    shared: Shared = _none
    layer: Layer = lambda config, shared: NoPositionScheme()
    layers: Layers | None = None
    options: tuple[str, ...] = ()
    absolute: bool = False
    scale_embeddings: bool = False
    rotates_input: bool = False
    max_length: Callable[[Any], int | None] = _none
    # trained and measured in chapter 9's presets by default
    studied: bool = True

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a scheme needs a non-empty name, got {self.name!r}")
        if self.enters not in ENTRY_POINTS:
            raise ValueError(
                f"scheme {self.name!r}: enters must be one of {ENTRY_POINTS}, "
                f"got {self.enters!r}"
            )
        if self.absolute and self.enters != "embeddings":
            raise ValueError(
                f"scheme {self.name!r}: an absolute table enters at the embeddings"
            )
        if self.rotates_input and not self.absolute:
            raise ValueError(
                f"scheme {self.name!r}: rotates_input marks an absolute scheme "
                "(absolute=True) whose shared module rotates the embeddings"
            )
        if not isinstance(self.options, tuple) or not all(
            isinstance(o, str) and o not in GENERAL_FIELDS for o in self.options
        ):
            raise ValueError(
                f"scheme {self.name!r}: options must be a tuple of ModelConfig field "
                f"names other than {GENERAL_FIELDS}, got {self.options!r}"
            )


_REGISTRY: dict[str, ModelScheme] = {}


def register_scheme(scheme: ModelScheme) -> ModelScheme:
    """Add a scheme under its name; a name already taken is an error."""
    if not isinstance(scheme, ModelScheme):
        raise TypeError(f"register a ModelScheme, not {type(scheme).__name__}")
    if scheme.name in _REGISTRY:
        raise ValueError(
            f"a scheme named {scheme.name!r} is already registered; pick another "
            "name or unregister_scheme it first"
        )
    _REGISTRY[scheme.name] = scheme
    return scheme


def unregister_scheme(name: str) -> None:
    """Remove a registered scheme (a test's, for example)."""
    if name not in _REGISTRY:
        raise ValueError(f"no scheme named {name!r} is registered")
    del _REGISTRY[name]


def scheme_names(*, studied_only: bool = False) -> tuple[str, ...]:
    """The registered schemes' names, in the order they were registered.

    ``studied_only``: only those chapter 9's presets train by default.
    """
    return tuple(n for n, s in _REGISTRY.items() if s.studied or not studied_only)


def registered(name: str) -> ModelScheme:
    """The scheme registered under ``name``; an unknown name lists the choices."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown scheme {name!r}; choose one of {scheme_names()}")
    return _REGISTRY[name]


def check_options(scheme: str, names) -> None:
    """Raise ``ValueError`` if scheme ``scheme`` does not read one of the fields ``names``.

    A field a scheme does not read (not in its ``options``, not a general
    size) would be set for nothing; the error names the schemes that read it.
    """
    spec = registered(scheme)
    for name in names:
        if name in GENERAL_FIELDS or name in spec.options:
            continue
        takers = [n for n, s in _REGISTRY.items() if name in s.options]
        if len(takers) == 1:
            applies = f"scheme {takers[0]!r} only"
        else:
            applies = f"the schemes {tuple(takers)}" if takers else "no scheme"
        reads = f"reads only {spec.options}" if spec.options else "reads no options"
        raise ValueError(f"{name} applies to {applies}, not {scheme!r}, which {reads}")


# ---------------------------------------------------------------------------
# the book's schemes
# ---------------------------------------------------------------------------

register_scheme(
    ModelScheme("nope", "nowhere", 1, "no positions at all (causal masking only)")
)
register_scheme(
    ModelScheme(
        "learned",
        "embeddings",
        4,
        "a learned absolute table (GPT-2)",
        shared=lambda c: LearnedPositionalEmbedding(c.max_positions, c.d_model),
        options=("max_positions",),
        absolute=True,
        max_length=lambda c: c.max_positions,
    )
)
register_scheme(
    ModelScheme(
        "sinusoidal",
        "embeddings",
        4,
        "the sinusoidal table (Vaswani et al.)",
        shared=lambda c: SinusoidalPositionalEmbedding(c.d_model),
        absolute=True,
        scale_embeddings=True,
    )
)
register_scheme(
    ModelScheme(
        "rope",
        "queries and keys",
        6,
        "rotary embedding, optionally scaled",
        shared=lambda c: RotaryEmbedding(
            c.head_dim,
            base=c.rope_base,
            max_positions=c.max_positions,
            scaling=c.rope_scaling,
        ),
        layer=lambda c, shared: RotaryScheme(shared),
        options=("rope_base", "rope_scaling", "max_positions"),
    )
)
register_scheme(
    ModelScheme(
        "alibi",
        "scores",
        7,
        "linear biases",
        shared=lambda c: ALiBiBias(c.num_heads, c.alibi_slope_scale),
        layer=lambda c, shared: ALiBiScheme(shared),
        options=("alibi_slope_scale",),
    )
)
register_scheme(
    ModelScheme(
        "t5",
        "scores",
        8,
        "T5's bucketed bias, one table shared by the layers",
        # T5 computes its bias once and reuses it in every layer
        shared=lambda c: T5RelativeBias(
            c.num_heads,
            bidirectional=False,
            num_buckets=c.t5_buckets,
            max_distance=c.t5_max_distance,
        ),
        layer=lambda c, shared: T5BiasScheme(shared),
        options=("t5_buckets", "t5_max_distance"),
    )
)
register_scheme(
    ModelScheme(
        "shaw",
        "scores",
        8,
        "Shaw et al.'s clipped key embeddings, per layer",
        layer=lambda c, shared: ShawScheme(
            ShawRelativePosition(c.max_relative_position, c.head_dim)
        ),
        options=("max_relative_position",),
    )
)
register_scheme(
    ModelScheme(
        "cope",
        "scores",
        8,
        "contextual positions (CoPE), per layer",
        layer=lambda c, shared: CoPEScheme(
            ContextualPositionBias(c.cope_positions, c.head_dim)
        ),
        options=("cope_positions",),
    )
)
register_scheme(
    ModelScheme(
        "deberta",
        "scores",
        8,
        "DeBERTa's disentangled attention (c2p and p2c, or one: deberta_terms), "
        "clipped at max_relative_position, per layer",
        layer=lambda c, shared: DisentangledScheme(
            DisentangledRelativeBias(
                c.num_heads,
                c.head_dim,
                max_relative_positions=c.max_relative_position,
                terms=tuple(c.deberta_terms.split("+")),
            )
        ),
        options=("max_relative_position", "deberta_terms"),
        # the recorded study trained the eight above; a preset may list it
        studied=False,
    )
)


# chapters 11 and 12: RoPE's descendants, trained beside RoPE by the frontier preset


def _rotary(c, base: float, **options) -> RotaryEmbedding:
    return RotaryEmbedding(
        c.head_dim, base=base, max_positions=c.max_positions, **options
    )


register_scheme(
    ModelScheme(
        "rope-input",
        "embeddings",
        9,
        "rotary embedding applied once, to the token embeddings (the survey's "
        "absolute RoPE)",
        shared=lambda c: RotaryEmbedding(
            c.d_model, base=c.rope_base, max_positions=c.max_positions
        ),
        options=("rope_base", "max_positions"),
        absolute=True,
        rotates_input=True,
        studied=False,
    )
)
# the survey's layerwise absolute codes (chapter 9; chapter 4's A = I): a table of the head's width
# added to every head's queries and keys after projection, in every layer
register_scheme(
    ModelScheme(
        "learned-qk",
        "queries and keys",
        9,
        "a learned table added to every head's queries and keys after projection, "
        "in every layer (the survey's layerwise absolute code)",
        shared=lambda c: LearnedPositionalEmbedding(c.max_positions, c.head_dim),
        layer=lambda c, shared: QKTableScheme(shared),
        options=("max_positions",),
        max_length=lambda c: c.max_positions,
        studied=False,
    )
)
register_scheme(
    ModelScheme(
        "sinusoidal-qk",
        "queries and keys",
        9,
        "the sinusoidal table added to every head's queries and keys after "
        "projection, in every layer (the survey's fixed absolute code)",
        shared=lambda c: SinusoidalPositionalEmbedding(c.head_dim),
        layer=lambda c, shared: QKTableScheme(shared),
        studied=False,
    )
)
register_scheme(
    ModelScheme(
        "p-rope",
        "queries and keys",
        11,
        "RoPE with its slowest pairs never rotated (p-RoPE, Barbero et al.); "
        "rope_fraction of the pairs rotate",
        shared=lambda c: _rotary(
            c,
            c.rope_base,
            frequencies=p_rope_frequencies(
                c.head_dim, c.rope_fraction, base=c.rope_base
            ),
        ),
        layer=lambda c, shared: RotaryScheme(shared),
        options=("rope_base", "rope_fraction", "max_positions"),
        studied=False,
    )
)
register_scheme(
    ModelScheme(
        "irope",
        "queries and keys",
        12,
        "Llama 4's interleaved layers: RoPE in chunks of local_window keys; every "
        "global_every-th layer NoPE over all keys, its queries temperature-scaled "
        "with the floor temperature_floor (None: the chunk size)",
        shared=lambda c: _rotary(c, c.rope_base),
        layers=llama4_layers,
        options=(
            "rope_base",
            "max_positions",
            "local_window",
            "global_every",
            "temperature_floor",
            "irope_temperature",
            "irope_qk_norm",
            "irope_window",
        ),
        studied=False,
    )
)
register_scheme(
    ModelScheme(
        "local-global",
        "queries and keys",
        12,
        "Gemma 3's layers: a sliding window of local_window keys at base rope_base; "
        "every global_every-th layer over all keys at base global_rope_base",
        shared=lambda c: nn.ModuleDict(
            {"local": _rotary(c, c.rope_base), "global": _rotary(c, c.global_rope_base)}
        ),
        layers=gemma3_layers,
        options=(
            "rope_base",
            "global_rope_base",
            "max_positions",
            "local_window",
            "global_every",
        ),
        studied=False,
    )
)
