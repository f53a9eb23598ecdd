"""y = 2 * x through the cuda::pipeline ring of ``vector.cu``: the PTX ring's design at the PTX kernel's bandwidth
configuration runs it (32 KiB tiles, 256 threads, runs of 2 tiles per block), the copies written in libcu++."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.cuda.headers import cccl_include_dir
from suite.kernel import NvrtcModule
from suite.nvrtc import loader

SOURCE = Path(__file__).with_name("vector.cu")
STAGES = (1, 2, 3, 4)
THREADS = 256
CHUNKS_PER_THREAD = 8  # 16-byte chunks each thread copies per tile
TILES_PER_BLOCK = 2  # each block streams a run of 2 tiles (the PTX ring's bandwidth configuration)


class PipelineRing(NvrtcModule):
    """vector.cu's cuda::pipeline ring. The tile shape reaches the kernel as defines (VEC_THREADS_PER_BLOCK,
    VEC_CHUNKS_PER_THREAD)."""

    source = SOURCE
    stages = STAGES
    threads = THREADS
    sass_requires = ("async_copy",)  # cuda::memcpy_async of 16 aligned bytes compiles to cp.async (LDGSTS)

    def __init__(self):
        self.tile_floats = THREADS * CHUNKS_PER_THREAD * 4
        self.stage_bytes = self.tile_floats * 4
        self.sanitize_sizes = (3 * self.tile_floats + 5,)  # several blocks, a ragged tail

    def constants(self) -> dict[str, int]:
        return {"VEC_THREADS_PER_BLOCK": THREADS, "VEC_CHUNKS_PER_THREAD": CHUNKS_PER_THREAD}

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return (f"scale2_cuda_pipeline<{stages}>",)

    def include_dirs(self) -> tuple[Path, ...]:
        return (cccl_include_dir(),)

    def config(self) -> str:
        return f"{self.stage_bytes // 1024} KiB tiles, {TILES_PER_BLOCK} per block, {THREADS} threads"

    def launch(self, inputs, out, stages):
        return Scale2(inputs[0], out, stages, self)


KERNEL = PipelineRing()


class Scale2(loader.BoundKernel):
    """A launcher bound to (x, y, stages): ``Scale2(x, y, 3)()`` writes y = 2 * x on torch's current stream."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, kernel: PipelineRing = KERNEL):
        check_stages(stages, kernel.stages)
        check_vector_operands(x, y)
        check_cuda(("x", x), ("y", y))
        num_tiles = -(-x.numel() // kernel.tile_floats)
        super().__init__(
            kernel.build(),
            kernel.name_expressions(stages)[0],
            stages,
            kernel.stage_bytes,
            THREADS,
            grid=-(-num_tiles // TILES_PER_BLOCK),
            args=(x.data_ptr(), y.data_ptr(), np.int64(x.numel())),
            config=kernel.config(),
            too_big=f"stages={stages} needs {stages * kernel.stage_bytes} B of shared memory: no block fits on an SM",
        )
