// gemm.cu: C = A * B, fp16 in, fp32 accumulate, fp16 out; A (M x K), B (K x N), C (M x N), all row-major.
//
// The cp.async + ldmatrix + mma.sync pipeline of pipelines on the tile, ring and MAINLOOP of mma_sync_tile.cuh (this
// file supplies the ring's copies: CpAsyncRing):
//   global --cp.async--> STAGES-deep shared-memory ring --ldmatrix--> 2 register fragment slots --mma.sync--> fp32
//
// Template parameters: STAGES (1 = synchronous baseline, 2.. = cp.async ring depth), N_ALIGNED (N % 8 == 0, so every
// 16-byte chunk of a B row is aligned and cp.async can fetch it; otherwise B is loaded with plain predicated loads,
// correct for any N but without the async overlap for B), BLOCK_K (32 or 64) and BF16 (bf16 operands and output
// instead of fp16: mma.sync.m16n8k16 .bf16, the same fragments).

#include "mma_sync_tile.cuh"

// The ring's copies as cp.async commit groups (mma_sync_mainloop's Ring): one group per K tile, waited for with
// cp.async.wait_group; out-of-range chunks zero-filled by the copy itself.
template <bool N_ALIGNED, int BLOCK_K>
struct CpAsyncRing {
    static constexpr bool GUARDS_LAST_FRAGMENTS = false;  // the never-written stage is zeroed up front
    const Producer& producer;
    const half_bits* B;
    int N, K;
    unsigned smem_base;

    __device__ __forceinline__ void acquire() {}
    __device__ __forceinline__ void load(int k_tile, int stage) {
        load_tile<N_ALIGNED, BLOCK_K>(producer, B, N, K, k_tile, smem_base + stage * KTile<BLOCK_K>::STAGE_BYTES);
    }
    __device__ __forceinline__ void commit() { cp_async_commit(); }
    template <int N_PENDING>
    __device__ __forceinline__ void wait() {
        cp_async_wait<N_PENDING>();
    }
    __device__ __forceinline__ void release() {}
    __device__ __forceinline__ void drain() { cp_async_wait_all(); }
};

template <int STAGES, bool N_ALIGNED, int BLOCK_K, bool BF16 = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_f16_f32acc(const half_bits* __restrict__ A, const half_bits* __restrict__ B, half_bits* __restrict__ C,
                    int M, int N, int K) {
    mma_sync_gemm_block<STAGES, BLOCK_K, BF16>(A, C, M, N, K, [&](const Producer& producer, unsigned char* smem) {
        return CpAsyncRing<N_ALIGNED, BLOCK_K>{producer, B, N, K, smem_u32(smem)};
    });
}
