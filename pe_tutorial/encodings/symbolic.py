"""Symbolic derivations with sympy: from the sinusoidal shift matrix to RoPE (chapters 5 and 6).

Chapter 5 (``book/05_rotation_matrix``) *finds* the matrix ``M_k`` with
``PE(p + k) = M_k PE(p)`` for one (sin, cos) pair of the sinusoidal encoding
(Vaswani et al., 2017) by solving equations, then shows it is a rotation.
Chapter 6 (``book/06_rope``) proves the property RoPE is built on
(Su et al., 2021): rotating the query by ``m theta`` and the key by
``n theta`` leaves a score that depends on ``n - m`` only; and it builds the
long-term decay bound of RoFormer as an expression to plot.

Every function returns sympy objects. Claims are returned as *residuals*,
expressions that are zero exactly when the claim holds, so the tests and the
chapters check them with ``sympy.simplify(residual) == 0``.
"""

from __future__ import annotations

import sympy as sp

__all__ = [
    "p",
    "k",
    "omega",
    "m",
    "n",
    "theta",
    "r",
    "sinusoid_pair",
    "shift_matrix_unknowns",
    "shift_matrix_equations",
    "derive_shift_matrix",
    "shift_matrix_residual",
    "rotation_residuals",
    "rotation_2d",
    "rope_score_2d",
    "rope_relative_residual_2d",
    "rope_shift_residual_2d",
    "rope_block_matrix",
    "rope_block_residual",
    "rope_complex_residual_2d",
    "abel_summation_residual",
    "rope_decay_bound",
]

# position, offset and angular frequency of chapter 5
p, k = sp.symbols("p k", integer=True)
omega = sp.symbols("omega", positive=True)
# query position, key position and a frequency of chapter 6; r is a relative distance
m, n = sp.symbols("m n", integer=True)
theta = sp.symbols("theta", positive=True)
r = sp.symbols("r", real=True)


# ---------------------------------------------------------------------------
# chapter 5: the shift matrix of the sinusoidal encoding, found by solving
# ---------------------------------------------------------------------------


def sinusoid_pair(position: sp.Expr, frequency: sp.Expr = omega) -> sp.Matrix:
    """One (sin, cos) pair of the sinusoidal encoding: ``PE(p) = [sin(p w), cos(p w)]^T`` (chapter 5)."""
    return sp.Matrix([sp.sin(position * frequency), sp.cos(position * frequency)])


def shift_matrix_unknowns() -> sp.Matrix:
    """A general 2x2 matrix of unknowns ``[[a, b], [c, d]]``, the candidate ``M_k`` (chapter 5)."""
    return sp.Matrix(2, 2, sp.symbols("a b c d"))


def shift_matrix_equations() -> list[sp.Eq]:
    """The equations ``M_k`` must satisfy: ``PE(p + k) = M_k PE(p)`` at every p (ch. 5).

    Expand ``sin((p + k) w)`` and ``cos((p + k) w)`` with the angle-addition
    identities, subtract ``M PE(p)`` for the general matrix ``M`` of
    ``shift_matrix_unknowns``, and require the coefficients of ``sin(p w)``
    and of ``cos(p w)`` to vanish in both rows (they must, since the equation
    holds for every p and sin, cos are linearly independent functions of p).
    Four equations in a, b, c, d.
    """
    unknowns = shift_matrix_unknowns()
    # angle addition: sin(pw + kw) = sin(pw)cos(kw) + cos(pw)sin(kw), cos(...) likewise
    shifted = sinusoid_pair(p + k).applyfunc(lambda e: sp.expand_trig(sp.expand(e)))
    residual = shifted - unknowns * sinusoid_pair(p)
    s_p, c_p = sp.symbols("s_p c_p")  # stand-ins for sin(p w) and cos(p w)
    equations = []
    for row in residual:
        row = sp.expand(row.subs({sp.sin(p * omega): s_p, sp.cos(p * omega): c_p}))
        poly = sp.Poly(row, s_p, c_p)
        for basis in (s_p, c_p):
            equations.append(sp.Eq(poly.coeff_monomial(basis), 0))
    return equations


def derive_shift_matrix() -> sp.Matrix:
    """Solve ``shift_matrix_equations`` for a, b, c, d: the shift matrix ``M_k`` (chapter 5).

    The solution is ``[[cos(k w), sin(k w)], [-sin(k w), cos(k w)]]``, the same
    block ``absolute.sinusoidal_shift_matrix`` builds for every frequency.
    """
    unknowns = shift_matrix_unknowns()
    solution = sp.solve(shift_matrix_equations(), list(unknowns), dict=True)
    if len(solution) != 1:
        raise RuntimeError(f"expected one solution for M_k, sympy found {solution}")
    return unknowns.subs(solution[0])


def shift_matrix_residual(matrix: sp.Matrix | None = None) -> sp.Matrix:
    """``PE(p + k) - M_k PE(p)``, zero for the derived ``M_k`` (chapter 5)."""
    matrix = derive_shift_matrix() if matrix is None else matrix
    return sinusoid_pair(p + k) - matrix * sinusoid_pair(p)


def rotation_residuals(matrix: sp.Matrix | None = None) -> dict[str, sp.Expr]:
    """Residuals of the three facts that make ``M_k`` a rotation (chapter 5); each simplifies to zero.

    - ``"orthogonal"``:  ``M_k^T M_k - I``  (lengths and angles are kept)
    - ``"determinant"``: ``det M_k - 1``    (no reflection)
    - ``"composition"``: ``M_a M_b - M_{a+b}`` (shifting by a then by b is shifting by a + b)

    ``matrix`` is ``M_k`` as an expression in ``k``; default ``derive_shift_matrix()``.
    """
    matrix = derive_shift_matrix() if matrix is None else matrix
    a, b = sp.symbols("a_shift b_shift", integer=True)
    return {
        "orthogonal": matrix.T * matrix - sp.eye(2),
        "determinant": matrix.det() - 1,
        "composition": matrix.subs(k, a) * matrix.subs(k, b) - matrix.subs(k, a + b),
    }


# ---------------------------------------------------------------------------
# chapter 6: the RoPE property
# ---------------------------------------------------------------------------


def rotation_2d(angle: sp.Expr) -> sp.Matrix:
    """The counter-clockwise rotation ``R(phi) = [[cos phi, -sin phi], [sin phi, cos phi]]`` (chapter 6)."""
    return sp.Matrix([[sp.cos(angle), -sp.sin(angle)], [sp.sin(angle), sp.cos(angle)]])


def _vector(name: str, size: int) -> sp.Matrix:
    return sp.Matrix(sp.symbols(f"{name}_0:{size}", real=True))


def rope_score_2d() -> sp.Expr:
    """The RoPE score of one 2-D block: ``(R(m theta) q)^T (R(n theta) k)`` for symbolic q, k (chapter 6)."""
    q, key = _vector("q", 2), _vector("k", 2)
    return ((rotation_2d(m * theta) * q).T * (rotation_2d(n * theta) * key))[0, 0]


def rope_relative_residual_2d() -> sp.Expr:
    """``<R(m theta) q, R(n theta) k> - <q, R((n - m) theta) k>``: zero, so the score depends on n - m (chapter 6)."""
    q, key = _vector("q", 2), _vector("k", 2)
    relative = (q.T * rotation_2d((n - m) * theta) * key)[0, 0]
    return rope_score_2d() - relative


def rope_shift_residual_2d() -> sp.Expr:
    """``score(m + s, n + s) - score(m, n)``: zero, shifting both positions changes nothing (chapter 6)."""
    s = sp.symbols("s", integer=True)
    score = rope_score_2d()
    return score.subs({m: m + s, n: n + s}, simultaneous=True) - score


def rope_block_matrix(position: sp.Expr, num_pairs: int) -> sp.Matrix:
    """``R_{Theta, position}``: block diagonal of ``R(position theta_i)`` for symbolic ``theta_0 .. theta_{h-1}``.

    The interleaved layout of Su et al. (2021), eq. (15): pair i acts on
    channels ``(2i, 2i + 1)``. Shape ``(2 num_pairs, 2 num_pairs)`` (chapter 6).
    """
    thetas = sp.symbols(f"theta_0:{num_pairs}", positive=True)
    return sp.diag(*[rotation_2d(position * t) for t in thetas])


def rope_block_residual(num_pairs: int = 3) -> sp.Expr:
    """``(R_m q)^T (R_n k) - q^T R_{n-m} k`` for the block-diagonal matrix of several frequencies (chapter 6)."""
    dim = 2 * num_pairs
    q, key = _vector("q", dim), _vector("k", dim)
    score = (
        (rope_block_matrix(m, num_pairs) * q).T
        * (rope_block_matrix(n, num_pairs) * key)
    )[0, 0]
    relative = (q.T * rope_block_matrix(n - m, num_pairs) * key)[0, 0]
    return score - relative


def rope_complex_residual_2d() -> sp.Expr:
    """``score - Re[(q_0 + i q_1) conj(k_0 + i k_1) e^{i (m - n) theta}]``: the complex form (chapter 6).

    Reading a pair as a complex number, rotating by ``m theta`` is multiplying
    by ``e^{i m theta}``, and the real dot product of two pairs is
    ``Re[z conj(w)]``; the residual simplifies to zero.
    """
    q, key = _vector("q", 2), _vector("k", 2)
    zq = q[0] + sp.I * q[1]
    zk = key[0] + sp.I * key[1]
    complex_form = sp.re(
        sp.expand(zq * sp.conjugate(zk) * sp.exp(sp.I * (m - n) * theta), complex=True)
    )
    return rope_score_2d() - complex_form


# ---------------------------------------------------------------------------
# chapter 6: long-term decay
# ---------------------------------------------------------------------------


def abel_summation_residual(num_pairs: int = 4) -> sp.Expr:
    """Summation by parts behind the decay bound, as a residual that is zero (chapter 6).

    With ``e_i = exp(i r theta_i)``, ``S_j = e_0 + ... + e_{j-1}`` and
    ``h_{num_pairs} = 0``::

        sum_i h_i e_i = - sum_i S_{i+1} (h_{i+1} - h_i)

    hence ``|sum_i h_i e_i| <= max_i |h_{i+1} - h_i| * sum_j |S_j|``.
    """
    hs = list(sp.symbols(f"h_0:{num_pairs}")) + [sp.Integer(0)]
    thetas = sp.symbols(f"theta_0:{num_pairs}", positive=True)
    phases = [sp.exp(sp.I * r * t) for t in thetas]
    # S_0 .. S_h
    partial = [sum(phases[:j], sp.Integer(0)) for j in range(num_pairs + 1)]
    direct = sum(hs[i] * phases[i] for i in range(num_pairs))
    by_parts = -sum(partial[i + 1] * (hs[i + 1] - hs[i]) for i in range(num_pairs))
    return direct - by_parts


def rope_decay_bound(head_dim: int, base: float = 10000) -> sp.Expr:
    """RoFormer's relative upper bound ``(2/D) sum_{j=1}^{D/2} |sum_{i<j} e^{i r theta_i}|`` as a function of r.

    ``theta_i = base^{-2i/D}``, kept exact (rational powers of ``base``). It
    bounds the score of two tokens ``r`` positions apart up to the factor
    ``(D/2) max_i |h_{i+1} - h_i|`` (see ``abel_summation_residual``); Su et al.
    (2021), section 3.4.3, plot it to show that RoPE lets attention decay with
    distance. Turn it into a function with ``sympy.lambdify(r, expr, "numpy")``
    (chapter 6; ``rope.rope_decay_curve`` computes the same curve in torch).
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even integer, got {head_dim}")
    if not base > 0:
        raise ValueError(f"base must be positive, got {base}")
    half = head_dim // 2
    base = sp.nsimplify(base)
    thetas = [base ** sp.Rational(-2 * i, head_dim) for i in range(half)]
    magnitudes = []
    for j in range(1, half + 1):
        # |S_j| = sqrt((sum_{i<j} cos r theta_i)^2 + (sum_{i<j} sin r theta_i)^2), written real so it plots as real
        real_part = sum(sp.cos(r * t) for t in thetas[:j])
        imag_part = sum(sp.sin(r * t) for t in thetas[:j])
        magnitudes.append(sp.sqrt(real_part**2 + imag_part**2))
    return sum(magnitudes) / half
