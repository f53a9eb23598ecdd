"""python -m suite.sanitize: every kernel that declares sanitizer sizes, at every stage count of every dtype it
implements, under compute-sanitizer (memcheck, racecheck, synccheck, initcheck), findings reported per variant x stage
count.

What runs comes from the registry: each variant whose kernel module (suite.kernel) lists ``sanitize_sizes`` is
launched through suite.validate at those sizes, in each dtype it implements (``--dtype`` limits them; a size the
kernel refuses at a dtype, e.g. fp8's K % 16, is listed as not run, with the rule), in one sanitizer process per tool
(``--worker healthy``). A finding is attributed to a variant x stage count by the kernel instantiation the report
names, which the module states (``kernel_names``). The check can fail: every fault a module declares (a build with
one barrier compiled out, e.g. gemm.cu's PIPESUITE_FAULT_NO_REUSE_BARRIER and PIPESUITE_FAULT_NO_RING_BARRIER) runs
under its tool too (``--worker fault``, in the problem's default dtype or the one the fault names) and must be
reported. Exit status 0 only when every healthy case is clean and every fault is caught.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from suite.driver.results_io import path_argument

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# One tool over every case; a worker that hangs is stopped and reported. $PIPESUITE_SANITIZER_TIMEOUT overrides it.
TOOL_TIMEOUT_S = int(os.environ.get("PIPESUITE_SANITIZER_TIMEOUT", "420"))
# 'ERROR SUMMARY: 3 errors', or racecheck's 'RACECHECK SUMMARY: 50 hazards displayed (239712 errors, 38592 warnings)'
# (the displayed count is capped by --print-limit; the errors in parentheses are all of them).
_SUMMARY_RE = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error")
_CAST_RE = re.compile(r"\((?:int|unsigned int|long long|bool)\)")
_HAZARD_RE = re.compile(r"\b(RAW|WAR|WAW)\b hazard")


# ---------------------------------------------------------------------------------------------------------------
# What is sanitized: derived from the registry
# ---------------------------------------------------------------------------------------------------------------


# --variant: the labels ("backend:name") or names the run is limited to; () = every sanitized variant. Set by main(),
# in the parent and in every worker (the parent passes it on).
_selection: tuple[str, ...] = ()


# --dtype: the dtypes the healthy cases are limited to; () = every dtype each variant implements. Passed on likewise.
_dtype_selection: tuple[str, ...] = ()


def _selected(v) -> bool:
    return not _selection or v.label in _selection or v.name in _selection


def select_dtypes(names) -> None:
    """Limit the healthy cases to the dtypes ``names``; ValueError naming any that no problem has."""
    global _dtype_selection
    from suite.problems import PROBLEMS

    known = {d for p in PROBLEMS.values() for d in p.dtypes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"not a dtype: {', '.join(map(repr, unknown))} (dtypes: {', '.join(sorted(known))})")
    _dtype_selection = tuple(names)


def cases(v) -> tuple[list[tuple[str, int, tuple]], list[str]]:
    """Variant ``v``'s healthy cases, (dtype, stages, size): every dtype it implements (of those --dtype names) that
    this machine runs, at that dtype's depths and each sanitizer size the kernel takes at that dtype; and what was
    not run, with why ("fp8e4m3 at 130x250x40: K must be ...")."""
    run, not_run = [], []
    if _dtype_selection and not set(v.dtypes) & set(_dtype_selection):
        not_run.append(f"(--dtype {', '.join(_dtype_selection)}): it implements {', '.join(v.dtypes)} only")
    for dtype in v.dtypes:
        if _dtype_selection and dtype not in _dtype_selection:
            continue
        if why := v.kernel.skip_reason(dtype):
            not_run.append(f"{dtype}: {why}")
            continue
        for size in v.kernel.sanitize_sizes:
            if rule := v.kernel.refuses(size, dtype):
                not_run.append(f"{dtype} at {_shape(v, size)}: {rule}")
                continue
            run += [(dtype, stages, size) for stages in v.stages_for(dtype)]
    return run, not_run


def depths(v, run: list | None = None) -> list:
    """The stage counts of ``v``'s healthy cases (``run``, else ``cases(v)``'s), in order (each dtype's depths,
    once)."""
    return list(dict.fromkeys(stages for _, stages, _ in (cases(v)[0] if run is None else run)))


def sanitized_variants():
    """Variants whose kernel module declares sanitizer sizes, in registry order (only those --variant names)."""
    from suite.registry import variants

    return [v for v in variants() if v.kernel.sanitize_sizes and _selected(v)]


def select(names) -> None:
    """Limit the run to the variants ``names`` (labels or names); ValueError naming any that is not sanitized."""
    global _selection
    from suite.registry import variants

    sanitized = [v for v in variants() if v.kernel.sanitize_sizes]
    known = {v.label for v in sanitized} | {v.name for v in sanitized}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"not a sanitized variant: {', '.join(map(repr, unknown))} "
            f"(sanitized: {', '.join(v.label for v in sanitized)})"
        )
    _selection = tuple(names)


def not_sanitized():
    """(label, why) for every kernel variant the sanitizer does not run (library baselines and ceilings aside)."""
    from suite.registry import variants

    out = []
    for v in variants():
        if v.baseline or v.ceiling or (v.kernel.sanitize_sizes) or not _selected(v):
            continue
        why = "its module declares no sizes"
        out.append((v.label, why))
    return out


def kernel_names() -> list[str]:
    """Every instantiation the sanitized variants may launch, normalized as our name expressions."""
    return sorted({normalize(n) for v in sanitized_variants() for s in depths(v) for n in v.kernel.kernel_names(s)})


def kernel_pattern(names) -> re.Pattern:
    """Matches a kernel of ``names`` (by its name before any template arguments) where a report names it:
    'gemm_f16_f32acc<(int)3, (bool)1, (int)32>(const unsigned short *, ...)'."""
    bases = sorted({n.split("<", 1)[0].strip() for n in names}, key=len, reverse=True)
    if not bases:
        return re.compile(r"(?!)")
    return re.compile(r"(?<![\w:])((?:" + "|".join(map(re.escape, bases)) + r")(?:<[^<>]*>)?)(?=\()")


# ---------------------------------------------------------------------------------------------------------------
# Workers: run inside compute-sanitizer
# ---------------------------------------------------------------------------------------------------------------


def _shape(v, size) -> str:
    from suite.problems import PROBLEMS

    return PROBLEMS[v.problem].shape(size)


CASE_START = "CASE-START "
REFUSED = "refused: "  # a healthy case whose launch refused its shape (ValueError naming the rule)


def _case_start(v, stages) -> None:
    """Name the instantiations the next launch may run, before it runs: a finding whose report names no kernel
    (racecheck names the inlined function, e.g. ldmatrix_x4, when the cubin has line info) is attributed to them."""
    print(CASE_START + " ; ".join(normalize(n) for n in v.kernel.kernel_names(stages)), flush=True)


def _case_line(v, dtype: str, stages, size) -> str:
    """How a healthy worker names a case it finished (followed by its verdict): the report counts a row's cases by
    these lines, so one the worker never reached is not called clean."""
    return f"CASE {v.label} {dtype} stages={stages} shape={_shape(v, size)}"


def healthy_rows(tools, findings: dict[str, dict[str, int]], finished: dict[str, str]) -> tuple[list[list], bool]:
    """The report's table, one row per sanitized variant x stage count: per tool ``clean``, ``N finding(s)`` (from
    ``findings``: per tool, per instantiation), ``not run (see below)`` for a blind spot, or ``not finished: I of N
    cases ran`` when the tool's healthy worker stopped (a timeout, a crash) before it finished the row's cases (by
    ``finished``: per tool, the worker's CASE lines); and whether every row is clean."""
    rows, ok = [], True
    for v in sanitized_variants():
        run = cases(v)[0]
        for stages in depths(v, run):
            names = [normalize(n) for n in v.kernel.kernel_names(stages)]
            line = [v.label, ", ".join(dict.fromkeys(d for d, s, _ in run if s == stages)), stages]
            for tool in tools:
                if blind_spot(v, tool):
                    line.append("not run (see below)")
                    continue
                n = sum(findings[tool].get(name, 0) for name in names)
                expected = [_case_line(v, d, s, size) for d, s, size in run if s == stages]
                ran = sum(f"\n{case} " in f"\n{finished[tool]}" for case in expected)
                ok &= n == 0 and ran == len(expected)
                partly = f"{ran} of {len(expected)} cases ran" if ran < len(expected) else ""
                if n:
                    line.append(f"{n} finding(s)" + (f" ({partly})" if partly else ""))
                else:  # a worker that stopped first did not judge the rest: never "clean"
                    line.append(f"not finished: {partly}" if partly else "clean")
            rows.append(line)
    return rows, ok


def blind_spot(v, tool: str) -> str | None:
    """Why ``tool`` cannot judge variant ``v`` (its module says), or None."""
    return v.kernel.sanitizer_blind_spots.get(tool)


def worker_healthy(tool: str | None = None) -> int:
    import torch

    from suite.validate import validate

    bad = 0
    for v in sanitized_variants():
        if tool and blind_spot(v, tool):
            continue  # this tool cannot judge it: not run, and the report says why
        for dtype, stages, size in cases(v)[0]:
            _case_start(v, stages)
            case = _case_line(v, dtype, stages, size)
            try:
                result = validate(v, stages, size, seed=7, device=torch.device("cuda"), dtype=dtype)
            except ValueError as e:  # a rule the module does not state in refuses(): said, launched nothing
                print(f"{case} {REFUSED}{e}", flush=True)
                continue
            print(f"{case} valid={result.check.valid}", flush=True)
            bad += not result.check.valid
    return 1 if bad else 0


def faults(tool: str | None = None):
    """(variant, fault) for every fault a sanitized variant's module declares (for ``tool``, or all)."""
    return [(v, f) for v in sanitized_variants() for f in v.kernel.faults if tool is None or f.tool == tool]


def worker_fault(tool: str, index: int) -> int:
    """Fault ``index`` of those declared for ``tool``: the variant rebuilt with the fault's define, launched through
    validate (its answer does not matter: the sanitizer must report the hazard). One fault per sanitizer process, so
    each gets the tool's whole print limit and its own error summary."""
    import torch

    from suite.validate import validate

    for v, fault in faults(tool)[index : index + 1]:
        broken_kernel = v.kernel.with_defines(fault.define, stages=fault.stages)
        broken = dataclasses.replace(v, kernel_ref=broken_kernel)
        for stages in fault.stages:
            # a fault needs to be seen once: one size (racecheck is slow)
            for size in (v.kernel.sanitize_sizes[0] if fault.size is None else fault.size,):
                _case_start(v, stages)
                result = validate(broken, stages, size, seed=11, device=torch.device("cuda"), dtype=fault.dtype)
                print(
                    f"CASE fault {fault.define} {v.label} stages={stages} shape={_shape(v, size)} "
                    f"valid={result.check.valid}",
                    flush=True,
                )
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
# Not findings: headers and summaries, and our own TIMEOUT line (a tool that timed out has no summary: not clean)
_NOT_FINDINGS_RE = re.compile(
    r"^=+ (COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|Target application|Warning:|TIMEOUT)"
)
_HAZARD_WARNING_RE = re.compile(r"^=+ Warning: .*hazard detected")


def normalize(name: str) -> str:
    """The sanitizer's demangled 'gemm_f16_f32acc<(int)3, (bool)1, (int)32>' as our name expression
    'gemm_f16_f32acc<3, true, 32>'."""
    name = name.replace("(bool)1", "true").replace("(bool)0", "false")
    return re.sub(r"\s+", " ", _CAST_RE.sub("", name))


def parse(report: str, names=None, warnings: bool = False) -> tuple[int | None, dict[str, int]]:
    """(errors in the tool's last summary line, findings per kernel instantiation named in the report). ``names``:
    the instantiations to look for (default: those of the sanitized variants). ``warnings``: racecheck's hazard
    warnings count as findings too (a fault build's self-test: racecheck files a race between threads of one warp as
    a "(Warp Level Programming)" warning, and its 50 displayed hazards can all be such warnings while the errors it
    counts go undisplayed)."""
    pattern = kernel_pattern(kernel_names() if names is None else names)
    summary = _SUMMARY_RE.findall(report)
    total = int(next(g for g in summary[-1] if g)) if summary else None
    per_kernel: dict[str, int] = {}
    block: list[str] = []
    running: list[str] = []  # the instantiations of the case that ran last (its CASE-START line)

    def flush() -> None:
        if block and (not _NOT_FINDINGS_RE.match(block[0]) or (warnings and _HAZARD_WARNING_RE.match(block[0]))):
            m = pattern.search("\n".join(block))
            name = normalize(m[1]) if m else (running[0] if running else None)
            if name:
                per_kernel[name] = per_kernel.get(name, 0) + 1

    for line in report.splitlines():
        if line.startswith(CASE_START):
            flush()
            block = []
            running[:] = [n.strip() for n in line[len(CASE_START) :].split(" ; ") if n.strip()]
        elif _TOP_LEVEL_RE.match(line):
            flush()
            block = [line]
        elif block:
            block.append(line)
    flush()
    return total, per_kernel


def tool_command(
    sanitizer: str, tool: str, worker: str, plugins=(), fault: int | None = None, selection=None
) -> list[str]:
    """The compute-sanitizer command line of one worker: the plugins and the --variant and --dtype selections passed
    on."""
    # --report-api-errors no: torch and cuda-bindings probe optional driver entry points (cuGetProcAddress) and
    # expect some to fail; those are not kernel findings.
    cmd = [
        sanitizer,
        "--tool",
        tool,
        "--print-limit",
        "50",
        "--report-api-errors",
        "no",
        sys.executable,
        "-m",
        "suite.sanitize",
        "--worker",
        worker,
        "--worker-tool",
        tool,
        *(f"--plugin={p}" for p in plugins),
        *(f"--variant={n}" for n in (_selection if selection is None else selection)),
        *(f"--dtype={d}" for d in _dtype_selection),
    ]
    if fault is not None:
        cmd += ["--worker-fault", str(fault)]
    if tool == "racecheck":
        cmd[1:1] = ["--racecheck-report", "hazard"]
    return cmd


def run_tool(
    tool: str, worker: str, log_dir: Path, plugins=(), fault: int | None = None, selection=None
) -> tuple[int | None, dict[str, int], str]:
    """Run a worker ("healthy", or "fault" for fault number ``fault`` of those declared for ``tool``) under ``tool``;
    write its log."""
    if worker == "fault" and fault is None:
        raise ValueError("a fault worker runs one fault: give its index among faults(tool)")
    cmd = tool_command(_sanitizer(), tool, worker, plugins, fault, selection)
    try:
        # one stream, in the order written: a finding sits after the CASE-START line of the launch that made it
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TOOL_TIMEOUT_S)
        report = proc.stdout
    except subprocess.TimeoutExpired as e:  # no summary then: a healthy run that times out is not clean
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        report = out + f"\n========= TIMEOUT: the worker did not finish in {TOOL_TIMEOUT_S} s\n"
    (log_dir / f"{tool}-{worker}{'' if fault is None else f'-{fault}'}.log").write_text(report)
    total, per_kernel = parse(report, warnings=worker == "fault")
    return total, per_kernel, report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.sanitize", description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    p.add_argument(
        "--out",
        type=path_argument,
        help="where to write sanitizer.md and the tools' logs (default: results/<gpu>/sanitizer-<timestamp>/)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (a dotted name or a .py file) before reading the registry, here and in the "
        "sanitized processes: its variants are sanitized too (repeatable)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="sanitize only this variant (backend:name or name; repeatable), and its declared faults",
    )
    p.add_argument(
        "--dtype",
        action="append",
        default=[],
        metavar="DTYPE",
        help="run the healthy kernels only in this dtype (repeatable; default: every dtype each one implements)",
    )
    p.add_argument(
        "--faults-only",
        action="store_true",
        help="run only the self-test (every declared fault of the chosen tools), not the healthy kernels",
    )
    p.add_argument("--worker", choices=("healthy", "fault"), help=argparse.SUPPRESS)
    p.add_argument("--worker-tool", choices=TOOLS, help=argparse.SUPPRESS)
    p.add_argument("--worker-fault", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    # A plugin given by path is passed on by absolute path: the sanitized process may resolve it from elsewhere.
    args.plugin = [str(Path(x).resolve()) if x.endswith(".py") else x for x in args.plugin]
    from suite.plugins import PluginError, load_plugins

    try:
        load_plugins(args.plugin)
    except PluginError as e:
        print(f"error: --plugin: {e}", file=sys.stderr)
        return 2
    try:
        select(args.variant)
    except ValueError as e:
        print(f"error: --variant: {e}", file=sys.stderr)
        return 2
    try:
        select_dtypes(args.dtype)
    except ValueError as e:
        print(f"error: --dtype: {e}", file=sys.stderr)
        return 2
    if args.worker:
        if args.worker == "healthy":
            return worker_healthy(args.worker_tool)
        return worker_fault(args.worker_tool, args.worker_fault)

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
    findings: dict[str, dict[str, int]] = {}
    totals: dict[str, int | None] = {}
    refused: dict[str, None] = {}  # the healthy cases a launch refused, as the workers said (every tool runs them)
    finished: dict[str, str] = {}  # per tool, the CASE lines of its healthy worker: the cases it got through
    for tool in [] if args.faults_only else args.tools:
        totals[tool], findings[tool], report = run_tool(tool, "healthy", out, args.plugin)
        refused |= dict.fromkeys(
            line[5:] for line in report.splitlines() if line.startswith("CASE ") and REFUSED in line
        )
        finished[tool] = "\n".join(line for line in report.splitlines() if line.startswith("CASE "))

    rows, ok = ([], True) if args.faults_only else healthy_rows(args.tools, findings, finished)
    for tool in [] if args.faults_only else args.tools:
        if all(blind_spot(v, tool) for v in sanitized_variants()):
            continue  # the tool judges none of the selected kernels (each one's reason is in the report)
        ok &= totals[tool] == 0  # also catches findings in kernels not attributed above, and a tool that did not run

    # Self-test: every declared fault must be reported, attributed to the instantiations it broke.
    fault_rows = []
    for tool in sorted({f.tool for _, f in faults()} & set(args.tools)):  # each tool's faults, with that tool
        for index, (v, fault) in enumerate(faults(tool)):
            total, per_kernel, report = run_tool(tool, "fault", out, args.plugin, fault=index)
            kinds = sorted(set(_HAZARD_RE.findall(report)))
            names = {normalize(n) for s in fault.stages for n in v.kernel.kernel_names(s)}
            # the process ran this fault alone: what the tool attributes to its kernels, or else its error total
            n = sum(per_kernel.get(name, 0) for name in names) or (total or 0)
            ok &= n > 0
            fault_rows.append(
                [
                    v.label,
                    fault.name,
                    fault.define,
                    ",".join(map(str, fault.stages)),
                    tool,
                    f"{n} finding(s) {'/'.join(kinds)}".strip() if n else "NOT caught: the check is blind",
                ]
            )

    shapes = "; ".join(
        f"{v.label}: {', '.join(_shape(v, s) for s in v.kernel.sanitize_sizes)}" for v in sanitized_variants()
    )
    skipped = "".join(f"\n- not run under compute-sanitizer: {label} ({why})" for label, why in not_sanitized())
    skipped += "".join(
        f"\n- not run: {v.label} {why}"
        for v in sanitized_variants()
        for why in ([] if args.faults_only else cases(v)[1])
    )
    skipped += "".join(f"\n- not run: {case}" for case in refused)
    skipped += "".join(
        f"\n- not run under {tool}: {v.label} ({blind_spot(v, tool)})"
        for v in sanitized_variants()
        for tool in args.tools
        if blind_spot(v, tool)
    )
    table = (
        "(--faults-only: the healthy kernels were not run)"
        if args.faults_only
        else tabulate(rows, headers=["variant", "dtypes", "stages", *args.tools], tablefmt="github")
    )
    fault_table = (
        tabulate(fault_rows, headers=["variant", "fault", "define", "stages", "tool", "reported"], tablefmt="github")
        if fault_rows
        else "(no variant declares a fault)"
    )
    text = (
        f"# compute-sanitizer report\n\n- GPU: {meta['gpu']}, driver {meta.get('driver')}, date {meta['date']}\n"
        f"- shapes: {shapes}\n- tool summaries (errors, all kernels; None: the tool printed none, e.g. it timed "
        f"out): {totals}{skipped}\n\n{table}\n\n"
        f"## Self-test: builds with a barrier or a wait removed must be reported\n\n{fault_table}\n"
    )
    (out / "sanitizer.md").write_text(text)
    print(text)
    print(f"wrote {out}/sanitizer.md and the tools' logs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
