"""Every registered PTX fp8 GEMM (suite/ptx/gemm_tma.py's fp8 builds: the top tile rung, the fp8-only 128x128 and
128x144 rungs, split-K and stream-K; suite/ptx/gemm_decode.py's decode and mid-M builds) on the edge inputs of issue
52 (rows of A at +-448, a saturated column of B, a zero row, a NaN, scales 0.5 and 3.0, the rest fresh N(0, 1)), on a
poisoned output: NaN exactly where the fp64 product has it, and elsewhere a worst error at most twice promoted
cuBLAS's on the same inputs (torch._scaled_mm, use_fast_accum=False). A kernel that kept the products in wgmma's
narrow accumulator across K misses that by orders of magnitude at long K. The Triton fp8 kernels' counterpart is in
tests/test_triton_llm.py."""

import zlib

import pytest
import torch
from fp8_edges import cublas_promoted, fp8_edge_inputs, fp8_error

from suite.problems import GEMM
from suite.registry import variants

SIZES = ((48, 4096, 14336), (3000, 6144, 4096), (256, 256, 131072))  # issue 52's decode, prefill and long K


def _ptx_fp8():
    return [(v.label, s) for v in variants("gemm", "ptx") if "fp8e4m3" in v.dtypes for s in v.stages_for("fp8e4m3")]


def test_there_are_ptx_fp8_kernels_to_check():
    """The list the GPU test below walks is not empty (a registry without PTX fp8 rows would check nothing)."""
    assert _ptx_fp8()


@pytest.mark.gpu
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("label, stages", _ptx_fp8())
def test_ptx_fp8_edge_values_within_twice_promoted_cublas(label, stages, size):
    variant = next(v for v in variants("gemm") if v.label == label)
    if reason := variant.skip_reason() or variant.dtype_skip_reason("fp8e4m3"):
        pytest.skip(reason)
    inputs = fp8_edge_inputs(*size, seed=zlib.crc32(f"{label} {stages} {size}".encode()), device="cuda")
    ceiling, _ = fp8_error(cublas_promoted(inputs), inputs)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    variant.factory(inputs, out, stages)()
    torch.cuda.synchronize()
    error, _ = fp8_error(out, inputs)
    assert float(error.max()) <= 2 * float(ceiling.max()), (
        label,
        stages,
        size,
        float(error.max()),
        float(ceiling.max()),
    )
