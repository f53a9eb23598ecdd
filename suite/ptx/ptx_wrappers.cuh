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
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes an immediate pending-group count in 0..7");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
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

// D = A * B + D for one warp: A 16x16 fp16 (row), B 16x8 fp16 (col), D 16x8 fp32, accumulated in place.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values rounded to nearest fp16 and packed: `lo` in bits 0..15, `hi` in bits 16..31.
__device__ __forceinline__ half2_bits pack_half2(float lo, float hi) {
    half2_bits packed;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}
