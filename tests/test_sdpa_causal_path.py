"""SDPA's causal reference is its own ``is_causal`` path, and the kernel a record
names is the one the timed calls ran (issue 65).

On CUDA any ``attn_mask`` rules out FlashAttention and its causal tile
skipping, so ``attend(..., causal=True, kernel="sdpa")`` with no mask and no
bias passes SDPA ``is_causal=True`` and no mask; the benchmarks ask
``devices.sdpa_backend`` with exactly the arguments their timed calls pass.
"""

from __future__ import annotations

import pytest
import torch

from pe_tutorial import benchmarks
from pe_tutorial.attention import core
from pe_tutorial.attention.core import (
    AttentionConfig,
    MultiHeadAttention,
    attend,
    padding_mask,
)
from pe_tutorial.attention.schemes import ALiBiScheme, T5BiasScheme
from pe_tutorial.benchmarks import chapters
from pe_tutorial.encodings.alibi import ALiBiBias
from pe_tutorial.encodings.relative import T5RelativeBias

HEADS, DIM = 2, 8


def qkv(q_len, k_len, *, batch=2, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, HEADS, q_len, DIM, generator=generator, dtype=dtype)
    k = torch.randn(batch, HEADS, k_len, DIM, generator=generator, dtype=dtype)
    v = torch.randn(batch, HEADS, k_len, DIM, generator=generator, dtype=dtype)
    return q, k, v


def schemes():
    torch.manual_seed(0)
    return {
        "ALiBi": ALiBiScheme(ALiBiBias(HEADS)),
        "T5": T5BiasScheme(T5RelativeBias(HEADS, bidirectional=False)),
    }


@pytest.fixture
def sdpa_calls(monkeypatch):
    """Every call of ``F.scaled_dot_product_attention`` from the core module:
    its attn_mask and is_causal, the call still made."""
    calls = []
    real = core.F.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **rest):
        calls.append({"attn_mask": attn_mask, "is_causal": is_causal})
        return real(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
        )

    monkeypatch.setattr(core.F, "scaled_dot_product_attention", recording)
    return calls


# ---------------------------------------------------------------------------
# which arguments the sdpa kernel passes
# ---------------------------------------------------------------------------


def test_causal_sdpa_with_no_mask_or_bias_takes_sdpas_is_causal_path(sdpa_calls):
    q, k, v = qkv(9, 9)
    attend(q, k, v, causal=True, kernel="sdpa")
    assert len(sdpa_calls) == 1
    assert sdpa_calls[0]["is_causal"] is True
    assert sdpa_calls[0]["attn_mask"] is None


def test_a_causal_layer_takes_the_is_causal_path(sdpa_calls):
    layer = MultiHeadAttention(AttentionConfig(d_model=HEADS * DIM, num_heads=HEADS))
    layer(torch.randn(2, 6, HEADS * DIM))
    assert [(c["is_causal"], c["attn_mask"]) for c in sdpa_calls] == [(True, None)]


@pytest.mark.parametrize(
    "case", ["decoding", "mask", "bias", "not causal", "not causal, mask"]
)
def test_every_other_call_gets_its_mask_and_no_is_causal(sdpa_calls, case):
    q_len = 3 if case == "decoding" else 7
    q, k, v = qkv(q_len, 7)
    options = {"causal": not case.startswith("not causal"), "kernel": "sdpa"}
    if "mask" in case:
        options["mask"] = padding_mask(torch.tensor([7, 4]), 7)
    scheme = schemes()["ALiBi"] if case == "bias" else None
    attend(q, k, v, scheme, **options)
    (call,) = sdpa_calls
    assert call["is_causal"] is False
    if case == "not causal":
        assert call["attn_mask"] is None
    else:
        assert call["attn_mask"] is not None
        want = torch.float32 if case == "bias" else torch.bool
        assert call["attn_mask"].dtype == want


def test_sdpa_arguments_are_what_the_kernel_passes(sdpa_calls):
    from pe_tutorial.attention.core import sdpa_arguments

    alibi = schemes()["ALiBi"]
    for q_len, scheme, mask in (
        (7, None, None),
        (3, None, None),
        (7, alibi, None),
        (7, None, padding_mask(torch.tensor([7, 4]), 7)),
    ):
        q, k, v = qkv(q_len, 7)
        sdpa_calls.clear()
        attend(q, k, v, scheme, mask=mask, causal=True, kernel="sdpa")
        bias = None if scheme is None else scheme.bias(q, k, causal=True)
        given = sdpa_arguments(q, k, bias=bias, mask=mask, causal=True)
        (call,) = sdpa_calls
        assert given["is_causal"] == call["is_causal"]
        if call["attn_mask"] is None:
            assert given["attn_mask"] is None
        else:
            torch.testing.assert_close(given["attn_mask"], call["attn_mask"])


# ---------------------------------------------------------------------------
# the same results as the naive kernel
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("q_len, k_len", [(9, 9), (1, 1), (3, 9), (1, 9)], ids=str)
@pytest.mark.parametrize("scheme_name", [None, "ALiBi", "T5"])
def test_causal_sdpa_equals_the_naive_kernel(q_len, k_len, scheme_name):
    # q_len < k_len: the queries are the last q_len positions (decoding), where
    # SDPA's is_causal (top left) would keep other scores than causal_mask
    q, k, v = qkv(q_len, k_len, seed=q_len + k_len)
    scheme = None if scheme_name is None else schemes()[scheme_name]
    want = attend(q, k, v, scheme, causal=True, kernel="naive")
    got = attend(q, k, v, scheme, causal=True, kernel="sdpa")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_causal_sdpa_gradients_equal_the_naive_kernels():
    q, k, v = qkv(9, 9, seed=3)
    g = torch.randn(q.shape, generator=torch.Generator().manual_seed(4))
    grads = {}
    for kernel in ("naive", "sdpa"):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        out = attend(*inputs, causal=True, kernel=kernel)
        grads[kernel] = torch.autograd.grad(out, inputs, g)
    for got, want in zip(grads["sdpa"], grads["naive"], strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------
# the kernel a benchmark record names is the one its timed calls ran
# ---------------------------------------------------------------------------


def _describe(tensor):
    if tensor is None:
        return None
    return (
        tensor.dtype,
        tuple(tensor.shape),
        tensor.stride(),
        tensor.requires_grad,
        tensor.device.type,
    )


def _signature(q, k, v, attn_mask, is_causal):
    """What torch's dispatcher sees of one call, and the mask's values."""
    described = tuple(_describe(t) for t in (q, k, v, attn_mask))
    values = None if attn_mask is None else attn_mask.detach().clone()
    return (described, bool(is_causal), torch.is_grad_enabled()), values


@pytest.mark.parametrize(
    "suite",
    ["alibi_attention", "relative_attention", "attention_bias", "attention_backward"],
)
def test_the_recorded_sdpa_kernel_is_asked_with_the_timed_calls_arguments(
    monkeypatch, suite
):
    asked = []
    real_backend = chapters.sdpa_backend

    def recording_backend(q, k, v, attn_mask=None, is_causal=False):
        asked.append(_signature(q, k, v, attn_mask, is_causal))
        return real_backend(q, k, v, attn_mask=attn_mask, is_causal=is_causal)

    monkeypatch.setattr(chapters, "sdpa_backend", recording_backend)
    spec = benchmarks.SUITES[suite]
    plan = spec.build(torch.device("cpu"), torch.float32, **spec.smoke)
    assert asked, "the suite asked SDPA's dispatcher nothing"

    timed = []
    real_sdpa = core.F.scaled_dot_product_attention

    def recording_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        timed.append(_signature(q, k, v, attn_mask, is_causal))
        return real_sdpa(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
        )

    monkeypatch.setattr(core.F, "scaled_dot_product_attention", recording_sdpa)
    for case in plan.cases:
        if "SDPA" in case.name:
            before = len(timed)
            case.fn()
            assert len(timed) == before + 1, case.name
    assert len(timed) >= 2

    def same(a, b):
        (seen_a, values_a), (seen_b, values_b) = a, b
        if seen_a != seen_b:
            return False
        return values_a is None or torch.equal(values_a, values_b)

    # every timed call was asked about, and nothing was asked that was not timed
    for call in timed:
        assert any(same(call, question) for question in asked), call[0]
    for question in asked:
        assert any(same(question, call) for call in timed), question[0]
    # the causal reference is SDPA's is_causal path, and is recorded as such
    reference = [call for call in timed if call[0][1]]
    assert reference and all(call[0][0][3] is None for call in reference)
    assert plan.settings["sdpa_kernel"]["causal, no bias"]
