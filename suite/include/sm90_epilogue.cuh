// sm90_epilogue.cuh: a consumer warpgroup's accumulators out to C (direct stores, or staged in shared memory and
// stored with TMA), or, unscaled, to split-K's workspace slice.
#pragma once

#include "sm90_gemm.cuh"

// The accumulators as (row, col, value at col, value at col + 1) pairs of C: in an m64nN wgmma tile, thread (warp w,
// lane l) holds rows 16 w + l / 4 and + 8, columns 8 j + 2 (l % 4) and + 1 for each j < N / 8. `put` gets every pair
// whose row is below M (the columns are the caller's to check), from column group J0 on (8 columns each).
template <class T, int BLOCK_N, int J0 = 0, class Put>
__device__ __forceinline__ void for_each_pair(int M, int row0, int col0, const float (&acc)[T::WG_M_TILES][T::ACC],
                                              Put put) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
#pragma unroll
    for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const long long row = (long long)row0 + mt * 64 + warp * 16 + lane / 4 + half * 8;
            if (row >= M) continue;
#pragma unroll
            for (int j = J0; j < BLOCK_N / 8; ++j)
                put(row, col0 + j * 8 + (lane % 4) * 2, acc[mt][4 * j + 2 * half], acc[mt][4 * j + 2 * half + 1]);
        }
}

// Epilogue: accumulators (times `alpha` for fp8's scales) -> 16-bit -> C, bounds-checked; the two columns of a pair
// go out as one 32-bit store when N is even. From column group J0 on (8 columns each; the TMA-store epilogue's tail).
template <class T, class E, int BLOCK_N, int J0 = 0>
__device__ __forceinline__ void store_tile(half_bits* C, int M, int N, int row0, int col0,
                                           const float (&acc)[T::WG_M_TILES][T::ACC], float alpha) {
    for_each_pair<T, BLOCK_N, J0>(M, row0, col0, acc, [&](long long row, int col, float lo, float hi) {
        if constexpr (E::SCALED) {
            lo *= alpha;
            hi *= alpha;
        }
        store_pair(C + row * N + col, col, N, E::pack(lo, hi));
    });
}

// split-K's epilogue: the fp32 accumulators, unscaled, into this split's row-major M x N slice of the workspace, rows
// and columns past C's edge left out; a pair per 8-byte store when N is even. Every element of every slice is
// written (a split past the end of K stores its zeros): the reduction reads them all.
template <class T, int BLOCK_N>
__device__ __forceinline__ void store_partial(float* slice, int M, int N, int row0, int col0,
                                              const float (&acc)[T::WG_M_TILES][T::ACC]) {
    for_each_pair<T, BLOCK_N>(M, row0, col0, acc, [&](long long row, int col, float lo, float hi) {
        float* dst = slice + row * N + col;
        if ((N & 1) == 0 && col < N) {
            *reinterpret_cast<float2*>(dst) = make_float2(lo, hi);
        } else {
            if (col < N) dst[0] = lo;
            if (col + 1 < N) dst[1] = hi;
        }
    });
}

// Epilogue through shared memory: accumulators -> 16-bit -> this warpgroup's swizzled staging boxes -> TMA store.
// The staging boxes use the 128-byte swizzle of the C tensor map, which also keeps the stores into them free of bank
// conflicts (the 8 rows of each 8 x 8 matrix of a stmatrix land in 8 different 16-byte slots). C_PASSES = 2: the staging holds half of the tile's columns (what lets a
// fourth 48 KiB stage fit beside it), so the tile goes out in two passes, the second waiting for the first's stores to
// have read the staging. A tile whose width is not whole boxes (144: two boxes and 16 columns) stores its last columns
// directly from registers (T::C_TAIL).
template <int STAGES, class T, class E, int BM, int BLOCK_N, int C_PASSES>
__device__ __forceinline__ void store_tile_tma(const TensorMap& tmap_c, const SmemLayout<STAGES, T, true, BM>& smem,
                                               int wg, int row0, int col0,
                                               const float (&acc)[T::WG_M_TILES][T::ACC], float alpha, half_bits* C,
                                               int M, int N) {
    static_assert(C_PASSES == 1 || (C_PASSES == 2 && T::C_BOXES % 2 == 0), "one pass, or two over half the boxes");
    constexpr int BOXES = T::C_BOXES / C_PASSES;  // staging boxes per m64 tile, per pass
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const bool elected = threadIdx.x % WG_THREADS == 0;  // issues this warpgroup's TMA stores
    const unsigned wg_barrier = 1 + wg;                 // named barrier of this warpgroup's 128 threads
#pragma unroll
    for (int pass = 0; pass < C_PASSES; ++pass) {
        // the stores issued last (the previous tile's, or this tile's previous pass) have finished reading the
        // staging boxes...
        if (elected) cp_async_bulk_wait_read<0>();
        named_barrier_sync(wg_barrier, WG_THREADS);  // ...which every thread of the warpgroup may now overwrite
        // per stmatrix_x4, column groups j and j + 1 (8 columns each), rows +0 and +8 of the warp's 16: matrix
        // i = lane / 8 is group j + i / 2, row half i % 2, and this lane gives its row lane % 8 (the swizzle's
        // row phase too, as the warp's rows start at a multiple of 8)
        const int i = lane / 8, rr = lane % 8;
        const int r = warp * 16 + (i % 2) * 8 + rr;  // the row inside the m64 tile whose address this lane gives
#pragma unroll
        for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
            for (int j = pass * BOXES * 8; j < (pass + 1) * BOXES * 8; j += 2) {
                const int box = (j / 8) % BOXES, chunk = j % 8 + i / 2;
                const unsigned dst =
                    smem.template c_box<BOXES>(wg, mt, box) + r * SWIZZLE_BYTES + ((chunk ^ rr) << 4);
                float v[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    v[e] = acc[mt][4 * j + e];
                    if constexpr (E::SCALED) v[e] *= alpha;
                }
                stmatrix_x4(dst, E::pack(v[0], v[1]), E::pack(v[2], v[3]), E::pack(v[4], v[5]),
                            E::pack(v[6], v[7]));
            }
        fence_proxy_async_shared();                  // these generic-proxy writes must be visible to the TMA unit...
        named_barrier_sync(wg_barrier, WG_THREADS);  // ...from every thread, before the elected one starts the stores
        if (elected) {
#pragma unroll
            for (int mt = 0; mt < T::WG_M_TILES; ++mt)
#pragma unroll
                for (int box = 0; box < BOXES; ++box)
                    tma_store_2d(&tmap_c, smem.template c_box<BOXES>(wg, mt, box),
                                 col0 + (pass * BOXES + box) * C_BOX_COLS, row0 + mt * 64);
            cp_async_bulk_commit();
        }
    }
    // the columns past the last whole box (144 wide: 16) straight from the registers, bounds-checked: a 32-byte
    // sector per row and warp
    if constexpr (T::C_TAIL > 0) store_tile<T, E, BLOCK_N, T::C_BOXES * 8>(C, M, N, row0, col0, acc, alpha);
}
