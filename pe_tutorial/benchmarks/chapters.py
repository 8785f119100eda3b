"""The suites behind the timing cells of chapters 1 to 8.

Chapter 9's training step is ``train_step.py``'s; chapter 10's copies and memory
ceiling ``copies.py``'s; chapter 11's switch of LongRoPE's lists, chapter
12's latent decoding and chapter 13's M-RoPE rotation ``long_context.py``'s.

Each builder takes a device and a dtype (and sizes, with defaults that are
small on the CPU and larger on a GPU) and returns the ``Plan`` to time. Bytes
are counted as read plus written, from the tensors a call must touch.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attention.core import (
    attend,
    dot_product_attention,
    flex_available,
    sdpa_arguments,
)
from ..attention.schemes import (
    ALiBiScheme,
    NoPositionScheme,
    PositionScheme,
    ShawScheme,
    T5BiasScheme,
)
from ..devices import sdpa_backend
from ..encodings.absolute import (
    binary_encoding,
    integer_encoding,
    sinusoidal_at,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from ..encodings.alibi import ALiBiBias
from ..encodings.relative import ShawRelativePosition, T5RelativeBias
from ..encodings.rope import (
    apply_rope,
    apply_rope_complex,
    apply_rope_matrix,
)
from ._core import Plan, Suite, register
from .timing import Case


def on_gpu(device: torch.device) -> bool:
    return device.type == "cuda"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def attention_lengths(
    device: torch.device,
    dtype: torch.dtype,
    *,
    lengths: list[int] | None = None,
    head_dim: int = 64,
) -> Plan:
    """Naive single-head attention at growing lengths T (chapter 1).

    Unfused attention writes the T x T scores, reads them for the softmax,
    writes the weights and reads them for the product with v; with q, k, v and
    the output that is ``(4 T^2 + 4 T D)`` elements moved.
    """
    if lengths is None:
        lengths = [1024, 2048, 4096, 8192] if on_gpu(device) else [256, 512, 1024]
    cases = []
    for seq_len in lengths:
        q, k, v = torch.randn(3, 1, seq_len, head_dim, device=device, dtype=dtype)
        cases.append(
            Case(
                f"attention, T = {seq_len}",
                lambda q=q, k=k, v=v: dot_product_attention(q, k, v),
                shapes={"q, k, v": [1, seq_len, head_dim]},
                dtype=dtype_name(dtype),
                bytes_moved=(4 * seq_len**2 + 4 * seq_len * head_dim)
                * q.element_size(),
                allocates=True,
            )
        )
    return Plan(cases, settings={"lengths": lengths, "head_dim": head_dim})


def _table_size(device, num_positions, dim):
    if num_positions is None:
        num_positions = 8192 if on_gpu(device) else 2048
    return num_positions, dim


def integer_tables(
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_positions: int | None = None,
    dim: int = 512,
) -> Plan:
    """The raw and the length-normalised integer tables (chapter 2): each writes N x d floats."""
    num_positions, dim = _table_size(device, num_positions, dim)
    shapes = {"table": [num_positions, dim]}
    nbytes = num_positions * dim * 4
    cases = [
        Case(
            "integer table, PE[p] = p",
            lambda: integer_encoding(num_positions, dim, device=device),
            shapes,
            "float32",
            nbytes,
            allocates=True,
        ),
        Case(
            "normalised, PE[p] = p / (T - 1)",
            lambda: integer_encoding(num_positions, dim, normalize=True, device=device),
            shapes,
            "float32",
            nbytes,
            allocates=True,
        ),
    ]
    return Plan(cases, settings=shapes)


def _bits_as_bytes(num_positions: int, num_bits: int, device) -> torch.Tensor:
    positions = torch.arange(num_positions, dtype=torch.int32, device=device)
    bits = torch.arange(num_bits, dtype=torch.int32, device=device)
    return ((positions[:, None] >> bits) & 1).to(torch.uint8)


def binary_tables(
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_positions: int | None = None,
    num_bits: int | None = None,
) -> Plan:
    """The binary table as float32 (``binary_encoding``) and the same bits as bytes (chapter 3).

    The codes of a whole context: 2**16 positions on a CPU, 2**20 on a GPU,
    each in the ``log2`` of that many bits, every column used (by default
    ``num_bits`` is the fewest that number the positions). Both compute the
    same bits; the float table writes 4 bytes per bit, the byte table 1, and
    each is compared with a copy of its own bytes.
    """
    if num_positions is None:
        num_positions = 2**20 if on_gpu(device) else 2**16
    if num_bits is None:
        num_bits = max(1, (num_positions - 1).bit_length())
    check = _bits_as_bytes(num_positions, num_bits, device)
    if not torch.equal(check.float(), binary_encoding(num_positions, num_bits)):
        raise AssertionError("the byte table's bits differ from binary_encoding's")
    shapes = {"table": [num_positions, num_bits]}
    cases = [
        Case(
            "binary table, float32 bits",
            lambda: binary_encoding(num_positions, num_bits, device=device),
            shapes,
            "float32",
            num_positions * num_bits * 4,
            allocates=True,
        ),
        Case(
            "the same bits as uint8",
            lambda: _bits_as_bytes(num_positions, num_bits, device),
            shapes,
            "uint8",
            num_positions * num_bits,
            allocates=True,
        ),
    ]
    return Plan(cases, settings=shapes)


def absolute_tables(
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_positions: int | None = None,
    dim: int = 512,
) -> Plan:
    """Build the absolute tables of width d_model (chapters 2 and 4), and look rows
    up in a stored one (chapter 4).

    Building writes ``N x d`` floats; a lookup reads as many and writes as many.
    The sinusoidal table's arithmetic is also timed alone: the sines and
    cosines of its ``N x d/2`` angles written into outputs that exist, so no
    fresh memory is involved (chapter 4 weighs the two). (The binary code has
    only ``log2 N`` columns: chapter 3 times it.)
    """
    num_positions, dim = _table_size(device, num_positions, dim)
    shapes = {"table": [num_positions, dim]}
    nbytes = num_positions * dim * 4
    stored = nn.Embedding(num_positions, dim).to(device).requires_grad_(False)
    positions = torch.arange(num_positions, device=device)
    # the table's arithmetic alone: its sines and cosines, into outputs that exist
    angles = positions.float()[:, None] * sinusoidal_frequencies(dim).to(device)
    sines, cosines = torch.empty_like(angles), torch.empty_like(angles)

    def sines_and_cosines():
        torch.sin(angles, out=sines)
        torch.cos(angles, out=cosines)

    sines_and_cosines()
    table = torch.stack((sines, cosines), dim=-1).flatten(-2)
    if not torch.equal(table, sinusoidal_encoding(num_positions, dim, device=device)):
        raise AssertionError("the sines and cosines are not the sinusoidal table's")
    cases = [
        Case(
            "integer table",
            lambda: integer_encoding(num_positions, dim, device=device),
            shapes,
            "float32",
            nbytes,
            allocates=True,
        ),
        Case(
            "sinusoidal table",
            lambda: sinusoidal_encoding(num_positions, dim, device=device),
            shapes,
            "float32",
            nbytes,
            allocates=True,
        ),
        Case(
            "sines and cosines alone (out=)",
            sines_and_cosines,
            {"angles": list(angles.shape)},
            "float32",
            4 * angles.nbytes,  # the angles read twice, sines and cosines written
            allocates=False,
        ),
        Case(
            "lookup in a stored table",
            lambda: stored(positions),
            shapes,
            "float32",
            2 * nbytes,
            allocates=True,
        ),
    ]
    return Plan(cases, settings=shapes)


def shift_matrix(
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_positions: int | None = None,
    d_model: int = 512,
    shift: int = 7,
) -> Plan:
    """Positions p + k: recomputed with sin/cos, or the stored table times M_k (chapter 5).

    Both read an N x d table (or its positions) and write one; the product also
    reads the d x d matrix.
    """
    if num_positions is None:
        num_positions = 16384 if on_gpu(device) else 2048
    positions = torch.arange(num_positions, device=device)
    table = sinusoidal_at(positions, d_model)
    m_k = sinusoidal_shift_matrix(shift, d_model).to(device)
    if not torch.allclose(
        table @ m_k.T, sinusoidal_at(positions + shift, d_model), atol=1e-3
    ):
        raise AssertionError("table @ M_k^T is not the table at p + k")
    shapes = {"table": [num_positions, d_model]}
    nbytes = 2 * table.numel() * 4
    cases = [
        Case(
            "recompute sin/cos at p + k",
            lambda: sinusoidal_at(positions + shift, d_model),
            shapes,
            "float32",
            nbytes,
            allocates=True,
        ),
        Case(
            "table @ M_k^T (dense d x d)",
            lambda: table @ m_k.T,
            shapes,
            "float32",
            nbytes + m_k.numel() * 4,
            allocates=True,
        ),
    ]
    return Plan(cases, settings={**shapes, "shift": shift})


def rope_implementations(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
) -> Plan:
    """RoPE three ways on one (B, H, T, D) tensor: dense matrix, complex, pairs (chapter 6).

    Each reads x and writes y, ``2 x nbytes``; the matrix product also does a
    D x D multiply per token, which is why it is far from the copy.
    """
    if shape is None:
        shape = (4, 16, 1024, 64) if on_gpu(device) else (1, 8, 512, 64)
    x = torch.randn(shape, device=device, dtype=dtype)
    positions = torch.arange(shape[-2], device=device)
    implementations = {
        "dense matrix (apply_rope_matrix)": apply_rope_matrix,
        "complex (apply_rope_complex)": apply_rope_complex,
        "pairs (apply_rope)": apply_rope,
    }
    expected = apply_rope(x, positions)
    for name, fn in implementations.items():
        if not torch.allclose(fn(x, positions), expected, atol=1e-4):
            raise AssertionError(f"{name} disagrees with apply_rope")
    nbytes = 2 * x.numel() * x.element_size()
    cases = [
        Case(
            name,
            lambda fn=fn: fn(x, positions),
            {"x": list(shape)},
            "float32",
            nbytes,
            allocates=True,
        )
        for name, fn in implementations.items()
    ]
    return Plan(cases, settings={"shape": list(shape)})


def attention_shape(device, shape, dtype):
    """(B, H, T, D): (1, 8, 512, 64) on the CPU; (B, 16, 4096, 64) on a GPU.

    B is chosen so that the eager Flex path, whose peak is about 3.3 times its
    float32 scores (B H T^2 4 bytes; measured on the CPU), takes at most half
    the GPU's memory: a 15 GB T4 gets B = 2, an 80 GB H100 B = 4.
    """
    if shape is not None:
        return tuple(shape)
    if not on_gpu(device):
        return (1, 8, 512, 64)
    heads, seq, head_dim = 16, 4096, 64
    memory = torch.cuda.get_device_properties(device).total_memory
    batch = 4
    while batch > 1 and 3.5 * batch * heads * seq * seq * 4 > memory / 2:
        batch //= 2
    return (batch, heads, seq, head_dim)


def _causal_sdpa_kernel(q, k, v, scheme: PositionScheme) -> str | None:
    """The kernel SDPA picks for ``attend(q, k, v, scheme, causal=True,
    kernel="sdpa")``, asked with the arguments that call passes it."""
    q, k = scheme.rotate(q, k)
    bias = scheme.bias(q, k, causal=True)
    return sdpa_backend(q, k, v, **sdpa_arguments(q, k, bias=bias, causal=True))


def sdpa_kernels(
    q, k, v, schemes: dict[str, PositionScheme], *, backward: bool = False
) -> dict[str, str | None]:
    """The kernel SDPA picks for these suites' calls (``devices.sdpa_backend``),
    asked with the arguments each timed ``attend(q, k, v, scheme, causal=True,
    kernel="sdpa")`` passes it (``attention.core.sdpa_arguments``): causal with
    no bias (SDPA's ``is_causal`` path, no mask), and each of ``schemes``'
    biases materialised as a float ``attn_mask`` with the causal mask folded
    in. ``"float bias"`` names the first scheme's kernel, and a scheme whose
    call gets another kernel has an entry of its own, ``"float bias
    (label)"``. On a GPU the answer can flip a Flex-against-SDPA verdict, so
    each record keeps it. Asked under ``torch.no_grad``, as the forward suites
    time; ``backward``: with gradients on and q, k and v needing them, as the
    backward suite calls (a learned bias then needs its gradient too)."""
    if backward:
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    with torch.set_grad_enabled(backward):
        kernels = {"causal, no bias": _causal_sdpa_kernel(q, k, v, NoPositionScheme())}
        first = None
        for label, scheme in schemes.items():
            kernel = _causal_sdpa_kernel(q, k, v, scheme)
            if first is None:
                first = kernels["float bias"] = kernel
            elif kernel != first:
                kernels[f"float bias ({label})"] = kernel
    return kernels


def sdpa_note(kernels: dict[str, str | None]) -> str:
    """``sdpa_kernels`` as the line under a table."""
    chosen = "; ".join(
        f"{call}: {kernel or 'unknown'}" for call, kernel in kernels.items()
    )
    return f"SDPA's kernel (torch's choice for these inputs): {chosen}"


def _no_grad(fn):
    def call():
        with torch.no_grad():
            return fn()

    return call


def _bias_attention_plan(device, dtype, shape, schemes: dict, flex_scheme) -> Plan:
    batch, heads, seq, head_dim = shape
    q, k, v = (
        torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype)
        for _ in range(3)
    )
    shapes = {"q, k, v": list(shape)}
    name = dtype_name(dtype)
    reference = "causal SDPA, no bias"
    cases = [
        Case(
            reference, lambda: attend(q, k, v, causal=True, kernel="sdpa"), shapes, name
        )
    ]
    for label, scheme in schemes.items():
        cases.append(
            Case(
                f"SDPA + materialised {label}",
                lambda scheme=scheme: attend(
                    q, k, v, scheme, causal=True, kernel="sdpa"
                ),
                shapes,
                name,
            )
        )
    notes = []
    if flex_available():
        # eager Flex beside eager Flex: its bias's cost is read like with like
        label, scheme = flex_scheme
        for row, flex_scheme_or_none in (
            ("Flex, no score_mod (eager)", None),
            (f"Flex, {label} score_mod (eager)", scheme),
        ):
            cases.append(
                Case(
                    row,
                    lambda s=flex_scheme_or_none: attend(
                        q, k, v, s, causal=True, kernel="flex"
                    ),
                    shapes,
                    name,
                )
            )
    else:
        notes.append("Flex row skipped: this torch has no FlexAttention")
    for case in cases:
        case.fn = _no_grad(case.fn)
    settings = {"shape": list(shape), "sdpa_kernel": sdpa_kernels(q, k, v, schemes)}
    notes.append(sdpa_note(settings["sdpa_kernel"]))
    return Plan(cases, notes=notes, settings=settings, reference=reference)


def alibi_attention(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
) -> Plan:
    """Causal attention with no bias and a materialised ALiBi bias through SDPA, and
    eager Flex without and with ALiBi's score_mod (chapter 7)."""
    shape = attention_shape(device, shape, dtype)
    scheme = ALiBiScheme(ALiBiBias(shape[1])).to(device)
    return _bias_attention_plan(
        device, dtype, shape, {"ALiBi": scheme}, ("ALiBi", scheme)
    )


def relative_attention(
    device: torch.device,
    dtype: torch.dtype,
    *,
    shape: tuple[int, int, int, int] | None = None,
) -> Plan:
    """Causal attention with no bias and materialised T5 and Shaw biases through SDPA,
    and eager Flex without and with T5's score_mod (chapter 8)."""
    shape = attention_shape(device, shape, dtype)
    t5 = T5BiasScheme(T5RelativeBias(shape[1], bidirectional=False)).to(device)
    shaw = ShawScheme(ShawRelativePosition(16, shape[-1])).to(device)
    return _bias_attention_plan(
        device, dtype, shape, {"T5 bias": t5, "Shaw bias": shaw}, ("T5", t5)
    )


# why the suites below time the sizes they do (Suite.why), where several share one
CONTEXT_TABLE = (
    "a context of 2048 tokens (8192 on a GPU) at width 512: a small model's table"
)
ONE_LAYER = (
    "512 tokens, 8 heads of 64 on a CPU (more on a GPU): one layer of a small model"
)


for _suite in (
    Suite(
        "attention_lengths",
        "1",
        "attention at growing lengths",
        attention_lengths,
        why="lengths of a short context, far enough apart for T^2 to take over",
        smoke={"lengths": [8, 16], "head_dim": 4},
    ),
    Suite(
        "integer_tables",
        "2",
        "raw and normalised integer tables",
        integer_tables,
        why=CONTEXT_TABLE,
        smoke={"num_positions": 16, "dim": 8},
    ),
    Suite(
        "binary_tables",
        "3",
        "binary table as floats and as bytes",
        binary_tables,
        why="the codes of a 2^16-token context (2^20 on a GPU), every bit column used",
        smoke={"num_positions": 16, "num_bits": 8},
    ),
    Suite(
        "absolute_tables",
        "4",
        "building and looking up tables",
        absolute_tables,
        why=CONTEXT_TABLE,
        smoke={"num_positions": 16, "dim": 8},
    ),
    Suite(
        "shift_matrix",
        "5",
        "p + k by recomputing or by M_k",
        shift_matrix,
        why="the table of absolute_tables, shifted by k positions",
        smoke={"num_positions": 16, "d_model": 8},
    ),
    Suite(
        "rope_implementations",
        "6",
        "RoPE: matrix, complex, pairs",
        rope_implementations,
        why=ONE_LAYER,
        smoke={"shape": (1, 2, 8, 4)},
    ),
    Suite(
        "alibi_attention",
        "7",
        "ALiBi: materialised vs score_mod",
        alibi_attention,
        why=ONE_LAYER,
        smoke={"shape": (1, 2, 8, 4)},
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="float16",
        warmup=2,
        cpu_repeats=5,
    ),
    Suite(
        "relative_attention",
        "8",
        "T5 and Shaw biases",
        relative_attention,
        why=ONE_LAYER,
        smoke={"shape": (1, 2, 8, 4)},
        dtypes=("float32", "float16", "bfloat16"),
        gpu_dtype="float16",
        warmup=2,
        cpu_repeats=5,
    ),
):
    register(_suite)
