"""Every registered variant. Adding one is a kernel module plus one registration here.

A kernel is named by "package.module:NAME" and imported on first use (as are the modules a plain factory imports
inside itself), so importing this file compiles and launches nothing, and the Triton modules see TRITON_INTERPRET
as set by whoever runs them.
"""

from __future__ import annotations

import torch

from suite.registry import anywhere, gpu_or_interpreter, needs_gpu, register, register_kernel

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


register_kernel(
    "vector", "triton", "tile loop", "suite.triton.vector:KERNEL", gate=gpu_or_interpreter,
    description="each program loops over 2 tiles of 32 KiB, tl.range(num_stages=S)",
)

register_kernel(
    "vector", "cuda", "cuda::pipeline ring", "suite.cuda.vector:KERNEL", gate=needs_gpu((8, 0)),
    description="the PTX ring's tiles and grid, copies through cuda::memcpy_async into a cuda::pipeline (libcu++)",
)

register_kernel(
    "vector", "ptx", "cp.async ring", "suite.ptx.vector:KERNEL", gate=needs_gpu((8, 0)),
    description="each block streams 2 tiles of 32 KiB through a STAGES-deep cp.async shared-memory ring",
)

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


register_kernel(
    "gemm", "triton", "128x256x32", "suite.triton.gemm:KERNEL", gate=gpu_or_interpreter,
    description="the PTX kernel's tile: 128x256x32, 8 warps, GROUP_M=8, swept over num_stages",
)


@register(
    "gemm", "triton", "tuned", gate=needs_gpu((8, 0)),
    description="triton.autotune over a few Hopper-friendly tiles and depths (suite.triton.gemm.tuning_configs)",
)
def triton_gemm_tuned(inputs, out, stages):
    from suite.triton.gemm import TunedGemm

    return TunedGemm(*inputs, out)


register_kernel(
    "gemm", "cuda", "128x256x32 cuda::pipeline", "suite.cuda.gemm:GEMM_K32", gate=needs_gpu((8, 0)),
    description="the PTX kernel's tile, ldmatrix and mma.sync; global -> shared through cuda::memcpy_async and a "
                "cuda::pipeline (libcu++)",
)

register_kernel(
    "gemm", "ptx", "128x256x32 mma.sync", "suite.ptx.gemm:GEMM_K32", gate=needs_gpu((8, 0)),
    description="the seed's design: cp.async ring, ldmatrix into 2 register slots, mma.sync m16n8k16, 8 warps 2x4",
)

register_kernel(
    "gemm", "ptx", "128x256x64 mma.sync", "suite.ptx.gemm:GEMM_K64", gate=needs_gpu((8, 0)),
    description="the same pipeline with BLOCK_K = 64: one block barrier per 4 k-steps instead of per 2",
)
