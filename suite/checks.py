"""Input rules shared by the kernels of both backends. Each check raises ValueError naming the rule it enforces,
before anything is launched."""

from __future__ import annotations

import torch


def check_tensor(
    t,
    name: str,
    *,
    dtype: torch.dtype,
    ndim: int,
    align_bytes: int = 16,
) -> None:
    """``t`` must be a torch.Tensor of ``dtype`` and rank ``ndim``, contiguous, with its data pointer aligned to
    ``align_bytes``."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor (got {type(t).__name__})")
    if t.dtype != dtype:
        raise ValueError(f"{name} must have dtype {dtype} (got {t.dtype})")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have rank {ndim} (got shape {tuple(t.shape)})")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {t.stride()} for shape {tuple(t.shape)})")
    if t.data_ptr() % align_bytes:
        raise ValueError(
            f"{name}'s data must start on a {align_bytes}-byte boundary (storage offset {t.storage_offset()} "
            f"puts it at address {t.data_ptr():#x})"
        )


def check_same_device(*named: tuple[str, torch.Tensor]) -> None:
    devices = {t.device for _, t in named}
    if len(devices) > 1:
        raise ValueError("all tensors must be on one device (got " + ", ".join(f"{n}: {t.device}" for n, t in named) + ")")


def check_shape(t: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {tuple(t.shape)})")


def check_cuda(*named: tuple[str, torch.Tensor]) -> None:
    """Every tensor must live on a CUDA device (the PTX backend launches on the GPU, never on host memory)."""
    for name, t in named:
        if t.device.type != "cuda":
            raise ValueError(f"{name} must be a CUDA tensor for this backend (got device {t.device})")


def check_stages(stages, allowed: tuple[int, ...]) -> None:
    if stages not in allowed:
        raise ValueError(f"stages must be one of {allowed} (got {stages})")


def check_vector_operands(x: torch.Tensor, y: torch.Tensor) -> None:
    """y = 2 * x: x and y fp32, 1-D, contiguous, 16-byte aligned, same device and shape, at least one element."""
    check_tensor(x, "x", dtype=torch.float32, ndim=1)
    check_tensor(y, "y", dtype=torch.float32, ndim=1)
    check_same_device(("x", x), ("y", y))
    check_shape(y, "y", tuple(x.shape))
    if x.numel() < 1:
        raise ValueError("x must hold at least one element")


def check_gemm_operands(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[int, int, int]:
    """C = A @ B: fp16, 2-D, contiguous, 16-byte aligned, same device, A (M x K), B (K x N), C (M x N), all >= 1.
    Returns (M, N, K)."""
    for name, t in (("a", a), ("b", b), ("c", c)):
        check_tensor(t, name, dtype=torch.float16, ndim=2)
    check_same_device(("a", a), ("b", b), ("c", c))
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"a's columns must equal b's rows (a is {m}x{k}, b is {kb}x{n})")
    check_shape(c, "c", (m, n))
    if min(m, n, k) < 1:
        raise ValueError(f"M, N and K must be >= 1 (got M={m}, N={n}, K={k})")
    return m, n, k
