"""pe_tutorial.pages.equations: sympy results written so they fit a phone (issue 67)."""

import sympy

from pe_tutorial.pages.equations import WRAP_AT, equation_latex

x, y, k, w, p = sympy.symbols("x y k omega p")


def test_a_short_equation_stays_on_one_line():
    assert equation_latex("s", x + y) == "s = x + y"


def test_a_long_sum_is_written_one_term_per_line_with_its_signs():
    expr = sympy.sin(k * w) * sympy.cos(p * w) - sympy.cos(k * w) * sympy.sin(p * w)
    expr = expr + sympy.cos(k * w) ** 2
    assert len(sympy.latex(expr)) > WRAP_AT
    text = equation_latex(r"\mathrm{score}", expr)
    body = text.removeprefix(r"\begin{aligned}&").removesuffix(r"\end{aligned}")
    lhs, first, *rest = body.split(r" \\ &")
    terms = expr.as_ordered_terms()
    # the left side alone, then "= " and the first term, then one term a line
    assert lhs == r"\mathrm{score}"
    assert first == r"\quad = " + sympy.latex(terms[0])
    assert len(rest) == len(terms) - 1 == 2
    for line, term in zip(rest, terms[1:]):
        negative = term.could_extract_minus_sign()
        magnitude = -term if negative else term
        sign = "- " if negative else "+ "
        assert line == r"\qquad {} " + sign + sympy.latex(magnitude)
    # read back, the lines add up to the expression
    assert sympy.simplify(sum(terms) - expr) == 0


def test_a_long_column_vector_keeps_its_rows_and_stacks_each_entry():
    a = sympy.sin(k * w) * sympy.cos(w * p) + sympy.sin(w * p) * sympy.cos(k * w)
    b = -sympy.sin(k * w) * sympy.sin(w * p) + sympy.cos(k * w) * sympy.cos(w * p)
    text = equation_latex(r"\mathrm{PE}(p + k)", sympy.Matrix([a, b]))
    inner = text.split(r"\begin{bmatrix}", 1)[1].removesuffix(r"\end{bmatrix}")
    rows = inner.split(r" \\[6pt] ")
    assert len(rows) == 2
    assert all(row.startswith(r"\begin{aligned}&") for row in rows)
    assert rows[1].count(r" \\ &") == 1 and r"{} + " in rows[1]
