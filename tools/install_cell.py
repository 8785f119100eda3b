"""The install cell every notebook starts with, written from one template (issue 46).

A notebook must run in a fresh runtime (Colab's, a student's laptop), which
has torch, numpy, matplotlib, sympy, tqdm, pandas, altair and ipykernel
(``COLAB_PREINSTALLED``) and nothing of this project. So the first code cell
of every notebook installs, only when it is missing, everything else the
notebook imports: ``pe_tutorial`` itself, and for the course assignments
otter-grader (``NEEDS``: import name -> requirement, the range the package's
test extra accepts). Two forms of the cell:

- **source** (``book/*.ipynb`` and the assignment masters): ``pe_tutorial``
  from the checkout the notebook sits in, found by walking up from the
  working folder, and otherwise from the book's repository (its default
  branch): no release of the package is published, so no notebook names a
  package index entry;
- **edition** (the Colab edition's chapters, the student and solutions
  notebooks): ``pe_tutorial`` from the repository at the commit the edition
  was made from.

``PACKAGE`` is always a direct reference (``pe_tutorial @ git+URL[@REF]``, or
a path to a wheel when a check points the cell at one), never a bare name.
The repository's URL is read from ``_config.yml``: after changing it (a fork),
``python tools/install_cell.py --write`` rewrites every source notebook's cell;
``tests/test_install_cell.py`` fails while any notebook differs from the
template or imports something its cell does not install.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"

# What a fresh Colab runtime already has (pip names): what the notebooks import, and
# the common packages otter-grader depends on that Colab ships too (the Jupyter stack,
# requests, pydantic, Sphinx, ...). The fresh-runtime check (tools/fresh_runtime.py)
# installs exactly these, with torch: never otter-grader or pe_tutorial, which the
# notebooks must install themselves.
COLAB_PREINSTALLED = (
    "numpy",
    "matplotlib",
    "sympy",
    "tqdm",
    "pandas",
    "altair",
    "ipykernel",
    "ipywidgets",
    "nbformat",
    "nbconvert",
    "nbclient",
    "jupyter-client",
    "requests",
    "pyyaml",
    "jinja2",
    "click",
    "dill",
    "wrapt",
    "pydantic",
    "sphinx",
    "psutil",
)
# Colab's own versions of the Jupyter stack a notebook runs under there, older than what
# pip would pick (IPython 7, ipykernel 6.17, ipywidgets 7): the fresh-runtime check
# installs these exactly. Read on 2026-12-06 from googlecolab/backend-info's
# pip-freeze.txt at commit a724079 (2026-08-19, "Upgrade to Python 3.13"; Colab's
# Python was then 3.13.15, its torch 2.11.0+cpu); read them again from there.
COLAB_PINS_READ = "googlecolab/backend-info pip-freeze.txt at a724079 (2026-08-19)"
COLAB_PINS = {
    "ipython": "7.34.0",
    "ipykernel": "6.17.1",
    "ipywidgets": "7.7.1",
    "notebook": "6.5.7",
    "tornado": "6.5.7",
    "jupyter-client": "7.4.9",
    "traitlets": "5.7.1",
    "matplotlib-inline": "0.2.2",
}


def colab_requirements() -> list[str]:
    """What the fresh-runtime check installs beside torch: ``COLAB_PREINSTALLED``, the
    Jupyter stack pinned to ``COLAB_PINS``."""
    named = list(COLAB_PREINSTALLED) + [
        name for name in COLAB_PINS if name not in COLAB_PREINSTALLED
    ]
    return [f"{n}=={COLAB_PINS[n]}" if n in COLAB_PINS else n for n in named]


# their import names, with torch (whose build the check takes from TORCH_SPEC)
# and what ipykernel brings
COLAB_MODULES = frozenset(
    {"torch", "numpy", "matplotlib", "sympy", "tqdm", "pandas", "altair"}
    | {"IPython", "ipykernel"}
)

PACKAGE_LINE = re.compile(r'^PACKAGE = "[^"]*"$', re.M)

HEADER = {
    "source": (
        "# What this notebook needs that a fresh runtime (Colab's) lacks, installed only\n"
        "# when missing: pe_tutorial from the checkout this notebook sits in, else from the\n"
        "# book's repository (no release is published){also}."
    ),
    "edition": (
        "# What this notebook needs that a fresh runtime (Colab's) lacks, installed only\n"
        "# when missing: pe_tutorial at the commit this notebook was made from, from the\n"
        "# book's repository{also}."
    ),
}
ALSO = {"otter": ";\n# and otter-grader, which runs the checks (grader.check)"}

IMPORTS = {
    "source": "import importlib.util\nimport subprocess\nimport sys\nfrom pathlib import Path\n",
    "edition": "import importlib.util\nimport subprocess\nimport sys\n",
}

INSTALL = {
    "source": """\
if importlib.util.find_spec("pe_tutorial") is None:
    here = Path.cwd().resolve()
    checkout = next(
        (
            p
            for p in (here, *here.parents)
            if (p / "pe_tutorial" / "__init__.py").is_file()
        ),
        None,
    )
    target = str(checkout) if checkout else PACKAGE
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", target])""",
    "edition": """\
if importlib.util.find_spec("pe_tutorial") is None:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", PACKAGE])""",
}

INSTALL_NEEDS = """
for module, requirement in NEEDS.items():
    if importlib.util.find_spec(module) is None:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "-q", requirement]
        )"""


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def repository_package(ref: str | None = None) -> str:
    """``pe_tutorial`` from the book's repository, at ``ref`` (default: its default branch)."""
    return f"pe_tutorial @ git+{repository_url()}" + (f"@{ref}" if ref else "")


def otter_requirement() -> str:
    """otter-grader with the range the package's test extra accepts."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(
        r.replace(" ", "")
        for r in project["optional-dependencies"]["test"]
        if re.match(r"otter-grader\b", r)
    )


def needs_of(notebook: dict) -> dict[str, str]:
    """What a notebook needs installed besides pe_tutorial: otter-grader when it uses Otter."""
    return {"otter": otter_requirement()} if "otter" in imported(notebook) else {}


def render(form: str, package: str, needs: dict[str, str]) -> str:
    """The install cell of ``form`` ("source" or "edition")."""
    if form not in HEADER:
        raise ValueError(f"form is 'source' or 'edition', not {form!r}")
    unknown = set(needs) - set(ALSO)
    if unknown:
        raise ValueError(f"no words for installing {sorted(unknown)}: add them to ALSO")
    header = HEADER[form].format(also="".join(ALSO[module] for module in needs))
    names = f"PACKAGE = {json.dumps(package)}"
    if needs:
        names += f"\nNEEDS = {json.dumps(needs)}"
    body = INSTALL[form] + (INSTALL_NEEDS if needs else "")
    return f"{header}\n{IMPORTS[form]}\n{names}\n{body}"


def cell_source(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def install_cell_of(notebook: dict) -> dict:
    """The notebook's first code cell, which must be its install cell."""
    cell = next((c for c in notebook["cells"] if c["cell_type"] == "code"), None)
    if cell is None or not PACKAGE_LINE.search(cell_source(cell)):
        raise ValueError(
            'the first code cell is not an install cell (no PACKAGE = "..." line)'
        )
    return cell


def parse(source: str) -> tuple[str, dict[str, str]]:
    """``(PACKAGE, NEEDS)`` of an install cell's source (NEEDS empty when absent)."""
    package, needs = None, {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            if name == "PACKAGE":
                package = ast.literal_eval(node.value)
            elif name == "NEEDS":
                needs = ast.literal_eval(node.value)
    if package is None:
        raise ValueError('an install cell without a PACKAGE = "..." line')
    return package, needs


def edition(source: str, package: str) -> str:
    """The edition form of an install cell: same NEEDS, ``package`` pinned."""
    return render("edition", package, parse(source)[1])


def point_at(source: str, package: str) -> str:
    """The same cell with ``PACKAGE`` replaced (a check points it at a local wheel)."""
    if not PACKAGE_LINE.search(source):
        raise ValueError('the install cell has no PACKAGE = "..." line')
    return PACKAGE_LINE.sub(lambda _: f"PACKAGE = {json.dumps(package)}", source)


def imported(notebook: dict) -> set[str]:
    """The top-level modules a notebook's code cells import (shell and magic lines skipped)."""
    found = set()
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = cell_source(cell).splitlines()
        code = "\n".join(
            "" if line.lstrip().startswith(("!", "%")) else line for line in lines
        )
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def is_direct_reference(package: str) -> bool:
    """``name @ URL`` or a path to a wheel or a folder (with a trailing ``/`` or without:
    a path has a ``/`` or ends in ``.whl``, which no package name does): never a bare
    index name."""
    return (
        bool(re.match(r"^pe_tutorial @ \S+$", package))
        or "/" in package
        or package.endswith(".whl")
    )


def problems(notebook: dict, name: str) -> list[str]:
    """What keeps a notebook from running in a fresh runtime: an install cell that is
    missing, names a package the index does not have, or does not install a module
    the notebook imports."""
    try:
        package, needs = parse(cell_source(install_cell_of(notebook)))
    except ValueError as error:
        return [f"{name}: {error}"]
    found = []
    if not is_direct_reference(package):
        found.append(
            f"{name}: PACKAGE = {package!r} is not a direct reference; no release of "
            f"pe_tutorial is published, so install it from the repository: "
            f"{repository_package()!r}"
        )
    stdlib = set(sys.stdlib_module_names)
    missing = sorted(
        imported(notebook) - stdlib - COLAB_MODULES - {"pe_tutorial"} - set(needs)
    )
    if missing:
        found.append(
            f"{name}: imports {missing}, which a fresh Colab runtime lacks and its "
            "install cell does not install (add them to NEEDS)"
        )
    return found


def sources() -> list[Path]:
    """The notebooks written in the source form: the chapters and the assignment masters."""
    return sorted(BOOK.glob("*.ipynb")) + sorted((BOOK / "assignments").glob("*.ipynb"))


def expected(notebook: dict) -> str:
    """The source form of the install cell this notebook should start with."""
    return render("source", repository_package(), needs_of(notebook))


def write(paths: list[Path]) -> list[Path]:
    """Rewrite each notebook's install cell from the template; return those changed."""
    changed = []
    for path in paths:
        notebook = json.loads(path.read_text())
        cell = install_cell_of(notebook)
        source = expected(notebook)
        if cell_source(cell) != source:
            cell["source"] = source.splitlines(keepends=True)
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write",
        action="store_true",
        help="rewrite every source notebook's install cell from the template",
    )
    args = parser.parse_args(argv)
    if args.write:
        for path in write(sources()):
            print(f"rewrote the install cell of {path.relative_to(ROOT)}")
        return
    found = []
    for path in sources():
        notebook = json.loads(path.read_text())
        found += problems(notebook, path.name)
        if cell_source(install_cell_of(notebook)) != expected(notebook):
            found.append(
                f"{path.name}: install cell differs from the template (--write)"
            )
    print("\n".join(found) or "every install cell is the template's, and complete")
    raise SystemExit(1 if found else 0)


if __name__ == "__main__":
    main()
