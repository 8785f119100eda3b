"""The suites behind the timing cells of chapters 11 to 13: LongRoPE's switch
of lists (``longrope_switch``: a decoding step past the switch against the
recompute of the prefix it forces), latent attention's decoding
(``latent_decode``: absorbed against expanded) and M-RoPE's rotation
(``mrope_rotation``: three ids a token against RoPE's one).

Each builder takes a device and a dtype (and sizes, with defaults that are
small on the CPU and larger on a GPU) and returns the ``Plan`` to time.
"""

from __future__ import annotations

import torch

from ..attention.core import attend
from ..attention.latent_attention import LatentAttention
from ..encodings.mrope import apply_mrope, mrope_position_ids
from ..encodings.rope import RotaryEmbedding, apply_rope
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


def mrope_rotation(
    device: torch.device,
    dtype: torch.dtype,
    *,
    tokens: int | None = None,
) -> Plan:
    """A sequence's queries rotated by M-RoPE against RoPE (chapter 13).

    The same ``(8 heads, T, 128)`` queries: RoPE at positions ``0..T-1``, and
    M-RoPE (Qwen2-VL's sections of 16, 24 and 24 pairs) at the ``(t, h, w)`` ids
    of text, an image of ``T/2`` patches (``T/64`` rows of 32) and text. Both
    read the queries and write as many numbers; M-RoPE also reads three ids a
    token and picks each pair's angle from its section's axis. The suite checks
    first that M-RoPE at the ids of text alone is RoPE.
    """
    if tokens is None:
        tokens = 16384 if on_gpu(device) else 2048
    if tokens % 64:
        raise ValueError(
            f"tokens={tokens}: give a multiple of 64 (an image of T/64 rows)"
        )
    heads, head_dim = 8, 128
    torch.manual_seed(0)
    x = torch.randn(heads, tokens, head_dim, device=device, dtype=dtype)
    text_ids = mrope_position_ids([("text", tokens)]).to(device)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2)
    if not torch.allclose(apply_mrope(x, text_ids), apply_rope(x), **tol):
        raise AssertionError("M-RoPE at text ids differs from RoPE")
    quarter = tokens // 4
    segments = [("text", quarter), ("image", (tokens // 64, 32)), ("text", quarter)]
    ids = mrope_position_ids(segments).to(device)
    nbytes = 2 * x.numel() * x.element_size()
    shapes = {"queries": list(x.shape), "ids": list(ids.shape)}
    rows = (
        ("RoPE: one position a token", lambda: apply_rope(x)),
        ("M-RoPE: three ids a token (text, image, text)", lambda: apply_mrope(x, ids)),
    )
    cases = [
        Case(name, fn, shapes, dtype_name(dtype), nbytes, allocates=True)
        for name, fn in rows
    ]
    return Plan(
        cases, settings={"tokens": tokens, "heads": heads, "head_dim": head_dim}
    )


register(
    Suite(
        "mrope_rotation",
        "13",
        "M-RoPE's rotation against RoPE's",
        mrope_rotation,
        why="8 heads of 128 channels, 2048 tokens on a CPU (16384 on a GPU)",
        smoke={"tokens": 64},
    )
)
