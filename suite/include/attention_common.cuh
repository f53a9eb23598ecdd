// attention_common.cuh: what the attention kernels (attention.cu, attention_sm90.cu) share: the block's heads and key
// tiles, the mask and the online softmax step on a tile's scores, and the last step, O / l out to global memory. Both
// hold S and O in the mma / wgmma C-fragment layout: a thread has two rows (row0 and row0 + 8), columns col and col + 1
// of every 8-column block (element 4 j + 2 h + e of a flat array: row row0 + 8 h, column 8 j + col + e), and its
// quad's (the 4 lanes of those rows) share of each row's softmax sum l.
#pragma once

#include "ptx_wrappers.cuh"

// The key / value head that query head bh (batch * hq + head) reads: `group` consecutive query heads share one (GQA).
__device__ __forceinline__ int kv_head(int bh, int hq, int group) { return bh / hq * (hq / group) + bh % hq / group; }

// The key tiles of block_n keys that query rows [m0, m0 + block_m) walk: all of them, or (causal, the mask aligned
// bottom-right: row i sees key j when j <= i + skv - sq) up to the last one the block's last row sees.
__device__ __forceinline__ int key_tiles(int m0, int block_m, int block_n, int sq, int skv, bool causal) {
    const int keys_seen = causal ? min(skv, max(0, m0 + block_m + skv - sq)) : skv;
    return (keys_seen + block_n - 1) / block_n;
}

// One thread's scores of the key tile starting at key0 (BLOCKS 8-column blocks, the layout above): keys past skv,
// and (causal) past each row's diagonal, become -inf.
template <int BLOCKS>
__device__ __forceinline__ void mask_scores(float (&s)[4 * BLOCKS], int key0, int row0, int col, int sq, int skv,
                                            bool causal) {
#pragma unroll
    for (int i = 0; i < 4 * BLOCKS; ++i) {
        const int key = key0 + i / 4 * 8 + col + i % 2;
        const int row = row0 + i % 4 / 2 * 8;
        if (key >= skv || (causal && key > row + skv - sq)) s[i] = -__int_as_float(0x7f800000);
    }
}

// The online softmax's step on those scores, per row: the tile's max (this thread's values, then its quad's), taken
// on the raw scores and then scaled into log2 units (the scale is positive, so the max commutes with it); m the
// running max; alpha = 2^(old max - new max), by which l here and O by the caller are rescaled; each score becomes
// P = 2^(s * scale - max), one FFMA and one ex2, and l adds this thread's part of their sum.
template <int BLOCKS>
__device__ __forceinline__ void softmax_step(float (&s)[4 * BLOCKS], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
    const float NEG_INF = -__int_as_float(0x7f800000);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = NEG_INF;
#pragma unroll
        for (int j = 0; j < BLOCKS; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = fmaxf(m[h], mx * scale_log2);           // the running max, in log2 units
        const float ref = mx == NEG_INF ? 0.f : mx;  // no key yet: every 2^(-inf) is 0, not NaN
        alpha[h] = ex2_approx(m[h] - ref);
        m[h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < BLOCKS; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float& x = s[4 * j + 2 * h + e];
                x = ex2_approx(fmaf(x, scale_log2, -ref));
                sum += x;
            }
        l[h] = l[h] * alpha[h] + sum;  // this thread's part; the quad's parts are added in the epilogue
    }
}

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
            *reinterpret_cast<half2_bits*>(dst + 8 * j) = pack_16bit<BF16>(lo, hi);
        }
    }
}
