"""Tests for pe_tutorial.encodings.rope_triton: the Triton kernel, in Triton's CPU interpreter.

The kernel is defined at its first call in each mode, so setting
TRITON_INTERPRET=1 here (monkeypatch), after triton may have been imported
(torch.compile imports it), is enough; no GPU is needed. The
interpreter rounds float32 to bfloat16 by truncation where GPUs round to
nearest, so bfloat16 results are compared within one bfloat16 step.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_rope import naive_rope

from pe_tutorial.encodings.fused_rope import rope_cos_sin
from pe_tutorial.encodings.rope import apply_rope
from pe_tutorial.encodings.rope_triton import apply_rope_qk_triton, triton_status

PAIRINGS = ["half", "interleaved"]

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="triton is not installed (pip install triton, or the test extra)",
)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def check(got, want):
    if want.dtype == torch.float32:
        # the same float32 formula, rounded apart (apply_rope's addcmul may fuse): ulps
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:
        # |values| < 8: one bfloat16 step is at most 2**-5, one float16 step 2**-8
        torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=2**-5)


@needs_triton
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("rotary_dim", [None, 6])
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_kernel_equals_apply_rope(interpreter, pairing, rotary_dim, inplace):
    # grouped-query attention shapes; seq 9 is not a multiple of the tile
    q, k = randn(2, 4, 9, 10, seed=1), randn(2, 2, 9, 10, seed=2)
    options = dict(pairing=pairing, rotary_dim=rotary_dim)
    offset = torch.arange(9) + 1000
    per_row = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 1, 2, 3, 4, 5, 6]])
    for positions in (None, offset, per_row[:, None, :]):
        q_in, k_in = q.clone(), k.clone()
        got_q, got_k = apply_rope_qk_triton(
            q_in, k_in, positions, inplace=inplace, **options
        )
        check(got_q, apply_rope(q, positions, **options))
        check(got_k, apply_rope(k, positions, **options))
        if inplace:
            assert got_q is q_in and got_k is k_in
            assert got_q.data_ptr() == q_in.data_ptr()
        else:
            assert torch.equal(q_in, q) and torch.equal(k_in, k)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_kernel_stores_low_precision_with_float32_arithmetic(interpreter, dtype):
    q, k = (
        randn(2, 3, 5, 16, seed=3, dtype=dtype),
        randn(2, 3, 5, 16, seed=4, dtype=dtype),
    )
    positions = torch.arange(5) + 30000
    for inplace in (False, True):
        got_q, got_k = apply_rope_qk_triton(
            q.clone(), k.clone(), positions, pairing="interleaved", inplace=inplace
        )
        assert got_q.dtype == got_k.dtype == dtype
        check(got_q, apply_rope(q, positions, pairing="interleaved"))
        check(got_k, apply_rope(k, positions, pairing="interleaved"))


@needs_triton
def test_kernel_matches_the_float64_loop_reference(interpreter):
    # independent of apply_rope: test_rope's loop over tokens and pairs
    q, k = randn(1, 1, 7, 12, seed=5), randn(1, 1, 7, 12, seed=6)
    positions = [0, 1, 2, 5, 13, 100, 2047]
    for pairing in PAIRINGS:
        got_q, got_k = apply_rope_qk_triton(
            q, k, torch.tensor(positions), pairing=pairing, rotary_dim=8
        )
        for got, x in ((got_q, q), (got_k, k)):
            reference = naive_rope(x[0, 0], positions, pairing=pairing, rotary_dim=8)
            torch.testing.assert_close(
                got[0, 0].double(), reference, rtol=0, atol=1e-5 + 5e-7 * 2047
            )


@needs_triton
def test_kernel_reads_a_precomputed_table_and_strided_views(interpreter):
    batch, seq, heads, head_dim = 2, 6, 3, 8
    qkv = randn(batch, seq, 3 * heads * head_dim, seed=7)
    # q, k, v as (B, H, T, D) views of one fused projection, rotated in place
    q, k, v = (
        t.view(batch, seq, heads, head_dim).transpose(1, 2)
        for t in qkv.split(heads * head_dim, dim=-1)
    )
    positions = torch.arange(seq)[None, None, :] + torch.tensor([0, 50])[:, None, None]
    want_q, want_k = apply_rope(q, positions), apply_rope(k, positions)
    v_before = v.clone()
    got_q, got_k = apply_rope_qk_triton(
        q, k, cos_sin=rope_cos_sin(positions, head_dim), inplace=True
    )
    assert got_q is q and got_k is k
    check(q, want_q)
    check(k, want_k)
    assert torch.equal(v, v_before)
    # 3-D input, no heads axis
    x = randn(4, 5, 8, seed=8)
    got, _ = apply_rope_qk_triton(x, x.clone(), torch.arange(5) + 7)
    check(got, apply_rope(x, torch.arange(5) + 7))


@needs_triton
def test_kernel_rejects_bad_input_like_apply_rope_qk(interpreter):
    q = randn(2, 3, 5, 8, seed=9)
    with pytest.raises(ValueError, match="same seq length"):
        apply_rope_qk_triton(q, randn(2, 3, 4, 8, seed=0))
    with pytest.raises(ValueError, match="q and k share memory"):
        apply_rope_qk_triton(q, q, inplace=True)


def test_without_gpu_or_interpreter_the_status_says_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present, so the kernel can run")
    ready, why = triton_status("cpu")
    assert not ready
    assert "TRITON_INTERPRET=1" in why or "not installed" in why
    assert "apply_rope_qk" in why
    q = randn(1, 1, 4, 8, seed=10)
    with pytest.raises(RuntimeError, match="cannot run.*apply_rope_qk"):
        apply_rope_qk_triton(q, q.clone())


def test_the_kernel_asks_whether_it_can_run_on_its_inputs_dtype(monkeypatch):
    # a T4 has no Triton bfloat16: the status is asked for q's device and dtype, and
    # its reason (tests/test_devices.py checks it per capability) is what the caller
    # reads, before Triton's own compiler error could be met
    from pe_tutorial.encodings import rope_triton

    asked = []

    def status(device, dtype=None):
        asked.append((device, dtype))
        return False, "bfloat16 needs compute capability 8.0 or newer (a test)"

    monkeypatch.setattr(rope_triton, "triton_status", status)
    q = randn(1, 1, 4, 8, seed=11, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="cannot run: bfloat16 needs compute"):
        apply_rope_qk_triton(q, q.clone())
    assert asked == [(q.device, torch.bfloat16)]


def test_a_fresh_interpreter_without_then_with_triton():
    # one subprocess, two checks. First `import triton` fails, as when it is not
    # installed: the package still imports and says so. Then the real triton is
    # imported before TRITON_INTERPRET=1 is set: Triton reads the variable when a
    # kernel is defined, and ours is defined at its first call and calls no
    # jit-compiled helper of triton.language, so setting it late still works.
    code = """
import importlib.util, os, sys
sys.modules["triton"] = None
import torch, pe_tutorial, pe_tutorial.encodings.fused_rope
from pe_tutorial.encodings.rope_triton import apply_rope_qk_triton, triton_status
ready, why = triton_status("cpu")
assert not ready and "triton is not installed" in why, why
try:
    apply_rope_qk_triton(torch.zeros(1, 4, 8), torch.zeros(1, 4, 8))
except RuntimeError as err:
    assert "not installed" in str(err) and "apply_rope_qk" in str(err), err
else:
    raise AssertionError("no error without triton")
del sys.modules["triton"]
if importlib.util.find_spec("triton") is not None:
    import triton, triton.language
    os.environ["TRITON_INTERPRET"] = "1"
    from pe_tutorial.encodings.rope import apply_rope
    q = torch.randn(2, 3, 5, 8)
    got, _ = apply_rope_qk_triton(q, q.clone(), torch.arange(5) + 9)
    torch.testing.assert_close(got, apply_rope(q, torch.arange(5) + 9))
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[1],
    )
    assert result.returncode == 0, result.stderr


@needs_triton
@pytest.mark.parametrize("base", [500.0, 1e6])
def test_kernel_honours_a_non_default_base(interpreter, base):
    q, k = randn(1, 1, 6, 8, seed=40), randn(1, 1, 6, 8, seed=41)
    positions = [0, 1, 3, 7, 40, 900]
    got_q, got_k = apply_rope_qk_triton(q, k, torch.tensor(positions), base=base)
    for got, x in ((got_q, q), (got_k, k)):
        want = naive_rope(x[0, 0], positions, base=base)
        torch.testing.assert_close(got[0, 0].double(), want, rtol=0, atol=1e-5)
