// ptx_wrappers.cuh: every inline-PTX instruction used by pipesuite's kernels, one named wrapper each.
//
// Kernels include this header and never write `asm` themselves. NVRTC compiles it with no CUDA headers at all,
// so fp16 values travel as raw 16-bit patterns (`half_bits`) and two of them as one 32-bit register.
#pragma once

typedef unsigned short half_bits;  // one IEEE fp16 value, as bits
typedef unsigned int half2_bits;   // two fp16 values packed low/high, as an mma or ldmatrix register holds them

// Shared-memory address (32-bit, the .shared state space) of a generic pointer into shared memory.
__device__ __forceinline__ unsigned smem_u32(const void* generic_ptr) {
    return static_cast<unsigned>(__cvta_generic_to_shared(generic_ptr));
}

// The pending-group count of a wait_group (cp.async's and the bulk copies'): an immediate operand in 0..7.
template <int N>
__device__ __forceinline__ constexpr int pending_groups() {
    static_assert(N >= 0 && N <= 7, "wait_group takes an immediate pending-group count in 0..7");
    return N;
}

// ---------------------------------------------------------------------------------------------------------------
// cp.async (sm_80+): global -> shared without a register round trip, completed in commit groups.
// ---------------------------------------------------------------------------------------------------------------

// Copy 16 bytes global -> shared, bypassing L1 (.cg). `src_bytes` < 16 copies that many bytes and zero-fills the
// rest; 0 reads nothing (the source address must still be a valid pointer) and writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(unsigned smem_dst, const void* gmem_src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
}

// Close the group of all cp.async issued by this thread since the previous commit (possibly an empty group).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Block until at most N of this thread's most recently committed groups are still in flight. N is a count of
// pending groups, not a group index: wait<0> drains everything, wait<1> lets the newest group keep flying.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending_groups<N>()) : "memory");
}

// Block until every cp.async this thread issued has completed (committed or not).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// ---------------------------------------------------------------------------------------------------------------
// Plain vector memory access.
// ---------------------------------------------------------------------------------------------------------------

// 16-byte shared-memory load into four 32-bit registers.
__device__ __forceinline__ void ld_shared_v4(unsigned smem_src, unsigned& r0, unsigned& r1, unsigned& r2,
                                             unsigned& r3) {
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_src)
                 : "memory");
}

// 16-byte shared-memory store of four 32-bit registers.
__device__ __forceinline__ void st_shared_v4(unsigned smem_dst, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_dst), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// 16-byte global store of four 32-bit registers.
__device__ __forceinline__ void st_global_v4(void* gmem_dst, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem_dst), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// ---------------------------------------------------------------------------------------------------------------
// Tensor-core fragments (sm_80+): ldmatrix and mma.sync.
// ---------------------------------------------------------------------------------------------------------------

// Four 8x8 b16 matrices from shared memory. Lanes 8i..8i+7 give the row addresses (16 bytes each) of matrix i;
// every lane receives, in register i, its two elements of matrix i (row lane/4, columns 2*(lane%4) and +1).
__device__ __forceinline__ void ldmatrix_x4(unsigned smem_row_addr, unsigned (&frag)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
                 : "r"(smem_row_addr));
}

// As ldmatrix_x4, each matrix transposed on the way: lane receives row 2*(lane%4) and +1, column lane/4.
// Used for B stored K-major (row-major K x N), which the mma wants as "col" fragments.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned smem_row_addr, unsigned (&frag)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
                 : "r"(smem_row_addr));
}

// D = A * B + D for one warp: A 16x16 (row), B 16x8 (col), both TYPE (f16 or bf16: two values in each register),
// D 16x8 fp32, accumulated in place. The type is part of the instruction text: one asm per type, from this macro.
#define MMA_M16N8K16_ASM(TYPE) \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
                 "{%8, %9}, {%0, %1, %2, %3};\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    MMA_M16N8K16_ASM("f16");
}
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    MMA_M16N8K16_ASM("bf16");
}

// Two fp32 values rounded to nearest fp16 and packed: `lo` in bits 0..15, `hi` in bits 16..31.
__device__ __forceinline__ half2_bits pack_half2(float lo, float hi) {
    half2_bits packed;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

// Two fp32 values rounded to nearest bf16 and packed: `lo` in bits 0..15, `hi` in bits 16..31 (sm_80+).
__device__ __forceinline__ half2_bits pack_bf16x2(float lo, float hi) {
    half2_bits packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

// Either of the two, by the 16-bit output type (bf16 or fp16).
template <bool BF16>
__device__ __forceinline__ half2_bits pack_16bit(float lo, float hi) {
    return BF16 ? pack_bf16x2(lo, hi) : pack_half2(lo, hi);
}

// 16-byte global load that bypasses L1 (.cg: cached in L2 only), for data another block wrote during this launch:
// L1 is not coherent across SMs, L2 is.
__device__ __forceinline__ void ld_global_cg_v4(const void* gmem_src, float& r0, float& r1, float& r2, float& r3) {
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(r0), "=f"(r1), "=f"(r2), "=f"(r3)
                 : "l"(gmem_src)
                 : "memory");
}

// 16-byte global store that bypasses L1 (.cg), of four fp32 values another block will read during this launch.
// 4-byte global load and store cached in L2 only (.cg): a fix-up's partials, written by one SM and read by another.
__device__ __forceinline__ float ld_global_cg_f32(const float* gmem_src) {
    float r;
    asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(r) : "l"(gmem_src) : "memory");
    return r;
}
__device__ __forceinline__ void st_global_cg_f32(float* gmem_dst, float r) {
    asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(gmem_dst), "f"(r) : "memory");
}

__device__ __forceinline__ void st_global_cg_v4(void* gmem_dst, float r0, float r1, float r2, float r3) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem_dst), "f"(r0), "f"(r1), "f"(r2), "f"(r3)
                 : "memory");
}

// Integer add on global memory at GPU scope with acquire-release semantics; returns the old value. With a barrier
// of the cooperating threads before it, the release publishes their earlier stores; with one after it, the acquire
// makes other blocks' published stores visible to their later loads (the PTX memory model's cumulativity), so no
// thread needs a fence of its own (__threadfence is a sequentially consistent fence plus an L1 invalidation).
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* gmem_counter, int value) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
                 : "=r"(old)
                 : "l"(gmem_counter), "r"(value)
                 : "memory");
    return old;
}

// 2^x on the special-function unit (.approx: ~2^-22 relative error; .ftz: subnormal results flush to zero);
// ex2(-inf) = +0. The online softmax's exp, with log2(e) folded into the scores' scale.
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ---------------------------------------------------------------------------------------------------------------
// Hopper (sm_90): mbarriers, TMA (cp.async.bulk.tensor), and, on sm_90a only, wgmma and setmaxnreg.
// Compiled only for targets that have them, so the header still builds for sm_80.
// ---------------------------------------------------------------------------------------------------------------
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// Initialize an mbarrier in shared memory: one phase completes after `arrivals` arrive() calls (plus, within that
// phase, every byte announced with expect_tx). The barrier starts in phase 0.
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Make mbarrier.init visible to the other threads and to the async proxy (the TMA unit) before anyone uses it.
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive once on the barrier and announce `bytes` that async copies will deliver to it in the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Arrive once on the barrier (release semantics: this thread's earlier shared-memory accesses happen before).
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// True once the phase of parity `parity` has completed (the hardware may suspend the thread for a while first).
// Parity names a phase: waiting on the parity of the phase before the current one returns at once.
__device__ __forceinline__ bool mbarrier_try_wait_parity(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

// TMA: copy the 2-D box at coordinates (c0 = innermost, c1) of the tensor map `tmap` into shared memory at `dst`,
// laid out (and swizzled) as the map says; the bytes are reported to the mbarrier `bar` (complete_tx). Reads past
// the tensor's edge are zero-filled and still counted.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* tmap, unsigned bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
        ::"r"(dst), "l"(tmap), "r"(bar), "r"(c0), "r"(c1)
        : "memory");
}

// Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory with the copy engine,
// one instruction for the whole block of bytes; on completion the bytes count against `bar`'s transaction count.
__device__ __forceinline__ void cp_async_bulk_global_to_shared(unsigned smem_dst, const void* gmem_src, unsigned bytes,
                                                               unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(smem_dst), "l"(gmem_src), "r"(bytes), "r"(bar)
                 : "memory");
}

// Hint the TMA unit to fetch the tensor map into its descriptor cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_descriptor(const void* tmap) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
}

// TMA store: copy the 2-D box at shared-memory address `src` (laid out as the map says) to coordinates (c0, c1) of
// the tensor map `tmap` in global memory; the part of the box past the tensor's edge is not written. Completes in
// bulk groups (cp_async_bulk_commit / cp_async_bulk_wait_read).
__device__ __forceinline__ void tma_store_2d(const void* tmap, unsigned src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"(tmap), "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}

// Close the group of bulk copies (TMA stores) issued by this thread since the previous commit.
__device__ __forceinline__ void cp_async_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Block until at most N of this thread's committed bulk groups still READ their shared-memory source (the writes
// to global may still be in flight): after wait<0>, the source buffer may be overwritten.
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(pending_groups<N>()) : "memory");
}

// Order this thread's ordinary (generic-proxy) shared-memory accesses with the async proxy's (TMA, bulk copies,
// wgmma): writes it made become visible to an async read next, and reads it made complete before an async write.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Barrier `id` (1..15; 0 is __syncthreads) over the first `threads` threads that reach it (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// 4-byte shared-memory store.
__device__ __forceinline__ void st_shared_u32(unsigned smem_dst, unsigned v) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(smem_dst), "r"(v) : "memory");
}

// 4-byte shared-memory load.
__device__ __forceinline__ unsigned ld_shared_u32(unsigned smem_src) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(smem_src) : "memory");
    return v;
}

// ldmatrix_x4's inverse (sm_90): four 8x8 16-bit matrices from the warp's registers into shared memory. Lanes
// 8 i .. 8 i + 7 give the addresses of matrix i's 8 rows (16 bytes each); register i of lane l holds matrix i's row
// l / 4, columns 2 (l % 4) and + 1 (an mma / wgmma accumulator fragment's layout, packed to 16 bits).
__device__ __forceinline__ void stmatrix_x4(unsigned smem_row_addr, unsigned r0, unsigned r1, unsigned r2,
                                            unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_row_addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// TMA: copy the 3-D box at coordinates (c0 = innermost, c1, c2) of the tensor map `tmap` into shared memory at `dst`,
// as tma_load_2d does; the outermost coordinate picks a matrix of a batch (an attention head), so that rows past that
// matrix's own edge are zero-filled instead of read from the next one.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const void* tmap, unsigned bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];\n" ::"r"(dst), "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// Arrive on barrier `id` (1..15) without waiting: counts toward the `threads` that complete it (a bar.sync on the same
// id by the threads that wait, and this arrive by the threads that signal them).
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif  // __CUDA_ARCH__ >= 900

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a: the architecture-specific Hopper features

// Keep the compiler from moving accesses to `r` across this point (an empty asm that "reads and writes" r): wgmma
// reads and writes its accumulator registers asynchronously, so no other instruction may touch them in between.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Order this warpgroup's earlier register and shared-memory accesses before the wgmma.mma_async that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// Close the group of all wgmma.mma_async issued by this warpgroup since the previous commit.
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Block until at most N of this warpgroup's most recently committed wgmma groups are still running. As for
// cp.async, N is a count of pending groups: wait<0> drains all, wait<1> lets the newest keep running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes an immediate pending-group count in 0..7");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Give this warpgroup's threads REGS registers each (inc: take them from the pool others released; dec: release).
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// The accumulator operands of wgmma: an m64nN fp32 tile is N / 2 registers per thread: the register list in the
// instruction text (WGMMA_Dn_REGS) and the "+f" operands that bind it to d[] (WGMMA_Dn_OPERANDS), built from rows
// of 8: n = 32, 48 and 64 for fp8's promoted halves and quarters (m64n64, n96, n128), 72 for n144, 128 for n256.
#define WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define WGMMA_R1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define WGMMA_R2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define WGMMA_R3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_R4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define WGMMA_R5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define WGMMA_R6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define WGMMA_R7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_R8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define WGMMA_R9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define WGMMA_R10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define WGMMA_R11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define WGMMA_R12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define WGMMA_R13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define WGMMA_R14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define WGMMA_R15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_O0(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), \
    "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define WGMMA_O1(d) \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
    "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define WGMMA_O2(d) \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), \
    "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define WGMMA_O3(d) \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
    "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WGMMA_O4(d) \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
    "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define WGMMA_O5(d) \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
    "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define WGMMA_O6(d) \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), \
    "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define WGMMA_O7(d) \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
    "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_O8(d) \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), \
    "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define WGMMA_O9(d) \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), \
    "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define WGMMA_O10(d) \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
    "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define WGMMA_O11(d) \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), \
    "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define WGMMA_O12(d) \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), \
    "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
#define WGMMA_O13(d) \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), \
    "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define WGMMA_O14(d) \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), \
    "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
#define WGMMA_O15(d) \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), \
    "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// WGMMA_Lr: the first r rows of 8 registers (%0 .. %(8r - 1)); WGMMA_Pr(d): their "+f" operands; WGMMA_AFTERr: the
// operand numbers of the two descriptors that follow them.
#define WGMMA_L1 WGMMA_R0
#define WGMMA_L2 WGMMA_L1 ", " WGMMA_R1
#define WGMMA_L3 WGMMA_L2 ", " WGMMA_R2
#define WGMMA_L4 WGMMA_L3 ", " WGMMA_R3
#define WGMMA_L5 WGMMA_L4 ", " WGMMA_R4
#define WGMMA_L6 WGMMA_L5 ", " WGMMA_R5
#define WGMMA_L7 WGMMA_L6 ", " WGMMA_R6
#define WGMMA_L8 WGMMA_L7 ", " WGMMA_R7
#define WGMMA_L9 WGMMA_L8 ", " WGMMA_R8
#define WGMMA_L10 WGMMA_L9 ", " WGMMA_R9
#define WGMMA_L11 WGMMA_L10 ", " WGMMA_R10
#define WGMMA_L12 WGMMA_L11 ", " WGMMA_R11
#define WGMMA_L13 WGMMA_L12 ", " WGMMA_R12
#define WGMMA_L14 WGMMA_L13 ", " WGMMA_R13
#define WGMMA_L15 WGMMA_L14 ", " WGMMA_R14
#define WGMMA_L16 WGMMA_L15 ", " WGMMA_R15
#define WGMMA_P1(d) WGMMA_O0(d)
#define WGMMA_P2(d) WGMMA_P1(d), WGMMA_O1(d)
#define WGMMA_P3(d) WGMMA_P2(d), WGMMA_O2(d)
#define WGMMA_P4(d) WGMMA_P3(d), WGMMA_O3(d)
#define WGMMA_P5(d) WGMMA_P4(d), WGMMA_O4(d)
#define WGMMA_P6(d) WGMMA_P5(d), WGMMA_O5(d)
#define WGMMA_P7(d) WGMMA_P6(d), WGMMA_O6(d)
#define WGMMA_P8(d) WGMMA_P7(d), WGMMA_O7(d)
#define WGMMA_P9(d) WGMMA_P8(d), WGMMA_O8(d)
#define WGMMA_P10(d) WGMMA_P9(d), WGMMA_O9(d)
#define WGMMA_P11(d) WGMMA_P10(d), WGMMA_O10(d)
#define WGMMA_P12(d) WGMMA_P11(d), WGMMA_O11(d)
#define WGMMA_P13(d) WGMMA_P12(d), WGMMA_O12(d)
#define WGMMA_P14(d) WGMMA_P13(d), WGMMA_O13(d)
#define WGMMA_P15(d) WGMMA_P14(d), WGMMA_O14(d)
#define WGMMA_P16(d) WGMMA_P15(d), WGMMA_O15(d)
#define WGMMA_AFTER1 "%8, %9"
#define WGMMA_AFTER2 "%16, %17"
#define WGMMA_AFTER3 "%24, %25"
#define WGMMA_AFTER4 "%32, %33"
#define WGMMA_AFTER5 "%40, %41"
#define WGMMA_AFTER6 "%48, %49"
#define WGMMA_AFTER7 "%56, %57"
#define WGMMA_AFTER8 "%64, %65"
#define WGMMA_AFTER9 "%72, %73"
#define WGMMA_AFTER10 "%80, %81"
#define WGMMA_AFTER11 "%88, %89"
#define WGMMA_AFTER12 "%96, %97"
#define WGMMA_AFTER13 "%104, %105"
#define WGMMA_AFTER14 "%112, %113"
#define WGMMA_AFTER15 "%120, %121"
#define WGMMA_AFTER16 "%128, %129"
#define WGMMA_D4_REGS "{%0, %1, %2, %3}"
#define WGMMA_D4_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WGMMA_D32_REGS "{" WGMMA_L4 "}"
#define WGMMA_D32_OPERANDS(d) WGMMA_P4(d)
#define WGMMA_D64_REGS "{" WGMMA_L8 "}"
#define WGMMA_D64_OPERANDS(d) WGMMA_P8(d)
#define WGMMA_D96_REGS "{" WGMMA_L12 "}"
#define WGMMA_D96_OPERANDS(d) WGMMA_P12(d)
#define WGMMA_D128_REGS "{" WGMMA_L16 "}"
#define WGMMA_D128_OPERANDS(d) WGMMA_P16(d)
// Half a row of 8 (4 registers) after r whole rows, for N = 16 r + 8: WGMMA_Hr the registers (%(8r) .. %(8r + 3)),
// WGMMA_PHr(d) every "+f" operand of the r rows and the half, WGMMA_AFTERHr the two descriptors' operand numbers.
#define WGMMA_H1 "%8, %9, %10, %11"
#define WGMMA_PH1(d) WGMMA_P1(d), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
#define WGMMA_AFTERH1 "%12, %13"
#define WGMMA_H2 "%16, %17, %18, %19"
#define WGMMA_PH2(d) WGMMA_P2(d), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])
#define WGMMA_AFTERH2 "%20, %21"
#define WGMMA_H3 "%24, %25, %26, %27"
#define WGMMA_PH3(d) WGMMA_P3(d), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
#define WGMMA_AFTERH3 "%28, %29"
#define WGMMA_H4 "%32, %33, %34, %35"
#define WGMMA_PH4(d) WGMMA_P4(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define WGMMA_AFTERH4 "%36, %37"
#define WGMMA_H5 "%40, %41, %42, %43"
#define WGMMA_PH5(d) WGMMA_P5(d), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define WGMMA_AFTERH5 "%44, %45"
#define WGMMA_H6 "%48, %49, %50, %51"
#define WGMMA_PH6(d) WGMMA_P6(d), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51])
#define WGMMA_AFTERH6 "%52, %53"
#define WGMMA_H7 "%56, %57, %58, %59"
#define WGMMA_PH7(d) WGMMA_P7(d), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59])
#define WGMMA_AFTERH7 "%60, %61"
#define WGMMA_H8 "%64, %65, %66, %67"
#define WGMMA_PH8(d) WGMMA_P8(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
#define WGMMA_AFTERH8 "%68, %69"
#define WGMMA_H9 "%72, %73, %74, %75"
#define WGMMA_PH9(d) WGMMA_P9(d), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75])
#define WGMMA_AFTERH9 "%76, %77"
#define WGMMA_H10 "%80, %81, %82, %83"
#define WGMMA_PH10(d) WGMMA_P10(d), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83])
#define WGMMA_AFTERH10 "%84, %85"
#define WGMMA_H11 "%88, %89, %90, %91"
#define WGMMA_PH11(d) WGMMA_P11(d), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91])
#define WGMMA_AFTERH11 "%92, %93"
#define WGMMA_H12 "%96, %97, %98, %99"
#define WGMMA_PH12(d) WGMMA_P12(d), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99])
#define WGMMA_AFTERH12 "%100, %101"
#define WGMMA_H13 "%104, %105, %106, %107"
#define WGMMA_PH13(d) WGMMA_P13(d), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107])
#define WGMMA_AFTERH13 "%108, %109"
#define WGMMA_H14 "%112, %113, %114, %115"
#define WGMMA_PH14(d) WGMMA_P14(d), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115])
#define WGMMA_AFTERH14 "%116, %117"
#define WGMMA_H15 "%120, %121, %122, %123"
#define WGMMA_PH15(d) WGMMA_P15(d), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123])
#define WGMMA_AFTERH15 "%124, %125"

// D(64 x N, fp32) += A(64 x 16, K-major, shared) * B(16 x N, N-major, shared), A and B fp16 or bf16 (TYPE), one
// warpgroup. Immediates: scale-d 1 (accumulate), scale-a/b 1, A K-major (0), B N-major, i.e. transposed (1).
#define WGMMA_K16_NMAJOR(N, TYPE, REGS, DESCS) \
    "{\n" \
    "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS ", " DESCS ", 1, 1, 1, 0, 1;\n" \
    "}\n"
// D(64 x N, fp32) (+)= A(64 x 32, K-major, shared) * B(32 x N, K-major, shared), A and B fp8 e4m3: wgmma's fp8 form
// takes both operands K-major only (no transpose immediates). Immediates: scale-d (1: accumulate into D; 0: overwrite
// it), scale-a/b 1.
#define WGMMA_K32_E4M3(N, REGS, DESCS, SCALE_D) \
    "{\n" \
    "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " REGS ", " DESCS ", " #SCALE_D ", 1, 1;\n" \
    "}\n"

// One 16-bit wgmma, bf16 (IS_BF16) or fp16: FORM(N, TYPE, REGS, OPERANDS) is the instruction text (a WGMMA_K16_*
// macro), OUTPUTS its "+f" accumulator operands, the rest its inputs. The type is part of the text, so each type is
// an asm statement of its own.
#define WGMMA_ASM_16BIT(IS_BF16, FORM, N, REGS, OPERANDS, OUTPUTS, ...) \
    do { \
        if constexpr (IS_BF16) asm volatile(FORM(N, "bf16", REGS, OPERANDS) : OUTPUTS : __VA_ARGS__); \
        else asm volatile(FORM(N, "f16", REGS, OPERANDS) : OUTPUTS : __VA_ARGS__); \
    } while (0)
// The shared-memory forms' descriptor inputs.
#define WGMMA_DESCS "l"(desc_a), "l"(desc_b)

// D(64 x N, fp32, N / 2 registers per thread) += A(64 x 16, K-major, shared) * B(16 x N, N-major, shared), N = 128,
// 192 or 256, fp16 or bf16: the GEMM's 16-bit form.
template <int N, bool IS_BF16>
__device__ __forceinline__ void wgmma_m64nNk16_f32_nmajor(float (&d)[N / 2], unsigned long long desc_a,
                                                          unsigned long long desc_b) {
    static_assert(N == 128 || N == 192 || N == 256, "the GEMM's 16-bit form: n128, n192 or n256");
    if constexpr (N == 128)
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_NMAJOR, 128, WGMMA_D64_REGS, "%64, %65", WGMMA_D64_OPERANDS(d), WGMMA_DESCS);
    else if constexpr (N == 192)
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_NMAJOR, 192, WGMMA_D96_REGS, "%96, %97", WGMMA_D96_OPERANDS(d), WGMMA_DESCS);
    else
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_NMAJOR, 256, WGMMA_D128_REGS, "%128, %129", WGMMA_D128_OPERANDS(d),
                        WGMMA_DESCS);
}

// One fp8 wgmma of N columns: `first` (scale-d 0: D = A * B) or accumulating (scale-d 1), REGS / OPERANDS its N / 2
// accumulator registers, DESCS its descriptors' operand numbers (after the accumulators).
#define WGMMA_ASM_E4M3(N, REGS, DESCS, OPERANDS) \
    do { \
        if (first) asm volatile(WGMMA_K32_E4M3(N, REGS, DESCS, 0) : OPERANDS : WGMMA_DESCS); \
        else asm volatile(WGMMA_K32_E4M3(N, REGS, DESCS, 1) : OPERANDS : WGMMA_DESCS); \
    } while (0)

// D(64 x N, fp32) (+)= A(64 x 32, K-major, shared) * B(32 x N, K-major, shared), fp8 e4m3 operands: N = 128 or 144
// (the GEMM's tiles: the 128 x 144 rung's whole warpgroup tile, promoted in pairs; 72 registers per thread) or any
// multiple of 8 up to 160 (the swapped decode and mid-M kernels' tokens: the weight, K-major, on the M side). `first`:
// D = A * B, the first k-step of a fresh partial sum (D's old values are ignored); otherwise D += A * B.
// The form at N = 16 ROWS (ROWS rows of 8 accumulator registers), and _HALF at N = 16 ROWS + 8 (half a row more).
#define WGMMA_E4M3_ROWS(N, ROWS) WGMMA_ASM_E4M3(N, "{" WGMMA_L##ROWS "}", WGMMA_AFTER##ROWS, WGMMA_P##ROWS(d))
#define WGMMA_E4M3_HALF(N, ROWS) \
    WGMMA_ASM_E4M3(N, "{" WGMMA_L##ROWS ", " WGMMA_H##ROWS "}", WGMMA_AFTERH##ROWS, WGMMA_PH##ROWS(d))
template <int N>
__device__ __forceinline__ void wgmma_m64nNk32_f32_e4m3(float (&d)[N / 2], unsigned long long desc_a,
                                                       unsigned long long desc_b, bool first) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 160, "the fp8 forms here: n8 .. n160 by 8");
    if constexpr (N == 8) WGMMA_ASM_E4M3(8, WGMMA_D4_REGS, "%4, %5", WGMMA_D4_OPERANDS(d));
    else if constexpr (N == 16) WGMMA_E4M3_ROWS(16, 1);
    else if constexpr (N == 24) WGMMA_E4M3_HALF(24, 1);
    else if constexpr (N == 32) WGMMA_E4M3_ROWS(32, 2);
    else if constexpr (N == 40) WGMMA_E4M3_HALF(40, 2);
    else if constexpr (N == 48) WGMMA_E4M3_ROWS(48, 3);
    else if constexpr (N == 56) WGMMA_E4M3_HALF(56, 3);
    else if constexpr (N == 64) WGMMA_E4M3_ROWS(64, 4);
    else if constexpr (N == 72) WGMMA_E4M3_HALF(72, 4);
    else if constexpr (N == 80) WGMMA_E4M3_ROWS(80, 5);
    else if constexpr (N == 88) WGMMA_E4M3_HALF(88, 5);
    else if constexpr (N == 96) WGMMA_E4M3_ROWS(96, 6);
    else if constexpr (N == 104) WGMMA_E4M3_HALF(104, 6);
    else if constexpr (N == 112) WGMMA_E4M3_ROWS(112, 7);
    else if constexpr (N == 120) WGMMA_E4M3_HALF(120, 7);
    else if constexpr (N == 128) WGMMA_E4M3_ROWS(128, 8);
    else if constexpr (N == 136) WGMMA_E4M3_HALF(136, 8);
    else if constexpr (N == 144) WGMMA_E4M3_ROWS(144, 9);
    else if constexpr (N == 152) WGMMA_E4M3_HALF(152, 9);
    else WGMMA_E4M3_ROWS(160, 10);
}

// The decode kernel's swapped 16-bit form (gemm_decode.cu's gemm_tma_decode): D(64 x N, fp32) += A(64 x 16, M-major,
// shared, read transposed) * B(16 x N, K-major, shared), N any multiple of 8 up to 256 (N / 2 registers per thread).
// A is the weight (B of C = A B, K x N row-major: its N runs along wgmma's M), B the tokens (A of C = A B, row-major:
// K-major). Immediates: scale-d 1 (accumulate), scale-a/b 1, A transposed (1), B K-major (0).
#define WGMMA_K16_MMAJOR_A(N, TYPE, REGS, DESCS) \
    "{\n" \
    "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS ", " DESCS ", 1, 1, 1, 1, 0;\n" \
    "}\n"
// The swapped form at N = 16 ROWS (ROWS rows of 8 accumulator registers), N written out (the instruction's text);
// _HALF: at N = 16 ROWS + 8 (half a row more).
#define WGMMA_MMAJOR_A_ROWS(N, ROWS) \
    WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_MMAJOR_A, N, "{" WGMMA_L##ROWS "}", WGMMA_AFTER##ROWS, WGMMA_P##ROWS(d), \
                    WGMMA_DESCS)
#define WGMMA_MMAJOR_A_HALF(N, ROWS) \
    WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_MMAJOR_A, N, "{" WGMMA_L##ROWS ", " WGMMA_H##ROWS "}", WGMMA_AFTERH##ROWS, \
                    WGMMA_PH##ROWS(d), WGMMA_DESCS)
template <int N, bool IS_BF16>
__device__ __forceinline__ void wgmma_m64nNk16_f32_mmajor_a(float (&d)[N / 2], unsigned long long desc_a,
                                                       unsigned long long desc_b) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "the swapped form: n8 .. n256 by 8");
    if constexpr (N == 8)
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_MMAJOR_A, 8, WGMMA_D4_REGS, "%4, %5", WGMMA_D4_OPERANDS(d), WGMMA_DESCS);
    else if constexpr (N == 16) WGMMA_MMAJOR_A_ROWS(16, 1);
    else if constexpr (N == 24) WGMMA_MMAJOR_A_HALF(24, 1);
    else if constexpr (N == 32) WGMMA_MMAJOR_A_ROWS(32, 2);
    else if constexpr (N == 40) WGMMA_MMAJOR_A_HALF(40, 2);
    else if constexpr (N == 48) WGMMA_MMAJOR_A_ROWS(48, 3);
    else if constexpr (N == 56) WGMMA_MMAJOR_A_HALF(56, 3);
    else if constexpr (N == 64) WGMMA_MMAJOR_A_ROWS(64, 4);
    else if constexpr (N == 72) WGMMA_MMAJOR_A_HALF(72, 4);
    else if constexpr (N == 80) WGMMA_MMAJOR_A_ROWS(80, 5);
    else if constexpr (N == 88) WGMMA_MMAJOR_A_HALF(88, 5);
    else if constexpr (N == 96) WGMMA_MMAJOR_A_ROWS(96, 6);
    else if constexpr (N == 104) WGMMA_MMAJOR_A_HALF(104, 6);
    else if constexpr (N == 112) WGMMA_MMAJOR_A_ROWS(112, 7);
    else if constexpr (N == 120) WGMMA_MMAJOR_A_HALF(120, 7);
    else if constexpr (N == 128) WGMMA_MMAJOR_A_ROWS(128, 8);
    else if constexpr (N == 136) WGMMA_MMAJOR_A_HALF(136, 8);
    else if constexpr (N == 144) WGMMA_MMAJOR_A_ROWS(144, 9);
    else if constexpr (N == 152) WGMMA_MMAJOR_A_HALF(152, 9);
    else if constexpr (N == 160) WGMMA_MMAJOR_A_ROWS(160, 10);
    else if constexpr (N == 168) WGMMA_MMAJOR_A_HALF(168, 10);
    else if constexpr (N == 176) WGMMA_MMAJOR_A_ROWS(176, 11);
    else if constexpr (N == 184) WGMMA_MMAJOR_A_HALF(184, 11);
    else if constexpr (N == 192) WGMMA_MMAJOR_A_ROWS(192, 12);
    else if constexpr (N == 200) WGMMA_MMAJOR_A_HALF(200, 12);
    else if constexpr (N == 208) WGMMA_MMAJOR_A_ROWS(208, 13);
    else if constexpr (N == 216) WGMMA_MMAJOR_A_HALF(216, 13);
    else if constexpr (N == 224) WGMMA_MMAJOR_A_ROWS(224, 14);
    else if constexpr (N == 232) WGMMA_MMAJOR_A_HALF(232, 14);
    else if constexpr (N == 240) WGMMA_MMAJOR_A_ROWS(240, 15);
    else if constexpr (N == 248) WGMMA_MMAJOR_A_HALF(248, 15);
    else WGMMA_MMAJOR_A_ROWS(256, 16);
}

// Keep the compiler from reusing the register `r` before this point: wgmma's register-A form reads its A fragments
// asynchronously, so they must stay live until the wait that completes the group reading them.
__device__ __forceinline__ void fence_operand_u32(unsigned& r) { asm volatile("" : "+r"(r)::"memory"); }

// D(64 x N, fp32) (+)= A(64 x 16, K-major, shared) * B(16 x N, K-major, shared: stored N x K, each row's 16 values of
// K contiguous), A and B fp16 or bf16 (TYPE), one warpgroup. scale-d from a predicate set from SCALE_D (0: D = A * B,
// the first k-step of a fresh product; 1: accumulate). Immediates: scale-a/b 1, A K-major (0), B K-major (0).
#define WGMMA_K16_KMAJOR_B(N, TYPE, REGS, DESCS, SCALE_D) \
    "{\n" \
    ".reg .pred p;\n" \
    "setp.ne.b32 p, " SCALE_D ", 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS ", " DESCS ", p, 1, 1, 0, 0;\n" \
    "}\n"
// D(64 x 128, fp32, 64 registers per thread) (+)= A(64 x 16, K-major, shared) * B(16 x 128, K-major, shared): the
// attention scores S = Q K^T, K stored (key, d) row-major.
template <bool IS_BF16>
__device__ __forceinline__ void wgmma_m64n128k16_f32_kmajor_b(float (&d)[64], unsigned long long desc_a,
                                                              unsigned long long desc_b, bool accumulate) {
    if constexpr (IS_BF16)
        asm volatile(WGMMA_K16_KMAJOR_B(128, "bf16", WGMMA_D64_REGS, "%64, %65", "%66")
                     : WGMMA_D64_OPERANDS(d) : "l"(desc_a), "l"(desc_b), "r"((unsigned)accumulate));
    else
        asm volatile(WGMMA_K16_KMAJOR_B(128, "f16", WGMMA_D64_REGS, "%64, %65", "%66")
                     : WGMMA_D64_OPERANDS(d) : "l"(desc_a), "l"(desc_b), "r"((unsigned)accumulate));
}

// D(64 x N, fp32) += A(64 x 16, registers) * B(16 x N, N-major, shared, read transposed), fp16 or bf16: wgmma's
// register-A form. Each warp of the warpgroup holds 16 rows of A as mma.sync m16n8k16 holds its A: lane l's a[0] is
// row l / 4, columns 2 (l % 4) and + 1; a[1] the same columns of row + 8; a[2] and a[3] those rows at columns + 8
// (the m64nNk16 accumulator layout of two adjacent 8-column blocks, packed to 16 bits). Immediates: scale-d 1
// (accumulate), scale-a/b 1, B transposed (1).
#define WGMMA_K16_REG_A(N, TYPE, REGS, AREGS_DESC) \
    "{\n" \
    "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS ", " AREGS_DESC ", 1, 1, 1, 1;\n" \
    "}\n"
template <int N, bool IS_BF16>
__device__ __forceinline__ void wgmma_m64nNk16_f32_reg_a(float (&d)[N / 2], const unsigned (&a)[4],
                                                         unsigned long long desc_b) {
    static_assert(N == 64 || N == 128, "the register-A form here: n64 or n128 (attention's P V at d = 64 or 128)");
    if constexpr (N == 64)
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_REG_A, 64, WGMMA_D32_REGS, "{%32, %33, %34, %35}, %36",
                        WGMMA_D32_OPERANDS(d), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
    else
        WGMMA_ASM_16BIT(IS_BF16, WGMMA_K16_REG_A, 128, WGMMA_D64_REGS, "{%64, %65, %66, %67}, %68",
                        WGMMA_D64_OPERANDS(d), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL
