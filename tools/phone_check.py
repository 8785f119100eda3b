"""A built page as a phone shows it: a true 390 px viewport (issue 50).

Headless Chromium will not make its window narrower than 500 px, so the page
is loaded in an ``<iframe>`` 390 px wide (its own viewport: the page's media
queries see 390) inside a 500 px window, and a script in the outer page reads
the inner one's layout once MathJax has drawn it, with every folded solution and
code toggle opened (a reader can open them). It reports (issue 67):

- the page scrolling sideways as a whole (wider than the viewport);
- a figure image not shown whole in the column: wider than it, or inside a
  box that scrolls sideways (a phone reader sees its left part only);
- figure text too small: the smallest text the book's figures set
  (``MIN_TEXT_PT``, at the resolution they are saved at) shown under
  ``MIN_TEXT_PX`` CSS pixels;
- display math wider than the column or the box it sits in (a solution's),
  whether or not a box around it scrolls: a long equation is broken into
  aligned lines;
- a table wider than the column that neither stacks (``_static/
  phone-tables.js``) nor scrolls in a box that says so;
- a box that scrolls sideways (a code cell, a printed table) without the
  visible cue ``_static/scroll-cues.js`` adds ("scroll sideways for more");
- anything else in the article that reaches past the viewport's edge outside
  such a cued box (an interactive figure, an output that does not wrap);
- display math whose own box cuts its glyphs off at the top or bottom.

``tools/check_pages.py`` runs it on every page beside its other checks.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
from pathlib import Path

PHONE_WIDTH = 390
# the least figure text a reader can make out on a phone, in CSS pixels
MIN_TEXT_PX = 8.0
# the smallest text a figure of the book uses (pe_tutorial.pages.plots'
# MIN_FONT_PT: tests/test_project.py holds every figure to it) and the
# resolution figures are saved at
MIN_TEXT_PT = 11.0
FIGURE_DPI = 100.0
# how long the probe waits after the page loaded (MathJax, the figures' script)
WAIT_MS = 6000

PROBE = """
(function () {
  function finish(result) {
    var pre = document.createElement("pre");
    pre.id = "phone-report";
    pre.textContent = JSON.stringify(result);
    document.body.appendChild(pre);
  }
  function describe(el) {
    var name = el.tagName.toLowerCase();
    if (el.id) name += "#" + el.id;
    if (typeof el.className === "string" && el.className.trim())
      name += "." + el.className.trim().split(/\\s+/).slice(0, 2).join(".");
    var text = (el.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 60);
    return text ? name + ' "' + text + '"' : name;
  }
  function reveal(doc, win) {
    // what a reader can open: folded solutions (sphinx-togglebutton) and
    // "show code" toggles; the page's scripts see a resize and fit again
    doc.querySelectorAll(".toggle-hidden").forEach(function (el) {
      el.classList.remove("toggle-hidden");
    });
    doc.querySelectorAll("details").forEach(function (el) { el.open = true; });
    win.dispatchEvent(new win.Event("resize"));
  }
  window.addEventListener("load", function () {
    setTimeout(function () {
      var frame = document.getElementById("page");
      var doc = frame.contentDocument, win = frame.contentWindow;
      if (!doc) { finish({error: "the page could not be read"}); return; }
      reveal(doc, win);
      setTimeout(function () { measure(doc, win); }, 500);
    }, %(wait)d);
  });
  function measure(doc, win) {
      var width = win.innerWidth;
      var result = {width: width, pageWidth: doc.scrollingElement.scrollWidth,
                    sticking: [], clipped: [], figures: [], uncued: [],
                    wideMath: [], wideTables: []};
      var root = doc.querySelector("article") || doc.querySelector("main") || doc.body;
      var style = win.getComputedStyle(root);
      var area = root.getBoundingClientRect();
      var left = area.left + parseFloat(style.paddingLeft);
      var right = area.right - parseFloat(style.paddingRight);
      result.column = Math.round(right - left);
      function scrolls(el) {  // a box that scrolls sideways, and has more to show
        var overflow = win.getComputedStyle(el).overflowX;
        return (overflow === "auto" || overflow === "scroll") &&
          el.scrollWidth > el.clientWidth + 1;
      }
      function cued(box) {  // scroll-cues.js marked it and put its line above it
        var note = box.previousElementSibling;
        return box.classList.contains("pe-scrolls") && note !== null &&
          note.classList.contains("pe-scroll-cue") &&
          note.getBoundingClientRect().height > 0;
      }
      function scroller(el) {  // the nearest box around el that scrolls sideways
        for (var a = el.parentElement; a && a !== root.parentElement; a = a.parentElement)
          if (scrolls(a)) return a;
        return null;
      }
      var marked = [];
      function inside(el, boxes) {
        for (var a = el.parentElement; a && a !== root.parentElement; a = a.parentElement)
          if (boxes.indexOf(a) >= 0) return true;
        return false;
      }
      // the article, and the links to the previous and next pages under it
      var footer = doc.querySelector(".prev-next-area");
      var all = Array.prototype.slice.call(root.querySelectorAll("*")).concat(
        footer ? Array.prototype.slice.call(footer.querySelectorAll("*")) : []);
      for (var i = 0; i < all.length; i++) {
        var el = all[i];
        if (el.closest("mjx-assistive-mml")) continue;  // drawn nowhere
        if (scrolls(el) && !el.closest("mjx-container") && !cued(el))
          result.uncued.push(describe(el));
        var r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        if (r.right <= width + 1 && r.left >= -1) continue;
        var box = scroller(el);
        if (inside(el, marked) || (box && cued(box))) continue;
        marked.push(el);
        result.sticking.push(describe(el) + " reaches " + Math.round(r.right) + " px");
      }
      // display math: wider than the column or the box it sits in (a
      // solution's, an admonition's), whether or not that box scrolls, or cut
      // off at the top or bottom by a box around it
      var maths = root.querySelectorAll("mjx-container[display='true']");
      for (var j = 0; j < maths.length; j++) {
        var math = maths[j].querySelector("mjx-math") || maths[j];
        var drawn = math.getBoundingClientRect().width;
        var room = Math.min(right - left, maths[j].clientWidth || right - left);
        if (drawn > room + 1)
          result.wideMath.push(describe(maths[j]) + " is " + Math.round(drawn) +
                               " px in " + Math.round(room));
        for (var b = maths[j], up = 0; b && up < 3; b = b.parentElement, up++) {
          if (win.getComputedStyle(b).overflowY !== "visible") {
            if (b.scrollHeight > b.clientHeight + 1) result.clipped.push(describe(maths[j]));
            break;
          }
        }
      }
      // a table wider than the column that neither stacked nor scrolls with a cue
      var tables = root.querySelectorAll("table");
      for (var t = 0; t < tables.length; t++) {
        var tr = tables[t].getBoundingClientRect();
        if (tr.width <= right - left + 1) continue;
        var holder = scroller(tables[t]);
        if (!(holder && cued(holder)))
          result.wideTables.push(describe(tables[t]).slice(0, 80) + " is " +
                                 Math.round(tr.width) + " px");
      }
      var images = root.querySelectorAll("img");
      for (var k = 0; k < images.length; k++) {
        var img = images[k];
        if (!img.naturalWidth) continue;
        var shown = img.getBoundingClientRect();
        result.figures.push({src: img.getAttribute("src"), natural: img.naturalWidth,
                             shown: shown.width,
                             whole: shown.left >= left - 1 && shown.right <= right + 1,
                             scrolls: scroller(img) !== null});
      }
      finish(result);
  }
})();
"""

WRAPPER = (
    '<!DOCTYPE html><html><body style="margin:0">'
    '<iframe id="page" src="%(url)s" style="width:%(width)dpx;height:900px;border:0">'
    "</iframe><script>%(probe)s</script></body></html>"
)

REPORT = re.compile(r'<pre id="phone-report">(.*?)</pre>', re.S)


def layout(render, browser: str, page: Path, *, width: int = PHONE_WIDTH):
    """What the probe read of ``page`` in a viewport ``width`` px wide (a dict),
    or None when the browser returned no report. ``render`` is
    ``check_pages.render``: the same Chromium, offline, that dumps the DOM
    after scripts ran (its virtual time outlasts the probe's wait)."""
    probe = PROBE % {"wait": WAIT_MS}
    with tempfile.TemporaryDirectory() as folder:
        wrapper = Path(folder) / "phone.html"
        wrapper.write_text(
            WRAPPER % {"url": page.resolve().as_uri(), "width": width, "probe": probe}
        )
        dom, _ = render(
            browser,
            wrapper,
            # scrollbars drawn over the page, as a phone's are: the column is
            # then the 358 px a phone gives it, not 15 px less
            extra=(
                "--allow-file-access-from-files",
                "--window-size=500,1000",
                "--hide-scrollbars",
            ),
        )
    found = REPORT.search(dom)
    return None if found is None else json.loads(html.unescape(found.group(1)))


def problems(report: dict | None) -> list[str]:
    """The report's problems, one line each."""
    if report is None:
        return ["phone: the browser returned no layout report"]
    if "error" in report:
        return [f"phone: {report['error']}"]
    found = []
    width = report["width"]
    if report["pageWidth"] > width + 1:
        found.append(
            f"phone: the page scrolls sideways ({report['pageWidth']} px wide in a "
            f"{width} px viewport)"
        )
    found += [f"phone: sticks out of the viewport: {s}" for s in report["sticking"]]
    found += [
        f"phone: scrolls sideways with no cue (_static/scroll-cues.js): {s}"
        for s in report["uncued"]
    ]
    found += [
        f"phone: display math wider than the {report['column']} px column (break it "
        f"into aligned lines): {s}"
        for s in report["wideMath"]
    ]
    found += [
        f"phone: a table wider than the {report['column']} px column: {s}"
        for s in report["wideTables"]
    ]
    found += [f"phone: display math cut off in its box: {s}" for s in report["clipped"]]
    smallest = MIN_TEXT_PT * FIGURE_DPI / 72
    for figure in report["figures"]:
        name = Path(figure["src"]).name
        if figure["scrolls"] or not figure["whole"]:
            found.append(
                f"phone: figure not shown whole in the {report['column']} px column "
                f"({'in a box that scrolls sideways' if figure['scrolls'] else 'cut'}"
                f"): {name} shown at {figure['shown']:.0f} px"
            )
        scale = min(1.0, figure["shown"] / figure["natural"])
        if smallest * scale < MIN_TEXT_PX:
            found.append(
                f"phone: figure text {smallest * scale:.1f} px, under "
                f"{MIN_TEXT_PX:g}: {name} shown at {figure['shown']:.0f} of its "
                f"{figure['natural']} px (draw it at most pe.FIGURE_WIDTH inches "
                "wide, its legend under the axes)"
            )
    return found
