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
// The block tile, the operands' layouts in shared memory and the wgmma descriptors that read them: sm90_gemm.cuh.
// The parts, after CUTLASS's sm90 collective split: the tile schedules (sm90_tile_scheduler.cuh), the ring's producer
// and consumer mainloops (sm90_mainloop.cuh), the epilogues (sm90_epilogue.cuh) and stream-K's fix-up
// (sm90_fixup.cuh); this file composes them into the kernel, and holds split-K's second pass.
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
//   SCHED_SPLIT_TAIL: persistent blocks take whole tiles in data-parallel waves; the tiles of the last, partial wave
//                   are each split into `splits` equal shares of K (the launcher's count), dealt round robin, so the
//                   last round lasts a share of a tile instead of a whole one (or, where the shares outnumber the
//                   blocks, a few rounds of a share each).
// A unit that covers a tile's whole K range stores C directly. Otherwise:
//   split-K: each split stores its fp32 partial, unscaled, into its own M x N slice of the workspace, and a second
//            kernel (split_k_reduce, launched after it on the same stream) sums the slices in K order from zero,
//            spread over the whole GPU: S partial tiles summed on one SM would read S x the tile through one SM;
//   stream-K and the split tail: a unit (a tile's share of one block's iterations) writes its fp32 partial to a
//            workspace slot and arrives on the tile's counter; the last of the tile's units to arrive (stream-K: 2 or
//            3 share a tile; the split tail: `splits`) sums every partial in K order and stores C, then resets the
//            counter for the next launch.
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

#include "sm90_epilogue.cuh"
#include "sm90_fixup.cuh"
#include "sm90_mainloop.cuh"

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
    using Smem = SmemLayout<STAGES, T, TMA_STORE, BM>;
    static_assert(Smem::template bytes<C_PASSES>() + SMEM_ALIGN_SLACK == launcher_smem_bytes(STAGES, BM, BLOCK_N, TMA_STORE),
                  "the launcher's shared-memory figure (gemm_tma.py's Config.smem_bytes) is this layout's size");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const Smem smem{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const bool tma_store = TMA_STORE && N % 8 == 0;  // C's rows at a 16-byte pitch: the map in tmap_c is valid

    const int warpgroup = warpgroup_index();
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int num_k_tiles = (K + T::BLOCK_K - 1) / T::BLOCK_K;

    if (threadIdx.x == 0) {
        init_ring_barriers<STAGES>(smem, CONSUMERS * 4);  // one arrive per consumer warp on empty[]
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
        // the producer's walk, unit for unit: each unit's MAINLOOP, then its EPILOGUE
        const TileScheduler<SCHEDULE, PERSISTENT, BM, BLOCK_N> sched(tiles_m, tiles_n, num_k_tiles, splits);
        auto consume = [&](const WorkUnit& u) {
            int m0, n0;
            sched.origin(u, m0, n0);
            const int row0 = m0 + wg_row0;
            consumer_mainloop<STAGES, T, E, TMA_STORE, BM, BLOCK_N>(acc, smem, read, u.k_tiles, wg_row0, release);
            if constexpr (SCHEDULE == SCHED_SPLIT_K) {
                // all of K here: C; else this split's partial into its slice, for split_k_reduce
                if (u.contributors == 1) store_tile<T, E, BLOCK_N>(C, M, N, row0, n0, acc, alpha);
                else store_partial<T, BLOCK_N>(workspace + (long long)u.index * M * N, M, N, row0, n0, acc);
                return;
            } else if constexpr (SCHEDULE == SCHED_STREAM_K || SCHEDULE == SCHED_SPLIT_TAIL) {
                // not all of K here: the fix-up, whose last arriving unit stores C
                if (u.contributors > 1 && !fix_up<T>(acc, u, workspace, counters, smem.flag(wg), wg, M, row0)) return;
            }
            if constexpr (TMA_STORE) {
                if (tma_store) {
                    store_tile_tma<STAGES, T, E, BM, BLOCK_N, C_PASSES>(tmap_c, smem, wg, row0, n0, acc, alpha, C, M,
                                                                        N);
                    return;
                }
            }
            store_tile<T, E, BLOCK_N>(C, M, N, row0, n0, acc, alpha);
        };
        sched.walk(consume);
        // The staging boxes must stay untouched until the last TMA store has read them; then the block may exit.
        if (tma_store && threadIdx.x % WG_THREADS == 0) cp_async_bulk_wait_read<0>();
    }
}

// ---------------------------------------------------------------------------------------------------------------
// split-K's second pass: C = (slice 0 + slice 1 + ... + slice splits-1) x scales, in split (K) order (sum_in_k_order,
// the fix-ups' order), so the result is the same bits every run; launched after the split kernel on the same stream,
// which is the only wait it needs. A second kernel, not a fix-up inside the split kernel: S partial tiles summed on
// one SM would read S x the tile through that SM; here the sum is spread over the whole GPU. Each thread takes 4
// consecutive elements of C; 16-byte loads when M x N % 4 == 0 (every slice then starts 16-byte aligned), else one
// element at a time. The slices' loads are unrolled so that several are in flight.
// ---------------------------------------------------------------------------------------------------------------
constexpr int REDUCE_THREADS = 256;

template <class E>
__global__ void __launch_bounds__(REDUCE_THREADS)
    split_k_reduce(const float* __restrict__ workspace, half_bits* __restrict__ C, long long mn, int splits,
                   const float* __restrict__ scale_a, const float* __restrict__ scale_b) {
    const long long i = ((long long)blockIdx.x * REDUCE_THREADS + threadIdx.x) * 4;
    if (i >= mn) return;
    float v[4];
    auto add = [&](int s, const float (&part)[4]) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = s == 0 ? part[e] : v[e] + part[e];
    };
    if (mn % 4 == 0) {
        sum_in_k_order<float[4], 4>(
            splits,
            [&](int s, float (&part)[4]) {
                const float4 slice = *reinterpret_cast<const float4*>(workspace + s * mn + i);
                part[0] = slice.x, part[1] = slice.y, part[2] = slice.z, part[3] = slice.w;
            },
            add);
    } else {
        sum_in_k_order<float[4], 4>(
            splits,
            [&](int s, float (&part)[4]) {
#pragma unroll
                for (int e = 0; e < 4; ++e) part[e] = i + e < mn ? workspace[s * mn + i + e] : 0.f;
            },
            add);
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
