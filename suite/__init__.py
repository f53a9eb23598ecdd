"""pipesuite: Triton and hand-written inline-PTX kernels side by side, per software-pipeline depth."""


def gemm(a, b, backend: str = "ptx", out=None, scales=None):
    """C = A @ B with the kernel suite.gemm_rule picks for the shape (the ``auto`` rows), launched on the current
    stream; returns C. fp16 / bf16: A (M x K) and B (K x N), C of A's type. fp8 e4m3: B given as N x K (K-major) and
    ``scales`` = (scale_a, scale_b), 0-dim fp32 tensors; C in bf16. ``out``: C's tensor (else a new one). Raises
    ValueError naming the rule broken before any launch. Imports its backend on first call (``import suite`` stays
    cheap)."""
    if backend not in ("ptx", "triton"):
        raise ValueError(f"backend must be 'ptx' or 'triton', not {backend!r}")
    import contextlib

    import torch

    from suite.problems import PROBLEMS

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise ValueError("a and b must be torch tensors")
    if backend == "ptx" and not (a.is_cuda and b.is_cuda):
        raise ValueError("backend 'ptx' needs CUDA tensors (the Triton backend also runs in its interpreter)")
    fp8 = a.dtype == torch.float8_e4m3fn
    if fp8 != (scales is not None):
        raise ValueError("scales=(scale_a, scale_b) are given with fp8 e4m3 inputs, and only with them")
    inputs = (a, b, *scales) if fp8 else (a, b)
    if out is None:
        if a.dim() != 2 or b.dim() != 2:
            raise ValueError("a and b must be rank 2 (matrices)")
        out = PROBLEMS["gemm"].make_output(inputs)
    if backend == "ptx":
        from suite.ptx.gemm_auto import KERNEL
    else:
        from suite.triton.gemm_auto import KERNEL
    # the rule reads the GPU's SM count and the launch takes the current stream: both the tensors' device's
    with torch.cuda.device(a.device) if a.is_cuda else contextlib.nullcontext():
        KERNEL.launch(inputs, out, None)()
    return out
