"""Every registered variant. Adding one is a kernel module plus one decorated factory here.

Kernel modules are imported inside the factories, so importing this file compiles and launches nothing, and the
Triton modules see TRITON_INTERPRET as set by whoever runs them.
"""

from __future__ import annotations

import importlib
from typing import Callable

import torch

from suite.info import KernelInfo
from suite.registry import anywhere, gpu_or_interpreter, needs_gpu, needs_sm90a, register


def _describe_ptx(module_name: str, exprs, stage_bytes) -> "callable":
    """describe(arch) for a PTX module: compile it for ``arch`` (no GPU needed) and report each stage's kernel.
    ``exprs(mod, stages)`` names the instantiation, ``stage_bytes(mod)`` its shared memory per stage."""

    def describe(arch: str) -> dict[int, KernelInfo]:
        import importlib

        mod = importlib.import_module(f"suite.ptx.{module_name}")
        built = mod.build(arch)
        return {
            stages: built.kernel_info(exprs(mod, stages), stage_bytes(mod), stages, threads=mod.THREADS,
                                      config=f"{arch} cubin, {exprs(mod, stages)}")
            for stages in mod.STAGES
        }

    return describe


# ---------------------------------------------------------------------------------------------------------------
# vector: y = 2 * x
# ---------------------------------------------------------------------------------------------------------------


@register("vector", "torch", "mul", baseline=True, gate=anywhere, description="torch.mul(x, 2, out=y)")
def torch_vector_mul(inputs, out, stages):
    (x,) = inputs
    return lambda: torch.mul(x, 2, out=out)


@register(
    "vector", "torch", "copy_", ceiling=True, gate=anywhere, reference=lambda inputs: inputs[0],
    description="y.copy_(x): the device-to-device bandwidth ceiling (reads and writes as many bytes as y = 2x)",
)
def torch_vector_copy(inputs, out, stages):
    (x,) = inputs
    return lambda: out.copy_(x)


def _stream_variant(module_name: str, make_config: Callable):
    """(factory, describe) for a streaming kernel module (suite.ptx.vector, suite.ptx.vector_bulk,
    suite.triton.vector) at the configuration ``make_config(module)``: both import the module only when called."""

    def load():
        mod = importlib.import_module(module_name)
        return mod, make_config(mod)

    def factory(inputs, out, stages):
        mod, config = load()
        return mod.Scale2(inputs[0], out, stages, config)

    def describe(arch: str) -> dict[int, KernelInfo]:
        mod, config = load()
        return mod.describe(arch, config)

    return factory, describe


# The bandwidth regime: 1 GiB, each backend's best measured configuration (BANDWIDTH in suite/ptx/vector.py,
# suite/ptx/vector_bulk.py, suite/triton/vector.py), one stage count each: the headline rows against copy_.
BANDWIDTH_VARIANTS = (
    # module, backend, name, stages, gate, description
    ("suite.triton.vector", "triton", "tile loop", 4, gpu_or_interpreter,
     "each program streams 2 tiles of 32 KiB, tl.range(num_stages=4)"),
    ("suite.ptx.vector", "ptx", "cp.async ring", 4, needs_gpu((8, 0)),
     "each block streams 2 tiles of 32 KiB through a 4-deep cp.async shared-memory ring"),
    ("suite.ptx.vector_bulk", "ptx", "bulk ring", 4, needs_gpu((9, 0)),
     "each block streams 2 tiles of 32 KiB through a 4-deep ring of cp.async.bulk copies and mbarriers (Hopper)"),
)

# The depth sweep: persistent grids at one resident block (program) per SM, pinned; tiles of 2-32 KiB; every stage
# count of DEPTH_STAGES whose ring fits the 227 KiB an H100/H200 block may have. One group (table) per tile size.
DEPTH_STAGES = (1, 2, 3, 4, 6, 8)
DEPTH_TILE_KIB = (2, 4, 8, 16, 32)
DEPTH_VARIANTS = (
    # module, backend, name (the tile size is appended), gate, description
    ("suite.triton.vector", "triton", "tile loop", gpu_or_interpreter,
     "one program per SM (grid-pinned), 4 warps, tl.range(num_stages=S) over its tiles"),
    ("suite.ptx.vector", "ptx", "cp.async ring", needs_gpu((8, 0)),
     "one 128-thread block per SM (pinned by shared-memory padding), an S-deep cp.async ring"),
    ("suite.ptx.vector_bulk", "ptx", "bulk ring", needs_gpu((9, 0)),
     "one block per SM (pinned by shared-memory padding), 1 producer + 4 consumer warps, an S-deep "
     "cp.async.bulk + mbarrier ring (Hopper)"),
)
_SMEM_PER_BLOCK_SM90 = 227 * 1024


def _register_vector_sweeps() -> None:
    for module, backend, name, stages, gate, what in BANDWIDTH_VARIANTS:
        factory, describe = _stream_variant(module, lambda mod: mod.BANDWIDTH)
        register("vector", backend, name, stages=(stages,), gate=gate, description=what,
                 describe=None if backend == "triton" else describe)(factory)
    for tile_kib in DEPTH_TILE_KIB:
        tile = tile_kib * 1024
        stages = tuple(s for s in DEPTH_STAGES if 128 + s * tile <= _SMEM_PER_BLOCK_SM90)
        for module, backend, name, gate, what in DEPTH_VARIANTS:
            factory, describe = _stream_variant(module, lambda mod, t=tile: mod.depth(t))
            register("vector", backend, f"{name} {tile_kib}KiB", stages=stages, gate=gate,
                     group=f"depth sweep: {tile_kib} KiB tiles, persistent, 1 block/SM",
                     description=f"{tile_kib} KiB tiles: {what}",
                     describe=None if backend == "triton" else describe)(factory)


_register_vector_sweeps()


# ---------------------------------------------------------------------------------------------------------------
# gemm: C = A @ B, fp16 in, fp32 accumulate, fp16 out
# ---------------------------------------------------------------------------------------------------------------


@register(
    "gemm", "torch", "cuBLAS", baseline=True, ceiling=True, gate=anywhere,
    description="torch.matmul(a, b, out=c)",
)
def torch_gemm(inputs, out, stages):
    a, b = inputs
    return lambda: torch.matmul(a, b, out=out)


@register(
    "gemm", "triton", "128x256x32", stages=(1, 2, 3, 4, 5), gate=gpu_or_interpreter,
    description="the PTX kernel's tile: 128x256x32, 8 warps, GROUP_M=8, swept over num_stages",
)
def triton_gemm(inputs, out, stages):
    from suite.triton.gemm import Gemm

    return Gemm(*inputs, out, stages)


@register(
    "gemm", "triton", "tuned", gate=needs_gpu((9, 0)),
    description="triton.autotune over tiles, depths and both schedules (one program per tile, persistent) of the "
                "tensor-descriptor kernel (suite.triton.gemm_desc.tuning_configs)",
)
def triton_gemm_tuned(inputs, out, stages):
    from suite.triton.gemm_desc import TunedGemm

    return TunedGemm(*inputs, out)


@register(
    "gemm", "ptx", "128x256x32 mma.sync", stages=(1, 2, 3, 4, 5), gate=needs_gpu((8, 0)),
    describe=_describe_ptx("gemm", lambda mod, s: mod.name_expression(s, True, 32), lambda mod: mod.stage_bytes(32)),
    description="the seed's design: cp.async ring, ldmatrix into 2 register slots, mma.sync m16n8k16, 8 warps 2x4",
)
def ptx_gemm(inputs, out, stages):
    from suite.ptx.gemm import Gemm

    return Gemm(*inputs, out, stages, block_k=32)


@register(
    "gemm", "ptx", "128x256x64 mma.sync", stages=(1, 2, 3, 4), gate=needs_gpu((8, 0)),
    describe=_describe_ptx("gemm", lambda mod, s: mod.name_expression(s, True, 64), lambda mod: mod.stage_bytes(64)),
    description="the same pipeline with BLOCK_K = 64: one block barrier per 4 k-steps instead of per 2",
)
def ptx_gemm_k64(inputs, out, stages):
    from suite.ptx.gemm import Gemm

    return Gemm(*inputs, out, stages, block_k=64)


# ---------------------------------------------------------------------------------------------------------------
# gemm on Hopper: TMA + mbarrier + wgmma (PTX), tensor descriptors (Triton)
# ---------------------------------------------------------------------------------------------------------------


def _describe_tma(config_name: str) -> "callable":
    """describe(arch) for a gemm_tma.cu config: always built for sm_90a (wgmma exists only there), whatever arch the
    driver asks for."""

    def describe(arch: str) -> dict[int, KernelInfo]:
        from suite.ptx import gemm_tma

        config = gemm_tma.CONFIGS[config_name]
        built = gemm_tma.build()
        return {
            stages: built.kernel_info(config.name_expression(stages), config.stage_bytes, stages,
                                      threads=config.threads,
                                      config=f"{gemm_tma.ARCH} cubin, {config.name_expression(stages)}")
            for stages in config.stages
        }

    return describe


def _register_tma(config_name: str, description: str) -> None:
    from suite.ptx import gemm_tma  # constants only: importing it compiles nothing

    def factory(inputs, out, s):
        return gemm_tma.Gemm(*inputs, out, gemm_tma.CONFIGS[config_name], s)

    register("gemm", "ptx", f"{config_name} tma+wgmma", stages=gemm_tma.CONFIGS[config_name].stages,
             gate=needs_sm90a, describe=_describe_tma(config_name), description=description)(factory)


# The ladder (suite/ptx/gemm_tma.py CONFIGS): each rung adds one technique; each sweeps every ring that fits.
_register_tma("128x128x64 ws", "TMA into an mbarrier ring (full/empty per stage), wgmma from shared memory; "
              "1 producer warp, 1 consumer warpgroup, setmaxnreg")
_register_tma("128x256x64 ws 2wg", "the same with two consumer warpgroups (64x256 each): twice the tile")
_register_tma("128x256x64 ws 2wg persistent",
              "the same, persistent: one block per SM walks the tiles (grouped), the ring runs on across tiles")
_register_tma("128x256x64 ws 2wg persistent tma-store",
              "the same, its epilogue staged in shared memory and stored with TMA while the next tile starts")


@register(
    "gemm", "triton", "128x256x64 desc", stages=(2, 3), gate=gpu_or_interpreter,
    description="tensor descriptors (TMA on Hopper), one program per tile, 8 warps, swept over num_stages",
)
def triton_gemm_desc(inputs, out, stages):
    from suite.triton.gemm_desc import DescGemm

    return DescGemm(*inputs, out, stages, persistent=False)


@register(
    "gemm", "triton", "128x256x64 desc persistent", stages=(2, 3, 4), gate=gpu_or_interpreter,
    description="tensor descriptors, one program per SM over all tiles (tl.range(..., flatten=True)), 8 warps, "
                "C stored in two halves",
)
def triton_gemm_desc_persistent(inputs, out, stages):
    from suite.triton.gemm_desc import DescGemm

    return DescGemm(*inputs, out, stages, persistent=True)
