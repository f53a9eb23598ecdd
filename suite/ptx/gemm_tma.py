"""C = A @ B with Hopper's pipeline, ``gemm_tma.cu``: TMA loads into an mbarrier-guarded ring, wgmma from shared
memory, a producer warp and consumer warpgroups (sm_90a only); fp16, bf16 or fp8 e4m3 in, fp32 accumulate.

Each ``CONFIGS`` entry is one row of the tables: the ladder's rungs, each adding one technique over the one before,
then the schedules for the shapes the ladder's one-tile-per-block grid cannot fill (decode and long K): split-K and
stream-K, on 128-row tiles and on 64-row tiles for small M."""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, gemm_operands
from suite.info import KernelInfo
from suite.kernel import Fault, NvrtcModule
from suite.nvrtc import loader
from suite.problem_types import meta_tensor
from suite.problems import BadInput
from suite.waves import MIN_K_TILES_PER_SPLIT, grid_note, persistent_grid, tail_split_count
from suite.workspace import new_workspace

SOURCE = Path(__file__).with_name("gemm_tma.cu")
ARCH = "sm_90a"  # wgmma and setmaxnreg exist only on the architecture-specific target
# NDEBUG: no device asserts (a call inside the wgmma region serializes every wgmma, ptxas C7510).
DEFINES = ("NDEBUG",)
SWIZZLE_BYTES = 128  # a K tile is one 128-byte swizzled row of each operand row
WG_THREADS = 128
BARRIER_BYTES = 8
FLAG_BYTES = 16  # the fix-up's per-warpgroup flags (split-K and stream-K)
ALIGN_SLACK = 1024  # the kernel rounds its shared-memory base up to the 1024-byte swizzle atom
ATOM_BYTES = 1024  # the 128-byte swizzle's period: the C staging starts at a multiple of it, after the barriers
SMEM_PER_BLOCK = 227 * 1024  # what one block may opt in to on an H100 / H200
MAX_DIM = 2**31 - 1 - 256  # a tile origin (up to M or N plus a tile) must stay a positive 32-bit int
# The copy engine's L2 promotion of every TMA load: each L2 miss fetches this much. 128 bytes, Triton's choice, not
# 256: the streaming decode tiles and the fp8 rungs were faster with it (docs/results.md)
L2_PROMOTION = "L2_128B"
DTYPES = ("fp16", "bf16", "fp8e4m3")
ELEMENT = {"fp16": "F16", "bf16": "BF16", "fp8e4m3": "E4M3"}  # gemm_tma.cu's element types
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp8e4m3": 1}
SCHEDULES = {
    "tiles": "SCHED_TILES",
    "split-k": "SCHED_SPLIT_K",
    "stream-k": "SCHED_STREAM_K",
    "split-tail": "SCHED_SPLIT_TAIL",
}
GROUP_M = 8  # gemm_tma.cu's GEMM_TMA_GROUP_M default: tile rows per rasterization group (a Config may set its own)
# The ridge point, FLOPs per byte moved, below which a shape is memory-bound: an H100 / H200's dense fp16 / bf16 peak
# (twice that for fp8) over its HBM bandwidth, about 200 (400 fp8). A decode GEMM (M = 1..128 against an 8192-wide
# weight) sits far below it; the square shapes far above.
RIDGE_FLOP_PER_BYTE = {"fp16": 200, "bf16": 200, "fp8e4m3": 400}
# A memory-bound shape's split-K stops once its blocks occupy this share of the SMs: about half of the SMs already
# stream the weight at close to the HBM's pace; more splits only add workspace traffic and the fix-up
STREAMING_SM_SHARE = 0.45


def block_k(dtype: str) -> int:
    return SWIZZLE_BYTES // ELEMENT_BYTES[dtype]


@dataclass(frozen=True)
class Config:
    block_n: int
    consumers: int  # consumer warpgroups (plus one producer warpgroup)
    persistent: bool
    tma_store: bool  # epilogue: staged in shared memory, stored with TMA (where N % 8 == 0)
    stages: tuple[int, ...]  # every depth whose ring (and C staging, half of it at least) fits 227 KiB
    block_m: int = 128
    schedule: str = "tiles"  # "tiles", "split-k", "stream-k" or "split-tail" (gemm_tma.cu's SCHEDULE)
    dtypes: tuple[str, ...] = ("fp16",)
    group_m: int = GROUP_M  # tile rows per rasterization group (gemm_tma.cu's GEMM_TMA_GROUP_M)
    # the warpgroup index broadcast from lane 0, its wgmma descriptors in uniform registers (GEMM_TMA_WG_BROADCAST:
    # faster on the 128 x 256 rung, slower on the others, gemm_tma.cu says why)
    uniform_warpgroup: bool = False

    def __post_init__(self):
        if self.group_m < 1:
            raise ValueError(f"group_m must be at least 1 tile row (got {self.group_m})")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)} (got {self.schedule!r})")
        if self.schedule == "split-tail" and not self.persistent:
            raise ValueError("the split tail follows data-parallel waves: schedule 'split-tail' needs persistent")

    @property
    def threads(self) -> int:
        return (1 + self.consumers) * WG_THREADS

    @property
    def stage_bytes(self) -> int:
        """A and B tiles of one K tile: 128 bytes of K per row, whatever the element type."""
        return (self.block_m + self.block_n) * SWIZZLE_BYTES

    def c_passes(self, stages: int) -> int:
        """The TMA-store epilogue's passes (gemm_tma.cu's C_PASSES): 1, the whole tile staged at once, where it fits
        beside the ring; else 2, half of the tile's columns at a time (at 4 stages of 48 KiB: 192 + 64 KiB would not
        fit, 192 + 32 do). Two passes take an even count of 64-column store boxes: a 192-wide tile (three) has one
        pass only, so its deeper rings do not fit."""
        if not self.tma_store or (self.block_n // 64) % 2:
            return 1
        return 1 if self._smem_bytes(stages, 1) <= SMEM_PER_BLOCK else 2

    def _smem_bytes(self, stages: int, c_passes: int) -> int:
        """The ring, the barriers and flags, and the C staging (whole 64-column boxes of the tile: 144's last 16 columns
        are stored directly). The kernel static_asserts its own layout against these figures (smem_figures)."""
        barriers = stages * 2 * BARRIER_BYTES + FLAG_BYTES
        if self.tma_store:  # the staging after the barriers, at the next swizzle atom
            boxed = self.block_n // 64 * 64
            barriers = -(-barriers // ATOM_BYTES) * ATOM_BYTES + self.block_m * boxed * 2 // c_passes
        return stages * self.stage_bytes + barriers + ALIGN_SLACK

    def smem_bytes(self, stages: int) -> int:
        return self._smem_bytes(stages, self.c_passes(stages))

    def smem_figures(self) -> tuple[tuple[tuple[int, int, int, int], int], ...]:
        """((STAGES, BM, BLOCK_N, TMA_STORE), bytes) per depth: the key gemm_tma.cu's static_assert looks up."""
        return tuple(((s, self.block_m, self.block_n, int(self.tma_store)), self.smem_bytes(s)) for s in self.stages)

    def name_expression(self, stages: int, dtype: str = "fp16") -> str:
        flag = lambda b: "true" if b else "false"  # noqa: E731
        head = (
            f"gemm_tma_wgmma<{stages}, {self.block_n}, {self.consumers}, {flag(self.persistent)}, "
            f"{flag(self.tma_store)}"
        )
        passes = self.c_passes(stages)
        if dtype == "fp16" and self.block_m == 128 and self.schedule == "tiles" and passes == 1:
            return head + ">"  # the template's defaults
        tail = f", {passes}" if passes != 1 else ""
        return head + f", {ELEMENT[dtype]}, {self.block_m}, {SCHEDULES[self.schedule]}{tail}>"

    def describe(self, dtype: str = "fp16") -> str:
        walk = (", TMA-store epilogue" if self.tma_store else "") + (
            f", GROUP_M={self.group_m}" if self.group_m != GROUP_M else ""
        )  # the tile walks' epilogue and rasterization
        what = {
            "tiles": (", persistent" if self.persistent else "") + walk,
            "split-k": ", split-K (partials summed in K order by a second kernel)",
            "stream-k": ", stream-K over one block per SM (fix-up in K order by the last unit)",
            "split-tail": ", persistent, the last partial wave's tiles split in K (fix-up in K order by the last unit)"
            + walk,
        }[self.schedule]
        return (
            f"{self.block_m}x{self.block_n}x{block_k(dtype)}, 1 producer warp + {self.consumers} consumer "
            f"warpgroup{'s' if self.consumers > 1 else ''}"
            + what
            + (", B as N x K (K-major), scales in the epilogue" if dtype == "fp8e4m3" else "")
        )


_TWO_WG = dict(block_n=256, consumers=2)
# The ladder: each rung adds one technique to the one above it; the top rung is also built for bf16 and fp8. Then
# the schedules that fill the chip when output tiles are few: stream-K on the top rung's tile (without its
# TMA-store epilogue: a tile's last unit stores C), split-K on 128x128 tiles (two consumer warpgroups), and split-K
# on 64x128 tiles for decode (M <= 64: a 128-row tile would be mostly padding), with rings as deep as fit (the
# weight streams through once). These beat the other combinations tried (split-K on 128x256 and 64x256, stream-K on
# 128x128) at every LLM and long-K shape (docs/results.md).
CONFIGS: dict[str, Config] = {
    "128x128x64 ws": Config(128, 1, False, False, (2, 3, 4, 5, 6, 7)),  # TMA + mbarrier ring + wgmma, warp-specialized
    "128x256x64 ws 2wg": Config(256, 2, False, False, (2, 3, 4)),  # two consumer warpgroups, twice the tile
    "128x256x64 ws 2wg persistent": Config(256, 2, True, False, (2, 3, 4)),  # one block per SM, ring across tiles
    # + C through TMA; at 4 stages the C staging holds half the tile, stored in two passes. Tile rows in groups of
    # 16: B's panels read from HBM half as often, which pays for fp8 at large squares (32 at a time was slower)
    "128x256x64 ws 2wg persistent tma-store": Config(
        256, 2, True, True, (2, 3, 4), dtypes=DTYPES, group_m=16, uniform_warpgroup=True
    ),
    # fp8 only: one m64 x 128 tile per consumer warpgroup leaves registers for two partials, so promotion's adds run
    # under the next K tile's wgmma (gemm_tma.cu's consumer_mainloop, K tiles in pairs); 32 KiB stages, 4-6 deep
    "128x128x128 ws 2wg persistent tma-store": Config(128, 2, True, True, (4, 5, 6), dtypes=("fp8e4m3",)),
    # fp8 only: the same on cuBLAS's promoted tile width, 144 (72 accumulators and two partials of 72 still fit):
    # 12.5% more MACs per byte loaded, 16 columns past the TMA-store boxes stored directly; tile rows in groups of
    # 16 (B's panels read from HBM half as often)
    "128x144x128 ws 2wg persistent tma-store": Config(144, 2, True, True, (4, 5, 6), dtypes=("fp8e4m3",), group_m=16),
    # 16-bit, for the LLM shapes whose 128x256 tiles leave SMs idle: 128x192 (64x192 per consumer warpgroup, wgmma
    # n192, B in three 64-column boxes), persistent, TMA-store epilogue, each tile over all of K (no fix-up). At
    # 256 x 10240 x 8192 (70B's QKV at M = 256) that is 108 tiles on 108 SMs against 128x256's 80. 5 stages would
    # need the C staging in two passes (Config.c_passes: not with three boxes)
    "128x192x64 ws 2wg persistent tma-store": Config(192, 2, True, True, (3, 4), dtypes=("fp16", "bf16")),
    "128x256 stream-k": Config(
        **_TWO_WG, persistent=True, tma_store=False, stages=(3, 4), schedule="stream-k", dtypes=DTYPES
    ),
    # stream-K on 256-row tiles (128 rows per consumer warpgroup, two m64 tiles each): where M is 129-256, one tile
    # row holds all of M, so each byte of B (the weight) is read from HBM once, while the 128-row tiles' two tile rows
    # read each B panel at two different places in K (stream-K's ranges cross tile boundaries) and so twice
    "256x128 stream-k": Config(128, 2, True, False, (3, 4), block_m=256, schedule="stream-k", dtypes=DTYPES),
    # the top rung with its last, partial wave split in K: each of the tiles of the last round (tiles % SMs) cut into
    # 2 or more shares of K (as many as the SMs hold, at most about sqrt(K tiles / 1.5)), k-aligned (the blocks that
    # run together read the same K range), so the round lasts a share of a tile; where more than half the SMs have a
    # tile for it, shares in a few rounds if the model finds them faster (suite.waves.tail_split_count); otherwise
    # it is the top rung's walk
    "128x256 split-tail": Config(
        **_TWO_WG,
        persistent=True,
        tma_store=True,
        stages=(3, 4),
        schedule="split-tail",
        dtypes=DTYPES,
        group_m=16,
        uniform_warpgroup=True,
    ),
    # the same on the 16-bit 128x192 rung: where 128x256 tiles leave a last wave that their split tail walks slowly,
    # the narrower tile's waves fall differently
    "128x192 split-tail": Config(
        192, 2, True, True, (3, 4), schedule="split-tail", dtypes=("fp16", "bf16"), group_m=16
    ),
    "64x128 split-k": Config(128, 1, False, False, (4, 6, 8), block_m=64, schedule="split-k", dtypes=DTYPES),
    "128x128 split-k": Config(128, 2, False, False, (4, 7), schedule="split-k", dtypes=DTYPES),
}


def skip_empty_wait(size: tuple[int, int, int]) -> Fault:
    """The self-test the sanitizer must catch (this module's kernel and gemm_decode's): the producer refills a stage
    without waiting for its empty barrier, i.e. it may overwrite a stage the consumers' wgmma still read (and re-arms
    a full barrier whose phase is not done). At 2 stages, at a ``size`` whose K laps the ring."""
    return Fault(
        "the producer's wait on the empty barrier removed (overwrites a stage still read)",
        "PIPESUITE_FAULT_SKIP_EMPTY_WAIT",
        (2,),
        tool="memcheck",
        size=size,
    )


SKIP_EMPTY_WAIT = skip_empty_wait((256, 512, 1024))  # 16 K tiles through a 2-stage ring: the producer laps the consumer


# The split-K self-test: the reduction kernel launched before the split kernel, i.e. the second pass without the stream
# order it needs; it reads workspace no split has written yet (the workspace from a pool of its own: fresh device
# memory), which initcheck reports. At a size whose split count is above 1 (15 splits of 64x128 tiles).
REDUCE_FIRST = Fault(
    "the split-K reduction launched before the splits it sums (the second pass without its stream order)",
    "PIPESUITE_FAULT_SPLITK_REDUCE_FIRST",
    (4,),
    in_launcher=True,  # the fault is in the Python launcher's stream order, not in a kernel
    tool="initcheck",
    size=(64, 512, 4112),
)
REDUCE_THREADS = 256  # gemm_tma.cu's split_k_reduce: threads per block, 4 elements of C each


def reduce_expression(dtype: str) -> str:
    return f"split_k_reduce<{ELEMENT[dtype]}>"


def smem_define(figures) -> str:
    """PIPESUITE_SMEM_FIGURES (sm90_gemm.cuh): the launcher's shared-memory bytes per instantiation key, which the
    kernels static_assert their own layouts against."""
    entries = ",".join("{{" + ",".join(map(str, key)) + "}," + str(n) + "}" for key, n in dict(figures).items())
    return f"PIPESUITE_SMEM_FIGURES={{{entries}}}"


@functools.cache
def build(arch: str = ARCH) -> loader.CompiledModule:
    """Every fp16 instantiation of the ladder, for ``arch`` (sm_90a; no GPU needed)."""
    figures = [f for c in CONFIGS.values() if c.schedule == "tiles" and "fp16" in c.dtypes for f in c.smem_figures()]
    return loader.compile_cu(SOURCE, fp16_ladder(), arch=arch, defines=(*DEFINES, smem_define(figures)))


def fp16_ladder() -> tuple[str, ...]:
    """The name expressions ``build`` compiles: every depth of every tile rung that has an fp16 build (the fp8-only
    rungs' tiles, 128 x 144 among them, have none)."""
    return tuple(
        dict.fromkeys(
            c.name_expression(s)
            for c in CONFIGS.values()
            if c.schedule == "tiles" and "fp16" in c.dtypes
            for s in c.stages
        )
    )


def shape_rule(size: tuple[int, int, int], dtype: str) -> str | None:
    """The rule an M x N x K problem at ``dtype`` breaks for these kernels (the launch refuses it), or None."""
    m, n, k = size
    align = 16 // ELEMENT_BYTES[dtype]
    if k % align:
        return f"K must be a multiple of {align} so that rows of A have a 16-byte pitch for TMA (got K={k})"
    if max(m, n, k) > MAX_DIM:
        return (
            f"M, N and K must each be at most {MAX_DIM}: tile origins and TMA coordinates are 32-bit "
            f"(got M={m}, N={n}, K={k})"
        )
    return None


def memory_bound(dtype: str, m: int, n: int, k: int) -> bool:
    """Whether the shape's FLOPs per byte it must move at least once (A, B and C, C at 2 bytes) fall below the
    GPU's ridge point: then it streams its operands, and its speed is bytes in flight, not tiles on SMs."""
    moved = ELEMENT_BYTES[dtype] * (m * k + k * n) + 2 * m * n
    return 2 * m * n * k < RIDGE_FLOP_PER_BYTE[dtype] * moved


def split_count(tiles: int, k_tiles: int, slots: int, streaming: bool = False, sms: int = 0) -> int:
    """split-K's rule: as many splits as fill the GPU's block slots (SMs x resident blocks per SM) once with
    tiles x splits blocks (no second, partial wave), while every split keeps at least MIN_K_TILES_PER_SPLIT K tiles;
    1 when the tiles alone fill the slots. A memory-bound shape (``streaming``) splits only until its blocks occupy
    STREAMING_SM_SHARE of the ``sms``: more blocks add workspace traffic and a fix-up, not bandwidth."""
    fill = max(1, min(slots // max(1, tiles), k_tiles // MIN_K_TILES_PER_SPLIT))
    if not streaming:
        return fill
    enough = -(-math.ceil(STREAMING_SM_SHARE * sms) // max(1, tiles))  # the fewest splits that reach the share
    return max(1, min(fill, enough))


def split_tail_plan(
    tiles: int, k_tiles: int, slots: int, splits: int | None = None, rounds: bool = False
) -> tuple[int, int]:
    """The split tail's (grid, splits): where the last, partial wave's tiles get two or more shares of K each
    (suite.waves.tail_split_count, with ``rounds`` its shares in several rounds where two of each do not fit the
    slots; or ``splits`` forced), every slot, or the tiles x splits blocks that fewer tiles than slots need (no block
    launched idle); otherwise the plain persistent walk (suite.waves' balanced grid), one split. The kernel takes its
    whole waves (tiles // grid x grid) and tail from the grid, and deals the tail's shares round robin."""
    if splits is None:
        splits = tail_split_count(tiles, k_tiles, slots, MIN_K_TILES_PER_SPLIT, rounds)
    elif splits < 1:
        raise ValueError(f"splits={splits}: the tail's tiles take one share of K or more")
    if splits < 2 or tiles % slots == 0:  # whole waves only: nothing to split
        return persistent_grid(tiles, slots), 1
    return min(slots, (tiles % slots) * splits) if tiles < slots else slots, splits


class TmaGemm(NvrtcModule):
    """One row of CONFIGS as the kernel-module contract (suite.kernel) states it: built for sm_90a only, its SASS
    must hold wgmma, TMA and mbarrier instructions, and the sanitizer runs it on small odd shapes and a long K loop
    (the ring wraps many times; split-K and stream-K fix up shared tiles)."""

    source = SOURCE
    archs = (ARCH,)
    dtype_notes = {
        d: "the ladder's lower rungs are built for fp16; bf16 and fp8 are on its top rung and on the "
        "split-K and stream-K rows"
        for d in DTYPES
    }

    def __init__(self, config: Config, faults: tuple[Fault, ...] = ()):
        self.gemm_config, self.stages, self.faults = config, config.stages, faults
        if config.dtypes == ("fp16", "bf16"):  # the 16-bit-only rung (128 x 192, for the LLM shapes)
            self.dtype_notes = {
                "fp8e4m3": "16-bit only: a tile for the LLM shapes' M = 129-256 rows against wide weights; fp8's "
                "tiles are the 128x128x128, 128x144x128 and 128x256x64 rungs"
            }
        if config.dtypes == ("fp8e4m3",):  # the fp8 rungs
            self.dtype_notes = {
                d: f"fp8 only: its {config.block_m}x{config.block_n} tile is for promotion's two partials; the "
                "16-bit types' 128x128 rung is 128x128x64 ws"
                for d in DTYPES
            }
        self.threads, self.stage_bytes, self.dtypes = config.threads, config.stage_bytes, config.dtypes
        # fp8: promoted in every schedule: the E4M3 element type sets PROMOTE (sm90_gemm.cuh), and every schedule's
        # consumer runs consumer_mainloop (sm90_mainloop.cuh), which adds each K tile's wgmma sum into fp32 registers
        self.fp8_accumulation = "promoted" if "fp8e4m3" in config.dtypes else None
        # TMA instructions per instantiation: A's box, B's (boxes of 64 columns for 16-bit B, one for fp8's K-major
        # B; a module built for fp8 too is held to the fewer), and the epilogue's store boxes
        b_loads = 1 if "fp8e4m3" in config.dtypes else config.block_n // 64
        self.sass_requires = {
            "wgmma": 4,
            "tma": 1 + b_loads + (config.block_n // 64 if config.tma_store else 0),
            "mbarrier": 1,
        }
        # N % 8 != 0 with K < BLOCK_K (direct stores, one partial K tile); N % 8 == 0 and a ring that wraps 8 times;
        # M below one tile (A's short box, the rest of each A stage zeroed once); split-K and stream-K: several units
        # per tile, a remainder split, the fix-up; a tile wider than its TMA-store boxes (144): an edge tile of 136
        # columns, whose directly stored last 16 are half past C's edge; a 256-row tile: a second tile row, mostly
        # past M; a persistent TMA-store walk over more tiles than the H200's 132 SMs (at least 153: each block that
        # takes a second tile reuses the C staging); the split tail after a whole wave (153 tiles: 21 left, each in 3
        # shares of its 17 K tiles, fp8 in 2 of 9), and after one with more than half the SMs' tiles left (208 tiles:
        # 76 left in 3 shares of 24 K tiles, two rounds of shares; fp8's 12 K tiles leave them whole)
        self.sanitize_sizes = (
            ((130, 250, 40), (256, 512, 1024), (13, 264, 1040))
            + (((1100, 4104, 144),) if config.persistent and config.tma_store else ())
            + (((64, 512, 4112),) if config.schedule != "tiles" else ())
            + (((13, 424, 1040),) if config.tma_store and config.block_n % 64 else ())
            + (((300, 264, 1040),) if config.block_m > 128 else ())
            + (((1100, 4104, 1040), (1000, 26 * config.block_n - 56, 1536)) if config.schedule == "split-tail" else ())
        )

    def defines(self) -> tuple[str, ...]:
        group = (f"GEMM_TMA_GROUP_M={self.gemm_config.group_m}",) if self.gemm_config.group_m != GROUP_M else ()
        uniform = ("GEMM_TMA_WG_BROADCAST=1",) if self.gemm_config.uniform_warpgroup else ()
        return DEFINES + group + uniform + (smem_define(self.gemm_config.smem_figures()),) + super().defines()

    def build(self, arch: str | None = None):
        """Always sm_90a: asked for sm_90 (the GPU's own arch, or the driver's CPU arch), build its 'a' target."""
        return super().build(ARCH if arch in (None, "sm_90") else arch)

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return tuple(self.gemm_config.name_expression(stages, d) for d in self.gemm_config.dtypes)

    def _reductions(self) -> tuple[str, ...]:
        """split-K's second-pass kernels, one per dtype (compiled and sanitized with the split kernels)."""
        if self.gemm_config.schedule != "split-k":
            return ()
        return tuple(reduce_expression(d) for d in self.gemm_config.dtypes)

    def all_name_expressions(self) -> tuple[str, ...]:
        return super().all_name_expressions() + self._reductions()

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return self.name_expressions(stages) + self._reductions()

    def refuses(self, size, dtype: str) -> str | None:
        return shape_rule(size, dtype)

    def config(self) -> str:
        return self.gemm_config.describe()

    def describe(self, arch: str, dtype: str | None = None) -> dict[int, KernelInfo]:
        """Every depth's kernel at ``dtype`` (default: fp16, or the module's first dtype where it has no fp16)."""
        dtype = dtype or ("fp16" if "fp16" in self.dtypes else self.dtypes[0])
        return self.describe_depths(
            arch,
            lambda s: self.gemm_config.name_expression(s, dtype),
            lambda _: f"{arch} cubin; {self.gemm_config.describe(dtype)}",
        )

    def launch(self, inputs, out, stages):
        return Gemm(inputs, out, self.gemm_config, stages, kernel=self)

    def bad_inputs(self) -> list[BadInput]:
        a, b, c = (torch.randn(*shape).half() for shape in ((16, 12), (12, 16), (16, 16)))
        meta = functools.partial(meta_tensor, dtype=torch.float16)
        return [
            BadInput((a, b), c, "K must be a multiple of 8", "K % 8 != 0"),
            BadInput(
                (meta(MAX_DIM + 1, 8), meta(8, 16)), meta(MAX_DIM + 1, 16), "must each be at most", "M past 2^31 - 257"
            ),
        ]


def _tensor_map(t: torch.Tensor, box: tuple[int, int]):
    """A tiled TMA descriptor of the 2-D tensor ``t`` (row-major box ``box``), 128-byte swizzled, zero fill. fp8
    tensors are described as bytes (the copy engine moves bytes; DLPack has no fp8)."""
    from cuda.core import TensorMapDescriptor, TensorMapDescriptorOptions
    from cuda.core.utils import StridedMemoryView

    if t.dtype == torch.float8_e4m3fn:
        t = t.view(torch.uint8)
    enums = importlib.import_module(TensorMapDescriptor.__module__)  # the option enums are not re-exported
    view = StridedMemoryView.from_dlpack(t, stream_ptr=-1)
    return view.as_tensor_map(
        options=TensorMapDescriptorOptions(
            box_dim=box,
            swizzle=enums.TensorMapSwizzle.SWIZZLE_128B,
            l2_promotion=getattr(enums.TensorMapL2Promotion, L2_PROMOTION),
        )
    )


class SplitLaunch:
    """A call of a gemm_tma.cu kernel and, where it split K, of split_k_reduce after it on the same stream (both
    launchers' ``__call__``): B refreshed into its padded copy first where it has one. Set by the launcher: kernel,
    grid, threads, smem_bytes, args, b and b_padded, reduce (None: one split), reduce_grid, reduce_args and
    reduce_first (the sanitizer's fault: the sum launched before the splits it sums)."""

    def _bind_kernel(self, module, expr: str, smem_bytes: int, threads: int, stages: int) -> int:
        """Takes the kernel ``expr`` of ``module`` with ``smem_bytes`` of dynamic shared memory; returns its blocks
        per SM, refusing a ring that does not fit this GPU or an SM."""
        self.kernel = module.kernel(expr)
        self.smem_bytes = smem_bytes
        loader.prepare(self.kernel, self.smem_bytes)  # refuses a ring that does not fit this GPU
        blocks_per_sm = loader.occupancy(self.kernel, threads, self.smem_bytes)
        if blocks_per_sm < 1:
            raise ValueError(f"stages={stages}: a block ({self.smem_bytes} B of shared memory) does not fit on an SM")
        return blocks_per_sm

    def _bind_b(self, b: torch.Tensor, pad: bool) -> torch.Tensor:
        """Keeps B and, where ``pad`` (its rows lack TMA's 16-byte pitch), a copy at a padded pitch that every call
        refreshes; returns the tensor that TMA reads."""
        self.b, self.b_padded = b, None
        if not pad:
            return b
        k, n = b.shape
        self.b_padded = torch.zeros(k, -(-n // 8) * 8, dtype=b.dtype, device=b.device)
        return self.b_padded[:, :n]

    def _set_info(
        self, module, expr: str, stage_bytes: int, stages: int, occupancy: int, threads: int, config: str, **extra
    ):
        """This launch's KernelInfo: its grid and dynamic shared memory with the launcher's figures."""
        self.info = module.kernel_info(
            expr,
            stage_bytes,
            stages,
            dynamic_smem=self.smem_bytes,
            occupancy=occupancy,
            threads=threads,
            grid=self.grid,
            config=config,
            **extra,
        )

    def _launch_reduce(self) -> None:
        loader.launch(self.reduce, self.reduce_grid, REDUCE_THREADS, 0, *self.reduce_args)

    def __call__(self) -> None:
        if self.b_padded is not None:
            self.b_padded[:, : self.b.shape[1]].copy_(self.b)
        if self.reduce_first:  # the sanitizer's fault: the sum before the splits it sums
            self._launch_reduce()
        loader.launch(self.kernel, self.grid, self.threads, self.smem_bytes, *self.args)
        if self.reduce is not None and not self.reduce_first:
            self._launch_reduce()  # after the splits: stream order


class Gemm(SplitLaunch):
    """A launcher bound to (inputs, c, config, stages): ``Gemm((a, b), c, CONFIGS[name], 3)()`` writes c = a @ b.

    TMA needs every row pitch to be a multiple of 16 bytes: K % 8 == 0 (K % 16 for fp8) or the launch is refused.
    When N % 8 != 0 for fp16 / bf16, B's rows are not: each call copies B into a buffer with a padded pitch first
    (counted in the time, and said in the config). split-K and stream-K get a workspace and tile counters of their
    own, sized from this shape."""

    def __init__(
        self,
        inputs,
        c: torch.Tensor,
        config: Config,
        stages: int,
        kernel: TmaGemm | None = None,
        splits: int | None = None,
    ):
        ops = gemm_operands(tuple(inputs), c, config.dtypes)
        c = ops.c  # with the strides of its shape (checks.canonical)
        check_stages(stages, config.stages)
        m, n, k, dtype = ops.m, ops.n, ops.k, ops.dtype
        if rule := shape_rule((m, n, k), dtype):
            raise ValueError(rule)
        check_cuda(("a", ops.a), ("b", ops.b), ("c", c))
        module = kernel.build() if kernel is not None else build()  # a kernel module may carry extra defines
        expr = config.name_expression(stages, dtype)
        blocks_per_sm = self._bind_kernel(module, expr, config.smem_bytes(stages), config.threads, stages)
        bk, bm, bn = block_k(dtype), config.block_m, config.block_n
        b = self._bind_b(ops.b, pad=dtype != "fp8e4m3" and n % 8 != 0)
        # boxes as (rows, columns) of the row-major tensors: A (BM x BLOCK_K), B as K x N in boxes of BLOCK_K x 64 or,
        # fp8, as N x K in one box of BLOCK_N x BLOCK_K: every box row is 128 bytes, the swizzle's width
        # A's box: a whole tile of rows, or M rounded up to 8 when M is below one tile (the kernel zeroes the rest of
        # each A stage once; the copy engine then fills no padding rows)
        self.a_rows = bm if m >= bm else -(-m // 8) * 8
        self.tmap_a = _tensor_map(ops.a, (self.a_rows, bk))
        self.tmap_b = _tensor_map(b, (bn, bk)) if dtype == "fp8e4m3" else _tensor_map(b, (bk, 64))
        # C's map exists only where its rows have a 16-byte pitch; elsewhere the kernel stores directly and never
        # reads the map it is given.
        self.tmap_c = _tensor_map(c, (64, 64)) if config.tma_store and n % 8 == 0 else self.tmap_a
        tiles = -(-m // bm) * -(-n // bn)
        k_tiles = -(-k // bk)
        sms = loader.num_sms()
        self.splits = 1
        if config.schedule == "split-k":
            self.splits = (
                split_count(tiles, k_tiles, sms * blocks_per_sm, memory_bound(dtype, m, n, k), sms)
                if splits is None
                else splits
            )  # tests force one
            if self.splits < 1:
                raise ValueError(f"splits must be >= 1 (got {self.splits})")
            self.grid = tiles * self.splits
            slots = 0  # the workspace is the splits' M x N slices (below)
        elif config.schedule == "stream-k":
            self.grid = min(sms * blocks_per_sm, tiles * k_tiles)
            slots = 2 * self.grid
        elif config.schedule == "split-tail":  # ``splits``: tests force one
            self.grid, self.splits = split_tail_plan(tiles, k_tiles, sms * blocks_per_sm, splits, rounds=True)
            slots = (tiles % self.grid) * self.splits if self.splits > 1 else 0
        else:
            # persistent: the wave rule (suite.waves: the fewest programs that take as many rounds as every slot)
            self.grid = persistent_grid(tiles, sms * blocks_per_sm) if config.persistent else tiles
            slots = 0
        # This launcher's own workspace, from this shape (never another's). split-K: one fp32 M x N slice per split,
        # summed by the second pass (split_k_reduce, REDUCE_FIRST: launched first under the sanitizer's fault).
        # stream-K: one fp32 partial tile per slot, and a counter per (tile, consumer warpgroup) that the kernel
        # leaves at zero after every launch.
        self.reduce, self.reduce_first = None, False
        if config.schedule == "split-k" and self.splits > 1:
            self.reduce_first = kernel is not None and REDUCE_FIRST.define in kernel.extra_defines
            self.workspace = new_workspace((self.splits * m * n,), c.device, fresh=self.reduce_first)
            self.reduce = module.kernel(reduce_expression(dtype))
            loader.prepare(self.reduce, 0)
            self.reduce_grid = -(-m * n // (4 * REDUCE_THREADS))
        else:
            self.workspace = torch.empty(max(1, slots * bm * bn), dtype=torch.float32, device=c.device)
        # only the fix-up counts (stream-K, the split tail): a counter per tile and consumer warpgroup
        counters = tiles * config.consumers if config.schedule in ("stream-k", "split-tail") else 1
        self.counters = torch.zeros(counters, dtype=torch.int32, device=c.device)
        self.scales = (ops.scale_a, ops.scale_b) if dtype == "fp8e4m3" else (self.workspace, self.workspace)
        self.threads = config.threads
        self.args = (
            self.tmap_a,
            self.tmap_b,
            self.tmap_c,
            c.data_ptr(),
            np.int32(m),
            np.int32(n),
            np.int32(k),
            self.scales[0].data_ptr(),
            self.scales[1].data_ptr(),
            self.workspace.data_ptr(),
            self.counters.data_ptr(),
            np.int32(self.splits),
            np.int32(self.a_rows),
        )
        # split_k_reduce(workspace, C, M x N, splits, scale_a, scale_b)
        self.reduce_args = (self.workspace.data_ptr(), c.data_ptr(), np.int64(m * n), np.int32(self.splits))
        self.reduce_args += (self.scales[0].data_ptr(), self.scales[1].data_ptr())
        note = ""
        if dtype != "fp8e4m3" and n % 8:
            note = ", N % 8 != 0: B copied to a padded pitch per call" + (
                ", C stored directly" if config.tma_store else ""
            )
        if config.schedule == "split-k":
            note += f", {self.splits} split{'s' if self.splits > 1 else ''} of {k_tiles} K tiles"
        if config.schedule == "stream-k":
            note += f", {tiles * k_tiles} MAC iterations over {self.grid} blocks"
        if config.schedule == "split-tail" and self.splits > 1:
            tail, shares = tiles % self.grid, -(-(tiles % self.grid) * self.splits // self.grid)
            note += (
                f", {tiles - tail} tiles in {tiles // self.grid} whole waves of {self.grid}, then {tail} x "
                f"{self.splits} splits of {k_tiles} K tiles" + (f" in {shares} rounds" if shares > 1 else "")
            )
        elif config.schedule in ("tiles", "split-tail") and config.persistent:  # the persistent walk
            note += grid_note(tiles, sms * blocks_per_sm, self.grid)
        if config.tma_store and n % 8 == 0 and config.c_passes(stages) > 1:
            note += f", C staged 1/{config.c_passes(stages)} of a tile at a time (one TMA-store pass each)"
        self._set_info(
            module, expr, config.stage_bytes, stages, blocks_per_sm, config.threads, config.describe(dtype) + note
        )


# Each row's kernel module, as the registry names them (suite/variants.py).
KERNELS = {
    name: TmaGemm(
        config,
        faults=(SKIP_EMPTY_WAIT,)
        if name == "128x128x64 ws"
        else (REDUCE_FIRST,)
        if config.schedule == "split-k"
        else (),
    )
    for name, config in CONFIGS.items()
}
