"""Attention forward (suite.attention_problem) in Triton, the tutorial's form: a program owns BLOCK_M query rows of one
head, holds them in registers, and walks the keys in BLOCK_N blocks with an online softmax in fp32; the K / V blocks
are pipelined by ``tl.range(..., num_stages=STAGES)``, the depth this module sweeps.

Causal (bottom-right aligned: row i sees key j when j <= i + skv - sq): the key blocks every row of the program sees
in full run unmasked, the blocks across the diagonal run masked, and the blocks past the last row's diagonal are
skipped. GQA: query head h reads key / value head h // (hq / hkv).

With DESC, the same kernel reads Q, K, V and writes O through tensor descriptors instead of pointers
(suite.triton.attention_desc launches it so).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from suite.attention_problem import LOG2E, attention_operands, check_grid_limits, grid_limit_bad_inputs
from suite.checks import check_stages
from suite.kernel import TritonModule
from suite.problem_types import meta_tensor
from suite.problems import BadInput
from suite.triton._interp_dot import widen_bf16_dot
from suite.triton.compiled import kernel_info

STAGES = (1, 2, 3, 4)
BLOCK_M, BLOCK_N = 128, 64
NUM_WARPS = 8


@triton.jit
def key_range(pid_m, SQ, SKV, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """(lo, hi) of query block ``pid_m``: keys [0, lo) every row of the block sees (unmasked blocks), [lo, hi) the
    blocks to mask, none past hi. Causal, bottom-right aligned: row i sees key j when j <= i + skv - sq. (Gluon
    kernels call it too.)"""
    if CAUSAL:
        diagonal = SKV - SQ
        first_row = pid_m * BLOCK_M
        seen_by_all = tl.minimum(tl.maximum(first_row + diagonal + 1, 0), SKV)  # keys the block's first row sees
        lo = (seen_by_all // BLOCK_N) * BLOCK_N
        hi = tl.minimum(tl.maximum(first_row + BLOCK_M + diagonal, 0), SKV)  # keys the block's last row sees
    else:
        lo = (SKV // BLOCK_N) * BLOCK_N
        hi = SKV
    return lo, hi


@triton.jit
def _attend_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_src,  # K's pointers as (d x keys), or with DESC its descriptor
    v_src,  # V's pointers as (keys x d), or with DESC its descriptor
    kv_bh,  # the key / value head (DESC's first coordinate)
    rows,
    keys,
    lo,
    hi,
    SKV,
    DIAGONAL,  # skv - sq: row i sees key j when j <= i + DIAGONAL
    qk_scale,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    MASKED: tl.constexpr,  # mask keys past skv and (CAUSAL) past each row's diagonal
    CAUSAL: tl.constexpr,
    STAGES: tl.constexpr,
    DESC: tl.constexpr,
):
    # -- iterate over the key blocks in [lo, hi): num_stages decides how many K / V blocks are in flight --
    for start in tl.range(lo, hi, BLOCK_N, num_stages=STAGES):
        in_range = (start + keys) < SKV
        if DESC:  # a box past the head's last key is zero-filled
            k = k_src.load([kv_bh, start, 0]).reshape(BLOCK_N, HEAD_DIM).T
        else:
            k = tl.load(k_src + start * HEAD_DIM, mask=in_range[None, :], other=0.0)  # (HEAD_DIM, BLOCK_N)
        s = tl.dot(q, k)
        if MASKED:
            visible = in_range[None, :]
            if CAUSAL:
                visible = visible & ((start + keys)[None, :] <= rows[:, None] + DIAGONAL)
            s = tl.where(visible, s, float("-inf"))
        # -- online softmax: new running max, rescale what was summed so far --
        # the max is taken on the raw scores, then scaled into log2 units (the scale is positive, so they commute),
        # and P = exp2(s * qk_scale - max) is one FMA per score: exp2(s * qk_scale) = exp(q.k * scale)
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp2 gives 0, never NaN
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(tl.fma(s, qk_scale, -m_ref[:, None]))
        l_i = l_i * alpha + tl.sum(p, 1)
        if DESC:
            v = v_src.load([kv_bh, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            v = tl.load(v_src + start * HEAD_DIM, mask=in_range[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_fwd_kernel(
    # pointers, or with DESC descriptors over (b * heads, seq, d) boxed [1, BLOCK_M or BLOCK_N, d]
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    # sizes
    HQ,
    GROUP,  # query heads per key / value head
    SQ,
    SKV,
    # the softmax scale times log2(e)
    qk_scale,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    STAGES: tl.constexpr,
    DESC: tl.constexpr = False,
):
    # -- map the program id to BLOCK_M query rows of one (batch, query head) --
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)  # batch * HQ + query head
    kv_bh = (pid_bh // HQ) * (HQ // GROUP) + (pid_bh % HQ) // GROUP  # its key / value head (GQA)
    # -- pointers: the Q block (rows x d), K blocks as (d x keys), V blocks as (keys x d); or descriptors --
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    keys = tl.arange(0, BLOCK_N)
    if DESC:
        q = q_ptr.load([pid_bh, pid_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        k_src = k_ptr
        v_src = v_ptr
    else:
        q_base = q_ptr + pid_bh.to(tl.int64) * SQ * HEAD_DIM
        kv_off = kv_bh.to(tl.int64) * SKV * HEAD_DIM
        q = tl.load(q_base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < SQ, other=0.0)
        k_src = k_ptr + kv_off + keys[None, :] * HEAD_DIM + dims[:, None]
        v_src = v_ptr + kv_off + keys[:, None] * HEAD_DIM + dims[None, :]

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)

    # -- the key blocks: [0, lo) unmasked (every row sees every key), [lo, hi) masked, past hi skipped --
    diagonal = SKV - SQ
    lo, hi = key_range(pid_m, SQ, SKV, BLOCK_M, BLOCK_N, CAUSAL)
    acc, l_i, m_i = _attend_blocks(
        acc, l_i, m_i, q, k_src, v_src, kv_bh, rows, keys, 0, lo, SKV, diagonal, qk_scale, BLOCK_N, HEAD_DIM, False,
        CAUSAL, STAGES, DESC,
    )  # fmt: skip
    acc, l_i, m_i = _attend_blocks(
        acc, l_i, m_i, q, k_src, v_src, kv_bh, rows, keys, lo, hi, SKV, diagonal, qk_scale, BLOCK_N, HEAD_DIM, True,
        CAUSAL, STAGES, DESC,
    )  # fmt: skip

    # -- write back: O = acc / l, one reciprocal per row; a fully masked row (l = 0) is zero --
    out = acc * (1.0 / tl.where(l_i == 0.0, 1.0, l_i))[:, None]
    if DESC:  # rows past sq are clipped by the store
        o_ptr.store([pid_bh, pid_m * BLOCK_M, 0], out.to(o_ptr.dtype).reshape(1, BLOCK_M, HEAD_DIM))
    else:
        o_base = o_ptr + pid_bh.to(tl.int64) * SQ * HEAD_DIM
        tl.store(
            o_base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < SQ
        )


class Attention:
    """The tutorial kernel at ``stages``: ``Attention((q, k, v, causal), out, 3)()`` writes out. A subclass with
    ``desc`` set hands the kernel descriptors (``operands``) instead of the tensors."""

    desc = False
    how = ""  # what the row's config adds

    def __init__(self, inputs, out: torch.Tensor, stages: int):
        check_stages(stages, STAGES)
        ops = check_grid_limits(attention_operands(inputs, out), BLOCK_M)
        if not self.desc and max(ops.sq, ops.skv) * ops.d >= 2**31:
            raise ValueError(
                "sq * d and skv * d must be < 2^31 for the pointer kernel (32-bit offsets within a head; "
                f"got sq={ops.sq}, skv={ops.skv}, d={ops.d})"
            )
        widen_bf16_dot()  # the interpreter's bf16 tl.dot (interpreter only; nothing otherwise)
        self.ops, self.stages = ops, stages
        self.grid = (triton.cdiv(ops.sq, BLOCK_M), ops.b * ops.hq)
        self.config = (
            f"{BLOCK_M}x{BLOCK_N} blocks, d={ops.d}, num_warps={NUM_WARPS}, tl.range(num_stages={stages})" + self.how
        )
        self.info = kernel_info(None, BLOCK_N * ops.d * 2 * 2, self.config, self.grid[0] * self.grid[1])
        self._compiled = False

    def __call__(self) -> None:
        o = self.ops
        compiled = attention_fwd_kernel[self.grid](
            *self.operands(), o.hq, o.group, o.sq, o.skv, o.scale * LOG2E,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=o.d, CAUSAL=o.causal, STAGES=self.stages, DESC=self.desc,
            num_warps=NUM_WARPS, num_stages=self.stages,
        )  # fmt: skip
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid[0] * self.grid[1])

    def operands(self) -> tuple:
        """What the kernel takes for Q, K, V and O."""
        return (self.ops.q, self.ops.k, self.ops.v, self.ops.out)


class TutorialAttention(TritonModule):
    """attention_fwd_kernel, swept over the K / V pipeline depth (tl.range's and the launch's num_stages)."""

    depth_is_num_stages = True
    stages = STAGES
    dtypes = ("bf16", "fp16")
    # compute-sanitizer: odd lengths under a causal mask with GQA (masked loads and stores, fully masked rows), and
    # enough key blocks for the pipeline to wrap
    sanitize_sizes = ((1, 4, 1, 130, 45, 128, 1), (1, 4, 2, 200, 700, 64, 1))

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("attention_fwd_kernel",)

    def bad_inputs(self) -> list[BadInput]:
        q, kv = (1, 1, 2**24 + 1, 128), (1, 1, 64, 128)
        inputs = (meta_tensor(*q), meta_tensor(*kv), meta_tensor(*kv), False)
        past_int32 = BadInput(inputs, meta_tensor(*q), r"sq \* d and skv \* d", "sq*d past 2^31")
        return [*grid_limit_bad_inputs(), past_int32]

    def launch(self, inputs, out, stages):
        return Attention(inputs, out, stages)


KERNEL = TutorialAttention()
