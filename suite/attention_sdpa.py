"""torch.nn.functional.scaled_dot_product_attention as the attention problem's library rows: one backend per row
(torch.nn.attention.sdpa_kernel: FlashAttention, cuDNN; the math backend on a CPU), and the ceiling, the faster of
FlashAttention and cuDNN per shape (suite.ceilings.faster_of).

GQA: ``enable_gqa=True`` where the backend takes it; where it has no kernel for it, K and V are expanded to hq heads
once, in the factory (outside the timed call), and the row's config says so. A causal mask with sq != skv is refused:
SDPA's ``is_causal`` aligns the mask top-left, the problem bottom-right (FlashAttention's convention), and a
materialized mask would time another kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from suite.attention_problem import attention_operands
from suite.ceilings import out_of_memory
from suite.info import KernelInfo

BACKENDS = {"flash": "FLASH_ATTENTION", "cuDNN": "CUDNN_ATTENTION", "math": "MATH"}


def refuses(size, dtype: str) -> str | None:
    """The rule every SDPA row shares."""
    _, _, _, sq, skv, _, causal = size
    if causal and sq != skv:
        return (
            "SDPA's is_causal aligns the mask top-left; this problem aligns it bottom-right (FlashAttention's "
            f"convention), which differs when sq != skv (sq={sq}, skv={skv})"
        )
    return None


def cudnn_refuses(size, dtype: str) -> str | None:
    """The shared rule, and the lengths torch's cuDNN dispatch turns away (check_cudnn_tensor_shapes)."""
    if why := refuses(size, dtype):
        return why
    if size[4] == 1:
        return "cuDNN's SDPA takes no key/value length of 1 (skv=1)"
    return None


RULES = {"flash": refuses, "cuDNN": cudnn_refuses, "math": refuses}


def sdpa(backend: str):
    """The LibraryOp function for one SDPA backend ("flash", "cuDNN" or "math")."""

    def op(inputs, out):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ops = attention_operands(inputs, out)
        if why := RULES[backend]((ops.b, ops.hq, ops.hkv, ops.sq, ops.skv, ops.d, ops.causal), ops.dtype):
            raise ValueError(why)
        chosen = [getattr(SDPBackend, BACKENDS[backend])]
        q, k, v, causal = ops.q, ops.k, ops.v, ops.causal

        def call(k, v, gqa):
            with sdpa_kernel(chosen):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        gqa_note = "enable_gqa=True"
        try:
            call(k, v, ops.group > 1)  # a trial call: a backend without a kernel for these inputs says so here
        except RuntimeError as e:
            if ops.group == 1 or out_of_memory(e):
                raise
            k = k.repeat_interleave(ops.group, dim=1)
            v = v.repeat_interleave(ops.group, dim=1)
            gqa_note = f"K and V expanded to {ops.hq} heads before the call ({backend} takes no enable_gqa here)"
            call(k, v, False)
        gqa = ops.group > 1 and k.shape[1] != ops.hq
        copied = []

        def run():
            # SDPA has no out=: its result reaches the problem's output once, on the first call (the one validation
            # checks); later calls leave it in SDPA's own tensor, as any caller of SDPA does, so that the library's
            # time carries no copy of O
            result = call(k, v, gqa)
            if not copied:
                out.copy_(result)
                copied.append(True)

        run.info = KernelInfo(config=f"SDPA {backend}" + (f", {gqa_note}" if ops.group > 1 else ""))
        return run

    return op


def needs_cuda_tensors(dtype: str) -> str | None:
    return None if torch.cuda.is_available() else "FlashAttention and cuDNN run on a CUDA GPU only"


def without_gpu() -> str | None:
    """The math row's gate: a CPU run only."""
    if torch.cuda.is_available():
        return "the unfused math path runs on a CPU only (on a GPU the fused SDPA rows stand for the library)"
    return None


without_gpu.__doc__ = "a machine without a CUDA GPU (the CPU run's library check)"
