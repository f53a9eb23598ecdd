// sm90_gemm.cuh: what the Hopper GEMM kernels (gemm_tma.cu, gemm_decode.cu) share: warpgroup and swizzle constants,
// wgmma shared-memory descriptors, the element types (what differs between fp16, bf16 and fp8), the block tile and
// its shared-memory layout, and the tensor map a kernel receives.
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
#pragma once

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

enum Schedule { SCHED_TILES, SCHED_SPLIT_K, SCHED_STREAM_K, SCHED_SPLIT_TAIL };

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
    __device__ __forceinline__ static half2_bits pack(float lo, float hi) { return pack_16bit<IS_BF16>(lo, hi); }
    template <int N>
    __device__ __forceinline__ static void mma(float (&d)[N / 2], unsigned long long da, unsigned long long db) {
        wgmma_m64nNk16_f32_nmajor<N, IS_BF16>(d, da, db);
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
        wgmma_m64nNk32_f32_e4m3<HALF_N>(d, da, db, first);
    }
    // the decode kernel's form: the weight (B, N x K: K-major) on wgmma's M side as its A, N tokens (A of C = A B,
    // K-major) as its B; D = on the first k-step of a K atom, D += on the others
    template <int N>
    __device__ __forceinline__ static void mma_decode(float (&d)[N / 2], unsigned long long dw, unsigned long long dt,
                                                      bool first) {
        wgmma_m64nNk32_f32_e4m3<N>(d, dw, dt, first);
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
    // bytes from the aligned base to the end of the C staging of C_PASSES passes (TMA_STORE), or of the flags
    template <int C_PASSES>
    __host__ __device__ static constexpr int bytes() {
        return TMA_STORE ? C_OFFSET + T::CONSUMER_WGS * T::WG_M_TILES * (T::C_BOXES / C_PASSES) * C_BOX_BYTES
                         : STAGES * T::STAGE_BYTES + BARRIER_BYTES;
    }
};

// The launcher's figure of a kernel's dynamic shared memory: the host (gemm_tma.py, gemm_decode.py) passes the bytes it
// will launch each instantiation with as PIPESUITE_SMEM_FIGURES, a list of {{key}, bytes} (the key: the template
// parameters the layout depends on), and each kernel static_asserts that its own layout plus SMEM_ALIGN_SLACK takes
// exactly that: the two computations cannot drift apart. -1: no figure passed for this key.
constexpr int SMEM_ALIGN_SLACK = 1024;  // the dynamic base is rounded up to the 1024-byte swizzle atom
struct SmemFigure {
    int key[4];
    int bytes;
};
#ifdef PIPESUITE_SMEM_FIGURES
constexpr SmemFigure SMEM_FIGURES[] = PIPESUITE_SMEM_FIGURES;
#endif
__host__ __device__ constexpr int launcher_smem_bytes(int k0, int k1, int k2, int k3) {
#ifdef PIPESUITE_SMEM_FIGURES
    for (const SmemFigure& f : SMEM_FIGURES)
        if (f.key[0] == k0 && f.key[1] == k1 && f.key[2] == k2 && f.key[3] == k3) return f.bytes;
#endif
    return -1;
}

// The ring's barriers, set up by one thread before any thread waits or arrives: full[s] completes on the producer's
// one arrive (plus the TMA bytes it announces), empty[s] on one arrive per consumer warp.
template <int STAGES, class Smem>
__device__ __forceinline__ void init_ring_barriers(const Smem& smem, unsigned consumer_warps) {
    for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(smem.full(s), 1);
        mbarrier_init(smem.empty(s), consumer_warps);
    }
    fence_mbarrier_init();  // the initialization is visible to the copy engine and to the other threads
}

// A 128-byte tensor map (CUtensorMap), built on the host, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// Output tile `tile` -> its first row and column (grouped rasterization, ring.cuh).
template <int BM, int BLOCK_N>
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    grouped_tile_origin<GROUP_M, BM, BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
}
