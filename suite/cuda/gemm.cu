// gemm.cu (cuda backend): C = A * B, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N), C (M x N), row-major.
//
// suite/ptx/gemm.cu's pipeline of pipelines with its first stage written in libcu++ instead of inline PTX:
//   global --cuda::memcpy_async--> STAGES-deep shared-memory ring --ldmatrix--> 2 register slots --mma.sync--> fp32
// Everything downstream of shared memory is the PTX kernel's own, from mma_sync_tile.cuh (suite/include): the 128 x 256 x BLOCK_K tile and
// its 8 warps, the XOR swizzles, the fragment loads and mma.sync wrappers of ptx_wrappers.cuh, the epilogue. The two
// rows of the table differ only in how the copies are issued and waited for.
//
// The ring is shared by the whole block (a warp's ldmatrix reads chunks other threads copied), but the pipeline
// object is per thread: for cuda::thread_scope_thread libcu++ implements producer_commit() as cp.async.commit_group
// and pipeline_consumer_wait_prior<N>() as cp.async.wait_group N, so the block barrier after each wait stays, as in
// the PTX kernel. memcpy_async has no zero-fill: a chunk outside the matrix gets a 16-byte store of zeros instead.
//
// Template parameters as in suite/ptx/gemm.cu: STAGES (1 = synchronous baseline), N_ALIGNED (N % 8 == 0: B rows are
// whole 16-byte chunks, copied asynchronously; otherwise gathered with plain loads), BLOCK_K (32 or 64).

#include <cuda/pipeline>

#include "mma_sync_tile.cuh"  // tile constants, KTile, swizzles, Producer, block_tile, fragments, warp_mma, epilogue

using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

// One 16-byte chunk global -> shared through the pipeline, or 16 zero bytes when it lies outside the matrix.
__device__ __forceinline__ void copy_chunk(unsigned char* dst, const half_bits* src, bool in_range, Pipeline& pipe) {
    if (in_range)
        cuda::memcpy_async(reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src),
                           cuda::aligned_size_t<16>(sizeof(uint4)), pipe);
    else
        *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
}

// Producer: one K tile (A 128 x BLOCK_K and B BLOCK_K x 256) into the ring stage at `stage`, swizzled as gemm.cu's
// load_tile places it, as one batch of this thread's pipeline.
template <bool N_ALIGNED, int BLOCK_K>
__device__ __forceinline__ void load_tile_async(const Producer& p, const half_bits* B, int N, int K, int k_tile,
                                                unsigned char* stage, Pipeline& pipe) {
    using T = KTile<BLOCK_K>;
    const int k0 = k_tile * BLOCK_K;
    const bool a_col_ok = k0 + p.a_col < K;  // K % 8 == 0: a chunk is all in or all out
#pragma unroll
    for (int i = 0; i < T::A_COPIES; ++i)
        copy_chunk(stage + p.a_dst + i * T::A_ROW_STEP * T::A_ROW_BYTES, p.a_src + (long long)i * T::A_ROW_STEP * K + k0,
                   a_col_ok && i * T::A_ROW_STEP < p.a_rows_left, pipe);
    unsigned char* b_stage = stage + T::A_STAGE_BYTES + p.b_dst;
    if constexpr (N_ALIGNED) {
#pragma unroll
        for (int i = 0; i < T::B_COPIES; ++i) {
            const int k = k0 + p.b_row + i * T::B_ROW_STEP;
            copy_chunk(b_stage + i * T::B_ROW_STEP * B_ROW_BYTES, B + (long long)k * N + p.b_col, k < K && p.b_col < N,
                       pipe);
        }
    } else {
        // Rows of B are not 16-byte aligned: gather each chunk's 8 halves with plain predicated loads, one chunk at a
        // time (as gemm.cu does). They become visible to the other warps at the same barrier as the async copies.
#pragma unroll 1
        for (int i = 0; i < T::B_COPIES; ++i) {
            unsigned packed[4];
            gather_b_chunk(B, N, K, k0 + p.b_row + i * T::B_ROW_STEP, p.b_col, packed);
            *reinterpret_cast<uint4*>(b_stage + i * T::B_ROW_STEP * B_ROW_BYTES) =
                make_uint4(packed[0], packed[1], packed[2], packed[3]);
        }
    }
}

template <int STAGES, bool N_ALIGNED, int BLOCK_K, bool BF16 = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_cuda_pipeline(const half_bits* __restrict__ A, const half_bits* __restrict__ B, half_bits* __restrict__ C,
                       int M, int N, int K) {
    using T = KTile<BLOCK_K>;
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (pipeline_consumer_wait_prior waits 0..7)");
    extern __shared__ __align__(128) unsigned char smem[];  // (STAGES) x [A 128 x BLOCK_K | B BLOCK_K x 256], swizzled
    const unsigned smem_base = smem_u32(smem);              // the same ring, as ldmatrix addresses it

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const TileCoords tile = block_tile(M, N);
    const Producer producer = make_producer<BLOCK_K>(A, M, K, tile);
    const FragmentAddresses frag_addr = make_fragment_addresses<BLOCK_K>(warp_m, warp_n, lane);
    const int num_k_tiles = (K + BLOCK_K - 1) / BLOCK_K;
    Pipeline pipe = cuda::make_pipeline();

    float acc[WARP_TILES_M][WARP_TILES_N][4];  // (4 m-tiles, 8 n-tiles, 4 values): this thread's part of 64x64
    zero_accumulators(acc);

    Fragments frag[2];  // register double buffer: frag[kk % 2] feeds the mma while frag[(kk + 1) % 2] loads

    if constexpr (STAGES == 1) {
        // SYNCHRONOUS BASELINE: load a tile, wait for all of it, compute on it, repeat. No copy overlaps math.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
            pipe.producer_acquire();
            load_tile_async<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile, smem, pipe);
            pipe.producer_commit();
            cuda::pipeline_consumer_wait_prior<0>(pipe);  // the only batch in flight is this tile: wait for all of it
            __syncthreads();  // every thread's part of the tile has landed: any warp may now read any of it
            mma_stage<BLOCK_K, BF16>(acc, frag, frag_addr, smem_base);
            pipe.consumer_release();
#ifndef PIPESUITE_FAULT_NO_REUSE_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            __syncthreads();  // every warp has finished reading the tile before the next load overwrites it
#endif
        }
    } else {
        int k_tile_next = 0;       // next K tile the producer fetches
        int smem_write_stage = 0;  // ring stage the producer fills next
        int smem_read_stage = 0;   // ring stage the warps read fragments from

        // Producer step: tile k_tile_next into the write stage as one pipeline batch. A tile past K still commits an
        // (empty) batch, so that "batch i holds tile i" stays true for every wait below.
        auto produce_next_tile = [&]() {
            pipe.producer_acquire();
            if (k_tile_next < num_k_tiles)
                load_tile_async<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile_next,
                                                    smem + smem_write_stage * T::STAGE_BYTES, pipe);
            pipe.producer_commit();
            ++k_tile_next;
            advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring
        };

        // PROLOGUE: fill STAGES - 1 stages.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) produce_next_tile();
        cuda::pipeline_consumer_wait_prior<STAGES - 2>(pipe);  // STAGES - 1 batches, tile 0 the oldest: wait for it
        __syncthreads();  // tile 0, copied by all threads, is now visible to every warp
        load_fragments<BLOCK_K>(frag[0], frag_addr, smem_base + smem_read_stage * T::STAGE_BYTES, 0);

        // MAINLOOP (steady state): per K tile, K_STEPS k-steps; each k-step loads the next k-step's fragments while
        // the tensor cores run on the current ones, and the first k-step also refills one ring stage from global.
        for (int k_tile = 0; k_tile < num_k_tiles; ++k_tile) {
#pragma unroll
            for (int kk = 0; kk < T::K_STEPS; ++kk) {
                if (kk == T::K_STEPS - 1) {
                    // Committed so far: STAGES - 1 + (k_tile + 1) batches; the next tile, k_tile + 1, is followed by
                    // STAGES - 2 newer ones: let those fly and wait only for it.
                    pipe.consumer_release();
                    cuda::pipeline_consumer_wait_prior<STAGES - 2>(pipe);
                    // Every thread's copies of tile k_tile + 1 have landed and every warp has finished its reads of
                    // the stage the producer refills next; both are needed before either side moves on.
#ifndef PIPESUITE_FAULT_NO_RING_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
                    __syncthreads();
#endif
                    advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
                }
                // Next k-step's fragments: the next k-step of this tile, or the first of the next tile (none after the
                // last tile: that stage may hold no tile at all).
                if (kk + 1 < T::K_STEPS || k_tile + 1 < num_k_tiles)
                    load_fragments<BLOCK_K>(frag[(kk + 1) % 2], frag_addr,
                                            smem_base + smem_read_stage * T::STAGE_BYTES, (kk + 1) % T::K_STEPS);
                if (kk == 0) {
                    // Refill the stage the warps finished reading in the previous K tile (the barrier at its last
                    // k-step guarantees no warp still reads it) with tile k_tile + STAGES - 1.
                    produce_next_tile();
                }
                warp_mma<BF16>(acc, frag[kk % 2]);
            }
        }
        cuda::pipeline_consumer_wait_prior<0>(pipe);  // only empty batches (tiles past K) can be pending: drain them
    }

    // EPILOGUE
    store_accumulators<BF16>(C, M, N, tile.m0 + warp_m * WARP_M, tile.n0 + warp_n * WARP_N, acc, lane);
}
