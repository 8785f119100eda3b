"""What a function writes to memory, and the most it holds at once (chapter 10).

``tensors_written(fn)`` lists the tensors each operator of ``fn`` writes, with
their bytes. The count depends only on the code and the shapes, so it is a
check a test (or an assignment, ``pe_tutorial.checks.performance``) can make
without timing anything; chapter 10 reads it beside the timings.

``peak_memory(fn, device)`` measures the most memory one call of ``fn`` holds
above what was allocated before it (its outputs included): on a GPU from
torch's CUDA allocator statistics, on the CPU from the allocations torch's CPU
allocator reports to ``torch.profiler`` (``PEAK_METHOD`` says which).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

import torch

__all__ = ["tensors_written", "peak_memory", "PEAK_METHOD", "quiet_stderr"]

# how peak_memory measures, by device type: what a table's footer says
PEAK_METHOD = {
    "cuda": "torch.cuda.max_memory_allocated after reset_peak_memory_stats",
    "cpu": (
        "the running total of torch's CPU allocator, as torch.profiler records "
        "it (profile_memory=True)"
    ),
}


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


def peak_memory(fn: Callable[[], object], device: torch.device | str) -> int:
    """Bytes: the most memory one call of ``fn()`` holds above what was held before it.

    Temporaries and the outputs (kept until the call has returned) count;
    memory allocated before the call does not, even where the call frees it.

    - CUDA: ``torch.cuda.max_memory_allocated`` after
      ``torch.cuda.reset_peak_memory_stats``, less ``memory_allocated``
      before the call (the caching allocator's live blocks, not what it
      reserves from the driver).
    - CPU: torch's CPU allocator keeps a running total of the bytes it has
      handed out while ``torch.profiler`` profiles memory and records it
      with every allocation and free; the peak is the largest total during
      the call less the total before its first allocation. Every allocation
      of a tensor's storage goes through it, whether an operator, a kernel's
      scratch buffer or code compiled by ``torch.compile`` asks. (Python's
      ``tracemalloc`` does not see these; a process's RSS moves by pages
      and keeps what the C allocator does not return.) Kineto's start and
      stop lines, which it writes to the process's stderr, are dropped.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return max(0, peak)
    if device.type != "cpu":
        raise ValueError(f"peak_memory measures on 'cpu' or 'cuda', got {device}")
    from torch.profiler import ProfilerActivity, profile

    try:
        from torch._C._profiler import _EventType

        allocation = _EventType.Allocation
    except (ImportError, AttributeError) as error:
        raise RuntimeError(
            f"this torch ({torch.__version__}) has no profiler events of allocations "
            "to measure CPU memory from"
        ) from error
    with (
        quiet_stderr(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        result = fn()
        del result
    # (when, the allocator's running total after it, bytes: + allocated, - freed)
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        fields = event.extra_fields
        if event.tag == allocation and fields.device.type == "cpu":
            total, size = fields.total_allocated, fields.alloc_size
            events.append((event.start_time_ns, total, size))
    if not events:
        return 0
    events.sort()
    # the running total before the call's first allocation (or free)
    _, total, size = events[0]
    before = total - size
    return max(0, max(total for _, total, _ in events) - before)


@contextlib.contextmanager
def quiet_stderr():
    """Send file descriptor 2 to /dev/null for the block (kineto prints there in C++)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
