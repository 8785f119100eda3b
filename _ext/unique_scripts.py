"""Drop repeated inline scripts from every built page.

sphinx-thebe adds its inline configuration script (``const THEBE_JS_URL =
...``) each time Sphinx is about to read sources; in Jupyter Book's build that
happens twice, so every page declared the constant twice and the browser
logged ``SyntaxError: Identifier 'THEBE_JS_URL' has already been declared``
(tools/check_pages.py caught it). When the build finishes, each page keeps the
first copy of every inline ``<script>`` line and drops the repeats.
"""

from __future__ import annotations

import re
from pathlib import Path

INLINE_SCRIPT = re.compile(r"^\s*<script>.*</script>\s*$")


def unique_inline_scripts(html: str) -> str:
    seen, kept = set(), []
    for line in html.splitlines(keepends=True):
        if INLINE_SCRIPT.match(line):
            if line.strip() in seen:
                continue
            seen.add(line.strip())
        kept.append(line)
    return "".join(kept)


def _rewrite(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = unique_inline_scripts(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
