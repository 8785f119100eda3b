"""A small decoder-only Transformer over bytes, with any position scheme (chapter 9).

``ByteTransformer`` reads bytes (a vocabulary of 256) and predicts the next
byte. Its attention is ``pe_tutorial.attention.core.MultiHeadAttention`` with one
of the schemes of ``pe_tutorial.lm.registry``, chosen by name; ``SCHEMES`` are
the ones chapter 9 trains:

====================  =====================================================
``"nope"``            no positions at all (causal masking only; chapter 1)
``"learned"``         a learned absolute table (GPT-2; chapter 4)
``"sinusoidal"``      the sinusoidal table (Vaswani et al.; chapter 4)
``"rope"``            rotary embedding (chapter 6), optionally scaled
``"alibi"``           linear biases (chapter 7)
``"t5"``              T5's bucketed bias, one table shared by the layers
``"shaw"``            Shaw et al.'s clipped key embeddings, per layer
``"cope"``            contextual positions (CoPE), per layer (chapter 8)
``"deberta"``         DeBERTa's disentangled attention, per layer (chapter 8;
                      registered, not in ``SCHEMES``)
``"rope-input"``      RoPE applied once, rotating the token embeddings: the
                      survey's absolute RoPE (chapter 9; not in ``SCHEMES``)
``"learned-qk"``      a learned table of the head's width added to every
                      head's queries and keys after projection, in every
                      layer: the survey's layerwise code (chapter 9)
``"sinusoidal-qk"``   the same with the sinusoidal table (chapter 9)
``"p-rope"``          RoPE with its slowest pairs never rotated (chapter 11)
``"irope"``           Llama 4's RoPE layers in chunks, every few a NoPE layer
                      with temperature-scaled queries (chapter 12)
``"local-global"``    Gemma 3's sliding-window layers at one RoPE base and
                      global layers at another (chapter 12)
====================  =====================================================

The last three are chapters 11 and 12's, trained by the ``frontier`` preset.

Two switches change the architecture around the scheme:

- ``norm="pre"``: ``x + f(LN(x))`` (GPT-2 and later); ``norm="post"``:
  ``LN(x + f(x))`` (the original Transformer).
- ``absolute="input"`` adds an absolute table once, to the token embeddings;
  ``absolute="every_layer"`` adds it to the input of every attention layer
  (to queries, keys and values, not to the residual stream).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace

import torch
from torch import nn
from torch.nn import functional as F

from .._validation import (
    require_fraction,
    require_positive_float,
    require_positive_int,
)
from ..attention.core import AttentionConfig, MultiHeadAttention
from ..attention.local_global import GEMMA3_BASES, WINDOW_KINDS
from ..attention.position_scheme import NoPositionScheme, PositionScheme
from ..attention.schemes import AbsoluteScheme
from ..encodings.absolute import LearnedPositionalEmbedding
from ..encodings.rope import RotaryEmbedding
from ..encodings.rope_bands import P_ROPE_FRACTION
from ..encodings.rope_scaling import RopeScaling
from .registry import check_options, registered, scheme_names

__all__ = ["SCHEMES", "ModelConfig", "ByteTransformer", "VOCAB_SIZE"]

VOCAB_SIZE = 256
# the schemes chapter 9 trains; any registered scheme can be built (registry.py)
SCHEMES: tuple[str, ...] = scheme_names(studied_only=True)
NORMS = ("pre", "post")
ABSOLUTE_PLACES = ("input", "every_layer")
DEBERTA_TERMS = ("c2p+p2c", "c2p", "p2c")


def _check_choice(value, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {choices}")
    return value


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and switches of a ``ByteTransformer``; checked when made.

    ``max_positions`` is the learned table's length (the training length);
    ``max_relative_position`` Shaw's clipping distance ``K``; ``cope_positions``
    the rows of CoPE's table; ``alibi_slope_scale`` multiplies ALiBi's slopes;
    ``deberta_terms`` DeBERTa's relative terms, ``"c2p+p2c"``, ``"c2p"`` or ``"p2c"``;
    ``rope_scaling`` a ``RopeScaling`` for RoPE.
    Chapters 11 and 12's schemes read the last eight: ``rope_fraction``, p-RoPE's
    share of rotating pairs (Barbero et al.'s 0.75); ``global_every``, every
    how many layers one is global (Llama 4: 4, Gemma 3: 6); ``local_window``,
    the local layers' window or chunk; ``global_rope_base``, the global
    layers' base (Gemma 3's 1 000 000, ``local_global.GEMMA3_BASES``);
    ``temperature_floor``, the floor of the query scale in ``"irope"``'s NoPE
    layers, None for the chunk size ``local_window`` (Llama 4's 8192 and 8192);
    ``irope_temperature`` switches that scale (off: its ablation),
    ``irope_qk_norm`` Llama 4's QK-norm after RoPE in ``"irope"``'s RoPE layers,
    and ``irope_window`` their window: ``"chunked"`` (Llama 4) or ``"sliding"``
    (with the scale off, Cohere's RNoPE-SWA: sliding-window RoPE layers and a
    NoPE layer over all keys).

    Which fields a scheme reads is its registry ``options``: ``rope_scaling``
    and ``temperature_floor``, None unless set, are refused for a scheme that
    does not read them (``registry.check_options``).
    """

    scheme: str = "rope"
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    mlp_ratio: int = 4
    max_positions: int = 64
    norm: str = "pre"
    absolute: str = "input"
    rope_base: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_relative_position: int = 16
    t5_buckets: int = 32
    t5_max_distance: int = 128
    cope_positions: int = 64
    alibi_slope_scale: float = 1.0
    deberta_terms: str = "c2p+p2c"
    rope_fraction: float = 0.75
    global_every: int = 4
    local_window: int = 32
    global_rope_base: float = GEMMA3_BASES["full_attention"]
    temperature_floor: int | None = None
    irope_temperature: bool = True
    irope_qk_norm: bool = False
    irope_window: str = "chunked"

    def __post_init__(self):
        registered(self.scheme)  # an unknown name lists the registered ones
        _check_choice(self.norm, "norm", NORMS)
        _check_choice(self.absolute, "absolute placement", ABSOLUTE_PLACES)
        for name in (
            "num_layers",
            "mlp_ratio",
            "max_positions",
            "global_every",
            "local_window",
        ):
            require_positive_int(getattr(self, name), name)
        if self.temperature_floor is not None:
            require_positive_int(self.temperature_floor, "temperature_floor")
        for name in ("rope_base", "global_rope_base", "alibi_slope_scale"):
            require_positive_float(getattr(self, name), name)
        require_fraction(self.rope_fraction, "rope_fraction", P_ROPE_FRACTION)
        _check_choice(self.deberta_terms, "deberta_terms", DEBERTA_TERMS)
        _check_choice(self.irope_window, "irope_window", WINDOW_KINDS)
        # checks d_model and num_heads
        AttentionConfig(self.d_model, self.num_heads)
        # a field None by default is a switch: set, it must be one the scheme reads
        check_options(
            self.scheme,
            [
                f.name
                for f in fields(self)
                if f.default is None and getattr(self, f.name) is not None
            ],
        )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.rope_scaling is not None:
            out["rope_scaling"] = asdict(self.rope_scaling)
        return out


class _SchemeFactory:
    """Builds each layer's scheme from the registry; a shared encoding is made once."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self.spec = registered(config.scheme)
        if self.spec.rotates_input and config.absolute != "input":
            raise ValueError(
                f"scheme {config.scheme!r} rotates the token embeddings once, at the "
                f"input; it has no table to add in every layer (absolute="
                f"{config.absolute!r}); use absolute='input'"
            )
        self.shared: nn.Module | None = self.spec.shared(config)

    def input_table(self) -> nn.Module | None:
        """The absolute table added once to the embeddings, or None."""
        if self.spec.absolute and self.config.absolute == "input":
            return self.shared
        return None

    def layer_schemes(self) -> list[PositionScheme]:
        """Every layer's scheme, first to last."""
        c = self.config
        if self.spec.layers is not None:
            schemes = self.spec.layers(c, self.shared)
            if len(schemes) != c.num_layers:
                raise ValueError(
                    f"scheme {c.scheme!r} built {len(schemes)} layers' schemes for "
                    f"a model of {c.num_layers} layers"
                )
        else:
            schemes = [self._layer_scheme() for _ in range(c.num_layers)]
        for scheme in schemes:
            if not isinstance(scheme, PositionScheme):
                raise TypeError(
                    f"scheme {c.scheme!r}: its layer hook returned an object of type "
                    f"{type(scheme).__name__}, not a PositionScheme; return an "
                    "instance of a subclass of pe.PositionScheme (its add_to_input, "
                    "rotate, bias or score_mod say how positions enter)"
                )
        return schemes

    def _layer_scheme(self) -> PositionScheme:
        if self.spec.absolute:
            if self.config.absolute == "input":
                return NoPositionScheme()
            return AbsoluteScheme(self.shared)
        return self.spec.layer(self.config, self.shared)


class _Block(nn.Module):
    def __init__(self, config: ModelConfig, scheme: PositionScheme):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.attention = MultiHeadAttention(
            AttentionConfig(config.d_model, config.num_heads, causal=True), scheme
        )
        self.norm1 = nn.LayerNorm(config.d_model)
        self.norm2 = nn.LayerNorm(config.d_model)
        hidden = config.mlp_ratio * config.d_model
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, hidden),
            nn.GELU(),
            nn.Linear(hidden, config.d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.mlp(x))


class ByteTransformer(nn.Module):
    """A decoder-only byte language model: ``forward(tokens) -> logits`` (chapter 9).

    ``tokens`` is an integer tensor ``(batch, seq)`` of byte values 0..255; the
    result is ``(batch, seq, 256)``, the logits for the byte after each one.
    Any length works except past a learned table, which raises ``ValueError``.
    The output layer shares the embedding's weights.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        factory = _SchemeFactory(config)
        self.embed = nn.Embedding(VOCAB_SIZE, config.d_model)
        self.input_table = factory.input_table()
        # RoPE once at the input rotates the embeddings instead of adding a table
        self.rotates_input = factory.spec.rotates_input
        # Vaswani et al. (section 3.4) multiply the embeddings by sqrt(d_model)
        # before adding the sinusoidal table, whose entries are of size 1;
        # without it the table drowns the tokens (chapter 2)
        scaled = factory.spec.scale_embeddings
        self.embed_scale = config.d_model**0.5 if scaled else 1.0
        self.blocks = nn.ModuleList(
            _Block(config, scheme) for scheme in factory.layer_schemes()
        )
        # pre-norm needs a last LayerNorm; post-norm blocks already end in one
        self.final_norm = (
            nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        )
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def check_length(self, seq_len: int) -> None:
        """Raise ``ValueError`` if this model cannot read ``seq_len`` bytes."""
        c = self.config
        longest = registered(c.scheme).max_length(c)
        if longest is not None and seq_len > longest:
            raise ValueError(
                f"a {c.scheme} position table of {longest} rows cannot encode "
                f"{seq_len} positions; it has no row past position "
                f"{longest - 1} (use a scheme that extrapolates, or a "
                "sequence of at most max_positions bytes)"
            )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                "tokens must be an integer tensor of shape (batch, seq), got "
                f"{tuple(tokens.shape)} of {tokens.dtype}"
            )
        self.check_length(tokens.shape[1])
        x = self.embed(tokens) * self.embed_scale  # (B, T, d)
        if self.input_table is not None:
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            if self.rotates_input:
                x = self.input_table(x, positions)  # each (B, t, :) rotated by t
            else:
                x = x + self.input_table(positions)  # (T, d) broadcast over B
        for block in self.blocks:
            x = block(x)
        # tied output layer: (B, T, d) @ (d, 256)
        return F.linear(self.final_norm(x), self.embed.weight)

    def set_rope_scaling(self, scaling: RopeScaling | None) -> None:
        """Give a trained RoPE model a context-extension scaling (or none), in place.

        Every layer shares one new ``RotaryEmbedding`` with the same base and
        the given scaling; the learned weights are untouched.
        """
        self._share_rotary("set_rope_scaling", scaling=scaling)
        self.config = replace(self.config, rope_scaling=scaling)

    def extend_learned_table(
        self,
        max_positions: int,
        new_rows: str = "copy",
        generator: torch.Generator | None = None,
    ) -> None:
        """Lengthen a learned model's table to ``max_positions`` rows, in place:
        the new rows copies of the trained ones, or ``"random"`` ones.

        See ``LearnedPositionalEmbedding.extend``; fine-tune on longer windows
        afterwards (chapter 9).
        """
        c = self.config
        if c.scheme != "learned":
            raise ValueError(
                f"extend_learned_table needs a learned-table model, not {c.scheme!r}"
            )
        tables = {
            id(m): m
            for m in self.modules()
            if isinstance(m, LearnedPositionalEmbedding)
        }
        for table in tables.values():  # the one table, shared by the layers that use it
            table.extend(max_positions, new_rows, generator)
        self.config = replace(c, max_positions=max_positions)

    def set_rope_frequencies(self, frequencies: torch.Tensor | None) -> None:
        """Give a trained RoPE model other frequencies (None: its own), in place.

        Like ``set_rope_scaling``: every layer shares one new ``RotaryEmbedding``
        with these ``(head_dim / 2,)`` frequencies; the learned weights are
        untouched (chapter 9's band ablation).
        """
        self._share_rotary("set_rope_frequencies", frequencies=frequencies)
        self.config = replace(self.config, rope_scaling=None)

    def _share_rotary(self, caller: str, **options) -> None:
        """Give every layer's ``RotaryScheme`` one new embedding with the model's base
        and length and these options (a scaling, or frequencies), on its device."""
        c = self.config
        if c.scheme != "rope":
            raise ValueError(f"{caller} needs a RoPE model, not {c.scheme!r}")
        rotary = RotaryEmbedding(
            c.head_dim, base=c.rope_base, max_positions=c.max_positions, **options
        ).to(self.embed.weight.device)
        for block in self.blocks:
            block.attention.scheme.encoding = rotary

    def named_position_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """The position scheme's parameters, by their names in ``named_parameters()``.

        They are the parameters of the modules the registry's entry builds for
        the scheme: the absolute table added at the input (``input_table``)
        and each layer's ``PositionScheme`` (its encoding: T5's one bias table,
        shared by the layers, Shaw's and CoPE's tables in every layer, DeBERTa's
        relative embeddings and their projections, a learned table added in
        every layer). Fixed encodings (sinusoidal, RoPE's frequencies, ALiBi's
        slopes) are buffers, so those schemes, like NoPE, have none. Each
        parameter comes once, however many layers share it.
        """
        owners = [("input_table", self.input_table)] + [
            (f"blocks.{i}.attention.scheme", block.attention.scheme)
            for i, block in enumerate(self.blocks)
        ]
        seen: set[int] = set()
        for prefix, module in owners:
            if module is None:
                continue
            for name, parameter in module.named_parameters(prefix=prefix):
                if id(parameter) not in seen:
                    seen.add(id(parameter))
                    yield name, parameter

    def position_parameters(self) -> list[nn.Parameter]:
        """The position scheme's parameters (``named_position_parameters``), in order.

        ``train`` gives them their own learning rate
        (``TrainConfig.position_lr_multiplier``).
        """
        return [parameter for _, parameter in self.named_position_parameters()]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
