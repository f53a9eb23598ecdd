"""Attention forward (suite.attention_problem) with the cp.async + ldmatrix + mma.sync pipeline of ``attention.cu``:
64 query rows per block of 4 warps, Q in registers, 64-key K / V tiles through a STAGES-deep cp.async ring, the
online softmax in registers."""

from __future__ import annotations

from pathlib import Path

from suite.attention_problem import cuda_launch_operands
from suite.checks import check_stages
from suite.kernel import Fault, NvrtcModule
from suite.nvrtc import loader

SOURCE = Path(__file__).with_name("attention.cu")
STAGES = (1, 2, 3, 4)
BLOCK_M, BLOCK_N, THREADS = 64, 64, 128
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "fp16")
FAULT_SIZE = (1, 2, 1, 64, 512, 64, 0)  # one 64-row query tile per head against 8 key tiles


def tile_bytes(d: int) -> int:
    return BLOCK_N * d * 2


def stage_bytes(d: int) -> int:
    """One ring stage: a K tile and a V tile of 64 rows."""
    return 2 * tile_bytes(d)


def smem_bytes(stages: int, d: int) -> int:
    """The Q tile, then the ring."""
    return tile_bytes(d) + stages * stage_bytes(d)


def name_expression(stages: int, d: int, dtype: str) -> str:
    return f"attention_fwd<{stages}, {d}, {'true' if dtype == 'bf16' else 'false'}>"


class AttentionMmaSync(NvrtcModule):
    """attention.cu compiled for each stage count, head_dim and dtype."""

    source = SOURCE
    threads = THREADS
    stages = STAGES
    stage_bytes = stage_bytes(128)  # the d = 128 build's (the one ``describe`` reports first)
    dtypes = DTYPES
    # cp.async, ldmatrix (Q once, K and V per tile), mma.sync: per 64-key tile 8 x D/16 for S and 8 x D/16 for P V
    sass_requires = {"async_copy": 1, "ldmatrix": 1, "mma": 2 * 8 * 64 // 16}
    # odd lengths, a causal mask with fully masked rows and GQA, d = 128; a long non-causal row so the ring wraps
    sanitize_sizes = ((1, 4, 1, 130, 45, 128, 1), (1, 2, 1, 70, 600, 64, 0))
    # each launched where every block walks 8 key tiles, so that every stage is refilled while the ring runs
    faults = (
        Fault(
            "STAGES = 1: the barrier before the stage is refilled removed",
            "PIPESUITE_FAULT_NO_REUSE_BARRIER",
            (1,),
            size=FAULT_SIZE,
        ),
        Fault(
            "STAGES >= 2: the cp.async wait before a stage is read removed (its copies may not have landed)",
            "PIPESUITE_FAULT_NO_WAIT",
            (2,),
            size=FAULT_SIZE,
        ),
        Fault(
            "STAGES >= 2: the ring's barrier removed (a stage exposed before every thread's copies landed, and "
            "refilled while warps may still read it)",
            "PIPESUITE_FAULT_NO_RING_BARRIER",
            (2,),
            size=FAULT_SIZE,
        ),
    )

    def constants(self) -> dict[str, int]:
        return {"ATTN_BLOCK_M": BLOCK_M, "ATTN_BLOCK_N": BLOCK_N, "ATTN_THREADS": THREADS}

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return tuple(name_expression(stages, d, dtype) for d in (128, 64) for dtype in self.dtypes)

    def config(self, d: int = 128) -> str:
        return f"{BLOCK_M} query rows x {BLOCK_N}-key tiles, d={d}, 4 warps of 16 rows, Q in registers"

    def describe(self, arch: str, dtype: str = "bf16") -> dict:
        built = self.build(arch)
        return {
            s: built.kernel_info(
                name_expression(s, 128, dtype),
                stage_bytes(128),
                s,
                dynamic_smem=smem_bytes(s, 128),
                threads=THREADS,
                config=f"{arch} cubin; {self.config()}",
            )
            for s in self.stages
        }

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        ops = cuda_launch_operands(inputs, out, self.dtypes, BLOCK_M)
        module = self.build()
        expr = name_expression(stages, ops.d, ops.dtype)
        kernel = module.kernel(expr)
        smem = smem_bytes(stages, ops.d)
        occupancy = loader.occupancy(kernel, THREADS, smem)  # refuses a ring this GPU cannot hold
        if occupancy < 1:
            raise ValueError(f"stages={stages}: a block ({smem} B of shared memory) does not fit on an SM")
        grid = (-(-ops.sq // BLOCK_M), ops.b * ops.hq)
        args = (ops.q.data_ptr(), ops.k.data_ptr(), ops.v.data_ptr(), out.data_ptr(), *ops.kernel_scalars())

        def run():
            loader.launch(kernel, grid, THREADS, smem, *args)

        run.info = module.kernel_info(
            expr,
            stage_bytes(ops.d),
            stages,
            dynamic_smem=smem,
            occupancy=occupancy,
            threads=THREADS,
            grid=grid[0] * grid[1],
            config=self.config(ops.d) + f", {ops.dtype}",
        )
        return run


KERNEL = AttentionMmaSync()
