"""Rotary position embedding, RoPE (Su et al., 2021; RoFormer). Explained in ``book/06_rope``.

RoPE encodes position by *rotating* queries and keys instead of adding a
vector to the token embeddings. The channels of a head are grouped into
``head_dim / 2`` pairs; the pair ``i`` of the vector at position ``m`` is turned
by the angle ``m * theta_i`` with ``theta_i = base ** (-2i / head_dim)``::

    [y_a]   [cos(m theta_i)  -sin(m theta_i)] [x_a]
    [y_b] = [sin(m theta_i)   cos(m theta_i)] [x_b]

Because rotations compose, ``<R(m) q, R(n) k> = <q, R(n - m) k>``: the
attention score sees only the relative position ``n - m`` (chapter 5 derives
the rotation, ``pe_tutorial.symbolic`` proves the identity).

Two conventions decide which channels form a pair (``Pairing``):

- ``"half"``: ``(i, i + D/2)``, as in GPT-NeoX and LLaMA in Hugging Face form;
- ``"interleaved"``: ``(2i, 2i + 1)``, as in GPT-J and Meta's LLaMA code.

They are the same rotation up to a fixed permutation of the channels
(``pairing_permutation``), which is what checkpoint converters apply to the
rows of the query and key projections (``convert_pairing``).

Every function takes ``x`` of shape ``(..., seq, head_dim)`` (the book's layout
is ``(batch, heads, seq, head_dim)``) and integer positions broadcastable to
``(..., seq)``. Angles and trigonometry are computed in float32 whatever the
dtype of ``x``; results come back in ``x``'s dtype.
"""

from __future__ import annotations

import functools
from typing import Literal

import torch
from torch import nn

from ._validation import (
    require_even,
    require_integer_tensor,
    require_positive_float,
    require_positive_int,
)
from .absolute import sinusoidal_frequencies
from .rope_scaling import RopeScaling

__all__ = [
    "Pairing",
    "rope_frequencies",
    "rope_angles",
    "apply_rope",
    "rope_matrix",
    "apply_rope_matrix",
    "apply_rope_complex",
    "pairing_permutation",
    "convert_pairing",
    "RotaryEmbedding",
    "grid_positions",
    "apply_rope_nd",
    "rope_decay_curve",
]

Pairing = Literal["half", "interleaved"]  # (i, i + D/2) vs (2i, 2i + 1)
PAIRINGS: tuple[str, ...] = ("half", "interleaved")


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------


def _check_pairing(pairing: str) -> str:
    if pairing not in PAIRINGS:
        raise ValueError(
            f"pairing must be 'half' (pairs (i, i + D/2), GPT-NeoX / Hugging Face LLaMA) or "
            f"'interleaved' (pairs (2i, 2i + 1), GPT-J / Meta LLaMA), got {pairing!r}"
        )
    return pairing


def _check_rotary_dim(head_dim: int, rotary_dim: int | None) -> int:
    """Return the number of rotated channels: ``rotary_dim``, or all of ``head_dim`` when None."""
    require_positive_int(head_dim, "head_dim")
    require_even(
        head_dim, "head_dim", "for RoPE (each frequency rotates a pair of channels)"
    )
    if rotary_dim is None:
        return head_dim
    require_positive_int(rotary_dim, "rotary_dim")
    require_even(
        rotary_dim, "rotary_dim", "for RoPE (each frequency rotates a pair of channels)"
    )
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim={rotary_dim} is larger than head_dim={head_dim}; "
            "rotary_dim counts the rotated channels of one head, so use rotary_dim <= head_dim"
        )
    return rotary_dim


def _check_x(x: torch.Tensor, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor) or x.ndim < 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"{name} must be a tensor of shape (..., seq, head_dim), got {shape}"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor (queries or keys), "
            f"got dtype {x.dtype}"
        )


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target`` (cheaper than torch's)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _resolve_positions(
    positions: torch.Tensor | None, x: torch.Tensor, name: str = "x"
) -> torch.Tensor:
    """Default ``arange(seq)``; otherwise check that integer ``positions`` broadcast to ``x.shape[:-1]``."""
    target = tuple(x.shape[:-1])  # (..., T)
    if positions is None:
        return torch.arange(x.shape[-2], device=x.device)
    require_integer_tensor(positions)
    if not _broadcasts_to(tuple(positions.shape), target):
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to "
            f"{name}'s (..., seq) = {target}; "
            "give one position per token, e.g. torch.arange(seq_len) + offset, or (batch, 1, seq_len) "
            f"per-row positions for {name} of shape (batch, heads, seq_len, head_dim)"
        )
    return positions.to(x.device)


# ---------------------------------------------------------------------------
# frequencies and angles
# ---------------------------------------------------------------------------


def rope_frequencies(head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """RoPE frequencies ``theta_i = base ** (-2i / head_dim)`` for ``i < head_dim / 2``, float32 (chapter 6).

    These are exactly the frequencies of the sinusoidal table of chapter 4
    (``sinusoidal_frequencies``): RoPE rotates by the same angles that the
    sinusoidal encoding writes down. ``head_dim=8, base=10000`` gives
    ``[1, 0.1, 0.01, 0.001]``.
    """
    _check_rotary_dim(head_dim, None)
    require_positive_float(base, "base")
    return sinusoidal_frequencies(head_dim, base=base)


def rope_angles(
    positions: torch.Tensor, head_dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """Rotation angles ``positions[..., None] * theta``, float32, shape ``positions.shape + (head_dim/2,)``.

    ``positions`` are integers, cast to float32 here (exact below 2**24); the
    product is formed in float32 whatever dtype the queries have.
    """
    require_integer_tensor(positions)
    inv_freq = _frequencies_on(head_dim, base, positions.device)
    # angle_{m,i} = m * theta_i; the integer positions are promoted to float32
    return positions.unsqueeze(-1) * inv_freq  # (..., T, D/2)


@functools.lru_cache(maxsize=64)
def _cached_frequencies(
    head_dim: int, base: float, device: torch.device
) -> torch.Tensor:
    return rope_frequencies(head_dim, base=base).to(device)


def _cacheable(base) -> bool:
    """Whether a table for ``base`` may be kept: a plain number, and not while tracing."""
    return type(base) in (int, float) and not torch.compiler.is_compiling()


def _frequencies_on(head_dim: int, base: float, device: torch.device) -> torch.Tensor:
    """``rope_frequencies`` on ``device``, cached per (head_dim, base, device).

    Rebuilding the frequencies (a pow and two casts) on every call costs more
    than the rotation itself for a handful of tokens. Unhashable or odd
    arguments, and tracing under torch.compile, skip the cache.
    """
    if type(head_dim) is int and _cacheable(base):
        return _cached_frequencies(head_dim, base, device)
    return rope_frequencies(head_dim, base=base).to(device)


def _cos_sin(
    positions: torch.Tensor, rotary_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``rope_angles``, float32, ``positions.shape + (R/2,)``."""
    angles = rope_angles(positions, rotary_dim, base=base)
    return angles.cos(), angles.sin()


# ---------------------------------------------------------------------------
# the vectorised rotation
# ---------------------------------------------------------------------------


def _pair_views(
    x: torch.Tensor, pairing: str, rotary_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the channels ``a_i`` and ``b_i`` of the pairs, ``(..., T, R/2)``."""
    if pairing == "half":
        half = rotary_dim // 2
        return x[..., :half], x[..., half:rotary_dim]
    return x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]


def _rotate_into(
    out: torch.Tensor,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pairing: str,
    rotary_dim: int,
) -> None:
    """Write the first ``rotary_dim`` channels of ``x``, rotated, into ``out``.

    No autograd; ``out`` must not overlap ``x``. Four kernels and no
    temporaries when both are float32; otherwise the pairs are cast to
    float32 first.
    """
    x1, x2 = _pair_views(x, pairing, rotary_dim)
    o1, o2 = _pair_views(out, pairing, rotary_dim)
    if x.dtype == torch.float32 and out.dtype == torch.float32:
        # (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)
        torch.mul(x1, cos, out=o1).addcmul_(x2, sin, value=-1)
        torch.mul(x2, cos, out=o2).addcmul_(x1, sin)
        return
    a, b = x1.to(torch.float32), x2.to(torch.float32)
    o1.copy_((a * cos).addcmul_(b, sin, value=-1))
    o2.copy_((b * cos).addcmul_(a, sin))


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str, rotary_dim: int
) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` channels of ``x``; cos, sin ``(..., T, R/2)``."""
    needs_graph = torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    )
    # torch.compile and torch.func (vmap, grad) need ops without out=
    transformed = (
        torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()
    )
    if not needs_graph and not transformed:
        # written straight into the result: no float32 copy, no concatenation
        out = torch.empty_like(x)
        _rotate_into(out, x, cos, sin, pairing, rotary_dim)
        if rotary_dim < x.shape[-1]:
            # partial rotary: the rest passes through
            out[..., rotary_dim:].copy_(x[..., rotary_dim:])
        return out
    # the same arithmetic with out-of-place ops, which autograd and tracing follow
    x1, x2 = _pair_views(x.to(torch.float32), pairing, rotary_dim)
    y1 = (x1 * cos).addcmul(x2, sin, value=-1)
    y2 = (x2 * cos).addcmul(x1, sin)
    if pairing == "half":
        rotated = torch.cat((y1, y2), dim=-1)  # (..., T, R)
    else:
        # (..., T, R/2, 2) -> (..., T, R)
        rotated = torch.stack((y1, y2), dim=-1).flatten(-2)
    rotated = rotated.to(x.dtype)
    if rotary_dim == x.shape[-1]:
        return rotated
    # partial rotary: the rest passes through
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """Rotate queries or keys by their positions: RoPE (Su et al., 2021), chapter 6.

    For every pair ``(a, b)`` of channels (``pairing``) and frequency
    ``theta_i = base ** (-2i / rotary_dim)``::

        y_a = x_a cos(m theta_i) - x_b sin(m theta_i)
        y_b = x_a sin(m theta_i) + x_b cos(m theta_i)

    Args:
        x: ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
        positions: integer tensor broadcastable to ``(..., seq)``; default
            ``arange(seq)``. Use ``arange(seq) + offset`` when decoding with a
            KV cache and ``(batch, 1, seq)`` for per-row positions (left padding).
        base: the frequency base, > 0.
        pairing: ``"half"`` pairs ``(i, i + R/2)`` (GPT-NeoX, Hugging Face
            LLaMA); ``"interleaved"`` pairs ``(2i, 2i + 1)`` (GPT-J, Meta LLaMA).
        rotary_dim: rotate only the first ``rotary_dim`` channels and pass the
            rest through (partial rotary, as in GPT-NeoX and GPT-J); default all.

    Returns a tensor like ``x`` (same shape and dtype); the angles and the
    rotation are computed in float32. ``fused_rope.apply_rope_qk`` rotates
    queries and keys together, in place or compiled (chapter 10).
    """
    _check_x(x)
    pairing = _check_pairing(pairing)
    rotary_dim = _check_rotary_dim(x.shape[-1], rotary_dim)
    # tables up to 4 MiB each (32 kept); past that, computing them is amortised
    small = x.shape[-2] * rotary_dim <= 2**20
    if positions is None and small and _cacheable(base):
        # 0 .. seq - 1: the same table for every call of this size
        cos, sin = _arange_cos_sin(x.shape[-2], rotary_dim, base, x.device)
    else:
        positions = _resolve_positions(positions, x)
        cos, sin = _cos_sin(positions, rotary_dim, base)  # (..., T, R/2) each
    return _rotate(x, cos, sin, pairing, rotary_dim)


@functools.lru_cache(maxsize=32)
def _arange_cos_sin(
    seq_len: int, rotary_dim: int, base: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of positions ``0 .. seq_len - 1``, kept for the next call."""
    positions = torch.arange(seq_len, device=device)
    return _cos_sin(positions, rotary_dim, base)


# ---------------------------------------------------------------------------
# teaching versions: the explicit matrix and the complex numbers
# ---------------------------------------------------------------------------


def _pair_indices(rotary_dim: int, pairing: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Channel indices ``(a_i, b_i)`` of each pair: ``(i, i + R/2)`` or ``(2i, 2i + 1)``."""
    i = torch.arange(rotary_dim // 2)
    if pairing == "half":
        return i, i + rotary_dim // 2
    return 2 * i, 2 * i + 1


def rope_matrix(
    positions: torch.Tensor,
    head_dim: int,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """The rotation matrix ``R_m`` of RoPE for each position, ``positions.shape + (head_dim, head_dim)`` (chapter 6).

    ``R_m`` is block diagonal (after grouping each pair's channels together):
    the block of pair ``i`` is ``[[cos m theta_i, -sin m theta_i], [sin m theta_i, cos m theta_i]]``
    placed at rows and columns ``(a_i, b_i)``; channels past ``rotary_dim`` get
    the identity. ``apply_rope(x)[t] == R_{m_t} @ x[t]``. float32.
    """
    pairing = _check_pairing(pairing)
    rotary_dim = _check_rotary_dim(head_dim, rotary_dim)
    angles = rope_angles(positions, rotary_dim, base=base)  # (..., R/2)
    cos, sin = angles.cos(), angles.sin()
    matrix = torch.eye(head_dim, dtype=torch.float32, device=angles.device)
    matrix = matrix.expand(*positions.shape, head_dim, head_dim).clone()  # (..., D, D)
    a, b = _pair_indices(rotary_dim, pairing)
    matrix[..., a, a] = cos
    matrix[..., a, b] = -sin
    matrix[..., b, a] = sin
    matrix[..., b, b] = cos
    return matrix


def apply_rope_matrix(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
) -> torch.Tensor:
    """RoPE the slow, literal way: build ``R_m`` for every token and multiply, ``y_t = R_{m_t} x_t``.

    Costs about ``head_dim / 2`` times the arithmetic of ``apply_rope`` (a dense
    ``D x D`` product per token, mostly multiplying zeros); the book times it
    against the vectorised version (chapter 6). Returns a tensor like ``x``.
    """
    _check_x(x)
    positions = _resolve_positions(positions, x)
    # (..., T, D, D)
    matrices = rope_matrix(positions, x.shape[-1], base=base, pairing=pairing)
    y = (matrices @ x.to(torch.float32)[..., None]).squeeze(-1)  # (..., T, D)
    return y.to(x.dtype)


def apply_rope_complex(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
) -> torch.Tensor:
    """RoPE with complex numbers, as in Meta's LLaMA code: ``z_i * exp(i m theta_i)`` (chapter 6).

    Each pair ``(x_a, x_b)`` is read as the complex number ``z = x_a + i x_b``;
    multiplying by ``e^{i m theta}`` rotates it by ``m theta``. The default
    pairing is ``"half"``, like every function here; Meta's code uses
    ``"interleaved"``, the layout ``torch.view_as_complex`` reads without a
    copy. Returns a tensor like ``x``.
    """
    _check_x(x)
    pairing = _check_pairing(pairing)
    head_dim = _check_rotary_dim(x.shape[-1], None)
    positions = _resolve_positions(positions, x)
    angles = rope_angles(positions, head_dim, base=base)  # (..., T, D/2)
    # e^{i m theta_i}
    phase = torch.polar(torch.ones_like(angles), angles)  # complex64, (..., T, D/2)
    xf = x.to(torch.float32)
    if pairing == "interleaved":
        # (..., T, D/2)
        z = torch.view_as_complex(
            xf.reshape(*x.shape[:-1], head_dim // 2, 2).contiguous()
        )
        return torch.view_as_real(z * phase).flatten(-2).to(x.dtype)
    # (..., T, D/2)
    z = torch.complex(xf[..., : head_dim // 2], xf[..., head_dim // 2 :])
    rotated = z * phase
    return torch.cat((rotated.real, rotated.imag), dim=-1).to(x.dtype)


# ---------------------------------------------------------------------------
# converting between the two pairings
# ---------------------------------------------------------------------------


def pairing_permutation(
    head_dim: int, *, source: Pairing, target: Pairing, rotary_dim: int | None = None
) -> torch.Tensor:
    """The channel permutation ``perm`` with ``x_target = x_source[..., perm]`` (chapter 6).

    From ``"interleaved"`` to ``"half"`` it is ``[0, 2, 4, ..., 1, 3, 5, ...]``:
    the first channel of every pair moves to the first half, the second to the
    second half. Then ``apply_rope(x[..., perm], pairing=target) ==
    apply_rope(x, pairing=source)[..., perm]``. Channels past ``rotary_dim``
    stay where they are. Returns a LongTensor of shape ``(head_dim,)``.
    """
    _check_pairing(source)
    _check_pairing(target)
    rotary_dim = _check_rotary_dim(head_dim, rotary_dim)
    rest = torch.arange(rotary_dim, head_dim)
    if source == target:
        return torch.arange(head_dim)
    a, b = _pair_indices(rotary_dim, source)  # where pair i sits in the source layout
    if target == "half":
        # target channel i <- source a_i, target channel i + R/2 <- source b_i
        rotated = torch.cat((a, b))
    else:
        # target channel 2i <- source a_i, target channel 2i + 1 <- source b_i
        rotated = torch.stack((a, b), dim=-1).flatten()
    return torch.cat((rotated, rest))


def convert_pairing(
    weight: torch.Tensor,
    *,
    head_dim: int,
    source: Pairing,
    target: Pairing,
    rotary_dim: int | None = None,
    dim: int = 0,
) -> torch.Tensor:
    """Permute a q or k projection trained with ``source`` pairing for ``target``.

    ``weight`` is an ``nn.Linear`` weight ``(num_heads * head_dim, d_model)``
    (or its bias, ``(num_heads * head_dim,)``); within every head its output
    rows are reordered by ``pairing_permutation``. This is the row permutation
    that checkpoint converters (Meta LLaMA to Hugging Face) apply to ``W_q``
    and ``W_k``; the attention scores are unchanged (chapter 6).
    """
    perm = pairing_permutation(
        head_dim, source=source, target=target, rotary_dim=rotary_dim
    )
    size = weight.shape[dim]
    if size % head_dim != 0:
        raise ValueError(
            f"weight has {size} rows along dim={dim}, not a multiple of "
            f"head_dim={head_dim}; "
            "pass the query or key projection, shaped (num_heads * head_dim, d_model)"
        )
    num_heads = size // head_dim
    # row h * D + j of the result <- row h * D + perm[j] of the source
    # (H * D,)
    index = (torch.arange(num_heads)[:, None] * head_dim + perm[None, :]).flatten()
    return weight.index_select(dim, index.to(weight.device))


# ---------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    """RoPE as a module: holds the frequencies and a cos/sin table, rotates like ``apply_rope`` (chapter 6).

    ``forward(x, positions=None)`` takes ``x`` of shape ``(..., seq, head_dim)``
    and integer positions broadcastable to ``(..., seq)`` (default
    ``arange(seq)``; ``arange(seq) + offset`` when decoding) and returns the
    rotated ``x`` in its dtype.

    The table is indexed by *position*, never by sequence length, and holds
    positions ``0 .. cached_positions - 1``. ``extend_to(n)`` is the one way it
    grows; ``cos_sin`` calls it (to at least twice the size) when a position
    lies past the end, so nothing is ever truncated. Negative positions are
    computed directly. Buffers are non-persistent, so the state dict stays
    empty and ``.to(device)`` moves them; they stay float32 when the module is
    cast to a lower precision. Positions and inputs on another device than the
    module raise ``ValueError`` (move the module once with ``.to(device)``).
    Checking the largest position reads it back from the device (a sync on GPU).

    ``scaling`` (a ``RopeScaling``, chapter 9) replaces the frequencies by a
    context-extension method's and multiplies cos and sin by its attention
    scale, as transformers does; "dynamic" recomputes the frequencies for
    each call whose largest position reaches past the trained context.
    ``frequencies`` (``(rotary_dim / 2,)``) gives the frequencies outright,
    for experiments that change some pairs only (``rope_bands``).
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: Pairing = "half",
        rotary_dim: int | None = None,
        max_positions: int = 2048,
        scaling: RopeScaling | None = None,
        frequencies: torch.Tensor | None = None,
    ):
        super().__init__()
        self.rotary_dim = _check_rotary_dim(head_dim, rotary_dim)
        if frequencies is not None:
            if scaling is not None:
                raise ValueError("give frequencies or a scaling, not both")
            if tuple(frequencies.shape) != (self.rotary_dim // 2,):
                raise ValueError(
                    f"frequencies must have shape ({self.rotary_dim // 2},), one per "
                    f"rotated pair, got {tuple(frequencies.shape)}"
                )
            frequencies = frequencies.detach().to(torch.float32).cpu().clone()
        self.explicit_frequencies = frequencies
        self.head_dim = head_dim
        self.base = require_positive_float(base, "base")
        self.pairing = _check_pairing(pairing)
        if scaling is not None and not isinstance(scaling, RopeScaling):
            raise ValueError(
                f"scaling must be a RopeScaling or None, got {type(scaling).__name__}; "
                "e.g. RopeScaling('linear', factor=4.0)"
            )
        self.scaling = scaling
        # the scaling's temperature, multiplied into cos and sin (1 without one)
        self.attention_scale = (
            1.0
            if scaling is None
            else scaling.frequencies(self.rotary_dim, base=base)[1]
        )
        require_positive_int(max_positions, "max_positions")
        half = self.rotary_dim // 2
        self.register_buffer("inv_freq", self._frequencies(), persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, half), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, half), persistent=False)
        self.extend_to(max_positions)

    def _frequencies(self, device: torch.device | str | None = None) -> torch.Tensor:
        """``theta_i = base ** (-2i / rotary_dim)``, or the scaling's or the given ones, float32."""
        if self.explicit_frequencies is not None:
            return self.explicit_frequencies.to(device)
        if self.scaling is None:
            return rope_frequencies(self.rotary_dim, base=self.base).to(device)
        inv_freq, _ = self.scaling.frequencies(self.rotary_dim, base=self.base)
        return inv_freq.to(device)

    @property
    def cached_positions(self) -> int:
        """How many positions (0, 1, ...) the cos/sin table holds now."""
        return self.cos_cached.shape[0]

    def extend_to(self, num_positions: int) -> None:
        """Make the table hold positions ``0 .. num_positions - 1``; it never shrinks."""
        require_positive_int(num_positions, "num_positions")
        if num_positions <= self.cached_positions:
            return
        self._build_table(num_positions)

    def _angles(
        self, positions: torch.Tensor, inv_freq: torch.Tensor | None = None
    ) -> torch.Tensor:
        # angle_{m,i} = m * theta_i, float32, positions.shape + (R/2,)
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        return positions.to(torch.float32)[..., None] * inv_freq

    def _build_table(self, num_positions: int) -> None:
        positions = torch.arange(num_positions, device=self.inv_freq.device)
        angles = self._angles(positions)  # (L, R/2)
        self.cos_cached = angles.cos() * self.attention_scale
        self.sin_cached = angles.sin() * self.attention_scale

    def _apply(self, fn, recurse=True):
        # .to(device) moves the buffers; a cast (.half()) must not lower their
        # precision, so they are rebuilt in float32 on whatever device they are now
        super()._apply(fn, recurse)
        if self.inv_freq.dtype != torch.float32:
            self.inv_freq = self._frequencies(self.inv_freq.device)
            self._build_table(self.cached_positions)
        return self

    def _check_device(self, tensor: torch.Tensor, what: str) -> None:
        if tensor.device != self.inv_freq.device:
            raise ValueError(
                f"{what} are on {tensor.device} but this RotaryEmbedding's table is on "
                f"{self.inv_freq.device}; move the module with .to({str(tensor.device)!r})"
            )

    def cos_sin(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the angles of integer ``positions``, each ``positions.shape + (rotary_dim/2,)``.

        float32, on the module's device, where ``positions`` must be too.
        """
        require_integer_tensor(positions)
        self._check_device(positions, "positions")
        if positions.numel() == 0:
            empty = positions.new_zeros(
                (*positions.shape, self.rotary_dim // 2), dtype=torch.float32
            )
            return empty, empty.clone()
        needed = int(positions.max()) + 1
        if self._dynamic_past_original(needed):
            # dynamic NTK: the frequencies of this length; its scale is always 1
            inv_freq, _ = self.scaling.frequencies(
                self.rotary_dim, base=self.base, seq_len=needed
            )
            angles = self._angles(positions, inv_freq.to(positions.device))
            return angles.cos(), angles.sin()
        if int(positions.min()) < 0:
            angles = self._angles(positions)
            scale = self.attention_scale
            return angles.cos() * scale, angles.sin() * scale
        if needed > self.cached_positions:
            self.extend_to(max(needed, 2 * self.cached_positions))
        return self.cos_cached[positions], self.sin_cached[positions]

    def _dynamic_past_original(self, num_positions: int) -> bool:
        scaling = self.scaling
        return (
            scaling is not None
            and scaling.depends_on_length
            and num_positions > scaling.original_max_positions
        )

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        _check_x(x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x has head_dim {x.shape[-1]} but this RotaryEmbedding was built for {self.head_dim}"
            )
        self._check_device(x, "the inputs")
        positions = _resolve_positions(positions, x)
        cos, sin = self.cos_sin(positions)  # (..., T, R/2)
        return _rotate(x, cos, sin, self.pairing, self.rotary_dim)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
            f"pairing={self.pairing!r}, cached_positions={self.cached_positions}"
            + ("" if self.scaling is None else f", scaling={self.scaling}")
        )


# ---------------------------------------------------------------------------
# n-D (axial) RoPE
# ---------------------------------------------------------------------------


def grid_positions(
    *sizes: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Integer coordinates of every cell of a grid, row-major: ``(prod(sizes), len(sizes))`` (chapter 6).

    ``grid_positions(2, 3)`` gives ``[[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]``:
    the (row, column) of each patch of a 2 x 3 image, in the order the patches
    are flattened into a sequence.
    """
    if not sizes:
        raise ValueError(
            "grid_positions needs at least one size, e.g. grid_positions(height, width)"
        )
    for axis, size in enumerate(sizes):
        require_positive_int(size, f"sizes[{axis}]")
    axes = [torch.arange(size, device=device) for size in sizes]
    grids = torch.meshgrid(*axes, indexing="ij")  # each (s_0, s_1, ...)
    return torch.stack([g.flatten() for g in grids], dim=-1)  # (N, n_axes)


def apply_rope_nd(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    base: float = 10000.0,
    pairing: Pairing = "half",
) -> torch.Tensor:
    """Axial RoPE for n-D positions (image patches, video); chapter 6, Heo et al. 2024.

    ``positions`` has shape ``(..., seq, n_axes)``: one integer coordinate per
    axis for every token (``grid_positions(height, width)`` for an image). The
    channels are split into ``n_axes`` equal chunks; chunk ``a`` is rotated by
    ``apply_rope`` with the coordinates along axis ``a``. The score of two
    tokens then depends only on their offset along every axis.
    ``head_dim`` must be divisible by ``2 * n_axes``. Returns a tensor like ``x``.
    """
    _check_x(x)
    require_integer_tensor(positions)
    if positions.ndim < 2:
        raise ValueError(
            "positions must have shape (..., seq, n_axes), got "
            f"{tuple(positions.shape)}; for one axis use apply_rope, for an image "
            "use grid_positions(height, width)"
        )
    n_axes = positions.shape[-1]
    head_dim = x.shape[-1]
    if head_dim % (2 * n_axes) != 0:
        raise ValueError(
            f"head_dim={head_dim} cannot be split into {n_axes} chunks of an even "
            "number of channels; "
            f"use a head_dim divisible by 2 * n_axes = {2 * n_axes}"
        )
    chunks = x.split(head_dim // n_axes, dim=-1)  # n_axes x (..., T, D/n)
    rotated = [
        apply_rope(c, positions[..., a], base=base, pairing=pairing)
        for a, c in enumerate(chunks)
    ]
    return torch.cat(rotated, dim=-1)


# ---------------------------------------------------------------------------
# long-term decay
# ---------------------------------------------------------------------------


def rope_decay_curve(
    distances: torch.Tensor, head_dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """The RoFormer long-term decay curve ``(2/D) sum_{j=1}^{D/2} |S_j(r)|`` for each relative distance r.

    ``S_j(r) = sum_{i<j} exp(i r theta_i)``. Summation by parts gives, for any
    query/key pair with ``h_i = (q_a + i q_b)(k_a - i k_b)`` per pair,
    ``|score(r)| <= max_i |h_{i+1} - h_i| * sum_j |S_j(r)|`` (``h_{D/2} = 0``),
    so this curve bounds how strongly far-apart tokens can interact
    (Su et al., 2021, section 3.4.3; ``symbolic.rope_decay_bound`` is the same
    expression in sympy). Computed in float64; shape ``distances.shape``.
    """
    _check_rotary_dim(head_dim, None)
    base = require_positive_float(base, "base")
    # theta_i = base^(-2i/D), here in float64: this curve is analysis, not a model's forward pass
    # (D/2,)
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    r = torch.as_tensor(distances, dtype=torch.float64)
    # S_j(r) for j = 1..D/2: cumulative sums of e^{i r theta_i}
    phases = torch.polar(
        torch.ones_like(r)[..., None] * torch.ones_like(theta), r[..., None] * theta
    )
    partial_sums = torch.cumsum(phases, dim=-1)  # (..., D/2)
    return partial_sums.abs().mean(dim=-1)
