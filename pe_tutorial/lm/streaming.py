"""The byte model read as a stream with StreamingLLM's rolling cache (chapter 12).

``rolling_cache_losses`` scores every target of the validation segments the
way ``scoring.length_losses`` does, but with each segment read in one pass
under ``attention.streaming.rolling_cache``: the target at position ``p`` is
predicted from the cache a token-by-token decoder would hold there, the first
``sinks`` bytes and the last ``window``, in every layer. The two tensors
share their layout, so they compare target by target.

Two equalities tie it to chapter 9's measurements (the tests check both):
with ``window >= S`` nothing is evicted and it is ``length_losses(model,
segments, [S])[S]``; with ``sinks = 0`` and a one-layer model it is
``window_reference_losses(model, segments, window, stride=1)`` for a relative
scheme. With two layers or more the second differs: a rolling cache keeps the
hidden states each token got from its own cache in the layers below, where
re-reading a window recomputes them from the window's bytes only.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attention.streaming import rolling_cache
from .scoring import check_segments, length_error, length_losses

__all__ = ["rolling_cache_losses"]


def rolling_cache_losses(
    model: nn.Module,
    segments: torch.Tensor,
    window: int,
    sinks: int = 0,
    *,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The loss in bits of every target read with a rolling cache, ``(K, S)`` float64.

    ``segments`` is ``(K, S + 1)`` (``windows.evaluation_segments``); each is read
    whole, in one pass, under ``rolling_cache(model, window, sinks)``, so entry
    ``[k, p]`` is

        -log2 P(segments[k, p + 1] | the cache at p: bytes 0 .. p for p < C,
                else bytes 0 .. sinks - 1 and p - window + 1 .. p),

    with ``C = sinks + window``: ``scoring.length_losses`` at length ``S``, read
    through the cache, in its layout. A model with an absolute table is
    refused (``rolling_cache``), as is a length the model cannot read
    (``scoring.length_error``).
    """
    _, span = check_segments(segments)
    with rolling_cache(model, window, sinks):
        losses = length_losses(
            model, segments, [span], batch_size=batch_size, device=device
        )[span]
    if losses is None:
        note = length_error(model, span)
        raise ValueError(f"the model cannot read segments of {span} bytes: {note}")
    return losses
