"""Build the wheel and the sdist, install the wheel into a fresh virtual environment
holding only what Colab has, and run a chapter from outside the repository (issue 11).

    python tools/wheel_check.py [--venv _build/wheel-venv] [--chapter 04_sinusoidal] \
        [--executed _build/wheel-run]

1. ``python -m build`` writes ``_build/dist/*.whl`` and ``*.tar.gz``; both must
   hold the package data (the recorded results in ``pe_tutorial/results``).
2. A virtual environment gets torch, numpy, matplotlib, sympy, tqdm, ipykernel
   and nbclient (what a Colab runtime has), then the wheel, with pip resolving
   its dependencies against them. The environment is kept between runs (keyed
   on the torch spec); the wheel is reinstalled every time.
3. The chapter is copied to a temporary folder outside the checkout and
   executed there with that environment's kernel. Its install cell must find
   the package already installed, and the package must be imported from the
   environment, not from the checkout. The executed notebook is written to
   ``--executed``, where ``make test-wheel`` shows its interactive figure as
   Colab would (``tools/check_notebook_figures.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLAB_LIKE = ["numpy", "matplotlib", "sympy", "tqdm", "ipykernel", "nbclient"]


def run(*command, **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(map(str, command)), flush=True)
    return subprocess.run(list(map(str, command)), check=True, **kwargs)


def build(dist: Path) -> tuple[Path, Path]:
    shutil.rmtree(dist, ignore_errors=True)
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT, capture_output=True)
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


def environment(venv: Path, torch_spec: str, index_url: str | None) -> Path:
    python = venv / "bin" / "python"
    stamp = venv / f".colab-like-{torch_spec.replace('=', '_').replace('/', '_')}"
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", venv)
        index = ["--index-url", index_url] if index_url else []
        run(python, "-m", "pip", "install", "-q", torch_spec, *index)
        run(python, "-m", "pip", "install", "-q", *COLAB_LIKE)
        stamp.touch()
    return python


def run_chapter(python: Path, chapter: Path, executed: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        notebook = Path(folder) / chapter.name
        shutil.copy(chapter, notebook)
        script = (
            "import sys, nbformat, pe_tutorial\n"
            "from nbclient import NotebookClient\n"
            "from pathlib import Path\n"
            f"checkout = Path({str(ROOT / 'pe_tutorial')!r})\n"
            "assert Path(pe_tutorial.__file__).parent != checkout, pe_tutorial.__file__\n"
            "nb = nbformat.read(sys.argv[1], 4)\n"
            "NotebookClient(nb, timeout=600, kernel_name='python3',\n"
            "               resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
            "nbformat.write(nb, sys.argv[3])\n"
            "print('ran', sys.argv[1], 'with pe_tutorial', pe_tutorial.__version__,\n"
            "      'from', pe_tutorial.__file__)\n"
        )
        env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": ""}
        # the kernel is the environment's own (python3 resolves to its interpreter)
        executed.parent.mkdir(parents=True, exist_ok=True)
        run(python, "-c", script, notebook, folder, executed, cwd=folder, env=env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "_build" / "dist")
    parser.add_argument("--venv", type=Path, default=ROOT / "_build" / "wheel-venv")
    # a chapter with an interactive figure, for the notebook figure check
    parser.add_argument("--chapter", default="04_sinusoidal")
    parser.add_argument("--executed", type=Path, default=ROOT / "_build" / "wheel-run")
    parser.add_argument(
        "--torch", default=os.environ.get("TORCH_SPEC", "torch==2.13.0")
    )
    parser.add_argument(
        "--index-url", default=os.environ.get("TORCH_INDEX_URL") or None
    )
    args = parser.parse_args(argv)
    wheel, _ = build(args.dist)
    python = environment(args.venv, args.torch, args.index_url)
    run(python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", wheel)
    # the wheel's own requirements, resolved against what is there (nothing new expected)
    run(python, "-m", "pip", "install", "-q", wheel)
    run(python, "-m", "pip", "check")
    chapter = ROOT / "book" / f"{args.chapter}.ipynb"
    run_chapter(python, chapter, args.executed.resolve() / chapter.name)


if __name__ == "__main__":
    main()
