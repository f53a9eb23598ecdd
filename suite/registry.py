"""The variant registry: one registration per (problem, backend, kernel), each with the stage counts it sweeps.

A variant's factory takes (inputs, out, stages) and returns a zero-argument callable that writes ``out``; all
compilation and setup happen in the factory, outside anything the driver times. If the callable has an ``info``
attribute (suite.info.KernelInfo), the driver reports it. Gates say when a variant can run here.

Two ways to register: ``register_kernel`` names a kernel module (suite.kernel), from which the stage sweep, the
launcher, the description without a GPU, the sanitizer's launches and the CPU tests all derive; ``@register`` takes
a plain factory (a library call, or a kernel that states nothing more).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch

from suite.info import KernelInfo
from suite.problems import PROBLEMS, Inputs

if TYPE_CHECKING:
    from suite.kernel import KernelModule

Factory = Callable[[Inputs, torch.Tensor, "int | None"], Callable[[], None]]


# ---------------------------------------------------------------------------------------------------------------
# Gates: each returns None when the variant can run here, else the reason it cannot.
# ---------------------------------------------------------------------------------------------------------------


def anywhere() -> str | None:
    return None


def needs_gpu(min_capability: tuple[int, int] = (8, 0)) -> Callable[[], str | None]:
    def gate() -> str | None:
        if not torch.cuda.is_available():
            return "needs a CUDA GPU"
        cc = torch.cuda.get_device_capability()
        if cc < min_capability:
            return f"needs compute capability >= {min_capability[0]}.{min_capability[1]} (this GPU: {cc[0]}.{cc[1]})"
        return None

    gate.__doc__ = f"a CUDA GPU of compute capability >= {min_capability[0]}.{min_capability[1]}"
    return gate


def needs_sm90a() -> str | None:
    """Kernels built for sm_90a (wgmma, setmaxnreg): that code runs on compute capability 9.0 exactly."""
    if not torch.cuda.is_available():
        return "needs a CUDA GPU of compute capability 9.0 (sm_90a: wgmma, setmaxnreg)"
    cc = torch.cuda.get_device_capability()
    if cc != (9, 0):
        return f"needs compute capability 9.0 exactly: sm_90a code (wgmma, setmaxnreg) (this GPU: {cc[0]}.{cc[1]})"
    return None


def gpu_or_interpreter() -> str | None:
    if torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return "needs a CUDA GPU or TRITON_INTERPRET=1"


gpu_or_interpreter.__doc__ = "a CUDA GPU, or the Triton interpreter (TRITON_INTERPRET=1) on the CPU"
anywhere.__doc__ = "any device torch runs on"


@dataclass(frozen=True)
class Variant:
    problem: str
    backend: str  # "torch", "triton", "ptx", "cuda", or a plugin's own
    name: str
    factory: Factory
    # The stage counts it is swept over; (None,) when it has no stage parameter; None: its kernel module's.
    declared_stages: tuple | None = (None,)
    baseline: bool = False  # the library implementation the kernels are compared with
    ceiling: bool = False  # the throughput ceiling the ratios are taken against
    gate: Callable[[], str | None] = anywhere
    # A reference other than the problem's own (a ceiling such as copy_ computes something else).
    reference: Callable[[Inputs], torch.Tensor] | None = None
    # Without a GPU: compile for an explicit arch and describe each stage's kernel; None: its kernel module's, if any.
    declared_describe: Callable[[str], dict[int, KernelInfo]] | None = None
    description: str = ""
    # Variants of one group are tabulated together, apart from the problem's other variants (e.g. the depth sweep of
    # one tile size); "" is the problem's main table.
    group: str = ""
    # Its kernel module (suite.kernel.KernelModule), or where to import it from: "package.module:NAME".
    kernel_ref: Any = None

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.name}"

    @property
    def kernel(self) -> "KernelModule | None":
        """The kernel module this variant was registered with (imported on first use), or None for a plain
        factory registration."""
        return resolve_kernel(self.kernel_ref) if self.kernel_ref is not None else None

    @property
    def stages(self) -> tuple:
        if self.declared_stages is not None:
            return self.declared_stages
        return tuple(self.kernel.stages)

    @property
    def describe(self) -> Callable[[str], dict[int, KernelInfo]] | None:
        if self.declared_describe is not None or self.kernel_ref is None:
            return self.declared_describe
        return self.kernel.describe

    def skip_reason(self) -> str | None:
        return self.gate()


_REGISTRY: list[Variant] = []
_KERNELS: dict[str, "KernelModule"] = {}


def resolve_kernel(ref) -> "KernelModule":
    """A kernel module given as an object, or as "package.module:NAME" or "package.module:NAME[key]" (imported
    here, once)."""
    if not isinstance(ref, str):
        return ref
    if ref not in _KERNELS:
        module_name, _, attr = ref.partition(":")
        if not attr:
            raise ValueError(f"a kernel reference is 'package.module:NAME' or 'package.module:NAME[key]' (got {ref!r})")
        attr, _, key = attr.partition("[")
        kernel = getattr(importlib.import_module(module_name), attr)
        _KERNELS[ref] = kernel[key.rstrip("]")] if key else kernel  # NAME[key]: one entry of a dict of kernels
    return _KERNELS[ref]


def _add(variant: Variant) -> None:
    if variant.problem not in PROBLEMS:
        raise ValueError(f"unknown problem {variant.problem!r}; known: {sorted(PROBLEMS)}")
    if any((v.problem, v.backend, v.name) == (variant.problem, variant.backend, variant.name) for v in _REGISTRY):
        raise ValueError(f"variant {variant.label} is already registered for {variant.problem}")
    _REGISTRY.append(variant)


def register(
    problem: str,
    backend: str,
    name: str,
    stages: tuple = (None,),
    describe: Callable[[str], dict[int, KernelInfo]] | None = None,
    **kwargs,
) -> Callable[[Factory], Factory]:
    """Decorator: register ``factory`` as a variant (a plain factory registration). Raises on an unknown problem or
    a duplicate (problem, backend, name)."""

    def decorate(factory: Factory) -> Factory:
        _add(Variant(problem, backend, name, factory, tuple(stages), declared_describe=describe, **kwargs))
        return factory

    return decorate


def register_kernel(problem: str, backend: str, name: str, kernel, **kwargs) -> None:
    """Register the variant that runs ``kernel`` (a suite.kernel.KernelModule, or "package.module:NAME", imported
    only when first needed, so that registering compiles nothing and a Triton module sees TRITON_INTERPRET as set
    by whoever runs it). Its stage sweep, launcher and description without a GPU are the kernel module's."""

    def factory(inputs: Inputs, out: torch.Tensor, stages):
        return resolve_kernel(kernel).launch(inputs, out, stages)

    _add(Variant(problem, backend, name, factory, declared_stages=None, kernel_ref=kernel, **kwargs))


def variants(problem: str | None = None, backend: str | None = None) -> list[Variant]:
    """Registered variants, optionally filtered: suite.variants, then the installed plugins (entry point group
    ``pipesuite.variants``), then any loaded with suite.plugins.load_plugins."""
    import suite.variants  # noqa: F401  (the registrations)
    from suite.plugins import load_entry_points

    load_entry_points()

    return [v for v in _REGISTRY if (problem is None or v.problem == problem) and (backend is None or v.backend == backend)]
