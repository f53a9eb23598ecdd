// vector_bulk.cu: y = 2 * x (fp32) through a STAGES-deep shared-memory ring filled by Hopper bulk copies
// (cp.async.bulk: one instruction moves a whole tile through the copy engine, no tensor map), each stage guarded by
// a pair of mbarriers. sm_90 and later.
//
// Roles (warp-specialized, as ThunderKittens names them):
//
//   producer: lane 0 of warp 0                       consumers: warps 1 .. CONSUMER_WARPS
//   --------------------------------------------     ----------------------------------------------------
//   wait empty[s]   (the consumers released s)        wait full[s]    (the tile's bytes have landed in s)
//   arrive.expect_tx(full[s], tile bytes)             ld.shared its chunks, x2, st.global
//   cp.async.bulk x[tile] -> stage s, signals full[s] fence.proxy.async, __syncwarp; lane 0 arrives on empty[s]
//
// full[s] completes a phase when the producer has arrived (1 arrival) and the copy engine has delivered the bytes it
// announced (the transaction count); empty[s] when every consumer warp has arrived (CONSUMER_WARPS arrivals). Each
// side walks the ring with a stage index and a phase bit that flips at every wrap; a wait names the parity of the
// phase it needs. The producer starts on parity 1 for the empty barriers: a fresh mbarrier counts its (never run)
// previous phase as complete, so the first pass over the ring finds every stage free.
//
// Depth: the producer runs up to STAGES tiles ahead of the slowest consumer warp, so a block keeps STAGES x tile
// bytes of loads in flight, as the cp.async ring (vector.cu) does; the tile schedule is the same (tile_schedule.cuh).
//
// Ragged tail: a bulk copy moves a multiple of 16 bytes between 16-byte aligned addresses. Tiles start at multiples
// of the tile size from x (which the launcher requires 16-byte aligned), so only the vector's last tile can end in
// a partial chunk: the producer bulk-copies its whole chunks (possibly none: then it only arrives, with 0 bytes
// expected) and the consumer that owns the partial chunk reads its 1-3 floats straight from global memory.
//
// Shared memory (dynamic): [full barriers | empty barriers] padded to 128 B, then STAGES tiles.

#include "ring.cuh"
#include "tile_schedule.cuh"

constexpr int BULK_CHUNK_FLOATS = 4;  // fp32 values in one 16-byte chunk
constexpr int BULK_BARRIER_REGION = 128;  // bytes before the first tile: 2 x 8 mbarriers of 8 bytes at most

template <int STAGES>
__device__ __forceinline__ unsigned full_barrier(unsigned smem_base, int stage) {
    return smem_base + stage * 8;
}

template <int STAGES>
__device__ __forceinline__ unsigned empty_barrier(unsigned smem_base, int stage) {
    return smem_base + (STAGES + stage) * 8;
}

// Floats of tile `tile` inside the vector (the last tile may be short).
template <int TILE_FLOATS>
__device__ __forceinline__ long long tile_valid_floats(long long n, long long tile) {
    const long long rest = n - tile * TILE_FLOATS;
    return rest < TILE_FLOATS ? rest : TILE_FLOATS;
}

// PRODUCER: put this block's tiles in flight, each as soon as its stage is free.
template <int TILE_FLOATS, int STAGES>
__device__ __forceinline__ void producer(const float* x, long long n, long long num_tiles, int run, unsigned smem_base,
                                         unsigned tiles_base) {
    constexpr int STAGE_BYTES = TILE_FLOATS * 4;
    RingPosition write;  // smem_write_stage and its lap's parity
    for (TileCursor cursor(run); cursor.tile < num_tiles; cursor.advance()) {
        // Wait until every consumer warp has released this stage (read the tile it held STAGES tiles ago).
        producer_acquire(empty_barrier<STAGES>(smem_base, write.stage), write);
        const long long valid = tile_valid_floats<TILE_FLOATS>(n, cursor.tile);
        const unsigned bulk_bytes = (unsigned)(valid / BULK_CHUNK_FLOATS) * 16;  // whole chunks only
        const unsigned full = full_barrier<STAGES>(smem_base, write.stage);
        producer_commit(full, bulk_bytes);  // arrive first: the copy's bytes may land right away
        if (bulk_bytes > 0)
            cp_async_bulk_global_to_shared(tiles_base + write.stage * STAGE_BYTES, x + cursor.tile * TILE_FLOATS,
                                           bulk_bytes, full);
        write.advance<STAGES>();
    }
}

// CONSUMER: one thread's chunks of a landed tile, doubled and stored; the partial last chunk, if any, from global.
template <int CONSUMER_THREADS, int CHUNKS>
__device__ __forceinline__ void consume_tile(const float* x, float* y, long long n, long long tile,
                                             unsigned smem_stage_base, int consumer) {
    constexpr int TILE_FLOATS = CONSUMER_THREADS * CHUNKS * BULK_CHUNK_FLOATS;
    const long long valid = tile_valid_floats<TILE_FLOATS>(n, tile);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const int chunk = c * CONSUMER_THREADS + consumer;
        const int offset = chunk * BULK_CHUNK_FLOATS;  // in the tile
        const long long first = tile * TILE_FLOATS + offset;
        if (offset + BULK_CHUNK_FLOATS <= valid) {  // a whole chunk: the bulk copy brought it
            unsigned v[4];
            ld_shared_v4(smem_stage_base + chunk * 16, v[0], v[1], v[2], v[3]);
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = __float_as_uint(2.0f * __uint_as_float(v[j]));
            st_global_v4(y + first, v[0], v[1], v[2], v[3]);
        } else if (offset < valid) {  // the vector's partial last chunk: not bulk-copied, read it here
            for (int j = 0; offset + j < valid; ++j) y[first + j] = 2.0f * x[first + j];
        }
    }
}

// CONSUMER: take this block's tiles in order, each once its stage's full barrier completes, then release the stage.
template <int CONSUMER_WARPS, int CHUNKS, int STAGES>
__device__ __forceinline__ void consumer(const float* x, float* y, long long n, long long num_tiles, int run,
                                         unsigned smem_base, unsigned tiles_base) {
    constexpr int CONSUMER_THREADS = CONSUMER_WARPS * 32;
    constexpr int STAGE_BYTES = CONSUMER_THREADS * CHUNKS * 16;
    const int consumer = threadIdx.x - 32;  // warp 0 is the producer's
    RingPosition read;  // smem_read_stage and its lap's parity
    for (TileCursor cursor(run); cursor.tile < num_tiles; cursor.advance()) {
        // Wait for the tile's bytes: the producer's arrival and the copy engine's transactions complete the phase.
        consumer_wait(full_barrier<STAGES>(smem_base, read.stage), read);
        consume_tile<CONSUMER_THREADS, CHUNKS>(x, y, n, cursor.tile, tiles_base + read.stage * STAGE_BYTES, consumer);
        // Release the stage. Each lane's reads were generic-proxy loads and the refill is an async-proxy write: the
        // proxy fence orders the two; __syncwarp orders every lane's fence before lane 0's arrival (a release); the
        // producer waits for all consumer warps. (racecheck still reports each reuse, fence or not: docs/sanitizer.md.)
        fence_proxy_async_shared();
        __syncwarp();
        if (threadIdx.x % 32 == 0) consumer_release(empty_barrier<STAGES>(smem_base, read.stage));
        read.advance<STAGES>();
    }
}

// CONSUMER_WARPS: warps that consume (one more warp produces). CHUNKS: 16-byte chunks per consumer thread per tile
// (tile = CONSUMER_WARPS x 32 x CHUNKS x 16 bytes). STAGES: ring depth. Dynamic shared memory: at least
// BULK_BARRIER_REGION + STAGES tiles (the launcher may pad it to pin residency).
template <int CONSUMER_WARPS, int CHUNKS, int STAGES>
__global__ void __launch_bounds__((CONSUMER_WARPS + 1) * 32)
    scale2_bulk_ring(const float* __restrict__ x, float* __restrict__ y, long long n, int run) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8 (the depth axis of the vector problem)");
    static_assert(2 * STAGES * 8 <= BULK_BARRIER_REGION, "the barriers must fit before the first tile");
    constexpr int TILE_FLOATS = CONSUMER_WARPS * 32 * CHUNKS * BULK_CHUNK_FLOATS;
    extern __shared__ __align__(128) unsigned char smem[];  // barriers, then (STAGES, TILE_FLOATS) fp32
    const unsigned smem_base = smem_u32(smem);
    const unsigned tiles_base = smem_base + BULK_BARRIER_REGION;
    const long long num_tiles = (n + TILE_FLOATS - 1) / TILE_FLOATS;

    // SETUP: one thread arms every stage's barriers; the block barrier publishes them before anyone waits on them.
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full_barrier<STAGES>(smem_base, s), 1);                 // the producer's arrival
            mbarrier_init(empty_barrier<STAGES>(smem_base, s), CONSUMER_WARPS);  // one per consumer warp
        }
        fence_mbarrier_init();
    }
    __syncthreads();

    if (threadIdx.x < 32) {
        if (threadIdx.x == 0) producer<TILE_FLOATS, STAGES>(x, n, num_tiles, run, smem_base, tiles_base);
    } else {
        consumer<CONSUMER_WARPS, CHUNKS, STAGES>(x, y, n, num_tiles, run, smem_base, tiles_base);
    }
    // EPILOGUE: nothing to drain: every copy the producer issued was waited for by the consumers before they finished.
}
