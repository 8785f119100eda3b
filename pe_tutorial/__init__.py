"""pe_tutorial: positional encodings for Transformers, from integers to RoPE.

The tested code behind the book "Positional Encoding, from Integers to RoPE".
Every chapter imports what it runs from here; the modules are small and each
holds one idea:

- ``absolute``     integer, binary, sinusoidal and learned tables (chapters 2-4)
- ``symbolic``     sympy derivations: the shift matrix, RoPE's relative property (chapters 5-6)
- ``rope_core``    the production RoPE rotation that every fast path shares (checks, cos/sin)
- ``rope``         rotary position embedding, both pairings, partial and n-D (chapter 6)
- ``alibi``        ALiBi slopes and biases (chapter 7)
- ``relative``     Shaw clipped embeddings (keys and values), T5 buckets, contextual positions (chapter 8)
- ``disentangled`` relative embeddings projected into the score; DeBERTa's c2p and p2c (chapter 8)
- ``positions``    query and relative positions shared by ALiBi, the relative biases and masks
- ``position_scheme`` the base class of schemes: how an encoding enters attention (NoPE)
- ``schemes``      one adapter per encoding, wrapping that encoding's module (chapters 7-9)
- ``attention``    reference attention, masks, naive/SDPA/Flex kernels, the multi-head layer;
                   knows no encoding
- ``equivariance`` why attention needs positions, and why RNNs and convolutions do not
                   (chapter 1)
- ``diagnostics``  what an encoding does to the embeddings it is added to (chapters 2-3)
- ``attention_inputs`` the checks of attention's inputs that every kernel shares
- ``flex``         FlexAttention's plumbing: block masks, compile checks, the flex path
- ``devices``      the device to run on (``"auto"`` checked) and waiting for a GPU
- ``bench``        interleaved timing against a copy of the same bytes, the printed table
- ``benchmarks``   the timing suites (one per chapter, ``rope``, ``attention_bias``), their
                   CLI, recorded GPU runs shipped in ``results/``
- ``fused_rope``   RoPE on q and k together: cos/sin once, in place, compiled (chapter 10)
- ``rope_triton``  the Triton RoPE kernel (CUDA; tested in Triton's CPU interpreter)
- ``plots``        figure helpers the chapters share
- ``linear_attention`` linear attention with RoPE on the features (chapter 6)
- ``performer``    FAVOR+ random-feature attention, with RoPE before the features (chapter 6)
- ``rope_scaling`` RoPE context extension: linear, NTK, dynamic NTK, YaRN, Llama 3 (chapter 9)
- ``temperature``  attention entropy at long context, YaRN's factor, Llama 4's query scale
                   (chapter 11)
- ``mrope``        multimodal RoPE (Qwen2-VL): time, height and width sections (chapter 11)
- ``latent_attention`` DeepSeek's multi-head latent attention with decoupled RoPE (chapter 11)
- ``local_global`` Gemma 3's local and global layers, sliding window, two RoPE bases (chapter 11)
- ``rope_mixed``   2-D RoPE with learned mixed frequencies (RoPE-Mixed, chapter 11)
- ``xpos``, ``fire``, ``random_positions`` three more of RoPE's descendants (chapter 11)
- ``rope_bands``   RoPE's fast and slow pairs against the training length; band ablations;
                   p-RoPE's frequencies (chapter 6)
- ``registry``     every scheme a model can use, registered once (name, entry, modules)
- ``model``        a small byte-level Transformer taking any registered scheme (chapter 9)
- ``data``         the standard-library and Shakespeare byte corpora, scoring segments,
                   the look-back and passkey tasks (chapter 9)
- ``train``        seeded training, bits per byte at several lengths and by position
- ``experiments``  chapter 9's presets and CLI, resumable; ``results/`` holds recorded runs
- ``findings``     reading a recorded run: entries by name, gaps weighed against the seeds
- ``notebook``     ``glue`` that works with MyST-NB and without it (Colab)
- ``course``       the assignments' public tests, written beside a student notebook
- ``checks``       check a learner's sinusoidal table, RoPE, ALiBi slopes, T5 buckets and
                   RoPE scaling, with a diagnosis of the usual mistakes
"""

from . import symbolic
from .absolute import (
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
from .alibi import ALiBiBias, alibi_bias, alibi_slopes
from .attention import (
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
from .disentangled import DisentangledRelativeBias, deberta_log_bucket
from .position_scheme import NoPositionScheme, PositionScheme
from .relative import (
    ContextualPositionBias,
    ShawRelativePosition,
    T5RelativeBias,
    cope_positions,
    shaw_relative_scores,
    shaw_value_term,
    t5_relative_position_bucket,
)
from .rope import (
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
from .rope_scaling import RopeScaling, scaled_rope_frequencies
from .schemes import (
    AbsoluteScheme,
    ALiBiScheme,
    CoPEScheme,
    DisentangledScheme,
    RotaryScheme,
    ShawScheme,
    T5BiasScheme,
)

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
