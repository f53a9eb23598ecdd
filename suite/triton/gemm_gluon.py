"""C = A @ B (fp32 accumulate) in Gluon, Triton's lower-level language
(``triton.experimental.gluon``): the Hopper pipeline of the PTX TMA-store kernel (suite/ptx/gemm_tma.cu) written
with Triton's compiler doing registers, layouts and instruction selection, and the programmer doing what
``tl.dot`` leaves to the pipeliner: the shared-memory ring, its mbarriers and the warp roles.

Persistent: at most one program per SM (suite.waves' rule) walks the output tiles (grouped rasterization, as the
other Triton kernels: 8 tile rows per group, fp8 16).

* a **producer** partition (1 warp, few registers) issues TMA loads of A and B K-tiles into a STAGES-deep ring, each
  stage guarded by a *ready* and an *empty* mbarrier; it runs ahead across tiles, bounded only by the ring;
* the **consumer** partition (the program's 8 warps: two warpgroups, 64 rows of the 128x256 tile each) waits for a
  stage to be ready, issues ``warpgroup_mma`` (wgmma) from shared memory, keeps one wgmma group in flight, and hands
  each stage back once the wgmma that read it has completed; after the last K-tile it writes C through shared
  memory with a TMA store that runs on while the next tile starts.

The loads never wait on the consumers' block barriers: that is the difference from the ``tl.dot`` kernels of
gemm_desc.py, whose 8 warps issue the loads, wait and compute in lockstep, four block barriers per K step (Triton 3.6;
``barrier`` is 42-46% of their stall cycles at 4096^3). Here Triton still places two barriers per K step among the
consumer warps (before the ready wait, and before the one-thread arrive that releases a stage), but the wgmma run
on under them. Triton rounds the block up to whole warpgroups for setmaxnreg: 384 threads, 9 warps working.

Three input types, on the tiles of gemm_desc.py (``TILES``: 48 KiB stages): fp16 -> fp16 and bf16 -> bf16 on
128x256x64; fp8 e4m3 -> bf16 on 128x256x128, B given N x K (K-major: the ring holds [BLOCK_N, BLOCK_K] boxes and the
wgmma reads each through a transposed view, which is the K-major B operand wgmma's fp8 form needs), the per-tensor
scales applied to the fp32 accumulator before the bf16 store, as ``torch._scaled_mm`` does.

fp8 promotes each K tile's sum into fp32 (wgmma sums fp8 products with fewer mantissa bits than fp32), in two halves
of N so that the partial sum needs 64 registers a thread beside the 128 of the accumulators. A partial must be
complete before it is added, so a warpgroup's tensor-core work stops at every half, hidden only where the other
warpgroup's wgmma run meanwhile. So fp8 has its own consumers (``_fp8_consumer``): two partitions of one warpgroup
each (64 rows of the tile), each running on at its own pace, as the PTX kernel's two consumer warpgroups do. In one
partition of 8 warps, as the 16-bit types are, Triton's partition barriers keep both warpgroups in step: both wait
and add at once, with the tensor pipe idle. (Taking turns, warpgroup 0 issuing a half, then 1, then 0 again through
two mbarriers, was slower on the H200: 0.973 / 1.022 of promoted cuBLAS at 8192^3 / 4096^3 against 0.977 / 1.035.)
Triton's own promotion (``max_num_imprecise_acc=BLOCK_K``) adds the partial to the accumulator before the wgmma wait,
which makes ptxas serialize every wgmma (C7514); here the partial is summed from zero (``use_acc=False``) and added
after the wait, and ``_kept_here`` keeps LLVM from sinking those adds below the next half's wgmma (two partials
alive: spills).

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
from suite.triton._compiled import kernel_info
from suite.triton.gemm_desc import DTYPES, TILES, Operands, dtype_config, num_sms, stage_bytes, tile_origin
from suite.waves import grid_note, persistent_grid
from suite.workspace import new_workspace

# The TMA copies under the names of the installed Triton: async_copy_global_to_shared / async_copy_shared_to_global
# (3.6, the H200 machine's) became async_load / async_store (3.9, the CI's; the old names raise there).
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

BLOCK_M, BLOCK_N, BLOCK_K = TILES["fp16"]  # fp8: TILES["fp8e4m3"], 128x256x128
GROUP_M = 8
# fp8: tile rows in groups of 16, so that B's panels are read from HBM half as often (a group's A rows stay in L2 while
# B streams past): on the H200 at 8192^3 0.979 of promoted cuBLAS against 0.972 with 8 (32: 0.963), the same at
# 4096^3 (tools/probe_llm.py fp8, 2026-12-01)
FP8_GROUP_M = 16
NUM_WARPS = 8  # the consumer partition: two warpgroups
PRODUCER_WARPS, PRODUCER_REGS = 1, 24  # the producer partition only computes coordinates
FP8_CONSUMER_WARPS, FP8_CONSUMER_REGS = 4, 232  # fp8: each consumer partition one warpgroup, as the PTX consumers
_FP8_WARPS, _FP8_REGS = gl.constexpr(FP8_CONSUMER_WARPS), gl.constexpr(FP8_CONSUMER_REGS)  # the same, for the kernels
STAGES = (2, 3)  # 48 KiB per stage at every dtype and C's 64 KiB staging tile: 4 stages would need 256 KiB
# fp8: at 4 stages each warpgroup's C slab is half its rows' width (2 x 16 KiB beside 192 KiB of ring), stored in two
# passes, the second once the first's TMA store has read the slab
FP8_STAGES = (2, 3, 4)
# fp8 on 128 x 128 tiles, K tiles promoted in pairs (_fp8_pairs_consumer): 32 KiB stages beside two 16 KiB C slabs
PAIRS_TILE = (128, 128, 128)
PAIRS_STAGES = (4, 5, 6)
GL_DTYPES = {"fp16": gl.float16, "bf16": gl.bfloat16, "fp8e4m3": gl.float8e4nv}


@gluon.jit
def _next_stage(stage, lap, STAGES: gl.constexpr):
    """The ring position after (stage, lap): the next stage, wrapping to the first with the lap's parity flipped."""
    stage += 1
    if stage == STAGES:
        stage = 0
        lap ^= 1
    return stage, lap


@gluon.jit
def _tile_counts(M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    """Both partitions walk the same persistent schedule: C's tiles along M and N, and the K tiles of each."""
    return gl.cdiv(M, BLOCK_M), gl.cdiv(N, BLOCK_N), gl.cdiv(K, BLOCK_K)


@gluon.jit
def _stream_k_plan(tiles, sk_dp_tiles, sk_iters, sk_programs, STREAM_K: gl.constexpr):
    """(dp_tiles, sk_iters, sk_programs): the host's stream_k_plan with STREAM_K, else every tile whole."""
    if STREAM_K:
        return sk_dp_tiles, sk_iters, sk_programs
    else:
        return tiles, 0, 1


@gluon.jit
def _sk_range(sk_iters, sk_programs):
    """This program's [it, end) of the last wave's K iterations (empty past sk_programs)."""
    pid = gl.program_id(0)
    return gl.minimum(pid * sk_iters // sk_programs, sk_iters), gl.minimum(
        (pid + 1) * sk_iters // sk_programs, sk_iters
    )


@gluon.jit
def _sk_unit(it, end, k_tiles):
    """The unit at iteration ``it`` of a range ending at ``end``: (the last wave's tile t, its K tiles [kb, ke))."""
    t = it // k_tiles
    kb = it - t * k_tiles
    return t, kb, gl.minimum(k_tiles, kb + end - it)


@gluon.jit
def _load_k_tile(
    a_desc,
    b_desc,
    a_ring,
    b_ring,
    ready,
    empty,
    m0,
    n0,
    kt,
    smem_write_stage,
    lap,
    STAGES: gl.constexpr,
    B_K_MAJOR: gl.constexpr,
):
    """The producer's step: K tile ``kt`` of the tile at (m0, n0) into the ring's next stage; returns the ring's next
    position (smem_write_stage, lap)."""
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    # wait until the consumers released this stage (its previous lap's wgmma completed); on the first lap the parity
    # of the phase before the barrier's first one passes at once
    mbarrier.wait(empty.index(smem_write_stage), lap ^ 1)
    # arm the stage's ready barrier with the bytes both copies will deliver, then issue them (zero-filled past the
    # edges of A and B)
    mbarrier.expect(ready.index(smem_write_stage), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    _tma_load(a_desc, [m0, kt * BLOCK_K], ready.index(smem_write_stage), a_ring.index(smem_write_stage))
    if B_K_MAJOR:
        _tma_load(b_desc, [n0, kt * BLOCK_K], ready.index(smem_write_stage), b_ring.index(smem_write_stage))
    else:
        _tma_load(b_desc, [kt * BLOCK_K, n0], ready.index(smem_write_stage), b_ring.index(smem_write_stage))
    smem_write_stage, lap = _next_stage(smem_write_stage, lap, STAGES)
    return smem_write_stage, lap


@gluon.jit
def _producer(
    a_desc,
    b_desc,
    a_ring,
    b_ring,
    ready,
    empty,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    B_K_MAJOR: gl.constexpr,
    sk_dp=None,  # STREAM_K: stream_k_plan's dp_tiles, sk_iters, sk_programs
    sk_iters=None,
    sk_programs=None,
    STREAM_K: gl.constexpr = False,
):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0] if B_K_MAJOR else b_desc.block_type.shape[1]
    tiles_m, tiles_n, k_tiles = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    dp_tiles, sk_iters, sk_programs = _stream_k_plan(tiles_m * tiles_n, sk_dp, sk_iters, sk_programs, STREAM_K)
    smem_write_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), dp_tiles, gl.num_programs(0)):
        m0, n0 = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        for kt in range(k_tiles):
            smem_write_stage, lap = _load_k_tile(
                a_desc, b_desc, a_ring, b_ring, ready, empty, m0, n0, kt, smem_write_stage, lap, STAGES, B_K_MAJOR
            )
    if STREAM_K:
        # this program's range of the last wave's K iterations, one unit per tile it touches (the consumers walk
        # the same units)
        it, end = _sk_range(sk_iters, sk_programs)
        while it < end:
            t, kb, ke = _sk_unit(it, end, k_tiles)
            m0, n0 = tile_origin(dp_tiles + t, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
            for kt in range(kb, ke):
                smem_write_stage, lap = _load_k_tile(
                    a_desc, b_desc, a_ring, b_ring, ready, empty, m0, n0, kt, smem_write_stage, lap, STAGES, B_K_MAJOR
                )
            it += ke - kb


@gluon.jit
def _consumer(
    c_desc,
    a_ring,
    b_ring,
    ready,
    empty,
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
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_ring.type.shape[2]
    # wgmma's accumulator layout: warpgroups stacked along M, one m64nNkK instruction per warpgroup and K step
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, INSTR_K]
    )
    tiles_m, tiles_n, k_tiles = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    smem_read_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), tiles_m * tiles_n, gl.num_programs(0)):
        m0, n0 = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
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
            smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)
        # the last wgmma of the tile has completed: its stage is free too
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(release_stage))

        # -- EPILOGUE: C through shared memory and a TMA store (clipped at the edges of C); the store of this tile
        #    runs on while the next tile's wgmma start --
        tma.store_wait(0)  # the previous tile's store has finished reading c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to c_smem visible to the TMA (async proxy)
        _tma_store(c_desc, [m0, n0], c_smem)
    tma.store_wait(0)


@gluon.jit
def _kept_here(x):
    """``x``, through an empty volatile asm (the PTX kernel's fence_operand): the adds that made it happen before
    the code that follows, instead of sinking below the next half's wgmma and keeping two partials alive."""
    return gl.inline_asm_elementwise("", "=f,0", [x], dtype=gl.float32, is_pure=False, pack=1)


@gluon.jit
def _fp8_halves(
    a_ring,
    b_ring,
    ready,
    empty,
    left,
    right,
    part,
    kb,
    ke,
    smem_read_stage,
    lap,
    STAGES: gl.constexpr,
    WG: gl.constexpr,
    EARLY_WAIT: gl.constexpr = 0,
):
    """fp8 MAINLOOP over K tiles [kb, ke) of one tile, on one warpgroup's rows: per K tile two halves of N, each
    summed from zero and promoted into fp32 (left, right) once complete. Returns (left, right, part) and the ring's
    next position.

    EARLY_WAIT (GluonGemm's early_wait, on for the registered rows): each K tile's ready barrier is waited on under
    the K tile before's second half, so that between one half's wait and the next half's issue there are only the
    adds, which the other warpgroup's group in flight covers. On the H200 (tools/probe_llm.py fp8, 2026-12-04, two
    calls, 3 stages) 1.020 / 1.022 of promoted cuBLAS at 8192^3 against 0.996 / 0.995, 1.047 against 1.032 at
    4096^3, and on stream-K 1.019 against 0.999 at 8192^3. (The PTX rung built the same way was slower, 0.939
    against 1.009: gemm_tma.cu's GEMM_TMA_FP8_EARLY_WAIT.)"""
    WG_M: gl.constexpr = a_ring.type.shape[1] // 2
    HALF: gl.constexpr = b_ring.type.shape[1] // 2  # K-major B: the ring's boxes are BLOCK_N x BLOCK_K
    if EARLY_WAIT:
        mbarrier.wait(ready.index(smem_read_stage), lap, pred=kb < ke)  # the first K tile's TMA bytes
        for i in range(kb, ke):
            a_rows = a_ring.index(smem_read_stage).slice(WG * WG_M, WG_M)  # this warpgroup's rows of A
            b_stage = b_ring.index(smem_read_stage)
            part = warpgroup_mma(a_rows, b_stage.slice(0, HALF).permute((1, 0)), part, use_acc=False, is_async=True)
            part = warpgroup_mma_wait(0, deps=(part,))  # the first half's partial sum is final: promote it
            left = _kept_here(left + part)
            part = warpgroup_mma(a_rows, b_stage.slice(HALF, HALF).permute((1, 0)), part, use_acc=False, is_async=True)
            next_stage, next_lap = _next_stage(smem_read_stage, lap, STAGES)
            # the next K tile's TMA bytes, waited for while this half runs
            mbarrier.wait(ready.index(next_stage), next_lap, pred=i + 1 < ke)
            part = warpgroup_mma_wait(0, deps=(part,))  # the second half's too
            right = _kept_here(right + part)
            mbarrier.arrive(empty.index(smem_read_stage))  # both halves have read the stage: release it
            smem_read_stage, lap = next_stage, next_lap
        return left, right, part, smem_read_stage, lap
    for _ in range(kb, ke):
        # wait for the TMA bytes of this stage (its ready barrier's phase for this lap)
        mbarrier.wait(ready.index(smem_read_stage), lap)
        a_rows = a_ring.index(smem_read_stage).slice(WG * WG_M, WG_M)  # this warpgroup's rows of A
        b_stage = b_ring.index(smem_read_stage)
        for h in gl.static_range(2):
            part = warpgroup_mma(
                a_rows,
                b_stage.slice(h * HALF, HALF).permute((1, 0)),  # K-major B read as K x N
                part,
                use_acc=False,  # from zero: the K tile's own sum (wgmma's accumulator across its 4 k-steps)
                is_async=True,
            )
            # wait until the half's partial sum is final, then promote it into fp32
            part = warpgroup_mma_wait(0, deps=(part,))
            if h == 0:
                left = _kept_here(left + part)
            else:
                right = _kept_here(right + part)
        # both halves have read the stage: this warpgroup releases it (empty[] counts both consumers)
        mbarrier.arrive(empty.index(smem_read_stage))
        smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)
    return left, right, part, smem_read_stage, lap


@gluon.jit
def _fp8_epilogue(c_desc, c_smem, left, right, scale, m0, n0, WG: gl.constexpr):
    """fp8 EPILOGUE: the scales on the fp32 accumulators, this warpgroup's rows through its own C slab and a TMA
    store (clipped at the edges of C), which runs on while the next tile's wgmma start."""
    WG_M: gl.constexpr = c_desc.block_type.shape[0]
    C_COLS: gl.constexpr = c_desc.block_type.shape[1]  # the C slab's width: the tile's, or half of it (two passes)
    HALF: gl.constexpr = left.type.shape[1]
    slab = c_smem.index(WG)
    tma.store_wait(0)  # this warpgroup's previous store has finished reading its slab
    if C_COLS == 2 * HALF:
        slab.slice(0, HALF, dim=1).store((left * scale).to(c_desc.dtype))
        slab.slice(HALF, HALF, dim=1).store((right * scale).to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
        _tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
    else:  # a slab of half the width: the left half, then the right
        slab.store((left * scale).to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
        _tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
        tma.store_wait(0)  # the left half's store has finished reading the slab
        slab.store((right * scale).to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [m0 + WG * WG_M, n0 + HALF], slab)


@gluon.jit
def _partial_offsets(slot, WG: gl.constexpr, half):
    """Offsets (in floats) of a warpgroup's two [WG_M, HALF] halves in stream-K's workspace slot ``slot`` (one per
    program and warpgroup: [programs, 2, WG_M, 2 x HALF] fp32), in the layout of ``half`` (an accumulator half)."""
    WG_M: gl.constexpr = half.type.shape[0]
    HALF: gl.constexpr = half.type.shape[1]
    layout: gl.constexpr = half.type.layout
    rows = gl.arange(0, WG_M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, HALF, layout=gl.SliceLayout(0, layout))
    base = (slot * 2 + WG).to(gl.int64) * (WG_M * 2 * HALF)
    return base + rows[:, None] * (2 * HALF) + cols[None, :]


SK_POLL_LIMIT = gl.constexpr(1 << 22)  # a stream-K finisher's polls of one flag at most (~1 us each)


@gluon.jit
def _fp8_publish(workspace, flags, left, right, WG: gl.constexpr):
    """A stream-K contributor (its unit starts inside the tile): its partial sums to its program's slot, then each
    thread's release-add on the slot's flag, so that the flag reads 128 once all of the warpgroup's stores are
    visible."""
    HALF: gl.constexpr = left.type.shape[1]
    offsets = _partial_offsets(gl.program_id(0), WG, left)
    gl.store(workspace + offsets, left, cache_modifier=".cg")
    gl.store(workspace + offsets + HALF, right, cache_modifier=".cg")
    flag, ones = _flag_per_thread(flags, gl.program_id(0), WG)
    gl.atomic_add(flag, ones, sem="release", scope="gpu")


@gluon.jit
def _flag_per_thread(flags, program, WG: gl.constexpr):
    """Stream-K's flag of (program, warpgroup) as one pointer per thread of the warpgroup, and a 1 per thread: the
    flag's atomics are each thread's own, whatever Triton does with a scalar one."""
    one_each: gl.constexpr = gl.BlockedLayout([1], [32], [_FP8_WARPS], [0])
    ones = gl.full([_FP8_WARPS * 32], 1, gl.int32, layout=one_each)
    return flags + (program * 2 + WG) + ones * 0, ones


@gluon.jit
def _fp8_fix_up(workspace, flags, left, right, tile_end, sk_iters, sk_programs, WG: gl.constexpr, WAIT: gl.constexpr):
    """A stream-K tile's finisher (its unit holds the tile's first K tile and ends inside it): the later programs'
    partials of the tile added in K order (program order), each once its flag reads 128 in every thread. Each
    thread then adds 1 to the flag, and the one that takes it to 256 (every thread past the wait) zeroes it for the
    next launch. Bit-reproducible: the same additions in the same order whichever program arrives first. WAIT False:
    the sanitizer's self-test (FAULT_SK_NO_WAIT), the partials added without waiting for their flags."""
    HALF: gl.constexpr = left.type.shape[1]
    THREADS: gl.constexpr = _FP8_WARPS * 32
    contributor = gl.program_id(0) + 1
    last = (tile_end * sk_programs - 1) // sk_iters  # the program that holds the tile's last K iteration
    while contributor <= last:
        flag, ones = _flag_per_thread(flags, contributor, WG)
        if WAIT:
            seen = gl.atomic_add(flag, ones * 0, sem="acquire", scope="gpu")
            polls = 1
            # not every thread of its warpgroup has published yet; past SK_POLL_LIMIT polls (seconds) the finisher
            # goes on without it, so that a broken schedule fails validation instead of hanging the GPU
            while (gl.min(seen, axis=0) < THREADS) & (polls < SK_POLL_LIMIT):
                seen = gl.atomic_add(flag, ones * 0, sem="acquire", scope="gpu")
                polls += 1
        offsets = _partial_offsets(contributor, WG, left)
        left = left + gl.load(workspace + offsets, cache_modifier=".cg")
        right = right + gl.load(workspace + offsets + HALF, cache_modifier=".cg")
        passed = gl.atomic_add(flag, ones, sem="relaxed", scope="gpu")
        gl.atomic_xchg(flag, ones * 0, mask=passed == 2 * THREADS - 1, sem="relaxed", scope="gpu")
        contributor += 1
    return left, right


@gluon.jit
def _fp8_consumer(
    c_desc,
    a_ring,
    b_ring,
    ready,
    empty,
    c_smem,
    scale_a,
    scale_b,
    workspace,  # STREAM_K: the partials' slots, one per program and warpgroup (fp32); else None
    flags,  # STREAM_K: a flag per slot (int32, zero between launches); else None
    sk_dp,  # STREAM_K: stream_k_plan's dp_tiles, sk_iters, sk_programs; else None
    sk_iters,
    sk_programs,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    WG: gl.constexpr,  # 0 or 1: this partition's warpgroup, rows WG x 64 .. + 63 of the tile
    QUARTERS: gl.constexpr,  # promote in quarters of N through two partials in turn (GluonGemm's quarters)
    STREAM_K: gl.constexpr = 0,  # 1: the last wave's K iterations shared (GluonGemm's stream_k); 2: FAULT_SK_NO_WAIT
    EARLY_WAIT: gl.constexpr = 0,  # the halves' next ready barrier waited on under the second half
):
    """fp8: one warpgroup's 64 rows of the 128 x 256 tile, each K tile promoted into fp32 in two halves of N, or
    (QUARTERS, unregistered: tools/probe_llm.py fp8) in four quarters through two partials taken in turn, each
    quarter's wgmma issued once the partial it overwrites is added: a group runs under every add but the last (on the
    H200 slower than the halves: 0.935 / 0.995 of promoted cuBLAS at 8192^3 / 4096^3 against 0.970 / 1.028).

    STREAM_K (halves only; the registry's "gluon ws stream-k"): the whole waves' tiles as above, then this program's
    share of the last wave's K iterations (_stream_k_plan), one unit per tile it touches. A unit that starts inside
    its tile publishes its partial sums (_fp8_publish); the unit that holds the tile's first K tile adds the later
    units' partials in K order (_fp8_fix_up) and stores C."""
    WG_M: gl.constexpr = c_desc.block_type.shape[0]
    C_COLS: gl.constexpr = c_desc.block_type.shape[1]  # the C slab's width: BLOCK_N, or half of it (two passes)
    BLOCK_N: gl.constexpr = b_ring.type.shape[1]  # K-major B: the ring's boxes are BLOCK_N x BLOCK_K
    BLOCK_M: gl.constexpr = a_ring.type.shape[1]
    BLOCK_K: gl.constexpr = a_ring.type.shape[2]
    HALF: gl.constexpr = BLOCK_N // 2
    INSTR_K: gl.constexpr = 32  # wgmma's K step for fp8
    half_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[_FP8_WARPS, 1], instr_shape=[16, HALF, INSTR_K]
    )
    QUARTER: gl.constexpr = BLOCK_N // 4
    quarter_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[_FP8_WARPS, 1], instr_shape=[16, QUARTER, INSTR_K]
    )
    tiles_m, tiles_n, k_tiles = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    scale = gl.load(scale_a) * gl.load(scale_b)
    part = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)  # a K tile's half, summed from zero
    part_a = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)  # QUARTERS: quarters 0 and 2
    part_b = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)  # QUARTERS: quarters 1 and 3
    smem_read_stage = 0
    lap = 0
    dp_tiles, sk_iters, sk_programs = _stream_k_plan(tiles_m * tiles_n, sk_dp, sk_iters, sk_programs, STREAM_K)
    for tile in range(gl.program_id(0), dp_tiles, gl.num_programs(0)):
        m0, n0 = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        left = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
        right = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
        if QUARTERS:
            q0 = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)  # the fp32 quarters
            q1 = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)
            q2 = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)
            q3 = gl.zeros((WG_M, QUARTER), dtype=gl.float32, layout=quarter_layout)
            # -- MAINLOOP: per K tile four quarters, each summed from zero and promoted once complete --
            for _ in range(k_tiles):
                # wait for the TMA bytes of this stage (its ready barrier's phase for this lap)
                mbarrier.wait(ready.index(smem_read_stage), lap)
                a_rows = a_ring.index(smem_read_stage).slice(WG * WG_M, WG_M)  # this warpgroup's rows of A
                b_stage = b_ring.index(smem_read_stage)
                # K-major B's quarter q read as K x N; each partial summed from zero
                part_a = warpgroup_mma(
                    a_rows, b_stage.slice(0, QUARTER).permute((1, 0)), part_a, use_acc=False, is_async=True
                )
                part_b = warpgroup_mma(
                    a_rows, b_stage.slice(QUARTER, QUARTER).permute((1, 0)), part_b, use_acc=False, is_async=True
                )
                part_a = warpgroup_mma_wait(1, deps=(part_a,))  # quarter 0 is final (1 runs): promote it
                q0 = _kept_here(q0 + part_a)
                part_a = warpgroup_mma(
                    a_rows, b_stage.slice(2 * QUARTER, QUARTER).permute((1, 0)), part_a, use_acc=False, is_async=True
                )
                part_b = warpgroup_mma_wait(1, deps=(part_b,))  # quarter 1 is final (2 runs)
                q1 = _kept_here(q1 + part_b)
                part_b = warpgroup_mma(
                    a_rows, b_stage.slice(3 * QUARTER, QUARTER).permute((1, 0)), part_b, use_acc=False, is_async=True
                )
                part_a = warpgroup_mma_wait(1, deps=(part_a,))  # quarter 2 is final (3 runs)
                q2 = _kept_here(q2 + part_a)
                part_b = warpgroup_mma_wait(0, deps=(part_b,))  # quarter 3 is final: the stage is read
                q3 = _kept_here(q3 + part_b)
                # all four quarters have read the stage: this warpgroup releases it (empty[] counts both consumers)
                mbarrier.arrive(empty.index(smem_read_stage))
                smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)
            # -- EPILOGUE: as _fp8_epilogue's, quarter by quarter --
            slab = c_smem.index(WG)
            tma.store_wait(0)  # this warpgroup's previous store has finished reading its slab
            slab.slice(0, QUARTER, dim=1).store((q0 * scale).to(c_desc.dtype))
            slab.slice(QUARTER, QUARTER, dim=1).store((q1 * scale).to(c_desc.dtype))
            if C_COLS == BLOCK_N:
                slab.slice(2 * QUARTER, QUARTER, dim=1).store((q2 * scale).to(c_desc.dtype))
                slab.slice(3 * QUARTER, QUARTER, dim=1).store((q3 * scale).to(c_desc.dtype))
            fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
            _tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
            if C_COLS < BLOCK_N:  # a slab of half the width: quarters 2 and 3 in a second pass
                tma.store_wait(0)  # the first pass's store has finished reading the slab
                slab.slice(0, QUARTER, dim=1).store((q2 * scale).to(c_desc.dtype))
                slab.slice(QUARTER, QUARTER, dim=1).store((q3 * scale).to(c_desc.dtype))
                fence_async_shared()
                _tma_store(c_desc, [m0 + WG * WG_M, n0 + HALF], slab)
        else:
            # -- MAINLOOP over all of K, then EPILOGUE --
            left, right, part, smem_read_stage, lap = _fp8_halves(
                a_ring,
                b_ring,
                ready,
                empty,
                left,
                right,
                part,
                0,
                k_tiles,
                smem_read_stage,
                lap,
                STAGES,
                WG,
                EARLY_WAIT,
            )
            _fp8_epilogue(c_desc, c_smem, left, right, scale, m0, n0, WG)
    if STREAM_K:
        # this program's range of the last wave's K iterations (empty past sk_programs), one unit per tile
        it, end = _sk_range(sk_iters, sk_programs)
        while it < end:
            t, kb, ke = _sk_unit(it, end, k_tiles)
            m0, n0 = tile_origin(dp_tiles + t, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
            left = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
            right = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
            left, right, part, smem_read_stage, lap = _fp8_halves(
                a_ring, b_ring, ready, empty, left, right, part, kb, ke, smem_read_stage, lap, STAGES, WG, EARLY_WAIT
            )
            if kb > 0:  # a later part of the tile's K: the tile's finisher adds it
                _fp8_publish(workspace, flags, left, right, WG)
            else:  # the tile's first K tile: add the later parts (if any), in K order, and store C
                if ke < k_tiles:
                    left, right = _fp8_fix_up(
                        workspace, flags, left, right, (t + 1) * k_tiles, sk_iters, sk_programs, WG, STREAM_K == 1
                    )
                _fp8_epilogue(c_desc, c_smem, left, right, scale, m0, n0, WG)
            it += ke - kb
    tma.store_wait(0)


@gluon.jit
def _fp8_pairs_consumer(
    c_desc,
    a_ring,
    b_ring,
    ready,
    empty,
    c_smem,
    scale_a,
    scale_b,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    WG: gl.constexpr,  # 0 or 1: this partition's warpgroup, rows WG x 64 .. + 63 of the tile
):
    """fp8 on 128 x 128 tiles: one warpgroup's 64 x 128, whose registers hold the accumulator and two partials, so
    K tiles go in pairs (the PTX kernel's GEMM_TMA_FP8_OVERLAP): both issued, each summed from zero, the first
    promoted while the second's wgmma run; the tensor pipe waits for this warpgroup's adds once per two K tiles."""
    WG_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_ring.type.shape[1]  # K-major B: the ring's boxes are BLOCK_N x BLOCK_K
    BLOCK_M: gl.constexpr = a_ring.type.shape[1]
    BLOCK_K: gl.constexpr = a_ring.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[_FP8_WARPS, 1], instr_shape=[16, BLOCK_N, 32]
    )
    tiles_m, tiles_n, k_tiles = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    scale = gl.load(scale_a) * gl.load(scale_b)
    part_a = gl.zeros((WG_M, BLOCK_N), dtype=gl.float32, layout=layout)  # the first K tile of a pair, from zero
    part_b = gl.zeros((WG_M, BLOCK_N), dtype=gl.float32, layout=layout)  # the second
    smem_read_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), tiles_m * tiles_n, gl.num_programs(0)):
        m0, n0 = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = gl.zeros((WG_M, BLOCK_N), dtype=gl.float32, layout=layout)
        # -- MAINLOOP: K tiles in pairs --
        for _ in range(k_tiles // 2):
            # wait for the TMA bytes of the pair's first stage (its ready barrier's phase for this lap)
            mbarrier.wait(ready.index(smem_read_stage), lap)
            first_stage = smem_read_stage
            part_a = warpgroup_mma(
                a_ring.index(first_stage).slice(WG * WG_M, WG_M),
                b_ring.index(first_stage).permute((1, 0)),  # K-major B read as K x N
                part_a,
                use_acc=False,
                is_async=True,
            )
            smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)
            # ... and of its second
            mbarrier.wait(ready.index(smem_read_stage), lap)
            second_stage = smem_read_stage
            part_b = warpgroup_mma(
                a_ring.index(second_stage).slice(WG * WG_M, WG_M),
                b_ring.index(second_stage).permute((1, 0)),
                part_b,
                use_acc=False,
                is_async=True,
            )
            smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)
            # the first K tile's group has completed (the second runs): its stage is read, promote it
            part_a = warpgroup_mma_wait(1, deps=(part_a,))
            mbarrier.arrive(empty.index(first_stage))
            acc = _kept_here(acc + part_a)
            # the second's too
            part_b = warpgroup_mma_wait(0, deps=(part_b,))
            mbarrier.arrive(empty.index(second_stage))
            acc = _kept_here(acc + part_b)
        if k_tiles % 2 == 1:  # an odd count: the last K tile alone
            mbarrier.wait(ready.index(smem_read_stage), lap)
            part_a = warpgroup_mma(
                a_ring.index(smem_read_stage).slice(WG * WG_M, WG_M),
                b_ring.index(smem_read_stage).permute((1, 0)),
                part_a,
                use_acc=False,
                is_async=True,
            )
            part_a = warpgroup_mma_wait(0, deps=(part_a,))  # it has completed: its stage is read
            mbarrier.arrive(empty.index(smem_read_stage))
            acc = _kept_here(acc + part_a)
            smem_read_stage, lap = _next_stage(smem_read_stage, lap, STAGES)

        # -- EPILOGUE: the scales, this warpgroup's rows through its own C slab and a TMA store (clipped at the
        #    edges of C), which runs on while the next tile's wgmma start --
        slab = c_smem.index(WG)
        tma.store_wait(0)  # this warpgroup's previous store has finished reading its slab
        slab.store((acc * scale).to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
        _tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
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
    QUARTERS: gl.constexpr = False,  # fp8: promote in quarters of N (_fp8_consumer; unregistered)
    PAIRS: gl.constexpr = False,  # fp8 on 128 x 128 tiles: K tiles promoted in pairs (_fp8_pairs_consumer)
    STREAM_K: gl.constexpr = 0,  # fp8 halves: 1, the last wave's K iterations shared; 2, its self-test's fault
    EARLY_WAIT: gl.constexpr = 0,  # fp8 halves: the next ready barrier waited on under the second half
):
    dtype: gl.constexpr = a_desc.dtype
    INSTR_K: gl.constexpr = 256 // dtype.primitive_bitwidth  # wgmma's K step: k16 for 2-byte operands, k32 for fp8
    CONSUMERS: gl.constexpr = 2 if B_K_MAJOR else 1  # partitions that arrive on empty[] (fp8: one per warpgroup)
    a_ring = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_ring = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)  # completed by the producer's expect and the TMA bytes
        mbarrier.init(empty.index(s), count=CONSUMERS)  # completed by each consumer partition's arrival
    if PAIRS:
        # fp8, 128 x 128 tiles: as below, each consumer promoting K tiles in pairs
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
        gl.warp_specialize(
            [
                (
                    _fp8_pairs_consumer,
                    (c_desc, a_ring, b_ring, ready, empty, c_smem, scale_a, scale_b, M, N, K, GROUP_M, STAGES, 0),
                ),
                (
                    _fp8_pairs_consumer,
                    (c_desc, a_ring, b_ring, ready, empty, c_smem, scale_a, scale_b, M, N, K, GROUP_M, STAGES, 1),
                ),
                (_producer, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, GROUP_M, STAGES, B_K_MAJOR)),
            ],
            [_FP8_WARPS, PRODUCER_WARPS],
            [_FP8_REGS, PRODUCER_REGS],
        )
    elif B_K_MAJOR:
        # fp8: two consumer partitions of one warpgroup each, a C slab each (c_desc's box is one warpgroup's rows)
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
        gl.warp_specialize(
            [
                (
                    _fp8_consumer,
                    (
                        c_desc,
                        a_ring,
                        b_ring,
                        ready,
                        empty,
                        c_smem,
                        scale_a,
                        scale_b,
                        workspace,
                        flags,
                        sk_dp,
                        sk_iters,
                        sk_programs,
                        M,
                        N,
                        K,
                        GROUP_M,
                        STAGES,
                        0,
                        QUARTERS,
                        STREAM_K,
                        EARLY_WAIT,
                    ),
                ),
                # a worker partition's arguments: one tuple as written (a concatenated tuple loses its constexprs)
                (
                    _fp8_consumer,
                    (
                        c_desc,
                        a_ring,
                        b_ring,
                        ready,
                        empty,
                        c_smem,
                        scale_a,
                        scale_b,
                        workspace,
                        flags,
                        sk_dp,
                        sk_iters,
                        sk_programs,
                        M,
                        N,
                        K,
                        GROUP_M,
                        STAGES,
                        1,
                        QUARTERS,
                        STREAM_K,
                        EARLY_WAIT,
                    ),
                ),
                (
                    _producer,
                    (
                        a_desc,
                        b_desc,
                        a_ring,
                        b_ring,
                        ready,
                        empty,
                        M,
                        N,
                        K,
                        GROUP_M,
                        STAGES,
                        B_K_MAJOR,
                        sk_dp,
                        sk_iters,
                        sk_programs,
                        STREAM_K,
                    ),
                ),
            ],
            [_FP8_WARPS, PRODUCER_WARPS],
            [_FP8_REGS, PRODUCER_REGS],
        )
    else:
        c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        gl.warp_specialize(
            [
                (
                    _consumer,
                    (c_desc, a_ring, b_ring, ready, empty, c_smem, M, N, K) + (GROUP_M, STAGES, INSTR_K, num_warps),
                ),
                (_producer, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, GROUP_M, STAGES, B_K_MAJOR)),
            ],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def c_box(dtype: str, stages: int, pairs: bool = False) -> list[int]:
    """C's TMA box, the consumers' staging slab: the tile (16-bit types); fp8, one consumer warpgroup's rows of it
    (each stores its own), half of the tile's width at 4 stages (FP8_STAGES); the pairs' 128 x 128 tile, 64 x 128."""
    bm, bn, _ = PAIRS_TILE if pairs else TILES[dtype]
    if dtype != "fp8e4m3":
        return [bm, bn]
    return [bm // 2, bn // 2 if stages == 4 and not pairs else bn]


def descriptors(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    m: int,
    n: int,
    k: int,
    dtype: str = "fp16",
    stages: int = 3,
    pairs: bool = False,
) -> tuple:
    """Host-built descriptors of A (M x K), B (K x N, or N x K for fp8) and C (M x N, its box c_box's), with the
    buffers' row pitches (padded ones included) and the 128-byte-swizzled shared layouts wgmma reads."""
    bm, bn, bk = PAIRS_TILE if pairs else TILES[dtype]

    def desc(t, shape, box, element):
        layout = gl.NVMMASharedLayout.get_default_for(box, element)
        return TensorDescriptor(t, shape, [t.stride(0), 1], box, layout)

    element, out = GL_DTYPES[dtype], GL_DTYPES["bf16" if dtype == "fp8e4m3" else dtype]
    b_desc = desc(b, [n, k], [bn, bk], element) if dtype == "fp8e4m3" else desc(b, [k, n], [bk, bn], element)
    return desc(a, [m, k], [bm, bk], element), b_desc, desc(c, [m, n], c_box(dtype, stages, pairs), out)


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
    problem's inputs: (A, B), or (A, B, scale_a, scale_b) for fp8."""

    def __init__(
        self,
        inputs: tuple,
        c: torch.Tensor,
        stages: int,
        quarters: bool = False,
        pairs: bool = False,
        group_m: int | None = None,
        stream_k: bool = False,
        fault: bool = False,
        early_wait: bool | None = None,
    ):
        ops = gemm_operands(inputs, c, ("fp8e4m3",) if pairs else DTYPES)
        halves = ops.b_k_major and not (quarters or pairs)  # fp8's registered promotion schedule
        if early_wait and not halves:
            raise ValueError("early_wait: a schedule of the fp8 kernel's halves only (not 16-bit, quarters or pairs)")
        # the halves' next ready barrier waited on under the second half (_fp8_halves): on unless turned off
        self.early_wait = halves if early_wait is None else bool(early_wait)
        if (quarters or pairs) and not ops.b_k_major:
            raise ValueError("quarters, pairs: only fp8 is promoted, so only fp8 has a promotion schedule to choose")
        if quarters and pairs:
            raise ValueError("quarters and pairs are two promotion schedules: choose one")
        if stream_k and (not ops.b_k_major or quarters or pairs):
            raise ValueError("stream_k: built on the fp8 kernel's halves only (not 16-bit types, quarters or pairs)")
        if fault and not stream_k:
            raise ValueError("fault: FAULT_SK_NO_WAIT removes stream-K's fix-up wait: it needs stream_k")
        group_m = group_m if group_m is not None else FP8_GROUP_M if ops.b_k_major else GROUP_M
        if group_m < 1:
            raise ValueError(f"group_m must be >= 1 (got {group_m})")
        self.quarters, self.pairs, self.group_m = quarters, pairs, group_m
        check_stages(stages, PAIRS_STAGES if pairs else KERNEL.stages_for(ops.dtype))
        a, b = ops.a, ops.b
        m, n, k = ops.m, ops.n, ops.k
        self.ops = ops
        self.operands = Operands(a, b, c, b_k_major=ops.b_k_major)
        self.c = c
        # poisoned, and initialized for initcheck, which does not see the TMA store's writes
        self.c_padded = torch.full((m, -(-n // 8) * 8), float("nan"), dtype=c.dtype, device=c.device) if n % 8 else None
        a_k, b_k = self.operands.refresh()
        c_out = c if self.c_padded is None else self.c_padded
        descs = descriptors(a_k, b_k, c_out, m, n, k, ops.dtype, stages, pairs)
        self.stages, self.stream_k, self.fault = stages, stream_k, fault
        bm, bn, bk = PAIRS_TILE if pairs else TILES[ops.dtype]
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
            f"producer warp ({PRODUCER_REGS} regs), {stages}-stage TMA ring, persistent, GROUP_M={group_m}"
            + dtype_config(ops.dtype, mma="warpgroup_mma on B's box read transposed (.permute)")
            + (", promoted in quarters of N (unregistered)" if quarters else "")
            + (", K tiles promoted in pairs through two partials" if pairs else "")
            + (
                ", each K tile's ready barrier waited on under the K tile before's second half"
                if self.early_wait
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
            QUARTERS=self.quarters,
            PAIRS=self.pairs,
            STREAM_K=(2 if self.fault else 1) if self.stream_k else 0,
            EARLY_WAIT=int(self.early_wait),
        )
        if self.c_padded is not None:
            self.c.copy_(self.c_padded[:, : self.c.shape[1]])
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid)


# On the H200 (triton 3.6), racecheck reports hazards in this kernel only between Triton's own warp-specialization
# dispatch accesses: the consumer warps' stores of the partition state word at the region's entry and exit, and the
# worker warps' loads of it in their dispatch loop (SASS STS / LDS of one shared word, attributed to the kernel's
# first line); none at the ring, its mbarriers or C's staging tile. An empty warp_specialize kernel shows none
# (tools/racecheck_gluon_ws.py; the evidence: docs/sanitizer.md). memcheck, synccheck and initcheck run as usual.
RACECHECK_BLIND = (
    "racecheck flags Triton's warp-specialization dispatch word (compiler-generated entry/exit "
    "stores vs the worker warps' loads), not this kernel's ring or C tile "
    "(docs/sanitizer.md)"
)


class WarpSpecialized(TritonModule):
    """gemm_gluon_kernel as the kernel-module contract (suite.kernel) states it, for the registry."""

    stages = FP8_STAGES
    dtypes = DTYPES
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
        d: "stream-K is built on the fp8 kernel's promoted halves only" for d in ("fp16", "bf16")
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
