"""The burst and adaptive timers' stop rule, the burst timer's wait for the power cap, the ceiling's cadence,
phase_seconds, and a GPU that stops answering mid-run, on fakes (do_bench, nvidia-smi and the clock replaced): the
driver's GPU path runs on CPU tensors."""

import random
import subprocess

import pytest
import torch

from suite.driver import bench, measure, timing
from suite.driver import jobs as running
from suite.driver import meta as run_meta
from suite.driver import plan as planning
from suite.driver.rows import Row, throughput_and_flags
from suite.problems import PROBLEMS


def _flags(problem, size, rows: list[dict], **kw) -> None:
    """suite.driver.rows.throughput_and_flags on rows given as dicts, written back into them."""
    typed = [Row.from_dict(r) for r in rows]
    throughput_and_flags(problem, size, typed, **kw)
    for r, t in zip(rows, typed):
        r.clear()
        r.update(t.to_dict())


def test_median_ci_is_the_order_statistics_interval():
    samples = [float(i) for i in range(1, 101)]  # n = 100: ranks 40 and 61 (the binomial table's interval)
    assert timing.median_ci(samples) == (50.5, 40.0, 61.0)
    assert timing.median_ci([3.0]) == (3.0, 3.0, 3.0)
    assert timing.median_ci([2.0, 1.0]) == (1.5, 1.0, 2.0)


def test_median_ci_covers_the_true_median_95_percent_of_the_time():
    """Distribution-free: on skewed (exponential) samples of 40, the interval holds the true median (ln 2) in about
    95% of draws."""
    rng = random.Random(1)
    draws = 1500
    hits = 0
    for _ in range(draws):
        _, lo, hi = timing.median_ci([rng.expovariate(1.0) for _ in range(40)])
        hits += lo <= 0.6931 <= hi
    assert 0.93 <= hits / draws <= 0.99


def test_sampling_stops_as_soon_as_the_median_is_known():
    rule = timing.StopRule(precision=0.0025, min_samples=10, max_batches=4)
    asked = []

    def tight(k):
        asked.append(k)
        return [1.0 + 0.0001 * (i % 3) for i in range(12)]

    sampled = timing.sample(tight, rule)
    assert asked == [0] and sampled.met and sampled.batches == 1 and sampled.ci95 <= 0.0025


def test_sampling_needs_the_minimum_count_and_stops_on_the_budget():
    rule = timing.StopRule(precision=0.0025, min_samples=10, max_batches=4)
    assert timing.sample(lambda k: [1.0] * 4, rule).batches == 3  # exact, but 4 and 8 samples are too few
    rng = random.Random(0)
    noisy = timing.sample(lambda k: [1.0 + rng.random() for _ in range(10)], rule)
    assert noisy.batches == 4 and not noisy.met and noisy.ci95 > 0.0025 and len(noisy.samples) == 40


def test_the_adaptive_timer_warms_up_once_and_doubles_its_batches(monkeypatch):
    calls = []

    def fake_time(fn, opts, rep_scale=1.0):
        calls.append((opts.warmup_ms, opts.rep_ms * rep_scale))
        return [1.0 + 0.1 * (len(calls) % 2), 1.2, 0.9, 1.1] * 3  # never precise enough

    monkeypatch.setattr(measure, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", lambda: {"sm_clock_mhz": 1755.0, "throttled": False})
    phases = timing.Phases()
    row = measure.time_call(lambda: None, bench.Options(timer="adaptive"), phases)
    assert calls == [(25.0, 25.0), (0.0, 50.0), (0.0, 100.0), (0.0, 200.0)]  # 375 ms of samples at most
    assert row["batches"] == 4 and row["precision_met"] is False and row["samples"] == 48
    assert row["sm_clock_mhz"] == 1755.0 and set(phases.seconds) == {"capture", "time", "gpu_state"}
    calls.clear()
    measure.time_call(lambda: None, bench.Options(timer="adaptive", quick=True))
    assert calls == [(25.0, 10.0), (0.0, 20.0), (0.0, 40.0)]


def _fake_power_cap(monkeypatch, capped_reads: int):
    """gpu_state reports the SW power cap (0x4) for the first ``capped_reads`` reads, then only idle (0x1); the
    cool-down's clock advances by its sleeps. Returns the list of reads' reasons."""
    now, reads = [0.0], []
    monkeypatch.setattr(timing, "now", lambda: now[0])
    monkeypatch.setattr(timing, "sleep", lambda s: now.__setitem__(0, now[0] + s))

    def state():
        reads.append(0x4 if len(reads) < capped_reads else 0x1)
        return {"sm_clock_mhz": 1980.0, "throttle_reasons": reads[-1], "throttled": bool(reads[-1] & 0x4)}

    monkeypatch.setattr(bench.run_meta, "gpu_state", state)
    return reads


def test_the_burst_timer_waits_for_the_power_cap_to_clear_before_every_batch(monkeypatch):
    calls, rng = [], random.Random(0)

    def fake_time(fn, opts, rep_scale=1.0):
        calls.append((opts.warmup_ms, opts.rep_ms * rep_scale, len(reads)))
        return [1.0 + rng.random() for _ in range(12)]  # never precise enough

    monkeypatch.setattr(measure, "_time", fake_time)
    reads = _fake_power_cap(monkeypatch, capped_reads=5)
    monkeypatch.setattr(measure, "_PACER", timing.BurstPacer())
    phases = timing.Phases()
    row = measure.time_call(lambda: None, bench.Options(), phases)  # the default timer
    # 8 bursts of 10 ms (their own first call is the warm-up); the first after 5 sleeps of 10 ms (5 capped reads,
    # then clear), each later one after a single read that finds the cap clear; a read after each burst checks it
    # ended clear
    assert [c[:2] for c in calls] == [(0.0, 10.0)] * 8
    assert [c[2] for c in calls] == [6, 8, 10, 12, 14, 16, 18, 20]
    assert row["cooldown_s"] == pytest.approx(0.05) and row["below_cap"] is True and row["batches"] == 8
    assert row["bursts_retaken"] == 0
    assert phases.seconds["cool_down"] == pytest.approx(0.05) and "time" in phases.seconds
    calls.clear()
    measure.time_call(lambda: None, bench.Options(quick=True))
    assert [c[:2] for c in calls] == [(0.0, 5.0)] * 3


class _FakeEvent:
    """A CUDA event on a fake GPU clock: ``record`` reads it."""

    def __init__(self, clock):
        self.clock, self.at = clock, None

    def record(self):
        self.at = self.clock[0]

    def elapsed_time(self, other):
        return other.at - self.at


def _fake_triton_driver(monkeypatch, flush_name: str):
    """Triton's active driver replaced by one whose events read a fake GPU clock and whose clear_cache (the write
    flush) logs ``flush_name`` and advances that clock by 0.1 ms. Returns (clock, log)."""
    from triton import runtime

    clock, log = [0.0], []

    class Device:
        Event = staticmethod(lambda enable_timing: _FakeEvent(clock))
        synchronize = staticmethod(lambda: None)

    class Driver:
        get_device_interface = staticmethod(lambda: Device)
        get_empty_cache_for_benchmark = staticmethod(lambda: "cache")

        @staticmethod
        def clear_cache(cache):
            log.append(flush_name)
            clock[0] += 0.1

    monkeypatch.setattr(runtime.driver, "_active", Driver)  # DriverConfig.active answers what _active holds
    return clock, log


def test_a_burst_times_one_call_first_then_fills_its_budget_at_that_pace(monkeypatch):
    """measure._burst on a fake Triton driver whose GPU clock advances by the flush and the call: the first call (slow,
    clocks coming up) is not kept and sets the pace; the kept calls fill the budget, 3 at least, each flushed first."""
    clock, log = _fake_triton_driver(monkeypatch, "flush")
    calls = [2.4, 1.4]  # ms: the first call after a rest, then every later one

    def fn():
        log.append("call")
        clock[0] += calls[0] if len(calls) > 1 and log.count("call") == 1 else calls[-1]

    samples = measure._burst(fn, busy_ms=10.0)
    assert len(samples) == 4  # 10 ms at the first call's pace (0.1 + 2.4 ms a call: the flush is busy time too)
    assert samples == pytest.approx([1.4] * 4)  # the flush outside the timed region, the slow first call not kept
    assert log == ["flush", "call"] * 5
    log.clear()
    calls[:] = [30.0]
    assert measure._burst(fn, busy_ms=10.0) == pytest.approx([30.0] * timing.BURST_MIN_SAMPLES)


def test_a_power_cap_that_does_not_clear_is_waited_for_3_s_and_flagged(monkeypatch):
    monkeypatch.setattr(measure, "_time", lambda fn, opts, rep_scale=1.0: [1.0] * 12)
    monkeypatch.setattr(measure, "_PACER", timing.BurstPacer())
    _fake_power_cap(monkeypatch, capped_reads=10**6)
    row = measure.time_call(lambda: None, bench.Options())  # waits 3 s once, then no more for the rest of the run
    assert row["below_cap"] is False and row["cooldown_s"] == pytest.approx(timing.COOL_MAX_S, abs=0.02)
    row.update(measured=True, ceiling=False, note="")
    _flags(PROBLEMS["vector"], 4096, [row], ceiling_ms=1.0)
    assert "still on after 3 s" in row["note"]


def test_bursts_rest_twice_their_length_and_one_that_ends_slowed_is_taken_again(monkeypatch):
    now, slept, kept = [10.0], [], []
    monkeypatch.setattr(timing, "now", lambda: now[0])
    monkeypatch.setattr(timing, "sleep", lambda s: slept.append(round(s, 6)) or now.__setitem__(0, now[0] + s))
    monkeypatch.setattr(measure, "_PACER", timing.BurstPacer())
    ends = iter([0x4, 0x0] + [0x0] * 20)  # the first burst ends under the power cap, every later one clear
    reads = []

    def state():
        # cool_down's reads find the cap clear; the read after each burst takes the next of ``ends``
        after_burst = len(reads) % 2 == 1
        reads.append(next(ends) if after_burst else 0x1)
        return {"throttle_reasons": reads[-1], "throttled": bool(reads[-1] & 0x4)}

    def fake_time(fn, opts, rep_scale=1.0):
        now[0] += 0.03  # a 30 ms burst
        kept.append(len(kept))
        return [1.0 + 0.001 * len(kept)] * 12

    monkeypatch.setattr(measure, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", state)
    row = measure.time_call(lambda: None, bench.Options())
    assert row["bursts_retaken"] == 1 and row["batches"] == 1  # the slowed burst was not kept; the next one was
    assert slept == [0.06]  # the second burst waited 60 ms: twice the first one's 30
    assert row["median_ms"] == pytest.approx(1.002)  # the kept burst's samples only


def test_without_throttle_reasons_the_burst_timer_does_not_wait(monkeypatch):
    monkeypatch.setattr(timing, "sleep", lambda s: pytest.fail("slept without a state to wait for"))
    waited, clear = timing.cool_down(dict)
    assert clear is None and waited < 0.1


def test_a_read_flush_empties_the_l2_before_every_call_of_a_burst(monkeypatch):
    """--flush read: the burst's calls each follow measure._read_flush (a sum over 256 MB: clean lines) instead of
    Triton's clear_cache (zeros written: dirty lines); the timers that sample with do_bench refuse it, and the CLI
    refuses it in one line before any work; the flush is in the plan's identity and the run's metadata."""
    from suite.driver import plan as planning
    from suite.run import main

    clock, log = _fake_triton_driver(monkeypatch, "write")
    monkeypatch.setattr(measure, "_read_flush", lambda: log.append("read") or clock.__setitem__(0, clock[0] + 0.1))

    def fn():
        log.append("call")
        clock[0] += 1.0

    assert len(measure._burst(fn, busy_ms=5.0, flush="read")) == 4  # 5 ms at 1.1 ms a call
    assert log == ["read", "call"] * 5
    with pytest.raises(bench.OptionError, match="do_bench, whose L2 flush is a write"):
        measure._time(fn, bench.Options(timer="adaptive", flush="read"))
    assert main(["--flush", "read", "--timer", "fixed", "--problem", "vector", "--quick"]) == 2
    write, read = (planning.build(bench.Options(flush=f), on_gpu=True) for f in ("write", "read"))
    assert write.id != read.id and "flush" not in write.options  # the plans of before keep their identity
    described = timing.describe_timer("burst", flush="read")
    assert described["flush"].startswith("read: a sum over a 256 MB buffer")
    assert timing.describe_timer("adaptive", flush="read")["flush"].startswith("write")


def test_each_timer_flushes_its_own_way_unless_told(monkeypatch):
    """No --flush: the burst timer reads (a clean L2), the do_bench timers write; told, the choice stands. The CLI
    resolves it before the sweep, so the plan and the roofline's probes see the same flush as the rows."""
    from suite import run as cli
    from suite.driver import plan as planning
    from suite.driver import sweep

    assert bench.Options().flush == "read" and bench.Options(timer="burst").flush == "read"
    assert bench.Options(timer="adaptive").flush == "write" and bench.Options(timer="fixed").flush == "write"
    assert bench.Options(flush="write").flush == "write"
    assert planning.build(bench.Options(), on_gpu=True).options["flush"] == "read"
    seen = {}

    class Stop(BaseException):  # not SystemExit: the CLI takes one from inside a run for an internal error (exit 3)
        pass

    def fake_execute(opts, on_gpu, **kw):
        seen["flush"] = opts.flush
        raise Stop

    monkeypatch.setattr(sweep, "execute", fake_execute)
    for argv, flush in ((["--timer", "fixed"], "write"), ([], "read"), (["--flush", "write"], "write")):
        with pytest.raises(Stop):
            cli.main([*argv, "--problem", "vector", "--quick", "--no-progress"])
        assert seen.pop("flush") == flush


def test_the_fixed_timer_is_the_old_rule(monkeypatch):
    calls = []
    monkeypatch.setattr(measure, "_time", lambda fn, opts, rep_scale=1.0: calls.append(rep_scale) or [1.0, 2.0] * 5)
    monkeypatch.setattr(bench.run_meta, "gpu_state", dict)
    row = measure.time_call(lambda: None, bench.Options(timer="fixed"))
    assert calls == [1.0, 2.0] and row["samples"] == 20 and row["batches"] == 2


def test_ceiling_cadence_halves_when_it_drifts_beyond_its_noise(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(timing, "now", lambda: now[0])
    cadence = timing.CeilingCadence(interval_s=2.0)
    assert cadence.due()
    cadence.record(1.000, 0.001)
    assert not cadence.due()
    now[0] += 2.0
    assert cadence.due()
    cadence.record(1.001, 0.001)  # within the two intervals: same cadence
    assert cadence.interval_s == 2.0
    cadence.record(1.010, 0.001)  # drifted by 0.9%, far beyond +-0.1%: twice as often
    assert cadence.interval_s == 1.0 and cadence.drift == pytest.approx(0.01 / 1.0037, rel=1e-3)
    for _ in range(10):
        cadence.record(cadence.timings[-1][0] * 1.01, 0.001)
    assert cadence.interval_s == 0.0  # at worst: after every row, as the fixed timer does
    now[0] += 0.001
    assert cadence.due()


def _fake_gpu_run(monkeypatch, opts, clock_step=0.0):
    """bench.run with do_bench and nvidia-smi faked, on CPU tensors (on the GPU where there is one: Triton runs in
    its interpreter only without one); every batch advances the fake clock by ``clock_step`` s. Returns (rows, the
    callables timed, in order)."""
    now = [0.0]
    timed = []
    monkeypatch.setattr(timing, "now", lambda: now[0])

    def fake_time(fn, opts, rep_scale=1.0):
        fn()  # the real callable runs (on the CPU: torch, and Triton in the interpreter)
        now[0] += clock_step
        timed.append(fn)
        return [1.0] * 12

    monkeypatch.setattr(measure, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", lambda: {"throttled": False, "sm_clock_mhz": 1980.0})
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = bench.run(opts, on_gpu=True, progress=False, device=device)
    return rows, timed


def test_the_ceiling_is_timed_at_its_cadence_and_the_ratios_use_its_pooled_median(monkeypatch):
    opts = bench.Options(problems=("vector",), sizes={"vector": (4097,)}, backends=("torch", "triton"), stages=(2,))
    rows, _ = _fake_gpu_run(monkeypatch, opts, clock_step=1.5)  # one batch: 1.5 s of the fake clock
    ceiling = next(r for r in rows if r["ceiling"])
    timed = [r for r in rows if r["measured"] and not r["ceiling"]]
    assert len(timed) >= 4
    # before the first row, then whenever 2 s have passed (after every other row here), and after the last row
    # unless it was just timed
    assert ceiling["ceiling_timings"] in (1 + len(timed) // 2, 2 + len(timed) // 2)
    assert "interleaved" in ceiling["note"] and ceiling["ceiling_drift"] == 0.0
    assert all(r["ceiling_ms"] == ceiling["median_ms"] and r["ratio_to_ceiling"] == 1.0 for r in timed)
    assert all(r["precision_met"] and r["batches"] == 1 for r in timed)
    # the host's time per call, read from the calls the batches made, the ceiling's as the rows'
    assert all(r["host_enqueue_us"] > 0 and isinstance(r["launch_bound"], bool) for r in [ceiling, *timed])


def test_a_gpu_that_stops_answering_fails_the_rows_left_with_the_reason(monkeypatch):
    """After a row fails, the driver asks the device; when it no longer answers, every row not finished yet (this
    job's and the later jobs') is marked failed with the reason, the finished ones are kept, and nothing is
    retried on the dead context."""
    from suite.driver.workers import DeviceFailed

    opts = bench.Options(
        problems=("vector",), sizes={"vector": (4097, 8195)}, backends=("torch", "triton"), stages=(2,)
    )
    jobs = planning.build(opts, on_gpu=True).jobs
    mul = next(r for r in bench.skeleton(jobs[0]) if r["variant"] == "mul")
    real_validate = running._validate

    def validate(size, variant, stages, seed, device, dtype=None, seconds=None, **kw):
        if variant.name == "mul":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_validate(size, variant, stages, seed, device, dtype, **kw)

    def check_device(device, rows):
        finished = [r.to_dict() for r in rows if r.final]
        raise DeviceFailed("CUDA error: an illegal memory access was encountered", finished)

    monkeypatch.setattr(running, "_validate", validate)
    monkeypatch.setattr(running, "_check_device", check_device)
    rows, _ = _fake_gpu_run(monkeypatch, opts)
    assert [r["plan_row"] for r in rows] == [r.index for j in jobs for r in j.rows]  # every row, once
    first = [r for r in rows if r["job"] == 0]
    failed_row = next(r for r in first if r["variant"] == "mul")
    assert failed_row["plan_row"] == mul["plan_row"] and failed_row["valid"] is False
    before = [r for r in first if r["plan_row"] < mul["plan_row"]]
    assert all(r["valid"] is not False for r in before)  # validated before the failure: kept
    after = [r for r in first if r["plan_row"] > mul["plan_row"]] + [r for r in rows if r["job"] == 1]
    assert after and all(r["valid"] is False and "illegal memory access" in r["note"] for r in after)
    assert all(r["note"].startswith("not run: the GPU failed earlier") for r in rows if r["job"] == 1)


def test_a_worker_whose_gpu_stops_answering_tells_its_parent(monkeypatch):
    """In a --gpus worker the lost GPU is not absorbed into rows: DeviceFailed goes to the parent (which gives that
    GPU no more jobs and marks the rest of the job failed), carrying the rows whose outcome was final."""
    from suite.driver.workers import Device, DeviceFailed

    opts = bench.Options(problems=("vector",), sizes={"vector": (4097,)}, backends=("torch", "triton"), stages=(2,))
    job = planning.build(opts, on_gpu=True).jobs[0]
    real_validate = running._validate

    def validate(size, variant, stages, seed, device, dtype=None, seconds=None, **kw):
        if variant.name == "copy_":
            raise RuntimeError("CUDA error: unspecified launch failure")
        return real_validate(size, variant, stages, seed, device, dtype, **kw)

    def check_device(device, rows):
        raise DeviceFailed("CUDA error: unspecified launch failure", [r.to_dict() for r in rows if r.final])

    monkeypatch.setattr(running, "_validate", validate)
    monkeypatch.setattr(running, "_check_device", check_device)
    with pytest.raises(DeviceFailed, match="unspecified launch failure") as lost:
        bench.job_worker(job, Device(None), opts, True)  # the GPU path, on CPU tensors
    # finished: the row that failed (its own reason); torch:mul validated before it but was not timed yet
    assert [r["variant"] for r in lost.value.rows] == ["copy_"]
    assert lost.value.rows[0]["note"].startswith("build or launch failed: RuntimeError: CUDA error")


def test_phases_add_up():
    phases = timing.Phases()
    with phases("validate"):
        pass
    phases.add("time", 1.25)
    phases.merge({"time": 0.5, "ceilings": 0.1})
    assert phases.as_dict() == {"validate": 0.0, "time": 1.75, "ceilings": 0.1}
    assert timing.process_seconds() > 0  # Linux: the process's age, from /proc
    assert "startup" in timing.Phases(since_start=True).seconds


def test_timer_metadata_states_the_rule_and_the_power_regime():
    burst, adaptive, fixed = (timing.describe_timer(t) for t in timing.TIMERS)
    assert burst["name"] == "burst" and "no power-cap" in burst["rule"] and "+-0.25%" in burst["rule"]
    assert burst["power_regime"].startswith("burst") and burst["stop_rule"]["batch_ms"] == 10.0
    assert "95% confidence interval" in adaptive["rule"] and "+-0.25%" in adaptive["rule"]
    assert adaptive["stop_rule"]["precision"] == 0.0025 and "power cap" in adaptive["power_regime"]
    assert "200 ms" in fixed["rule"] and "after every row" in fixed["ceiling"]


def test_gpu_state_is_one_nvidia_smi_call_where_it_answers_everything(monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd[1])
        fields = cmd[1].split("=", 1)[1].split(",")
        if "clocks_event_reasons.active" in fields:  # an older nvidia-smi: only the old name
            raise subprocess.CalledProcessError(6, cmd)
        values = {
            "clocks.sm": "1755",
            "clocks.mem": "3201",
            "temperature.gpu": "61",
            "power.draw": "698.1",
            "clocks_throttle_reasons.active": "0x0000000000000004",
        }
        return subprocess.CompletedProcess(cmd, 0, stdout=", ".join(values[f] for f in fields) + "\n")

    monkeypatch.setattr(run_meta, "gpu_target", lambda: "GPU-aaaa")
    monkeypatch.setattr(run_meta.subprocess, "run", fake_run)
    monkeypatch.setattr(run_meta, "_ONE_QUERY", [])
    expected = {
        "sm_clock_mhz": 1755.0,
        "mem_clock_mhz": 3201.0,
        "temperature_c": 61.0,
        "power_w": 698.1,
        "throttle_reasons": 4,
        "throttled": True,
    }
    assert run_meta.gpu_state() == expected
    calls.clear()
    assert run_meta.gpu_state() == expected
    assert len(calls) == 1  # the field name that works is remembered: one call per row


def test_a_row_the_host_cannot_feed_is_marked_launch_bound(monkeypatch):
    """The host's time per call is read from the calls the samples make (no extra launch): a row whose enqueue takes
    at least LAUNCH_BOUND_SHARE of its GPU median is marked, in its fields, its note and the terminal table."""
    from suite.driver import report
    from suite.problems import PROBLEMS

    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])

    def slow_host():
        clock[0] += 90e-6  # 90 us to enqueue

    def fake_time(fn, opts, rep_scale=1.0):
        for _ in range(20):
            fn()
        return [0.05] * 20  # the GPU runs each call in 50 us

    monkeypatch.setattr(measure, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", lambda: {"throttled": False})
    eager = bench.Options(timer="adaptive", launch="eager")  # the samples' own calls are the host's
    row = {**measure.time_call(slow_host, eager), "note": "", "ceiling": False}
    assert row["host_enqueue_us"] == pytest.approx(90.0)
    fast = {**measure.time_call(lambda: None, eager), "note": "", "ceiling": False}
    assert fast["host_enqueue_us"] == 0.0
    _flags(PROBLEMS["vector"], 2**20, [row, fast], ceiling_ms=0.05)
    assert row["launch_bound"] is True and "launch-bound: the host takes 90 us" in row["note"]
    assert fast["launch_bound"] is False and "launch-bound" not in fast["note"]
    row.update(unit="GB/s", valid=True)
    assert report._cell(row).split(" ")[0].endswith(report.LAUNCH_BOUND)
    assert not report._cell({**fast, "unit": "GB/s", "valid": True}).split(" ")[0].endswith(report.LAUNCH_BOUND)


def test_host_timed_reads_the_fast_tenth_of_the_calls():
    """A call that waited behind a full launch queue measures the GPU: the host's time is the fastest tenth."""
    timed = measure.HostTimed(lambda: None)
    assert timed.enqueue_us() is None
    timed.seconds = [1e-6 * t for t in [500] * 5 + [10] * 5 + [12] * 10]
    assert timed.enqueue_us() == pytest.approx(10.0)


def test_a_graph_launched_row_says_the_host_is_left_out(monkeypatch):
    """With the default launch (a CUDA graph's replay), a row whose eager enqueue is slow is still marked, and its
    note says the time leaves the host out; a capture that failed is said in the note."""
    from suite.problems import PROBLEMS

    rows = [
        {
            "median_ms": 0.05,
            "spread": 0.0,
            "measured": True,
            "note": "",
            "ceiling": False,
            "host_enqueue_us": 90.0,
            "launch": launch,
            **extra,
        }
        for launch, extra in (
            ("graph", {}),
            ("eager", {}),
            ("eager", {"launch_note": "not capturable (x), timed eagerly"}),
        )
    ]
    _flags(PROBLEMS["vector"], 2**20, rows, ceiling_ms=0.05)
    graph, eager, failed = (r["note"] for r in rows)
    assert "launch-bound when called from Python: the host takes 90 us" in graph and "CUDA graph" in graph
    assert "launch-bound: the host takes 90 us" in eager and "CUDA graph" not in eager
    assert "not capturable (x), timed eagerly" in failed


def test_a_short_load_does_not_shorten_the_rest_an_earlier_burst_is_owed(monkeypatch):
    now = [10.0]
    monkeypatch.setattr(timing, "now", lambda: now[0])
    pacer = timing.BurstPacer()
    now[0] += 0.02
    pacer.after(10.0)  # a 20 ms burst: 40 ms of rest owed
    assert pacer.ready_at == pytest.approx(10.06)
    now[0] += 0.002
    pacer.after(10.021)  # 1 ms of eager calls right after: the burst's rest still holds
    assert pacer.ready_at == pytest.approx(10.06)
    now[0] += 5.0
    pacer.after(15.0)  # long after: its own rest
    assert pacer.ready_at == pytest.approx(15.022 + 2 * 0.022)


def test_long_calls_get_fewer_eager_calls_before_their_capture(monkeypatch):
    """Before a row's capture, its calls from Python keep the GPU busy a burst's length at most (5 calls at least):
    30 of a 50 us kernel, 6 of an fp16 8192^3 GEMM (1.6 ms), 5 of a 7 ms one. With the burst timer the row's first
    burst then rests after them, as after a burst; the calls (CUDA faked: it is a CPU test) are counted."""
    assert measure.eager_calls(0.05) == 30 and measure.eager_calls(1.6) == 6 and measure.eager_calls(7.0) == 5
    assert measure.eager_calls(0.0) == 30
    now, calls = [50.0], []
    monkeypatch.setattr(timing, "now", lambda: now[0])
    monkeypatch.setattr(measure.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(measure.torch.cuda, "synchronize", lambda: now.__setitem__(0, now[0] + 0.0016))  # 1.6 ms
    monkeypatch.setattr(measure, "capture_graph", lambda fn: type("G", (), {"replay": staticmethod(fn)})())
    monkeypatch.setattr(measure, "_PACER", timing.BurstPacer())
    launched = measure.Launched(lambda: calls.append(1), bench.Options())
    assert len(calls) == 6 and launched.how == "graph"
    # the first call and its wait took 1.6 ms, the other five 1.6 ms more: the next burst is due twice 3.2 ms later
    assert measure._PACER.ready_at == pytest.approx(50.0032 + 2 * 0.0032)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU case: no CUDA to capture with")
def test_without_cuda_the_graph_launch_times_the_call_itself():
    calls = []
    launched = measure.Launched(lambda: calls.append(1), bench.Options())
    launched.call()
    assert calls == [1] and launched.how == "eager" and "launch_note" not in launched.fields()


@pytest.mark.gpu
def test_the_graph_replays_the_call_and_a_call_that_syncs_is_timed_eagerly(monkeypatch):
    x = torch.randn(3 * 8192 + 5, device="cuda")
    y = torch.full_like(x, float("nan"))
    launched = measure.Launched(lambda: torch.mul(x, 2.0, out=y), bench.Options())
    assert launched.how == "graph" and launched.fields()["host_enqueue_us"] > 0
    y.fill_(float("nan"))  # poisoned: only the replay can write it
    launched.call()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2 * x)
    pools = []
    handle = torch.cuda.graph_pool_handle

    def recorded_handle():
        pools.append(handle())
        return pools[-1]

    monkeypatch.setattr(torch.cuda, "graph_pool_handle", recorded_handle)
    syncs = measure.Launched(lambda: x.sum().item(), bench.Options())
    assert syncs.how == "eager" and syncs.fields()["launch_note"].startswith("not capturable in a CUDA graph")
    # the allocator no longer allocates into the failed capture's pool (else its next empty_cache, or the process's
    # exit, aborts on an internal assert)
    end = getattr(torch._C, "_cuda_endAllocateToPool", None) or torch._C._cuda_endAllocateCurrentStreamToPool
    with pytest.raises(RuntimeError, match="not currently recording"):
        end(torch.cuda.current_device(), pools[-1])
    torch.cuda.empty_cache()
    syncs.call()  # the stream still works after the failed capture
    torch.cuda.synchronize()
    # ... and so does torch's random generator (left marked as capturing by the failed capture until capture_graph
    # gave it a fresh state: every later torch.randn on the GPU raised)
    fresh = torch.randn(4, device="cuda")
    torch.cuda.synchronize()
    assert torch.isfinite(fresh).all() and fresh.std() > 0


def test_a_module_that_must_run_eagerly_is_timed_eagerly_and_says_why():
    """copy_ is a memcpy, which a CUDA graph runs another way: the ceiling declares it (KernelModule.eager_only), and
    the launch times its calls as Python makes them, with the reason in the row."""
    from suite.registry import variants

    copy_ = next(v for v in variants("vector") if v.label == "torch:copy_")
    assert "memcpy" in copy_.kernel.eager_only
    calls = []
    launched = measure.Launched(lambda: calls.append(1), bench.Options(), copy_.kernel.eager_only)
    launched.call()
    assert calls == [1] and launched.how == "eager"
    assert launched.fields()["launch_note"].startswith(
        "timed eagerly, not from a CUDA graph: a device-to-device memcpy"
    )
    assert all(v.kernel.eager_only is None for v in variants() if v.label != "torch:copy_")  # every other: a graph
