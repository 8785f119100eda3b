"""The interactive figures: the expressions the browser runs give the package's numbers,
the HTML loads the vendored libraries, and those are the pinned versions."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from pe_tutorial.encodings.absolute import sinusoidal_encoding
from pe_tutorial.encodings.alibi import alibi_bias, alibi_slopes
from pe_tutorial.encodings.relative import t5_relative_position_bucket
from pe_tutorial.encodings.rope import apply_rope, rope_frequencies
from pe_tutorial.encodings.rope_scaling import scaled_rope_frequencies
from pe_tutorial.pages import interactive

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("heads", [1, 3, 8, 12, 16])
def test_the_alibi_figure_draws_the_packages_bias_for_every_slider_setting(heads):
    seq = 16
    expressions = interactive.alibi_expressions(16)
    want = alibi_bias(heads, seq)
    # heads counted from 0, as in chapter 7; a head past the count shows the last
    for head in sorted({0, 1, heads - 1, heads, 15}):
        shown = min(head, heads - 1)
        assert interactive.evaluate(
            expressions["shown"], {}, heads=heads, head=head
        ) == (shown)
        for i, j in [(0, 0), (5, 2), (15, 0), (15, 14), (9, 9)]:
            datum = {"i": i, "j": j}
            datum["slope"] = interactive.evaluate(
                expressions["slope"], datum, heads=heads, head=head
            )
            bias = interactive.evaluate(expressions["bias"], datum)
            assert bias == pytest.approx(float(want[shown, i, j]), rel=1e-6)


def test_the_alibi_sliders_count_heads_from_0_and_name_the_steepest_truthfully():
    max_heads = 16
    spec = interactive.alibi_figure(max_heads=max_heads).to_dict()
    sliders = {p["name"]: p for p in spec["params"]}
    # the head slider starts at head 0 and never reaches past the last head
    assert sliders["head"]["value"] == 0
    assert sliders["head"]["bind"]["min"] == 0
    assert sliders["head"]["bind"]["max"] == max_heads - 1
    assert sliders["heads"]["bind"]["min"] == 1
    assert sliders["heads"]["bind"]["max"] == max_heads
    # ... and its upper end follows the number of heads: heads - 1
    follows = spec["usermeta"][interactive.SLIDER_FOLLOWS]
    assert follows == {"head": {"signal": "heads", "offset": -1}}
    html = interactive.figure_html(interactive.alibi_figure(), name="x")
    assert "view.addSignalListener(link.signal, update)" in html
    assert f'(spec.usermeta || {{}})["{interactive.SLIDER_FOLLOWS}"]' in html
    # no label claims that the first head is the steepest
    assert "steepest" not in sliders["head"]["bind"]["name"]
    expressions = interactive.alibi_expressions(max_heads)
    assert expressions["steepest"] in expressions["title"]
    assert expressions["slope"] in expressions["title"]
    for heads in range(1, max_heads + 1):
        slopes = alibi_slopes(heads)
        steepest = interactive.evaluate(expressions["steepest"], {}, heads=heads)
        assert steepest == int(slopes.argmax())
        assert float(slopes[int(steepest)]) == float(slopes.max())
    # with 12 heads the steepest is head 8, the first of the interleaved four
    assert interactive.evaluate(expressions["steepest"], {}, heads=12) == 8
    assert interactive.evaluate(expressions["steepest"], {}, heads=8) == 0


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


def _one_pair(values, pair, head_dim=16):
    """A head of ``head_dim`` channels holding ``values`` in pair ``pair`` (half pairing)."""
    x = torch.zeros(1, 1, 1, head_dim, dtype=torch.float64)
    x[..., pair], x[..., pair + head_dim // 2] = values
    return x


@pytest.mark.parametrize("pair", [0, 3, 7])
def test_the_rope_pair_figure_turns_as_apply_rope_does(pair):
    expressions = interactive.rope_pair_expressions(16)
    q, k = interactive.ROPE_PAIR_Q, interactive.ROPE_PAIR_K
    for m, n in [(3, 5), (13, 15), (40, 42), (9, 0)]:
        q_m = apply_rope(_one_pair(q, pair), torch.tensor([m]))[0, 0, 0]
        k_n = apply_rope(_one_pair(k, pair), torch.tensor([n]))[0, 0, 0]
        for values, position, turned in ((q, m, q_m), (k, n, k_n)):
            datum = {"a": values[0], "b": values[1], "position": position}
            x = interactive.evaluate(expressions["x"], datum, pair=pair)
            y = interactive.evaluate(expressions["y"], datum, pair=pair)
            assert (x, y) == pytest.approx(
                (float(turned[pair]), float(turned[pair + 8])), abs=1e-6
            )
        score = interactive.evaluate(expressions["score"], {}, m=m, n=n, pair=pair)
        assert score == pytest.approx(float(q_m @ k_n), abs=1e-6)


@pytest.mark.parametrize("log_length", [4, 11, 13.5])
def test_the_wavelength_figure_splits_the_pairs_at_the_training_length(log_length):
    expressions = interactive.rope_wavelength_expressions()
    length = 2**log_length
    thetas = rope_frequencies(128).double()
    assert interactive.evaluate(
        expressions["length"], {}, log_length=log_length
    ) == pytest.approx(length)
    for theta in thetas.tolist():
        datum = {"theta": theta}
        wavelength = interactive.evaluate(expressions["wavelength"], datum)
        assert wavelength == pytest.approx(2 * math.pi / theta)
        turns = interactive.evaluate(expressions["turns"], datum, log_length=log_length)
        # the package's own count of turns within the length
        assert turns == pytest.approx(length * theta / (2 * math.pi))
        completes = interactive.evaluate(
            expressions["completes"], datum, log_length=log_length
        )
        assert bool(completes) == (turns >= 1)
    # the slowest pair (wavelength about 54,400 tokens) does not complete in 2^15
    slowest = {"theta": float(thetas[-1])}
    assert not interactive.evaluate(expressions["completes"], slowest, log_length=15)
    assert interactive.evaluate(expressions["completes"], slowest, log_length=16)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets", [8, 32, 64])
@pytest.mark.parametrize("max_distance", [64, 128, 512])
def test_the_t5_figure_gives_the_packages_buckets(
    bidirectional, num_buckets, max_distance
):
    expression = interactive.t5_bucket_expressions()["bucket"]
    offsets = torch.arange(-600, 601)
    want = t5_relative_position_bucket(
        offsets,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    got = [
        interactive.evaluate(
            expression,
            {"r": r},
            num_buckets=num_buckets,
            max_distance=max_distance,
            bidirectional=bidirectional,
        )
        for r in offsets.tolist()
    ]
    assert got == want.tolist()


@pytest.mark.parametrize("factor", [1.0, 2.0, 4.0, 8.5, 32.0])
def test_the_scaling_figure_gives_each_methods_frequencies(factor):
    head_dim, original = 32, 128
    expressions = interactive.scaling_expressions(head_dim)
    plain = rope_frequencies(head_dim).double()
    keep = {
        m: interactive.scaling_keep(head_dim, m, original=original)
        for m in ("yarn", "llama3")
    }
    for method in interactive.SCALING_FIGURE_METHODS:
        want, _ = scaled_rope_frequencies(
            head_dim, method, factor=factor, original_max_positions=original
        )
        for i in range(head_dim // 2):
            datum = {"pair": i, "keep_yarn": keep["yarn"][i]}
            datum["keep_llama3"] = keep["llama3"][i]
            kept = interactive.evaluate(expressions[method], datum, s=factor)
            # the package works in float32 (a power of a large base): 1e-5 relative
            assert kept * float(plain[i]) == pytest.approx(float(want[i]), rel=1e-5)
    # YaRN keeps the fastest pair and interpolates the slowest, for any factor
    assert keep["yarn"][0] == 1 and keep["yarn"][-1] == 0


def test_a_seeded_bug_in_an_expression_is_caught():
    # the half-frequency bug: omega_i taken for pair i + 1
    wrong = interactive.sinusoidal_expressions(16)["x"].replace(
        "[datum.pair]", "[datum.pair + 1]"
    )
    table = sinusoidal_encoding(8, 16)
    got = interactive.evaluate(wrong, {"pair": 0}, p=3)
    assert got != pytest.approx(float(table[3, 0]), abs=1e-3)


@pytest.mark.parametrize(
    "build",
    [
        interactive.alibi_figure,
        interactive.sinusoidal_clock_figure,
        interactive.rope_pair_figure,
        interactive.rope_wavelength_figure,
        interactive.t5_bucket_figure,
        interactive.scaling_figure,
    ],
)
def test_figure_html_loads_the_vendored_libraries_and_is_deterministic(build):
    html = interactive.figure_html(build(), name="x")
    assert html == interactive.figure_html(build(), name="x")  # the cache's key
    # notebooks stay light: a spec and a loader, never the libraries themselves
    assert len(html) < 20_000
    assert re.search(r'<div id="pe-vis-x-[0-9a-f]{8}" class="pe-interactive">', html)
    # the book's own copy where the page names it (_static/pe-vega.js), else the CDN
    assert 'base + lib + ".min.js"' in html and "window.peVegaBase" in html
    assert f'"{interactive.CDN}/" + lib + "@" + libs[i][1] + "/build/"' in html
    spec_text = re.search(r"var spec = (\{.*\});\n", html).group(1)
    spec = json.loads(spec_text)
    # outside the spec (whose $schema is a name, never fetched), the one address
    # off the page is the CDN
    loader = html.replace(spec_text, "")
    assert loader.count("https://") == 1
    # a library that did not load (an error, or a page served in its place) says so
    assert "script.onerror = function" in loader and "did not load from" in loader
    # every slider is bound to a parameter the expressions read
    params = spec.get("params") or [
        p for part in spec.get("vconcat", []) for p in part.get("params", [])
    ]
    assert params and all("bind" in p for p in params)


def test_the_book_names_its_own_copy_of_the_libraries():
    # Jupyter Book adds every .js of _static/ to every page; the address is the
    # site's vega/ (html_extra_path copies _vendor/ there) from wherever it is
    script = (ROOT / "_static" / "pe-vega.js").read_text()
    assert 'window.peVegaBase = new URL("../vega/", document.currentScript.src)' in (
        script
    )
    config = (ROOT / "_config.yml").read_text()
    assert "html_extra_path: [_vendor]" in config


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


FIGURES = [
    interactive.alibi_figure,
    interactive.sinusoidal_clock_figure,
    interactive.rope_pair_figure,
    interactive.rope_wavelength_figure,
    interactive.t5_bucket_figure,
    interactive.scaling_figure,
]


def _values(spec, key):
    """Every value stored under ``key`` anywhere in a spec."""
    if isinstance(spec, dict):
        for name, value in spec.items():
            if name == key:
                yield value
            yield from _values(value, key)
    elif isinstance(spec, list):
        for item in spec:
            yield from _values(item, key)


@pytest.mark.parametrize("build", FIGURES)
def test_every_figure_fits_a_phones_column(build):
    spec = build().to_dict()
    fit = spec["usermeta"][interactive.FIT]
    assert fit["max_width"] <= interactive.DESKTOP_COLUMN
    parts = spec.get("vconcat")
    if parts is None:
        # a single or layered view: as wide as its <div>, axes and legend inside
        assert spec["width"] == "container"
        assert spec["autosize"] == {"type": "fit-x", "contains": "padding"}
    else:
        # a concatenation: the loader sizes its "container" views, less the
        # reserve; the others are drawn at a fixed width that a phone holds
        assert any(part["width"] == "container" for part in parts)
        assert fit["min"] + fit["reserve"] <= interactive.PHONE_COLUMN
        fixed = [part["width"] for part in parts if part["width"] != "container"]
        assert all(width + 10 <= interactive.PHONE_COLUMN for width in fixed)
    # no fixed width anywhere else, and every legend below its plot
    widths = [w for w in _values(spec, "width") if isinstance(w, (int, float))]
    assert all(width + 10 <= interactive.PHONE_COLUMN for width in widths)
    legends = [legend for legend in _values(spec, "legend") if legend is not None]
    assert all(legend["orient"] == "bottom" for legend in legends)
    # titles start at the figure's left edge, not centred over a narrow plot
    html = interactive.figure_html(build(), name="x")
    config = json.loads(re.search(r"var spec = (\{.*\});\n", html).group(1))["config"]
    assert config["title"]["anchor"] == "start"
    assert config["title"]["frame"] == "bounds"


def test_the_loader_sizes_the_figure_to_its_column():
    html = interactive.figure_html(interactive.sinusoidal_clock_figure(), name="x")
    # the <div> is a block as wide as the column, up to the figure's max_width
    assert 'element.style.width = "100%"' in html
    assert 'element.style.maxWidth = fit.max_width + "px"' in html
    # a concatenated view of width "container": its width signal follows the
    # <div>'s width less the reserve, at first and on every resize
    assert 'fitted.push("concat_" + i + "_width")' in html
    assert 'containerSize()[0] : 0) - " + (fit.reserve || 0)' in html
    assert 'signal.on = [{"events": "window:resize", "update": columnWidth}]' in html
    assert '"patch": patch' in html
    # and the drawing grows and shrinks with it
    spec = interactive.sinusoidal_clock_figure().to_dict()
    assert spec["autosize"] == {"type": "pad", "resize": True}


def test_the_clocks_wrap_into_rows_that_a_phone_holds():
    layout = interactive.clock_layout(8, 4)
    assert [c["pair"] for c in layout] == list(range(8))
    # pairs 0 to 3 in the top row, 4 to 7 below, left to right
    assert [c["cy"] for c in layout] == [0.0] * 4 + [-2.5] * 4
    assert [c["cx"] for c in layout] == [0.0, 2.5, 5.0, 7.5] * 2
    # rims of radius 1 never overlap: centres at least 2.5 apart
    centres = [(c["cx"], c["cy"]) for c in layout]
    assert min(math.dist(a, b) for a in centres for b in centres if a != b) == 2.5
    assert interactive.clock_layout(5, 4)[-1] == {"pair": 4, "cx": 0.0, "cy": -2.5}
    spec = interactive.sinusoidal_clock_figure(dim=16, columns=4).to_dict()
    clocks = spec["vconcat"][0]
    assert clocks["data"]["values"] == layout
    # four clocks of CLOCK_RADIUS px with their margins, two rows of them
    radius = interactive.CLOCK_RADIUS
    assert clocks["width"] == pytest.approx((2.5 * 3 + 2.4) * radius)
    assert clocks["height"] == pytest.approx((2.5 * 1 + 2.4) * radius)
    # a rim's area in square px is that of a circle of one unit, CLOCK_RADIUS px
    rims = clocks["layer"][0]["mark"]
    assert rims["size"] == pytest.approx(math.pi * radius**2)
    with pytest.raises(ValueError, match="columns"):
        interactive.clock_layout(8, 0)


@pytest.mark.parametrize("width, height", [(290, 300), (360, 300), (300, 300)])
def test_the_rope_pair_draws_one_unit_as_long_on_both_axes(width, height):
    spec = interactive.rope_pair_figure().to_dict()
    encoding = spec["layer"][0]["encoding"]
    half = {}
    for axis in ("x", "y"):
        scale = encoding[axis]["scale"]
        size = {"width": width, "height": height}
        low = interactive.evaluate(scale["domainMin"]["expr"], {}, **size)
        high = interactive.evaluate(scale["domainMax"]["expr"], {}, **size)
        assert low == -high
        half[axis] = high
    # px per unit the same both ways, so a turn by an angle looks like one
    assert width / (2 * half["x"]) == pytest.approx(height / (2 * half["y"]))
    # and the whole circle of radius 1.2 stays inside the plot
    assert min(half.values()) == pytest.approx(1.2)


def _js_ternary(expression: str, **names: str) -> str:
    # "<test> ? 'a' : 'b'" as Python, for the one-level ternaries of legend labels
    test, rest = expression.split("?", 1)
    yes, no = rest.split(":", 1)
    for name, value in names.items():
        test = test.replace(name, repr(value))
    return eval(f"({yes.strip()}) if ({test.strip()}) else ({no.strip()})")  # noqa: S307


@pytest.mark.parametrize("build", FIGURES)
def test_no_legend_prints_a_raw_true_or_false(build):
    """A colour scale over booleans labels its entries in words (chapter 6's
    wavelength figure once read "true / false")."""
    spec = build().to_dict()
    for encoding in _values(spec, "color"):
        domain = (
            encoding.get("scale", {}).get("domain", [])
            if isinstance(encoding, dict)
            else []
        )
        if not any(isinstance(value, bool) for value in domain):
            continue
        expression = encoding.get("legend", {}).get("labelExpr")
        assert expression, f"{build.__name__}: a boolean legend without labelExpr"
        words = {
            _js_ternary(expression, **{"datum.label": str(v).lower()}) for v in domain
        }
        assert len(words) == len(domain) and not words & {"true", "false"}, words
