"""Submodules loaded on first use (PEP 562), for a package ``__init__``.

``pe.pages.plots`` or ``pe.encodings.symbolic`` then work without an import of
their own, while a plain ``import pe_tutorial`` loads neither matplotlib nor
sympy (a worker of ``--jobs`` or a grading process starts a second sooner).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from types import ModuleType


def submodules(package: str, path: Iterable[str]) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` for ``package`` (its ``__name__`` and ``__path__``)
    that imports ``package.NAME`` when ``NAME``, a module of the package's folder,
    is first read, and raises AttributeError for any other name."""
    names = frozenset(module.name for module in pkgutil.iter_modules(path))

    def __getattr__(name: str) -> ModuleType:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return importlib.import_module(f"{package}.{name}")

    return __getattr__
