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
  (``"linear"``) or the NTK-aware base (``"ntk"``).

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
    "require_own_function",
]
