"""y = 2 * x in Triton: each program loops over its tiles, a loop whose loads ``num_stages`` may software-pipeline
(the same shape of work as the PTX ring's blocks, and the same tile schedules, suite.streaming).

A configuration is a tile (BLOCK floats), num_warps and a schedule: ``BANDWIDTH`` is the headline row's layout
(short runs of 2 tiles of 32 KiB), ``depth(tile)`` the depth sweep's (a persistent grid of one program per SM, 4
warps, tiles of 2-32 KiB). Triton cannot pad a kernel's shared memory, so a persistent grid's residency is pinned by
the grid alone: blocks_per_sm x SMs programs, which the block scheduler spreads evenly.

Whether a num_stages setting is pipelined at all is read from the compiled kernel: with ``tl.range(num_stages=S)``
Triton's pipeliner turns the loads into cp.async (LDGSTS in the SASS) into S - 1 shared-memory buffers, so S - 1
tiles are in flight per program; without LDGSTS the loads are plain and one tile is in flight, and the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from suite.checks import check_stages, check_vector_operands
from suite.info import KernelInfo
from suite.kernel import TritonModule
from suite.streaming import Schedule, bytes_in_flight_per_sm, kib
from suite.triton.compiled import kernel_info

STAGES = (1, 2, 3, 4, 5, 6, 7, 8)
INTERPRETER_SMS = 3  # the SM count a persistent grid assumes in the interpreter (no GPU to ask)


@triton.jit
def scale2_kernel(
    # pointers
    x_ptr,
    y_ptr,
    # sizes
    n,
    # meta-parameters
    BLOCK: tl.constexpr,
    RUN: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # -- this program's tiles: runs of RUN contiguous tiles, num_programs runs apart (suite/streaming.py) --
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    full_tiles = n // BLOCK  # tiles with no element past n; a partial last tile is left to the epilogue
    my_runs = tl.cdiv(tl.cdiv(full_tiles, RUN) - pid, num_programs)
    last_run_first_tile = (pid + (my_runs - 1) * num_programs) * RUN  # only a program's last run can be cut short
    my_tiles = (my_runs - 1) * RUN + tl.minimum(full_tiles - last_run_first_tile, RUN)
    block = tl.arange(0, BLOCK)

    # -- MAINLOOP: whole tiles, no masks, software-pipelined NUM_STAGES deep (64-bit offsets: n may exceed 2^31) --
    for i in tl.range(0, my_tiles, num_stages=NUM_STAGES):
        tile = (pid + (i // RUN) * num_programs) * RUN + i % RUN
        start = tile.to(tl.int64) * BLOCK
        x = tl.load(x_ptr + start + block)
        tl.store(y_ptr + start + block, x * 2)

    # -- EPILOGUE: the partial last tile (n % BLOCK elements), if any, by program 0 --
    if pid == 0:
        start = full_tiles.to(tl.int64) * BLOCK
        mask = start + block < n
        x = tl.load(x_ptr + start + block, mask=mask)
        tl.store(y_ptr + start + block, x * 2, mask=mask)


@dataclass(frozen=True)
class Config:
    tile_bytes: int  # BLOCK x 4
    num_warps: int
    schedule: Schedule

    @property
    def block(self) -> int:
        return self.tile_bytes // 4

    def describe(self) -> str:
        return (
            f"BLOCK={self.block} ({kib(self.tile_bytes)} tiles), num_warps={self.num_warps}, "
            f"{self.schedule.describe(pinned_by='the grid')}"
        )


# The bandwidth layout, chosen by the tuning search docs/tuning.md describes: 2 tiles of 64 KiB per program, 4 warps;
# no streaming cache hints (evict_first loads, .cs stores), which lost in every layout searched.
BANDWIDTH = Config(tile_bytes=64 * 1024, num_warps=4, schedule=Schedule(tiles_per_block=2))
DEPTH_NUM_WARPS = 4  # 128 threads, as the PTX ring's depth blocks
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)


def depth(tile_bytes: int, programs_per_sm: int = 1) -> Config:
    return Config(tile_bytes=tile_bytes, num_warps=DEPTH_NUM_WARPS, schedule=Schedule(blocks_per_sm=programs_per_sm))


def check_inputs(x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
    check_stages(stages, STAGES)
    check_vector_operands(x, y)


def num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return INTERPRETER_SMS


def streaming_info(info: KernelInfo, config: Config, stages: int) -> KernelInfo:
    """Add the tile, the residency and the loads in flight per SM to ``info``; say when Triton did not pipeline.
    Compiled: tiles in flight = the shared-memory buffers the pipeliner allocated (shared bytes // tile bytes) when the
    SASS holds LDGSTS, else 1. Interpreter: the nominal S - 1 (at least 1)."""
    schedule = config.schedule
    resident = schedule.blocks_per_sm if schedule.persistent else info.occupancy
    if info.sass:  # compiled: what the machine code does
        pipelined = info.sass.get("async_copy", 0) > 0
        buffers = (info.smem_total or 0) // config.tile_bytes if pipelined else 0
        if stages > 1 and not pipelined:
            info.note = (
                f"num_stages={stages} not pipelined: no LDGSTS (cp.async) in its SASS, the loads are plain "
                f"(one tile in flight)"
            )
    else:  # the interpreter compiles nothing: the pipeliner's nominal buffers
        buffers = stages - 1
    in_flight = schedule.tiles_in_flight(max(1, buffers))
    info.tile_bytes = config.tile_bytes
    info.resident_blocks_per_sm = resident
    info.bytes_in_flight_per_sm = bytes_in_flight_per_sm(in_flight, config.tile_bytes, resident)
    return info


def launch_stream(launcher, kernel, info, *args, **meta) -> None:
    """Launch a streaming ``kernel`` for ``launcher`` (a Scale2: its grid, its depth as NUM_STAGES and num_stages, its
    configuration's run and warps) with ``args`` and the kernel's own ``meta``; the first time Triton compiled it,
    ``launcher.info`` becomes ``info(compiled)``."""
    c, stages = launcher.config, launcher.stages
    compiled = kernel[(launcher.grid,)](
        *args, **meta, RUN=c.schedule.run, NUM_STAGES=stages, num_warps=c.num_warps, num_stages=stages
    )
    if launcher.compiled is None and compiled is not None:
        launcher.compiled = compiled
        launcher.info = info(compiled)


class Scale2:
    """A launcher bound to (x, y, stages, config): ``Scale2(x, y, 3)()`` writes y = 2 * x."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int, config: Config = BANDWIDTH):
        check_inputs(x, y, stages)
        self.x, self.y, self.stages, self.config = x, y, stages, config
        self.grid = config.schedule.grid(triton.cdiv(x.numel(), config.block), num_sms(x.device))
        self.compiled = None
        self.info = self._info(None)

    def _info(self, compiled) -> KernelInfo:
        return streaming_info(kernel_info(compiled, None, self.config.describe(), self.grid), self.config, self.stages)

    def __call__(self) -> None:
        launch_stream(self, scale2_kernel, self._info, self.x, self.y, self.x.numel(), BLOCK=self.config.block)


def scale2(
    x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None, config: Config = BANDWIDTH
) -> torch.Tensor:
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages, config)()
    return y


class StreamKernel(TritonModule):
    """A streaming Triton kernel (``name``, launched by ``launcher``: this module's Scale2 or
    suite.triton.vector_desc's) at one configuration, as the kernel-module contract (suite.kernel) states it, for the
    registry."""

    depth_is_num_stages = True  # the launch's num_stages (suite.kernel.TritonModule)

    def __init__(self, launcher, name: str, config, stages: tuple[int, ...], sanitize_sizes: tuple[int, ...]):
        self.launcher, self.name = launcher, name
        self.stream_config, self.stages, self.sanitize_sizes = config, tuple(stages), tuple(sanitize_sizes)

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return (self.name,)

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        return self.launcher(inputs[0], out, stages, self.stream_config)


# The depth sweep's persistent grid has one program per SM: for the pipeliner's buffers to be reused under
# compute-sanitizer, every program must stream more tiles than the deepest num_stages. Sized for up to this many SMs.
SANITIZE_WRAP_SMS = 144


def _kernels() -> dict:
    from suite.streaming import BANDWIDTH_STAGES, depth_stages

    # compute-sanitizer: a few whole tiles and a ragged tail (the epilogue's masked loads)
    kernels = {
        "bandwidth": StreamKernel(Scale2, "scale2_kernel", BANDWIDTH, BANDWIDTH_STAGES, (3 * BANDWIDTH.block + 5,))
    }
    for t in DEPTH_TILE_BYTES:
        config, stages = depth(t), depth_stages(t)
        sizes = (3 * config.block + 5,)
        if t == min(DEPTH_TILE_BYTES):
            sizes += (SANITIZE_WRAP_SMS * (max(stages) + 2) * config.block + 5,)
        kernels[kib(t).replace(" ", "")] = StreamKernel(Scale2, "scale2_kernel", config, stages, sizes)
    return kernels


# The registry's kernel modules (suite/variants.py): "bandwidth" and one per depth-sweep tile ("2KiB", ...).
KERNELS = _kernels()
