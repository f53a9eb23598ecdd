"""Test-only variants of designs the suite's own kernels do not have (tests/test_contract.py loads them): each follows
docs/adding-a-variant.md, and the registry-wide tests must pass them with no edit, whatever their design.

    python -m pytest tests/test_variants.py tests/test_registry.py --suite-plugin tests/plugins/unusual_variants.py \
        -k unusual

* ``ptx:unusual registers`` (vector): no shared memory and no asynchronous copy. unusual_variants.cu's
  ``unusual_registers<S>``, S 16-byte loads in flight per thread in registers (inline-PTX ``ld.global.nc.v4``), swept
  over S = 1, 2, 4. A headline row (no group) with several stage counts.
* ``ptx:unusual staged`` (vector): one stage, and shared memory filled without an asynchronous copy (plain loads and
  ``st.shared``; threads read back chunks other threads wrote).
* ``triton:unusual one stage`` (gemm): a Triton GEMM with one stage (``num_stages=1``, a plain loop) that implements
  fp16 only: the problem's other dtypes get a row saying so (runs in the interpreter on a CPU).

Importing this module registers the three variants (as any plugin does) and compiles nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import triton
import triton.language as tl

from suite.checks import check_cuda, check_stages, check_vector_operands, gemm_operands
from suite.kernel import NvrtcModule, TritonModule
from suite.nvrtc import loader
from suite.registry import gpu_or_interpreter, needs_gpu, register_kernel

SOURCE = Path(__file__).with_name("unusual_variants.cu")
THREADS = 256
CHUNK_BYTES = 16
MAX_BLOCKS_PER_SM = 8  # grid-stride: at most this many blocks per SM, each loops over the rest


class _Scale2(NvrtcModule):
    """What both .cu kernels share: y = 2 * x, fp32, THREADS threads, a grid-stride loop over ``chunks_per_block``
    16-byte chunks per block and round."""

    source = SOURCE
    threads = THREADS
    sanitize_sizes = (3 * THREADS * 4 + 5,)  # several rounds and a ragged tail

    def constants(self):
        return {"UNUSUAL_THREADS": self.threads}

    def chunks_per_block(self, stages: int) -> int:
        raise NotImplementedError

    def launch(self, inputs, out, stages):
        (x,) = inputs
        check_stages(stages, self.stages)
        check_vector_operands(x, out)
        check_cuda(("x", x), ("y", out))
        module = self.build()
        expr = self.name_expressions(stages)[0]
        kernel = module.kernel(expr)
        per_block = self.chunks_per_block(stages)
        grid = max(1, min(-(-(x.numel() // 4) // per_block), MAX_BLOCKS_PER_SM * loader.num_sms()))
        smem = stages * self.stage_bytes
        args = (x.data_ptr(), out.data_ptr(), np.int64(x.numel()))
        loader.prepare(kernel, smem)

        def run():
            loader.launch(kernel, grid, self.threads, smem, *args)

        run.info = module.kernel_info(
            expr, self.stage_bytes, stages, threads=self.threads, grid=grid, config=self.config()
        )
        return run


class Registers(_Scale2):
    stages = (1, 2, 4)
    stage_bytes = 0  # no shared memory: the stages are registers
    sass_requires = ("vector_load", "vector_store")  # LDG.E.128 (.CONSTANT) and STG.E.128; no LDGSTS, no UBLKCP

    def name_expressions(self, stages):
        return (f"unusual_registers<{stages}>",)

    def chunks_per_block(self, stages):
        return self.threads * stages

    def config(self):
        return f"{self.threads} threads, S float4 loads in flight per thread, in registers"


class Staged(_Scale2):
    stages = (1,)
    stage_bytes = THREADS * CHUNK_BYTES  # one tile of THREADS chunks
    sass_requires = ("vector_load", "vector_store")  # plain loads into shared memory: no LDGSTS, no UBLKCP

    def name_expressions(self, stages):
        return (f"unusual_staged<{self.threads}>",)

    def chunks_per_block(self, stages):
        return self.threads

    def config(self):
        return f"{self.threads} threads, one {self.stage_bytes} B shared-memory tile filled by plain loads"


register_kernel(
    "vector",
    "ptx",
    "unusual registers",
    Registers(),
    gate=needs_gpu((8, 0)),
    description="test-only: no shared memory, no async copy; S float4 loads in flight per thread (inline PTX)",
)
register_kernel(
    "vector",
    "ptx",
    "unusual staged",
    Staged(),
    gate=needs_gpu((8, 0)),
    description="test-only: one stage; a shared-memory tile filled by plain loads and st.shared (no async copy)",
)

# ---------------------------------------------------------------------------------------------------------------
# triton:unusual one stage (gemm)
# ---------------------------------------------------------------------------------------------------------------


@triton.jit
def _gemm_one_stage(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):  # a plain loop: nothing is pipelined
        ks = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rm[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
        acc.to(tl.float16),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


class OneStageGemm(TritonModule):
    stages = (1,)
    block_m, block_n, block_k = 32, 32, 16

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        ops = gemm_operands(tuple(inputs), out, ("fp16",))
        a, b, c = ops.a, ops.b, ops.c
        grid = (triton.cdiv(ops.m, self.block_m), triton.cdiv(ops.n, self.block_n))
        return lambda: _gemm_one_stage[grid](
            a,
            b,
            c,
            ops.m,
            ops.n,
            ops.k,
            *a.stride(),
            *b.stride(),
            *c.stride(),
            BLOCK_M=self.block_m,
            BLOCK_N=self.block_n,
            BLOCK_K=self.block_k,
            num_stages=1,
        )


register_kernel(
    "gemm",
    "triton",
    "unusual one stage",
    OneStageGemm(),
    gate=gpu_or_interpreter,
    description="test-only: 32x32x16 tiles, one stage (a plain K loop), fp16 only",
)
