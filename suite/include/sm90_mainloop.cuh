// sm90_mainloop.cuh: the two sides of a Hopper GEMM's TMA ring (ring.cuh's verbs): the producer thread's loads of
// each unit's K tiles, and a consumer warpgroup's mainloop over them. Every K tile is one wgmma_group (fence, issue,
// commit); per operand form: fp16/bf16 (and the decode kernel's swapped form) through overlapped_mainloop (wait<1>,
// the previous stage released one K tile behind), fp8 with promotion through issue_half / promote_half (wait, add
// into fp32, release).
#pragma once

#include "sm90_tile_scheduler.cuh"

// ---------------------------------------------------------------------------------------------------------------
// producer: one thread fills the ring, STAGES K tiles ahead of the consumers at most.
// ---------------------------------------------------------------------------------------------------------------

// Load K tile `k_tile` of output tile (m0, n0) into the stage at `write`.
template <int STAGES, class T, class E, bool TMA_STORE, int BM>
__device__ __forceinline__ void produce_k_tile(const TensorMap& tmap_a, const TensorMap& tmap_b,
                                               const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                               const RingPosition& write, int k_tile, int m0, int n0,
                                               unsigned stage_bytes) {
    // Wait until every consumer warp released this stage (its wgmma finished reading it). On the first lap the
    // parity names the phase before the barrier's first, which counts as complete: no wait.
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
    producer_acquire(smem.empty(write.stage), write);
#endif
    const unsigned full = smem.full(write.stage);
    producer_commit(full, stage_bytes);  // the phase completes when all these bytes land
    const int k0 = k_tile * T::BLOCK_K;
    tma_load_2d(smem.a(write.stage), &tmap_a, full, k0, m0);
    if constexpr (E::B_K_MAJOR) {
        tma_load_2d(smem.b(write.stage), &tmap_b, full, k0, n0);
    } else {
#pragma unroll
        for (int box = 0; box < T::B_BOXES; ++box)
            tma_load_2d(smem.b(write.stage) + box * T::B_BOX_BYTES, &tmap_b, full, n0 + box * T::BOX_N, k0);
    }
}

template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE, class E, int BM, int SCHEDULE>
__device__ __forceinline__ void producer(const TensorMap& tmap_a, const TensorMap& tmap_b,
                                         const SmemLayout<STAGES, Tile<BM, BLOCK_N, CONSUMERS, E>, TMA_STORE, BM>& smem,
                                         int tiles_m, int tiles_n, int num_k_tiles, int splits,
                                         unsigned stage_bytes) {
    using T = Tile<BM, BLOCK_N, CONSUMERS, E>;
    RingPosition write;  // smem_write_stage and its lap's parity
    const TileScheduler<SCHEDULE, PERSISTENT, BM, BLOCK_N> sched(tiles_m, tiles_n, num_k_tiles, splits);
    sched.walk([&](const WorkUnit& u) {  // the consumers' walk, unit for unit
        int m0, n0;
        sched.origin(u, m0, n0);
        for (int k_tile = u.k_begin; k_tile < u.k_begin + u.k_tiles; ++k_tile) {
            produce_k_tile<STAGES, T, E>(tmap_a, tmap_b, smem, write, k_tile, m0, n0, stage_bytes);
            write.advance<STAGES>();
        }
    });
}

// ---------------------------------------------------------------------------------------------------------------
// consumer: one warpgroup's mainloop over the K tiles of one unit.
// ---------------------------------------------------------------------------------------------------------------

// One wgmma group over the accumulators `acc` (a 1- or 2-dimensional float array): fence every accumulator register
// and wgmma_fence (their last reads and writes, by earlier wgmma or plain code, are ordered before these wgmma), then
// `issue()`'s wgmma, committed as one group. Every main loop issues its K tiles through this.
template <class Acc, class Issue>
__device__ __forceinline__ void wgmma_group(Acc& acc, Issue issue) {
    fence_accumulators(acc);
    wgmma_fence();
    issue();
    wgmma_commit_group();
}

// The main loop of the operand forms whose accumulators stay in wgmma (fp16 and bf16, and the decode kernel's swapped
// form): per K tile, consumer_wait on its stage, one wgmma group over it (`issue(stage)`), then wait<1>: the group
// runs on while the previous one is awaited, whose stage is then released (the group in flight still reads its own).
// After the last K tile, wait<0> and release the last stage. `release`: this thread arrives for its warp on empty[].
template <int STAGES, class Smem, class Acc, class Issue>
__device__ __forceinline__ void overlapped_mainloop(Acc& acc, const Smem& smem, RingPosition& read, int k_tiles,
                                                    bool release, Issue issue) {
    int released_stage = -1;  // the stage whose wgmma group may still run (released after the next group's wait)
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
        const int smem_read_stage = read.stage;
        consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
        wgmma_group(acc, [&] { issue(smem_read_stage); });
        // Let this K tile's group run on; wait until the previous one is done, so its stage may be refilled.
        wgmma_wait<1>();
        fence_accumulators(acc);
        if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));  // may be refilled
        released_stage = smem_read_stage;
        read.advance<STAGES>();
    }
    wgmma_wait<0>();  // every wgmma of this unit is done: the accumulators are final, the last stage is free
    fence_accumulators(acc);
    if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));
}

// fp8's promotion, one half of N at a time. issue_half: half `half` of m64 tile `mt` of the K tile in `stage`,
// summed from zero into `part` (4 wgmma, one group; the half is as wide as `part` holds: 2 x its REGS registers).
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int REGS>
__device__ __forceinline__ void issue_half(float (&part)[REGS], const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                           int stage, int wg_row0, int half, int mt) {
    constexpr int HALF_N = 2 * REGS;
    wgmma_group(part, [&] {  // its fence: the partial's last reads (its adds) come before these wgmma overwrite it
        // K-major B: HALF_N rows of N per half; each k-step 32 bytes further along both operands' rows
        const unsigned b = smem.b(stage) + half * HALF_N * SWIZZLE_BYTES;
        const unsigned a = smem.a(stage) + (wg_row0 + mt * 64) * SWIZZLE_BYTES;
#pragma unroll
        for (int kk = 0; kk < T::K_STEPS; ++kk)
            E::template mma_half<HALF_N>(part, smem_descriptor_at(a, kk * 32, 16, ATOM_BYTES),
                                         smem_descriptor_at(b, kk * 32, 16, ATOM_BYTES), kk == 0);
    });
}

// promote_half: `part`, whose group has completed, added to half `half` of one m64 tile's accumulators.
template <int ACC, int REGS>
__device__ __forceinline__ void promote_half(float (&acc)[ACC], float (&part)[REGS], int half) {
#pragma unroll
    for (int i = 0; i < REGS; ++i) {
        fence_operand(part[i]);  // read only after the wait that completed its group
        acc[half * REGS + i] += part[i];
    }
}

template <int STAGES, class T, class E, bool TMA_STORE, int BM, int BLOCK_N>
__device__ __forceinline__ void consumer_mainloop(float (&acc)[T::WG_M_TILES][T::ACC],
                                                  const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                                  RingPosition& read, int num_k_tiles, int wg_row0, bool release) {
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) acc[mt][i] = 0.f;  // (wgmma's scale-d = 0 on the first step would do too)

    if constexpr (E::PROMOTE) {
        // fp8: each K tile's sum is promoted into the fp32 accumulators (issue_half, promote_half).
        if constexpr (T::WG_M_TILES == 1 && (BLOCK_N <= 128 || BLOCK_N == 144)) {
            // Two partials, each one whole K tile of this warpgroup's m64 tile (acc + two partials: 3 x BLOCK_N / 2
            // registers): K tiles in pairs, both issued, the first added while the second runs, so the tensor pipe
            // waits for this warpgroup's adds once per two K tiles. (One partial in flight across the loop's back
            // edge while the other is added makes ptxas serialize every wgmma: C7514.)
            float part_a[T::ACC], part_b[T::ACC];
            int k_tile = 0;
            for (; k_tile + 1 < num_k_tiles; k_tile += 2) {
                const int first_stage = read.stage;
                consumer_wait(smem.full(first_stage), read);  // the TMA bytes of this K tile have all landed
                issue_half<STAGES, T, E>(part_a, smem, first_stage, wg_row0, 0, 0);
                read.advance<STAGES>();
                const int second_stage = read.stage;
                consumer_wait(smem.full(second_stage), read);  // the TMA bytes of the next K tile have all landed
                issue_half<STAGES, T, E>(part_b, smem, second_stage, wg_row0, 0, 0);
                read.advance<STAGES>();
                wgmma_wait<1>();  // the first K tile has completed (the second runs): its stage is read, promote it
                if (release) consumer_release(smem.empty(first_stage));
                promote_half(acc[0], part_a, 0);
                wgmma_wait<0>();  // the second has completed too
                if (release) consumer_release(smem.empty(second_stage));
                promote_half(acc[0], part_b, 0);
            }
            if (k_tile < num_k_tiles) {  // an odd count: the last K tile alone
                const int smem_read_stage = read.stage;
                consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
                issue_half<STAGES, T, E>(part_a, smem, smem_read_stage, wg_row0, 0, 0);
                wgmma_wait<0>();  // it has completed: its stage is read
                if (release) consumer_release(smem.empty(smem_read_stage));
                promote_half(acc[0], part_a, 0);
                read.advance<STAGES>();
            }
        } else {
            // One 128-wide half of one m64 tile at a time, each group waited for before its adds (64 registers of
            // partial beside up to 128 accumulators), so each stage is released as soon as its K tile is done. The
            // two consumer warpgroups run at their own pace: one's adds run under the other's wgmma.
            float part[64];
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                const int smem_read_stage = read.stage;
                consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
#pragma unroll
                for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                    for (int h = 0; h < BLOCK_N / 128; ++h) {
                        issue_half<STAGES, T, E>(part, smem, smem_read_stage, wg_row0, h, mt);
                        wgmma_wait<0>();  // the half's partial sum is final: promote it into fp32
                        promote_half(acc[mt], part, h);
                    }
                // every wgmma of this K tile completed: the producer may refill its stage
                if (release) consumer_release(smem.empty(smem_read_stage));
                read.advance<STAGES>();
            }
        }
    } else {
        overlapped_mainloop<STAGES>(acc, smem, read, num_k_tiles, release, [&](int stage) {
            // per k-step: K-major A 32 bytes further along each row; N-major B 16 rows (of K) further
            const unsigned a0 = smem.a(stage) + wg_row0 * SWIZZLE_BYTES, b0 = smem.b(stage);
#pragma unroll
            for (int kk = 0; kk < T::K_STEPS; ++kk) {
                const unsigned long long desc_b =
                    smem_descriptor_at(b0, kk * 16 * SWIZZLE_BYTES, T::B_BOX_BYTES, ATOM_BYTES);
#pragma unroll
                for (int mt = 0; mt < T::WG_M_TILES; ++mt)
                    E::template mma<BLOCK_N>(acc[mt],
                                             smem_descriptor_at(a0, mt * 64 * SWIZZLE_BYTES + kk * 32, 16, ATOM_BYTES),
                                             desc_b);
            }
        });
    }
}
