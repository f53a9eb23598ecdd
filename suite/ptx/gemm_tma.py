"""C = A @ B (fp16 in, fp32 accumulate, fp16 out) with Hopper's pipeline, ``gemm_tma.cu``: TMA loads into an
mbarrier-guarded ring, wgmma from shared memory, a producer warp and consumer warpgroups (sm_90a only).

Each ``CONFIGS`` entry is one rung of the ladder the tables show: what a technique adds over the one before."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_gemm_operands, check_stages
from suite.kernel import Fault, NvrtcModule
from suite.problems import BadInput
from suite.nvrtc import loader

SOURCE = Path(__file__).with_name("gemm_tma.cu")
ARCH = "sm_90a"  # wgmma and setmaxnreg exist only on the architecture-specific target
BLOCK_M, BLOCK_K = 128, 64
# NDEBUG: no device asserts (a call inside the wgmma region serializes every wgmma, ptxas C7510). The tile reaches the
# kernel as defines, which gemm_tma.cu static_asserts: Python and C++ cannot drift apart.
DEFINES = ("NDEBUG", f"GEMM_TMA_BLOCK_M={BLOCK_M}", f"GEMM_TMA_BLOCK_K={BLOCK_K}")
BOX_N = 64  # B is loaded as boxes of 64 K rows x 64 N columns (one 128-byte swizzled row each)
WG_THREADS = 128
BARRIER_BYTES = 8
ALIGN_SLACK = 1024  # the kernel rounds its shared-memory base up to the 1024-byte swizzle atom
MAX_DIM = 2**31 - 1 - 256  # a tile origin (up to M or N plus a tile) must stay a positive 32-bit int


@dataclass(frozen=True)
class Config:
    block_n: int
    consumers: int  # consumer warpgroups (plus one producer warpgroup)
    persistent: bool
    tma_store: bool  # epilogue: staged in shared memory, stored with TMA (where N % 8 == 0)
    stages: tuple[int, ...]  # every depth whose ring (and C staging) fits 227 KiB of shared memory

    @property
    def threads(self) -> int:
        return (1 + self.consumers) * WG_THREADS

    @property
    def stage_bytes(self) -> int:
        return (BLOCK_M * BLOCK_K + BLOCK_K * self.block_n) * 2

    def smem_bytes(self, stages: int) -> int:
        staging = BLOCK_M * self.block_n * 2 if self.tma_store else 0
        return stages * (self.stage_bytes + 2 * BARRIER_BYTES) + staging + ALIGN_SLACK

    def name_expression(self, stages: int) -> str:
        flag = lambda b: "true" if b else "false"  # noqa: E731
        return (f"gemm_tma_wgmma<{stages}, {self.block_n}, {self.consumers}, {flag(self.persistent)}, "
                f"{flag(self.tma_store)}>")

    def describe(self) -> str:
        return (f"{BLOCK_M}x{self.block_n}x{BLOCK_K}, 1 producer warp + {self.consumers} consumer warpgroup"
                f"{'s' if self.consumers > 1 else ''}" + (", persistent" if self.persistent else "")
                + (", TMA-store epilogue" if self.tma_store else ""))


# The ladder: each rung adds one technique to the one above it.
CONFIGS: dict[str, Config] = {
    "128x128x64 ws": Config(128, 1, False, False, (2, 3, 4, 5, 6, 7)),  # TMA + mbarrier ring + wgmma, warp-specialized
    "128x256x64 ws 2wg": Config(256, 2, False, False, (2, 3, 4)),  # two consumer warpgroups, twice the tile
    "128x256x64 ws 2wg persistent": Config(256, 2, True, False, (2, 3, 4)),  # one block per SM, ring across tiles
    "128x256x64 ws 2wg persistent tma-store": Config(256, 2, True, True, (2, 3)),  # + C through smem and TMA
}

# The self-test the sanitizer must catch: the producer refills a stage without waiting for its empty barrier, i.e.
# it may overwrite a stage the consumers' wgmma still read (and re-arms a full barrier whose phase is not done).
SKIP_EMPTY_WAIT = Fault("the producer's wait on the empty barrier removed (overwrites a stage still read)",
                        "PIPESUITE_FAULT_SKIP_EMPTY_WAIT", (2,), tool="memcheck",
                        size=(256, 512, 1024))  # 16 K tiles through a 2-stage ring: the producer laps the consumer


@functools.cache
def build(arch: str = ARCH) -> loader.CompiledModule:
    """Every instantiation of every config, for ``arch`` (sm_90a; no GPU needed)."""
    exprs = tuple(dict.fromkeys(c.name_expression(s) for c in CONFIGS.values() for s in c.stages))
    return loader.compile_cu(SOURCE, exprs, arch=arch, defines=DEFINES)


class TmaGemm(NvrtcModule):
    """One rung of the ladder (a ``Config``) as the kernel-module contract (suite.kernel) states it: built for
    sm_90a only, its SASS must hold wgmma, TMA and mbarrier instructions, and the sanitizer runs it on small odd
    shapes and a long K loop (the ring wraps many times)."""

    source = SOURCE
    archs = (ARCH,)
    # N % 8 != 0 with K < BLOCK_K (direct stores, one partial K tile); N % 8 == 0 and a ring that wraps 8 times
    sanitize_sizes = ((130, 250, 40), (256, 512, 1024))

    def __init__(self, config: Config, faults: tuple[Fault, ...] = ()):
        self.gemm_config, self.stages, self.faults = config, config.stages, faults
        self.threads, self.stage_bytes = config.threads, config.stage_bytes
        loads = 1 + config.block_n // BOX_N  # one A box and BLOCK_N / 64 B boxes per stage
        self.sass_requires = {"wgmma": 4, "tma": loads + (config.block_n // BOX_N if config.tma_store else 0),
                              "mbarrier": 1}

    def defines(self) -> tuple[str, ...]:
        return DEFINES + super().defines()

    def build(self, arch: str | None = None):
        """Always sm_90a: asked for sm_90 (the GPU's own arch, or the driver's CPU arch), build its 'a' target."""
        return super().build(ARCH if arch in (None, "sm_90") else arch)

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return (self.gemm_config.name_expression(stages),)

    def config(self) -> str:
        return self.gemm_config.describe()

    def launch(self, inputs, out, stages):
        return Gemm(*inputs, out, self.gemm_config, stages, kernel=self)

    def bad_inputs(self) -> list[BadInput]:
        a, b, c = (torch.randn(*shape).half() for shape in ((16, 12), (12, 16), (16, 16)))
        meta = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta")  # noqa: E731 (no memory)
        return [BadInput((a, b), c, "K must be a multiple of 8", "K % 8 != 0"),
                BadInput((meta(MAX_DIM + 1, 8), meta(8, 16)), meta(MAX_DIM + 1, 16), "must each be at most",
                         "M past 2^31 - 257")]


def check_inputs(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: Config, stages: int) -> None:
    check_stages(stages, config.stages)
    m, n, k = check_gemm_operands(a, b, c)
    if k % 8:
        raise ValueError(f"K must be a multiple of 8 so that rows of A have a 16-byte pitch for TMA (got K={k})")
    if max(m, n, k) > MAX_DIM:
        raise ValueError(f"M, N and K must each be at most {MAX_DIM}: tile origins and TMA coordinates are 32-bit "
                         f"(got M={m}, N={n}, K={k})")
    check_cuda(("a", a), ("b", b), ("c", c))


def _tensor_map(t: torch.Tensor, box: tuple[int, int]):
    """A tiled TMA descriptor of the 2-D tensor ``t`` (row-major box ``box``), 128-byte swizzled, zero fill."""
    import importlib

    from cuda.core import TensorMapDescriptor, TensorMapDescriptorOptions
    from cuda.core.utils import StridedMemoryView

    enums = importlib.import_module(TensorMapDescriptor.__module__)  # the option enums are not re-exported
    view = StridedMemoryView.from_dlpack(t, stream_ptr=-1)
    return view.as_tensor_map(options=TensorMapDescriptorOptions(
        box_dim=box, swizzle=enums.TensorMapSwizzle.SWIZZLE_128B, l2_promotion=enums.TensorMapL2Promotion.L2_256B))


class Gemm:
    """A launcher bound to (a, b, c, config, stages): ``Gemm(a, b, c, CONFIGS[name], 3)()`` writes c = a @ b.

    TMA needs every row pitch to be a multiple of 16 bytes. When N % 8 != 0, B's rows are not: each call copies B
    into a buffer with a padded pitch first (counted in the time, and said in the config)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: Config, stages: int,
                 kernel: "TmaGemm | None" = None):
        check_inputs(a, b, c, config, stages)
        (m, k), n = a.shape, b.shape[1]
        module = kernel.build() if kernel is not None else build()  # a kernel module may carry extra defines
        expr = config.name_expression(stages)
        self.kernel = module.kernel(expr)
        self.smem_bytes = config.smem_bytes(stages)
        loader.prepare(self.kernel, self.smem_bytes)  # refuses a ring that does not fit this GPU
        blocks_per_sm = loader.occupancy(self.kernel, config.threads, self.smem_bytes)
        if blocks_per_sm < 1:
            raise ValueError(f"stages={stages}: a block ({self.smem_bytes} B of shared memory) does not fit on an SM")
        self.b, self.b_padded = b, None
        if n % 8:
            self.b_padded = torch.zeros(k, -(-n // 8) * 8, dtype=b.dtype, device=b.device)
            b = self.b_padded[:, :n]
        self.tmap_a = _tensor_map(a, (BLOCK_M, BLOCK_K))
        self.tmap_b = _tensor_map(b, (BLOCK_K, BOX_N))
        # C's map exists only where its rows have a 16-byte pitch; elsewhere the kernel stores directly and never
        # reads the map it is given.
        self.tmap_c = _tensor_map(c, (64, BOX_N)) if config.tma_store and n % 8 == 0 else self.tmap_a
        tiles = -(-m // BLOCK_M) * -(-n // config.block_n)
        self.grid = min(tiles, loader.num_sms() * blocks_per_sm) if config.persistent else tiles
        self.threads = config.threads
        self.args = (self.tmap_a, self.tmap_b, self.tmap_c, c.data_ptr(), np.int32(m), np.int32(n), np.int32(k))
        self.info = module.kernel_info(
            expr, config.stage_bytes, stages, occupancy=blocks_per_sm, threads=config.threads, grid=self.grid,
            config=config.describe() + ("" if n % 8 == 0 else ", N % 8 != 0: B copied to a padded pitch per call"
                                        + (", C stored directly" if config.tma_store else "")),
        )

    def __call__(self) -> None:
        if self.b_padded is not None:
            self.b_padded[:, : self.b.shape[1]].copy_(self.b)
        loader.launch(self.kernel, self.grid, self.threads, self.smem_bytes, *self.args)


# Each rung's kernel module, as the registry names them (suite/variants.py).
KERNELS = {name: TmaGemm(config, faults=(SKIP_EMPTY_WAIT,) if name == "128x128x64 ws" else ())
           for name, config in CONFIGS.items()}
