"""The checks `make test` runs on the built book: stored outputs for nbval
(tools/check_executed.py) and the browser the page check needs (tools/check_pages.py).

Issue 19: on a new machine the page check found no browser, and nothing showed
that nbval had stored outputs to compare against.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_executed  # noqa: E402
import check_notebook_figures  # noqa: E402
import check_pages  # noqa: E402
import execute_notebooks  # noqa: E402
from test_project import dry_run, needs_make, run_nbval, toc_files  # noqa: E402

TAG = "nbval-check-output"


def notebook_with(*cells) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = list(cells)
    return notebook


def tagged(source: str, *, executed: bool, printed: str | None):
    cell = nbformat.v4.new_code_cell(source, execution_count=1 if executed else None)
    cell.metadata["tags"] = [TAG]
    if printed is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    return cell


def write(folder: Path, name: str, notebook) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, folder / name)
    return folder / name


# --- stored outputs ------------------------------------------------------------------


def test_a_tagged_cell_with_its_output_passes(tmp_path, capsys):
    write(
        tmp_path,
        "ok.ipynb",
        notebook_with(tagged("print(1)", executed=True, printed="1\n")),
    )
    assert check_executed.main([str(tmp_path)]) == 0
    assert "1 cells tagged nbval-check-output in 1 executed notebooks: 0 without" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "cell, says",
    [
        (tagged("print(1)", executed=False, printed=None), "was not executed"),
        (tagged("print(1)", executed=True, printed=None), "has no stored output"),
    ],
    ids=["never run", "run without output"],
)
def test_a_tagged_cell_without_a_stored_output_fails(tmp_path, capsys, cell, says):
    untagged = nbformat.v4.new_code_cell("x = 1")
    write(tmp_path / "sub", "chapter.ipynb", notebook_with(untagged, cell))
    assert check_executed.main([str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"sub/chapter.ipynb, cell 1 ('print(1)') {says}" in err


def test_a_tagged_cell_that_stored_an_error_fails(tmp_path, capsys):
    cell = tagged("1/0", executed=True, printed=None)
    cell.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError")]
    write(tmp_path, "err.ipynb", notebook_with(cell))
    assert check_executed.main([str(tmp_path)]) == 1
    assert "stored an error" in capsys.readouterr().err


def test_no_executed_notebooks_is_an_error(tmp_path, capsys):
    assert check_executed.main([str(tmp_path)]) == 1
    assert "run make book" in capsys.readouterr().err


def test_nbval_alone_passes_a_tagged_cell_that_was_never_run(tmp_path):
    """Why the check exists: nbval skips the comparison for an unrun stored cell."""
    path = write(
        tmp_path,
        "unrun.ipynb",
        notebook_with(tagged('print("anything")', executed=False, printed=None)),
    )
    result = run_nbval(path)
    assert result.returncode == 0, result.stdout[-2000:]
    assert check_executed.main([str(tmp_path)]) == 1


@needs_make
def test_test_outputs_checks_the_stored_outputs_before_nbval():
    lines = dry_run("test-outputs").splitlines()
    checked = next(i for i, line in enumerate(lines) if "check_executed.py" in line)
    nbval = next(i for i, line in enumerate(lines) if "--nbval-lax" in line)
    assert checked < nbval
    assert "_build/jupyter_execute/book" in lines[checked]


# --- the browser ---------------------------------------------------------------------


@needs_make
def test_check_pages_installs_a_missing_browser():
    assert any(
        "check_pages.py --install" in line
        for line in dry_run("check-pages").splitlines()
    )


def no_browser(monkeypatch):
    monkeypatch.setattr(check_pages, "find_browser", lambda: None)


def test_without_a_browser_or_a_way_to_install_one_ci_fails_in_one_line(
    tmp_path, monkeypatch, capsys
):
    no_browser(monkeypatch)
    monkeypatch.setattr(check_pages, "apt_prefix", lambda: None)
    monkeypatch.setenv("CI", "true")
    assert check_pages.main(["--install", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "sudo apt-get install -y chromium" in err and "CI=true" in err


def test_without_a_browser_outside_ci_the_check_skips_and_says_what_to_run(
    tmp_path, monkeypatch, capsys
):
    no_browser(monkeypatch)
    monkeypatch.setattr(check_pages, "apt_prefix", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    assert check_pages.main(["--install", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("skipped:") and "apt-get install -y chromium" in out


class FakeApt:
    """Records the commands; `fail` names the one that exits 100."""

    def __init__(self, fail: str | None = None):
        self.commands, self.fail = [], fail

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        failed = self.fail is not None and self.fail in command
        return subprocess.CompletedProcess(
            command,
            100 if failed else 0,
            "",
            "E: Unable to locate package" if failed else "",
        )


def test_as_root_the_browser_is_installed_with_apt_get(monkeypatch):
    monkeypatch.setattr(check_pages, "apt_prefix", lambda: [])
    apt = FakeApt()
    monkeypatch.setattr(check_pages, "find_browser", lambda: "/usr/bin/chromium")
    browser, why = check_pages.install_browser(run=apt)
    assert browser == "/usr/bin/chromium" and why == "installed"
    assert apt.commands[0][:2] == ["apt-get", "update"]
    assert apt.commands[1][:2] == ["apt-get", "install"]
    assert apt.commands[1][-1] == "chromium"


def test_with_sudo_the_install_goes_through_it(monkeypatch):
    monkeypatch.setattr(check_pages, "apt_prefix", lambda: ["sudo", "-n"])
    monkeypatch.setattr(check_pages, "find_browser", lambda: "/usr/bin/chromium")
    apt = FakeApt()
    check_pages.install_browser(run=apt)
    assert all(command[:3] == ["sudo", "-n", "apt-get"] for command in apt.commands)


def test_a_failed_install_names_the_command_and_apt_gets_last_line(monkeypatch):
    monkeypatch.setattr(check_pages, "apt_prefix", lambda: [])
    no_browser(monkeypatch)
    browser, why = check_pages.install_browser(run=FakeApt(fail="install"))
    assert browser is None
    assert "apt-get install" in why and "Unable to locate package" in why


def test_apt_prefix_is_none_without_apt_get(monkeypatch):
    monkeypatch.setattr(check_pages.shutil, "which", lambda name: None)
    assert check_pages.apt_prefix() is None


# --- outputs of notebooks taken from the execution cache --------------------------------


def test_a_notebook_written_from_the_cache_gets_the_cached_outputs(tmp_path):
    """_ext/cached_outputs.py: the copy MyST-NB writes without outputs gets them back."""
    sys.path.insert(0, str(ROOT / "_ext"))
    import cached_outputs
    from jupyter_cache import get_cache

    executed = notebook_with(
        nbformat.v4.new_code_cell("x = 2"),
        tagged("print(x)", executed=True, printed="2\n"),
    )
    executed.cells[0].execution_count = 1
    executed.cells[1].execution_count = 2
    cached = write(tmp_path / "src", "chapter.ipynb", executed)
    get_cache(str(tmp_path / "cache")).cache_notebook_file(
        str(cached), check_validity=False
    )

    as_read = notebook_with(
        nbformat.v4.new_code_cell("x = 2"),
        tagged("print(x)", executed=False, printed=None),
    )
    written = write(tmp_path / "jupyter_execute", "chapter.ipynb", as_read)
    not_cached = write(
        tmp_path / "jupyter_execute",
        "other.ipynb",
        notebook_with(tagged("print(3)", executed=False, printed=None)),
    )
    assert check_executed.main([str(tmp_path / "jupyter_execute")]) == 1

    restored = cached_outputs.restore_outputs(
        tmp_path / "jupyter_execute", tmp_path / "cache"
    )
    assert restored == [written]
    cell = nbformat.read(written, as_version=4).cells[1]
    assert cell.execution_count == 2 and cell.outputs[0]["text"] == "2\n"
    assert nbformat.read(not_cached, as_version=4).cells[0].outputs == []
    not_cached.unlink()
    assert check_executed.main([str(tmp_path / "jupyter_execute")]) == 0


def test_the_book_build_loads_the_cached_outputs_extension():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"].get("cached_outputs") == "_ext"


def test_an_interactive_figure_counts_as_rendered_only_with_vega_output():
    static = '<p>x</p><div id="pe-vis-a-1234abcd" class="pe-interactive"></div>'
    drawn = (
        '<div id="pe-vis-a-1234abcd" class="pe-interactive vega-embed" role="x">'
        '<svg class="marks"></svg></div>'
    )
    empty = '<div id="pe-vis-a-1234abcd" class="pe-interactive"></div><svg></svg>'
    assert check_pages.interactive_problems(static, drawn) == []
    canvas = drawn.replace("<svg", "<canvas").replace("</svg>", "</canvas>")
    assert check_pages.interactive_problems(static, canvas) == []
    assert check_pages.interactive_problems(static, empty) == [
        "interactive figure pe-vis-a-1234abcd did not render"
    ]


# --- the figures as notebooks show them -----------------------------------------------


def test_the_notebook_figure_check_finds_each_figure_output(tmp_path):
    from pe_tutorial.pages import interactive

    figure = interactive.figure_html({"mark": "point"}, name="a")
    cell = nbformat.v4.new_code_cell("show()", execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": figure}),
        nbformat.v4.new_output("display_data", data={"text/html": "<p>table</p>"}),
        nbformat.v4.new_output("stream", name="stdout", text="printed"),
    ]
    path = write(tmp_path, "ch.ipynb", notebook_with(cell, cell))
    outputs = check_notebook_figures.figure_outputs(path)
    assert outputs == [figure, figure]
    views = check_notebook_figures.views(path, outputs)
    # each output alone as Colab frames it, then the whole page twice
    assert [v[0] for v in views] == [
        "Colab, output 1",
        "Colab, output 2",
        "JupyterLab",
        "classic Notebook (RequireJS)",
    ]
    colab, lab, classic = views[0], views[2], views[3]
    assert list(colab[2]) == [colab[1]]  # any other path of its host is a 404
    assert list(lab[2]) == ["*"]  # JupyterLab answers every path with its page
    assert "window.define.amd" in classic[2][classic[1]]


def test_the_cdn_paths_are_the_vendored_files():
    host, paths = check_notebook_figures.vendored()
    assert host == "cdn.jsdelivr.net"
    for path, lib in paths.items():
        assert (ROOT / "_vendor" / "vega" / f"{lib}.min.js").is_file()
        assert path.endswith(f"/build/{lib}.min.js")


@needs_make
def test_make_test_checks_the_notebook_figures():
    assert "tools/check_notebook_figures.py --install" in dry_run("test")


PHONE_PAGE = """<!DOCTYPE html><html><head>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>figure { margin: 0 0 1rem }  /* as the book theme sets it */
%(css)s</style></head>
<body style="margin:0"><main><article class="bd-article" style="padding:0 16px">
<p>Some text that wraps at any width, as a paragraph should.</p>
%(body)s
</article></main><script>%(js)s</script></body></html>"""


def _phone_problems(tmp_path, name: str, body: str) -> list[str]:
    """phone_check's problems for a page of ``body``, with the book's own phone
    stylesheet and scripts (_static/) on it."""
    import phone_check

    static = ROOT / "_static"
    page = tmp_path / f"{name}.html"
    page.write_text(
        PHONE_PAGE
        % {
            "css": (static / "phone.css").read_text(),
            "js": "\n".join(
                (static / f).read_text()
                for f in ("phone-figures.js", "phone-tables.js", "scroll-cues.js")
            ),
            "body": body,
        }
    )
    browser = check_pages.find_browser()
    return phone_check.problems(phone_check.layout(check_pages.render, browser, page))


_HEADS = "".join(f"<th>column number {i}</th>" for i in range(6))
_CELLS = "".join(f"<td>value {i} of the row</td>" for i in range(6))
WIDE_TABLE = (
    f"<table><thead><tr>{_HEADS}</tr></thead><tbody><tr>{_CELLS}</tr></tbody></table>"
)


@pytest.mark.skipif(check_pages.find_browser() is None, reason="needs Chromium")
def test_the_phone_check_fails_each_seeded_case_at_390_px(tmp_path):
    """Each thing a phone reader would miss, seeded alone (issue 67): a figure in
    a box that scrolls sideways, a figure shrunk until its text is unreadable, a
    display equation wider than the column (its box scrolls), one that fits the
    column but not the folded solution it sits in, a box that scrolls with no
    cue, and something wider than the column that does not scroll."""
    from PIL import Image

    Image.new("RGB", (800, 400), "white").save(tmp_path / "wide.png")
    Image.new("RGB", (600, 300), "white").save(tmp_path / "fits.png")
    seeded = {
        "scrolling figure": (
            '<figure style="overflow-x:auto">'
            '<img src="wide.png" style="width:560px;max-width:none"></figure>',
            "figure not shown whole",
        ),
        "shrunk figure": (
            '<figure><img src="wide.png"></figure>',
            "figure text",
        ),
        "wide equation": (
            '<div class="math" style="overflow-x:auto"><mjx-container display="true"'
            ' style="display:block"><mjx-math style="display:inline-block;'
            'width:600px">x = a + b</mjx-math></mjx-container></div>',
            "display math wider than the",
        ),
        "equation in a solution": (
            '<div class="admonition toggle toggle-hidden" style="padding:0 40px">'
            '<p class="admonition-title">Solution</p><div class="math">'
            '<mjx-container display="true" style="display:block"><mjx-math '
            'style="display:inline-block;width:300px">y = c</mjx-math>'
            "</mjx-container></div></div>",
            "display math wider than the",
        ),
        "uncued box": (
            '<div class="box" style="overflow-x:auto"><div style="width:600px">'
            "a wide one</div></div>",
            "scrolls sideways with no cue",
        ),
        "sticking": (
            '<div class="wide" style="width:600px">a wide block</div>',
            "sticks out",
        ),
    }
    for name, (body, expected) in seeded.items():
        found = _phone_problems(tmp_path, name.replace(" ", "-"), body)
        assert any(expected in p for p in found), (name, found)
    # the same content as the book lays it out: nothing to report
    good = (
        '<figure><img src="fits.png"></figure>'
        '<div class="math"><mjx-container display="true" style="display:block">'
        '<mjx-math style="display:inline-block;width:300px">x = a</mjx-math>'
        "</mjx-container></div>"
        '<div class="output"><pre style="overflow-x:auto">'
        + "a printed table row " * 8
        + "</pre></div>"
        + WIDE_TABLE
    )
    assert _phone_problems(tmp_path, "good", good) == []


@pytest.mark.skipif(check_pages.find_browser() is None, reason="needs Chromium")
def test_a_wide_table_stacks_on_a_phone_with_each_cell_under_its_heading(tmp_path):
    """phone-tables.js stacks a table wider than the column; without it the same
    table is reported."""
    import phone_check

    page = tmp_path / "bare.html"
    page.write_text(PHONE_PAGE % {"css": "", "js": "", "body": WIDE_TABLE})
    browser = check_pages.find_browser()
    bare = phone_check.problems(phone_check.layout(check_pages.render, browser, page))
    assert any("a table wider than the" in p for p in bare), bare
    dom, _ = check_pages.render(
        browser,
        _stacked_page(tmp_path),
        extra=("--allow-file-access-from-files", "--window-size=500,1000"),
    )
    # the frame's table: stacked, its first cell labelled with its heading
    assert "<pre>pe-stacked column number 0</pre>" in dom, dom[-500:]


def _stacked_page(tmp_path):
    # the table in a 390 px frame with the book's stylesheet and script; the
    # outer page copies the frame's table out so the dumped DOM shows its class
    static = ROOT / "_static"
    inner = tmp_path / "inner.html"
    inner.write_text(
        PHONE_PAGE
        % {
            "css": (static / "phone.css").read_text(),
            "js": (static / "phone-tables.js").read_text(),
            "body": WIDE_TABLE,
        }
    )
    outer = tmp_path / "outer.html"
    outer.write_text(
        '<iframe id="f" src="inner.html" style="width:390px;height:900px"></iframe>'
        "<script>window.addEventListener('load', function () { setTimeout(function"
        " () { var t = document.getElementById('f').contentDocument"
        ".querySelector('table'); var p = document.createElement('pre');"
        " p.textContent = t.className + ' ' + t.querySelector('td')"
        ".getAttribute('data-label'); document.body.appendChild(p); }, 500); });"
        "</script>"
    )
    return outer


def test_joining_a_cells_streams_for_the_page_leaves_the_written_outputs_as_sent():
    """_ext/stream_copies.py: myst-nb's coalesce_streams appends to the first stream
    in place; through the extension the outputs the build writes keep their text."""
    from myst_nb.core import render
    from myst_nb.core.utils import coalesce_streams

    sys.path.insert(0, str(ROOT / "_ext"))
    import stream_copies

    def outputs():
        return [
            nbformat.v4.new_output("stream", name="stdout", text="a\nb\n"),
            nbformat.v4.new_output("stream", name="stdout", text="c\n"),
        ]

    raw = outputs()
    coalesce_streams(raw)  # the bug the extension works around: it mutates
    assert raw[0]["text"] == "a\nb\nc\n" and raw[1]["text"] == "c\n"
    kept = outputs()
    joined = stream_copies.joining_copies(coalesce_streams)(kept)
    assert [o["text"] for o in joined] == ["a\nb\nc\n"]
    assert [o["text"] for o in kept] == ["a\nb\n", "c\n"]
    before = render.coalesce_streams
    try:
        stream_copies.setup(None)
        stream_copies.setup(None)  # once only, however often Sphinx loads it
        assert render.coalesce_streams.joins_copies
        assert render.coalesce_streams(outputs())[0]["text"] == "a\nb\nc\n"
    finally:
        render.coalesce_streams = before
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"].get("stream_copies") == "_ext"


# --- the notebooks executed side by side before the build (tools/execute_notebooks.py) ---


@needs_make
def test_the_book_executes_every_chapter_of_the_toc_side_by_side_before_building():
    """Every notebook the toc lists is executed by the pre-execution step, before the
    strict build, with the cache and the job count the build reads."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {  # every chapter's file and its sections' (More experiments)
        page + ".ipynb"
        for page in toc_files(toc["parts"])
        if (ROOT / (page + ".ipynb")).is_file()
    }
    assert "book/09_experiments_more.ipynb" in listed
    lines = dry_run("book").splitlines()
    step = next(i for i, line in enumerate(lines) if "execute_notebooks.py" in line)
    build = next(i for i, line in enumerate(lines) if "jupyter-book build" in line)
    assert step < build
    assert set(lines[step].split()) >= listed | {"--cache", "_build/.jupyter_cache"}
    assert {p for p in lines[step].split() if p.endswith(".ipynb")} == listed


def test_the_pre_execution_waits_as_long_as_the_build_would():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert execute_notebooks.DEFAULT_TIMEOUT == config["execute"]["timeout"]


def test_an_executed_notebook_is_what_the_build_takes_from_the_cache(tmp_path, capsys):
    """A notebook executed here is matched by the cache as MyST-NB matches the notebook
    it reads (so the build executes nothing), with its outputs; a failing notebook is
    named and left out of the cache (the build runs it again and reports it); a second
    call executes only what is missing."""
    from jupyter_cache import get_cache

    good = write(
        tmp_path / "book",
        "good.ipynb",
        notebook_with(
            nbformat.v4.new_code_cell("import os\nn = os.environ['OMP_NUM_THREADS']"),
            nbformat.v4.new_code_cell("print('threads', n, 'in', os.getcwd())"),
        ),
    )
    bad = write(
        tmp_path / "book",
        "bad.ipynb",
        notebook_with(nbformat.v4.new_code_cell("raise ValueError('seeded')")),
    )
    cache_path = tmp_path / "cache"
    failed = execute_notebooks.execute_into_cache([good, bad], cache_path, 2, 60)
    assert failed == [str(bad.resolve())]
    out = capsys.readouterr()
    assert "bad.ipynb: failed" in out.out and "seeded" in out.err
    cache = get_cache(str(cache_path))
    record = cache.match_cache_notebook(nbformat.read(good, as_version=4))
    with pytest.raises(KeyError):
        cache.match_cache_notebook(nbformat.read(bad, as_version=4))
    _, merged = cache.merge_match_into_notebook(nbformat.read(good, as_version=4))
    printed = merged.cells[1].outputs[0]["text"]
    assert printed == f"threads 1 in {good.parent.resolve()}\n"
    assert record.data["execution_seconds"] > 0
    execute_notebooks.execute_into_cache([good, bad], cache_path, 1, 60)
    assert "executing 1 of 2 notebooks" in capsys.readouterr().out


def test_the_longest_notebooks_start_first(tmp_path):
    light = write(
        tmp_path, "a.ipynb", notebook_with(nbformat.v4.new_code_cell("x" * 500))
    )
    heavy = write(
        tmp_path, "b.ipynb", notebook_with(nbformat.v4.new_code_cell("pe.train(net)"))
    )
    ordered = sorted([light, heavy], key=execute_notebooks.expected_cost, reverse=True)
    assert ordered == [heavy, light]


@needs_make
def test_make_test_runs_the_checks_after_nbval_side_by_side_on_the_built_book():
    """The second make of `make test` runs the page, figure, wheel and autograder checks
    with -j, and builds no book again (they would race over _build/html)."""
    make = (ROOT / "Makefile").read_text()
    recipe = make.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    assert "-j$(JOBS)" in recipe and "AFTER_BOOK=1" in recipe and "$(TAIL)" in recipe
    tail = dry_run(
        "-j2",
        "AFTER_BOOK=1",
        "colab",
        "check-pages",
        "check-figures",
        "test-wheel",
        "test-autograders",
    )
    assert "jupyter-book build" not in tail and "execute_notebooks" not in tail
    assert "check_pages.py" in tail and "check-autograders" in tail
    # the checks that use the browser start after the one step that may install it
    lines = tail.splitlines()
    browser = next(i for i, line in enumerate(lines) if "--browser-only" in line)
    users = [
        i
        for i, line in enumerate(lines)
        if "check_notebook_figures.py" in line
        or ("check_pages.py" in line and "--browser-only" not in line)
    ]
    assert len(users) == 3 and min(users) > browser


def test_the_browser_step_finds_or_installs_the_browser_and_checks_no_page(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(check_pages, "find_browser", lambda: "/usr/bin/chromium")
    empty = tmp_path / "no-site"  # no pages: the page check itself would fail here
    assert check_pages.main(["--install", "--browser-only", str(empty)]) == 0
    assert check_pages.main(["--install", str(empty)]) == 1
    assert "no built pages" in capsys.readouterr().err
