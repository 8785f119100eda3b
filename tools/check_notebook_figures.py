"""The interactive figures as a notebook shows them, in headless Chromium (issue 25).

    python tools/check_notebook_figures.py [--install] [NOTEBOOK ...]

(default: the executed chapters, ``_build/jupyter_execute/book/*.ipynb``.)

In the built book a figure's loader takes Vega from the site's own ``vega/``
folder (``_static/pe-vega.js`` names it); ``tools/check_pages.py`` checks that
with the network off. A notebook has no such folder: there the loader takes
Vega from the CDN (``pe_tutorial.pages.interactive.CDN``). This check shows every
figure output of the notebooks the way three front ends do:

- **Colab**: the output alone, as the document of its own frame on another
  host, whose unknown paths answer 404;
- **JupyterLab**: all the notebook's figure outputs in one page, on a server
  that answers any unknown path with its HTML page and status 200 (as
  ``/lab/tree/...`` does);
- **classic Notebook**: as JupyterLab, with RequireJS's ``define`` on the page,
  which would otherwise take the libraries as AMD modules and leave no globals.

The CDN's host is mapped to a local HTTPS server (a self-signed certificate
for tests, ``tools/fixtures/test-cdn-cert.pem``, that Chromium is told to
accept) serving the vendored files at their CDN paths; every other host is
unresolvable. A figure passes when Vega drew an ``<svg>`` or ``<canvas>`` in
its ``<div>``, the page logged no console error, and the CDN was asked for
exactly the three pinned libraries. Without a browser the check says so and
exits 0, unless ``CI=true`` (as ``tools/check_pages.py``).
"""

from __future__ import annotations

import json
import re
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_pages  # noqa: E402

ROOT = check_pages.ROOT
VENDOR = ROOT / "_vendor" / "vega"
CERTIFICATE = ROOT / "tools" / "fixtures" / "test-cdn-cert.pem"
FIGURE = re.compile(r'<div id="pe-vis-[^"]+" class="pe-interactive">')
REQUIRE_JS = "<script>window.define = function () {}; window.define.amd = {};</script>"


def vendored() -> tuple[str, dict[str, str]]:
    """The CDN's host, and the CDN path of each vendored library."""
    sys.path.insert(0, str(ROOT))
    from pe_tutorial.pages import interactive

    cdn = urlsplit(interactive.CDN)
    paths = {
        f"{cdn.path}/{lib}@{version}/build/{lib}.min.js": lib
        for lib, version in interactive.VENDORED.items()
    }
    return cdn.hostname, paths


def figure_outputs(notebook: Path) -> list[str]:
    """The HTML of each interactive figure the notebook's outputs hold."""
    found = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            if FIGURE.search(html):
                found.append(html)
    return found


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _cdn_handler(paths: dict[str, str], asked: list[str]):
    class Handler(_Quiet):
        def do_GET(self):
            asked.append(self.path)
            lib = paths.get(self.path)
            if lib is None:
                self.send_error(404)
                return
            body = (VENDOR / f"{lib}.min.js").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _page_handler(pages: dict[str, str]):
    """Serves ``pages`` by path; an unknown path is a 404, or with a page at
    ``"*"`` (a JupyterLab-like server) that page with status 200."""

    class Handler(_Quiet):
        def do_GET(self):
            body = pages.get(urlsplit(self.path).path, pages.get("*"))
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _serve(handler, certificate: Path | None = None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if certificate is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _document(body: str, head: str = "") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"


def views(notebook: Path, outputs: list[str]) -> list[tuple[str, str, dict, str]]:
    """(front end, path, the server's pages, the figures' HTML) for each page to open."""
    stem = notebook.stem
    lab = _document("".join(outputs))
    found = [
        (
            f"Colab, output {i + 1}",
            f"/outputframe/{stem}-{i + 1}.html",
            {f"/outputframe/{stem}-{i + 1}.html": _document(html)},
            html,
        )
        for i, html in enumerate(outputs)
    ]
    found.append(
        ("JupyterLab", f"/lab/tree/book/{stem}.ipynb", {"*": lab}, "".join(outputs))
    )
    found.append(
        (
            "classic Notebook (RequireJS)",
            f"/notebooks/book/{stem}.ipynb",
            {f"/notebooks/book/{stem}.ipynb": _document("".join(outputs), REQUIRE_JS)},
            "".join(outputs),
        )
    )
    return found


def check(browser: str, notebooks: list[Path]) -> tuple[int, list[str]]:
    """The number of pages opened, and the problems found."""
    host, paths = vendored()
    problems, opened = [], 0
    for notebook in notebooks:
        outputs = figure_outputs(notebook)
        if not outputs:
            continue

        def one(view, notebook=notebook):
            front_end, path, pages, html = view
            asked: list[str] = []
            cdn = _serve(_cdn_handler(paths, asked), CERTIFICATE)
            site = _serve(_page_handler(pages))
            rules = (
                f"MAP {host} 127.0.0.1:{cdn.server_address[1]}, "
                f"MAP notebook.test 127.0.0.1:{site.server_address[1]}, "
                "MAP * ~NOTFOUND"
            )
            try:
                dom, console = check_pages.render(
                    browser,
                    f"http://notebook.test{path}",
                    host_rules=rules,
                    extra=("--ignore-certificate-errors",),
                )
            finally:
                cdn.shutdown()
                site.shutdown()
            found = check_pages.interactive_problems(html, dom)
            found += [
                f"console error: {message} ({source})"
                for message, source in console
                if check_pages.CONSOLE_ERROR.match(message)
            ]
            if sorted(asked) != sorted(paths):
                found.append(f"the CDN was asked for {asked}, not {sorted(paths)}")
            return [f"{notebook.name}, {front_end}: {p}" for p in found]

        pages = views(notebook, outputs)
        opened += len(pages)
        with ThreadPoolExecutor(max_workers=2) as pool:
            for found in pool.map(one, pages):
                problems.extend(found)
    return opened, problems


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    install = "--install" in args
    args = [a for a in args if a != "--install"]
    notebooks = [Path(a) for a in args] or sorted(
        (ROOT / "_build" / "jupyter_execute" / "book").glob("*.ipynb")
    )
    browser, code = check_pages.browser_for("the notebook figure check", install)
    if browser is None:
        return code
    if not any(figure_outputs(n) for n in notebooks if n.is_file()):
        print(
            "error: no interactive figure in the notebooks' outputs: run make book",
            file=sys.stderr,
        )
        return 1
    opened, problems = check(browser, [n for n in notebooks if n.is_file()])
    for problem in problems:
        print(problem)
    print(
        f"{opened} notebook pages (Colab, JupyterLab, classic Notebook) checked in "
        f"{Path(browser).name}: {len(problems)} problems"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
