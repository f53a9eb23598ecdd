"""One run of the plan, or of one shard of it, in this process or on several GPUs: what suite.run calls.

``execute`` builds the plan (suite.driver.plan), keeps the shard's jobs (``--shard I/N``, or a Slurm job array's
task), then runs them: in this process (suite.driver.jobs.run_jobs), or with ``--gpus`` one worker process per GPU
(suite.driver.workers.run_jobs, the worker being suite.driver.jobs.job_worker). It returns the rows and what the
results metadata records of the run: the plan's identity, the shard, the timer and its power regime, the GPU(s) each
row ran on, and the seconds per phase (``phase_seconds``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from suite.driver import plan as planning
from suite.driver import timing
from suite.driver.results_io import in_plan_order, job_finished
from suite.driver.timing import Phases

__all__ = ["Phases", "ResumeError", "execute", "record_phases", "resolve_gpus", "resolve_shard"]


class ResumeError(ValueError):
    """A run that cannot be resumed from the record given (another plan or shard): one line naming the rule."""


def _kept_jobs(record: dict, plan, jobs: list, index: int, count: int) -> dict[int, list[dict]]:
    """The jobs of ``jobs`` that the earlier, cut run in ``record`` finished (every row of the job there), with
    their rows. ResumeError where the record is of another plan or shard."""
    meta = record.get("meta") or {}
    was = (meta.get("plan") or {}).get("id")
    if was != plan.id:
        raise ResumeError(
            f"the earlier run is of plan {was}, this one of plan {plan.id} (another selection, sizes, seed, timer, "
            "launch or --quick, or other registered variants): resume it with its own arguments (its results.json's "
            "meta.command) and code"
        )
    shard = meta.get("shard") or {}
    if (shard.get("index"), shard.get("count")) != (index, count):
        raise ResumeError(
            f"the earlier run is shard {shard.get('index')}/{shard.get('count')}, this one {index}/{count}"
        )
    by_job: dict[int, list[dict]] = {}
    for row in record.get("rows") or []:
        if isinstance(row, dict) and isinstance(row.get("job"), int):
            by_job.setdefault(row["job"], []).append(row)

    return {j.index: by_job[j.index] for j in jobs if job_finished(by_job.get(j.index, []), [s.index for s in j.rows])}


def resolve_shard(given: tuple[int, int] | None, environ: Mapping[str, str]) -> tuple[int, int] | None:
    """--shard when given, else the Slurm job array task's shard (suite.driver.plan.shard_from_env), else None.
    Raises ValueError (naming the Slurm variables) when they are set but do not give a shard."""
    return given if given is not None else planning.shard_from_env(environ)


def resolve_gpus(text: str, on_gpu: bool):
    """--gpus 'all' or '0,1' -> the suite.driver.workers.Device of each (ValueError naming the rule)."""
    from suite.driver import workers

    return workers.parse_gpus(text, workers.visible_gpus() if on_gpu else [])


def execute(
    opts,
    on_gpu: bool,
    *,
    gpus=None,
    prestarted: list | None = None,
    shard: tuple[int, int] | None = None,
    plugins: tuple[str, ...] = (),
    progress: bool = True,
    phases: Phases | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
    on_plan: Callable[[dict], None] | None = None,
    resume: dict | None = None,
) -> tuple[list[dict], dict]:
    """Run the shard ``shard`` (index, count; None: the whole plan) of ``opts``' plan, on ``gpus`` (a list of
    suite.driver.workers.Device, one worker process each; None: in this process). ``on_rows``: called with the rows
    so far after each job (None: not called). Returns (rows in plan order,
    metadata: plan, shard, timer, gpus, phase_seconds). ``prestarted``: worker pools started early
    (suite.driver.workers.prestart), for ``gpus``. ``on_rows(rows_so_far)``: called after each job with every row
    finished so far, in plan order. ``on_plan(metadata)``: called once before the first job with the metadata known
    by then (plan, shard, timer, launch), so that what a cut run leaves says what it ran. A Ctrl-C raises
    suite.driver.workers.Interrupted with those rows. ``resume``: the record (results.json's data) of an earlier run
    of the same plan and shard that was cut: the jobs it finished are not run again, their rows are part of every
    list of rows this returns or reports (ResumeError where it is of another plan or shard)."""
    from suite.driver.measure import describe_launch

    phases = phases if phases is not None else Phases()
    with phases("plan"):
        plan = planning.build(opts, on_gpu)
        index, count = shard or (1, 1)
        jobs = list(plan.shard(index, count))
    if not jobs:
        print(
            f"shard {index}/{count} has no jobs: the plan has {len(plan.jobs)} (nothing to run; its results say "
            "so, for suite.merge)",
            file=sys.stderr,
        )
    shard_jobs = [j.index for j in jobs]
    kept: list[dict] = []  # the rows of the jobs an earlier, cut run finished (resume)

    def whole(rows) -> list[dict]:
        """This run's rows with the kept ones, in plan order."""
        return in_plan_order(kept + list(rows))

    if resume is not None:
        finished = _kept_jobs(resume, plan, jobs, index, count)
        jobs = [j for j in jobs if j.index not in finished]
        kept = [r for job_rows in finished.values() for r in job_rows]
        print(
            f"resuming: {len(finished)} of {len(shard_jobs)} jobs finished earlier ({len(kept)} rows kept), "
            f"{len(jobs)} to run",
            file=sys.stderr,
        )
        if on_rows is not None:
            report = on_rows

            def on_rows(rows: list[dict]) -> None:
                report(whole(rows))

    info = {
        "plan": plan.meta(),
        "shard": {"index": index, "count": count, "jobs": shard_jobs},
        "timer": timing.describe_timer(opts.timer, opts.quick, opts.flush),
        "launch": describe_launch(opts.launch),
    }
    if kept:
        info["resumed"] = {"kept_jobs": sorted({r["job"] for r in kept}), "kept_rows": len(kept)}
    if on_plan is not None:
        on_plan(dict(info))
    try:
        rows = _run(jobs, opts, on_gpu, gpus, prestarted, plugins, progress, phases, on_rows, info)
    except KeyboardInterrupt as e:  # suite.driver.workers.Interrupted: the rows so far, the kept ones among them
        if kept:
            from suite.driver.workers import Interrupted

            raise Interrupted(whole(getattr(e, "rows", None) or ())) from None
        raise
    info["phase_seconds"] = phases.as_dict()
    return (whole(rows) if kept else rows), info


def _run(jobs, opts, on_gpu, gpus, prestarted, plugins, progress, phases, on_rows, info) -> list[dict]:
    """The jobs, in this process (``gpus`` None) or on worker processes; fills ``info``'s gpus."""
    from suite.driver import jobs as running
    from suite.driver.rows import current_gpu, skeleton

    if gpus is None:
        import torch

        device = torch.device("cuda" if on_gpu else "cpu")
        gpu = current_gpu(device)
        rows = running.run_jobs(
            jobs, opts, on_gpu, progress=progress, device=device, phases=phases, gpu=gpu, on_rows=on_rows
        )
        if on_gpu:
            info["gpus"] = [
                {
                    "index": gpu["gpu_index"],
                    "uuid": gpu["gpu_uuid"],
                    "name": torch.cuda.get_device_name(device),
                    "jobs": [j.index for j in jobs],
                    "rows": len(rows),
                }
            ]
        else:
            info["gpus"] = []
    else:
        from suite.driver import workers

        # No compile here: every worker compiles its own jobs' kernels before it runs them (jobs.job_worker), reading
        # and filling the cubin cache they share, so a compile in this process first would only repeat that serially
        # while the workers wait; on a cold cache the workers compile side by side.
        setup, setup_args = "suite.driver.jobs:worker_setup", (tuple(plugins),)
        started = workers.start(list(gpus), setup, setup_args, prestarted)
        bar = running.Progress(sum(len(j.rows) for j in jobs), progress)

        finished: dict[int, list[dict]] = {}

        def arrived(job, rows):
            finished[job.index] = rows
            if on_rows is not None:
                on_rows([row for index in sorted(finished) for row in finished[index]])
            for row in rows:
                bar.step(
                    f"{job.problem} {job.dtype} {job.shape} {row['backend']}:{row['variant']} stages={row['stages']}"
                )

        with phases("workers"):
            rows, reports = workers.run_jobs(
                jobs,
                list(gpus),
                running.job_worker,
                (opts, on_gpu),
                skeleton=skeleton,
                cost=lambda job: job.cost,
                on_result=arrived,
                started=started,
            )
        info["gpus"] = [r.meta() for r in reports]
    return rows


def record_phases(out: Path, meta: dict, phases: Phases) -> None:
    """After the report is written: put the final ``phase_seconds`` (with the report's own seconds and the whole
    process's) into ``meta`` and into ``out``/results.json (the file that records the run; table.md keeps the phases
    as they were when it was written)."""
    total = timing.process_seconds()
    meta["phase_seconds"] = {**phases.as_dict(), **({"total": round(total, 2)} if total is not None else {})}
    path = Path(out) / "results.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    data["meta"]["phase_seconds"] = meta["phase_seconds"]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.phases.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)
