"""y = 2 * x through the cp.async shared-memory ring of ``vector.cu``: configurations, build, validate, launch.

A configuration (``Config``) is a tile size, a thread count and a schedule (suite.streaming): ``BANDWIDTH`` is the
measured-best layout for 1 GiB (short runs of 2 tiles of 32 KiB, the headline row against ``copy_``); ``depth(tile)``
is the depth sweep's layout (a persistent grid of 128-thread blocks, one resident block per SM pinned by padding the
shared memory to the whole SM, tiles of 2-32 KiB). Every configuration is compiled for every ring depth in STAGES.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.info import KernelInfo
from suite.nvrtc import loader, stream
from suite.streaming import Schedule, kib

SOURCE = Path(__file__).with_name("vector.cu")
STAGES = (1, 2, 3, 4, 5, 6, 7, 8)  # every depth cp.async.wait_group's immediate (0..7 pending groups) allows
CHUNK_BYTES = 16  # one cp.async


@dataclass(frozen=True)
class Config:
    tile_bytes: int  # one ring stage: threads x chunks x 16 bytes
    threads: int
    schedule: Schedule

    def __post_init__(self):
        if self.tile_bytes % (self.threads * CHUNK_BYTES):
            raise ValueError(
                f"tile_bytes must be a multiple of threads x 16 B = {self.threads * CHUNK_BYTES} "
                f"(got {self.tile_bytes})"
            )

    @property
    def chunks(self) -> int:
        return self.tile_bytes // (self.threads * CHUNK_BYTES)

    @property
    def tile_floats(self) -> int:
        return self.tile_bytes // 4

    def name_expression(self, stages: int) -> str:
        return f"scale2_ring<{self.threads}, {self.chunks}, {stages}>"

    def describe(self) -> str:
        return f"{kib(self.tile_bytes)} tiles, {self.threads} threads, {self.schedule.describe()}"


# The best layout tools/tune_vector.py found on the H200 for 1 GiB (its table: docs/tuning.md): short runs of 2 tiles
# of 32 KiB at 4 stages; persistent grids of the same kernel came well behind.
BANDWIDTH = Config(tile_bytes=32 * 1024, threads=256, schedule=Schedule(tiles_per_block=2))
DEPTH_THREADS = 128  # 2 KiB tiles are one 16-byte chunk per thread at 128 threads
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)


def depth(tile_bytes: int, blocks_per_sm: int = 1) -> Config:
    """The depth sweep's configuration: a persistent grid pinned to ``blocks_per_sm`` resident blocks per SM."""
    return Config(tile_bytes=tile_bytes, threads=DEPTH_THREADS, schedule=Schedule(blocks_per_sm=blocks_per_sm))


def name_expression(stages: int, config: Config = BANDWIDTH) -> str:
    return config.name_expression(stages)


@functools.cache
def build(arch: str | None = None, config: Config = BANDWIDTH) -> loader.CompiledModule:
    """Every STAGES instantiation of vector.cu for one configuration's tile, compiled for ``arch`` (default: the
    current GPU)."""
    return loader.compile_cu(SOURCE, tuple(config.name_expression(s) for s in STAGES), arch=arch)


def check_inputs(x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
    check_stages(stages, STAGES)
    check_vector_operands(x, y)
    check_cuda(("x", x), ("y", y))


def describe(arch: str, config: Config, stages: tuple[int, ...] = STAGES) -> dict[int, KernelInfo]:
    """Without a GPU: each depth's KernelInfo from a cubin built for ``arch``."""
    return stream.describe(build, arch, config, stages)


class Scale2(stream.Launcher):
    """A launcher bound to (x, y, stages, config): ``Scale2(x, y, 3)()`` writes y = 2 * x on torch's current stream."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, config: Config = BANDWIDTH):
        check_inputs(x, y, stages)
        super().__init__(build(None, config), config, stages, x, y)


def scale2(
    x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None, config: Config = BANDWIDTH
) -> torch.Tensor:
    """y = 2 * x with the STAGES-deep ring; allocates y unless ``out`` is given."""
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages, config)()
    return y


# The registry's kernel modules (suite/variants.py): "bandwidth" and one per depth-sweep tile ("2KiB", ...).
KERNELS = stream.kernels_of(sys.modules[__name__], ("async_copy",))
