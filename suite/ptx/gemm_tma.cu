// gemm_tma.cu: C = A * B on Hopper, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N), C (M x N), row-major.
//
// Hopper's own pipeline, where gemm.cu has Ampere's. Warp-specialized: one producer thread issues TMA copies, one or
// two consumer warpgroups issue wgmma, and the two sides meet at two mbarriers per ring stage:
//
//   global --TMA (cp.async.bulk.tensor)--> STAGES-deep shared-memory ring --wgmma.mma_async (operands read straight
//   from shared memory)--> fp32 accumulators in registers --epilogue--> C
//
//   full[s]:  the producer arrives with expect_tx(STAGE_BYTES); the TMA unit completes the phase when the bytes land.
//             Consumers wait on it before their wgmma read the stage.
//   empty[s]: every consumer warp arrives once its wgmma have finished reading the stage; the producer waits on it
//             before refilling the stage. That wait is what keeps the producer from overwriting a stage in use.
//   Both sides walk the ring in the same order; a stage index and a phase bit (flipped at each wrap) name the lap.
//
// Block tile BLOCK_M (128) x BLOCK_N x BLOCK_K (64). Each consumer warpgroup owns 128 / CONSUMERS rows as one or two
// m64 wgmma tiles across the full BLOCK_N: CONSUMERS = 2 and BLOCK_N = 256 gives each warpgroup 64 x 256 (128 fp32
// registers per thread); CONSUMERS = 1 and BLOCK_N = 128 gives one warpgroup 2 x (64 x 128).
//
// Shared-memory layout of a stage, all 128-byte swizzled by the TMA unit exactly as wgmma's descriptors expect
// (16-byte chunk c of each 128-byte row r of a 1024-byte atom is stored at chunk c ^ (r % 8)):
//   A tile: 128 rows (M) x 64 halves (K) = 128 rows of 128 B, K-major. One TMA box.
//   B tile: BLOCK_N / 64 boxes, each 64 rows (K) x 64 halves (N) = 64 rows of 128 B, N-major ("transposed" for wgmma).
// wgmma descriptors (start address, LBO, SBO, swizzle mode):
//   A, K-major: start = tile + row * 128 B + k-step * 32 B; SBO = 1024 B between 8-row atoms; LBO unused.
//   B, N-major: start = tile + k-step * 16 rows * 128 B; SBO = 1024 B between 8-row (K) atoms; LBO = one box
//               (64 rows * 128 B = 8 KiB) between 64-column (N) blocks.
//
// PERSISTENT: one block per SM walks the output tiles (grouped rasterization, GROUP_M tile rows at a time), and the
// ring runs on across tiles, so the producer prefetches the next tile while the consumers store this one. Otherwise
// one block per tile.
//
// TMA_STORE: the epilogue writes each consumer's accumulators (fp16) into a swizzled shared-memory staging tile and
// one thread per warpgroup stores it with TMA (whole 128-byte rows instead of 4-byte pieces per thread); the store
// runs on while the warpgroup starts its next tile. Needs C's rows at a 16-byte pitch (N % 8 == 0); otherwise, and
// when TMA_STORE is false, each thread stores its accumulators straight to C.
//
// Template parameters: STAGES (ring depth, 2..), BLOCK_N (128 or 256), CONSUMERS (1 or 2 warpgroups), PERSISTENT,
// TMA_STORE.
// Build for sm_90a with NDEBUG: wgmma and setmaxnreg exist only there, and a non-inlined call (an assert) inside the
// wgmma region makes ptxas serialize every wgmma (warning C7510).

#include "ring.cuh"

#ifndef GEMM_TMA_BLOCK_M
#define GEMM_TMA_BLOCK_M 128
#endif
#ifndef GEMM_TMA_BLOCK_K
#define GEMM_TMA_BLOCK_K 64
#endif
#ifndef GEMM_TMA_GROUP_M
#define GEMM_TMA_GROUP_M 8
#endif

constexpr int BLOCK_M = GEMM_TMA_BLOCK_M;
constexpr int BLOCK_K = GEMM_TMA_BLOCK_K;
constexpr int GROUP_M = GEMM_TMA_GROUP_M;  // tile rows per rasterization group (L2 reuse)
constexpr int WG_THREADS = 128;            // a warpgroup: 4 consecutive warps
constexpr int SWIZZLE_BYTES = 128;         // one swizzled row; a TMA box row of 64 halves
constexpr int BOX_N = SWIZZLE_BYTES / 2;   // N columns per B box
constexpr int ATOM_BYTES = 8 * SWIZZLE_BYTES;  // 8 rows: the swizzle pattern's period
constexpr int K_STEPS = BLOCK_K / 16;      // wgmma k16 steps per K tile
static_assert(BLOCK_M == 128 && BLOCK_K == 64, "the tile shapes below assume 128 x N x 64");
constexpr int PRODUCER_REGS = 40;          // setmaxnreg: the producer warpgroup needs few registers...
constexpr int CONSUMER_REGS = 232;         // ...so the consumers can hold their accumulators

template <int BLOCK_N, int CONSUMERS>
struct Tile {
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;
    static constexpr int WG_ROWS = BLOCK_M / CONSUMERS;      // rows of C per consumer warpgroup
    static constexpr int WG_M_TILES = WG_ROWS / 64;          // m64 wgmma tiles per consumer warpgroup
    static constexpr int ACC = BLOCK_N / 2;                  // fp32 accumulators per thread per m64 tile
    static_assert(WG_M_TILES * ACC <= 128, "at most 128 accumulator registers per thread");
    static constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;    // 16 KiB
    static constexpr int B_BOX_BYTES = BLOCK_K * SWIZZLE_BYTES;  // 8 KiB: 64 K rows of 64 halves
    static constexpr int B_BOXES = BLOCK_N / BOX_N;
    static constexpr int B_BYTES = B_BOXES * B_BOX_BYTES;   // 16 or 32 KiB
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;   // what one stage's full barrier expects
};

// Dynamic shared memory: [A stage 0 .. STAGES-1][B stage 0 .. STAGES-1][C staging, TMA_STORE only]
// [full[STAGES]][empty[STAGES]], based at a 1024-byte boundary (the swizzle atoms must be aligned; the launcher adds
// 1 KiB of slack for it). C staging: per consumer warpgroup, per m64 tile, BLOCK_N / 64 boxes of 64 x 64 halves.
template <int STAGES, int BLOCK_N, int CONSUMERS, bool TMA_STORE>
struct SmemLayout {
    using T = Tile<BLOCK_N, CONSUMERS>;
    static constexpr int C_BOX_BYTES = 64 * SWIZZLE_BYTES;  // 8 KiB: 64 rows of 64 halves
    static constexpr int C_BYTES = TMA_STORE ? BLOCK_M * BLOCK_N * 2 : 0;
    unsigned base;
    __device__ __forceinline__ unsigned a(int stage) const { return base + stage * T::A_BYTES; }
    __device__ __forceinline__ unsigned b(int stage) const { return base + STAGES * T::A_BYTES + stage * T::B_BYTES; }
    __device__ __forceinline__ unsigned c_box(int wg, int mt, int box) const {
        return base + STAGES * T::STAGE_BYTES + ((wg * T::WG_M_TILES + mt) * T::B_BOXES + box) * C_BOX_BYTES;
    }
    __device__ __forceinline__ unsigned full(int stage) const {
        return base + STAGES * T::STAGE_BYTES + C_BYTES + stage * 8;
    }
    __device__ __forceinline__ unsigned empty(int stage) const { return full(STAGES) + stage * 8; }
};

// A 128-byte tensor map (CUtensorMap), built on the host, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// wgmma shared-memory matrix descriptor: start address, leading / stride byte offsets (all >> 4), 128-byte swizzle.
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

// Output tile `tile` -> its first row and column (grouped rasterization, ring.cuh).
template <int BLOCK_N>
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    grouped_tile_origin<GROUP_M, BLOCK_M, BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
}

// ---------------------------------------------------------------------------------------------------------------
// producer: one thread fills the ring, STAGES K tiles ahead of the consumers at most.
// ---------------------------------------------------------------------------------------------------------------
template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE>
__device__ __forceinline__ void producer(const TensorMap& tmap_a, const TensorMap& tmap_b,
                                         const SmemLayout<STAGES, BLOCK_N, CONSUMERS, TMA_STORE>& smem, int tiles_m, int tiles_n,
                                         int num_k_tiles) {
    using T = Tile<BLOCK_N, CONSUMERS>;
    RingPosition write;  // smem_write_stage and its lap's parity
    const int num_tiles = tiles_m * tiles_n;
    for (int tile = blockIdx.x; tile < num_tiles; tile += PERSISTENT ? gridDim.x : num_tiles) {
        int m0, n0;
        tile_origin<BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            // Wait until every consumer warp released this stage (its wgmma finished reading it). On the first lap
            // the parity names the phase before the barrier's first, which counts as complete: no wait.
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            producer_acquire(smem.empty(write.stage), write);
#endif
            const unsigned full = smem.full(write.stage);
            producer_commit(full, T::STAGE_BYTES);  // the phase completes when all these bytes land
            const int k0 = k_tile * BLOCK_K;
            tma_load_2d(smem.a(write.stage), &tmap_a, full, k0, m0);
#pragma unroll
            for (int box = 0; box < T::B_BOXES; ++box)
                tma_load_2d(smem.b(write.stage) + box * T::B_BOX_BYTES, &tmap_b, full, n0 + box * BOX_N, k0);
            write.advance<STAGES>();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// consumer: one warpgroup's mainloop over the K tiles of one output tile.
// ---------------------------------------------------------------------------------------------------------------
template <int STAGES, int BLOCK_N, int CONSUMERS, bool TMA_STORE>
__device__ __forceinline__ void consumer_mainloop(float (&acc)[Tile<BLOCK_N, CONSUMERS>::WG_M_TILES]
                                                             [Tile<BLOCK_N, CONSUMERS>::ACC],
                                                  const SmemLayout<STAGES, BLOCK_N, CONSUMERS, TMA_STORE>& smem,
                                                  RingPosition& read, int num_k_tiles, int wg_row0, bool release) {
    using T = Tile<BLOCK_N, CONSUMERS>;
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) acc[mt][i] = 0.f;  // (wgmma's scale-d = 0 on the first step would do too)

    int released_stage = -1;  // the stage whose wgmma group may still run (released after the next group's wait)
    for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
        const int smem_read_stage = read.stage;
        consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
        fence_accumulators(acc);
        wgmma_fence();  // the accumulators' last writes (zeroing, earlier wgmma) are ordered before these wgmma
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            const unsigned long long desc_b =
                smem_descriptor(smem.b(smem_read_stage) + kk * 16 * SWIZZLE_BYTES, T::B_BOX_BYTES, ATOM_BYTES);
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt) {
                const unsigned long long desc_a = smem_descriptor(
                    smem.a(smem_read_stage) + (wg_row0 + mt * 64) * SWIZZLE_BYTES + kk * 32, 16, ATOM_BYTES);
                if constexpr (BLOCK_N == 256)
                    wgmma_m64n256k16_f32_f16(acc[mt], desc_a, desc_b);
                else
                    wgmma_m64n128k16_f32_f16(acc[mt], desc_a, desc_b);
            }
        }
        wgmma_commit_group();
        // Let this K tile's group run on; wait until the previous one is done, so its stage may be refilled.
        wgmma_wait<1>();
        fence_accumulators(acc);
        if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));  // the producer may refill it
        released_stage = smem_read_stage;
        read.advance<STAGES>();
    }
    wgmma_wait<0>();  // every wgmma of this tile is done: the accumulators are final, the last stage is free
    fence_accumulators(acc);
    if (released_stage >= 0 && release) consumer_release(smem.empty(released_stage));
}

// Epilogue: accumulators -> fp16 -> C, bounds-checked. In an m64nN wgmma tile, thread (warp w, lane l) holds rows
// 16 w + l / 4 and + 8, columns 8 j + 2 (l % 4) and + 1 for each j < N / 8; the two columns go out as one 32-bit
// store when N is even.
template <int BLOCK_N, int CONSUMERS>
__device__ __forceinline__ void store_tile(half_bits* C, int M, int N, int row0, int col0,
                                           const float (&acc)[Tile<BLOCK_N, CONSUMERS>::WG_M_TILES]
                                                             [Tile<BLOCK_N, CONSUMERS>::ACC]) {
    using T = Tile<BLOCK_N, CONSUMERS>;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const long long row = (long long)row0 + mt * 64 + warp * 16 + lane / 4 + half * 8;
            if (row >= M) continue;
            half_bits* c_row = C + row * N;
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int col = col0 + j * 8 + (lane % 4) * 2;
                store_pair(c_row + col, col, N, pack_half2(acc[mt][4 * j + 2 * half], acc[mt][4 * j + 2 * half + 1]));
            }
        }
}

// Epilogue through shared memory: accumulators -> fp16 -> this warpgroup's swizzled staging boxes -> TMA store.
// The staging boxes use the 128-byte swizzle of the C tensor map, which also keeps these 4-byte stores free of bank
// conflicts (the 8 rows a warp writes per column chunk land in 8 different 16-byte slots).
template <int STAGES, int BLOCK_N, int CONSUMERS>
__device__ __forceinline__ void store_tile_tma(const TensorMap& tmap_c,
                                               const SmemLayout<STAGES, BLOCK_N, CONSUMERS, true>& smem, int wg,
                                               int row0, int col0,
                                               const float (&acc)[Tile<BLOCK_N, CONSUMERS>::WG_M_TILES]
                                                                 [Tile<BLOCK_N, CONSUMERS>::ACC]) {
    using T = Tile<BLOCK_N, CONSUMERS>;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const bool elected = threadIdx.x % WG_THREADS == 0;  // issues this warpgroup's TMA stores
    const unsigned wg_barrier = 1 + wg;                 // named barrier of this warpgroup's 128 threads
    if (elected) cp_async_bulk_wait_read<0>();  // the previous tile's stores have finished reading the staging boxes
    named_barrier_sync(wg_barrier, WG_THREADS);  // ...which every thread of the warpgroup may now overwrite
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = warp * 16 + lane / 4 + half * 8;  // row inside the m64 tile
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int box = j / 8, chunk = j % 8;
                const unsigned dst = smem.c_box(wg, mt, box) + r * SWIZZLE_BYTES + ((chunk ^ (r % 8)) << 4) +
                                     (lane % 4) * 4;
                st_shared_u32(dst, pack_half2(acc[mt][4 * j + 2 * half], acc[mt][4 * j + 2 * half + 1]));
            }
        }
    fence_proxy_async_shared();                  // these generic-proxy writes must be visible to the TMA unit...
    named_barrier_sync(wg_barrier, WG_THREADS);  // ...from every thread, before the elected one starts the stores
    if (elected) {
#pragma unroll
        for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
            for (int box = 0; box < T::B_BOXES; ++box)
                tma_store_2d(&tmap_c, smem.c_box(wg, mt, box), col0 + box * BOX_N, row0 + mt * 64);
        cp_async_bulk_commit();
    }
}

template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE>
__global__ void __launch_bounds__(Tile<BLOCK_N, CONSUMERS>::THREADS, 1)
    gemm_tma_wgmma(const __grid_constant__ TensorMap tmap_a, const __grid_constant__ TensorMap tmap_b,
                   const __grid_constant__ TensorMap tmap_c, half_bits* __restrict__ C, int M, int N, int K) {
    using T = Tile<BLOCK_N, CONSUMERS>;
    static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const SmemLayout<STAGES, BLOCK_N, CONSUMERS, TMA_STORE> smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const bool tma_store = TMA_STORE && N % 8 == 0;  // C's rows at a 16-byte pitch: the map in tmap_c is valid

    const int warpgroup = threadIdx.x / WG_THREADS;
    const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int num_k_tiles = (K + BLOCK_K - 1) / BLOCK_K;

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
    __syncthreads();  // the barriers are initialized before any thread waits on or arrives at them

    if (warpgroup == 0) {
        // PRODUCER warpgroup: give registers away; one thread issues every copy, the other 127 are done.
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) producer<STAGES, BLOCK_N, CONSUMERS, PERSISTENT, TMA_STORE>(tmap_a, tmap_b, smem,
                                                                                         tiles_m, tiles_n,
                                                                                         num_k_tiles);
    } else {
        // CONSUMER warpgroups: take the registers; per output tile, MAINLOOP then EPILOGUE.
        setmaxnreg_inc<CONSUMER_REGS>();
        const int wg_row0 = (warpgroup - 1) * T::WG_ROWS;
        const bool release = threadIdx.x % 32 == 0;  // one arrive per warp on empty[]
        RingPosition read;                           // smem_read_stage and its lap's parity
        float acc[T::WG_M_TILES][T::ACC];
        const int num_tiles = tiles_m * tiles_n;
        for (int tile = blockIdx.x; tile < num_tiles; tile += PERSISTENT ? gridDim.x : num_tiles) {
            int m0, n0;
            tile_origin<BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
            consumer_mainloop<STAGES, BLOCK_N, CONSUMERS, TMA_STORE>(acc, smem, read, num_k_tiles, wg_row0,
                                                                      release);
            // EPILOGUE
            if constexpr (TMA_STORE) {
                if (tma_store) {
                    store_tile_tma<STAGES, BLOCK_N, CONSUMERS>(tmap_c, smem, warpgroup - 1, m0 + wg_row0, n0, acc);
                    continue;
                }
            }
            store_tile<BLOCK_N, CONSUMERS>(C, M, N, m0 + wg_row0, n0, acc);
        }
        // The staging boxes must stay untouched until the last TMA store has read them; then the block may exit.
        if (tma_store && threadIdx.x % WG_THREADS == 0) cp_async_bulk_wait_read<0>();
    }
}
