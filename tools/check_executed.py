"""Every cell nbval is asked to compare has an output to compare against (issue 19).

    python tools/check_executed.py [_build/jupyter_execute/book]

``make test-outputs`` runs nbval over the notebooks the book build executed (or
took from MyST-NB's execution cache). nbval compares a cell tagged
``nbval-check-output`` with the output stored in that notebook, but it skips the
comparison when the stored cell was never run (``execution_count`` is null), and
a stored cell with no output can only catch a cell that starts printing. Either
way a tagged cell would pass whatever it prints, so this check runs first and
fails, naming each notebook and cell, when a tagged cell

- was not executed (no ``execution_count``), or
- has no stored output, or
- stored an error.

It also fails when there is no notebook to check at all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "nbval-check-output"


def tagged_cells(notebook: dict) -> list[tuple[int, dict]]:
    return [
        (index, cell)
        for index, cell in enumerate(notebook.get("cells", []))
        if cell.get("cell_type") == "code"
        and TAG in cell.get("metadata", {}).get("tags", [])
    ]


def problems_of(cell: dict) -> list[str]:
    outputs = cell.get("outputs") or []
    found = []
    if cell.get("execution_count") is None:
        found.append("was not executed (execution_count is null)")
    if not outputs:
        found.append("has no stored output to compare")
    if any(output.get("output_type") == "error" for output in outputs):
        found.append("stored an error")
    return found


def check(folder: Path) -> tuple[list[str], int, int]:
    """Problems, notebooks read and tagged cells seen under ``folder``."""
    notebooks = sorted(
        p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    problems, cells = [], 0
    for path in notebooks:
        for index, cell in tagged_cells(json.loads(path.read_text())):
            cells += 1
            first_line = "".join(cell.get("source", "")).strip().splitlines()[:1]
            where = (
                f"{path.relative_to(folder)}, cell {index} ({' '.join(first_line)!r})"
            )
            problems += [f"{where} {problem}" for problem in problems_of(cell)]
    return problems, len(notebooks), cells


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else ROOT / "_build" / "jupyter_execute" / "book"
    problems, notebooks, cells = check(folder)
    if notebooks == 0:
        print(
            f"error: no executed notebooks under {folder}: run make book",
            file=sys.stderr,
        )
        return 1
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print(
        f"{cells} cells tagged {TAG} in {notebooks} executed notebooks: "
        f"{len(problems)} without an output to compare"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
