"""Drop repeated inline scripts from every page.

sphinx-thebe registers its inline configuration script (``const THEBE_JS_URL =
...``) each time Sphinx reads the sources; Jupyter Book reads them more than
once, so pages declared the constant twice and the browser logged
``SyntaxError: Identifier 'THEBE_JS_URL' has already been declared``
(tools/check_pages.py caught it).
"""

from __future__ import annotations


def _unique(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = (str(script), getattr(script, "attributes", {}).get("body"))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def setup(app):
    app.connect("html-page-context", _unique, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
