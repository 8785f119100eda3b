"""Remove outputs and execution counts from the book's notebooks (the build executes them).

Usage: python tools/strip_notebooks.py [folder ...]   (default: book)
"""

import sys
from pathlib import Path

import nbformat


def strip(path: Path) -> bool:
    """Clear one notebook in place; return True if it changed."""
    notebook = nbformat.read(path, as_version=4)
    changed = False
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        if cell.outputs or cell.execution_count is not None:
            cell.outputs, cell.execution_count = [], None
            changed = True
        for key in ("execution", "collapsed", "scrolled"):
            changed |= cell.metadata.pop(key, None) is not None
    if changed:
        nbformat.write(notebook, path)
    return changed


if __name__ == "__main__":
    folders = [Path(arg) for arg in sys.argv[1:]] or [Path("book")]
    for folder in folders:
        for path in sorted(folder.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts and strip(path):
                print(f"stripped {path}")
