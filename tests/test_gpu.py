"""On a GPU: every registered variant x stage count against torch, on fresh random inputs, outputs poisoned."""

import pytest
import torch

from suite.problems import GEMM, VECTOR
from suite.registry import variants
from suite.validate import validate

pytestmark = pytest.mark.gpu

CASES_VECTOR = [(v, s) for v in variants("vector") for s in v.stages]
CASES_GEMM = [(v, s) for v in variants("gemm") for s in v.stages]


def _id(case):
    v, s = case
    return f"{v.backend}:{v.name}:{s}"


@pytest.mark.parametrize("case", CASES_VECTOR, ids=_id)
@pytest.mark.parametrize("n", [1, 3, 4, 4097, 2**20 + 3, 2**28])
def test_vector_bit_exact(case, n):
    variant, stages = case
    result = validate(variant, stages, n, seed=n + 17 * (stages or 0), device=torch.device("cuda"))
    assert VECTOR.tolerance == {"rtol": 0.0, "atol": 0.0}  # the check below is bit-exact
    assert result.check.valid, f"{variant.label} stages={stages} n={n}: {result.check.message}"


GEMM_SHAPES = [
    (1, 1, 8),  # tiny
    (7, 13, 8),  # K = 8: one partial K tile
    (129, 257, 40),  # one past the tile in M and N
    (300, 520, 136),  # ragged in M, N % 8 == 0
    (256, 250, 64),  # N % 8 != 0: the PTX kernel's predicated B path
    (333, 77, 24),  # odd N, K < BLOCK_K
    (1100, 700, 264),  # 9 x 3 tiles: a rasterization group cut short
    (2048, 2048, 2048),
]


@pytest.mark.parametrize("case", CASES_GEMM, ids=_id)
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_fp64(case, shape):
    variant, stages = case
    check = validate(variant, stages, shape, seed=sum(shape) + 101 * (stages or 0), device=torch.device("cuda")).check
    assert check.valid, (f"{variant.label} stages={stages}: {check.message} "
                         f"(max abs error {check.max_abs_error:.3g}, rel {check.rel_error:.3g})")


def test_gemm_check_catches_a_wrong_tile():
    """The GEMM check fails when one 16x8 mma tile of C is wrong."""
    inputs = GEMM.make_inputs((256, 256, 64), 3, torch.device("cuda"))
    ref = GEMM.reference(inputs)
    out = ref.half()
    out[16:32, 8:16] += 0.01
    assert not GEMM.check(out, ref).valid


def test_ptx_gemm_refuses_a_ring_deeper_than_shared_memory(monkeypatch):
    from suite.ptx import gemm, loader

    monkeypatch.setattr(loader, "device_smem_limit", lambda: 100 * 1024)  # as if the GPU had 100 KiB per block
    a = torch.randn(64, 64, device="cuda").half()
    with pytest.raises(ValueError, match="shared memory"):
        gemm.Gemm(a, a, torch.empty_like(a), 5)


def test_ptx_gemm_refuses_a_ring_that_does_not_fit_this_gpu():
    """BLOCK_K = 64 at 5 stages needs 240 KiB of shared memory per block; an H100/H200 allows 227 KiB."""
    from suite.ptx import gemm, loader

    need = 5 * gemm.stage_bytes(64)
    if need <= loader.device_smem_limit():
        pytest.skip("this GPU fits a 240 KiB ring")
    a = torch.randn(256, 256, device="cuda").half()
    with pytest.raises(ValueError, match=f"needs {need} B of shared memory per block"):
        gemm.Gemm(a, a, torch.empty_like(a), 5, kernel=gemm.GemmMmaSync(64, stages=(5,)))  # not registered
