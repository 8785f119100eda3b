"""The Colab edition: every chapter as plain Jupyter (and Colab) renders it (issue 11).

The chapters are written in MyST for Jupyter Book. Plain Jupyter and Colab
print MyST's roles and directives as they are, so this script writes a copy
of each chapter that reads right there::

    python tools/colab_edition.py [--executed _build/jupyter_execute] \\
        [--assignments _build/assignments] [--ref REF] [--out _build/colab]

In every markdown cell:

- ``{literalinclude}`` of ``:pyobject: NAME`` becomes a Python code block
  holding that object's source, read from the package;
- ``{cite:p}`` and ``{cite:t}`` become "(Su et al., 2024)" and
  "Su et al. (2024)", from ``book/references.bib``, and a references cell
  listing the works cited closes the notebook;
- ``{exercise}`` becomes a bold "Exercise N" paragraph and ``{solution}``
  an HTML ``<details>`` block, folded until the reader opens it;
- ``{glue:text}`` becomes the value the book's build computed (read from
  ``NAME.glue.json`` next to the executed notebooks), with its format; a
  note at the top says that the cells print the reader's own numbers;
- ``{numref}``, ``{doc}``, ``{ref}`` and ``(label)=`` targets become plain words
  (a ``{ref}`` its link text).

The first code cell (the install cell) installs the package at the same
commit from the repository in ``_config.yml``, so a fork's edition installs
the fork. The chapters that use a GPU for more than a timing cell (``GPU_CHAPTERS``:
9 and 10) ask Colab for a GPU runtime in their metadata; the others open on
its CPU runtime, and a note under each title says which and why. The student
notebooks of the assignments (``otter assign``'s output) are copied beside the
chapters. ``OUT`` mirrors the repository:
``OUT/book/NN_name.ipynb`` and ``OUT/book/assignments/NAME.ipynb``; the deploy
workflow pushes the repository with these files in place to the ``colab``
branch, which the book's launch buttons open.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import install_cell
from install_cell import PACKAGE_LINE, cell_source

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"

# A MyST role or directive, which plain Jupyter and Colab print as is.
MYST_SYNTAX = re.compile(r"\{[a-z][\w:-]*\}`|^\s*(```|:::)\s*\{[\w:-]+\}", re.M)


def chapters() -> list[Path]:
    """The chapter notebooks listed in ``_toc.yml``, in order."""
    toc = (ROOT / "_toc.yml").read_text()
    files = re.findall(r"file:\s*(\S+)", toc)
    return [ROOT / f"{f}.ipynb" for f in files if (ROOT / f"{f}.ipynb").is_file()]


def current_commit() -> str:
    """The commit the edition is built from (its install cell pins it)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "main"


# ---------------------------------------------------------------- citations


def _last_names(persons) -> list[str]:
    return [_plain(" ".join(p.last_names) or " ".join(p.first_names)) for p in persons]


def _plain(latex: str) -> str:
    """BibTeX text as Unicode: accents decoded ({\\'e} to é), protecting braces dropped."""
    import codecs

    import latexcodec  # noqa: F401  (registers the codec; a dependency of pybtex)

    return codecs.decode(latex, "ulatex").replace("{", "").replace("}", "")


class Bibliography:
    """Author-year text for the keys of ``book/references.bib``."""

    def __init__(self, path: Path = BOOK / "references.bib"):
        from pybtex.database import parse_file

        self.entries = parse_file(str(path)).entries

    def _entry(self, key: str):
        if key not in self.entries:
            raise KeyError(f"citation {key!r} is not in references.bib")
        return self.entries[key]

    def authors(self, key: str) -> str:
        entry = self._entry(key)
        names = _last_names(entry.persons.get("author", []))
        if not names:
            return entry.fields.get("organization", entry.fields.get("title", key))
        if len(names) == 1:
            return names[0]
        if len(names) == 2:
            return f"{names[0]} and {names[1]}"
        return f"{names[0]} et al."

    def year(self, key: str) -> str:
        return self._entry(key).fields.get("year", "n.d.")

    def parenthetical(self, keys: list[str]) -> str:
        return "(" + "; ".join(f"{self.authors(k)}, {self.year(k)}" for k in keys) + ")"

    def textual(self, keys: list[str]) -> str:
        return "; ".join(f"{self.authors(k)} ({self.year(k)})" for k in keys)

    def reference(self, key: str) -> str:
        entry = self._entry(key)
        fields = entry.fields
        names = ", ".join(_last_names(entry.persons.get("author", []))) or self.authors(
            key
        )
        title = _plain(fields.get("title", ""))
        venue = next(
            (
                fields[f]
                for f in ("journal", "booktitle", "publisher", "howpublished")
                if f in fields
            ),
            "",
        )
        link = fields.get("url") or (
            f"https://doi.org/{fields['doi']}" if "doi" in fields else ""
        )
        text = f"{names} ({self.year(key)}). *{title}*."
        if venue:
            text += f" {_plain(venue)}."
        if link:
            text += f" <{link}>"
        return text


# ---------------------------------------------------------------- directives


def _pyobject_source(path: Path, dotted: str) -> str:
    """The source of a class, function or method (``Class.method``) in ``path``."""
    text = path.read_text()
    nodes = ast.parse(text).body
    node = None
    for part in dotted.split("."):
        node = next(
            (
                n
                for n in nodes
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == part
            ),
            None,
        )
        if node is None:
            raise ValueError(f"{dotted} is not defined in {path}")
        nodes = node.body
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = text.splitlines()[start - 1 : node.end_lineno]
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def _split_directive(lines: list[str], start: int):
    """The directive opening at ``lines[start]``: name, argument, options, body, end index."""
    match = re.match(r"^(\s*)(`{3,}|:{3,})\{([\w:-]+)\}\s*(.*)$", lines[start])
    fence, name, argument = match.group(2), match.group(3), match.group(4).strip()
    options, i = {}, start + 1
    while i < len(lines) and re.match(r"^\s*:[\w-]+:", lines[i]):
        key, _, value = lines[i].strip()[1:].partition(":")
        options[key] = value.strip()
        i += 1
    body = []
    while i < len(lines) and lines[i].strip() != fence:
        body.append(lines[i])
        i += 1
    if i == len(lines):
        raise ValueError(f"unclosed {{{name}}} directive: {lines[start]!r}")
    return name, argument, options, "\n".join(body).strip("\n"), i


class Converter:
    def __init__(
        self,
        glue: dict[str, str] | None = None,
        bibliography: Bibliography | None = None,
    ):
        self.glue = glue or {}
        self.bib = bibliography or Bibliography()
        self.cited: list[str] = []
        self.missing: list[str] = []
        self.exercises = 0

    def directives(self, text: str, here: Path) -> str:
        lines, out, i = text.split("\n"), [], 0
        while i < len(lines):
            if not re.match(r"^\s*(`{3,}|:{3,})\{[\w:-]+\}", lines[i]):
                out.append(lines[i])
                i += 1
                continue
            name, argument, options, body, end = _split_directive(lines, i)
            body = self.directives(body, here)
            if name == "literalinclude":
                source = (here / argument).resolve()
                if "pyobject" not in options:
                    raise ValueError(f"literalinclude without :pyobject: ({argument})")
                code = _pyobject_source(source, options["pyobject"])
                out += ["```python", code, "```"]
            elif name == "exercise":
                self.exercises += 1
                title = f" ({argument})" if argument else ""
                out += [f"**Exercise {self.exercises}**{title}.", "", body, ""]
            elif name == "solution":
                out += [
                    "<details>",
                    "<summary>Solution (click to open)</summary>",
                    "",
                    body,
                    "",
                    "</details>",
                    "",
                ]
            elif name in ("note", "tip", "warning", "important", "admonition"):
                heading = argument if name == "admonition" else name.capitalize()
                out += [f"> **{heading}.**", ">"] + [
                    f"> {line}" for line in body.split("\n")
                ]
            else:
                raise ValueError(f"no Colab rendering for the {{{name}}} directive")
            i = end + 1
        return "\n".join(out)

    def roles(self, text: str) -> str:
        def cite(match):
            kind, keys = match.group(1), [k.strip() for k in match.group(2).split(",")]
            self.cited += [k for k in keys if k not in self.cited]
            return (
                self.bib.parenthetical(keys) if kind == "p" else self.bib.textual(keys)
            )

        def glue(match):
            name, _, spec = match.group(1).partition(":")
            if name not in self.glue:
                self.missing.append(name)
                return f"`{name}`"
            raw = self.glue[name]
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                value = raw
            return format(value, spec) if spec else str(value)

        def numref(match):
            label = match.group(1)
            return "the exercise below" if label.startswith("ex-") else "the figure"

        def doc(match):
            target = match.group(1)
            if "<" in target:
                return target.split("<")[0].strip()
            number = re.match(r"(\d+)_", Path(target).name)
            return f"chapter {int(number.group(1))}" if number else target

        def ref(match):
            # a section's link: its text, where it has one
            target = match.group(1)
            return target.split("<")[0].strip() if "<" in target else "that section"

        text = re.sub(r"\{cite:([pt])\}`([^`]+)`", cite, text)
        text = re.sub(r"\{glue:text\}`([^`]+)`", glue, text)
        text = re.sub(r"\{glue\}`([^`]+)`", glue, text)
        text = re.sub(r"\{numref\}`([^`]+)`", numref, text)
        text = re.sub(r"\{doc\}`([^`]+)`", doc, text)
        text = re.sub(r"\{ref\}`([^`]+)`", ref, text)
        text = re.sub(r"^\([\w-]+\)=\s*$\n?", "", text, flags=re.M)
        return text

    def markdown(self, text: str, here: Path) -> str:
        return self.roles(self.directives(text, here))


# Colab reads these to open the notebook on a GPU runtime (Runtime > Change runtime type
# shows the choice); the free tier's GPU is a T4, and time on it spends the user's quota.
GPU_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}

# The chapters that ask for it: those that use a GPU for more than a timing cell (issue
# 70). Every other chapter opens on Colab's default CPU runtime; its timing cells use a
# GPU where the reader chooses one.
GPU_CHAPTERS = {
    "09_experiments": "its live run trains models on the device it picks "
    '(`device="auto"`), and so do the timing cells',
    "10_performance": "timing is what the chapter is about, and its cells time "
    "the GPU kernels (FlashAttention, compiled code) where there is one",
}

GPU_NOTE = (
    "*This notebook asks Colab for a GPU runtime (Runtime > Change runtime type shows "
    "it; a T4 on the free tier, which spends your GPU quota): {why}. Each timing cell "
    "and run says which device it used. Every other cell runs on the CPU, here as "
    "anywhere, so a CPU runtime runs the whole notebook too, only slower where it "
    "trains.*"
)

CPU_NOTE = (
    "*This notebook opens on Colab's default CPU runtime, which spends no GPU quota: "
    "every cell runs there. Only its timing cells would use a GPU; to time on one, "
    "choose a GPU runtime (Runtime > Change runtime type) before running. Each timing "
    "cell says which device it ran on.*"
)


def convert(
    path: Path,
    *,
    glue: dict[str, str],
    package: str,
    bib: Bibliography,
    strict: bool = False,
) -> dict:
    """The Colab edition of one chapter (a notebook dict); ``strict``: every glued
    value the text quotes must be in ``glue``."""
    notebook = json.loads(path.read_text())
    converter = Converter(glue, bib)
    edition = copy.deepcopy(notebook)
    first_code = True
    for cell in edition["cells"]:
        source = cell_source(cell)
        if cell["cell_type"] == "markdown":
            cell["source"] = converter.markdown(source, path.parent)
        elif cell["cell_type"] == "code":
            if first_code:
                cell["source"] = install_cell.edition(source, package)
                first_code = False
            cell["outputs"], cell["execution_count"] = [], None
    if strict and converter.missing:
        raise ValueError(
            f"{path.name}: the build glued no value for {sorted(set(converter.missing))}; "
            "build the book first (make book)"
        )
    why = GPU_CHAPTERS.get(path.stem)
    notes = [CPU_NOTE if why is None else GPU_NOTE.format(why=why)]
    if glue:
        notes.insert(
            0,
            "*This is the Colab edition of a chapter of the book. Numbers quoted in the "
            "text are those of the book's build; run the cells to get your own (after a "
            "run, `pe_tutorial.pages.glue.GLUED` holds each quoted value by its name).*",
        )
    edition["cells"].insert(
        1, {"cell_type": "markdown", "metadata": {}, "source": "\n\n".join(notes)}
    )
    if converter.cited:
        references = "## References\n\n" + "\n".join(
            f"- {bib.reference(k)}" for k in converter.cited
        )
        edition["cells"].append(
            {"cell_type": "markdown", "metadata": {}, "source": references}
        )
    for cell in edition["cells"]:
        cell.pop("id", None)
    edition["nbformat_minor"] = min(edition.get("nbformat_minor", 4), 4)
    if why is not None:
        edition.setdefault("metadata", {}).update(copy.deepcopy(GPU_METADATA))
    return edition


def myst_left(notebook: dict) -> list[str]:
    """The MyST roles and directives left in a notebook's cells."""
    found = []
    for cell in notebook["cells"]:
        source = cell_source(cell)
        found += [m.group(0) for m in MYST_SYNTAX.finditer(source)]
    return found


def build(
    out: Path,
    *,
    executed: Path | None,
    assignments: Path | None,
    ref: str,
    strict: bool = False,
) -> list[Path]:
    package = install_cell.repository_package(ref)
    bib = Bibliography()
    written = []
    shutil.rmtree(out, ignore_errors=True)
    (out / "book").mkdir(parents=True)
    for chapter in chapters():
        glue = {}
        glue_file = (
            executed / "book" / f"{chapter.stem}.glue.json" if executed else None
        )
        if glue_file and glue_file.is_file():
            glue = {
                name: output["data"].get("text/plain", "")
                for name, output in json.loads(glue_file.read_text()).items()
            }
        edition = convert(chapter, glue=glue, package=package, bib=bib, strict=strict)
        left = myst_left(edition)
        if left:
            raise ValueError(
                f"{chapter.name}: MyST left in the Colab edition: {left[:5]}"
            )
        target = out / "book" / chapter.name
        target.write_text(json.dumps(edition, indent=1, ensure_ascii=False) + "\n")
        written.append(target)
    if assignments and assignments.is_dir():
        (out / "book" / "assignments").mkdir()
        for student in sorted(assignments.glob("*/student/*.ipynb")):
            notebook = json.loads(student.read_text())
            for cell in notebook["cells"]:
                source = cell_source(cell)
                # the public tests come with the package (pe_tutorial.course), so
                # only the install cell changes: it installs the book's own commit
                if cell["cell_type"] == "code" and PACKAGE_LINE.search(source):
                    cell["source"] = install_cell.edition(source, package)
            target = out / "book" / "assignments" / student.name
            target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--executed", type=Path, default=ROOT / "_build" / "jupyter_execute"
    )
    parser.add_argument(
        "--assignments", type=Path, default=ROOT / "_build" / "assignments"
    )
    parser.add_argument(
        "--ref", default=None, help="git ref the install cell pins (default: HEAD)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "colab")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail when a value the text quotes was not glued by the build",
    )
    args = parser.parse_args(argv)
    written = build(
        args.out,
        executed=args.executed,
        assignments=args.assignments,
        ref=args.ref or current_commit(),
        strict=args.strict,
    )
    print(f"Colab edition: {len(written)} notebooks in {args.out}")


if __name__ == "__main__":
    main()
