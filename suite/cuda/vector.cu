// vector.cu (cuda backend): y = 2 * x (fp32) streamed through a STAGES-deep shared-memory ring, written with libcu++'s
// cuda::pipeline and cuda::memcpy_async: no inline PTX. The tile, the grid and the ring are those of
// suite/ptx/vector.cu (same launcher, same defines), so the two rows of the table differ only in how the copies are
// written.
//
// The pipeline is per thread (cuda::thread_scope_thread): as in the PTX ring, each thread consumes exactly the chunks
// it copied, so the ring needs no block barrier. For that scope libcu++ implements producer_commit() as
// cp.async.commit_group and pipeline_consumer_wait_prior<N>() as cp.async.wait_group N, and a 16-byte-aligned
// memcpy_async as one cp.async (LDGSTS in SASS); producer_acquire() and consumer_release() cost nothing.
//
// What memcpy_async cannot do is zero-fill: the chunk the vector ends in (and any past it) is copied with plain loads
// and stores, zero-padded, by the one thread that later reads it.

#include <cuda/pipeline>

#include "ring.cuh"  // advance_stage: the ring indices every kernel of the suite walks

#ifndef VEC_CHUNKS_PER_THREAD  // the launcher's tile (suite/ptx/vector.py), as in suite/ptx/vector.cu
#define VEC_CHUNKS_PER_THREAD 8
#endif
#ifndef VEC_THREADS_PER_BLOCK
#define VEC_THREADS_PER_BLOCK 256
#endif

constexpr int VEC_THREADS = VEC_THREADS_PER_BLOCK;
constexpr int VEC_CHUNKS = VEC_CHUNKS_PER_THREAD;
constexpr int VEC_TILE_CHUNKS = VEC_THREADS * VEC_CHUNKS;  // float4 chunks per tile (2048 = 32 KiB by default)
constexpr long long VEC_TILE_FLOATS = VEC_TILE_CHUNKS * 4LL;

using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

// One 16-byte chunk into the stage: memcpy_async when it lies wholly inside the vector; otherwise (the chunk the vector
// ends in, or one past it) plain loads, zero-padded.
__device__ __forceinline__ void load_chunk(const float* x, long long n, long long first, float4* dst, Pipeline& pipe) {
    if (first + 4 <= n) {
        cuda::memcpy_async(dst, reinterpret_cast<const float4*>(x + first), cuda::aligned_size_t<16>(sizeof(float4)),
                           pipe);
    } else {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (first + 0 < n) v.x = x[first + 0];
        if (first + 1 < n) v.y = x[first + 1];
        if (first + 2 < n) v.z = x[first + 2];
        *dst = v;
    }
}

// Producer: this thread's chunks of tile `tile` into ring stage `stage`, as one batch of the pipeline. Every tile but
// the last is whole: its chunks need no test, and the ragged last tile takes a loop of its own.
__device__ __forceinline__ void load_tile(const float* x, long long n, long long tile, float4* stage, Pipeline& pipe) {
    const long long tile_first = tile * VEC_TILE_FLOATS + threadIdx.x * 4LL;
    if (tile_first - threadIdx.x * 4LL + VEC_TILE_FLOATS <= n) {
#pragma unroll
        for (int c = 0; c < VEC_CHUNKS; ++c)  // chunk c * VEC_THREADS + threadIdx.x: coalesced across the warp
            cuda::memcpy_async(&stage[c * VEC_THREADS + threadIdx.x],
                               reinterpret_cast<const float4*>(x + tile_first + c * VEC_THREADS * 4LL),
                               cuda::aligned_size_t<16>(sizeof(float4)), pipe);
    } else {
#pragma unroll 1
        for (int c = 0; c < VEC_CHUNKS; ++c)
            load_chunk(x, n, tile_first + c * VEC_THREADS * 4LL, &stage[c * VEC_THREADS + threadIdx.x], pipe);
    }
}

// Consumer: this thread's chunks of tile `tile` back from `stage`, doubled, stored to y (16-byte aligned: the launcher
// checks), the ragged last tile element by element.
__device__ __forceinline__ void consume_tile(float* y, long long n, long long tile, const float4* stage) {
    const long long tile_first = tile * VEC_TILE_FLOATS + threadIdx.x * 4LL;
    const bool whole_tile = tile_first - threadIdx.x * 4LL + VEC_TILE_FLOATS <= n;
#pragma unroll
    for (int c = 0; c < VEC_CHUNKS; ++c) {
        const long long first = tile_first + c * VEC_THREADS * 4LL;
        const float4 v = stage[c * VEC_THREADS + threadIdx.x];
        const float4 doubled = make_float4(2.f * v.x, 2.f * v.y, 2.f * v.z, 2.f * v.w);
        if (whole_tile || first + 4 <= n) {
            *reinterpret_cast<float4*>(y + first) = doubled;
        } else {
            if (first + 0 < n) y[first + 0] = doubled.x;
            if (first + 1 < n) y[first + 1] = doubled.y;
            if (first + 2 < n) y[first + 2] = doubled.z;
        }
    }
}

template <int STAGES>
__global__ void __launch_bounds__(VEC_THREADS) scale2_cuda_pipeline(const float* __restrict__ x,
                                                                     float* __restrict__ y, long long n) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (pipeline_consumer_wait_prior waits 0..7)");
    extern __shared__ float4 smem[];  // (STAGES, VEC_TILE_CHUNKS) float4

    const long long num_tiles = (n + VEC_TILE_FLOATS - 1) / VEC_TILE_FLOATS;
    // Tiles this block owns: one contiguous run of ceil(num_tiles / gridDim.x), the last run cut short.
    const long long run = (num_tiles + gridDim.x - 1) / gridDim.x;
    const long long first_tile = blockIdx.x * run;
    const long long my_tiles = first_tile < num_tiles ? min(run, num_tiles - first_tile) : 0;

    Pipeline pipe = cuda::make_pipeline();
    int smem_write_stage = 0;
    int smem_read_stage = 0;

    // PROLOGUE: the first STAGES - 1 of this block's tiles in flight, one pipeline batch each. A tile past the end still
    // commits an (empty) batch, so that "batch i holds tile i" stays true for the waits below.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        pipe.producer_acquire();
        if (s < my_tiles) load_tile(x, n, first_tile + s, smem + smem_write_stage * VEC_TILE_CHUNKS, pipe);
        pipe.producer_commit();
        ++smem_write_stage;
    }

    // MAINLOOP (steady state): issue tile i + STAGES - 1, then consume tile i.
    for (long long i = 0; i < my_tiles; ++i) {
        // The write stage is the one this thread consumed in iteration i - 1 (its only reader, finished), so it is
        // free. With STAGES = 1 it is the stage read just below, after the wait.
        const long long future = i + STAGES - 1;
        pipe.producer_acquire();
        if (future < my_tiles)
            load_tile(x, n, first_tile + future, smem + smem_write_stage * VEC_TILE_CHUNKS, pipe);
        pipe.producer_commit();
        advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring

        // Committed so far: STAGES - 1 + (i + 1) batches, batch i holding tile i: let the STAGES - 1 newer ones keep
        // flying and wait only for tile i.
        cuda::pipeline_consumer_wait_prior<STAGES - 1>(pipe);
        consume_tile(y, n, first_tile + i, smem + smem_read_stage * VEC_TILE_CHUNKS);
        pipe.consumer_release();
        advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
    }

    // EPILOGUE: only empty batches (tiles past the end) can still be pending; drain them before the block exits.
    cuda::pipeline_consumer_wait_prior<0>(pipe);
}
