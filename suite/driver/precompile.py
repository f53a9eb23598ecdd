"""Compiling up front: every NVRTC kernel a run's jobs need, built in parallel threads into the cubin cache before
anything is timed (``precompile``), and, without a GPU, each gated-out variant's kernels compiled for ``CPU_ARCH`` and
described. ``on_module`` reports each module as it finishes (the run's progress line while a cold cache compiles).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from suite.driver.rows import variants_of
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant

CPU_ARCH = "sm_90"  # what PTX modules are compiled for when there is no GPU to ask


def describe(variant: Variant, problem: Problem, dtype: str, build=None):
    """Without a GPU: the variant's kernels compiled for CPU_ARCH and described, at ``dtype`` (and ``build``, what
    the module's ``build_for`` says a size picks, where it says one)."""
    if build is not None:
        return variant.kernel.describe(CPU_ARCH, dtype, build=build)
    if dtype == problem.default_dtype:
        return variant.describe(CPU_ARCH)
    return variant.kernel.describe(CPU_ARCH, dtype)


def describe_key(variant: Variant, job) -> tuple:
    """What a description is kept under: the variant, the job's dtype and the build its size picks."""
    return (variant.label, job.dtype, variant.kernel.build_for(job.size))


def precompile(
    jobs,
    on_gpu: bool,
    max_workers: int | None = None,
    known: dict | None = None,
    on_start: Callable[[int], Callable[[str], None]] | None = None,
) -> dict:
    """Compile every kernel of ``jobs`` up front, in parallel threads (NVRTC releases the GIL; cuobjdump runs in a
    subprocess), before anything is timed. On a GPU: every NVRTC kernel of a variant that runs here, for this GPU's
    arch, into the cubin cache, with its SASS listing and resources (``_build_and_list``), so each launch loads them
    (Triton kernels compile on their first call, which is the validation call, before any timing of the job; their
    listings are made in background threads, suite.sass.pending_classes). Without a GPU: each gated-out variant's
    kernels compiled for CPU_ARCH and described; returns (label, dtype, build) -> description (``describe_key``; or
    the exception its build raised), for those not in ``known`` already. ``on_start(total)``, when there is work,
    returns what is called with each module's name as it finishes (a progress line: a cold cache takes a minute or
    more)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from suite.kernel import KernelModule

    work: dict[tuple, Callable[[], object]] = {}
    names: dict[tuple, str] = {}  # what the progress line calls each
    arch = None
    for job in jobs:
        problem, by_label = PROBLEMS[job.problem], variants_of(job.problem)
        for spec in job.rows:
            variant = by_label[spec.label]
            if not spec.runs or variant.dtype_skip_reason(job.dtype):
                continue
            if variant.skip_reason():
                key = describe_key(variant, job)
                if (
                    not on_gpu
                    and variant.describe is not None
                    and key not in (known or {})
                    and ("describe", *key) not in work
                ):
                    work[("describe", *key)] = lambda v=variant, p=problem, k=key: describe(v, p, k[1], k[2])
                    build = "" if key[2] is None else f" ({key[2]})"
                    names[("describe", *key)] = f"{variant.label} {job.dtype}{build} for {CPU_ARCH}"
                continue
            if not on_gpu:
                continue
            kernel = variant.kernel  # (a plugin's kernel need not be a KernelModule: it compiles for itself)
            try:
                modules = kernel.modules_for(job.size, job.dtype) if isinstance(kernel, KernelModule) else ()
            except Exception:  # noqa: BLE001 - a size the module cannot plan: its row's own build raises it, and
                modules = ()  # the row says so (refused or failed) while the run goes on
            if modules and arch is None:
                try:
                    from suite.nvrtc import loader

                    arch = loader.current_arch()
                except Exception:  # noqa: BLE001 - no GPU to ask (a test on a CPU): each launch compiles for itself
                    return {}
            for module in modules:
                work.setdefault(("build", id(module)), lambda b=module.build, a=arch: _build_and_list(b, a))
                tile = "" if module is variant.kernel else f" ({module.all_name_expressions()[0]} ...)"
                names.setdefault(("build", id(module)), f"{variant.label}{tile} for {arch}")
    if not work:
        return {}
    _import_compilers()
    described = {}
    done = on_start(len(work)) if on_start is not None else None
    with ThreadPoolExecutor(max_workers=max_workers or min(len(work), os.cpu_count() or 1)) as pool:
        futures = {pool.submit(task): key for key, task in work.items()}
        for future in as_completed(futures):
            key = futures[future]
            try:
                result = future.result()
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - a build that fails (sys.exit too) is a failed row or launch
                result = e if isinstance(e, Exception) else RuntimeError(f"the build raised {e!r}")
            if key[0] == "describe":
                described[key[1:]] = result
            if done is not None:
                done(names[key])
    return described


def _build_and_list(builder: Callable[[str], object], arch: str) -> object:
    """``builder(arch)``, then what the first launch of each of its instantiations reads from the cubin: the SASS
    listing (split per kernel and counted) and the resource usage, both cuobjdump runs kept in the cache. Read here,
    in the precompile threads, rather than one cuobjdump after another as the rows validate (on a fresh machine,
    the longest serial step of a run)."""
    module = builder(arch)
    for read in ("instruction_classes", "resources"):  # suite.nvrtc.loader.CompiledModule's; cached per module
        if callable(getattr(module, read, None)):
            getattr(module, read)()
    return module


def _import_compilers() -> None:
    """Import what the builds import, here, before the threads start (the loader also guards its own import)."""
    try:
        from suite.nvrtc import loader

        loader.import_compiler()
        loader.nvrtc_version()
    except Exception:  # noqa: BLE001 - each build then reports its own error
        return
