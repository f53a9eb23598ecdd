"""y = 2 * x through the bulk-copy ring of ``vector_bulk.cu`` (Hopper: cp.async.bulk + mbarriers, sm_90 and later):
configurations, build, validate, launch.

The same configurations as the cp.async ring (suite.ptx.vector): a tile size, consumer warps (plus one producer
warp) and a schedule (suite.streaming). ``BANDWIDTH`` is the headline row's layout, ``depth(tile)`` the depth sweep's.
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

SOURCE = Path(__file__).with_name("vector_bulk.cu")
STAGES = (1, 2, 3, 4, 5, 6, 7, 8)
BARRIER_REGION = 128  # bytes of dynamic shared memory before the first tile (vector_bulk.cu: BULK_BARRIER_REGION)
MIN_CAPABILITY = (9, 0)


@dataclass(frozen=True)
class Config:
    tile_bytes: int  # one ring stage, one bulk copy: consumer_warps x 32 x chunks x 16 bytes
    consumer_warps: int
    schedule: Schedule

    def __post_init__(self):
        if self.tile_bytes % (self.consumer_threads * 16):
            raise ValueError(
                f"tile_bytes must be a multiple of consumer threads x 16 B = {self.consumer_threads * 16} "
                f"(got {self.tile_bytes})"
            )

    @property
    def consumer_threads(self) -> int:
        return self.consumer_warps * 32

    @property
    def threads(self) -> int:
        return self.consumer_threads + 32  # one producer warp

    @property
    def chunks(self) -> int:
        return self.tile_bytes // (self.consumer_threads * 16)

    @property
    def tile_floats(self) -> int:
        return self.tile_bytes // 4

    def name_expression(self, stages: int) -> str:
        return f"scale2_bulk_ring<{self.consumer_warps}, {self.chunks}, {stages}>"

    def describe(self) -> str:
        return (
            f"{kib(self.tile_bytes)} tiles (one bulk copy each), 1 producer + {self.consumer_warps} consumer "
            f"warps, {self.schedule.describe()}"
        )


# The cp.async ring's measured-best layout, not yet measured for the bulk ring (tools/tune_vector.py sweeps it).
BANDWIDTH = Config(tile_bytes=32 * 1024, consumer_warps=8, schedule=Schedule(tiles_per_block=2))
DEPTH_CONSUMER_WARPS = 4  # 128 consumer threads: the cp.async ring's depth blocks, plus the producer warp
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)


def depth(tile_bytes: int, blocks_per_sm: int = 1) -> Config:
    return Config(
        tile_bytes=tile_bytes, consumer_warps=DEPTH_CONSUMER_WARPS, schedule=Schedule(blocks_per_sm=blocks_per_sm)
    )


@functools.cache
def build(arch: str | None = None, config: Config = BANDWIDTH) -> loader.CompiledModule:
    """Every STAGES instantiation for one configuration, compiled for ``arch`` (sm_90 or later; default: this GPU)."""
    return loader.compile_cu(SOURCE, tuple(config.name_expression(s) for s in STAGES), arch=arch)


def check_inputs(x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
    check_stages(stages, STAGES)
    check_vector_operands(x, y)  # includes the 16-byte alignment the bulk copies need
    check_cuda(("x", x), ("y", y))
    cc = torch.cuda.get_device_capability(x.device)
    if cc < MIN_CAPABILITY:
        raise ValueError(f"cp.async.bulk needs compute capability >= 9.0 (this GPU: {cc[0]}.{cc[1]})")


def describe(arch: str, config: Config, stages: tuple[int, ...] = STAGES) -> dict[int, KernelInfo]:
    """Without a GPU: each depth's KernelInfo from a cubin built for ``arch`` (sm_90 or later)."""
    return stream.describe(build, arch, config, stages, smem_overhead=BARRIER_REGION)


class Scale2(stream.Launcher):
    """A launcher bound to (x, y, stages, config): ``Scale2(x, y, 3)()`` writes y = 2 * x on torch's current stream."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, config: Config = BANDWIDTH):
        check_inputs(x, y, stages)
        super().__init__(build(None, config), config, stages, x, y, smem_overhead=BARRIER_REGION)


def scale2(
    x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None, config: Config = BANDWIDTH
) -> torch.Tensor:
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages, config)()
    return y


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
