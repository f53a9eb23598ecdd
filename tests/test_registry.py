"""The registry: one registration per variant, clear errors for mistakes, gates that say why."""

import sys

import pytest
import torch

from suite import registry
from suite.kernel import LibraryOp


def test_every_problem_has_a_baseline_a_ceiling_and_both_kernel_backends():
    for problem in ("vector", "gemm"):
        vs = registry.variants(problem)
        assert sum(v.baseline for v in vs) == 1 and sum(v.ceiling for v in vs) == 1
        assert {"torch", "triton", "ptx"} <= {v.backend for v in vs}
        assert all(v.stages == (None,) or all(isinstance(s, int) and s >= 1 for s in v.stages) for v in vs)


def test_duplicate_and_unknown_registrations_are_refused():
    registry.variants()  # load the real registrations first
    op = LibraryOp(lambda inputs, out: lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_kernel("vector", "torch", "mul", op)
    with pytest.raises(ValueError, match="unknown problem 'matmul'"):
        registry.register_kernel("matmul", "ptx", "x", op)


def test_gpu_gate_explains_itself(monkeypatch):
    monkeypatch.setattr(registry.torch.cuda, "is_available", lambda: False)
    assert registry.needs_gpu((8, 0))() == "needs a CUDA GPU"
    monkeypatch.setattr(registry.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registry.torch.cuda, "get_device_capability", lambda: (7, 5))
    assert registry.needs_gpu((8, 0))() == "needs compute capability >= 8.0 (this GPU: 7.5)"


@pytest.fixture
def scratch_registry(monkeypatch):
    """The real registrations, restored after the test (it may add its own)."""
    registry.variants()
    monkeypatch.setattr(registry, "_REGISTRY", list(registry._REGISTRY))
    return registry


def test_a_kernel_registration_derives_from_its_module(scratch_registry, monkeypatch):
    from suite.kernel import TritonModule

    class Kernel(TritonModule):
        stages = (2, 5)

        def launch(self, inputs, out, stages):
            return lambda: out.copy_(inputs[0] * 2)

    module = type(sys)("pipesuite_test_kernel")
    module.KERNEL = Kernel()
    monkeypatch.setitem(sys.modules, "pipesuite_test_kernel", module)
    registry.register_kernel("vector", "test", "derived", "pipesuite_test_kernel:KERNEL")
    (v,) = [v for v in registry.variants() if v.label == "test:derived"]
    assert v.kernel is module.KERNEL and v.stages == (2, 5) and v.describe is None  # a Triton module: no describe
    x = torch.randn(7)
    out = torch.empty(7)
    v.factory((x,), out, 2)()
    assert torch.equal(out, 2 * x)


def test_a_kernel_is_imported_only_when_needed(scratch_registry):
    registry.register_kernel("vector", "test", "lazy", "pipesuite_no_such_module:KERNEL")  # registering imports nothing
    (v,) = [v for v in registry.variants() if v.label == "test:lazy"]
    with pytest.raises(ModuleNotFoundError, match="pipesuite_no_such_module"):
        v.stages
    with pytest.raises(ValueError, match="package.module:NAME"):
        registry.resolve_kernel("no_colon_here")


def test_an_nvrtc_kernel_describes_itself_without_a_gpu():
    """The PTX registrations' describe is their module's: every stage count, compiled for the arch asked."""
    for v in registry.variants(backend="ptx"):
        info = v.describe("sm_90")
        assert set(info) == set(v.stages), v.label
        assert all(i.registers and i.spill_bytes == 0 and i.smem_per_stage for i in info.values()), v.label
