"""suite.driver.roofline on a CPU: each row's bound (every problem with FLOPs and min_bytes) from the run's own
ceilings, and the probes a run without them takes (faked here), flushed as the run's rows were."""

import pytest

from suite.driver import roofline
from suite.problems import PROBLEMS

FP16 = PROBLEMS["gemm"].dtypes["fp16"].label
FP8 = PROBLEMS["gemm"].dtypes["fp8e4m3"].label


def _row(problem, shape, throughput, *, ceiling=False, dtype=FP16, measured=True):
    return {
        "problem": problem,
        "shape": shape,
        "dtype": dtype,
        "throughput": throughput,
        "ceiling": ceiling,
        "measured": measured,
    }


def test_every_timed_gemm_row_gets_the_lower_of_its_two_bounds():
    copy_ = _row("vector", "268435456", 4000.0, ceiling=True, dtype="fp32")
    peak = _row("gemm", "8192x8192x8192", 700.0, ceiling=True)
    decode = _row("gemm", "16x8192x8192", 40.0)  # memory-bound: 2 * 16 * 8192^2 FLOP over ~134 MB
    square = _row("gemm", "4096x4096x4096", 650.0)
    untimed = _row("gemm", "64x64x64", None, measured=False)
    meta = roofline.annotate([copy_, peak, decode, square, untimed], on_gpu=False)

    m, n, k = 16, 8192, 8192
    moved = (m * k + k * n) * 2 + m * n * 2
    memory_bound = 4000.0e9 * (2 * m * n * k / moved) / 1e12
    assert decode["roofline"] == pytest.approx(memory_bound) and memory_bound < 700.0
    assert decode["ratio_to_roofline"] == pytest.approx(40.0 / memory_bound) and decode["bound"] == "memory"
    assert square["roofline"] == 700.0 and square["bound"] == "tensor"
    assert square["ratio_to_roofline"] == pytest.approx(650.0 / 700.0)
    assert peak["ratio_to_roofline"] == 1.0
    assert "roofline" not in untimed
    assert meta["bandwidth_gbs"] == 4000.0 and meta["peak_tflops"] == {"fp16": 700.0}
    assert "copy_ rows" in meta["bandwidth_from"]


def test_a_peak_comes_only_from_compute_bound_ceilings_and_per_dtype():
    rows = [
        _row("vector", "268435456", 4000.0, ceiling=True, dtype="fp32"),
        _row("gemm", "1024x8192x8192", 900.0, ceiling=True),  # 819 FLOP per byte, below a 4096^3's: no peak
        _row("gemm", "4096x4096x4096", 600.0, ceiling=True),
        _row("gemm", "8192x8192x8192", 1400.0, ceiling=True, dtype=FP8),
    ]
    meta = roofline.annotate(rows, on_gpu=False)
    assert meta["peak_tflops"] == {"fp16": 600.0, "fp8e4m3": 1400.0}
    assert rows[1]["roofline"] == 600.0  # the fp16 peak, not the fp8 one nor its own throughput


@pytest.mark.parametrize("flush, said", [("write", "do_bench median, L2 flushed"), ("read", "L2 flushed by a read")])
def test_a_run_without_its_own_ceilings_probes_them_flushed_as_its_rows(monkeypatch, flush, said):
    calls = []
    monkeypatch.setattr(roofline, "probe_bandwidth", lambda f="write": calls.append(("copy_", f)) or 3000.0)
    monkeypatch.setattr(roofline, "probe_peak", lambda d, f="write": calls.append((d, f)) or 500.0)
    row = _row("gemm", "128x8192x8192", 200.0)
    meta = roofline.annotate([row], on_gpu=True, flush=flush)
    assert calls == [("copy_", flush), ("fp16", flush)]
    assert said in meta["bandwidth_from"] and said in meta["peak_from"]["fp16"]
    assert row["roofline"] == pytest.approx(
        min(500.0, 3000.0e9 * (2 * 128 * 8192 * 8192) / ((128 * 8192 + 8192 * 8192) * 2 + 128 * 8192 * 2) / 1e12)
    )


def test_no_timed_row_of_a_flop_problem_no_roofline():
    meta = roofline.annotate([_row("vector", "1024", 10.0, ceiling=True, dtype="fp32")], on_gpu=False)
    assert set(meta) == {"note"} and "no roofline" in meta["note"]


def test_without_a_gpu_the_rows_are_left_without_a_bound():
    row = _row("gemm", "128x8192x8192", 200.0)
    meta = roofline.annotate([row], on_gpu=False)
    assert "roofline" not in row and meta["bandwidth_gbs"] is None


def test_every_problem_with_min_bytes_gets_a_roofline_from_the_same_peak():
    """Rows of any problem that states its FLOPs and its fewest bytes (here attention) are bound by the run's
    bandwidth and the same per-dtype peak as the GEMM's: nothing in the driver names a problem."""
    flop_problems = [p for p in PROBLEMS.values() if p.min_bytes is not None]
    assert len(flop_problems) >= 2
    copy_ = _row("vector", "268435456", 4000.0, ceiling=True, dtype="fp32")
    for problem in flop_problems:
        dtype = next(iter(problem.dtypes))
        label = problem.dtypes[dtype].label
        size = max(problem.default_sizes_for(dtype), key=lambda s: problem.work(s) / problem.min_bytes(s, dtype))
        small = min(problem.edge_sizes_for(dtype), key=lambda s: problem.work(s) / problem.min_bytes(s, dtype))
        peak = _row(problem.name, problem.shape(size), 800.0, ceiling=True, dtype=label)
        fast = _row(problem.name, problem.shape(size), 600.0, dtype=label)
        tiny = _row(problem.name, problem.shape(small), 0.5, dtype=label)
        meta = roofline.annotate([copy_, peak, fast, tiny], on_gpu=False)
        assert meta["peak_tflops"] == {dtype: 800.0}, problem.name
        assert fast["roofline"] == 800.0 and fast["bound"] == "tensor", problem.name
        assert fast["ratio_to_roofline"] == pytest.approx(0.75)
        intensity = problem.work(small) / problem.min_bytes(small, dtype)
        assert tiny["roofline"] == pytest.approx(min(800.0, 4000.0e9 * intensity / 1e12)), problem.name
        assert tiny["bound"] == "memory", problem.name
