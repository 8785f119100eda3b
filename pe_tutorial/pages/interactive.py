"""Interactive figures: Vega-Lite charts whose sliders run in the reader's browser.

A figure is an Altair chart (Vega-Lite underneath): its data come from the
package's own functions, and the short formulas that a slider drives are
Vega expressions evaluated in the browser, so the slider is continuous and
needs no Python kernel. How a chart is shown (in the book and in notebooks),
sized to the text column, and how its expressions are read in Python
(``evaluate``) is ``vega.py``'s; this module holds the six figures. That is
its one job, and why it is one of the longer rooms: each figure, with its
expressions, is 75 to 130 lines built the same way (data from the package,
expressions the tests evaluate, the same layout), and splitting them by
chapter would give six small files that all import the same helpers.

Each expression is kept to the part of Vega's expression language that reads
the same in Python, so the tests run the very string the browser runs and
compare it with the package's functions (``tests/test_interactive.py``).
Legends sit below the plot, titles start at the figure's left edge, and
chapter 4's clocks wrap into rows (``clock_layout``); the tests hold every
figure to a phone's column.

The figures (``sinusoidal_clock_figure`` for chapter 4, ``rope_pair_figure``
and ``rope_wavelength_figure`` for chapter 6, ``alibi_figure`` for chapter 7,
``t5_bucket_figure`` for chapter 8, ``scaling_figure`` for chapter 9)
sit beside the still matplotlib figures the chapters keep for print and for
readers without JavaScript.
"""

from __future__ import annotations

import math

from .._validation import require_positive_int
from ..encodings.absolute import sinusoidal_frequencies
from ..encodings.alibi import alibi_slopes
from ..encodings.rope_core import rope_frequencies
from ..encodings.rope_scaling import scaled_rope_frequencies
from .vega import (
    CDN,
    COLUMN_WIDTH,
    DESKTOP_COLUMN,
    FIT,
    PHONE_COLUMN,
    READABLE_TEXT,
    SLIDER_FOLLOWS,
    VENDORED,
    column_fit,
    evaluate,
    figure_html,
    number_list,
    show,
)

__all__ = [
    # how a figure is shown (vega.py), here too for the chapters and the checks
    "CDN",
    "COLUMN_WIDTH",
    "DESKTOP_COLUMN",
    "PHONE_COLUMN",
    "READABLE_TEXT",
    "VENDORED",
    "figure_html",
    "show",
    "evaluate",
    "alibi_figure",
    "sinusoidal_clock_figure",
    "rope_pair_figure",
    "rope_wavelength_figure",
    "t5_bucket_figure",
    "scaling_figure",
]

# ---------------------------------------------------------------------------
# chapter 7: the ALiBi bias of every head, for any number of heads
# ---------------------------------------------------------------------------


def alibi_expressions(max_heads: int) -> dict[str, str]:
    """Vega expressions of the ALiBi figure, heads counted from 0 as in chapter 7.

    ``shown``: the head drawn, the *head* slider's value kept below the number
    of heads; ``slope``: its slope, looked up in the package's slopes for
    1 .. ``max_heads`` heads (``alibi_slopes``); ``steepest``: the head with the
    largest slope for that many heads (head 0 for a power of two, head 8 for
    12 heads, whose interleaved slopes start again near the top); ``bias``:
    ``-m (i - j)``; ``title``: the two lines above the chart, built from the others.
    """
    counts = range(1, max_heads + 1)
    table = _number_list_of_lists(alibi_slopes(n) for n in counts)
    steepest = "[" + ",".join(str(int(alibi_slopes(n).argmax())) for n in counts) + "]"
    shown = "min(head, heads - 1)"
    expressions = {
        "shown": shown,
        "slope": f"{table}[heads - 1][{shown}]",
        "steepest": f"{steepest}[heads - 1]",
        "bias": "-datum.slope * (datum.i - datum.j)",
    }
    # two lines: the head drawn and its slope, then the steepest head
    expressions["title"] = (
        f"['ALiBi bias of head ' + ({shown}) + ' (heads 0 to ' + (heads - 1) + ')', "
        f"'slope ' + format({expressions['slope']}, '.4f') + "
        f"'; the steepest is head ' + ({expressions['steepest']})]"
    )
    return expressions


def _number_list_of_lists(rows) -> str:
    return "[" + ",".join(number_list(row) for row in rows) + "]"


def alibi_figure(*, max_heads: int = 16, seq_len: int = 16):
    """The causal ALiBi bias of one head, with sliders for the number of heads and the head.

    Heads are counted from 0, as in chapter 7, and the *head* slider runs from 0
    to ``heads - 1``: its range follows the *heads* slider (``SLIDER_FOLLOWS``).
    Drag *heads* through numbers that are not powers of two to see Press et
    al.'s interleaved slopes; the title names the head drawn,
    its slope and the steepest head for that many heads, which is head 0 only
    when the count is a power of two. Cells above the diagonal are masked.
    """
    import altair as alt

    require_positive_int(max_heads, "max_heads")
    require_positive_int(seq_len, "seq_len")
    cells = [{"i": i, "j": j} for i in range(seq_len) for j in range(i + 1)]
    expressions = alibi_expressions(max_heads)
    heads = alt.param(
        name="heads",
        value=min(8, max_heads),
        bind=alt.binding_range(min=1, max=max_heads, step=1, name="heads "),
    )
    head = alt.param(
        name="head",
        value=0,
        bind=alt.binding_range(
            min=0, max=max_heads - 1, step=1, name="head (0 to heads - 1) "
        ),
    )
    return (
        alt.Chart(alt.Data(values=cells))
        .mark_rect()
        .encode(
            x=alt.X("j:O", title="key position j"),
            y=alt.Y("i:O", title="query position i"),
            color=alt.Color(
                "bias:Q",
                scale=alt.Scale(scheme="viridis", domainMax=0),
                title="bias",
                # below the cells, so that the cells take the column's width
                legend=alt.Legend(
                    orient="bottom", direction="horizontal", gradientLength=200
                ),
            ),
            tooltip=["i:O", "j:O", alt.Tooltip("bias:Q", format=".4f"), "slope:Q"],
        )
        .transform_calculate(slope=expressions["slope"])
        .transform_calculate(bias=expressions["bias"])
        .add_params(heads, head)
        .properties(
            height=320,
            title=alt.Title(alt.ExprRef(expressions["title"])),
            **column_fit(
                420, **{SLIDER_FOLLOWS: {"head": {"signal": "heads", "offset": -1}}}
            ),
        )
    )


# ---------------------------------------------------------------------------
# chapter 4: the sinusoidal table as clocks, and its dot product
# ---------------------------------------------------------------------------


def sinusoidal_expressions(dim: int, base: float = 10000.0) -> dict[str, str]:
    """Vega expressions for the figure: the hand of pair ``datum.pair`` at position
    ``p`` (``sin``, ``cos`` of ``p omega_i``) and ``PE[p] . PE[datum.q]``."""
    omega = number_list(sinusoidal_frequencies(dim, base=base))
    dot = " + ".join(
        f"sin(p * {omega}[{i}]) * sin(datum.q * {omega}[{i}])"
        f" + cos(p * {omega}[{i}]) * cos(datum.q * {omega}[{i}])"
        for i in range(dim // 2)
    )
    return {
        "x": f"sin(p * {omega}[datum.pair])",
        "y": f"cos(p * {omega}[datum.pair])",
        "dot": dot,
    }


# the clocks' radius in px: four clocks in a row, 2.5 radii apart, fit a phone
CLOCK_RADIUS = 32


def clock_layout(num_pairs: int, columns: int) -> list[dict[str, float]]:
    """Where each pair's clock sits: rows of ``columns`` clocks, pair 0 at the top
    left, centres 2.5 radii apart (the radius is the unit), as ``{"pair", "cx", "cy"}``."""
    require_positive_int(num_pairs, "num_pairs")
    require_positive_int(columns, "columns")
    return [
        {"pair": i, "cx": 2.5 * (i % columns), "cy": -2.5 * (i // columns)}
        for i in range(num_pairs)
    ]


def sinusoidal_clock_figure(
    *, dim: int = 16, max_position: int = 128, columns: int = 4
):
    """Each pair of the sinusoidal code as a clock hand at position ``p``, and the
    dot product of ``PE[p]`` with every ``PE[q]``.

    Drag *position*: the fast pairs (top left) spin, the slow ones barely move,
    and the dot-product curve slides along without changing shape, because
    ``PE[p] . PE[q]`` depends on ``q - p`` only. The clocks wrap into rows of
    ``columns`` (``clock_layout``), so that a phone's column holds them; the
    curve is as wide as the column (``FIT``: the loader sizes it, and the
    drawing grows and shrinks with it).
    """
    import altair as alt

    require_positive_int(dim, "dim")
    require_positive_int(max_position, "max_position")
    expressions = sinusoidal_expressions(dim)
    p = alt.param(
        name="p",
        value=10,
        bind=alt.binding_range(min=0, max=max_position, step=1, name="position p "),
    )
    # clock i centred at (cx, cy); its hand points at (sin, cos) of p omega_i
    pairs = clock_layout(dim // 2, columns)
    # the extent of the clocks in radii, a rim of 1 and a margin of 0.2 around
    span_x = 2.5 * (min(columns, dim // 2) - 1) + 2.4
    span_y = 2.5 * ((dim // 2 - 1) // columns) + 2.4
    x_scale = alt.Scale(domain=[-1.2, span_x - 1.2])
    y_scale = alt.Scale(domain=[1.2 - span_y, 1.2])
    unit = CLOCK_RADIUS  # pixels per unit of either axis
    base = alt.Chart(alt.Data(values=pairs)).properties(
        width=span_x * unit, height=span_y * unit
    )
    where = {
        "x": alt.X("cx:Q", scale=x_scale, axis=None),
        "y": alt.Y("cy:Q", scale=y_scale, axis=None),
    }
    # a point's size is its area in square pixels: a rim of radius 1
    rims = base.mark_point(
        size=math.pi * unit**2, color="lightgray", filled=False
    ).encode(**where)
    # each clock's pair number at its top left corner
    labels = (
        base.transform_calculate(lx="datum.cx - 1.05", ly="datum.cy + 1.05")
        .mark_text(fontSize=11, color="gray")
        .encode(
            x=alt.X("lx:Q", scale=x_scale, axis=None),
            y=alt.Y("ly:Q", scale=y_scale, axis=None),
            text="pair:O",
        )
    )
    hands = (
        base.transform_calculate(
            x=f"datum.cx + {expressions['x']}", y=f"datum.cy + {expressions['y']}"
        )
        .mark_rule(strokeWidth=3)
        .encode(**where, x2="x:Q", y2="y:Q", tooltip=["pair:O"])
    )
    clocks = (
        alt.layer(rims, labels, hands)
        .add_params(p)
        .properties(
            title=f"pairs 0 (fast, top left) to {dim // 2 - 1} (slow)",
            # no frame around the clocks: they have no axes
            view=alt.ViewBackground(stroke=None),
        )
    )
    positions = [{"q": q} for q in range(max_position + 1)]
    curve = (
        alt.Chart(alt.Data(values=positions))
        .transform_calculate(dot=expressions["dot"])
        .mark_line()
        .encode(
            x=alt.X("q:Q", title="position q"),
            y=alt.Y(
                "dot:Q",
                title="PE[p] . PE[q]",
                scale=alt.Scale(domain=[-dim / 4, dim / 2]),
            ),
        )
        # the column's width less 60 px for the axis (the loader sets it)
        .properties(width="container", height=200)
    )
    return alt.vconcat(clocks, curve, center=True).properties(
        title=alt.Title("The sinusoidal code as clocks", subtitle="drag position p"),
        # the drawing grows and shrinks with the curve the loader sizes
        autosize=alt.AutoSizeParams(type="pad", resize=True),
        usermeta={FIT: {"max_width": 640, "reserve": 75, "min": 200}},
    )


# ---------------------------------------------------------------------------
# chapter 6: one RoPE pair of q and k, and their score
# ---------------------------------------------------------------------------

# the query's and the key's pair before rotation (any two vectors would do)
ROPE_PAIR_Q = (1.0, 0.35)
ROPE_PAIR_K = (0.55, -0.8)


def rope_pair_expressions(head_dim: int, base: float = 10000.0) -> dict[str, str]:
    """Vega expressions: ``datum``'s pair (``datum.a``, ``datum.b``) turned by its
    position times ``theta`` of the chosen ``pair`` (``x``, ``y``), and the score
    of the turned q and k pairs (``score``), from the package's ``rope_frequencies``."""
    theta = f"{number_list(rope_frequencies(head_dim, base=base))}[pair]"

    def turned(a, b, position):
        return (
            f"{a} * cos({position} * {theta}) - {b} * sin({position} * {theta})",
            f"{a} * sin({position} * {theta}) + {b} * cos({position} * {theta})",
        )

    (qa, qb), (ka, kb) = ROPE_PAIR_Q, ROPE_PAIR_K
    qx, qy = turned(qa, qb, "m")
    kx, ky = turned(ka, kb, "n")
    x, y = turned("datum.a", "datum.b", "datum.position")
    return {"x": x, "y": y, "score": f"({qx}) * ({kx}) + ({qy}) * ({ky})"}


def rope_pair_figure(*, head_dim: int = 16, max_position: int = 64):
    """One RoPE pair: q at position m and k at position n, turned, and their score.

    Drag *m* and *n* by the same amount: both arrows turn, and the score, their
    dot product, stays put, since it depends on ``n - m`` only. Drag *pair* to
    a slower frequency and the same offset turns them less.
    """
    import altair as alt

    require_positive_int(head_dim, "head_dim")
    require_positive_int(max_position, "max_position")
    expressions = rope_pair_expressions(head_dim)
    sliders = [
        alt.param(
            name=name,
            value=value,
            bind=alt.binding_range(min=0, max=top, step=1, name=label),
        )
        for name, value, top, label in (
            ("m", 3, max_position, "query position m "),
            ("n", 5, max_position, "key position n "),
            ("pair", 0, head_dim // 2 - 1, "pair i "),
        )
    ]
    (qa, qb), (ka, kb) = ROPE_PAIR_Q, ROPE_PAIR_K
    vectors = [
        {"vector": "q at m", "a": qa, "b": qb, "x0": 0, "y0": 0},
        {"vector": "k at n", "a": ka, "b": kb, "x0": 0, "y0": 0},
    ]
    # one unit as many pixels on either axis, whatever width the column gives:
    # the longer side's domain widens, so that a turn looks like one
    aspect = {
        "x": "1.2 * max(1, width / height)",
        "y": "1.2 * max(1, height / width)",
    }
    scales = {
        axis: alt.Scale(
            domainMin=alt.ExprRef(f"-{half}"), domainMax=alt.ExprRef(half), nice=False
        )
        for axis, half in aspect.items()
    }
    arrows = (
        alt.Chart(alt.Data(values=vectors))
        .transform_calculate(position="datum.vector == 'q at m' ? m : n")
        .transform_calculate(x=expressions["x"], y=expressions["y"])
        .mark_rule(strokeWidth=4)
        .encode(
            x=alt.X("x0:Q", scale=scales["x"], title="first channel of the pair"),
            y=alt.Y("y0:Q", scale=scales["y"], title="second channel of the pair"),
            x2="x:Q",
            y2="y:Q",
            color=alt.Color(
                "vector:N",
                title=None,
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
        )
    )
    score = (
        alt.Chart(alt.Data(values=[{"x0": -1.1, "y0": 1.1}]))
        .transform_calculate(score=expressions["score"])
        .transform_calculate(
            label="'q . k = ' + format(datum.score, '.4f') + '   (n - m = ' + (n - m) + ')'"
        )
        .mark_text(align="left", fontSize=14)
        .encode(
            x=alt.X("x0:Q", scale=scales["x"]),
            y=alt.Y("y0:Q", scale=scales["y"]),
            text="label:N",
        )
    )
    return (
        alt.layer(arrows, score)
        .add_params(*sliders)
        .properties(
            height=300,
            title=alt.Title(
                "One RoPE pair", subtitle="drag m and n together: the score stays"
            ),
            **column_fit(420),
        )
    )


# ---------------------------------------------------------------------------
# chapter 6: which pairs turn a full circle within the training length
# ---------------------------------------------------------------------------


def rope_wavelength_expressions() -> dict[str, str]:
    """``wavelength``: ``2 pi / theta_i`` of ``datum.theta``; ``length``: the training
    length ``2 ** log_length``; ``turns``: how many full turns pair i makes in it."""
    return {
        "wavelength": "2 * PI / datum.theta",
        "length": "pow(2, log_length)",
        "turns": "pow(2, log_length) / (2 * PI / datum.theta)",
        "completes": "2 * PI / datum.theta <= pow(2, log_length)",
    }


def rope_wavelength_figure(*, head_dim: int = 128, base: float = 10000.0):
    """The wavelength of each RoPE pair against a training length you choose.

    Drag *log2 training length*: pairs whose wavelength fits in it (filled)
    have turned through every angle in training; the others (hollow) have
    only ever shown part of their circle, and a longer context shows them
    angles they never saw (chapter 9).
    """
    import altair as alt

    require_positive_int(head_dim, "head_dim")
    expressions = rope_wavelength_expressions()
    thetas = rope_frequencies(head_dim, base=base)
    pairs = [{"pair": i, "theta": float(t)} for i, t in enumerate(thetas)]
    log_length = alt.param(
        name="log_length",
        value=12,  # 4096, the training length chapter 6's text uses
        bind=alt.binding_range(min=4, max=17, step=0.5, name="log2 training length "),
    )
    y = alt.Y("wavelength:Q", scale=alt.Scale(type="log"), title="wavelength (tokens)")
    points = (
        alt.Chart(alt.Data(values=pairs))
        .transform_calculate(
            wavelength=expressions["wavelength"],
            turns=expressions["turns"],
            completes=expressions["completes"],
        )
        .mark_point(filled=True, size=40)
        .encode(
            x=alt.X("pair:Q", title="pair i"),
            y=y,
            color=alt.Color(
                "completes:N",
                title="a full turn within L",
                scale=alt.Scale(domain=[True, False], range=["#1f77b4", "#d62728"]),
                # below the plot, so the figure fits the text column; its
                # entries in words, not the field's true / false
                legend=alt.Legend(
                    orient="bottom",
                    direction="horizontal",
                    labelExpr="datum.label == 'true' ? 'yes' : 'no'",
                ),
            ),
            tooltip=[
                "pair:Q",
                alt.Tooltip("wavelength:Q", format=",.1f"),
                alt.Tooltip("turns:Q", format=",.2f"),
            ],
        )
    )
    line = (
        alt.Chart(alt.Data(values=[{}]))
        .transform_calculate(wavelength=expressions["length"])
        .mark_rule(strokeDash=[6, 4], color="gray")
        .encode(y=y)
    )
    return (
        alt.layer(points, line)
        .add_params(log_length)
        .properties(
            height=300,
            title=alt.Title(
                "RoPE wavelengths",
                subtitle=f"D = {head_dim}, base {base:g}: drag the training length",
            ),
            **column_fit(640),
        )
    )


# ---------------------------------------------------------------------------
# chapter 8: T5's buckets
# ---------------------------------------------------------------------------


def t5_bucket_expressions() -> dict[str, str]:
    """T5's bucket of ``datum.r`` (key - query) for the sliders ``num_buckets``,
    ``max_distance`` and ``bidirectional`` (a checkbox: true or false, read as 1
    or 0 in arithmetic), as ``t5_relative_position_bucket``.

    Written without a conditional (a boolean times a number), so that Vega and
    Python read it alike: ``per`` buckets a direction, ``E = per / 2`` exact.
    """
    per = "floor(num_buckets / (1 + bidirectional))"
    exact = f"floor({per} / 2)"
    n = "(bidirectional * abs(datum.r) + (1 - bidirectional) * max(-datum.r, 0))"
    large = (
        f"min({exact} + floor(log(max({n}, {exact}) / {exact}) "
        f"/ log(max_distance / {exact}) * ({per} - {exact})), {per} - 1)"
    )
    offset = f"bidirectional * (datum.r > 0) * {per}"
    return {"bucket": f"{offset} + ({n} < {exact}) * {n} + ({n} >= {exact}) * {large}"}


def t5_bucket_figure(*, max_offset: int = 160):
    """T5's bucket for every key - query offset, with sliders for its settings.

    Drag *num_buckets* and *max_distance*, and tick *bidirectional*: the
    exact buckets near 0 stay one offset wide, the log buckets widen, and
    every offset past ``max_distance`` falls into the last bucket.
    """
    import altair as alt

    require_positive_int(max_offset, "max_offset")
    offsets = [{"r": r} for r in range(-max_offset, max_offset + 1)]
    params = [
        alt.param(
            name="num_buckets",
            value=32,
            bind=alt.binding_range(min=8, max=64, step=8, name="num_buckets "),
        ),
        alt.param(
            name="max_distance",
            value=128,
            bind=alt.binding_range(min=64, max=512, step=32, name="max_distance "),
        ),
        alt.param(
            name="bidirectional",
            value=True,
            bind=alt.binding_checkbox(name="bidirectional "),
        ),
    ]
    return (
        alt.Chart(alt.Data(values=offsets))
        .transform_calculate(bucket=t5_bucket_expressions()["bucket"])
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X(
                "r:Q",
                title="relative position r = key - query",
                scale=alt.Scale(domain=[-max_offset, max_offset]),
            ),
            y=alt.Y("bucket:Q", title="bucket"),
            tooltip=["r:Q", "bucket:Q"],
        )
        .add_params(*params)
        .properties(
            height=300,
            title=alt.Title("T5's buckets", subtitle="drag the settings"),
            **column_fit(640),
        )
    )


# ---------------------------------------------------------------------------
# chapter 9: what each context-extension method does to each pair
# ---------------------------------------------------------------------------

SCALING_FIGURE_METHODS = ("linear", "ntk", "yarn", "llama3")


def scaling_keep(head_dim: int, method: str, *, original: int, base: float = 10000.0):
    """Per pair, the share ``k_i`` of its frequency that ``method`` keeps, read from
    the package: YaRN and Llama 3 give ``theta_i (k_i + (1 - k_i) / s)`` for every
    factor ``s``, with ``k_i`` fixed by ``D``, the base and ``L`` (1: kept, 0: divided
    by ``s``), so ``k_i`` is read off ``scaled_rope_frequencies`` at ``s = 2``."""
    plain = rope_frequencies(head_dim, base=base).double()
    scaled, _ = scaled_rope_frequencies(
        head_dim, method, factor=2.0, base=base, original_max_positions=original
    )
    return ((scaled.double() / plain - 0.5) * 2).clamp(0, 1).tolist()


def scaling_expressions(head_dim: int) -> dict[str, str]:
    """``theta_i' / theta_i`` per method for the slider ``s`` (the factor):
    ``linear`` ``1 / s``; ``ntk`` ``s ** (-2i / (D - 2))`` (the base times
    ``s ** (D / (D - 2))``); ``yarn`` and ``llama3`` ``k_i + (1 - k_i) / s``."""
    return {
        "linear": "1 / s",
        "ntk": f"pow(s, -2 * datum.pair / {head_dim - 2})",
        "yarn": "datum.keep_yarn + (1 - datum.keep_yarn) / s",
        "llama3": "datum.keep_llama3 + (1 - datum.keep_llama3) / s",
    }


def scaling_figure(*, head_dim: int = 32, original: int = 128, base: float = 10000.0):
    """How much each method slows each RoPE pair, ``theta_i / theta_i'``, against the
    factor ``s``.

    Drag *factor s*: position interpolation slows every pair by ``s``; NTK
    slows the slow pairs most and the fastest not at all; YaRN and Llama 3
    keep the fast pairs, divide the slow ones by ``s`` and blend a band in
    between, whose place depends on the training length ``L``, not on ``s``.
    """
    import altair as alt

    require_positive_int(head_dim, "head_dim")
    require_positive_int(original, "original")
    expressions = scaling_expressions(head_dim)
    keep = {
        method: scaling_keep(head_dim, method, original=original, base=base)
        for method in ("yarn", "llama3")
    }
    pairs = [
        {"pair": i, "keep_yarn": keep["yarn"][i], "keep_llama3": keep["llama3"][i]}
        for i in range(head_dim // 2)
    ]
    factor = alt.param(
        name="s",
        value=4,
        bind=alt.binding_range(min=1, max=32, step=0.5, name="factor s "),
    )
    return (
        alt.Chart(alt.Data(values=pairs))
        .transform_calculate(
            **{f"kept_{m}": expressions[m] for m in SCALING_FIGURE_METHODS}
        )
        .transform_fold(
            [f"kept_{m}" for m in SCALING_FIGURE_METHODS], as_=["method", "kept"]
        )
        .transform_calculate(
            slowed="1 / datum.kept", method="replace(datum.method, 'kept_', '')"
        )
        .mark_line(point=True)
        .encode(
            x=alt.X("pair:Q", title="pair i (fast to slow)"),
            y=alt.Y(
                "slowed:Q",
                scale=alt.Scale(type="log", domain=[1, 32]),
                title="theta_i / theta_i' (1 = kept, s = interpolated)",
            ),
            color=alt.Color(
                "method:N",
                title="method",
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
            tooltip=["method:N", "pair:Q", alt.Tooltip("slowed:Q", format=".3f")],
        )
        .add_params(factor)
        .properties(
            height=300,
            title=alt.Title(
                "Context extension per pair",
                subtitle=f"D = {head_dim}, L = {original}: drag the factor",
            ),
            **column_fit(640),
        )
    )
