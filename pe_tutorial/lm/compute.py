"""The compute of a training step, counted (chapter 9's equal-compute view).

Two schemes trained for the same number of steps have not had the same
compute: CoPE's gates, Shaw's key embeddings and DeBERTa's relative terms add
matrix products that NoPE, RoPE and ALiBi do not. ``step_flops`` counts the
floating-point operations of one training step (forward and backward) of the
byte model with torch's ``FlopCounterMode``, the counter the field uses: the
matrix products (``mm``, ``addmm``, ``bmm`` and fused attention), 2 per
multiply-add, which is what a step's cost grows with. Element-wise work (a
softmax, CoPE's cumulative sum, a rotation) is not counted, so a scheme whose
extra cost is element-wise looks as cheap as NoPE here and is not in time;
chapter 10 measures time.

On a CPU, PyTorch runs ``scaled_dot_product_attention`` through
``_scaled_dot_product_flash_attention_for_cpu``, which the counter does not
know; ``CPU_ATTENTION`` gives it the counter's formula for fused attention
(``4 B H T^2 d_h`` forward) and twice that for its backward, the products the
gradients need. (The counter's GPU formula adds the scores the fused kernel
recomputes in its backward; counted so, a fused model would look costlier
than the same attention written out as ``bmm``.) So fused attention and
written-out attention count alike, every query-key pair of them, the masked
half of a causal window included.

The counts are exact and the same on every machine. For a model without
position parameters they equal the closed form of ``tests/test_compute.py``:
three times the forward pass's ``2 B T`` times the weights of every linear
map (the tied output layer included), plus ``4 B H T^2 d_h`` of attention per
layer, three times.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.utils import flop_counter

from .._validation import require_positive_int
from .model import ByteTransformer, ModelConfig

__all__ = ["CPU_ATTENTION", "step_flops"]

_aten = torch.ops.aten


def _cpu_attention(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_attention_backward(
    grad_out, query, key, value, *args, out_shape=None, **kwargs
) -> int:
    # the gradients of Q, K, V and the scores: twice the forward's products
    return 2 * flop_counter.sdpa_flop_count(query, key, value)


# the CPU's fused attention, counted with the counter's formulas for the GPU's
CPU_ATTENTION = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_attention_backward,
}


def step_flops(config: ModelConfig, batch_size: int, seq_len: int) -> int:
    """FLOPs of one training step of a ``ByteTransformer(config)`` on ``batch_size``
    windows of ``seq_len`` bytes: forward, cross-entropy and backward, on the CPU.

    The weights are drawn afresh (the count does not depend on their values).
    """
    require_positive_int(batch_size, "batch_size")
    require_positive_int(seq_len, "seq_len")
    model = ByteTransformer(config)
    model.check_length(seq_len)
    tokens = torch.zeros(batch_size, seq_len + 1, dtype=torch.long)
    with flop_counter.FlopCounterMode(
        display=False, custom_mapping=CPU_ATTENTION
    ) as counter:
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
        )
        loss.backward()
    return int(counter.get_total_flops())
