"""Execute the book's notebooks side by side into MyST-NB's execution cache (issue 45).

MyST-NB executes the notebooks of a build one after another, each kernel with
torch's default of a thread per core. On the project's 2-core machine that left
a core idle for most of the build (the twelve chapters took about 350 s, chapter
9 and 10 over 90 s each). This runs ``--jobs`` kernels at once, each with one
thread (``OMP_NUM_THREADS=1``, as nbval runs them), and puts each executed
notebook into the cache the build reads (``_config.yml``: ``execute_notebooks:
cache``), the same way MyST-NB does (jupyter-cache's ``single_nb_execution``
in the notebook's folder, ``meta_override``, the bundle cached under its path).
The build then renders every notebook from the cache and executes nothing.

A notebook the cache already holds (same code cells) is skipped. A notebook
that fails here is named and left out of the cache: the strict build executes
it again and reports the failure as it always has, so this step never hides or
replaces the build's own report. The notebooks expected to take longest (those
that train models or time suites most, ``expected_cost``) start first, so the
queues end close together.

From the repository root::

    python tools/execute_notebooks.py --cache _build/.jupyter_cache --jobs 2 book/*.ipynb
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

# Calls that train models or time suites: what makes a chapter slow to execute.
HEAVY_CALLS = ("run_experiments(", "benchmarks.run(", "pe.train(")


def expected_cost(path: Path) -> tuple[int, int]:
    """How long the notebook at ``path`` should take, to start the longest first: the
    number of calls that train or time, then the characters of code."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    return sum(code.count(call) for call in HEAVY_CALLS), len(code)


DEFAULT_TIMEOUT = 600  # seconds per cell: _config.yml's execute.timeout


def _execute(path: str, timeout: int) -> tuple[str, str | None, str | None, float]:
    """Execute one notebook in its own folder with one thread; returns its path, the
    executed notebook as JSON (None on failure), the error text and the seconds."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    os.environ["OMP_NUM_THREADS"] = "1"  # the kernel inherits it
    notebook = nbformat.read(path, as_version=4)
    result = single_nb_execution(
        notebook,
        cwd=str(Path(path).parent.resolve()),
        allow_errors=False,
        timeout=timeout,
        meta_override=True,
    )
    if result.err is not None:
        return path, None, result.exc_string or repr(result.err), result.time
    return path, nbformat.writes(notebook), None, result.time


def execute_into_cache(
    notebooks: list[Path], cache_path: Path, jobs: int, timeout: int
) -> list[str]:
    """Execute each notebook the cache lacks, ``jobs`` at a time, caching each; returns
    the paths that failed (with their errors printed)."""
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(cache_path))
    todo = []
    for path in notebooks:
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(path.resolve())
    todo.sort(key=expected_cost, reverse=True)
    print(
        f"executing {len(todo)} of {len(notebooks)} notebooks, {jobs} at a time, "
        "one thread each (the rest are in the cache)",
        flush=True,
    )
    failed = []
    # only this process writes to the cache's database; the workers execute
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_execute, str(p), timeout) for p in todo]
        for future in as_completed(futures):
            path, executed, error, seconds = future.result()
            name = Path(path).name
            if executed is None:
                failed.append(path)
                print(f"{name}: failed after {seconds:.0f} s (the build runs it again)")
                print(error, file=sys.stderr)
                continue
            record = cache.add_nb_to_project(path)
            cache.cache_notebook_bundle(
                CacheBundleIn(
                    nbformat.reads(executed, as_version=4),
                    record.uri,
                    data={"execution_seconds": seconds},
                ),
                check_validity=False,
                overwrite=True,
            )
            print(f"{name}: executed in {seconds:.0f} s", flush=True)
    return failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--cache", type=Path, required=True, help="the build's cache")
    parser.add_argument("--jobs", type=int, default=2, help="kernels at once")
    parser.add_argument(
        "--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per cell"
    )
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, got {args.jobs}")
    start = time.perf_counter()
    failed = execute_into_cache(args.notebooks, args.cache, args.jobs, args.timeout)
    print(
        f"{len(failed)} failed; {time.perf_counter() - start:.0f} s in all",
        flush=True,
    )


if __name__ == "__main__":
    main()
