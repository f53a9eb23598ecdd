"""The Triton interpreter's ``tl.dot`` on bf16 operands (TRITON_INTERPRET=1 only).

NumPy has no bf16, so the interpreter holds a bf16 tensor as its uint16 bit patterns, and its dot (triton 3.9,
measured here: errors of 1e10 on N(0, 1) inputs) multiplies those integers. ``widen_bf16_dot`` makes the dot widen
bf16 operands to fp32 first, exactly (a bf16 is the upper half of an fp32), which is what the tensor cores multiply.
fp16 and fp8 operands it leaves to the interpreter (it multiplies them right). Where a future interpreter handles bf16
itself, the widened operands are plain fp32 and the result is the same.

Called by the launchers of the GEMM kernels that take bf16 (never at import), and only when the interpreter is on;
patching the interpreter's builder class once per process."""

from __future__ import annotations

import os


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
