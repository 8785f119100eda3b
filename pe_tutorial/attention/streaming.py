"""StreamingLLM's rolling KV cache with attention sinks, and gpt-oss's learned sinks (chapter 12).

Xiao et al. (2024, "Efficient Streaming Language Models with Attention
Sinks") decode an endless stream with a cache of fixed size ``C = sinks +
window``: the first ``sinks`` tokens (the *attention sinks*, on which trained
models park the attention they do not need) and the last ``window`` tokens;
everything in between is evicted. Positions are assigned *within the cache*:
keys are cached before their rotation and rotated at their slot, so once the
cache is full (query ``i >= C``)

- the query sits at cache position ``C - 1``;
- window key ``j`` (``i - window < j <= i``) at ``C - 1 - (i - j)``: its
  distance to the query stays ``i - j``;
- sink ``s`` at ``s``: a constant distance ``C - 1 - s``, however far the
  stream has gone.

Before the cache fills (``i < C``) query ``i`` sees ``0 .. i`` at their own
positions, ordinary causal attention. With ``sinks = 0`` this is the plain
sliding window ``i - window < j <= i``, which for a relative scheme (RoPE,
ALiBi, T5) is ``attend`` with ``local_global.sliding_window_mask``.

``RollingCache.attend`` computes this for every query of a whole sequence at
once (the model's reading of a stream, token by token, in one pass), and
``rolling_cache(model, window, sinks)`` makes every ``MultiHeadAttention`` of a
model attend so for the duration of a ``with`` block. Position enters only
through the scheme (its rotation and bias, evaluated at the cache positions),
so a scheme that adds positions to the *input* (an absolute table) cannot be
re-positioned and is refused.

gpt-oss (OpenAI, 2025) learns its sinks instead: a logit per head joins the
softmax's denominator and is then dropped (``learned_sink_softmax``), so a
query may give part of its attention to no key at all, the role StreamingLLM's
sink tokens play in a model trained without one.

This module imports ``core`` and ``position_scheme`` only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from .._validation import require_non_negative_int, require_positive_int
from .core import DEFAULT_KERNEL, Kernel, MultiHeadAttention, attend
from .position_scheme import NoPositionScheme, PositionScheme

__all__ = [
    "RollingCache",
    "check_cacheable",
    "rolling_cache",
    "learned_sink_softmax",
]

# at most this many queries read their caches in one call of ``attend``, and
# at most about this many elements go into one gathered cache of keys (or values)
_CHUNK_QUERIES = 256
_CHUNK_ELEMENTS = 2**24


def check_cacheable(scheme: PositionScheme) -> None:
    """Raise ``ValueError`` if ``scheme`` (or a scheme inside it) adds positions to the input.

    A rolling cache re-assigns positions inside attention (the rotation and the
    bias); an absolute table added to the input (``AbsoluteScheme``, any
    scheme that overrides ``add_to_input``) has already put them into the
    keys and values, where no cache slot can change them.
    """
    if not isinstance(scheme, PositionScheme):
        raise ValueError(
            f"a rolling cache attends with a PositionScheme, got {type(scheme).__name__}"
        )
    for module in scheme.modules():
        if (
            isinstance(module, PositionScheme)
            and type(module).add_to_input is not PositionScheme.add_to_input
        ):
            raise ValueError(
                f"{type(module).__name__} adds positions to the input, so the cached "
                "keys and values already hold their absolute positions and a rolling "
                "cache cannot re-assign them; use a scheme that enters attention "
                "only (RoPE, ALiBi, T5, NoPE)"
            )


@dataclass(frozen=True)
class RollingCache:
    """StreamingLLM's cache: the first ``sinks`` tokens and the last ``window`` (chapter 12).

    ``attend(q, k, v, scheme)`` gives every query ``i`` of a whole causal
    sequence its attention over the cache it would have when decoding token
    by token: ``0 .. i`` at their own positions while ``i < C = sinks +
    window``, then the sinks ``0 .. sinks - 1`` at cache positions ``0 ..
    sinks - 1`` and the window ``i - window + 1 .. i`` at ``sinks .. C - 1``,
    the query at ``C - 1`` (``kept(i)`` lists them). With ``sinks=0`` it is a
    sliding window of ``window`` keys.
    """

    window: int
    sinks: int = 0

    def __post_init__(self):
        require_positive_int(self.window, "window")
        require_non_negative_int(self.sinks, "sinks", "0: a plain sliding window")

    @property
    def size(self) -> int:
        """``C = sinks + window``, the keys a query sees once the cache is full."""
        return self.sinks + self.window

    def kept(self, i: int) -> list[int]:
        """The tokens in the cache when query ``i`` is read, in cache order (slot 0 first).

        ``[0 .. i]`` while ``i < C``; then ``[0 .. sinks - 1] + [i - window + 1 .. i]``.
        """
        require_non_negative_int(i, "i", "a token index")
        if i < self.size:
            return list(range(i + 1))
        return self._indices(torch.tensor([i]))[0].tolist()  # the layout attend uses

    def _indices(self, queries: torch.Tensor) -> torch.Tensor:
        """``(n, C)`` token index of every cache slot of each query ``i >= C``."""
        sinks = torch.arange(self.sinks, device=queries.device)
        recent = torch.arange(1 - self.window, 1, device=queries.device)
        return torch.cat(
            (sinks.expand(len(queries), -1), queries[:, None] + recent), dim=1
        )

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        scheme: PositionScheme | None = None,
        *,
        kernel: Kernel = DEFAULT_KERNEL,
    ) -> torch.Tensor:
        """Attention of every query over its rolling cache, ``(B, H, T, D)``.

        q, k, v are ``(B, H, T, D)`` of one whole sequence (unrotated; the
        scheme rotates them at their cache positions). Queries ``i < C``:
        ``attend(..., causal=True)`` over the first ``C`` positions. Queries
        ``i >= C``, in chunks: the ``C`` cached keys and values gathered into
        ``(B n, H, C, D)``, and ``attend(q_i, k_cache, v_cache, scheme,
        causal=True)`` with one query, which the scheme places at ``C - 1``.
        """
        scheme = NoPositionScheme() if scheme is None else scheme
        check_cacheable(scheme)
        _check_sequence(q, k, v)
        size, length = self.size, q.shape[-2]
        early = min(size, length)
        rows = [
            attend(
                q[:, :, :early],
                k[:, :, :early],
                v[:, :, :early],
                scheme,
                causal=True,
                kernel=kernel,
            )
        ]
        B, H, _, D = q.shape
        step = max(1, min(_CHUNK_QUERIES, _CHUNK_ELEMENTS // (B * H * size * D)))
        for start in range(size, length, step):
            queries = torch.arange(start, min(start + step, length), device=q.device)
            rows.append(self._attend_full(q, k, v, scheme, queries, kernel))
        return torch.cat(rows, dim=2)

    def _attend_full(self, q, k, v, scheme, queries, kernel) -> torch.Tensor:
        """Queries ``queries`` (all ``>= C``) over their full caches, ``(B, H, n, D)``."""
        B, H, _, D = q.shape
        n, size = len(queries), self.size
        index = self._indices(queries)  # (n, C)

        def gather(t: torch.Tensor) -> torch.Tensor:
            # (B, H, n, C, D) -> (B, n, H, C, D) -> (B n, H, C, D)
            return t[:, :, index].transpose(1, 2).reshape(B * n, H, size, t.shape[-1])

        # (B, H, n, D) -> (B, n, H, D) -> (B n, H, 1, D)
        q_rows = q[:, :, queries].transpose(1, 2).reshape(B * n, H, 1, D)
        out = attend(
            q_rows, gather(k), gather(v), scheme, causal=True, kernel=kernel
        )  # (B n, H, 1, Dv)
        return out.reshape(B, n, H, -1).transpose(1, 2)

    def __str__(self) -> str:
        return f"rolling cache: {self.sinks} sinks + a window of {self.window}"


def _check_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "RollingCache.attend needs q, k, v of shape (batch, heads, seq, "
            f"head_dim), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[:3] != k.shape[:3] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            "RollingCache.attend reads one whole sequence: q, k and v must share "
            "batch, heads and length (the cache is built from the keys before each "
            f"query), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )


@contextlib.contextmanager
def rolling_cache(
    model: nn.Module, window: int, sinks: int = 0
) -> Iterator[RollingCache]:
    """Every ``MultiHeadAttention`` in ``model`` attends through a ``RollingCache`` inside the block.

    ``with rolling_cache(model, window=256, sinks=4): logits = model(tokens)``
    reads each token with the cache StreamingLLM would hold when decoding it:
    every layer's, since each token's hidden states are computed with its own
    cache in the layers below (token-by-token decoding gives the same logits).
    The layers' previous attention is restored on leaving, also after an
    error. Refused, before anything changes: a model with an absolute table on
    its embeddings (an ``input_table``, as a ``ByteTransformer`` with the
    ``"learned"`` or ``"sinusoidal"`` scheme has), a layer whose scheme adds
    positions to its input (``check_cacheable``), a model without a
    ``MultiHeadAttention``.
    """
    cache = RollingCache(window, sinks)
    table = getattr(model, "input_table", None)
    if table is not None:
        raise ValueError(
            f"{type(model).__name__} adds an absolute position table to its token "
            f"embeddings ({type(table).__name__}), so every hidden state already "
            "holds its absolute position and a rolling cache cannot re-assign it; "
            "use a model whose positions enter attention only (rope, alibi, t5, nope)"
        )
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(
            f"{type(model).__name__} has no MultiHeadAttention layer for a rolling "
            "cache to act on"
        )
    for layer in layers:
        check_cacheable(layer.scheme)
    previous = [layer.cache for layer in layers]
    try:
        for layer in layers:
            layer.cache = cache
        yield cache
    finally:
        for layer, old in zip(layers, previous, strict=True):
            layer.cache = old


def learned_sink_softmax(
    scores: torch.Tensor, sink_logits: torch.Tensor
) -> torch.Tensor:
    """Attention probabilities with a learned sink per head (gpt-oss), ``scores.shape``.

    ``p_ij = exp(s_ij) / (exp(b_h) + sum_k exp(s_ik))``: head ``h``'s sink
    logit ``b_h`` joins the softmax over the keys as one more column, which is
    then dropped, so a row sums to ``1 - exp(b_h) / (...)`` < 1 and a query may
    attend to nothing (a row of ``-inf`` scores gets zeros). ``scores`` is
    ``(..., H, Tq, Tk)`` (scaled, with the mask as ``-inf``), ``sink_logits``
    ``(H,)``. This is transformers' gpt-oss ``eager_attention_forward``, whose
    ``module.sinks`` are the logits. Computed in float32 at least.
    """
    if scores.ndim < 3:
        raise ValueError(
            f"scores must be (..., heads, q_len, k_len), got {tuple(scores.shape)}"
        )
    if sink_logits.ndim != 1 or sink_logits.shape[0] != scores.shape[-3]:
        raise ValueError(
            f"sink_logits must hold one logit per head, shape ({scores.shape[-3]},), "
            f"got {tuple(sink_logits.shape)}"
        )
    dtype = torch.promote_types(scores.dtype, torch.float32)
    sinks = sink_logits.to(dtype)[:, None, None].expand(*scores.shape[:-1], 1)
    combined = torch.cat((scores.to(dtype), sinks), dim=-1)  # (..., H, Tq, Tk + 1)
    return torch.softmax(combined, dim=-1)[..., :-1]
