"""The interactive figures: the expressions the browser runs give the package's numbers,
the HTML loads the vendored libraries, and those are the pinned versions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pe_tutorial import interactive
from pe_tutorial.absolute import sinusoidal_encoding
from pe_tutorial.alibi import alibi_bias

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("heads", [1, 3, 8, 12, 16])
def test_the_alibi_figure_draws_the_packages_bias_for_every_slider_setting(heads):
    seq = 16
    expressions = interactive.alibi_expressions(16)
    want = alibi_bias(heads, seq)
    for head in sorted({1, 2, heads, 16}):  # a head past the count shows the last
        shown = min(head, heads)
        for i, j in [(0, 0), (5, 2), (15, 0), (15, 14), (9, 9)]:
            datum = {"i": i, "j": j}
            datum["slope"] = interactive.evaluate(
                expressions["slope"], datum, heads=heads, head=head
            )
            bias = interactive.evaluate(expressions["bias"], datum)
            assert bias == pytest.approx(float(want[shown - 1, i, j]), rel=1e-6)


@pytest.mark.parametrize("p", [0, 7, 100])
def test_the_clock_figure_draws_the_packages_sinusoidal_code(p):
    dim = 16
    expressions = interactive.sinusoidal_expressions(dim)
    table = sinusoidal_encoding(200, dim).double()
    for pair in range(dim // 2):
        x = interactive.evaluate(expressions["x"], {"pair": pair}, p=p)
        y = interactive.evaluate(expressions["y"], {"pair": pair}, p=p)
        # PE[p, 2i] = sin(p omega_i), PE[p, 2i + 1] = cos(p omega_i)
        assert x == pytest.approx(float(table[p, 2 * pair]), abs=1e-5)
        assert y == pytest.approx(float(table[p, 2 * pair + 1]), abs=1e-5)
    for q in [0, 3, p, 128]:
        dot = interactive.evaluate(expressions["dot"], {"q": q}, p=p)
        assert dot == pytest.approx(float(table[p] @ table[q]), abs=1e-4)


def test_a_seeded_bug_in_an_expression_is_caught():
    # the half-frequency bug: omega_i taken for pair i + 1
    wrong = interactive.sinusoidal_expressions(16)["x"].replace(
        "[datum.pair]", "[datum.pair + 1]"
    )
    table = sinusoidal_encoding(8, 16)
    got = interactive.evaluate(wrong, {"pair": 0}, p=3)
    assert got != pytest.approx(float(table[3, 0]), abs=1e-3)


@pytest.mark.parametrize(
    "build", [interactive.alibi_figure, interactive.sinusoidal_clock_figure]
)
def test_figure_html_loads_the_vendored_libraries_and_is_deterministic(build):
    html = interactive.figure_html(build(), name="x")
    assert html == interactive.figure_html(build(), name="x")  # the cache's key
    assert re.search(r'<div id="pe-vis-x-[0-9a-f]{8}" class="pe-interactive">', html)
    assert '"../vega/" + lib + ".min.js"' in html
    spec_text = re.search(r"var spec = (\{.*\});\n", html).group(1)
    spec = json.loads(spec_text)
    # outside the spec (whose $schema is a name, never fetched), the one address
    # off the page is the CDN, tried only where the book's folder is missing
    loader = html.replace(spec_text, "")
    assert loader.count("https://") == 1 and "script.onerror = fallback" in loader
    # every slider is bound to a parameter the expressions read
    params = spec.get("params") or [
        p for part in spec.get("vconcat", []) for p in part.get("params", [])
    ]
    assert params and all("bind" in p for p in params)


def test_the_vendored_libraries_are_the_pinned_versions():
    folder = ROOT / "_vendor" / "vega"
    for lib, version in interactive.VENDORED.items():
        text = (folder / f"{lib}.min.js").read_text()
        assert f'"{version}"' in text, f"{lib}.min.js is not version {version}"
        assert (folder / f"LICENSE-{lib}").is_file()


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="max_heads"):
        interactive.alibi_figure(max_heads=0)
    with pytest.raises(ValueError, match="dim"):
        interactive.sinusoidal_clock_figure(dim=-2)


def test_evaluate_reads_only_the_figures_names():
    with pytest.raises(NameError):
        interactive.evaluate("open('x')", {})
    assert interactive.evaluate("datum.a * k + min(1, 2)", {"a": 2.0}, k=3) == 7.0
