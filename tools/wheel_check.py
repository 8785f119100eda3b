"""Build the wheel and the sdist, and run a chapter's Colab edition from them in a fresh
runtime, from nothing (issues 11 and 46).

    python tools/wheel_check.py [--chapter 04_sinusoidal] [--executed _build/wheel-run]

1. ``python -m build`` writes ``_build/dist/*.whl`` and ``*.tar.gz``; both must
   hold the package data (the recorded results in ``pe_tutorial/results``).
2. The chapter's Colab edition (``tools/colab_edition.py``) runs as in a fresh
   Colab runtime (``tools/fresh_runtime.py``): a new environment over one that
   holds only torch and Colab's preinstalled packages, an empty working folder
   outside the checkout, Colab's kernel class. Its install cell, pointed at the
   wheel, must install the package and what it lacks with pip resolving its
   dependencies against what is there, and the package must be imported from
   that environment, not from the checkout; ``pip check`` must then pass. The
   executed notebook is written to ``--executed``, where ``make test-wheel``
   shows its interactive figure as Colab would
   (``tools/check_notebook_figures.py``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import colab_edition
import fresh_runtime
import install_cell

ROOT = Path(__file__).resolve().parent.parent


def build(dist: Path) -> tuple[Path, Path]:
    shutil.rmtree(dist, ignore_errors=True)
    command = [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)]
    # the sdist step writes the checkout's egg-info: one build at a time (make test runs
    # this beside the autograder check, which builds the wheel too)
    with fresh_runtime.locked(ROOT / "_build" / "wheel"):
        subprocess.run(command, check=True, capture_output=True)
    wheel, sdist = next(dist.glob("*.whl")), next(dist.glob("*.tar.gz"))
    results = sorted(p.name for p in (ROOT / "pe_tutorial" / "results").glob("*.json"))
    in_wheel = {
        Path(n).name for n in zipfile.ZipFile(wheel).namelist() if "/results/" in n
    }
    with tarfile.open(sdist) as archive:
        in_sdist = {Path(n).name for n in archive.getnames() if "/results/" in n}
    for name, found in ((wheel.name, in_wheel), (sdist.name, in_sdist)):
        missing = set(results) - found
        if missing:
            raise SystemExit(f"{name} lacks the package data {sorted(missing)}")
    print(
        f"built {wheel.name} and {sdist.name}, each with {len(results)} recorded results"
    )
    return wheel, sdist


PROBE = (
    "import pe_tutorial, subprocess, sys\n"
    "print(pe_tutorial.__file__)\n"
    "subprocess.check_call([sys.executable, '-m', 'pip', 'check'])"
)


def run_chapter(chapter: Path, wheel: Path, executed: Path) -> None:
    """Run ``chapter``'s Colab edition from nothing, its install cell pointed at ``wheel``;
    write the executed notebook (the probe cell removed) to ``executed``."""
    import nbformat

    bib = colab_edition.Bibliography()
    package = install_cell.repository_package(colab_edition.current_commit())
    notebook = colab_edition.convert(chapter, glue={}, package=package, bib=bib)
    notebook["cells"].append(
        {"cell_type": "code", "metadata": {}, "source": PROBE, "outputs": []}
    )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        try:
            node = fresh_runtime.run_as_on_colab(
                notebook, root, wheel=wheel, timeout=600
            )
        except fresh_runtime.CellDeadline as late:
            raise SystemExit(f"{chapter.name} from the wheel: {late}") from None
        found = fresh_runtime.errors(node)
        built = fresh_runtime.built_execution(chapter.stem)
        if built.exists():  # make test builds the book first; make test-wheel alone not
            found += fresh_runtime.image_problems(node, chapter.stem, built)
        else:
            print(f"{chapter.stem}: images not compared (no built book at {built})")
        if found:
            raise SystemExit(f"{chapter.name} from the wheel: " + "; ".join(found))
        probe = node.cells.pop()
        imported = "".join(o.get("text", "") for o in probe.outputs).strip()
        if not Path(imported).is_relative_to(root / "env"):
            raise SystemExit(
                f"{chapter.name}: pe_tutorial came from {imported}, not the fresh runtime"
            )
    executed.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(node, executed)
    print(f"ran the Colab edition of {chapter.name} from the wheel, from nothing")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "_build" / "dist")
    # a chapter with an interactive figure, for the notebook figure check
    parser.add_argument("--chapter", default="04_sinusoidal")
    parser.add_argument("--executed", type=Path, default=ROOT / "_build" / "wheel-run")
    # default: TORCH_SPEC and TORCH_INDEX_URL, as fresh_runtime.base_runtime reads them
    parser.add_argument("--torch", default=None)
    parser.add_argument("--index-url", default=None)
    args = parser.parse_args(argv)
    wheel, _ = build(args.dist)
    fresh_runtime.base_runtime(torch_spec=args.torch, index_url=args.index_url)
    chapter = ROOT / "book" / f"{args.chapter}.ipynb"
    run_chapter(chapter, wheel, args.executed.resolve() / chapter.name)


if __name__ == "__main__":
    main()
