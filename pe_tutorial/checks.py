"""Checks for a learner's own implementations, with a diagnosis when they are wrong.

Each ``check_*`` takes a function with the same signature as the package's,
runs it on many inputs against the package (the tested reference), and
returns quietly when every output matches. When one does not, it raises an
``AssertionError`` that names the input, and, when the output matches one of
the usual mistakes, says which mistake it is and where to look:

- ``check_sinusoidal(fn)``: ``fn(num_positions, dim)`` like
  ``sinusoidal_encoding`` (chapter 4);
- ``check_apply_rope(fn)``: ``fn(x, positions, *, pairing=...)`` like
  ``rope.apply_rope`` (chapter 6);
- ``check_alibi_slopes(fn)``: ``fn(num_heads)`` like ``alibi.alibi_slopes``
  (chapter 7);
- ``check_t5_bucket(fn)``: ``fn(relative_position, *, bidirectional,
  num_buckets, max_distance)`` like ``relative.t5_relative_position_bucket``
  (chapter 8);
- ``check_scaled_frequencies(fn, method)``: ``fn(head_dim, *, factor, base)``
  like ``rope_scaling.scaled_rope_frequencies(head_dim, method, ...)`` for
  position interpolation (``"linear"``) and NTK-aware scaling (``"ntk"``)
  (chapter 9).

The assignments in ``book/assignments`` use them as their public tests.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .absolute import sinusoidal_encoding
from .alibi import alibi_slopes
from .relative import t5_relative_position_bucket
from .rope import apply_rope, rope_angles, rope_frequencies
from .rope_scaling import scaled_rope_frequencies

__all__ = [
    "check_sinusoidal",
    "check_apply_rope",
    "check_alibi_slopes",
    "check_t5_bucket",
    "check_scaled_frequencies",
]


def _call(fn: Callable, what: str, *args, **kwargs):
    """Call the learner's function; turn an exception into a failed check."""
    try:
        out = fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (reported to the learner)
        raise AssertionError(
            f"{what} raised {type(error).__name__}: {error}"
        ) from error
    if not isinstance(out, torch.Tensor):
        try:
            out = torch.as_tensor(out)
        except (TypeError, ValueError, RuntimeError) as error:
            raise AssertionError(
                f"{what} returned {type(out).__name__}, not a tensor"
            ) from error
    return out


def _check_shape(out: torch.Tensor, shape: tuple, what: str) -> None:
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(
            f"{what} returned shape {tuple(out.shape)}, expected {tuple(shape)}"
        )


def _close(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.double(), b.double(), atol=atol, rtol=0
    )


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    diff = (got.double() - want.double()).abs()
    index = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
    return (
        f"the largest difference is at index {index}: got "
        f"{float(got[index]):.6g}, expected {float(want[index]):.6g}"
    )


def _diagnose(what, got, want, mistakes, atol) -> None:
    """Raise with the name of the first mistake ``got`` matches, or the worst entry."""
    for candidate, message in mistakes:
        if _close(got, candidate, atol):
            raise AssertionError(f"{what}: {message}")
    raise AssertionError(f"{what} is wrong; {_first_difference(got, want)}")


# ---------------------------------------------------------------------------
# chapter 4: the sinusoidal table
# ---------------------------------------------------------------------------


def _sinusoidal_variant(num_positions, dim, *, exponent, layout, swap=False):
    """Wrong tables the usual mistakes produce, from the same angles p * omega_i."""
    i = torch.arange(dim // 2, dtype=torch.float64)
    omega = 10000.0 ** (-exponent(i) / dim)
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * omega
    first, second = (
        (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    )
    if layout == "concatenated":
        return torch.cat((first, second), dim=-1)
    return torch.stack((first, second), dim=-1).flatten(-2)


def check_sinusoidal(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(num_positions, dim)`` against ``sinusoidal_encoding`` (chapter 4).

    ``PE[p, 2i] = sin(p omega_i)``, ``PE[p, 2i + 1] = cos(p omega_i)`` with
    ``omega_i = 10000 ** (-2i / dim)``.
    """
    for num_positions, dim in ((8, 4), (64, 16), (512, 64)):
        what = f"fn({num_positions}, {dim})"
        got = _call(fn, what, num_positions, dim)
        _check_shape(got, (num_positions, dim), what)
        want = sinusoidal_encoding(num_positions, dim)
        if _close(got, want, 1e-4):
            continue
        low_precision = got.dtype in (torch.float16, torch.bfloat16)
        # right near position 0, drifting further along: rounding, not a formula
        drifts = _close(got, want, 0.05) and _close(got[:8], want[:8], 1e-3)
        if low_precision or drifts:
            raise AssertionError(
                f"{what}: the values are close but not equal, and the error grows "
                f"with the position (dtype {got.dtype}): precision lost to a "
                "low-precision dtype; compute the angles p * omega_i in float32 "
                "(or float64) and only then convert"
            )

        def variant(n=num_positions, d=dim, **kw):
            return _sinusoidal_variant(n, d, **kw)

        def two_i(i):
            return 2 * i

        mistakes = [
            (
                variant(exponent=two_i, layout="concatenated"),
                "all sines come first and then all cosines (concatenated); the "
                "table interleaves them: column 2i is sin(p omega_i), column "
                "2i + 1 is cos(p omega_i)",
            ),
            (
                variant(exponent=two_i, layout="interleaved", swap=True),
                "sin and cos are swapped: column 2i is sin(p omega_i) and column "
                "2i + 1 is cos(p omega_i)",
            ),
            (
                variant(exponent=lambda i: i, layout="interleaved"),
                "the frequencies are off: omega_i = 10000 ** (-2i / dim), with the "
                "pair index i counted once per pair; yours look like 10000 ** "
                "(-i / dim)",
            ),
            (
                variant(exponent=lambda i: 4 * i, layout="interleaved"),
                "the frequencies are off: omega_i = 10000 ** (-2i / dim), where i "
                "runs over the dim / 2 pairs; yours look like 10000 ** (-4i / dim) "
                "(i counted per column, then doubled again?)",
            ),
        ]
        _diagnose(what, got, want, mistakes, 1e-4)


# ---------------------------------------------------------------------------
# chapter 6: RoPE
# ---------------------------------------------------------------------------


def _rope_mixed_angles(x, positions, pairing):
    """cos and sin taken from the wrong channels: repeat_interleave with half pairs."""
    angles = rope_angles(positions, x.shape[-1])  # (T, D/2)
    other = "interleaved" if pairing == "half" else "half"
    if other == "interleaved":
        full = angles.repeat_interleave(2, dim=-1)  # each pair's angle, adjacent
    else:
        full = torch.cat((angles, angles), dim=-1)  # each angle D/2 apart
    half = x.shape[-1] // 2
    if pairing == "half":
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    else:
        rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * full.cos() + rotated * full.sin()


def check_apply_rope(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, positions, *, pairing=...)`` against ``apply_rope`` (chapter 6).

    Runs both pairings (``"half"``: pairs ``(i, i + D/2)``; ``"interleaved"``:
    ``(2i, 2i + 1)``), positions with an offset, per-row positions, and a
    bfloat16 input at large positions (angles must be computed in float32).
    """
    generator = torch.Generator().manual_seed(0)
    cases = [
        ((1, 2, 6, 8), torch.arange(6)),
        ((2, 3, 5, 16), torch.arange(5) + 37),
        ((2, 1, 4, 8), torch.tensor([[[0, 1, 2, 3]], [[5, 6, 7, 8]]])),
    ]
    for pairing in ("half", "interleaved"):
        other = "interleaved" if pairing == "half" else "half"
        for shape, positions in cases:
            x = torch.randn(shape, generator=generator)
            what = f"fn(x of shape {shape}, positions, pairing={pairing!r})"
            got = _call(fn, what, x, positions, pairing=pairing)
            _check_shape(got, shape, what)
            want = apply_rope(x, positions, pairing=pairing)
            if _close(got, want, 1e-4):
                continue
            mistakes = [
                (
                    apply_rope(x, positions, pairing=other),
                    f"this is the {other!r} pairing; pairing={pairing!r} pairs "
                    + (
                        "channel i with i + D/2"
                        if pairing == "half"
                        else "channel 2i with 2i + 1"
                    ),
                ),
                (
                    apply_rope(x, -positions, pairing=pairing),
                    "the rotation turns the wrong way: the sign of sin is flipped "
                    "(y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos)",
                ),
                (
                    apply_rope(x, pairing=pairing),
                    "the positions were ignored: the rotation used 0, 1, 2, ... "
                    "instead of the positions given (an offset when decoding)",
                ),
                (
                    apply_rope(x, positions, pairing=pairing, base=10000.0**0.5),
                    "the frequencies are off: theta_i = base ** (-2i / D); yours "
                    "look like base ** (-i / D)",
                ),
                (
                    apply_rope(x, positions, pairing=pairing, base=10000.0**2),
                    "the frequencies are off: theta_i = base ** (-2i / D) with i "
                    "over the D / 2 pairs; yours look like base ** (-4i / D)",
                ),
                (
                    _rope_mixed_angles(x, positions, pairing),
                    "the two channels of a pair are turned by different angles: "
                    "cos and sin are laid out for the other pairing (repeat each "
                    "angle to match how you pair the channels)",
                ),
            ]
            _diagnose(what, got, want, mistakes, 1e-4)
    # precision: bfloat16 storage, positions in the thousands
    x = torch.randn(1, 1, 4, 8, generator=generator).to(torch.bfloat16)
    positions = torch.arange(4) + 5000
    what = "fn(x in bfloat16, positions 5000..5003)"
    got = _call(fn, what, x, positions, pairing="half")
    _check_shape(got, x.shape, what)
    want = apply_rope(x, positions, pairing="half")
    if got.dtype != torch.bfloat16:
        raise AssertionError(f"{what} returned {got.dtype}; return x's dtype")
    if not _close(got, want, 0.02):
        raise AssertionError(
            f"{what} is far from the reference ({_first_difference(got, want)}): "
            "precision lost to a low-precision dtype; compute the angles and the "
            "rotation in float32 and convert only the result back to bfloat16"
        )


# ---------------------------------------------------------------------------
# chapter 7: ALiBi slopes
# ---------------------------------------------------------------------------


def _geometric(num_heads: int, start: int) -> torch.Tensor:
    h = torch.arange(num_heads, dtype=torch.float64)
    return 2.0 ** (-8.0 * (h + start) / num_heads)


def check_alibi_slopes(fn: Callable[[int], torch.Tensor]) -> None:
    """Check ``fn(num_heads)`` against ``alibi_slopes`` (chapter 7).

    ``m_h = 2 ** (-8 (h + 1) / n)`` for n a power of two; otherwise the slopes
    of the largest power of two p below n, then every other slope of 2p.
    """
    powers, others = (1, 2, 4, 8, 16, 32), (3, 6, 12, 20, 24)
    for num_heads in powers + others:
        what = f"fn({num_heads})"
        got = _call(fn, what, num_heads)
        _check_shape(got, (num_heads,), what)
        want = alibi_slopes(num_heads)
        if _close(got, want, 1e-6):
            continue
        if num_heads in others and all(
            _close(_call(fn, f"fn({n})", n).reshape(-1), alibi_slopes(n), 1e-6)
            for n in powers
        ):
            raise AssertionError(
                f"{what}: right for powers of two, wrong for {num_heads} heads. "
                "Press et al. take the slopes of the largest power of two p below "
                "num_heads and append every other slope of the sequence for 2p "
                "heads (2 ** (-4 (2h + 1) / p))"
            )
        mistakes = [
            (
                _geometric(num_heads, 0),
                "the slopes are shifted by one head: the first is "
                "2 ** (-8 / num_heads), not 1 (h starts at 0 in 2 ** (-8 (h + 1) / n))",
            ),
            (
                _geometric(num_heads, 2),
                "the slopes are shifted by one head: the first is "
                "2 ** (-8 / num_heads), not 2 ** (-16 / num_heads)",
            ),
            (
                want.flip(0),
                "the slopes are in reverse order: head 0 has the steepest slope",
            ),
        ]
        _diagnose(what, got, want, mistakes, 1e-6)


# ---------------------------------------------------------------------------
# chapter 8: T5 buckets
# ---------------------------------------------------------------------------


def check_t5_bucket(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(relative_position, *, bidirectional, num_buckets, max_distance)``
    against ``t5_relative_position_bucket`` (chapter 8), with relative
    positions ``key - query`` from -300 to 300."""
    relative = torch.arange(-300, 301)
    for bidirectional in (True, False):
        for num_buckets, max_distance in ((32, 128), (8, 20)):
            options = dict(
                bidirectional=bidirectional,
                num_buckets=num_buckets,
                max_distance=max_distance,
            )
            what = f"fn(key - query in -300..300, {options})"
            got = _call(fn, what, relative, **options)
            _check_shape(got, relative.shape, what)
            want = t5_relative_position_bucket(relative, **options)
            if torch.equal(got.long(), want):
                continue
            got = got.long()
            if torch.equal(got, t5_relative_position_bucket(-relative, **options)):
                raise AssertionError(
                    f"{what}: the relative position is reversed; T5 buckets "
                    "key - query (memory_position - query_position), not "
                    "query - key"
                )
            n = relative.abs()
            near = n < num_buckets // (2 if bidirectional else 1) // 2
            if torch.equal(got[near], want[near]) and not torch.equal(
                got[~near], want[~near]
            ):
                far = int(relative[(got != want)][0])
                raise AssertionError(
                    f"{what}: the exact buckets are right but the logarithmic ones "
                    f"are not (first at key - query = {far}: got "
                    f"{int(got[relative == far][0])}, expected "
                    f"{int(want[relative == far][0])}); check the log formula, the "
                    "floor (not round) and the cap at the last bucket"
                )
            first = int(relative[got != want][0])
            raise AssertionError(
                f"{what} is wrong from key - query = {first}: got "
                f"{int(got[relative == first][0])}, expected "
                f"{int(want[relative == first][0])}"
            )


# ---------------------------------------------------------------------------
# chapter 9: context extension
# ---------------------------------------------------------------------------

_SCALINGS = {
    "linear": "position interpolation: theta_i / factor",
    "ntk": "NTK-aware: base * factor ** (D / (D - 2)) in place of base",
}


def check_scaled_frequencies(fn: Callable[..., torch.Tensor], method: str) -> None:
    """Check ``fn(head_dim, *, factor, base)`` against ``scaled_rope_frequencies``
    with ``method`` ``"linear"`` (position interpolation) or ``"ntk"``
    (NTK-aware base), chapter 9: inverse frequencies of shape ``(head_dim / 2,)``.
    """
    if method not in _SCALINGS:
        raise ValueError(f"method must be one of {sorted(_SCALINGS)}, got {method!r}")
    for head_dim, factor, base in (
        (8, 2.0, 10000.0),
        (64, 4.0, 10000.0),
        (128, 8.0, 5e5),
    ):
        what = f"fn({head_dim}, factor={factor}, base={base:g})"
        got = _call(fn, what, head_dim, factor=factor, base=base)
        _check_shape(got, (head_dim // 2,), what)
        want, _ = scaled_rope_frequencies(head_dim, method, factor=factor, base=base)
        # relative tolerance: the slowest frequencies are tiny
        if torch.allclose(got.double(), want.double(), rtol=1e-5, atol=0):
            continue
        plain = rope_frequencies(head_dim, base=base).double()
        i = torch.arange(head_dim // 2, dtype=torch.float64)
        mistakes = [
            (plain, "the factor is ignored: these are plain RoPE frequencies"),
            (
                plain * factor,
                "the frequencies are multiplied by the factor; to stretch the "
                "trained range they must turn slower, so divide",
            ),
            (
                (base * factor) ** (-2 * i / head_dim),
                "the base is multiplied by the factor itself; NTK-aware scaling "
                "uses factor ** (D / (D - 2)), so that the slowest pair turns "
                "exactly factor times slower",
            ),
            (
                plain / factor,
                "these are position-interpolation frequencies (theta_i / factor); "
                "NTK-aware scaling changes the base instead",
            ),
            (
                (base * factor ** (head_dim / (head_dim - 2))) ** (-2 * i / head_dim),
                "these are NTK-aware frequencies (a larger base); position "
                "interpolation divides every theta_i by the factor",
            ),
        ]
        for candidate, message in mistakes:
            if got.shape == candidate.shape and torch.allclose(
                got.double(), candidate, rtol=1e-5, atol=0
            ):
                raise AssertionError(f"{what}, {_SCALINGS[method]}: {message}")
        raise AssertionError(
            f"{what}, {_SCALINGS[method]}, is wrong; {_first_difference(got, want)}"
        )
