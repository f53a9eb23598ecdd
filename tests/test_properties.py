"""Property tests over sizes with fresh seeds (hypothesis), through suite.validate: every registered variant whose
kernel runs here (Triton in the interpreter on a CPU; every kernel on a GPU) on sizes hypothesis draws."""

import pytest
import torch
from conftest import HAS_GPU
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suite.problems import PROBLEMS
from suite.registry import variants
from suite.validate import validate

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False)
SIZES = {  # per problem: what hypothesis draws (gemm K a multiple of 8: the PTX kernels' 16-byte rows)
    "vector": st.integers(1, 100_000),
    "gemm": st.tuples(st.integers(1, 600), st.integers(1, 600), st.integers(1, 64).map(lambda k8: 8 * k8)),
}
EXAMPLES = {"vector": 50, "gemm": 25} if not HAS_GPU else {"vector": 60, "gemm": 60}
seeds = st.integers(0, 2**31 - 1)
DEVICE = torch.device("cuda" if HAS_GPU else "cpu")


def _kernels(problem):
    """Staged kernels that run here (the library baselines and ceilings are what the others are checked against),
    each at the problem's default dtype, or its own first where it lacks that (the fp8-only GEMM rung)."""
    default = PROBLEMS[problem].default_dtype
    return [
        (v, s, default if default in v.dtypes else v.dtypes[0])
        for v in variants(problem)
        if v.stages != (None,) and v.skip_reason() is None
        for s in v.stages
    ]


def _size_for(problem, size, dtype):
    """``size`` with K rounded up to the dtype's rule (fp8: K % 16, 16-byte rows of 1-byte elements)."""
    if problem != "gemm":
        return size
    m, n, k = size
    multiple = PROBLEMS["gemm"].dtypes[dtype].k_multiple
    return (m, n, -(-k // multiple) * multiple)


@pytest.mark.long  # 35 s on the H200 (gemm)
@pytest.mark.parametrize("problem", sorted(SIZES))
def test_random_sizes(problem):
    cases = _kernels(problem)
    if not cases:
        pytest.skip(f"no {problem} kernel runs here")

    @settings(max_examples=EXAMPLES[problem], **SETTINGS)
    @given(data=st.data(), size=SIZES[problem], seed=seeds)
    def check(data, size, seed):
        v, s, dtype = data.draw(st.sampled_from(cases), label="variant")
        size = _size_for(problem, size, dtype)
        result = validate(v, s, size, seed=seed, device=DEVICE, dtype=dtype)
        assert result.check.valid, f"{v.label} {dtype} stages={s} size={size} seed={seed}: {result.check.message}"

    check()
