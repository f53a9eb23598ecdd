// gemm_tma.cu: C = A * B on Hopper, fp32 accumulate; fp16, bf16 or fp8 e4m3 in, fp16 or bf16 out.
//
// Hopper's own pipeline, where gemm.cu has Ampere's. Warp-specialized: one producer thread issues TMA copies, one or
// two consumer warpgroups issue wgmma, and the two sides meet at two mbarriers per ring stage (ring.cuh):
//
//   global --TMA (cp.async.bulk.tensor)--> STAGES-deep shared-memory ring --wgmma.mma_async (operands read straight
//   from shared memory)--> fp32 accumulators in registers --epilogue--> C
//
//   full[s]:  the producer arrives with expect_tx(the stage's bytes); the TMA unit completes the phase when they land.
//             Consumers wait on it before their wgmma read the stage.
//   empty[s]: every consumer warp arrives once its wgmma have finished reading the stage; the producer waits on it
//             before refilling the stage. That wait is what keeps the producer from overwriting a stage in use.
//   Both sides walk the ring in the same order; a stage index and a phase bit (flipped at each wrap) name the lap.
//
// Block tile BM (64, 128, or 256 on two consumer warpgroups) x BLOCK_N (128, 192 or 256) x BLOCK_K, where a K tile is
// one 128-byte swizzled row of each operand row: BLOCK_K = 64 for 2-byte types, 128 for fp8. Each consumer warpgroup
// owns BM / CONSUMERS rows as one or two m64 wgmma tiles across the full BLOCK_N: 128 x 256 with 2 warpgroups gives
// each 64 x 256 (128 fp32 registers per thread); 128 x 128 with 1 gives it 2 x (64 x 128), and so does 256 x 128 with
// 2; 64 x 256 with 1 gives it 64 x 256.
//
// Operands (element type E): A is M x K, row-major (K-major). B is K x N row-major (N-major) for fp16 and bf16, which
// wgmma reads transposed; for fp8 wgmma takes only K-major operands, so B comes as N x K, row-major (K-major). fp8
// scales (one fp32 per operand) are applied to the fp32 accumulators in the epilogue, before the bf16 store.
//
// Shared-memory layout of a stage, all 128-byte swizzled by the TMA unit exactly as wgmma's descriptors expect
// (16-byte chunk c of each 128-byte row r of a 1024-byte atom is stored at chunk c ^ (r % 8)):
//   A tile: BM rows (M) x 128 B (K), K-major. One TMA box.
//   B tile, N-major (fp16, bf16): BLOCK_N / 64 boxes, each 64 rows (K) x 64 elements (N) = 64 rows of 128 B.
//   B tile, K-major (fp8): one box of BLOCK_N rows (N) x 128 B (K), laid out as the A tile.
// wgmma descriptors (start address, LBO, SBO, swizzle mode):
//   K-major (A; fp8's B): start = tile + row * 128 B + k-step * 32 B; SBO = 1024 B between 8-row atoms; LBO unused.
//   B, N-major: start = tile + k-step * 16 rows * 128 B; SBO = 1024 B between 8-row (K) atoms; LBO = one box
//               (64 rows * 128 B = 8 KiB) between 64-column (N) blocks.
//
// SCHEDULE: how the work is cut into units of (output tile, range of K tiles), which producer and consumers walk in
// the same order:
//   SCHED_TILES:    one unit per tile, all of K. PERSISTENT: one block per SM walks the tiles (grouped
//                   rasterization, GROUP_M tile rows at a time) and the ring runs on across tiles, so the producer
//                   prefetches the next tile while the consumers store this one. Otherwise one block per tile.
//   SCHED_SPLIT_K:  `splits` blocks per tile, each over an equal share of K (the launcher chooses the split count).
//   SCHED_STREAM_K: persistent blocks take whole tiles in data-parallel waves while at least two waves remain, then
//                   share the last tiles' multiply-add iterations evenly; a block's range may start or end inside a
//                   tile.
// A unit that covers a tile's whole K range stores C directly. Otherwise:
//   split-K: each split stores its fp32 partial, unscaled, into its own M x N slice of the workspace, and a second
//            kernel (split_k_reduce, launched after it on the same stream) sums the slices in K order from zero,
//            spread over the whole GPU: S partial tiles summed on one SM would read S x the tile through one SM;
//   stream-K: a unit (a tile's share of one block's iterations) writes its fp32 partial to a workspace slot and
//            arrives on the tile's counter; the last of the tile's units to arrive (a tile has 2 or 3) sums every
//            partial in K order and stores C, then resets the counter for the next launch.
// Either way the order of the additions is the same whoever runs first: the result is bit-reproducible run to run,
// and no float is ever added atomically.
//
// TMA_STORE: the epilogue writes each consumer's accumulators (16-bit) into a swizzled shared-memory staging tile
// and one thread per warpgroup stores it with TMA (whole 128-byte rows instead of 4-byte pieces per thread); the
// store runs on while the warpgroup starts its next tile. Needs C's rows at a 16-byte pitch (N % 8 == 0); otherwise,
// and when TMA_STORE is false, each thread stores its accumulators straight to C.
//
// Template parameters: STAGES (ring depth, 2..), BLOCK_N (128, 192 or 256; fp8 also 144), CONSUMERS (1 or 2
// warpgroups), PERSISTENT, TMA_STORE, E (F16, BF16, E4M3), BM (64, 128 or 256), SCHEDULE, C_PASSES (TMA_STORE: 1, or 2
// where the C staging holds half of the tile). Run-time `a_rows`: the rows of A's TMA box, BM, or M rounded up to 8
// when M < BM (decode: the copy engine then moves no padding rows; those rows stay zero).
// Build for sm_90a with NDEBUG: wgmma and setmaxnreg exist only there, and a non-inlined call (an assert) inside the
// wgmma region makes ptxas serialize every wgmma (warning C7510).

#include "ring.cuh"

#ifndef GEMM_TMA_GROUP_M
#define GEMM_TMA_GROUP_M 8
#endif

[[maybe_unused]] constexpr int GROUP_M = GEMM_TMA_GROUP_M;  // tile rows per rasterization group (L2 reuse)
constexpr int WG_THREADS = 128;            // a warpgroup: 4 consecutive warps
constexpr int SWIZZLE_BYTES = 128;         // one swizzled row: the K extent of a tile, and of a TMA box row
constexpr int ATOM_BYTES = 8 * SWIZZLE_BYTES;  // 8 rows: the swizzle pattern's period
constexpr int C_BOX_COLS = SWIZZLE_BYTES / 2;  // 16-bit C columns per TMA-store box
// setmaxnreg: the producer warpgroup needs few registers, so the consumers can hold their accumulators. The block's
// 64 K registers are shared out: one or two consumer warpgroups take 232 each, the producer 40.
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;

enum Schedule { SCHED_TILES, SCHED_SPLIT_K, SCHED_STREAM_K };

// GEMM_TMA_WG_BROADCAST=1 (Config.uniform_warpgroup, a per-module policy): this thread's warpgroup broadcast from
// lane 0, so that the compiler knows it is the same across the warp and keeps what derives from it (the warpgroup's
// rows of A, its wgmma descriptors) in uniform registers, instead of per-thread registers moved over (R2UR) before
// every wgmma. It pays where each wgmma of a group reads its own uniform registers (the 128 x 256 tile's four
// k-steps); where all of a group's wgmma read the same ones, rewritten between them, it costs: 0 there.
#ifndef GEMM_TMA_WG_BROADCAST
#define GEMM_TMA_WG_BROADCAST 0
#endif
__device__ __forceinline__ int warpgroup_index() {
    if constexpr (GEMM_TMA_WG_BROADCAST) return __shfl_sync(0xffffffffu, threadIdx.x / WG_THREADS, 0);
    else return threadIdx.x / WG_THREADS;
}

// wgmma shared-memory matrix descriptor fields (PTX ISA, "Matrix Descriptor Format"): addresses and byte offsets are
// stored >> 4, the start address in bits 0-13 (14 bits: shared-memory offsets below 256 KiB), the leading byte
// offset from bit 16, the stride byte offset from bit 32, and the swizzle mode in bits 62-63.
constexpr unsigned DESC_ADDR_MASK = 0x3FFFF;                 // the 18 address bits that survive the >> 4
constexpr unsigned long long DESC_SWIZZLE_128B = 1ull << 62;  // swizzle mode 1: the 128-byte swizzle

// wgmma shared-memory matrix descriptor: start address, leading / stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & DESC_ADDR_MASK) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | DESC_SWIZZLE_128B;
}

// The descriptor of `addr` + `offset` (a multiple of 16 inside the same buffer): built once for `addr`, then only its
// start address field moved, one add per k-step. Shared-memory offsets stay below 256 KiB, so the field never carries
// into the leading byte offset.
__device__ __forceinline__ unsigned long long smem_descriptor_at(unsigned addr, unsigned offset, unsigned lbo,
                                                                 unsigned sbo) {
    return smem_descriptor(addr, lbo, sbo) + (offset >> 4);
}
// ---------------------------------------------------------------------------------------------------------------
// Element types: what differs between fp16, bf16 and fp8 is the K extent of an instruction, B's major-ness, the
// wgmma form and how the accumulators are packed for C.
// ---------------------------------------------------------------------------------------------------------------
// fp16 and bf16: the same 16-bit form, K steps of 16, B N-major (read transposed); they differ in the wgmma type and
// in the conversion of the accumulators for C.
template <bool IS_BF16>
struct Half16 {
    static constexpr int BYTES = 2, K_STEP = 16;
    static constexpr bool B_K_MAJOR = false, SCALED = false, PROMOTE = false;
    __device__ __forceinline__ static half2_bits pack(float lo, float hi) {
        return IS_BF16 ? pack_bf16x2(lo, hi) : pack_half2(lo, hi);
    }
    template <int N>
    __device__ __forceinline__ static void mma(float (&d)[N / 2], unsigned long long da, unsigned long long db) {
        if constexpr (N == 256) {
            if constexpr (IS_BF16) wgmma_m64n256k16_f32_bf16(d, da, db);
            else wgmma_m64n256k16_f32_f16(d, da, db);
        } else if constexpr (N == 192) {
            if constexpr (IS_BF16) wgmma_m64n192k16_f32_bf16(d, da, db);
            else wgmma_m64n192k16_f32_f16(d, da, db);
        } else {
            if constexpr (IS_BF16) wgmma_m64n128k16_f32_bf16(d, da, db);
            else wgmma_m64n128k16_f32_f16(d, da, db);
        }
    }
    // the decode kernel's swapped form: the weight (N-major B) as wgmma's transposed A, the tokens as its K-major B
    template <int N>
    __device__ __forceinline__ static void mma_swapped(float (&d)[N / 2], unsigned long long dw, unsigned long long dt) {
        wgmma_m64nNk16_f32_mmajor_a<N, IS_BF16>(d, dw, dt);
    }
};
using F16 = Half16<false>;
using BF16 = Half16<true>;
// fp8: Hopper's fp8 wgmma accumulates with fewer mantissa bits than fp32 and the error grows with K (beyond the
// tolerance of bf16 output at long K). So each K tile (128 deep: 4 wgmma) is accumulated on its own, from zero, and
// then added to the fp32 accumulators in registers ("promotion", as cuBLAS does by default and DeepSeek-V3
// describes), in halves of N so that the partial sum needs only 64 more registers per thread, or, where a consumer
// warpgroup's tile is at most 144 wide, in pairs of K tiles (consumer_mainloop).
struct E4M3 {  // bf16 out, with the per-tensor scales
    static constexpr int BYTES = 1, K_STEP = 32;
    static constexpr bool B_K_MAJOR = true, SCALED = true, PROMOTE = true;
    __device__ __forceinline__ static half2_bits pack(float lo, float hi) { return pack_bf16x2(lo, hi); }
    // one HALF_N-wide part of N (128: a half of a 256-wide tile, or a whole 128-wide one; 144: a whole m64 x 144
    // warpgroup tile): D = A * B on the first k-step of a K tile, D += A * B on the others
    template <int HALF_N>
    __device__ __forceinline__ static void mma_half(float (&d)[HALF_N / 2], unsigned long long da,
                                                    unsigned long long db, bool first) {
        static_assert(HALF_N == 128 || HALF_N == 144, "fp8 parts are 128 or 144 wide");
        if constexpr (HALF_N == 128) {
            if (first) wgmma_m64n128k32_f32_e4m3_first(d, da, db);
            else wgmma_m64n128k32_f32_e4m3(d, da, db);
        } else {  // the 128 x 144 rung's whole warpgroup tile (promoted in pairs)
            wgmma_m64n144k32_f32_e4m3(d, da, db, first);
        }
    }
};

template <int BM, int BLOCK_N, int CONSUMERS, class E>
struct Tile {
    static_assert(BM == 64 || BM == 128 || (BM == 256 && CONSUMERS == 2),
                  "BM must be 64, 128, or 256 on two consumer warpgroups (128 rows, two m64 tiles, each)");
    static_assert(BLOCK_N == 128 || BLOCK_N == 192 || BLOCK_N == 256 || (BLOCK_N == 144 && E::B_K_MAJOR),
                  "BLOCK_N must be 128, 192 (fp8: promoted in n96 halves; 16-bit: three B boxes) or 256, or, for "
                  "fp8, 144 (in pairs)");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536, "the warpgroups' registers fit 64 K");
    static_assert(BM / CONSUMERS >= 64, "each consumer warpgroup owns at least one m64 tile");
    static constexpr int BLOCK_K = SWIZZLE_BYTES / E::BYTES;   // 64 (16-bit) or 128 (fp8) elements
    static constexpr int K_STEPS = BLOCK_K / E::K_STEP;       // wgmma instructions per K tile: 4
    static constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;
    static constexpr int CONSUMER_WGS = CONSUMERS;
    static constexpr int WG_ROWS = BM / CONSUMERS;           // rows of C per consumer warpgroup
    static constexpr int WG_M_TILES = WG_ROWS / 64;          // m64 wgmma tiles per consumer warpgroup
    static constexpr int ACC = BLOCK_N / 2;                  // fp32 accumulators per thread per m64 tile
    static_assert(WG_M_TILES * ACC <= 128, "at most 128 accumulator registers per thread");
    static constexpr int A_BYTES = BM * SWIZZLE_BYTES;       // 16 KiB at BM = 128
    static constexpr int BOX_N = SWIZZLE_BYTES / E::BYTES;   // N-major B: N columns per box
    static constexpr int B_BOXES = E::B_K_MAJOR ? 1 : BLOCK_N / BOX_N;
    static constexpr int B_BOX_BYTES = E::B_K_MAJOR ? BLOCK_N * SWIZZLE_BYTES : BLOCK_K * SWIZZLE_BYTES;
    static constexpr int B_BYTES = B_BOXES * B_BOX_BYTES;   // 16 or 32 KiB
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;   // a stage's space (its full barrier expects less when
                                                            // A's box is short: M < BM)
    static constexpr int C_BOXES = BLOCK_N / C_BOX_COLS;    // TMA-store boxes per m64 tile
    static constexpr int C_TAIL = BLOCK_N % C_BOX_COLS;     // columns past the whole boxes (144: 16), stored directly
    static constexpr int N = BLOCK_N;
};

// Dynamic shared memory: [A stage 0 .. STAGES-1][B stage 0 .. STAGES-1][full[STAGES]][empty[STAGES]][fix-up flag
// per consumer warpgroup][C staging, TMA_STORE only, at the next 1024-byte boundary], based at a 1024-byte boundary
// (the swizzle atoms must be aligned; the launcher adds 1 KiB of slack for it). C staging: per consumer warpgroup, per
// m64 tile, BOXES boxes of 64 x 64 16-bit values: all BLOCK_N / 64 of the tile (one pass), or half of them when the
// whole tile does not fit beside the ring (two passes: store_tile_tma, C_PASSES).
template <int STAGES, class T, bool TMA_STORE, int BM>
struct SmemLayout {
    static constexpr int C_BOX_BYTES = 64 * SWIZZLE_BYTES;  // 8 KiB: 64 rows of 64 16-bit values
    static constexpr int BARRIER_BYTES = 2 * STAGES * 8 + 16;  // full[], empty[] and the flags
    static constexpr int C_OFFSET =  // the staging's swizzle atoms are 1024-byte aligned too
        STAGES * T::STAGE_BYTES + (BARRIER_BYTES + ATOM_BYTES - 1) / ATOM_BYTES * ATOM_BYTES;
    unsigned base;
    __device__ __forceinline__ unsigned a(int stage) const { return base + stage * T::A_BYTES; }
    __device__ __forceinline__ unsigned b(int stage) const { return base + STAGES * T::A_BYTES + stage * T::B_BYTES; }
    template <int BOXES>  // staging boxes per m64 tile
    __device__ __forceinline__ unsigned c_box(int wg, int mt, int box) const {
        return base + C_OFFSET + ((wg * T::WG_M_TILES + mt) * BOXES + box) * C_BOX_BYTES;
    }
    __device__ __forceinline__ unsigned full(int stage) const { return base + STAGES * T::STAGE_BYTES + stage * 8; }
    __device__ __forceinline__ unsigned empty(int stage) const { return full(STAGES) + stage * 8; }
    __device__ __forceinline__ unsigned flag(int wg) const { return empty(STAGES) + wg * 4; }
};

// A 128-byte tensor map (CUtensorMap), built on the host, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// Output tile `tile` -> its first row and column (grouped rasterization, ring.cuh).
template <int BM, int BLOCK_N>
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    grouped_tile_origin<GROUP_M, BM, BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
}

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
    const int num_tiles = tiles_m * tiles_n;
    if constexpr (SCHEDULE == SCHED_TILES) {
        const TileWalk<BM, BLOCK_N> tiles(tiles_m, tiles_n);
        for (int tile = tiles.first(); tile < tiles.count; tile += PERSISTENT ? tiles.step() : tiles.count) {
            int m0, n0;
            tiles.origin(tile, m0, n0);
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                produce_k_tile<STAGES, T, E>(tmap_a, tmap_b, smem, write, k_tile, m0, n0, stage_bytes);
                write.advance<STAGES>();
            }
        }
    } else if constexpr (SCHEDULE == SCHED_SPLIT_K) {
        const WorkUnit u = SplitK{num_tiles, num_k_tiles, splits}.unit();
        int m0, n0;
        tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
        for (int k_tile = u.k_begin; k_tile < u.k_begin + u.k_tiles; ++k_tile) {
            produce_k_tile<STAGES, T, E>(tmap_a, tmap_b, smem, write, k_tile, m0, n0, stage_bytes);
            write.advance<STAGES>();
        }
    } else {
        const StreamK sched(num_tiles, num_k_tiles);
        auto produce_unit = [&](const WorkUnit& u) {
            int m0, n0;
            tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
            for (int k_tile = u.k_begin; k_tile < u.k_begin + u.k_tiles; ++k_tile) {
                produce_k_tile<STAGES, T, E>(tmap_a, tmap_b, smem, write, k_tile, m0, n0, stage_bytes);
                write.advance<STAGES>();
            }
        };
        for (int i = 0; i < sched.dp_units(); ++i) produce_unit(sched.dp_unit(i));
        const long long end = sched.start(blockIdx.x + 1);
        for (long long it = sched.start(blockIdx.x); it < end;) {
            const WorkUnit u = sched.unit_at(it, end);
            produce_unit(u);
            it += u.k_tiles;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// consumer: one warpgroup's mainloop over the K tiles of one unit.
// ---------------------------------------------------------------------------------------------------------------

// fp8's promotion, one half of N at a time. issue_half: half `half` of m64 tile `mt` of the K tile in `stage`,
// summed from zero into `part` (4 wgmma, one group; the half is as wide as `part` holds: 2 x its REGS registers).
// (Functions, not lambdas: NVRTC 13.0 takes an unannotated lambda in device code for a host function.)
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int REGS>
__device__ __forceinline__ void issue_half(float (&part)[REGS], const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                           int stage, int wg_row0, int half, int mt) {
    constexpr int HALF_N = 2 * REGS;
#pragma unroll
    for (int i = 0; i < REGS; ++i) fence_operand(part[i]);
    wgmma_fence();  // the partial's last reads (its adds) are ordered before these wgmma overwrite it
    // K-major B: HALF_N rows of N per half; each k-step 32 bytes further along both operands' rows
    const unsigned b = smem.b(stage) + half * HALF_N * SWIZZLE_BYTES;
    const unsigned a = smem.a(stage) + (wg_row0 + mt * 64) * SWIZZLE_BYTES;
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk)
        E::template mma_half<HALF_N>(part, smem_descriptor_at(a, kk * 32, 16, ATOM_BYTES),
                                     smem_descriptor_at(b, kk * 32, 16, ATOM_BYTES), kk == 0);
    wgmma_commit_group();
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
        int released_stage = -1;  // the stage whose wgmma group may still run (released after the next group's wait)
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            const int smem_read_stage = read.stage;
            consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
            fence_accumulators(acc);
            wgmma_fence();  // the accumulators' last writes (zeroing, earlier wgmma) are ordered before these wgmma
            // per k-step: K-major A 32 bytes further along each row; N-major B 16 rows (of K) further
            const unsigned a0 = smem.a(smem_read_stage) + wg_row0 * SWIZZLE_BYTES, b0 = smem.b(smem_read_stage);
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
            wgmma_commit_group();
            // Let this K tile's group run on; wait until the previous one is done, so its stage may be refilled.
            wgmma_wait<1>();
            fence_accumulators(acc);
            // the producer may refill it
            if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));
            released_stage = smem_read_stage;
            read.advance<STAGES>();
        }
        wgmma_wait<0>();  // every wgmma of this tile is done: the accumulators are final, the last stage is free
        fence_accumulators(acc);
        if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));
    }
}

// The accumulators as (row, col, value at col, value at col + 1) pairs of C: in an m64nN wgmma tile, thread (warp w,
// lane l) holds rows 16 w + l / 4 and + 8, columns 8 j + 2 (l % 4) and + 1 for each j < N / 8. `put` gets every pair
// whose row is below M (the columns are the caller's to check), from column group J0 on (8 columns each).
template <class T, int BLOCK_N, int J0 = 0, class Put>
__device__ __forceinline__ void for_each_pair(int M, int row0, int col0, const float (&acc)[T::WG_M_TILES][T::ACC],
                                              Put put) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const long long row = (long long)row0 + mt * 64 + warp * 16 + lane / 4 + half * 8;
            if (row >= M) continue;
#pragma unroll
            for (int j = J0; j < BLOCK_N / 8; ++j)
                put(row, col0 + j * 8 + (lane % 4) * 2, acc[mt][4 * j + 2 * half], acc[mt][4 * j + 2 * half + 1]);
        }
}

// Epilogue: accumulators (times `alpha` for fp8's scales) -> 16-bit -> C, bounds-checked; the two columns of a pair
// go out as one 32-bit store when N is even. From column group J0 on (8 columns each; the TMA-store epilogue's tail).
template <class T, class E, int BLOCK_N, int J0 = 0>
__device__ __forceinline__ void store_tile(half_bits* C, int M, int N, int row0, int col0,
                                           const float (&acc)[T::WG_M_TILES][T::ACC], float alpha) {
    for_each_pair<T, BLOCK_N, J0>(M, row0, col0, acc, [&](long long row, int col, float lo, float hi) {
        if constexpr (E::SCALED) {
            lo *= alpha;
            hi *= alpha;
        }
        store_pair(C + row * N + col, col, N, E::pack(lo, hi));
    });
}

// split-K's epilogue: the fp32 accumulators, unscaled, into this split's row-major M x N slice of the workspace, rows
// and columns past C's edge left out; a pair per 8-byte store when N is even. Every element of every slice is
// written (a split past the end of K stores its zeros): the reduction reads them all.
template <class T, int BLOCK_N>
__device__ __forceinline__ void store_partial(float* slice, int M, int N, int row0, int col0,
                                              const float (&acc)[T::WG_M_TILES][T::ACC]) {
    for_each_pair<T, BLOCK_N>(M, row0, col0, acc, [&](long long row, int col, float lo, float hi) {
        float* dst = slice + row * N + col;
        if ((N & 1) == 0 && col < N) {
            *reinterpret_cast<float2*>(dst) = make_float2(lo, hi);
        } else {
            if (col < N) dst[0] = lo;
            if (col + 1 < N) dst[1] = hi;
        }
    });
}

// Epilogue through shared memory: accumulators -> 16-bit -> this warpgroup's swizzled staging boxes -> TMA store.
// The staging boxes use the 128-byte swizzle of the C tensor map, which also keeps the stores into them free of bank
// conflicts (the 8 rows of each 8 x 8 matrix of a stmatrix land in 8 different 16-byte slots). C_PASSES = 2: the staging holds half of the tile's columns (what lets a
// fourth 48 KiB stage fit beside it), so the tile goes out in two passes, the second waiting for the first's stores to
// have read the staging. A tile whose width is not whole boxes (144: two boxes and 16 columns) stores its last columns
// directly from registers (T::C_TAIL).
template <int STAGES, class T, class E, int BM, int BLOCK_N, int C_PASSES>
__device__ __forceinline__ void store_tile_tma(const TensorMap& tmap_c, const SmemLayout<STAGES, T, true, BM>& smem,
                                               int wg, int row0, int col0,
                                               const float (&acc)[T::WG_M_TILES][T::ACC], float alpha, half_bits* C,
                                               int M, int N) {
    static_assert(C_PASSES == 1 || (C_PASSES == 2 && T::C_BOXES % 2 == 0), "one pass, or two over half the boxes");
    constexpr int BOXES = T::C_BOXES / C_PASSES;  // staging boxes per m64 tile, per pass
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const bool elected = threadIdx.x % WG_THREADS == 0;  // issues this warpgroup's TMA stores
    const unsigned wg_barrier = 1 + wg;                 // named barrier of this warpgroup's 128 threads
#pragma unroll
    for (int pass = 0; pass < C_PASSES; ++pass) {
        // the stores issued last (the previous tile's, or this tile's previous pass) have finished reading the
        // staging boxes...
        if (elected) cp_async_bulk_wait_read<0>();
        named_barrier_sync(wg_barrier, WG_THREADS);  // ...which every thread of the warpgroup may now overwrite
        // per stmatrix_x4, column groups j and j + 1 (8 columns each), rows +0 and +8 of the warp's 16: matrix
        // i = lane / 8 is group j + i / 2, row half i % 2, and this lane gives its row lane % 8 (the swizzle's
        // row phase too, as the warp's rows start at a multiple of 8)
        const int i = lane / 8, rr = lane % 8;
        const int r = warp * 16 + (i % 2) * 8 + rr;  // the row inside the m64 tile whose address this lane gives
#pragma unroll
        for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
            for (int j = pass * BOXES * 8; j < (pass + 1) * BOXES * 8; j += 2) {
                const int box = (j / 8) % BOXES, chunk = j % 8 + i / 2;
                const unsigned dst =
                    smem.template c_box<BOXES>(wg, mt, box) + r * SWIZZLE_BYTES + ((chunk ^ rr) << 4);
                float v[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    v[e] = acc[mt][4 * j + e];
                    if constexpr (E::SCALED) v[e] *= alpha;
                }
                stmatrix_x4(dst, E::pack(v[0], v[1]), E::pack(v[2], v[3]), E::pack(v[4], v[5]),
                            E::pack(v[6], v[7]));
            }
        fence_proxy_async_shared();                  // these generic-proxy writes must be visible to the TMA unit...
        named_barrier_sync(wg_barrier, WG_THREADS);  // ...from every thread, before the elected one starts the stores
        if (elected) {
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                for (int box = 0; box < BOXES; ++box)
                    tma_store_2d(&tmap_c, smem.template c_box<BOXES>(wg, mt, box),
                                 col0 + (pass * BOXES + box) * C_BOX_COLS, row0 + mt * 64);
            cp_async_bulk_commit();
        }
    }
    // the columns past the last whole box (144 wide: 16) straight from the registers, bounds-checked: a 32-byte
    // sector per row and warp
    if constexpr (T::C_TAIL > 0) store_tile<T, E, BLOCK_N, T::C_BOXES * 8>(C, M, N, row0, col0, acc, alpha);
}

// ---------------------------------------------------------------------------------------------------------------
// stream-K's fix-up of a tile shared by several units: partials in a workspace, summed in K order.
// ---------------------------------------------------------------------------------------------------------------

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

// This unit's partial for the tile: store it to its slot and arrive on the tile's counter. The last unit to arrive
// sums every contributor's slot (its own included, read back from L2) in K order into `acc`, whoever it is, so the
// result is bit-reproducible, and returns true: it then stores C.
template <class T>
__device__ __forceinline__ bool fix_up(float (&acc)[T::WG_M_TILES][T::ACC], const WorkUnit& u, float* workspace,
                                       int* counters, unsigned flag, int wg, int M, int row0) {
    const int tid = threadIdx.x % WG_THREADS;
    const unsigned wg_barrier = 1 + wg;  // named barrier of this warpgroup's 128 threads
    store_slot<T>(acc, slot_of<T>(workspace, u.slot(u.index), wg), M, row0, tid);
    named_barrier_sync(wg_barrier, WG_THREADS);  // every thread of the warpgroup has issued its part...
    int* counter = counters + u.tile * (T::THREADS / WG_THREADS - 1) + wg;
    // ...which the elected thread's release publishes with its arrival; its acquire sees every earlier arrival's
    if (tid == 0) st_shared_u32(flag, atom_add_acq_rel_gpu(counter, 1) == u.contributors - 1 ? 1u : 0u);
    named_barrier_sync(wg_barrier, WG_THREADS);  // the verdict (and the acquire behind it) reaches every thread
    if (!ld_shared_u32(flag)) return false;      // another unit of this tile arrives later and sums
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
            for (int j = 0; j < u.contributors; ++j) {  // K order, whoever arrived last: bit-reproducible
                float v[CHUNK][4];
                load_slot_chunk<T, CHUNK>(slot_of<T>(workspace, u.slot(j), wg), mt, q0, tid, v);
#pragma unroll
                for (int q = 0; q < CHUNK; ++q)
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        acc[mt][4 * (q0 + q) + i] = j == 0 ? v[q][i] : acc[mt][4 * (q0 + q) + i] + v[q][i];
            }
        }
    }
    if (tid == 0) *counter = 0;  // the tile is done: the counter is ready for the next launch
    return true;
}

// One unit of the stream-K schedule on a consumer warpgroup: MAINLOOP over its K tiles, then EPILOGUE: C when the
// unit covers all of K, else the fix-up, whose last arriving unit stores C. C goes out through the TMA-store epilogue where the kernel has one and C's rows allow it (`tma_store`),
// else directly.
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int BLOCK_N, int C_PASSES>
__device__ __forceinline__ void consume_unit(float (&acc)[T::WG_M_TILES][T::ACC],
                                             const SmemLayout<STAGES, T, TMA_STORE, BM>& smem, RingPosition& read,
                                             const WorkUnit& u, const TensorMap& tmap_c, bool tma_store, half_bits* C,
                                             int M, int N, int tiles_m, int tiles_n, int wg, bool release,
                                             float alpha, float* workspace, int* counters) {
    int m0, n0;
    tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
    const int row0 = m0 + wg * T::WG_ROWS;
    consumer_mainloop<STAGES, T, E, TMA_STORE, BM, BLOCK_N>(acc, smem, read, u.k_tiles, wg * T::WG_ROWS, release);
    if (u.contributors > 1 && !fix_up<T>(acc, u, workspace, counters, smem.flag(wg), wg, M, row0)) return;
    if constexpr (TMA_STORE) {
        if (tma_store) {
            store_tile_tma<STAGES, T, E, BM, BLOCK_N, C_PASSES>(tmap_c, smem, wg, row0, n0, acc, alpha, C, M, N);
            return;
        }
    }
    store_tile<T, E, BLOCK_N>(C, M, N, row0, n0, acc, alpha);
}

template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE, class E = F16, int BM = 128,
          int SCHEDULE = SCHED_TILES, int C_PASSES = 1>
__global__ void __launch_bounds__(Tile<BM, BLOCK_N, CONSUMERS, E>::THREADS, 1)
    gemm_tma_wgmma(const __grid_constant__ TensorMap tmap_a, const __grid_constant__ TensorMap tmap_b,
                   const __grid_constant__ TensorMap tmap_c, half_bits* __restrict__ C, int M, int N, int K,
                   const float* __restrict__ scale_a, const float* __restrict__ scale_b, float* workspace,
                   int* counters, int splits, int a_rows) {
    using T = Tile<BM, BLOCK_N, CONSUMERS, E>;
    static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
    static_assert(SCHEDULE != SCHED_SPLIT_K || !TMA_STORE, "split-K stores C (or its partials) directly");
    static_assert(C_PASSES == 1 || TMA_STORE, "C in passes is the TMA-store epilogue's");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const SmemLayout<STAGES, T, TMA_STORE, BM> smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const bool tma_store = TMA_STORE && N % 8 == 0;  // C's rows at a 16-byte pitch: the map in tmap_c is valid

    const int warpgroup = warpgroup_index();
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int num_k_tiles = (K + T::BLOCK_K - 1) / T::BLOCK_K;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(smem.full(s), 1);              // the producer's one arrive (plus the TMA bytes)
            mbarrier_init(smem.empty(s), CONSUMERS * 4);  // one arrive per consumer warp
        }
        fence_mbarrier_init();
        tma_prefetch_descriptor(&tmap_a);
        tma_prefetch_descriptor(&tmap_b);
        if (tma_store) tma_prefetch_descriptor(&tmap_c);
    }
    if (a_rows < BM) {
        // M below one tile: A's box is a_rows rows (M rounded up to 8), so the TMA unit fills no padding rows (at
        // M = 16, 48 of 64). Rows a_rows.. of every A stage are zeroed once here and never written again: the
        // wgmma read zeros there (rows of C past M, never stored).
        const int chunks = (BM - a_rows) * SWIZZLE_BYTES / 16;  // 16-byte pieces past A's box in one stage
        for (int i = threadIdx.x; i < STAGES * chunks; i += blockDim.x)
            st_shared_v4(smem.a(i / chunks) + a_rows * SWIZZLE_BYTES + (i % chunks) * 16, 0u, 0u, 0u, 0u);
        fence_proxy_async_shared();  // these generic-proxy zeros are visible to the wgmma (async proxy) that read them
    }
    __syncthreads();  // the barriers are initialized (and padding rows zeroed) before any thread waits or arrives

    if (warpgroup == 0) {
        // PRODUCER warpgroup: give registers away; one thread issues every copy, the other 127 are done.
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0)
            producer<STAGES, BLOCK_N, CONSUMERS, PERSISTENT, TMA_STORE, E, BM, SCHEDULE>(
                tmap_a, tmap_b, smem, tiles_m, tiles_n, num_k_tiles, splits, a_rows * SWIZZLE_BYTES + T::B_BYTES);
    } else {
        // CONSUMER warpgroups: take the registers; per unit, MAINLOOP then EPILOGUE.
        setmaxnreg_inc<CONSUMER_REGS>();
        const int wg = warpgroup - 1;
        const int wg_row0 = wg * T::WG_ROWS;
        const bool release = threadIdx.x % 32 == 0;  // one arrive per warp on empty[]
        float alpha = 1.f;                           // fp8: C = (A B^T) x scale_a x scale_b
        if constexpr (E::SCALED) alpha = *scale_a * *scale_b;
        RingPosition read;                           // smem_read_stage and its lap's parity
        float acc[T::WG_M_TILES][T::ACC];
        const int num_tiles = tiles_m * tiles_n;
        if constexpr (SCHEDULE == SCHED_TILES) {
            const TileWalk<BM, BLOCK_N> tiles(tiles_m, tiles_n);
            for (int tile = tiles.first(); tile < tiles.count; tile += PERSISTENT ? tiles.step() : tiles.count) {
                int m0, n0;
                tiles.origin(tile, m0, n0);
                consumer_mainloop<STAGES, T, E, TMA_STORE, BM, BLOCK_N>(acc, smem, read, num_k_tiles, wg_row0,
                                                                         release);
                // EPILOGUE
                if constexpr (TMA_STORE) {
                    if (tma_store) {
                        store_tile_tma<STAGES, T, E, BM, BLOCK_N, C_PASSES>(tmap_c, smem, wg, m0 + wg_row0, n0, acc,
                                                                            alpha, C, M, N);
                        continue;
                    }
                }
                store_tile<T, E, BLOCK_N>(C, M, N, m0 + wg_row0, n0, acc, alpha);
            }
            // The staging boxes must stay untouched until the last TMA store has read them; then the block may exit.
            if (tma_store && threadIdx.x % WG_THREADS == 0) cp_async_bulk_wait_read<0>();
        } else if constexpr (SCHEDULE == SCHED_SPLIT_K) {
            const WorkUnit u = SplitK{num_tiles, num_k_tiles, splits}.unit();
            int m0, n0;
            tile_origin<BM, BLOCK_N>(u.tile, tiles_m, tiles_n, m0, n0);
            consumer_mainloop<STAGES, T, E, false, BM, BLOCK_N>(acc, smem, read, u.k_tiles, wg_row0, release);
            // EPILOGUE: all of K here: C; else this split's partial into its slice, for split_k_reduce
            if (u.contributors == 1) store_tile<T, E, BLOCK_N>(C, M, N, m0 + wg_row0, n0, acc, alpha);
            else store_partial<T, BLOCK_N>(workspace + (long long)u.index * M * N, M, N, m0 + wg_row0, n0, acc);
        } else {
            const StreamK sched(num_tiles, num_k_tiles);
            for (int i = 0; i < sched.dp_units(); ++i)
                consume_unit<STAGES, T, E, TMA_STORE, BM, BLOCK_N, C_PASSES>(
                    acc, smem, read, sched.dp_unit(i), tmap_c, tma_store, C, M, N, tiles_m, tiles_n, wg, release,
                    alpha, workspace, counters);
            const long long end = sched.start(blockIdx.x + 1);
            for (long long it = sched.start(blockIdx.x); it < end;) {
                const WorkUnit u = sched.unit_at(it, end);
                consume_unit<STAGES, T, E, TMA_STORE, BM, BLOCK_N, C_PASSES>(acc, smem, read, u, tmap_c, tma_store,
                                                                            C, M, N, tiles_m, tiles_n, wg, release,
                                                                            alpha, workspace, counters);
                it += u.k_tiles;
            }
            // as above: the last TMA store has read the staging boxes before the block exits
            if (tma_store && threadIdx.x % WG_THREADS == 0) cp_async_bulk_wait_read<0>();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Decode (M = 1..256 token rows against a wide weight): C computed swapped, C^T = B^T A^T
// ---------------------------------------------------------------------------------------------------------------
// The tiles above put C's M on wgmma's M side, at least 64 rows per warpgroup: at M = 16 three quarters of every
// wgmma and of every A stage are padding. Swapped, the weight's N runs along wgmma's M (64 weight columns per
// consumer warpgroup, read transposed from B's N-major box) and the tokens along wgmma's N (BLOCK_T = 8..64: wgmma's N
// may be any multiple of 8): every row of every wgmma is real weight, and the ring holds weight, BK deep in K.
//
//   units:  (weight tile of BW = 64 x CONSUMERS columns, token tile of BLOCK_T rows, split), split-major, then weight
//           tile, then token tile (the token tiles of one weight tile are neighbours: they read the same weight boxes
//           at about the same time, so it comes from DRAM about once). One block per SM at most walks units b, b +
//           grid, ... (persistent: the ring runs on across units, so the producer streams the next unit's weight
//           while the consumers store this one). Split s of K takes an equal share of the K stages (the first
//           k_stages % splits one more).
//   stage:  CONSUMERS weight boxes of BK rows (K) x 64 columns (N), 128-byte swizzled (B's N-major box, BK deep),
//           then K_ATOMS token boxes of BLOCK_T rows x 64 K (A's K-major box), one per 128-byte swizzle row of K.
//   wgmma:  per k-step kk (16 of K): A = the weight, M-major: start = box + kk x 16 rows x 128 B, SBO = 1024 B between
//           8-row (K) groups (the box is one 64-column block wide: LBO unused); B = the tokens, K-major: start = token
//           box kk / 4 + (kk % 4) x 32 B, SBO = 1024 B between 8-row (token) groups.
//   epilogue: the 64 x BLOCK_T accumulator is C^T's tile: stored transposed into C; with splits > 1, a serialized
//           fix-up in the kernel: each split stores its fp32 partial into its M x N slice of the workspace and
//           arrives on the (tile, warpgroup) counter; the last to arrive sums every slice, its own too, in split
//           order from zero and stores C, then zeroes the counter for the next launch. The order of the additions
//           is the same whoever arrives last (bit-reproducible), and only the counter is atomic (an integer). No
//           second kernel: at decode sizes its launch and pass would be a visible share of the call.
// 16-bit types only (B N-major): fp8's B is K-major, and its promotion is not built here.
template <int BLOCK_T, int CONSUMERS, int K_ATOMS, class E>
struct DecodeTile {
    static_assert(BLOCK_T == 8 || BLOCK_T == 16 || BLOCK_T == 32 || BLOCK_T == 64, "BLOCK_T: 8, 16, 32 or 64 tokens");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups (64 weight columns each)");
    static_assert(K_ATOMS == 1 || K_ATOMS == 2 || K_ATOMS == 4, "BK = 64, 128 or 256 (a TMA box has <= 256 rows)");
    static_assert(!E::B_K_MAJOR, "16-bit types only: the weight is B's N-major box, read transposed");
    static constexpr int BW = 64 * CONSUMERS;                   // weight columns (C's N) per unit: wgmma's M
    static constexpr int ATOM_K = SWIZZLE_BYTES / E::BYTES;     // K per 128-byte swizzled row: 64
    static constexpr int BK = K_ATOMS * ATOM_K;                 // K per stage
    static constexpr int K_STEPS = BK / E::K_STEP;              // wgmma per stage and consumer
    static constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;
    static constexpr int W_BOX_BYTES = BK * SWIZZLE_BYTES;      // BK rows (K) x 64 weight columns
    static constexpr int T_BOX_BYTES = BLOCK_T * SWIZZLE_BYTES;  // BLOCK_T token rows x 64 of K
    static constexpr int T_OFFSET = CONSUMERS * W_BOX_BYTES;    // the token boxes, after the weight's
    static constexpr int STAGE_BYTES = T_OFFSET + K_ATOMS * T_BOX_BYTES;  // every box a multiple of 1024 B
    static constexpr int ACC = BLOCK_T / 2;                     // fp32 accumulators per thread
};

// A decode unit: its weight and token tile origins and its split's K stages.
struct DecodeUnit {
    int w0, t0, split, k_begin, k_stages;
};

template <class T>
__device__ __forceinline__ DecodeUnit decode_unit(int u, int tiles_t, int tiles, int k_stages, int splits) {
    const int split = u / tiles, tile = u % tiles;
    const int base = k_stages / splits, extra = k_stages % splits;
    return {(tile / tiles_t) * T::BW, (tile % tiles_t) * (2 * T::ACC), split, split * base + min(split, extra),
            base + (split < extra ? 1 : 0)};
}

// Dynamic shared memory: [stage 0 .. STAGES-1][full[STAGES]][empty[STAGES]][fix-up verdict per consumer warpgroup],
// based at a 1024-byte boundary.
template <int STAGES, class T>
struct DecodeSmem {
    unsigned base;
    __device__ __forceinline__ unsigned stage(int s) const { return base + s * T::STAGE_BYTES; }
    __device__ __forceinline__ unsigned full(int s) const { return base + STAGES * T::STAGE_BYTES + s * 8; }
    __device__ __forceinline__ unsigned empty(int s) const { return full(STAGES) + s * 8; }
    __device__ __forceinline__ unsigned flag(int wg) const { return empty(STAGES) + wg * 4; }
};

// The thread's accumulators as C's elements: thread (warp w, lane l) holds weight columns n = 16 w + l / 4 (+ 8) of its
// warpgroup's 64 and token rows t = 8 j + 2 (l % 4) (+ 1): value 4 j + 2 h + e is C[t0 + 8 j + 2 (l % 4) + e][n + 8 h].
// `put(index, offset)` gets each one inside M x N with its offset t x N + n in C (and in a workspace slice).
template <class T, class Put>
__device__ __forceinline__ void for_each_decode_output(int M, int N, int n0, int t0, Put put) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int n = n0 + warp * 16 + lane / 4 + 8 * h;
        if (n >= N) continue;
#pragma unroll
        for (int j = 0; j < 2 * T::ACC / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int t = t0 + 8 * j + 2 * (lane % 4) + e;
                if (t < M) put(4 * j + 2 * h + e, (long long)t * N + n);
            }
    }
}

// PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT (the sanitizer's self-test only): the fix-up without its wait: split 0 sums
// the slices as soon as its mainloop ends, before any split (itself included) has written its partial.

template <int STAGES, int BLOCK_T, int CONSUMERS, int K_ATOMS, class E = F16>
__global__ void __launch_bounds__(DecodeTile<BLOCK_T, CONSUMERS, K_ATOMS, E>::THREADS, 1)
    gemm_tma_decode(const __grid_constant__ TensorMap tmap_tokens, const __grid_constant__ TensorMap tmap_weight,
                    half_bits* __restrict__ C, int M, int N, int K, float* __restrict__ workspace,
                    int* __restrict__ counters, int splits) {
    using T = DecodeTile<BLOCK_T, CONSUMERS, K_ATOMS, E>;
    static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const DecodeSmem<STAGES, T> smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const int tiles_t = (M + BLOCK_T - 1) / BLOCK_T;
    const int tiles = tiles_t * ((N + T::BW - 1) / T::BW);
    const int k_stages = (K + T::BK - 1) / T::BK;
    const int units = tiles * splits;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(smem.full(s), 1);               // the producer's one arrive (plus the TMA bytes)
            mbarrier_init(smem.empty(s), CONSUMERS * 4);  // one arrive per consumer warp
        }
        fence_mbarrier_init();
        tma_prefetch_descriptor(&tmap_tokens);
        tma_prefetch_descriptor(&tmap_weight);
    }
    __syncthreads();  // the barriers are initialized before any thread waits or arrives

    const int warpgroup = warpgroup_index();
    if (warpgroup == 0) {
        // PRODUCER: one thread streams every unit's weight and token boxes through the ring.
        if (threadIdx.x != 0) return;
        RingPosition write;  // smem_write_stage and its lap's parity
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            const DecodeUnit unit = decode_unit<T>(u, tiles_t, tiles, k_stages, splits);
            for (int ks = unit.k_begin; ks < unit.k_begin + unit.k_stages; ++ks) {
                // wait until every consumer warp released this stage (its wgmma finished reading it)
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
                producer_acquire(smem.empty(write.stage), write);
#endif
                const unsigned full = smem.full(write.stage), dst = smem.stage(write.stage);
                producer_commit(full, T::STAGE_BYTES);  // boxes past an edge are zero-filled and still counted
#pragma unroll
                for (int c = 0; c < CONSUMERS; ++c)
                    tma_load_2d(dst + c * T::W_BOX_BYTES, &tmap_weight, full, unit.w0 + c * 64, ks * T::BK);
#pragma unroll
                for (int a = 0; a < K_ATOMS; ++a)
                    tma_load_2d(dst + T::T_OFFSET + a * T::T_BOX_BYTES, &tmap_tokens, full,
                                ks * T::BK + a * T::ATOM_K, unit.t0);
                write.advance<STAGES>();
            }
        }
        return;
    }

    // CONSUMER warpgroup wg: weight columns wg x 64 .. + 63 of each unit; per unit, MAINLOOP then EPILOGUE.
    const int wg = warpgroup - 1;
    const bool release = threadIdx.x % 32 == 0;  // one arrive per warp on empty[]
    RingPosition read;  // smem_read_stage and its lap's parity
    float acc[T::ACC];
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const DecodeUnit unit = decode_unit<T>(u, tiles_t, tiles, k_stages, splits);
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) acc[i] = 0.f;
        int released_stage = -1;  // the stage whose wgmma group may still run (released after the next group's wait)
        for (int ks = 0; ks < unit.k_stages; ++ks) {
            const int smem_read_stage = read.stage;
            consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this stage have all landed
#pragma unroll
            for (int i = 0; i < T::ACC; ++i) fence_operand(acc[i]);
            wgmma_fence();  // the accumulators' last writes (zeroing, earlier wgmma) are ordered before these wgmma
            const unsigned stage = smem.stage(smem_read_stage);
            // per k-step: the weight 16 rows (of K) further, the tokens 32 bytes along a box's rows (a box per 64 of K)
            const unsigned w = stage + wg * T::W_BOX_BYTES, t = stage + T::T_OFFSET;
#pragma unroll
            for (int kk = 0; kk < T::K_STEPS; ++kk)
                E::template mma_swapped<BLOCK_T>(
                    acc, smem_descriptor_at(w, kk * 16 * SWIZZLE_BYTES, T::W_BOX_BYTES, ATOM_BYTES),
                    smem_descriptor_at(t, (kk / 4) * T::T_BOX_BYTES + (kk % 4) * 32, 16, ATOM_BYTES));
            wgmma_commit_group();
            // Let this stage's group run on; wait until the previous one is done, so its stage may be refilled.
            wgmma_wait<1>();
#pragma unroll
            for (int i = 0; i < T::ACC; ++i) fence_operand(acc[i]);
            if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));  // may be refilled
            released_stage = smem_read_stage;
            read.advance<STAGES>();
        }
        wgmma_wait<0>();  // every wgmma of this unit is done: the accumulators are final, the last stage is free
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) fence_operand(acc[i]);
        if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));

        // EPILOGUE: all of K here: C; else the split's partial, and the fix-up
        const int n0 = unit.w0 + wg * 64;
        if (splits == 1) {
            for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long at) {
                C[at] = (half_bits)(E::pack(acc[i], 0.f) & 0xffffu);
            });
            continue;
        }
        const long long slice = (long long)M * N;
#ifdef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
        if (unit.split != 0) {  // the fault: the other splits store; split 0 sums at once (its own slice unwritten)
#endif
        for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long at) {
            st_global_cg_f32(workspace + unit.split * slice + at, acc[i]);  // this split's share, to L2
        });
#ifdef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
            continue;
        }
#endif
        const int tid = threadIdx.x % WG_THREADS;
        const unsigned wg_barrier = 1 + wg;  // named barrier of this warpgroup's 128 threads
        int* counter = counters + (u % tiles) * CONSUMERS + wg;
#ifndef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
        named_barrier_sync(wg_barrier, WG_THREADS);  // every thread of the warpgroup has issued its partial...
        // ...which the elected thread's release publishes with its arrival; its acquire sees every earlier split's
        if (tid == 0) st_shared_u32(smem.flag(wg), atom_add_acq_rel_gpu(counter, 1) == splits - 1 ? 1u : 0u);
        named_barrier_sync(wg_barrier, WG_THREADS);  // the verdict (and the acquire behind it) reaches every thread
        if (!ld_shared_u32(smem.flag(wg))) continue;  // a later split sums
#endif
        // the last split: every slice in split order from zero (its own read back too): bit-reproducible. A slice's
        // loads all issue before their adds (one L2 round trip per slice, not one per element)
        for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long at) {
            acc[i] = ld_global_cg_f32(workspace + at);
        });
        for (int s = 1; s < splits; ++s) {
            float part[T::ACC];
            for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long at) {
                part[i] = ld_global_cg_f32(workspace + s * slice + at);
            });
            for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long) { acc[i] += part[i]; });
        }
        for_each_decode_output<T>(M, N, n0, unit.t0, [&](int i, long long at) {
            C[at] = (half_bits)(E::pack(acc[i], 0.f) & 0xffffu);
        });
        if (tid == 0) *counter = 0;  // the tile is done: the counter is ready for the next launch
    }
}

// ---------------------------------------------------------------------------------------------------------------
// split-K's second pass: C = (slice 0 + slice 1 + ... + slice splits-1) x scales, in split (K) order from zero, so the
// result is the same bits every run; launched after the split kernel on the same stream, which is the only wait it
// needs. Each thread takes 4 consecutive elements of C; 16-byte loads when M x N % 4 == 0 (every slice then starts
// 16-byte aligned), else one element at a time. The slices' loads are unrolled so that several are in flight.
// ---------------------------------------------------------------------------------------------------------------
constexpr int REDUCE_THREADS = 256;

template <class E>
__global__ void __launch_bounds__(REDUCE_THREADS)
    split_k_reduce(const float* __restrict__ workspace, half_bits* __restrict__ C, long long mn, int splits,
                   const float* __restrict__ scale_a, const float* __restrict__ scale_b) {
    const long long i = ((long long)blockIdx.x * REDUCE_THREADS + threadIdx.x) * 4;
    if (i >= mn) return;
    float v[4];
    if (mn % 4 == 0) {
        const float4 first = *reinterpret_cast<const float4*>(workspace + i);
        v[0] = first.x, v[1] = first.y, v[2] = first.z, v[3] = first.w;
#pragma unroll 4
        for (int s = 1; s < splits; ++s) {
            const float4 next = *reinterpret_cast<const float4*>(workspace + s * mn + i);
            v[0] += next.x, v[1] += next.y, v[2] += next.z, v[3] += next.w;
        }
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = i + e < mn ? workspace[i + e] : 0.f;
#pragma unroll 4
        for (int s = 1; s < splits; ++s)
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] += i + e < mn ? workspace[s * mn + i + e] : 0.f;
    }
    if constexpr (E::SCALED) {
        const float alpha = *scale_a * *scale_b;
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] *= alpha;
    }
#pragma unroll
    for (int p = 0; p < 2; ++p) {  // C is contiguous and i % 4 == 0: a pair at i + 2p is 4-byte aligned
        const long long at = i + 2 * p;
        const half2_bits packed = E::pack(v[2 * p], v[2 * p + 1]);
        if (at + 1 < mn) *reinterpret_cast<half2_bits*>(C + at) = packed;
        else if (at < mn) C[at] = (half_bits)(packed & 0xffffu);
    }
}
