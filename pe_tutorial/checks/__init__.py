"""Checks for a learner's own implementations, with a diagnosis when they are wrong.

Each ``check_*`` takes a function with the same signature as the package's,
runs it on many inputs against the package (the tested reference), and
returns quietly when every output matches. When one does not, it raises an
``AssertionError`` that names the input, and, when the output matches one of
the usual mistakes, says which mistake it is and where to look. A result that
is not a ``torch.Tensor``, has the wrong shape or dtype, or was written into
the input is reported as such before any value is compared.

- chapters 4 and 5 (``checks.absolute``): ``check_sinusoidal(fn)`` for
  ``fn(num_positions, dim)`` like ``sinusoidal_encoding``;
  ``check_shift_matrix(fn)`` for ``fn(k, dim)`` like
  ``absolute.sinusoidal_shift_matrix``;
- chapter 6 (``checks.rope``): ``check_rope_frequencies(fn)`` for
  ``fn(head_dim, base=...)``; ``check_apply_rope(fn)`` for
  ``fn(x, positions=None, *, pairing=...)`` like ``rope.apply_rope``;
- chapter 7 (``checks.alibi``): ``check_alibi_slopes(fn)`` for
  ``fn(num_heads)``; ``check_alibi_bias(fn)`` for ``fn(num_heads, seq_len)``,
  the causal bias;
- chapter 8 (``checks.relative``): ``check_t5_bucket(fn)`` for
  ``fn(relative_position, *, bidirectional, num_buckets, max_distance)``;
  ``check_t5_bias(fn)`` for ``fn(table, seq_len)``, the bias a bucket table
  gives, gradients included;
- chapter 9 (``checks.rope_scaling``): ``check_scaled_frequencies(fn,
  method)`` for ``fn(head_dim, *, factor, base)``, position interpolation
  (``"linear"``) or the NTK-aware base (``"ntk"``);
- chapter 10 (``checks.performance``): ``check_rope_qk(fn)`` for
  ``fn(q, k, positions=None)``, RoPE on q and k with cos and sin computed
  once, within a budget of bytes written (``ROPE_QK_BUDGET`` copies of q and
  k, counted by ``pe_tutorial.memory.tensors_written``);
  ``check_alibi_score_mod(fn)`` for ``fn(num_heads)`` returning ALiBi's
  FlexAttention ``score_mod``; ``check_causal_block_mask(fn)`` for
  ``fn(seq_len)`` returning the causal ``BlockMask``;
- chapters 11 to 13 (``checks.long_context``): ``check_sliding_window_mask(fn)``
  and ``check_chunked_mask(fn)`` for ``fn(length, size)``, Gemma 3's window
  and Llama 4's chunks; ``check_mrope_position_ids(fn)`` for
  ``fn(text_before, rows, columns, text_after)``, Qwen2-VL's M-RoPE ids;
  ``check_yarn_attention_factor(fn)`` for ``fn(s)``, ``0.1 ln s + 1``.

Every check first requires the learner's own function: a value, a class or
``None`` is named in one line, and one of the package's own functions is
refused ("this is pe_tutorial's implementation, not yours");
``require_own_function(fn)`` is that guard alone, which the hidden tests call.
NaN or inf in an answer is reported with its index, like any wrong value.

The assignments in ``book/assignments`` use them as their public tests.
"""

from ._common import require_own_function
from .absolute import check_shift_matrix, check_sinusoidal
from .alibi import check_alibi_bias, check_alibi_slopes
from .long_context import (
    check_chunked_mask,
    check_mrope_position_ids,
    check_sliding_window_mask,
    check_yarn_attention_factor,
)
from .performance import check_alibi_score_mod, check_causal_block_mask, check_rope_qk
from .relative import check_t5_bias, check_t5_bucket
from .rope import check_apply_rope, check_rope_frequencies
from .rope_scaling import check_scaled_frequencies

__all__ = [
    "check_sinusoidal",
    "check_shift_matrix",
    "check_rope_frequencies",
    "check_apply_rope",
    "check_alibi_slopes",
    "check_alibi_bias",
    "check_t5_bucket",
    "check_t5_bias",
    "check_scaled_frequencies",
    "check_rope_qk",
    "check_alibi_score_mod",
    "check_causal_block_mask",
    "check_sliding_window_mask",
    "check_chunked_mask",
    "check_mrope_position_ids",
    "check_yarn_attention_factor",
    "require_own_function",
]
