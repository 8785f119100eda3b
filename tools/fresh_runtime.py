"""Notebooks run as in a fresh Colab runtime: nothing of this project installed (issue 46).

A fresh Colab runtime has torch and a set of common packages
(``install_cell.COLAB_PREINSTALLED``) and neither ``pe_tutorial`` nor
otter-grader; its kernel works in an empty ``/content`` (the notebook file is
not there) with Colab's kernel and shell classes. This module makes that
runtime and runs a notebook in it:

- ``base_runtime``: a virtual environment holding torch (``TORCH_SPEC``) and
  Colab's preinstalled packages, its Jupyter stack at Colab's own versions
  (``install_cell.COLAB_PINS``, with the date they were read), made once and
  kept (``_build/colab-runtime``, remade when its contents change);
- ``fresh_environment``: for each notebook, a new empty environment on top of
  the base (the base's packages importable, its own ``site-packages`` empty),
  so every notebook installs what it needs from nothing, as on Colab;
- ``wheelhouse``: the wheels the install cells may fetch (otter-grader and its
  dependencies), downloaded once; the kernel's pip reads only it and the
  local wheel of ``pe_tutorial`` (``PIP_NO_INDEX``), so a run needs no network
  and installs exactly what the notebook's install cell asks for; with
  ``FRESH_RUNTIME_INDEX=1`` (``make colab-all COLAB_INDEX=1``) pip resolves
  from the package index instead, as on Colab (the ``git+`` install of the
  repository is never exercised: the check points the cell at a local wheel);
- ``run_as_on_colab``: the notebook's ``PACKAGE`` pointed at the local wheel,
  executed under Colab's kernel class (``fake_colab_kernel``) in an empty
  folder, every cell run even after an error.

From the repository root::

    python tools/fresh_runtime.py NOTEBOOK ... [--wheel W] [--out DIR]

runs each notebook so and fails on the first cell error (``make colab-all``
runs every chapter of the Colab edition this way; ``make test`` runs chapter
4's, in ``tools/wheel_check.py``, and every student and solutions notebook, in
``tests/test_assignments.py``).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from install_cell import cell_source, colab_requirements, install_cell_of, point_at

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "_build" / "colab-runtime"
WHEELHOUSE = ROOT / "_build" / "colab-wheelhouse"
# the backend Colab's kernels draw figures with, and what an image output holds
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")


def _run(*command) -> subprocess.CompletedProcess:
    """Run ``command`` quietly; when it fails, raise with what it printed."""
    done = subprocess.run(list(map(str, command)), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, command))} failed ({done.returncode}):\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done


def locked(path: Path):
    """An exclusive lock beside ``path`` (test workers share the runtime), held until the
    returned file is closed (``with locked(...):``; the wheel builds of the tools share one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = (path.parent / f".{path.name}.lock").open("w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _key(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def base_runtime(
    venv: Path = BASE,
    torch_spec: str | None = None,
    index_url: str | None = None,
) -> Path:
    """The Python of a virtual environment with torch and Colab's preinstalled packages
    only (made when missing or when what it should hold changed)."""
    torch_spec = torch_spec or os.environ.get("TORCH_SPEC") or "torch==2.13.0"
    index_url = index_url or os.environ.get("TORCH_INDEX_URL") or None
    python = venv / "bin" / "python"
    wanted = colab_requirements()
    # made by this Python (its venv): another Python makes another runtime, whose
    # wheels (the wheelhouse's too) are another Python's
    key = _key(sys.version, torch_spec, index_url or "", *wanted)
    stamp = venv / f".colab-{key}"
    with locked(venv):
        if not stamp.exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run(sys.executable, "-m", "venv", venv)
            index = ["--index-url", index_url] if index_url else []
            _run(python, "-m", "pip", "install", "-q", torch_spec, *index)
            _run(python, "-m", "pip", "install", "-q", *wanted)
            stamp.touch()
    return python


def site_packages(python: Path) -> str:
    """The ``site-packages`` folder of the environment of ``python``."""
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def fresh_environment(base: Path, folder: Path) -> Path:
    """A new environment in ``folder`` over the base runtime ``base`` (a Python):
    the base's packages importable, nothing else; what a notebook installs lands in
    its own ``site-packages``. Returns its Python."""
    _run(base, "-m", "venv", "--without-pip", folder)
    python = folder / "bin" / "python"
    own = Path(site_packages(python))
    # an import line of a .pth file runs at start-up: the base's folder is added as a
    # site directory (its own .pth files read too), after this environment's own
    (own / "colab_base.pth").write_text(
        f"import site; site.addsitedir({site_packages(base)!r})\n"
    )
    return python


def wheelhouse(requirements: list[str], folder: Path = WHEELHOUSE) -> Path:
    """A folder of wheels that satisfies ``requirements`` (downloaded once, with this
    Python's pip, from its index or cache)."""
    stamp = folder / f".wheels-{_key(sys.version, *sorted(requirements))}"
    with locked(folder):
        if not stamp.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            _run(
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "-d",
                folder,
                *requirements,
            )
            stamp.touch()
    return folder


# Colab starts ipykernel with its own kernel class, google.colab._kernel.Kernel, whose
# shell class is google.colab._shell.Shell (a ZMQInteractiveShell); Otter takes the
# kernel for Colab's when str(get_ipython()) names "google.colab". These stand-ins
# have the same module and class names and are started the same way (the kernel
# class picks the shell class); they add nothing else of Colab's.
FAKE_COLAB = {
    "google/colab/__init__.py": '"""A stand-in for Colab\'s google.colab (tools/fresh_runtime.py)."""\n',
    "google/colab/_shell.py": (
        '"""A stand-in for Colab\'s shell class."""\n\n'
        "from ipykernel import zmqshell\n\n\n"
        "class Shell(zmqshell.ZMQInteractiveShell):\n"
        '    """What get_ipython() returns on Colab, by module and class name."""\n'
    ),
    "google/colab/_kernel.py": (
        '"""A stand-in for Colab\'s kernel class."""\n\n'
        "from ipykernel import ipkernel\n"
        "from traitlets import Type\n\n"
        "from google.colab import _shell\n\n\n"
        "class Kernel(ipkernel.IPythonKernel):\n"
        "    shell_class = Type(_shell.Shell)\n"
    ),
}
COLAB_KERNEL = "fake-colab"


def fake_colab_kernel(
    root: Path, python: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """A kernelspec ``fake-colab`` under ``root/kernels`` (returned) that starts
    ``python``'s ipykernel (default: this Python's) with Colab's kernel class,
    ``google.colab`` importable from ``root/site`` (a namespace package ``google``,
    as Colab installs it), and ``env`` added to the kernel's environment."""
    site = root / "site"
    for relative, source in FAKE_COLAB.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(source)
    spec = root / "kernels" / COLAB_KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    inherited = os.environ.get("PYTHONPATH") if python is None else None
    path = os.pathsep.join(p for p in (str(site), inherited) if p)
    kernel = {
        "argv": [
            str(python or sys.executable),
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            "--IPKernelApp.kernel_class=google.colab._kernel.Kernel",
        ],
        "display_name": "Python 3 (Colab's shell, faked)",
        "language": "python",
        "env": {"PYTHONPATH": path, **(env or {})},
    }
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1))
    return root / "kernels"


class CellDeadline(RuntimeError):
    """A cell ran past its deadline: the message names the cell and its first line."""


def execute(notebook: dict, folder: Path, kernels: Path, timeout: int = 300):
    """Execute ``notebook`` (its JSON) with the ``fake-colab`` kernel of ``kernels``:
    the kernel works in ``folder``, which must be empty (no notebook file is written
    there). Every cell runs even after an error; returns the executed ``NotebookNode``.

    Each cell has ``timeout`` seconds: one that runs longer stops the run with
    ``CellDeadline`` naming it (``cell N of M``, counted over every cell from 1,
    as ``errors`` counts). The kernel's manager is nbclient's asynchronous one: with
    jupyter_client's synchronous ``KernelManager`` the deadline never fired (a
    15 s cell given 3 s ran to its end)."""
    import nbformat
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    if any(folder.iterdir()):
        raise ValueError(
            f"{folder} is not empty: {sorted(p.name for p in folder.iterdir())}"
        )
    node = nbformat.reads(json.dumps(notebook), as_version=4)
    specs = KernelSpecManager(kernel_dirs=[str(kernels)])
    manager = AsyncKernelManager(kernel_name=COLAB_KERNEL, kernel_spec_manager=specs)
    running = {}

    def started(cell, cell_index) -> None:
        running["index"] = cell_index

    client = NotebookClient(
        node,
        km=manager,
        timeout=timeout,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
        on_cell_start=started,
    )
    try:
        client.execute(
            cleanup_kc=True
        )  # the kernel is shut down, though the manager is ours
    except CellTimeoutError:
        index = running.get("index", 0)
        first = (cell_source(node.cells[index]).strip().splitlines() or [""])[0]
        raise CellDeadline(
            f"cell {index + 1} of {len(node.cells)} ran past its deadline of "
            f"{timeout} s: {first[:80]!r}"
        ) from None
    return node


def pointed_at(notebook: dict, wheel: Path) -> dict:
    """A copy of ``notebook`` whose install cell installs ``wheel`` (a local build of the
    package) where it would install the repository's commit."""
    copy = json.loads(json.dumps(notebook))
    cell = install_cell_of(copy)
    cell["source"] = point_at(cell_source(cell), str(wheel.resolve()))
    return copy


def kernel_environment(wheels: Path | None) -> dict[str, str]:
    """What a fresh runtime's kernel adds to its environment: figures drawn inline;
    pip reading only ``wheels`` (and the wheel the install cell names), or, with
    ``wheels`` None, pip as Colab's, resolving from the package index."""
    env = {
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Colab's kernel draws figures inline, as images in the cell's outputs (with
        # Agg, a figure that fails only when drawn would pass)
        "MPLBACKEND": INLINE_BACKEND,
    }
    if wheels is not None:
        env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels.resolve())}
    return env


def run_as_on_colab(
    notebook: dict,
    root: Path,
    *,
    wheel: Path,
    base: Path | None = None,
    wheels: Path | None = None,
    timeout: int = 300,
    index: bool | None = None,
):
    """Run ``notebook`` as in a fresh Colab runtime, under ``root`` (an empty folder
    for its working directory, ``root/content``; its environment, ``root/env``;
    its kernel): a new environment over ``base`` (default: ``base_runtime()``), its
    install cell pointed at ``wheel``, pip reading only ``wheels`` (default:
    ``wheelhouse`` of otter-grader) and that wheel; or, with ``index`` (default:
    the environment's ``FRESH_RUNTIME_INDEX=1``), pip resolving what the notebook
    installs from the package index, as on Colab (a network the check's machines
    may not have). Returns the executed node."""
    from install_cell import otter_requirement

    if index is None:
        index = os.environ.get("FRESH_RUNTIME_INDEX") == "1"
    base = base or base_runtime()
    if not index:
        wheels = wheels or wheelhouse([otter_requirement()])
    python = fresh_environment(base, root / "env")
    env = kernel_environment(None if index else wheels)
    kernels = fake_colab_kernel(root / "kernel", python, env)
    folder = root / "content"
    folder.mkdir(parents=True)
    return execute(pointed_at(notebook, wheel), folder, kernels, timeout=timeout)


def images(node) -> int:
    """The images an executed notebook shows: outputs holding a picture."""
    return sum(
        any(kind in output.get("data", {}) for kind in IMAGE_TYPES)
        for cell in node.cells
        for output in cell.get("outputs", [])
    )


def built_execution(name: str) -> Path:
    """Where the book's build keeps chapter ``name`` (a stem) as it executed it."""
    return ROOT / "_build" / "jupyter_execute" / "book" / f"{name}.ipynb"


def image_problems(node, name: str, built: Path) -> list[str]:
    """The images ``node`` (chapter ``name`` run as on Colab) shows against those of
    ``built``, the book's own execution of it: a figure that failed to draw, or drew
    where the book's did not, is a difference; none when the counts agree."""
    import nbformat

    mine, theirs = images(node), images(nbformat.read(built, as_version=4))
    if mine != theirs:
        return [f"{name}: showed {mine} images where the built book shows {theirs}"]
    return []


def errors(node) -> list[str]:
    """``cell N: Name: message`` for each cell that raised."""
    return [
        f"cell {index + 1}: {output['ename']}: {output['evalue']}"
        for index, cell in enumerate(node.cells)
        for output in cell.get("outputs", [])
        if output["output_type"] == "error"
    ]


def build_wheel(out: Path) -> Path:
    """This checkout's wheel (no dependencies) in ``out``, emptied first; returns it."""
    shutil.rmtree(out, ignore_errors=True)
    # setuptools builds in the checkout's build/ folder: two builds at once (the
    # test workers) collide there, so one waits for the other
    with locked(ROOT / "_build" / "wheel"):
        _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT)
    return next(out.glob("pe_tutorial-*.whl"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument(
        "--wheel", type=Path, help="the package's wheel (default: built)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write each executed notebook into this folder (as NNN-NAME.ipynb)",
    )
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        wheel = args.wheel or build_wheel(Path(temporary) / "wheel")
        failed = []
        for index, path in enumerate(args.notebooks):
            # a student and a solutions notebook share a name: a folder each
            root = Path(temporary) / f"{index:03d}-{path.stem}"
            try:
                node = run_as_on_colab(
                    json.loads(path.read_text()),
                    root,
                    wheel=wheel,
                    timeout=args.timeout,
                )
            except CellDeadline as late:
                print(f"{path}: {late}", flush=True)
                failed.append(f"{path}: {late}")
                continue
            found = errors(node)
            built = built_execution(path.stem)  # a chapter's (the course has none)
            if built.exists():
                found += image_problems(node, path.stem, built)
            print(f"{path}: " + ("; ".join(found) if found else "ran"), flush=True)
            failed += [f"{path}: {e}" for e in found]
            if args.out:
                import nbformat

                args.out.mkdir(parents=True, exist_ok=True)
                nbformat.write(node, args.out / f"{root.name}.ipynb")
    if failed:
        raise SystemExit("\n".join(failed))


if __name__ == "__main__":
    main()
