// bulk_copy.cuh: the Hopper (sm_90) instructions of vector_bulk.cu, one named wrapper each: 1-D bulk copies
// global -> shared through the copy engine (cp.async.bulk, no tensor map) and the mbarriers that track them.
//
// Kept apart from ptx_wrappers.cuh for now, in namespace `bulk`, because Hopper GEMM wrappers of the same names
// (mbarrier_init, mbarrier_arrive_expect_tx, mbarrier_try_wait_parity, fence_barrier_init) are being added there in
// parallel; once both exist they are to be unified into ptx_wrappers.cuh and this header removed.
//
// An mbarrier is a 64-bit object in shared memory that counts arrivals (threads calling arrive) and a transaction
// count of bytes (async copies completing). Its current phase completes when both reach zero; then the phase
// parity flips and the counts re-arm. Waiters name the parity of the phase they wait for.
#pragma once

namespace bulk {

// Set up the mbarrier at `bar` for `arrivals` arrivals per phase (phase 0, parity 0, no pending transactions).
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Make this thread's mbarrier.init visible to the async proxy (the copy engine completes transactions on them) and
// to the other threads; the block barrier that follows publishes them.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival on `bar` (release: this thread's earlier memory accesses happen before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One arrival on `bar` that also tells it to expect `bytes` more bytes of transactions in this phase: the phase then
// completes only when the async copies signalling `bar` have delivered them.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// True once the phase of `bar` with parity `parity` has completed (acquire: what the arrivals and copies of that
// phase wrote is visible to this thread). May return false after a bounded, hardware-chosen wait; callers loop.
__device__ __forceinline__ bool mbarrier_try_wait_parity(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n"
        "  .reg .pred complete;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

// Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory with the copy engine,
// one instruction for the whole block of bytes; on completion the bytes count against `bar`'s transaction count.
__device__ __forceinline__ void cp_async_bulk_global_to_shared(unsigned smem_dst, const void* gmem_src, unsigned bytes,
                                                               unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(smem_dst), "l"(gmem_src), "r"(bytes), "r"(bar)
                 : "memory");
}

}  // namespace bulk
