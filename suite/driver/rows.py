"""A results row: one (problem, dtype, shape, variant, stages), as the driver builds it and results.json keeps it.

``Row`` is the typed record; it is made in one place (``make_row``, for every row of a job: ``skeleton``) and filled
in as the row is validated and timed. ``Row.to_dict`` is what results.json and the CSV hold, key for key as the
driver wrote before this record existed; ``Row.from_dict`` reads such a dict back. The columns every row has come
first, in their fixed order; the others appear only where something set them (a row that was never timed has no
``ci95``), in the order they were set.

Here too: how a failure is written into a row (``fail``), the kernel facts a row carries (``add_info``), and the
throughput, ratio and flags of a job's timed rows (``throughput_and_flags``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from suite.driver import meta as run_meta
from suite.driver import timing
from suite.info import KernelInfo
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant, variants
from suite.sass import PendingClasses, summary

MAX_SPREAD = 0.01  # interquartile range / median above which a row is flagged (the fixed timer re-times it first)
LAUNCH_BOUND_SHARE = 0.8  # host enqueue time / GPU median at or above which a row is marked launch-bound


class _Unset:
    """A column nothing set: absent from ``to_dict`` (not None, which is a value some columns hold)."""

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(eq=False)
class Row:
    # -- the columns every row has, in this order
    problem: str | None = None
    shape: str | None = None
    dtype: str | None = None  # the dtype label: input -> accumulator -> output
    backend: str | None = None
    variant: str | None = None
    group: str | None = None
    stages: int | None = None
    baseline: bool = False
    ceiling: bool = False
    median_ms: float | None = None
    iqr_ms: float | None = None
    spread: float | None = None  # iqr / median
    samples: int = 0
    throughput: float | None = None
    unit: str | None = None
    ratio_to_ceiling: float | None = None
    valid: bool | None = None
    max_abs_error: float | None = None
    rel_error: float | None = None
    measured: bool = False
    throttled: bool | None = None
    note: str = ""
    # -- columns a row has once something set them
    job: int = UNSET  # the plan's job index and this row's index in the whole plan (its seed derives from it)
    plan_row: int = UNSET
    gpu_index: int | None = UNSET
    gpu_uuid: str | None = UNSET
    error: str = UNSET  # a failed row: the whole message, and what failed (build, launch, timing, inputs, device)
    failure: str = UNSET
    built_for: str = UNSET  # without a GPU: the arch the kernels were compiled and described for
    smem_per_stage: int | None = UNSET  # suite.info.KernelInfo's facts
    smem_total: int | None = UNSET
    registers: int | None = UNSET
    spill_bytes: int | None = UNSET
    occupancy: int | None = UNSET
    threads: int | None = UNSET
    grid: int | None = UNSET
    config: str = UNSET
    tile_bytes: int | None = UNSET
    resident_blocks_per_sm: int | None = UNSET
    bytes_in_flight_per_sm: int | None = UNSET
    sass: str | None = UNSET
    sass_counts: dict[str, int] | None = UNSET
    cooldown_s: float = UNSET  # the burst timer's
    below_cap: bool | None = UNSET
    bursts_retaken: int = UNSET
    ci95: float = UNSET  # the timers': half-width of the median's 95% interval, relative
    batches: int = UNSET
    precision_met: bool = UNSET
    launch: str = UNSET  # "graph" or "eager", and why eager where it was not asked for
    host_enqueue_us: float | None = UNSET
    launch_note: str = UNSET
    sm_clock_mhz: float | None = UNSET
    temperature_c: float | None = UNSET
    ceiling_timings: int = UNSET  # the ceiling row's: how often it was timed in its job, and the drift between
    ceiling_drift: float | None = UNSET
    ceiling_ms: float = UNSET
    # the time of a copy_ that moves the row's minimum bytes (Problem.min_bytes), timed once per job as the rows are,
    # and floor_ms / median_ms; None where nothing was timed (no GPU)
    floor_ms: float | None = UNSET
    ratio_to_floor: float | None = UNSET
    accumulation: str | None = UNSET  # at a dtype whose rows state it (DType.accumulation): "promoted" or "fast"
    ceiling_error: float | None = UNSET  # the ceiling's max abs error on this row's validation inputs (the bound's)
    launch_bound: bool = UNSET
    roofline: Any = UNSET  # added after the run (suite.driver.roofline, suite.driver.profile)
    ratio_to_roofline: float | None = UNSET
    bound: str | None = UNSET
    effective_latency_ns: float | None = UNSET
    profile: Any = UNSET
    extra: dict = field(default_factory=dict)  # keys this record does not know (a newer writer's), kept as they are
    # -- the driver's own, never written: done (goes back to the parent whole) and SASS still being listed
    final: bool = field(default=False, repr=False)
    pending_sass: Any = field(default=None, repr=False)

    def __setattr__(self, name: str, value) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"a results row has no column {name!r}")
        if name in _OPTIONAL and value is not UNSET and name not in self.__dict__.get("_order", ()):
            self.__dict__.setdefault("_order", []).append(name)
        object.__setattr__(self, name, value)

    def update(self, fields: dict | None = None, /, **more) -> None:
        """Set columns by name (AttributeError for one a row does not have)."""
        for name, value in {**(fields or {}), **more}.items():
            setattr(self, name, value)

    def to_dict(self) -> dict:
        """The row as results.json and the CSV hold it: the fixed columns, then those set, in the order set."""
        out = {name: getattr(self, name) for name in _CORE}
        out.update((name, getattr(self, name)) for name in self.__dict__.get("_order", ()) if name not in _INTERNAL)
        out = {k: v for k, v in out.items() if v is not UNSET}
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        """A row from results.json (keys this record does not know kept in ``extra``, written back as they were)."""
        row = cls()
        for name, value in data.items():
            if name in _FIELDS and name not in _INTERNAL:
                setattr(row, name, value)
            else:
                row.extra[name] = value
        return row

    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)


_FIELDS = {f.name for f in dataclasses.fields(Row)}
_INTERNAL = {"extra", "final", "pending_sass"}
_CORE = [f.name for f in dataclasses.fields(Row) if f.default is not UNSET and f.name not in _INTERNAL]
_OPTIONAL = {f.name for f in dataclasses.fields(Row) if f.default is UNSET}


def blank_row(**fields) -> dict:
    """A results row with nothing measured, as a dict (suite.merge's rows for missing jobs): every column a row has,
    in order, ``fields`` filled in (further columns after them)."""
    row = Row().to_dict()
    row.update(fields)
    return row


def make_row(problem: Problem, size, variant: Variant, stages, dtype: str | None = None) -> Row:
    row = Row(
        problem=problem.name,
        shape=problem.shape(size),
        dtype=problem.dtype_of(dtype).label,
        backend=variant.backend,
        variant=variant.name,
        group=variant.group,
        stages=stages,
        baseline=variant.baseline,
        ceiling=variant.ceiling,
        unit=problem.unit,
    )
    the_dtype = problem.dtype_of(dtype)
    if the_dtype.accumulation is not None and the_dtype.name in variant.dtypes:
        row.accumulation = getattr(variant.kernel, "fp8_accumulation", None)
    return row


def variants_of(problem: str) -> dict[str, Variant]:
    return {v.label: v for v in variants(problem)}


def skeleton_rows(job) -> list[Row]:
    """The rows of ``job`` (suite.driver.plan.Job) before anything ran."""
    problem, by_label = PROBLEMS[job.problem], variants_of(job.problem)
    rows = []
    for spec in job.rows:
        row = make_row(problem, job.size, by_label[spec.label], spec.stages, job.dtype)
        row.update(job=job.index, plan_row=spec.index)
        rows.append(row)
    return rows


def skeleton(job) -> list[dict]:
    """The rows of ``job`` before anything ran, as dicts (marked failed by callers when a job cannot run)."""
    return [row.to_dict() for row in skeleton_rows(job)]


def add_info(row: Row, info: KernelInfo | None) -> None:
    """The row's kernel facts from ``info``; SASS classes still being listed in the background (PendingClasses) are
    left in ``row.pending_sass`` for ``settle_sass`` once the job's rows are validated."""
    info = info or KernelInfo()
    row.update({k: v for k, v in info.as_dict(sass=False).items() if k not in ("stages", "note")})
    if info.note:
        row.note = "; ".join(n for n in (row.note, info.note) if n)
    if info.stages is not None:
        row.stages = info.stages
    if isinstance(info.sass, PendingClasses):  # settled with the job's rows (settle_sass), a failure failing the row
        row.pending_sass = info.sass
    else:
        add_sass(row, info.sass)


def add_sass(row: Row, classes) -> None:
    classes = dict(classes or {})
    row.sass = summary(classes) if classes else None
    row.sass_counts = classes or None


def settle_sass(row: Row) -> None:
    """Fill in the row's SASS classes listed in the background (``add_info``), waiting for them; a listing that
    failed fails the row (its build cannot be described). No row leaves a job with its listing still pending."""
    if row.pending_sass is None:
        return
    pending, row.pending_sass = row.pending_sass, None
    try:
        add_sass(row, pending)
    except Exception as e:  # noqa: BLE001 - cuobjdump failed on the cubin: the row's build is not described
        fail(row, "build failed (SASS listing)", e)


def fail(row: Row, what: str, error: BaseException) -> None:
    """Mark ``row`` failed, with its ``failure`` (build, launch or timing: the CLI counts each apart from the rows
    that failed validation) and a one-line note that points at the cause: for a compile error, its first error (never
    a warning) at its ``.cu`` file:line, and where the PTX is kept; the whole message in ``error``. ``error`` may be
    any BaseException a kernel raised (SystemExit too): the row failed, the run goes on."""
    from suite.nvrtc.loader import KernelCompileError

    if isinstance(error, SystemExit):  # its str is its code alone
        text = f"it called sys.exit({error.code!r})"
    else:
        text = str(error).replace("\x00", "").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if isinstance(error, KernelCompileError):
        what, failure = "build failed", "build"
        where = error.first_error[:300] + (f" (PTX kept at {error.ptx_path})" if error.ptx_path else "")
    else:
        failure = "build" if what.startswith("build failed") else "timing" if what.startswith("timing") else "launch"
        where = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")[:300]
    row.update(
        valid=False,
        measured=False,
        error=f"{type(error).__name__}: {text}",
        failure=failure,
        note=f"{what}: {type(error).__name__}: {where}",
    )


def throughput_and_flags(
    problem: Problem,
    size,
    group_rows: list[Row],
    ceiling_ms: float | None = None,
    precision: float | None = None,
    floor_ms: float | None = None,
    floor_failed: str | None = None,
) -> None:
    """Throughput and ratio to the ceiling of one job's measured rows (the ceiling's median: ``ceiling_ms``, else
    the ceiling row's among them); notes for noisy, imprecise or throttled ones. A problem with a memory floor
    (Problem.min_bytes) gives every row ``floor_ms`` (the job's, None when not timed) and ``ratio_to_floor``; where
    timing the floor failed (``floor_failed``: why), each measured row's note says so."""
    work = problem.work(size)
    if ceiling_ms is None:
        ceiling_ms = next((r.median_ms for r in group_rows if r.ceiling and r.measured), None)
    for row in group_rows:
        if problem.min_bytes is not None:
            row.floor_ms = floor_ms
            row.ratio_to_floor = floor_ms / row.median_ms if floor_ms and row.measured and row.median_ms else None
        if not row.measured:
            continue
        row.throughput = work / (row.median_ms * 1e-3) / problem.scale
        if ceiling_ms:
            row.ratio_to_ceiling = ceiling_ms / row.median_ms
            row.ceiling_ms = ceiling_ms
        flags = []
        if row.spread > MAX_SPREAD:
            flags.append(f"spread {100 * row.spread:.1f}% > {100 * MAX_SPREAD:g}%")
        if precision is not None and row.precision_met is False:
            flags.append(f"median known to +-{100 * row.ci95:.2f}% (95% CI), short of +-{100 * precision:g}%")
        if row.throttled:
            flags.append("GPU reported a clock slowdown (power/thermal) at the end of timing")
        if row.host_enqueue_us not in (None, UNSET):
            row.launch_bound = row.host_enqueue_us >= LAUNCH_BOUND_SHARE * row.median_ms * 1e3
            if row.launch_bound:
                enqueue = (
                    f"the host takes {row.host_enqueue_us:.0f} us to enqueue a call the GPU runs in "
                    f"{1e3 * row.median_ms:.0f} us"
                )
                flags.append(
                    f"launch-bound when called from Python: {enqueue} (timed from a CUDA graph, which leaves the "
                    "host out)"
                    if row.launch == "graph"
                    else f"launch-bound: {enqueue}, so the time is partly the host's"
                )
        if row.launch_note:
            flags.append(row.launch_note)
        if floor_failed:
            flags.append(f"no memory floor: timing it failed ({floor_failed})")
        if row.below_cap is False:
            flags.append(f"a burst began with the clock slowdown still on after {timing.COOL_MAX_S:g} s of waiting")
        if flags:
            row.note = "; ".join(([row.note] if row.note else []) + flags)


def current_gpu(device: torch.device) -> dict:
    """The row fields naming the GPU this process times on: torch's index and its UUID (None on the CPU)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return {"gpu_index": None, "gpu_uuid": None}
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return {"gpu_index": index, "gpu_uuid": run_meta.smi_target(uuid, None, index) if uuid else None}
