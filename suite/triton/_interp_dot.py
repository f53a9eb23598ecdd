"""The Triton interpreter's ``tl.dot`` on bf16 and fp8 operands (TRITON_INTERPRET=1 only).

NumPy has no bf16, so the interpreter holds a bf16 tensor as its uint16 bit patterns, and its dot multiplies those
integers. ``widen_bf16_dot`` makes the dot widen
bf16 operands to fp32 first, exactly (a bf16 is the upper half of an fp32), which is what the tensor cores multiply.
fp16 and fp8 operands it leaves to the interpreter (it multiplies them right). Where a future interpreter handles bf16
itself, the widened operands are plain fp32 and the result is the same.

Called by the launchers of the GEMM kernels that take bf16 (never at import), and only when the interpreter is on;
patching the interpreter's builder class once per process.

fp8 e4m3 the interpreter of triton 3.9 multiplies right (it widens e4m3 to fp16, exactly). Another version's may
not: ``fp8_dot_unsupported`` says so, once per process, from a 16 x 16 product, and the GEMM modules give it as
their fp8 rows' skip reason (``KernelModule.skip_reason``) instead of failing them."""

from __future__ import annotations

import functools
import os

import triton
import triton.language as tl


def widen_bf16_dot() -> bool:
    """Install the widening (once); returns whether the interpreter is on."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_pipesuite_widens_bf16", False):
        return True
    original = builder.create_dot

    def widened(handle):
        if getattr(handle.dtype, "scalar", handle.dtype) != tl.bfloat16:
            return handle
        bits = np.ascontiguousarray(handle.data).astype(np.uint32) << 16
        return interpreter.TensorHandle(bits.view(np.float32), tl.float32)

    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widened(a), widened(b), d, *args, **kwargs)

    create_dot._pipesuite_widens_bf16 = True
    builder.create_dot = create_dot
    return True


@triton.jit
def _fp8_dot_kernel(a, b, c):
    r = tl.arange(0, 16)
    x = tl.load(a + r[:, None] * 16 + r[None, :])
    y = tl.load(b + r[:, None] * 16 + r[None, :])
    tl.store(c + r[:, None] * 16 + r[None, :], tl.dot(x, y.T))


@functools.cache
def fp8_dot_unsupported() -> str | None:
    """Why this process's Triton interpreter cannot run an fp8 e4m3 ``tl.dot`` (an error, or a wrong product), or
    None: it can, or the interpreter is off (a GPU compiles fp8 natively)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return None
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(16, 16, generator=g).to(torch.float8_e4m3fn)
    c = torch.full((16, 16), float("nan"))
    try:
        _fp8_dot_kernel[(1,)](a, b, c)
    except Exception as e:  # noqa: BLE001 (whatever the interpreter raises is the reason)
        return f"this Triton's interpreter cannot run an fp8 tl.dot ({type(e).__name__}: {str(e)[:200]})"
    if not torch.allclose(c, a.float() @ b.float().t(), rtol=1e-5, atol=1e-4):
        return "this Triton's interpreter computes an fp8 tl.dot wrong (checked on a 16 x 16 product)"
    return None
