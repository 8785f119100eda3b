"""The GPU command's tests step: which tests concern CUDA, as a pytest plugin.

``tools/gpu_evidence.py`` runs ``pytest FILES -p gpu_tests``: the files are
those that mention CUDA (``cuda_test_files``), and the plugin keeps, of their
tests, those skipped without a GPU (or with one), those that pretend a GPU is
there (a fixture with ``gpu`` in its name) and those whose code names CUDA;
in the dry run (``GPU_EVIDENCE_TESTS=marked``), the first kind alone.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cuda_test_files(*, marked_only: bool = False) -> list[str]:
    """The test files that mention CUDA (the plugin below picks the tests inside);
    with ``marked_only``, those with a test skipped for want of a GPU (or for one)."""
    files = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        text = path.read_text()
        if marked_only:
            found = re.search(r"skipif\([^\n]*reason=[^\n]*(gpu|cuda)", text, re.I)
        else:
            found = "cuda" in text.lower()
        if found:
            files.append(str(path.relative_to(ROOT)))
    return files


def concerns_cuda(item, marked_only: bool = False) -> bool:
    """A test skipped without a GPU (or with one), one that pretends a GPU is there
    (a fixture with ``gpu`` in its name), or one whose code names CUDA; with
    ``marked_only`` (the dry run), the first kind alone."""
    for mark in item.iter_markers("skipif"):
        if re.search(r"gpu|cuda", str(mark.kwargs.get("reason", "")), re.I):
            return True
    if marked_only:
        return False
    if any("gpu" in name for name in getattr(item, "fixturenames", ())):
        return True
    try:
        source = inspect.getsource(item.function)
    except (AttributeError, OSError, TypeError):
        return False
    return "cuda" in source.lower()


def pytest_collection_modifyitems(config, items):
    marked_only = os.environ.get("GPU_EVIDENCE_TESTS") == "marked"
    selected = [item for item in items if concerns_cuda(item, marked_only)]
    deselected = [item for item in items if item not in selected]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected
