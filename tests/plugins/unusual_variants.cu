// unusual_variants.cu: two y = 2 * x (fp32) kernels of designs the suite's own kernels do not have, for
// tests/plugins/unusual_variants.py (test-only variants: the generic tests must pass them with no edit).
//
//   * unusual_registers<STAGES>: no shared memory and no asynchronous copy. Each thread keeps STAGES 16-byte loads in
//     flight in registers (inline-PTX ld.global.nc.v4), then stores them: the "pipeline" is the register file.
//   * unusual_staged<THREADS>: one stage, a shared-memory tile filled by plain loads and st.shared (no cp.async, no
//     bulk copy). Thread t writes chunk t of the tile and reads back chunk THREADS - 1 - t, so every tile goes
//     through shared memory between threads and the block barriers are needed.
//
// Inline asm lives in the wrappers below (ptx_wrappers.cuh, on every NVRTC include path, has the shared-memory and
// global-store ones); the kernels call wrappers only.

#include "ptx_wrappers.cuh"

#ifndef UNUSUAL_THREADS  // the launcher passes its block size (unusual_variants.py)
#define UNUSUAL_THREADS 256
#endif

constexpr int CHUNK_FLOATS = 4;  // one 16-byte chunk

// 16-byte global load through the read-only (non-coherent) path into four 32-bit registers: LDG.E.128.CONSTANT.
__device__ __forceinline__ void ld_global_nc_v4(const void* gmem_src, unsigned& r0, unsigned& r1, unsigned& r2,
                                                unsigned& r3) {
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "l"(gmem_src));
}

__device__ __forceinline__ unsigned twice(unsigned bits) { return __float_as_uint(2.0f * __uint_as_float(bits)); }

// The last n % 4 floats (no whole chunk): plain scalar loads and stores by the first threads of block 0.
__device__ __forceinline__ void scale2_tail(const float* x, float* y, long long n) {
    const long long whole = n / CHUNK_FLOATS * CHUNK_FLOATS;
    if (blockIdx.x == 0 && threadIdx.x < n - whole) y[whole + threadIdx.x] = 2.0f * x[whole + threadIdx.x];
}

// Grid-stride over 16-byte chunks, STAGES chunks per thread per round: all of a round's loads, then its stores.
template <int STAGES>
__global__ void __launch_bounds__(UNUSUAL_THREADS) unusual_registers(const float* __restrict__ x,
                                                                      float* __restrict__ y, long long n) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES: 1..8 chunks in flight per thread");
    const long long chunks = n / CHUNK_FLOATS;
    const long long stride = (long long)gridDim.x * UNUSUAL_THREADS;
    for (long long first = blockIdx.x * (long long)UNUSUAL_THREADS + threadIdx.x; first < chunks;
         first += STAGES * stride) {
        unsigned v[STAGES][4];
#pragma unroll
        for (int s = 0; s < STAGES; ++s)
            if (first + s * stride < chunks)
                ld_global_nc_v4(x + (first + s * stride) * CHUNK_FLOATS, v[s][0], v[s][1], v[s][2], v[s][3]);
#pragma unroll
        for (int s = 0; s < STAGES; ++s)
            if (first + s * stride < chunks)
                st_global_v4(y + (first + s * stride) * CHUNK_FLOATS, twice(v[s][0]), twice(v[s][1]), twice(v[s][2]),
                             twice(v[s][3]));
    }
    scale2_tail(x, y, n);
}

// Grid-stride over tiles of THREADS chunks, one tile in shared memory at a time (one stage). Dynamic shared memory:
// THREADS x 16 bytes (the launcher's stage_bytes).
template <int THREADS>
__global__ void __launch_bounds__(THREADS) unusual_staged(const float* __restrict__ x, float* __restrict__ y,
                                                          long long n) {
    static_assert(THREADS == UNUSUAL_THREADS, "the launcher and the kernel agree on the block size");
    extern __shared__ __align__(16) unsigned char tile_smem[];
    const unsigned tile_base = smem_u32(tile_smem);
    const long long chunks = n / CHUNK_FLOATS;
    const long long tiles = (chunks + THREADS - 1) / THREADS;
    const int mirror = THREADS - 1 - threadIdx.x;  // the chunk this thread reads back (another thread wrote it)
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long mine = tile * THREADS + threadIdx.x;
        unsigned r0 = 0, r1 = 0, r2 = 0, r3 = 0;
        if (mine < chunks) ld_global_nc_v4(x + mine * CHUNK_FLOATS, r0, r1, r2, r3);
        st_shared_v4(tile_base + threadIdx.x * 16, r0, r1, r2, r3);
        __syncthreads();  // every chunk of the tile written before any is read back
        const long long theirs = tile * THREADS + mirror;
        ld_shared_v4(tile_base + mirror * 16, r0, r1, r2, r3);
        if (theirs < chunks) st_global_v4(y + theirs * CHUNK_FLOATS, twice(r0), twice(r1), twice(r2), twice(r3));
        __syncthreads();  // every chunk read back before the next tile overwrites the stage
    }
    scale2_tail(x, y, n);
}
