"""C = A @ B (fp16 in, fp32 accumulate, fp16 out) in Triton with pointer loads: the PTX mma.sync kernel's
128x256x32 tile with 8 warps, swept over ``num_stages``."""

from __future__ import annotations

from typing import ClassVar

import torch
import triton
import triton.language as tl

from suite.checks import check_gemm_operands, check_stages
from suite.kernel import TritonModule
from suite.triton.compiled import kernel_info
from suite.triton.gemm_parts import tile_coords

STAGES = (1, 2, 3, 4, 5)
BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 32
NUM_WARPS = 8
GROUP_M = 8  # tile rows per rasterization group, as in the PTX kernel


@triton.jit
def gemm_kernel(
    # pointers
    a_ptr,
    b_ptr,
    c_ptr,
    # sizes
    M,
    N,
    K,
    # strides (elements)
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    ALIGNED: tl.constexpr,  # K and N are multiples of 8: rows of A, B and C start on 16-byte boundaries
):
    # -- Triton only vectorizes (and cp.async-pipelines) loads it can prove 16-byte aligned: it checks integer
    #    arguments for divisibility by 16, so a K like 1000 (rows of 2000 bytes) hides the alignment. Say it. --
    if ALIGNED:
        stride_am = tl.multiple_of(stride_am, 8)
        stride_bk = tl.multiple_of(stride_bk, 8)
        stride_cm = tl.multiple_of(stride_cm, 8)
        K = tl.multiple_of(K, 8)
    # -- map the program id to a C tile, GROUP_M tile rows at a time so concurrent programs share L2 --
    m0, n0 = tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), BLOCK_M, BLOCK_N, GROUP_M)

    # -- pointers to the first K tile; rows / columns past M / N wrap (their results are masked at the store) --
    rows = (m0 + tl.arange(0, BLOCK_M)) % M
    cols = (n0 + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None].to(tl.int64) * stride_bk + cols[None, :] * stride_bn

    # -- iterate over K: num_stages decides how many K tiles are in flight ahead of the dot --
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        # the steps in 64 bits: BLOCK_K rows of B are past 2^31 elements once N >= 2^31 / BLOCK_K
        a_ptrs += tl.full((), BLOCK_K, tl.int64) * stride_ak
        b_ptrs += tl.full((), BLOCK_K, tl.int64) * stride_bk

    # -- write back, fp32 -> fp16, masked to the matrix --
    out_rows = m0 + tl.arange(0, BLOCK_M)
    out_cols = n0 + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None].to(tl.int64) * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


def _args(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    return (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def _aligned(a, b, c) -> bool:
    """Every row of A, B and C starts on a 16-byte boundary (contiguous fp16 tensors, 16-byte-aligned bases)."""
    return a.shape[1] % 8 == 0 and b.shape[1] % 8 == 0 and all(t.data_ptr() % 16 == 0 for t in (a, b, c))


class Gemm:
    """The 128x256x32 tile, 8 warps, at ``stages``: ``Gemm(a, b, c, 3)()`` writes c = a @ b."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stages: int):
        check_stages(stages, STAGES)
        check_gemm_operands(a, b, c)
        self.args, self.stages, self.aligned = _args(a, b, c), stages, _aligned(a, b, c)
        m, n = c.shape
        self.grid = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
        self.config = f"{BLOCK_M}x{BLOCK_N}x{BLOCK_K}, num_warps={NUM_WARPS}, num_stages={stages}"
        self.info = kernel_info(None, (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2, self.config, self.grid)
        self._compiled = False

    def __call__(self) -> None:
        compiled = gemm_kernel[(self.grid,)](
            *self.args,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            BLOCK_K=BLOCK_K,
            GROUP_M=GROUP_M,
            ALIGNED=self.aligned,
            num_warps=NUM_WARPS,
            num_stages=self.stages,
        )
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid)


class Tile128x256x32(TritonModule):
    """gemm_kernel at the PTX kernel's tile, swept over num_stages."""

    depth_is_num_stages = True  # the launch's num_stages (suite.kernel.TritonModule)
    stages = STAGES
    # fp16 only: this row is the PTX mma.sync kernel's twin (the seed's tile and type, square shapes); the Triton rows
    # in bf16 and fp8 are the tensor-descriptor kernels (gemm_desc.py and the split-K / stream-K / decode modules)
    dtype_notes: ClassVar[dict[str, str]] = {
        "bf16": "the pointer kernel is the fp16 PTX mma.sync kernel's twin; Triton's bf16 rows are the descriptor "
        "kernels",
        "fp8e4m3": "the pointer kernel walks B as K x N, and fp8 takes B as N x K (K-major); Triton's fp8 rows are "
        "the descriptor kernels",
    }

    # compute-sanitizer: edge tiles (M, N and K not multiples of the tile: masked loads and stores), and a ring that
    # wraps many times within a tile
    sanitize_sizes = ((130, 250, 40), (256, 512, 1024))

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("gemm_kernel",)

    def launch(self, inputs, out, stages):
        return Gemm(*inputs, out, stages)


KERNEL = Tile128x256x32()


def matmul(a: torch.Tensor, b: torch.Tensor, stages: int = 3, out: torch.Tensor | None = None) -> torch.Tensor:
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device) if out is None else out
    Gemm(a, b, c, stages)()
    return c
