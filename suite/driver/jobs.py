"""Running a plan's jobs (suite.driver.plan.Job) in this process, or one job in a ``--gpus`` worker.

Before any job, every NVRTC kernel the jobs need is compiled (suite.driver.precompile). Then each job: every row
validated, then every valid row timed (suite.driver.measure) with the ceiling interleaved.

Validation: fresh random inputs for every variant and stage count (the seed from the row's place in the plan, so
any shard or GPU draws the same), the output poisoned with NaN, every element compared with the problem's reference
(torch, in higher precision where it matters). Only a variant that validates is timed. A Triton kernel compiles on
its first call, which is this one. At a dtype with an error bound against the ceiling (DType.error_vs_ceiling), the
job's ceiling also runs on each row's validation inputs, and a row whose worst error exceeds that multiple of the
ceiling's is INVALID. At a dtype whose rows state their accumulation (DType.accumulation), a row that accumulates
otherwise than the ceiling is refused before anything is built.

Timing: the ceiling's samples are pooled and every ratio of the job is taken against their median: numbers from one
GPU, taken in one stretch. A problem with a memory floor (Problem.min_bytes) times it once per job, after the
ceiling's first timing: a copy_ of the row's minimum bytes (suite.driver.measure.time_floor). Every timed row
shares the job's timing inputs with the ceiling; their checksums are checked after each row, and a row whose kernel
wrote them is INVALID, the rows after it getting fresh inputs.

Faults: anything a kernel raises at launch, while timed or in its reference, a SystemExit included, fails its row
and the run goes on. A KeyboardInterrupt stops the run: ``Interrupted`` carries the rows finished so far. After a
row fails on a GPU, the driver asks the GPU whether it still answers; when it does not (a sticky CUDA error, a GPU
off the bus), the rows not finished are marked failed with the reason instead of failing one by one.

Without a GPU: Triton kernels run in the interpreter and are validated (not timed); PTX modules are compiled for
sm_90 and described (registers, shared memory, SASS); timings are marked as not measured.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable

import torch

from suite.driver import meta as run_meta
from suite.driver import timing
from suite.driver.measure import Ceiling, eager_only, stop_rule, time_call, time_floor
from suite.driver.plan import Options
from suite.driver.precompile import CPU_ARCH, describe, describe_key, precompile
from suite.driver.rows import (
    Row,
    add_info,
    current_gpu,
    fail,
    settle_sass,
    skeleton,
    skeleton_rows,
    throughput_and_flags,
    variants_of,
)
from suite.driver.workers import DeviceFailed, Interrupted, JobResult, unfinished
from suite.kernel import LibraryOp, accumulation_refusal
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant
from suite.validate import changed_inputs, validate


class Progress:
    """One line per step on stderr: [i/n] what is running, redrawn in place; drawn only when stderr is a terminal
    (a log file gets no carriage returns)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.enabled = enabled and sys.stderr.isatty()

    def step(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            bar = "#" * (20 * self.done // max(1, self.total))
            print(
                f"\r[{bar:<20}] {self.done}/{self.total} {time.time() - self.t0:6.1f}s {what[:70]:<70}",
                end="" if self.done < self.total else "\n",
                file=sys.stderr,
                flush=True,
            )


def _compile_progress(enabled: bool) -> Callable[[int], Callable[[str], None]]:
    """``precompile``'s ``on_start(total)`` for a run: a Progress line per module compiled (``compile <module>``),
    on a terminal only, as the run's own progress."""

    def start(total: int) -> Callable[[str], None]:
        bar = Progress(total, enabled)
        return lambda what: bar.step(f"compile {what}")

    return start


RowsCallback = Callable[[list[dict]], None]


# ---------------------------------------------------------------------------------------------------------------
# The run: jobs of the plan (suite.driver.plan), each validated, then timed with its ceiling interleaved
# ---------------------------------------------------------------------------------------------------------------


def run(
    opts: Options,
    on_gpu: bool,
    progress: bool = True,
    device: torch.device | None = None,
    on_rows: RowsCallback | None = None,
) -> list[dict]:
    """Every selected (problem, dtype, shape, variant, stages), in this process: validated, timed on a GPU,
    described without one. ``device`` defaults to the GPU when ``on_gpu`` (tests pass the CPU to exercise the
    timing logic). ``on_rows``: see ``run_jobs``."""
    from suite.driver import plan as planning

    jobs = planning.build(opts, on_gpu).jobs
    return run_jobs(jobs, opts, on_gpu, progress=progress, device=device, on_rows=on_rows)


def run_jobs(
    jobs,
    opts: Options,
    on_gpu: bool,
    progress: bool = True,
    device: torch.device | None = None,
    phases: timing.Phases | None = None,
    gpu: dict | None = None,
    described: dict | None = None,
    on_rows: RowsCallback | None = None,
) -> list[dict]:
    """``jobs`` (suite.driver.plan.Job) in order, in this process: their kernels compiled up front, then each job
    validated and timed; returns the rows as dicts (suite.driver.rows.Row.to_dict). When the GPU stops answering, the
    rows left are marked failed with the reason. ``described``: descriptions already made in this process (kept
    across calls by a worker), added to.

    ``on_rows(rows_so_far)``: called after each job with every row finished so far, in plan order (a caller writes
    them as they come). A KeyboardInterrupt stops the run and raises ``Interrupted`` with those rows."""
    device = device or torch.device("cuda" if on_gpu else "cpu")
    phases = phases if phases is not None else timing.Phases()
    gpu = gpu if gpu is not None else current_gpu(device)
    described = described if described is not None else {}
    rows: list[dict] = []
    try:
        with phases("compile"):
            described.update(precompile(jobs, on_gpu, known=described, on_start=_compile_progress(progress)))
        bar = Progress(sum(len(j.rows) for j in jobs) * (2 if on_gpu else 1), progress)
        lost = None
        for job in jobs:
            if lost is not None:
                rows += [dict(r, **gpu) for r in unfinished(job, skeleton, [], None, lost)]
            else:
                try:
                    rows += run_job(job, opts, on_gpu, device, described=described, phases=phases, bar=bar, gpu=gpu)
                except DeviceFailed as e:
                    lost = f"the GPU failed earlier in this run: {e}"
                    rows += [dict(r, **gpu) for r in unfinished(job, skeleton, e.rows, None, f"the GPU failed: {e}")]
            if on_rows is not None:
                on_rows(list(rows))
    except Interrupted as e:
        raise Interrupted(rows + e.rows) from None
    except KeyboardInterrupt:
        raise Interrupted(rows) from None
    return rows


def _check_device(device: torch.device, rows: list[Row]) -> None:
    """After a row failed on the GPU: raise DeviceFailed (with the rows finished so far) when the device no longer
    answers (a sticky CUDA error, or the GPU fell off the bus): every later launch would fail the same way."""
    if device.type != "cuda":
        return
    try:
        torch.cuda.synchronize(device)
    except Exception as e:  # noqa: BLE001 - any error here means the context is gone
        raise DeviceFailed(
            f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}", _finished(rows)
        ) from None


def _finished(rows: list[Row], job=None) -> list[dict]:
    """The rows finished so far, as they go back to a caller: whole, no background listing in them, and those timed
    in a job cut short given their throughput (the job's end, which gives it, did not come; their ratio to the
    ceiling only where the ceiling's own timing had finished)."""
    done = [r for r in rows if r.final]
    for r in done:
        settle_sass(r)
    if job is not None and (cut := [r for r in done if r.measured and r.throughput is None]):
        throughput_and_flags(PROBLEMS[job.problem], job.size, cut)
    return [r.to_dict() for r in done]


def run_job(
    job,
    opts: Options,
    on_gpu: bool,
    device: torch.device,
    *,
    described: dict | None = None,
    phases: timing.Phases | None = None,
    bar: Progress | None = None,
    gpu: dict | None = None,
) -> list[dict]:
    """One job (suite.driver.plan.Job): every row validated (without a GPU: Triton in the interpreter, NVRTC kernels
    described), then, on a GPU, every valid row timed with the ceiling interleaved (suite.driver.timing). A row's
    validation seed is ``opts.seed + 1 + its plan index``: the same inputs whichever shard or GPU runs it. Returns
    the rows as dicts; a KeyboardInterrupt raises ``Interrupted``, a device that stops answering ``DeviceFailed``,
    with the rows finished before it."""
    rows = skeleton_rows(job)
    try:
        _run_job(job, rows, opts, on_gpu, device, described, phases, bar, gpu)
    except KeyboardInterrupt:
        raise Interrupted(_finished(rows, job)) from None
    except DeviceFailed as e:
        raise DeviceFailed(str(e), _finished(rows, job)) from None
    return [row.to_dict() for row in rows]


def _run_job(job, rows: list[Row], opts, on_gpu, device, described, phases, bar, gpu) -> None:
    phases = phases if phases is not None else timing.Phases()
    bar = bar or Progress(0, enabled=False)
    described = described if described is not None else {}
    problem, by_label, dtype, size = PROBLEMS[job.problem], variants_of(job.problem), job.dtype, job.size
    pairs = [(spec, by_label[spec.label]) for spec in job.rows]
    for row in rows:
        row.update(gpu or {})

    to_time = []
    for (spec, variant), row in zip(pairs, rows):
        bar.step(f"validate {problem.name} {dtype} {problem.shape(size)} {variant.label} stages={spec.stages}")
        steps: dict[str, float] = {}
        with phases("validate"):
            timed = _validate_row(row, variant, spec, job, problem, opts, on_gpu, device, described, steps)
            if chose := variant.kernel.choice(size, dtype) if dtype in variant.dtypes else None:
                row.note = "; ".join(n for n in (f"chose {chose}", row.note) if n)  # a module that picks a kernel
        for step, seconds in steps.items():
            phases.add(f"validate.{step}", seconds)  # where validate's seconds went (counted in it already)
        row.final = not timed
        if timed:
            to_time.append((spec, variant, row))
        elif row.valid is False and on_gpu:
            _check_device(device, rows)
    for row in rows:  # the SASS listings made in the background while the rows validated
        settle_sass(row)
    to_time = [entry for entry in to_time if entry[2].valid]

    ceiling_ms, (floor_ms, floor_failed) = (
        _time_job(job, problem, to_time, rows, opts, device, phases, bar, by_label) if on_gpu else (None, (None, None))
    )
    precision = None if opts.timer == "fixed" else stop_rule(opts).precision
    throughput_and_flags(problem, size, rows, ceiling_ms, precision, floor_ms, floor_failed)


def _validate_row(
    row: Row,
    variant: Variant,
    spec,
    job,
    problem: Problem,
    opts: Options,
    on_gpu: bool,
    device: torch.device,
    described: dict,
    steps: dict | None = None,
) -> bool:
    """Validate one row (or describe it, or say why it is skipped); True when it is valid and can be timed.
    ``steps``: validate's seconds per step, added to."""
    dtype = job.dtype
    if dtype_reason := variant.dtype_skip_reason(dtype):
        row.note = dtype_reason  # said in its row, never silently absent
        return False
    if why := accumulation_refusal(variant.kernel, problem.dtype_of(dtype).accumulation):
        row.update(valid=False, note=f"refused: {why}")  # before anything is built or launched
        return False
    reason = variant.skip_reason()
    if reason:
        if not on_gpu and variant.describe is not None:
            key = describe_key(variant, job)
            if key not in described:
                try:
                    described[key] = describe(variant, problem, dtype, key[2])
                except Exception as e:  # noqa: BLE001 - a build that fails is a failed row; the run goes on
                    described[key] = e
            if isinstance(described[key], Exception):
                fail(row, "build failed", described[key])
                return False
            add_info(row, described[key].get(spec.stages))
            row.built_for = CPU_ARCH  # compiled and described; not run: `reason`
        else:
            row.note = f"skipped: {reason}"
        return False
    if isinstance(variant.kernel, LibraryOp) and (rule := variant.kernel.refuses(job.size, dtype)):
        # a library call that does not take this shape (cuBLASLt's fp8 wants N and K multiples of 16): a fact of the
        # library, said in its row, not a failure of the run; the kernels of the shape run without that ceiling
        row.note = f"not run: {rule}"
        return False
    ceiling = _bounding_ceiling(job, variant, problem) if on_gpu else None
    try:
        check, fn = _validate(
            job.size, variant, spec.stages, opts.seed + 1 + spec.index, device, dtype, steps, ceiling=ceiling
        )
    except ValueError as e:  # a configuration the kernel refuses (e.g. a ring too deep for the GPU)
        row.update(valid=False, note=f"refused: {e}")
        return False
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a build, launch or reference that fails (sys.exit too): a failed row
        fail(row, "build or launch failed", e)
        return False
    row.update(check)
    add_info(row, getattr(fn, "info", None))
    return bool(row.valid) and on_gpu


def _validate(
    size,
    variant: Variant,
    stages,
    seed: int,
    device,
    dtype: str | None = None,
    seconds: dict | None = None,
    ceiling: Variant | None = None,
) -> tuple[dict, object]:
    """suite.validate on fresh inputs: the check fields of the row, and the callable (for its KernelInfo);
    ``seconds``: validate's seconds per step, added to. ``ceiling``: the job's ceiling, whose error on the same
    inputs bounds the row's (``_error_vs_ceiling``)."""
    result = validate(variant, stages, size, seed=seed, device=device, dtype=dtype, seconds=seconds)
    check = result.check
    fields = {
        "valid": check.valid,
        "max_abs_error": check.max_abs_error,
        "rel_error": check.rel_error,
        "note": "" if check.valid else f"INVALID: {check.message}",
    }
    if ceiling is not None and check.valid:
        started = time.perf_counter()
        fields.update(_error_vs_ceiling(result, ceiling, PROBLEMS[variant.problem], dtype))
        if seconds is not None:
            seconds["ceiling"] = seconds.get("ceiling", 0.0) + time.perf_counter() - started
    return fields, result.fn


def _bounding_ceiling(job, variant: Variant, problem: Problem) -> Variant | None:
    """The job's ceiling, where its error bounds this row's (DType.error_vs_ceiling) and it runs here on the job's
    shape; None otherwise (the ceiling row itself, a dtype without the bound, a ceiling skipped here: its row says
    why). Only on a GPU (the caller's rule): Triton's interpreter rounds fp32 to bf16 toward zero, a whole ulp where
    the GPU and cuBLAS round to nearest, so without a GPU the bound would judge the interpreter, not the kernel."""
    if problem.dtype_of(job.dtype).error_vs_ceiling is None or not job.ceiling or variant.label == job.ceiling:
        return None
    ceiling = variants_of(job.problem).get(job.ceiling)
    if ceiling is None or ceiling.skip_reason() or ceiling.dtype_skip_reason(job.dtype):
        return None
    if isinstance(ceiling.kernel, LibraryOp) and ceiling.kernel.refuses(job.size, job.dtype):
        return None
    return ceiling


def _error_vs_ceiling(result, ceiling: Variant, problem: Problem, dtype: str | None) -> dict:
    """The ceiling run once on the row's own validation inputs, its max abs error taken against the same reference
    (``ceiling_error``); a row whose max abs error exceeds the dtype's bound on it (DType.error_bound) is INVALID,
    its note saying by how much. A ceiling that fails on these inputs bounds nothing, and the row's note says so."""
    out = problem.make_output(result.inputs)
    out.fill_(float("nan"))
    try:
        ceiling.factory(result.inputs, out, None)()
        if out.device.type == "cuda":
            torch.cuda.synchronize(out.device)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - the ceiling's own row reports its failure; this row is not bounded
        return {"note": f"error not bounded by {ceiling.label}'s: it failed on these inputs ({type(e).__name__})"}
    error = problem.check(out, result.ref, dtype).max_abs_error
    if not math.isfinite(error):
        return {"note": f"error not bounded by {ceiling.label}'s: its own error on these inputs is {error}"}
    the_dtype = problem.dtype_of(dtype)
    bound = the_dtype.error_bound(error)
    if result.check.max_abs_error <= bound:
        return {"ceiling_error": error}
    return {
        "ceiling_error": error,
        "valid": False,
        "note": (
            f"INVALID: max abs error {result.check.max_abs_error:.3g} exceeds {the_dtype.error_vs_ceiling:g} x "
            f"{ceiling.label}'s on the same inputs ({error:.3g}, taken as at least the tolerance's atol "
            f"{the_dtype.tolerance.get('atol', 0.0):g}): {bound:.3g}"
        ),
    }


class _SharedInputs:
    """The inputs every timed row of a job and its ceiling share, with a copy out of the kernels' reach: after each
    timing, ``wrote`` says which inputs a kernel changed, and puts their first values back (the next row times on
    fresh inputs, not on what the last kernel left)."""

    def __init__(self, inputs):
        self.inputs = inputs
        self.pristine = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)

    def wrote(self) -> str | None:
        touched = changed_inputs(self.inputs, self.pristine)
        if not touched:
            return None
        for i in touched:
            self.inputs[i].copy_(self.pristine[i])
        which = ", ".join(f"#{i} ({tuple(self.inputs[i].shape)})" for i in touched)
        return f"the kernel wrote to its input {which} while timed: inputs are read-only"


def _mark_wrote(row: Row, why: str) -> None:
    """A row whose kernel changed the shared inputs while timed: INVALID, its time not kept (it timed other work)."""
    row.update(
        valid=False,
        measured=False,
        median_ms=None,
        iqr_ms=None,
        spread=None,
        note="; ".join(n for n in (f"INVALID: {why}", row.note) if n),
    )


def _time_job(
    job,
    problem: Problem,
    to_time: list,
    rows: list[Row],
    opts: Options,
    device: torch.device,
    phases: timing.Phases,
    bar: Progress,
    by_label: dict[str, Variant],
) -> tuple[float | None, tuple[float | None, str | None]]:
    """Time the job's valid rows with its ceiling interleaved; returns the ceiling's pooled median (None: no
    ceiling here) and the job's memory floor (``_floor``: its time, or why it has none). The ceiling row, when the
    job has it, gets the pooled samples. The shared inputs are checked after every timing (``_SharedInputs``)."""
    ceiling_variant = by_label.get(job.ceiling) if job.ceiling else None
    ceiling_row = next((r for r in rows if r.ceiling and f"{r.backend}:{r.variant}" == job.ceiling), None)
    with phases("inputs"):
        shared = _SharedInputs(problem.make_inputs(job.size, job.timing_seed, device, job.dtype)) if to_time else None
    ceiling = _ceiling(ceiling_variant, ceiling_row, shared, problem, opts, phases, device, rows)
    if to_time:
        ceiling.time()
    floor_ms = _floor(job, problem, opts, device, phases) if to_time else (None, None)
    for spec, variant, row in to_time:
        bar.step(f"time {problem.name} {job.dtype} {problem.shape(job.size)} {variant.label} stages={spec.stages}")
        if variant is ceiling_variant:
            continue  # timed interleaved; finished once its samples are pooled, below
        try:
            with phases("inputs"):
                timed = variant.factory(shared.inputs, problem.make_output(shared.inputs), spec.stages)
            row.update(time_call(timed, opts, phases, eager_only(variant)))
            del timed
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - a timing that fails (sys.exit too) is a failed row; the run goes on
            fail(row, "timing failed", e)
            _check_device(device, rows)
        with phases("inputs"):
            if why := shared.wrote():
                _mark_wrote(row, why)
        row.final = True
        ceiling.after_row()
    for _ in range(len(rows) - len(to_time)):
        bar.step(f"{problem.name} {job.dtype} {problem.shape(job.size)}")
    if to_time:
        ceiling.finish()
    if not ceiling.samples:
        return None, floor_ms
    median = _pool_ceiling(ceiling, ceiling_row)
    if ceiling_row is not None:
        ceiling_row.final = True
    return median, floor_ms


def _floor(
    job, problem: Problem, opts: Options, device: torch.device, phases: timing.Phases
) -> tuple[float | None, str | None]:
    """The job's memory floor (suite.driver.measure.time_floor over Problem.min_bytes), timed once, as the rows are:
    (its median ms, None), or (None, why it failed): the rows then have no floor and say why, and the run goes on.
    (None, None) for a problem without min_bytes."""
    if problem.min_bytes is None:
        return None, None
    try:
        return time_floor(problem.min_bytes(job.size, job.dtype), device, opts, phases), None
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - no floor for this job (e.g. out of memory); the rows are still timed (a
        # GPU that stopped answering fails the next row, which checks the device)
        return None, f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}".rstrip(": ")


class _GuardedCeiling:
    """A job's ceiling (suite.driver.measure.Ceiling) whose failures fail its row, not the job: anything it raises
    while timed (a SystemExit too), or a write to the shared inputs, marks the ceiling row and stops timing it; the
    job's ratios are then not taken."""

    def __init__(self, ceiling: Ceiling, row: Row | None, shared: _SharedInputs | None, device, rows):
        self.ceiling, self.row, self.shared, self.device, self.rows = ceiling, row, shared, device, rows

    def _guard(self, action: Callable[[], None], always: bool = False) -> None:
        if self.ceiling.fn is None and not always:
            return
        try:
            action()
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the ceiling failed: its row says so, the job goes on
            error = e
            self._drop(lambda row: fail(row, "timing failed", error))
            _check_device(self.device, self.rows)
            return
        if self.shared is not None and (why := self.shared.wrote()):
            self._drop(lambda row: _mark_wrote(row, why))

    def _drop(self, mark: Callable[[Row], None]) -> None:
        self.ceiling.fn, self.ceiling.samples = None, []
        if self.row is not None:
            mark(self.row)
            self.row.final = True

    def time(self) -> None:
        self._guard(self.ceiling.time)

    def after_row(self) -> None:
        self._guard(self.ceiling.after_row)

    def finish(self) -> None:
        self._guard(self.ceiling.finish)

    @property
    def samples(self) -> list[float]:
        return self.ceiling.samples


def _ceiling(variant, row, shared, problem, opts, phases, device, rows) -> _GuardedCeiling:
    """The job's ceiling, built on the shared inputs when its row validated here (else one that times nothing)."""
    fn = None
    if shared is not None and row is not None and row.valid is True:  # a ceiling that validated here
        try:
            with phases("inputs"):
                fn = variant.factory(shared.inputs, problem.make_output(shared.inputs), None)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the ceiling's row fails; the job's rows are timed without it
            fail(row, "timing failed", e)
    guarded = _GuardedCeiling(Ceiling(None, opts, phases), row, shared, device, rows)
    if fn is not None:
        # its first calls (Launched) run here: a failure, or a write to the inputs, is the ceiling row's
        guarded._guard(lambda: setattr(guarded, "ceiling", Ceiling(fn, opts, phases, eager_only(variant))), True)
    return guarded


def _pool_ceiling(ceiling: _GuardedCeiling, row: Row | None) -> float:
    """The ceiling's pooled median; its row, when it has one that validated, gets the pooled samples."""
    from suite.driver.measure import _stats
    from suite.driver.rows import MAX_SPREAD

    inner = ceiling.ceiling
    median, iqr = _stats(inner.samples)
    drift = inner.cadence.drift
    if row is not None and row.valid:
        note = (
            f"timed interleaved with every variant of this shape ({len(inner.cadence.timings)} timings"
            + (f", drift {100 * drift:.2f}%" if drift is not None else "")
            + "), samples pooled"
        )
        if drift is not None and drift > MAX_SPREAD:
            note += f"; drift above {100 * MAX_SPREAD:g}% between its timings"
        row.update(
            median_ms=median,
            iqr_ms=iqr,
            spread=iqr / median,
            samples=len(inner.samples),
            measured=True,
            ci95=timing.ci_half_width(inner.samples),
            # the pooled samples' median known to the stop rule's precision (not every timing's batch need be)
            precision_met=timing.ci_half_width(inner.samples) <= stop_rule(inner.opts).precision,
            ceiling_timings=len(inner.cadence.timings),
            ceiling_drift=drift,
            **inner.launched.fields(),
            **inner.state,
            note=note,
        )
    return median


_WORKER_DESCRIBED: dict = {}  # in a worker process: descriptions made for its earlier jobs


def job_worker(job, device, opts: Options, on_gpu: bool):
    """The real worker (suite.driver.workers.run_jobs): run ``job`` in this process, pinned to ``device``, and
    return its rows with the seconds per phase and the GPU's state after it. Raises DeviceFailed when the pinned
    GPU is not the one asked for, is not visible at all, or stops answering during the job."""
    if on_gpu and device.index is not None:
        if not torch.cuda.is_available() or torch.cuda.device_count() != 1:
            raise DeviceFailed(
                f"{device.label} is not visible to its worker (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}, {torch.cuda.device_count()} GPU(s))"
            )
        uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
        if device.uuid and uuid and run_meta.smi_target(uuid, None, 0) != device.uuid:
            raise DeviceFailed(f"{device.label}'s worker sees another GPU ({run_meta.smi_target(uuid, None, 0)})")
    phases = timing.Phases()
    where = torch.device("cuda" if on_gpu and device.index is not None else "cpu")  # a CPU worker: CPU tensors
    with phases("compile"):
        _WORKER_DESCRIBED.update(precompile([job], on_gpu, known=_WORKER_DESCRIBED))
    try:  # a DeviceFailed goes to the parent (with the rows finished), which gives this GPU no more jobs
        rows = run_job(job, opts, on_gpu, where, described=_WORKER_DESCRIBED, phases=phases, gpu=device.row_fields())
    except DeviceFailed:
        raise
    except Exception:  # the job failed; when the GPU no longer answers either, the GPU failed
        _check_device(where, [])
        raise
    state = run_meta.gpu_state() if on_gpu and device.index is not None else {}
    return JobResult(rows, phases.seconds, state)


def worker_setup(plugins: tuple[str, ...] = ()) -> None:
    """A spawned worker's setup, after it is pinned: the interpreter's compatibility shim where Triton interprets,
    then the plugins the parent loaded (their variants are in the plan)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        from suite.triton import interpreter_compat

        interpreter_compat.install()
    if plugins:
        from suite.plugins import load_plugins

        load_plugins(list(plugins))
    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        # the CUDA context and cuBLAS now, while the parent may still be compiling, not at the first job
        torch.empty(1, device="cuda")
        torch.cuda.current_blas_handle()
