"""y = 2 * x through the cp.async shared-memory ring of ``vector.cu``: build, validate inputs, launch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.kernel import NvrtcModule
from suite.ptx import loader

SOURCE = Path(__file__).with_name("vector.cu")
STAGES = (1, 2, 3, 4)
THREADS = 256
CHUNKS_PER_THREAD = 8  # 16-byte chunks each thread copies per tile
TILE_FLOATS = THREADS * CHUNKS_PER_THREAD * 4  # 8192 floats
STAGE_BYTES = TILE_FLOATS * 4  # 32 KiB
# Tiles each block streams through its ring. Measured on an H200 (tools/tune_vector.py, 1 GiB): short runs beat
# long ones and a persistent grid (2 tiles: 94-99% of copy_ by stage count; 8 tiles: 91-94%; persistent: 89-92%).
TILES_PER_BLOCK = 2


def name_expression(stages: int) -> str:
    return f"scale2_pipeline<{stages}>"


class VectorRing(NvrtcModule):
    """vector.cu's cp.async ring: tiles of ``threads`` x ``chunks_per_thread`` 16-byte chunks, ``tiles_per_block``
    tiles streamed by each block. The tile shape reaches the kernel as defines (VEC_THREADS_PER_BLOCK,
    VEC_CHUNKS_PER_THREAD)."""

    source = SOURCE
    stages = STAGES
    sass_requires = ("async_copy", "vector_store")  # cp.async in, 16-byte st.global out

    def __init__(self, threads: int = THREADS, chunks_per_thread: int = CHUNKS_PER_THREAD,
                 tiles_per_block: int = TILES_PER_BLOCK):
        self.threads, self.chunks_per_thread, self.tiles_per_block = threads, chunks_per_thread, tiles_per_block
        self.tile_floats = threads * chunks_per_thread * 4
        self.stage_bytes = self.tile_floats * 4
        self.sanitize_sizes = (3 * self.tile_floats + 5,)  # several blocks, a ragged tail

    def constants(self) -> dict[str, int]:
        return {"VEC_THREADS_PER_BLOCK": self.threads, "VEC_CHUNKS_PER_THREAD": self.chunks_per_thread}

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return (name_expression(stages),)

    def config(self) -> str:
        return f"{self.stage_bytes // 1024} KiB tiles, {self.tiles_per_block} per block, {self.threads} threads"

    def launch(self, inputs, out, stages):
        return Scale2(inputs[0], out, stages, kernel=self)


KERNEL = VectorRing()


def build(arch: str | None = None) -> loader.CompiledModule:
    """Every STAGES instantiation of vector.cu, compiled for ``arch`` (default: the current GPU)."""
    return KERNEL.build(arch)


class Scale2:
    """A launcher bound to (x, y, stages): ``Scale2(x, y, 3)()`` writes y = 2 * x on torch's current stream."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, kernel: VectorRing = KERNEL):
        check_stages(stages, kernel.stages)
        check_vector_operands(x, y)
        check_cuda(("x", x), ("y", y))
        module = kernel.build()
        expr = kernel.name_expressions(stages)[0]
        self.kernel = module.kernel(expr)
        self.threads = kernel.threads
        self.smem_bytes = stages * kernel.stage_bytes
        blocks_per_sm = loader.occupancy(self.kernel, self.threads, self.smem_bytes)
        if blocks_per_sm < 1:
            raise ValueError(f"stages={stages} needs {self.smem_bytes} B of shared memory: no block fits on an SM")
        num_tiles = -(-x.numel() // kernel.tile_floats)
        self.grid = -(-num_tiles // kernel.tiles_per_block)  # each block streams a run of tiles_per_block tiles
        self.args = (x.data_ptr(), y.data_ptr(), np.int64(x.numel()))
        self.info = module.kernel_info(
            expr, kernel.stage_bytes, stages, occupancy=blocks_per_sm, threads=self.threads,
            grid=self.grid, config=kernel.config(),
        )

    def __call__(self) -> None:
        loader.launch(self.kernel, self.grid, self.threads, self.smem_bytes, *self.args)


def scale2(x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = 2 * x with the STAGES-deep ring; allocates y unless ``out`` is given."""
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages)()
    return y
