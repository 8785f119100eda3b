"""How much attention a trained byte model parks on its first keys (chapter 12).

StreamingLLM's models put weight on the first tokens of their context
whatever those tokens hold (Xiao et al., 2024): the *attention sink*. Evict
those tokens from a rolling cache and the weight lands elsewhere. The probe
here asks a model for that habit directly. For the queries in the second half
of windows of ``T`` bytes, ``i = T/2 .. T-1``, and each layer ``l`` and head
``h``, the weight on the first ``k`` keys averaged over queries and windows,

    w_k[l, h] = mean_{windows, i} sum_{j < k} a[l, h, i, j],

beside the share those keys would get if every query spread its weight
evenly over the ``i + 1`` keys it sees,

    even_k = mean_i k / (i + 1).

A head with ``w_k`` well above ``even_k`` parks weight on the first keys; the
experiment runner reads it for every model it also reads through a rolling
cache (``Runner.sink_probe``), so a recorded streaming run carries it.
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import require_positive_int
from ..attention.temperature import attention_maps

__all__ = ["first_key_weights", "SINK_PROBE_KEYS"]

# the first key alone (a start token) and StreamingLLM's four sinks
SINK_PROBE_KEYS = (1, 4)


@torch.no_grad()
def first_key_weights(
    model: nn.Module,
    windows: torch.Tensor,
    keys: tuple[int, ...] = SINK_PROBE_KEYS,
    *,
    batch_size: int = 16,
) -> dict[str, dict]:
    """The weight on the first ``k`` keys, by layer and head, for each ``k`` of ``keys``.

    ``windows`` ``(K, T)`` byte ids (any integer type, as
    ``windows.evaluation_segments`` keeps them), each read as one context; the
    queries are positions ``T // 2`` to ``T - 1``. Returns ``{str(k): {"weight": [[w_k of
    each head] of each layer], "even": even_k}}`` (see the module docstring),
    floats rounded to 4 digits. The model is read in eval mode and left as it
    was.
    """
    if not isinstance(windows, torch.Tensor) or windows.dim() != 2:
        raise ValueError(
            "windows: give a (K, T) tensor of byte ids, one window per row; got "
            f"{getattr(windows, 'shape', type(windows).__name__)}"
        )
    T = windows.shape[1]
    for k in keys:
        require_positive_int(k, "a number of first keys")
        if k > T // 2:
            raise ValueError(
                f"keys: {k} first keys of windows of {T} bytes; the probe's "
                f"queries start at {T // 2}, so give at most {T // 2} keys or "
                "longer windows"
            )
    require_positive_int(batch_size, "batch_size")
    device = next(model.parameters()).device
    late = torch.arange(T // 2, T, device=device)
    sums = {k: 0.0 for k in keys}
    was_training = model.training
    model.eval()
    try:
        for batch in windows.split(batch_size):
            maps = attention_maps(model, batch.to(device).long())  # (l, b, h, T, T)
            rows = maps[..., late, :]  # the late queries
            for k in keys:
                # summed over keys < k and over the batch's windows and queries
                sums[k] = sums[k] + rows[..., :k].sum((-1, -2)).sum(1)
    finally:
        model.train(was_training)
    count = windows.shape[0] * len(late)
    return {
        str(k): {
            "weight": [
                [round(w, 4) for w in layer] for layer in (sums[k] / count).tolist()
            ],
            "even": round((k / (late + 1.0)).mean().item(), 4),
        }
        for k in keys
    }
