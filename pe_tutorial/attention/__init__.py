"""Attention, and how each encoding enters it (chapters 1 and 6-11).

- ``core``              reference attention, masks, naive/SDPA/Flex kernels, the
                        multi-head layer; knows no encoding
- ``inputs``            the checks of attention's inputs every kernel shares
- ``flex``              FlexAttention's plumbing: block masks, compile checks
- ``position_scheme``   the base class of schemes: how an encoding enters (NoPE)
- ``schemes``           one adapter per encoding: added at the input, rotating q
                        and k, or a bias on the scores (chapters 7-9)
- ``layer_patterns``    windows, chunks and NoPE layers among RoPE layers (chapter 12)
- ``local_global``      Gemma 3's local and global layers, two RoPE bases (chapter 12)
- ``temperature``       attention entropy at long context, YaRN's factor, Llama 4's
                        query scale (chapter 11)
- ``streaming``         StreamingLLM's rolling cache with attention sinks, the model-level
                        switch; gpt-oss's learned sinks (chapter 12)
- ``rotated_cache``     a decoder's cache of rotated keys; LongRoPE's switch to the
                        long list recomputed, refused or kept (Phi-3, chapter 11)
- ``latent_attention``  DeepSeek's latent attention with decoupled RoPE (chapter 12)
- ``linear_attention``, ``performer``  linear attention and FAVOR+ with RoPE (chapter 6)
- ``equivariance``      why attention needs positions, and why RNNs and convolutions
                        do not (chapter 1)

Modules here import from ``pe_tutorial.encodings`` and the root helpers only.
"""
