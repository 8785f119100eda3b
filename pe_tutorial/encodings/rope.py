"""Rotary position embedding, RoPE (Su et al., 2021; RoFormer). Explained in ``book/06_rope``.

RoPE encodes position by *rotating* queries and keys instead of adding a
vector to the token embeddings. The channels of a head are grouped into
``head_dim / 2`` pairs; the pair ``i`` of the vector at position ``m`` is turned
by the angle ``m * theta_i`` with ``theta_i = base ** (-2i / head_dim)``::

    [y_a]   [cos(m theta_i)  -sin(m theta_i)] [x_a]
    [y_b] = [sin(m theta_i)   cos(m theta_i)] [x_b]

Because rotations compose, ``<R(m) q, R(n) k> = <q, R(n - m) k>``: the
attention score sees only the relative position ``n - m`` (chapter 5 derives
the rotation, ``pe_tutorial.encodings.symbolic`` proves the identity).

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

import torch
from torch import nn

from .._validation import (
    require_integer_tensor,
    require_positive_float,
    require_positive_int,
)
from .rope_core import (
    Pairing,
    angles_cos_sin,
    cacheable,
    check_pairing,
    check_rotary_dim,
    check_x,
    clear_frequency_cache,
    resolve_positions,
    rope_angles,
    rope_frequencies,
    rotate,
)
from .rope_scaling import LongRopeScaling, RopeScaling

__all__ = [
    "Pairing",
    "rope_frequencies",
    "rope_angles",
    "apply_rope",
    "clear_rope_caches",
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
    check_x(x)
    pairing = check_pairing(pairing)
    rotary_dim = check_rotary_dim(x.shape[-1], rotary_dim)
    cos, sin = _cos_sin(x, positions, rotary_dim, base)  # (..., T, R/2) each
    return rotate(x, cos, sin, pairing, rotary_dim)


def _cos_sin(
    x: torch.Tensor, positions: torch.Tensor | None, rotary_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(m theta_i) and sin(m theta_i) for ``apply_rope``, ``(..., T, R/2)`` each."""
    # tables up to 4 MiB each (32 kept); past that, computing them is amortised
    small = x.shape[-2] * rotary_dim <= 2**20
    if positions is None and small and cacheable(base):
        # 0 .. seq - 1: the same table for every call of this size
        return _arange_cos_sin(x.shape[-2], rotary_dim, base, x.device)
    return angles_cos_sin(resolve_positions(positions, x), rotary_dim, base)


@functools.lru_cache(maxsize=32)
def _arange_cos_sin(
    seq_len: int, rotary_dim: int, base: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of positions ``0 .. seq_len - 1``, kept for the next call."""
    positions = torch.arange(seq_len, device=device)
    return angles_cos_sin(positions, rotary_dim, base)


def clear_rope_caches() -> None:
    """Free the cos/sin tables and frequencies kept between calls (GPU memory too).

    ``apply_rope`` keeps the tables of positions ``0 .. T - 1`` for up to 32
    sizes (each at most 4 MiB) and the frequencies for 64 (head_dim, base,
    device) triples, so repeated calls skip recomputing them. They live until
    this is called or the process ends; call it after a benchmark sweep over
    many sizes, or before measuring GPU memory.
    """
    _arange_cos_sin.cache_clear()
    clear_frequency_cache()


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
    pairing = check_pairing(pairing)
    rotary_dim = check_rotary_dim(head_dim, rotary_dim)
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
    check_x(x)
    positions = resolve_positions(positions, x)
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
    check_x(x)
    pairing = check_pairing(pairing)
    head_dim = check_rotary_dim(x.shape[-1], None)
    positions = resolve_positions(positions, x)
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
    check_pairing(source)
    check_pairing(target)
    rotary_dim = check_rotary_dim(head_dim, rotary_dim)
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
    each call whose largest position reaches past the trained context, and a
    ``LongRopeScaling`` (chapter 11) switches each such call to its long list
    of factors (Phi-3's rotary embedding), its attention factor at every length.
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
        scaling: RopeScaling | LongRopeScaling | None = None,
        frequencies: torch.Tensor | None = None,
    ):
        super().__init__()
        self.rotary_dim = check_rotary_dim(head_dim, rotary_dim)
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
        self.pairing = check_pairing(pairing)
        if scaling is not None and not isinstance(
            scaling, RopeScaling | LongRopeScaling
        ):
            raise ValueError(
                "scaling must be a RopeScaling, a LongRopeScaling or None, got "
                f"{type(scaling).__name__}; e.g. RopeScaling('linear', factor=4.0)"
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
            # the frequencies of this call's length (dynamic NTK's, or LongRoPE's
            # long list) and their scale (1 for dynamic NTK)
            inv_freq, scale = self.scaling.frequencies(
                self.rotary_dim, base=self.base, seq_len=needed
            )
            angles = self._angles(positions, inv_freq.to(positions.device))
            return angles.cos() * scale, angles.sin() * scale
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
        check_x(x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x has head_dim {x.shape[-1]} but this RotaryEmbedding was built for {self.head_dim}"
            )
        self._check_device(x, "the inputs")
        positions = resolve_positions(positions, x)
        cos, sin = self.cos_sin(positions)  # (..., T, R/2)
        return rotate(x, cos, sin, self.pairing, self.rotary_dim)

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


def _check_nd(x: torch.Tensor, positions: torch.Tensor) -> int:
    """``apply_rope_nd``'s checks; the number of axes."""
    check_x(x)
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
    return n_axes


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
    n_axes = _check_nd(x, positions)
    chunks = x.split(x.shape[-1] // n_axes, dim=-1)  # n_axes x (..., T, D/n)
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
    check_rotary_dim(head_dim, None)
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
