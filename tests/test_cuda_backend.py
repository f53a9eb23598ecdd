"""The cuda backend (suite/cuda) without a GPU: libcu++ is found at run time, and its GEMM differs from the PTX one
only upstream of shared memory (the registry-wide tests build both for sm_80 and sm_90, without spills, with LDGSTS)."""

from suite.cuda import gemm as cuda_gemm
from suite.cuda.headers import cccl_include_dir
from suite.ptx import gemm as ptx_gemm


def test_libcudacxx_is_found():
    assert (cccl_include_dir() / "cuda" / "pipeline").is_file()


def test_gemm_downstream_of_shared_memory_is_the_ptx_kernels():
    """Same ldmatrix and mma.sync instruction counts as the PTX kernel at every stage count, and as many LDGSTS (one
    memcpy_async per 16-byte chunk, as one cp.async per chunk)."""
    cuda, ptx = cuda_gemm.GEMM_K32, ptx_gemm.GEMM_K32
    assert cuda.stages == ptx.stages and cuda.stage_bytes == ptx.stage_bytes
    cuda_classes, ptx_classes = cuda.build("sm_90").instruction_classes(), ptx.build("sm_90").instruction_classes()
    for stages in cuda.stages:
        for aligned in (True, False):
            c = cuda_classes[cuda.name_expression(stages, aligned)]
            p = ptx_classes[ptx.name_expression(stages, aligned)]
            for cls in ("ldmatrix", "mma", "async_copy"):
                assert c[cls] == p[cls], (stages, aligned, cls, c[cls], p[cls])
