"""The roofline of every row of a problem that counts FLOPs: the fastest its shape can run on this GPU, from this
run's own ceilings.

    roofline = min(tensor peak, bandwidth x arithmetic intensity),   arithmetic intensity = FLOP / bytes moved

* FLOP and bytes moved: what the row's problem says (``Problem.work``, ``Problem.min_bytes``: the fewest bytes a
  solution must move through memory, each operand and the output once); a problem without ``min_bytes`` gets no
  roofline;
* bandwidth: this run's own ceiling rows of a problem that is its own memory bound (no ``min_bytes``, throughput in
  GB/s: the vector's torch copy_, bytes read + written per second); when the run has none, ``copy_`` is timed once
  over 1 GiB after the run, the same way;
* tensor peak, per dtype: the best throughput of this run's ceiling rows at shapes far past the ridge point
  (arithmetic intensity >= PEAK_MIN_INTENSITY: the library's sustained rate, not a bound of its own), whatever their
  problem (cuBLAS's large GEMMs set it in practice); when the run has none, each FLOP problem's ceiling is timed once
  after the run at its most compute-bound default size, and the best is taken. A register-only MMA loop is not used:
  it issues below cuBLAS's large-square rate (docs/results.md), so cuBLAS is the higher, and the bound.

Each such row gets ``roofline`` (in TFLOP/s) and ``ratio_to_roofline``; the run's metadata gets ``roofline``: the
bandwidth and peaks used and how each was measured. A memory-bound shape (decode) is then judged against the memory
system, not only against the library.
"""

from __future__ import annotations

from suite.problems import PROBLEMS

# FLOP per byte a ceiling's shape must reach to count as a tensor peak: a 4096^3 GEMM's in 2-byte types (4096 / 3),
# some 6x the H200's ridge point
PEAK_MIN_INTENSITY = 1365
PROBE_VECTOR_N = 2**28  # 1 GiB of fp32: far larger than any GPU's L2, so the copy streams from DRAM


def _dtype_name(problem, label: str) -> str:
    return next((name for name, d in problem.dtypes.items() if d.label == label), problem.default_dtype)


def _has_roofline(problem) -> bool:
    return problem.min_bytes is not None


def _is_memory_bound_problem(problem) -> bool:
    """A problem that is its own memory bound: no min_bytes, its throughput already bytes per second."""
    return problem.min_bytes is None and problem.unit == "GB/s"


def _intensity(problem, size, dtype: str) -> float:
    return problem.work(size) / problem.min_bytes(size, dtype)  # FLOP per byte


def _from_rows(rows: list[dict]) -> tuple[float | None, dict[str, float]]:
    """(copy_ bandwidth in GB/s, {dtype: peak TFLOP/s}) from this run's measured ceiling rows."""
    copies, peaks = [], {}
    for r in rows:
        problem = PROBLEMS.get(r["problem"])
        if problem is None or not r["ceiling"] or not r.get("measured"):
            continue
        if _is_memory_bound_problem(problem):
            copies.append(r["throughput"])
        elif _has_roofline(problem):
            d = _dtype_name(problem, r["dtype"])
            if _intensity(problem, problem.parse_size(r["shape"]), d) >= PEAK_MIN_INTENSITY:
                peaks[d] = max(peaks.get(d, 0.0), r["throughput"])
    return (max(copies) if copies else None), peaks


PROBE_MS = 200  # GPU time each probe samples


def _time_ms(fn, flush: str = "write") -> float:
    """The median of ~PROBE_MS of calls, the L2 emptied before each as the run's rows were (``flush``: "write",
    do_bench's zeros; "read", suite.driver.measure's read, so that a read-flushed run's roofline does not carry the
    write-back its rows were spared)."""
    if flush == "read":
        import statistics

        from suite.driver.measure import _burst

        return float(statistics.median(_burst(fn, PROBE_MS, flush="read")))
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=PROBE_MS, return_mode="median"))


def _how(flush: str) -> str:
    return "do_bench median, L2 flushed" if flush == "write" else "median, L2 flushed by a read"


def probe_bandwidth(flush: str = "write") -> float:
    """copy_ over 1 GiB, GB/s (bytes read + written), timed as the ceilings are (L2 flushed between calls)."""
    import torch

    x = torch.randn(PROBE_VECTOR_N, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() * 4 / (_time_ms(lambda: y.copy_(x), flush) * 1e-3) / 1e9


def probe_peak(dtype: str, flush: str = "write") -> float:
    """The best of every FLOP problem's ceiling in ``dtype``, each at its most compute-bound default size, TFLOP/s."""
    import torch

    from suite.registry import variants

    best = 0.0
    for problem in PROBLEMS.values():
        ceiling = next((v for v in variants(problem.name) if v.ceiling), None)
        if not _has_roofline(problem) or dtype not in problem.dtypes or ceiling is None or ceiling.skip_reason():
            continue
        size = max(problem.default_sizes_for(dtype), key=lambda s: _intensity(problem, s, dtype))
        inputs = problem.make_inputs(size, 0, torch.device("cuda"), dtype)
        fn = ceiling.factory(inputs, problem.make_output(inputs), None)
        best = max(best, problem.work(size) / (_time_ms(fn, flush) * 1e-3) / 1e12)
    return best


def annotate(rows: list[dict], on_gpu: bool, flush: str = "write") -> dict:
    """Add ``roofline`` and ``ratio_to_roofline`` to every measured row of a problem with ``min_bytes``; return what
    the metadata records. Probes (GPU only) whatever this run's rows do not already give, the L2 flushed as the run's
    (``flush``)."""
    timed = [
        (r, PROBLEMS[r["problem"]])
        for r in rows
        if r.get("measured") and r["problem"] in PROBLEMS and _has_roofline(PROBLEMS[r["problem"]])
    ]
    if not timed:
        return {"note": "no row of a problem with a roofline (FLOPs and min_bytes) was timed: no roofline"}
    bandwidth, peaks = _from_rows(rows)
    meta = {
        "bandwidth_gbs": bandwidth,
        "bandwidth_from": "this run's ceiling rows of a memory-bound problem (the torch copy_ rows)",
        "peak_tflops": dict(peaks),
        "peak_from": {d: f"this run's ceiling rows at >= {PEAK_MIN_INTENSITY} FLOP per byte" for d in peaks},
    }
    if bandwidth is None and on_gpu:
        meta["bandwidth_gbs"] = bandwidth = probe_bandwidth(flush)
        meta["bandwidth_from"] = f"torch copy_ over 1 GiB, timed after the run ({_how(flush)})"
    for d in sorted({_dtype_name(p, r["dtype"]) for r, p in timed} - set(peaks)):
        if on_gpu:
            peaks[d] = meta["peak_tflops"][d] = probe_peak(d, flush)
            meta["peak_from"][d] = (
                "each FLOP problem's ceiling at its most compute-bound default size, timed after the run"
                f" ({_how(flush)})"
            )
    for r, problem in timed:
        d = _dtype_name(problem, r["dtype"])
        if bandwidth is None or d not in peaks:
            continue
        memory_bound = bandwidth * 1e9 * _intensity(problem, problem.parse_size(r["shape"]), d) / 1e12
        r["roofline"] = min(peaks[d], memory_bound)
        r["ratio_to_roofline"] = r["throughput"] / r["roofline"]
        r["bound"] = "memory" if memory_bound < peaks[d] else "tensor"
    return meta
