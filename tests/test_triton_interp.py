"""Triton kernels in the interpreter (CPU tensors), every stage count, odd sizes, against torch."""

import pytest
import torch

from conftest import HAS_GPU

pytestmark = pytest.mark.skipif(HAS_GPU, reason="interpreter tests run on the CPU-only machines")

from suite.triton import gemm as tgemm  # noqa: E402  (after conftest set TRITON_INTERPRET)
from suite.triton import vector as tvector  # noqa: E402


@pytest.mark.parametrize("stages", tvector.STAGES)
@pytest.mark.parametrize("n", [1, 3, 4, 4097, 3 * 8192 + 5, 5 * 8192])
def test_vector_bit_exact(stages, n):
    g = torch.Generator().manual_seed(1000 * stages + n)
    x = torch.randn(n, generator=g)
    y = torch.full_like(x, float("nan"))  # poisoned: an unwritten element fails
    tvector.scale2(x, stages, out=y)
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


@pytest.mark.parametrize("stages", tgemm.STAGES)
@pytest.mark.parametrize("shape", [(200, 264, 72), (67, 45, 40), (1, 1, 8), (130, 257, 8)])
def test_gemm_close_to_fp64(stages, shape):
    m, n, k = shape
    g = torch.Generator().manual_seed(stages * 7919 + m * 31 + n)
    a = torch.randn(m, k, generator=g).half()
    b = (torch.randn(k, n, generator=g) / k**0.5).half()
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    tgemm.matmul(a, b, stages, out=c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=1e-3)


def test_gemm_wrong_answer_is_caught():
    """The check above can fail: a B with one column changed gives a C the tolerance rejects."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(64, 32, generator=g).half()
    b = (torch.randn(32, 48, generator=g) / 32**0.5).half()
    c = tgemm.matmul(a, b, 2)
    b[:, 7] += 0.05
    with pytest.raises(AssertionError):
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=1e-3)
