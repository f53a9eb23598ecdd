"""FlashAttention-4 (the ``flash-attn-4`` package: FlashAttention in the CuTe DSL, with Hopper and Blackwell forward
kernels) as an optional library row of the attention problem: ``pip install 'pipesuite[fa4]'``. Without the package
the row is listed and skipped, saying so.

The problem's tensors are batch x heads x seq x head_dim; ``flash_attn_func`` takes batch x seq x heads x head_dim,
so it gets transposed views (the last dimension stays contiguous, which is all it asks), GQA as it is (fewer K / V
heads), the softmax scale 1 / sqrt(d) (its default) and the causal mask aligned bottom-right, as the problem aligns
it. Its first call compiles the kernel for the shape (the DSL's JIT) in the factory, outside any timed call.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util

import torch

from suite.attention_problem import attention_operands
from suite.ceilings import out_of_memory
from suite.info import KernelInfo

PACKAGE = "flash-attn-4"
MODULE = "flash_attn.cute"


def available() -> str | None:
    """The row's gate (its docstring is what ``--list`` says the row runs on)."""
    if not torch.cuda.is_available():
        return "needs a CUDA GPU"
    if torch.cuda.get_device_capability() < (9, 0):
        return "FlashAttention-4's forward kernels are Hopper's and Blackwell's (compute capability >= 9.0)"
    try:  # finding flash_attn.cute imports flash_attn: another, broken flash_attn install raises here
        found = importlib.util.find_spec("flash_attn") is not None and importlib.util.find_spec(MODULE) is not None
    except Exception as e:  # noqa: BLE001 - the gate says why, it does not fail the listing
        return f"importing flash_attn failed ({type(e).__name__}: {e})"
    if not found:
        return f"the optional {PACKAGE} package is not installed (pip install 'pipesuite[fa4]')"
    try:  # found is not importable: the CuTe DSL's cutlass package is put on sys.path by a .pth file, which only a site
        # directory reads (a --target install reached through PYTHONPATH has flash_attn but no cutlass)
        importlib.import_module(MODULE)
    except Exception as e:  # noqa: BLE001 - the gate says why, it does not fail the listing
        return f"importing {MODULE} failed ({type(e).__name__}: {e})"
    return None


available.__doc__ = f"a CUDA GPU of compute capability >= 9.0 with the optional {PACKAGE} package"


def _installed_version() -> str:
    """The package's version as installed (a row's config names it: the library's kernels change between betas)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:  # importable without its metadata (a path, a source tree)
        return "(version unknown)"


def fa4(inputs, out):
    """The LibraryOp function: FlashAttention-4's forward at these inputs. Like SDPA it has no ``out=`` in its public
    call: the result reaches the problem's output on the first call (the one validation checks), and later calls leave
    it in the library's own tensor, as any caller's would."""
    from flash_attn.cute import flash_attn_func

    ops = attention_operands(inputs, out)
    q, k, v = (t.transpose(1, 2) for t in (ops.q, ops.k, ops.v))

    def call():
        result = flash_attn_func(q, k, v, causal=ops.causal)
        return result[0] if isinstance(result, tuple) else result  # (out, lse)

    try:  # compiles for this shape; a shape the library has no kernel for raises here, before any timing
        call()
    except (AssertionError, NotImplementedError, RuntimeError, TypeError) as e:
        if out_of_memory(e):
            raise
        raise ValueError(f"{PACKAGE} has no kernel for these inputs ({type(e).__name__}: {e})") from e
    copied = []

    def run():
        result = call()
        if not copied:
            out.copy_(result.transpose(1, 2))
            copied.append(True)

    gqa = f", GQA {ops.hq} / {ops.hkv} heads native" if ops.group > 1 else ""
    run.info = KernelInfo(config=f"{PACKAGE} {_installed_version()} flash_attn_func on (b, s, h, d) views{gqa}")
    return run
