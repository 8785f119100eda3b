"""pe_tutorial: positional encodings for Transformers, from integers to RoPE.

The tested code behind the book "Positional Encoding, from Integers to RoPE".
Every chapter imports what it runs from here; the modules are small and each
holds one idea:

- ``absolute``     integer, binary, sinusoidal and learned tables (chapters 2-4)
- ``attention``    reference scaled dot-product attention (chapter 1 on)
- ``equivariance`` why attention needs positions (chapter 1)
- ``bench``        timing with device metadata, bandwidth, recorded results
- ``plots``        figure helpers the chapters share
"""

from .absolute import (
    LearnedPositionalEmbedding,
    binary_encoding,
    integer_encoding,
    neighbour_distances,
    sinusoidal_at,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from .attention import attention_weights, dot_product_attention

__version__ = "0.1.0"

__all__ = [
    "LearnedPositionalEmbedding",
    "attention_weights",
    "binary_encoding",
    "dot_product_attention",
    "integer_encoding",
    "neighbour_distances",
    "sinusoidal_at",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
]
