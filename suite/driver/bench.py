"""Validate, then time, every selected variant; return one row per (problem, shape, variant, stages).

Validation: fresh random inputs for every variant and stage count, the output poisoned with NaN, every element
compared with the problem's reference (torch, in higher precision where it matters). Only a variant that validates
is timed.

Timing: ``triton.testing.do_bench`` (CUDA events around each call; the L2 is flushed before every call by writing a
256 MB buffer, outside the timed region; warm-up calls excluded), median and interquartile range of all samples.
The ceiling of each (problem, shape) is timed interleaved with the variants: once before the first and once after
each, its samples pooled, so the ratios compare numbers taken under the same conditions.

Without a GPU: Triton kernels run in the interpreter and are validated (not timed); PTX modules are compiled for
sm_90 and described (registers, shared memory, SASS); timings are marked as not measured.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from suite.driver import meta as run_meta
from suite.info import KernelInfo
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant, variants
from suite.sass import summary
from suite.validate import validate

CPU_ARCH = "sm_90"  # what PTX modules are compiled for when there is no GPU to ask


@dataclass
class Options:
    problems: tuple[str, ...] = tuple(PROBLEMS)
    backends: tuple[str, ...] | None = None  # None: all
    variants: tuple[str, ...] | None = None  # names or backend:name; None: all (ceilings always run)
    stages: tuple[int, ...] | None = None  # None: each variant's own sweep
    sizes: dict[str, tuple] = field(default_factory=dict)  # problem -> sizes; missing: the problem's defaults
    dtypes: tuple[str, ...] | None = None  # dtype names (suite.problems.DType); None: every dtype of each problem
    shape_sets: tuple[str, ...] | None = None  # --shapes: named sets (Problem.shape_sets) instead of the defaults
    quick: bool = False
    seed: int = 0
    warmup_ms: float = 25.0
    rep_ms: float = 200.0


def _row(problem: Problem, size, variant: Variant, stages, dtype: str | None = None) -> dict:
    return {
        "problem": problem.name,
        "shape": problem.shape(size),
        "dtype": problem.dtype_of(dtype).label,
        "backend": variant.backend,
        "variant": variant.name,
        "group": variant.group,
        "stages": stages,
        "baseline": variant.baseline,
        "ceiling": variant.ceiling,
        "median_ms": None,
        "iqr_ms": None,
        "spread": None,  # iqr / median
        "samples": 0,
        "throughput": None,
        "unit": problem.unit,
        "ratio_to_ceiling": None,
        "valid": None,
        "max_abs_error": None,
        "rel_error": None,
        "measured": False,
        "throttled": None,
        "note": "",
    }


def _add_info(row: dict, info: KernelInfo | None) -> None:
    info = info or KernelInfo()
    row.update({k: v for k, v in info.as_dict().items() if k not in ("sass", "stages", "note")})
    if info.note:
        row["note"] = "; ".join(n for n in (row.get("note"), info.note) if n)
    if info.stages is not None:
        row["stages"] = info.stages
    row["sass"] = summary(info.sass) if info.sass else None
    row["sass_counts"] = info.sass or None


def _stats(times_ms: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(times_ms, n=4) if len(times_ms) >= 2 else [times_ms[0]] * 3
    return q[1], q[2] - q[0]


class Progress:
    """One line per step on stderr: [i/n] what is running."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.time()

    def step(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            bar = "#" * (20 * self.done // max(1, self.total))
            print(f"\r[{bar:<20}] {self.done}/{self.total} {time.time() - self.t0:6.1f}s {what[:70]:<70}",
                  end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)


def variant_names() -> set[str]:
    """Every name a variant answers to on the command line: its name and backend:name."""
    return {v.name for v in variants()} | {v.label for v in variants()}


def selected(opts: Options) -> list[tuple[Problem, Variant, tuple]]:
    """(problem, variant, stage counts) for everything the options select. A problem runs when the filters (backend,
    variant, stages) pick at least one of its variants; its ceiling then always runs too, whatever the filters say,
    so every row has its % column. A problem none of whose variants the filters pick does not run at all."""
    out = []
    for name in opts.problems:
        picked = []
        for v in variants(name):
            if opts.backends and v.backend not in opts.backends:
                continue
            if opts.variants and v.name not in opts.variants and v.label not in opts.variants:
                continue
            stages = v.stages
            if opts.stages is not None and stages != (None,):
                stages = tuple(s for s in stages if s in opts.stages)
                if not stages:
                    continue
            picked.append((v, stages))
        if picked:
            chosen = dict(picked)
            out += [(PROBLEMS[name], v, chosen.get(v, v.stages)) for v in variants(name) if v in chosen or v.ceiling]
    return out


class OptionError(ValueError):
    """Options that select nothing, or sizes this machine should not attempt; ``option`` names the Options field."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def check_options(opts: Options, on_gpu: bool) -> list[tuple[Problem, Variant, tuple]]:
    """Refuse, before any work, options that cannot give a meaningful run; return what they select.

    - the filters must pick at least one variant;
    - every requested stage count must be swept by at least one variant the other filters pick;
    - without a GPU, every requested size must be within the problem's CPU limit (``Problem.cpu_limit``): the Triton
      interpreter is tens of thousands of times slower than the GPU.
    """
    plan = selected(opts)
    if not plan:
        raise OptionError("variants", "no registered variant matches these filters together (see --list)")
    if opts.stages is not None:
        unstaged = selected(replace(opts, stages=None))
        swept = {s for _, v, stages in unstaged for s in stages if s is not None}
        missing = [s for s in opts.stages if s not in swept]
        if missing:
            raise OptionError("stages", f"no selected variant sweeps {', '.join(map(str, missing))} stage(s); "
                                        f"they sweep {', '.join(map(str, sorted(swept))) or 'none'}")
    if not on_gpu:
        for name, sizes in opts.sizes.items():
            problem = PROBLEMS[name]
            for size in sizes:
                if problem.work(size) > problem.cpu_max_work:
                    raise OptionError("sizes", f"{problem.shape(size)} is too large for a CPU run (the Triton "
                                               f"interpreter): {name} needs {problem.cpu_limit} without a GPU")
    return plan


def dtypes_for(problem: Problem, opts: Options) -> tuple[str, ...]:
    """The problem's dtypes the options select (all of them by default)."""
    return tuple(d for d in problem.dtypes if opts.dtypes is None or d in opts.dtypes)


def sizes_for(problem: Problem, opts: Options, on_gpu: bool, dtype: str | None = None) -> tuple:
    """(size, shape set) pairs: explicit sizes (no set: every variant runs them), the named sets asked for, or the
    default run's sizes for ``dtype``, each tagged with the first set it belongs to."""
    def tagged(sizes):
        return tuple((size, next((name for name, members in problem.shape_sets.items() if size in members), None))
                     for size in sizes)

    if problem.name in opts.sizes:
        return tuple((size, None) for size in opts.sizes[problem.name])
    if not on_gpu:
        return tuple((size, None) for size in problem.cpu_sizes)
    if opts.shape_sets:
        return tuple(dict.fromkeys((size, name) for name in opts.shape_sets for size in problem.shape_sets.get(name, ())))
    return tagged(problem.quick_sizes if opts.quick else problem.default_sizes_for(dtype))


def plan_groups(plan: list[tuple[Problem, Variant, tuple]], opts: Options, on_gpu: bool) -> list[tuple]:
    """The run as independent groups, in order: (problem, dtype, size, [(variant, stages), ...]), one per
    (problem, dtype, shape), each with its ceiling. A variant runs at a dtype it implements and at a size of a
    shape set it takes part in (Variant.shape_sets); at a dtype it does not implement it gets one row that says so
    (stages None), never silently absent."""
    groups = []
    for problem in {p.name: p for p, _, _ in plan}.values():
        chosen = [(v, stages) for p, v, stages in plan if p is problem]
        for dtype in dtypes_for(problem, opts):
            for size, shape_set in sizes_for(problem, opts, on_gpu, dtype):
                jobs = []
                for v, stages in chosen:
                    if shape_set is not None and v.shape_sets is not None and shape_set not in v.shape_sets:
                        continue
                    if dtype not in v.dtypes:
                        jobs.append((v, (None,)))
                        continue
                    at_dtype = v.stages_for(dtype)
                    jobs.append((v, tuple(s for s in at_dtype if s in stages) if stages != v.stages else at_dtype))
                groups.append((problem, dtype, size, [(v, s) for v, ss in jobs for s in ss]))
    return groups


def _fail(row: dict, what: str, error: Exception) -> None:
    """Mark ``row`` failed (the CLI's exit status counts it): a one-line note that points at the cause (for a
    compile error, the source location), the whole message in ``error``."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    where = getattr(error, "locations", None) or [next((line for line in lines if "error" in line.lower()),
                                                      lines[0] if lines else "")]
    row.update(valid=False, measured=False, error=f"{type(error).__name__}: {text}",
               note=f"{what}: {type(error).__name__}: {where[0][:300]}")


def _validate(size, variant: Variant, stages, seed: int, device, dtype: str | None = None) -> tuple[dict, object]:
    """suite.validate on fresh inputs: the check fields of the row, and the callable (for its KernelInfo)."""
    result = validate(variant, stages, size, seed=seed, device=device, dtype=dtype)
    check = result.check
    return {"valid": check.valid, "max_abs_error": check.max_abs_error, "rel_error": check.rel_error,
            "note": "" if check.valid else f"INVALID: {check.message}"}, result.fn


def _time(fn: Callable[[], None], opts: Options, rep_scale: float = 1.0) -> list[float]:
    from triton.testing import do_bench

    rep = (opts.rep_ms / 4 if opts.quick else opts.rep_ms) * rep_scale
    return list(do_bench(fn, warmup=opts.warmup_ms, rep=rep, return_mode="all"))


MAX_SPREAD = 0.01  # interquartile range / median above which a row is re-timed, then flagged


def _measure(fn: Callable[[], None], opts: Options) -> dict:
    """Time ``fn``; if the relative spread is above MAX_SPREAD, time it again with twice the repetitions and pool the
    samples (clocks often settle). Reads the GPU's clocks and throttle state right after."""
    samples = _time(fn, opts)
    if _spread(samples) > MAX_SPREAD:
        samples += _time(fn, opts, rep_scale=2.0)
    median, iqr = _stats(samples)
    state = run_meta.gpu_state()
    return {"median_ms": median, "iqr_ms": iqr, "spread": iqr / median, "samples": len(samples), "measured": True,
            "sm_clock_mhz": state.get("sm_clock_mhz"), "temperature_c": state.get("temperature_c"),
            "throttled": state.get("throttled")}


def _spread(samples: list[float]) -> float:
    median, iqr = _stats(samples)
    return iqr / median


def _throughput_and_flags(problem: Problem, size, group_rows: list[dict]) -> None:
    """Throughput and ratio to the ceiling of one shape's measured rows; notes for noisy or throttled ones."""
    work = problem.work(size)
    ceiling_ms = next((r["median_ms"] for r in group_rows if r["ceiling"] and r["measured"]), None)
    for row in group_rows:
        if not row["measured"]:
            continue
        row["throughput"] = work / (row["median_ms"] * 1e-3) / problem.scale
        if ceiling_ms:
            row["ratio_to_ceiling"] = ceiling_ms / row["median_ms"]
        flags = []
        if row["spread"] > MAX_SPREAD:
            flags.append(f"spread {100 * row['spread']:.1f}% > {100 * MAX_SPREAD:g}%")
        if row.get("throttled"):
            flags.append("GPU reported a clock slowdown (power/thermal) at the end of timing")
        if flags:
            row["note"] = "; ".join(([row["note"]] if row["note"] else []) + flags)


def run(opts: Options, on_gpu: bool, progress: bool = True, device: torch.device | None = None) -> list[dict]:
    """Every selected (problem, size, variant, stages): validated, timed on a GPU, described without one.
    ``device`` defaults to the GPU when ``on_gpu`` (tests pass the CPU to exercise the timing logic)."""
    device = device or torch.device("cuda" if on_gpu else "cpu")
    plan = check_options(opts, on_gpu)
    groups = plan_groups(plan, opts, on_gpu)
    bar = Progress(sum(len(jobs) for *_, jobs in groups), progress)
    rows: list[dict] = []
    described: dict[str, dict] = {}
    seed = opts.seed

    for problem, dtype, size, group in groups:
        if True:  # one (problem, dtype, shape): its rows and its ceiling
            timing_inputs = problem.make_inputs(size, 10_000 + seed, device, dtype) if on_gpu else None
            ceiling = next((v for v, _ in group if v.ceiling and dtype in v.dtypes), None)
            ceiling_samples: list[float] = []
            ceiling_state = {"throttled": False}
            ceiling_fn = None

            def time_ceiling() -> None:
                nonlocal ceiling_fn
                if ceiling is None or not on_gpu or ceiling.skip_reason() or ceiling.dtype_skip_reason(dtype):
                    return
                if ceiling_fn is None:
                    ceiling_fn = ceiling.factory(timing_inputs, problem.make_output(timing_inputs), None)
                ceiling_samples.extend(_time(ceiling_fn, opts))
                state = run_meta.gpu_state()
                ceiling_state.update(sm_clock_mhz=state.get("sm_clock_mhz"), temperature_c=state.get("temperature_c"),
                                     throttled=ceiling_state["throttled"] or bool(state.get("throttled")))

            time_ceiling()
            group_rows = []
            for variant, stages in group:
                seed += 1
                bar.step(f"{problem.name} {dtype} {problem.shape(size)} {variant.label} stages={stages}")
                row = _row(problem, size, variant, stages, dtype)
                group_rows.append(row)
                if dtype_reason := variant.dtype_skip_reason(dtype):
                    row["note"] = dtype_reason  # said in its row, never silently absent
                    continue
                reason = variant.skip_reason()
                if reason:
                    if not on_gpu and variant.describe is not None:
                        key = (variant.label, dtype)
                        if key not in described:
                            try:
                                described[key] = (variant.describe(CPU_ARCH) if dtype == problem.default_dtype
                                                  else variant.kernel.describe(CPU_ARCH, dtype))
                            except Exception as e:  # a build that fails is a failed row; the run goes on
                                described[key] = e
                        if isinstance(described[key], Exception):
                            _fail(row, "build failed", described[key])
                            continue
                        _add_info(row, described[key].get(stages))
                        row["built_for"] = CPU_ARCH  # compiled and described; not run: `reason`
                    else:
                        row["note"] = f"skipped: {reason}"
                    continue
                try:
                    check, fn = _validate(size, variant, stages, seed, device, dtype)
                except ValueError as e:  # a configuration the kernel refuses (e.g. a ring too deep for the GPU)
                    row.update(valid=False, note=f"refused: {e}")
                    continue
                except Exception as e:  # a build or launch that fails is a failed row; the run goes on
                    _fail(row, "build or launch failed", e)
                    continue
                row.update(check)
                _add_info(row, getattr(fn, "info", None))
                if not on_gpu or not row["valid"]:
                    continue  # without a GPU: validated (Triton in the interpreter), never timed
                if variant is ceiling:
                    continue  # timed interleaved, below
                try:
                    timed = variant.factory(timing_inputs, problem.make_output(timing_inputs), stages)
                    row.update(_measure(timed, opts))
                except Exception as e:
                    _fail(row, "timing failed", e)
                    continue
                time_ceiling()

            if ceiling_samples:
                median, iqr = _stats(ceiling_samples)
                for row in group_rows:
                    if row["ceiling"] and row["valid"]:
                        row.update(median_ms=median, iqr_ms=iqr, spread=iqr / median, samples=len(ceiling_samples),
                                   measured=True, **ceiling_state,
                                   note="timed interleaved with every variant of this shape, samples pooled")
            _throughput_and_flags(problem, size, group_rows)
            rows.extend(group_rows)
    return rows
