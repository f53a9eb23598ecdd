"""fp8 parity and the memory floor in the driver (issue 52, items 5 and 6), with fake GEMM kernels on CPU tensors:

* on a GPU (the driver's GPU path, run here on CPU tensors with the sampling faked, as tests/test_timing.py does),
  validation bounds a bf16 / fp8 row's worst error by DType.error_vs_ceiling x the ceiling's own on the same inputs;
* every fp8 row states its accumulation, and one that accumulates otherwise than the ceiling is refused before it
  is built;
* each GEMM row gets the job's floor_ms (a copy_ of the shape's minimum bytes, once per job) and ratio_to_floor.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from fake_gpu import fake_sampling

from suite import registration
from suite.driver import bench, jobs, measure, report
from suite.kernel import LibraryOp, accumulation_refusal
from suite.problems import GEMM

SIZE = (96, 80, 64)  # N and K multiples of 16: cuBLAS's fp8 path takes it


@pytest.fixture
def scratch(monkeypatch):
    """The registry as it is, plus the GEMM kernels the test registers (gone after it)."""
    from suite.registry import variants

    variants()
    monkeypatch.setattr(registration, "_REGISTRY", list(registration._REGISTRY))
    return lambda name, op, **kw: registration.register_kernel("gemm", "test", name, LibraryOp(op, **kw))


def _run(names, dtype, on_gpu):
    opts = bench.Options(
        problems=("gemm",),
        sizes={"gemm": (SIZE,)},
        dtypes=(dtype,),
        variants=tuple(f"test:{n}" for n in names),
        quick=True,
    )
    rows = bench.run(opts, on_gpu=on_gpu, progress=False, device=torch.device("cpu"))
    return {f"{r['backend']}:{r['variant']}": r for r in rows}


def _matmul(inputs, out):
    return lambda: torch.matmul(inputs[0], inputs[1], out=out)


def _off_at_the_largest(inputs, out):
    """The product, with its largest element off by 0.2: within the loosened tolerance, far beyond 2x cuBLAS's."""

    def call():
        torch.matmul(inputs[0], inputs[1], out=out)
        flat = out.view(-1)
        flat[flat.float().abs().argmax()] += 0.2

    return call


def test_a_row_beyond_twice_the_ceilings_error_fails_validation_and_says_so(monkeypatch, scratch):
    """bf16, its tolerance loosened so that only the bound can fail a row: the kernel that computes what cuBLAS does
    is valid, with cuBLAS's own error recorded beside its own; the one 0.2 off at one element is INVALID, its note
    naming the bound, and is not timed."""
    fake_sampling(monkeypatch)
    loose = dataclasses.replace(GEMM.dtypes["bf16"], tolerance={"rtol": 0.1, "atol": 1e-2})
    monkeypatch.setitem(GEMM.dtypes, "bf16", loose)
    scratch("same", _matmul, dtypes=("bf16",))
    scratch("off", _off_at_the_largest, dtypes=("bf16",))
    rows = _run(["same", "off"], "bf16", on_gpu=True)
    same, off = rows["test:same"], rows["test:off"]
    assert same["valid"] is True and same["measured"] is True
    assert same["ceiling_error"] == pytest.approx(same["max_abs_error"])  # the same arithmetic: the same error
    assert off["valid"] is False and off["measured"] is False
    assert off["max_abs_error"] > 0.15 and off["ceiling_error"] < 0.05
    assert "INVALID: max abs error" in off["note"] and "exceeds 2 x torch:cuBLAS's on the same inputs" in off["note"]
    assert "ceiling_error" not in rows["torch:cuBLAS"]  # the ceiling is not bounded by itself


def test_the_bound_is_not_applied_without_a_gpu(scratch):
    """Without a GPU Triton's interpreter rounds to bf16 toward zero: the bound would judge the interpreter."""
    scratch("same", _matmul, dtypes=("bf16",))
    rows = _run(["same"], "bf16", on_gpu=False)
    assert rows["test:same"]["valid"] is True and "ceiling_error" not in rows["test:same"]


def test_the_bound_never_falls_below_the_tolerances_atol():
    """A ceiling exact on the inputs (error 0) would bound every row at 0: the bound uses max(its error, atol)."""
    for name in ("bf16", "fp8e4m3"):
        d = GEMM.dtypes[name]
        assert d.error_vs_ceiling == 2.0
        assert d.error_bound(0.0) == 2.0 * d.tolerance["atol"] > 0
        assert d.error_bound(0.5) == 1.0
    assert GEMM.dtypes["fp16"].error_bound(0.5) is None  # fp16: the tolerance alone


def _fp8(inputs, out):
    a, b, scale_a, scale_b = inputs
    return lambda: out.copy_(((a.float() * scale_a) @ (b.float() * scale_b).t()).to(out.dtype))


def _never_built(inputs, out):
    raise AssertionError("a refused row must not be built")


def test_fp8_rows_state_their_accumulation_and_one_unlike_the_ceiling_is_refused(scratch):
    scratch("promoted", _fp8, dtypes=("fp8e4m3",), fp8_accumulation="promoted")
    scratch("fast", _never_built, dtypes=("fp8e4m3",), fp8_accumulation="fast")
    scratch("unstated", _never_built, dtypes=("fp8e4m3",))
    rows = _run(["promoted", "fast", "unstated"], "fp8e4m3", on_gpu=False)
    assert rows["torch:cuBLAS"]["accumulation"] == "promoted" and rows["torch:cuBLAS"]["valid"] is True
    assert rows["test:promoted"]["accumulation"] == "promoted" and rows["test:promoted"]["valid"] is True
    fast, unstated = rows["test:fast"], rows["test:unstated"]
    assert fast["accumulation"] == "fast" and fast["valid"] is False
    assert fast["note"].startswith("refused: it accumulates 'fast' and the ceiling 'promoted'")
    assert unstated["accumulation"] is None and unstated["valid"] is False
    assert "does not state its accumulation" in unstated["note"]
    assert report.failure_kind(fast) == "refused"


def test_16_bit_rows_state_no_accumulation(scratch):
    scratch("same", _matmul, dtypes=("bf16",))
    assert "accumulation" not in _run(["same"], "bf16", on_gpu=False)["test:same"]


def test_every_registered_fp8_row_promotes_as_the_ceiling():
    """The registry check: every variant with an fp8 build, of every backend (the ceiling, PTX, Triton, plugins
    loaded by default), accumulates as the fp8 dtype says the ceiling does; the driver times no fast ceiling."""
    from suite.registry import variants

    required = GEMM.dtypes["fp8e4m3"].accumulation
    assert required == "promoted"
    fp8 = [v for v in variants("gemm") if "fp8e4m3" in v.dtypes]
    assert {v.backend for v in fp8} >= {"torch", "ptx", "triton"}
    for v in fp8:
        assert accumulation_refusal(v.kernel, required) is None, v.label


def test_each_gemm_row_gets_the_jobs_floor(monkeypatch, scratch):
    """The floor is timed once per job by the rows' timer (faked: 1 ms), and each timed row's ratio is floor /
    median; without a GPU nothing is timed and the floor is None."""
    fake_sampling(monkeypatch)
    floors = []
    real = measure.time_floor
    monkeypatch.setattr(jobs, "time_floor", lambda *a, **k: floors.append(a[0]) or real(*a, **k))
    scratch("same", _matmul, dtypes=("bf16",))
    rows = _run(["same"], "bf16", on_gpu=True)
    assert floors == [GEMM.min_bytes(SIZE, "bf16")]  # once for the job, its minimum bytes
    for r in rows.values():
        assert r["floor_ms"] == 1.0 and r["ratio_to_floor"] == pytest.approx(1.0 / r["median_ms"])
    cpu = _run(["same"], "bf16", on_gpu=False)
    assert all(r["floor_ms"] is None and r["ratio_to_floor"] is None for r in cpu.values())


def test_a_floor_that_fails_to_time_leaves_the_rows_timed_and_saying_why(monkeypatch, scratch):
    """The floor's copy_ running out of memory is no reason to lose the job: its rows are timed, with no floor, and
    each measured row's note names the failure."""
    fake_sampling(monkeypatch)

    def no_room(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")

    monkeypatch.setattr(jobs, "time_floor", no_room)
    scratch("same", _matmul, dtypes=("bf16",))
    rows = _run(["same"], "bf16", on_gpu=True)
    assert rows and all(r["median_ms"] and r["floor_ms"] is None and r["ratio_to_floor"] is None for r in rows.values())
    for r in rows.values():
        assert "no memory floor: timing it failed (OutOfMemoryError: CUDA out of memory." in r["note"], r["note"]


def test_the_floor_copies_half_the_minimum_bytes_each_way(monkeypatch):
    """copy_ of min_bytes / 2 reads that many and writes as many: min_bytes in all, as the roofline counts them."""
    made, called = [], []
    real_empty = torch.empty

    def empty(*shape, **kw):
        made.append((shape, kw.get("dtype")))
        return real_empty(*shape, **kw)

    def time_call(fn, opts, phases=None, eager_only=None):
        fn()
        called.append(eager_only)
        return {"median_ms": 0.25}

    monkeypatch.setattr(measure, "time_call", time_call)
    monkeypatch.setattr(measure.torch, "empty", empty)
    assert measure.time_floor(1001, torch.device("cpu"), bench.Options()) == 0.25
    assert made == [((math.ceil(1001 / 2),), torch.uint8)]
    assert called == [measure.FLOOR_EAGER]  # eagerly, as torch's copy_ ceiling


def test_the_tables_show_the_floor_beside_the_roofline_and_the_csv_keeps_the_columns():
    row = {
        "problem": "gemm",
        "shape": "16x8192x8192",
        "dtype": "fp8e4m3->fp32acc->bf16",
        "backend": "ptx",
        "variant": "x",
        "stages": None,
        "unit": "TFLOP/s",
        "ceiling": False,
        "measured": True,
        "valid": True,
        "throughput": 10.0,
        "ratio_to_ceiling": 0.95,
        "ratio_to_roofline": 0.7,
        "ratio_to_floor": 0.91,
        "floor_ms": 0.02,
        "accumulation": "promoted",
        "ceiling_error": 0.01,
    }
    assert report._pct(row) == "95.0% (rl 70% fl 91%)"
    assert report._pct({**row, "ratio_to_roofline": None}) == "95.0% (fl 91%)"
    table = report.table([row])
    assert "fl: % of the floor" in table and "accumulation: promoted" in table
    header = report.to_csv([row]).splitlines()[0].split(",")
    assert {"floor_ms", "ratio_to_floor", "accumulation", "ceiling_error"} <= set(header)
