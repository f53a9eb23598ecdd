"""NVRTC loader for every CUDA C++ backend: .cu file -> cubin (cached on disk) -> cuda.core Kernel -> launch.

The four steps are cuda.core's own: ``ProgramOptions`` / ``Program`` / ``compile("cubin", name_expressions=...)`` /
``get_kernel``. This module adds what a benchmark suite needs around them:

* the shared header directory ``suite/include`` (the inline-PTX wrappers, the pipeline skeleton, the tile schedules)
  on every compile's include path;
* a disk cache (suite.nvrtc.cache) keyed by everything that changes the cubin;
* compile errors that carry the .cu file name and the full NVRTC log;
* launches on torch's current stream, with the kernel's dynamic shared-memory limit raised when it needs > 48 KiB;
* a SASS and resource report of each instantiation (suite.sass, via ``cuobjdump``), without a GPU.

Nothing here runs at import time.
"""

from __future__ import annotations

import functools
import io
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from suite.nvrtc import cache
from suite.nvrtc.info import KernelInfo
from suite.nvrtc.sass import disassemble, instruction_classes, resource_usage, split_functions

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"  # headers every backend's kernels share
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory above this needs the per-kernel attribute raised
# Every compile's ProgramOptions besides the name, arch, include path and defines; all of them are in the cache key.
# -lineinfo: source lines in the cubin (for ncu's source view) and in the PTX (to place ptxas errors); it changes no
# instruction.
NVRTC_OPTIONS = {"std": "c++17", "lineinfo": True}


class KernelCompileError(RuntimeError):
    """NVRTC rejected a .cu file. ``path`` is the file, ``log`` the full NVRTC log (file:line diagnostics).

    An error ptxas found in the generated PTX (typically inside an inline ``asm``) is reported by ptxas as "ptx input,
    line N": ``locations`` maps each such line back to ``file:line`` of the C++ source through the PTX's line info
    (innermost first, then where it was inlined; errors before warnings), and ``ptx_path`` is the PTX kept on disk.
    ``first_error`` is the first error (never a warning) with its ``file:line``; ``summary`` adds where the PTX is
    kept: the one line the tables show."""

    def __init__(
        self, path: Path, arch: str, log: str, locations: list[str] | None = None, ptx_path: Path | None = None
    ):
        self.path, self.arch, self.log = Path(path), arch, log
        self.locations, self.ptx_path = locations or [], ptx_path
        text = f"NVRTC failed to compile {self.path} for {arch}:\n{log}"
        if self.locations:
            text += "\nptxas diagnostics, at their source:\n" + "\n".join(f"  {loc}" for loc in self.locations)
        if ptx_path is not None:
            text += f"\nthe PTX ptxas read is kept at {ptx_path}"
        super().__init__(text)

    @property
    def first_error(self) -> str:
        """``file:line: error: message`` of the first error: ptxas's, placed in the source, else the C++ front
        end's, else the first line of the log that reports an error."""
        for loc in self.locations:
            if ": error:" in loc:
                return loc
        m = _CXX_ERROR_RE.search(self.log)
        if m:
            # an error in a shared header (a wrapper's static_assert) reached from a template: the line of the file
            # being compiled that instantiated it, from the note below the error (before the next diagnostic)
            after = _CXX_ERROR_RE.split(self.log[m.end() :], maxsplit=1)[0]
            sites = list(_INSTANTIATED_RE.finditer(after)) if Path(m["file"]) != self.path else []
            where = next((w for w in sites if Path(w["file"]) == self.path), sites[0] if sites else None)
            at = f" (instantiated at {where['file']}:{where['line']})" if where else ""
            return f"{m['file']}:{m['line']}: error: {m['message'].strip()}{at}"
        lines = [line.strip() for line in self.log.splitlines() if line.strip()]
        return next(
            (line for line in lines if "error" in line.lower() and "NVRTC_ERROR" not in line),
            lines[0] if lines else f"NVRTC failed to compile {self.path}",
        )

    @property
    def summary(self) -> str:
        return self.first_error + (f" (PTX kept at {self.ptx_path})" if self.ptx_path is not None else "")


# A C++ front-end diagnostic of NVRTC: "/path/file.cu(12): error: expected a \";\"" (also "catastrophic error").
_CXX_ERROR_RE = re.compile(
    r"^(?P<file>[^\n]+?)\((?P<line>\d+)\): (?:catastrophic )?error(?: #[\w-]+)?: (?P<message>.*)$", re.MULTILINE
)


# The notes under an error inside a template, innermost first: 'detected during instantiation of "..." at line 22 of
# /path/x.cu', or 'detected during:' and one such line per level.
_INSTANTIATED_RE = re.compile(r"instantiation of [^\n]* at line (?P<line>\d+) of (?P<file>[^\n]+?)\s*$", re.M)


# ---------------------------------------------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------------------------------------------


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return int(major), int(minor)


@dataclass
class CompiledModule:
    """One .cu file compiled for one arch: the cubin, its name-expression -> symbol map, and where it came from."""

    path: Path
    arch: str
    cubin: bytes
    symbols: dict[str, str]
    from_cache: bool
    log: str = ""  # NVRTC's and ptxas's warnings from the build (empty when there were none)
    _kernels: dict = field(default_factory=dict, repr=False)
    _classes: dict = field(default_factory=dict, repr=False)  # instruction_classes, read once per module

    def kernel(self, name_expression: str):
        """The cuda.core Kernel for one template instantiation, e.g. ``"scale2_pipeline<3>"`` (needs a GPU)."""
        if name_expression not in self.symbols:
            raise KeyError(f"{name_expression!r} was not compiled from {self.path.name}; have {sorted(self.symbols)}")
        if name_expression not in self._kernels:
            from cuda.core import ObjectCode

            _ensure_context()
            symbol_mapping = {expr: sym.encode() for expr, sym in self.symbols.items()}  # cuda.core wants bytes
            obj = ObjectCode.from_cubin(self.cubin, name=self.path.name, symbol_mapping=symbol_mapping)
            self._kernels[name_expression] = obj.get_kernel(name_expression)
        return self._kernels[name_expression]

    def sass(self) -> str:
        return disassemble(self.cubin)  # cached per cubin

    def instruction_classes(self) -> dict[str, dict[str, int]]:
        """Per name expression: counts of the SASS instruction classes the driver reports (suite.sass). Counted once
        per module (every launcher built from it asks, and a module's listing is long)."""
        if not self._classes:
            per_symbol = split_functions(self.sass())
            self._classes.update(
                {expr: instruction_classes(per_symbol.get(sym, "")) for expr, sym in self.symbols.items()}
            )
        return {expr: dict(classes) for expr, classes in self._classes.items()}

    def kernel_info(
        self, name_expression: str, smem_per_stage: int, stages: int, dynamic_smem: int | None = None, **fields
    ) -> KernelInfo:
        """What the tables report about one instantiation, from the cubin alone (no GPU): shared memory of its
        ring (or ``dynamic_smem``, the launch's dynamic shared memory, where it holds more than the ring: barriers,
        C's staging) plus static, registers, spills and SASS classes. ``fields`` add launch facts (occupancy,
        grid...)."""
        res = self.resources()[name_expression]
        dynamic = stages * smem_per_stage if dynamic_smem is None else dynamic_smem
        return KernelInfo(
            smem_per_stage=smem_per_stage,
            smem_total=dynamic + res.get("static_smem", 0),
            registers=res.get("registers"),
            spill_bytes=res.get("local", 0) + res.get("stack", 0),
            sass=self.instruction_classes()[name_expression],
            **fields,
        )

    def resources(self) -> dict[str, dict[str, int]]:
        """Per name expression: registers, stack, static shared memory and local memory, from cuobjdump -res-usage."""
        usage = resource_usage(self.cubin)  # cached per cubin
        return {expr: usage.get(sym, {}) for expr, sym in self.symbols.items()}


_import_lock = threading.Lock()


def import_compiler() -> None:
    """Import NVRTC's front end (cuda.core's Program and ProgramOptions), one thread at a time: builds run in
    parallel threads, and two threads importing cuda.core at once can see it half-initialized ("cannot import name
    'ProgramOptions' from 'cuda.core.cu13'")."""
    with _import_lock:
        from cuda.core import Program, ProgramOptions  # noqa: F401
        from cuda.core._utils.cuda_utils import NVRTCError  # noqa: F401


def compile_cu(
    path: str | Path,
    name_expressions: tuple[str, ...],
    arch: str | None = None,
    defines: tuple[str, ...] = (),
    use_cache: bool = True,
    include_path: tuple[str | Path, ...] = (),
) -> CompiledModule:
    """Compile ``path`` with NVRTC to a cubin for ``arch`` (default: the current GPU's ``sm_XY``).

    ``defines`` are macros, ``"NAME"`` or ``"NAME=VALUE"``. The .cu file's own directory and ``suite/include`` are
    searched for ``#include "..."`` (their headers are keyed by content); ``include_path`` adds header libraries
    (keyed by directory, not content: a library such as libcu++ is versioned with the toolkit). Cached on disk; see
    the module docstring.
    """
    path = Path(path).resolve()
    arch = arch or current_arch()
    name_expressions = tuple(name_expressions)
    own_headers = (str(path.parent), str(INCLUDE_DIR))
    include_path = tuple(str(Path(d).resolve()) for d in include_path)
    import_compiler()
    from cuda.core import ProgramOptions

    program_options = ProgramOptions(
        name=str(path),
        arch=arch,
        include_path=[*own_headers, *include_path],
        define_macro=list(defines) or None,
        **NVRTC_OPTIONS,
    )
    key = cache.cache_key(path, arch, name_expressions, nvrtc_options(program_options), own_headers, nvrtc_version())
    entry = cache.Entry(f"{path.stem}-{arch}-{key[:32]}.cubin", key, nvrtc_options(program_options))
    if use_cache and (hit := entry.read()) is not None:
        cubin, symbols, log = hit
        return CompiledModule(path, arch, cubin, symbols, from_cache=True, log=log)
    if not use_cache:
        return _compile(path, arch, program_options, name_expressions, entry, use_cache)
    with entry.compiling():  # one process compiles a key at a time; the others wait here for its entry
        if (hit := entry.read()) is not None:  # compiled by another process while this one waited
            cubin, symbols, log = hit
            return CompiledModule(path, arch, cubin, symbols, from_cache=True, log=log)
        return _compile(path, arch, program_options, name_expressions, entry, use_cache)


def _compile(path: Path, arch: str, program_options, name_expressions, entry, use_cache: bool) -> CompiledModule:
    from cuda.core import Program
    from cuda.core._utils.cuda_utils import NVRTCError

    source = path.read_text()
    program = Program(source, code_type="c++", options=program_options)
    warnings = io.StringIO()  # the build log of a successful compile: ptxas warnings such as C7510 land here
    try:
        obj, log = program.compile("cubin", name_expressions=name_expressions, logs=warnings), None
    except NVRTCError as e:
        obj, log = None, str(e).replace("\x00", "")  # NVRTC's and ptxas's logs end in NUL; never kept
    del program  # released here, not later from a traceback's frame (cuda.core's finalizer dislikes late teardown)
    if obj is None:
        raise _compile_error(path, arch, log, source, program_options, name_expressions, entry)
    symbols = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in obj.symbol_mapping.items()}
    cubin = bytes(obj.code)
    build_log = warnings.getvalue().replace("\x00", "").strip()
    if build_log:
        print(f"{path.name} ({arch}): {build_log}", file=sys.stderr)  # warnings are shown, never swallowed
    if use_cache:
        entry.write(cubin, symbols, build_log)  # a cache that cannot take it warns once; the cubin is used
    return CompiledModule(path, arch, cubin, symbols, from_cache=False, log=build_log)


def nvrtc_options(program_options) -> list[str]:
    """The options NVRTC receives for ``program_options``, as text (the cache key covers every one of them)."""
    as_bytes = getattr(program_options, "as_bytes", None)
    if as_bytes is None:  # a cuda.core without it: every field of the options
        return [repr(program_options)]
    return [o.decode() if isinstance(o, bytes) else str(o) for o in as_bytes("nvrtc")]


# ---------------------------------------------------------------------------------------------------------------
# ptxas errors, placed in the C++ source
# ---------------------------------------------------------------------------------------------------------------

_PTXAS_LINE_RE = re.compile(r"ptx input, line (\d+); (.*)")
_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.MULTILINE)


def _compile_error(path: Path, arch: str, log: str, source: str, options, name_expressions, entry):
    """The KernelCompileError for ``log``; when ptxas rejected the PTX, with its lines mapped back to the source
    (errors first) and the PTX kept beside the cache ``entry`` (suite.nvrtc.cache.Entry.keep: never through a
    symlink; in a private temporary file when the cache directory cannot take it)."""
    diagnostics = sorted(
        dict.fromkeys(_PTXAS_LINE_RE.findall(log)), key=lambda d: not d[1].lstrip().startswith("error")
    )  # errors first, each in log order
    if not diagnostics:
        return KernelCompileError(path, arch, log)
    try:
        ptx = _generate_ptx(source, options, name_expressions, arch)
    except Exception as e:  # noqa: BLE001 - the map is a help; the NVRTC log above is the error
        return KernelCompileError(path, arch, log + f"\n(could not regenerate the PTX to place the error: {e})")
    ptx_path = entry.keep(".ptx", ptx)
    locations = [
        f"{ptx_source_location(ptx, int(line))}: {re.sub(r' +:', ':', ' '.join(message.split()))} [PTX line {line}]"
        for line, message in diagnostics
    ]
    return KernelCompileError(path, arch, log, locations, ptx_path)


def _generate_ptx(source: str, options, name_expressions, arch: str) -> str:
    """The PTX NVRTC handed to ptxas: the same options for the virtual arch, so ptxas is not run (no driver needed).
    Line info makes it the same text, line for line, as the failed compile's."""
    from cuda.bindings import nvrtc

    def ok(result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC: {err}")
        return rest[0] if rest else None

    opts = [o for o in options.as_bytes("nvrtc") if not o.startswith(b"-arch")] + [
        b"-arch=" + arch.replace("sm_", "compute_").encode()
    ]
    prog = ok(nvrtc.nvrtcCreateProgram(source.encode(), str(options.name).encode(), 0, [], []))
    try:
        for expr in name_expressions:
            ok(nvrtc.nvrtcAddNameExpression(prog, expr.encode()))
        ok(nvrtc.nvrtcCompileProgram(prog, len(opts), opts))
        buf = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
        ok(nvrtc.nvrtcGetPTX(prog, buf))
        return buf.rstrip(b"\x00").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def ptx_source_location(ptx: str, line: int) -> str:
    """``file:line`` of the C++ statement PTX line ``line`` (1-based) came from: the nearest ``.loc`` above it, then
    where that code was inlined, e.g. ``ptx_wrappers.cuh:24 (inlined at gemm.cu:130)``."""
    files = {int(n): name for n, name in _FILE_RE.findall(ptx)}
    lines = ptx.splitlines()
    for text in reversed(lines[: max(0, line - 1)]):
        m = _LOC_RE.match(text)
        if m:
            where = f"{files.get(int(m[1]), '?')}:{m[2]}"
            if m[3]:
                where += f" (inlined at {files.get(int(m[3]), '?')}:{m[4]})"
            return where
    return f"PTX line {line} (no line info above it)"


# ---------------------------------------------------------------------------------------------------------------
# The GPU in use, launches on torch's stream
# ---------------------------------------------------------------------------------------------------------------


@functools.cache
def _device():
    import torch
    from cuda.core import Device

    dev = Device(torch.cuda.current_device())
    dev.set_current()
    return dev


def _ensure_context() -> None:
    import torch

    torch.cuda.init()  # the primary context, shared by torch and cuda.core
    _device()


def current_arch() -> str:
    """``sm_XY`` of torch's current GPU; raises when there is none (pass ``arch=`` explicitly then)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible: pass arch='sm_90' (or another) to compile without one")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@functools.cache
def _stream_for(handle: int):
    """The cuda.core Stream for one of torch's stream handles (0 is the legacy default stream)."""
    from cuda.core import LEGACY_DEFAULT_STREAM, Stream

    return LEGACY_DEFAULT_STREAM if handle == 0 else Stream.from_handle(handle)


@functools.cache
def _raise_smem_limit(kernel, nbytes: int) -> None:
    """Opt the kernel in to ``nbytes`` of dynamic shared memory (needed above 48 KiB)."""
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if isinstance(handle, driver.CUkernel):  # cuda.core loads libraries: a context-independent CUkernel
        (err,) = driver.cuKernelSetAttribute(attr, nbytes, handle, _device().device_id)
    else:
        (err,) = driver.cuFuncSetAttribute(handle, attr, nbytes)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"setting MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes} failed: {err}")


def device_smem_limit() -> int:
    """Largest dynamic shared memory one block may opt in to on the current GPU (227 KiB on an H100/H200)."""
    return int(_device().properties.max_shared_memory_per_block_optin)


def prepare(kernel, smem_bytes: int) -> None:
    """Make ``kernel`` launchable with ``smem_bytes`` of dynamic shared memory, or raise if the GPU has too little."""
    limit = device_smem_limit()
    if smem_bytes > limit:
        raise ValueError(f"kernel needs {smem_bytes} B of shared memory per block; this GPU allows at most {limit} B")
    if smem_bytes > STATIC_SMEM_LIMIT:
        _raise_smem_limit(kernel, smem_bytes)


def occupancy(kernel, threads: int, smem_bytes: int) -> int:
    """Resident blocks per SM, from the driver's occupancy calculator."""
    prepare(kernel, smem_bytes)
    return int(kernel.occupancy.max_active_blocks_per_multiprocessor(threads, smem_bytes))


def launch(kernel, grid, block, smem_bytes: int, *args, cluster: int = 1) -> None:
    """Launch on torch's current stream, ordered with torch's own work. ``args``: ints are pointers (64-bit);
    pass numpy scalars (np.int32, np.int64) for integer parameters of other widths. ``grid`` counts blocks, also
    with ``cluster`` > 1 (blocks per cluster along x; grid a multiple of it)."""
    import torch
    from cuda.core import LaunchConfig
    from cuda.core import launch as cuda_launch

    prepare(kernel, smem_bytes)
    stream = _stream_for(torch.cuda.current_stream().cuda_stream)
    cuda_launch(stream, _launch_config(LaunchConfig, grid, block, smem_bytes, cluster), kernel, *args)


def _launch_config(launch_config, grid, block, smem_bytes: int, cluster: int):
    if cluster == 1:
        return launch_config(grid=grid, block=block, shmem_size=smem_bytes)
    if not isinstance(grid, int) or grid % cluster:
        raise ValueError(f"a cluster launch needs a 1-D grid that is a multiple of the cluster ({grid}, {cluster})")
    # cuda.core counts a clustered grid in clusters
    return launch_config(grid=grid // cluster, cluster=cluster, block=block, shmem_size=smem_bytes)


def max_active_clusters(kernel, threads: int, smem_bytes: int, cluster: int) -> int:
    """Clusters of ``cluster`` blocks that can be resident on the GPU at once (the driver's occupancy calculator)."""
    from cuda.core import LaunchConfig

    prepare(kernel, smem_bytes)
    config = _launch_config(LaunchConfig, cluster, threads, smem_bytes, cluster)
    return int(kernel.occupancy.max_active_clusters(config, stream=_device().default_stream))


class BoundKernel:
    """One instantiation (``expr`` of ``module``) bound to its ``grid``, ``threads`` per block, a ring of ``stages`` x
    ``stage_bytes`` of dynamic shared memory and its ``args``: calling it launches on torch's current stream. Raises
    ValueError when the GPU has too little shared memory for the ring, or (``too_big``) when no block fits on an SM.
    ``info``: the row's KernelInfo, ``config`` its configuration line."""

    def __init__(self, module, expr: str, stages: int, stage_bytes: int, threads: int, grid, args, config, too_big):
        self.kernel = module.kernel(expr)
        self.smem_bytes = stages * stage_bytes
        blocks_per_sm = occupancy(self.kernel, threads, self.smem_bytes)  # refuses a ring that does not fit this GPU
        if blocks_per_sm < 1:
            raise ValueError(too_big)
        self.threads, self.grid, self.args = threads, grid, args
        self.info = module.kernel_info(
            expr, stage_bytes, stages, occupancy=blocks_per_sm, threads=threads, grid=grid, config=config
        )

    def __call__(self) -> None:
        launch(self.kernel, self.grid, self.threads, self.smem_bytes, *self.args)


def num_sms() -> int:
    return int(_device().properties.multiprocessor_count)
