"""What a device can run: a T4's compute capability (7.5) mocked beside 8.0 and 9.0."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from pe_tutorial import devices
from pe_tutorial.attention import flex
from pe_tutorial.benchmarks import _core
from pe_tutorial.benchmarks import rope as rope_bench
from pe_tutorial.encodings import rope_triton

CAPABILITIES = [(7, 5), (8, 0), (9, 0)]


@pytest.fixture
def gpu(monkeypatch):
    """Pretend a CUDA GPU of a chosen compute capability is present."""

    def with_capability(capability):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(
            torch.cuda, "get_device_capability", lambda device=None: capability
        )
        flex._compile_problem.cache_clear()
        return torch.device("cuda")

    yield with_capability
    flex._compile_problem.cache_clear()


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_timing_dtype_keeps_bfloat16_from_8_0(gpu, capability):
    device = gpu(capability)
    name, why = devices.timing_dtype("bfloat16", device)
    if capability < (8, 0):
        assert name == "float16"
        assert "compute capability 7.5" in why and "8.0 or newer" in why
    else:
        assert (name, why) == ("bfloat16", None)
    # other dtypes, and the CPU, are never changed
    assert devices.timing_dtype("float32", device) == ("float32", None)
    assert devices.timing_dtype("bfloat16", "cpu") == ("bfloat16", None)


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_suites_choose_their_gpu_dtype_from_the_capability(gpu, capability):
    device = gpu(capability)
    rope = _core.check_suite("rope")  # its GPU dtype is bfloat16
    want = torch.float16 if capability < (8, 0) else torch.bfloat16
    assert _core.check_dtype(rope, None, device) == want
    if capability < (8, 0):
        with pytest.raises(ValueError, match="use --dtype float16"):
            _core.check_dtype(rope, "bfloat16", device)
    else:
        assert _core.check_dtype(rope, "bfloat16", device) == torch.bfloat16


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_compiled_flex_is_offered_from_8_0_only(gpu, monkeypatch, capability):
    import torch.utils._triton as triton_utils

    monkeypatch.setattr(triton_utils, "has_triton", lambda: True)
    gpu(capability)
    problem = flex._compile_problem("cuda")
    if capability < (8, 0):
        assert "8.0 or newer" in problem and "7.5" in problem
        assert not flex.flex_compile_available("cuda")
    else:
        assert problem is None


def test_capability_of_a_cpu_is_none():
    assert devices.cuda_capability("cpu") is None


# ---------------------------------------------------------------------------
# the Triton RoPE kernel on each capability (a T4 is 7.5)
# ---------------------------------------------------------------------------

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed"
)


@pytest.fixture
def named_gpu(gpu, monkeypatch):
    """``gpu`` with a name (the Triton status names the GPU), Triton not interpreting."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    return gpu


@needs_triton
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_triton_rope_refuses_bfloat16_below_8_0_and_says_what_to_do(
    named_gpu, capability
):
    device = named_gpu(capability)
    for dtype in (torch.float32, torch.float16, None):
        ready, how = rope_triton.triton_status(device, dtype)
        assert ready and "Triton compiles the kernel for Tesla T4" in how
    ready, why = rope_triton.triton_status(device, torch.bfloat16)
    if capability < (8, 0):
        assert not ready
        assert "bfloat16 needs compute capability 8.0 or newer" in why
        assert "has compute capability 7.5" in why
        assert "float16 (q.half(), k.half())" in why and "apply_rope_qk" in why
    else:
        assert ready, why


@needs_triton
def test_triton_rope_refuses_a_gpu_triton_cannot_compile_for(named_gpu):
    device = named_gpu((6, 1))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        ready, why = rope_triton.triton_status(device, dtype)
        assert not ready and "7.0 or newer" in why and "6.1" in why
        assert "apply_rope_qk (eager)" in why


def test_triton_rope_and_devices_agree_on_bfloat16s_capability():
    assert rope_triton.BFLOAT16_CAPABILITY == devices.BFLOAT16_CAPABILITY


@needs_triton
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_the_rope_suite_times_triton_only_where_it_runs(named_gpu, capability):
    device = named_gpu(capability)
    # the suite's own dtype on this GPU: float16 on a T4, so the kernel gets a row
    dtype = _core.check_dtype(_core.check_suite("rope"), None, device)
    assert rope_triton.triton_status(device, dtype)[0]
    # bfloat16 q and k (asked for through the function, not the command line,
    # which refuses them on a T4): a note says why there is no row
    inputs = SimpleNamespace(q=SimpleNamespace(device=device, dtype=torch.bfloat16))
    notes = []
    if capability < (8, 0):
        assert rope_bench._triton_case(inputs, notes) == []
        assert notes[0].startswith("Triton kernel: skipped, Triton's bfloat16 needs")
    else:
        assert rope_triton.triton_status(device, torch.bfloat16)[0]


def test_sdpa_backend_names_the_kernel_torch_would_run():
    """The dispatcher's answer, checked against what it refuses: forced to the
    named kernel alone, SDPA runs; the name is one of torch's backends."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 16, 8)
    name = devices.sdpa_backend(q, q, q, is_causal=True)
    assert name in SDPBackend.__members__
    with sdpa_kernel([getattr(SDPBackend, name)]):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    # a float mask with a gradient needs the unfused kernel on the CPU
    mask = torch.zeros(16, 16, requires_grad=True)
    assert devices.sdpa_backend(q, q, q, attn_mask=mask) == "MATH"
    settings = devices.sdpa_settings()
    assert set(settings) >= {"flash_enabled", "math_enabled", "flash_built"}


def test_gpu_clocks_reads_nvidia_smi_and_tries_the_older_field_name(
    tmp_path, monkeypatch
):
    """A fake nvidia-smi that knows only the older name of the reasons field."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *clocks_event_reasons*) echo "unknown field" >&2; exit 2;; esac\n'
        'echo "1980, 1980, 2619, 2619, 120.5, 41, 0x0000000000000000"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    clocks = devices.gpu_clocks("cuda:0")
    assert clocks["clocks.sm"] == "1980" and clocks["power.draw"] == "120.5"
    assert clocks["clocks_throttle_reasons.active"] == "0x0000000000000000"
    assert devices.gpu_clocks("cpu") is None
    fake.write_text("#!/bin/sh\nexit 9\n")
    assert devices.gpu_clocks("cuda:0") is None
