"""Property tests over shapes with fresh seeds (hypothesis): Triton in the interpreter on the CPU, every registered
kernel on a GPU."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HAS_GPU
from suite.problems import GEMM, VECTOR

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False)
sizes_vector = st.integers(1, 100_000)
shapes_gemm = st.tuples(st.integers(1, 600), st.integers(1, 600), st.integers(1, 64).map(lambda k8: 8 * k8))
seeds = st.integers(0, 2**31 - 1)


def _check(problem, factory, size, seed, device):
    inputs = problem.make_inputs(size, seed, device)
    out = problem.make_output(inputs)
    out.fill_(float("nan"))
    factory(inputs, out)()
    if device.type == "cuda":
        torch.cuda.synchronize()
    result = problem.check(out, problem.reference(inputs))
    assert result.valid, f"size={size} seed={seed}: {result.message}"


@pytest.mark.skipif(HAS_GPU, reason="the interpreter variant of these properties runs on CPU-only machines")
class TestInterpreter:
    @settings(max_examples=50, **SETTINGS)
    @given(n=sizes_vector, stages=st.sampled_from((1, 2, 3, 4)), seed=seeds)
    def test_vector(self, n, stages, seed):
        from suite.triton.vector import Scale2

        _check(VECTOR, lambda i, o: Scale2(i[0], o, stages), n, seed, torch.device("cpu"))

    @settings(max_examples=25, **SETTINGS)
    @given(shape=shapes_gemm, stages=st.sampled_from((1, 2, 3, 4, 5)), seed=seeds)
    def test_gemm(self, shape, stages, seed):
        from suite.triton.gemm import Gemm

        _check(GEMM, lambda i, o: Gemm(*i, o, stages), shape, seed, torch.device("cpu"))


def _kernels(problem):
    from suite.registry import variants

    return [(v, s) for v in variants(problem) if v.backend in ("ptx", "triton") and v.name != "tuned"
            for s in v.stages]


@pytest.mark.gpu
class TestGPU:
    @settings(max_examples=60, **SETTINGS)
    @given(data=st.data(), n=sizes_vector, seed=seeds)
    def test_vector(self, data, n, seed):
        v, s = data.draw(st.sampled_from(_kernels("vector")), label="variant")
        _check(VECTOR, lambda i, o: v.factory(i, o, s), n, seed, torch.device("cuda"))

    @settings(max_examples=60, **SETTINGS)
    @given(data=st.data(), shape=shapes_gemm, seed=seeds)
    def test_gemm(self, data, shape, seed):
        v, s = data.draw(st.sampled_from(_kernels("gemm")), label="variant")
        _check(GEMM, lambda i, o: v.factory(i, o, s), shape, seed, torch.device("cuda"))
