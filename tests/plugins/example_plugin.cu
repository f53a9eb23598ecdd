// example_plugin.cu: y = 2 * x (fp32) with plain 16-byte loads, STAGES of them in flight per thread before the
// first store: the pipeline lives in registers, not shared memory. A plugin's kernel, kept outside suite/ to prove
// that a variant defined elsewhere runs, lists, validates and is sanitized with no change to the suite.
//
// Thread t of the grid handles 16-byte chunks t, t + stride, t + 2 * stride, ... (stride = all threads of the grid),
// STAGES chunks per round: PROLOGUE-free because a round issues all of its loads, then all of its stores.

#ifndef PLUGIN_THREADS  // the launcher passes its block size (example_plugin.py)
#define PLUGIN_THREADS 256
#endif

template <int STAGES>
__global__ void __launch_bounds__(PLUGIN_THREADS) scale2_prefetch(const float* __restrict__ x, float* __restrict__ y,
                                                                   long long n) {
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES: 1..8 chunks in flight per thread");
    const float4* x4 = reinterpret_cast<const float4*>(x);  // 16-byte aligned: the launcher checks
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long chunks = n / 4;  // whole 16-byte chunks; the last n % 4 floats are the tail
    const long long stride = (long long)gridDim.x * PLUGIN_THREADS;
    for (long long first = blockIdx.x * (long long)PLUGIN_THREADS + threadIdx.x; first < chunks;
         first += STAGES * stride) {
        float4 v[STAGES];
#pragma unroll
        for (int s = 0; s < STAGES; ++s)  // all loads of the round first: STAGES chunks in flight
            if (first + s * stride < chunks) v[s] = x4[first + s * stride];
#pragma unroll
        for (int s = 0; s < STAGES; ++s)
            if (first + s * stride < chunks) y4[first + s * stride] = make_float4(2.f * v[s].x, 2.f * v[s].y,
                                                                                  2.f * v[s].z, 2.f * v[s].w);
    }
    if (blockIdx.x == 0 && threadIdx.x < n % 4) y[chunks * 4 + threadIdx.x] = 2.f * x[chunks * 4 + threadIdx.x];
}
