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
// split-K's block order: 1 (the registered kernels), block b takes split b / tiles of tile b % tiles, so the blocks
// that read the same K range of A and B neighbour (as in the Triton split-K); 0, for tools/probe_llm.py: split
// b % splits of tile b / splits (a tile's splits neighbour). On the H200 at 512 x 512 x 65536 fp16 (one wave of 128
// blocks either way) the 128x128 split-K took 57 us in split order against 78 us in tile order (probe_llm.py split-k).
#ifndef GEMM_TMA_SPLIT_MAJOR
#define GEMM_TMA_SPLIT_MAJOR 1
#endif
constexpr int WG_THREADS = 128;            // a warpgroup: 4 consecutive warps
constexpr int SWIZZLE_BYTES = 128;         // one swizzled row: the K extent of a tile, and of a TMA box row
constexpr int ATOM_BYTES = 8 * SWIZZLE_BYTES;  // 8 rows: the swizzle pattern's period
constexpr int C_BOX_COLS = SWIZZLE_BYTES / 2;  // 16-bit C columns per TMA-store box
// setmaxnreg: the producer warpgroup needs few registers, so the consumers can hold their accumulators. The block's
// 64 K registers are shared out: one or two consumer warpgroups take 232 each (the producer 40); three take 160 (the
// producer 24, setmaxnreg's least), enough for a 64 x 128 fp8 tile's 64 accumulators and one 64-register partial.
template <int CONSUMERS>
__host__ __device__ constexpr int producer_regs() {
    return CONSUMERS == 3 ? 24 : 40;
}
template <int CONSUMERS>
__host__ __device__ constexpr int consumer_regs() {
    return CONSUMERS == 3 ? 160 : 232;
}

enum Schedule { SCHED_TILES, SCHED_SPLIT_K, SCHED_STREAM_K };

// GEMM_TMA_WG_BROADCAST=1 (Config.uniform_warpgroup: the 128 x 256 TMA-store rung): this thread's warpgroup
// broadcast from lane 0, so that the compiler knows it is the same across the warp and keeps what derives from it
// (the warpgroup's rows of A, its wgmma descriptors) in uniform registers, instead of per-thread registers moved over
// (R2UR) before every wgmma. On the H200 (tools/probe_llm.py uniform, 2026-12-04, with GEMM_TMA_DESC_PLUS) the rung's
// promoted fp8 went from 0.952 / 0.987 of cuBLAS at 8192^3 / 4096^3 to 0.990 / 1.029 (its four wgmma of a group each
// read their own uniform registers), fp16 from 1.022 / 1.002 to 1.029 / 1.007; the pairs rungs lost 5-10% with it
// (their wgmma all read the same four uniform registers, rewritten between them), and so did every rung with the
// broadcast alone: 0 elsewhere.
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

// GEMM_TMA_DESC_PLUS (1, the registered builds; 0: tools/probe_llm.py uniform only): smem_descriptor_at builds the
// descriptor of `addr` once and moves only its start address field by `offset` (a multiple of 16 inside the same
// buffer), one add per k-step, instead of the whole descriptor of addr + offset again (shared-memory offsets stay
// below 256 KiB, so the field never carries into the leading byte offset). Alone, on the H200: fp8's three promoted
// rungs 0.0-1.3% faster (the same probe).
#ifndef GEMM_TMA_DESC_PLUS
#define GEMM_TMA_DESC_PLUS 1
#endif
__device__ __forceinline__ unsigned long long smem_descriptor_at(unsigned addr, unsigned offset, unsigned lbo,
                                                                 unsigned sbo) {
    if constexpr (GEMM_TMA_DESC_PLUS) return smem_descriptor(addr, lbo, sbo) + (offset >> 4);
    else return smem_descriptor(addr + offset, lbo, sbo);
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
// fp8: Hopper's fp8 wgmma accumulates with fewer mantissa bits than fp32 and the error grows with K (measured on the
// H200: 2.6e-3 relative at K = 8192 against cuBLAS's 1.7e-3, 7.2e-3 at K = 65536, where bf16 rounding alone gives
// 1.7e-3). So each K tile (128 deep: 4 wgmma) is accumulated on its own, from zero, and then added to the fp32
// accumulators in registers ("promotion", as cuBLAS does by default and DeepSeek-V3 describes), in two halves of N
// so that the partial sum needs only 64 more registers per thread.
// GEMM_TMA_FP8_FAST_ACCUM=1 (tools/probe_llm.py fp8 only, no registered row): no promotion, wgmma's accumulator
// across all of K, as cuBLAS's use_fast_accum=True: what the promotion costs.
#ifndef GEMM_TMA_FP8_FAST_ACCUM
#define GEMM_TMA_FP8_FAST_ACCUM 0
#endif
// GEMM_TMA_FP8_PROBE_HALVES (tools/probe_llm.py fp8 only, no registered row; fast accumulation, so outside the
// tolerance at long K): the top rung's fp8 tile as the promoted form issues it, n128 halves, but into the fp32
// accumulators directly: 1 = each half its own group, waited for (the promoted form's waits without its adds);
// 2 = both halves in one group, the previous K tile's waited for (fast accumulation in n128 instructions). Together
// with GEMM_TMA_FP8_FAST_ACCUM they split promotion's cost into instruction width, waits and adds.
#ifndef GEMM_TMA_FP8_PROBE_HALVES
#define GEMM_TMA_FP8_PROBE_HALVES 0
#endif
struct E4M3 {  // bf16 out, with the per-tensor scales
    static constexpr int BYTES = 1, K_STEP = 32;
    static constexpr bool B_K_MAJOR = true, SCALED = true;
    static constexpr bool PROMOTE = !GEMM_TMA_FP8_FAST_ACCUM && !GEMM_TMA_FP8_PROBE_HALVES;
    __device__ __forceinline__ static half2_bits pack(float lo, float hi) { return pack_bf16x2(lo, hi); }
    template <int N>  // the fast-accumulation form: D += A * B over the whole tile width
    __device__ __forceinline__ static void mma(float (&d)[N / 2], unsigned long long da, unsigned long long db) {
        if constexpr (N == 256) wgmma_m64n256k32_f32_e4m3(d, da, db);
        else wgmma_m64n128k32_f32_e4m3(d, da, db);
    }
    // one HALF_N-wide half of N (64, 96 or 128; the promoted forms; 144: a whole m64 x 144 warpgroup tile): D = A * B
    // on the first k-step of a K tile, D += A * B on the others
    template <int HALF_N>
    __device__ __forceinline__ static void mma_half(float (&d)[HALF_N / 2], unsigned long long da,
                                                    unsigned long long db, bool first) {
        if constexpr (HALF_N == 128) {
            if (first) wgmma_m64n128k32_f32_e4m3_first(d, da, db);
            else wgmma_m64n128k32_f32_e4m3(d, da, db);
        } else if constexpr (HALF_N == 144) {  // the 128 x 144 rung's whole warpgroup tile (promoted in pairs)
            wgmma_m64n144k32_f32_e4m3(d, da, db, first);
        } else if constexpr (HALF_N == 96) {
            wgmma_m64n96k32_f32_e4m3(d, da, db, first);
        } else {
            static_assert(HALF_N == 64, "fp8 halves are 64, 96 or 128 wide");
            wgmma_m64n64k32_f32_e4m3(d, da, db, first);
        }
    }
    // the same with A from registers (GEMM_TMA_FP8_A_REGS), 64 or 128 wide
    template <int HALF_N>
    __device__ __forceinline__ static void mma_half_rs(float (&d)[HALF_N / 2], const unsigned (&a)[4],
                                                       unsigned long long db, bool first) {
        wgmma_m64nNk32_f32_e4m3_rs<HALF_N>(d, a, db, first);
    }
};
// GEMM_TMA_FP8_PIPELINED=1 (tools/probe_llm.py fp8 only, no registered row): where a consumer warpgroup owns one m64
// tile at most 192 wide, each K tile's two halves of N get a partial sum each, and the first half is promoted while
// the second's wgmma run (consumer_mainloop), instead of every group waited for before its adds.
// GEMM_TMA_SK_FIXED_FINISHER=1 (tools/probe_llm.py only, no registered row): stream-K's fix-up with a fixed finisher
// instead of the last unit to arrive (fix_up_fixed, below).
#ifndef GEMM_TMA_SK_FIXED_FINISHER
#define GEMM_TMA_SK_FIXED_FINISHER 0
#endif
#ifndef GEMM_TMA_SK_FIXED_CHUNK
#define GEMM_TMA_SK_FIXED_CHUNK 6  // fix_up_fixed's 16-byte loads in flight per thread and contributor, at most
#endif
#ifndef GEMM_TMA_FP8_PIPELINED
#define GEMM_TMA_FP8_PIPELINED 0
#endif
// GEMM_TMA_FP8_OVERLAP (1, the registered builds): where a consumer warpgroup owns one m64 tile at most 128 wide, or
// 144 (the 128 x 128 and 128 x 144 rungs, the split-K tiles), K tiles go in pairs into two partials, the first added
// while the second runs (consumer_mainloop): this warpgroup's tensor work drains for its adds once per two K tiles,
// not per K tile.
// On the H200 the 128 x 128 rung went from 0.88 / 0.95 of promoted cuBLAS at 8192^3 / 4096^3 to 0.95 / 1.02-1.03 (5
// stages; tools/probe_llm.py fp8, 2026-12-01). 0 (tools/probe_llm.py fp8 only): one partial, each K tile waited for.
#ifndef GEMM_TMA_FP8_OVERLAP
#define GEMM_TMA_FP8_OVERLAP 1
#endif
// GEMM_TMA_FP8_QUARTERS=1 (tools/probe_llm.py fp8 only, no registered row): the top rung's 64 x 256 warpgroup tile
// promoted in quarters of N (n64) through two 32-register partials taken in turn, so that three of a K tile's four
// promotions run while the next quarter's group is on the tensor pipe: one wait with the pipe idle per K tile, not
// two, on the 128 x 256 tile (whose registers hold no second n128 partial). On the H200 slower than the halves:
// 0.88 / 0.95 of promoted cuBLAS at 8192^3 / 4096^3 against 0.94 / 0.98 (tools/probe_llm.py fp8, 2026-12-01).
#ifndef GEMM_TMA_FP8_QUARTERS
#define GEMM_TMA_FP8_QUARTERS 0
#endif
// GEMM_TMA_FP8_A_REGS=1 (tools/probe_llm.py fp8 only, no registered row): the promoted fp8 mainloops (halves or
// quarters) read A from registers, loaded once per K tile with ldmatrix, instead of from shared memory by every wgmma:
// each wgmma then reads only its slice of B, and a warpgroup reads its 64 rows of A once per K tile, not once per half
// or quarter (16 more registers per thread). On the H200 slower too: 0.88 / 0.93 in halves (the same probe).
#ifndef GEMM_TMA_FP8_A_REGS
#define GEMM_TMA_FP8_A_REGS 0
#endif
// GEMM_TMA_FP8_EARLY_WAIT (tools/probe_llm.py fp8 only, no registered row): the promoted halves' mainloop (the
// 128 x 256 rung's) with each K tile's full barrier waited on under the K tile before's last group (1), and each stage
// released only after the next K tile's first group is issued (2): nothing but the adds between a group's wait and the
// next group's issue. On the H200 (2026-12-04) slower: 0.939 (1) and 0.937 (2) of promoted cuBLAS at 8192^3 and 3
// stages against 1.009, though the Gluon kernel's same change (1) is faster there (gemm_gluon.py's EARLY_WAIT).
#ifndef GEMM_TMA_FP8_EARLY_WAIT
#define GEMM_TMA_FP8_EARLY_WAIT 0
#endif
// GEMM_TMA_STMATRIX (the TMA-store epilogue's staging): 1, four 8 x 8 matrices of C per stmatrix (16 per thread for
// a 64 x 256 warpgroup tile); 0 (tools/probe_llm.py epilogue), one 4-byte store per pair of columns (64). On the H200
// (tools/probe_llm.py epilogue, 2026-12-04) never more than 0.7% slower, up to 1.6% faster on the top rung (fp8
// 4096^3: 1.050 / 1.047 of promoted cuBLAS against 1.034 / 1.049 at 3 / 4 stages) and on the 128 x 128 fp8 rung at 6
// stages 0.982 against 0.936 at 8192^3; the 16-bit types within 0.4%.
#ifndef GEMM_TMA_STMATRIX
#define GEMM_TMA_STMATRIX 1
#endif
// GEMM_TMA_PROBE_NO_EPILOGUE=1 (tools/probe_llm.py epilogue only, no registered row; C is left unwritten): the
// persistent tile walk skips every tile's epilogue (a run-time test the compiler cannot fold, M > 0, keeps the
// accumulators and promotion's adds live): 3-5% faster on the H200, of which the epilogue's own time is only 1.2% of
// an fp8 tile's cycles at 3 stages (GEMM_TMA_PROBE_CLOCKS).
#ifndef GEMM_TMA_PROBE_NO_EPILOGUE
#define GEMM_TMA_PROBE_NO_EPILOGUE 0
#endif
// GEMM_TMA_SKEW=S (tools/probe_llm.py skew only, no registered row): on the persistent tile walk with two consumer
// warpgroups, the second starts only once the first has done S K tiles of its first tile (named barrier
// SKEW_BARRIER), so that one warpgroup's epilogue would run while the other still issues wgmma. On the H200
// (2026-12-04) the skew did not last at 3 stages and fp8 lost 1.5 points (0.992 against 1.008 at 8192^3).
#ifndef GEMM_TMA_SKEW
#define GEMM_TMA_SKEW 0
#endif
enum : unsigned { SKEW_BARRIER = 3 };  // after __syncthreads' 0 and the consumer warpgroups' own 1 and 2
// GEMM_TMA_PROBE_CLOCKS=1 (tools/probe_llm.py skew only, no registered row): on the persistent tile walk each
// consumer warpgroup's first thread counts SM cycles spent in mainloops and in TMA-store epilogues and the tiles it
// did (on the H200 the instrumented fp8 build ran 3.7% slower than the registered one, the 16-bit ones within 0.3%), and
// writes them, the global timer's start and end and its SM clock's, into the workspace (8 64-bit words per warpgroup
// and block: mainloop cycles, epilogue cycles, tiles, start ns, end ns, start cycle, end cycle).
#ifndef GEMM_TMA_PROBE_CLOCKS
#define GEMM_TMA_PROBE_CLOCKS 0
#endif

template <int BM, int BLOCK_N, int CONSUMERS, class E>
struct Tile {
    static_assert(BM == 64 || BM == 128 || (BM == 256 && CONSUMERS == 2) || (BM == 192 && CONSUMERS == 3),
                  "BM must be 64, 128, 256 on two consumer warpgroups (128 rows, two m64 tiles, each), or 192 on "
                  "three (one m64 tile each)");
    static_assert(BLOCK_N == 128 || BLOCK_N == 192 || BLOCK_N == 256 || (BLOCK_N == 144 && E::B_K_MAJOR),
                  "BLOCK_N must be 128, 192 (fp8: promoted in n96 halves; 16-bit: three B boxes) or 256, or, for "
                  "fp8, 144 (in pairs)");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2 || (CONSUMERS == 3 && E::PROMOTE && BLOCK_N == 128),
                  "one or two consumer warpgroups; three for promoted fp8 on 128-wide tiles (their 160 registers "
                  "hold 64 accumulators and one partial)");
    static_assert(128 * producer_regs<CONSUMERS>() + CONSUMERS * 128 * consumer_regs<CONSUMERS>() <= 65536,
                  "the warpgroups' registers fit the SM's 64 K");
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

// SCHED_TILES's walk over the output tiles. CLUSTER == 1: block b takes tiles b, b + grid, ... (PERSISTENT) or tile
// b. CLUSTER > 1 (persistent only): the cluster's CTAs take CLUSTER vertically adjacent tiles at once, one each (by
// rank), so that they share B's columns; cluster c takes cluster tiles c, c + clusters, ..., each CLUSTER x BM rows
// (its last rows may lie past M: that CTA's A loads zero-fill and its stores are clipped, and it still loads and
// multicasts its share of B).
template <int BM, int BLOCK_N, int CLUSTER>
struct ClusterTiles {
    int tiles_m, tiles_n, count;  // count: cluster tiles of CLUSTER x BM rows (tiles when CLUSTER == 1)
    int rank;                     // this CTA's rank in its cluster
    __device__ __forceinline__ ClusterTiles(int tiles_m_, int tiles_n_)
        : tiles_m((tiles_m_ + CLUSTER - 1) / CLUSTER), tiles_n(tiles_n_), count(tiles_m * tiles_n),
          rank(CLUSTER > 1 ? (int)cluster_ctarank() : 0) {}
    __device__ __forceinline__ int first() const { return blockIdx.x / CLUSTER; }
    __device__ __forceinline__ int step() const { return gridDim.x / CLUSTER; }
    __device__ __forceinline__ void origin(int tile, int& m0, int& n0) const {
        tile_origin<BM * CLUSTER, BLOCK_N>(tile, tiles_m, tiles_n, m0, n0);
        m0 += rank * BM;
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

// split-K: `splits` blocks per tile (grid = tiles x splits), block b takes split b / tiles of tile b % tiles (in
// GEMM_TMA_SPLIT_MAJOR's order), an equal share of the K tiles (the first num_k_tiles % splits shares one more). Its partial goes to workspace slice
// `index` (the split), which split_k_reduce sums.
struct SplitK {
    int tiles, num_k_tiles, splits;
    __device__ __forceinline__ WorkUnit unit() const {
        const int tile = GEMM_TMA_SPLIT_MAJOR ? blockIdx.x % tiles : blockIdx.x / splits;
        const int split = GEMM_TMA_SPLIT_MAJOR ? blockIdx.x / tiles : blockIdx.x % splits;
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
// CLUSTER > 1: this CTA loads its own A and 1 / CLUSTER of B (rows of fp8's K-major B, boxes of 16-bit B), which it
// multicasts into the same stage of every CTA of the cluster (they share the tile's columns); the stage's full
// barrier in each CTA counts all of B's bytes, whichever CTA loaded them.
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int CLUSTER = 1>
__device__ __forceinline__ void produce_k_tile(const TensorMap& tmap_a, const TensorMap& tmap_b,
                                               const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                               const RingPosition& write, int k_tile, int m0, int n0,
                                               unsigned stage_bytes, int rank = 0) {
    // Wait until every consumer warp released this stage (its wgmma finished reading it). On the first lap the
    // parity names the phase before the barrier's first, which counts as complete: no wait.
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
    producer_acquire(smem.empty(write.stage), write);
#endif
    const unsigned full = smem.full(write.stage);
    producer_commit(full, stage_bytes);  // the phase completes when all these bytes land
    const int k0 = k_tile * T::BLOCK_K;
    tma_load_2d(smem.a(write.stage), &tmap_a, full, k0, m0);
    constexpr unsigned short ALL_CTAS = (1u << CLUSTER) - 1;
    if constexpr (E::B_K_MAJOR && CLUSTER > 1) {
        constexpr int ROWS = T::N / CLUSTER;  // this CTA's rows of B (the map's box)
        tma_load_2d_multicast(smem.b(write.stage) + rank * ROWS * SWIZZLE_BYTES, &tmap_b, full, k0, n0 + rank * ROWS,
                              ALL_CTAS);
    } else if constexpr (E::B_K_MAJOR) {
        tma_load_2d(smem.b(write.stage), &tmap_b, full, k0, n0);
    } else {
        static_assert(T::B_BOXES % CLUSTER == 0, "the cluster's CTAs share B's boxes evenly");
#pragma unroll
        for (int box = 0; box < T::B_BOXES; ++box) {
            const unsigned dst = smem.b(write.stage) + box * T::B_BOX_BYTES;
            if constexpr (CLUSTER == 1) tma_load_2d(dst, &tmap_b, full, n0 + box * T::BOX_N, k0);
            else if (box % CLUSTER == rank)
                tma_load_2d_multicast(dst, &tmap_b, full, n0 + box * T::BOX_N, k0, ALL_CTAS);
        }
    }
}

template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE, class E, int BM, int SCHEDULE,
          int CLUSTER = 1>
__device__ __forceinline__ void producer(const TensorMap& tmap_a, const TensorMap& tmap_b,
                                         const SmemLayout<STAGES, Tile<BM, BLOCK_N, CONSUMERS, E>, TMA_STORE, BM>& smem,
                                         int tiles_m, int tiles_n, int num_k_tiles, int splits,
                                         unsigned stage_bytes) {
    using T = Tile<BM, BLOCK_N, CONSUMERS, E>;
    RingPosition write;  // smem_write_stage and its lap's parity
    const int num_tiles = tiles_m * tiles_n;
    if constexpr (SCHEDULE == SCHED_TILES) {
        const ClusterTiles<BM, BLOCK_N, CLUSTER> tiles(tiles_m, tiles_n);
        for (int tile = tiles.first(); tile < tiles.count; tile += PERSISTENT ? tiles.step() : tiles.count) {
            int m0, n0;
            tiles.origin(tile, m0, n0);
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                produce_k_tile<STAGES, T, E, TMA_STORE, BM, CLUSTER>(tmap_a, tmap_b, smem, write, k_tile, m0, n0,
                                                                     stage_bytes, tiles.rank);
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

// load_a_fragments: this warpgroup's 64 rows of A in the K tile in `stage`, as the register operand of fp8 wgmma: per
// k-step (32 bytes of K) one ldmatrix_x4, whose four 8 x 16-byte matrices are rows 0-7 / 8-15 of the warp's 16 rows
// at bytes 0-15 / 16-31 of the k-step. Lane l gives the address of row l % 8 (+ 8 for l / 8 odd) of matrix l / 8, its
// 16-byte chunk moved by the 128-byte swizzle TMA wrote it with (chunk ^ row % 8; the stage is 1024-byte aligned).
template <int STAGES, class T, bool TMA_STORE, int BM>
__device__ __forceinline__ void load_a_fragments(unsigned (&a)[T::K_STEPS][4],
                                                 const SmemLayout<STAGES, T, TMA_STORE, BM>& smem, int stage,
                                                 int wg_row0) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const int row = wg_row0 + warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk) {
        const int chunk = kk * 2 + lane / 16;
        ldmatrix_x4(smem.a(stage) + row * SWIZZLE_BYTES + ((chunk ^ (row % 8)) << 4), a[kk]);
    }
}

// issue_half_rs: as issue_half, with A from the registers load_a_fragments filled.
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int REGS>
__device__ __forceinline__ void issue_half_rs(float (&part)[REGS], const unsigned (&a)[T::K_STEPS][4],
                                              const SmemLayout<STAGES, T, TMA_STORE, BM>& smem, int stage, int half) {
    constexpr int HALF_N = 2 * REGS;
#pragma unroll
    for (int i = 0; i < REGS; ++i) fence_operand(part[i]);
    wgmma_fence();  // the partial's last reads (its adds) and A's ldmatrix are ordered before these wgmma
    const unsigned b = smem.b(stage) + half * HALF_N * SWIZZLE_BYTES;
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk)
        E::template mma_half_rs<HALF_N>(part, a[kk], smem_descriptor_at(b, kk * 32, 16, ATOM_BYTES), kk == 0);
    wgmma_commit_group();
}

// issue_part: issue_half_rs with GEMM_TMA_FP8_A_REGS, else issue_half (`a` unread).
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int REGS>
__device__ __forceinline__ void issue_part(float (&part)[REGS], const unsigned (&a)[T::K_STEPS][4],
                                           const SmemLayout<STAGES, T, TMA_STORE, BM>& smem, int stage, int wg_row0,
                                           int half, int mt) {
    if constexpr (GEMM_TMA_FP8_A_REGS) issue_half_rs<STAGES, T, E>(part, a, smem, stage, half);
    else issue_half<STAGES, T, E>(part, smem, stage, wg_row0, half, mt);
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
// release_stage: this consumer warp has finished reading the stage whose empty barrier is at `empty_bar`. In a cluster
// of CLUSTER > 1 CTAs every CTA's producer multicasts B into this stage, so the warp arrives on that stage's empty
// barrier in every CTA of the cluster: each producer then refills only what no consumer anywhere still reads.
template <int CLUSTER>
__device__ __forceinline__ void release_stage(unsigned empty_bar) {
    if constexpr (CLUSTER == 1) {
        consumer_release(empty_bar);
    } else {
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r) mbarrier_arrive_cluster(mapa_shared(empty_bar, r));
    }
}

// acc_part: registers [part * REGS, (part + 1) * REGS) of an accumulator array, as an array of their own (constant
// indices once unrolled: they stay in registers)
template <int REGS, int ACC>
__device__ __forceinline__ float (&acc_part(float (&acc)[ACC], int part))[REGS] {
    return *reinterpret_cast<float(*)[REGS]>(&acc[part * REGS]);
}
template <int STAGES, class T, class E, bool TMA_STORE, int BM, int BLOCK_N, int CLUSTER = 1>
__device__ __forceinline__ void consumer_mainloop(float (&acc)[T::WG_M_TILES][T::ACC],
                                                  const SmemLayout<STAGES, T, TMA_STORE, BM>& smem,
                                                  RingPosition& read, int num_k_tiles, int wg_row0, bool release,
                                                  bool skew_arrive = false) {
    // GEMM_TMA_SKEW: the K tile after which the first consumer warpgroup lets the second start
    const int skew_k_tile = min(GEMM_TMA_SKEW, num_k_tiles) - 1;
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) acc[mt][i] = 0.f;  // (wgmma's scale-d = 0 on the first step would do too)

    if constexpr (GEMM_TMA_FP8_PROBE_HALVES == 1 && E::BYTES == 1) {
        // probe only: the promoted form's n128 halves and waits, accumulating in place (no partials, no adds)
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            const int smem_read_stage = read.stage;
            consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                for (int h = 0; h < BLOCK_N / 128; ++h) {
                    float(&d)[64] = acc_part<64>(acc[mt], h);
#pragma unroll
                    for (int i = 0; i < 64; ++i) fence_operand(d[i]);
                    wgmma_fence();  // earlier writes of these accumulators are ordered before these wgmma
#pragma unroll
                    for (int kk = 0; kk < T::K_STEPS; ++kk)
                        E::template mma_half<128>(
                            d,
                            smem_descriptor(smem.a(smem_read_stage) + (wg_row0 + mt * 64) * SWIZZLE_BYTES + kk * 32,
                                            16, ATOM_BYTES),
                            smem_descriptor(smem.b(smem_read_stage) + h * 128 * SWIZZLE_BYTES + kk * 32, 16,
                                            ATOM_BYTES),
                            false);
                    wgmma_commit_group();
                    wgmma_wait<0>();  // the half is done (as the promoted form waits before its adds)
#pragma unroll
                    for (int i = 0; i < 64; ++i) fence_operand(d[i]);
                }
            if (release) release_stage<CLUSTER>(smem.empty(smem_read_stage));  // every wgmma of this K tile completed
            read.advance<STAGES>();
        }
        return;
    }
    if constexpr (E::PROMOTE) {
        // fp8: each K tile's sum is promoted into the fp32 accumulators (issue_half, promote_half below).
        if constexpr (GEMM_TMA_FP8_QUARTERS && T::WG_M_TILES == 1 && BLOCK_N == 256) {
            // Quarters q0..q3 of N in two partials, a (q0, q2) and b (q1, q3): each quarter is issued as soon as the
            // partial it overwrites has been added, so a group is in flight during every add but the last.
            float part_a[32], part_b[32];
            unsigned a_frag[T::K_STEPS][4];  // GEMM_TMA_FP8_A_REGS only
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                const int smem_read_stage = read.stage;
                consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
                if constexpr (GEMM_TMA_FP8_A_REGS) load_a_fragments(a_frag, smem, smem_read_stage, wg_row0);
                issue_part<STAGES, T, E>(part_a, a_frag, smem, smem_read_stage, wg_row0, 0, 0);
                issue_part<STAGES, T, E>(part_b, a_frag, smem, smem_read_stage, wg_row0, 1, 0);
                wgmma_wait<1>();  // q0 has completed (q1 runs): promote it, then reuse its partial for q2
                promote_half(acc[0], part_a, 0);
                issue_part<STAGES, T, E>(part_a, a_frag, smem, smem_read_stage, wg_row0, 2, 0);
                wgmma_wait<1>();  // q1 has completed (q2 runs): promote it, then reuse its partial for q3
                promote_half(acc[0], part_b, 1);
                issue_part<STAGES, T, E>(part_b, a_frag, smem, smem_read_stage, wg_row0, 3, 0);
                wgmma_wait<1>();  // q2 has completed (q3 runs)
                promote_half(acc[0], part_a, 2);
                wgmma_wait<0>();  // q3 has completed too: the stage is read
                promote_half(acc[0], part_b, 3);
                if (release) release_stage<CLUSTER>(smem.empty(smem_read_stage));
                read.advance<STAGES>();
            }
        } else if constexpr (GEMM_TMA_FP8_PIPELINED && T::WG_M_TILES == 1 && BLOCK_N <= 192) {
            // Both halves issued at once into partials of their own, the first promoted while the second's group
            // runs: one wait with the tensor pipe idle per K tile instead of two. (Promoting the second half under
            // the next K tile's first group, across the loop's back edge, makes ptxas serialize every wgmma: C7514.)
            float part_lo[BLOCK_N / 4], part_hi[BLOCK_N / 4];
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                const int smem_read_stage = read.stage;
                consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
                issue_half<STAGES, T, E>(part_lo, smem, smem_read_stage, wg_row0, 0, 0);
                issue_half<STAGES, T, E>(part_hi, smem, smem_read_stage, wg_row0, 1, 0);
                wgmma_wait<1>();  // the first half has completed: promote it while the second half's group runs
                promote_half(acc[0], part_lo, 0);
                wgmma_wait<0>();  // the second half has completed too: the stage is read
                promote_half(acc[0], part_hi, 1);
                if (release) release_stage<CLUSTER>(smem.empty(smem_read_stage));
                read.advance<STAGES>();
            }
        } else if constexpr (GEMM_TMA_FP8_OVERLAP && T::WG_M_TILES == 1 && T::CONSUMER_WGS < 3 &&
                             (BLOCK_N <= 128 || BLOCK_N == 144)) {
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
                if (release) release_stage<CLUSTER>(smem.empty(first_stage));
                promote_half(acc[0], part_a, 0);
                wgmma_wait<0>();  // the second has completed too
                if (release) release_stage<CLUSTER>(smem.empty(second_stage));
                promote_half(acc[0], part_b, 0);
            }
            if (k_tile < num_k_tiles) {  // an odd count: the last K tile alone
                const int smem_read_stage = read.stage;
                consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
                issue_half<STAGES, T, E>(part_a, smem, smem_read_stage, wg_row0, 0, 0);
                wgmma_wait<0>();  // it has completed: its stage is read
                if (release) release_stage<CLUSTER>(smem.empty(smem_read_stage));
                promote_half(acc[0], part_a, 0);
                read.advance<STAGES>();
            }
        } else {
            // (Also the three-warpgroup 192 x 128 tile's: its 160 registers hold one partial, and two other
            // warpgroups' groups keep the tensor pipe busy while one adds.)
            // One 128-wide half of one m64 tile at a time, each group waited for before its adds (64 registers of
            // partial beside up to 128 accumulators), so each stage is released as soon as its K tile is done. The
            // two consumer warpgroups run at their own pace: made to take turns (0 issues a half, then 1, then 0,
            // through two named barriers) they were slower on the H200, 0.92 / 0.96 of promoted cuBLAS at 8192^3 /
            // 4096^3 against 0.94 / 0.98 (tools/probe_llm.py fp8, 2026-12-01).
            static_assert(!GEMM_TMA_FP8_A_REGS || T::WG_M_TILES == 1, "register A: one m64 tile per warpgroup");
            float part[64];
            unsigned a_frag[T::K_STEPS][4];  // GEMM_TMA_FP8_A_REGS only
            // GEMM_TMA_FP8_EARLY_WAIT (probe only, slower on the H200): the full barrier of each K tile waited on
            // under the K tile before's last group, and (2) each stage released after the next K tile's first issue
            constexpr int EARLY = GEMM_TMA_FP8_EARLY_WAIT, LAST_MT = T::WG_M_TILES - 1, LAST_H = BLOCK_N / 128 - 1;
            if constexpr (EARLY > 0) {
                if (num_k_tiles > 0) consumer_wait(smem.full(read.stage), read);  // the first K tile has landed
            }
            int released_stage = -1;  // EARLY > 1: the stage to release after the next issue
            for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
                const int smem_read_stage = read.stage;
                if constexpr (EARLY == 0) consumer_wait(smem.full(smem_read_stage), read);  // this K tile has landed
                if constexpr (GEMM_TMA_FP8_A_REGS) load_a_fragments(a_frag, smem, smem_read_stage, wg_row0);
#pragma unroll
                for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                    for (int h = 0; h < BLOCK_N / 128; ++h) {
                        issue_part<STAGES, T, E>(part, a_frag, smem, smem_read_stage, wg_row0, h, mt);
                        if constexpr (EARLY > 1) {
                            if (mt == 0 && h == 0 && released_stage >= 0 && release)
                                release_stage<CLUSTER>(smem.empty(released_stage));  // the K tile before is read
                        }
                        if constexpr (EARLY > 0) {
                            if (mt == LAST_MT && h == LAST_H && k_tile + 1 < num_k_tiles) {
                                RingPosition next = read;
                                next.advance<STAGES>();
                                consumer_wait(smem.full(next.stage), next);  // the next K tile has landed
                            }
                        }
                        wgmma_wait<0>();  // the half's partial sum is final: promote it into fp32
                        promote_half(acc[mt], part, h);
                    }
                // every wgmma of this K tile completed
                if constexpr (EARLY > 1) released_stage = smem_read_stage;
                else if (release) release_stage<CLUSTER>(smem.empty(smem_read_stage));
                read.advance<STAGES>();
                if constexpr (GEMM_TMA_SKEW > 0) {
                    if (skew_arrive && k_tile == skew_k_tile) named_barrier_arrive(SKEW_BARRIER, 2 * WG_THREADS);
                }
            }
            if constexpr (EARLY > 1) {
                if (released_stage >= 0 && release) release_stage<CLUSTER>(smem.empty(released_stage));
            }
        }
        return;
    }

    int released_stage = -1;  // the stage whose wgmma group may still run (released after the next group's wait)
    for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
        const int smem_read_stage = read.stage;
        consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K tile have all landed
        fence_accumulators(acc);
        wgmma_fence();  // the accumulators' last writes (zeroing, earlier wgmma) are ordered before these wgmma
        // per k-step: K-major A (and fp8's B) 32 bytes further along each row; N-major B 16 rows (of K) further
        const unsigned a0 = smem.a(smem_read_stage) + wg_row0 * SWIZZLE_BYTES, b0 = smem.b(smem_read_stage);
#pragma unroll
        for (int kk = 0; kk < T::K_STEPS; ++kk) {
            const unsigned long long desc_b =
                E::B_K_MAJOR ? smem_descriptor_at(b0, kk * 32, 16, ATOM_BYTES)
                             : smem_descriptor_at(b0, kk * 16 * SWIZZLE_BYTES, T::B_BOX_BYTES, ATOM_BYTES);
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt) {
                const unsigned long long desc_a =
                    smem_descriptor_at(a0, mt * 64 * SWIZZLE_BYTES + kk * 32, 16, ATOM_BYTES);
                if constexpr (GEMM_TMA_FP8_PROBE_HALVES == 2 && E::BYTES == 1 && BLOCK_N == 256) {
                    // probe only: the tile in two n128 instructions per k-step, one group per K tile
                    E::template mma_half<128>(acc_part<64>(acc[mt], 0), desc_a, desc_b, false);
                    const unsigned long long desc_b_hi =
                        smem_descriptor(smem.b(smem_read_stage) + 128 * SWIZZLE_BYTES + kk * 32, 16, ATOM_BYTES);
                    E::template mma_half<128>(acc_part<64>(acc[mt], 1), desc_a, desc_b_hi, false);
                } else if constexpr (!E::PROMOTE) {
                    E::template mma<BLOCK_N>(acc[mt], desc_a, desc_b);
                }
            }
        }
        wgmma_commit_group();
        // Let this K tile's group run on; wait until the previous one is done, so its stage may be refilled.
        wgmma_wait<1>();
        fence_accumulators(acc);
        // the producer may refill it
        if (released_stage >= 0 && release) release_stage<CLUSTER>(smem.empty(released_stage));
        released_stage = smem_read_stage;
        read.advance<STAGES>();
        if constexpr (GEMM_TMA_SKEW > 0) {
            if (skew_arrive && k_tile == skew_k_tile) named_barrier_arrive(SKEW_BARRIER, 2 * WG_THREADS);
        }
    }
    wgmma_wait<0>();  // every wgmma of this tile is done: the accumulators are final, the last stage is free
    fence_accumulators(acc);
    if (released_stage >= 0 && release) release_stage<CLUSTER>(smem.empty(released_stage));
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
// conflicts (the 8 rows of each 8 x 8 matrix of a stmatrix, or the 8 rows a warp's 4-byte stores write per column
// chunk, land in 8 different 16-byte slots). C_PASSES = 2: the staging holds half of the tile's columns (what lets a
// fourth 48 KiB stage fit beside it), so the tile goes out in two passes, the second waiting for the first's stores to
// have read the staging. A tile whose width is not whole boxes (144: two boxes and 16 columns) stores its last columns
// directly from registers (T::C_TAIL).
// (Staging the previous tile's C under the next tile's first wgmma groups, tried for fp8's 128 x 256 tile in
// 569e4c2, GEMM_TMA_FP8_FUSED_EPILOGUE, was correct and slower on the H200: 0.958 / 0.887 of promoted cuBLAS at
// 8192^3, 3 / 4 stages, against 1.009 / 0.997.)
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
        if constexpr (GEMM_TMA_STMATRIX) {
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
        } else {
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int r = warp * 16 + lane / 4 + half * 8;  // row inside the m64 tile
#pragma unroll
                    for (int j = pass * BOXES * 8; j < (pass + 1) * BOXES * 8; ++j) {  // 8 pairs of columns per box
                        const int box = (j / 8) % BOXES, chunk = j % 8;
                        const unsigned dst = smem.template c_box<BOXES>(wg, mt, box) + r * SWIZZLE_BYTES +
                                             ((chunk ^ (r % 8)) << 4) + (lane % 4) * 4;
                        float lo = acc[mt][4 * j + 2 * half], hi = acc[mt][4 * j + 2 * half + 1];
                        if constexpr (E::SCALED) {
                            lo *= alpha;
                            hi *= alpha;
                        }
                        st_shared_u32(dst, E::pack(lo, hi));
                    }
                }
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
__host__ __device__ constexpr int fixup_chunk_at_most(int groups, int most) {
    int chunk = groups < most ? groups : most;
    while (groups % chunk) --chunk;
    return chunk;
}
__host__ __device__ constexpr int fixup_chunk(int groups) { return fixup_chunk_at_most(groups, FIXUP_CHUNK); }

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

// GEMM_TMA_SK_FIXED_FINISHER's fix-up: the tile's first contributor (index 0, the unit with its first K tile: its
// block's range ends in this tile, so this is the block's last unit) is the finisher; every later contributor
// (index j >= 1, its block's first unit: it starts inside the tile) stores its partial to its slot and raises the
// slot's flag, and the finisher adds them to its own accumulators, in K order, each once its flag is up. So the
// finisher's partial never goes through L2, the others' are read once, and no unit waits but a block's last, on
// units that are other blocks' first: no cycle of waits (every block is resident: one per SM at most). Flags: one per
// slot and consumer warpgroup, zero between launches (the finisher lowers each it saw). A flag not up after
// 2^22 polls (seconds) is given up on, so that a broken schedule fails validation instead of hanging the GPU.
template <class T>
__device__ __forceinline__ bool fix_up_fixed(float (&acc)[T::WG_M_TILES][T::ACC], const WorkUnit& u,
                                             float* workspace, int* flags, int wg, int M, int row0) {
    constexpr int CONSUMERS = T::THREADS / WG_THREADS - 1;
    const int tid = threadIdx.x % WG_THREADS;
    const unsigned wg_barrier = 1 + wg;  // named barrier of this warpgroup's 128 threads
    if (u.index > 0) {
        store_slot<T>(acc, slot_of<T>(workspace, u.slot(u.index), wg), M, row0, tid);
        named_barrier_sync(wg_barrier, WG_THREADS);  // every thread of the warpgroup has issued its part...
        if (tid == 0) st_release_gpu(flags + u.slot(u.index) * CONSUMERS + wg, 1);  // ...which this publishes
        return false;  // the finisher stores C
    }
    // fewer loads in flight per contributor than fix_up's: the finisher's accumulators stay live beside them (fix_up's
    // sum starts from the first slot). Built for sm_90a, the 128 x 128 fp8 build keeps 24 bytes of stack at 6 and 40
    // at fix_up's 16; the 144-wide and 64 x 128 fp8 builds keep 200 / 128 bytes at any count (addresses saved once per
    // unit), the 16-bit builds none
    constexpr int CHUNK = fixup_chunk_at_most(T::ACC / 4, GEMM_TMA_SK_FIXED_CHUNK);
    constexpr long long POLL_LIMIT = 1ll << 22;
    for (int j = 1; j < u.contributors; ++j) {  // K order
        int* flag = flags + u.slot(j) * CONSUMERS + wg;
        if (tid == 0) {
            // wait until contributor j's warpgroup has published its partial (or the poll limit is reached)
            for (long long polls = 0; ld_acquire_gpu(flag) == 0 && polls < POLL_LIMIT; ++polls) {
            }
            *flag = 0;  // seen: zero again for the next launch (its slot is written once per launch)
        }
        named_barrier_sync(wg_barrier, WG_THREADS);  // the acquire, passed on to every thread of the warpgroup
        const float* slot = slot_of<T>(workspace, u.slot(j), wg);
#pragma unroll
        for (int mt = 0; mt < T::WG_M_TILES; ++mt) {
            if (!rows_in_range(M, row0, mt)) continue;
#pragma unroll
            for (int q0 = 0; q0 < T::ACC / 4; q0 += CHUNK) {
                float v[CHUNK][4];
                load_slot_chunk<T, CHUNK>(slot, mt, q0, tid, v);
#pragma unroll
                for (int q = 0; q < CHUNK; ++q)
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[mt][4 * (q0 + q) + i] += v[q][i];
            }
        }
    }
    return true;
}

// One unit of the stream-K schedule on a consumer warpgroup: MAINLOOP over its K tiles, then EPILOGUE: C when the
// unit covers all of K, else the fix-up, whose last arriving unit (GEMM_TMA_SK_FIXED_FINISHER: the tile's first unit)
// stores C. C goes out through the TMA-store epilogue where the kernel has one and C's rows allow it (`tma_store`),
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
    if constexpr (GEMM_TMA_SK_FIXED_FINISHER) {
        if (u.contributors > 1 && !fix_up_fixed<T>(acc, u, workspace, counters, wg, M, row0)) return;
    } else {
        if (u.contributors > 1 && !fix_up<T>(acc, u, workspace, counters, smem.flag(wg), wg, M, row0)) return;
    }
    if constexpr (TMA_STORE) {
        if (tma_store) {
            store_tile_tma<STAGES, T, E, BM, BLOCK_N, C_PASSES>(tmap_c, smem, wg, row0, n0, acc, alpha, C, M, N);
            return;
        }
    }
    store_tile<T, E, BLOCK_N>(C, M, N, row0, n0, acc, alpha);
}

template <int STAGES, int BLOCK_N, int CONSUMERS, bool PERSISTENT, bool TMA_STORE, class E = F16, int BM = 128,
          int SCHEDULE = SCHED_TILES, int C_PASSES = 1, int CLUSTER = 1>
__global__ void __launch_bounds__(Tile<BM, BLOCK_N, CONSUMERS, E>::THREADS, 1)
    gemm_tma_wgmma(const __grid_constant__ TensorMap tmap_a, const __grid_constant__ TensorMap tmap_b,
                   const __grid_constant__ TensorMap tmap_c, half_bits* __restrict__ C, int M, int N, int K,
                   const float* __restrict__ scale_a, const float* __restrict__ scale_b, float* workspace,
                   int* counters, int splits, int a_rows) {
    using T = Tile<BM, BLOCK_N, CONSUMERS, E>;
    static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
    static_assert(SCHEDULE != SCHED_SPLIT_K || !TMA_STORE, "split-K stores C (or its partials) directly");
    static_assert(C_PASSES == 1 || TMA_STORE, "C in passes is the TMA-store epilogue's");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 CTAs");
    static_assert(CLUSTER == 1 || (PERSISTENT && SCHEDULE == SCHED_TILES), "a cluster walks whole tiles, persistent");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const SmemLayout<STAGES, T, TMA_STORE, BM> smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const bool tma_store = TMA_STORE && N % 8 == 0;  // C's rows at a 16-byte pitch: the map in tmap_c is valid

    const int warpgroup = warpgroup_index();
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int num_k_tiles = (K + T::BLOCK_K - 1) / T::BLOCK_K;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(smem.full(s), 1);              // the producer's one arrive (plus the TMA bytes)
            mbarrier_init(smem.empty(s), CONSUMERS * 4 * CLUSTER);  // one arrive per consumer warp of the cluster
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
    // a cluster's CTAs arrive on each other's barriers and multicast into each other's stages: all initialized first
    if constexpr (CLUSTER > 1) cluster_sync();

    if (warpgroup == 0) {
        // PRODUCER warpgroup: give registers away; one thread issues every copy, the other 127 are done.
        setmaxnreg_dec<producer_regs<CONSUMERS>()>();
        if (threadIdx.x == 0)
            producer<STAGES, BLOCK_N, CONSUMERS, PERSISTENT, TMA_STORE, E, BM, SCHEDULE, CLUSTER>(
                tmap_a, tmap_b, smem, tiles_m, tiles_n, num_k_tiles, splits, a_rows * SWIZZLE_BYTES + T::B_BYTES);
    } else {
        // CONSUMER warpgroups: take the registers; per unit, MAINLOOP then EPILOGUE.
        setmaxnreg_inc<consumer_regs<CONSUMERS>()>();
        const int wg = warpgroup - 1;
        const int wg_row0 = wg * T::WG_ROWS;
        const bool release = threadIdx.x % 32 == 0;  // one arrive per warp on empty[]
        float alpha = 1.f;                           // fp8: C = (A B^T) x scale_a x scale_b
        if constexpr (E::SCALED) alpha = *scale_a * *scale_b;
        RingPosition read;                           // smem_read_stage and its lap's parity
        float acc[T::WG_M_TILES][T::ACC];
        const int num_tiles = tiles_m * tiles_n;
        if constexpr (SCHEDULE == SCHED_TILES) {
            const ClusterTiles<BM, BLOCK_N, CLUSTER> tiles(tiles_m, tiles_n);
            constexpr bool SKEWED = GEMM_TMA_SKEW > 0 && PERSISTENT && T::CONSUMER_WGS == 2;
            constexpr bool CLOCKED = GEMM_TMA_PROBE_CLOCKS && PERSISTENT;
            long long mainloop_cycles = 0, epilogue_cycles = 0, tiles_done = 0;
            const unsigned long long start_ns = CLOCKED ? global_timer_ns() : 0;
            const long long start_cycle = CLOCKED ? clock64() : 0;
            for (int tile = tiles.first(); tile < tiles.count; tile += PERSISTENT ? tiles.step() : tiles.count) {
                int m0, n0;
                tiles.origin(tile, m0, n0);
                const bool first = tile == tiles.first();
                // GEMM_TMA_SKEW: the second consumer warpgroup waits for the first's first K tiles
                if constexpr (SKEWED) {
                    if (first && wg == 1) named_barrier_sync(SKEW_BARRIER, 2 * WG_THREADS);
                }
                const long long t0 = CLOCKED ? clock64() : 0;
                consumer_mainloop<STAGES, T, E, TMA_STORE, BM, BLOCK_N, CLUSTER>(acc, smem, read, num_k_tiles,
                                                                                  wg_row0, release,
                                                                                  SKEWED && first && wg == 0);
                const long long t1 = CLOCKED ? clock64() : 0;
                if constexpr (GEMM_TMA_PROBE_NO_EPILOGUE) {
                    if (M > 0) continue;  // probe only: C left unwritten
                }
                // EPILOGUE
                if constexpr (TMA_STORE) {
                    if (tma_store) {
                        store_tile_tma<STAGES, T, E, BM, BLOCK_N, C_PASSES>(tmap_c, smem, wg, m0 + wg_row0, n0, acc,
                                                                            alpha, C, M, N);
                        if constexpr (CLOCKED) {
                            mainloop_cycles += t1 - t0;
                            epilogue_cycles += clock64() - t1;
                            ++tiles_done;
                        }
                        continue;
                    }
                }
                store_tile<T, E, BLOCK_N>(C, M, N, m0 + wg_row0, n0, acc, alpha);
            }
            if constexpr (CLOCKED) {
                if (threadIdx.x % WG_THREADS == 0) {
                    long long* out = reinterpret_cast<long long*>(workspace) + (blockIdx.x * T::CONSUMER_WGS + wg) * 8;
                    out[0] = mainloop_cycles;
                    out[1] = epilogue_cycles;
                    out[2] = tiles_done;
                    out[3] = (long long)start_ns;
                    out[4] = (long long)global_timer_ns();
                    out[5] = start_cycle;
                    out[6] = clock64();  // the two warpgroups' ends, on one SM's clock: their skew at the end
                }
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
    // Neither CTA of a cluster exits while the other may still arrive on its empty barriers (its consumers' last
    // releases); every thread of both, the producer warpgroup's idle ones too, meets here.
    if constexpr (CLUSTER > 1) cluster_sync();
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
//           second kernel: at 16 x 4096 x 14336 its launch and pass were ~2 us of 35.
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
