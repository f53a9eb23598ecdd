"""The variant registry: one registration per (problem, backend, kernel), each with the stage counts it sweeps.

A variant's factory takes (inputs, out, stages) and returns a zero-argument callable that writes ``out``; all
compilation and setup happen in the factory, outside anything the driver times. If the callable has an ``info``
attribute (suite.info.KernelInfo), the driver reports it. Gates say when a variant can run here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from suite.info import KernelInfo
from suite.problems import PROBLEMS, Inputs

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
    backend: str  # "torch", "triton" or "ptx"
    name: str
    factory: Factory
    stages: tuple  # the stage counts it is swept over; (None,) when it has no stage parameter
    baseline: bool = False  # the library implementation the kernels are compared with
    ceiling: bool = False  # the throughput ceiling the ratios are taken against
    gate: Callable[[], str | None] = anywhere
    # A reference other than the problem's own (a ceiling such as copy_ computes something else).
    reference: Callable[[Inputs], torch.Tensor] | None = None
    # Without a GPU: compile for an explicit arch and describe each stage's kernel (registers, SASS), or None.
    describe: Callable[[str], dict[int, KernelInfo]] | None = None
    description: str = ""
    # Variants of one group are tabulated together, apart from the problem's other variants (e.g. the depth sweep of
    # one tile size); "" is the problem's main table.
    group: str = ""

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.name}"

    def skip_reason(self) -> str | None:
        return self.gate()


_REGISTRY: list[Variant] = []


def register(
    problem: str,
    backend: str,
    name: str,
    stages: tuple = (None,),
    **kwargs,
) -> Callable[[Factory], Factory]:
    """Decorator: register ``factory`` as a variant. Raises on an unknown problem or a duplicate (problem, backend,
    name)."""

    def decorate(factory: Factory) -> Factory:
        if problem not in PROBLEMS:
            raise ValueError(f"unknown problem {problem!r}; known: {sorted(PROBLEMS)}")
        if any((v.problem, v.backend, v.name) == (problem, backend, name) for v in _REGISTRY):
            raise ValueError(f"variant {backend}:{name} is already registered for {problem}")
        _REGISTRY.append(Variant(problem, backend, name, factory, tuple(stages), **kwargs))
        return factory

    return decorate


def variants(problem: str | None = None, backend: str | None = None) -> list[Variant]:
    """Registered variants (all of suite.variants is loaded first), optionally filtered."""
    import suite.variants  # noqa: F401  (the registrations)

    return [v for v in _REGISTRY if (problem is None or v.problem == problem) and (backend is None or v.backend == backend)]
