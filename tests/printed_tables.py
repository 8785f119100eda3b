"""Reading a printed timing table (``benchmarks.format_table``) by its columns'
names, so tests do not depend on where a column sits."""

from __future__ import annotations


def cell(table: str, row: str, column: str) -> str:
    """The text of ``column`` in the first line of ``table`` that starts with
    ``row``: numbers are right-aligned under their heading, so the cell ends
    where the heading does and runs back to the previous column's end (a ratio's
    noise star, ``" *"``, included)."""
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("what "))
    end = header.index(column) + len(column)
    before = header[: header.index(column)].rstrip()
    start = len(before) + 1 if before != "what" else None
    line = next(line for line in lines if line.startswith(row))
    if start is None:  # the first number column: after the row's name
        return line[:end].rsplit("  ", 1)[-1].strip()
    return line[start:end].strip()
