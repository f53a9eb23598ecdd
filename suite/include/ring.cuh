// ring.cuh: the pipeline skeleton every CUDA kernel of the suite builds its shared-memory ring on.
//
// A ring of STAGES buffers in shared memory, walked in the same order by whoever fills it (the producer) and whoever
// reads it (the consumers). Two kinds of ring:
//
//   * cp.async rings (Ampere): completion is tracked per thread in commit groups (cp_async_wait<N>), and a block
//     barrier publishes a stage to the warps that read it; the ring indices are plain stage counters
//     (`smem_write_stage`, `smem_read_stage`) advanced with `advance_stage`.
//   * mbarrier rings (Hopper: TMA and bulk copies): each stage has a *full* barrier (the producer arrives with the
//     bytes it expects, the copy engine completes the phase when they land) and an *empty* barrier (each consumer
//     arrives once it finished reading the stage). A `RingPosition` names where one side is: the stage index and
//     the parity of the current lap, which flips at every wrap.
//
// The four steps of an mbarrier ring, named as CUTLASS's PipelineState names them:
//   producer_acquire(empty, pos)   wait until every consumer released the stage (free to overwrite)
//   producer_commit(full, bytes)   arrive on the full barrier announcing the bytes the copies will deliver
//   consumer_wait(full, pos)       wait until the stage's bytes have all landed
//   consumer_release(empty)        arrive on the empty barrier: this consumer is done reading the stage
#pragma once

#include "ptx_wrappers.cuh"

// A plain ring index: the stage after `stage`, wrapping back to the start of the ring.
template <int STAGES>
__device__ __forceinline__ void advance_stage(int& stage) {
    if (++stage == STAGES) stage = 0;  // wrap back to the start of the ring
}

// Where one side of an mbarrier ring is: stage index and the phase parity of the current lap.
struct RingPosition {
    int stage = 0;
    unsigned phase = 0;
    template <int STAGES>
    __device__ __forceinline__ void advance() {
        if (++stage == STAGES) {  // wrap back to the start of the ring: the next lap waits on the other parity
            stage = 0;
            phase ^= 1;
        }
    }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// Spin until the phase of parity `parity` of the mbarrier at `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
    while (!mbarrier_try_wait_parity(bar, parity)) {
    }
}

// Producer: wait until every consumer released the stage at `pos`. On the first lap the parity names the phase
// before the barrier's first, which counts as complete: a fresh ring is free.
__device__ __forceinline__ void producer_acquire(unsigned empty_bar, const RingPosition& pos) {
    mbarrier_wait(empty_bar, pos.phase ^ 1);
}

// Producer: arrive on the stage's full barrier and announce the bytes the copies into it will deliver; the phase
// completes when they have all landed. Arrive before issuing the copies: their bytes may land right away.
__device__ __forceinline__ void producer_commit(unsigned full_bar, unsigned bytes) {
    mbarrier_arrive_expect_tx(full_bar, bytes);
}

// Consumer: wait until the stage at `pos` holds its bytes (the producer arrived and the copy engine delivered).
__device__ __forceinline__ void consumer_wait(unsigned full_bar, const RingPosition& pos) {
    mbarrier_wait(full_bar, pos.phase);
}

// Consumer: this consumer has finished reading the stage; once all have, the producer may refill it.
__device__ __forceinline__ void consumer_release(unsigned empty_bar) { mbarrier_arrive(empty_bar); }

#endif  // __CUDA_ARCH__ >= 900

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Fence every register of a wgmma accumulator array: no instruction may move across this point while wgmma read
// and write them asynchronously.
template <int ROWS, int COLS>
__device__ __forceinline__ void fence_accumulators(float (&acc)[ROWS][COLS]) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int c = 0; c < COLS; ++c) fence_operand(acc[r][c]);
}
template <int REGS>
__device__ __forceinline__ void fence_accumulators(float (&acc)[REGS]) {
#pragma unroll
    for (int i = 0; i < REGS; ++i) fence_operand(acc[i]);
}
#endif

// ---------------------------------------------------------------------------------------------------------------
// Tile schedule: grouped rasterization of the output tiles
// ---------------------------------------------------------------------------------------------------------------

// Output tile `tile` -> its first row and column. Tiles are walked GROUP_M tile rows at a time down one group before
// moving right, so the blocks running at the same time share rows of A and columns of B in L2.
template <int GROUP_M, int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void grouped_tile_origin(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int group_size = GROUP_M * tiles_n;
    const int first_m = (tile / group_size) * GROUP_M;
    const int group_rows = min(tiles_m - first_m, GROUP_M);
    const int in_group = tile % group_size;
    m0 = (first_m + in_group % group_rows) * BLOCK_M;
    n0 = (in_group / group_rows) * BLOCK_N;
}

// ---------------------------------------------------------------------------------------------------------------
// Epilogue: two adjacent 16-bit outputs, stored whatever N is
// ---------------------------------------------------------------------------------------------------------------

// Store the packed pair `v` at `dst`, the element in column `col` of a matrix with N columns (low half there, high
// half in column col + 1): one 32-bit store when N is even (the pair is then 4-byte aligned), else each half on its
// own, each bounds-checked.
__device__ __forceinline__ void store_pair(half_bits* dst, int col, int N, half2_bits v) {
    if ((N & 1) == 0 && col + 1 < N) {
        *reinterpret_cast<half2_bits*>(dst) = v;
    } else {
        if (col < N) dst[0] = (half_bits)(v & 0xffffu);
        if (col + 1 < N) dst[1] = (half_bits)(v >> 16);
    }
}
