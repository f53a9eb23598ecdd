"""python -m suite.sanitize: every PTX variant x stage count under compute-sanitizer (memcheck, racecheck,
synccheck) on small shapes, findings reported per variant.

One sanitizer process per tool runs all cases (``--worker healthy``); a finding is attributed to a variant by the
kernel instantiation named in the report (e.g. ``gemm_f16_f32acc<3, true, 32>``), which is one variant x stage
count. The check can fail: a deliberately broken build of the GEMM (the consumer-side barrier before a stage is
reused removed, PIPESUITE_FAULT_NO_REUSE_BARRIER) runs under racecheck too (``--worker broken``) and must be
reported as a race. Exit status 0 only when every healthy case is clean and the broken one is caught.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "synccheck")
VECTOR_N = 3 * 8192 + 5  # several tiles, a ragged tail
GEMM_SHAPES = ((200, 264, 72), (130, 250, 40))  # N % 8 == 0 (cp.async B) and N % 8 != 0 (plain-load B)
_KERNEL_RE = re.compile(r"((?:gemm_f16_f32acc|scale2_pipeline)<[^>]*>)")
# 'ERROR SUMMARY: 3 errors', or racecheck's 'RACECHECK SUMMARY: 50 hazards displayed (239712 errors, 38592 warnings)'
# (the displayed count is capped by --print-limit; the errors in parentheses are all of them).
_SUMMARY_RE = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error")
_CAST_RE = re.compile(r"\((?:int|unsigned int|long long|bool)\)")


# ---------------------------------------------------------------------------------------------------------------
# Worker: runs inside compute-sanitizer
# ---------------------------------------------------------------------------------------------------------------


def _cases():
    """(variant, stages, size) for every PTX variant x stage count, on small shapes."""
    from suite.registry import variants

    for v in variants(backend="ptx"):
        sizes = (VECTOR_N,) if v.problem == "vector" else GEMM_SHAPES
        for stages in v.stages:
            for size in sizes:
                yield v, stages, size


def worker_healthy() -> int:
    import torch

    from suite.problems import PROBLEMS
    from suite.validate import validate

    bad = 0
    for v, stages, size in _cases():
        result = validate(v, stages, size, seed=7, device=torch.device("cuda"))
        print(f"CASE {v.label} stages={stages} shape={PROBLEMS[v.problem].shape(size)} valid={result.check.valid}",
              flush=True)
        bad += not result.check.valid
    return 1 if bad else 0


def worker_broken() -> int:
    """The GEMM with the stage-reuse barrier removed, STAGES = 1, both B paths: must be reported as a race."""
    import torch

    from suite.ptx import gemm, loader
    from suite.problems import GEMM

    module = loader.compile_cu(gemm.SOURCE, tuple(gemm.name_expression(1, a) for a in (True, False)),
                               defines=("PIPESUITE_FAULT_NO_REUSE_BARRIER=1",))
    for shape in GEMM_SHAPES:
        m, n, k = shape
        a, b = GEMM.make_inputs(shape, 11, torch.device("cuda"))
        c = torch.empty(m, n, dtype=torch.float16, device="cuda")
        kernel = module.kernel(gemm.name_expression(1, n % 8 == 0))
        import numpy as np

        loader.launch(kernel, -(-m // gemm.BLOCK_M) * -(-n // gemm.BLOCK_N), gemm.THREADS, gemm.stage_bytes(32),
                      a.data_ptr(), b.data_ptr(), c.data_ptr(), np.int32(m), np.int32(n), np.int32(k))
        torch.cuda.synchronize()
        print(f"CASE broken gemm stages=1 shape={m}x{n}x{k}", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Parent: one compute-sanitizer process per tool, findings attributed per kernel instantiation
# ---------------------------------------------------------------------------------------------------------------


def _sanitizer() -> str:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        candidate = Path(root) / "bin" / "compute-sanitizer"
        if root and candidate.exists():
            return str(candidate)
    raise FileNotFoundError("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")


_TOP_LEVEL_RE = re.compile(r"^=+ \S")  # '========= Invalid ...' starts a message; '=========     at ...' continues it
_NOT_FINDINGS_RE = re.compile(r"^=+ (COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|Target application|Warning:)")


def normalize(name: str) -> str:
    """The sanitizer's demangled 'gemm_f16_f32acc<(int)3, (bool)1, (int)32>' as our name expression
    'gemm_f16_f32acc<3, true, 32>'."""
    name = name.replace("(bool)1", "true").replace("(bool)0", "false")
    return re.sub(r"\s+", " ", _CAST_RE.sub("", name))


def parse(report: str) -> tuple[int | None, dict[str, int]]:
    """(errors in the tool's last summary line, findings per kernel instantiation named in the report)."""
    summary = _SUMMARY_RE.findall(report)
    total = int(next(g for g in summary[-1] if g)) if summary else None
    per_kernel: dict[str, int] = {}
    block: list[str] = []

    def flush() -> None:
        if block and not _NOT_FINDINGS_RE.match(block[0]):
            m = _KERNEL_RE.search("\n".join(block))
            if m:
                per_kernel[normalize(m[1])] = per_kernel.get(normalize(m[1]), 0) + 1

    for line in report.splitlines():
        if _TOP_LEVEL_RE.match(line):
            flush()
            block = [line]
        elif block:
            block.append(line)
    flush()
    return total, per_kernel


def run_tool(tool: str, worker: str, log_dir: Path, plugins=()) -> tuple[int | None, dict[str, int], str]:
    # --report-api-errors no: torch and cuda-bindings probe optional driver entry points (cuGetProcAddress) and
    # expect some to fail; those are not kernel findings.
    cmd = [_sanitizer(), "--tool", tool, "--print-limit", "50", "--report-api-errors", "no", sys.executable, "-m",
           "suite.sanitize", "--worker", worker, *(f"--plugin={p}" for p in plugins)]
    if tool == "racecheck":
        cmd[1:1] = ["--racecheck-report", "hazard"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    report = proc.stdout + proc.stderr
    (log_dir / f"{tool}-{worker}.log").write_text(report)
    total, per_kernel = parse(report)
    return total, per_kernel, report


def _expressions() -> dict[tuple[str, int], list[str]]:
    """(variant label, stages) -> the kernel instantiations it can launch."""
    from suite.ptx import gemm, vector
    from suite.registry import variants

    out = {}
    for v in variants(backend="ptx"):
        for s in v.stages:
            if v.problem == "vector":
                out[(v.label, s)] = [vector.name_expression(s)]
            else:
                bk = 64 if "x64" in v.name else 32
                out[(v.label, s)] = [gemm.name_expression(s, a, bk) for a in (True, False)]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.sanitize", description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    p.add_argument("--out", type=Path, help="where to write sanitizer.md and the tools' logs "
                                            "(default: results/<gpu>/sanitizer-<timestamp>/)")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE (a dotted name or a .py file) before reading the registry, here and in the "
                        "sanitized processes: its variants are sanitized too (repeatable)")
    p.add_argument("--worker", choices=("healthy", "broken"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    # A plugin given by path is passed on by absolute path: the sanitized process may resolve it from elsewhere.
    args.plugin = [str(Path(x).resolve()) if x.endswith(".py") else x for x in args.plugin]
    from suite.plugins import PluginError, load_plugins

    try:
        load_plugins(args.plugin)
    except PluginError as e:
        print(f"error: --plugin: {e}", file=sys.stderr)
        return 2
    if args.worker:
        return worker_healthy() if args.worker == "healthy" else worker_broken()

    import torch
    from tabulate import tabulate

    if not torch.cuda.is_available():
        print("python -m suite.sanitize needs a CUDA GPU (compute-sanitizer runs the kernels)", file=sys.stderr)
        return 2
    from suite.driver.meta import collect
    from suite.driver.report import slug

    meta = collect(True)
    out = args.out or Path("results") / slug(meta["gpu"]) / f"sanitizer-{dt.datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    exprs = _expressions()
    findings: dict[str, dict[str, int]] = {}
    totals: dict[str, int | None] = {}
    for tool in args.tools:
        totals[tool], findings[tool], _ = run_tool(tool, "healthy", out, args.plugin)
    broken_total, broken_kernels, _ = run_tool("racecheck", "broken", out, args.plugin)

    rows, ok = [], True
    for (label, stages), names in exprs.items():
        line = [label, stages]
        for tool in args.tools:
            n = sum(findings[tool].get(name, 0) for name in names)
            ok &= n == 0
            line.append("clean" if n == 0 else f"{n} finding(s)")
        rows.append(line)
    for tool in args.tools:
        ok &= totals[tool] == 0  # also catches findings in kernels not attributed above, and a tool that did not run
    caught = bool(broken_total)
    ok &= caught
    table = tabulate(rows, headers=["variant", "stages", *args.tools], tablefmt="github")
    text = (f"# compute-sanitizer report\n\n- GPU: {meta['gpu']}, driver {meta.get('driver')}, date {meta['date']}\n"
            f"- shapes: vector n={VECTOR_N}; gemm {', '.join('x'.join(map(str, s)) for s in GEMM_SHAPES)}\n"
            f"- tool summaries (errors, all kernels): {totals}\n\n{table}\n\n"
            f"Self-test: the GEMM with its stage-reuse barrier removed (STAGES=1) under racecheck: "
            f"{broken_total} hazard(s) reported {'(caught, as it must be)' if caught else '(NOT caught: the check is blind)'}"
            f"; per kernel: {broken_kernels}\n")
    (out / "sanitizer.md").write_text(text)
    print(text)
    print(f"wrote {out}/sanitizer.md and the tools' logs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
