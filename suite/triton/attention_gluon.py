"""Attention forward (suite.attention_problem) in Gluon, Triton's lower-level language (``triton.experimental.gluon``):
FlashAttention-3's warp-specialized form on Hopper, written with Triton's compiler doing registers, layouts and
instruction selection, and the programmer doing what ``tl.range(num_stages=...)`` leaves to the pipeliner: the K / V
ring in shared memory, its mbarriers and the warp roles.

A program owns BLOCK_M = 128 query rows of one (batch, query head) and walks its keys in BLOCK_N = 128 blocks:

* the **producer** partition (1 warp, few registers) loads Q once, then K and V blocks into a STAGES-deep ring by TMA,
  each stage with its own *ready* and *empty* mbarrier for K and for V (so that Q Kᵀ starts before V has landed, and
  K's half of a stage goes back as soon as Q Kᵀ has read it);
* two **consumer** partitions, one warpgroup (4 warps) of 64 query rows each, run per key block: S = Q Kᵀ on
  ``warpgroup_mma`` from shared memory, the online softmax in fp32 registers (exp2 of log2-scaled scores), P converted
  to wgmma's register A operand, O += P V on ``warpgroup_mma``; then O / l stored from registers (rows past sq
  masked). Each releases a stage's K and V by its own arrival (the empty barriers count two). One partition of both
  warpgroups would not do: Gluon arrives on an mbarrier from one thread after a barrier of the whole partition, which
  would hold the two warpgroups in step at every release.

Three mainloops (MAINLOOP): SERIAL, where the two warpgroups meet only through the ring (one may run up to STAGES
blocks ahead of the other) and one's softmax runs while the other's wgmma do, as the warp schedulers interleave them
(the serial form of suite/ptx/attention_sm90.cu); OVERLAP, which also issues the next block's S before this block's
softmax; PINGPONG, FlashAttention-3's ping-pong (the PTX ping-pong form's order, by mbarriers rather than named
barriers): each warpgroup issues its wgmma only on its turn and hands the turn to the other once they are issued, so
that the tensor pipe alternates between the two and each softmax runs under the other's matrix products.

Operands as 3-D views, (batch x heads, seq, head_dim), boxed one head's rows at a time: the TMA unit zero-fills a
box's rows past the head's sq or skv, so no block reads another head's rows (whose non-finite values would reach this
head's output through P = 0 times V). Causal (bottom-right) and GQA as in suite.triton.attention.

Needs a GPU of compute capability 9.0 (wgmma); the Triton interpreter does not run Gluon."""

from __future__ import annotations

from typing import ClassVar

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from suite.attention_problem import LOG2E, attention_operands, check_grid_limits, grid_limit_bad_inputs
from suite.checks import check_stages
from suite.kernel import TritonModule
from suite.problems import BadInput
from suite.triton.attention import key_range
from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import HOPPER_SASS
from suite.triton.gemm_gluon_ring import next_stage, tma_load

BLOCK_M, BLOCK_N = 128, 128
# the Gluon GEMM's blind spot (suite.triton.gemm_gluon), from the same compiler-generated warp-specialization code
RACECHECK_BLIND = (
    "racecheck flags Triton's warp-specialization dispatch word (compiler-generated entry/exit stores vs the worker "
    "warps' loads), as in the Gluon GEMM, not this kernel's ring (docs/sanitizer.md)"
)
CONSUMERS, NUM_WARPS = 2, 4  # consumer partitions, one warpgroup (4 warps) of BLOCK_M / 2 query rows each
CONSUMER_REGS = 240  # the second consumer's registers (the first, the default partition, gets what is left)
PRODUCER_WARPS, PRODUCER_REGS = 1, 24  # the producer only computes coordinates
# Q + STAGES x (K + V), 32 KiB each at d = 128: 3 stages fill 224 of the 227 KiB a block may have
STAGES = (1, 2, 3)
# the consumers' mainloops (the kernel's MAINLOOP): _attend_blocks (SERIAL), _attend_ahead (OVERLAP, PINGPONG)
SERIAL, OVERLAP, PINGPONG = gl.constexpr(0), gl.constexpr(1), gl.constexpr(2)
MAINLOOP_NOTES = {
    0: "serial wgmma",
    1: "the next block's S = Q K^T issued under this block's softmax",
    2: "ping-pong: each consumer issues O += P V and the next S on its turn, under the other's softmax",
}
GL_DTYPES = {"fp16": gl.float16, "bf16": gl.bfloat16}


@gluon.jit
def _box(buffers, i, desc):
    """Buffer ``i`` of ``buffers`` (2-D, [rows, d]) as the TMA destination of ``desc``'s box ([1, rows, d]: one
    head's rows); the leading unit dimension changes no byte of the swizzled layout."""
    return buffers.index(i).reshape(desc.block_type.shape)


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, q_ready, ring, HQ, GROUP, SQ, SKV, CAUSAL: gl.constexpr):
    """The producer partition: Q once, then every K / V block of [0, hi) into the ring, bounded only by the ring."""
    k_ring, v_ring, k_ready, v_ready, k_empty, v_empty = ring
    WG_ROWS: gl.constexpr = q_desc.block_type.shape[1]
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = CONSUMERS * WG_ROWS
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    STAGES: gl.constexpr = k_ring.type.shape[0]
    pid_m = gl.program_id(0)
    pid_bh = gl.program_id(1)
    kv_bh = (pid_bh // HQ) * (HQ // GROUP) + (pid_bh % HQ) // GROUP  # the key / value head (GQA)
    mbarrier.expect(q_ready, CONSUMERS * q_desc.block_type.nbytes)  # each consumer's rows of Q, one box each
    for wg in gl.static_range(CONSUMERS):
        tma_load(q_desc, [pid_bh, pid_m * BLOCK_M + wg * WG_ROWS, 0], q_ready, _box(q_smem, wg, q_desc))
    _, hi = key_range(pid_m, SQ, SKV, BLOCK_M, BLOCK_N, CAUSAL)
    smem_write_stage = 0
    lap = 0
    for start in range(0, hi, BLOCK_N):
        # wait until both consumers released K's half of this stage (Q Kᵀ of its previous lap has read it); on the
        # first lap the parity of the phase before the barrier's first one passes at once
        mbarrier.wait(k_empty.index(smem_write_stage), lap ^ 1)
        mbarrier.expect(k_ready.index(smem_write_stage), k_desc.block_type.nbytes)
        tma_load(k_desc, [kv_bh, start, 0], k_ready.index(smem_write_stage), _box(k_ring, smem_write_stage, k_desc))
        # the same for V's half (P V of its previous lap has read it)
        mbarrier.wait(v_empty.index(smem_write_stage), lap ^ 1)
        mbarrier.expect(v_ready.index(smem_write_stage), v_desc.block_type.nbytes)
        tma_load(v_desc, [kv_bh, start, 0], v_ready.index(smem_write_stage), _box(v_ring, smem_write_stage, v_desc))
        smem_write_stage, lap = next_stage(smem_write_stage, lap, STAGES)


@gluon.jit
def _softmax_step(s, m_i, l_i, start, rows, keys, SKV, DIAGONAL, qk_scale, MASKED: gl.constexpr, CAUSAL: gl.constexpr):
    """One key block's online softmax on its scores ``s`` (fp32, the wgmma accumulator): returns P (unnormalized), the
    factor alpha that rescales what was summed so far, the new running max and the new row sums. MASKED: keys past
    skv and (CAUSAL) past each row's diagonal (DIAGONAL = skv - sq: row i sees key j when j <= i + DIAGONAL) score
    -inf."""
    if MASKED:
        visible = gl.expand_dims(start + keys < SKV, 0)
        if CAUSAL:
            visible = visible & (gl.expand_dims(start + keys, 0) <= gl.expand_dims(rows, 1) + DIAGONAL)
        s = gl.where(visible, s, float("-inf"))
    # the max is taken on the raw scores, then scaled into log2 units (the scale is positive, so they commute), and
    # P = exp2(s * qk_scale - max) is one FMA per score: exp2(s * qk_scale) = exp(q.k * scale)
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    m_ref = gl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp2 gives 0, never NaN
    alpha = gl.exp2(m_i - m_ref)
    p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_ref, 1)))
    return p, alpha, m_new, l_i * alpha + gl.sum(p, 1)


@gluon.jit
def _issue_s(q_smem, k_ring, stage, s_layout: gl.constexpr):
    """S = Q Kᵀ of the K block in ``stage``, issued on the tensor pipe (asynchronous: wait on the result)."""
    BLOCK_M: gl.constexpr = q_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_ring.type.shape[1]
    zeros = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    return warpgroup_mma(q_smem, k_ring.index(stage).permute((1, 0)), zeros, use_acc=False, is_async=True)


@gluon.jit
def _block_softmax(
    acc, s, m_i, l_i, start, lo, rows, keys, SKV, DIAGONAL, qk_scale, p_dtype: gl.constexpr, CAUSAL: gl.constexpr
):
    """The key block at ``start``'s softmax (masked from ``lo`` on), O rescaled, and P as wgmma's register A
    operand; returns (acc, P, m_i, l_i)."""
    o_layout: gl.constexpr = acc.type.layout
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    if start >= lo:
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, start, rows, keys, SKV, DIAGONAL, qk_scale, True, CAUSAL)
    else:
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, start, rows, keys, SKV, DIAGONAL, qk_scale, False, CAUSAL)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    return acc, gl.convert_layout(p.to(p_dtype), p_layout), m_i, l_i


@gluon.jit
def _drain(acc, s_next, ring, smem_read_stage, next_read_stage, HAS_NEXT: gl.constexpr):
    """Wait for O += P V and (HAS_NEXT) the next block's S, then give their V and K back to the producer. (Leaving
    P V in flight into the next block, as FlashAttention-3 does, makes ptxas serialize every wgmma of the kernel
    (C7514): it does not see that the next softmax reads only a completed group's registers.) Returns (acc, the
    next block's S, or ``s_next`` as given without HAS_NEXT)."""
    k_empty, v_empty = ring[4], ring[5]
    if HAS_NEXT:
        acc, s_next = warpgroup_mma_wait(0, deps=(acc, s_next))
        mbarrier.arrive(k_empty.index(next_read_stage))
    else:
        acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(v_empty.index(smem_read_stage))
    return acc, s_next


@gluon.jit
def _attend_blocks(
    acc,
    l_i,
    m_i,
    q_smem,
    ring,
    smem_read_stage,
    lap,
    lo,
    hi,
    rows,
    keys,
    SKV,
    DIAGONAL,  # skv - sq: row i sees key j when j <= i + DIAGONAL
    qk_scale,
    MASKED: gl.constexpr,  # mask keys past skv and (CAUSAL) past each row's diagonal
    CAUSAL: gl.constexpr,
    s_layout: gl.constexpr,
    o_layout: gl.constexpr,
):
    """The consumer's MAINLOOP over the key blocks in [lo, hi); returns the softmax state and the ring position."""
    k_ring, v_ring, k_ready, v_ready, k_empty, v_empty = ring
    BLOCK_N: gl.constexpr = k_ring.type.shape[1]
    STAGES: gl.constexpr = k_ring.type.shape[0]
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    for start in range(lo, hi, BLOCK_N):
        # wait for this stage's K bytes (its ready barrier's phase for this lap)
        mbarrier.wait(k_ready.index(smem_read_stage), lap)
        s = _issue_s(q_smem, k_ring, smem_read_stage, s_layout)
        # wait for S: the wgmma that read K has completed, so K's half of the stage goes back to the producer
        s = warpgroup_mma_wait(0, deps=(s,))
        mbarrier.arrive(k_empty.index(smem_read_stage))
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, start, rows, keys, SKV, DIAGONAL, qk_scale, MASKED, CAUSAL)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p_op = gl.convert_layout(p.to(k_ring.dtype), p_layout)
        # wait for this stage's V bytes
        mbarrier.wait(v_ready.index(smem_read_stage), lap)
        acc = warpgroup_mma(p_op, v_ring.index(smem_read_stage), acc, is_async=True)
        # wait for O += P V: it has read V, whose half of the stage goes back to the producer
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(v_empty.index(smem_read_stage))
        smem_read_stage, lap = next_stage(smem_read_stage, lap, STAGES)
    return acc, l_i, m_i, smem_read_stage, lap


@gluon.jit
def _take_turn(turn, turn_phase, WG: gl.constexpr):
    """Wait for this warpgroup's turn at the tensor pipe (the other warpgroup has issued its wgmma); returns the
    parity of its next turn."""
    mbarrier.wait(turn.index(WG), turn_phase)
    return turn_phase ^ 1


@gluon.jit
def _ahead_step(
    acc,
    l_i,
    m_i,
    s,  # this block's scores (complete)
    q_smem,
    ring,
    turn,
    turn_phase,
    j,
    lo,
    smem_read_stage,
    lap,
    rows,
    keys,
    SKV,
    DIAGONAL,
    qk_scale,
    WG: gl.constexpr,
    PINGPONG: gl.constexpr,
    HAS_NEXT: gl.constexpr,
    CAUSAL: gl.constexpr,
    s_layout: gl.constexpr,
):
    """Key block ``j`` of _attend_ahead. Overlapped: the next block's S issued, then this block's softmax, then
    O += P V. PINGPONG: this block's softmax, then (on this warpgroup's turn) O += P V and the next block's S issued
    back to back and the turn handed over. Both wait for both. Returns the softmax state, the next block's scores
    (HAS_NEXT: complete), the ring position after this block and the parity of the next turn."""
    k_ring, v_ring, k_ready, v_ready, k_empty, v_empty = ring
    BLOCK_N: gl.constexpr = k_ring.type.shape[1]
    STAGES: gl.constexpr = k_ring.type.shape[0]
    start = j * BLOCK_N
    next_read_stage, next_lap = next_stage(smem_read_stage, lap, STAGES)
    s_next = s
    if not PINGPONG:
        if HAS_NEXT:
            # wait for the next block's K bytes, then issue its S: it runs on the tensor pipe under this softmax
            mbarrier.wait(k_ready.index(next_read_stage), next_lap)
            s_next = _issue_s(q_smem, k_ring, next_read_stage, s_layout)
    # overlapped: O is rescaled while the next block's S is in flight (the last O += P V completed at its block's
    # end); PINGPONG: the softmax runs while the other warpgroup's wgmma, issued on its turn, keep the pipe busy
    acc, p_op, m_i, l_i = _block_softmax(acc, s, m_i, l_i, start, lo, rows, keys, SKV, DIAGONAL, qk_scale,
                                         k_ring.dtype, CAUSAL)  # fmt: skip
    # wait for this stage's V bytes (PINGPONG: and the next stage's K bytes, so that the turn is held only while
    # issuing)
    mbarrier.wait(v_ready.index(smem_read_stage), lap)
    if PINGPONG:
        if HAS_NEXT:
            mbarrier.wait(k_ready.index(next_read_stage), next_lap)
        turn_phase = _take_turn(turn, turn_phase, WG)
    acc = warpgroup_mma(p_op, v_ring.index(smem_read_stage), acc, is_async=True)
    if PINGPONG:
        if HAS_NEXT:
            s_next = _issue_s(q_smem, k_ring, next_read_stage, s_layout)
        # both issued: the other warpgroup may issue its own, which queue behind these on the tensor pipe
        mbarrier.arrive(turn.index(1 - WG))
    acc, s = _drain(acc, s_next, ring, smem_read_stage, next_read_stage, HAS_NEXT)
    return acc, l_i, m_i, s, next_read_stage, next_lap, turn_phase


@gluon.jit
def _attend_ahead(acc, l_i, m_i, q_smem, ring, turn, lo, hi, rows, keys, SKV, DIAGONAL, qk_scale, WG: gl.constexpr,
                  PINGPONG: gl.constexpr, CAUSAL: gl.constexpr, s_layout: gl.constexpr):  # fmt: skip
    """The consumer's MAINLOOP with the next block's S = Q Kᵀ issued ahead, over the key blocks in [0, hi) (masked
    from lo on); each block's O += P V completes within the block.
    - Overlapped (half of FlashAttention-3's intra-warpgroup overlap): the next S is issued before this block's
      softmax, so the tensor pipe computes it while the warpgroup computes exponentials.
    - PINGPONG (FlashAttention-3's ping-pong between the two consumer warpgroups): each issues its wgmma (O += P V of
      one block and S of the next, back to back) only on its turn and hands the turn over once they are issued, so
      the tensor pipe runs one warpgroup's matrix products while the other computes its softmax. Both walk the same
      blocks, so they take the same number of turns. The turn mbarriers count one arrival: warpgroup 0's first wait
      passes at once (the parity of the phase before the first), warpgroup 1's waits for warpgroup 0's first
      hand-over."""
    k_ring, k_ready, k_empty = ring[0], ring[2], ring[4]
    BLOCK_N: gl.constexpr = k_ring.type.shape[1]
    blocks = gl.cdiv(hi, BLOCK_N)
    turn_phase = 1 - WG
    if blocks > 0:
        # -- PROLOGUE: the first block's S (its K bytes in first; PINGPONG: issued on this warpgroup's turn) --
        mbarrier.wait(k_ready.index(0), 0)
        if PINGPONG:
            turn_phase = _take_turn(turn, turn_phase, WG)
        s = _issue_s(q_smem, k_ring, 0, s_layout)
        if PINGPONG:
            mbarrier.arrive(turn.index(1 - WG))
        # wait for S: the wgmma that read K has completed, so K's half of the stage goes back to the producer
        s = warpgroup_mma_wait(0, deps=(s,))
        mbarrier.arrive(k_empty.index(0))
        smem_read_stage = 0
        lap = 0
        for j in range(blocks - 1):
            acc, l_i, m_i, s, smem_read_stage, lap, turn_phase = _ahead_step(
                acc, l_i, m_i, s, q_smem, ring, turn, turn_phase, j, lo, smem_read_stage, lap, rows, keys, SKV,
                DIAGONAL, qk_scale, WG, PINGPONG, True, CAUSAL, s_layout,
            )  # fmt: skip
        # -- the last block: no next S to issue --
        acc, l_i, m_i, s, smem_read_stage, lap, turn_phase = _ahead_step(
            acc, l_i, m_i, s, q_smem, ring, turn, turn_phase, blocks - 1, lo, smem_read_stage, lap, rows, keys, SKV,
            DIAGONAL, qk_scale, WG, PINGPONG, False, CAUSAL, s_layout,
        )  # fmt: skip
    return acc, l_i, m_i


@gluon.jit
def _consumer(
    o_ptr,
    q_smem,
    q_ready,
    ring,
    turn,
    SQ,
    SKV,
    qk_scale,
    CAUSAL: gl.constexpr,
    MAINLOOP: gl.constexpr,  # SERIAL, OVERLAP or PINGPONG
    WG: gl.constexpr,  # which consumer: rows WG * WG_ROWS .. of the program's BLOCK_M
    num_warps: gl.constexpr,
):
    """A consumer partition: WG_ROWS of the program's query rows on one warpgroup, against every key block the
    program walks (both consumers release every stage); O / l stored from registers."""
    k_ring = ring[0]
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    WG_ROWS: gl.constexpr = q_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[2]
    BLOCK_M: gl.constexpr = CONSUMERS * WG_ROWS
    BLOCK_N: gl.constexpr = k_ring.type.shape[1]
    q_rows = q_smem.index(WG)
    # wgmma's accumulator layouts: warps stacked along the query rows, one m64nNk16 instruction per warpgroup
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    pid_m = gl.program_id(0)
    pid_bh = gl.program_id(1)
    row0 = pid_m * BLOCK_M + WG * WG_ROWS
    rows = row0 + gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, s_layout))
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([WG_ROWS], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([WG_ROWS], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, o_layout)
    lo, hi = key_range(pid_m, SQ, SKV, BLOCK_M, BLOCK_N, CAUSAL)  # the program's blocks, as the producer's
    mbarrier.wait(q_ready, 0)  # Q's bytes, loaded once
    diagonal = SKV - SQ
    if MAINLOOP != SERIAL:
        acc, l_i, m_i = _attend_ahead(
            acc, l_i, m_i, q_rows, ring, turn, lo, hi, rows, keys, SKV, diagonal, qk_scale, WG, MAINLOOP == PINGPONG,
            CAUSAL, s_layout,
        )  # fmt: skip
    else:
        smem_read_stage = 0
        lap = 0
        acc, l_i, m_i, smem_read_stage, lap = _attend_blocks(
            acc, l_i, m_i, q_rows, ring, smem_read_stage, lap, 0, lo, rows, keys, SKV, diagonal, qk_scale, False,
            CAUSAL, s_layout, o_layout,
        )  # fmt: skip
        acc, l_i, m_i, smem_read_stage, lap = _attend_blocks(
            acc, l_i, m_i, q_rows, ring, smem_read_stage, lap, lo, hi, rows, keys, SKV, diagonal, qk_scale, True,
            CAUSAL, s_layout, o_layout,
        )  # fmt: skip
    # -- EPILOGUE: O = acc / l, one reciprocal per row (a fully masked row, l = 0, is zero), rows past sq not stored --
    inv_l = gl.convert_layout(1.0 / gl.where(l_i == 0.0, 1.0, l_i), gl.SliceLayout(1, o_layout))
    out = acc * gl.expand_dims(inv_l, 1)
    o_rows = row0 + gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, o_layout))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    offsets = (pid_bh.to(gl.int64) * SQ + gl.expand_dims(o_rows, 1)) * HEAD_DIM + gl.expand_dims(dims, 0)
    gl.store(o_ptr + offsets, out.to(o_ptr.dtype.element_ty), mask=gl.expand_dims(o_rows < SQ, 1))


@gluon.jit
def attention_gluon_kernel(
    q_desc,  # descriptors over (b x heads, seq, d), boxed [1, BLOCK_M / CONSUMERS or BLOCK_N, d]
    k_desc,
    v_desc,
    o_ptr,
    HQ,
    GROUP,  # query heads per key / value head
    SQ,
    SKV,
    qk_scale,  # the softmax scale times log2(e)
    CAUSAL: gl.constexpr,
    STAGES: gl.constexpr,
    MAINLOOP: gl.constexpr,  # SERIAL (_attend_blocks), OVERLAP or PINGPONG (_attend_ahead)
    CONSUMERS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    PRODUCER_WARPS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr,
    num_warps: gl.constexpr,  # one consumer partition's
):
    dtype: gl.constexpr = q_desc.dtype
    # 2-D buffers ([rows, d], as wgmma reads them) for the descriptors' [1, rows, d] boxes
    WG_ROWS: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[2]
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([WG_ROWS, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, WG_ROWS, HEAD_DIM], q_layout)
    k_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    # the consumers' turns at the tensor pipe (PINGPONG): turn[i] completed by the other consumer's hand-over
    turn = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=1)  # completed by the producer's expect and Q's TMA bytes
    for c in gl.static_range(CONSUMERS):
        mbarrier.init(turn.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)  # completed by the producer's expect and the TMA bytes
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=CONSUMERS)  # completed by each consumer partition's arrival
        mbarrier.init(v_empty.index(s), count=CONSUMERS)
    ring = (k_ring, v_ring, k_ready, v_ready, k_empty, v_empty)
    gl.warp_specialize(
        [
            (_consumer, (o_ptr, q_smem, q_ready, ring, turn, SQ, SKV, qk_scale, CAUSAL, MAINLOOP, 0, num_warps)),
            (_consumer, (o_ptr, q_smem, q_ready, ring, turn, SQ, SKV, qk_scale, CAUSAL, MAINLOOP, 1, num_warps)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, q_ready, ring, HQ, GROUP, SQ, SKV, CAUSAL)),
        ],
        [num_warps, PRODUCER_WARPS],
        [CONSUMER_REGS, PRODUCER_REGS],
    )
    mbarrier.invalidate(q_ready)
    for c in gl.static_range(CONSUMERS):
        mbarrier.invalidate(turn.index(c))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_empty.index(s))


def descriptor(t: torch.Tensor, rows: int, dtype: str) -> TensorDescriptor:
    """``t`` (b, heads, seq, d), contiguous, as the 3-D (b x heads, seq, d) boxed [1, rows, d], in the 128-byte
    swizzled shared layout wgmma reads: a box never crosses into the next head (rows past seq are zero-filled)."""
    b, h, s, d = t.shape
    layout = gl.NVMMASharedLayout.get_default_for([1, rows, d], GL_DTYPES[dtype])
    return TensorDescriptor(t.view(b * h, s, d), [b * h, s, d], [s * d, d, 1], [1, rows, d], layout)


class GluonAttention:
    """attention_gluon_kernel at ``stages`` (GPU of compute capability 9.0 only):
    ``GluonAttention((q, k, v, causal), out, 2)()`` writes out; ``mainloop``: SERIAL, OVERLAP (the next block's S
    issued before this block's softmax) or PINGPONG (the consumers' wgmma taking turns)."""

    def __init__(self, inputs, out: torch.Tensor, stages: int, mainloop: int = 0):
        check_stages(stages, STAGES)
        ops = check_grid_limits(attention_operands(inputs, out), BLOCK_M)
        self.ops, self.stages, self.mainloop = ops, stages, int(mainloop)
        self.descs = (
            descriptor(ops.q, BLOCK_M // CONSUMERS, ops.dtype),
            descriptor(ops.k, BLOCK_N, ops.dtype),
            descriptor(ops.v, BLOCK_N, ops.dtype),
        )
        self.grid = (triton.cdiv(ops.sq, BLOCK_M), ops.b * ops.hq)
        self.config = (
            f"{BLOCK_M}x{BLOCK_N} blocks, d={ops.d}, Gluon, {CONSUMERS} consumer warpgroups of {NUM_WARPS} warps + "
            f"{PRODUCER_WARPS} producer "
            f"warp ({PRODUCER_REGS} regs), {stages}-stage TMA ring of K and V (a ready and an empty mbarrier each), "
            + MAINLOOP_NOTES[self.mainloop]
        )
        self.info = kernel_info(None, BLOCK_N * ops.d * 2 * 2, self.config, self.grid[0] * self.grid[1])
        self._compiled = False

    def __call__(self) -> None:
        o = self.ops
        compiled = attention_gluon_kernel[self.grid](
            *self.descs, o.out, o.hq, o.group, o.sq, o.skv, o.scale * LOG2E,
            CAUSAL=o.causal, STAGES=self.stages, MAINLOOP=self.mainloop, CONSUMERS=CONSUMERS,
            CONSUMER_REGS=CONSUMER_REGS, PRODUCER_WARPS=PRODUCER_WARPS, PRODUCER_REGS=PRODUCER_REGS,
            num_warps=NUM_WARPS,
        )  # fmt: skip
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid[0] * self.grid[1])


class WarpSpecializedAttention(TritonModule):
    """attention_gluon_kernel as the kernel-module contract (suite.kernel) states it, swept over its ring depth;
    ``mainloop``: SERIAL, OVERLAP or PINGPONG."""

    def __init__(self, mainloop: int = 0):
        self.mainloop = int(mainloop)

    stages = STAGES
    dtypes = ("bf16", "fp16")
    sass_requires = HOPPER_SASS
    # compute-sanitizer: odd lengths under a causal mask with GQA (blocks past a head's keys, fully masked rows,
    # rows past sq), and enough key blocks for the ring to wrap
    sanitize_sizes = ((1, 4, 1, 130, 45, 128, 1), (1, 4, 2, 200, 900, 128, 1))
    sanitizer_blind_spots: ClassVar[dict[str, str]] = {"racecheck": RACECHECK_BLIND}

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("attention_gluon_kernel",)

    def bad_inputs(self) -> list[BadInput]:
        return grid_limit_bad_inputs()

    def launch(self, inputs, out, stages):
        return GluonAttention(inputs, out, stages, mainloop=self.mainloop)


KERNEL = WarpSpecializedAttention(SERIAL)
OVERLAPPED = WarpSpecializedAttention(OVERLAP)
PING_PONG = WarpSpecializedAttention(PINGPONG)
