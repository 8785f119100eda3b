"""The suites behind the timing cells of chapters 11 and 12: LongRoPE's switch
of lists (``longrope_switch``: a decoding step past the switch against the
recompute of the prefix it forces) and latent attention's decoding
(``latent_decode``: absorbed against expanded).

Each builder takes a device and a dtype (and sizes, with defaults that are
small on the CPU and larger on a GPU) and returns the ``Plan`` to time.
"""

from __future__ import annotations

import torch

from ..attention.core import attend
from ..attention.latent_attention import LatentAttention
from ..encodings.rope import RotaryEmbedding
from ..encodings.rope_scaling import LongRopeScaling
from ._core import Plan, Suite, register
from .chapters import dtype_name, on_gpu
from .timing import Case


def latent_decode(
    device: torch.device,
    dtype: torch.dtype,
    *,
    cache_tokens: int | None = None,
) -> Plan:
    """One decoding step of latent attention over its cache, absorbed and expanded (chapter 12).

    Both read the cache of latents and shared rotated keys, ``T x (kv_rank +
    rope_dim)`` numbers: the bytes each row is compared with. Expanded, the
    step first makes every cached token's keys and values (what a plain cache
    would store); absorbed, it scores the latents as they are. The suite checks
    first that the two give the same output.
    """
    if cache_tokens is None:
        cache_tokens = 16384 if on_gpu(device) else 2048
    sizes = dict(q_rank=192, kv_rank=128, nope_dim=32, rope_dim=16, v_dim=32)
    torch.manual_seed(0)
    layer = LatentAttention(256, 8, **sizes).to(device=device, dtype=dtype).eval()
    x = torch.randn(1, cache_tokens, 256, device=device, dtype=dtype)
    with torch.no_grad():
        c, k_rope = layer.latents(x, torch.arange(cache_tokens, device=device))
    new = x[:, -1:]

    def step(absorbed):
        with torch.no_grad():
            return layer.decode(new, c, k_rope, absorbed=absorbed)

    if not torch.allclose(step(True), step(False), atol=1e-4, rtol=1e-3):
        raise AssertionError("absorbed and expanded decoding disagree")
    nbytes = (c.numel() + k_rope.numel()) * c.element_size()
    shapes = {"cache": [cache_tokens, layer.cache_size()]}
    cases = [
        Case(
            name,
            lambda absorbed=absorbed: step(absorbed),
            shapes,
            dtype_name(dtype),
            nbytes,
            allocates=True,
        )
        for name, absorbed in (
            ("absorbed: score the latents", True),
            ("expanded: keys and values first", False),
        )
    ]
    return Plan(cases, settings={"cache_tokens": cache_tokens, **sizes, "heads": 8})


register(
    Suite(
        "latent_decode",
        "12",
        "MLA decoding: absorbed against expanded",
        latent_decode,
        why="one new token against 2048 cached ones on a CPU (16384 on a GPU), 8 heads",
        smoke={"cache_tokens": 16},
    )
)


def longrope_switch(
    device: torch.device,
    dtype: torch.dtype,
    *,
    cache_tokens: int | None = None,
    heads: int = 8,
    head_dim: int = 96,
) -> Plan:
    """What a decoder pays at LongRoPE's switch from the short list to the long one (chapter 11).

    One head group of ``heads`` heads at Phi-3's head size, ``L = cache_tokens``
    tokens cached. A step past the switch that keeps its cache rotates one new
    query and key and attends over the L cached keys; transformers' Phi-3
    instead drops the cache once and encodes the prefix again (``"recompute"``
    of ``RotatedKeyCache``): every key rotated with the long list, then the
    whole prefix attended causally, a prefill. A third row rotates the L keys
    with the long list alone, the part of the recompute that a cache of
    unrotated keys would still have to do. The suite checks first that the
    new token's output is the same whether computed in the step or as the
    last row of the prefill. Bytes: the tensors each call reads and writes.
    """
    if cache_tokens is None:
        cache_tokens = 8192 if on_gpu(device) else 2048
    L = cache_tokens
    lists = ([1.0] * (head_dim // 2), [4.0] * (head_dim // 2))  # short, long
    scaling = LongRopeScaling(*lists, original_max_positions=L - 1, factor=4.0)
    rotary = RotaryEmbedding(head_dim, max_positions=L + 1, scaling=scaling)
    rotary = rotary.to(device)
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, heads, L + 1, head_dim, device=device, dtype=dtype)
    with torch.no_grad():
        cached = rotary(k[..., :L, :])  # the keys a cache holds, rotated when cached
    last = torch.tensor([L], device=device)

    def step():  # one new token against the L cached keys
        with torch.no_grad():
            q_new = rotary(q[..., L:, :], last)
            k_all = torch.cat([cached, rotary(k[..., L:, :], last)], dim=-2)
            return attend(q_new, k_all, v)

    def prefill():  # the cache dropped: L + 1 tokens encoded again, causally
        with torch.no_grad():
            return attend(rotary(q), rotary(k), v, causal=True)

    def rotate_keys():  # the L keys rotated again with the long list
        with torch.no_grad():
            return rotary(k[..., :L, :])

    if not torch.allclose(step()[..., -1, :], prefill()[..., -1, :], atol=1e-4):
        raise AssertionError("the decoding step and the prefill's last row disagree")
    element = q.element_size()
    one = heads * head_dim * element  # one token's q, k or v in a head group
    shapes = {"q, k, v": [1, heads, L + 1, head_dim]}
    rows = (
        ("step: 1 token against L cached", step, (3 + 2 * L + 1) * one),
        ("recompute: prefill of L + 1 tokens", prefill, 8 * (L + 1) * one),
        ("recompute: the L keys rotated only", rotate_keys, 2 * L * one),
    )
    cases = [
        Case(name, fn, shapes, dtype_name(dtype), nbytes, allocates=True)
        for name, fn, nbytes in rows
    ]
    return Plan(
        cases, settings={"cache_tokens": L, "heads": heads, "head_dim": head_dim}
    )


register(
    Suite(
        "longrope_switch",
        "11",
        "LongRoPE's switch: a step against a recompute",
        longrope_switch,
        why="Phi-3's head size, 8 heads, 2048 cached tokens on a CPU (8192 on a GPU)",
        smoke={"cache_tokens": 16},
    )
)
