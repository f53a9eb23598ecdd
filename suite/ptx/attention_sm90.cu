// attention_sm90.cu: O = softmax(Q K^T * scale [+ causal mask]) V, the forward pass, in the Hopper form
// (FlashAttention-3's design on the GEMM skeleton). Q (b, hq, sq, D), K and V (b, hkv, skv, D), O like Q, all
// row-major and contiguous, fp16 or bf16 (IS_BF16), D = 64 or 128; GQA: query head h reads key / value head h / group.
//
//   global --TMA (3-D maps: head, row, column)--> Q tile once + STAGES-deep ring of (K tile, V tile)
//          --wgmma, S = Q K^T from shared memory--> fp32 S in registers --online softmax, P to 16 bits in registers-->
//          --wgmma, O += P V (A = P from registers, B = V from shared memory)--> fp32 O --epilogue--> O
//
// A block of 3 warpgroups owns BLOCK_M = 128 query rows of one (batch, query head). Warpgroup 0 is the producer: it
// gives its registers away (setmaxnreg) and one thread issues every TMA copy. Warpgroups 1 and 2 are the consumers,
// each owning 64 of the 128 rows (one wgmma m64 tile): per BLOCK_N = 128-key tile they compute S (64 x 128, 64 fp32
// registers per thread), mask it, update the online softmax (row max and sum in log2 units: log2(e) is folded into
// the scale, so every exponential is one ex2), round P to 16 bits in the registers that held S (the m64nNk16
// accumulator layout is, two 8-column blocks at a time, the register-A fragment of the next wgmma) and accumulate
// O += P V.
//
// The ring (ring.cuh's verbs): per stage a full barrier (the producer's one arrive with the stage's bytes; the copy
// engine completes the phase when they land) and an empty barrier (one arrive per consumer warp once both wgmma that
// read the stage, S = Q K^T and O += P V, have completed). Q has a barrier of its own, completed once.
//
// PINGPONG (the consumer's two mainloops): false, each warpgroup runs S, wait, softmax, P V, wait on its own, and the
// two interleave only as the warp schedulers pick them; true, FlashAttention-3's ping-pong: the warpgroups take turns
// at the tensor pipe on two named barriers, each turn issuing one warpgroup's O += P V of its previous tile and
// S = Q K^T of its next, while the other warpgroup runs its softmax (mainloop_pingpong; a ring of 2 stages at least).
//
// Causal mask, bottom-right aligned: row i sees key j when j <= i + skv - sq. A block walks only the key tiles its
// last row sees (the tiles past the diagonal are never loaded); the tiles that straddle skv or the diagonal are
// masked, the others are not. A row that sees no key at all (sq > skv) is written as zeros. The TMA unit zero-fills
// rows past sq or skv (the maps are 3-D, so a head's rows end at its own edge); keys >= skv are masked to -inf.
//
// Shared memory (base rounded up to the 1024-byte swizzle atom), every tile in boxes of 64 columns (128 bytes, the
// 128-byte swizzle's width), 16-byte chunk c of each 128-byte row r stored at chunk c ^ (r % 8), as the TMA unit
// writes and wgmma's descriptors read it:
//   [Q: D/64 boxes of 128 rows | stage 0: K (D/64 boxes of 128 keys), V (same) | stage 1 ... | full[], empty[], q_full]
// wgmma descriptors (sm90_gemm.cuh's smem_descriptor, 128-byte swizzle):
//   Q (A, K-major): box kk / 4 + warpgroup rows * 128 B, + (kk % 4) * 32 B per k-step kk; SBO = 1024 B (8-row atoms).
//   K (B, K-major: stored keys x d): box kk / 4, + (kk % 4) * 32 B per k-step; SBO = 1024 B; N = the 128 keys.
//   V (B, N-major: stored keys x d, read transposed): + t * 16 rows * 128 B per 16-key step t; SBO = 1024 B between
//     8-key atoms; LBO = one box (128 keys * 128 B) between 64-column (d) blocks, as the GEMM's N-major B.
//
// Build for sm_90a with NDEBUG (sm90_gemm.cuh: a call inside the wgmma region serializes every wgmma).

#include "attention_common.cuh"
#include "sm90_gemm.cuh"

constexpr int BLOCK_M = 128;  // query rows per block: one m64 tile per consumer warpgroup
constexpr int BLOCK_N = 128;  // keys per K / V tile
constexpr int CONSUMERS = 2;  // consumer warpgroups
constexpr int WG_ROWS = BLOCK_M / CONSUMERS;
constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;  // the producer warpgroup first
constexpr int BOX_COLS = SWIZZLE_BYTES / 2;            // 16-bit columns per TMA box row: 64

// The launcher (suite/ptx/attention_sm90.py) sizes grids from its own copy of the tile: the same here
#ifdef ATTN_BLOCK_M
static_assert(ATTN_BLOCK_M == BLOCK_M && ATTN_BLOCK_N == BLOCK_N && ATTN_THREADS == THREADS,
              "launcher's tile differs from the kernel's");
#endif

template <int D, int STAGES>
struct AttnSmem {
    static_assert(D == 64 || D == 128, "head_dim must be 64 or 128");
    static constexpr int BOXES = D / BOX_COLS;                // 64-column boxes per tile row: 1 or 2
    static constexpr int Q_BOX = BLOCK_M * SWIZZLE_BYTES;     // 16 KiB
    static constexpr int KV_BOX = BLOCK_N * SWIZZLE_BYTES;    // 16 KiB
    static constexpr int Q_BYTES = BOXES * Q_BOX;
    static constexpr int TILE_BYTES = BOXES * KV_BOX;         // one K or V tile
    static constexpr int STAGE_BYTES = 2 * TILE_BYTES;        // a ring stage: the K tile, then the V tile
    static constexpr int BARRIER_BYTES = (2 * STAGES + 1) * 8;  // full[], empty[], q_full
    static constexpr int BYTES = Q_BYTES + STAGES * STAGE_BYTES + BARRIER_BYTES;
    static_assert(Q_BOX % ATOM_BYTES == 0 && KV_BOX % ATOM_BYTES == 0, "every box starts on a swizzle atom");
    unsigned base;
    __device__ __forceinline__ unsigned q(int box) const { return base + box * Q_BOX; }
    __device__ __forceinline__ unsigned k(int stage, int box) const {
        return base + Q_BYTES + stage * STAGE_BYTES + box * KV_BOX;
    }
    __device__ __forceinline__ unsigned v(int stage, int box) const { return k(stage, box) + TILE_BYTES; }
    __device__ __forceinline__ unsigned full(int stage) const { return base + Q_BYTES + STAGES * STAGE_BYTES + stage * 8; }
    __device__ __forceinline__ unsigned empty(int stage) const { return full(STAGES) + stage * 8; }
    __device__ __forceinline__ unsigned q_full() const { return empty(STAGES); }
};

// ---------------------------------------------------------------------------------------------------------------
// producer: one thread loads Q once, then every K / V tile the block walks, STAGES tiles ahead of the consumers at most
// ---------------------------------------------------------------------------------------------------------------
template <int STAGES, int D>
__device__ __forceinline__ void producer(const TensorMap& tmap_q, const TensorMap& tmap_k, const TensorMap& tmap_v,
                                         const AttnSmem<D, STAGES>& smem, int bh, int kv_bh, int m0, int num_tiles) {
    using L = AttnSmem<D, STAGES>;
    // PROLOGUE: the Q tile; its bytes (zero-filled rows past sq included) complete q_full's one phase
    producer_commit(smem.q_full(), L::Q_BYTES);
#pragma unroll
    for (int box = 0; box < L::BOXES; ++box) tma_load_3d(smem.q(box), &tmap_q, smem.q_full(), box * BOX_COLS, m0, bh);

    // MAINLOOP: tile `tile` into the stage at `write`
    RingPosition write;  // smem_write_stage and its lap's parity
    for (int tile = 0; tile < num_tiles; ++tile) {
        // every consumer warp released the stage (both wgmma that read its previous tile completed); a fresh ring's
        // first lap waits on the phase before the barrier's first, which counts as complete
#ifndef PIPESUITE_FAULT_SKIP_EMPTY_WAIT  // fault injection for the sanitizer self-test (suite/sanitize.py) only
        producer_acquire(smem.empty(write.stage), write);
#endif
        const unsigned full = smem.full(write.stage);
        producer_commit(full, L::STAGE_BYTES);  // the phase completes when the K and V boxes have all landed
#pragma unroll
        for (int box = 0; box < L::BOXES; ++box) {
            tma_load_3d(smem.k(write.stage, box), &tmap_k, full, box * BOX_COLS, tile * BLOCK_N, kv_bh);
            tma_load_3d(smem.v(write.stage, box), &tmap_v, full, box * BOX_COLS, tile * BLOCK_N, kv_bh);
        }
        write.advance<STAGES>();  // wraps back to the start of the ring, flipping the parity
    }
}

// ---------------------------------------------------------------------------------------------------------------
// consumer: one warpgroup's 64 query rows against every K / V tile of the block
// ---------------------------------------------------------------------------------------------------------------
// S = Q K^T for this warpgroup's rows against the K tile of `stage`: D / 16 k-steps, the first overwriting S.
template <int STAGES, int D, bool IS_BF16>
__device__ __forceinline__ void issue_scores(float (&s)[BLOCK_N / 2], const AttnSmem<D, STAGES>& smem, int stage,
                                             int wg) {
    fence_accumulators(s);
    wgmma_fence();  // S's last reads (the previous tile's softmax) are ordered before these wgmma overwrite it
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const int box = kk / (BOX_COLS / 16), step_bytes = kk % (BOX_COLS / 16) * 32;
        const unsigned long long desc_q =
            smem_descriptor_at(smem.q(box) + wg * WG_ROWS * SWIZZLE_BYTES, step_bytes, 16, ATOM_BYTES);
        const unsigned long long desc_k = smem_descriptor_at(smem.k(stage, box), step_bytes, 16, ATOM_BYTES);
        wgmma_m64n128k16_f32_kmajor_b<IS_BF16>(s, desc_q, desc_k, kk > 0);
    }
    wgmma_commit_group();
}

// O += P V against the V tile of `stage`: BLOCK_N / 16 k-steps of 16 keys, P's fragments from registers.
template <int STAGES, int D, bool IS_BF16>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], unsigned (&p)[BLOCK_N / 16][4],
                                         const AttnSmem<D, STAGES>& smem, int stage) {
    using L = AttnSmem<D, STAGES>;
    fence_accumulators(o);
    wgmma_fence();  // P's packing and O's rescale (register writes) are ordered before these wgmma read them
#pragma unroll
    for (int t = 0; t < BLOCK_N / 16; ++t)
        wgmma_m64nNk16_f32_reg_a<D, IS_BF16>(
            o, p[t], smem_descriptor_at(smem.v(stage, 0), t * 16 * SWIZZLE_BYTES, L::KV_BOX, ATOM_BYTES));
    wgmma_commit_group();
}

// What one consumer thread holds for its two rows (row0 and row0 + 8) across the key tiles.
template <int D>
struct RowState {
    float s[BLOCK_N / 2];           // S, then P, of a tile: s[4j + 2h + e] is row row0 + 8h, column 8j + col + e
    float o[D / 2];                 // O, laid out as S over d
    unsigned p[BLOCK_N / 16][4];    // P in 16 bits: k-step t (keys 16t .. 16t + 15) as wgmma's register-A fragment
    float m[2];                     // per row: the running max, in log2 units
    float l[2];                     // per row: this thread's part of the running sum
    int row0, col, wg_row0;         // this thread's first row and column, its warpgroup's first row
};

// S of key tile `tile` (completed) -> P: masked (keys past skv and, causal, past each row's diagonal, become -inf),
// the online softmax's step (attention_common.cuh), O rescaled by 2^(old max - new max), P rounded to 16 bits in
// registers.
template <int D, bool IS_BF16>
__device__ __forceinline__ void online_softmax(RowState<D>& st, int tile, int sq, int skv, float scale_log2,
                                               bool causal) {
    const int key0 = tile * BLOCK_N;
    if (key0 + BLOCK_N > skv || (causal && key0 + BLOCK_N - 1 > st.wg_row0 + skv - sq))
        mask_scores<BLOCK_N / 8>(st.s, key0, st.row0, st.col, sq, skv, causal);
    float alpha[2];
    softmax_step<BLOCK_N / 8>(st.s, st.m, st.l, alpha, scale_log2);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            st.o[4 * j + 2 * h] *= alpha[h];
            st.o[4 * j + 2 * h + 1] *= alpha[h];
        }
    // k-step t of P V is S's 8-column blocks 2t and 2t + 1: registers (row0, block 2t), (row0 + 8, block 2t),
    // (row0, block 2t + 1), (row0 + 8, block 2t + 1), i.e. s[8t + 2r], s[8t + 2r + 1] for r = 0 .. 3
#pragma unroll
    for (int t = 0; t < BLOCK_N / 16; ++t)
#pragma unroll
        for (int r = 0; r < 4; ++r) st.p[t][r] = Half16<IS_BF16>::pack(st.s[8 * t + 2 * r], st.s[8 * t + 2 * r + 1]);
}

// After the wait that completed O += P V: O final for that tile, P's registers no longer read.
template <int D>
__device__ __forceinline__ void fence_pv(RowState<D>& st) {
    fence_accumulators(st.o);
#pragma unroll
    for (int t = 0; t < BLOCK_N / 16; ++t)
#pragma unroll
        for (int r = 0; r < 4; ++r) fence_operand_u32(st.p[t][r]);  // P's registers live until the wgmma read them
}

// The stage's release: one arrive per consumer warp, once every wgmma that read the stage has completed.
template <int STAGES, int D>
__device__ __forceinline__ void release_stage(const AttnSmem<D, STAGES>& smem, int stage) {
    if (threadIdx.x % 32 == 0) consumer_release(smem.empty(stage));
}

// The consumer's MAINLOOP, serial form: per tile, S = Q K^T, wait, softmax, O += P V, wait, release the stage. The two
// consumer warpgroups interleave only as the warp schedulers pick them.
template <int STAGES, int D, bool IS_BF16>
__device__ __forceinline__ void mainloop_serial(RowState<D>& st, const AttnSmem<D, STAGES>& smem, int wg, int sq,
                                                int skv, int num_tiles, float scale_log2, bool causal) {
    RingPosition read;  // smem_read_stage and its lap's parity
    for (int tile = 0; tile < num_tiles; ++tile) {
        const int stage = read.stage;
        consumer_wait(smem.full(stage), read);  // the TMA bytes of this K / V tile have all landed
        issue_scores<STAGES, D, IS_BF16>(st.s, smem, stage, wg);
        wgmma_wait<0>();  // S is final: the softmax reads it
        fence_accumulators(st.s);
        online_softmax<D, IS_BF16>(st, tile, sq, skv, scale_log2, causal);
        issue_pv<STAGES, D, IS_BF16>(st.o, st.p, smem, stage);
        wgmma_wait<0>();  // O += P V has completed: P and the stage are no longer read
        fence_pv(st);
        release_stage(smem, stage);  // both wgmma that read the stage completed: the producer may refill it
        read.advance<STAGES>();      // wraps back to the start of the ring, flipping the parity
    }
}

// Ping-pong (FlashAttention-3): the two consumer warpgroups take turns at the tensor pipe. Each turn issues one
// warpgroup's O += P V of the previous tile and S = Q K^T of the next, back to back; the other warpgroup runs its
// softmax meanwhile. Turns are handed over on two named barriers of 256 threads (both consumer warpgroups): a
// warpgroup waits on its own (bar.sync: its 128 threads and the other's 128 arrivals), issues, then arrives on the
// other's. Warpgroup 0 has the first turn. Every sync meets exactly one arrive, so no barrier is left half-arrived.
constexpr unsigned SCHED_BARRIER = 1;  // named barriers SCHED_BARRIER + wg (0 is __syncthreads)
constexpr unsigned SCHED_THREADS = CONSUMERS * WG_THREADS;

__device__ __forceinline__ void take_turn(int wg) { named_barrier_sync(SCHED_BARRIER + wg, SCHED_THREADS); }
__device__ __forceinline__ void hand_over(int wg) { named_barrier_arrive(SCHED_BARRIER + (1 - wg), SCHED_THREADS); }

// O += P V of a tile holds its stage (K and V in one) while S = Q K^T of the next reads the next stage: the ring
// needs two stages at least.
template <int STAGES, int D, bool IS_BF16>
__device__ __forceinline__ void mainloop_pingpong(RowState<D>& st, const AttnSmem<D, STAGES>& smem, int wg, int sq,
                                                  int skv, int num_tiles, float scale_log2, bool causal) {
    static_assert(STAGES >= 2, "ping-pong keeps one tile's stage while it reads the next: STAGES >= 2");
    if (num_tiles == 0) return;
    if (wg == 1) hand_over(wg);  // warpgroup 0 takes the first turn
    RingPosition read;           // smem_read_stage and its lap's parity
    // PROLOGUE: S of the first tile, then its softmax
    consumer_wait(smem.full(read.stage), read);  // the TMA bytes of the first K / V tile have all landed
    take_turn(wg);  // warpgroup 0: warpgroup 1's first hand-over; warpgroup 1: warpgroup 0 has issued its first S
    issue_scores<STAGES, D, IS_BF16>(st.s, smem, read.stage, wg);
    hand_over(wg);  // S issued: the tensor pipe passes to the other warpgroup
    wgmma_wait<0>();  // S is final: the softmax reads it
    fence_accumulators(st.s);
    online_softmax<D, IS_BF16>(st, 0, sq, skv, scale_log2, causal);
    int smem_pv_stage = read.stage;  // the stage whose V the pending O += P V reads
    read.advance<STAGES>();
    // MAINLOOP: O += P V of tile - 1 and S of tile in one turn, then the softmax of tile under the other's turn
    for (int tile = 1; tile < num_tiles; ++tile) {
        consumer_wait(smem.full(read.stage), read);  // the TMA bytes of this K / V tile have all landed
        take_turn(wg);  // the other warpgroup has issued its GEMMs: the tensor pipe is ours
        issue_pv<STAGES, D, IS_BF16>(st.o, st.p, smem, smem_pv_stage);
        issue_scores<STAGES, D, IS_BF16>(st.s, smem, read.stage, wg);
        hand_over(wg);  // both GEMMs issued: the tensor pipe passes to the other warpgroup
        wgmma_wait<1>();  // O += P V (the older group) has completed: O is final for tile - 1, its stage is read
        fence_pv(st);
        release_stage(smem, smem_pv_stage);  // both wgmma that read tile - 1's stage completed: it may be refilled
        wgmma_wait<0>();  // S of this tile is final (and O += P V before it): the softmax reads both
        fence_accumulators(st.s);
        online_softmax<D, IS_BF16>(st, tile, sq, skv, scale_log2, causal);
        smem_pv_stage = read.stage;
        read.advance<STAGES>();  // wraps back to the start of the ring, flipping the parity
    }
    // EPILOGUE: the last tile's O += P V, in a last turn; warpgroup 1's is the last of all, handed to no one
    take_turn(wg);  // the other warpgroup has issued its GEMMs: the tensor pipe is ours
    issue_pv<STAGES, D, IS_BF16>(st.o, st.p, smem, smem_pv_stage);
    if (wg == 0) hand_over(wg);  // warpgroup 1's last turn follows this one
    wgmma_wait<0>();  // O += P V has completed: O is final, the last stage is read
    fence_pv(st);
    release_stage(smem, smem_pv_stage);  // as every stage read is released (no producer waits on this last one)
}

template <int STAGES, int D, bool IS_BF16, bool PINGPONG>
__device__ __forceinline__ void consumer(const AttnSmem<D, STAGES>& smem, half_bits* __restrict__ O, int wg, int bh,
                                         int m0, int sq, int skv, int num_tiles, float scale_log2, bool causal) {
    RowState<D> st;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
    st.wg_row0 = m0 + wg * WG_ROWS;
    st.row0 = st.wg_row0 + warp * 16 + lane / 4;  // the m64nNk16 accumulator: each warp 16 rows, lane / 4 and + 8
    st.col = 2 * (lane % 4);                      // and in each 8-column block columns 2 (lane % 4) and + 1
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        st.m[h] = -__int_as_float(0x7f800000);
        st.l[h] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) st.s[i] = 0.f;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) st.o[i] = 0.f;

    mbarrier_wait(smem.q_full(), 0);  // the Q tile's bytes have landed (its barrier's first and only phase)
    if constexpr (PINGPONG) mainloop_pingpong<STAGES, D, IS_BF16>(st, smem, wg, sq, skv, num_tiles, scale_log2, causal);
    else mainloop_serial<STAGES, D, IS_BF16>(st, smem, wg, sq, skv, num_tiles, scale_log2, causal);

    // EPILOGUE: the quad's partial sums added, O / l rounded to 16 bits; a row that saw no key (l = 0) is zero.
    store_normalized_o<D, IS_BF16>(O, bh, sq, st.row0, st.col, st.l, [&](int j, int i) { return st.o[4 * j + i]; });
}

template <int STAGES, int D, bool IS_BF16, bool PINGPONG>
__global__ void __launch_bounds__(THREADS, 1)
    attention_sm90(const __grid_constant__ TensorMap tmap_q, const __grid_constant__ TensorMap tmap_k,
                   const __grid_constant__ TensorMap tmap_v, half_bits* __restrict__ O, int hq, int group, int sq,
                   int skv, float scale_log2, int causal) {
    using L = AttnSmem<D, STAGES>;
    static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in 1..8");
    static_assert(L::BYTES + SMEM_ALIGN_SLACK == launcher_smem_bytes(STAGES, D, 0, 0),
                  "the launcher's shared-memory figure (attention_sm90.py's smem_bytes) is this layout's size");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const L smem{(smem_u32(smem_raw) + 1023u) & ~1023u};

    const int m0 = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;  // last query tiles first: under a causal mask the longest
    const int bh = blockIdx.y;                              // batch * hq + query head
    const int kv_bh = kv_head(bh, hq, group);                 // its key / value head
    const int num_tiles = key_tiles(m0, BLOCK_M, BLOCK_N, sq, skv, causal);  // the key tiles this block walks

    if (threadIdx.x == 0) {
        mbarrier_init(smem.q_full(), 1);  // the producer's one arrive, plus Q's bytes
        init_ring_barriers<STAGES>(smem, CONSUMERS * 4);  // one arrive per consumer warp on empty[]; fences the inits
        tma_prefetch_descriptor(&tmap_q);
        tma_prefetch_descriptor(&tmap_k);
        tma_prefetch_descriptor(&tmap_v);
    }
    __syncthreads();  // the barriers are initialized before any thread waits or arrives

    const int warpgroup = threadIdx.x / WG_THREADS;
    if (warpgroup == 0) {
        // PRODUCER warpgroup: give registers away; one thread issues every copy, the other 127 are done.
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) producer<STAGES, D>(tmap_q, tmap_k, tmap_v, smem, bh, kv_bh, m0, num_tiles);
    } else {
        // CONSUMER warpgroups: take the registers; MAINLOOP then EPILOGUE over this block's query rows.
        setmaxnreg_inc<CONSUMER_REGS>();
        consumer<STAGES, D, IS_BF16, PINGPONG>(smem, O, warpgroup - 1, bh, m0, sq, skv, num_tiles, scale_log2, causal != 0);
    }
}
