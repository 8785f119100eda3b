"""Tests for pe_tutorial.encodings.symbolic: every residual simplifies to zero, wrong answers do not, numbers agree."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch

from pe_tutorial.encodings import symbolic
from pe_tutorial.encodings.absolute import (
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from pe_tutorial.encodings.rope import apply_rope, rope_decay_curve, rope_matrix
from pe_tutorial.encodings.symbolic import k, m, n, omega, p, r, theta


def is_zero(expr) -> bool:
    simplified = sp.simplify(expr)
    if isinstance(simplified, sp.MatrixBase):
        return simplified.is_zero_matrix is True
    return simplified == 0


# the answer chapter 5 must arrive at, typed in by hand
EXPECTED_M = sp.Matrix(
    [[sp.cos(k * omega), sp.sin(k * omega)], [-sp.sin(k * omega), sp.cos(k * omega)]]
)


# ---------------------------------------------------------------------------
# chapter 5: the shift matrix
# ---------------------------------------------------------------------------


def test_equations_are_four_linear_equations_in_the_unknowns():
    equations = symbolic.shift_matrix_equations()
    unknowns = list(symbolic.shift_matrix_unknowns())
    assert len(equations) == 4
    for equation in equations:
        assert isinstance(equation, sp.Equality)
        lhs = equation.lhs - equation.rhs
        # linear in a, b, c, d, with no p left: the dependence on p was matched away
        assert sp.Poly(lhs, *unknowns).total_degree() == 1
        assert p not in lhs.free_symbols


def test_equations_determine_the_matrix_uniquely():
    equations = symbolic.shift_matrix_equations()
    unknowns = list(symbolic.shift_matrix_unknowns())
    system, _ = sp.linear_eq_to_matrix([e.lhs - e.rhs for e in equations], unknowns)
    assert system.rank() == 4


def test_derived_matrix_is_the_expected_rotation():
    assert is_zero(symbolic.derive_shift_matrix() - EXPECTED_M)


def test_shift_residual_is_zero_and_detects_wrong_matrices():
    assert is_zero(symbolic.shift_matrix_residual())
    # the inverse rotation shifts by -k
    assert not is_zero(symbolic.shift_matrix_residual(EXPECTED_M.T))
    assert not is_zero(symbolic.shift_matrix_residual(sp.eye(2)))


def test_rotation_residuals_are_zero():
    residuals = symbolic.rotation_residuals()
    assert set(residuals) == {"orthogonal", "determinant", "composition"}
    for name, residual in residuals.items():
        assert is_zero(residual), name


def test_rotation_residuals_detect_a_non_rotation():
    # a reflection is orthogonal but has determinant -1, and a scaled rotation is not orthogonal
    reflection = sp.Matrix(
        [
            [sp.cos(k * omega), sp.sin(k * omega)],
            [sp.sin(k * omega), -sp.cos(k * omega)],
        ]
    )
    assert is_zero(symbolic.rotation_residuals(reflection)["orthogonal"])
    assert not is_zero(symbolic.rotation_residuals(reflection)["determinant"])
    scaled = symbolic.rotation_residuals(2 * EXPECTED_M)
    assert not is_zero(scaled["orthogonal"]) and not is_zero(scaled["composition"])


def test_derived_matrix_shifts_the_numeric_sinusoidal_table():
    dim, shift = 16, 5
    table = sinusoidal_encoding(64, dim).double()
    block = sp.lambdify((k, omega), symbolic.derive_shift_matrix(), "numpy")
    frequencies = sinusoidal_frequencies(dim).double().tolist()
    matrix = torch.block_diag(
        *[torch.tensor(block(shift, w), dtype=torch.float64) for w in frequencies]
    )
    torch.testing.assert_close(
        table[:-shift] @ matrix.T, table[shift:], rtol=0, atol=1e-5
    )
    torch.testing.assert_close(
        matrix.float(), sinusoidal_shift_matrix(shift, dim), rtol=0, atol=1e-6
    )


# ---------------------------------------------------------------------------
# chapter 6: the RoPE property
# ---------------------------------------------------------------------------


def test_rope_2d_score_depends_only_on_n_minus_m():
    assert is_zero(symbolic.rope_relative_residual_2d())
    assert is_zero(symbolic.rope_shift_residual_2d())
    score = symbolic.rope_score_2d()
    assert {m, n} <= score.free_symbols
    # the residual is not trivially zero: the wrong sign of the relative angle is caught
    q, key = (
        sp.Matrix(sp.symbols("q_0:2", real=True)),
        sp.Matrix(sp.symbols("k_0:2", real=True)),
    )
    wrong = score - (q.T * symbolic.rotation_2d((m - n) * theta) * key)[0, 0]
    assert not is_zero(wrong)


def test_rope_score_depends_on_both_positions_before_simplification_only():
    # with m - n fixed the score is constant: substitute n = m + d and m drops out
    d = sp.symbols("d", integer=True)
    simplified = sp.simplify(symbolic.rope_score_2d().subs(n, m + d))
    assert m not in simplified.free_symbols


@pytest.mark.parametrize("num_pairs", [1, 2])
def test_rope_block_diagonal_residual(num_pairs):
    assert is_zero(symbolic.rope_block_residual(num_pairs))


def test_rope_block_matrix_matches_rope_matrix_numerically():
    head_dim, position = 6, 7
    thetas = sp.symbols("theta_0:3", positive=True)
    values = {t: 10000.0 ** (-2 * i / head_dim) for i, t in enumerate(thetas)}
    symbolic_matrix = np.array(
        symbolic.rope_block_matrix(position, 3).subs(values).evalf(), dtype=float
    )
    numeric = (
        rope_matrix(torch.tensor(position), head_dim, pairing="interleaved")
        .double()
        .numpy()
    )
    np.testing.assert_allclose(numeric, symbolic_matrix, atol=1e-6)


def test_rope_complex_form_residual():
    assert is_zero(symbolic.rope_complex_residual_2d())


def test_rotation_2d_is_what_apply_rope_does():
    q0, q1 = 0.3, -1.2
    angle = 5 * 1.0  # position 5, theta_0 = 1
    expected = symbolic.rotation_2d(angle) * sp.Matrix([q0, q1])
    y = apply_rope(torch.tensor([[q0, q1]]), torch.tensor([5]))
    np.testing.assert_allclose(
        y.double().numpy()[0], np.array(expected.evalf(), dtype=float)[:, 0], atol=1e-6
    )


# ---------------------------------------------------------------------------
# chapter 6: long-term decay
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_pairs", [2, 4])
def test_abel_summation_residual(num_pairs):
    assert is_zero(symbolic.abel_summation_residual(num_pairs))


def test_decay_bound_expression():
    expr = symbolic.rope_decay_bound(8)
    assert expr.free_symbols == {r}
    assert expr.subs(r, 0) == sp.Rational(5, 2)  # mean of S_j(0) = j over j = 1..4
    curve = sp.lambdify(r, expr, "numpy")(np.arange(0.0, 300.0, 11.0))
    assert np.isrealobj(curve)
    np.testing.assert_allclose(
        curve, rope_decay_curve(torch.arange(0.0, 300.0, 11.0), 8).numpy(), rtol=1e-12
    )
    # a direct evaluation with complex exponentials
    for distance in (3.0, 50.0, 250.0):
        partial = np.cumsum(np.exp(1j * distance * 10000.0 ** (-np.arange(4) / 4)))
        assert float(expr.subs(r, distance)) == pytest.approx(
            np.abs(partial).mean(), rel=1e-10
        )


def test_decay_bound_rejects_bad_arguments():
    with pytest.raises(ValueError, match="head_dim must be a positive even integer"):
        symbolic.rope_decay_bound(7)
    with pytest.raises(ValueError, match="base must be positive"):
        symbolic.rope_decay_bound(8, base=0)


def test_rotation_2d_turns_counterclockwise():
    # a quarter turn takes the x axis to the y axis
    turned = symbolic.rotation_2d(sp.pi / 2) * sp.Matrix([1, 0])
    assert turned == sp.Matrix([0, 1])
