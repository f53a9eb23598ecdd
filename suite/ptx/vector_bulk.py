"""y = 2 * x through the bulk-copy ring of ``vector_bulk.cu`` (Hopper: cp.async.bulk + mbarriers, sm_90 and later):
configurations, build, validate, launch.

The same configurations as the cp.async ring (suite.ptx.vector): a tile size, consumer warps (plus one producer
warp) and a schedule (suite.streaming). ``BANDWIDTH`` is the headline row's layout, ``depth(tile)`` the depth sweep's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from suite.ptx import stream
from suite.streaming import Schedule, kib

SOURCE = Path(__file__).with_name("vector_bulk.cu")
STAGES = (1, 2, 3, 4, 5, 6, 7, 8)
BARRIER_REGION = 128  # bytes of dynamic shared memory before the first tile (vector_bulk.cu: BULK_BARRIER_REGION)
MIN_CAPABILITY = (9, 0)


@dataclass(frozen=True)
class Config(stream.RingConfig):
    tile_bytes: int  # one ring stage, one bulk copy: consumer_warps x 32 x chunks x 16 bytes
    consumer_warps: int
    schedule: Schedule
    template = "scale2_bulk_ring"
    template_unit = 32  # consumer warps
    copiers = "consumer threads"

    @property
    def consumer_threads(self) -> int:
        return self.consumer_warps * 32

    copy_threads = consumer_threads  # the chunks are the consumers' (16 B each); the producer warp only issues the copy

    @property
    def threads(self) -> int:
        return self.consumer_threads + 32  # one producer warp

    def describe(self) -> str:
        return (
            f"{kib(self.tile_bytes)} tiles (one bulk copy each), 1 producer + {self.consumer_warps} consumer "
            f"warps, {self.schedule.describe()}"
        )


# The cp.async ring's measured-best layout, not yet measured for the bulk ring (docs/tuning.md's vector probe).
BANDWIDTH = Config(tile_bytes=32 * 1024, consumer_warps=8, schedule=Schedule(tiles_per_block=2))
DEPTH_CONSUMER_WARPS = 4  # 128 consumer threads: the cp.async ring's depth blocks, plus the producer warp
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)


def depth(tile_bytes: int, blocks_per_sm: int = 1) -> Config:
    return Config(
        tile_bytes=tile_bytes, consumer_warps=DEPTH_CONSUMER_WARPS, schedule=Schedule(blocks_per_sm=blocks_per_sm)
    )


# Every STAGES instantiation per configuration, for sm_90 or later: build, describe, check_inputs, Scale2 and
# scale2 as suite.ptx.vector's, with BARRIER_REGION before the ring; the bulk copies need compute capability 9.0.
RING = stream.Ring(SOURCE, STAGES, BANDWIDTH, smem_overhead=BARRIER_REGION, needs=("cp.async.bulk", MIN_CAPABILITY))
build, describe, check_inputs, Scale2, scale2 = RING.build, RING.describe, RING.check_inputs, RING.launcher, RING.scale2


# The registry's kernel modules (suite/variants.py): "bandwidth" and one per depth-sweep tile ("2KiB", ...).
# racecheck reports a race at every reuse of a stage that a raw-address cp.async.bulk refills after the consumers'
# ld.shared reads were released through an mbarrier: it does not take the mbarrier arrive / try_wait pair as ordering
# them (flash-attention documents the same for its cp.async.bulk buffers; the same pattern through
# cp.async.bulk.tensor reports nothing). On the H200: hazards at every depth in proportion to the ring's reuses, with
# and without a proxy fence before the release, every output bit-exact (docs/sanitizer.md).
RACECHECK_BLIND = (
    "racecheck does not model the mbarrier release of a stage that a raw cp.async.bulk refills; "
    "it reports every reuse (docs/sanitizer.md)"
)
KERNELS = stream.kernels_of(
    sys.modules[__name__],
    ("bulk_copy", "mbarrier"),
    archs=("sm_90",),
    sanitizer_blind_spots={"racecheck": RACECHECK_BLIND},
)
