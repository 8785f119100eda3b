"""Open every built page in headless Chromium and check what a reader gets (issue 11).

    python tools/check_pages.py [_build/html]

For each page of the book (``index.html`` and ``book/*.html``):

- the math rendered offline: MathJax's output (``mjx-container``) is in the
  page Chromium built, and no raw TeX delimiters (``\\(``, ``\\[``, ``$$``,
  ``\\begin{``) are left in its visible text;
- every image loads: each ``<img src>`` is a file of the build (or a data URI);
- internal links resolve: each relative ``href`` names a file of the build,
  and its ``#anchor``, if any, is an ``id`` in that file;
- the page logged no console errors (an uncaught exception, a resource that
  failed to load);
- every interactive figure (``pe_tutorial.pages.interactive``, a ``<div>`` with an
  id ``pe-vis-...``) rendered: Vega put an ``<svg>`` or a ``<canvas>`` in it;
- no request left the page: Chromium runs with every host name unresolvable,
  so a script, style or image fetched from the network fails to load, and the
  failure is a console error;
- the page reads on a phone: loaded in a true 390 px viewport, every figure is
  shown whole in the column with its text about 8 px or more, no display
  equation or table is wider than the column, a box that scrolls sideways says
  so, nothing else sticks out, and display math keeps its tall glyphs
  (``tools/phone_check.py``).

With ``--install`` (as ``make check-pages`` runs it), a missing browser is
installed first: Debian's ``chromium`` package through ``apt-get``, as root or
through password-less ``sudo`` (issue 19: a new machine has no browser). When
that cannot be done, one line names the command to run. Without a browser the
check says so and exits 0, unless ``CI=true``: there a missing browser fails, so
CI cannot skip the check by accident. ``--browser-only`` stops there (``make
browser``: the browser installed once, before the checks that share it start).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import phone_check

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
RAW_TEX = re.compile(r"\\\(|\\\[|\$\$|\\begin\{")
CONSOLE = re.compile(r":CONSOLE[^\]]*\] \"(.*)\", source: (\S+)")
CONSOLE_ERROR = re.compile(
    r"^(Uncaught|Failed to load|Error|TypeError|ReferenceError|SyntaxError)"
)


# What a reader runs by hand where the check cannot install a browser itself.
INSTALL_HINT = (
    "sudo apt-get install -y chromium (Debian; on Ubuntu or macOS install Google "
    "Chrome), then make check-pages"
)


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def apt_prefix() -> list[str] | None:
    """How to run apt-get here: directly as root, through sudo without a password, or not."""
    if shutil.which("apt-get") is None:
        return None
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and (
        subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0
    ):
        return ["sudo", "-n"]
    return None


def install_browser(run=subprocess.run) -> tuple[str | None, str]:
    """Install Debian's chromium where apt-get can; the browser found, and what happened."""
    prefix = apt_prefix()
    if prefix is None:
        return None, "cannot install one here (no apt-get, or not root)"
    print("no browser for the page check: installing Debian's chromium (apt-get)...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
    ):
        done = run([*prefix, *command], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            last = (done.stderr or done.stdout or "").strip().splitlines()[-1:]
            return None, f"`{' '.join(command)}` failed: {' '.join(last)}"
    browser = find_browser()
    return browser, "installed" if browser else "apt-get installed no chromium"


class _Page(HTMLParser):
    """Visible text (outside code, scripts and rendered math), images, links and ids."""

    SKIP = {"script", "style", "pre", "code", "mjx-container", "textarea", "kbd"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text, self.images, self.links, self.ids = [], [], [], set()
        self.math = 0
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "mjx-container":
            self.math += 1
        if tag in self.SKIP:
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def render(
    browser: str,
    page: Path | str,
    *,
    host_rules: str = "MAP * ~NOTFOUND",
    extra: tuple[str, ...] = (),
) -> tuple[str, list[str]]:
    """The DOM after scripts ran (MathJax included), and the console messages.

    ``page`` is a file or a URL. ``host_rules`` is Chromium's host resolver
    rules: by default every host is unresolvable, so any request off the page
    fails, and says so on the console.
    """
    url = page.resolve().as_uri() if isinstance(page, Path) else page
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                f"--host-resolver-rules={host_rules}",
                *extra,
                "--virtual-time-budget=15000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    return done.stdout, CONSOLE.findall(done.stderr)


INTERACTIVE = re.compile(r'<div id="(pe-vis-[^"]+)"')


def interactive_problems(static: str, dom: str) -> list[str]:
    """The interactive figures of the page (written in ``static``) that Vega did not
    draw in the rendered ``dom``: no ``<svg>`` or ``<canvas>`` inside their div."""
    problems = []
    for figure in INTERACTIVE.findall(static):
        drawn = re.search(
            rf'<div id="{re.escape(figure)}"[^>]*>\s*(<[^/>][^>]*>\s*)*?<(svg|canvas)\b',
            dom,
        )
        if not drawn:
            problems.append(f"interactive figure {figure} did not render")
    return problems


def _ids_of(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        cache[path] = parse(path.read_text(errors="replace")).ids
    return cache[path]


def check_page(browser: str, site: Path, page: Path, ids_cache: dict) -> list[str]:
    problems = []
    static = page.read_text(errors="replace")
    written = parse(static)
    dom, console = render(browser, page)
    if not dom.strip():
        return [f"{page.name}: the browser returned no page"]
    rendered = parse(dom)
    has_math = 'class="math' in static
    if has_math and rendered.math == 0:
        problems.append("math did not render: no MathJax output in the page")
    raw = RAW_TEX.search(" ".join(rendered.text))
    if raw:
        text = " ".join(rendered.text)
        problems.append(
            f"raw TeX left in the text: ...{text[max(0, raw.start() - 40) : raw.end() + 40]!r}"
        )
    for src in written.images:
        if src.startswith("data:"):
            continue
        parts = urlsplit(src)
        if parts.scheme:
            problems.append(f"image from the network (not in the build): {src}")
            continue
        if not (page.parent / unquote(parts.path)).resolve().is_file():
            problems.append(f"image does not load: {src}")
    for href in written.links:
        parts = urlsplit(href)
        if parts.scheme or href.startswith(("mailto:", "javascript:")):
            continue
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"broken link: {href}")
        elif (
            parts.fragment
            and target.suffix == ".html"
            and parts.fragment not in _ids_of(target, ids_cache)
        ):
            problems.append(f"link to a missing anchor: {href}")
    problems.extend(interactive_problems(static, dom))
    problems.extend(phone_check.problems(phone_check.layout(render, browser, page)))
    for message, source in console:
        if CONSOLE_ERROR.match(message):
            problems.append(f"console error: {message} ({source})")
    return [f"{page.relative_to(site)}: {p}" for p in dict.fromkeys(problems)]


def pages(site: Path) -> list[Path]:
    return [
        p
        for p in [site / "index.html", *sorted((site / "book").glob("*.html"))]
        if p.is_file()
    ]


def browser_for(check: str, install: bool) -> tuple[str | None, int]:
    """A browser to run ``check`` in, installed first if ``install`` and missing;
    without one, (None, the exit code): it says so and skips, or fails under
    ``CI=true``, so CI cannot skip a check by accident."""
    browser = find_browser()
    why = "not asked to install one (--install)"
    if browser is None and install:
        browser, why = install_browser()
    if browser is not None:
        return browser, 0
    message = (
        f"no browser found ({', '.join(BROWSERS)}) and {why}: "
        f"{check} did not run; run {INSTALL_HINT}"
    )
    if os.environ.get("CI", "").lower() == "true":
        print(f"error: {message}; CI=true, so this fails", file=sys.stderr)
        return None, 1
    print(f"skipped: {message}")
    return None, 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    install = "--install" in args
    browser_only = "--browser-only" in args
    args = [a for a in args if a not in ("--install", "--browser-only")]
    site = Path(args[0]) if args else ROOT / "_build" / "html"
    browser, code = browser_for("the page check", install)
    if browser is None or browser_only:
        return code
    found = pages(site)
    if not found:
        print(f"error: no built pages under {site}: run make book", file=sys.stderr)
        return 1
    ids_cache: dict = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(lambda p: check_page(browser, site, p, ids_cache), found)
        )
    problems = [p for result in results for p in result]
    for problem in problems:
        print(problem)
    print(
        f"{len(found)} pages checked in {Path(browser).name}: {len(problems)} problems"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
