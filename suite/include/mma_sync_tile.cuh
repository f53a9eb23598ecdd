// mma_sync_tile.cuh: the Ampere GEMM tile both the PTX (suite/ptx/gemm.cu) and the cuda::pipeline
// (suite/cuda/gemm.cu) kernels are built on: C = A * B, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N),
// C (M x N), all row-major. Everything here is the same in both; they differ only in how global -> shared copies are
// issued and waited for.
//
// The design is a pipeline of pipelines (docs/design.md):
//   global --cp.async--> STAGES-deep shared-memory ring --ldmatrix--> 2 register fragment slots --mma.sync--> fp32
// Block tile 128 x 256 x BLOCK_K, 256 threads = 8 warps arranged 2 (M) x 4 (N), each warp owning a 64 x 64 tile of C
// as 4 x 8 mma.sync.m16n8k16 accumulators (128 fp32 registers per thread). BLOCK_K = 32 is the original design's tile;
// BLOCK_K = 64 halves the block barriers per multiply-add (one per 4 k-steps instead of per 2) at twice the shared
// memory per stage.
//
// Shared-memory layout, per stage: the A tile 128 x BLOCK_K (64- or 128-byte rows), then the B tile BLOCK_K x 256
// (512-byte rows). Both are XOR-swizzled at 16-byte-chunk granularity, not padded:
//   A, 64-byte rows:  chunk c of row r is stored at chunk c ^ ((r >> 1) & 3). Two rows share one 128-byte bank line,
//                     and ldmatrix reads 8 consecutive rows of one chunk column per phase: the swizzle spreads those
//                     8 chunks over the 8 distinct 16-byte slots of the bank line.
//   A, 128-byte rows, and B: chunk c of row r is stored at chunk c ^ (r & 7). Without it the 8 rows an ldmatrix
//                     phase reads would all hit the same 4 banks (8-way conflict); with it they land in 8 slots.
//   In all cases the 8 chunks one cp.async phase writes (8 threads x 16 B) are a permutation inside one bank line,
//   so the stores are conflict-free too. A swizzle keeps every stage a power-of-two size with no wasted bytes;
//   padding would work as well but costs 1/8 more shared memory per stage.
//
// Index arithmetic is 32-bit: the launcher (gemm.py) refuses M, N or K above 2^31 - 1 - 256, so every row, column and
// k index formed below, at most one tile past the matrix, fits an int; element offsets are formed in 64 bits.

#pragma once

#include "ring.cuh"

constexpr int BLOCK_M = 128;
constexpr int BLOCK_N = 256;
constexpr int THREADS = 256;
constexpr int WARPS_N = 4;  // warps arranged WARPS_M (2) x WARPS_N (4)
constexpr int WARP_M = 64;
constexpr int WARP_N = 64;
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 16;
constexpr int WARP_TILES_M = WARP_M / MMA_M;  // 4 mma tiles down a warp's tile
constexpr int WARP_TILES_N = WARP_N / MMA_N;  // 8 mma tiles across
constexpr int B_ROW_BYTES = BLOCK_N * 2;      // 512
constexpr int GROUP_M = 8;                    // tile rows per rasterization group (L2 reuse)

// The launcher (suite/ptx/gemm.py) passes the tile it computes grids and shared memory from as defines; the warp
// layout above fixes the tile, so a mismatch is a compile error here rather than a wrong launch.
#ifdef GEMM_BLOCK_M
static_assert(GEMM_BLOCK_M == BLOCK_M && GEMM_BLOCK_N == BLOCK_N, "launcher's tile differs from the kernel's");
static_assert(GEMM_THREADS == THREADS, "launcher's block size differs from the kernel's");
#endif

// Everything that depends on BLOCK_K: stage sizes, copies per thread, the A swizzle.
template <int BLOCK_K>
struct KTile {
    static_assert(BLOCK_K == 32 || BLOCK_K == 64, "BLOCK_K must be 32 or 64");
    static constexpr int K_STEPS = BLOCK_K / MMA_K;             // 2 or 4 k-steps of 16 per K tile
    static constexpr int A_ROW_BYTES = BLOCK_K * 2;             // 64 or 128
    static constexpr int A_CHUNKS = A_ROW_BYTES / 16;           // 16-byte chunks per A row: 4 or 8
    static constexpr int A_STAGE_BYTES = BLOCK_M * A_ROW_BYTES; // 8 or 16 KiB
    static constexpr int B_STAGE_BYTES = BLOCK_K * B_ROW_BYTES; // 16 or 32 KiB
    static constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
    static constexpr int A_COPIES = A_STAGE_BYTES / 16 / THREADS;  // cp.async of 16 B per thread per stage: 2 or 4
    static constexpr int B_COPIES = B_STAGE_BYTES / 16 / THREADS;  // 4 or 8
    static constexpr int A_ROW_STEP = THREADS / A_CHUNKS;          // rows between a thread's A copies: 64 or 32
    static constexpr int B_ROW_STEP = THREADS / (B_ROW_BYTES / 16);  // 8
    static_assert(K_STEPS % 2 == 0, "the register double buffer alternates slots per k-step: K_STEPS must be even");
    static_assert(A_COPIES * THREADS * 16 == A_STAGE_BYTES && B_COPIES * THREADS * 16 == B_STAGE_BYTES, "copy split");

    // Swizzled position of chunk `chunk` of A row `row` (see the header comment).
    __device__ __forceinline__ static int a_swizzle(int row, int chunk) {
        return A_CHUNKS == 4 ? chunk ^ ((row >> 1) & 3) : chunk ^ (row & 7);
    }
};

__device__ __forceinline__ int b_swizzle(int row, int chunk) { return chunk ^ (row & 7); }

struct TileCoords {
    int m0, n0;  // first row / column of C this block computes
};

// Grouped rasterization: consecutive blocks walk GROUP_M tile rows down one group before moving right, so the
// blocks resident at one time share A rows and B columns in L2.
__device__ __forceinline__ TileCoords block_tile(int M, int N) {
    TileCoords t;
    grouped_tile_origin<GROUP_M, BLOCK_M, BLOCK_N>(blockIdx.x, (M + BLOCK_M - 1) / BLOCK_M, (N + BLOCK_N - 1) / BLOCK_N,
                                                   t.m0, t.n0);
    return t;
}

// Per-thread state of the global -> shared producer. Copy i of a thread covers row (first row + i * ROW_STEP) and the
// same chunk column for every i, so one offset per operand describes all of its copies (and keeps registers free for
// the accumulators): the swizzle term is unchanged by a whole multiple of 8 rows.
struct Producer {
    const half_bits* a_src;  // A[m0 + row][chunk * 8] of copy 0 (row clamped to 0 when out of range)
    int a_rows_left;         // M - (m0 + row): copy i is in range when i * A_ROW_STEP < a_rows_left
    int a_col;               // K column of this thread's A chunk within a tile
    unsigned a_dst;          // swizzled byte offset of copy 0 inside an A stage
    int b_row;               // K row of copy 0 within a tile
    int b_col;               // absolute N column of this thread's B chunk
    unsigned b_dst;          // swizzled byte offset of copy 0 inside a B stage
};

template <int BLOCK_K>
__device__ __forceinline__ Producer make_producer(const half_bits* A, int M, int K, TileCoords t) {
    using T = KTile<BLOCK_K>;
    Producer p;
    const int a_row = threadIdx.x / T::A_CHUNKS, a_chunk = threadIdx.x % T::A_CHUNKS;
    p.a_rows_left = M - (t.m0 + a_row);
    p.a_col = a_chunk * 8;
    p.a_src = A + (long long)(p.a_rows_left > 0 ? t.m0 + a_row : 0) * K + a_chunk * 8;
    p.a_dst = a_row * T::A_ROW_BYTES + (T::a_swizzle(a_row, a_chunk) << 4);
    const int b_row = threadIdx.x / (B_ROW_BYTES / 16), b_chunk = threadIdx.x % (B_ROW_BYTES / 16);
    p.b_row = b_row;
    p.b_col = t.n0 + b_chunk * 8;
    p.b_dst = b_row * B_ROW_BYTES + (b_swizzle(b_row, b_chunk) << 4);
    return p;
}

// Producer: issue one K tile (A 128 x BLOCK_K and B BLOCK_K x 256) into one ring stage. Out-of-range rows and
// columns are zero-filled (cp.async with 0 source bytes), so the mainloop never needs bounds checks.
// One 16-byte chunk of B gathered with plain predicated loads, for rows of B that are not 16-byte aligned (N % 8 != 0):
// the 8 halves B[k][col .. col + 7] as four packed pairs, zero past K or N.
__device__ __forceinline__ void gather_b_chunk(const half_bits* B, int N, int K, int k, int col, unsigned (&packed)[4]) {
    const half_bits* src = B + (long long)k * N + col;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const unsigned lo = (k < K && col + 2 * j < N) ? src[2 * j] : 0u;
        const unsigned hi = (k < K && col + 2 * j + 1 < N) ? src[2 * j + 1] : 0u;
        packed[j] = lo | (hi << 16);
    }
}

template <bool N_ALIGNED, int BLOCK_K>
__device__ __forceinline__ void load_tile(const Producer& p, const half_bits* B, int N, int K, int k_tile,
                                          unsigned stage_base) {
    using T = KTile<BLOCK_K>;
    const int k0 = k_tile * BLOCK_K;
    const bool a_col_ok = k0 + p.a_col < K;  // K % 8 == 0: a chunk is all in or all out
#pragma unroll
    for (int i = 0; i < T::A_COPIES; ++i) {
        const bool ok = a_col_ok && i * T::A_ROW_STEP < p.a_rows_left;
        const half_bits* src = p.a_src + (long long)i * T::A_ROW_STEP * K + k0;
        cp_async_16(stage_base + p.a_dst + i * T::A_ROW_STEP * T::A_ROW_BYTES, ok ? src : p.a_src, ok ? 16 : 0);
    }
    const unsigned b_base = stage_base + T::A_STAGE_BYTES + p.b_dst;
    if constexpr (N_ALIGNED) {
#pragma unroll
        for (int i = 0; i < T::B_COPIES; ++i) {
            const int k = k0 + p.b_row + i * T::B_ROW_STEP;
            const bool ok = k < K && p.b_col < N;  // N % 8 == 0: a chunk is all in or all out
            cp_async_16(b_base + i * T::B_ROW_STEP * B_ROW_BYTES, ok ? B + (long long)k * N + p.b_col : B,
                        ok ? 16 : 0);
        }
    } else {
        // Rows of B are not 16-byte aligned, so cp.async cannot fetch them: gather each chunk's 8 halves with plain
        // predicated loads and store them with one 16-byte st.shared, one copy at a time (not unrolled, to keep the
        // gathered values from competing with the accumulators for registers). They become visible to the other warps
        // at the same barrier as the cp.async data.
#pragma unroll 1
        for (int i = 0; i < T::B_COPIES; ++i) {
            unsigned packed[4];
            gather_b_chunk(B, N, K, k0 + p.b_row + i * T::B_ROW_STEP, p.b_col, packed);
            st_shared_v4(b_base + i * T::B_ROW_STEP * B_ROW_BYTES, packed[0], packed[1], packed[2], packed[3]);
        }
    }
}

// Zero one ring stage (16 bytes per thread per step), for a stage no tile ever fills.
template <int BLOCK_K>
__device__ __forceinline__ void zero_stage(unsigned stage_base) {
#pragma unroll 1
    for (unsigned offset = threadIdx.x * 16; offset < KTile<BLOCK_K>::STAGE_BYTES; offset += THREADS * 16)
        st_shared_v4(stage_base + offset, 0u, 0u, 0u, 0u);
}

// Per-thread ldmatrix row addresses (byte offsets inside a stage), following the swizzles above. The chunk index of
// k-step kk is (2 * kk + lane / 16); since 2 * kk only touches bits the swizzle XORs, moving to another k-step (or,
// for B, to another 16-column pair nj) is one XOR of the same offset: ^ (kk * 32), ^ (nj * 32).
struct FragmentAddresses {
    unsigned a;  // A: row warp_m*64 + lane%16, chunk lane/16 swizzled; m-tile mi: + mi * 16 rows
    unsigned b;  // B: row lane%16, this warp's 64 columns, chunk lane/16 swizzled; k-step kk: + kk * 16 rows
};

template <int BLOCK_K>
__device__ __forceinline__ FragmentAddresses make_fragment_addresses(int warp_m, int warp_n, int lane) {
    using T = KTile<BLOCK_K>;
    const int a_row = warp_m * WARP_M + (lane & 15);
    const int b_row = lane & 15;
    return {
        static_cast<unsigned>(a_row * T::A_ROW_BYTES + (T::a_swizzle(a_row, lane >> 4) << 4)),
        static_cast<unsigned>(T::A_STAGE_BYTES + b_row * B_ROW_BYTES + warp_n * (WARP_N * 2) +
                              (b_swizzle(b_row, lane >> 4) << 4)),
    };
}

// Register fragments of one k-step: A for 4 m-tiles, B for 8 n-tiles.
struct Fragments {
    unsigned a[WARP_TILES_M][4];
    unsigned b[WARP_TILES_N][2];
};

// Shared -> registers: the fragments of k-step `kk` of the tile in the stage at `stage_base`.
template <int BLOCK_K>
__device__ __forceinline__ void load_fragments(Fragments& frag, const FragmentAddresses& addr, unsigned stage_base,
                                               int kk) {
    using T = KTile<BLOCK_K>;
#pragma unroll
    for (int mi = 0; mi < WARP_TILES_M; ++mi)
        ldmatrix_x4(stage_base + (addr.a ^ (kk * 32)) + mi * MMA_M * T::A_ROW_BYTES, frag.a[mi]);
#pragma unroll
    for (int nj = 0; nj < WARP_TILES_N / 2; ++nj) {
        unsigned t[4];  // matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
        ldmatrix_x4_trans(stage_base + (addr.b ^ (nj * 32)) + kk * MMA_K * B_ROW_BYTES, t);
        frag.b[2 * nj][0] = t[0];
        frag.b[2 * nj][1] = t[1];
        frag.b[2 * nj + 1][0] = t[2];
        frag.b[2 * nj + 1][1] = t[3];
    }
}

// The warp's 64 x 64 accumulators start at zero.
__device__ __forceinline__ void zero_accumulators(float (&acc)[WARP_TILES_M][WARP_TILES_N][4]) {
#pragma unroll
    for (int mi = 0; mi < WARP_TILES_M; ++mi)
#pragma unroll
        for (int ni = 0; ni < WARP_TILES_N; ++ni)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.f;
}

// Tensor cores: the warp's 64 x 64 accumulators += one k-step of fragments.
// BF16: the operands are bf16 (the fragments move 16-bit values whatever they are; only the mma and the output
// conversion differ).
template <bool BF16 = false>
__device__ __forceinline__ void warp_mma(float (&acc)[WARP_TILES_M][WARP_TILES_N][4], const Fragments& frag) {
#pragma unroll
    for (int mi = 0; mi < WARP_TILES_M; ++mi)
#pragma unroll
        for (int ni = 0; ni < WARP_TILES_N; ++ni) {
            if constexpr (BF16)
                mma_m16n8k16_bf16(acc[mi][ni], frag.a[mi], frag.b[ni][0], frag.b[ni][1]);
            else
                mma_m16n8k16(acc[mi][ni], frag.a[mi], frag.b[ni][0], frag.b[ni][1]);
        }
}

// The whole tile in the stage at `stage_base` through the tensor cores, fragments double-buffered in registers (the
// next k-step's ldmatrix issued before this one's mma). The single-stage paths of both GEMMs (ring depth 1).
template <int BLOCK_K, bool BF16 = false>
__device__ __forceinline__ void mma_stage(float (&acc)[WARP_TILES_M][WARP_TILES_N][4], Fragments (&frag)[2],
                                          const FragmentAddresses& addr, unsigned stage_base) {
    using T = KTile<BLOCK_K>;
    load_fragments<BLOCK_K>(frag[0], addr, stage_base, 0);
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk) {
        if (kk + 1 < T::K_STEPS) load_fragments<BLOCK_K>(frag[(kk + 1) % 2], addr, stage_base, kk + 1);
        warp_mma<BF16>(acc, frag[kk % 2]);
    }
}

// The ring and MAINLOOP of both Ampere GEMMs (ptx/gemm.cu: cp.async commit groups; cuda/gemm.cu: a cuda::pipeline).
// `Ring` is the one thing they do differently, how the copies of one K tile into a ring stage are issued and waited for:
//   acquire(), commit()   open and close one tile's batch of copies (a commit group; a pipeline stage)
//   load(k_tile, stage)   issue this thread's copies of K tile `k_tile` into ring stage `stage`
//   wait<N>()             wait until at most N batches, the newest, are still in flight
//   release()             this thread is done reading the oldest stage (cuda::pipeline's consumer_release)
//   drain()               wait for every batch before the block exits
//   GUARDS_LAST_FRAGMENTS how the last k-step's look-ahead into the tile after the last is kept off never-written
//                         shared memory: skip that fragment load (true), or zero the stage up front (false)
// STAGES == 1 is the synchronous baseline: load a tile, wait for all of it, compute on it, repeat.
template <int STAGES, int BLOCK_K, bool BF16, class Ring>
__device__ __forceinline__ void mma_sync_mainloop(Ring& ring, float (&acc)[WARP_TILES_M][WARP_TILES_N][4],
                                                  Fragments (&frag)[2], const FragmentAddresses& frag_addr,
                                                  unsigned smem_base, int num_k_tiles) {
    using T = KTile<BLOCK_K>;
    if constexpr (STAGES == 1) {
        // SYNCHRONOUS BASELINE: no copy overlaps math.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            ring.acquire();
            ring.load(k_tile, 0);
            ring.commit();
            ring.template wait<0>();  // the only batch in flight is this tile: wait for all of it
            __syncthreads();          // every thread's part of the tile has landed: any warp may now read any of it
            mma_stage<BLOCK_K, BF16>(acc, frag, frag_addr, smem_base);
            ring.release();
#ifndef PIPESUITE_FAULT_NO_REUSE_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            __syncthreads();  // every warp has finished reading the tile before the next load overwrites it
#endif
        }
    } else {
        int k_tile_next = 0;       // next K tile the producer fetches
        int smem_write_stage = 0;  // ring stage the producer fills next
        int smem_read_stage = 0;   // ring stage the warps read fragments from

        // Producer step: tile k_tile_next into the write stage as one batch. A tile past K still commits an (empty)
        // batch, so that "batch i holds tile i" stays true for every wait below.
        auto produce_next_tile = [&]() {
            ring.acquire();
            if (k_tile_next < num_k_tiles) ring.load(k_tile_next, smem_write_stage);
            ring.commit();
            ++k_tile_next;
            advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring
        };

        // PROLOGUE: fill STAGES - 1 stages.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) produce_next_tile();
        if constexpr (!Ring::GUARDS_LAST_FRAGMENTS) {
            // The mainloop's last k-step loads (and never uses) the first fragments of tile num_k_tiles, the one
            // after the last, from stage num_k_tiles % STAGES. With num_k_tiles >= STAGES that stage holds an earlier
            // tile; with fewer K tiles than stages no copy ever writes it: zero it, so that no read sees
            // uninitialized shared memory. Short-K blocks only, here, outside the mainloop.
            if (num_k_tiles < STAGES) zero_stage<BLOCK_K>(smem_base + num_k_tiles * T::STAGE_BYTES);
        }
        ring.template wait<STAGES - 2>();  // STAGES - 1 batches, tile 0 the oldest: let the newer STAGES - 2 fly
        __syncthreads();  // tile 0, copied by all threads, is now visible to every warp (and so is a zeroed stage)
        load_fragments<BLOCK_K>(frag[0], frag_addr, smem_base + smem_read_stage * T::STAGE_BYTES, 0);

        // MAINLOOP (steady state): per K tile, K_STEPS k-steps; each k-step loads the next k-step's fragments while
        // the tensor cores run on the current ones, and the first k-step also refills one ring stage from global.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
#pragma unroll
            for (int kk = 0; kk < T::K_STEPS; ++kk) {
                if (kk == T::K_STEPS - 1) {
                    // Committed so far: STAGES - 1 + (k_tile + 1) batches; the next tile, k_tile + 1, is followed by
                    // STAGES - 2 newer ones: let those fly and wait only for it.
                    ring.release();
                    ring.template wait<STAGES - 2>();
                    // Every thread's copies of tile k_tile + 1 have landed and every warp has finished its reads of
                    // the stage the producer refills next; both are needed before either side moves on.
#ifndef PIPESUITE_FAULT_NO_RING_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
                    __syncthreads();
#endif
                    advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
                }
                // Next k-step's fragments: the next k-step of this tile, or the first of the next tile.
                if (!Ring::GUARDS_LAST_FRAGMENTS || kk + 1 < T::K_STEPS || k_tile + 1 < num_k_tiles)
                    load_fragments<BLOCK_K>(frag[(kk + 1) % 2], frag_addr,
                                            smem_base + smem_read_stage * T::STAGE_BYTES, (kk + 1) % T::K_STEPS);
                // Refill the stage the warps finished reading in the previous K tile (the barrier at its last
                // k-step guarantees no warp still reads it) with tile k_tile + STAGES - 1.
                if (kk == 0) produce_next_tile();
                warp_mma<BF16>(acc, frag[kk % 2]);
            }
        }
        ring.drain();  // only empty batches (tiles past K) can be pending: drain them before exit
    }
}

// Epilogue: accumulators -> fp16 -> C, bounds-checked. Thread holds rows lane/4 and lane/4 + 8 of each mma tile,
// columns 2 * (lane % 4) and +1; those two columns go out as one 32-bit store when N is even.
template <bool BF16 = false>
__device__ __forceinline__ void store_accumulators(half_bits* C, int M, int N, int row0, int col0,
                                                   const float (&acc)[WARP_TILES_M][WARP_TILES_N][4], int lane) {
#pragma unroll
    for (int mi = 0; mi < WARP_TILES_M; ++mi)
#pragma unroll
        for (int ni = 0; ni < WARP_TILES_N; ++ni)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = row0 + mi * MMA_M + (lane >> 2) + half * 8;
                const int col = col0 + ni * MMA_N + (lane & 3) * 2;
                if (row >= M) continue;
                const float lo = acc[mi][ni][2 * half], hi = acc[mi][ni][2 * half + 1];
                store_pair(C + (long long)row * N + col, col, N, pack_16bit<BF16>(lo, hi));
            }
}

// One block of either Ampere GEMM: its 128 x 256 tile of C, the producer's and the warps' fragment addresses, the
// accumulators, the ring and MAINLOOP (mma_sync_mainloop) and the EPILOGUE. `make_ring(producer, smem)` builds the
// kernel's Ring (mma_sync_mainloop) from this block's producer state and its dynamic shared memory.
template <int STAGES, int BLOCK_K, bool BF16, class MakeRing>
__device__ __forceinline__ void mma_sync_gemm_block(const half_bits* A, half_bits* C, int M, int N, int K,
                                                    MakeRing make_ring) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (a ring's wait takes 0..7 pending batches)");
    extern __shared__ __align__(128) unsigned char smem[];  // (STAGES) x [A 128 x BLOCK_K | B BLOCK_K x 256], swizzled
    const unsigned smem_base = smem_u32(smem);              // the same ring, as ldmatrix addresses it

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const TileCoords tile = block_tile(M, N);
    const Producer producer = make_producer<BLOCK_K>(A, M, K, tile);
    const FragmentAddresses frag_addr = make_fragment_addresses<BLOCK_K>(warp_m, warp_n, lane);
    const int num_k_tiles = (K + BLOCK_K - 1) / BLOCK_K;
    auto ring = make_ring(producer, smem);

    float acc[WARP_TILES_M][WARP_TILES_N][4];  // (4 m-tiles, 8 n-tiles, 4 values): this thread's part of 64x64
    zero_accumulators(acc);
    Fragments frag[2];  // register double buffer: frag[kk % 2] feeds the mma while frag[(kk + 1) % 2] loads

    mma_sync_mainloop<STAGES, BLOCK_K, BF16>(ring, acc, frag, frag_addr, smem_base, num_k_tiles);

    // EPILOGUE
    store_accumulators<BF16>(C, M, N, tile.m0 + warp_m * WARP_M, tile.n0 + warp_n * WARP_N, acc, lane);
}
