"""Each scheme's math, the ground floor of the package (chapters 2-8 and 11).

Pure functions and small ``nn.Module``s that know nothing of attention:

- ``absolute``      integer, binary, sinusoidal and learned tables (chapters 2-4)
- ``diagnostics``   what an added encoding does to the embeddings (chapters 2-3), how
                    alike a table's rows are, how far apart sinusoidal codes lie (4)
- ``symbolic``      sympy derivations: the shift matrix, RoPE's relative property (5-6)
- ``positions``     query and relative positions shared by the biases and masks
- ``rope_core``     the production RoPE rotation every fast path shares
- ``rope``          rotary position embedding, both pairings, partial and n-D (chapter 6)
- ``rope_scaling``  context extension: linear, NTK, dynamic NTK, YaRN, Llama 3 (9, 11)
- ``rope_bands``    fast and slow pairs against the training length, p-RoPE (6, 11)
- ``quantisation``  RoPE's cos/sin tables and rotated q, k in int8 and fp8 (chapter 6)
- ``fused_rope``    RoPE on q and k together: cos/sin once, in place, compiled (chapter 10)
- ``rope_triton``   the Triton RoPE kernel (CUDA; tested in Triton's CPU interpreter)
- ``rope_mixed``, ``mrope``, ``xpos``  2-D mixed RoPE, Qwen2-VL's M-RoPE, xPos (chapter 13)
- ``alibi``         ALiBi slopes and biases (chapter 7)
- ``relative``      Shaw's clipped embeddings, T5's buckets, CoPE (chapter 8)
- ``disentangled``  DeBERTa's content-to-position and position-to-content terms (8)
- ``fire``, ``random_positions``  FIRE's learned bias, randomised positions (chapter 13)

Modules here import only ``pe_tutorial._validation``, ``pe_tutorial._lazy`` and each other.
"""

from .._lazy import submodules

# pe.encodings.symbolic (and any module not imported yet) loads on first use: sympy
# only when a derivation is asked for
__getattr__ = submodules(__name__, __path__)
