"""The Gluon GEMM's fp8 consumer partitions (suite/triton/gemm_gluon.py): the main loop that promotes each K tile's
sum into fp32, the epilogue that scales and stores C, and stream-K's in-kernel fix-up.

fp8 promotes each K tile's sum into fp32 (wgmma sums fp8 products with fewer mantissa bits than fp32), in two halves
of N so that the partial sum needs 64 registers a thread beside the 128 of the accumulators. A partial must be
complete before it is added, so a warpgroup's tensor-core work stops at every half, hidden only where the other
warpgroup's wgmma run meanwhile. So fp8 has two consumer partitions of one warpgroup each (64 rows of the tile), each
running on at its own pace, as the PTX kernel's two consumer warpgroups do: in one partition of 8 warps, Triton's
partition barriers would keep both warpgroups in step, both waiting and adding at once with the tensor pipe idle.
Triton's own promotion (``max_num_imprecise_acc=BLOCK_K``) adds the partial to the accumulator before the wgmma wait,
which makes ptxas serialize every wgmma (C7514); here the partial is summed from zero (``use_acc=False``) and added
after the wait, and ``_kept_here`` keeps LLVM from sinking those adds below the next half's wgmma (two partials
alive: spills)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from suite.triton.gemm_gluon_ring import next_stage, stream_k_split, tile_counts, tma_store
from suite.triton.gemm_parts import stream_k_range, stream_k_unit, tile_coords

FP8_CONSUMER_WARPS, FP8_CONSUMER_REGS = 4, 232  # each consumer partition one warpgroup, as the PTX consumers
_FP8_WARPS = gl.constexpr(FP8_CONSUMER_WARPS)  # the same, for the kernels


@gluon.jit
def _kept_here(x):
    """``x``, through an empty volatile asm (the PTX kernel's fence_operand): the adds that made it happen before
    the code that follows, instead of sinking below the next half's wgmma and keeping two partials alive."""
    return gl.inline_asm_elementwise("", "=f,0", [x], dtype=gl.float32, is_pure=False, pack=1)


@gluon.jit
def _fp8_halves(ring, left, right, part, kb, ke, smem_read_stage, lap, STAGES: gl.constexpr, WG: gl.constexpr):
    """fp8 MAINLOOP over K tiles [kb, ke) of one tile, on one warpgroup's rows: per K tile two halves of N, each
    summed from zero and promoted into fp32 (left, right) once complete. Returns (left, right, part) and the ring's
    next position.

    Each K tile's ready barrier is waited on under the K tile before's second half, so that between one half's wait
    and the next half's issue there are only the adds, which the other warpgroup's group in flight covers."""
    a_ring, b_ring, ready, empty = ring
    WG_M: gl.constexpr = a_ring.type.shape[1] // 2
    HALF: gl.constexpr = b_ring.type.shape[1] // 2  # K-major B: the ring's boxes are BLOCK_N x BLOCK_K
    mbarrier.wait(ready.index(smem_read_stage), lap, pred=kb < ke)  # the first K tile's TMA bytes
    for i in range(kb, ke):
        a_rows = a_ring.index(smem_read_stage).slice(WG * WG_M, WG_M)  # this warpgroup's rows of A
        b_stage = b_ring.index(smem_read_stage)
        # K-major B's half read as K x N, summed from zero: the K tile's own sum (wgmma's accumulator across its
        # k-steps)
        part = warpgroup_mma(a_rows, b_stage.slice(0, HALF).permute((1, 0)), part, use_acc=False, is_async=True)
        part = warpgroup_mma_wait(0, deps=(part,))  # the first half's partial sum is final: promote it
        left = _kept_here(left + part)
        part = warpgroup_mma(a_rows, b_stage.slice(HALF, HALF).permute((1, 0)), part, use_acc=False, is_async=True)
        following_stage, following_lap = next_stage(smem_read_stage, lap, STAGES)
        # the next K tile's TMA bytes, waited for while this half runs
        mbarrier.wait(ready.index(following_stage), following_lap, pred=i + 1 < ke)
        part = warpgroup_mma_wait(0, deps=(part,))  # the second half's too
        right = _kept_here(right + part)
        # both halves have read the stage: this warpgroup releases it (empty[] counts both consumers)
        mbarrier.arrive(empty.index(smem_read_stage))
        smem_read_stage, lap = following_stage, following_lap
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
        tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
    else:  # a slab of half the width: the left half, then the right
        slab.store((left * scale).to(c_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
        tma_store(c_desc, [m0 + WG * WG_M, n0], slab)
        tma.store_wait(0)  # the left half's store has finished reading the slab
        slab.store((right * scale).to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [m0 + WG * WG_M, n0 + HALF], slab)


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
def fp8_consumer(
    memory,
    sk_dp,  # STREAM_K: stream_k_plan's dp_tiles, sk_iters, sk_programs; else None
    sk_iters,
    sk_programs,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    WG: gl.constexpr,  # 0 or 1: this partition's warpgroup, rows WG x 64 .. + 63 of the tile
    STREAM_K: gl.constexpr = 0,  # 1: the last wave's K iterations shared (GluonGemm's stream_k); 2: FAULT_SK_NO_WAIT
):
    """fp8: one warpgroup's 64 rows of the 128 x 256 tile, each K tile promoted into fp32 in two halves of N.

    STREAM_K: the whole waves' tiles as above, then this program's share of the last wave's K iterations, one unit
    per tile it touches. A unit that starts inside its tile publishes its partial sums (_fp8_publish); the unit that
    holds the tile's first K tile adds the later units' partials in K order (_fp8_fix_up) and stores C.

    ``memory``: (c_desc, ring, c_smem, scale_a, scale_b, workspace, flags), gemm_gluon_kernel's tuple of what both
    consumer partitions address: C's descriptor, the ring, the C slabs, the scales' pointers, and with STREAM_K the
    partials' slots (one per program and warpgroup, fp32) and a flag per slot (int32, zero between launches), else
    None."""
    c_desc, ring, c_smem, scale_a, scale_b, workspace, flags = memory
    a_ring, b_ring = ring[0], ring[1]  # their shapes give the tile's
    WG_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_ring.type.shape[1]  # K-major B: the ring's boxes are BLOCK_N x BLOCK_K
    BLOCK_M: gl.constexpr = a_ring.type.shape[1]
    BLOCK_K: gl.constexpr = a_ring.type.shape[2]
    HALF: gl.constexpr = BLOCK_N // 2
    INSTR_K: gl.constexpr = 32  # wgmma's K step for fp8
    half_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[_FP8_WARPS, 1], instr_shape=[16, HALF, INSTR_K]
    )
    tiles_m, tiles_n, k_tiles = tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    scale = gl.load(scale_a) * gl.load(scale_b)
    part = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)  # a K tile's half, summed from zero
    smem_read_stage = 0
    lap = 0
    dp_tiles, sk_iters, sk_programs = stream_k_split(tiles_m * tiles_n, sk_dp, sk_iters, sk_programs, STREAM_K)
    for tile in range(gl.program_id(0), dp_tiles, gl.num_programs(0)):
        m0, n0 = tile_coords(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        left = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
        right = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
        # -- MAINLOOP over all of K, then EPILOGUE --
        left, right, part, smem_read_stage, lap = _fp8_halves(
            ring, left, right, part, 0, k_tiles, smem_read_stage, lap, STAGES, WG
        )
        _fp8_epilogue(c_desc, c_smem, left, right, scale, m0, n0, WG)
    if STREAM_K:
        # this program's range of the last wave's K iterations (empty past sk_programs), one unit per tile
        it, end = stream_k_range(gl.program_id(0), sk_iters, sk_programs)
        while it < end:
            t, kb, ke = stream_k_unit(it, end, k_tiles)
            m0, n0 = tile_coords(dp_tiles + t, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
            left = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
            right = gl.zeros((WG_M, HALF), dtype=gl.float32, layout=half_layout)
            left, right, part, smem_read_stage, lap = _fp8_halves(
                ring, left, right, part, kb, ke, smem_read_stage, lap, STAGES, WG
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
