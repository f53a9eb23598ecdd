"""--gpus on a CPU: the scheduling, the merging of rows and the failure handling of suite.driver.workers, with fake
workers in spawned processes (tests/workers_fakes.py) standing in for GPUs; and the real worker
(suite.driver.jobs.job_worker) on two CPU "devices", against the same plan run in one process."""

import os

import pytest
import torch
import workers_fakes as fakes

from suite.driver.workers import Device, gpu_count_hint, parse_gpus, prestart, run_jobs, start

GPUS = [Device(0, "GPU-aaaa", "NVIDIA H200", "GPU-aaaa"), Device(1, "GPU-bbbb", "NVIDIA H200", "GPU-bbbb")]


def _run(jobs, behaviour=None, devices=GPUS):
    seen = []
    rows, reports = run_jobs(
        jobs,
        devices,
        fakes.worker,
        (behaviour or {},),
        skeleton=fakes.skeleton,
        cost=lambda j: j.cost,
        on_result=lambda job, rs: seen.append(job.index),
    )
    return rows, {r.device.index: r for r in reports}, seen


def _planned(jobs):
    return [r["plan_row"] for j in jobs for r in fakes.skeleton(j)]


def test_jobs_spread_over_the_devices_each_run_once_in_plan_order():
    jobs = [fakes.FakeJob(i, n_rows=2, cost=float(i % 3)) for i in range(10)]
    rows, reports, seen = _run(jobs)
    assert [r["plan_row"] for r in rows] == _planned(jobs)  # every row once, in plan order
    assert sorted(seen) == list(range(10))
    assert all(r["valid"] for r in rows)
    for r in rows:  # each row names the GPU it ran on, and the worker that ran it was pinned to that GPU alone
        assert r["visible"] == GPUS[r["gpu_index"]].visible and r["gpu_uuid"] == GPUS[r["gpu_index"]].uuid
    assert all(reports[i].jobs for i in (0, 1))  # both GPUs worked
    assert len({r["pid"] for r in rows if r["gpu_index"] == 0}) == 1  # one process per GPU, kept across its jobs
    assert {r["pid"] for r in rows if r["gpu_index"] == 0}.isdisjoint({r["pid"] for r in rows if r["gpu_index"] == 1})
    assert sum(reports[i].rows for i in (0, 1)) == len(rows) and reports[0].phases["time"] > 0
    assert reports[0].gpu_state_after == {"sm_clock_mhz": 1980.0}


def test_a_gpu_whose_worker_dies_fails_only_its_job_and_the_others_finish():
    jobs = [fakes.FakeJob(i) for i in range(8)]
    rows, reports, _ = _run(jobs, {("GPU-bbbb", 1): "die"})
    assert [r["plan_row"] for r in rows] == _planned(jobs)  # nothing lost, nothing twice
    lost = [r for r in rows if r["job"] == 1]
    assert all(r["valid"] is False and r["gpu_index"] == 1 for r in lost)
    died = "GPU 1 (GPU-bbbb) failed during this job: its worker process died (exit status 3)"
    assert all(died in r["note"] for r in lost)
    assert all(r["failure"] == "device" for r in lost)
    assert all(r["valid"] and r["gpu_index"] == 0 for r in rows if r["job"] != 1)  # GPU 0 took the rest
    assert reports[1].failed == "its worker process died (exit status 3)" and reports[0].failed is None
    assert 1 not in reports[1].jobs


def test_a_device_that_stops_answering_keeps_the_rows_it_finished():
    jobs = [fakes.FakeJob(i, n_rows=4) for i in range(4)]
    rows, reports, _ = _run(jobs, {("GPU-aaaa", 0): "lost"})
    job0 = [r for r in rows if r["job"] == 0]
    assert job0[0]["valid"] is True  # finished before the device was lost
    assert all(r["valid"] is False and "ECC error" in r["note"] and r["gpu_uuid"] == "GPU-aaaa" for r in job0[1:])
    assert all(r["valid"] for r in rows if r["job"] != 0)
    assert "ECC" in reports[0].failed and [r["plan_row"] for r in rows] == _planned(jobs)


def test_a_job_that_raises_fails_its_rows_not_its_gpu():
    jobs = [fakes.FakeJob(i) for i in range(6)]
    rows, reports, _ = _run(jobs, {("GPU-aaaa", 0): "raise"})
    assert all(
        r["valid"] is False and r["note"] == "not run: the job raised on GPU 0 (GPU-aaaa): RuntimeError: out of memory"
        for r in rows
        if r["job"] == 0
    )
    assert all(r["valid"] for r in rows if r["job"] != 0) and [r["plan_row"] for r in rows] == _planned(jobs)
    assert reports[0].failed is None and reports[0].jobs  # GPU 0 went on with other jobs


def test_when_every_gpu_fails_the_jobs_left_are_marked_not_run():
    jobs = [fakes.FakeJob(i) for i in range(6)]
    # the longest-first queue hands job 0 to GPU 0 and job 1 to GPU 1: both die on them
    behaviour = {("GPU-aaaa", 0): "die", ("GPU-bbbb", 1): "die"}
    rows, _reports, _ = _run([fakes.FakeJob(i, cost=10.0 - i) for i in range(6)], behaviour)
    assert [r["plan_row"] for r in rows] == _planned(jobs)
    assert all(r["valid"] is False for r in rows)
    left = [r for r in rows if r["job"] >= 2]
    assert all(
        r["note"].startswith(
            "not run: every device failed (GPU 0 (GPU-aaaa): its worker process died (exit status 3); "
            "GPU 1 (GPU-bbbb): its worker process died (exit status 3))"
        )
        for r in left
    )
    assert all(r.get("gpu_index") is None for r in left)


def test_a_worker_may_return_plain_rows():
    rows, _reports = run_jobs([fakes.FakeJob(0)], GPUS[:1], fakes.plain_worker, skeleton=fakes.skeleton)
    assert [r["plan_row"] for r in rows] == [0, 1, 2] and all(r["gpu_index"] == 0 for r in rows)


def test_a_worker_is_pinned_before_its_setup_imports_anything():
    """The setup is named, not pickled: it runs once the process is pinned, and nothing imported torch before."""
    rows, _ = run_jobs(
        [fakes.FakeJob(0)],
        GPUS[1:],
        fakes.setup_worker,
        skeleton=fakes.skeleton,
        setup="workers_fakes:setup",
        setup_args=("hello",),
    )
    assert all(r["tag"] == "hello" and r["visible"] == "GPU-bbbb" and r["torch_loaded"] is False for r in rows)


def test_prestarted_workers_are_pinned_by_their_first_task_and_the_spare_one_is_shut_down():
    """suite.run starts the pools before it knows the GPUs: start pins each to its device, runs the setup there,
    and shuts down the one it does not need."""
    pools = prestart(3, ("workers_fakes",))
    pids = [pool.submit(os.getpid).result() for pool in pools]  # started, and their preload done
    started = start(GPUS, "workers_fakes:setup", ("early",), pools)
    rows, _ = run_jobs(
        [fakes.FakeJob(i) for i in range(4)], GPUS, fakes.setup_worker, skeleton=fakes.skeleton, started=started
    )
    assert [r["plan_row"] for r in rows] == _planned([fakes.FakeJob(i) for i in range(4)])
    assert all(r["tag"] == "early" and r["visible"] == GPUS[r["gpu_index"]].visible for r in rows)
    assert {r["pid"] for r in rows} <= set(pids[:2])  # the prestarted processes ran the jobs
    for pool in pools:
        with pytest.raises(RuntimeError, match="shutdown"):
            pool.submit(os.getpid)


def test_workers_started_before_the_jobs_are_known_run_them():
    """sweep.execute starts the workers, compiles, then runs the jobs on them: the same processes, pinned once."""
    started = start(GPUS, "workers_fakes:setup", ("started",), prestart(1, ("workers_fakes",)))
    pids = {d: pool.submit(os.getpid).result() for d, pool in started.pools.items()}
    rows, _ = run_jobs(
        [fakes.FakeJob(i) for i in range(4)], GPUS, fakes.setup_worker, skeleton=fakes.skeleton, started=started
    )
    assert all(r["tag"] == "started" and r["visible"] == GPUS[r["gpu_index"]].visible for r in rows)
    assert all(r["pid"] == pids[GPUS[r["gpu_index"]]] for r in rows)  # one prestarted, one started pinned
    assert started.pins[GPUS[0]] is not None and started.pins[GPUS[1]] is None


def test_started_workers_of_other_devices_are_refused_and_shut_down():
    started = start(GPUS[:1])
    with pytest.raises(ValueError, match="not those of these devices"):
        run_jobs([fakes.FakeJob(0)], GPUS, fakes.plain_worker, skeleton=fakes.skeleton, started=started)
    with pytest.raises(RuntimeError, match="shutdown"):
        started.pools[GPUS[0]].submit(os.getpid)


def test_a_prestarted_worker_whose_preload_fails_is_replaced():
    pools = prestart(1, ("workers_fakes_no_such_module",))
    started = start(GPUS[:1], prestarted=pools)
    rows, reports = run_jobs([fakes.FakeJob(0)], GPUS[:1], fakes.plain_worker, skeleton=fakes.skeleton, started=started)
    assert all(r["valid"] and r["gpu_index"] == 0 for r in rows) and reports[0].failed is None


@pytest.mark.parametrize(
    "text, environ, count",
    [
        ("0,1", {"CUDA_VISIBLE_DEVICES": "0,1,2"}, 2),
        (" 3 ", {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 1),
        ("all", {"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c"}, 3),
        ("0,1", {"CUDA_VISIBLE_DEVICES": "0"}, 1),
        ("0,1", {"CUDA_VISIBLE_DEVICES": ""}, 0),  # no GPU shown: nothing to prestart
    ],
)
def test_gpu_count_hint(text, environ, count):
    assert gpu_count_hint(text, environ) == count


@pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="the CPU path of the driver: in this process Triton runs in its interpreter only on a machine without a GPU",
)
def test_the_real_worker_on_two_cpu_devices_matches_one_process():
    """suite.driver.sweep.execute with two CPU "devices": bench.job_worker in spawned processes (pinned to no GPU:
    the CPU path of the driver) gives the rows the in-process run gives, in the same order, each naming the device
    it ran on, and the metadata says which device ran which job."""
    from suite.driver import bench, sweep

    opts = bench.Options(problems=("vector",), variants=("triton:tile loop",), sizes={"vector": (4097, 8195)})
    cpus = [Device(None, None, "cpu"), Device(None, "second", "cpu")]
    rows, meta = sweep.execute(opts, on_gpu=False, gpus=cpus, progress=False)
    reference, ref_meta = sweep.execute(opts, on_gpu=False, progress=False)
    strip = ("gpu_index", "gpu_uuid")
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows] == [
        {k: v for k, v in r.items() if k not in strip} for r in reference
    ]
    assert len(rows) == 4 and all(r["valid"] for r in rows) and {r["gpu_uuid"] for r in rows} <= {None, "second"}
    assert meta["plan"] == ref_meta["plan"] and meta["shard"] == ref_meta["shard"]
    assert sorted(j for g in meta["gpus"] for j in g["jobs"]) == [0, 1]
    assert all(g["failed"] is None for g in meta["gpus"]) and "workers" in meta["phase_seconds"]
    assert all("validate" in g["phase_seconds"] for g in meta["gpus"] if g["jobs"])


@pytest.mark.parametrize("text, picked", [("all", [0, 1, 2]), ("0,2", [0, 2]), (" 1 ", [1]), ("ALL", [0, 1, 2])])
def test_parse_gpus(text, picked):
    available = [Device(i, f"GPU-{i}", "NVIDIA H200", f"GPU-{i}") for i in range(3)]
    assert [d.index for d in parse_gpus(text, available)] == picked


@pytest.mark.parametrize(
    "text, available, rule",
    [
        ("all", [], "no CUDA GPU here"),
        ("3", [Device(0, name="H200")], "no GPU 3 here (this machine has 1: 0)"),
        ("0,0", [Device(0, name="H200")], "a GPU is named twice"),
        ("0;1", [Device(0, name="H200")], "give 'all' or GPU indices separated by commas"),
        ("-1", [Device(0, name="H200")], "give 'all' or GPU indices"),
        ("all", [Device(0, name="NVIDIA H200"), Device(1, name="NVIDIA H100")], "different models"),
    ],
)
def test_parse_gpus_names_the_rule(text, available, rule):
    with pytest.raises(ValueError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        parse_gpus(text, available)


def test_device_pins_the_worker():
    assert Device(1, "GPU-bbbb", "H200", "GPU-bbbb").env() == {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}
    assert Device(2, None, "H200").env() == {"CUDA_VISIBLE_DEVICES": "2"}
    assert Device(None).env() == {"CUDA_VISIBLE_DEVICES": ""}  # the CPU worker sees no GPU
    assert os.environ.get("CUDA_VISIBLE_DEVICES") != "GPU-bbbb"  # pinning happens in the worker, not here


def test_with_gpus_the_parent_leaves_every_compile_to_the_workers(monkeypatch):
    """--gpus on a GPU: the parent starts the workers and hands them the jobs without compiling anything itself
    (each worker compiles its own jobs' kernels into the shared cubin cache, jobs.job_worker), so no serial compile
    stands between the start and the first job."""
    from suite.driver import bench, jobs, sweep, workers

    compiled, handed = [], []
    monkeypatch.setattr(jobs, "precompile", lambda jobs, on_gpu, **kw: compiled.append(len(jobs)) or {})

    class Started:
        def shutdown(self):
            pass

    monkeypatch.setattr(workers, "start", lambda devices, setup, args, prestarted=None: Started())

    def fake_run_jobs(jobs, devices, worker, args, **kw):
        handed.append((len(jobs), kw["started"]))
        return [], []

    monkeypatch.setattr(workers, "run_jobs", fake_run_jobs)
    opts = bench.Options(
        problems=("gemm",), variants=("ptx:64x128 split-k tma+wgmma",), sizes={"gemm": ((64, 512, 512),)}
    )
    rows, meta = sweep.execute(opts, on_gpu=True, gpus=GPUS, progress=False)
    assert compiled == [] and len(handed) == 1 and handed[0][0] >= 1
    assert "compile" not in meta["phase_seconds"] and "workers" in meta["phase_seconds"]
