"""Showing a Vega-Lite chart in the book and in notebooks, and reading its expressions.

The machinery of the interactive figures (``interactive.py``): ``figure_html``
wraps an Altair chart in a ``<div>`` and a loader for Vega, Vega-Lite and
vega-embed (versions in ``VENDORED``). In the built book the loader takes
them from the site's own ``vega/`` folder (vendored in ``_vendor/vega/`` from
npm; ``_static/pe-vega.js`` gives its address), so a page makes no request
off the site; in a notebook (Jupyter, Colab) it takes them from the ``CDN``,
and where they do not load the figure says so in words. The libraries'
JavaScript is loaded once per page and never stored in a notebook's outputs.

Every figure sizes itself to the text column, from a phone's (390 px) to a
desktop's: a single or layered view is as wide as its ``<div>`` (Vega-Lite's
``width: "container"``, ``column_fit``); a concatenation has its
``"container"`` views sized by the loader, whose width follows the ``<div>``'s
on every resize (``FIT``).

``evaluate`` runs a Vega expression in Python: the figures keep their
expressions to arithmetic, array indexing, ``min``, ``sin`` and ``cos``, the
part of Vega's expression language that reads the same in both, so the tests
compare the very string the browser runs with the package's functions.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping

__all__ = [
    "CDN",
    "COLUMN_WIDTH",
    "DESKTOP_COLUMN",
    "FIT",
    "PHONE_COLUMN",
    "READABLE_TEXT",
    "SLIDER_FOLLOWS",
    "VENDORED",
    "column_fit",
    "evaluate",
    "figure_html",
    "number_list",
    "show",
]

# the versions in _vendor/vega/ (npm packages vega, vega-lite, vega-embed)
VENDORED = {"vega": "6.4.0", "vega-lite": "6.4.1", "vega-embed": "7.3.0"}
CDN = "https://cdn.jsdelivr.net/npm"
# every figure's text sizes in px, set by figure_html (a chart's own config wins)
READABLE_TEXT = {
    "axis": {"labelFontSize": 12, "titleFontSize": 13},
    "legend": {"labelFontSize": 12, "titleFontSize": 12},
    # titles start at the figure's left edge, not centred on the plot, so that a
    # title wider than a phone's plot still fits the figure's width
    "title": {
        "fontSize": 14,
        "subtitleFontSize": 12,
        "anchor": "start",
        "frame": "bounds",
    },
}

# how a figure fits the text column, in ``usermeta``: ``max_width``, the widest
# its <div> grows (px); ``reserve``, what a view inside a concatenation whose
# width is "container" leaves of the <div>'s width for its axis; ``min``, the
# narrowest such a view is drawn. A single or layered view takes the <div>'s
# width itself (``COLUMN_WIDTH``), as Vega-Lite sizes it.
FIT = "peFit"
COLUMN_WIDTH = {
    "width": "container",
    "autosize": {"type": "fit-x", "contains": "padding"},
}
# the text column at a phone's width (390 px less the page's margins), where
# every figure must fit, and at 1280 px
PHONE_COLUMN = 358
DESKTOP_COLUMN = 688

# a slider whose upper end follows another parameter: figure_html's loader sets
# the input's max to that parameter's value plus ``offset`` (and pulls the value
# down with it) whenever the other slider moves; Vega-Lite's own ranges are fixed
SLIDER_FOLLOWS = "peSliderMax"


_LOADER = """<div id="{id}" class="pe-interactive"></div>
<script>
(function () {{
  var spec = {spec};
  var libs = {libs};
  var names = {{"vega": "vega", "vega-lite": "vegaLite", "vega-embed": "vegaEmbed"}};
  function load() {{
    // the book's pages name its own copy (_static/pe-vega.js); a notebook takes the CDN
    var base = window.peVegaBase;
    // a page with RequireJS (classic Jupyter) would take the bundles as AMD modules
    var define = window.define;
    window.define = undefined;
    return new Promise(function (resolve, reject) {{
      function next(i) {{
        if (i === libs.length) {{
          window.define = define;
          return resolve();
        }}
        var lib = libs[i][0];
        if (window[names[lib]]) return next(i + 1);
        var script = document.createElement("script");
        script.src = base
          ? base + lib + ".min.js"
          : "{cdn}/" + lib + "@" + libs[i][1] + "/build/" + lib + ".min.js";
        // a server that answers a missing file with a page loads without the library
        script.onload = function () {{
          window[names[lib]] ? next(i + 1) : script.onerror();
        }};
        script.onerror = function () {{
          window.define = define;
          reject(script.src);
        }};
        document.head.appendChild(script);
      }}
      next(0);
    }});
  }}
  // a slider whose range follows another's (usermeta.{follows}: name -> the
  // signal it follows and an offset): its max moves, and its value with it
  function follow(view) {{
    var links = (spec.usermeta || {{}})["{follows}"] || {{}};
    Object.keys(links).forEach(function (name) {{
      var link = links[name];
      function update() {{
        var top = view.signal(link.signal) + link.offset;
        var selector = "#{id} input[name='" + name + "']";
        document.querySelectorAll(selector).forEach(function (input) {{
          input.max = top;
        }});
        if (view.signal(name) > top) view.signal(name, top).runAsync();
      }}
      view.addSignalListener(link.signal, update);
      update();
    }});
  }}
  // Vega-Lite sizes a single or layered view whose width is "container" to the
  // figure's <div>, and again whenever the window resizes; it cannot size a view
  // inside a concatenation. Such a view is compiled at a stand-in width, and its
  // width signal (concat_I_width) is then made to follow the <div>'s width less
  // what usermeta.{fit} reserves beside it (its axis), on every resize, as
  // Vega-Lite's own "container" width does.
  var fit = (spec.usermeta || {{}})["{fit}"] || {{}};
  var fitted = [];
  var compiled = JSON.parse(JSON.stringify(spec));
  (compiled.vconcat || []).forEach(function (part, i) {{
    if (part.width === "container") {{
      part.width = fit.min || 160;
      fitted.push("concat_" + i + "_width");
    }}
  }});
  var columnWidth =
    "max(" + (fit.min || 160) + ", (isFinite(containerSize()[0]) ? " +
    "containerSize()[0] : 0) - " + (fit.reserve || 0) + ")";
  function patch(vega) {{
    (vega.signals || []).forEach(function (signal) {{
      if (fitted.indexOf(signal.name) < 0) return;
      delete signal.value;
      signal.init = columnWidth;
      signal.on = [{{"events": "window:resize", "update": columnWidth}}];
    }});
    return vega;
  }}
  function embed() {{
    var element = document.getElementById("{id}");
    // a block as wide as the column (vega-embed makes it an inline-block, which
    // would shrink to its chart), no wider than the figure reads well
    element.style.display = "block";
    element.style.width = "100%";
    if (fit.max_width) element.style.maxWidth = fit.max_width + "px";
    var options = {{"actions": false, "patch": patch}};
    return vegaEmbed("#{id}", compiled, options).then(function (result) {{
      follow(result.view);
    }});
  }}
  function draw() {{
    // the libraries are loaded once per page, however many figures it has
    window.peVegaReady = window.peVegaReady || load();
    window.peVegaReady.then(
      function () {{
        embed();
      }},
      function (src) {{
        document.getElementById("{id}").textContent =
          "This interactive figure needs Vega, which did not load from " + src +
          "; the still figures beside it show the same ideas.";
      }}
    );
  }}
  // in the book, wait for the page's own scripts (pe-vega.js among them)
  if (document.readyState === "loading") {{
    document.addEventListener("DOMContentLoaded", draw);
  }} else {{
    draw();
  }}
}})();
</script>"""


def figure_html(chart, *, name: str) -> str:
    """The chart as HTML for a notebook's output: a ``<div>`` and its loader.

    ``chart`` is an Altair chart or a Vega-Lite spec (a dict). ``name`` makes
    the ``<div>``'s id (with a hash of the spec, so the same figure gives the
    same output on every run, as the execution cache wants).
    """
    spec = dict(chart if isinstance(chart, Mapping) else chart.to_dict())
    # text as large as the page's figures (Vega's defaults are 10 and 11 px)
    spec["config"] = {**READABLE_TEXT, **spec.get("config", {})}
    text = json.dumps(spec, sort_keys=True)
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return _LOADER.format(
        id=f"pe-vis-{name}-{digest}",
        fit=FIT,
        follows=SLIDER_FOLLOWS,
        spec=text,
        libs=json.dumps(list(VENDORED.items())),
        cdn=CDN,
    )


def show(chart, *, name: str) -> None:
    """Display the chart in a notebook (the book, Jupyter, Colab): ``figure_html``."""
    from IPython.display import HTML, display

    display(HTML(figure_html(chart, name=name)))


_FUNCTIONS = {
    "min": min,
    "max": max,
    "sin": math.sin,
    "cos": math.cos,
    "pow": pow,
    "PI": math.pi,
    "abs": abs,
    "floor": math.floor,
    "log": math.log,
}


class _Datum:
    def __init__(self, fields: Mapping[str, float]):
        self.__dict__.update(fields)


def evaluate(expression: str, datum: Mapping[str, float], **params: float) -> float:
    """Run a figure's Vega expression in Python, on one datum with the sliders at ``params``.

    Only for the subset the figures use (arithmetic, comparisons, ``[...]``
    indexing, ``min``, ``max``, ``abs``, ``floor``, ``log``, ``sin``, ``cos``,
    ``pow``, ``PI``,
    ``datum.<field>``, parameter names),
    which means the same in Vega and in Python; it is how the tests hold the
    browser's numbers against the package's.
    """
    scope = {"__builtins__": {}, **_FUNCTIONS, "datum": _Datum(datum), **params}
    return float(eval(expression, scope))  # noqa: S307  (the package's own strings)


def column_fit(max_width: int, **usermeta) -> dict:
    """The properties that size a single or layered view to the text column.

    Its width is the figure's ``<div>`` (``COLUMN_WIDTH``: axes, legend and
    all fit inside), which grows no wider than ``max_width`` px; ``usermeta``
    adds the figure's other entries (a slider that follows another).
    """
    return {**COLUMN_WIDTH, "usermeta": {FIT: {"max_width": max_width}, **usermeta}}


def number_list(values) -> str:
    """A Vega (and Python) array literal of floats, exact to float32's digits."""
    return "[" + ",".join(f"{float(v):.9g}" for v in values) + "]"
