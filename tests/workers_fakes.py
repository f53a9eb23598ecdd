"""Fake jobs and workers for tests/test_workers.py. A module of its own (not a test module) so that the spawned
worker processes import it, and only it: no torch, no pytest, a worker starts in a fraction of a second."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from suite.driver.workers import DeviceFailed, JobResult


@dataclass(frozen=True)
class FakeJob:
    index: int
    n_rows: int = 3
    cost: float = 1.0


def skeleton(job: FakeJob) -> list[dict]:
    return [
        {"job": job.index, "plan_row": 100 * job.index + i, "valid": None, "measured": False, "note": ""}
        for i in range(job.n_rows)
    ]


def worker(job: FakeJob, device, behaviour: dict) -> JobResult:
    """Rows of ``job`` as a worker pinned to ``device`` sees them. ``behaviour`` maps (device uuid, job index) to
    what goes wrong: "die" (the process exits, as when the GPU falls off the bus), "lost" (DeviceFailed after the
    first row), "raise" (the job raises)."""
    time.sleep(0.05)  # long enough for the other device to take jobs meanwhile
    what = behaviour.get((device.uuid, job.index))
    if what == "die":
        os._exit(3)
    rows = [
        dict(r, valid=True, measured=True, pid=os.getpid(), visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
        for r in skeleton(job)
    ]
    if what == "lost":
        raise DeviceFailed("CUDA error: an ECC error was encountered", rows[:1])
    if what == "raise":
        raise RuntimeError("out of memory")
    return JobResult(rows, {"time": 0.05}, {"sm_clock_mhz": 1980.0})


def plain_worker(job: FakeJob, device) -> list[dict]:
    """A worker that returns a plain list of rows (no JobResult)."""
    return [dict(r, valid=True) for r in skeleton(job)]


SETUP: dict = {}


def setup(tag: str) -> None:
    """A worker setup (run_jobs(setup="workers_fakes:setup")): what the process looked like when it ran."""
    SETUP.update(
        tag=tag, visible=os.environ.get("CUDA_VISIBLE_DEVICES"), torch_loaded="torch" in sys.modules, pid=os.getpid()
    )


def setup_worker(job: FakeJob, device) -> list[dict]:
    return [dict(r, **SETUP) for r in skeleton(job)]
