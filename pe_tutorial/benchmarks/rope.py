"""The ``rope`` suite: RoPE on q and k, the package's paths beside the peers' (chapter 10).

Rows, interleaved in one run: the dense matrix per token (the naive form, only
where it is small enough), ``apply_rope`` on q then k, the fused eager path
(q and k together, cos and sin once), the same in place, the compiled path and
the Triton kernel (on CUDA), then the peers (``peers.PEERS``) that are
installed, transformers' function compiled too (``COMPILED_HF``: compiled
against compiled), and copies of the same bytes. Every row is checked against
``apply_rope`` before it is timed, and one call of each is measured for the
most memory it holds (``peak MiB``; ``memory.peak_memory``).

Bytes moved by one call: q and k read and written, plus the cos and sin
tables read once: ``4 * q.nbytes + T * R * 4``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..devices import synchronize
from ..encodings import fused_rope, rope_triton
from ..encodings.rope import apply_rope, apply_rope_matrix
from . import peers
from . import timing as bench
from ._core import Plan, Suite, check_result, compile_counts, compile_note, register
from .round_ratios import per_round
from .timing import Case, with_peak_memory

# the dense matrix per token is skipped above this many multiply-adds per call
_MATRIX_LIMIT = 2**28


def default_shape(device: torch.device) -> tuple[int, int, int, int]:
    """(B, H, T, D): (8, 32, 2048, 128) on a GPU; (2, 16, 2048, 128) on a CPU.

    On the CPU q and k are 32 MiB each in float32, and a call moves 128 MiB
    (read and written): where the recorded copies of the machine the book is
    built on run from memory (chapter 10 checks it), not from cache.
    """
    return (8, 32, 2048, 128) if device.type == "cuda" else (2, 16, 2048, 128)


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-4 if dtype == torch.float32 else 3e-2


# the rows that write into outputs they were given, or in place; every other row
# returns new tensors, and is compared with a clone of its bytes (like with like)
WRITES_INTO_GIVEN = frozenset(
    {
        "fused, into given outputs (out=)",
        "fused, in place",
        "compiled, into given outputs",
    }
)


# transformers' function compiled as the package's compiled rows are
COMPILED_HF = "transformers apply_rotary_pos_emb, compiled"


def is_peer(name: str) -> bool:
    """Whether the row called ``name`` is another library's (compiled or not)."""
    return name in peers.PEERS or name == COMPILED_HF


def writes_into_given(name: str) -> bool:
    """Whether the row called ``name`` writes into outputs it was given or in
    place (held against a copy into a given output), not into new tensors."""
    return name in WRITES_INTO_GIVEN or name in peers.IN_PLACE


def _checked_case(name, fn, expected, dtype, *, layout="bhtd") -> Case:
    """A Case for ``fn``, whose output must match ``expected``; else ``WrongResult``.

    A wrong answer is never timed and never dropped quietly: the suite stops
    and says which path was wrong and by how much.
    """
    out_q, out_k = fn()
    if layout == "bthd":
        out_q, out_k = out_q.transpose(1, 2), out_k.transpose(1, 2)
    tolerance = _tolerance(dtype)
    for got, want, which in ((out_q, expected[0], "q"), (out_k, expected[1], "k")):
        check_result(
            name,
            got,
            want,
            what=f"rotated {which}",
            reference="apply_rope",
            atol=tolerance,
            rtol=tolerance,
        )
    return Case(name, fn)


@dataclass
class _Inputs:
    """What every row of the suite works on, and the answer it must give."""

    q: torch.Tensor
    k: torch.Tensor
    positions: torch.Tensor
    base: float
    expected: tuple[torch.Tensor, torch.Tensor]
    cos_sin: tuple[torch.Tensor, torch.Tensor]

    @classmethod
    def make(cls, shape, device, dtype, base) -> _Inputs:
        q, k = (torch.randn(shape, device=device, dtype=dtype) for _ in range(2))
        positions = torch.arange(shape[2], device=device)
        return cls(
            q,
            k,
            positions,
            base,
            (apply_rope(q, positions, base=base), apply_rope(k, positions, base=base)),
            fused_rope.rope_cos_sin(positions, shape[3], base=base),
        )


def _naive_case(x: _Inputs, notes: list[str]) -> list[Case]:
    """The dense D x D matrix per token, where it is small enough to time."""
    batch, heads, seq, head_dim = x.q.shape
    macs = 2 * batch * heads * seq * head_dim * head_dim
    if macs > _MATRIX_LIMIT:
        notes.append(
            f"naive dense matrix skipped: {macs / 1e9:.1f} G multiply-adds a call "
            "here (chapter 6 times it at a small size)"
        )
        return []
    q, k, positions, base = x.q, x.k, x.positions, x.base
    return [
        _checked_case(
            "naive: a dense D x D matrix per token",
            lambda: (
                apply_rope_matrix(q, positions, base=base),
                apply_rope_matrix(k, positions, base=base),
            ),
            x.expected,
            q.dtype,
        )
    ]


def _eager_cases(x: _Inputs) -> list[Case]:
    """``apply_rope`` on q then k, and the fused eager paths (new, out=, in place)."""
    q, k, cos_sin, base = x.q, x.k, x.cos_sin, x.base
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    # in place on copies: the first call (the check) turns them from q and k,
    # the timed calls keep turning them
    q_in, k_in = q.clone(), k.clone()
    calls = {
        # positions 0 .. T-1, the default, whose cos/sin apply_rope keeps
        "apply_rope on q, then on k": lambda: (
            apply_rope(q, base=base),
            apply_rope(k, base=base),
        ),
        "fused: q and k, cos/sin once": lambda: fused_rope.apply_rope_qk(
            q, k, cos_sin=cos_sin
        ),
        "fused, into given outputs (out=)": lambda: fused_rope.apply_rope_qk(
            q, k, cos_sin=cos_sin, out=(q_out, k_out)
        ),
        "fused, in place": lambda: fused_rope.apply_rope_qk(
            q_in, k_in, cos_sin=cos_sin, inplace=True
        ),
    }
    return [_checked_case(name, fn, x.expected, q.dtype) for name, fn in calls.items()]


def _compiled_cases(x: _Inputs, notes: list[str]) -> list[Case]:
    """The torch.compile'd rotation, into new outputs and into given ones."""
    q, k, cos_sin = x.q, x.k, x.cos_sin
    cases = []
    for label, out in (
        ("new outputs", None),
        ("into given outputs", (torch.empty_like(q), torch.empty_like(k))),
    ):
        name = f"compiled, {label}"
        before = compile_counts()
        try:
            fast, seconds = fused_rope.compile_rope_qk(q, k, cos_sin=cos_sin, out=out)
        except RuntimeError as error:
            notes.append(f"{name}: skipped, {error}")
            continue
        cases.append(
            _checked_case(
                name, lambda fast=fast: fast(q, k, cos_sin=cos_sin), x.expected, q.dtype
            )
        )
        notes.append(compile_note(name, seconds, before))
    return cases


def _compiled_peer_case(x: _Inputs, notes: list[str]) -> list[Case]:
    """transformers' function compiled by ``torch.compile``, as the package's
    compiled rows are: compiled against compiled, in Hugging Face's layout."""
    try:
        build = peers.transformers_llama(x.q, x.k, x.positions, x.base)
    except peers.PeerUnavailable as why:
        notes.append(f"{COMPILED_HF}: skipped, {why}")
        return []
    compiled = torch.compile(build.function, dynamic=False)
    args = build.arguments
    before = compile_counts()
    start = time.perf_counter()
    try:
        compiled(*args)
    except RuntimeError as error:
        first = (str(error).strip().splitlines() or [""])[0][:200]
        notes.append(f"{COMPILED_HF}: skipped, torch.compile failed ({first})")
        return []
    synchronize(x.q.device)
    notes.append(compile_note(COMPILED_HF, time.perf_counter() - start, before))
    case = _checked_case(COMPILED_HF, lambda: compiled(*args), x.expected, x.q.dtype)
    case.shapes = {"layout": build.layout_text}
    return [case]


def _triton_case(x: _Inputs, notes: list[str]) -> list[Case]:
    """The hand-written Triton kernel, on CUDA GPUs that can run it in this dtype.

    A GPU below compute capability 8.0 (a T4) has no Triton bfloat16; there the
    suite's default dtype is float16 already (``devices.timing_dtype``), and a
    dtype the kernel refuses leaves a note saying why instead of a row.
    """
    if x.q.device.type != "cuda":
        notes.append(
            "Triton kernel: skipped, it runs on CUDA GPUs (the tests check it on "
            "the CPU in Triton's interpreter, which is far too slow to time)"
        )
        return []
    ok, reason = rope_triton.triton_status(x.q.device, x.q.dtype)
    if not ok:
        notes.append(f"Triton kernel: skipped, {reason}")
        return []
    q, k, cos_sin = x.q, x.k, x.cos_sin
    return [
        _checked_case(
            "Triton kernel",
            lambda: rope_triton.apply_rope_qk_triton(q, k, cos_sin=cos_sin),
            x.expected,
            q.dtype,
        )
    ]


def _peer_cases(x: _Inputs, notes: list[str]) -> list[Case]:
    """Each installed peer (``peers.PEERS``), checked in its own pairing and layout."""
    cases = []
    for name, (build, pairing) in peers.PEERS.items():
        try:
            fn = build(x.q, x.k, x.positions, x.base)
        except peers.PeerUnavailable as why:
            notes.append(f"{name}: skipped, {why}")
            continue
        want = x.expected
        if pairing != "half":
            want = tuple(
                apply_rope(t, x.positions, base=x.base, pairing=pairing)
                for t in (x.q, x.k)
            )
        layout = getattr(fn, "layout", "bhtd")
        case = _checked_case(name, fn, want, x.q.dtype, layout=layout)
        case.shapes = {"layout": fn.layout_text}  # the suite adds q and k's shape
        cases.append(case)
    return cases


def rope_suite(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
    base: float = 10000.0,
    compiled: bool = True,
    include_peers: bool = True,
) -> Plan:
    """RoPE on q and k of ``shape`` (B, H, T, D), every implementation at hand."""
    shape = tuple(shape) if shape is not None else default_shape(device)
    x = _Inputs.make(shape, device, dtype, base)
    notes: list[str] = []
    cases = _naive_case(x, notes) + _eager_cases(x)
    if compiled:
        cases += _compiled_cases(x, notes)
    cases += _triton_case(x, notes)
    if include_peers:
        cases += _peer_cases(x, notes)
        if compiled:
            cases += _compiled_peer_case(x, notes)
    nbytes = 4 * x.q.numel() * x.q.element_size() + shape[2] * shape[3] * 4
    dtype_name = str(dtype).replace("torch.", "")
    for case in cases:
        case.shapes = {"q, k": list(shape), **case.shapes}
        case.dtype = dtype_name
        case.bytes_moved = nbytes
        case.allocates = not writes_into_given(case.name)
    notes += with_peak_memory(cases, device)
    return Plan(cases, notes=notes, settings={"shape": list(shape), "base": base})


# the targets, at the shapes they name
CPU_TARGET = {
    "shape": [2, 16, 2048, 128],
    "dtype": "float32",
    "x_copy": 1.5,
    "vs_hf": 8.0,
}
GPU_TARGET = {"shape": [8, 32, 2048, 128], "dtype": "bfloat16", "of_copy": 0.85}


def fastest_own(result, *, allocates: bool | None = None) -> object:
    """The fastest row that is the package's own (not a peer, not a copy), as
    ``bench.fastest_group`` finds it.

    ``allocates=True`` keeps only rows that return new tensors (as every peer
    does), ``False`` only rows that write into given outputs or in place: a
    peer is compared with the package like with like. Rows timed in the same
    rounds are weighed by their per-round ratios; rows timed apart (a record
    made before rounds were kept) leave a noisy row out, and ``noisy_own``
    lists what was left out. ValueError if no row remains.
    """
    own = own_rows(result, allocates)
    if not own:
        raise ValueError(
            f"no row of the package's own with allocates={allocates} in this run"
        )
    try:
        return bench.fastest_group(own)[0]
    except ValueError:
        raise ValueError(
            f"every row of the package's own with allocates={allocates} is marked "
            f"noisy in this run ({', '.join(repr(t.name) for t in own)}): record "
            "the suite again on a quiet machine"
        ) from None


def noisy_own(result, *, allocates: bool | None = None) -> list:
    """The package's own rows that ``fastest_own`` could not weigh: noisy rows
    timed apart from the rest (rows timed in the same rounds are all weighed)."""
    own = own_rows(result, allocates)
    paired = bool(own) and all(per_round(t, own[0]) is not None for t in own[1:])
    return [] if paired else [t for t in own if t.noisy]


def own_rows(result, allocates: bool | None) -> list:
    """The package's own rows (not a peer, not a copy), of one kind if asked."""
    return [
        t
        for t in result.timings
        if not t.is_copy
        and not is_peer(t.name)
        and (allocates is None or t.allocates == allocates)
    ]


def hugging_face_row(result):
    """transformers' own function when it ran, else the rotate-half formula."""
    names = {t.name: t for t in result.timings}
    for name in (
        "transformers apply_rotary_pos_emb",
        "rotate-half formula, written out",
    ):
        if name in names:
            return names[name]
    return None


def _times_copy(result, row) -> float:
    """``row``'s time over its copy's: per round where the copy row is in the run
    (``bench.ratio_of``), else the ``copy_ms`` the row carries."""
    try:
        copy = result.copy_for(row)
    except ValueError:
        return row.ratio_to_copy
    return bench.ratio_of(row, copy)


def check_targets(result) -> list[str]:
    """The targets, each with the ratio measured in this run and whether it is met
    (read from steady rows only: no verdict where the rows it needs are noisy)."""
    try:
        best = fastest_own(result)
    except ValueError as error:
        return [f"no verdict on the targets: {error}"]
    on_gpu = result.environment["device"].startswith("cuda")
    target = GPU_TARGET if on_gpu else CPU_TARGET
    group = bench.fastest_group(own_rows(result, None))  # with its ties
    lines = [f"fastest of the package's rows: {bench.fastest_text(group)}"]
    at_target = result.settings.get("shape") == target["shape"] and (
        result.settings.get("dtype") == target["dtype"]
    )
    if not at_target:
        lines.append(
            f"(the targets are set for q, k of {tuple(target['shape'])} in "
            f"{target['dtype']}; this run used other settings, so no verdict)"
        )

    def verdict(met: bool) -> str:
        if not at_target:
            return ""
        return ": met" if met else ": NOT met"

    if on_gpu:
        share = 1 / _times_copy(result, best)
        met = share >= target["of_copy"]
        lines.append(
            f"target: at least {target['of_copy']:.0%} of the copy's bandwidth; "
            f"measured {share:.0%}{verdict(met)}"
        )
        own_peers = [t for t in result.timings if is_peer(t.name)]
        try:  # like with like: each peer against the fastest row of its kind
            mine = {kind: fastest_own(result, allocates=kind) for kind in (True, False)}
        except ValueError as error:
            return [*lines, f"no verdict against the peers: {error}"]
        slower = all(mine[t.allocates].median_ms < t.median_ms for t in own_peers)
        lines.append(
            f"target: {mine[True].name} (new outputs) and {mine[False].name} (given "
            f"outputs or in place) faster than every peer of their kind that ran "
            f"({len(own_peers)}){verdict(slower)}"
        )
        return lines
    ratio = _times_copy(result, best)
    lines.append(
        f"target: within {target['x_copy']:.1f}x of the copy; measured "
        f"{ratio:.2f}x{verdict(ratio <= target['x_copy'])}"
    )
    hf = hugging_face_row(result)
    if hf is not None:
        # like with like: the peer returns new tensors, so does the row it meets
        try:
            allocating = fastest_own(result, allocates=True)
        except ValueError as error:
            return [*lines, f"no verdict against {hf.name}: {error}"]
        speedup = bench.ratio_of(hf, allocating)
        met = speedup >= target["vs_hf"]
        lines.append(
            f"target: {allocating.name} at least {target['vs_hf']:.0f}x faster than "
            f"{hf.name} (both return new tensors); measured {speedup:.1f}x"
            f"{verdict(met)}"
        )
    return lines


def rope_in_cache(
    device: torch.device, dtype: torch.dtype, *, shape=(1, 8, 128, 64), **options
) -> Plan:
    """The ``rope`` suite on q and k small enough to stay in cache, uncompiled.

    (1, 8, 128, 64): 256 KiB each in float32, what one layer rotates when
    128 sequences decode a token each (8 heads of 64); fixed costs per call
    weigh as much as the bytes here (chapter 10).
    """
    options.setdefault("compiled", False)
    return rope_suite(device, dtype, shape=shape, **options)


register(
    Suite(
        "rope_in_cache",
        "10",
        "RoPE on q and k that stay in cache: fixed costs per call",
        rope_in_cache,
        why="128 tokens, 8 heads of 64: one layer's q and k when 128 sequences decode",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=5,
        repeats=50,
        cpu_repeats=50,
        smoke={"shape": (1, 2, 8, 16)},
    )
)

register(
    Suite(
        "rope",
        "10",
        "RoPE on q and k: the package's paths and the peers",
        rope_suite,
        why="q and k of a batch of 2048-token sequences, 16 heads of 128: more than the caches hold",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=3,
        repeats=20,
        cpu_repeats=10,
        report=check_targets,
        # uncompiled: a CPU compile takes seconds (tools/gpu_evidence.py checks it apart)
        smoke={"shape": (1, 2, 8, 16), "compiled": False},
    )
)
