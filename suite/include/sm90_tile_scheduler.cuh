// sm90_tile_scheduler.cuh: how a Hopper GEMM's work is cut into units of (output tile, range of K tiles), which
// the producer and the consumers walk in the same order (gemm_tma.cu's SCHEDULE):
//   SCHED_TILES:    one unit per tile, all of K (TileWalk); persistent: block b takes tiles b, b + grid, ...
//   SCHED_SPLIT_K:  `splits` blocks per tile, each over an equal share of K (SplitK);
//   SCHED_STREAM_K: whole tiles in data-parallel waves, then the last tiles' iterations shared evenly (StreamK).
#pragma once

#include "sm90_gemm.cuh"

// SCHED_TILES's walk over the output tiles: block b takes tiles b, b + grid, ... (PERSISTENT) or tile b.
template <int BM, int BLOCK_N>
struct TileWalk {
    int tiles_m, tiles_n, count;
    __device__ __forceinline__ TileWalk(int tiles_m_, int tiles_n_)
        : tiles_m(tiles_m_), tiles_n(tiles_n_), count(tiles_m * tiles_n) {}
    __device__ __forceinline__ int first() const { return blockIdx.x; }
    __device__ __forceinline__ int step() const { return gridDim.x; }
    __device__ __forceinline__ void origin(int tile, int& m0, int& n0) const {
        tile_origin<BM, BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
    }
    // f(tile, m0, n0) for each of this block's tiles, in order
    template <bool PERSISTENT, class F>
    __device__ __forceinline__ void for_each(F f) const {
        for (int tile = first(); tile < count; tile += PERSISTENT ? step() : count) {
            int m0, n0;
            origin(tile, m0, n0);
            f(tile, m0, n0);
        }
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Work units of the split-K and stream-K schedules (SCHED_TILES walks whole tiles in the kernels below)
// ---------------------------------------------------------------------------------------------------------------

struct WorkUnit {
    int tile;          // the output tile
    int k_begin;       // its first K tile
    int k_tiles;       // how many K tiles it covers (0: a split past the end of K; its partial is zero)
    int contributors;  // the units that share this tile (1: this one covers all of K and stores C itself)
    int index;         // this unit's place among them, in K order
    // workspace slot of the tile's j-th contributor: slot_base + slot_step x j, plus first_adjust for j = 0
    int slot_base, slot_step, first_adjust;
    __device__ __forceinline__ int slot(int j) const { return slot_base + slot_step * j + (j == 0 ? first_adjust : 0); }
};

// split-K: `splits` blocks per tile (grid = tiles x splits), block b takes split b / tiles of tile b % tiles (split
// major: the blocks that read the same K range of A and B neighbour, as in the Triton split-K), an equal share of the
// K tiles (the first num_k_tiles % splits shares one more). Its partial goes to workspace slice `index` (the split),
// which split_k_reduce sums.
struct SplitK {
    int tiles, num_k_tiles, splits;
    __device__ __forceinline__ WorkUnit unit() const {
        const int tile = blockIdx.x % tiles;
        const int split = blockIdx.x / tiles;
        const int base = num_k_tiles / splits, extra = num_k_tiles % splits;
        const int k_begin = split * base + min(split, extra);
        return {tile, k_begin, base + (split < extra ? 1 : 0), splits, split, tile * splits, 1, 0};
    }
};

// stream-K, with data-parallel waves first (CUTLASS's "DP + SK" hybrid): with G persistent blocks and at least 2G
// tiles, the first (tiles / G - 1) x G tiles are whole units dealt round-robin (block c takes c, c + G, ...), so
// the blocks in flight work on neighbouring tiles and share A and B in L2; the G to 2G tiles left are shared
// stream-K: their I = tiles_left x K tiles iterations are split evenly, block c taking [c I / G, (c + 1) I / G),
// walked as units, one per tile it touches. Fewer than 2G tiles (decode, long K): all stream-K.
// A stream-K tile's contributors are the consecutive blocks first..last whose ranges meet it. A block has at most
// two partial units (its first and its last), so its workspace slots are 2c and 2c + 1: every contributor but the
// first starts its range inside this tile (its first unit, slot 2c); the first one's range starts in this tile too
// (slot 2 first) or in an earlier one (this is its last unit, 2 first + 1).
struct StreamK {
    int tiles, num_k_tiles;
    int dp_tiles;     // tiles done whole, data-parallel, before the stream-K part
    long long iters;  // (tiles - dp_tiles) x num_k_tiles: the stream-K iterations
    __device__ __forceinline__ StreamK(int tiles_, int num_k_tiles_) : tiles(tiles_), num_k_tiles(num_k_tiles_) {
        const int g = gridDim.x;
        dp_tiles = tiles >= 2 * g ? (tiles / g - 1) * g : 0;
        iters = (long long)(tiles - dp_tiles) * num_k_tiles;
    }
    __device__ __forceinline__ int dp_units() const {  // this block's data-parallel tiles
        return ((int)(dp_tiles - 1 - blockIdx.x) + (int)gridDim.x) / (int)gridDim.x;
    }
    __device__ __forceinline__ WorkUnit dp_unit(int i) const {
        return {(int)blockIdx.x + i * (int)gridDim.x, 0, num_k_tiles, 1, 0, 0, 0, 0};
    }
    __device__ __forceinline__ long long start(int c) const { return (long long)c * iters / gridDim.x; }
    // The block whose range holds stream-K iteration i: the largest c with start(c) <= i.
    __device__ __forceinline__ int block_of(long long i) const { return (int)(((i + 1) * gridDim.x - 1) / iters); }
    __device__ __forceinline__ WorkUnit unit_at(long long it, long long end) const {
        const int tile = (int)(it / num_k_tiles), k_begin = (int)(it % num_k_tiles);
        const int k_tiles = (int)min((long long)(num_k_tiles - k_begin), end - it);
        const long long tile_start = (long long)tile * num_k_tiles;
        const int first = block_of(tile_start);
        const int last = block_of(tile_start + num_k_tiles - 1);
        return {dp_tiles + tile, k_begin, k_tiles, last - first + 1, (int)blockIdx.x - first,
                2 * first, 2, start(first) < tile_start ? 1 : 0};
    }
};

// The one walk over a block's work units, in the order both sides of the ring take them (the producer's loads and
// the consumers' mainloops must meet stage for stage): for_each_unit(f) calls f(unit, m0, n0) for each unit of this
// block, with the unit's output tile origin. SCHED_TILES: one unit per tile, all of K (PERSISTENT: tiles b, b + grid,
// ...; else tile b); SCHED_SPLIT_K: this block's one split; SCHED_STREAM_K: the data-parallel tiles, then the units of
// this block's stream-K range.
template <int SCHEDULE, bool PERSISTENT, int BM, int BLOCK_N>
struct TileScheduler {
    int tiles_m, tiles_n, num_k_tiles, splits;
    template <class F>
    __device__ __forceinline__ void for_each_unit(F f) const {
        const int num_tiles = tiles_m * tiles_n;
        if constexpr (SCHEDULE == SCHED_TILES) {
            TileWalk<BM, BLOCK_N>(tiles_m, tiles_n).template for_each<PERSISTENT>([&](int tile, int m0, int n0) {
                f(WorkUnit{tile, 0, num_k_tiles, 1, 0, 0, 0, 0}, m0, n0);
            });
        } else if constexpr (SCHEDULE == SCHED_SPLIT_K) {
            const WorkUnit u = SplitK{num_tiles, num_k_tiles, splits}.unit();
            int m0, n0;
            tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
            f(u, m0, n0);
        } else {
            const StreamK sched(num_tiles, num_k_tiles);
            auto visit = [&](const WorkUnit& u) {
                int m0, n0;
                tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
                f(u, m0, n0);
            };
            for (int i = 0; i < sched.dp_units(); ++i) visit(sched.dp_unit(i));
            const long long end = sched.start(blockIdx.x + 1);
            for (long long it = sched.start(blockIdx.x); it < end;) {
                const WorkUnit u = sched.unit_at(it, end);
                visit(u);
                it += u.k_tiles;
            }
        }
    }
};
