"""pe_tutorial: positional encodings for Transformers, from integers to RoPE.

The tested code behind the book "Positional Encoding, from Integers to RoPE".
The package is organised by layer; each folder imports only from the folders
listed above it:

- ``_validation``, ``devices``  argument checks; the device to run on and what it is
- ``encodings/``   each scheme's math: absolute tables, RoPE (core, scalings, bands,
                   fused and Triton kernels, 2-D mixed, M-RoPE, xPos), ALiBi, relative
                   biases (Shaw, T5, CoPE, DeBERTa, FIRE), randomised positions, sympy
- ``attention/``   attention and its kernels (naive, SDPA, Flex), one scheme adapter per
                   encoding, layer patterns, temperature, latent and linear attention
- ``pages/``       what the book's pages need: figures, interactive figures, ``glue``
- ``checks/``      assignment checks with diagnostic feedback (students import it)
- ``course/``      the assignments' public tests, written beside a student notebook
- ``lm/``          the byte language model, the scheme registry, data, training, findings
- ``experiments/`` chapter 9's presets, units, runner and CLI (``python -m
                   pe_tutorial.experiments``)
- ``benchmarks/``  the timing core and the named suites (``python -m
                   pe_tutorial.benchmarks``)
- ``results/``     recorded runs (timings per device, experiments), shipped as data

Everything the chapters and the README show is importable from ``pe_tutorial``
itself; each folder's ``__init__`` lists its modules.
"""

from .attention.core import (
    AttentionConfig,
    MultiHeadAttention,
    attend,
    attention_weights,
    causal_mask,
    dot_product_attention,
    flex_available,
    flex_block_mask,
    padding_mask,
)
from .attention.position_scheme import NoPositionScheme, PositionScheme
from .attention.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from .encodings import symbolic
from .encodings.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
    binary_encoding,
    integer_encoding,
    neighbour_distances,
    sinusoidal_at,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from .encodings.alibi import ALiBiBias, alibi_bias, alibi_slopes
from .encodings.disentangled import DisentangledRelativeBias, deberta_log_bucket
from .encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
    cope_positions,
    shaw_relative_scores,
    shaw_value_term,
    t5_relative_position_bucket,
)
from .encodings.rope import (
    Pairing,
    RotaryEmbedding,
    apply_rope,
    apply_rope_complex,
    apply_rope_matrix,
    apply_rope_nd,
    convert_pairing,
    grid_positions,
    pairing_permutation,
    rope_angles,
    rope_decay_curve,
    rope_frequencies,
    rope_matrix,
)
from .encodings.rope_scaling import RopeScaling, scaled_rope_frequencies

__version__ = "0.1.0"

__all__ = [
    "ALiBiBias",
    "ALiBiScheme",
    "AbsoluteScheme",
    "AttentionConfig",
    "CoPEScheme",
    "ContextualPositionBias",
    "DisentangledRelativeBias",
    "DisentangledScheme",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "NoPositionScheme",
    "Pairing",
    "PositionScheme",
    "RopeScaling",
    "RotaryEmbedding",
    "RotaryScheme",
    "ShawRelativePosition",
    "ShawScheme",
    "SinusoidalPositionalEmbedding",
    "T5BiasScheme",
    "T5RelativeBias",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "apply_rope_complex",
    "apply_rope_matrix",
    "apply_rope_nd",
    "attend",
    "attention_weights",
    "binary_encoding",
    "causal_mask",
    "convert_pairing",
    "cope_positions",
    "deberta_log_bucket",
    "dot_product_attention",
    "flex_available",
    "flex_block_mask",
    "grid_positions",
    "integer_encoding",
    "neighbour_distances",
    "padding_mask",
    "pairing_permutation",
    "rope_angles",
    "rope_decay_curve",
    "rope_frequencies",
    "rope_matrix",
    "scaled_rope_frequencies",
    "shaw_relative_scores",
    "shaw_value_term",
    "sinusoidal_at",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "symbolic",
    "t5_relative_position_bucket",
]
