"""Timing one callable: the samples of a row or a ceiling (``measure``), by the options' timer.

``triton.testing.do_bench``'s method: CUDA events around each call; the L2 flushed before every call by reading a
256 MB buffer (the burst timer's default) or, with ``--flush write``, by writing one as do_bench does, outside the
timed region; warm-up calls excluded; median and interquartile range of all samples. do_bench itself for the
adaptive and fixed timers, its loop in short bursts (``burst``) for the burst timer. How long a row is sampled, in
which power regime, and when the ceiling is timed again are suite.driver.timing's rules.

What the samples call (``Launched``): by default one call captured into a CUDA graph, replayed, after calls from
Python whose host time the row records; eagerly where a call cannot be captured, and the row says why.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from suite.driver import meta as run_meta
from suite.driver import timing
from suite.driver.plan import OptionError, Options
from suite.driver.rows import MAX_SPREAD


def _stats(times_ms: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(times_ms, n=4) if len(times_ms) >= 2 else [times_ms[0]] * 3
    return q[1], q[2] - q[0]


def _time(fn: Callable[[], None], opts: Options, rep_scale: float = 1.0) -> list[float]:
    """One batch of samples: ``do_bench`` after ``opts.warmup_ms`` of warm-up, ``opts.rep_ms * rep_scale`` of samples
    (a quarter of that with --quick), the L2 flushed before every call; for the burst timer one ``_burst`` of
    ``opts.rep_ms * rep_scale`` of GPU time."""
    rep = (opts.rep_ms / 4 if opts.quick else opts.rep_ms) * rep_scale
    if opts.timer == "burst":
        return _burst(fn, rep, opts.flush)
    if opts.flush != "write":
        raise OptionError("flush", f"--timer {opts.timer} samples with do_bench, whose L2 flush is a write")
    from triton.testing import do_bench

    return list(do_bench(fn, warmup=opts.warmup_ms, rep=rep, return_mode="all"))


_READ_FLUSH: list[torch.Tensor] = []  # the read flush's 256 MB, zeroed once (made on first use)


def _read_flush() -> None:
    """Empty the L2 by reading 256 MB (do_bench's size) and writing one number: the L2 is left holding that buffer's
    last lines, all clean (timing.describe_flush). On the current device (a worker is pinned to its GPU)."""
    if not _READ_FLUSH:
        _READ_FLUSH.append(torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda"))
    _READ_FLUSH[0].sum()


def _burst(fn: Callable[[], None], busy_ms: float, flush: str = "write") -> list[float]:
    """One burst of the burst timer (suite.driver.timing's docstring says why it is not do_bench): do_bench's loop,
    the L2 flushed before every call (``flush``: "write" is Triton's own, "read" ``_read_flush``) and a CUDA event
    pair around each call, first for one call that is not kept (the first after a rest runs slower, clocks coming up;
    flush and call together are the pace), then for as many calls as fit ``busy_ms`` of GPU time at that pace,
    timing.BURST_MIN_SAMPLES to BURST_MAX_SAMPLES."""
    from triton import runtime

    driver = runtime.driver.active
    device = driver.get_device_interface()
    if flush == "read":
        empty_l2 = _read_flush
    else:
        cache = driver.get_empty_cache_for_benchmark()

        def empty_l2() -> None:
            driver.clear_cache(cache)

    begin, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    begin.record()
    empty_l2()
    fn()
    end.record()
    device.synchronize()
    pace = begin.elapsed_time(end)
    n = int(busy_ms / pace) if pace > 0 else timing.BURST_MAX_SAMPLES
    n = min(timing.BURST_MAX_SAMPLES, max(timing.BURST_MIN_SAMPLES, n))
    starts = [device.Event(enable_timing=True) for _ in range(n)]
    ends = [device.Event(enable_timing=True) for _ in range(n)]
    for start, stop in zip(starts, ends):
        empty_l2()  # outside the timed region, as do_bench does
        start.record()
        fn()
        stop.record()
    device.synchronize()
    return [start.elapsed_time(stop) for start, stop in zip(starts, ends)]


def stop_rule(opts: Options) -> timing.StopRule:
    return timing.stop_rule(opts.timer, opts.quick)


def _sample(fn: Callable[[], None], opts: Options, cooled: dict | None = None) -> timing.Sampled:
    """The burst or the adaptive timer (suite.driver.timing): batches of ``_time`` until the median is known to the
    stop rule's precision or its batches are spent. Adaptive: only the first batch warms up, each later one is twice
    the one before. Burst: every batch waits for the clock slowdown to clear (``cooled`` accumulates the seconds
    waited and whether it always cleared), then warms up briefly."""
    rule = stop_rule(opts)
    first = replace(opts, rep_ms=rule.batch_ms, quick=False)
    if opts.timer != "burst":
        later = replace(first, warmup_ms=0.0)
        return timing.sample(lambda k: _time(fn, first if k == 0 else later, rep_scale=rule.batch_scale(k)), rule)
    burst = replace(first, warmup_ms=0.0)  # _burst's first call is its warm-up
    cooled = cooled if cooled is not None else {}

    def batch(k: int) -> list[float]:
        retaken = 0
        while True:
            waited, clear = _PACER.before(run_meta.gpu_state)
            cooled["cooldown_s"] = cooled.get("cooldown_s", 0.0) + waited
            cooled["below_cap"] = False if cooled.get("below_cap") is False else clear  # once not clear, stays so
            started = timing.now()
            samples = _time(fn, burst)
            _PACER.after(started)
            if not run_meta.gpu_state().get("throttled") or retaken == timing.BURST_RETRIES or _PACER.unreachable:
                return samples
            retaken += 1  # it ended under a slowdown: its samples are not kept
            cooled["bursts_retaken"] = cooled.get("bursts_retaken", 0) + 1

    return timing.sample(batch, rule)


_PACER = timing.BurstPacer()  # one per process: the GPU's rest spans rows


EAGER_CALLS = 30  # calls made from Python before capture, timed on the host: the eager launch path's cost
EAGER_MIN_CALLS = 5  # at least: where a call's GPU time makes 30 a long load, the host's time does not matter anyway


def eager_calls(first_call_ms: float) -> int:
    """How many calls from Python a row gets before its capture (the first, waited for, included): EAGER_CALLS, or as
    many as fit a burst's GPU time (timing.BURST.batch_ms) at the first call's pace, EAGER_MIN_CALLS at least.
    Thirty calls of a large GEMM would be more load right before the row's first burst than any burst the timer
    allows itself; the host's launch time (host_enqueue_us) only shows where calls are short, and those keep
    their 30."""
    if first_call_ms <= 0:
        return EAGER_CALLS
    return max(EAGER_MIN_CALLS, min(EAGER_CALLS, int(timing.BURST.batch_ms / first_call_ms)))


class HostTimed:
    """``fn``, with the host's seconds to return from each call recorded: for a kernel launch, the time to enqueue
    it. Wrapped around the timed callable, it costs the GPU nothing and sees the same calls the samples do."""

    def __init__(self, fn: Callable[[], None]):
        self.fn, self.seconds = fn, []

    def __call__(self) -> None:
        t0 = time.perf_counter()
        self.fn()
        self.seconds.append(time.perf_counter() - t0)

    def enqueue_us(self) -> float | None:
        """The host's time per call, in microseconds: the fastest tenth of the calls (a call that waited for a full
        launch queue measures the GPU, not the host), None before any call."""
        if not self.seconds:
            return None
        return sorted(self.seconds)[len(self.seconds) // 10] * 1e6


def describe_launch(launch: str) -> str:
    """What results metadata records of how the timed calls are launched."""
    if launch == "graph":
        return (
            f"graph: after {EAGER_CALLS} calls from Python (fewer where that many would keep the GPU busy beyond "
            f"{timing.BURST.batch_ms:g} ms, {EAGER_MIN_CALLS} at least; their host time is host_enqueue_us), one "
            "call is captured into a CUDA graph and the samples time its replay: the GPU's time for the call's "
            "kernels, with no backend's Python launch path in it; a call that cannot be captured, or whose module "
            "says its captured form is other work (torch's copy_: a memcpy), is timed eagerly and its row says why"
        )
    return "eager: the samples time each call as Python makes it, the host's launch path included where it is slower"


def capture_graph(fn: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """One call of ``fn`` captured into a CUDA graph, on a side stream ordered after torch's current one (capture
    cannot run on the legacy default stream); raises what the capture raised, with the capture ended."""
    graph = torch.cuda.CUDAGraph()
    # the pool named here, not taken from graph.pool(): after a failed capture torch 2.11 refuses to name the pool
    pool = torch.cuda.graph_pool_handle()
    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            try:
                fn()
            finally:
                graph.capture_end()  # raises too when the capture was invalidated (a sync, a forbidden call)
        except Exception:
            _release_rng_from_capture()
            _end_pool_routing(pool)
            raise
    current.wait_stream(side)
    return graph


def _end_pool_routing(pool: tuple[int, int]) -> None:
    """After a capture whose end failed: torch's caching allocator can stay marked as allocating into the graph's
    pool (capture_end raised before it told the allocator, pytorch/pytorch#180395), and its next synchronizing
    release (empty_cache, the process's exit) then fails an internal assert and aborts the process. The allocator is
    told here; a torch that told it already refuses with a RuntimeError, which leaves nothing to do."""
    end = getattr(torch._C, "_cuda_endAllocateToPool", None) or getattr(
        torch._C, "_cuda_endAllocateCurrentStreamToPool", None
    )
    if end is None:
        return
    try:
        end(torch.cuda.current_device(), pool)
    except RuntimeError:  # "not currently recording to mempool_id": the capture's end already told the allocator
        pass


def _release_rng_from_capture() -> None:
    """After a capture that failed: torch's default CUDA generator stays marked as capturing (every later
    torch.randn on the GPU in the process raises "Offset increment outside graph capture encountered unexpectedly"),
    so its state is replaced by a fresh copy of itself (the same seed and offset, no capture)."""
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    gen.graphsafe_set_state(gen.clone_state())


class Launched:
    """What the samples call for one row (``opts.launch``), and how the row says it was launched.

    "graph" (the default): EAGER_CALLS calls from Python first (fewer for long calls: ``eager_calls``), their host
    time recorded (``host``: what the row's ``host_enqueue_us`` reports, the launch path a caller without graphs
    pays), then one call captured into a CUDA graph, whose replay the samples time: the GPU's time for the call's
    kernels with the host's launch path out of it, the same for every backend (a Python launcher of 50 us and one
    of 15 us time alike when the GPU needs 40). A callable that cannot be captured (it synchronizes, or calls what a
    capture forbids) is timed eagerly, and the row says why. "eager": the samples call ``fn`` itself, as before;
    ``host`` records those calls."""

    def __init__(self, fn: Callable[[], None], opts: Options, eager_only: str | None = None):
        self.host = HostTimed(fn)
        self.how, self.why = "eager", ""
        self.call: Callable[[], None] = self.host
        if opts.launch != "graph":
            return
        if eager_only:  # the module says its captured form is other work (KernelModule.eager_only)
            self.why = f"timed eagerly, not from a CUDA graph: {eager_only}"
            return
        if not torch.cuda.is_available():  # no GPU (the fake-clock tests): eager
            return
        started = timing.now()
        self.host()
        torch.cuda.synchronize()  # the first call, waited for: its time says how many more the GPU can take
        for _ in range(eager_calls((timing.now() - started) * 1e3) - 1):
            self.host()
        torch.cuda.synchronize()
        if opts.timer == "burst":
            _PACER.after(started)  # the calls were load too: the row's first burst rests after them
        try:
            self.graph = capture_graph(fn)
        except Exception as e:  # noqa: BLE001 - not capturable: timed eagerly, said in the row
            torch.cuda.synchronize()
            self.why = (
                f"not capturable in a CUDA graph ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}), "
                "timed eagerly"
            )
            return
        self.how, self.call = "graph", self.graph.replay

    def fields(self) -> dict:
        return {"launch": self.how, "host_enqueue_us": self.host.enqueue_us()} | (
            {"launch_note": self.why} if self.why else {}
        )


def time_call(
    fn: Callable[[], None], opts: Options, phases: timing.Phases | None = None, eager_only: str | None = None
) -> dict:
    """Time ``fn`` with the options' timer (the burst or the adaptive stop rule, or the fixed budget: re-timed with
    twice the repetitions when the relative spread is above MAX_SPREAD, samples pooled). Reads the GPU's clocks and
    throttle state right after (counted as the "gpu_state" phase, the burst timer's waits as "cool_down", the
    sampling as "time")."""
    phases = phases if phases is not None else timing.Phases()
    cooled: dict = {}
    with phases("capture"):
        launched = Launched(fn, opts, eager_only)
    with phases("time"):
        sampled = _sampled(launched.call, opts, cooled)
    phases.move("time", "cool_down", cooled.get("cooldown_s", 0.0))
    median, iqr = _stats(sampled.samples)
    with phases("gpu_state"):
        state = run_meta.gpu_state()
    burst = {
        "cooldown_s": round(cooled.get("cooldown_s", 0.0), 3),
        "below_cap": cooled.get("below_cap"),
        "bursts_retaken": cooled.get("bursts_retaken", 0),
    }
    return {
        **(burst if opts.timer == "burst" else {}),
        "median_ms": median,
        "iqr_ms": iqr,
        "spread": iqr / median,
        "samples": len(sampled.samples),
        "measured": True,
        "ci95": sampled.ci95,
        "batches": sampled.batches,
        "precision_met": sampled.met,
        **launched.fields(),
        "sm_clock_mhz": state.get("sm_clock_mhz"),
        "temperature_c": state.get("temperature_c"),
        "throttled": state.get("throttled"),
    }


def _sampled(fn: Callable[[], None], opts: Options, cooled: dict | None = None) -> timing.Sampled:
    """The samples of ``fn`` by the options' timer (``cooled``: see ``_sample``)."""
    if opts.timer == "fixed":
        samples, batches = _time(fn, opts), 1
        if _spread(samples) > MAX_SPREAD:
            samples, batches = samples + _time(fn, opts, rep_scale=2.0), 2
        return timing.Sampled(samples, batches, timing.ci_half_width(samples), True)
    return _sample(fn, opts, cooled)


def _spread(samples: list[float]) -> float:
    median, iqr = _stats(samples)
    return iqr / median


def eager_only(variant: object | None) -> str | None:
    """Why ``variant``'s calls must be timed eagerly (KernelModule.eager_only; a plugin's module that does not
    subclass KernelModule has no such reason)."""
    return getattr(variant.kernel, "eager_only", None) if variant is not None else None


# Why the floor's copy_ is timed eagerly: as torch's copy_ ceiling (suite.variants), a device-to-device memcpy that a
# CUDA graph would run as a memcpy node, another way
FLOOR_EAGER = "a device-to-device memcpy, which a CUDA graph runs another way (slower: pytorch#191284)"


def time_floor(min_bytes: float, device: torch.device, opts: Options, phases: timing.Phases | None = None) -> float:
    """The memory floor of a shape (docs/method.md, floor_ms): the median time of ``copy_`` between two buffers of
    ``min_bytes / 2`` bytes, which reads half of ``min_bytes`` and writes the other half. That is the count the
    roofline uses on both sides: Problem.min_bytes (A and B read, C written, once each) over a bandwidth measured as
    copy_'s bytes read + written. Timed as the rows are (the options' timer and flush), eagerly as torch's copy_ is."""
    n = max(1, math.ceil(min_bytes / 2))
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return time_call(lambda: dst.copy_(src), opts, phases, FLOOR_EAGER)["median_ms"]


class Ceiling:
    """One job's ceiling, timed interleaved with its rows (suite.driver.timing.CeilingCadence), samples pooled."""

    def __init__(
        self, fn: Callable[[], None] | None, opts: Options, phases: timing.Phases, eager_only: str | None = None
    ):
        self.launched = None  # launched as the rows are (Launched), the host's time per call recorded as theirs
        if fn is not None:
            with phases("capture"):
                self.launched = Launched(fn, opts, eager_only)
        self.fn = self.launched.call if self.launched is not None else None
        self.opts, self.phases = opts, phases
        self.samples: list[float] = []
        self.cadence = timing.CeilingCadence(interval_s=0.0 if opts.timer == "fixed" else timing.CEILING_EVERY_S)
        self.state = {"throttled": False}
        self.fresh = False  # timed since the last row

    def time(self) -> None:
        if self.fn is None:
            return
        cooled: dict = {}
        with self.phases("ceilings"):
            if self.opts.timer == "fixed":  # one batch each time, as before
                samples = _time(self.fn, self.opts)
                sampled = timing.Sampled(samples, 1, timing.ci_half_width(samples), True)
            else:
                sampled = _sample(self.fn, self.opts, cooled)
        self.phases.move("ceilings", "cool_down", cooled.get("cooldown_s", 0.0))
        self.samples.extend(sampled.samples)
        self.cadence.record(_stats(sampled.samples)[0], sampled.ci95)
        with self.phases("gpu_state"):
            state = run_meta.gpu_state()
        self.state.update(
            sm_clock_mhz=state.get("sm_clock_mhz"),
            temperature_c=state.get("temperature_c"),
            throttled=self.state["throttled"] or bool(state.get("throttled")),
        )
        self.fresh = True

    def after_row(self) -> None:
        self.fresh = False
        if self.cadence.due():
            self.time()

    def finish(self) -> None:
        if not self.fresh:
            self.time()

    @property
    def median(self) -> float | None:
        return _stats(self.samples)[0] if self.samples else None
