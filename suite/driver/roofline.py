"""The roofline of every GEMM row: the fastest its shape can run on this GPU, from this run's own ceilings.

    roofline = min(tensor peak, bandwidth x arithmetic intensity),   arithmetic intensity = FLOP / bytes moved

* bytes moved: the fewest a GEMM must move through memory, A, B and C once each (Problem.min_bytes);
* bandwidth: this run's own ``copy_`` ceiling (the vector problem's torch:copy_ rows, bytes read + written per
  second); when the run has none, ``copy_`` is timed once over 1 GiB after the run, the same way;
* tensor peak, per dtype: the best large-square cuBLAS throughput of the run (its ceiling rows at M, N, K >= 4096);
  when the run has none, cuBLAS is timed once at 8192^3 after the run. A register-only MMA loop is not used: it issues
  below cuBLAS's large-square rate (docs/results.md), so cuBLAS is the higher, and the bound.

Each GEMM row gets ``roofline`` (in TFLOP/s) and ``ratio_to_roofline``; the run's metadata gets ``roofline``: the
bandwidth and peaks used and how each was measured. A memory-bound shape (decode) is then judged against the memory
system, not only against cuBLAS.
"""

from __future__ import annotations

from suite.problems import PROBLEMS

PEAK_MIN_DIM = 4096  # a square shape at least this large shows cuBLAS's sustained peak
PROBE_SIZE = 8192
PROBE_VECTOR_N = 2**28  # 1 GiB of fp32: far larger than any GPU's L2, so the copy streams from DRAM


def _dtype_name(problem, label: str) -> str:
    return next((name for name, d in problem.dtypes.items() if d.label == label), problem.default_dtype)


def _from_rows(rows: list[dict]) -> tuple[float | None, dict[str, float]]:
    """(copy_ bandwidth in GB/s, {dtype: cuBLAS peak TFLOP/s}) from this run's measured ceiling rows."""
    gemm = PROBLEMS["gemm"]
    copies = [r["throughput"] for r in rows if r["problem"] == "vector" and r["ceiling"] and r.get("measured")]
    peaks: dict[str, float] = {}
    for r in rows:
        if r["problem"] != "gemm" or not r["ceiling"] or not r.get("measured"):
            continue
        m, n, k = gemm.parse_size(r["shape"])
        if min(m, n, k) >= PEAK_MIN_DIM:
            d = _dtype_name(gemm, r["dtype"])
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
    """cuBLAS (the GEMM problem's ceiling) at 8192^3 in ``dtype``, TFLOP/s."""
    import torch

    from suite.registry import variants

    gemm = PROBLEMS["gemm"]
    size = (PROBE_SIZE,) * 3
    inputs = gemm.make_inputs(size, 0, torch.device("cuda"), dtype)
    ceiling = next(v for v in variants("gemm") if v.ceiling)
    fn = ceiling.factory(inputs, gemm.make_output(inputs), None)
    return gemm.work(size) / (_time_ms(fn, flush) * 1e-3) / 1e12


def annotate(rows: list[dict], on_gpu: bool, flush: str = "write") -> dict:
    """Add ``roofline`` and ``ratio_to_roofline`` to every measured GEMM row; return what the metadata records.
    Probes (GPU only) whatever this run's rows do not already give, the L2 flushed as the run's (``flush``)."""
    gemm = PROBLEMS["gemm"]
    timed = [r for r in rows if r["problem"] == "gemm" and r.get("measured")]
    if not timed:
        return {"note": "no GEMM row was timed: no roofline"}
    bandwidth, peaks = _from_rows(rows)
    meta = {
        "bandwidth_gbs": bandwidth,
        "bandwidth_from": "this run's torch:copy_ rows (vector problem)",
        "peak_tflops": dict(peaks),
        "peak_from": {d: f"this run's cuBLAS rows at M, N, K >= {PEAK_MIN_DIM}" for d in peaks},
    }
    if bandwidth is None and on_gpu:
        meta["bandwidth_gbs"] = bandwidth = probe_bandwidth(flush)
        meta["bandwidth_from"] = f"torch copy_ over 1 GiB, timed after the run ({_how(flush)})"
    for d in {_dtype_name(gemm, r["dtype"]) for r in timed} - set(peaks):
        if on_gpu:
            peaks[d] = meta["peak_tflops"][d] = probe_peak(d, flush)
            meta["peak_from"][d] = f"cuBLAS at {PROBE_SIZE}^3, timed after the run ({_how(flush)})"
    for r in timed:
        d = _dtype_name(gemm, r["dtype"])
        if bandwidth is None or d not in peaks:
            continue
        size = gemm.parse_size(r["shape"])
        intensity = gemm.work(size) / gemm.min_bytes(size, d)  # FLOP per byte
        r["roofline"] = min(peaks[d], bandwidth * 1e9 * intensity / 1e12)
        r["ratio_to_roofline"] = r["throughput"] / r["roofline"]
        r["bound"] = "memory" if bandwidth * 1e9 * intensity / 1e12 < peaks[d] else "tensor"
    return meta
