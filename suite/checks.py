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
