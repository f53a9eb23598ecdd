"""What the streaming PTX kernels (vector.cu, vector_bulk.cu) share on the host side: pinning their residency with
shared memory, their launch (x, y, n, run on a tile schedule), and the KernelInfo their rows carry.

Pinning: a block that claims 1/k of the SM's shared memory leaves no room for a (k+1)-th, whatever its registers and
threads would allow; the driver's occupancy calculator is asked to confirm that exactly k fit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.info import KernelInfo
from suite.kernel import NvrtcModule
from suite.nvrtc import loader
from suite.streaming import Schedule, bytes_in_flight_per_sm


class StreamConfig(Protocol):
    tile_bytes: int
    threads: int
    schedule: Schedule

    @property
    def tile_floats(self) -> int: ...

    def name_expression(self, stages: int) -> str: ...

    def describe(self) -> str: ...


CHUNK_BYTES = 16  # one cp.async, and the bulk copy's granule


class RingConfig:
    """What a streaming ring's configuration (a frozen dataclass with ``tile_bytes``) derives from its tile, copied
    16 bytes at a time by ``copy_threads`` threads (all of them unless a subclass says otherwise): the chunks per
    thread, the floats, and the instantiation ``template<copy threads / template_unit, chunks, stages>``. Subclasses
    set ``template`` and, where not all threads copy, ``copiers`` (who copies, as an error names them)."""

    template = ""
    template_unit = 1  # the template counts the copying threads in these (32: warps)
    copiers = "threads"

    @property
    def copy_threads(self) -> int:
        return self.threads

    def __post_init__(self):
        if self.tile_bytes % (self.copy_threads * CHUNK_BYTES):
            raise ValueError(
                f"tile_bytes must be a multiple of {self.copiers} x 16 B = {self.copy_threads * CHUNK_BYTES} "
                f"(got {self.tile_bytes})"
            )

    @property
    def chunks(self) -> int:
        return self.tile_bytes // (self.copy_threads * CHUNK_BYTES)

    @property
    def tile_floats(self) -> int:
        return self.tile_bytes // 4

    def name_expression(self, stages: int) -> str:
        return f"{self.template}<{self.copy_threads // self.template_unit}, {self.chunks}, {stages}>"


def _static_smem(kernel) -> int:
    value = kernel.attributes.shared_size_bytes  # a property in cuda.core 1.2; a method in some older releases
    return int(value() if callable(value) else value)


def share_of_sm(blocks_per_sm: int, smem_per_sm: int, reserved_per_block: int, static_bytes: int) -> int:
    """Dynamic shared memory per block that makes ``blocks_per_sm`` blocks fill the SM's shared memory: the SM's
    bytes split ``blocks_per_sm`` ways, less what the system reserves per block and the kernel's static arrays,
    rounded down to 128 bytes."""
    return (smem_per_sm // blocks_per_sm - reserved_per_block - static_bytes) // 128 * 128


def pin(kernel, threads: int, ring_bytes: int, blocks_per_sm: int) -> int:
    """Dynamic shared memory to launch ``kernel`` with so that exactly ``blocks_per_sm`` blocks are resident per SM:
    the ring's ``ring_bytes`` padded to a 1/blocks_per_sm share of the SM. Raises ValueError, naming the rule, when
    the ring does not fit in that share or the occupancy calculator does not confirm the residency."""
    props = loader._device().properties
    static = _static_smem(kernel)
    share = share_of_sm(
        blocks_per_sm,
        int(props.max_shared_memory_per_multiprocessor),
        int(props.reserved_shared_memory_per_block),
        static,
    )
    share = min(share, loader.device_smem_limit() - static)
    if ring_bytes > share:
        raise ValueError(
            f"a ring of {ring_bytes} B of shared memory does not fit {blocks_per_sm} resident blocks per "
            f"SM on this GPU (each block may have at most {share} B)"
        )
    resident = loader.occupancy(kernel, threads, share)
    if resident != blocks_per_sm:
        raise ValueError(
            f"padding shared memory to {share} B per block should pin {blocks_per_sm} resident blocks "
            f"per SM, but the occupancy calculator says {resident} (threads or registers limit it)"
        )
    return share


def kernel_info(
    module: loader.CompiledModule,
    config: StreamConfig,
    stages: int,
    resident: int | None = None,
    smem_overhead: int = 0,
    **fields,
) -> KernelInfo:
    """What the tables report about one (configuration, depth): resources and SASS from the cubin, the tile, the
    residency the launch pins (persistent; ``resident`` for short runs, None when unknown) and the loads in flight per
    SM. ``smem_overhead``: dynamic shared memory besides the ring's stages (barriers)."""
    schedule = config.schedule
    resident = schedule.blocks_per_sm if schedule.persistent else resident
    info = module.kernel_info(
        config.name_expression(stages),
        config.tile_bytes,
        stages,
        threads=config.threads,
        config=config.describe(),
        tile_bytes=config.tile_bytes,
        resident_blocks_per_sm=resident,
        bytes_in_flight_per_sm=bytes_in_flight_per_sm(schedule.tiles_in_flight(stages), config.tile_bytes, resident),
        **fields,
    )
    info.smem_total += smem_overhead
    return info


class Launcher:
    """A streaming kernel bound to (x, y, stages, config) on the current GPU: the residency pinned (persistent) or
    queried (short runs), the grid from the schedule; calling it launches on torch's current stream."""

    def __init__(
        self,
        module: loader.CompiledModule,
        config: StreamConfig,
        stages: int,
        x: torch.Tensor,
        y: torch.Tensor,
        smem_overhead: int = 0,
    ):
        self.config = config
        self.name_expression = config.name_expression(stages)
        self.kernel = module.kernel(self.name_expression)
        ring_bytes = smem_overhead + stages * config.tile_bytes
        schedule = config.schedule
        if schedule.persistent:
            self.smem_bytes = pin(self.kernel, config.threads, ring_bytes, schedule.blocks_per_sm)
            occupancy = schedule.blocks_per_sm
        else:
            self.smem_bytes = ring_bytes
            occupancy = loader.occupancy(self.kernel, config.threads, ring_bytes)
            if occupancy < 1:
                raise ValueError(f"stages={stages} needs {ring_bytes} B of shared memory: no block fits on an SM")
        num_tiles = -(-x.numel() // config.tile_floats)
        self.grid = schedule.grid(num_tiles, loader.num_sms())
        self.args = (x.data_ptr(), y.data_ptr(), np.int64(x.numel()), np.int32(schedule.run))
        self.info = kernel_info(module, config, stages, resident=occupancy, occupancy=occupancy, grid=self.grid)
        self.info.smem_total = self.smem_bytes + module.resources()[self.name_expression].get("static_smem", 0)

    def __call__(self) -> None:
        loader.launch(self.kernel, self.grid, self.config.threads, self.smem_bytes, *self.args)


def describe(
    build: Callable[..., loader.CompiledModule],
    arch: str,
    config: StreamConfig,
    stages: tuple[int, ...],
    smem_overhead: int = 0,
) -> dict[int, KernelInfo]:
    """Without a GPU: each depth's KernelInfo from a cubin built for ``arch`` (``build(arch, config)``)."""
    module = build(arch, config)
    return {s: kernel_info(module, config, s, smem_overhead=smem_overhead) for s in stages}


class Ring:
    """A streaming .cu ring's host side (suite.ptx.vector, suite.ptx.vector_bulk): ``source`` compiled at every depth
    of ``stages`` per configuration (``bandwidth`` unless another is given), described without a GPU, its inputs
    checked and its launches bound. ``smem_overhead``: dynamic shared memory besides the ring's stages (barriers);
    ``needs``: (what, compute capability) when the ring needs a newer GPU than sm_80."""

    def __init__(
        self,
        source: Path,
        stages: tuple[int, ...],
        bandwidth: StreamConfig,
        smem_overhead: int = 0,
        needs: tuple[str, tuple[int, int]] | None = None,
    ):
        self.source, self.stages, self.bandwidth = source, stages, bandwidth
        self.smem_overhead, self.needs = smem_overhead, needs
        self.build = functools.cache(self._build)  # cached per call, as a module's @functools.cache build

    def _build(self, arch: str | None = None, config: StreamConfig | None = None) -> loader.CompiledModule:
        """Every depth's instantiation for one configuration, compiled for ``arch`` (default: the current GPU)."""
        config = config or self.bandwidth
        return loader.compile_cu(self.source, tuple(config.name_expression(s) for s in self.stages), arch=arch)

    def describe(self, arch: str, config: StreamConfig, stages: tuple[int, ...] | None = None) -> dict[int, KernelInfo]:
        """Without a GPU: each depth's KernelInfo from a cubin built for ``arch``."""
        stages = self.stages if stages is None else stages
        return describe(self.build, arch, config, stages, smem_overhead=self.smem_overhead)

    def check_inputs(self, x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
        check_stages(stages, self.stages)
        check_vector_operands(x, y)  # includes the 16-byte alignment the copies need
        check_cuda(("x", x), ("y", y))
        if self.needs:
            what, least = self.needs
            cc = torch.cuda.get_device_capability(x.device)
            if cc < least:
                raise ValueError(
                    f"{what} needs compute capability >= {least[0]}.{least[1]} (this GPU: {cc[0]}.{cc[1]})"
                )

    def launcher(self, x: torch.Tensor, y: torch.Tensor, stages: int, config: StreamConfig | None = None) -> Launcher:
        """Bound to (x, y, stages, config): ``launcher(x, y, 3)()`` writes y = 2 * x on torch's current stream."""
        self.check_inputs(x, y, stages)
        config = config or self.bandwidth
        return Launcher(self.build(None, config), config, stages, x, y, smem_overhead=self.smem_overhead)

    def scale2(
        self, x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None, config: StreamConfig | None = None
    ) -> torch.Tensor:
        """y = 2 * x with the STAGES-deep ring; allocates y unless ``out`` is given."""
        y = torch.empty_like(x) if out is None else out
        self.launcher(x, y, stages, config)()
        return y


class StreamKernel(NvrtcModule):
    """A streaming kernel module (suite.ptx.vector, suite.ptx.vector_bulk) at one configuration, as the kernel-module
    contract (suite.kernel) states it: its stages, launcher, SASS and sanitizer sizes, for the registry."""

    def __init__(
        self,
        module,
        stream_config,
        stages: tuple[int, ...],
        sass_requires,
        archs=("sm_80", "sm_90"),
        sanitize_sizes: tuple[int, ...] | None = None,
        sanitizer_blind_spots: dict[str, str] | None = None,
    ):
        self.module, self.stream_config = module, stream_config
        self.source = module.SOURCE
        self.stages = tuple(stages)
        self.threads = stream_config.threads
        self.stage_bytes = stream_config.tile_bytes
        self.sass_requires = sass_requires
        self.archs = archs
        # default: several tiles and a ragged tail; () keeps the configuration out of compute-sanitizer runs
        self.sanitize_sizes = (3 * stream_config.tile_floats + 5,) if sanitize_sizes is None else tuple(sanitize_sizes)
        self.sanitizer_blind_spots = dict(sanitizer_blind_spots or {})

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return (self.stream_config.name_expression(stages),)

    def build(self, arch: str | None = None):
        """The cubin its launches load: the module's build of this configuration (every depth it compiles)."""
        return self.module.build(arch, self.stream_config)

    def config(self) -> str:
        return self.stream_config.describe()

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        return self.module.Scale2(inputs[0], out, stages, self.stream_config)

    def describe(self, arch: str, dtype: str | None = None) -> dict[int, KernelInfo]:
        return self.module.describe(arch, self.stream_config, self.stages)


# The depth sweep's persistent grid has one block per SM: for the ring to wrap under compute-sanitizer, every block
# must stream more tiles than the deepest ring. Sized for up to this many SMs (an H200 has 132).
SANITIZE_WRAP_SMS = 144


def kernels_of(module, sass_requires, archs=("sm_80", "sm_90"), sanitizer_blind_spots=None) -> dict[str, StreamKernel]:
    """A streaming module's kernel modules, as the registry names them (suite/variants.py): "bandwidth", its
    BANDWIDTH configuration at the headline depth, and one per depth-sweep tile ("2KiB", ...) at every stage count
    whose ring fits. Under compute-sanitizer every depth configuration runs a few tiles with a ragged tail; the
    smallest tile also runs long enough for every block's ring to wrap at its deepest stage count."""
    from suite.streaming import BANDWIDTH_STAGES, depth_stages, kib

    kernels = {
        "bandwidth": StreamKernel(
            module,
            module.BANDWIDTH,
            BANDWIDTH_STAGES,
            sass_requires,
            archs,
            sanitizer_blind_spots=sanitizer_blind_spots,
        )
    }
    smallest = min(module.DEPTH_TILE_BYTES)
    for tile in module.DEPTH_TILE_BYTES:
        config, stages = module.depth(tile), depth_stages(tile)
        sizes = (3 * config.tile_floats + 5,)
        if tile == smallest:
            sizes += (SANITIZE_WRAP_SMS * (max(stages) + 2) * config.tile_floats + 5,)
        kernels[kib(tile).replace(" ", "")] = StreamKernel(
            module,
            config,
            stages,
            sass_requires,
            archs,
            sanitize_sizes=sizes,
            sanitizer_blind_spots=sanitizer_blind_spots,
        )
    return kernels
