"""The CLI on a CPU-only machine, the report writers, the plot and the compare logic."""

import json
import subprocess
import sys

import pytest
import torch

from suite.driver import compare, report
from suite.run import main


def _row(**kw):
    row = dict(problem="vector", shape="1024", dtype="fp32", backend="ptx", variant="ring", stages=3,
               baseline=False, ceiling=False, median_ms=1.0, iqr_ms=0.004, spread=0.004, samples=100,
               throughput=2.0, unit="GB/s", ratio_to_ceiling=0.9, valid=True, max_abs_error=0.0, rel_error=0.0,
               measured=True, throttled=False, note="", smem_per_stage=32768, smem_total=33792, registers=40,
               spill_bytes=0, occupancy=3, sass="LDGSTS")
    row.update(kw)
    return row


def _rows():
    return [
        _row(backend="torch", variant="copy_", stages=None, ceiling=True, median_ms=0.9, ratio_to_ceiling=1.0),
        *[_row(stages=s, median_ms=1.0 + 0.1 * s) for s in (1, 2, 3)],
        *[_row(backend="triton", variant="loop", stages=s, median_ms=1.1) for s in (1, 2, 3)],
    ]


def test_table_puts_backends_side_by_side():
    text = report.table(_rows())
    assert "### vector 1024 (fp32): GB/s, % of torch:copy_" in text
    header = next(line for line in text.splitlines() if line.startswith("| stages"))
    assert "ptx:ring GB/s" in header and "triton:loop GB/s" in header
    assert "| torch:copy_ " in text  # the ceiling on a line of its own
    assert "FAIL" in report.table([_row(valid=False, measured=False)])


def test_writers_and_plot(tmp_path):
    rows = _rows()
    written = report.write(rows, {"gpu": "test"}, tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == ["results.csv", "results.json", "table.md", "vector.png"]
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"] == {"gpu": "test"} and len(data["rows"]) == len(rows)
    for key in ("problem", "backend", "variant", "stages", "shape", "dtype", "median_ms", "throughput", "unit",
                "ratio_to_ceiling", "valid", "max_abs_error"):
        assert key in data["rows"][0]
    csv_lines = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("problem,shape,dtype,backend") and len(csv_lines) == len(rows) + 1
    assert (tmp_path / "out" / "vector.png").read_bytes()[:4] == b"\x89PNG"
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_plot_skips_unmeasured(tmp_path):
    assert not report.plot([_row(measured=False)], "vector", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def _write(path, rows):
    path.write_text(json.dumps({"meta": {}, "rows": rows}))
    return path


def test_compare_verdicts(tmp_path):
    old = _write(tmp_path / "old.json", [_row(stages=3, median_ms=1.0)])
    same = _write(tmp_path / "same.json", [_row(stages=3, median_ms=1.01)])
    slower = _write(tmp_path / "slow.json", [_row(stages=1, median_ms=1.3)])
    faster = _write(tmp_path / "fast.json", [_row(stages=3, median_ms=0.8)])
    noisy = _write(tmp_path / "noisy.json", [_row(stages=3, median_ms=1.08, iqr_ms=0.3)])
    assert [r["verdict"] for r in compare.compare(old, same)[1]] == ["SAME"]
    res = compare.compare(old, slower)[1]
    assert [r["verdict"] for r in res] == ["SLOWER"] and res[0]["stages"] == "3 -> 1"
    assert [r["verdict"] for r in compare.compare(old, faster)[1]] == ["FASTER"]
    assert [r["verdict"] for r in compare.compare(old, noisy)[1]] == ["SAME"]  # inside the recorded spread


def test_compare_cli_and_bad_file(tmp_path, capsys):
    old = _write(tmp_path / "old.json", _rows())
    assert main(["--compare", str(old), str(old)]) == 0
    out = capsys.readouterr().out
    assert out.count("SAME") == 7
    (tmp_path / "bad.json").write_text("[]")
    assert main(["--compare", str(old), str(tmp_path / "bad.json")]) == 2


@pytest.mark.parametrize("argv, message", [
    (["--problem", "nope"], "invalid choice"),
    (["--variant", "nope"], "unknown 'nope'"),
    (["--size", "8"], "--size needs exactly one --problem"),
    (["--problem", "gemm", "--size", "8x8"], "a gemm size is M, or MxNxK"),
    (["--problem", "gemm", "--dtype", "fp32"], "no selected problem takes fp32"),
    (["--stages", "0"], "--stages must be >= 1"),
])
def test_cli_rejects_bad_arguments_before_running(argv, message, tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "suite.run", *argv, "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not out.exists()  # nothing half-written


def test_cli_cpu_run_end_to_end(tmp_path):
    """No GPU: Triton validated in the interpreter, PTX built for sm_90 with its SASS, nothing timed, exit 0."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "suite.run", "--problem", "vector", "--out", str(out),
                           "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "No CUDA GPU here" in proc.stderr
    assert "valid, not timed" in proc.stdout and "built sm_90, not run" in proc.stdout and "LDGSTS" in proc.stdout
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert all(r["valid"] for r in rows if r["backend"] in ("torch", "triton"))
    # every PTX row's machine code copies asynchronously: cp.async (LDGSTS) or a Hopper bulk copy (UBLKCP)
    ptx = [r["sass_counts"] for r in rows if r["backend"] == "ptx"]
    assert ptx and all(c["async_copy"] + c["bulk_copy"] > 0 for c in ptx)
    assert not any(r["measured"] for r in rows)


def test_list_shows_gates(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "cp.async ring" in out and "a CUDA GPU of compute capability >= 8.0" in out


def test_driver_timing_logic_with_a_fake_clock(monkeypatch):
    """The GPU path of the driver on CPU tensors: do_bench and nvidia-smi replaced by fakes, so the ratios, the
    interleaved ceiling, re-timing of noisy rows and the flags are checked for real."""
    from suite.driver import bench

    calls = []

    def fake_time(fn, opts, rep_scale=1.0):
        calls.append(rep_scale)
        fn()  # the real kernel (torch on the CPU / the Triton interpreter) still runs
        if len(calls) == 2:  # the first variant timed is noisy once: it must be re-timed with more repetitions
            return [1.0, 2.0, 3.0, 4.0]
        return [1.0] * 8 if len(calls) % 2 else [2.0] * 8

    monkeypatch.setattr(bench, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", lambda: {"throttled": True, "sm_clock_mhz": 1500.0})
    opts = bench.Options(problems=("vector",), sizes={"vector": (3 * 8192 + 5,)}, backends=("torch", "triton"),
                         stages=(2,))
    rows = bench.run(opts, on_gpu=True, progress=False, device=torch.device("cpu"))
    by = {(r["backend"], r["variant"]): r for r in rows}
    ceiling = by[("torch", "copy_")]
    assert ceiling["measured"] and ceiling["ratio_to_ceiling"] == 1.0 and ceiling["sm_clock_mhz"] == 1500.0
    assert "interleaved" in ceiling["note"] and ceiling["throttled"]
    for r in rows:
        assert r["valid"] and r["measured"]
        assert r["throughput"] == pytest.approx(2 * (3 * 8192 + 5) * 4 / (r["median_ms"] * 1e-3) / 1e9)
        assert r["ratio_to_ceiling"] == pytest.approx(ceiling["median_ms"] / r["median_ms"])
        assert "clock slowdown" in r["note"]
    assert 2.0 in calls  # the noisy row was timed again with twice the repetitions
    assert any("spread" in r["note"] for r in rows)
