"""Attention forward (suite.attention_problem) with the cp.async + ldmatrix + mma.sync pipeline of ``attention.cu``:
64 query rows per block of 4 warps, Q in registers, 64-key K / V tiles through a STAGES-deep cp.async ring, the
online softmax in registers."""

from __future__ import annotations

from pathlib import Path

from suite.attention_problem import TORCH_DTYPES, cuda_launch_operands, grid_limit_bad_inputs
from suite.checks import check_stages
from suite.kernel import Fault, NvrtcModule
from suite.nvrtc import loader
from suite.problems import BadInput

SOURCE = Path(__file__).with_name("attention.cu")
STAGES = (1, 2, 3, 4)
BLOCK_M, BLOCK_N, THREADS = 64, 64, 128
DTYPES = tuple(TORCH_DTYPES)  # bf16 and fp16: the problem's own
FAULT_SIZE = (1, 2, 1, 64, 512, 64, 0)  # one 64-row query tile per head against 8 key tiles
# for compute-sanitizer: odd lengths, a causal mask with fully masked rows, GQA, d = 128
SANITIZE_EDGES = (1, 4, 1, 130, 45, 128, 1)


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


class AttentionModule(NvrtcModule):
    """What the attention NVRTC modules share: the constants they are built with, ``describe`` of a head_dim's build
    (``build_for``: a size's d) and a launch that carries its kernel's facts. A subclass states its tile
    (``block_m``, ``block_n``, ``threads``), its ``name_expression``, ``smem_bytes`` and ``stage_bytes`` per head_dim,
    and its ``config``."""

    block_m = BLOCK_M
    block_n = BLOCK_N
    threads = THREADS
    dtypes = DTYPES

    @property
    def stage_bytes(self) -> int:
        """The d = 128 build's stage (the figure ``describe`` gives without a size to pick another)."""
        return self.stage_bytes_for(128)

    def name_expression(self, stages: int, d: int, dtype: str) -> str:
        return name_expression(stages, d, dtype)

    def bad_inputs(self) -> list[BadInput]:
        return grid_limit_bad_inputs()

    def smem_bytes(self, stages: int, d: int) -> int:
        return smem_bytes(stages, d)

    def stage_bytes_for(self, d: int) -> int:
        return stage_bytes(d)

    def config(self, d: int = 128) -> str:
        return f"{BLOCK_M} query rows x {BLOCK_N}-key tiles, d={d}, 4 warps of 16 rows, Q in registers"

    def build_arch(self, arch: str | None) -> str | None:
        """The arch ``build(arch)`` compiles for."""
        return arch

    def constants(self) -> dict[str, int]:
        return {"ATTN_BLOCK_M": self.block_m, "ATTN_BLOCK_N": self.block_n, "ATTN_THREADS": self.threads}

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return tuple(self.name_expression(stages, d, dtype) for d in (128, 64) for dtype in self.dtypes)

    def build_for(self, size) -> int:
        """A size's head_dim: each has its own build (tile, shared memory, registers)."""
        return size[5]

    def describe(self, arch: str, dtype: str = "bf16", build: int = 128) -> dict:
        """Each stage count's build at head_dim ``build`` (the d = 128 one unless a size picks another)."""
        built = self.build(arch)
        return {
            s: built.kernel_info(
                self.name_expression(s, build, dtype),
                self.stage_bytes_for(build),
                s,
                dynamic_smem=self.smem_bytes(s, build),
                threads=self.threads,
                config=f"{self.build_arch(arch)} cubin; {self.config(build)}",
            )
            for s in self.stages
        }

    def _kernel(self, ops, stages: int):
        """The built kernel for these operands, its name and dynamic shared memory, and its occupancy; refuses a ring
        this GPU cannot hold."""
        module = self.build()
        expr = self.name_expression(stages, ops.d, ops.dtype)
        kernel = module.kernel(expr)
        smem = self.smem_bytes(stages, ops.d)
        loader.prepare(kernel, smem)
        occupancy = loader.occupancy(kernel, self.threads, smem)
        if occupancy < 1:
            raise ValueError(f"stages={stages}: a block ({smem} B of shared memory) does not fit on an SM")
        return module, expr, kernel, smem, occupancy

    def _launchable(self, ops, stages: int, args: tuple):
        """A launch of one block per BLOCK_M query rows of each (batch, head), with its kernel's facts as ``info``."""
        module, expr, kernel, smem, occupancy = self._kernel(ops, stages)
        grid = (-(-ops.sq // self.block_m), ops.b * ops.hq)

        def run():
            loader.launch(kernel, grid, self.threads, smem, *args)

        run.info = module.kernel_info(
            expr,
            self.stage_bytes_for(ops.d),
            stages,
            dynamic_smem=smem,
            occupancy=occupancy,
            threads=self.threads,
            grid=grid[0] * grid[1],
            config=self.config(ops.d) + f", {ops.dtype}",
        )
        return run


class AttentionMmaSync(AttentionModule):
    """attention.cu compiled for each stage count, head_dim and dtype."""

    source = SOURCE
    stages = STAGES
    # cp.async, ldmatrix (Q once, K and V per tile), mma.sync: per 64-key tile 8 x D/16 for S and 8 x D/16 for P V
    sass_requires = {"async_copy": 1, "ldmatrix": 1, "mma": 2 * 8 * 64 // 16}
    # a long non-causal row of 10 key tiles, so the ring wraps
    sanitize_sizes = (SANITIZE_EDGES, (1, 2, 1, 70, 600, 64, 0))
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

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        ops = cuda_launch_operands(inputs, out, self.dtypes, BLOCK_M)
        return self._launchable(
            ops, stages, (ops.q.data_ptr(), ops.k.data_ptr(), ops.v.data_ptr(), out.data_ptr(), *ops.kernel_scalars())
        )


KERNEL = AttentionMmaSync()
