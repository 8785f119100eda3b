"""The ``rope_decode`` suite: RoPE while decoding, one new token per sequence (chapter 10).

A batch of sequences of different lengths decodes one token each: sequence
``b`` has ``offsets[b]`` tokens in its KV cache, so its new token sits at
position ``offsets[b]``, which is both its RoPE angle and its row of the
cache. Rows, interleaved in one run and sampled alike (single calls, or the
mean of several in a row where single calls stayed noisy; the table says
which), in two groups:

- the rotation of the new tokens' q and k (new outputs): ``apply_rope`` on q
  then on k, the fused eager path (cos and sin once), the compiled path, and
  the Triton kernel (on CUDA);
- the rotation with the keys written into the cache: in two steps (the fused
  rotation, then the keys put into their rows), in one call
  (``fused_rope.apply_rope_qk_to_cache``), and compiled into one loop that
  stores each rotated key straight into its row, as vLLM's and FlashInfer's
  fused kernels do; on CUDA also the one call captured once as a CUDA graph
  and replayed, which launches its kernels without Python or per-operator
  launch costs (what decoding engines do, since one token's work is too
  small to hide a launch).

Every row is checked before it is timed against a loop over the sequences that
rotates each with ``apply_rope`` at its own position (and, for the cache rows,
against the whole cache: the new rows rotated, every other row untouched).

Bytes moved by one call: q and k read, their rotations written (into new
tensors or into the cache's rows), the offsets read:
``2 * (q.nbytes + k.nbytes) + offsets.nbytes``. At these sizes q and k stay
in cache: what a row costs is mostly its fixed cost per operator.
"""

from __future__ import annotations

import time

import torch

from ..devices import synchronize
from ..encodings import fused_rope, rope_triton
from ..encodings.rope import apply_rope
from . import timing as bench
from ._core import Plan, Suite, check_result, compile_counts, compile_note, register
from .timing import Case, with_peak_memory

ROTATION = "fused: q and k, cos/sin once"
TWO_STEPS = "two steps: fused, then k into the cache"
ONE_CALL = "one call: apply_rope_qk_to_cache"
ONE_LOOP = "compiled: one loop into the cache"
GRAPHED = "one call, replayed as a CUDA graph"
# like with like: (faster candidate, the row it is read against)
PAIRS = (
    (ROTATION, "apply_rope on q, then on k"),
    ("compiled: q and k", ROTATION),
    ("Triton kernel", ROTATION),
    (ONE_CALL, TWO_STEPS),
    (ONE_LOOP, TWO_STEPS),
    (GRAPHED, ONE_CALL),
)


def default_sizes(device: torch.device) -> dict:
    """128 sequences; the ``rope`` suite's heads (32 of 128 on a GPU, 16 on a CPU);
    a cache of 1024 rows a sequence on a GPU, 64 on a CPU (its size moves no row)."""
    on_gpu = device.type == "cuda"
    return {
        "batch": 128,
        "heads": 32 if on_gpu else 16,
        "head_dim": 128,
        "max_len": 1024 if on_gpu else 64,
    }


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-4 if dtype == torch.float32 else 3e-2


def _check(name: str, got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Raise WrongResult unless ``got`` equals ``want`` within the dtype's tolerance."""
    tolerance = _tolerance(want.dtype)
    check_result(
        name,
        got,
        want,
        what=what,
        reference="apply_rope at each sequence's own offset",
        atol=tolerance,
        rtol=tolerance,
    )


class _Decode:
    """The new tokens, the cache they go into, and the answers every row must give."""

    def __init__(self, device, dtype, *, batch, heads, kv_heads, head_dim, max_len):
        generator = torch.Generator().manual_seed(0)

        def randn(*shape):
            return torch.randn(*shape, generator=generator).to(device, dtype)

        self.q = randn(batch, heads, 1, head_dim)
        self.k = randn(batch, kv_heads, 1, head_dim)
        # sequences of different lengths: where each one's new token goes
        self.offsets = torch.randint(0, max_len, (batch,), generator=generator).to(
            device
        )
        # (B, 1, 1): one position per sequence, for every head and the one token
        self.positions = self.offsets[:, None, None]
        # what the cache holds before the step: the sequences' earlier keys
        self.stale = randn(batch, kv_heads, max_len, head_dim)
        self.k_cache = self.stale.clone()
        self.batch = torch.arange(batch, device=device)
        self.expected_q, self.expected_k = self._reference()
        self.expected_cache = self.stale.clone()
        for b, offset in enumerate(self.offsets.tolist()):
            self.expected_cache[b, :, offset] = self.expected_k[b, :, 0]

    def _reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each sequence alone, rotated by ``apply_rope`` at its own position."""
        rotated_q, rotated_k = [], []
        for b, offset in enumerate(self.offsets.tolist()):
            position = torch.tensor([offset], device=self.q.device)
            rotated_q.append(apply_rope(self.q[b], position))
            rotated_k.append(apply_rope(self.k[b], position))
        return torch.stack(rotated_q), torch.stack(rotated_k)

    def rotation_case(self, name, fn) -> Case:
        """A row that returns the rotated q and k, checked first."""
        with torch.no_grad():
            got_q, got_k = fn()
        _check(name, got_q, self.expected_q, "rotated q")
        _check(name, got_k, self.expected_k, "rotated k")
        return Case(name, fn)

    def cache_case(self, name, fn) -> Case:
        """A row that returns the rotated q and writes the keys into the cache."""
        self.k_cache.copy_(self.stale)
        with torch.no_grad():
            got_q = fn()
        _check(name, got_q, self.expected_q, "rotated q")
        _check(name, self.k_cache, self.expected_cache, "KV cache after the write")
        return Case(name, fn)


def _rotation_cases(x: _Decode, compiled: bool, notes: list[str]) -> list[Case]:
    q, k, positions = x.q, x.k, x.positions
    cases = [
        x.rotation_case(
            "apply_rope on q, then on k",
            lambda: (apply_rope(q, positions), apply_rope(k, positions)),
        ),
        x.rotation_case(ROTATION, lambda: fused_rope.apply_rope_qk(q, k, positions)),
    ]
    if compiled:
        name = "compiled: q and k"
        before = compile_counts()
        try:
            with torch.no_grad():
                fast, seconds = fused_rope.compile_rope_qk(q, k, positions)
        except RuntimeError as error:
            notes.append(f"{name}: skipped, {error}")
        else:
            cases.append(x.rotation_case(name, lambda: fast(q, k, positions)))
            notes.append(compile_note(name, seconds, before))
    if q.device.type != "cuda":
        notes.append(
            "Triton kernel: skipped, it runs on CUDA GPUs (the tests check it on "
            "the CPU in Triton's interpreter, which is far too slow to time)"
        )
        return cases
    ok, reason = rope_triton.triton_status(q.device, q.dtype)
    if not ok:
        notes.append(f"Triton kernel: skipped, {reason}")
        return cases
    cases.append(
        x.rotation_case(
            "Triton kernel", lambda: rope_triton.apply_rope_qk_triton(q, k, positions)
        )
    )
    return cases


def _cache_cases(x: _Decode, compiled: bool, notes: list[str]) -> list[Case]:
    q, k, k_cache, offsets, positions = x.q, x.k, x.k_cache, x.offsets, x.positions
    batch = x.batch

    def two_steps():
        q_rot, k_rot = fused_rope.apply_rope_qk(q, k, positions)
        # k_cache[b, :, offsets[b]] = k_rot[b, :, 0]
        k_cache[batch, :, offsets] = k_rot[:, :, 0]
        return q_rot

    def one_call():
        return fused_rope.apply_rope_qk_to_cache(
            q, k, k_cache, offsets, check_offsets=False
        )[0]

    cases = [x.cache_case(TWO_STEPS, two_steps), x.cache_case(ONE_CALL, one_call)]
    cases += _graphed_cases(x, one_call, notes)
    if not compiled:
        return cases

    def one_loop():
        return fused_rope.compiled_apply_rope_qk_to_cache(
            q, k, k_cache, offsets, check_offsets=False
        )[0]

    before = compile_counts()
    synchronize(q.device)
    start = time.perf_counter()
    try:
        with torch.no_grad():
            one_loop()
    except RuntimeError as error:
        notes.append(f"{ONE_LOOP}: skipped, {error}")
        return cases
    synchronize(q.device)
    notes.append(compile_note(ONE_LOOP, time.perf_counter() - start, before))
    return cases + [x.cache_case(ONE_LOOP, one_loop)]


def rope_decode_suite(
    device: torch.device,
    dtype: torch.dtype,
    *,
    batch: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    max_len: int | None = None,
    compiled: bool = True,
) -> Plan:
    """One decoding step's RoPE for ``batch`` sequences (``default_sizes``).

    ``kv_heads`` defaults to ``heads`` (fewer: grouped-query attention);
    ``max_len`` is the rows of the cache per sequence, and the offsets are
    drawn (seeded) from ``0 .. max_len - 1``.
    """
    sizes = default_sizes(device)
    batch = batch or sizes["batch"]
    heads = heads or sizes["heads"]
    kv_heads = kv_heads or heads
    head_dim = head_dim or sizes["head_dim"]
    max_len = max_len or sizes["max_len"]
    x = _Decode(
        device,
        dtype,
        batch=batch,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_len=max_len,
    )
    notes: list[str] = []
    cases = _rotation_cases(x, compiled, notes) + _cache_cases(x, compiled, notes)
    # the checks are done: the cache's earlier contents and the answers can go
    del x.stale, x.expected_cache
    nbytes = 2 * (x.q.nbytes + x.k.nbytes) + x.offsets.nbytes
    dtype_name = str(dtype).replace("torch.", "")
    for case in cases:
        case.shapes = {"q": list(x.q.shape), "k": list(x.k.shape)}
        case.dtype = dtype_name
        case.bytes_moved = nbytes
        # every row returns a new rotated q (the cache rows write k into the
        # cache they were given): each meets a clone of its bytes
        case.allocates = True
        case.fn = _no_grad(case.fn)
    notes += with_peak_memory(cases, device)
    offsets = x.offsets.tolist()
    notes.append(
        f"offsets (tokens already cached) from {min(offsets)} to {max(offsets)}; "
        f"cache of {max_len} rows a sequence, {kv_heads} heads"
    )
    return Plan(
        cases,
        notes=notes,
        settings={
            "batch": batch,
            "heads": heads,
            "kv_heads": kv_heads,
            "head_dim": head_dim,
            "max_len": max_len,
            "offsets": offsets,
        },
    )


def _graphed_cases(x: _Decode, one_call, notes: list[str]) -> list[Case]:
    """``one_call`` captured as a CUDA graph and replayed (CUDA only).

    A graph records the kernels one call launches, with the addresses of its
    tensors; a replay launches them all at once, without Python, argument
    checks or a launch per operator. Every input here stays where it is (the
    new tokens, the offsets and the cache), which is what a graph needs.
    """
    device = x.q.device
    if device.type != "cuda":
        notes.append(f"{GRAPHED}: skipped, CUDA graphs need a CUDA GPU")
        return []
    try:
        # warm up on a side stream first, as torch.cuda.graph asks
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(3):
                one_call()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            rotated_q = one_call()
    except RuntimeError as error:  # a path that cannot be captured: said, not fatal
        first = (str(error).strip().splitlines() or [""])[0][:200]
        notes.append(f"{GRAPHED}: skipped, capture failed ({first})")
        return []

    def replay():
        graph.replay()
        return rotated_q

    return [x.cache_case(GRAPHED, replay)]


def _no_grad(fn):
    def call():
        with torch.no_grad():
            return fn()

    return call


def report(result) -> list[str]:
    """Each faster candidate against the row doing the same work, like with like."""
    names = {t.name: t for t in result.timings}
    lines = []
    for row, against in PAIRS:
        if row in names and against in names:
            slow, fast = names[against], names[row]
            try:
                bench.check_ratio_quotable(slow, fast)
                steady = True
            except bench.NoisyRow:
                steady = False
            if not steady:
                noise = " (the ratio is noisy: not a finding)"
            elif bench.within_noise(slow, fast):
                noise = " (within noise)"
            else:
                noise = ""
            lines.append(
                f"{against}: {bench.ratio_of(slow, fast):.2f}x the time of {row}{noise}"
            )
    return lines


register(
    Suite(
        "rope_decode",
        "10",
        "RoPE while decoding: one token per sequence, written into the KV cache",
        rope_decode_suite,
        why="128 sequences, one new token each at its own offset; the rope suite's heads",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=5,
        repeats=50,
        cpu_repeats=30,
        report=report,
        smoke={"batch": 4, "heads": 2, "head_dim": 16, "max_len": 8, "compiled": False},
    )
)
