"""Keep the executed notebooks' stream outputs as the kernel sent them.

With ``nb_merge_streams: true`` MyST-NB (1.4.0) joins a cell's stream outputs
for the page with ``myst_nb.core.utils.coalesce_streams``, which appends the
later streams' text to the first stream output *in place*. The notebook the
build writes to ``_build/jupyter_execute`` holds those same objects, so a cell
whose printing reached the kernel in two messages (a flush between two
``print`` calls, which a busy machine makes likelier) was written with the
first output holding every line and the second output repeating the last
ones. nbval, which joins the streams again, then saw the tail twice and failed
the cell (chapter 12's M-RoPE cell and chapter 10's listing, issue 48's notes).

This extension has MyST-NB join copies: the page shows the joined text as
before, and the written notebook keeps the outputs as they came.
"""

from __future__ import annotations

import copy


def joining_copies(coalesce):
    """``coalesce`` applied to a deep copy of the outputs, so they stay as given."""

    def join(outputs):
        return coalesce(copy.deepcopy(outputs))

    join.joins_copies = True
    return join


def setup(app):
    from myst_nb.core import render

    if not getattr(render.coalesce_streams, "joins_copies", False):
        render.coalesce_streams = joining_copies(render.coalesce_streams)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
