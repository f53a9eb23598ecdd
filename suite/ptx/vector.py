"""y = 2 * x through the cp.async shared-memory ring of ``vector.cu``: configurations, build, validate, launch.

A configuration (``Config``) is a tile size, a thread count and a schedule (suite.streaming): ``BANDWIDTH`` is the
measured-best layout for 1 GiB (short runs of 2 tiles of 32 KiB, the headline row against ``copy_``); ``depth(tile)``
is the depth sweep's layout (a persistent grid of 128-thread blocks, one resident block per SM pinned by padding the
shared memory to the whole SM, tiles of 2-32 KiB). Every configuration is compiled for every ring depth in STAGES.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from suite.ptx import stream
from suite.streaming import Schedule, kib

SOURCE = Path(__file__).with_name("vector.cu")
STAGES = (1, 2, 3, 4, 5, 6, 7, 8)  # every depth cp.async.wait_group's immediate (0..7 pending groups) allows


@dataclass(frozen=True)
class Config(stream.RingConfig):
    tile_bytes: int  # one ring stage: threads x chunks x 16 bytes
    threads: int
    schedule: Schedule
    template = "scale2_ring"

    def describe(self) -> str:
        return f"{kib(self.tile_bytes)} tiles, {self.threads} threads, {self.schedule.describe()}"


# The best layout the vector probe found at 1 GiB (docs/tuning.md): short runs of 2 tiles of 32 KiB at 4 stages;
# persistent grids of the same kernel came well behind.
BANDWIDTH = Config(tile_bytes=32 * 1024, threads=256, schedule=Schedule(tiles_per_block=2))
DEPTH_THREADS = 128  # 2 KiB tiles are one 16-byte chunk per thread at 128 threads
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)


def depth(tile_bytes: int, blocks_per_sm: int = 1) -> Config:
    """The depth sweep's configuration: a persistent grid pinned to ``blocks_per_sm`` resident blocks per SM."""
    return Config(tile_bytes=tile_bytes, threads=DEPTH_THREADS, schedule=Schedule(blocks_per_sm=blocks_per_sm))


def name_expression(stages: int, config: Config = BANDWIDTH) -> str:
    return config.name_expression(stages)


# Every STAGES instantiation of vector.cu per configuration's tile: build(arch, config) compiles it for ``arch``
# (default: the current GPU), describe(arch, config, stages) gives each depth's KernelInfo without a GPU,
# Scale2(x, y, stages, config) is a launcher bound to them (``Scale2(x, y, 3)()`` writes y = 2 * x on torch's
# current stream) and scale2(x, stages, out, config) launches it (allocating y unless ``out`` is given).
RING = stream.Ring(SOURCE, STAGES, BANDWIDTH)
build, describe, check_inputs, Scale2, scale2 = RING.build, RING.describe, RING.check_inputs, RING.launcher, RING.scale2


# The registry's kernel modules (suite/variants.py): "bandwidth" and one per depth-sweep tile ("2KiB", ...).
KERNELS = stream.kernels_of(sys.modules[__name__], ("async_copy",))
