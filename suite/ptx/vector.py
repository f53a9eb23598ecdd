"""y = 2 * x through the cp.async shared-memory ring of ``vector.cu``: build, validate inputs, launch."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.ptx import loader

SOURCE = Path(__file__).with_name("vector.cu")
STAGES = (1, 2, 3, 4)
THREADS = 256
TILE_FLOATS = 8192  # THREADS x 8 chunks x 4 floats
STAGE_BYTES = TILE_FLOATS * 4  # 32 KiB
# Tiles each block streams through its ring. Measured on an H200 (tools/tune_vector.py, 1 GiB): short runs beat
# long ones and a persistent grid (2 tiles: 94-99% of copy_ by stage count; 8 tiles: 91-94%; persistent: 89-92%).
TILES_PER_BLOCK = 2


def name_expression(stages: int) -> str:
    return f"scale2_pipeline<{stages}>"


@functools.cache
def build(arch: str | None = None) -> loader.CompiledModule:
    """Every STAGES instantiation of vector.cu, compiled for ``arch`` (default: the current GPU)."""
    return loader.compile_cu(SOURCE, tuple(name_expression(s) for s in STAGES), arch=arch)


def check_inputs(x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
    check_stages(stages, STAGES)
    check_vector_operands(x, y)
    check_cuda(("x", x), ("y", y))


class Scale2:
    """A launcher bound to (x, y, stages): ``Scale2(x, y, 3)()`` writes y = 2 * x on torch's current stream."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int):
        check_inputs(x, y, stages)
        module = build()
        self.kernel = module.kernel(name_expression(stages))
        self.smem_bytes = stages * STAGE_BYTES
        blocks_per_sm = loader.occupancy(self.kernel, THREADS, self.smem_bytes)
        if blocks_per_sm < 1:
            raise ValueError(f"stages={stages} needs {self.smem_bytes} B of shared memory: no block fits on an SM")
        num_tiles = -(-x.numel() // TILE_FLOATS)
        self.grid = -(-num_tiles // TILES_PER_BLOCK)  # each block streams a run of TILES_PER_BLOCK tiles
        self.args = (x.data_ptr(), y.data_ptr(), np.int64(x.numel()))
        self.info = module.kernel_info(
            name_expression(stages), STAGE_BYTES, stages, occupancy=blocks_per_sm, threads=THREADS, grid=self.grid,
            config=f"{TILE_FLOATS * 4 // 1024} KiB tiles, {TILES_PER_BLOCK} per block, {THREADS} threads",
        )

    def __call__(self) -> None:
        loader.launch(self.kernel, self.grid, THREADS, self.smem_bytes, *self.args)


def scale2(x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = 2 * x with the STAGES-deep ring; allocates y unless ``out`` is given."""
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages)()
    return y
