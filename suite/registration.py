"""Registering a variant: the Variant record, the gates that say when it can run here, and ``register_kernel``.

This module knows no registration itself: the suite's own are in suite.variants, plugins' in suite.plugins, and
suite.registry reads them all (``variants``). Everything that registers imports this module, never suite.registry,
so the catalog sits above what fills it.
"""

from __future__ import annotations

import importlib
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    """a GPU of compute capability 9.0 exactly (the code is built for sm_90a: wgmma, setmaxnreg)"""
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
    # Its kernel module (suite.kernel.KernelModule), or where to import it from: "package.module:NAME[key]".
    kernel_ref: Any
    baseline: bool = False  # the library implementation the kernels are compared with
    ceiling: bool = False  # the throughput ceiling the ratios are taken against
    gate: Callable[[], str | None] = anywhere
    # A reference other than the problem's own (a ceiling such as copy_ computes something else).
    reference: Callable[[Inputs], torch.Tensor] | None = None
    description: str = ""
    # Variants of one group are tabulated together, apart from the problem's other variants (e.g. the depth sweep of
    # one tile size); "" is the problem's main table.
    group: str = ""
    # The named shape sets (Problem.shape_sets, --shapes) it is timed at; None: every set. Explicit --size runs
    # every variant.
    shape_sets: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.name}"

    def is_named(self, names) -> bool:
        """Whether ``names`` (as --variant takes them) name this variant: by its name or its backend:name label."""
        return self.name in names or self.label in names

    @property
    def kernel(self) -> KernelModule:
        """The kernel module this variant was registered with (imported on first use). KernelLoadError, naming the
        variant, where its reference does not import."""
        try:
            kernel = resolve_kernel(self.kernel_ref)
        except (ImportError, AttributeError, KeyError, ValueError) as e:
            raise KernelLoadError(
                f"variant {self.label} ({self.problem}): its kernel {self.kernel_ref!r} does not load: "
                f"{type(e).__name__}: {e}"
            ) from e
        if _CHECKED.get((self.problem, id(kernel))) is not kernel:
            if why := contract_breach(kernel, self.problem):
                raise KernelLoadError(f"variant {self.label} ({self.problem}): its kernel {why}")
            _CHECKED[(self.problem, id(kernel))] = kernel
        return kernel

    @property
    def stages(self) -> tuple:
        """The stage counts it is swept over at the problem's default dtype; (None,) when it has no stage
        parameter."""
        return self.stages_for(None)

    def stages_for(self, dtype: str | None) -> tuple:
        return tuple(self.kernel.stages_for(dtype or PROBLEMS[self.problem].default_dtype))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The problem's dtypes this variant implements."""
        declared = self.kernel.dtypes
        return tuple(declared) if declared is not None else (PROBLEMS[self.problem].default_dtype,)

    def dtype_skip_reason(self, dtype: str) -> str | None:
        """Why this variant has no row at ``dtype`` that runs, or None: a dtype it does not implement (with the
        module's reason where it gives one), or one this machine cannot run."""
        if dtype not in self.dtypes:
            why = self.kernel.dtype_notes.get(dtype) or f"implements {', '.join(self.dtypes)} only"
            return f"no {dtype} build: {why}"
        return self.kernel.skip_reason(dtype)

    @property
    def describe(self) -> Callable[[str], dict[int, KernelInfo]] | None:
        return self.kernel.describe

    def factory(self, inputs: Inputs, out: torch.Tensor, stages) -> Callable[[], None]:
        """Check that the inputs are of a dtype the kernel implements (ValueError naming the rule), then build the
        kernel's launcher for them."""
        kernel = self.kernel
        dtype = PROBLEMS[self.problem].input_dtype(inputs)
        if dtype in PROBLEMS[self.problem].dtypes and dtype not in self.dtypes:  # others: the kernel's own checks
            raise ValueError(
                f"{self.label}: dtype {dtype} is not implemented by this kernel (it implements "
                f"{', '.join(self.dtypes)})"
            )
        run = kernel.launch(inputs, out, stages)
        if not callable(run):
            raise TypeError(
                f"{self.label}: launch() must return the zero-argument callable that writes out "
                f"(got {type(run).__name__})"
            )
        return run

    def skip_reason(self) -> str | None:
        return self.gate()


class KernelLoadError(RuntimeError):
    """A registered kernel reference that does not import: its module fails to import or lacks the name."""


_REGISTRY: list[Variant] = []
_KERNELS: dict[str, KernelModule] = {}
# (problem, id) -> the kernel module that passed contract_breach there, held so that its id is not another's later
_CHECKED: dict[tuple[str, int], KernelModule] = {}


def contract_breach(kernel, problem: str) -> str | None:
    """What of suite.kernel's contract a registered kernel module breaks, as the end of a sentence naming it, or
    None: it must be a KernelModule, declare only its problem's dtypes, and sweep, at each of them, stage counts of
    at least 1, or (None,) for a kernel without one (an empty sweep would run no row of it, silently)."""
    from suite.kernel import KernelModule

    if not isinstance(kernel, KernelModule):
        return f"is not a suite.kernel.KernelModule (got {type(kernel).__name__})"
    known = PROBLEMS[problem].dtypes
    declared = kernel.dtypes if kernel.dtypes is not None else (PROBLEMS[problem].default_dtype,)
    if not declared or any(d not in known for d in declared):
        return f"declares dtypes {tuple(declared)}: each must be one of {problem}'s ({', '.join(known)})"
    for dtype in declared:
        depths = tuple(kernel.stages_for(dtype))
        if depths == (None,):
            continue
        if not depths or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1 for s in depths
        ):
            return (
                f"sweeps stage counts {depths} at {dtype}: give depths of at least 1, or (None,) for a kernel "
                "without one"
            )
    return None


def resolve_kernel(ref) -> KernelModule:
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


def register_kernel(problem: str, backend: str, name: str, kernel, **kwargs) -> None:
    """Register the variant that runs ``kernel`` (a suite.kernel.KernelModule, or "package.module:NAME", imported
    only when first needed, so that registering compiles nothing and a Triton module sees TRITON_INTERPRET as set
    by whoever runs it). Raises on an unknown problem or a duplicate (problem, backend, name)."""
    if problem not in PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; known: {sorted(PROBLEMS)}")
    if any((v.problem, v.backend, v.name) == (problem, backend, name) for v in _REGISTRY):
        raise ValueError(f"variant {backend}:{name} is already registered for {problem}")
    _REGISTRY.append(Variant(problem, backend, name, kernel, **kwargs))


def registered(problem: str | None = None, backend: str | None = None) -> list[Variant]:
    """The variants registered so far (none loaded here), optionally filtered."""
    return [
        v for v in _REGISTRY if (problem is None or v.problem == problem) and (backend is None or v.backend == backend)
    ]
