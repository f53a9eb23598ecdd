// sm90_tile_scheduler.cuh: the tile scheduler of the Hopper GEMM kernels (gemm_tma.cu's SCHEDULE): one interface,
// first_unit() / next_unit(unit), over the schedule policies of sm90_work_units.cuh, and each unit's output tile
// origin. walk(f) calls f(unit) for each of the block's units in that order; the producer and the consumers of a block
// both walk it, so they take the same units in the same order and meet at the ring stage for stage.
//   SCHED_TILES:    one unit per tile, all of K (SplitTiles with one split); PERSISTENT: block b takes tiles b,
//                   b + grid, ...
//   SCHED_SPLIT_K:  `splits` blocks per tile, each over an equal share of K (SplitTiles);
//   SCHED_STREAM_K: whole tiles in data-parallel waves, then the last tiles' iterations shared evenly (StreamK);
//   SCHED_SPLIT_TAIL: whole tiles in data-parallel waves, then the last, partial wave's tiles split in K into
//                   `splits` shares each (SplitTail).
#pragma once

#include "sm90_gemm.cuh"
#include "sm90_work_units.cuh"

template <int SCHEDULE, bool PERSISTENT>
struct SchedulePolicy {  // SCHED_TILES and SCHED_SPLIT_K
    using type = SplitTiles<PERSISTENT, SCHEDULE == SCHED_SPLIT_K>;
    __device__ __forceinline__ static type make(int tiles, int num_k_tiles, int splits) {
        return {tiles, num_k_tiles, SCHEDULE == SCHED_SPLIT_K ? splits : 1, (int)blockIdx.x, (int)gridDim.x};
    }
};
template <bool PERSISTENT>
struct SchedulePolicy<SCHED_STREAM_K, PERSISTENT> {
    using type = StreamK;
    __device__ __forceinline__ static type make(int tiles, int num_k_tiles, int) {
        return StreamK(tiles, num_k_tiles, blockIdx.x, gridDim.x);
    }
};

template <bool PERSISTENT>
struct SchedulePolicy<SCHED_SPLIT_TAIL, PERSISTENT> {
    static_assert(PERSISTENT, "the split tail follows data-parallel waves of persistent blocks");
    using type = SplitTail;
    __device__ __forceinline__ static type make(int tiles, int num_k_tiles, int splits) {
        return SplitTail(tiles, num_k_tiles, splits, blockIdx.x, gridDim.x);
    }
};

template <int SCHEDULE, bool PERSISTENT, int BM, int BLOCK_N>
struct TileScheduler {
    using Policy = SchedulePolicy<SCHEDULE, PERSISTENT>;
    int tiles_m, tiles_n;
    typename Policy::type policy;
    __device__ __forceinline__ TileScheduler(int tiles_m_, int tiles_n_, int num_k_tiles, int splits)
        : tiles_m(tiles_m_), tiles_n(tiles_n_), policy(Policy::make(tiles_m_ * tiles_n_, num_k_tiles, splits)) {}
    __device__ __forceinline__ WorkUnit first_unit() const { return policy.first_unit(); }
    __device__ __forceinline__ WorkUnit next_unit(const WorkUnit& done) const { return policy.next_unit(done); }
    // f(unit) for each of this block's units, in order: first_unit, then next_unit until the walk is over. Where the
    // grid has one block per unit (not PERSISTENT, not stream-K: the launcher gives SCHED_TILES exactly `tiles`
    // blocks and SCHED_SPLIT_K exactly tiles x splits, so no block is past the units), one call: straight-line code
    // (through a loop, ptxas took the epilogue's global-memory descriptor out of the uniform registers: an R2UR
    // before every store).
    template <class F>
    __device__ __forceinline__ void walk(F f) const {
        if constexpr (!PERSISTENT && SCHEDULE != SCHED_STREAM_K) {
            f(first_unit());
        } else {
            for (WorkUnit u = first_unit(); u.valid(); u = next_unit(u)) f(u);
        }
    }
    // the unit's output tile -> its first row and column (grouped rasterization)
    __device__ __forceinline__ void origin(const WorkUnit& u, int& m0, int& n0) const {
        tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
    }
};
