"""Attention forward (suite.attention_problem) in Triton through tensor descriptors (TMA on Hopper): the tutorial
form of suite.triton.attention, with Q, K and V read and O written through descriptors built on the host, swept over
``num_stages`` (how many K / V blocks the pipeliner keeps in flight).

Each tensor is seen as 3-D, (batch x heads, seq, head_dim), and boxed [1, BLOCK, head_dim]: a box that runs past a
head's last row is zero-filled by the TMA unit on loads and clipped on stores, so a block never reads or writes the
next head's rows, and odd lengths need no masked loads (the scores of keys past skv are still masked to -inf, since a
zero key scores 0, not -inf). Causal (bottom-right) and GQA as in suite.triton.attention.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from suite.attention_problem import LOG2E, attention_operands
from suite.checks import check_stages
from suite.kernel import TritonModule
from suite.triton._compiled import kernel_info
from suite.triton._interp_dot import widen_bf16_dot
from suite.triton.gemm_desc import HOPPER_SASS

STAGES = (1, 2, 3, 4)
BLOCK_M, BLOCK_N = 128, 64
NUM_WARPS = 8


@triton.jit
def _attend_desc_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_desc,
    v_desc,
    kv_bh,
    rows,
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
):
    keys = tl.arange(0, BLOCK_N)
    for start in tl.range(lo, hi, BLOCK_N, num_stages=STAGES):
        k = k_desc.load([kv_bh, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        s = tl.dot(q, k.T) * qk_scale  # log2 units: exp2(s) = exp(q.k * scale)
        if MASKED:
            visible = ((start + keys) < SKV)[None, :]
            if CAUSAL:
                visible = visible & ((start + keys)[None, :] <= rows[:, None] + DIAGONAL)
            s = tl.where(visible, s, float("-inf"))
        # -- online softmax: new running max, rescale what was summed so far --
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp2 gives 0, never NaN
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(s - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_bh, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_desc_kernel(
    # descriptors over (b * heads, seq, head_dim), boxes [1, BLOCK_M or BLOCK_N, HEAD_DIM]
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    # sizes
    HQ,
    GROUP,  # query heads per key / value head
    SQ,
    SKV,
    qk_scale,  # the softmax scale times log2(e)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)  # batch * HQ + query head
    kv_bh = (pid_bh // HQ) * (HQ // GROUP) + (pid_bh % HQ) // GROUP  # its key / value head (GQA)
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([pid_bh, first_row, 0]).reshape(BLOCK_M, HEAD_DIM)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)

    # -- the key blocks: [0, lo) unmasked (every row sees every key), [lo, hi) masked, past hi skipped --
    diagonal = SKV - SQ
    if CAUSAL:
        seen_by_all = tl.minimum(tl.maximum(first_row + diagonal + 1, 0), SKV)  # keys the block's first row sees
        lo = (seen_by_all // BLOCK_N) * BLOCK_N
        hi = tl.minimum(tl.maximum(first_row + BLOCK_M + diagonal, 0), SKV)  # keys the block's last row sees
    else:
        lo = (SKV // BLOCK_N) * BLOCK_N
        hi = SKV
    acc, l_i, m_i = _attend_desc_blocks(
        acc, l_i, m_i, q, k_desc, v_desc, kv_bh, rows, 0, lo, SKV, diagonal, qk_scale, BLOCK_N, HEAD_DIM, False,
        CAUSAL, STAGES,
    )  # fmt: skip
    acc, l_i, m_i = _attend_desc_blocks(
        acc, l_i, m_i, q, k_desc, v_desc, kv_bh, rows, lo, hi, SKV, diagonal, qk_scale, BLOCK_N, HEAD_DIM, True,
        CAUSAL, STAGES,
    )  # fmt: skip

    # -- write back: O = acc / l (a fully masked row, l = 0, is zero); rows past sq are clipped by the store --
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_desc.store([pid_bh, first_row, 0], out.to(o_desc.dtype).reshape(1, BLOCK_M, HEAD_DIM))


def _descriptor(t: torch.Tensor, block: int) -> TensorDescriptor:
    """``t`` (b, heads, seq, d), contiguous, as (b * heads, seq, d) boxed [1, block, d]."""
    b, h, s, d = t.shape
    return TensorDescriptor(t.view(b * h, s, d), shape=[b * h, s, d], strides=[s * d, d, 1], block_shape=[1, block, d])


class DescAttention:
    """attention_desc_kernel at ``stages``: ``DescAttention((q, k, v, causal), out, 3)()`` writes out."""

    def __init__(self, inputs, out: torch.Tensor, stages: int):
        check_stages(stages, STAGES)
        ops = attention_operands(inputs, out)  # contiguous and 16-byte aligned: what a tensor map needs
        widen_bf16_dot()  # the interpreter's bf16 tl.dot (interpreter only; nothing otherwise)
        self.ops, self.stages = ops, stages
        self.descs = (
            _descriptor(ops.q, BLOCK_M),
            _descriptor(ops.k, BLOCK_N),
            _descriptor(ops.v, BLOCK_N),
            _descriptor(ops.out, BLOCK_M),
        )
        self.grid = (triton.cdiv(ops.sq, BLOCK_M), ops.b * ops.hq)
        self.config = (
            f"{BLOCK_M}x{BLOCK_N} blocks, d={ops.d}, num_warps={NUM_WARPS}, num_stages={stages}, "
            "Q / K / V / O through tensor descriptors built on the host"
        )
        self.info = kernel_info(None, BLOCK_N * ops.d * 2 * 2, self.config, self.grid[0] * self.grid[1])
        self._compiled = False

    def __call__(self) -> None:
        o = self.ops
        compiled = attention_desc_kernel[self.grid](
            *self.descs, o.hq, o.group, o.sq, o.skv, o.scale * LOG2E,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=o.d, CAUSAL=o.causal, STAGES=self.stages,
            num_warps=NUM_WARPS, num_stages=self.stages,
        )  # fmt: skip
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid[0] * self.grid[1])


class DescriptorAttention(TritonModule):
    """attention_desc_kernel, swept over the K / V pipeline depth (tl.range's and the launch's num_stages)."""

    depth_is_num_stages = True
    stages = STAGES
    dtypes = ("bf16", "fp16")
    sass_requires = HOPPER_SASS  # wgmma fed by TMA loads on mbarriers
    # compute-sanitizer: odd lengths under a causal mask with GQA (boxes past a head's rows, fully masked rows), and
    # enough key blocks for the pipeline to wrap
    sanitize_sizes = ((1, 4, 1, 130, 45, 128, 1), (1, 4, 2, 200, 700, 64, 1))

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("attention_desc_kernel",)

    def launch(self, inputs, out, stages):
        return DescAttention(inputs, out, stages)


KERNEL = DescriptorAttention()
