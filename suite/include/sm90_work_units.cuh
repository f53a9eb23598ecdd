// sm90_work_units.cuh: how a Hopper GEMM's work is cut into units of (output tile, range of K tiles), and the order in
// which one block walks them: the schedule policies behind the tile scheduler (sm90_tile_scheduler.cuh), each with
// the same two calls, first_unit() and next_unit(unit), which the producer and the consumers of a block both make, so
// that they meet at the ring stage for stage. Integer arithmetic only, on the block index and grid size the policy is
// given: the same code runs on the host (tests/test_tile_scheduler.py walks it for every block of many schedules).
//   SplitTiles: tiles x splits units, split-major (the data-parallel tiles are splits = 1; split-K and the decode
//               kernel's splits are more), block b taking unit b, then b + grid, ... when persistent;
//   StreamK:    whole tiles in data-parallel waves, then the last tiles' iterations shared evenly;
//   SplitTail:  whole tiles in data-parallel waves, then the last, partial wave's tiles each split in K.
#pragma once

#ifndef PIPESUITE_HD
#define PIPESUITE_HD __host__ __device__ __forceinline__
#endif

struct WorkUnit {
    int tile;          // the output tile; -1: the walk is over
    int k_begin;       // its first K tile
    int k_tiles;       // how many K tiles it covers (0: a split past the end of K; its partial is zero)
    int contributors;  // the units that share this tile (1: this one covers all of K and stores C itself)
    int index;         // this unit's place among them, in K order
    // workspace slot of the tile's j-th contributor: slot_base + slot_step x j, plus first_adjust for j = 0
    int slot_base, slot_step, first_adjust;
    PIPESUITE_HD bool valid() const { return tile >= 0; }
    PIPESUITE_HD int slot(int j) const { return slot_base + slot_step * j + (j == 0 ? first_adjust : 0); }
};

PIPESUITE_HD WorkUnit end_of_walk() { return {-1, 0, 0, 0, 0, 0, 0, 0}; }

// tiles x splits units, unit u taking split u / tiles of tile u % tiles (split-major: the blocks that read the same K
// range of A and B neighbour, as in the Triton split-K), an equal share of the K tiles (the first num_k_tiles % splits
// shares one more). A split's partial is the kernel's to place (split-K and the decode kernel: M x N slice `index`);
// slot() is stream-K's and is 0 here.
// Block b takes unit b; PERSISTENT: then b + grid, b + 2 grid, ... SPLIT false: one split, unit u is tile u (the
// data-parallel tiles, with no division in the walk).
template <bool PERSISTENT, bool SPLIT = true>
struct SplitTiles {
    int tiles, num_k_tiles, splits, block, grid;
    PIPESUITE_HD WorkUnit unit(int u) const {
        // (a grid of one block per unit has no block past them)
        if (PERSISTENT && u >= tiles * splits) return end_of_walk();
        if constexpr (!SPLIT) return {u, 0, num_k_tiles, 1, 0, 0, 0, 0};
        // u is never negative, and unsigned division is the shorter sequence
        const int tile = (int)((unsigned)u % (unsigned)tiles), split = (int)((unsigned)u / (unsigned)tiles);
        const int base = num_k_tiles / splits, extra = num_k_tiles % splits;
        const int k_begin = split * base + (split < extra ? split : extra);
        return {tile, k_begin, base + (split < extra ? 1 : 0), splits, split, 0, 0, 0};
    }
    PIPESUITE_HD WorkUnit first_unit() const { return unit(block); }
    PIPESUITE_HD WorkUnit next_unit(const WorkUnit& done) const {
        return PERSISTENT ? unit(done.index * tiles + done.tile + grid) : end_of_walk();  // unit number + grid
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
// (slot 2 first) or in an earlier one (this is its last unit, 2 first + 1). The grid is at most I (the launcher's
// cap): every block's range then holds an iteration, so the contributors first..last all arrive at the fix-up.
struct StreamK {
    int tiles, num_k_tiles, block, grid;
    int dp_tiles;     // tiles done whole, data-parallel, before the stream-K part
    long long iters;  // (tiles - dp_tiles) x num_k_tiles: the stream-K iterations
    PIPESUITE_HD StreamK(int tiles_, int num_k_tiles_, int block_, int grid_)
        : tiles(tiles_), num_k_tiles(num_k_tiles_), block(block_), grid(grid_) {
        dp_tiles = tiles >= 2 * grid ? (tiles / grid - 1) * grid : 0;
        iters = (long long)(tiles - dp_tiles) * num_k_tiles;
    }
    PIPESUITE_HD long long start(int c) const { return (long long)c * iters / grid; }
    // The block whose range holds stream-K iteration i: the largest c with start(c) <= i.
    PIPESUITE_HD int block_of(long long i) const { return (int)(((i + 1) * grid - 1) / iters); }
    PIPESUITE_HD WorkUnit whole_tile(int tile) const { return {tile, 0, num_k_tiles, 1, 0, 0, 0, 0}; }
    // The unit of this block's range that starts at stream-K iteration `it`: to the end of its tile or of the range.
    PIPESUITE_HD WorkUnit unit_at(long long it) const {
        const long long end = start(block + 1);
        if (it >= end) return end_of_walk();
        const int tile = (int)(it / num_k_tiles), k_begin = (int)(it % num_k_tiles);
        const long long left = end - it;
        const int k_tiles = left < num_k_tiles - k_begin ? (int)left : num_k_tiles - k_begin;
        const long long tile_start = (long long)tile * num_k_tiles;
        const int first = block_of(tile_start);
        const int last = block_of(tile_start + num_k_tiles - 1);
        return {dp_tiles + tile, k_begin, k_tiles, last - first + 1, block - first,
                2 * first, 2, start(first) < tile_start ? 1 : 0};
    }
    PIPESUITE_HD WorkUnit first_unit() const { return block < dp_tiles ? whole_tile(block) : unit_at(start(block)); }
    PIPESUITE_HD WorkUnit next_unit(const WorkUnit& done) const {
        if (done.tile < dp_tiles) {  // a data-parallel tile: the block's next one, or its stream-K range
            const int tile = done.tile + grid;
            return tile < dp_tiles ? whole_tile(tile) : unit_at(start(block));
        }
        // the iteration after the unit's last
        return unit_at((long long)(done.tile - dp_tiles) * num_k_tiles + done.k_begin + done.k_tiles);
    }
};

// Data-parallel waves, then the tail split in K: with G persistent blocks, the first (tiles / G) x G tiles are whole
// units dealt round-robin (block c takes c, c + G, ...); the R = tiles % G tiles left, which would make a last wave
// that keeps only R of the G blocks busy, are each cut into `splits` shares of K (the launcher's count), R x splits
// units dealt round-robin too: block c takes units c, c + G, ..., unit v being share v / R of tail tile v % R
// (split-major, as SplitTiles: the blocks that run together read the same K range, so each panel of B and A is read
// from HBM once and shared in L2, where stream-K's ranges start anywhere in K). Where R x splits <= G (a thin last
// wave) that is one unit per block and the last round lasts 1 / splits of a tile; a thicker one takes
// ceil(R x splits / G) rounds of 1 / splits (R = 80 of G = 132 in 3 shares: two rounds of a third, not a whole
// round). The fix-up never waits (the last contributor to arrive sums), so a tile's shares may run in different
// rounds. A tail tile's contributors write slots (its place in the tail) x splits + share; splits = 1: the plain
// persistent walk.
struct SplitTail {
    int tiles, num_k_tiles, splits, block, grid;
    int dp_tiles;  // whole waves of tiles, done whole before the tail
    PIPESUITE_HD SplitTail(int tiles_, int num_k_tiles_, int splits_, int block_, int grid_)
        : tiles(tiles_), num_k_tiles(num_k_tiles_), splits(splits_), block(block_), grid(grid_) {
        dp_tiles = tiles / grid * grid;
    }
    PIPESUITE_HD WorkUnit whole_tile(int tile) const { return {tile, 0, num_k_tiles, 1, 0, 0, 0, 0}; }
    // unit v of the tail's tiles x splits (SplitTiles' split-major deal; slots (its place in the tail) x splits), or
    // the end of the block's walk past the last unit
    PIPESUITE_HD WorkUnit tail_unit(int v) const {
        const int tail = tiles - dp_tiles;
        if (v >= tail * splits) return end_of_walk();
        WorkUnit u = SplitTiles<false>{tail, num_k_tiles, splits, block, grid}.unit(v);
        u.slot_base = u.tile * splits;
        u.slot_step = 1;
        u.tile += dp_tiles;
        return u;
    }
    PIPESUITE_HD WorkUnit first_unit() const { return block < dp_tiles ? whole_tile(block) : tail_unit(block); }
    PIPESUITE_HD WorkUnit next_unit(const WorkUnit& done) const {
        if (done.tile >= dp_tiles)  // a tail unit: the block's next one, G units on (unit number = split x R + tile)
            return tail_unit(done.index * (tiles - dp_tiles) + (done.tile - dp_tiles) + grid);
        const int tile = done.tile + grid;
        return tile < dp_tiles ? whole_tile(tile) : tail_unit(block);
    }
};
