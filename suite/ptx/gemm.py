"""C = A @ B (fp16 or bf16 in, fp32 accumulate, the same type out) with the cp.async + ldmatrix + mma.sync pipeline of
``gemm.cu``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, gemm_operands
from suite.kernel import Fault, NvrtcModule
from suite.nvrtc import loader
from suite.problems import BadInput

SOURCE = Path(__file__).with_name("gemm.cu")
STAGES = (1, 2, 3, 4, 5)
BLOCK_KS = (32, 64)  # 32: the original design's tile; 64: half the barriers per multiply-add, twice the bytes per stage
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


def name_expression(stages: int, n_aligned: bool, block_k: int = 32, dtype: str = "fp16") -> str:
    bf16 = ", true" if dtype == "bf16" else ""  # the template's default is fp16
    return f"gemm_f16_f32acc<{stages}, {'true' if n_aligned else 'false'}, {block_k}{bf16}>"


# fp8 has no mma.sync of its own on sm_90: ptxas accepts mma.sync.m16n8k32.e4m3 for sm_90 but lowers it to two fp16
# HMMA.16816 (QMMA exists on sm_89 only; checked with this toolkit's NVRTC). Hopper's fp8 path is wgmma (QGMMA).
FP8_NOTE = (
    "no fp8 mma.sync on sm_90: ptxas lowers mma.sync.m16n8k32.e4m3 to two fp16 HMMA (native QMMA is sm_89 "
    "only); Hopper's fp8 path is wgmma (the TMA rows)"
)
# bf16 changes only the mma and the output conversion, the same on every row of this design: it is built on the
# 128x256x32 PTX row alone, which keeps the CPU tests' compile time down.
BF16_ELSEWHERE = "the design's bf16 build is the ptx:128x256x32 mma.sync row (the same tile, only the mma differs)"


class GemmMmaSync(NvrtcModule):
    """gemm.cu at one BLOCK_K, compiled for each stage count and both B paths (N % 8 == 0 or not). The fixed tile
    (BLOCK_M, BLOCK_N, THREADS) reaches the kernel as defines that gemm.cu static_asserts against its own."""

    source = SOURCE
    threads = THREADS
    dtypes = ("fp16", "bf16")
    dtype_notes = {"fp8e4m3": FP8_NOTE}
    sanitize_sizes = ((200, 264, 72), (130, 250, 40))  # N % 8 == 0 (cp.async B) and N % 8 != 0 (plain-load B)
    faults = (
        Fault("STAGES = 1: the barrier before the stage is refilled removed", "PIPESUITE_FAULT_NO_REUSE_BARRIER", (1,)),
        # The mainloop's one barrier per K tile: it both publishes the next tile and frees the stage refilled next.
        Fault(
            "STAGES >= 2: the ring's barrier before a stage is reused removed", "PIPESUITE_FAULT_NO_RING_BARRIER", (2,)
        ),
    )

    def __init__(self, block_k: int = 32, stages: tuple[int, ...] = STAGES, dtypes: tuple[str, ...] = ("fp16", "bf16")):
        if block_k not in BLOCK_KS:
            raise ValueError(f"block_k must be one of {BLOCK_KS} (got {block_k})")
        self.block_k, self.stages, self.stage_bytes = block_k, tuple(stages), stage_bytes(block_k)
        self.dtypes = tuple(dtypes)
        if "bf16" not in self.dtypes:
            self.dtype_notes = {**self.dtype_notes, "bf16": BF16_ELSEWHERE}
        # cp.async, ldmatrix, and a fully unrolled K tile of mma.sync: 4 x 8 tiles per warp per 16-deep k-step
        self.sass_requires = {"async_copy": 1, "ldmatrix": 1, "mma": 32 * block_k // 16}

    def constants(self) -> dict[str, int]:
        return {"GEMM_BLOCK_M": BLOCK_M, "GEMM_BLOCK_N": BLOCK_N, "GEMM_THREADS": THREADS}

    def name_expression(self, stages: int, n_aligned: bool, dtype: str = "fp16") -> str:
        """The instantiation a launch picks: cp.async B rows when N % 8 == 0, plain loads otherwise."""
        return name_expression(stages, n_aligned, self.block_k, dtype)

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return tuple(self.name_expression(stages, aligned, d) for d in self.dtypes for aligned in (True, False))

    def describe(self, arch: str, dtype: str = "fp16") -> dict:
        return self.describe_depths(
            arch, lambda s: self.name_expression(s, True, dtype), lambda _: f"{arch} cubin; {self.config()}"
        )

    def config(self) -> str:
        return f"{BLOCK_M}x{BLOCK_N}x{self.block_k}, 8 warps 2x4, 64x64 warp tile"

    def launch(self, inputs, out, stages):
        ops = gemm_operands(tuple(inputs), out, self.dtypes)
        return Gemm(ops.a, ops.b, out, stages, kernel=self)

    def bad_inputs(self) -> list[BadInput]:
        a, b, c = (torch.randn(*shape).half() for shape in ((16, 12), (12, 16), (16, 16)))
        return [BadInput((a, b), c, "K must be a multiple of 8", "K % 8 != 0")]


GEMM_K32 = GemmMmaSync(32)
GEMM_K64 = GemmMmaSync(64, (1, 2, 3, 4), dtypes=("fp16",))  # 5 stages of 48 KiB do not fit (227 KiB per block)
KERNELS = {32: GEMM_K32, 64: GEMM_K64}


def build(arch: str | None = None, block_k: int = 32) -> loader.CompiledModule:
    """Every (STAGES, N_ALIGNED) instantiation of gemm.cu at ``block_k``, for ``arch`` (default: the current GPU)."""
    return KERNELS[block_k].build(arch)


def check_inputs(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stages: int, kernel: GemmMmaSync = GEMM_K32
) -> None:
    check_stages(stages, kernel.stages)
    ops = gemm_operands((a, b), c, kernel.dtypes)
    m, n, k = ops.m, ops.n, ops.k
    if k % 8:
        raise ValueError(f"K must be a multiple of 8 so that rows of A are whole 16-byte chunks (got K={k})")
    if max(m, n, k) > MAX_DIM:
        raise ValueError(
            f"M, N and K must each be <= 2^31 - 1 - {BLOCK_N} = {MAX_DIM} (got M={m}, N={n}, K={k}): the "
            "kernel forms row, column and k indices in 32-bit ints, up to one tile past the matrix"
        )
    if -(-m // BLOCK_M) * -(-n // BLOCK_N) > MAX_GRID:
        raise ValueError(
            f"the grid, ceil(M/{BLOCK_M}) * ceil(N/{BLOCK_N}) blocks, must be <= 2^31 - 1 (got M={m}, N={n})"
        )
    check_cuda(("a", a), ("b", b), ("c", c))


class Gemm(loader.BoundKernel):
    """A launcher bound to (a, b, c, stages): ``Gemm(a, b, c, 3)()`` writes c = a @ b on torch's current stream."""

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        c: torch.Tensor,
        stages: int,
        block_k: int = 32,
        kernel: GemmMmaSync | None = None,
    ):
        if kernel is None:
            if block_k not in KERNELS:
                raise ValueError(f"block_k must be one of {BLOCK_KS} (got {block_k})")
            kernel = KERNELS[block_k]
        check_inputs(a, b, c, stages, kernel)
        (m, k), n = a.shape, b.shape[1]
        dtype = "bf16" if a.dtype == torch.bfloat16 else "fp16"
        super().__init__(
            kernel.build(),
            kernel.name_expression(stages, n % 8 == 0, dtype),
            stages,
            kernel.stage_bytes,
            THREADS,
            grid=-(-m // BLOCK_M) * -(-n // BLOCK_N),
            args=(a.data_ptr(), b.data_ptr(), c.data_ptr(), np.int32(m), np.int32(n), np.int32(k)),
            config=kernel.config()
            + (", bf16" if dtype == "bf16" else "")
            + ("" if n % 8 == 0 else ", N % 8 != 0: B through plain loads"),
            too_big=f"stages={stages}: a block ({stages * kernel.stage_bytes} B of shared memory) does not fit on an "
            "SM",
        )


def matmul(
    a: torch.Tensor, b: torch.Tensor, stages: int = 3, out: torch.Tensor | None = None, block_k: int = 32
) -> torch.Tensor:
    """c = a @ b with the STAGES-deep pipeline; allocates c unless ``out`` is given."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device) if out is None else out
    Gemm(a, b, c, stages, block_k)()
    return c
