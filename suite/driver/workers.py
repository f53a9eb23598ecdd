"""--gpus: one worker process per GPU, the plan's jobs spread among them.

Each GPU gets its own ``concurrent.futures.ProcessPoolExecutor`` of one spawned process, pinned to that GPU by
CUDA_VISIBLE_DEVICES (set by the pool's initializer, before anything touches CUDA in that process). One pool per GPU,
not one pool of N: a pool whose process dies is broken for good, and a shared pool would take every GPU down with it.

Jobs (suite.driver.plan.Job: one table of one (problem, dtype, shape), with its ceiling) go to whichever GPU is free
next, longest first. Each job times its own ceiling, so every ratio compares two numbers from one GPU. Rows come back
whole per job and are returned in plan order, whichever GPU finished first.

A GPU fails when its worker process dies, or when its job reports that the device stopped answering
(``DeviceFailed``, with the rows it had finished). Then: the rows of its job that were not finished are marked failed
with the reason, that GPU takes no more jobs, the other GPUs take the jobs it would have run and finish. When every
GPU has failed, the jobs left are marked failed ("not run") with each GPU's reason. A job that raises anything else
failed, not its GPU (a row's own failure is a failed row; this is the job's code failing): its rows are marked failed
with the reason and the GPU goes on. Every planned row is returned exactly once.

Starting a spawned worker costs seconds (an interpreter, torch, Triton and the kernel modules imported, a CUDA
context). ``prestart`` starts the pools before the devices are known (suite.run calls it before it imports torch
itself), their processes importing the heavy modules without touching CUDA; ``start`` then pins each to its device
by its first task, before anything in it touches CUDA, and does not wait: the workers open their CUDA contexts while
the parent compiles, and ``run_jobs(..., started=...)`` waits for them. Those seconds overlap the parent's own
start-up and compile instead of following them.

The worker function is injectable (``run_jobs(..., worker=...)``), so the scheduling, merging and failure handling
are tested on a CPU with fake workers; the real worker is suite.driver.jobs.job_worker. Importing this module
imports nothing heavy (no torch): a spawned process imports it before it is pinned.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Device:
    """Where a worker runs: a GPU (``index`` as torch numbers it in the parent process, its UUID, its model) or the
    CPU (index None; the CPU path of the driver, used to test the real worker on machines without a GPU)."""

    index: int | None
    uuid: str | None = None
    name: str = "cpu"
    visible: str | None = None  # the CUDA_VISIBLE_DEVICES entry that shows the worker this GPU and only it

    @property
    def label(self) -> str:
        if self.index is None:
            return "the CPU worker"
        return f"GPU {self.index}" + (f" ({self.uuid})" if self.uuid else "")

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": "" if self.index is None else (self.visible or str(self.index))}

    def row_fields(self) -> dict:
        return {"gpu_index": self.index, "gpu_uuid": self.uuid}


class DeviceFailed(RuntimeError):
    """The device stopped answering during a job: ``rows`` are the job's rows that were finished before (plan_row
    tells which); the rest are unfinished."""

    def __init__(self, message: str, rows: Iterable[dict] = ()):
        super().__init__(message)
        self.rows = list(rows)

    def __reduce__(self):  # picklable across the process boundary, rows included
        return (DeviceFailed, (str(self), self.rows))


class Interrupted(KeyboardInterrupt):
    """The run was stopped (Ctrl-C): ``rows`` are those finished before, in plan order, as dicts, for the caller to
    save. A KeyboardInterrupt still, for a caller that does not look for it."""

    def __init__(self, rows: Iterable[dict] = ()):
        super().__init__("interrupted")
        self.rows = list(rows)

    def __reduce__(self):
        return (Interrupted, (self.rows,))


@dataclass
class JobResult:
    """What a worker returns for one job: its rows, seconds per phase, the GPU's state at the end."""

    rows: list[dict]
    phases: dict[str, float] = field(default_factory=dict)
    gpu_state: dict = field(default_factory=dict)


@dataclass
class DeviceReport:
    """What happened on one device: for results metadata."""

    device: Device
    jobs: list[int] = field(default_factory=list)  # plan indices of the jobs it finished
    rows: int = 0
    failed: str | None = None  # why it stopped taking jobs
    phases: dict[str, float] = field(default_factory=dict)
    gpu_state_after: dict = field(default_factory=dict)

    def meta(self) -> dict:
        return {
            "index": self.device.index,
            "uuid": self.device.uuid,
            "name": self.device.name,
            "jobs": self.jobs,
            "rows": self.rows,
            "failed": self.failed,
            "phase_seconds": {k: round(v, 2) for k, v in self.phases.items()},
            "gpu_state_after": self.gpu_state_after,
        }


def _init_worker(device: Device, setup: str | None, setup_args: tuple) -> None:
    """The pool's initializer: pin the process to its device, then import and call ``setup`` ("package.module:name":
    named, not pickled, so that nothing that might touch CUDA is imported before the process is pinned)."""
    os.environ.update(device.env())
    if device.index is None:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    global CURRENT
    CURRENT = device
    if setup is not None:
        module, _, name = setup.partition(":")
        getattr(importlib.import_module(module), name)(*setup_args)


CURRENT: Device | None = None  # in a worker process: the device it is pinned to


def _preload(modules: tuple[str, ...]) -> None:
    """A prestarted pool's initializer: import ``modules`` (none of them may touch CUDA at import), pin nothing."""
    for name in modules:
        importlib.import_module(name)


def _started() -> int:
    return os.getpid()


def _pin(device: Device, setup: str | None, setup_args: tuple) -> None:
    """A prestarted worker's first task: pin it to ``device`` and run ``setup``, as _init_worker does for a pool
    started pinned. CUDA reads CUDA_VISIBLE_DEVICES when it initializes, which nothing in the process has done yet
    (checked here, and the worker checks what it sees: suite.driver.jobs.job_worker)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialized in this worker before it was pinned to a GPU")
    _init_worker(device, setup, setup_args)


def _call(worker: Callable, job, device: Device, *args):
    """Run ``worker(job, device, *args)`` in a worker, once it is pinned to ``device`` (its pin failed otherwise)."""
    if CURRENT != device:
        raise DeviceFailed(f"{device.label}'s worker was never pinned to it (its setup failed)")
    return worker(job, device, *args)


def prestart(count: int, preload: tuple[str, ...] = ()) -> list[ProcessPoolExecutor]:
    """``count`` single-process spawned pools, started now (not at their first job), each importing ``preload``
    and nothing else: for ``start``, which pins them and shuts down those it does not take."""
    context = multiprocessing.get_context("spawn")
    pools = []
    for _ in range(count):
        pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_preload, initargs=(preload,))
        pool.submit(_started)  # a pool starts its process at its first task: this one
        pools.append(pool)
    return pools


def shutdown(pools: Iterable[ProcessPoolExecutor]) -> None:
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)


def gpu_count_hint(text: str, environ=os.environ) -> int:
    """How many GPUs ``--gpus text`` will name, known before torch is imported (for prestart): the indices given
    (or all of them), at most what CUDA_VISIBLE_DEVICES shows, else what NVML counts; 0 where neither says (no GPU
    here, or no pynvml: nothing is prestarted). Only a hint: ``start`` starts what is missing and suite.run shuts
    down what is left."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        available = len([p for p in visible.split(",") if p.strip()])
    else:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                available = int(pynvml.nvmlDeviceGetCount())
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - no pynvml, no driver: not known here
            available = 0
    spec = text.strip().lower()
    asked = available if spec == "all" else len([p for p in spec.split(",") if p.strip()])
    return min(asked, available)


def _exit_status(pool: ProcessPoolExecutor) -> str:
    """How a broken pool's worker process ended: its exit status (negative: the signal that ended it)."""
    codes = []
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        # it has ended: its status is known once it is reaped. The pool's own thread may reap it at the same moment,
        # and then this join returns before that thread has recorded the status: wait for it to be recorded.
        deadline = time.monotonic() + 5
        process.join(timeout=5)
        while process.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.01)
        codes.append(process.exitcode)
    known = [c for c in codes if c is not None]
    if not known:
        return "exit status unknown"
    return ", ".join(f"killed by signal {-c}" if c < 0 else f"exit status {c}" for c in known)


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else 'no message'}"


def unfinished(job, skeleton: Callable, done: list[dict], device: Device | None, why: str) -> list[dict]:
    """The job's rows: those in ``done`` as they are, the others from ``skeleton(job)`` marked failed with ``why``
    (``failure`` "device": not run, or not finished, because the device or its worker failed)."""
    finished = {r.get("plan_row"): r for r in done}
    rows = []
    for row in skeleton(job):
        if row.get("plan_row") in finished:
            rows.append(finished[row["plan_row"]])
            continue
        row.update(valid=False, measured=False, error=why, failure="device", note=f"not run: {why}")
        if device is not None:
            row.update(device.row_fields())
        rows.append(row)
    return rows


@dataclass
class Started:
    """Workers started for ``devices`` (``start``): each device's pool, and the task that pins it when the pool was
    prestarted (None when the pool was started pinned)."""

    pools: dict[Device, ProcessPoolExecutor]
    pins: dict[Device, Future | None]
    setup: str | None
    setup_args: tuple

    def shutdown(self) -> None:
        shutdown(self.pools.values())

    def ready(self) -> dict[Device, ProcessPoolExecutor]:
        """Each device's pool, once its pin is done; a pool whose preload or pin failed (CUDA already up there, a
        setup error, its process died) replaced by a fresh one started pinned."""
        pools = {}
        for d, pool in self.pools.items():
            pinned = self.pins.get(d)
            try:
                if pinned is not None:
                    pinned.result()
                pools[d] = pool
            except Exception:  # noqa: BLE001 - a fresh one instead
                pool.shutdown(wait=False, cancel_futures=True)
                pools[d] = _pinned_pool(d, self.setup, self.setup_args)
        return pools


def _pinned_pool(device: Device, setup: str | None, setup_args: tuple) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(device, setup, setup_args),
    )
    pool.submit(_started)  # start its process now, not at its first job
    return pool


def start(
    devices: list[Device],
    setup: str | None = None,
    setup_args: tuple = (),
    prestarted: list[ProcessPoolExecutor] | None = None,
) -> Started:
    """One worker per device, without waiting for any: prestarted pools (``prestart``) are pinned by their first
    task, the others started pinned; those of ``prestarted`` left over are shut down. The caller goes on (the
    parent compiles) while the workers pin themselves and open their CUDA contexts; run_jobs waits for them."""
    if not devices:
        raise ValueError("no device to run on")
    spare = list(prestarted or ())
    pools: dict[Device, ProcessPoolExecutor] = {}
    pins: dict[Device, Future | None] = {}
    for d in devices:
        while spare and d not in pools:
            pool = spare.pop(0)
            try:
                pins[d] = pool.submit(_pin, d, setup, setup_args)  # its first task, after the preload
                pools[d] = pool
            except Exception:  # noqa: BLE001 - its process died while preloading: the next one, or a fresh one
                pool.shutdown(wait=False, cancel_futures=True)
        if d not in pools:
            pools[d], pins[d] = _pinned_pool(d, setup, setup_args), None
    shutdown(spare)
    return Started(pools, pins, setup, setup_args)


def run_jobs(
    jobs: list,
    devices: list[Device],
    worker: Callable,
    args: tuple = (),
    *,
    skeleton: Callable,
    cost: Callable = lambda job: 0.0,
    setup: str | None = None,
    setup_args: tuple = (),
    on_result: Callable | None = None,
    started: Started | None = None,
) -> tuple[list[dict], list[DeviceReport]]:
    """Run every job on one of ``devices``: ``worker(job, device, *args)`` in that device's process returns a
    JobResult (or a plain list of rows); ``setup`` ("package.module:function") runs in each worker once it is pinned,
    with ``setup_args``. ``skeleton(job)`` gives a job's rows unrun (for marking failures; each with its
    ``plan_row``). ``on_result(job, rows)`` is called in this process as each job's rows arrive. Returns every
    job's rows in plan order (by job index, then as the job returned them) and one report per device.
    The workers: ``started`` (from ``start``, for these devices, with their setup), else started here. Every pool
    is shut down on return."""
    if started is None:
        started = start(devices, setup, setup_args)
    elif set(started.pools) != set(devices):
        started.shutdown()
        raise ValueError("the started workers are not those of these devices")
    try:
        pools = started.ready()
    except BaseException:
        started.shutdown()
        raise
    reports = {d: DeviceReport(d) for d in devices}
    queue = deque(sorted(jobs, key=lambda j: (-cost(j), j.index)))  # longest first: the last to finish is short
    running: dict[Future, tuple[Device, object]] = {}
    results: dict[int, list[dict]] = {}

    def submit(device: Device) -> None:
        job = queue.popleft()
        try:
            running[pools[device].submit(_call, worker, job, device, *args)] = (device, job)
        except Exception as e:  # noqa: BLE001 - the pool broke between two jobs (its process died idle)
            queue.appendleft(job)
            fail(device, _reason(e))

    def fail(device: Device, why: str) -> None:
        reports[device].failed = why
        pools[device].shutdown(wait=False, cancel_futures=True)

    def finish(job, rows: list[dict]) -> None:
        results[job.index] = rows
        if on_result is not None:
            on_result(job, rows)

    try:
        for device in devices:
            if queue:
                submit(device)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                device, job = running.pop(future)
                report = reports[device]
                try:
                    result = future.result()
                except DeviceFailed as e:
                    why = f"{device.label} failed during this job: {e}"
                    finish(job, unfinished(job, skeleton, e.rows, device, why))
                    fail(device, str(e))
                except KeyboardInterrupt:
                    raise
                except BaseException as e:  # noqa: BLE001 - its process died (BrokenProcessPool), or its job raised
                    if type(e).__name__ == "BrokenProcessPool":
                        died = f"its worker process died ({_exit_status(pools[device])})"
                        finish(
                            job, unfinished(job, skeleton, [], device, f"{device.label} failed during this job: {died}")
                        )
                        fail(device, died)
                    else:  # the job failed, not the GPU: its rows say why, the GPU goes on with the next job
                        finish(
                            job,
                            unfinished(job, skeleton, [], device, f"the job raised on {device.label}: {_reason(e)}"),
                        )
                else:
                    if not isinstance(result, JobResult):
                        result = JobResult(list(result))
                    rows = [dict(r, **device.row_fields()) for r in result.rows]
                    finish(job, rows)
                    report.jobs.append(job.index)
                    report.rows += len(rows)
                    for name, seconds in result.phases.items():
                        report.phases[name] = report.phases.get(name, 0.0) + seconds
                    report.gpu_state_after = result.gpu_state or report.gpu_state_after
                if report.failed is None and queue:
                    submit(device)
            if queue and not running:  # every device has failed: nothing will take the jobs left
                why = "; ".join(f"{r.device.label}: {r.failed}" for r in reports.values())
                while queue:
                    job = queue.popleft()
                    finish(job, unfinished(job, skeleton, [], None, f"every device failed ({why})"))
    except KeyboardInterrupt as e:  # stopped: the rows finished so far go back with it
        done = [row for index in sorted(results) for row in results[index]]
        raise Interrupted(done + list(getattr(e, "rows", ()))) from None
    finally:
        for pool in pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
    rows = [row for index in sorted(results) for row in results[index]]
    return rows, [reports[d] for d in devices]


# ---------------------------------------------------------------------------------------------------------------
# --gpus
# ---------------------------------------------------------------------------------------------------------------


def visible_gpus() -> list[Device]:
    """Every GPU torch sees in this process, with its UUID, model and the CUDA_VISIBLE_DEVICES entry that names it."""
    import torch

    from suite.driver.meta import smi_target

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        uuid = getattr(props, "uuid", None)
        visible = smi_target(uuid, os.environ.get("CUDA_VISIBLE_DEVICES"), i)
        uuid_text = visible if str(visible).startswith(("GPU-", "MIG-")) else None
        out.append(Device(i, uuid_text, props.name, visible))
    return out


def parse_gpus(text: str, available: list[Device]) -> list[Device]:
    """--gpus: 'all' or comma-separated indices of ``available`` (torch's numbering here), e.g. '0,1'. Raises
    ValueError naming the rule: no GPU, an index that is not a whole number or not a GPU here, a GPU named twice, or
    GPUs of different models (their rows would be tabulated as one GPU's)."""
    if not available:
        raise ValueError("no CUDA GPU here: --gpus needs one")
    spec = text.strip().lower()
    if spec == "all":
        chosen = list(available)
    else:
        parts = [p.strip() for p in spec.split(",")]
        if not parts or not all(p.isdigit() for p in parts):
            raise ValueError(f"{text!r}: give 'all' or GPU indices separated by commas, e.g. 0,1")
        indices = [int(p) for p in parts]
        if len(set(indices)) != len(indices):
            raise ValueError(f"{text!r}: a GPU is named twice")
        missing = [i for i in indices if i >= len(available)]
        if missing:
            raise ValueError(
                f"{text!r}: no GPU {missing[0]} here (this machine has {len(available)}: "
                f"{', '.join(str(d.index) for d in available)})"
            )
        chosen = [available[i] for i in indices]
    models = sorted({d.name for d in chosen})
    if len(models) > 1:
        raise ValueError(
            f"{text!r}: the GPUs are of different models ({', '.join(models)}); run each model on its "
            "own (suite.merge --by gpu puts the runs side by side)"
        )
    return chosen
