"""C = A @ B (fp32 accumulate) in Gluon, Triton's lower-level language
(``triton.experimental.gluon``): the Hopper pipeline of the PTX TMA-store kernel (suite/ptx/gemm_tma.cu) written
with Triton's compiler doing registers, layouts and instruction selection, and the programmer doing what
``tl.dot`` leaves to the pipeliner: the shared-memory ring, its mbarriers and the warp roles.

Persistent: at most one program per SM (suite.waves' rule) walks the output tiles (grouped rasterization, as the
other Triton kernels: 8 tile rows per group, fp8 16).

* a **producer** partition (1 warp, few registers: suite/triton/gemm_gluon_ring.py) issues TMA loads of A and B
  K-tiles into a STAGES-deep ring, each stage guarded by a *ready* and an *empty* mbarrier; it runs ahead across
  tiles, bounded only by the ring;
* the **consumer** partition (the program's 8 warps: two warpgroups, 64 rows of the 128x256 tile each) waits for a
  stage to be ready, issues ``warpgroup_mma`` (wgmma) from shared memory, keeps one wgmma group in flight, and hands
  each stage back once the wgmma that read it has completed; after the last K-tile it writes C through shared
  memory with a TMA store that runs on while the next tile starts.

The loads never wait on the consumers' block barriers: that is the difference from the ``tl.dot`` kernels of
gemm_desc.py, whose warps issue the loads, wait and compute in lockstep. Here Triton still places two barriers per K
step among the consumer warps (before the ready wait, and before the one-thread arrive that releases a stage), but
the wgmma run on under them. Triton rounds the block up to whole warpgroups for setmaxnreg: 384 threads, 9 warps
working.

Three input types, on the tiles of gemm_desc.py (``TILES``: 48 KiB stages): fp16 -> fp16 and bf16 -> bf16 on
128x256x64; fp8 e4m3 -> bf16 on 128x256x128, B given N x K (K-major: the ring holds [BLOCK_N, BLOCK_K] boxes and the
wgmma reads each through a transposed view, which is the K-major B operand wgmma's fp8 form needs), the per-tensor
scales applied to the fp32 accumulator before the bf16 store, as ``torch._scaled_mm`` does. fp8 has its own consumer
partitions, which promote each K tile's sum into fp32 (suite/triton/gemm_gluon_fp8.py).

Needs a GPU of compute capability 9.0 (wgmma); the Triton interpreter does not run Gluon. Descriptors are built on
the host. TMA needs 16-byte row pitches: where a row of A or B is not (K or N not a multiple of 8 for 2-byte types,
K not a multiple of 16 for fp8) or N is not a multiple of 8 (C), A, B or C go through a buffer with a padded pitch,
copied on every call (counted in the time, said in the config), as in gemm_desc.py."""

from __future__ import annotations

from typing import ClassVar

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from suite.checks import check_stages, gemm_operands
from suite.kernel import Fault, TritonModule
from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import (
    DTYPES,
    FP8_ACCUMULATION,
    HOPPER_SASS,
    TILES,
    Operands,
    dtype_config,
    num_sms,
    stage_bytes,
)
from suite.triton.gemm_gluon_fp8 import FP8_CONSUMER_REGS, FP8_CONSUMER_WARPS, fp8_consumer
from suite.triton.gemm_gluon_ring import next_stage, producer, ring_barriers, tile_counts, tma_store
from suite.triton.gemm_parts import tile_coords
from suite.waves import grid_note, persistent_grid
from suite.workspace import new_workspace

BLOCK_M, BLOCK_N, BLOCK_K = TILES["fp16"]  # fp8: TILES["fp8e4m3"], 128x256x128
GROUP_M = 8
# fp8: tile rows in groups of 16, so that B's panels are read from HBM half as often (a group's A rows stay in L2 while
# B streams past)
FP8_GROUP_M = 16
NUM_WARPS = 8  # the consumer partition: two warpgroups
PRODUCER_WARPS, PRODUCER_REGS = 1, 24  # the producer partition only computes coordinates
_FP8_WARPS, _FP8_REGS = gl.constexpr(FP8_CONSUMER_WARPS), gl.constexpr(FP8_CONSUMER_REGS)  # for the kernel
STAGES = (2, 3)  # 48 KiB per stage at every dtype and C's 64 KiB staging tile: 4 stages would need 256 KiB
# fp8: at 4 stages each warpgroup's C slab is half its rows' width (2 x 16 KiB beside 192 KiB of ring), stored in two
# passes, the second once the first's TMA store has read the slab
FP8_STAGES = (2, 3, 4)
GL_DTYPES = {"fp16": gl.float16, "bf16": gl.bfloat16, "fp8e4m3": gl.float8e4nv}


@gluon.jit
def _consumer(
    c_desc,
    ring,
    c_smem,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    INSTR_K: gl.constexpr,
    num_warps: gl.constexpr,
):
    """fp16 and bf16: the tile's 128 rows on the partition's two warpgroups, one wgmma group in flight."""
    a_ring, b_ring, ready, empty = ring
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_ring.type.shape[2]
    # wgmma's accumulator layout: warpgroups stacked along M, one m64nNkK instruction per warpgroup and K step
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, INSTR_K]
    )
    tiles_m, tiles_n, k_tiles = tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    smem_read_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), tiles_m * tiles_n, gl.num_programs(0)):
        m0, n0 = tile_coords(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=acc_layout)
        # -- MAINLOOP: one wgmma group in flight; a stage goes back to the producer when its reader completed --
        release_stage = 0
        for kt in range(k_tiles):
            # wait for the TMA bytes of this stage (its ready barrier's phase for this lap)
            mbarrier.wait(ready.index(smem_read_stage), lap)
            a_stage, b_stage = a_ring.index(smem_read_stage), b_ring.index(smem_read_stage)
            acc = warpgroup_mma(a_stage, b_stage, acc, is_async=True)
            # wait until at most this group is in flight: the previous K step's wgmma has read its stage
            acc = warpgroup_mma_wait(1, deps=(acc,))
            # hand that stage back to the producer (none before the first step); Triton makes the partition's 8 warps
            # meet before its one-thread arrive, so both warpgroups' waits above have passed
            mbarrier.arrive(empty.index(release_stage), pred=kt > 0)
            release_stage = smem_read_stage
            smem_read_stage, lap = next_stage(smem_read_stage, lap, STAGES)
        # the last wgmma of the tile has completed: its stage is free too
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(release_stage))

        # -- EPILOGUE: C through shared memory and a TMA store (clipped at the edges of C); the store of this tile
        #    runs on while the next tile's wgmma start --
        tma.store_wait(0)  # the previous tile's store has finished reading c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to c_smem visible to the TMA (async proxy)
        tma_store(c_desc, [m0, n0], c_smem)
    tma.store_wait(0)


@gluon.jit
def gemm_gluon_kernel(
    # descriptors (built on the host)
    a_desc,
    b_desc,
    c_desc,
    # fp8 only: pointers to the per-tensor scales (one fp32 each); None otherwise
    scale_a,
    scale_b,
    # STREAM_K only: the partials' workspace (fp32, one slot per program and consumer warpgroup) and their flags
    # (int32, zero before the launch and left zero after it); None otherwise
    workspace,
    flags,
    sk_dp,  # STREAM_K only: stream_k_plan's dp_tiles, sk_iters, sk_programs; None otherwise
    sk_iters,
    sk_programs,
    # sizes
    M,
    N,
    K,
    # meta-parameters
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    PRODUCER_WARPS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr,
    B_K_MAJOR: gl.constexpr,  # B given N x K: fp8, whose consumers apply scale_a x scale_b in the epilogue
    num_warps: gl.constexpr,  # the default partition's: the 16-bit consumer's 8, or fp8's first consumer's 4
    STREAM_K: gl.constexpr = 0,  # fp8: 1, the last wave's K iterations shared; 2, its self-test's fault
):
    dtype: gl.constexpr = a_desc.dtype
    INSTR_K: gl.constexpr = 256 // dtype.primitive_bitwidth  # wgmma's K step: k16 for 2-byte operands, k32 for fp8
    CONSUMERS: gl.constexpr = 2 if B_K_MAJOR else 1  # partitions that arrive on empty[] (fp8: one per warpgroup)
    a_ring = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_ring = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready, empty = ring_barriers(STAGES, CONSUMERS)
    # Named tuples of the partitions' arguments hold only shared memory, descriptors, pointers and None: an assignment
    # (or a concatenation) turns a constexpr into a tensor, and the meta-parameters are constexprs, as are a size or a
    # stream-K count that is 1 (Triton's launcher specializes it), so those are written into each partition's tuple
    ring = (a_ring, b_ring, ready, empty)
    if B_K_MAJOR:
        # fp8: two consumer partitions of one warpgroup each, a C slab each (c_desc's box is one warpgroup's rows)
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
        memory = (c_desc, ring, c_smem, scale_a, scale_b, workspace, flags)
        gl.warp_specialize(
            [
                (fp8_consumer, (memory, sk_dp, sk_iters, sk_programs, M, N, K, GROUP_M, STAGES, 0, STREAM_K)),
                (fp8_consumer, (memory, sk_dp, sk_iters, sk_programs, M, N, K, GROUP_M, STAGES, 1, STREAM_K)),
                (
                    producer,
                    (a_desc, b_desc, ring, M, N, K, GROUP_M, STAGES, B_K_MAJOR, sk_dp, sk_iters, sk_programs, STREAM_K),
                ),
            ],
            [_FP8_WARPS, PRODUCER_WARPS],
            [_FP8_REGS, PRODUCER_REGS],
        )
    else:
        c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        gl.warp_specialize(
            [
                (_consumer, (c_desc, ring, c_smem, M, N, K, GROUP_M, STAGES, INSTR_K, num_warps)),
                (producer, (a_desc, b_desc, ring, M, N, K, GROUP_M, STAGES, B_K_MAJOR)),
            ],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def c_box(dtype: str, stages: int) -> list[int]:
    """C's TMA box, the consumers' staging slab: the tile (16-bit types); fp8, one consumer warpgroup's rows of it
    (each stores its own), half of the tile's width at 4 stages (FP8_STAGES)."""
    bm, bn, _ = TILES[dtype]
    if dtype != "fp8e4m3":
        return [bm, bn]
    return [bm // 2, bn // 2 if stages == 4 else bn]


def descriptors(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    m: int,
    n: int,
    k: int,
    dtype: str = "fp16",
    stages: int = 3,
) -> tuple:
    """Host-built descriptors of A (M x K), B (K x N, or N x K for fp8) and C (M x N, its box c_box's), with the
    buffers' row pitches (padded ones included) and the 128-byte-swizzled shared layouts wgmma reads."""
    bm, bn, bk = TILES[dtype]

    def desc(t, shape, box, element):
        layout = gl.NVMMASharedLayout.get_default_for(box, element)
        return TensorDescriptor(t, shape, [t.stride(0), 1], box, layout)

    element, out = GL_DTYPES[dtype], GL_DTYPES["bf16" if dtype == "fp8e4m3" else dtype]
    b_desc = desc(b, [n, k], [bn, bk], element) if dtype == "fp8e4m3" else desc(b, [k, n], [bk, bn], element)
    return desc(a, [m, k], [bm, bk], element), b_desc, desc(c, [m, n], c_box(dtype, stages), out)


def stream_k_plan(tiles: int, k_tiles: int, programs: int) -> tuple[int, int, int]:
    """The fp8 kernel's stream-K split (GluonGemm(stream_k=True)): (dp_tiles, sk_iters, sk_programs). The first
    dp_tiles = (tiles // programs) x programs tiles whole, round robin (every wave but a ragged last one); the last
    wave's sk_iters = its tiles x K tiles iterations shared by sk_programs programs in contiguous ranges, program p
    taking [p x sk_iters // sk_programs, (p + 1) x sk_iters // sk_programs), each at least half a tile long (a tile
    of many short parts would cost more in its fix-up than the ragged wave), and at least 1 program (an empty share
    still divides)."""
    if min(tiles, k_tiles, programs) < 1:
        raise ValueError(f"stream-K needs tiles, K tiles and programs (got {tiles}, {k_tiles}, {programs})")
    dp_tiles = tiles // programs * programs
    sk_iters = (tiles - dp_tiles) * k_tiles
    sk_programs = max(1, min(programs, -(-sk_iters // max(1, k_tiles // 2))))
    return dp_tiles, sk_iters, sk_programs


class GluonGemm:
    """The persistent warp-specialized Gluon GEMM at ``stages`` (GPU of compute capability 9.0 only), on the
    problem's inputs: (A, B), or (A, B, scale_a, scale_b) for fp8. ``stream_k`` (fp8 only): the last wave's K
    iterations shared by every SM; ``fault``: its sanitizer self-test (FAULT_SK_NO_WAIT)."""

    def __init__(self, inputs: tuple, c: torch.Tensor, stages: int, stream_k: bool = False, fault: bool = False):
        ops = gemm_operands(inputs, c, DTYPES)
        c = ops.c  # with the strides of its shape (checks.canonical)
        if stream_k and not ops.b_k_major:
            raise ValueError("stream_k: built on the fp8 kernel's promoted halves only (not 16-bit types)")
        if fault and not stream_k:
            raise ValueError("fault: FAULT_SK_NO_WAIT removes stream-K's fix-up wait: it needs stream_k")
        self.group_m = FP8_GROUP_M if ops.b_k_major else GROUP_M
        check_stages(stages, KERNEL.stages_for(ops.dtype))
        a, b = ops.a, ops.b
        m, n, k = ops.m, ops.n, ops.k
        self.ops = ops
        self.operands = Operands(a, b, c, b_k_major=ops.b_k_major)
        self.c = c
        # poisoned, and initialized for initcheck, which does not see the TMA store's writes
        self.c_padded = torch.full((m, -(-n // 8) * 8), float("nan"), dtype=c.dtype, device=c.device) if n % 8 else None
        a_k, b_k = self.operands.refresh()
        c_out = c if self.c_padded is None else self.c_padded
        descs = descriptors(a_k, b_k, c_out, m, n, k, ops.dtype, stages)
        self.stages, self.stream_k, self.fault = stages, stream_k, fault
        bm, bn, bk = TILES[ops.dtype]
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        self.grid = persistent_grid(tiles, num_sms(a.device))  # suite.waves' rule
        self.workspace = self.flags = None
        self.sk_plan = (None, None, None)
        if stream_k:  # every SM: the last wave's K iterations are shared instead of left ragged
            self.grid = min(num_sms(a.device), tiles * triton.cdiv(k, bk))
            self.sk_plan = stream_k_plan(tiles, triton.cdiv(k, bk), self.grid)
            # this launcher's own: a slot per program and consumer warpgroup (64 x BLOCK_N fp32), a flag per slot,
            # zero before the first launch and left zero by every launch; the fault's slots are fresh device memory
            # (suite.workspace), so that initcheck sees a finisher read one before its contributor wrote it
            self.workspace = new_workspace((self.grid, bm, bn), c.device, fresh=fault)
            self.flags = torch.zeros(self.grid * 2, dtype=torch.int32, device=c.device)
        self.args = (*descs, ops.scale_a, ops.scale_b, self.workspace, self.flags, *self.sk_plan, m, n, k)
        fp8 = ops.b_k_major
        self.num_warps = FP8_CONSUMER_WARPS if fp8 else NUM_WARPS
        consumers = (
            f"2 consumer partitions of one warpgroup ({FP8_CONSUMER_REGS} regs)"
            if fp8
            else f"{NUM_WARPS} consumer warps"
        )
        self.config = (
            f"{bm}x{bn}x{bk}, Gluon, {consumers} + {PRODUCER_WARPS} "
            f"producer warp ({PRODUCER_REGS} regs), {stages}-stage TMA ring, persistent, GROUP_M={self.group_m}"
            + dtype_config(ops.dtype, mma="warpgroup_mma on B's box read transposed (.permute)")
            + (
                ", promoted in two halves of N, each K tile's ready barrier waited on under the K tile before's "
                "second half"
                if fp8
                else ""
            )
            + (
                f", stream-K: {self.sk_plan[0]} tiles whole, then {self.sk_plan[1]} K iterations "
                f"over {self.sk_plan[2]} programs"
                if stream_k
                else ""
            )
            + grid_note(tiles, num_sms(a.device), self.grid)
            + self.operands.note
            + (", C through a padded pitch per call" if n % 8 else "")
        )
        self.info = kernel_info(None, stage_bytes(ops.dtype, (bm, bn, bk)), self.config, self.grid)
        self._compiled = False

    def __call__(self) -> None:
        self.operands.refresh()
        compiled = gemm_gluon_kernel[(self.grid,)](
            *self.args,
            GROUP_M=self.group_m,
            STAGES=self.stages,
            PRODUCER_WARPS=PRODUCER_WARPS,
            PRODUCER_REGS=PRODUCER_REGS,
            B_K_MAJOR=self.ops.b_k_major,
            num_warps=self.num_warps,
            STREAM_K=(2 if self.fault else 1) if self.stream_k else 0,
        )
        if self.c_padded is not None:
            self.c.copy_(self.c_padded[:, : self.c.shape[1]])
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid)


# racecheck reports hazards in this kernel only between Triton's own warp-specialization
# dispatch accesses: the consumer warps' stores of the partition state word at the region's entry and exit, and the
# worker warps' loads of it in their dispatch loop (SASS STS / LDS of one shared word, attributed to the kernel's
# first line); none at the ring, its mbarriers or C's staging tile. An empty warp_specialize kernel shows none
# (docs/sanitizer.md has the evidence). memcheck, synccheck and initcheck run as usual.
RACECHECK_BLIND = (
    "racecheck flags Triton's warp-specialization dispatch word (compiler-generated entry/exit "
    "stores vs the worker warps' loads), not this kernel's ring or C tile "
    "(docs/sanitizer.md)"
)


class WarpSpecialized(TritonModule):
    """gemm_gluon_kernel as the kernel-module contract (suite.kernel) states it, for the registry."""

    stages = FP8_STAGES
    dtypes = DTYPES
    fp8_accumulation = FP8_ACCUMULATION
    sass_requires = HOPPER_SASS
    # compute-sanitizer: edge tiles with N % 8 != 0 (C through its padded buffer) and a K tile cut short; a ring that
    # wraps many times within a tile; more tiles (144) than SMs (132), so programs walk two tiles and reuse C's
    # staging buffer behind a TMA store
    sanitize_sizes = ((130, 250, 40), (256, 512, 1024), (1536, 3072, 64))
    sanitizer_blind_spots: ClassVar[dict[str, str]] = {"racecheck": RACECHECK_BLIND}

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("gemm_gluon_kernel",)

    def stages_for(self, dtype: str) -> tuple:
        return FP8_STAGES if dtype == "fp8e4m3" else STAGES  # 48 KiB stages at every dtype (gemm_desc.TILES)

    def launch(self, inputs, out, stages):
        return GluonGemm(inputs, out, stages)


KERNEL = WarpSpecialized()


# The sanitizer's self-test of the stream-K fix-up: the finisher adds the later programs' partials without waiting
# for their flags (a missing fix-up wait). At 128 x 256 x 640 (one tile, 5 K tiles) the plan gives 3 programs the
# ranges [0, 1), [1, 3), [3, 5): the finisher's own share is one K tile, its contributors' two, so it reads their
# slots (fresh device memory) before they wrote them, which initcheck reports.
FAULT_SK_NO_WAIT = "PIPESUITE_FAULT_GLUON_SK_NO_FIXUP_WAIT"


class StreamK(WarpSpecialized):
    """GluonGemm(stream_k=True) for the registry: fp8 only (the fix-up is built on the fp8 consumers' halves)."""

    stages = FP8_STAGES
    dtypes = ("fp8e4m3",)
    dtype_notes: ClassVar[dict[str, str]] = {
        d: "stream-K is built on the fp8 kernel's promoted halves only (a 16-bit build ran slower than the "
        "persistent kernel: docs/design.md)"
        for d in ("fp16", "bf16")
    }
    # compute-sanitizer: tiles shared by 3 programs, edge tiles in M and N (N % 8 != 0: C through its padded
    # buffer), a K tile cut short (130 x 250 x 520: 2 tiles of 5 K tiles over 5 programs); a data-parallel wave
    # before the shared tiles (1536 x 3072 x 512: 144 tiles on 132 SMs, the last 12 shared by 24 programs)
    sanitize_sizes = ((130, 250, 520), (1536, 3072, 512))
    faults = (
        Fault(
            "the stream-K finisher adds its contributors' partials without waiting for their flags (a missing "
            "fix-up wait)",
            FAULT_SK_NO_WAIT,
            (3,),
            tool="initcheck",
            size=(128, 256, 640),
            dtype="fp8e4m3",
        ),
    )

    def stages_for(self, dtype: str) -> tuple:
        return FP8_STAGES

    def launch(self, inputs, out, stages):
        return GluonGemm(inputs, out, stages, stream_k=True, fault=FAULT_SK_NO_WAIT in self.extra_defines)


STREAM_K = StreamK()
