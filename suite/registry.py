"""The variant registry: one registration per (problem, backend, kernel), each naming its kernel module.

Every variant, a hand-written kernel or a library call, is registered the same way: ``register_kernel`` names a
kernel module (suite.kernel.KernelModule), from which its stage sweep, its data types, its launcher, its
description without a GPU, the sanitizer's launches and the CPU tests all derive. A variant's factory takes
(inputs, out, stages) and returns a zero-argument callable that writes ``out``; all compilation and setup happen in
the factory, outside anything the driver times. If the callable has an ``info`` attribute (suite.info.KernelInfo),
the driver reports it. Gates say when a variant can run here.
"""

from __future__ import annotations

from suite.registration import (
    Factory,
    KernelLoadError,
    Variant,
    anywhere,
    gpu_or_interpreter,
    needs_gpu,
    needs_sm90a,
    register_kernel,
    registered,
    resolve_kernel,
)

__all__ = [
    "Factory",
    "KernelLoadError",
    "Variant",
    "anywhere",
    "gpu_or_interpreter",
    "needs_gpu",
    "needs_sm90a",
    "register_kernel",
    "resolve_kernel",
    "variants",
]


def variants(problem: str | None = None, backend: str | None = None) -> list[Variant]:
    """Registered variants, optionally filtered: suite.variants, then the installed plugins (entry point group
    ``pipesuite.variants``), then any loaded with suite.plugins.load_plugins."""
    from suite import plugins

    plugins.load_builtin()
    return registered(problem, backend)
