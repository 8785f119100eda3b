"""Forward plus backward: ``rope_backward`` and ``attention_backward`` (chapter 10).

Training runs every position encoding backwards too, and a path that saves
fewer tensors for its backward pass (as Liger's fused kernels do) wins there,
in time and in memory. Each row is one call of the forward and the backward
pass: the gradients of ``sum(out * g)`` for a fixed ``g`` (``out.backward(g)``,
as a layer receives ``g`` from the layers above) with respect to q and k, and
v and the bias's learned parameters for attention, by ``torch.autograd.grad``
(nothing accumulates between calls). Rows, interleaved and sampled alike
(single calls, or the mean of several in a row where single calls stayed
noisy; the table says which):

- ``rope_backward``: RoPE on q and k: ``apply_rope`` on each, the fused eager
  path, the compiled path (its forward and backward compiled; compile time in
  the notes). The Triton kernel has no backward pass and is left out.
- ``attention_backward``: causal attention with no bias, ALiBi and T5, in the
  kernels ``attention_bias`` times: SDPA with each bias materialised, eager
  and compiled FlexAttention (where they have a backward pass: not on the CPU).

Before it is timed, every row's outputs and gradients are checked once
against a float64 reference: for RoPE the closed form (the gradient of a
rotation is the rotation by the opposite angle, ``R(m)^T g``, computed in
float64 here), for attention the naive kernel run in float64 on the same
inputs and a float64 copy of the scheme, differentiated by autograd. One call
of each row is also measured for the most memory it holds (``peak MiB``).
"""

from __future__ import annotations

import copy
import time
import warnings

import torch

from ..attention.core import attend, flex_available, flex_block_mask
from ..attention.schemes import ALiBiScheme, T5BiasScheme
from ..devices import synchronize
from ..encodings import fused_rope
from ..encodings.alibi import ALiBiBias
from ..encodings.relative import T5RelativeBias
from ..encodings.rope import apply_rope
from . import attention_bias
from ._core import Plan, Suite, check_result, compile_counts, compile_note, register
from .chapters import attention_shape, sdpa_kernels, sdpa_note
from .rope import default_shape
from .timing import Case, copy_case, with_peak_memory


def _tolerance(dtype: torch.dtype) -> float:
    """Largest difference allowed, as a fraction of the reference's largest value."""
    return 2e-3 if dtype == torch.float32 else 6e-2


def _check(name: str, got, want, what: list[str], dtype: torch.dtype) -> None:
    """Raise WrongResult unless each of ``got`` matches the float64 ``want`` within the
    dtype's tolerance, scaled by the largest value (at least 1)."""
    for label, a, b in zip(what, got, want, strict=True):
        scale = max(1.0, b.abs().max().item())
        check_result(
            name,
            a,
            b,
            what=label,
            reference="the float64 reference",
            atol=_tolerance(dtype) * scale,
        )


def _timed_first_call(fn, device) -> float:
    """Seconds of one call, the device synchronised around it (a compile)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


def rope_transpose_reference(g: torch.Tensor, base: float) -> torch.Tensor:
    """``R(m)^T g`` in float64 for the half pairing, positions ``0 .. T - 1``.

    RoPE's output is ``y = R(m) x`` with ``R(m)`` a rotation per pair; the
    gradient of ``sum(y * g)`` with respect to ``x`` is ``R(m)^T g``, the
    rotation by ``-m theta_i``: ``(g_a cos + g_b sin, g_b cos - g_a sin)``.
    Angles and trigonometry in float64, independently of the package's code.
    """
    *_, seq, head_dim = g.shape
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64, device=g.device)
    theta = base ** (-2 * i / head_dim)  # (D/2,)
    angles = torch.arange(seq, dtype=torch.float64, device=g.device)[:, None] * theta
    cos, sin = angles.cos(), angles.sin()  # (T, D/2)
    g = g.double()
    g_a, g_b = g[..., :half], g[..., half:]
    return torch.cat((g_a * cos + g_b * sin, g_b * cos - g_a * sin), dim=-1)


def rope_forward_reference(x: torch.Tensor, base: float) -> torch.Tensor:
    """``R(m) x`` in float64, the half pairing, positions ``0 .. T - 1``."""
    *_, seq, head_dim = x.shape
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    theta = base ** (-2 * i / head_dim)
    angles = torch.arange(seq, dtype=torch.float64, device=x.device)[:, None] * theta
    cos, sin = angles.cos(), angles.sin()
    x = x.double()
    x_a, x_b = x[..., :half], x[..., half:]
    return torch.cat((x_a * cos - x_b * sin, x_b * cos + x_a * sin), dim=-1)


def rope_backward_suite(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
    base: float = 10000.0,
    compiled: bool = True,
) -> Plan:
    """RoPE's forward and backward on q and k of ``shape`` (the ``rope`` suite's)."""
    shape = tuple(shape) if shape is not None else default_shape(device)
    batch, heads, seq, head_dim = shape
    generator = torch.Generator().manual_seed(0)

    def randn():
        return torch.randn(*shape, generator=generator).to(device, dtype)

    q, k = randn().requires_grad_(), randn().requires_grad_()
    # what the layers above send back
    g_q, g_k = randn(), randn()
    want = [
        rope_forward_reference(q.detach(), base),
        rope_forward_reference(k.detach(), base),
        rope_transpose_reference(g_q, base),
        rope_transpose_reference(g_k, base),
    ]
    positions = torch.arange(seq, device=device)
    cos_sin = fused_rope.rope_cos_sin(positions, head_dim, base=base)
    paths = {
        "apply_rope on q, then on k": lambda: (
            apply_rope(q, base=base),
            apply_rope(k, base=base),
        ),
        "fused: q and k, cos/sin once": lambda: fused_rope.apply_rope_qk(
            q, k, cos_sin=cos_sin
        ),
    }
    if compiled:
        paths["compiled: q and k"] = lambda: fused_rope.compiled_apply_rope_qk(
            q, k, cos_sin=cos_sin
        )
    notes = [
        "Triton kernel: left out, it has no backward pass (it rotates for inference)"
    ]
    cases = []
    for name, forward in paths.items():

        def step(forward=forward):
            out_q, out_k = forward()
            grads = torch.autograd.grad((out_q, out_k), (q, k), (g_q, g_k))
            return out_q, out_k, *grads

        if name.startswith("compiled"):
            before = compile_counts()
            try:
                seconds = _timed_first_call(step, device)
            except RuntimeError as error:
                notes.append(f"{name}: skipped, {error}")
                continue
            notes.append(compile_note(name, seconds, before))
        got = [t.detach() for t in step()]
        _check(name, got, want, ["rotated q", "rotated k", "dq", "dk"], dtype)
        cases.append(Case(name, step))
    # forward: q, k read, rotated q, k written; backward: g read, dq, dk written;
    # cos and sin read by each
    nbytes = 4 * (q.nbytes + k.nbytes) + 2 * seq * head_dim * 4
    dtype_name = str(dtype).replace("torch.", "")
    for case in cases:
        case.shapes = {"q, k": list(shape)}
        case.dtype = dtype_name
        case.bytes_moved = nbytes
        case.allocates = True  # autograd returns new outputs and new gradients
    notes += with_peak_memory(cases, device)
    # every row allocates, so each meets a clone of its bytes; the compiled pair
    # reuses its buffers from call to call (a fraction of a clone's page faults),
    # so the same bytes copied into given outputs are timed too: both floors
    cases.append(copy_case(nbytes, device))
    return Plan(cases, notes=notes, settings={"shape": list(shape), "base": base})


register(
    Suite(
        "rope_backward",
        "10",
        "RoPE forward + backward on q and k: eager, fused and compiled",
        rope_backward_suite,
        why="the rope suite's q and k, as a training step rotates them",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=3,
        repeats=20,
        cpu_repeats=10,
        smoke={"shape": (1, 2, 8, 16), "compiled": False},
    )
)


# ---------------------------------------------------------------------------
# attention with a bias
# ---------------------------------------------------------------------------


def _quiet(fn):
    """``fn`` without eager Flex's warning that it is unfused."""

    def call():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without")
            return fn()

    return call


def _reference(q, k, v, g, scheme) -> list[torch.Tensor]:
    """The naive kernel in float64: output, dq, dk, dv and the scheme's learned
    parameters' gradients, one sequence at a time (a float64 copy of the scores
    of a whole GPU batch would not fit)."""
    scheme64 = None if scheme is None else copy.deepcopy(scheme).double()
    params = [] if scheme64 is None else list(scheme64.parameters())
    params = [p for p in params if p.requires_grad]
    outs, dq, dk, dv = [], [], [], []
    summed = [torch.zeros_like(p) for p in params]
    for b in range(q.shape[0]):
        one = [t[b : b + 1].detach().double().requires_grad_() for t in (q, k, v)]
        out = attend(*one, scheme64, causal=True, kernel="naive")
        grads = torch.autograd.grad(out, one + params, g[b : b + 1].double())
        outs.append(out.detach())
        for gathered, grad in zip((dq, dk, dv), grads[:3]):
            gathered.append(grad)
        # a learned bias is shared by the batch: its gradient sums over it
        summed = [total + grad for total, grad in zip(summed, grads[3:])]
    return [torch.cat(t) for t in (outs, dq, dk, dv)] + summed


def attention_backward_suite(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
    compiled: bool = True,
) -> Plan:
    """Causal attention's forward and backward with each bias, ``shape`` (B, H, T, D):
    the ``attention_bias`` suite's by default, (1, 8, 1024, 64) on a CPU; on a GPU
    its batch halved once more (2 of 4096 tokens on an 80 GB GPU), since eager
    Flex's backward holds about twice what its forward does."""
    if shape is None and device.type == "cpu":
        shape = (1, 8, 1024, 64)
    batch, heads, seq, head_dim = attention_shape(device, shape, dtype)
    if shape is None:
        batch = max(1, batch // 2)
    generator = torch.Generator().manual_seed(0)

    def randn():
        return torch.randn(batch, heads, seq, head_dim, generator=generator).to(
            device, dtype
        )

    q, k, v = (randn().requires_grad_() for _ in range(3))
    g = randn()
    alibi = ALiBiScheme(ALiBiBias(heads)).to(device)
    t5 = T5BiasScheme(T5RelativeBias(heads, bidirectional=False)).to(device)
    schemes = {"none": None, "ALiBi": alibi, "T5": t5}
    # the learned parameters each bias is differentiated for (T5's table)
    learned = {
        key: [] if s is None else [p for p in s.parameters() if p.requires_grad]
        for key, s in schemes.items()
    }
    references = {key: _reference(q, k, v, g, s) for key, s in schemes.items()}
    calls = {
        attention_bias.REFERENCE: ("none", {"kernel": "sdpa"}),
        "SDPA + materialised ALiBi": ("ALiBi", {"kernel": "sdpa"}),
        "SDPA + materialised T5": ("T5", {"kernel": "sdpa"}),
    }
    notes: list[str] = []
    if not flex_available():
        notes.append(f"Flex rows: skipped, torch {torch.__version__} has none")
    else:
        blocks = flex_block_mask(seq, seq, causal=True, device=device)
        flex = {"kernel": "flex", "block_mask": blocks}
        for label in ("no bias", "ALiBi"):
            key = "none" if label == "no bias" else label
            calls[f"Flex eager, {label}"] = (key, flex)
        if compiled:
            for label in ("no bias", "ALiBi", "T5"):
                key = "none" if label == "no bias" else label
                calls[f"Flex compiled, {label}"] = (key, {**flex, "compile": True})
    cases = []
    for name, (key, options) in calls.items():
        scheme = schemes[key]
        inputs = [q, k, v, *learned[key]]

        def step(scheme=scheme, options=options, inputs=inputs):
            out = attend(q, k, v, scheme, causal=True, **options)
            return out, *torch.autograd.grad(out, inputs, g)

        step = _quiet(step)
        before = compile_counts() if options.get("compile") else None
        try:
            seconds = _timed_first_call(step, device)
        except (NotImplementedError, RuntimeError, ValueError) as error:
            if options["kernel"] != "flex":
                raise
            first_line = (str(error).strip().splitlines() or [""])[0]
            notes.append(f"{name}: skipped, {first_line}")
            continue
        if options.get("compile"):
            notes.append(compile_note(name, seconds, before))
        got = [t.detach() for t in step()]
        labels = ["output", "dq", "dk", "dv"] + [
            "the gradient of T5's bias table" for _ in learned[key]
        ]
        _check(name, got, references[key], labels, dtype)
        cases.append(Case(name, step))
    shapes = {"q, k, v": [batch, heads, seq, head_dim]}
    dtype_name = str(dtype).replace("torch.", "")
    for case in cases:
        case.shapes = shapes
        case.dtype = dtype_name
    notes += with_peak_memory(cases, device)
    # T5's learned bias first: its "float bias" needs a gradient for the mask
    kernels = sdpa_kernels(q, k, v, {"T5": t5, "ALiBi": alibi}, backward=True)
    notes.append(sdpa_note(kernels))
    return Plan(
        cases,
        notes=notes,
        settings={
            "shape": [batch, heads, seq, head_dim],
            "causal": True,
            "sdpa_kernel": kernels,
        },
        reference=attention_bias.REFERENCE,
    )


def attention_report(result) -> list[str]:
    """What each bias costs forward and backward, against the same kernel without."""
    lines = []
    for (kernel, bias), (ratio, noise) in attention_bias.bias_costs(result).items():
        verdict = " (within noise)" if noise else ""
        lines.append(
            f"{bias} in {kernel}, forward + backward: {ratio:.2f}x the same kernel "
            f"without a bias{verdict}"
        )
    return lines


register(
    Suite(
        "attention_backward",
        "10",
        "Attention forward + backward with ALiBi and T5: SDPA and FlexAttention",
        attention_backward_suite,
        why="the attention_bias suite's shapes, as a training step runs them",
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="bfloat16",
        warmup=2,
        repeats=20,
        cpu_repeats=5,
        report=attention_report,
        smoke={"shape": (1, 2, 8, 4), "compiled": False},
    )
)
