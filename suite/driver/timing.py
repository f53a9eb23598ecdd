"""How long a row is sampled, in which power regime, when its ceiling is timed again, and where a run's time goes.

The burst timer (the default). A GEMM that fills the GPU draws more than its power limit at full clocks: within tens
of milliseconds of back-to-back launches the driver's power cap pulls the SM clock down, and where it settles depends
on the seconds before, so a long sample measures the load's history as much as the kernel (docs/method.md has the
measurements). So this timer samples in short bursts. Each burst is
``measure._burst``: do_bench's loop (the L2 flushed before every call, a CUDA event pair around each) of one call, not
kept (the first call after a rest runs slower while the clocks come up), then as many calls as fit in
``BURST.batch_ms`` of GPU time at that call's pace, ``BURST_MIN_SAMPLES`` at least. do_bench itself is not used here:
its five-call estimate and its warm-up come on top of the samples and make each burst several times longer, and
bursts that long bring NVML's power-cap flag on within a few rows, and keep it on; bursts of ``BURST.batch_ms``,
rested twice their length, do not.
Before each burst the timer rests twice as long as the burst before took (``BurstPacer``: bursts back to back
add up to a sustained load) and waits until NVML reports no power-cap, thermal or power-brake slowdown (``cool_down``,
3 s at most); a burst that ends with a slowdown active is taken again (twice at most), until the adaptive precision
below is reached or 8 bursts are spent. Its figures are those of the clocks the GPU holds below its power limit, as
short bursts and nvbench see them; the ``adaptive`` timer gives the sustained regime.

The stop rule (both adaptive timers). A row is timed in batches of ``triton.testing.do_bench`` (CUDA events
around every call, the L2 flushed before each, the first batch after a 25 ms warm-up, the later ones straight after
it); the first batch asks for 25 ms of samples and each further batch for twice the one before. Sampling stops as soon
as the median is known to the stated precision: the distribution-free 95% confidence interval of the median (order
statistics r = floor((n - 1.96 sqrt n) / 2) and s = ceil(1 + (n + 1.96 sqrt n) / 2), Conover) is within +-0.25% of
the median, with at least 10 samples; or when the budget is spent (4 batches: 25 + 50 + 100 + 200 ms of samples). A
row that stops on the budget says how well its median is known. The fixed timer (``--timer fixed``) is the previous
rule: 200 ms of samples, 400 ms more when the interquartile range exceeds 1% of the median.

The ceiling's cadence. Each job times its ceiling before its first row, again whenever 2 s have passed since the last
ceiling timing, and after its last row; all its samples are pooled. When two consecutive ceiling timings differ by
more than their confidence intervals allow (drift beyond the noise), the interval halves for the rest of the job,
down to after every row (what the fixed timer does).

The adaptive and fixed timers sample sustained back-to-back launches with the L2 flushed between them: the clocks
are those the GPU holds under that load at its power cap, not the short-burst clocks the burst timer reads.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

Z95 = 1.959964  # two-sided 95% normal quantile


def process_seconds() -> float | None:
    """Seconds since this process started (Linux: /proc), so a run's total counts the interpreter's start and the
    imports too; None where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def now() -> float:
    """The clock the ceiling cadence and the cool-down read (tests replace it)."""
    return time.monotonic()


def sleep(seconds: float) -> None:
    """The cool-down's wait between two reads of the GPU's state (tests replace it)."""
    time.sleep(seconds)


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """The median of ``samples`` and the bounds of its distribution-free 95% confidence interval (the order
    statistics r = floor((n - z sqrt n) / 2) and s = ceil(1 + (n + z sqrt n) / 2), 1-based, clamped to the samples:
    the number of samples below the true median is Binomial(n, 1/2), whatever the distribution)."""
    ordered = sorted(samples)
    n = len(ordered)
    half = Z95 * math.sqrt(n)
    lo = min(n, max(1, math.floor((n - half) / 2)))
    hi = max(1, min(n, math.ceil(1 + (n + half) / 2)))
    return statistics.median(ordered), ordered[lo - 1], ordered[hi - 1]


def ci_half_width(samples: list[float]) -> float:
    """Half the width of the median's 95% confidence interval, as a fraction of the median."""
    median, lo, hi = median_ci(samples)
    return (hi - lo) / 2 / median if median > 0 else math.inf


@dataclass(frozen=True)
class StopRule:
    """When a row has been sampled enough (see the module docstring)."""

    precision: float = 0.0025  # the median's 95% CI half-width, as a fraction of it, at which sampling stops
    min_samples: int = 10
    batch_ms: float = 25.0  # do_bench's rep for the first batch; each later batch is ``growth`` times the one before
    max_batches: int = 4  # 25 + 50 + 100 + 200 ms of samples at most
    growth: float = 2.0

    def batch_scale(self, k: int) -> float:
        """The k-th batch's length (k = 0, 1, ...) in units of ``batch_ms``."""
        return self.growth**k

    def met(self, samples: list[float]) -> bool:
        return len(samples) >= self.min_samples and ci_half_width(samples) <= self.precision

    @property
    def budget_ms(self) -> float:
        return self.batch_ms * sum(self.batch_scale(k) for k in range(self.max_batches))

    def describe(self) -> str:
        batches = (
            f"first {self.batch_ms:g} ms of samples after the warm-up, each next one {self.growth:g} times as long"
            if self.growth != 1
            else f"{self.batch_ms:g} ms of samples each"
        )
        return (
            f"batches of do_bench ({batches}) until the median's distribution-free 95% confidence interval is within "
            f"+-{100 * self.precision:g}% of it (at least {self.min_samples} samples), or after "
            f"{self.max_batches} batches ({self.budget_ms:g} ms of samples)"
        )


ADAPTIVE = StopRule()
ADAPTIVE_QUICK = StopRule(precision=0.01, batch_ms=10.0, max_batches=3)  # --quick: a smoke run
BURST = StopRule(batch_ms=10.0, max_batches=8, growth=1.0)  # each burst's samples: 10 ms of GPU time (module docstring)
BURST_QUICK = StopRule(precision=0.01, batch_ms=5.0, max_batches=3, growth=1.0)
BURST_MIN_SAMPLES = 3  # a call longer than a third of a burst's time still gets 3 samples per burst
BURST_MAX_SAMPLES = 1000  # and a call of microseconds at most 1000 (event pairs)
BURST_GAP = 2.0  # after a burst, rest at least twice its length: the GPU busy a third of the time at most
MAX_REST_S = 1.0  # the longest rest a burst is owed (bursts last ~20-100 ms)
BURST_RETRIES = 2  # a burst that ends with a clock slowdown active is taken again, twice at most
COOL_MAX_S = 3.0  # the longest cool_down waits for the slowdown to clear
COOL_POLL_S = 0.01


@dataclass
class BurstPacer:
    """Spaces the burst timer's batches, across rows: each begins once the one before has been followed by ``gap``
    times its own length of rest, and then once NVML reports no slowdown (``cool_down``). Bursts taken back to back
    add up to a sustained load, and the power cap engages within them even though it had cleared before each."""

    gap: float = BURST_GAP
    ready_at: float = 0.0
    unreachable: bool = False  # a slowdown outlasted COOL_MAX_S once: the GPU is held below its clocks; stop waiting

    def before(self, read_state: Callable[[], dict]) -> tuple[float, bool | None]:
        """Wait for the rest, then for the slowdown to clear: (seconds waited, clear as ``cool_down`` says; False
        without waiting once the regime proved unreachable)."""
        if self.unreachable:
            return 0.0, False
        start = now()
        if 0 < self.ready_at - start <= MAX_REST_S:  # (more: a mark from another clock, as tests set; ignored)
            sleep(self.ready_at - start)
        _, clear = cool_down(read_state)
        self.unreachable = clear is False
        return now() - start, clear

    def after(self, started: float) -> None:
        """A burst (or other load: a row's calls before its capture) that began at ``started`` (``now()``) has ended;
        the rest owed is the longer of its own and what an earlier burst is still owed."""
        end = now()
        owed = end + self.gap * (end - started)
        if 0 < self.ready_at - end <= MAX_REST_S:  # an earlier burst's rest, still running (a mark beyond is ignored)
            owed = max(owed, self.ready_at)
        self.ready_at = owed


def cool_down(read_state: Callable[[], dict], max_s: float = COOL_MAX_S) -> tuple[float, bool | None]:
    """Wait until the GPU reports no clock slowdown (``read_state()``: suite.driver.meta.gpu_state's fields, whose
    ``throttled`` says power cap, thermal or power brake), ``max_s`` at most. Returns (seconds waited, whether it is
    clear: None when the state has no reasons to read)."""
    start = now()
    while True:
        throttled = read_state().get("throttled")
        if throttled is None:
            return now() - start, None
        if not throttled:
            return now() - start, True
        if now() - start >= max_s:
            return now() - start, False
        sleep(COOL_POLL_S)


@dataclass
class Sampled:
    samples: list[float]
    batches: int
    ci95: float  # the median's 95% CI half-width / median
    met: bool  # the precision was reached (False: the budget ran out first)


def sample(batch: Callable[[int], list[float]], rule: StopRule) -> Sampled:
    """Call ``batch(k)`` (k = 0, 1, ...: the k-th batch's samples) until ``rule`` is met or its batches are spent."""
    samples: list[float] = []
    for k in range(rule.max_batches):
        samples.extend(batch(k))
        if rule.met(samples):
            return Sampled(samples, k + 1, ci_half_width(samples), True)
    return Sampled(samples, rule.max_batches, ci_half_width(samples), False)


CEILING_EVERY_S = 2.0
CEILING_MIN_INTERVAL_S = 0.05  # below this, the interval is 0: the ceiling is timed after every row


@dataclass
class CeilingCadence:
    """When a job's ceiling is timed again (see the module docstring): ``due()`` after each row, ``record()`` after
    each timing of it."""

    interval_s: float = CEILING_EVERY_S
    last: float | None = None
    timings: list[tuple[float, float]] = field(default_factory=list)  # (median, ci95) of each timing

    def due(self) -> bool:
        return self.last is None or now() - self.last >= self.interval_s

    def record(self, median: float, ci95: float) -> None:
        if self.timings:
            prev_median, prev_ci = self.timings[-1]
            if abs(median - prev_median) > ci95 * median + prev_ci * prev_median:
                self.interval_s = self.interval_s / 2 if self.interval_s / 2 >= CEILING_MIN_INTERVAL_S else 0.0
        self.timings.append((median, ci95))
        self.last = now()

    @property
    def drift(self) -> float | None:
        """(max - min) / mean of the medians of its timings; None before two timings."""
        if len(self.timings) < 2:
            return None
        medians = [m for m, _ in self.timings]
        return (max(medians) - min(medians)) / statistics.fmean(medians)


TIMERS = ("burst", "adaptive", "fixed")
# what the samples time: a CUDA graph's replay of a call, or the call (suite.driver.measure.Launched)
LAUNCHES = ("graph", "eager")
FLUSHES = ("write", "read")  # how the L2 is emptied before each sample (measure._burst; do_bench's own is a write)


def default_flush(timer: str) -> str:
    """The L2 flush a timer uses unless told: a read for the burst timer, which leaves the L2 clean, as a weight that
    streams through a model's layer finds it (a flush by writes leaves it full of dirty lines, whose write-back then
    lands in the timed kernel, a large share of a short decode GEMM's time); do_bench's write for the timers that
    sample with do_bench, which cannot read-flush."""
    return "read" if timer == "burst" else "write"


def stop_rule(timer: str, quick: bool = False) -> StopRule:
    """The stop rule of the burst or the adaptive timer."""
    if timer == "burst":
        return BURST_QUICK if quick else BURST
    return ADAPTIVE_QUICK if quick else ADAPTIVE


def describe_flush(flush: str) -> str:
    """What results metadata records of the L2 flush before each sample."""
    if flush == "read":
        return (
            "read: a sum over a 256 MB buffer before each call, outside the timed region: none of the kernel's data "
            "left in the L2, and no dirty line for the kernel's reads to evict"
        )
    return (
        "write: zeros over a 256 MB buffer before each call (do_bench's), outside the timed region: none of the "
        "kernel's data left in the L2, which is full of dirty lines that the kernel's reads evict to DRAM"
    )


def describe_timer(timer: str, quick: bool = False, flush: str = "write") -> dict:
    """What results metadata records of the timer: its name, its rule, the ceiling's cadence, the power regime and
    the L2 flush."""
    sustained = (
        "sustained: back-to-back launches with the L2 flushed between them (do_bench), after a warm-up, "
        "read at the clocks the GPU holds under that load at its power cap (not short-burst boost clocks); "
        "where the cap settles depends on the seconds before, so heavy rows vary by several percent run to run"
    )
    if timer == "fixed":
        return {
            "name": "fixed",
            "library": "triton.testing.do_bench",
            "rule": "200 ms of samples (50 with --quick) after a 25 ms warm-up, 400 ms more (100) when the "
            "interquartile range exceeds 1% of the median; median and IQR of all samples",
            "ceiling": "timed before the first row of its table and after every row, samples pooled",
            "power_regime": sustained,
            "flush": describe_flush("write"),
        }
    rule = stop_rule(timer, quick)
    described = {
        "name": timer,
        "library": "triton.testing.do_bench",
        "rule": rule.describe(),
        "stop_rule": asdict(rule),
        "ceiling": f"timed before the first row of its table, again once {CEILING_EVERY_S:g} s have passed since "
        "its last timing (the interval halving whenever two consecutive timings differ by more than "
        "their 95% confidence intervals allow), and after the last row; samples pooled",
        "power_regime": sustained,
        "flush": describe_flush(flush if timer == "burst" else "write"),
    }
    if timer == "burst":
        described["rule"] = (
            f"before every batch, rest {BURST_GAP:g} times as long as the batch before took, then wait until NVML "
            f"reports no power-cap, thermal or power-brake clock slowdown (at most {COOL_MAX_S:g} s); each batch is "
            "one burst: do_bench's loop (the L2 flushed before every call, CUDA events around each) of one call not "
            f"kept, then as many as fit {rule.batch_ms:g} ms of GPU time at its pace ({BURST_MIN_SAMPLES} at least), "
            f"without do_bench's estimate and warm-up; a batch that ends under a slowdown is taken again "
            f"({BURST_RETRIES} times at most); " + rule.describe()
        )
        described["library"] = "suite.driver.bench._burst (triton.testing.do_bench's loop; the L2 flush in 'flush')"
        described["power_regime"] = (
            "burst: every batch of samples starts with no clock slowdown active and lasts about "
            f"{rule.batch_ms:g} ms, shorter than the power cap takes to engage: the clocks the GPU holds below its "
            "power limit (boost), as nvbench and short bursts see them; a load sustained for seconds at the power cap "
            "runs heavy GEMMs slower (--timer adaptive)"
        )
    return described


class Phases:
    """Seconds spent per phase of a run (compile, validate, time, ceilings, ...), accumulated: ``with
    phases("validate"): ...``. Phases must not nest (each second is counted once). A name with a dot is a breakdown
    of the phase before the dot, counted in it already ("validate.reference": the fp64 references of validate)."""

    def __init__(self, since_start: bool = False):
        """``since_start``: count the process's life so far (interpreter start, imports) as "startup"."""
        self.seconds: dict[str, float] = {}
        if since_start and (started := process_seconds()) is not None:
            self.seconds["startup"] = started

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def merge(self, other: dict[str, float]) -> None:
        for name, seconds in other.items():
            self.add(name, seconds)

    def move(self, source: str, target: str, seconds: float) -> None:
        """Count ``seconds`` of ``source`` as ``target`` (a wait inside a phase, measured apart)."""
        if seconds:
            self.add(source, -seconds)
            self.add(target, seconds)

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in self.seconds.items()}
