"""Submodules loaded on first use (PEP 562), for a package ``__init__`` that names them.

``pe.pages.plots`` or ``pe.encodings.symbolic`` then work without an import of
their own, while a plain ``import pe_tutorial`` loads neither matplotlib nor
sympy (a worker of ``--jobs`` or a grading process starts a second sooner).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType


def submodules(package: str, names: tuple[str, ...]) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` for ``package`` that imports ``package.NAME`` when
    ``NAME`` (one of ``names``) is first read, and raises AttributeError otherwise."""

    def __getattr__(name: str) -> ModuleType:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return importlib.import_module(f"{package}.{name}")

    return __getattr__
