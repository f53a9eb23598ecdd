// gemm.cu: C = A * B, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N), C (M x N), all row-major.
//
// The cp.async + ldmatrix + mma.sync pipeline of pipelines on the tile of mma_sync_tile.cuh:
//   global --cp.async--> STAGES-deep shared-memory ring --ldmatrix--> 2 register fragment slots --mma.sync--> fp32
//
// Template parameters: STAGES (1 = synchronous baseline, 2.. = cp.async ring depth), N_ALIGNED (N % 8 == 0, so every
// 16-byte chunk of a B row is aligned and cp.async can fetch it; otherwise B is loaded with plain predicated loads,
// correct for any N but without the async overlap for B), BLOCK_K (32 or 64) and BF16 (bf16 operands and output
// instead of fp16: mma.sync.m16n8k16 .bf16, the same fragments).

#include "mma_sync_tile.cuh"

template <int STAGES, bool N_ALIGNED, int BLOCK_K, bool BF16 = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_f16_f32acc(const half_bits* __restrict__ A, const half_bits* __restrict__ B, half_bits* __restrict__ C,
                    int M, int N, int K) {
    using T = KTile<BLOCK_K>;
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (cp.async.wait_group takes 0..7)");
    extern __shared__ __align__(128) unsigned char smem[];  // (STAGES) x [A 128 x BLOCK_K | B BLOCK_K x 256], swizzled
    const unsigned smem_base = smem_u32(smem);

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const TileCoords tile = block_tile(M, N);
    const Producer producer = make_producer<BLOCK_K>(A, M, K, tile);
    const FragmentAddresses frag_addr = make_fragment_addresses<BLOCK_K>(warp_m, warp_n, lane);
    const int num_k_tiles = (K + BLOCK_K - 1) / BLOCK_K;

    float acc[WARP_TILES_M][WARP_TILES_N][4];  // (4 m-tiles, 8 n-tiles, 4 values): this thread's part of 64x64
    zero_accumulators(acc);

    Fragments frag[2];  // register double buffer: frag[kk % 2] feeds the mma while frag[(kk + 1) % 2] loads

    if constexpr (STAGES == 1) {
        // SYNCHRONOUS BASELINE: load a tile, wait for all of it, compute on it, repeat. No copy overlaps math.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            load_tile<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile, smem_base);
            cp_async_commit();
            cp_async_wait<0>();  // the only group in flight is this tile: wait for all of it
            __syncthreads();     // every thread's part of the tile has landed: any warp may now read any of it
            mma_stage<BLOCK_K, BF16>(acc, frag, frag_addr, smem_base);
#ifndef PIPESUITE_FAULT_NO_REUSE_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            __syncthreads();  // every warp has finished reading the tile before the next load overwrites it
#endif
        }
    } else {
        int k_tile_next = 0;       // next K tile the producer fetches
        int smem_write_stage = 0;  // ring stage the producer fills next
        int smem_read_stage = 0;   // ring stage the warps read fragments from

        // PROLOGUE: fill STAGES - 1 stages, one commit group per K tile. A tile past K still commits an (empty) group
        // so that "group i holds tile i" stays true for every wait below.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (k_tile_next < num_k_tiles)
                load_tile<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile_next,
                                              smem_base + smem_write_stage * T::STAGE_BYTES);
            cp_async_commit();
            ++k_tile_next;
            ++smem_write_stage;
        }
        // The mainloop's last k-step loads (and never uses) the first fragments of tile num_k_tiles, the one after
        // the last, from stage num_k_tiles % STAGES. With num_k_tiles >= STAGES that stage holds an earlier tile;
        // with fewer K tiles than stages no copy ever writes it: zero it, so that no read sees uninitialized shared
        // memory. Short-K blocks only, here, outside the mainloop.
        if (num_k_tiles < STAGES) zero_stage<BLOCK_K>(smem_base + num_k_tiles * T::STAGE_BYTES);
        cp_async_wait<STAGES - 2>();  // STAGES - 1 groups committed, tile 0 the oldest: let the newer STAGES - 2 fly
        __syncthreads();              // tile 0, copied by all threads, is now visible to every warp (and so is the
                                      // zeroed stage)
        load_fragments<BLOCK_K>(frag[0], frag_addr, smem_base + smem_read_stage * T::STAGE_BYTES, 0);

        // MAINLOOP (steady state): per K tile, K_STEPS k-steps; each k-step loads the next k-step's fragments while
        // the tensor cores run on the current ones, and the first k-step also refills one ring stage from global.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
#pragma unroll
            for (int kk = 0; kk < T::K_STEPS; ++kk) {
                if (kk == T::K_STEPS - 1) {
                    // Committed so far: STAGES - 1 + (k_tile + 1) groups; the next tile, k_tile + 1, is followed by
                    // STAGES - 2 newer ones: let those fly and wait only for it.
                    cp_async_wait<STAGES - 2>();
                    // Every thread's copies of tile k_tile + 1 have landed and every warp has finished its reads of
                    // the stage the producer refills next; both are needed before either side moves on.
#ifndef PIPESUITE_FAULT_NO_RING_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
                    __syncthreads();
#endif
                    advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
                }
                // Next k-step's fragments: the next k-step of this tile, or the first of the next one.
                load_fragments<BLOCK_K>(frag[(kk + 1) % 2], frag_addr, smem_base + smem_read_stage * T::STAGE_BYTES,
                                        (kk + 1) % T::K_STEPS);
                if (kk == 0) {
                    // Refill the stage the warps finished reading in the previous K tile (the barrier at its last
                    // k-step guarantees no warp still reads it) with tile k_tile + STAGES - 1.
                    if (k_tile_next < num_k_tiles)
                        load_tile<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile_next,
                                                      smem_base + smem_write_stage * T::STAGE_BYTES);
                    cp_async_commit();
                    ++k_tile_next;
                    advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring
                }
                warp_mma<BF16>(acc, frag[kk % 2]);
            }
        }
        cp_async_wait_all();  // only empty groups (tiles past K) can be pending; drain them before exit
    }

    // EPILOGUE
    store_accumulators<BF16>(C, M, N, tile.m0 + warp_m * WARP_M, tile.n0 + warp_n * WARP_N, acc, lane);
}
