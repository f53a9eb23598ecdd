"""Input rules shared by the kernels of both backends. Each check raises ValueError naming the rule it enforces,
before anything is launched."""

from __future__ import annotations

from dataclasses import dataclass

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


def canonical(t: torch.Tensor) -> torch.Tensor:
    """A contiguous ``t`` with the strides of a contiguous tensor of its shape (the same memory, a view): torch calls
    a tensor contiguous whatever the stride of a dimension of size 1 (``x[:, :4096]`` of a 1 x 4100 tensor keeps its
    row pitch of 4100), and a descriptor built from that stride would describe another layout."""
    strides, step = [], 1
    for size in reversed(t.shape):
        strides.append(step)
        step *= max(size, 1)
    strides = tuple(reversed(strides))
    return t if t.stride() == strides else t.as_strided(t.shape, strides)


def check_same_device(*named: tuple[str, torch.Tensor]) -> None:
    devices = {t.device for _, t in named}
    if len(devices) > 1:
        raise ValueError(
            "all tensors must be on one device (got " + ", ".join(f"{n}: {t.device}" for n, t in named) + ")"
        )


def check_shape(t: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {tuple(t.shape)})")


def _byte_span(t: torch.Tensor) -> tuple[int, int] | None:
    """[first, last + 1) of the bytes ``t`` addresses; None for a tensor with no elements or no memory (meta)."""
    if t.numel() == 0 or t.device.type == "meta":
        return None
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def check_no_overlap(out_name: str, out: torch.Tensor, *named: tuple[str, torch.Tensor]) -> None:
    """``out`` must share no byte with an input: a kernel reads its inputs while it writes its output, so an output
    laid over an input would read what it had already written (conservative for strided views: byte ranges)."""
    span = _byte_span(out)
    for name, t in named:
        other = _byte_span(t) if t.device == out.device else None
        if span and other and span[0] < other[1] and other[0] < span[1]:
            raise ValueError(f"{out_name} must not overlap {name} (the kernel reads {name} while it writes {out_name})")


def check_cuda(*named: tuple[str, torch.Tensor]) -> None:
    """Every tensor must live on a CUDA device (the PTX backend launches on the GPU, never on host memory)."""
    for name, t in named:
        if t.device.type != "cuda":
            raise ValueError(f"{name} must be a CUDA tensor for this backend (got device {t.device})")


def check_stages(stages, allowed: tuple[int, ...]) -> None:
    if stages not in allowed:
        raise ValueError(f"stages must be one of {allowed} (got {stages})")


def check_vector_operands(x: torch.Tensor, y: torch.Tensor) -> None:
    """y = 2 * x: x and y fp32, 1-D, contiguous, 16-byte aligned, same device and shape, at least one element, y
    apart from x (a block's tile may be read after another block wrote over it)."""
    check_tensor(x, "x", dtype=torch.float32, ndim=1)
    check_tensor(y, "y", dtype=torch.float32, ndim=1)
    check_same_device(("x", x), ("y", y))
    check_shape(y, "y", tuple(x.shape))
    if x.numel() < 1:
        raise ValueError("x must hold at least one element")
    check_no_overlap("y", y, ("x", x))


def check_gemm_operands(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, dtype: torch.dtype = torch.float16
) -> tuple[int, int, int]:
    """C = A @ B: ``dtype`` in and out, 2-D, contiguous, 16-byte aligned, same device, A (M x K), B (K x N),
    C (M x N), all >= 1, C apart from A and B. Returns (M, N, K)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype != b.dtype:
        raise ValueError(f"a and b must have the same dtype (a is {a.dtype}, b is {b.dtype})")
    for name, t in (("a", a), ("b", b), ("c", c)):
        check_tensor(t, name, dtype=dtype, ndim=2)
    check_same_device(("a", a), ("b", b), ("c", c))
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"a's columns must equal b's rows (a is {m}x{k}, b is {kb}x{n})")
    check_shape(c, "c", (m, n))
    if min(m, n, k) < 1:
        raise ValueError(f"M, N and K must be >= 1 (got M={m}, N={n}, K={k})")
    check_no_overlap("c", c, ("a", a), ("b", b))
    return m, n, k


GEMM_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8e4m3": torch.float8_e4m3fn}


@dataclass(frozen=True)
class GemmOperands:
    """The checked operands of C = A @ B in one of the GEMM problem's dtypes (suite.problems.GEMM_DTYPES)."""

    a: torch.Tensor  # M x K
    b: torch.Tensor  # K x N (fp16, bf16), or N x K, K-major (fp8e4m3)
    c: torch.Tensor  # M x N: fp16 for fp16 inputs, bf16 otherwise
    m: int
    n: int
    k: int
    dtype: str  # "fp16", "bf16", "fp8e4m3"
    scale_a: torch.Tensor | None = None  # fp8: per-tensor scales, one fp32 element each; C = (A @ B^T) x both
    scale_b: torch.Tensor | None = None

    @property
    def b_k_major(self) -> bool:
        return self.dtype == "fp8e4m3"


def gemm_operands(inputs: tuple, c: torch.Tensor, dtypes: tuple[str, ...] = ("fp16",)) -> GemmOperands:
    """Check a GEMM's inputs and output before anything is launched, for a kernel that implements ``dtypes``; a
    ValueError names the rule broken:

    * the dtype is one the kernel implements;
    * fp16 / bf16: (A, B) with B as K x N; output of the same type;
    * fp8e4m3: (A, B, scale_a, scale_b) with B as N x K, K-major (contiguous), and per-tensor scales (one fp32
      element each); bf16 output;
    * as every GEMM: 2-D, contiguous, 16-byte aligned, one device, matching sizes, all >= 1, C apart from every
      input.

    The operands come back ``canonical``: a dimension of size 1 with another stride is described by its shape."""
    if not isinstance(inputs, (tuple, list)) or not inputs or not isinstance(inputs[0], torch.Tensor):
        raise ValueError("a GEMM takes (a, b) or, for fp8, (a, b, scale_a, scale_b)")
    a = inputs[0]
    dtype = next((name for name, t in GEMM_TORCH_DTYPES.items() if a.dtype == t), str(a.dtype))
    if dtype not in dtypes:
        raise ValueError(f"dtype {dtype} is not implemented by this kernel (it implements {', '.join(dtypes)})")
    if dtype != "fp8e4m3":
        if len(inputs) != 2:
            raise ValueError(
                f"a {dtype} GEMM takes (a, b): per-tensor scales are for fp8 operands only (got {len(inputs)} inputs)"
            )
        m, n, k = check_gemm_operands(a, inputs[1], c, GEMM_TORCH_DTYPES[dtype])
        return GemmOperands(canonical(a), canonical(inputs[1]), canonical(c), m, n, k, dtype)
    if len(inputs) != 4:
        raise ValueError(
            "an fp8 operand needs its scale: an fp8 GEMM takes (a, b, scale_a, scale_b), per-tensor "
            f"fp32 scales (got {len(inputs)} inputs)"
        )
    b, scale_a, scale_b = inputs[1:]
    if isinstance(b, torch.Tensor) and b.dim() == 2 and b.shape[1] != a.shape[-1]:
        raise ValueError(
            f"fp8 B must be given as N x K (K-major, as wgmma and torch._scaled_mm take it): b is "
            f"{tuple(b.shape)} but K = {a.shape[-1]}"
        )
    for name, t in (("a", a), ("b", b)):
        check_tensor(t, name, dtype=torch.float8_e4m3fn, ndim=2)
    check_tensor(c, "c", dtype=torch.bfloat16, ndim=2)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(s, torch.Tensor) or s.dtype != torch.float32 or s.numel() != 1:
            raise ValueError(
                f"{name} must be a per-tensor scale: one fp32 element (got "
                f"{tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__}"
                f"{' ' + str(s.dtype) if isinstance(s, torch.Tensor) else ''})"
            )
    check_same_device(("a", a), ("b", b), ("c", c), ("scale_a", scale_a), ("scale_b", scale_b))
    (m, k), n = a.shape, b.shape[0]
    check_shape(c, "c", (m, n))
    if min(m, n, k) < 1:
        raise ValueError(f"M, N and K must be >= 1 (got M={m}, N={n}, K={k})")
    check_no_overlap("c", c, ("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b))
    return GemmOperands(canonical(a), canonical(b), canonical(c), m, n, k, dtype, scale_a, scale_b)
