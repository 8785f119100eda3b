"""pe_tutorial: positional encodings for Transformers, from integers to RoPE.

The tested code behind the book "Positional Encoding, from Integers to RoPE".
The package is organised by layer; each folder imports only from the folders
listed above it:

- ``_validation``, ``devices``  argument checks; the device to run on and what it is
- ``_lazy``        submodules loaded on first use (the figures' and sympy's)
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

import importlib

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
from .attention.equivariance import (
    ConvolutionLayer,
    RecurrentLayer,
    SelfAttention,
    WordEmbedder,
    equivariance_gap,
    to_torch_multihead,
)
from .attention.latent_attention import LatentAttention, coupled_absorption_error
from .attention.layer_patterns import (
    LocalAttentionScheme,
    TemperedNoPEScheme,
    without_temperature,
)
from .attention.linear_attention import linear_attention
from .attention.local_global import layer_frequencies, layer_types, sliding_window_mask
from .attention.performer import performer_attention
from .attention.position_scheme import NoPositionScheme, PositionScheme
from .attention.rotated_cache import RotatedKeyCache
from .attention.schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)
from .attention.streaming import RollingCache, learned_sink_softmax, rolling_cache
from .attention.temperature import (
    QKNorm,
    attention_entropies,
    attention_maps,
    llama4_query_scale,
    logn_query_scale,
    rms_normalize,
)
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
    tensor2tensor_encoding,
)
from .encodings.alibi import ALiBiBias, alibi_bias, alibi_slopes
from .encodings.diagnostics import (
    cosine_similarity_matrix,
    mean_token_cosine,
    nearest_rows,
    norm_ratio,
    similarity_by_distance,
    sinusoidal_distance,
    sinusoidal_float32_error,
    trailing_ones,
    trend_and_rest,
)
from .encodings.disentangled import DisentangledRelativeBias, deberta_log_bucket
from .encodings.fire import FIREBias
from .encodings.fused_rope import apply_rope_qk, rope_cos_sin
from .encodings.mrope import apply_mrope, mrope_position_ids
from .encodings.positions import relative_positions
from .encodings.quantisation import (
    fake_quantise,
    quantised_rope_scores,
    score_error_profiles,
)
from .encodings.random_positions import random_positions
from .encodings.relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
    cope_positions,
    shaw_relative_indices,
    shaw_relative_scores,
    shaw_value_term,
    t5_relative_position_bucket,
    t5_untrained_share,
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
from .encodings.rope_bands import p_rope_frequencies, rope_wavelengths, slow_pairs
from .encodings.rope_mixed import MixedRoPE2d
from .encodings.rope_scaling import (
    SCALING_METHODS,
    LongRopeScaling,
    RopeScaling,
    longrope_attention_factor,
    longrope_frequencies,
    scaled_rope_frequencies,
    yarn_attention_factor,
)
from .encodings.rope_triton import triton_status
from .encodings.xpos import apply_xpos, xpos_decay
from .lm.compute import step_flops
from .lm.data import stdlib_corpus
from .lm.findings import (
    bootstrap_interval,
    compare,
    end_slope,
    find,
    language_entry,
    mean_at,
    paired_change,
    position_mean,
    reading_entry,
    scheme_rate,
    segment_interval,
    spread_rule_rates,
    train_gap,
)
from .lm.model import SCHEMES, ByteTransformer, ModelConfig
from .lm.registry import ModelScheme, register_scheme, unregister_scheme
from .lm.run_verdicts import (
    Family,
    entry_verdict,
    gain_verdict,
    length_verdict,
    phrase,
    run_verdict,
    scalar_verdict,
    scored_files,
    seed_segments,
    seed_values,
    verdict_tag,
)
from .lm.scoring import bits_per_byte
from .lm.sinks import first_key_weights
from .lm.streaming import rolling_cache_losses
from .lm.train import learning_rate_at, train
from .lm.verdicts import Verdict, holm, paired_verdict, verdict_family
from .lm.windows import random_windows, segment_files, target_reads
from .pages.glue import glue, have_myst_nb

__version__ = "0.1.0"


def _names_of(module: str, *names: str) -> dict[str, tuple[str, str]]:
    """``_LAZY``'s entries for ``names``, each read from ``module`` under its own name."""
    return {name: (module, name) for name in names}


# Loaded on first use (PEP 562): the two top floors, which a plain `import pe_tutorial`
# does not need, the figures (matplotlib; the interactive ones, Altair) and the sympy
# derivations. A process that only trains or times (a worker of --jobs, a grading) starts
# a second sooner without them.
_LAZY = {
    "symbolic": ("encodings.symbolic", None),
    "benchmarks": ("benchmarks", None),
    "experiments": ("experiments", None),
    "tuning": ("experiments.configuration.tuning", None),
    "interactive": ("pages.interactive", None),
    **_names_of("pages.equations", "equation_latex", "show_equation"),
    **_names_of("pages.mechanism_plots", "rope_scaling_ratios", "shift_arcs"),
    **_names_of(
        "pages.plots",
        "SCHEME_COLOURS",
        "FIGURE_WIDTH",
        "heatmap",
        "legend_below",
        "line_plot",
        "stacked_bars",
        "use_book_style",
    ),
    **_names_of("pages.prose", "SCHEME_NAMES", "scheme_list"),
    **_names_of("pages.records", "learned_table_record"),
    **_names_of(
        "pages.run_plots",
        "learning_curves",
        "length_curves",
        "passkey_grids",
        "position_curves",
        "rate_sweep",
        "sweep_grid",
    ),
    **_names_of(
        "experiments",
        "PRESETS",
        "format_rows",
        "join_seeds",
        "load_results",
        "run_experiments",
        "summarise",
    ),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'pe_tutorial' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    loaded = importlib.import_module(f".{module}", __name__)
    return loaded if attribute is None else getattr(loaded, attribute)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AbsoluteScheme",
    "alibi_bias",
    "alibi_slopes",
    "ALiBiBias",
    "ALiBiScheme",
    "apply_mrope",
    "apply_rope",
    "apply_rope_complex",
    "apply_rope_matrix",
    "apply_rope_nd",
    "apply_rope_qk",
    "apply_xpos",
    "attend",
    "attention",
    "attention_entropies",
    "attention_maps",
    "attention_weights",
    "AttentionConfig",
    "benchmarks",
    "binary_encoding",
    "bits_per_byte",
    "bootstrap_interval",
    "holm",
    "ByteTransformer",
    "causal_mask",
    "compare",
    "ContextualPositionBias",
    "convert_pairing",
    "ConvolutionLayer",
    "cope_positions",
    "CoPEScheme",
    "cosine_similarity_matrix",
    "coupled_absorption_error",
    "deberta_log_bucket",
    "devices",
    "DisentangledRelativeBias",
    "DisentangledScheme",
    "dot_product_attention",
    "end_slope",
    "encodings",
    "equivariance_gap",
    "experiments",
    "fake_quantise",
    "find",
    "FIREBias",
    "flex_available",
    "flex_block_mask",
    "format_rows",
    "glue",
    "grid_positions",
    "have_myst_nb",
    "FIGURE_WIDTH",
    "heatmap",
    "integer_encoding",
    "interactive",
    "language_entry",
    "reading_entry",
    "LatentAttention",
    "layer_frequencies",
    "layer_types",
    "learned_sink_softmax",
    "learned_table_record",
    "learning_rate_at",
    "LearnedPositionalEmbedding",
    "learning_curves",
    "legend_below",
    "length_curves",
    "line_plot",
    "linear_attention",
    "llama4_query_scale",
    "lm",
    "join_seeds",
    "load_results",
    "LocalAttentionScheme",
    "logn_query_scale",
    "longrope_attention_factor",
    "longrope_frequencies",
    "LongRopeScaling",
    "mean_at",
    "mean_token_cosine",
    "MixedRoPE2d",
    "ModelConfig",
    "ModelScheme",
    "mrope_position_ids",
    "MultiHeadAttention",
    "nearest_rows",
    "neighbour_distances",
    "NoPositionScheme",
    "norm_ratio",
    "p_rope_frequencies",
    "padding_mask",
    "pages",
    "paired_change",
    "paired_verdict",
    "Family",
    "entry_verdict",
    "equation_latex",
    "gain_verdict",
    "length_verdict",
    "phrase",
    "verdict_tag",
    "register_scheme",
    "run_verdict",
    "scalar_verdict",
    "scored_files",
    "seed_segments",
    "seed_values",
    "Pairing",
    "pairing_permutation",
    "passkey_grids",
    "performer_attention",
    "position_curves",
    "position_mean",
    "PositionScheme",
    "PRESETS",
    "QKNorm",
    "quantised_rope_scores",
    "random_positions",
    "random_windows",
    "rate_sweep",
    "RecurrentLayer",
    "relative_positions",
    "rms_normalize",
    "rolling_cache",
    "rolling_cache_losses",
    "first_key_weights",
    "RollingCache",
    "RotatedKeyCache",
    "rope_angles",
    "rope_cos_sin",
    "rope_decay_curve",
    "rope_frequencies",
    "rope_matrix",
    "rope_scaling_ratios",
    "rope_wavelengths",
    "RopeScaling",
    "RotaryEmbedding",
    "RotaryScheme",
    "run_experiments",
    "scaled_rope_frequencies",
    "SCALING_METHODS",
    "SCHEME_COLOURS",
    "SCHEME_NAMES",
    "scheme_list",
    "scheme_rate",
    "SCHEMES",
    "score_error_profiles",
    "segment_files",
    "step_flops",
    "segment_interval",
    "spread_rule_rates",
    "tuning",
    "SelfAttention",
    "shaw_relative_indices",
    "shaw_relative_scores",
    "shaw_value_term",
    "ShawRelativePosition",
    "ShawScheme",
    "shift_arcs",
    "show_equation",
    "similarity_by_distance",
    "trend_and_rest",
    "sinusoidal_at",
    "sinusoidal_distance",
    "sinusoidal_encoding",
    "tensor2tensor_encoding",
    "sinusoidal_float32_error",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEmbedding",
    "sliding_window_mask",
    "slow_pairs",
    "stacked_bars",
    "stdlib_corpus",
    "summarise",
    "sweep_grid",
    "symbolic",
    "t5_relative_position_bucket",
    "t5_untrained_share",
    "target_reads",
    "T5BiasScheme",
    "T5RelativeBias",
    "TemperedNoPEScheme",
    "unregister_scheme",
    "without_temperature",
    "to_torch_multihead",
    "trailing_ones",
    "train",
    "train_gap",
    "triton_status",
    "use_book_style",
    "WordEmbedder",
    "Verdict",
    "verdict_family",
    "xpos_decay",
    "yarn_attention_factor",
]
