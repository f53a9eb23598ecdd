// vector.cu: y = 2 * x (fp32) streamed through a STAGES-deep cp.async shared-memory ring.
//
// The single-block cp.async ring of docs/design.md, generalized to a grid of many blocks. The tiles of x are dealt to blocks in
// runs of `run` contiguous tiles, runs handed out round-robin (tile_schedule.cuh); the launcher (vector.py) picks the
// layout:
//   * persistent (the depth sweep): grid = blocks_per_sm x SMs, run = 1, so block b streams tiles b, b + grid, ...:
//     a long run of tiles (many times STAGES) per block, at a residency the launcher pins with shared-memory padding;
//   * short runs (the bandwidth configuration): run = 2 and one run per block, blocks come and go as the hardware
//     schedules them.
// Each tile is THREADS x CHUNKS 16-byte chunks; thread t copies chunks t, t + THREADS, ... (coalesced across the warp)
// and later consumes exactly those chunks itself.
//
// Synchronization: cp.async.wait_group makes a thread's own copies visible to that thread, and no thread ever reads a
// chunk another thread copied, so the ring needs no __syncthreads at all. (The GEMM, where warps read what other
// threads copied, is where the block barriers are needed and explained.)
//
// Depth: STAGES = 1 is the synchronous baseline (copy one tile, wait for it, consume it, repeat). With STAGES = S a
// thread has S tiles' copies outstanding when it waits for the oldest, so a block keeps S x tile bytes of loads in
// flight. What hides DRAM latency is the SM's total: S x tile bytes x resident blocks (Little's law), which is why the
// depth sweep pins residency and varies tile size as well as S.

#include "ring.cuh"
#include "tile_schedule.cuh"

constexpr int VEC_CHUNK_FLOATS = 4;  // fp32 values in one 16-byte chunk

// Producer: issue this thread's cp.async for tile `tile` into the ring stage at `smem_stage_base`. Chunks past n are
// zero-filled (cp.async with 0 source bytes reads nothing). The one partial last chunk of the vector (1-3 floats) is
// gathered with plain loads instead: a 16-byte cp.async would touch the bytes past the tensor (compute-sanitizer's
// initcheck reports them), even with a shorter source size. Each thread consumes only what it copied itself, so
// the plain store is ordered before its consumer by program order, like the cp.async by the wait.
template <int THREADS, int CHUNKS>
__device__ __forceinline__ void load_tile(const float* x, long long n, long long tile, unsigned smem_stage_base) {
    constexpr int TILE_FLOATS = THREADS * CHUNKS * VEC_CHUNK_FLOATS;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const int chunk = c * THREADS + threadIdx.x;
        const long long first = tile * TILE_FLOATS + (long long)chunk * VEC_CHUNK_FLOATS;
        const long long valid = n - first;  // floats of this chunk inside the vector (may be <= 0)
        if (valid > 0 && valid < VEC_CHUNK_FLOATS) {
            const unsigned* src = reinterpret_cast<const unsigned*>(x + first);
            st_shared_v4(smem_stage_base + chunk * 16, src[0], valid > 1 ? src[1] : 0u, valid > 2 ? src[2] : 0u, 0u);
        } else {
            cp_async_16(smem_stage_base + chunk * 16, valid > 0 ? x + first : x, valid > 0 ? 16 : 0);
        }
    }
}

// Consumer: read this thread's chunks of tile `tile` back from its stage, double them, store to y.
template <int THREADS, int CHUNKS>
__device__ __forceinline__ void consume_tile(float* y, long long n, long long tile, unsigned smem_stage_base) {
    constexpr int TILE_FLOATS = THREADS * CHUNKS * VEC_CHUNK_FLOATS;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const int chunk = c * THREADS + threadIdx.x;
        const long long first = tile * TILE_FLOATS + (long long)chunk * VEC_CHUNK_FLOATS;
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

// THREADS: threads per block. CHUNKS: 16-byte chunks per thread per tile (tile = THREADS x CHUNKS x 16 bytes).
// STAGES: ring depth. Dynamic shared memory: at least STAGES tiles (the launcher may pad it to pin residency).
template <int THREADS, int CHUNKS, int STAGES>
__global__ void __launch_bounds__(THREADS) scale2_ring(const float* __restrict__ x, float* __restrict__ y,
                                                        long long n, int run) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (cp.async.wait_group takes 0..7)");
    constexpr int TILE_FLOATS = THREADS * CHUNKS * VEC_CHUNK_FLOATS;
    constexpr int STAGE_BYTES = TILE_FLOATS * 4;
    extern __shared__ __align__(16) unsigned char smem[];  // (STAGES, CHUNKS * THREADS) x 16 B
    const unsigned smem_base = smem_u32(smem);
    const long long num_tiles = (n + TILE_FLOATS - 1) / TILE_FLOATS;

    TileCursor write(run);  // the next tile to put in flight (producer side)
    TileCursor read(run);   // the next tile to consume
    int smem_write_stage = 0;
    int smem_read_stage = 0;

    // PROLOGUE: put this block's first STAGES - 1 tiles in flight, one commit group per tile. A tile past the end
    // still commits an (empty) group, so that "the i-th group holds the i-th tile" stays true for the waits below.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (write.tile < num_tiles)
            load_tile<THREADS, CHUNKS>(x, n, write.tile, smem_base + smem_write_stage * STAGE_BYTES);
        cp_async_commit();
        write.advance();
        ++smem_write_stage;
    }

    // MAINLOOP (steady state): put one more tile in flight, then consume the oldest.
    for (; read.tile < num_tiles; read.advance()) {
        // The write stage is the one this thread consumed in the previous iteration; it is its only reader and has
        // finished (its ld.shared results were stored before this point), so the stage is free. With STAGES = 1 it is
        // the stage read just below, after the wait.
        if (write.tile < num_tiles)
            load_tile<THREADS, CHUNKS>(x, n, write.tile, smem_base + smem_write_stage * STAGE_BYTES);
        cp_async_commit();
        write.advance();
        advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring

        // STAGES groups are outstanding, the oldest holding the tile read here: let the STAGES - 1 newer ones stay in
        // flight and wait only for that one.
        cp_async_wait<STAGES - 1>();

        consume_tile<THREADS, CHUNKS>(y, n, read.tile, smem_base + smem_read_stage * STAGE_BYTES);
        advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
    }

    // EPILOGUE: only empty groups can still be pending (tiles past the end); drain them before the block exits.
    cp_async_wait_all();
}
