// mma_ceiling.cu: how fast mma.sync.m16n8k16 (fp16 -> fp32) issues from registers alone, at a chosen number of
// resident warps per SM. No memory traffic: the ceiling a register-fed mma.sync GEMM cannot beat at that occupancy.
#include "ptx_wrappers.cuh"  // suite/include, on the loader's include path

template <int ACCS>
__global__ void __launch_bounds__(256, 1) mma_loop(float* out, int iters, unsigned seed) {
    unsigned a[4] = {seed, seed * 3u, seed * 5u, seed * 7u};  // operands differ per launch, fixed per thread
    const unsigned b0 = seed ^ 0x3c003c00u, b1 = seed ^ 0x38003800u;
    float acc[ACCS][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < ACCS; ++j) mma_m16n8k16(acc[j], a, b0, b1);  // ACCS independent accumulator chains
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < ACCS; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
    if (sum == 1234.5f) out[threadIdx.x] = sum;  // keeps the loop alive; never true for these inputs in practice
}
