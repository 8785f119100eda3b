"""What a function writes to memory, counted the same on every machine (chapter 10).

``tensors_written(fn)`` lists the tensors each operator of ``fn`` writes, with
their bytes. The count depends only on the code and the shapes, so it is a
check a test (or an assignment, ``pe_tutorial.checks.performance``) can make
without timing anything; chapter 10 reads it beside the timings.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["tensors_written"]


def tensors_written(fn: Callable[[], object]) -> list[tuple[str, int]]:
    """Run ``fn()`` eagerly and list ``(op, bytes)`` for every tensor an op writes.

    Each ATen operator that produces a tensor is seen through a
    ``TorchDispatchMode``; views (outputs sharing an input's storage, such as
    slices and transposes) write nothing and are left out, in-place operators
    count the bytes they overwrite. The count depends only on the code and the
    shapes, not on the machine: it says how many full-size intermediates an
    implementation materialises (chapter 10).
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    written: list[tuple[str, int]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = {
                t.untyped_storage().data_ptr()
                for t in tree_flatten((args, kwargs or {}))[0]
                if isinstance(t, torch.Tensor)
            }
            in_place = func._schema.name.endswith("_") or any(
                a.alias_info is not None and a.alias_info.is_write
                for a in func._schema.arguments
            )
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                if t.untyped_storage().data_ptr() in inputs and not in_place:
                    continue  # a view: nothing written
                written.append((func.__name__, t.numel() * t.element_size()))
            return out

    with Recorder():
        fn()
    return written
