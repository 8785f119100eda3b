"""Sympy results shown as equations that fit a phone's column (chapters 5 and 6).

``equation_latex(lhs, expr)`` is ``lhs = expr`` in LaTeX; when ``expr`` is long
(its LaTeX over ``WRAP_AT`` characters), each sum in it is written one term per
line (an ``aligned`` block), and a matrix keeps its rows with each entry's sum
stacked inside its cell, so no line of a derivation runs past a 358 px column
(tools/phone_check.py measures the built pages). ``show_equation`` displays it.
"""

from __future__ import annotations

import sympy

# LaTeX longer than this, in characters, is broken into lines: about what fits a
# phone's column at the book's math size
WRAP_AT = 50


def _terms(expr) -> list[str]:
    # a sum's terms as lines, each after its sign (the first bare)
    first, *rest = expr.as_ordered_terms()
    lines = [sympy.latex(first)]
    for term in rest:
        if term.could_extract_minus_sign():
            lines.append("{} - " + sympy.latex(-term))
        else:
            lines.append("{} + " + sympy.latex(term))
    return lines


def _stacked(expr) -> str:
    # a long sum one term per line (an aligned block); anything else as it is
    if not isinstance(expr, sympy.Add) or len(sympy.latex(expr)) <= WRAP_AT // 2:
        return sympy.latex(expr)
    return r"\begin{aligned}&" + r" \\ &".join(_terms(expr)) + r"\end{aligned}"


def equation_latex(lhs: str, expr) -> str:
    """``lhs = expr`` in LaTeX, each long sum one term per line (see the module):
    a long scalar sum puts ``lhs`` on a line of its own, then ``= `` and its
    first term, then one term per line under it."""
    if len(sympy.latex(expr)) <= WRAP_AT:
        return f"{lhs} = {sympy.latex(expr)}"
    if isinstance(expr, sympy.MatrixBase):
        rows = [
            " & ".join(_stacked(entry) for entry in expr.row(i))
            for i in range(expr.rows)
        ]
        return (
            f"{lhs} = "
            + r"\begin{bmatrix}"
            + r" \\[6pt] ".join(rows)
            + (r"\end{bmatrix}")
        )
    if not isinstance(expr, sympy.Add):
        return f"{lhs} = {sympy.latex(expr)}"
    first, *rest = _terms(expr)
    lines = [lhs, r"\quad = " + first, *(r"\qquad " + line for line in rest)]
    return r"\begin{aligned}&" + r" \\ &".join(lines) + r"\end{aligned}"


def show_equation(lhs: str, expr) -> None:
    """Display ``lhs = expr`` as an equation (``equation_latex``)."""
    from IPython.display import Math, display

    display(Math(equation_latex(lhs, expr)))
