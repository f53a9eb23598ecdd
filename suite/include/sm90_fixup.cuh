// sm90_fixup.cuh: the deterministic fix-up of an output tile that several units share: each unit's fp32 partial
// through the workspace, summed in K order by the last unit to arrive. The order of the sum (sum_in_k_order) is the
// one every kernel that splits K uses, split-K's second pass too; the arrival protocol (fixup_publish, fixup_elect,
// fixup_done) serves stream-K's fix_up below and the decode kernel's splits alike. The slots' layout is each
// kernel's (stream-K: per-unit slots in register order; decode and split-K: per-split slices of M x N).
#pragma once

#include "sm90_tile_scheduler.cuh"

// A workspace slot holds one unit's fp32 partial for the whole BM x BLOCK_N tile, per consumer warpgroup, in the
// accumulators' own register order: value group q (4 consecutive accumulators) of thread t at float4 q x 128 + t,
// so that a warp's 16-byte stores and loads are contiguous. Rows past M are neither written nor read.
template <class T>
__device__ __forceinline__ float* slot_of(float* workspace, int slot, int wg) {
    constexpr int SLOT_FLOATS = T::WG_M_TILES * T::ACC * WG_THREADS;  // per consumer warpgroup
    return workspace + ((long long)slot * (T::THREADS / WG_THREADS - 1) + wg) * SLOT_FLOATS;
}

// Whether this thread's rows hold data (row < M) in m64 tile `mt`: rows 16 w + l / 4 and + 8 of it. The accumulator
// groups of 4 interleave the two (values 4j, 4j + 1 on the first row, 4j + 2, 4j + 3 on the second).
__device__ __forceinline__ bool rows_in_range(int M, int row0, int mt) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    return row0 + mt * 64 + warp * 16 + lane / 4 < M;  // the first of the thread's two rows; the store masks the second
}

// fix_up's loads in flight per contributor: the largest divisor of `groups` (a thread's float4 groups per m64 tile)
// that is at most FIXUP_CHUNK (18: the 144-wide tile's 18 groups at once, 72 registers beside its 72 accumulators;
// 16 for the 128- and 256-wide tiles)
constexpr int FIXUP_CHUNK = 18;
__host__ __device__ constexpr int fixup_chunk(int groups) {
    int chunk = groups < FIXUP_CHUNK ? groups : FIXUP_CHUNK;
    while (groups % chunk) --chunk;
    return chunk;
}

// A unit's partial into its slot (rows past M skipped), and CHUNK of a slot's float4 groups of m64 tile `mt` from
// group q0 on, all issued before any is used: the fix-ups' two halves of the workspace round trip.
template <class T>
__device__ __forceinline__ void store_slot(const float (&acc)[T::WG_M_TILES][T::ACC], float* slot, int M, int row0,
                                           int tid) {
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt) {
        if (!rows_in_range(M, row0, mt)) continue;
#pragma unroll
        for (int q = 0; q < T::ACC / 4; ++q)
            st_global_cg_v4(slot + ((mt * T::ACC / 4 + q) * WG_THREADS + tid) * 4, acc[mt][4 * q], acc[mt][4 * q + 1],
                            acc[mt][4 * q + 2], acc[mt][4 * q + 3]);
    }
}
template <class T, int CHUNK>
__device__ __forceinline__ void load_slot_chunk(const float* slot, int mt, int q0, int tid, float (&v)[CHUNK][4]) {
#pragma unroll
    for (int q = 0; q < CHUNK; ++q)
        ld_global_cg_v4(slot + ((mt * T::ACC / 4 + q0 + q) * WG_THREADS + tid) * 4, v[q][0], v[q][1], v[q][2], v[q][3]);
}

// The one order in which every kernel that splits K combines its partial sums (stream-K's fix_up below, the decode
// kernel's splits, split-K's second pass): contributor 0's partial, then 1, 2, ..., n - 1 added to it, whoever sums,
// so the result is the same bits run to run and no float is added atomically. `Part`: one contributor's share of the
// values this thread sums (a register array); load(j, part) issues contributor j's loads, add(j, part) folds them in
// (j == 0: takes them as they are). UNROLL > 0: that many contributors unrolled, their loads in flight before their
// adds; 0: as the compiler unrolls.
template <class Part, int UNROLL = 0, class Load, class Add>  // contributors >= 1
__device__ __forceinline__ void sum_in_k_order(int contributors, Load load, Add add) {
    auto step = [&](int j) {
        Part part;
        load(j, part);
        add(j, part);
    };
    step(0);  // peeled: in the loop, ptxas kept the j == 0 case's values live (many more registers, the decode kernel)
    if constexpr (UNROLL > 0) {
#pragma unroll UNROLL
        for (int j = 1; j < contributors; ++j) step(j);
    } else {
        for (int j = 1; j < contributors; ++j) step(j);
    }
}

// The fix-up's arrival, the one protocol of every kernel that combines partial sums (stream-K's fix_up below, the
// decode kernel's splits), in two steps: fixup_publish once this warpgroup's threads have each issued their partial
// (st.global.cg), then fixup_elect: thread `tid` 0 arrives on `counter` with acq_rel at gpu scope: its release
// publishes the warpgroup's partial (ordered by the named barrier before it), its acquire sees every earlier arrival's.
// The verdict, through the shared-memory word `flag`, reaches every thread: true on the last of `contributors`
// arrivals, which then sums every partial in K order and calls fixup_done. No float is added atomically: the sum's
// order is fixed whoever arrives last. fixup_arrive is the two at once.
__device__ __forceinline__ void fixup_publish(int wg) {
    named_barrier_sync(1 + wg, WG_THREADS);  // (named barrier 1 + wg: this warpgroup's 128 threads)
}
__device__ __forceinline__ bool fixup_elect(int* counter, int contributors, unsigned flag, int wg, int tid) {
    if (tid == 0) st_shared_u32(flag, atom_add_acq_rel_gpu(counter, 1) == contributors - 1 ? 1u : 0u);
    named_barrier_sync(1 + wg, WG_THREADS);  // the verdict (and the acquire behind it) reaches every thread
    return ld_shared_u32(flag);
}
__device__ __forceinline__ bool fixup_arrive(int* counter, int contributors, unsigned flag, int wg, int tid) {
    fixup_publish(wg);
    return fixup_elect(counter, contributors, flag, wg, tid);
}

// The last arrival's sum is done: the counter is zero again, ready for the next launch.
__device__ __forceinline__ void fixup_done(int* counter, int tid) {
    if (tid == 0) *counter = 0;
}

// This unit's partial for the tile: store it to its slot and arrive on the tile's counter. The last unit to arrive
// sums every contributor's slot (its own included, read back from L2) in K order into `acc`, whoever it is, so the
// result is bit-reproducible, and returns true: it then stores C.
template <class T>
__device__ __forceinline__ bool fix_up(float (&acc)[T::WG_M_TILES][T::ACC], const WorkUnit& u, float* workspace,
                                       int* counters, unsigned flag, int wg, int M, int row0) {
    const int tid = threadIdx.x % WG_THREADS;
    store_slot<T>(acc, slot_of<T>(workspace, u.slot(u.index), wg), M, row0, tid);
    fixup_publish(wg);
    int* counter = counters + u.tile * (T::THREADS / WG_THREADS - 1) + wg;
    if (!fixup_elect(counter, u.contributors, flag, wg, tid)) return false;  // a later unit of this tile sums
    // The sum reads (contributors x the tile) from L2 on this one block, so it is latency-bound unless many loads are
    // in flight: per contributor, CHUNK 16-byte loads per thread are issued before the first of their adds (64-72
    // registers beside the accumulators), one L2 round trip per contributor and chunk instead of one per load.
    constexpr int CHUNK = fixup_chunk(T::ACC / 4);
    static_assert((T::ACC / 4) % CHUNK == 0, "the accumulators split into whole chunks");
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt) {
        if (!rows_in_range(M, row0, mt)) continue;
#pragma unroll
        for (int q0 = 0; q0 < T::ACC / 4; q0 += CHUNK) {
            sum_in_k_order<float[CHUNK][4]>(
                u.contributors,
                [&](int j, float (&v)[CHUNK][4]) {
                    load_slot_chunk<T, CHUNK>(slot_of<T>(workspace, u.slot(j), wg), mt, q0, tid, v);
                },
                [&](int j, const float (&v)[CHUNK][4]) {
#pragma unroll
                    for (int q = 0; q < CHUNK; ++q)
#pragma unroll
                        for (int i = 0; i < 4; ++i)
                            acc[mt][4 * (q0 + q) + i] = j == 0 ? v[q][i] : acc[mt][4 * (q0 + q) + i] + v[q][i];
                });
        }
    }
    fixup_done(counter, tid);
    return true;
}
