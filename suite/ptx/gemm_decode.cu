// gemm_decode.cu: C = A * B for few token rows (M up to a few hundred) against a wide weight, on Hopper (sm_90a),
// fp16, bf16 or fp8 e4m3 in, fp32 accumulate: gemm_tma.cu's ring, descriptors and element types (sm90_gemm.cuh), main
// loop (sm90_mainloop.cuh's overlapped_mainloop; fp8: promoted, below) and fix-up arrival (sm90_fixup.cuh), the
// operands swapped.

#include "sm90_fixup.cuh"
#include "sm90_mainloop.cuh"

// The tiles above put C's M on wgmma's M side, at least 64 rows per warpgroup: at M = 16 three quarters of every
// wgmma and of every A stage are padding. Swapped, the weight's N runs along wgmma's M (64 weight columns per
// consumer warpgroup, read transposed from B's N-major box; fp8: B is given N x K, so its rows are wgmma's K-major A
// as they are) and the tokens along wgmma's N (BLOCK_T = 8..256 by 8; fp8: 8, 16, 32 or 64, the mid-M build's
// 64..FP8_MID_MOST_TOKENS by 8): every row of every wgmma is real weight, and a token tile pads M to a multiple of 8,
// not of wgmma's 64 (the mid-M tiles: M = 341 runs four token tiles of 88 rows where the tile rungs run three of 128).
//
//   units:  (weight tile of BW = 64 x CONSUMERS x W_TILES columns, token tile of BLOCK_T rows, split), split-major,
//           then weight tile, then token tile (the token tiles of one weight tile are neighbours: they read the same
//           weight boxes at about the same time, so it comes from DRAM about once). One block per SM at most walks
//           units b, b + grid, ... (persistent: the ring runs on across units, so the producer streams the next unit's
//           weight while the consumers store this one). Split s of K takes an equal share of the K stages (the first
//           k_stages % splits one more). TAIL (the mid-M build): whole tiles in persistent waves and only the last,
//           partial wave's tiles split (SplitTail), the same fix-up summing each one's shares.
//   stage:  W_BOXES (CONSUMERS x W_TILES) weight boxes of BK rows (K) x 64 columns (N), 128-byte swizzled (B's N-major
//           box, BK deep; fp8: K_ATOMS boxes of 64 rows (N) x 128 K each, B's K-major box), then K_ATOMS token boxes of
//           BLOCK_T rows x one 128-byte swizzle row of K (A's K-major box: 64 of K, fp8 128).
//   wgmma:  per k-step kk (16 of K; fp8 32): A = the weight, M-major: start = box + kk x 16 rows x 128 B, SBO = 1024 B
//           between 8-row (K) groups (the box is one 64-column block wide: LBO unused); fp8, K-major: start = weight
//           box kk / 4 + (kk % 4) x 32 B, SBO = 1024 B between 8-row (N) groups; B = the tokens, K-major: start =
//           token box kk / 4 + (kk % 4) x 32 B, SBO = 1024 B between 8-row (token) groups.
//   fp8:    promoted, as cuBLAS promotes by default: each K atom's 4 wgmma (128 of K) summed from zero into a
//           partial, which is added to the fp32 accumulators once its group completes; the per-tensor scales
//           multiply the sum before C's bf16 store. Decode waits for each atom before its adds (its pace is the
//           weight's stream); the mid-M build (PAIRS), whose pace is the tensor pipe's, takes K stages in pairs up
//           to FP8_PAIRS_MOST_TOKENS tokens: two partials, the first added while the second's wgmma run. Its wider
//           token tiles (three accumulators' registers would spill) hold one partial and wait for each stage as
//           decode does, the other consumer warpgroup's wgmma keeping the tensor pipe busy meanwhile.
//   epilogue: the 64 x BLOCK_T accumulator is C^T's tile: stored transposed into C; for a split tile, a serialized
//           fix-up in the kernel: each split stores its fp32 partial into its M x N slice of the workspace and
//           arrives on the (tile, warpgroup) counter; the last to arrive sums every slice, its own too, in split
//           order from zero and stores C, then zeroes the counter for the next launch. The order of the additions
//           is the same whoever arrives last (bit-reproducible), and only the counter is atomic (an integer). No
//           second kernel: at decode sizes its launch and pass would be a visible share of the call.
// fp8's mid-M tiles: promoted in pairs of K stages up to here (two partials beside the accumulators), with one
// partial above, up to the most (suite.waves.MID_FP8_PAIRS_MOST_TOKENS and MID_MOST_TOKENS_FP8, tied by a test)
constexpr int FP8_PAIRS_MOST_TOKENS = 104;
constexpr int FP8_MID_MOST_TOKENS = 160;

// Whether a build promotes fp8 in pairs: the mid-M build's (TAIL) tiles up to FP8_PAIRS_MOST_TOKENS tokens.
template <class E, bool TAIL, int BLOCK_T>
__host__ __device__ constexpr bool promote_in_pairs() {
    return TAIL && E::PROMOTE && BLOCK_T <= FP8_PAIRS_MOST_TOKENS;
}

template <int BLOCK_T, int CONSUMERS, int K_ATOMS, class E, bool PAIRS = false, int W_TILES = 1>
struct DecodeTile {
    static_assert(BLOCK_T % 8 == 0 && BLOCK_T >= 8 && BLOCK_T <= 256, "BLOCK_T: 8 .. 256 tokens by 8");
    static_assert(!E::PROMOTE || (PAIRS ? BLOCK_T <= FP8_PAIRS_MOST_TOKENS && CONSUMERS == 2 && K_ATOMS == 1
                                        : BLOCK_T == 8 || BLOCK_T == 16 || BLOCK_T == 32 || BLOCK_T == 64 ||
                                              (BLOCK_T > FP8_PAIRS_MOST_TOKENS && BLOCK_T <= FP8_MID_MOST_TOKENS &&
                                               CONSUMERS == 2 && K_ATOMS == 1)),
                  "fp8's promoted form: 8, 16, 32 or 64 tokens; the mid-M build's, up to FP8_MID_MOST_TOKENS tokens "
                  "on two consumer warpgroups, one K atom per stage, in pairs up to FP8_PAIRS_MOST_TOKENS");
    static_assert(!PAIRS || E::PROMOTE, "pairs of partials are fp8's promotion");
    static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "one to three consumer warpgroups (64 weight columns each)");
    static_assert(K_ATOMS == 1 || K_ATOMS == 2 || K_ATOMS == 4, "BK = 64, 128 or 256 (a TMA box has <= 256 rows)");
    static_assert(W_TILES == 1 || (W_TILES == 2 && !E::PROMOTE && K_ATOMS == 1),
                  "two m64 weight tiles per consumer warpgroup: 16-bit, one K atom per stage");
    static constexpr int W_BOXES = CONSUMERS * W_TILES;         // 64-column weight boxes per stage
    static constexpr int BW = 64 * W_BOXES;                     // weight columns (C's N) per unit: wgmma's M
    static constexpr int ATOM_K = SWIZZLE_BYTES / E::BYTES;     // K per 128-byte swizzled row: 64 (fp8 128)
    static constexpr int BK = K_ATOMS * ATOM_K;                 // K per stage
    static constexpr int K_STEPS = BK / E::K_STEP;              // wgmma per stage and consumer: 4 per K atom
    static constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;
    static constexpr int W_ATOM_BYTES = 64 * SWIZZLE_BYTES;     // 64 rows of 128 bytes: a K atom of 64 weight columns
    static constexpr int W_BOX_BYTES = K_ATOMS * W_ATOM_BYTES;  // a consumer's weight: BK rows (K) x 64 columns, or
                                                                // (fp8) K_ATOMS boxes of 64 rows (N) x 128 K
    static constexpr int T_BOX_BYTES = BLOCK_T * SWIZZLE_BYTES;  // BLOCK_T token rows x 64 of K
    static constexpr int T_OFFSET = W_BOXES * W_BOX_BYTES;      // the token boxes, after the weight's
    static constexpr int STAGE_BYTES = T_OFFSET + K_ATOMS * T_BOX_BYTES;  // every box a multiple of 1024 B
    static constexpr int ACC = BLOCK_T / 2;                     // fp32 accumulators per thread
    static constexpr bool PROMOTE_IN_PAIRS = PAIRS;
    // and their registers with the promoted partials beside them: one partial (decode's fp8), two (PAIRS)
    static constexpr int ACC_REGS = W_TILES * ACC * (PAIRS ? 3 : E::PROMOTE ? 2 : 1);
    // Above 64 such registers per thread two consumer warpgroups (above 32, three) need more than an even share of the
    // register file (168 per thread at 384 threads, 128 at 512): the producer gives its registers to them
    // (setmaxnreg), as gemm_tma.cu's does; three consumers share what the producer leaves.
    static constexpr bool SHIFT_REGS = (CONSUMERS == 2 && ACC_REGS > 64) || (CONSUMERS == 3 && ACC_REGS > 32);
    static constexpr int CONSUMER_REGS_EACH = CONSUMERS == 3 ? 152 : CONSUMER_REGS;
    static_assert(WG_THREADS * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS_EACH) <= 65536, "the registers fit 64 K");
};

// A decode unit's weight and token tile origins: unit tile `tile` is weight tile tile / tiles_t, token tile
// tile % tiles_t (the token tiles of one weight tile neighbour).
template <class T>
__device__ __forceinline__ void decode_origin(int tile, int tiles_t, int& w0, int& t0) {
    w0 = (tile / tiles_t) * T::BW;
    t0 = (tile % tiles_t) * (2 * T::ACC);
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
    static constexpr int FLAG_BYTES = 16;  // the verdicts' room: 4 bytes per consumer warpgroup, up to 4
    static_assert(T::THREADS / WG_THREADS - 1 <= FLAG_BYTES / 4, "a verdict per consumer warpgroup");
    static constexpr int BYTES = STAGES * T::STAGE_BYTES + 2 * STAGES * 8 + FLAG_BYTES;  // from the aligned base
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

// fp8's decode mainloop, promoted: per K stage, each K atom's 4 wgmma (128 of K) summed from zero into `part` (one
// group), awaited, and added into the fp32 accumulators; the stage is released once its last atom's group is done.
// The tensor pipe waits for this warpgroup's adds at each atom: decode's weight stream, which sets its pace, runs on
// in the ring meanwhile; in the mid-M build's tiles past FP8_PAIRS_MOST_TOKENS, the other consumer's wgmma run.
template <int STAGES, class T, class E, class Smem>
__device__ __forceinline__ void promoted_decode_mainloop(float (&acc)[T::ACC], const Smem& smem, RingPosition& read,
                                                         int k_stages, int wg, bool release) {
    float part[T::ACC];
#pragma unroll
    for (int i = 0; i < T::ACC; ++i) part[i] = 0.f;  // (the first k-step's scale-d = 0 ignores it: defined anyway)
    for (int ks = 0; ks < k_stages; ++ks) {
        const int smem_read_stage = read.stage;
        consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K stage have all landed
        const unsigned w = smem.stage(smem_read_stage) + wg * T::W_BOX_BYTES;
        const unsigned t = smem.stage(smem_read_stage) + T::T_OFFSET;
#pragma unroll
        for (int a = 0; a < T::BK / T::ATOM_K; ++a) {
            wgmma_group(part, [&] {  // its fence: the partial's last adds come before these wgmma overwrite it
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)  // 32 of K each: 32 bytes along both operands' 128-byte rows
                    E::template mma_decode<2 * T::ACC>(
                        part, smem_descriptor_at(w, a * T::W_ATOM_BYTES + kk * 32, 16, ATOM_BYTES),
                        smem_descriptor_at(t, a * T::T_BOX_BYTES + kk * 32, 16, ATOM_BYTES), kk == 0);
            });
            wgmma_wait<0>();  // this atom's group has completed: its partial is final
            promote_half(acc, part, 0);  // the whole accumulator: part holds as many registers as acc
        }
        if (release) consumer_release(smem.empty(smem_read_stage));  // every wgmma reading it has completed
        read.advance<STAGES>();
    }
}

// The mid-M build's fp8 mainloop, promoted in pairs (one K atom per stage): two stages' wgmma issued into two
// partials, the first added into the fp32 accumulators while the second runs, so the tensor pipe waits for this
// warpgroup's adds once per two stages (as gemm_tma's consumer_mainloop does for its 128 x 144 rung).
template <int STAGES, class T, class E, class Smem>
__device__ __forceinline__ void promoted_pairs_mainloop(float (&acc)[T::ACC], const Smem& smem, RingPosition& read,
                                                        int k_stages, int wg, bool release) {
    static_assert(T::BK == T::ATOM_K, "one K atom per stage");
    float part_a[T::ACC], part_b[T::ACC];
    // one K atom's 4 wgmma (32 of K each, 32 bytes along both operands' 128-byte rows) from zero into `part`
    auto issue = [&](float (&part)[T::ACC], int stage) {
        const unsigned w = smem.stage(stage) + wg * T::W_BOX_BYTES, t = smem.stage(stage) + T::T_OFFSET;
        wgmma_group(part, [&] {  // its fence: the partial's last adds come before these wgmma overwrite it
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                E::template mma_decode<2 * T::ACC>(part, smem_descriptor_at(w, kk * 32, 16, ATOM_BYTES),
                                                   smem_descriptor_at(t, kk * 32, 16, ATOM_BYTES), kk == 0);
        });
    };
    int ks = 0;
    for (; ks + 1 < k_stages; ks += 2) {
        const int first_stage = read.stage;
        consumer_wait(smem.full(first_stage), read);  // the TMA bytes of this K stage have all landed
        issue(part_a, first_stage);
        read.advance<STAGES>();
        const int second_stage = read.stage;
        consumer_wait(smem.full(second_stage), read);  // the TMA bytes of the next K stage have all landed
        issue(part_b, second_stage);
        read.advance<STAGES>();
        wgmma_wait<1>();  // the first stage's group has completed (the second runs): its stage is read, promote it
        if (release) consumer_release(smem.empty(first_stage));
        promote_half(acc, part_a, 0);
        wgmma_wait<0>();  // the second's has completed too
        if (release) consumer_release(smem.empty(second_stage));
        promote_half(acc, part_b, 0);
    }
    if (ks < k_stages) {  // an odd count: the last K stage alone
        const int smem_read_stage = read.stage;
        consumer_wait(smem.full(smem_read_stage), read);  // the TMA bytes of this K stage have all landed
        issue(part_a, smem_read_stage);
        wgmma_wait<0>();  // it has completed: its stage is read
        if (release) consumer_release(smem.empty(smem_read_stage));
        promote_half(acc, part_a, 0);
        read.advance<STAGES>();
    }
}

// PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT (the sanitizer's self-test only): the fix-up without its wait: split 0 sums
// the slices as soon as its mainloop ends, before any split (itself included) has written its partial.

// The walk: split-major splits of every tile (SplitTiles: the decode rule's splits, which put weight bytes in
// flight), or TAIL: whole tiles in persistent waves, then the last, partial wave's tiles split in K (SplitTail: the
// mid-M tiles, whose pace is the tensor pipe's).
template <bool TAIL>
struct DecodeWalk {
    using type = SplitTiles<true>;
};
template <>
struct DecodeWalk<true> {
    using type = SplitTail;
};

template <int STAGES, int BLOCK_T, int CONSUMERS, int K_ATOMS, class E, bool TAIL, int W_TILES = 1>
__global__ void __launch_bounds__(
    DecodeTile<BLOCK_T, CONSUMERS, K_ATOMS, E, promote_in_pairs<E, TAIL, BLOCK_T>(), W_TILES>::THREADS, 1)
    gemm_tma_decode(const __grid_constant__ TensorMap tmap_tokens, const __grid_constant__ TensorMap tmap_weight,
                    half_bits* __restrict__ C, int M, int N, int K, float* __restrict__ workspace,
                    int* __restrict__ counters, int splits, const float* __restrict__ scale_a,
                    const float* __restrict__ scale_b) {
    // the mid-M build (TAIL) promotes fp8 in pairs where its tiles hold two partials: its pace is the tensor pipe's
    using T = DecodeTile<BLOCK_T, CONSUMERS, K_ATOMS, E, promote_in_pairs<E, TAIL, BLOCK_T>(), W_TILES>;
    static_assert(!E::PROMOTE || TAIL || BLOCK_T <= 64, "fp8's tiles past 64 tokens are the mid-M build's (TAIL)");
    static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    using Smem = DecodeSmem<STAGES, T>;
    static_assert(Smem::BYTES + SMEM_ALIGN_SLACK == launcher_smem_bytes(STAGES, BLOCK_T, T::W_BOXES, K_ATOMS),
                  "the launcher's shared-memory figure (gemm_decode.py's Plan.smem_bytes) is this layout's size");
    const Smem smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const int tiles_t = (M + BLOCK_T - 1) / BLOCK_T;
    const int tiles = tiles_t * ((N + T::BW - 1) / T::BW);
    const int k_stages = (K + T::BK - 1) / T::BK;
    // the units (tile, split) and their K stages, walked by the producer and the consumers alike
    const typename DecodeWalk<TAIL>::type sched{tiles, k_stages, splits, (int)blockIdx.x, (int)gridDim.x};

    if (threadIdx.x == 0) {
        init_ring_barriers<STAGES>(smem, CONSUMERS * 4);  // one arrive per consumer warp on empty[]
        tma_prefetch_descriptor(&tmap_tokens);
        tma_prefetch_descriptor(&tmap_weight);
    }
    __syncthreads();  // the barriers are initialized before any thread waits or arrives

    const int warpgroup = warpgroup_index();
    if (warpgroup == 0) {
        // PRODUCER: one thread streams every unit's weight and token boxes through the ring.
        if constexpr (T::SHIFT_REGS) setmaxnreg_dec<PRODUCER_REGS>();  // the whole warpgroup, before 127 leave
        if (threadIdx.x != 0) return;
        RingPosition write;  // smem_write_stage and its lap's parity
        for (WorkUnit u = sched.first_unit(); u.valid(); u = sched.next_unit(u)) {
            int w0, t0;
            decode_origin<T>(u.tile, tiles_t, w0, t0);
            for (int ks = u.k_begin; ks < u.k_begin + u.k_tiles; ++ks) {
                // wait until every consumer warp released this stage (its wgmma finished reading it)
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
                producer_acquire(smem.empty(write.stage), write);
#endif
                const unsigned full = smem.full(write.stage), dst = smem.stage(write.stage);
                producer_commit(full, T::STAGE_BYTES);  // boxes past an edge are zero-filled and still counted
#pragma unroll
                for (int c = 0; c < T::W_BOXES; ++c) {
                    if constexpr (E::B_K_MAJOR) {  // fp8: B is N x K, a box per K atom
#pragma unroll
                        for (int a = 0; a < K_ATOMS; ++a)
                            tma_load_2d(dst + c * T::W_BOX_BYTES + a * T::W_ATOM_BYTES, &tmap_weight, full,
                                        ks * T::BK + a * T::ATOM_K, w0 + c * 64);
                    } else {
                        tma_load_2d(dst + c * T::W_BOX_BYTES, &tmap_weight, full, w0 + c * 64, ks * T::BK);
                    }
                }
#pragma unroll
                for (int a = 0; a < K_ATOMS; ++a)
                    tma_load_2d(dst + T::T_OFFSET + a * T::T_BOX_BYTES, &tmap_tokens, full,
                                ks * T::BK + a * T::ATOM_K, t0);
                write.advance<STAGES>();
            }
        }
        return;
    }

    // CONSUMER warpgroup wg: weight columns (wg x W_TILES + t) x 64 .. + 63 of each unit for its weight tiles
    // t < W_TILES; per unit, MAINLOOP then EPILOGUE.
    if constexpr (T::SHIFT_REGS) setmaxnreg_inc<T::CONSUMER_REGS_EACH>();
    const int wg = warpgroup - 1;
    const bool release = threadIdx.x % 32 == 0;  // one arrive per warp on empty[]
    RingPosition read;  // smem_read_stage and its lap's parity
    float acc_tiles[W_TILES][T::ACC];
    float(&acc)[T::ACC] = acc_tiles[0];
    float alpha = 1.f;  // fp8: C = (A B) x scale_a x scale_b
    if constexpr (E::SCALED) alpha = *scale_a * *scale_b;
    for (WorkUnit u = sched.first_unit(); u.valid(); u = sched.next_unit(u)) {  // the producer's walk
        int w0, t0;
        decode_origin<T>(u.tile, tiles_t, w0, t0);
#pragma unroll
        for (int mt = 0; mt < W_TILES; ++mt)
#pragma unroll
            for (int i = 0; i < T::ACC; ++i) acc_tiles[mt][i] = 0.f;
        if constexpr (T::PROMOTE_IN_PAIRS) {
            promoted_pairs_mainloop<STAGES, T, E>(acc, smem, read, u.k_tiles, wg, release);
        } else if constexpr (E::PROMOTE) {
            promoted_decode_mainloop<STAGES, T, E>(acc, smem, read, u.k_tiles, wg, release);
        } else {
            overlapped_mainloop<STAGES>(acc_tiles, smem, read, u.k_tiles, release, [&](int s) {
                // per k-step: the weight 16 rows (of K) further, the tokens 32 bytes along a box's rows (a box per 64
                // of K); each of the warpgroup's weight boxes against the same token box
                const unsigned t = smem.stage(s) + T::T_OFFSET;
#pragma unroll
                for (int kk = 0; kk < T::K_STEPS; ++kk)
#pragma unroll
                    for (int mt = 0; mt < W_TILES; ++mt) {
                        const unsigned w = smem.stage(s) + (wg * W_TILES + mt) * T::W_BOX_BYTES;
                        E::template mma_swapped<BLOCK_T>(
                            acc_tiles[mt], smem_descriptor_at(w, kk * 16 * SWIZZLE_BYTES, T::W_BOX_BYTES, ATOM_BYTES),
                            smem_descriptor_at(t, (kk / 4) * T::T_BOX_BYTES + (kk % 4) * 32, 16, ATOM_BYTES));
                    }
            });
        }

        // EPILOGUE: all of K here: C; else the split's partial, and the fix-up. Weight tile mt of this warpgroup
        // holds weight columns (wg x W_TILES + mt) x 64 .. + 63 of the unit.
        const int n_first = w0 + wg * W_TILES * 64;
        if (u.contributors == 1) {
#pragma unroll
            for (int mt = 0; mt < W_TILES; ++mt)
                for_each_decode_output<T>(M, N, n_first + mt * 64, t0, [&](int i, long long at) {
                    C[at] = (half_bits)(E::pack(acc_tiles[mt][i] * alpha, 0.f) & 0xffffu);
                });
            continue;
        }
        const long long slice = (long long)M * N;
#ifdef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
        if (u.index != 0) {  // the fault: the other splits store; split 0 sums at once (its own slice unwritten)
#endif
#pragma unroll
        for (int mt = 0; mt < W_TILES; ++mt)
            for_each_decode_output<T>(M, N, n_first + mt * 64, t0, [&](int i, long long at) {
                st_global_cg_f32(workspace + u.index * slice + at, acc_tiles[mt][i]);  // this split's share, to L2
            });
#ifdef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
            continue;
        }
#endif
        const int tid = threadIdx.x % WG_THREADS;
        int* counter = counters + u.tile * CONSUMERS + wg;
#ifndef PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT
        if (!fixup_arrive(counter, u.contributors, smem.flag(wg), wg, tid)) continue;  // a later split sums
#endif
        // the last split: every slice in split order from zero (its own read back too): bit-reproducible. A slice's
        // loads all issue before their adds (one L2 round trip per slice, not one per element)
#pragma unroll
        for (int mt = 0; mt < W_TILES; ++mt) {
            const int n0 = n_first + mt * 64;
            sum_in_k_order<float[T::ACC]>(
                u.contributors,
                [&](int s, float (&part)[T::ACC]) {
                    if constexpr (W_TILES > 1) {
#pragma unroll
                        for (int i = 0; i < T::ACC; ++i) part[i] = 0.f;  // outputs past M x N: summed, never stored
                    }
                    for_each_decode_output<T>(M, N, n0, t0, [&](int i, long long at) {
                        part[i] = ld_global_cg_f32(workspace + s * slice + at);
                    });
                },
                [&](int s, const float (&part)[T::ACC]) {
                    if constexpr (W_TILES > 1) {
                        // every accumulator written (the first slice's whole): none of the next tile's stays live
                        // from its mainloop beside this one's sum (it would spill)
#pragma unroll
                        for (int i = 0; i < T::ACC; ++i)
                            acc_tiles[mt][i] = s == 0 ? part[i] : acc_tiles[mt][i] + part[i];
                    } else {
                        for_each_decode_output<T>(M, N, n0, t0, [&](int i, long long) {
                            acc_tiles[mt][i] = s == 0 ? part[i] : acc_tiles[mt][i] + part[i];
                        });
                    }
                });
            for_each_decode_output<T>(M, N, n0, t0, [&](int i, long long at) {
                // the partials unscaled, the sum scaled
                C[at] = (half_bits)(E::pack(acc_tiles[mt][i] * alpha, 0.f) & 0xffffu);
            });
        }
        fixup_done(counter, tid);
    }
}
