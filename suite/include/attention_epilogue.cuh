// attention_epilogue.cuh: the attention kernels' (attention.cu, attention_sm90.cu) last step, O / l out to global
// memory. Both hold O in the mma / wgmma C-fragment layout: a thread has two rows (row0 and row0 + 8), columns col and
// col + 1 of every 8-column block, and its quad's (the 4 lanes of those rows) share of each row's softmax sum l.
#pragma once

#include "ptx_wrappers.cuh"

// The quad's partial sums of l added (every lane of the quad gets the row's whole sum); returns 1 / l, or 0 for a
// row that saw no key (l = 0), whose output is then zero.
__device__ __forceinline__ float quad_sum_reciprocal(float l) {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    return l > 0.f ? 1.f / l : 0.f;
}

// O / l rounded to 16 bits (bf16 or fp16) into rows row0 and row0 + 8 of head bh of O ([bh][sq][D]); rows at or past
// sq are skipped. acc(j, i) is accumulator i (0..3: row h's pair at 2 h and 2 h + 1) of 8-column block j.
template <int D, bool BF16, class Acc>
__device__ __forceinline__ void store_normalized_o(half_bits* O, int bh, int sq, int row0, int col, const float (&l)[2],
                                                   Acc acc) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float inv = quad_sum_reciprocal(l[h]);
        const int row = row0 + 8 * h;
        if (row >= sq) continue;
        half_bits* dst = O + ((long long)bh * sq + row) * D + col;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            const float lo = acc(j, 2 * h) * inv, hi = acc(j, 2 * h + 1) * inv;
            *reinterpret_cast<half2_bits*>(dst + 8 * j) = BF16 ? pack_bf16x2(lo, hi) : pack_half2(lo, hi);
        }
    }
}
