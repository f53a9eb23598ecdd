// attention.cu: O = softmax(Q K^T * scale [+ causal mask]) V, the forward pass, in the Ampere form (FlashAttention-2's
// design, the article's pipeline one level up). Q (b, hq, sq, D), K and V (b, hkv, skv, D), O like Q, all row-major
// and contiguous, fp16 or bf16 (BF16), D = 64 or 128; GQA: query head h reads key / value head h / group.
//
//   global --cp.async--> STAGES-deep ring of (K tile, V tile) --ldmatrix--> fragments --mma.sync--> fp32 S and O
//
// A block of 4 warps owns BLOCK_M = 64 query rows of one (batch, query head), 16 rows per warp. Q is copied to shared
// memory once and held in registers (ldmatrix, D / 16 k-steps of A fragments). The keys are walked in BLOCK_N = 64
// tiles; per tile each warp computes S = Q K^T (16 x 64, fp32 accumulators), masks it, updates its online softmax
// (row max, row sum, rescale of O, exp2 with log2(e) folded into the scale), rounds P to 16 bits in registers (the
// S accumulators' layout is the next mma's A layout) and accumulates O += P V (V through ldmatrix.trans).
//
// Causal mask, bottom-right aligned: row i sees key j when j <= i + skv - sq. A block walks only the key tiles its
// last row sees; the tiles that straddle skv or the diagonal are masked, the others are not. A row that sees no key
// at all (sq > skv) is written as zeros. Out-of-range key rows are zero-filled by the copy (cp.async with 0 source
// bytes) and masked to -inf; out-of-range query rows are zero-filled and never stored.
//
// Shared memory: [Q tile | stage 0: K tile, V tile | stage 1 ... ], each tile 64 rows of D halves, the 16-byte chunk c
// of row r stored at chunk c ^ (r & 7): the 8 rows an ldmatrix phase reads land in 8 distinct 16-byte slots of the bank
// lines, and so do the 8 chunks a cp.async phase writes.

#include "attention_common.cuh"
#include "ring.cuh"

constexpr int BLOCK_M = 64;   // query rows per block
constexpr int BLOCK_N = 64;   // keys per K / V tile
constexpr int THREADS = 128;  // 4 warps, 16 query rows each
constexpr int WARP_ROWS = 16;

// The launcher (suite/ptx/attention.py) sizes grids and shared memory from its own copy of the tile: the same here
#ifdef ATTN_BLOCK_M
static_assert(ATTN_BLOCK_M == BLOCK_M && ATTN_BLOCK_N == BLOCK_N && ATTN_THREADS == THREADS,
              "launcher's tile differs from the kernel's");
#endif

template <int D>
struct AttnTile {
    static_assert(D == 64 || D == 128, "head_dim must be 64 or 128");
    static constexpr int CHUNKS = D / 8;                        // 16-byte chunks per row: 8 or 16
    static constexpr int ROW_BYTES = D * 2;                     // 128 or 256
    static constexpr int TILE_BYTES = BLOCK_N * ROW_BYTES;      // one Q, K or V tile: 8 or 16 KiB
    static constexpr int STAGE_BYTES = 2 * TILE_BYTES;          // a ring stage: the K tile, then the V tile
    static constexpr int COPIES = TILE_BYTES / 16 / THREADS;    // cp.async of 16 B per thread per tile: 4 or 8
    static constexpr int K_STEPS = D / 16;                      // k-steps of Q K^T
    static constexpr int D_TILES = D / 8;                       // n-tiles of O
    static_assert(BLOCK_M == BLOCK_N, "Q and K / V tiles share one copy routine");
    static_assert(COPIES * THREADS * 16 == TILE_BYTES, "copy split");
};

// Swizzled byte offset of chunk `chunk` of row `row` (see the header comment).
template <int D>
__device__ __forceinline__ unsigned tile_offset(int row, int chunk) {
    return row * AttnTile<D>::ROW_BYTES + ((chunk ^ (row & 7)) << 4);
}

// Producer: cp.async rows row0 .. row0 + 63 of a (rows x D) matrix at `src` into the tile at `dst`, rows past `rows`
// zero-filled (0 source bytes from a valid address).
template <int D>
__device__ __forceinline__ void load_tile(const half_bits* src, int row0, int rows, unsigned dst) {
    using T = AttnTile<D>;
#pragma unroll
    for (int i = 0; i < T::COPIES; ++i) {
        const int idx = i * THREADS + threadIdx.x;
        const int r = idx / T::CHUNKS, c = idx % T::CHUNKS;
        const bool ok = row0 + r < rows;
        cp_async_16(dst + tile_offset<D>(r, c), src + (long long)(ok ? row0 + r : 0) * D + c * 8, ok ? 16 : 0);
    }
}

template <bool BF16>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if constexpr (BF16)
        mma_m16n8k16_bf16(d, a, b0, b1);
    else
        mma_m16n8k16(d, a, b0, b1);
}

// Per-warp state of the online softmax and the output, for the two rows a thread holds (lane / 4 and lane / 4 + 8 of
// the warp's 16): running max (in log2 units), this thread's part of the running sum, O's accumulators.
template <int D>
struct SoftmaxState {
    float m[2];
    float l[2];
    float o[AttnTile<D>::D_TILES][4];
};

// One K / V tile (in the ring stage at `stage`) through one warp: S = Q K^T, mask, online softmax, O += P V.
// `q_row` / `key0`: the absolute index of this thread's first row and of the tile's first key.
template <int D, bool BF16>
__device__ __forceinline__ void attend_tile(SoftmaxState<D>& st, const unsigned (&q_frag)[AttnTile<D>::K_STEPS][4],
                                            unsigned stage, int lane, bool masked, int q_row, int key0, int sq,
                                            int skv, bool causal, float scale_log2) {
    using T = AttnTile<D>;
    const unsigned k_tile = stage, v_tile = stage + T::TILE_BYTES;

    // S = Q K^T: 16 x 64 per warp, 8 n-tiles of 8 keys. K is stored (key, d) row-major, which is the "col" B
    // fragment as it stands: ldmatrix without .trans, matrices (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo),
    // (keys 8-15, d hi) of each 16-key step.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int v = 0; v < 4; ++v) s[nt][v] = 0.f;
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk)
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) {
            unsigned b[4];
            const int key = nj * 16 + (lane & 7) + ((lane >> 4) << 3);
            ldmatrix_x4(k_tile + tile_offset<D>(key, kk * 2 + ((lane >> 3) & 1)), b);
            mma16816<BF16>(s[2 * nj], q_frag[kk], b[0], b[1]);
            mma16816<BF16>(s[2 * nj + 1], q_frag[kk], b[2], b[3]);
        }

    // Mask (keys past skv, and causal past each row's diagonal, become -inf) and the online softmax's step
    // (attention_common.cuh), on S as the flat C-fragment array it is: s[nt][v] is element 4 nt + v.
    auto& flat = reinterpret_cast<float(&)[32]>(s);
    if (masked) mask_scores<8>(flat, key0, q_row, (lane & 3) * 2, sq, skv, causal);
    float alpha[2];
    softmax_step<8>(flat, st.m, st.l, alpha, scale_log2);
#pragma unroll
    for (int dt = 0; dt < T::D_TILES; ++dt) {
        st.o[dt][0] *= alpha[0];
        st.o[dt][1] *= alpha[0];
        st.o[dt][2] *= alpha[1];
        st.o[dt][3] *= alpha[1];
    }

    // O += P V: P's accumulators, rounded to 16 bits, are the A fragments of 4 k-steps of 16 keys; V is stored (key,
    // d) row-major, the "row" B operand, so ldmatrix.trans gives its "col" fragments, as for the GEMM's B.
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const unsigned a[4] = {
            pack_16bit<BF16>(s[2 * t][0], s[2 * t][1]), pack_16bit<BF16>(s[2 * t][2], s[2 * t][3]),
            pack_16bit<BF16>(s[2 * t + 1][0], s[2 * t + 1][1]), pack_16bit<BF16>(s[2 * t + 1][2], s[2 * t + 1][3])};
#pragma unroll
        for (int dj = 0; dj < T::D_TILES / 2; ++dj) {
            unsigned b[4];
            const int key = t * 16 + (lane & 15);
            ldmatrix_x4_trans(v_tile + tile_offset<D>(key, dj * 2 + (lane >> 4)), b);
            mma16816<BF16>(st.o[2 * dj], a, b[0], b[1]);
            mma16816<BF16>(st.o[2 * dj + 1], a, b[2], b[3]);
        }
    }
}

template <int STAGES, int D, bool BF16>
__global__ void __launch_bounds__(THREADS)
    attention_fwd(const half_bits* __restrict__ Q, const half_bits* __restrict__ K, const half_bits* __restrict__ V,
                  half_bits* __restrict__ O, int hq, int group, int sq, int skv, float scale_log2, int causal) {
    using T = AttnTile<D>;
    static_assert(STAGES >= 1 && STAGES - 1 <= 7, "STAGES must be in 1..8 (the prologue's wait leaves STAGES - 1 "
                                                 "groups pending, and cp.async.wait_group takes 0..7)");
    extern __shared__ __align__(128) unsigned char smem[];  // [Q tile | STAGES x (K tile, V tile)], swizzled
    const unsigned q_smem = smem_u32(smem);
    const unsigned ring = q_smem + T::TILE_BYTES;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int m0 = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;  // last query tiles first: under a causal mask the longest
    const int bh = blockIdx.y;                              // batch * hq + query head
    const int kv_bh = kv_head(bh, hq, group);                 // its key / value head
    const half_bits* q_src = Q + (long long)bh * sq * D;
    const half_bits* k_src = K + (long long)kv_bh * skv * D;
    const half_bits* v_src = V + (long long)kv_bh * skv * D;

    const int num_tiles = key_tiles(m0, BLOCK_M, BLOCK_N, sq, skv, causal != 0);  // the key tiles this block walks
    const int diagonal = skv - sq;  // row i sees key j when j <= i + diagonal (causal)

    int tile_next = 0;         // next K / V tile the producer fetches
    int smem_write_stage = 0;  // ring stage the producer fills next
    int smem_read_stage = 0;   // ring stage the warps read next
    // Producer step: tile tile_next into the write stage as one commit group. A tile past the last still commits an
    // (empty) group, so that "group i + 1 holds tile i" (group 0: Q) stays true for every wait below.
    auto produce_next_tile = [&]() {
        if (tile_next < num_tiles) {
            const unsigned stage = ring + smem_write_stage * T::STAGE_BYTES;
            load_tile<D>(k_src, tile_next * BLOCK_N, skv, stage);
            load_tile<D>(v_src, tile_next * BLOCK_N, skv, stage + T::TILE_BYTES);
        }
        cp_async_commit();
        ++tile_next;
        advance_stage<STAGES>(smem_write_stage);  // wraps back to the start of the ring
    };

    // PROLOGUE: Q as the first group, then STAGES - 1 tiles.
    load_tile<D>(q_src, m0, sq, q_smem);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) produce_next_tile();
    cp_async_wait<STAGES - 1>();  // Q's group is the oldest: let the STAGES - 1 tile groups after it fly
    __syncthreads();              // every thread's part of Q has landed: any warp may now read any of it
    unsigned q_frag[T::K_STEPS][4];  // this warp's 16 rows of Q, held for the whole block
#pragma unroll
    for (int kk = 0; kk < T::K_STEPS; ++kk)
        ldmatrix_x4(q_smem + tile_offset<D>(warp * WARP_ROWS + (lane & 15), kk * 2 + (lane >> 4)), q_frag[kk]);

    SoftmaxState<D> st;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        st.m[h] = -__int_as_float(0x7f800000);
        st.l[h] = 0.f;
    }
#pragma unroll
    for (int dt = 0; dt < T::D_TILES; ++dt)
#pragma unroll
        for (int v = 0; v < 4; ++v) st.o[dt][v] = 0.f;
    const int q_row = m0 + warp * WARP_ROWS + lane / 4;

    // MAINLOOP: one K / V tile per iteration.
    for (int tile = 0; tile < num_tiles; ++tile) {
        if constexpr (STAGES == 1) {
            // SYNCHRONOUS BASELINE: no copy overlaps math.
            produce_next_tile();
            cp_async_wait<0>();  // the only group in flight is this tile: wait for all of it
            __syncthreads();     // every thread's part of the tile has landed: any warp may now read any of it
        } else {
#ifndef PIPESUITE_FAULT_NO_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            // Committed so far: Q + STAGES - 1 + tile groups; this tile's is followed by STAGES - 2 newer ones: let
            // those fly and wait only for it.
            cp_async_wait<STAGES - 2>();
#endif
            // Every thread's copies of this tile have landed, and every warp has finished reading the previous tile,
            // whose stage the producer refills next: both are needed before either side moves on.
#ifndef PIPESUITE_FAULT_NO_RING_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            __syncthreads();
#endif
            produce_next_tile();  // tile + STAGES - 1 into the stage the previous tile was read from
        }
        const int key0 = tile * BLOCK_N;
        const bool masked = key0 + BLOCK_N > skv || (causal && key0 + BLOCK_N - 1 > m0 + diagonal);
        attend_tile<D, BF16>(st, q_frag, ring + smem_read_stage * T::STAGE_BYTES, lane, masked, q_row, key0, sq, skv,
                             causal != 0, scale_log2);
        advance_stage<STAGES>(smem_read_stage);  // wraps back to the start of the ring
        if constexpr (STAGES == 1) {
#ifndef PIPESUITE_FAULT_NO_REUSE_BARRIER  // fault injection for the sanitizer self-test (suite/sanitize.py) only
            __syncthreads();  // every warp has finished reading the tile before the next one overwrites it
#endif
        }
    }
    cp_async_wait_all();  // only empty groups (tiles past the last) can be pending: drain them before exit

    // EPILOGUE: the quad's partial sums added, O / l rounded to 16 bits; a row that saw no key (l = 0) is zero.
    store_normalized_o<D, BF16>(O, bh, sq, q_row, (lane & 3) * 2, st.l, [&](int j, int i) { return st.o[j][i]; });
}
