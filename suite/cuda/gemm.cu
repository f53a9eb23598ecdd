// gemm.cu (cuda backend): C = A * B, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N), C (M x N), row-major.
//
// suite/ptx/gemm.cu's pipeline of pipelines with its first stage written in libcu++ instead of inline PTX:
//   global --cuda::memcpy_async--> STAGES-deep shared-memory ring --ldmatrix--> 2 register slots --mma.sync--> fp32
// Everything else is the PTX kernel's own, from mma_sync_tile.cuh (suite/include): the 128 x 256 x BLOCK_K tile and
// its 8 warps, the XOR swizzles, the ring and MAINLOOP (mma_sync_mainloop), the fragment loads and mma.sync wrappers
// of ptx_wrappers.cuh, the epilogue. The two rows of the table differ only in their Ring: how the copies are issued
// and waited for.
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

// The ring's copies through a cuda::pipeline (mma_sync_mainloop's Ring): one pipeline stage per K tile, waited for
// with pipeline_consumer_wait_prior and released after its reads.
template <bool N_ALIGNED, int BLOCK_K>
struct PipelineRing {
    static constexpr bool GUARDS_LAST_FRAGMENTS = true;  // no look-ahead into a stage that may hold no tile
    const Producer& producer;
    const half_bits* B;
    int N, K;
    unsigned char* smem;
    Pipeline& pipe;

    __device__ __forceinline__ void acquire() { pipe.producer_acquire(); }
    __device__ __forceinline__ void load(int k_tile, int stage) {
        load_tile_async<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile, smem + stage * KTile<BLOCK_K>::STAGE_BYTES,
                                            pipe);
    }
    __device__ __forceinline__ void commit() { pipe.producer_commit(); }
    template <int N_PENDING>
    __device__ __forceinline__ void wait() {
        cuda::pipeline_consumer_wait_prior<N_PENDING>(pipe);
    }
    __device__ __forceinline__ void release() { pipe.consumer_release(); }
    __device__ __forceinline__ void drain() { cuda::pipeline_consumer_wait_prior<0>(pipe); }
};

template <int STAGES, bool N_ALIGNED, int BLOCK_K, bool BF16 = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_cuda_pipeline(const half_bits* __restrict__ A, const half_bits* __restrict__ B, half_bits* __restrict__ C,
                       int M, int N, int K) {
    Pipeline pipe = cuda::make_pipeline();
    mma_sync_gemm_block<STAGES, BLOCK_K, BF16>(A, C, M, N, K, [&](const Producer& producer, unsigned char* smem) {
        return PipelineRing<N_ALIGNED, BLOCK_K>{producer, B, N, K, smem, pipe};
    });
}
