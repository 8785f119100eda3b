"""A built page as a phone shows it: a true 390 px viewport (issue 50).

Headless Chromium will not make its window narrower than 500 px, so the page
is loaded in an ``<iframe>`` 390 px wide (its own viewport: the page's media
queries see 390) inside a 500 px window, and a script in the outer page reads
the inner one's layout once MathJax has drawn it. It reports:

- the page scrolling sideways as a whole (wider than the viewport);
- anything in the article that reaches past the viewport's edge and is not
  inside a box that scrolls sideways within it (a box that only clips hides
  it): a long display equation, a table, an interactive figure, an output
  that does not wrap;
- display math whose own box cuts its glyphs off at the top or bottom (a box
  that scrolls sideways must still hold a tall symbol such as the top of ⊤);
- figures shown so small that their smallest text (``MIN_TEXT_PT``, the
  least the book's figures use, at the resolution they are saved at) would be
  under ``MIN_TEXT_PX`` pixels.

``tools/check_pages.py`` runs it on every page beside its other checks.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
from pathlib import Path

PHONE_WIDTH = 390
# the least text a reader can make out on a phone, in CSS pixels
MIN_TEXT_PX = 9.0
# the smallest text a figure of the book uses (tests/test_project.py holds
# every figure to at least 10 pt) and the resolution figures are saved at
MIN_TEXT_PT = 10.0
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
  window.addEventListener("load", function () {
    setTimeout(function () {
      var frame = document.getElementById("page");
      var doc = frame.contentDocument, win = frame.contentWindow;
      if (!doc) { finish({error: "the page could not be read"}); return; }
      var width = win.innerWidth;
      var result = {width: width, pageWidth: doc.scrollingElement.scrollWidth,
                    sticking: [], clipped: [], figures: []};
      var root = doc.querySelector("article") || doc.querySelector("main") || doc.body;
      var marked = [];
      function inside(el, boxes) {
        for (var a = el.parentElement; a && a !== root.parentElement; a = a.parentElement)
          if (boxes.indexOf(a) >= 0) return true;
        return false;
      }
      function boxed(el) {  // inside a box that scrolls sideways, and fits
        for (var a = el.parentElement; a && a !== root.parentElement; a = a.parentElement) {
          var overflow = win.getComputedStyle(a).overflowX;
          if (overflow === "auto" || overflow === "scroll") {
            var box = a.getBoundingClientRect();
            if (box.right <= width + 1 && box.left >= -1) return true;
          }
        }
        return false;
      }
      var all = root.querySelectorAll("*");
      for (var i = 0; i < all.length; i++) {
        var el = all[i], r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        if (r.right <= width + 1 && r.left >= -1) continue;
        // MathJax's copy for screen readers: drawn nowhere
        if (el.closest("mjx-assistive-mml")) continue;
        if (inside(el, marked) || boxed(el)) continue;
        marked.push(el);
        result.sticking.push(describe(el) + " reaches " + Math.round(r.right) + " px");
      }
      // display math in a box that does not show all of its height: a box
      // that scrolls sideways scrolls (or clips) vertically too
      var maths = root.querySelectorAll("mjx-container[display='true']");
      for (var j = 0; j < maths.length; j++) {
        for (var b = maths[j], up = 0; b && up < 3; b = b.parentElement, up++) {
          if (win.getComputedStyle(b).overflowY !== "visible") {
            if (b.scrollHeight > b.clientHeight + 1) result.clipped.push(describe(maths[j]));
            break;
          }
        }
      }
      var images = root.querySelectorAll("img");
      for (var k = 0; k < images.length; k++) {
        var img = images[k];
        if (!img.naturalWidth) continue;
        result.figures.push({src: img.getAttribute("src"), natural: img.naturalWidth,
                             shown: img.getBoundingClientRect().width});
      }
      finish(result);
    }, %(wait)d);
  });
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
            extra=("--allow-file-access-from-files", "--window-size=500,1000"),
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
    found += [f"phone: display math cut off in its box: {s}" for s in report["clipped"]]
    smallest = MIN_TEXT_PT * FIGURE_DPI / 72
    for figure in report["figures"]:
        scale = figure["shown"] / figure["natural"]
        if smallest * scale < MIN_TEXT_PX:
            found.append(
                f"phone: figure text {smallest * scale:.1f} px, under "
                f"{MIN_TEXT_PX:.0f}: {Path(figure['src']).name} shown at "
                f"{figure['shown']:.0f} of its {figure['natural']} px"
            )
    return found
