"""Helpers for the book's notebooks that also run where the book's tools are missing.

``glue(name, value)`` hands a computed value to the prose through MyST-NB's
``glue`` when it is installed (building the book), so a sentence quotes the
number the cell computed. Every value is also kept in ``GLUED`` under its
name, everywhere: on Colab or in plain Jupyter, where ``myst_nb`` is not
installed and the text shows the book's numbers, ``GLUED["rise_rope"]`` is
this run's own. With ``display=True`` the value is also shown.
"""

from __future__ import annotations

from typing import Any

__all__ = ["glue", "have_myst_nb", "GLUED"]

# every value glued in this process, by name (the last one wins)
GLUED: dict[str, Any] = {}


def have_myst_nb() -> bool:
    try:
        import myst_nb  # noqa: F401
    except ImportError:
        return False
    return True


def glue(name: str, value: Any, *, display: bool = False) -> None:
    """Glue ``value`` under ``name`` for ``{glue:text}`` roles; show it if ``display``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue needs a non-empty name, got {name!r}")
    GLUED[name] = value
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
