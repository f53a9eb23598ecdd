// vector.cu: y = 2 * x (fp32) streamed through a STAGES-deep cp.async shared-memory ring.
//
// The seed text's single-block pipeline, generalized to a grid of many blocks: block b owns one contiguous run of
// tiles (ceil(num_tiles / gridDim.x) of them; the launcher picks the grid) and streams it through its ring. Each tile
// is THREADS x CHUNKS 16-byte chunks (32 KiB by default); thread t copies chunks t, t + THREADS, ... (coalesced
// across the warp) and later consumes exactly those chunks itself.
//
// Synchronization: cp.async.wait_group makes a thread's own copies visible to that thread, and no thread ever reads a
// chunk another thread copied, so the ring needs no __syncthreads at all. (The GEMM, where warps read what other
// threads copied, is where the block barriers are needed and explained.)
//
// STAGES = 1 is the synchronous baseline: copy one tile, wait for it, consume it, repeat. STAGES = S keeps up to
// S - 1 tiles in flight per thread while it consumes one.

#include "ptx_wrappers.cuh"

#ifndef VEC_CHUNKS_PER_THREAD  // tuning knob (NVRTC -D, see tools/tune_vector.py): 16-byte chunks per thread per tile
#define VEC_CHUNKS_PER_THREAD 8
#endif
#ifndef VEC_THREADS_PER_BLOCK  // tuning knob
#define VEC_THREADS_PER_BLOCK 256
#endif

constexpr int VEC_THREADS = VEC_THREADS_PER_BLOCK;
constexpr int VEC_CHUNKS = VEC_CHUNKS_PER_THREAD;
constexpr int VEC_CHUNK_FLOATS = 4;                            // fp32 values in one 16-byte chunk
constexpr int VEC_TILE_FLOATS = VEC_THREADS * VEC_CHUNKS * VEC_CHUNK_FLOATS;  // 8192 floats = 32 KiB by default
constexpr int VEC_STAGE_BYTES = VEC_TILE_FLOATS * 4;

// Producer: issue this thread's cp.async for tile `tile` into ring stage `stage`. Chunks past n are zero-filled
// (a partial last chunk copies only its valid bytes) and read nothing out of bounds.
__device__ __forceinline__ void load_tile(const float* x, long long n, long long tile, unsigned smem_stage_base) {
#pragma unroll
    for (int c = 0; c < VEC_CHUNKS; ++c) {
        const int chunk = c * VEC_THREADS + threadIdx.x;
        const long long first = tile * VEC_TILE_FLOATS + (long long)chunk * VEC_CHUNK_FLOATS;
        const long long valid = n - first;  // floats of this chunk inside the vector (may be <= 0)
        const int src_bytes = valid >= VEC_CHUNK_FLOATS ? 16 : (valid > 0 ? (int)valid * 4 : 0);
        cp_async_16(smem_stage_base + chunk * 16, src_bytes > 0 ? x + first : x, src_bytes);
    }
}

// Consumer: read this thread's chunks of tile `tile` back from stage `stage`, double them, store to y.
__device__ __forceinline__ void consume_tile(float* y, long long n, long long tile, unsigned smem_stage_base) {
#pragma unroll
    for (int c = 0; c < VEC_CHUNKS; ++c) {
        const int chunk = c * VEC_THREADS + threadIdx.x;
        const long long first = tile * VEC_TILE_FLOATS + (long long)chunk * VEC_CHUNK_FLOATS;
        unsigned v[4];
        ld_shared_v4(smem_stage_base + chunk * 16, v[0], v[1], v[2], v[3]);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = __float_as_uint(2.0f * __uint_as_float(v[j]));
        if (first + VEC_CHUNK_FLOATS <= n) {
            st_global_v4(y + first, v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (first + j < n) y[first + j] = __uint_as_float(v[j]);
        }
    }
}

template <int STAGES>
__global__ void __launch_bounds__(VEC_THREADS) scale2_pipeline(const float* __restrict__ x, float* __restrict__ y,
                                                                long long n) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (cp.async.wait_group takes 0..7)");
    extern __shared__ __align__(16) unsigned char smem[];  // (STAGES, VEC_CHUNKS * VEC_THREADS) x 16 B
    const unsigned smem_base = smem_u32(smem);

    const long long num_tiles = (n + VEC_TILE_FLOATS - 1) / VEC_TILE_FLOATS;
    // Tiles this block owns: one contiguous run of ceil(num_tiles / gridDim.x), the last run cut short.
    const long long run = (num_tiles + gridDim.x - 1) / gridDim.x;
    const long long first_tile = blockIdx.x * run;
    const long long my_tiles = first_tile < num_tiles ? min(run, num_tiles - first_tile) : 0;

    int smem_write_stage = 0;
    int smem_read_stage = 0;

    // PROLOGUE: put the first STAGES - 1 of this block's tiles in flight, one commit group per tile. A tile past the
    // end still commits an (empty) group, so that "group i holds tile i" stays true for the waits below.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < my_tiles) load_tile(x, n, first_tile + s, smem_base + smem_write_stage * VEC_STAGE_BYTES);
        cp_async_commit();
        ++smem_write_stage;
    }

    // MAINLOOP (steady state): issue tile i + STAGES - 1, then consume tile i.
    for (long long i = 0; i < my_tiles; ++i) {
        // The write stage is the one this thread consumed in iteration i - 1; it is its only reader and has finished
        // (its ld.shared results were stored before this point), so the stage is free. With STAGES = 1 it is the
        // stage read just below, after the wait.
        const long long future = i + STAGES - 1;
        if (future < my_tiles)
            load_tile(x, n, first_tile + future, smem_base + smem_write_stage * VEC_STAGE_BYTES);
        cp_async_commit();
        if (++smem_write_stage == STAGES) smem_write_stage = 0;  // wrap back to the start of the ring

        // Committed so far: STAGES - 1 + (i + 1) groups, group i holding tile i. Allow the STAGES - 1 newer groups to
        // stay in flight and wait only for tile i.
        cp_async_wait<STAGES - 1>();

        consume_tile(y, n, first_tile + i, smem_base + smem_read_stage * VEC_STAGE_BYTES);
        if (++smem_read_stage == STAGES) smem_read_stage = 0;  // wrap back to the start of the ring
    }

    // EPILOGUE: only empty groups can still be pending (tiles past the end); drain them before the block exits.
    cp_async_wait_all();
}
