"""The kernel-module contract: what the registry, the driver, the sanitizer and the tests need to know about one
kernel configuration, stated once, by the module that owns the kernel.

A registration names its kernel (``suite.registry.register_kernel``); its stage sweep, its launcher, how it describes
itself without a GPU, what the sanitizer launches and at what size, the SASS it must contain and the input rules it
adds to its problem's all come from here. Nothing in the driver, the sanitizer or the generic tests names a kernel.

* ``KernelModule``: the part every backend shares (stages, launch, bad inputs, SASS it must contain).
* ``NvrtcModule``: a ``.cu`` file compiled at run time by NVRTC (``suite.nvrtc.loader``) and launched through cuda.core.
  Its constants reach the compiler as ``-D NAME=VALUE`` defines, so the Python launcher and the C++ kernel cannot
  drift: the ``.cu`` keeps an ``#ifndef`` default for a tunable constant, or a ``static_assert`` against a fixed one.
* ``TritonModule``: a Triton kernel (the interpreter runs it on a CPU).

Nothing here compiles or launches at import time.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from suite.checks import check_cuda
from suite.info import KernelInfo
from suite.problems import BadInput, Inputs


@dataclass(frozen=True)
class Fault:
    """A deliberately broken build for the sanitizer's self-test: compiled with ``define``, launched at ``stages``,
    it must be reported by ``tool``. Proves the sanitizer can see the class of bug the define plants."""

    name: str
    define: str
    stages: tuple[int, ...]
    tool: str = "racecheck"
    # the problem size it is launched at (one long enough for the ring to wrap); None: the first sanitize size
    size: object = None
    # True: the fault is in the launcher's order of launches (it reads the define), not in the kernel's code
    in_launcher: bool = False
    # the dtype it is launched in (a module that implements only others); None: the problem's default dtype
    dtype: str | None = None


class KernelModule:
    """One kernel configuration of one backend. Subclasses set ``stages`` and implement ``launch``."""

    stages: tuple[int, ...] = ()  # the pipeline depths it is swept over (and compiled for)
    # The problem's dtypes (suite.problems.DType names) it implements; None: the problem's default dtype only.
    dtypes: tuple[str, ...] | None = None
    # dtype -> why it has no build for it, where there is a reason worth a row's note (e.g. no such instruction)
    dtype_notes: dict[str, str] = {}
    # SASS instruction classes (suite.sass.INSTRUCTION_CLASSES) every instantiation must contain: a tuple of class
    # names ("async_copy", "mma"), or class -> minimum count.
    sass_requires: tuple[str, ...] | dict[str, int] = ()
    # Sizes the sanitizer launches (small: compute-sanitizer is slow); () = not run under compute-sanitizer.
    sanitize_sizes: tuple = ()
    faults: tuple[Fault, ...] = ()  # broken builds the sanitizer must catch
    # Why the driver must time this module's calls as Python makes them, not replayed from a CUDA graph (the default,
    # suite.driver.measure.Launched): a call whose captured form runs differently; None: a graph is the same work.
    eager_only: str | None = None
    # tool -> why that compute-sanitizer tool cannot judge this kernel (a documented false-positive pattern): the
    # tool does not run it, and the report says so and why, instead of "clean".
    sanitizer_blind_spots: dict[str, str] = {}
    describe: Callable[[str], dict[int, KernelInfo]] | None = None  # without a GPU: arch -> {stages: KernelInfo}
    # How its fp8 builds accumulate: "promoted" (each K tile's wgmma sum added into fp32 registers, as
    # torch._scaled_mm(..., use_fast_accum=False)) or "fast" (wgmma's own narrower accumulator across all of K); None
    # for a module without an fp8 build. Rows at a dtype that states its accumulation (DType.accumulation) show it,
    # and run only where it is the ceiling's (``accumulation_refusal``).
    fp8_accumulation: str | None = None

    def launch(self, inputs: Inputs, out: torch.Tensor, stages: int) -> Callable[[], None]:
        """Check the inputs (ValueError naming the rule), set everything up, return the zero-argument callable that
        writes ``out``: the registry's factory. Nothing may run on the tensors before that callable is called (the
        factory's last check, host tensors for a Triton module, follows this)."""
        raise NotImplementedError

    def bad_inputs(self) -> list[BadInput]:
        """Rules this kernel adds to its problem's own (suite.problems.Problem.bad_inputs), e.g. a K multiple of 8."""
        return []

    def stages_for(self, dtype: str) -> tuple:
        """The depths it is swept over at ``dtype`` (a ring of wider or narrower elements may fit more or fewer)."""
        return self.stages

    def skip_reason(self, dtype: str) -> str | None:
        """Why this machine cannot run the kernel at ``dtype`` although it implements it, or None."""
        return None

    def build_for(self, size) -> object:
        """What of a problem size picks the build its rows run, where a stage count has several (the attention
        modules: head_dim), so that a row without a GPU is described by its own (``describe(..., build=)``); None:
        one build per stage count and dtype."""
        return None

    def refuses(self, size, dtype: str) -> str | None:
        """The rule a problem of ``size`` at ``dtype`` breaks for this kernel (its launch raises ValueError saying
        so, before anything runs), or None: a shape the kernel takes. Most kernels take every shape."""
        return None

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        """The kernel instantiations a launch at ``stages`` may run, as the sanitizer's reports name them."""
        return ()

    def modules_for(self, size, dtype: str) -> tuple:
        """The NVRTC modules whose builds launches at ``size`` and ``dtype`` load (on this GPU, at every depth), for
        compiling them up front: none for a kernel NVRTC does not build."""
        return ()

    def choice(self, size, dtype: str) -> str | None:
        """One line saying what a module that picks among kernels by the shape runs at ``size`` and ``dtype``, and
        why (the driver puts it in the row's note); None for a module that is one kernel."""
        return None

    def sass_minimums(self) -> dict[str, int]:
        """``sass_requires`` as class -> minimum count per instantiation."""
        req = self.sass_requires
        return dict(req) if isinstance(req, dict) else {cls: 1 for cls in req}


def accumulation_refusal(kernel, required: str | None) -> str | None:
    """Why a row of ``kernel`` cannot run at a dtype whose rows must accumulate as ``required`` (DType.accumulation,
    the ceiling's), or None: it states the same (its ``fp8_accumulation``), or the dtype asks nothing. A row that
    accumulates otherwise would be compared with a ceiling that does other work; the suite times no second ceiling
    (e.g. a fast-accumulation cuBLAS), so such a row is refused, saying so."""
    if required is None:
        return None
    stated = getattr(kernel, "fp8_accumulation", None)
    if stated == required:
        return None
    if stated is None:
        return f"its kernel module does not state its accumulation (fp8_accumulation); the ceiling's is {required!r}"
    return (
        f"it accumulates {stated!r} and the ceiling {required!r}: a row is compared only with a ceiling that "
        "accumulates as it does, and the suite times none for this one"
    )


class LibraryOp(KernelModule):
    """A library call (torch): the baselines and ceilings the kernels are compared with. ``op(inputs, out)`` returns
    the zero-argument callable; it has no stages, no SASS the suite asserts, nothing to sanitize."""

    stages = (None,)

    def __init__(
        self,
        op: Callable,
        dtypes: tuple[str, ...] | None = None,
        requires: Callable[[str], str | None] | None = None,
        refuses: Callable[[object, str], str | None] | None = None,
        eager_only: str | None = None,
        fp8_accumulation: str | None = None,
    ):
        self.op, self.dtypes, self._requires, self._refuses = op, dtypes, requires, refuses
        self.eager_only, self.fp8_accumulation = eager_only, fp8_accumulation

    def launch(self, inputs: Inputs, out: torch.Tensor, stages) -> Callable[[], None]:
        return self.op(inputs, out)

    def refuses(self, size, dtype: str) -> str | None:
        return self._refuses(size, dtype) if self._refuses else None

    def skip_reason(self, dtype: str) -> str | None:
        return self._requires(dtype) if self._requires else None


def _refusing_host_tensors(launch):
    """``launch``, then TritonModule.refuse_host_tensors on its inputs, before its launcher is returned."""

    @functools.wraps(launch)
    def launch_refusing_host_tensors(self, inputs, out, stages):
        launcher = launch(self, inputs, out, stages)
        self.refuse_host_tensors(inputs, out)
        return launcher

    return launch_refusing_host_tensors


class TritonModule(KernelModule):
    """A Triton kernel. On a CPU it runs in the Triton interpreter (TRITON_INTERPRET=1, set before the module is
    imported); its SASS is known only after Triton compiled it on a GPU."""

    # Faults planted by with_defines (the sanitizer's self-test): names (``Fault.define``) the module's launcher reads
    # and turns into a constexpr flag or a launch order of its kernels; () in every healthy build.
    extra_defines: tuple[str, ...] = ()
    # True where the stage count reaches the kernel only as ``num_stages`` (a launch option, or tl.range's): the
    # pipeliner's depth, a compiler transform the interpreter does not perform, so on a CPU every depth runs the same
    # program and the registry-wide tests validate each depth there at one edge size, not at all of them (on a GPU
    # every depth is its own compiled schedule and runs at every edge size). False: the depth changes what the kernel
    # computes (a ring it indexes itself, as in Gluon), and every depth runs every edge size everywhere.
    depth_is_num_stages: bool = False

    def __init_subclass__(cls, **kwargs):
        """A subclass's own ``launch`` ends with refuse_host_tensors, whoever wrote it (a plugin's too)."""
        super().__init_subclass__(**kwargs)
        if "launch" in cls.__dict__:
            cls.launch = _refusing_host_tensors(cls.__dict__["launch"])

    @staticmethod
    def refuse_host_tensors(inputs, out) -> None:
        """Every launch's last check (``__init_subclass__`` adds it), once its launcher is built (which checks the
        problem's and the kernel's own rules, as the NVRTC kernels do first) and before it is returned: compiled (no
        TRITON_INTERPRET=1), a Triton kernel dereferences its tensors' addresses on the GPU, so a tensor in host memory
        is refused (ValueError)."""
        if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter runs on host memory
            tensors = [x for x in (*inputs, out) if isinstance(x, torch.Tensor)]
            check_cuda(*((f"operand {i}", t) for i, t in enumerate(tensors)))

    def with_defines(self, *defines: str, stages: tuple[int, ...] | None = None) -> TritonModule:
        """The same kernel with faults planted, as NvrtcModule.with_defines (suite.sanitize calls either): a copy
        whose launches see ``defines`` in ``extra_defines``; ``stages`` narrows its sweep to those stage counts."""
        other = copy.copy(self)
        other.extra_defines = tuple(self.extra_defines) + tuple(defines)
        if stages is not None:
            other.stages = tuple(stages)
        return other


class NvrtcModule(KernelModule):
    """A ``.cu`` file compiled by NVRTC for every instantiation its stage counts need, cached on disk.

    Subclasses set ``source``, ``stages``, ``threads``, ``stage_bytes`` and implement ``name_expressions`` and
    ``launch``; ``constants`` go to NVRTC as defines.
    """

    source: Path  # the .cu file
    threads: int  # per block
    stage_bytes: int  # shared memory of one pipeline stage
    archs: tuple[str, ...] = ("sm_80", "sm_90")  # every arch it must build for (the CPU tests build each)
    extra_defines: tuple[str, ...] = ()  # added by with_defines (fault injection)

    def constants(self) -> dict[str, int]:
        """Constants the launcher and the kernel share, passed to NVRTC as ``-D NAME=VALUE``."""
        return {}

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        """Every instantiation a launch at ``stages`` may pick; the first is the one ``describe`` reports (a module
        with a build per size, ``build_for``, reports that size's)."""
        raise NotImplementedError

    def include_dirs(self) -> tuple[Path, ...]:
        """Extra header directories (the .cu file's own directory is always searched)."""
        return ()

    def config(self) -> str:
        """One line for the tables: the tile, threads, anything a reader needs to place the numbers."""
        return ""

    # -- derived: nothing below needs overriding ------------------------------------------------------------------

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return self.name_expressions(stages)

    def defines(self) -> tuple[str, ...]:
        return tuple(f"{k}={v}" for k, v in self.constants().items()) + tuple(self.extra_defines)

    def all_name_expressions(self) -> tuple[str, ...]:
        """Every instantiation a launch may pick, at every depth of every dtype it implements."""
        depths = dict.fromkeys(s for d in (self.dtypes or (None,)) for s in (self.stages_for(d) if d else self.stages))
        return tuple(dict.fromkeys(e for s in depths for e in self.name_expressions(s)))

    def build(self, arch: str | None = None):
        """Every instantiation, compiled for ``arch`` (default: the current GPU): a loader.CompiledModule."""
        from suite.nvrtc import loader

        arch = arch or loader.current_arch()
        builds = self.__dict__.setdefault("_builds", {})
        if arch not in builds:
            builds[arch] = loader.compile_cu(
                self.source,
                self.all_name_expressions(),
                arch=arch,
                defines=self.defines(),
                include_path=self.include_dirs(),
            )
        return builds[arch]

    def modules_for(self, size, dtype: str) -> tuple[NvrtcModule, ...]:
        """This one, unless a module compiles its instantiations on demand (suite.ptx.gemm_decode.MidModule: a build
        per tile)."""
        return (self,)

    def with_defines(self, *defines: str, stages: tuple[int, ...] | None = None) -> NvrtcModule:
        """The same kernel built with more defines (e.g. a fault for the sanitizer), compiled separately; ``stages``
        narrows what is compiled (and launchable) to those stage counts."""
        other = copy.copy(self)
        other.__dict__.pop("_builds", None)
        other.extra_defines = tuple(self.extra_defines) + tuple(defines)
        if stages is not None:
            other.stages = tuple(stages)
        return other

    def describe(self, arch: str, dtype: str | None = None) -> dict[int, KernelInfo]:
        """Without a GPU: compile for ``arch`` and report each stage count's kernel (registers, spills, SASS); the
        first instantiation of each depth (a module with several dtypes overrides this to pick ``dtype``'s)."""
        return self.describe_depths(
            arch,
            lambda stages: self.name_expressions(stages)[0],
            lambda expr: f"{arch} cubin, {expr}" + (f"; {self.config()}" if self.config() else ""),
        )

    def describe_depths(
        self, arch: str, expression: Callable[[int], str], config: Callable[[str], str]
    ) -> dict[int, KernelInfo]:
        """Each stage count's kernel, from the build for ``arch``: ``expression(stages)`` names the instantiation,
        ``config(expression)`` is its config line (what describe overrides pick and say)."""
        built = self.build(arch)
        return {
            s: built.kernel_info(
                (expr := expression(s)), self.stage_bytes, s, threads=self.threads, config=config(expr)
            )
            for s in self.stages
        }
