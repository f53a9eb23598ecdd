"""y = 2 * x in Triton through tensor descriptors: the Hopper form of the Triton tile loop (suite/triton/vector.py),
as the bulk ring (suite/ptx/vector_bulk.py) is the Hopper form of the cp.async ring.

x and y are seen as a 2-D tensor of ``n // WIDTH`` rows of WIDTH = 256 floats (1 KiB), a tile is ROWS of those rows.
On Hopper each ``desc.load`` is a TMA copy (UTMALDG) into shared memory, completed on an mbarrier, and each
``desc.store`` a TMA store (UTMASTG) from shared memory; ``tl.range(num_stages=S)`` keeps S - 1 tile loads in flight
(S - 1 load buffers plus one store buffer: S tiles of shared memory; S = 1 is one buffer, no overlap). The descriptor
zero-fills loads past the last row and clips stores there, so a partial last tile needs no mask; the n % 256 floats
after the last whole row are done by program 0 with plain masked loads.

Why 2-D: TMA coordinates are 32-bit, so a 1-D view would stop at 2^31 floats; rows of 256 floats keep every
coordinate small for any n the suite accepts (n = 2^31 + 5 is tested). A box dimension may not exceed 256 elements,
hence WIDTH = 256 and ROWS <= 256.

The descriptors are built on the host (triton.tools.tensor_descriptor.TensorDescriptor, encoded once per launch by
Triton's launcher), so a program that streams only one or two tiles pays nothing to make them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from suite.checks import check_stages, check_vector_operands
from suite.info import KernelInfo
from suite.streaming import Schedule, bytes_in_flight_per_sm, kib
from suite.triton.compiled import kernel_info
from suite.triton.vector import (
    StreamKernel,
    launch_stream,
    num_sms,
)  # num_sms: what sizes a persistent grid (the interpreter's too)

WIDTH = 256  # floats per descriptor row: the largest box dimension TMA allows
STAGES = (1, 2, 3, 4)


# rows not specialized: Triton's launcher would make rows == 1 (n of 256..511 floats) a constexpr, a Python int with
# no .to() for the epilogue's 64-bit offsets
@triton.jit(do_not_specialize=["rows"])
def scale2_desc_kernel(
    # tensor descriptors of x and y seen as (rows, WIDTH), box (ROWS, WIDTH)
    x_desc,
    y_desc,
    # pointers, for the tail after the last whole row
    x_ptr,
    y_ptr,
    # sizes: n floats, of which rows x WIDTH go through the descriptors
    n,
    rows,
    # meta-parameters
    ROWS: tl.constexpr,
    WIDTH: tl.constexpr,
    RUN: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # -- this program's tiles: runs of RUN contiguous tiles, num_programs runs apart (suite/streaming.py) --
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    tiles = tl.cdiv(rows, ROWS)  # the last may be partial: TMA zero-fills its loads and clips its stores
    my_runs = tl.cdiv(tl.cdiv(tiles, RUN) - pid, num_programs)
    last_run_first_tile = (pid + (my_runs - 1) * num_programs) * RUN  # only a program's last run can be cut short
    my_tiles = (my_runs - 1) * RUN + tl.minimum(tiles - last_run_first_tile, RUN)

    # -- MAINLOOP: TMA loads NUM_STAGES - 1 tiles ahead (the pipeliner's mbarrier ring), TMA stores behind --
    for i in tl.range(0, my_tiles, num_stages=NUM_STAGES):
        row = ((pid + (i // RUN) * num_programs) * RUN + i % RUN) * ROWS
        x = x_desc.load([row, 0])
        y_desc.store([row, 0], x * 2)

    # -- EPILOGUE: the n % WIDTH floats after the last whole row, if any, by program 0 (64-bit: n may exceed 2^31) --
    if pid == 0:
        offs = rows.to(tl.int64) * WIDTH + tl.arange(0, WIDTH)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * 2, mask=mask)


@dataclass(frozen=True)
class Config:
    tile_bytes: int  # ROWS x WIDTH x 4
    num_warps: int
    schedule: Schedule

    def __post_init__(self):
        rows, rest = divmod(self.tile_bytes, WIDTH * 4)
        if rest or rows < 1 or rows > 256 or rows & (rows - 1):
            raise ValueError(
                f"tile_bytes must be 1 KiB x a power of two up to 256 (rows of {WIDTH} floats, a TMA "
                f"box of at most 256 rows); got {self.tile_bytes}"
            )

    @property
    def rows(self) -> int:
        return self.tile_bytes // (WIDTH * 4)

    def describe(self) -> str:
        return (
            f"tensor descriptors, {kib(self.tile_bytes)} tiles ({self.rows}x{WIDTH} floats), "
            f"num_warps={self.num_warps}, {self.schedule.describe(pinned_by='the grid')}"
        )


# The bandwidth layout, chosen by the tuning search docs/tuning.md describes: one 32 KiB tile per program at
# num_stages=3. With one tile per program nothing is pipelined; what num_stages=3 sets is the shared
# memory (3 tiles, 96 KiB), hence 2 resident programs per SM; 3 and 1 per SM (num_stages 2 and 4) came behind, and
# so did longer runs and persistent grids.
BANDWIDTH = Config(tile_bytes=32 * 1024, num_warps=8, schedule=Schedule(tiles_per_block=1))
BANDWIDTH_STAGES = (3,)


def streaming_info(info: KernelInfo, config: Config, stages: int) -> KernelInfo:
    """Add the tile, the residency and the loads in flight per SM to ``info``. The pipeliner gives S - 1 load buffers
    (plus the store's) at S >= 2; compiled, that is checked against the kernel's shared memory (S tiles)."""
    schedule = config.schedule
    resident = schedule.blocks_per_sm if schedule.persistent else info.occupancy
    buffers = max(1, stages - 1)
    if info.sass and info.smem_total is not None and info.smem_total // config.tile_bytes < max(1, stages):
        info.note = (
            f"num_stages={stages}: {info.smem_total} B of shared memory, fewer than the {stages} tiles a "
            f"{stages}-stage TMA loop needs; loads in flight assumed 1"
        )
        buffers = 1
    info.tile_bytes = config.tile_bytes
    info.resident_blocks_per_sm = resident
    info.bytes_in_flight_per_sm = bytes_in_flight_per_sm(schedule.tiles_in_flight(buffers), config.tile_bytes, resident)
    return info


def _descriptor(t: torch.Tensor, rows: int, config: Config):
    from triton.tools.tensor_descriptor import TensorDescriptor

    # rows == 0 (n < WIDTH): the kernel never touches the descriptor (no whole row, no tile), but TMA cannot encode
    # an empty dimension; it is described as one row and never used.
    return TensorDescriptor(t, shape=[max(rows, 1), WIDTH], strides=[WIDTH, 1], block_shape=[config.rows, WIDTH])


class Scale2:
    """A launcher bound to (x, y, stages, config): ``Scale2(x, y, 3)()`` writes y = 2 * x."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, config: Config = BANDWIDTH):
        check_stages(stages, STAGES)
        check_vector_operands(x, y)
        self.x, self.y, self.stages, self.config = x, y, stages, config
        self.rows = x.numel() // WIDTH
        self.x_desc, self.y_desc = _descriptor(x, self.rows, config), _descriptor(y, self.rows, config)
        self.grid = config.schedule.grid(triton.cdiv(self.rows, config.rows), num_sms(x.device))
        self.compiled = None
        self.info = self._info(None)

    def _info(self, compiled) -> KernelInfo:
        c = self.config
        return streaming_info(kernel_info(compiled, c.tile_bytes, c.describe(), self.grid), c, self.stages)

    def __call__(self) -> None:
        args = (self.x_desc, self.y_desc, self.x, self.y, self.x.numel(), self.rows)
        launch_stream(self, scale2_desc_kernel, self._info, *args, ROWS=self.config.rows, WIDTH=WIDTH)


# The registry's kernel modules (suite/variants.py). compute-sanitizer: 3 whole tiles, a partial fourth of 7 rows
# (zero-filled loads, clipped stores) and 5 floats after the last whole row (program 0's masked epilogue).
KERNELS = {
    "bandwidth": StreamKernel(
        Scale2, "scale2_desc_kernel", BANDWIDTH, BANDWIDTH_STAGES, (3 * BANDWIDTH.rows * WIDTH + 7 * WIDTH + 5,)
    )
}
