// Every N of the swapped 16-bit wgmma form (ptx_wrappers.cuh's wgmma_m64nNk16_f32_mmajor_a, n8 .. n256 by 8), each in
// a kernel of its own, for tests/test_ptx_decode.py to check its SASS without a GPU: one HGMMA of that N, A
// transposed, its accumulators all live (summed into the output).
#include "ptx_wrappers.cuh"

template <int N>
__global__ void swapped_form(float* out, unsigned long long desc_a, unsigned long long desc_b) {
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
    wgmma_fence();
    wgmma_m64nNk16_f32_mmajor_a<N, false>(d, desc_a, desc_b);
    wgmma_commit_group();
    wgmma_wait<0>();
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) sum += d[i] * (i + 1);
    out[threadIdx.x] = sum;
}

// Every N of the fp8 form (wgmma_m64nNk32_f32_e4m3, n8 .. n128 by 8 and n144), likewise: one QGMMA of that N, its
// first k-step overwriting the accumulators (scale-d 0) where `first`.
template <int N>
__global__ void e4m3_form(float* out, unsigned long long desc_a, unsigned long long desc_b, int first) {
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
    wgmma_fence();
    wgmma_m64nNk32_f32_e4m3<N>(d, desc_a, desc_b, first != 0);
    wgmma_commit_group();
    wgmma_wait<0>();
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) sum += d[i] * (i + 1);
    out[threadIdx.x] = sum;
}
