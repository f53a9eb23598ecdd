"""Triton kernels in the interpreter (CPU tensors), every stage count, odd sizes, against torch."""

from pathlib import Path

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
    _fp64_check(c, a, b)


def _fp64_check(c, a, b):
    """The check test_gemm_close_to_fp64 applies."""
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=1e-3)


# Defects planted in a copy of suite/triton/gemm.py's kernel source: each is a plausible bug, and each must make the
# same check as above fail. (A mutation that no longer applies, because the kernel changed, fails the test too.)
MUTANTS = {
    "last K tile's tail dropped": ("mask=ks[None, :] < K - k0,", "mask=ks[None, :] < K - k0 - 8,"),
    "last row of C never stored": ("(out_rows[:, None] < M)", "(out_rows[:, None] < M - 1)"),
    "B read one column off": ("b_ptrs += BLOCK_K * stride_bk", "b_ptrs += BLOCK_K * stride_bk + stride_bn"),
    "accumulator restarted per K tile": ("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b)"),
}


def _mutant(tmp_path, name):
    """suite.triton.gemm with one defect planted in its kernel, imported from a file of its own."""
    import importlib.util

    before, after = MUTANTS[name]
    source = Path(tgemm.__file__).read_text()
    assert source.count(before) == 1, f"mutation {name!r} no longer applies to suite/triton/gemm.py"
    path = tmp_path / f"gemm_mutant_{list(MUTANTS).index(name)}.py"
    path.write_text(source.replace(before, after))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", MUTANTS)
def test_gemm_planted_defect_is_caught(tmp_path, name):
    """The check above can fail: a kernel with a real defect, run the same way on fresh inputs, is rejected, while
    the unmodified kernel passes on the very same inputs."""
    m, n, k = 67, 45, 72  # 3 K tiles, the last partial: every planted defect has something to break
    g = torch.Generator().manual_seed(5)
    a = torch.randn(m, k, generator=g).half()
    b = (torch.randn(k, n, generator=g) / k**0.5).half()
    _fp64_check(tgemm.matmul(a, b, 2, out=torch.full((m, n), float("nan"), dtype=torch.float16)), a, b)
    broken = _mutant(tmp_path, name)
    c = broken.matmul(a, b, 2, out=torch.full((m, n), float("nan"), dtype=torch.float16))
    with pytest.raises(AssertionError):
        _fp64_check(c, a, b)
