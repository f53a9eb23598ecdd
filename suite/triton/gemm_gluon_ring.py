"""The Gluon GEMM's TMA ring (suite/triton/gemm_gluon.py): the ring position, the tile walk both partitions share,
and the producer partition that fills the ring.

The ring is STAGES deep, each stage guarded by a *ready* mbarrier (completed by the producer's expect and the TMA
bytes) and an *empty* one (completed by each consumer partition's arrival once the wgmma that read the stage has
completed). The producer runs ahead across tiles, bounded only by the ring; producer and consumers walk the same
units (whole tiles, then with stream-K this program's share of the last wave's K iterations: gemm_parts'
``stream_k_range`` / ``stream_k_unit``), so the ring's stages meet in order. The partitions and their steps take the
ring as one tuple, ``ring = (a_ring, b_ring, ready, empty)``."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from suite.triton.gemm_parts import stream_k_range, stream_k_unit, tile_coords

# The TMA copies under the names of the installed Triton: async_copy_global_to_shared / async_copy_shared_to_global
# (Triton 3.6) became async_load / async_store (3.9, where the old names raise).
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def next_stage(stage, lap, STAGES: gl.constexpr):
    """The ring position after (stage, lap): the next stage, wrapping to the first with the lap's parity flipped."""
    stage += 1
    if stage == STAGES:
        stage = 0
        lap ^= 1
    return stage, lap


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
    """The ring's mbarriers, initialized: ready[s], completed by the producer's expect and the TMA bytes; empty[s], by
    one arrival of each of CONSUMERS consumer partitions."""
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=CONSUMERS)
    return ready, empty


@gluon.jit
def tile_counts(M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    """Both partitions walk the same persistent schedule: C's tiles along M and N, and the K tiles of each."""
    return gl.cdiv(M, BLOCK_M), gl.cdiv(N, BLOCK_N), gl.cdiv(K, BLOCK_K)


@gluon.jit
def stream_k_split(tiles, sk_dp_tiles, sk_iters, sk_programs, STREAM_K: gl.constexpr):
    """(dp_tiles, sk_iters, sk_programs): the host's stream_k_plan with STREAM_K, else every tile whole."""
    if STREAM_K:
        return sk_dp_tiles, sk_iters, sk_programs
    else:
        return tiles, 0, 1


@gluon.jit
def _load_k_tile(
    a_desc, b_desc, ring, m0, n0, kt, smem_write_stage, lap, STAGES: gl.constexpr, B_K_MAJOR: gl.constexpr
):
    """The producer's step: K tile ``kt`` of the tile at (m0, n0) into the ring's next stage; returns the ring's next
    position (smem_write_stage, lap)."""
    a_ring, b_ring, ready, empty = ring
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    # wait until the consumers released this stage (its previous lap's wgmma completed); on the first lap the parity
    # of the phase before the barrier's first one passes at once
    mbarrier.wait(empty.index(smem_write_stage), lap ^ 1)
    # arm the stage's ready barrier with the bytes both copies will deliver, then issue them (zero-filled past the
    # edges of A and B)
    mbarrier.expect(ready.index(smem_write_stage), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma_load(a_desc, [m0, kt * BLOCK_K], ready.index(smem_write_stage), a_ring.index(smem_write_stage))
    if B_K_MAJOR:
        tma_load(b_desc, [n0, kt * BLOCK_K], ready.index(smem_write_stage), b_ring.index(smem_write_stage))
    else:
        tma_load(b_desc, [kt * BLOCK_K, n0], ready.index(smem_write_stage), b_ring.index(smem_write_stage))
    smem_write_stage, lap = next_stage(smem_write_stage, lap, STAGES)
    return smem_write_stage, lap


@gluon.jit
def producer(
    a_desc,
    b_desc,
    ring,
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
    """The producer partition (one warp, few registers): TMA loads of every K tile of this program's units."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0] if B_K_MAJOR else b_desc.block_type.shape[1]
    tiles_m, tiles_n, k_tiles = tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    dp_tiles, sk_iters, sk_programs = stream_k_split(tiles_m * tiles_n, sk_dp, sk_iters, sk_programs, STREAM_K)
    smem_write_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), dp_tiles, gl.num_programs(0)):
        m0, n0 = tile_coords(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        for kt in range(k_tiles):
            smem_write_stage, lap = _load_k_tile(
                a_desc, b_desc, ring, m0, n0, kt, smem_write_stage, lap, STAGES, B_K_MAJOR
            )
    if STREAM_K:
        # this program's range of the last wave's K iterations, one unit per tile it touches (the consumers walk
        # the same units)
        it, end = stream_k_range(gl.program_id(0), sk_iters, sk_programs)
        while it < end:
            t, kb, ke = stream_k_unit(it, end, k_tiles)
            m0, n0 = tile_coords(dp_tiles + t, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
            for kt in range(kb, ke):
                smem_write_stage, lap = _load_k_tile(
                    a_desc, b_desc, ring, m0, n0, kt, smem_write_stage, lap, STAGES, B_K_MAJOR
                )
            it += ke - kb
