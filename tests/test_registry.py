"""The registry: one registration per variant, clear errors for mistakes, gates that say why."""

import pytest

from suite import registry


def test_every_problem_has_a_baseline_a_ceiling_and_both_kernel_backends():
    for problem in ("vector", "gemm"):
        vs = registry.variants(problem)
        assert sum(v.baseline for v in vs) == 1 and sum(v.ceiling for v in vs) == 1
        assert {"torch", "triton", "ptx"} <= {v.backend for v in vs}
        assert all(v.stages == (None,) or all(isinstance(s, int) and s >= 1 for s in v.stages) for v in vs)


def test_duplicate_and_unknown_registrations_are_refused():
    registry.variants()  # load the real registrations first
    with pytest.raises(ValueError, match="already registered"):
        registry.register("vector", "torch", "mul")(lambda inputs, out, stages: None)
    with pytest.raises(ValueError, match="unknown problem 'matmul'"):
        registry.register("matmul", "ptx", "x")(lambda inputs, out, stages: None)


def test_gpu_gate_explains_itself(monkeypatch):
    monkeypatch.setattr(registry.torch.cuda, "is_available", lambda: False)
    assert registry.needs_gpu((8, 0))() == "needs a CUDA GPU"
    monkeypatch.setattr(registry.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registry.torch.cuda, "get_device_capability", lambda: (7, 5))
    assert registry.needs_gpu((8, 0))() == "needs compute capability >= 8.0 (this GPU: 7.5)"
