"""What a device can run: a T4's compute capability (7.5) mocked beside 8.0 and 9.0."""

from __future__ import annotations

import pytest
import torch

from pe_tutorial import devices
from pe_tutorial.attention import flex
from pe_tutorial.benchmarks import _core

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
