"""Validate, then time, every selected variant; return one row per (problem, dtype, shape, variant, stages).

The run is the plan's jobs (suite.driver.plan: one per (problem, dtype, shape), with its ceiling), in order. Before
any job, every NVRTC kernel the jobs need is compiled, in parallel threads, into the cubin cache (``precompile``).
Then each job: every row validated, then every valid row timed with the ceiling interleaved.

Validation: fresh random inputs for every variant and stage count (the seed from the row's place in the plan, so
any shard or GPU draws the same), the output poisoned with NaN, every element compared with the problem's reference
(torch, in higher precision where it matters). Only a variant that validates is timed. A Triton kernel compiles on
its first call, which is this one.

Timing: ``triton.testing.do_bench``'s method (CUDA events around each call; the L2 is flushed before every call by
reading a 256 MB buffer, the burst timer's default, or with ``--flush write`` by writing one as do_bench does, outside
the timed region; warm-up calls excluded),
median and interquartile range of all samples: do_bench itself for the adaptive and fixed timers, its loop in short
bursts (``_burst``) for the burst timer.
How long a row is sampled, in which power regime, and when the ceiling is timed again are suite.driver.timing's
rules (by default the burst timer: bursts of 10 ms of calls, each begun with the power cap clear, until the median is
known to +-0.25%; ``Options.timer = "adaptive"``: the same stop rule on sustained load; ``"fixed"``: the earlier
budget).
The ceiling's samples are pooled and every ratio of the job is taken against their median: numbers from one GPU,
taken in one stretch.

After a row fails on a GPU, the driver asks the GPU whether it still answers; when it does not (a sticky CUDA
error, a GPU off the bus), the rows not finished are marked failed with the reason instead of failing one by one.

Without a GPU: Triton kernels run in the interpreter and are validated (not timed); PTX modules are compiled for
sm_90 and described (registers, shared memory, SASS); timings are marked as not measured.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from suite.driver import meta as run_meta
from suite.driver import timing
from suite.driver.plan import blank_row
from suite.info import KernelInfo
from suite.kernel import LibraryOp
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant, variants
from suite.sass import PendingClasses, summary
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
    rep_ms: float = 200.0  # the fixed timer's budget (a quarter with --quick)
    timer: str = "burst"  # suite.driver.timing.TIMERS: "burst", "adaptive" (sustained) or "fixed" (rep_ms of samples)
    launch: str = "graph"  # timing.LAUNCHES: the samples time a CUDA graph's replay of one call, or the call itself
    # timing.FLUSHES: the L2 emptied by a read (the burst timer's default) or a write (do_bench's, the other
    # timers'); None: the timer's own (timing.default_flush)
    flush: str | None = None

    def __post_init__(self):
        if self.flush is None:
            self.flush = timing.default_flush(self.timer)


def _row(problem: Problem, size, variant: Variant, stages, dtype: str | None = None) -> dict:
    return blank_row(
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


def _add_info(row: dict, info: KernelInfo | None) -> None:
    """The row's kernel facts from ``info``; SASS classes still being listed in the background (PendingClasses) are
    left in ``row["_sass"]`` for ``_add_sass`` once the job's rows are validated."""
    info = info or KernelInfo()
    row.update({k: v for k, v in info.as_dict(sass=False).items() if k not in ("stages", "note")})
    if info.note:
        row["note"] = "; ".join(n for n in (row.get("note"), info.note) if n)
    if info.stages is not None:
        row["stages"] = info.stages
    if isinstance(info.sass, PendingClasses):  # settled with the job's rows (_settle_sass), a failure failing the row
        row["_sass"] = info.sass
    else:
        _add_sass(row, info.sass)


def _add_sass(row: dict, classes) -> None:
    classes = dict(classes or {})
    row["sass"] = summary(classes) if classes else None
    row["sass_counts"] = classes or None


def _settle_sass(row: dict) -> None:
    """Fill in the row's SASS classes listed in the background (``_add_info``), waiting for them; a listing that
    failed fails the row (its build cannot be described). No row leaves a job with its listing still pending."""
    if "_sass" not in row:
        return
    try:
        _add_sass(row, row.pop("_sass"))
    except Exception as e:  # noqa: BLE001 - cuobjdump failed on the cubin: the row's build is not described
        _fail(row, "build failed (SASS listing)", e)


def _stats(times_ms: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(times_ms, n=4) if len(times_ms) >= 2 else [times_ms[0]] * 3
    return q[1], q[2] - q[0]


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
            raise OptionError(
                "stages",
                f"no selected variant sweeps {', '.join(map(str, missing))} stage(s); "
                f"they sweep {', '.join(map(str, sorted(swept))) or 'none'}",
            )
    if not on_gpu:
        for name, sizes in opts.sizes.items():
            problem = PROBLEMS[name]
            for size in sizes:
                if problem.work(size) > problem.cpu_max_work:
                    raise OptionError(
                        "sizes",
                        f"{problem.shape(size)} is too large for a CPU run (the Triton "
                        f"interpreter): {name} needs {problem.cpu_limit} without a GPU",
                    )
    return plan


def dtypes_for(problem: Problem, opts: Options) -> tuple[str, ...]:
    """The problem's dtypes the options select: those --dtype names; without it, every dtype in a default run (each
    at its own default sizes), and the problem's default dtype alone at named shape sets or explicit sizes (another
    dtype is one --dtype away)."""
    if opts.dtypes is None:
        return (problem.default_dtype,) if opts.shape_sets or problem.name in opts.sizes else tuple(problem.dtypes)
    return tuple(d for d in problem.dtypes if d in opts.dtypes)


def sizes_for(problem: Problem, opts: Options, on_gpu: bool, dtype: str | None = None) -> tuple:
    """(size, shape set) pairs: explicit sizes (no set: every variant runs them), the named sets asked for, or the
    default run's sizes for ``dtype``, each tagged with the first set it belongs to."""

    def tagged(sizes):
        return tuple(
            (size, next((name for name, members in problem.shape_sets.items() if size in members), None))
            for size in sizes
        )

    if problem.name in opts.sizes:
        return tuple((size, None) for size in opts.sizes[problem.name])
    if not on_gpu:
        return tuple((size, None) for size in problem.cpu_sizes)
    if opts.shape_sets:
        return tuple(
            dict.fromkeys(
                (size, name)
                for name in opts.shape_sets
                for size in problem.fits(problem.shape_sets.get(name, ()), dtype)
            )
        )
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
    """Mark ``row`` failed, with its ``failure`` (build, launch or timing: the CLI counts each apart from the rows
    that failed validation) and a one-line note that points at the cause: for a compile error, its first error (never
    a warning) at its ``.cu`` file:line, and where the PTX is kept; the whole message in ``error``."""
    from suite.nvrtc.loader import KernelCompileError

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


def _validate(
    size, variant: Variant, stages, seed: int, device, dtype: str | None = None, seconds: dict | None = None
) -> tuple[dict, object]:
    """suite.validate on fresh inputs: the check fields of the row, and the callable (for its KernelInfo);
    ``seconds``: validate's seconds per step, added to."""
    result = validate(variant, stages, size, seed=seed, device=device, dtype=dtype, seconds=seconds)
    check = result.check
    return {
        "valid": check.valid,
        "max_abs_error": check.max_abs_error,
        "rel_error": check.rel_error,
        "note": "" if check.valid else f"INVALID: {check.message}",
    }, result.fn


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


MAX_SPREAD = 0.01  # interquartile range / median above which a row is flagged (the fixed timer re-times it first)


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


LAUNCH_BOUND_SHARE = 0.8  # host enqueue time / GPU median at or above which a row is marked launch-bound
EAGER_CALLS = 30  # calls made from Python before capture, timed on the host: the eager launch path's cost
EAGER_MIN_CALLS = 5  # at least: where a call's GPU time makes 30 a long load, the host's time does not matter anyway


def eager_calls(first_call_ms: float) -> int:
    """How many calls from Python a row gets before its capture (the first, waited for, included): EAGER_CALLS, or as
    many as fit a burst's GPU time (timing.BURST.batch_ms) at the first call's pace, EAGER_MIN_CALLS at least. 30
    calls of an fp16 8192^3 GEMM are 45 ms of load right before the row's first burst, longer than any burst the
    timer allows itself; the host's launch time (host_enqueue_us) only shows where calls are short, and those keep
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
    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            try:
                fn()
            finally:
                graph.capture_end()  # raises too when the capture was invalidated (a sync, a forbidden call)
        except Exception:
            _release_rng_from_capture()
            raise
    current.wait_stream(side)
    return graph


def _release_rng_from_capture() -> None:
    """After a capture that failed: torch's default CUDA generator stays marked as capturing (torch 2.11 on the
    H200: every later torch.randn on the GPU in the process raised "Offset increment outside graph capture encountered
    unexpectedly"), so its state is replaced by a fresh copy of itself (the same seed and offset, no capture)."""
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


def _measure(
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


def _throughput_and_flags(
    problem: Problem, size, group_rows: list[dict], ceiling_ms: float | None = None, precision: float | None = None
) -> None:
    """Throughput and ratio to the ceiling of one job's measured rows (the ceiling's median: ``ceiling_ms``, else
    the ceiling row's among them); notes for noisy, imprecise or throttled ones."""
    work = problem.work(size)
    if ceiling_ms is None:
        ceiling_ms = next((r["median_ms"] for r in group_rows if r["ceiling"] and r["measured"]), None)
    for row in group_rows:
        if not row["measured"]:
            continue
        row["throughput"] = work / (row["median_ms"] * 1e-3) / problem.scale
        if ceiling_ms:
            row["ratio_to_ceiling"] = ceiling_ms / row["median_ms"]
            row["ceiling_ms"] = ceiling_ms
        flags = []
        if row["spread"] > MAX_SPREAD:
            flags.append(f"spread {100 * row['spread']:.1f}% > {100 * MAX_SPREAD:g}%")
        if precision is not None and row.get("precision_met") is False:
            flags.append(f"median known to +-{100 * row['ci95']:.2f}% (95% CI), short of +-{100 * precision:g}%")
        if row.get("throttled"):
            flags.append("GPU reported a clock slowdown (power/thermal) at the end of timing")
        if row.get("host_enqueue_us") is not None:
            row["launch_bound"] = row["host_enqueue_us"] >= LAUNCH_BOUND_SHARE * row["median_ms"] * 1e3
            if row["launch_bound"]:
                enqueue = (
                    f"the host takes {row['host_enqueue_us']:.0f} us to enqueue a call the GPU runs in "
                    f"{1e3 * row['median_ms']:.0f} us"
                )
                flags.append(
                    f"launch-bound when called from Python: {enqueue} (timed from a CUDA graph, which leaves the "
                    "host out)"
                    if row.get("launch") == "graph"
                    else f"launch-bound: {enqueue}, so the time is partly the host's"
                )
        if row.get("launch_note"):
            flags.append(row["launch_note"])
        if row.get("below_cap") is False:
            flags.append(f"a burst began with the clock slowdown still on after {timing.COOL_MAX_S:g} s of waiting")
        if flags:
            row["note"] = "; ".join(([row["note"]] if row["note"] else []) + flags)


# ---------------------------------------------------------------------------------------------------------------
# The run: jobs of the plan (suite.driver.plan), each validated, then timed with its ceiling interleaved
# ---------------------------------------------------------------------------------------------------------------


def run(opts: Options, on_gpu: bool, progress: bool = True, device: torch.device | None = None) -> list[dict]:
    """Every selected (problem, dtype, shape, variant, stages), in this process: validated, timed on a GPU,
    described without one. ``device`` defaults to the GPU when ``on_gpu`` (tests pass the CPU to exercise the
    timing logic)."""
    from suite.driver import plan as planning

    return run_jobs(planning.build(opts, on_gpu).jobs, opts, on_gpu, progress=progress, device=device)


def run_jobs(
    jobs,
    opts: Options,
    on_gpu: bool,
    progress: bool = True,
    device: torch.device | None = None,
    phases: timing.Phases | None = None,
    gpu: dict | None = None,
    described: dict | None = None,
    on_rows=None,
) -> list[dict]:
    """``jobs`` (suite.driver.plan.Job) in order, in this process: their kernels compiled up front, then each job
    validated and timed. When the GPU stops answering, the rows left are marked failed with the reason.
    ``on_rows``: called with the rows so far after each job (a caller saving them as the run goes).
    ``described``: descriptions already made in this process (kept across calls by a worker), added to."""
    from suite.driver.workers import DeviceFailed, unfinished

    device = device or torch.device("cuda" if on_gpu else "cpu")
    phases = phases if phases is not None else timing.Phases()
    gpu = gpu if gpu is not None else current_gpu(device)
    bar = Progress(sum(len(j.rows) for j in jobs) * (2 if on_gpu else 1), progress)
    described = described if described is not None else {}
    with phases("compile"):
        described.update(precompile(jobs, on_gpu, known=described))
    rows: list[dict] = []
    lost = None
    for job in jobs:
        if lost is not None:
            rows += [dict(r, **gpu) for r in unfinished(job, skeleton, [], None, lost)]
            continue
        try:
            rows += run_job(job, opts, on_gpu, device, described=described, phases=phases, bar=bar, gpu=gpu)
        except DeviceFailed as e:
            lost = f"the GPU failed earlier in this run: {e}"
            rows += [dict(r, **gpu) for r in unfinished(job, skeleton, e.rows, None, f"the GPU failed: {e}")]
        if on_rows is not None:
            on_rows(list(rows))
    return rows


def current_gpu(device: torch.device) -> dict:
    """The row fields naming the GPU this process times on: torch's index and its UUID (None on the CPU)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return {"gpu_index": None, "gpu_uuid": None}
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return {"gpu_index": index, "gpu_uuid": run_meta.smi_target(uuid, None, index) if uuid else None}


def _variants_of(problem: str) -> dict[str, Variant]:
    return {v.label: v for v in variants(problem)}


def skeleton(job) -> list[dict]:
    """The rows of ``job`` before anything ran (marked failed by callers when a job cannot run)."""
    problem, by_label = PROBLEMS[job.problem], _variants_of(job.problem)
    rows = []
    for spec in job.rows:
        row = _row(problem, job.size, by_label[spec.label], spec.stages, job.dtype)
        row.update(job=job.index, plan_row=spec.index)
        rows.append(row)
    return rows


def _describe(variant: Variant, problem: Problem, dtype: str):
    """Without a GPU: the variant's kernels compiled for CPU_ARCH and described, at ``dtype``."""
    if dtype == problem.default_dtype:
        return variant.describe(CPU_ARCH)
    return variant.kernel.describe(CPU_ARCH, dtype)


def _nvrtc_builder(kernel) -> Callable[[str], object] | None:
    """What compiles the cubins a launch of ``kernel`` loads, for an arch: its ``build``; None for a kernel NVRTC
    does not build."""
    from suite.kernel import NvrtcModule

    return kernel.build if isinstance(kernel, NvrtcModule) else None


def precompile(jobs, on_gpu: bool, max_workers: int | None = None, known: dict | None = None) -> dict:
    """Compile every kernel of ``jobs`` up front, in parallel threads (NVRTC releases the GIL; cuobjdump runs in a
    subprocess), before anything is timed. On a GPU: every NVRTC kernel of a variant that runs here, for this GPU's
    arch, into the cubin cache, with its SASS listing and resources (``_build_and_list``), so each launch loads them
    (Triton kernels compile on their first call, which is the validation call, before any timing of the job; their
    listings are made in background threads, suite.sass.pending_classes). Without a GPU: each gated-out variant's
    kernels compiled for CPU_ARCH and described; returns (label, dtype) -> description (or the exception its build
    raised), for those not in ``known`` already."""
    from concurrent.futures import ThreadPoolExecutor

    work: dict[tuple, Callable[[], object]] = {}
    arch = None
    for job in jobs:
        problem, by_label = PROBLEMS[job.problem], _variants_of(job.problem)
        for spec in job.rows:
            variant = by_label[spec.label]
            if not spec.runs or variant.dtype_skip_reason(job.dtype):
                continue
            if variant.skip_reason():
                key = (variant.label, job.dtype)
                if (
                    not on_gpu
                    and variant.describe is not None
                    and key not in (known or {})
                    and ("describe", *key) not in work
                ):
                    work[("describe", variant.label, job.dtype)] = lambda v=variant, p=problem, d=job.dtype: _describe(
                        v, p, d
                    )
                continue
            if not on_gpu:
                continue
            builder = _nvrtc_builder(variant.kernel)
            if builder is None:
                continue
            if arch is None:
                try:
                    from suite.nvrtc import loader

                    arch = loader.current_arch()
                except Exception:  # noqa: BLE001 - no GPU to ask (a test on a CPU): each launch compiles for itself
                    return {}
            work.setdefault(("build", id(variant.kernel)), lambda b=builder, a=arch: _build_and_list(b, a))
    if not work:
        return {}
    _import_compilers()
    described = {}
    with ThreadPoolExecutor(max_workers=max_workers or min(len(work), os.cpu_count() or 1)) as pool:
        futures = {key: pool.submit(task) for key, task in work.items()}
        for key, future in futures.items():
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a build that fails is a failed row (described) or fails its launch
                result = e
            if key[0] == "describe":
                described[key[1:]] = result
    return described


def _build_and_list(builder: Callable[[str], object], arch: str) -> object:
    """``builder(arch)``, then what the first launch of each of its instantiations reads from the cubin: the SASS
    listing (split per kernel and counted) and the resource usage, both cuobjdump runs kept in the cache. Read here,
    in the precompile threads, rather than one cuobjdump after another as the rows validate (58 s of a run on a
    fresh machine, 2026-12-01)."""
    module = builder(arch)
    for read in ("instruction_classes", "resources"):  # suite.nvrtc.loader.CompiledModule's; cached per module
        if callable(getattr(module, read, None)):
            getattr(module, read)()
    return module


def _import_compilers() -> None:
    """Import what the builds import, here, before the threads start: two threads importing cuda.core at once can
    see it half-initialized ("cannot import name 'Program' from 'cuda.core.cu13'")."""
    try:
        import cuda.core  # noqa: F401
        from cuda.core import Program, ProgramOptions  # noqa: F401
        from cuda.core._utils.cuda_utils import NVRTCError  # noqa: F401

        from suite.nvrtc import loader

        loader.nvrtc_version()
    except Exception:  # noqa: BLE001 - each build then reports its own error
        return


def _check_device(device: torch.device, rows: list[dict]) -> None:
    """After a row failed on the GPU: raise DeviceFailed (with the rows finished so far) when the device no longer
    answers (a sticky CUDA error, or the GPU fell off the bus): every later launch would fail the same way."""
    if device.type != "cuda":
        return
    from suite.driver.workers import DeviceFailed

    try:
        torch.cuda.synchronize(device)
    except Exception as e:  # noqa: BLE001 - any error here means the context is gone
        done = [r for r in rows if r.get("_final")]
        for r in done:
            r.pop("_final", None)
            _settle_sass(r)  # a row goes back to the parent whole: no background listing in it
        raise DeviceFailed(
            f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}", done
        ) from None


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
    validation seed is ``opts.seed + 1 + its plan index``: the same inputs whichever shard or GPU runs it."""
    phases = phases if phases is not None else timing.Phases()
    bar = bar or Progress(0, enabled=False)
    described = described if described is not None else {}
    problem, by_label, dtype, size = PROBLEMS[job.problem], _variants_of(job.problem), job.dtype, job.size
    rows = skeleton(job)
    pairs = [(spec, by_label[spec.label]) for spec in job.rows]
    for row in rows:
        row.update(gpu or {})

    to_time = []
    for (spec, variant), row in zip(pairs, rows):
        bar.step(f"validate {problem.name} {dtype} {problem.shape(size)} {variant.label} stages={spec.stages}")
        steps: dict[str, float] = {}
        with phases("validate"):
            timed = _validate_row(row, variant, spec, job, problem, opts, on_gpu, device, described, steps)
        for step, seconds in steps.items():
            phases.add(f"validate.{step}", seconds)  # where validate's seconds went (counted in it already)
        row["_final"] = not timed
        if timed:
            to_time.append((spec, variant, row))
        elif row["valid"] is False and on_gpu:
            _check_device(device, rows)
    for row in rows:  # the SASS listings made in the background while the rows validated
        _settle_sass(row)
    to_time = [entry for entry in to_time if entry[2]["valid"]]

    ceiling_ms = _time_job(job, problem, to_time, rows, opts, device, phases, bar, by_label) if on_gpu else None
    for row in rows:
        row.pop("_final", None)
    _throughput_and_flags(problem, size, rows, ceiling_ms, None if opts.timer == "fixed" else stop_rule(opts).precision)
    return rows


def _validate_row(
    row: dict,
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
        row["note"] = dtype_reason  # said in its row, never silently absent
        return False
    reason = variant.skip_reason()
    if reason:
        if not on_gpu and variant.describe is not None:
            key = (variant.label, dtype)
            if key not in described:
                try:
                    described[key] = _describe(variant, problem, dtype)
                except Exception as e:  # noqa: BLE001 - a build that fails is a failed row; the run goes on
                    described[key] = e
            if isinstance(described[key], Exception):
                _fail(row, "build failed", described[key])
                return False
            _add_info(row, described[key].get(spec.stages))
            row["built_for"] = CPU_ARCH  # compiled and described; not run: `reason`
        else:
            row["note"] = f"skipped: {reason}"
        return False
    if isinstance(variant.kernel, LibraryOp) and (rule := variant.kernel.refuses(job.size, dtype)):
        # a library call that does not take this shape (cuBLASLt's fp8 wants N and K multiples of 16): a fact of the
        # library, said in its row, not a failure of the run; the kernels of the shape run without that ceiling
        row["note"] = f"not run: {rule}"
        return False
    try:
        check, fn = _validate(job.size, variant, spec.stages, opts.seed + 1 + spec.index, device, dtype, steps)
    except ValueError as e:  # a configuration the kernel refuses (e.g. a ring too deep for the GPU)
        row.update(valid=False, note=f"refused: {e}")
        return False
    except Exception as e:  # noqa: BLE001 - a build or launch that fails is a failed row
        _fail(row, "build or launch failed", e)
        return False
    row.update(check)
    _add_info(row, getattr(fn, "info", None))
    return bool(row["valid"]) and on_gpu


def _eager_only(variant: Variant | None) -> str | None:
    """Why ``variant``'s calls must be timed eagerly (KernelModule.eager_only; a plugin's module that does not
    subclass KernelModule has no such reason)."""
    return getattr(variant.kernel, "eager_only", None) if variant is not None else None


class _Ceiling:
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


def _time_job(
    job,
    problem: Problem,
    to_time: list,
    rows: list[dict],
    opts: Options,
    device: torch.device,
    phases: timing.Phases,
    bar: Progress,
    by_label: dict[str, Variant],
) -> float | None:
    """Time the job's valid rows with its ceiling interleaved; returns the ceiling's pooled median (None: no
    ceiling here). The ceiling row, when the job has it, gets the pooled samples."""
    ceiling_variant = by_label.get(job.ceiling) if job.ceiling else None
    ceiling_row = next((r for r in rows if r["ceiling"] and f"{r['backend']}:{r['variant']}" == job.ceiling), None)
    with phases("inputs"):
        timing_inputs = problem.make_inputs(job.size, job.timing_seed, device, job.dtype) if to_time else None
        ceiling_fn = None
        if to_time and ceiling_row is not None and ceiling_row["valid"] is True:  # a ceiling that validated here
            ceiling_fn = ceiling_variant.factory(timing_inputs, problem.make_output(timing_inputs), None)
    ceiling = _Ceiling(ceiling_fn, opts, phases, _eager_only(ceiling_variant))
    if to_time:
        ceiling.time()
    for spec, variant, row in to_time:
        bar.step(f"time {problem.name} {job.dtype} {problem.shape(job.size)} {variant.label} stages={spec.stages}")
        if variant is ceiling_variant:
            row["_final"] = True
            continue  # timed interleaved, below
        try:
            with phases("inputs"):
                timed = variant.factory(timing_inputs, problem.make_output(timing_inputs), spec.stages)
            row.update(_measure(timed, opts, phases, _eager_only(variant)))
            del timed
        except Exception as e:  # noqa: BLE001 - a timing that fails is a failed row; the run goes on
            _fail(row, "timing failed", e)
            _check_device(device, rows)
        row["_final"] = True
        ceiling.after_row()
    for _ in range(len(rows) - len(to_time)):
        bar.step(f"{problem.name} {job.dtype} {problem.shape(job.size)}")
    if to_time:
        ceiling.finish()
    if not ceiling.samples:
        return None
    median, iqr = _stats(ceiling.samples)
    drift = ceiling.cadence.drift
    row = ceiling_row
    if row is not None and row["valid"]:
        note = (
            f"timed interleaved with every variant of this shape ({len(ceiling.cadence.timings)} timings"
            + (f", drift {100 * drift:.2f}%" if drift is not None else "")
            + "), samples pooled"
        )
        if drift is not None and drift > MAX_SPREAD:
            note += f"; drift above {100 * MAX_SPREAD:g}% between its timings"
        row.update(
            median_ms=median,
            iqr_ms=iqr,
            spread=iqr / median,
            samples=len(ceiling.samples),
            measured=True,
            ci95=timing.ci_half_width(ceiling.samples),
            precision_met=True,
            ceiling_timings=len(ceiling.cadence.timings),
            ceiling_drift=drift,
            **ceiling.launched.fields(),
            **ceiling.state,
            note=note,
        )
    return median


_WORKER_DESCRIBED: dict = {}  # in a worker process: descriptions made for its earlier jobs


def job_worker(job, device, opts: Options, on_gpu: bool):
    """The real worker (suite.driver.workers.run_jobs): run ``job`` in this process, pinned to ``device``, and
    return its rows with the seconds per phase and the GPU's state after it. Raises DeviceFailed when the pinned
    GPU is not the one asked for, is not visible at all, or stops answering during the job."""
    from suite.driver.workers import DeviceFailed, JobResult

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
