"""Give every executed notebook the outputs of the execution that produced it.

MyST-NB writes each notebook it executed to ``_build/jupyter_execute``, where
``make test-outputs`` runs nbval over it. A notebook taken from the execution
cache is rendered with the cached outputs, but the copy written there is the
notebook as read from ``book/``: no outputs and no execution counts (myst-nb
1.4.0 writes the notebook it parsed, not the client's merged copy). nbval
skips the comparison for a cell that was never run, so on a rebuild every cell
tagged ``nbval-check-output`` passed whatever it printed (issue 19).

When the build finishes, each written notebook whose code cells carry no
execution count gets its outputs from the cache (jupyter-cache's
``merge_match_into_notebook``, the same merge MyST-NB renders from). A notebook
the cache does not hold is left as it is; ``tools/check_executed.py`` then
names it.
"""

from __future__ import annotations

from pathlib import Path

import nbformat


def never_run(notebook) -> bool:
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return bool(code) and all(cell.get("execution_count") is None for cell in code)


def restore_outputs(folder: Path, cache_path: Path) -> list[Path]:
    """Merge cached outputs into the notebooks under ``folder`` written without them."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    restored = []
    for path in sorted(folder.rglob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        if not never_run(notebook):
            continue
        try:
            _, merged = cache.merge_match_into_notebook(notebook)
        except KeyError:  # not in the cache: left for tools/check_executed.py to name
            continue
        nbformat.write(merged, path)
        restored.append(path)
    return restored


def _restore(app, exception):
    config = getattr(app.env, "mystnb_config", None)
    if exception is not None or config is None or config.execution_mode != "cache":
        return
    folder = Path(config.output_folder)
    if folder.is_dir():
        restore_outputs(folder, Path(config.execution_cache_path))


def setup(app):
    app.connect("build-finished", _restore)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
