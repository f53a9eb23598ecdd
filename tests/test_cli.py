"""The CLI (argument checks, filters, a CPU run on any machine, a GPU run on a GPU), the report writers and the plot.
(--compare: test_compare.py.)"""

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import HAS_GPU, main_here

from suite.driver import plots, report
from suite.run import main, parse_args


def _row(**kw):
    row = {
        "problem": "vector",
        "shape": "1024",
        "dtype": "fp32",
        "backend": "ptx",
        "variant": "ring",
        "stages": 3,
        "baseline": False,
        "ceiling": False,
        "median_ms": 1.0,
        "iqr_ms": 0.004,
        "spread": 0.004,
        "samples": 100,
        "throughput": 2.0,
        "unit": "GB/s",
        "ratio_to_ceiling": 0.9,
        "valid": True,
        "max_abs_error": 0.0,
        "rel_error": 0.0,
        "measured": True,
        "throttled": False,
        "note": "",
        "smem_per_stage": 32768,
        "smem_total": 33792,
        "registers": 40,
        "spill_bytes": 0,
        "occupancy": 3,
        "sass": "LDGSTS",
    }
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


def test_each_block_states_the_depth_gain_of_its_swept_variants():
    """Fastest stage count against the shallowest, in speed: ptx:ring's 1.1 ms at 1 stage against 1.05 ms at 3
    stages is +5%; a variant whose shallowest is fastest says so; failed rows are left out."""
    rows = _rows() + [_row(variant="deep", stages=s, median_ms=m) for s, m in ((2, 2.0), (4, 1.0), (6, 0.5))]
    rows[1]["median_ms"], rows[3]["median_ms"] = 1.1, 1.05  # ptx:ring at 1 and 3 stages
    rows.append(_row(variant="deep", stages=8, median_ms=0.1, valid=False))
    line = next(line for line in report.table(rows).splitlines() if line.startswith("- depth"))
    assert "ptx:ring 1 -> 3 stages +5%" in line and "triton:loop fastest at its shallowest, 1" in line
    assert "ptx:deep 2 -> 6 stages +300%" in line


def test_shared_memory_cells_read_as_kib():
    """Whole KiB as integers, the rest to one decimal (a ring's barrier bytes do not print as 96.0156)."""
    text = report.table([_row(smem_per_stage=32768, smem_total=3 * 32768 + 16, stages=3)])
    assert "32/96.0 KiB" in text and "96.0156" not in text
    assert "32/33 KiB" in report.table(_rows())


def test_writers_and_plot(tmp_path):
    rows = _rows()
    written = report.write(rows, {"gpu": "test"}, tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == ["results.csv", "results.json", "table.md", "vector.png"]
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"] == {"gpu": "test"} and len(data["rows"]) == len(rows)
    for key in (
        "problem",
        "backend",
        "variant",
        "stages",
        "shape",
        "dtype",
        "median_ms",
        "throughput",
        "unit",
        "ratio_to_ceiling",
        "valid",
        "max_abs_error",
    ):
        assert key in data["rows"][0]
    csv_lines = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("problem,shape,dtype,backend") and len(csv_lines) == len(rows) + 1
    assert (tmp_path / "out" / "vector.png").read_bytes()[:4] == b"\x89PNG"
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_plot_skips_unmeasured(tmp_path):
    assert plots.figures([_row(measured=False)], "vector") == []
    assert plots.drawings([_row(measured=False)], {}, "vector") == []
    assert "vector.png" not in {p.name for p in report.write([_row(measured=False)], {}, tmp_path)}


def _gemm_only_stage() -> int:
    """A stage count some gemm variant sweeps and no vector variant does."""
    from suite.registry import variants

    vector = {s for v in variants("vector") for s in v.stages}
    return min(s for v in variants("gemm") for s in v.stages if s is not None and s not in vector)


_GEMM_ONLY_STAGE = _gemm_only_stage()


def _cli(*argv, cpu=False, timeout=600):
    """python -m suite.run in a subprocess; ``cpu``: with every GPU hidden (CUDA_VISIBLE_DEVICES=""), so the CPU path
    runs on any machine."""
    env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if cpu else {})}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "suite.run", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return proc, time.monotonic() - t0


BAD_ARGUMENTS = [
    (["--problem", "nope"], "--problem", "invalid choice"),
    (["--variant", "nope"], "--variant", "unknown 'nope' (python -m suite.run --list"),
    (["--variant", "cp.async ring 2kib"], "--variant", "did you mean 'cp.async ring 2KiB'?"),
    # two typos of one name: suggested once
    (["--variant", "cp.async ring 2kib", "cp.async ring 2kb"], "--variant", "did you mean 'cp.async ring 2KiB'? ("),
    (["--size", "8"], "--size", "needs exactly one --problem"),
    (["--problem", "vector", "--size", "-5"], "--size", "every dimension must be >= 1"),
    (["--problem", "vector", "--size", "0"], "--size", "every dimension must be >= 1"),
    (["--problem", "gemm", "--size", "64x0x64"], "--size", "every dimension must be >= 1"),
    (["--problem", "vector", "--size", "abc"], "--size", "sizes are whole numbers"),
    (["--problem", "vector", "--size", "1e6"], "--size", "sizes are whole numbers"),
    (["--problem", "vector", "--size", "2^70"], "--size", "below 2^63"),
    (["--problem", "gemm", "--size", "8x8"], "--size", "a gemm size is M (a cube) or MxNxK"),
    (["--problem", "gemm", "--dtype", "fp32"], "--dtype", "no selected problem takes fp32"),
    (["--stages", "0"], "--stages", "stage counts must be >= 1"),
    (["--stages", "abc"], "--stages", "stage counts are whole numbers"),
    (["--stages", "99"], "--stages 99", "no selected variant sweeps 99"),
    (
        ["--problem", "vector", "--stages", str(_GEMM_ONLY_STAGE)],
        f"--stages {_GEMM_ONLY_STAGE}",
        f"no selected variant sweeps {_GEMM_ONLY_STAGE}",
    ),  # gemm sweeps it, but only vector is selected
    (["--backend", "ptx", "--variant", "tile loop"], "--variant", "no registered variant matches"),
]


def _assert_refused(code: int, stdout: str, stderr: str, flag: str, rule: str) -> None:
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert flag in stderr and rule in stderr, stderr
    assert "Traceback" not in stderr and stdout == ""


@pytest.mark.parametrize("argv, flag, rule", BAD_ARGUMENTS)
def test_cli_rejects_bad_arguments_before_running(argv, flag, rule, tmp_path, capsys):
    """One line naming the flag and the rule, exit 2, nothing written: main() in this process (each case through a
    process of its own cost two seconds of imports; test_cli_process_rejects_bad_arguments_within_seconds runs two)."""
    out = tmp_path / "results"
    _assert_refused(*main_here([*argv, "--out", str(out)], capsys), flag, rule)
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("case", [0, 13], ids=["argparse", "after the registry"])
def test_cli_process_rejects_bad_arguments_within_seconds(case, tmp_path):
    """The same refusals from ``python -m suite.run`` itself: an argparse one and one that reads the registry each
    exit 2 with one line and nothing else printed, within seconds, nothing written."""
    argv, flag, rule = BAD_ARGUMENTS[case]
    out = tmp_path / "results"
    proc, seconds = _cli(*argv, "--out", str(out))
    _assert_refused(proc.returncode, proc.stdout, proc.stderr, flag, rule)
    assert seconds < 30  # the interpreter starting and torch importing; no kernel is built or run
    assert not out.exists()


def test_cli_refuses_out_naming_a_file_before_the_run(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("precious")
    for out in (taken, taken / "sub"):
        code, _, err = main_here(["--problem", "vector", "--out", str(out)], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--out" in err and "is not a directory" in err
    assert taken.read_text() == "precious"


def test_cli_refuses_sizes_too_large_for_the_interpreter(tmp_path):
    """Without a GPU, gemm 8192^3 (minutes to hours in the interpreter) is refused up front, naming the limit."""
    proc, seconds = _cli("--problem", "gemm", "--size", "8192", "--out", str(tmp_path / "r"), cpu=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--size 8192" in proc.stderr and "too large for a CPU run" in proc.stderr and "M*N*K <= 2^28" in proc.stderr
    assert seconds < 30 and not (tmp_path / "r").exists()


def test_cli_cpu_run_says_shape_sets_give_way_to_cpu_sizes(tmp_path):
    """Without a GPU a named set (here attention's 8B heads at seq 512-16k) is not run but the problem's small CPU
    sizes are, and the run says so."""
    proc, _ = _cli(
        "--problem", "attention", "--shapes", "attn-8b", "--backend", "torch", "--out", str(tmp_path), cpu=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "--shapes and --quick pick GPU sizes" in proc.stderr, proc.stderr
    shapes = {r["shape"] for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    from suite.problems import PROBLEMS

    attention = PROBLEMS["attention"]
    assert shapes == {attention.shape(size) for size in attention.cpu_sizes}


def test_cli_cpu_run_end_to_end(tmp_path, pytestconfig):
    """No GPU (hidden on a GPU machine): Triton validated in the interpreter, PTX built for sm_90 with its SASS,
    nothing timed, no plot and why, exit 0; files readable as the umask allows; the terminal fits 160 columns and,
    nothing being timed, is the compact summary (the full tables with --verbose). Plugins given to pytest
    (--suite-plugin) are given to the run too."""
    out = tmp_path / "run"
    plugins = [a for spec in pytestconfig.getoption("--suite-plugin") for a in ("--plugin", spec)]
    proc, _ = _cli("--problem", "vector", "--out", str(out), "--no-progress", *plugins, cpu=True)
    assert proc.returncode == 0, proc.stderr
    assert "No CUDA GPU here" in proc.stderr and "--shapes and --quick" not in proc.stderr
    assert "No plot written (vector.png)" in proc.stderr and "without a GPU nothing is timed" in proc.stderr
    summary = {line.split("|")[2].strip(): line for line in proc.stdout.splitlines() if line.startswith("| vector")}
    from suite.registry import variants

    # a line per backend with a vector variant (the suite's four, and any a plugin brings)
    assert set(summary) == {v.backend for v in variants("vector")} and "LDGSTS" in summary["ptx"], proc.stdout
    assert "valid, not timed" not in proc.stdout and "Full tables: --verbose" in proc.stdout
    assert len((proc.stdout + proc.stderr).splitlines()) <= 30
    assert max(len(line) for line in (proc.stdout + proc.stderr).splitlines()) <= 160
    verbose = report.terminal(json.loads((out / "results.json").read_text())["rows"], 160, verbose=True)
    assert "valid, not timed" in verbose and "built sm_90: LDGSTS" in verbose
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert all(r["valid"] for r in rows if r["backend"] in ("torch", "triton"))
    # every NVRTC row was built, and its machine code has what its kernel module declares (sass_requires), whatever
    # its design: no shared memory, one stage or no asynchronous copy are all fine
    from suite.kernel import NvrtcModule

    declared = {v.label: v.kernel.sass_minimums() for v in variants("vector") if isinstance(v.kernel, NvrtcModule)}
    labelled = [(f"{r['backend']}:{r['variant']}", r) for r in rows]
    built = [(r, declared[label]) for label, r in labelled if label in declared]
    assert {label for label, _ in labelled if label in declared} == set(declared)
    assert all(
        r["built_for"] and all((r["sass_counts"] or {}).get(c, 0) >= n for c, n in need.items()) for r, need in built
    ), [(r["variant"], r["sass_counts"], need) for r, need in built]
    assert not any(r["measured"] for r in rows)
    table_md = (out / "table.md").read_text()
    assert "built sm_90, not run" in table_md and "LDGSTS" in table_md and " regs" in table_md
    assert sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json", "table.md"]


@pytest.mark.gpu_alone
def test_cli_gpu_run_end_to_end(tmp_path):
    """On a GPU: a short real run is validated, timed, plotted, fits 160 columns, and exits 0."""
    out = tmp_path / "run"
    proc, _ = _cli(
        "--problem",
        "vector",
        "--size",
        "2^22",
        "--backend",
        "ptx",
        "triton",
        "--stages",
        "1",
        "4",
        "--quick",
        "--out",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in (proc.stdout + proc.stderr).splitlines()) <= 160
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {(r["backend"], r["variant"]) for r in rows} >= {("torch", "copy_"), ("ptx", "cp.async ring")}
    assert all(r["valid"] and r["measured"] and r["throughput"] > 0 for r in rows)
    assert all(r["ratio_to_ceiling"] for r in rows)
    # the default launch: every backend's call replayed from a CUDA graph, its eager enqueue cost recorded; copy_ (a
    # memcpy, which a graph runs another way) as Python makes it, and its row says so
    for r in rows:
        eager = (r["backend"], r["variant"]) == ("torch", "copy_")
        assert r["launch"] == ("eager" if eager else "graph") and r["host_enqueue_us"] > 0, (r["variant"], r["note"])
        assert ("not from a CUDA graph" in r["note"]) == eager, r["note"]
    assert (out / "vector.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_variant_filter_runs_only_its_problem(tmp_path):
    """--variant X: X and its problem's ceiling, no block of another problem."""
    out = tmp_path / "run"
    proc, _ = _cli("--variant", "cp.async ring", "--out", str(out), "--no-progress", cpu=True)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {(r["problem"], r["backend"], r["variant"]) for r in rows} == {
        ("vector", "ptx", "cp.async ring"),
        ("vector", "torch", "copy_"),
    }
    assert "gemm" not in proc.stdout


def test_list_shows_gates(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "cp.async ring" in out and "a CUDA GPU of compute capability >= 8.0" in " ".join(out.split())


def test_list_says_the_stages_of_each_dtype_where_they_differ(capsys):
    """The table's stages are the default dtype's; a variant whose sweep differs by dtype (the Gluon GEMM's ring takes
    4 stages at fp8 only) says each dtype's in its description, and one whose sweep does not says nothing more."""
    assert main(["--list", "--variant", "triton:128x256x64 gluon ws persistent", "triton:split-k desc"]) == 0
    table, about = capsys.readouterr().out.split("\n\n", 1)
    assert [line.split("|")[4].strip() for line in table.splitlines()[2:]] == ["2,3", "2,3,4"]
    about = " ".join(about.split())
    assert "Stages by dtype: fp16 2,3; bf16 2,3; fp8e4m3 2,3,4" in about
    assert about.count("Stages by dtype") == 1


def test_list_is_narrowed_by_the_run_filters(capsys):
    assert main(["--list", "--problem", "attention", "--backend", "ptx"]) == 0
    table = capsys.readouterr().out.split("\n\n")[0]
    body = [line.split("|")[1:4] for line in table.splitlines()[2:]]
    assert body and all(p.strip() == "attention" and b.strip() == "ptx" for p, b, _ in body)
    assert main(["--list", "--variant", "torch:copy_", "mul"]) == 0
    table = capsys.readouterr().out.split("\n\n")[0]
    assert sorted(line.split("|")[3].strip() for line in table.splitlines()[2:]) == ["copy_", "mul"]
    # a repeated flag adds to the selection (argparse's default for nargs="+" keeps only the last)
    assert main(["--list", "--variant", "torch:copy_", "--variant", "mul", "--problem", "vector"]) == 0
    table = capsys.readouterr().out.split("\n\n")[0]
    assert sorted(line.split("|")[3].strip() for line in table.splitlines()[2:]) == ["copy_", "mul"]
    assert main(["--list", "--backend", "ptx", "--backend", "triton", "--problem", "attention"]) == 0
    table = capsys.readouterr().out.split("\n\n")[0]
    assert {line.split("|")[2].strip() for line in table.splitlines()[2:]} == {"ptx", "triton"}
    args = parse_args(["--problem", "vector", "--problem", "vector", "--size", "2^20", "--size", "2^20", "2^21"])
    assert args.problem == ["vector"] and args.size == ["2^20", "2^21"]  # a value given twice counts once
    assert main(["--list", "--variant", "no such kernel"]) == 0
    assert "no registered variant matches" in capsys.readouterr().out


def test_driver_timing_logic_with_a_fake_clock(monkeypatch):
    """The GPU path of the driver with do_bench and nvidia-smi replaced by fakes (on CPU tensors without a GPU), so
    the ratios, the interleaved ceiling, re-timing of noisy rows and the flags are checked for real."""
    from suite.driver import bench

    calls = []

    def fake_time(fn, opts, rep_scale=1.0):
        calls.append(rep_scale)
        fn()  # the real kernel (torch on the CPU / the Triton interpreter) still runs
        if len(calls) == 2:  # the first variant timed is noisy once: it must be re-timed with more repetitions
            return [1.0, 2.0, 3.0, 4.0]
        return [1.0] * 8 if len(calls) % 2 else [2.0] * 8

    monkeypatch.setattr(bench.measure, "_time", fake_time)
    monkeypatch.setattr(bench.run_meta, "gpu_state", lambda: {"throttled": True, "sm_clock_mhz": 1500.0})
    opts = bench.Options(
        problems=("vector",),
        sizes={"vector": (3 * 8192 + 5,)},
        backends=("torch", "triton"),
        stages=(2,),
        timer="adaptive",  # its later batches are twice as long
    )
    # on a CPU machine the Triton kernel runs in the interpreter on CPU tensors; on a GPU machine, on the GPU
    rows = bench.run(opts, on_gpu=True, progress=False, device=torch.device("cuda" if HAS_GPU else "cpu"))
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


# ---------------------------------------------------------------------------------------------------------------
# Filters: ceilings are kept for the problems that run, and nothing else
# ---------------------------------------------------------------------------------------------------------------


def _picked(**kw):
    from suite.driver import bench

    return {(p.name, v.label): stages for p, v, stages in bench.selected(bench.Options(**kw))}


def test_backend_filter_keeps_each_problems_ceiling():
    picked = _picked(backends=("ptx",))
    assert ("vector", "torch:copy_") in picked and ("gemm", "torch:cuBLAS") in picked
    assert ("vector", "torch:mul") not in picked
    assert {label.split(":")[0] for _, label in picked} == {"ptx", "torch"}


def test_variant_filter_runs_only_its_problem_with_its_ceiling():
    assert set(_picked(variants=("cp.async ring",))) == {("vector", "ptx:cp.async ring"), ("vector", "torch:copy_")}
    assert set(_picked(variants=("triton:128x256x32",))) == {("gemm", "triton:128x256x32"), ("gemm", "torch:cuBLAS")}
    assert set(_picked(variants=("copy_",))) == {("vector", "torch:copy_")}


def test_stage_filter_keeps_ceilings_and_drops_problems_it_empties():
    from suite.registry import variants

    s = _GEMM_ONLY_STAGE
    picked = _picked(stages=(s,), backends=("ptx",))
    sweeping = {("gemm", v.label) for v in variants("gemm", "ptx") if s in v.stages}
    unstaged = {("gemm", v.label) for v in variants("gemm", "ptx") if v.stages == (None,)}  # always run (ptx:auto)
    assert ("gemm", "ptx:128x256x32 mma.sync") in sweeping
    assert set(picked) == sweeping | unstaged | {("gemm", "torch:cuBLAS")}  # no vector variant sweeps s
    assert all(picked[key] == (s,) for key in sweeping) and picked[("gemm", "torch:cuBLAS")] == (None,)


def test_check_options_names_the_rule():
    from suite.driver import bench

    with pytest.raises(bench.OptionError, match="no registered variant matches") as e:
        bench.check_options(bench.Options(backends=("ptx",), variants=("tile loop",)), on_gpu=False)
    assert e.value.option == "variants"
    with pytest.raises(bench.OptionError, match="no selected variant sweeps 99, 42 stage"):
        bench.check_options(bench.Options(stages=(2, 99, 42)), on_gpu=False)
    with pytest.raises(bench.OptionError, match=r"too large for a CPU run .* n <= 2\^24"):
        bench.check_options(bench.Options(problems=("vector",), sizes={"vector": (2**24 + 1,)}), on_gpu=False)
    assert bench.check_options(bench.Options(problems=("vector",), sizes={"vector": (2**24,)}), on_gpu=False)
    assert bench.check_options(bench.Options(problems=("gemm",), sizes={"gemm": ((8192,) * 3,)}), on_gpu=True)


# ---------------------------------------------------------------------------------------------------------------
# Output: umask, no Python reprs, 160 columns, plots
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        written = report.write(_rows(), {"gpu": "test"}, tmp_path / "out")
    finally:
        os.umask(old)
    assert sorted(p.name for p in written) == ["results.csv", "results.json", "table.md", "vector.png"]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: oct(mode) for p in written}


def test_table_md_has_no_python_reprs(tmp_path):
    meta = {
        "gpu": None,
        "driver": None,
        "gpu_state_before": {"sm_clock_mhz": 1980.0, "throttled": False},
        "gpu_state_after": {},
        "nvrtc": "13.0",
    }
    rows = _rows() + [_row(backend="torch", variant="mul", stages=None, note="spread 1.5% > 1%")]
    report.write(rows, meta, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    for repr_text in ("None", "{", "}", "True", "False", "stages=None"):
        assert repr_text not in text, repr_text
    assert "- gpu_state_before: sm_clock_mhz=1980, throttled=no" in text and "- gpu: -" in text
    assert "- torch:mul: spread 1.5% > 1%" in text


def test_table_md_opens_with_the_gpu_and_command_and_ends_with_the_record(tmp_path):
    """The first lines say where and how the run was made; the tables follow at once; every field of meta (a
    sweep's runs to dozens of lines) comes after them, under the heading the first lines point to."""
    meta = {
        "date": "2026-12-06T15:50:48+00:00",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "gpu": "NVIDIA H100 80GB HBM3",
        "sms": 132,
        "driver": "580.159.04",
        "plan": {"id": "p", "jobs": 1},
        "complete": True,
        "command": "python -m suite.run --problem vector",
    }
    report.write(_rows(), meta, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    lines = text.splitlines()
    assert lines[2] == (
        "NVIDIA H100 80GB HBM3 (132 SMs), driver 580.159.04; torch 2.11.0+cu130, Triton 3.6.0; "
        "2026-12-06T15:50:48+00:00; complete: yes."
    )
    assert lines[4] == "`python -m suite.run --problem vector`" and "(#the-run)" in lines[6]
    tables, record = text.split("\n" + report.RUN_HEADING + "\n")
    assert "### vector 1024" in tables and "- plan:" not in tables
    assert all(f"- {key}: " in record for key in meta) and "###" not in record
    report.write(_rows(), {"gpu": None, "mode": "cpu", "torch": "2.13.0"}, tmp_path / "cpu")
    assert (tmp_path / "cpu" / "table.md").read_text().splitlines()[2] == "no GPU; torch 2.13.0."
    assert report.headline({"by": "gpu", "gpus": ["NVIDIA H100", "NVIDIA H200"]}).startswith(
        "GPUs NVIDIA H100, NVIDIA H200.\n"
    )
    # a hand-edited record: any type renders as text (no repr, no crash), a backtick in the command stays in its span
    odd = report.headline({"gpu": None, "gpus": 3, "command": ["python", "-m", "x"]}).splitlines()
    assert odd[0] == "no GPU." and odd[2] == "`python, -m, x`"
    assert report.headline({"gpus": "H100", "command": "run --out 'a`b'"}).splitlines()[:3] == [
        "no GPU.",
        "",
        "`` run --out 'a`b' ``",
    ]


def _wide_rows():
    """Six swept variants with long names on two shapes, a throttled and a noisy cell, a failure with a long note,
    an autotuned variant with a long config."""
    rows = []
    for shape in ("8192x8192x8192", "4000x3000x1000"):
        common = {
            "problem": "gemm",
            "shape": shape,
            "dtype": "fp16->fp32acc->fp16",
            "unit": "TFLOP/s",
            "throughput": 512.3,
        }
        rows.append(_row(**common, backend="torch", variant="cuBLAS", stages=None, ceiling=True, ratio_to_ceiling=1.0))
        for i in range(6):
            for s in (1, 2, 3, 4, 5):
                rows.append(
                    _row(
                        **common,
                        backend="ptx",
                        variant=f"128x256x{32 * (i + 1)} wgmma tma warp-specialized",
                        stages=s,
                        throttled=(i, s) == (0, 3),
                        spread=0.05 if (i, s) == (1, 2) else 0.001,
                    )
                )
        rows.append(_row(**common, backend="triton", variant="tuned", stages=4, config="x" * 300))
        rows.append(
            _row(
                **common,
                backend="ptx",
                variant="broken",
                stages=None,
                valid=False,
                measured=False,
                note="INVALID: " + "Tensor-likes are not close! " * 12,
            )
        )
    return rows


def test_terminal_table_fits_160_columns_and_keeps_everything():
    rows = _wide_rows()
    text = report.terminal_table(rows, 160)
    assert max(len(line) for line in text.splitlines()) <= 160
    for r in rows:
        assert f"{r['backend']}:{r['variant']}" in text
    assert "512.3* 90.0%" in text and "512.3~ 90.0%" in text and "FAIL" in text and "Tensor-likes" in text
    assert "* the GPU reported a clock slowdown" in text and "~ samples spread" in text
    assert text.count("| stages ") >= 4  # each shape's six variants split over at least two tables
    full = report.table(rows)
    assert "smem stage/total, regs, blocks" in full and "x" * 300 in full  # the full detail stays in table.md


def test_plot_ceiling_has_its_own_color_and_the_legend_covers_no_data():
    rows = _rows() + [_row(backend="torch", variant="mul", stages=None, baseline=True, median_ms=0.95)]
    for i in range(9):  # enough variants of one backend to need many styles
        rows += [_row(backend="triton", variant=f"v{i}", stages=s, throughput=1.0 + i + s) for s in (1, 2, 3)]
    rows += [dict(r, shape="4096") for r in rows]
    (fig,) = plots.figures(rows, "vector")
    from matplotlib.colors import to_rgba

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        ceiling = [ln for ln in ax.get_lines() if ln.get_label().endswith("(ceiling)")]
        others = [ln for ln in ax.get_lines() if not ln.get_label().endswith("(ceiling)")]
        assert len(ceiling) == 1 and len(others) == 12
        assert to_rgba(ceiling[0].get_color()) not in {to_rgba(ln.get_color()) for ln in others}
        # a colour per backend, and no two variants drawn alike
        for backend in ("ptx", "triton", "torch"):
            mine = [ln for ln in others if ln.get_label().startswith(backend + ":")]
            assert len({to_rgba(ln.get_color()) for ln in mine}) == 1, backend
        drawn = {(to_rgba(ln.get_color()), str(ln.get_linestyle()), ln.get_marker()) for ln in others}
        assert len(drawn) == len(others)
        assert ax.get_legend() is None  # one legend for the figure
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer))  # outside every panel
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    assert len(legend.get_texts()) == 13  # each label once, not once per panel
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_missing_plots_say_why():
    cpu_rows = [_row(measured=False, valid=None, built_for="sm_90"), _row(problem="gemm", measured=False, valid=False)]
    assert report.missing_plots(cpu_rows, on_gpu=False) == [
        "No plot written (vector.png, gemm.png): plots show measured throughput, and without a GPU nothing is timed."
    ]
    gpu_rows = _rows() + [_row(problem="gemm", measured=False, valid=False)]
    assert report.missing_plots(gpu_rows, on_gpu=True) == [
        "No gemm.png written: no gemm row was timed (each failed validation or was skipped; see table.md)."
    ]
    assert report.missing_plots(_rows(), on_gpu=True) == []


@pytest.mark.parametrize("command", ["suite.run", "suite.report", "suite.merge"])
def test_an_empty_out_is_refused_not_taken_for_the_current_directory(command, tmp_path, monkeypatch, capsys):
    """``--out ""``: Path("") is the current directory, where a run would drop its files; each command refuses it in
    argparse's one line (exit 2), and nothing is written where it runs."""
    import importlib

    monkeypatch.chdir(tmp_path)
    argv = {"suite.run": ["--problem", "vector", "--backend", "torch"], "suite.report": ["somewhere"]}
    argv = argv.get(command, ["a", "b"]) + ["--out", ""]
    with pytest.raises(SystemExit) as e:
        importlib.import_module(command).main(argv)
    assert e.value.code == 2
    assert "--out: an empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_overwrite_without_out_is_refused(tmp_path, monkeypatch, capsys):
    """--overwrite replaces --out's earlier run: without --out (each run writes a new directory) it would do nothing,
    so it is refused, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    _assert_refused(*main_here(["--problem", "vector", "--overwrite"], capsys), "--overwrite", "goes with --out DIR")
    assert list(tmp_path.iterdir()) == []
