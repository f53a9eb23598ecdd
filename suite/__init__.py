"""pipesuite: Triton and hand-written inline-PTX kernels side by side, per software-pipeline depth."""


def gemm(a, b, backend: str = "ptx", out=None, scales=None):
    """C = A @ B with the kernel suite.gemm_rule picks for the shape (the ``auto`` rows), launched on the current
    stream; returns C.

    * fp16 / bf16: A (M x K) and B (K x N), C of A's type.
    * fp8 e4m3 (``torch.float8_e4m3fn``): B given as N x K (K-major) and ``scales`` = (scale_a, scale_b), one fp32
      element each; C in bf16.
    * A, B and ``out``: contiguous, each starting on a 16-byte boundary (TMA's rule; ``.contiguous()`` first for a
      view that is not). ``out``: C's tensor (else a new one); it must not overlap an input.
    * No backward: under autograd (grad mode on), inputs that require grad are refused; call it under
      ``torch.no_grad()`` or pass detached tensors.
    * ``backend="ptx"`` needs CUDA tensors and an sm_90 GPU. ``backend="triton"`` also takes CPU tensors when
      ``TRITON_INTERPRET=1`` was set before the first call (Triton's interpreter: slow, for small sizes).

    Raises ValueError naming the rule broken before any launch. Imports its backend on first call (``import suite``
    stays cheap)."""
    if backend not in ("ptx", "triton"):
        raise ValueError(f"backend must be 'ptx' or 'triton', not {backend!r}")
    import contextlib
    import os

    import torch

    from suite.checks import GEMM_TORCH_DTYPES, check_no_overlap, check_shape, check_tensor
    from suite.problems import gemm_output_dtype

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise ValueError("a and b must be torch tensors")
    if a.dtype not in GEMM_TORCH_DTYPES.values():
        names = ", ".join(str(t) for t in GEMM_TORCH_DTYPES.values())
        raise ValueError(f"a must have dtype {names} (got {a.dtype})")
    if b.dtype != a.dtype:
        raise ValueError(f"a and b must have the same dtype (a is {a.dtype}, b is {b.dtype})")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be rank 2 (matrices; got shapes {tuple(a.shape)} and {tuple(b.shape)})")
    if a.device.type not in ("cuda", "cpu") or b.device.type not in ("cuda", "cpu"):
        raise ValueError(f"a and b must be CUDA or CPU tensors (got a on {a.device}, b on {b.device})")
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        raise ValueError(
            "a and b must not require grad: suite.gemm has no backward (call it under torch.no_grad(), or detach them)"
        )
    fp8 = a.dtype == torch.float8_e4m3fn
    if fp8 and scales is None:
        raise ValueError("fp8 e4m3 inputs need scales=(scale_a, scale_b): one fp32 element each")
    if not fp8 and scales is not None:
        raise ValueError(f"scales are for fp8 e4m3 inputs only (a and b are {a.dtype})")
    if fp8 and (
        not isinstance(scales, (tuple, list))
        or len(scales) != 2
        or not all(isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.numel() == 1 for s in scales)
    ):
        raise ValueError("scales must be a pair (scale_a, scale_b) of fp32 tensors of one element each")
    if a.device.type != "cuda" or b.device.type != "cuda":
        if backend == "ptx":
            raise ValueError(
                "backend 'ptx' needs CUDA tensors (got a on "
                f"{a.device}, b on {b.device}); CPU tensors run with backend='triton' and TRITON_INTERPRET=1"
            )
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(
                f"CPU tensors (a on {a.device}, b on {b.device}) run only in Triton's interpreter: set "
                "TRITON_INTERPRET=1 before the first call, or pass CUDA tensors"
            )
    inputs = (a, b, *scales) if fp8 else (a, b)
    m, n = a.shape[0], b.shape[0] if fp8 else b.shape[1]
    if out is None:
        out = torch.empty(m, n, dtype=gemm_output_dtype(a.dtype), device=a.device)
    else:
        for name, t in (("a", a), ("b", b)):  # contiguous and aligned first: the overlap check reads byte ranges
            check_tensor(t, name, dtype=a.dtype, ndim=2)
        check_tensor(out, "out", dtype=gemm_output_dtype(a.dtype), ndim=2)
        check_shape(out, "out", (m, n))
        if out.device != a.device:
            raise ValueError(f"out must be on a's device, {a.device} (got {out.device})")
        check_no_overlap("out", out, *zip(("a", "b", "scale_a", "scale_b"), inputs))
    if backend == "ptx":
        from suite.ptx.gemm_auto import KERNEL
    else:
        from suite.triton.gemm_auto import KERNEL

        if not a.is_cuda:
            from suite.triton import interpreter_compat

            if compiled := interpreter_compat.compiled_kernels():
                raise ValueError(
                    f"CPU tensors run only in Triton's interpreter, and {compiled[0]} (of {len(compiled)} kernels) was "
                    "defined before TRITON_INTERPRET=1 was set: set it before the first call (or first import of "
                    "suite.triton)"
                )
            interpreter_compat.install()
    # the rule reads the GPU's SM count and the launch takes the current stream: both the tensors' device's
    with torch.cuda.device(a.device) if a.is_cuda else contextlib.nullcontext():
        KERNEL.launch(inputs, out, None)()
    return out
