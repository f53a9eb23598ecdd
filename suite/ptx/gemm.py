"""C = A @ B (fp16 in, fp32 accumulate, fp16 out) with the cp.async + ldmatrix + mma.sync pipeline of ``gemm.cu``."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_gemm_operands, check_stages
from suite.ptx import loader

SOURCE = Path(__file__).with_name("gemm.cu")
STAGES = (1, 2, 3, 4, 5)  # compiled for every BLOCK_K; a ring that does not fit the GPU is refused at launch
BLOCK_KS = (32, 64)  # 32: the seed's tile; 64: half the barriers per multiply-add, twice the bytes per stage
BLOCK_M, BLOCK_N = 128, 256
THREADS = 256
# gemm.cu computes indices in 32-bit ints: rows up to M rounded up to BLOCK_M, columns up to N rounded up to BLOCK_N,
# k up to K rounded up to BLOCK_K. Dimensions up to MAX_DIM keep every one of them below 2^31 (checked, not widened to
# 64 bits: the kernel's guards stay single 32-bit compares). One block per C tile, on the grid's x dimension.
MAX_DIM = 2**31 - 1 - BLOCK_N
MAX_GRID = 2**31 - 1


def stage_bytes(block_k: int = 32) -> int:
    """Shared memory of one ring stage: an A tile (128 x BLOCK_K) and a B tile (BLOCK_K x 256), fp16."""
    return (BLOCK_M * block_k + block_k * BLOCK_N) * 2


def name_expression(stages: int, n_aligned: bool, block_k: int = 32) -> str:
    return f"gemm_f16_f32acc<{stages}, {'true' if n_aligned else 'false'}, {block_k}>"


@functools.cache
def build(arch: str | None = None) -> loader.CompiledModule:
    """Every (STAGES, N_ALIGNED, BLOCK_K) instantiation of gemm.cu, for ``arch`` (default: the current GPU)."""
    exprs = tuple(name_expression(s, a, k) for k in BLOCK_KS for s in STAGES for a in (True, False))
    return loader.compile_cu(SOURCE, exprs, arch=arch)


def check_inputs(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stages: int, block_k: int = 32) -> None:
    check_stages(stages, STAGES)
    if block_k not in BLOCK_KS:
        raise ValueError(f"block_k must be one of {BLOCK_KS} (got {block_k})")
    m, n, k = check_gemm_operands(a, b, c)
    if k % 8:
        raise ValueError(f"K must be a multiple of 8 so that rows of A are whole 16-byte chunks (got K={k})")
    if max(m, n, k) > MAX_DIM:
        raise ValueError(f"M, N and K must each be <= 2^31 - 1 - {BLOCK_N} = {MAX_DIM} (got M={m}, N={n}, K={k}): the "
                         "kernel forms row, column and k indices in 32-bit ints, up to one tile past the matrix")
    if -(-m // BLOCK_M) * -(-n // BLOCK_N) > MAX_GRID:
        raise ValueError(f"the grid, ceil(M/{BLOCK_M}) * ceil(N/{BLOCK_N}) blocks, must be <= 2^31 - 1 (got M={m}, "
                         f"N={n})")
    check_cuda(("a", a), ("b", b), ("c", c))


class Gemm:
    """A launcher bound to (a, b, c, stages): ``Gemm(a, b, c, 3)()`` writes c = a @ b on torch's current stream."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stages: int, block_k: int = 32):
        check_inputs(a, b, c, stages, block_k)
        (m, k), n = a.shape, b.shape[1]
        module = build()
        expr = name_expression(stages, n % 8 == 0, block_k)
        self.kernel = module.kernel(expr)
        self.smem_bytes = stages * stage_bytes(block_k)
        loader.prepare(self.kernel, self.smem_bytes)  # refuses a STAGES whose ring does not fit this GPU
        blocks_per_sm = loader.occupancy(self.kernel, THREADS, self.smem_bytes)
        if blocks_per_sm < 1:
            raise ValueError(f"stages={stages}: a block ({self.smem_bytes} B of shared memory) does not fit on an SM")
        self.grid = -(-m // BLOCK_M) * -(-n // BLOCK_N)
        self.args = (a.data_ptr(), b.data_ptr(), c.data_ptr(), np.int32(m), np.int32(n), np.int32(k))
        self.info = module.kernel_info(
            expr, stage_bytes(block_k), stages, occupancy=blocks_per_sm, threads=THREADS, grid=self.grid,
            config=f"{BLOCK_M}x{BLOCK_N}x{block_k}, 8 warps 2x4, 64x64 warp tile"
            + ("" if n % 8 == 0 else ", N % 8 != 0: B through plain loads"),
        )

    def __call__(self) -> None:
        loader.launch(self.kernel, self.grid, THREADS, self.smem_bytes, *self.args)


def matmul(a: torch.Tensor, b: torch.Tensor, stages: int = 3, out: torch.Tensor | None = None,
           block_k: int = 32) -> torch.Tensor:
    """c = a @ b with the STAGES-deep pipeline; allocates c unless ``out`` is given."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device) if out is None else out
    Gemm(a, b, c, stages, block_k)()
    return c
