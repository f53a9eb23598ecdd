"""--profile (suite.driver.profile): the committed H200 ncu sample parsed into profile objects, the "why" cell, the
mapping of profiled kernels to rows, the ncu command line, and the paths without a GPU, without ncu and without
permission to read the counters (a fake ncu on PATH)."""

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_GPU

from suite.driver import profile, report
from suite.driver.profile_worker import main as worker_main
from suite.driver.profile_worker import parse_row

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "ncu-raw-h200-20261130.csv"
NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
# The sample's kernels, in the order ncu profiled them (one launch per row, in registry order).
VECTOR, MMA32, MMA64, WS, WS2, PERSISTENT, TMA_STORE = range(7)


def _kernels():
    return profile.read_raw_csv(SAMPLE.read_text())


def _sample_with_ranges(ranges: list[int]) -> str:
    """The committed sample as ncu --nvtx writes it: a push/pop range column naming, for kernel k, the worker's range
    ``ranges[k]``."""
    lines = SAMPLE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    table = list(csv.reader(lines[start:]))
    at = table[0].index("Host Name") + 1
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for n, fields in enumerate(table):
        if n == 0:
            extra = NVTX_COLUMN
        elif n == 1:
            extra = ""
        else:
            extra = f'1  "<default domain>:{profile.RANGE_PREFIX}{ranges[n - 2]} row:none:none:none:none:none:none"'
        w.writerow(fields[:at] + [extra] + fields[at:])
    return "\n".join(lines[:start]) + "\n" + out.getvalue()


def _row(variant="128x256x32 mma.sync", stages=3, problem="gemm", **kw):
    unit = "TFLOP/s" if problem == "gemm" else "GB/s"
    row = dict(
        problem=problem,
        shape="4096x4096x4096" if problem == "gemm" else "1024",
        dtype="x",
        backend="ptx",
        variant=variant,
        stages=stages,
        baseline=False,
        ceiling=False,
        median_ms=1.0,
        iqr_ms=0.01,
        spread=0.01,
        samples=10,
        throughput=1.0,
        unit=unit,
        ratio_to_ceiling=0.5,
        valid=True,
        max_abs_error=0.0,
        rel_error=0.0,
        measured=True,
        throttled=False,
        note="",
        config="",
    )
    row.update(kw)
    return row


# ---------------------------------------------------------------------------------------------------------------
# The committed sample
# ---------------------------------------------------------------------------------------------------------------


def test_metric_set_is_what_the_h200_collected():
    """Every metric asked for is a column of the raw CSV ncu wrote on the H200 (a typo would make ncu refuse the
    whole run), the stall reasons are exactly those ncu knows on gh100, and the tensor-pipe metric is the one that
    counts both mma.sync and wgmma."""
    header = next(csv.reader([line for line in SAMPLE.read_text().splitlines() if line.startswith('"ID",')]))
    assert set(profile.METRICS) <= set(header)
    assert len(set(profile.METRICS)) == len(profile.METRICS)
    known = DATA.joinpath("ncu-query-metrics-gh100.txt").read_text()
    listed = {line.split()[0] for line in known.splitlines() if line.startswith("smsp__average_warps_issue_stalled_")}
    assert {profile.stall_metric(r).removesuffix(".ratio") for r in profile.STALL_REASONS} == listed
    assert "HGMMA" in next(line for line in known.splitlines() if line.startswith("sm__pipe_tensor_op_hmma_cycles"))
    assert "HMMA" in next(line for line in known.splitlines() if line.startswith("sm__pipe_tensor_op_hmma_cycles"))


def test_sample_parses_into_kernels():
    """Seven kernels after ncu's ==PROF== lines, the units row applied, thousands separators read."""
    kernels = _kernels()
    assert [profile.short_kernel_name(k["name"]) for k in kernels] == [
        "scale2_pipeline<3>",
        "gemm_f16_f32acc<3, 1, 32>",
        "gemm_f16_f32acc<3, 1, 64>",
        "gemm_tma_wgmma<3, 128, 1, 0, 0>",
        "gemm_tma_wgmma<3, 256, 2, 0, 0>",
        "gemm_tma_wgmma<3, 256, 2, 1, 0>",
        "gemm_tma_wgmma<3, 256, 2, 1, 1>",
    ]
    assert all(k["range"] is None for k in kernels)  # taken without --nvtx
    softmax = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float *, const float *, int)"
    assert profile.short_kernel_name(softmax) == "at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>"
    assert kernels[MMA32]["values"][profile.SMEM["ld_wavefronts"]] == 4_227_072  # "4,227,072"
    assert kernels[VECTOR]["values"][profile.DURATION] == 129_152  # ns


def test_sample_profiles_hold_the_h200_numbers():
    p = [profile.profile_of(k) for k in _kernels()]
    vec, mma, tma = p[VECTOR], p[MMA32], p[TMA_STORE]
    # the vector ring: DRAM-bound, warps waiting on global loads (long scoreboard), LDS.128 with bank conflicts
    assert vec["dram_throughput_pct"] == 82.46 and vec["sm_throughput_pct"] == 21.89
    assert vec["achieved_occupancy_pct"] == 21.43
    assert vec["warps_per_scheduler"] == {"active": 3.48, "eligible": 0.38}
    assert [s["reason"] for s in vec["top_stalls"]] == ["long_scoreboard", "short_scoreboard", "wait"]
    # shares of the 14.63 warps stalled per issue cycle (every reason but "selected", which is the issuing warp)
    assert [s["share_pct"] for s in vec["top_stalls"]] == [61.5, 15.2, 9.5]
    assert vec["top_stalls"][0]["warps_per_issue"] == 9.0 and vec["stalls"]["selected"] == 1.0
    assert vec["smem"]["ld_requests"] == 524_288 and vec["smem"]["ld_conflicts"] == 296_862
    assert vec["smem"]["ld_wavefronts_per_request"] == 4.57  # 4 for a conflict-free 128-bit load, + 0.57 conflicts
    assert vec["smem"]["bank_conflict_pct"] == 12.4 and vec["smem"]["st_wavefronts_per_request"] is None
    assert vec["tensor_pipe_pct"] == 0
    # mma.sync: tensor pipe 62%, fixed-latency waits first; ldmatrix wavefronts without LDS requests
    assert mma["tensor_pipe_pct"] == 61.63 and mma["dram_throughput_pct"] == 7.45
    assert [s["reason"] for s in mma["top_stalls"]] == ["wait", "math_pipe_throttle", "long_scoreboard"]
    assert mma["top_stalls"][0]["share_pct"] == 46.2
    assert mma["smem"]["ld_wavefronts"] == 4_227_072 and mma["smem"]["ld_wavefronts_per_request"] is None
    assert mma["smem"]["bank_conflict_pct"] == 0.0
    # TMA + wgmma, persistent, TMA-store epilogue: tensor pipe 80%; STS of the epilogue staging almost conflict-free
    assert tma["tensor_pipe_pct"] == 80.24 and tma["sm_throughput_pct"] == 70.82
    assert [s["reason"] for s in tma["top_stalls"]][:2] == ["long_scoreboard", "barrier"]
    assert tma["smem"]["st_wavefronts_per_request"] == 1.01 and tma["smem"]["bank_conflict_pct"] == 0.8
    # wgmma reads its operands from shared memory without LSU requests: no wavefronts, no conflict figure
    assert p[WS]["smem"]["bank_conflict_pct"] is None and p[WS]["tensor_pipe_pct"] == 54.55


def test_why_cell():
    kernels = _kernels()
    gemm = _row(profile={**profile.profile_of(kernels[TMA_STORE])})
    vec = _row(problem="vector", profile={**profile.profile_of(kernels[VECTOR])})
    mma = _row(profile={**profile.profile_of(kernels[MMA32])})
    assert profile.why(gemm) == "tensor 80%; long_sb 30%, barrier 28%"
    measured = _row(profile={**profile.profile_of(kernels[TMA_STORE]), "smem_throughput_pct": 41.2})
    assert profile.why(measured) == "tensor 80%, smem 41%; long_sb 30%, barrier 28%"
    both = _row(profile={**measured["profile"], "l2_throughput_pct": 63.6})
    assert profile.why(both) == "tensor 80%, l2 64%, smem 41%; long_sb 30%, barrier 28%"
    assert profile.why(mma) == "tensor 62%; wait 46%, math_throttle 21%"
    assert profile.why(vec) == "dram 82%; long_sb 62%, short_sb 15%; bank conflicts 12%"
    assert profile.why(_row()) == "-"
    assert profile.why(_row(profile={"error": "ncu profiled no kernel of this launch"})) == (
        "no profile: ncu profiled no kernel of this launch"
    )


def test_notice_is_one_line_within_the_width():
    line = profile.notice(profile.Unavailable("x" * 500 + "\nsecond line"), 160)
    assert len(line) == 160 and "\n" not in line and line.startswith("--profile: xxx")
    assert line.endswith("...; the run goes on without profiles.")


def test_units_and_empty_cells():
    assert profile._number("1,234.5") == 1234.5
    assert profile._number("1.5", "usecond") == 1500 and profile._number("2", "Kinst") == 2000
    assert profile._number("12", "%") == 12 and profile._number("7", "register/thread") == 7
    assert profile._number("") is None and profile._number("n/a") is None
    with pytest.raises(ValueError, match="no ncu raw-page CSV header"):
        profile.read_raw_csv("==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n")


# ---------------------------------------------------------------------------------------------------------------
# Kernels -> rows
# ---------------------------------------------------------------------------------------------------------------


def test_kernels_map_to_rows_by_nvtx_range():
    """Row i gets the kernel(s) of range i whatever their order; of two kernels in one call, the longest (with a
    note); a row whose range holds no kernel gets the worker's error, never another row's kernel."""
    kernels = profile.read_raw_csv(_sample_with_ranges([2, 0, 0, 3, 3, 3, 3]))
    assert [k["range"] for k in kernels] == [2, 0, 0, 3, 3, 3, 3]
    rows = [_row(stages=s) for s in (1, 2, 3, 4, 5, 6)]
    manifest = [{"index": 0}, {"index": 1, "error": "RuntimeError: boom"}, {"index": 2}, {"index": 3}, {"index": 4}]
    profile.assign(rows, kernels, manifest, "4096x4096x4096")  # row 5: not in the manifest (the worker died)
    assert rows[0]["profile"]["kernel"] == "gemm_f16_f32acc<3, 1, 32>"  # 47,712 ns against 47,136
    assert rows[0]["profile"]["kernels"] == 2 and "the longest shown" in rows[0]["profile"]["note"]
    # each kernel's share of the call's time under ncu, in launch order: 47,712 / 47,136 ns; the four: 29/25/25/21%
    assert [int(p) for p in re.findall(r" (\d+)%", rows[0]["profile"]["note"])] == [50, 50]
    assert [int(p) for p in re.findall(r" (\d+)%", rows[3]["profile"]["note"])] == [29, 25, 25, 21]
    assert rows[3]["profile"]["note"].startswith("4 kernels in one call (gemm_tma_wgmma<3, 128, 1, 0, 0> 29%, ")
    assert rows[1]["profile"] == {"error": "RuntimeError: boom"}
    assert rows[2]["profile"]["kernel"] == "scale2_pipeline<3>" and rows[2]["profile"]["note"] == ""
    assert rows[3]["profile"]["kernel"] == "gemm_tma_wgmma<3, 128, 1, 0, 0>"  # 37,184 ns: the longest of four
    assert rows[4]["profile"] == {"error": profile.NO_KERNEL}  # launched fine, no kernel: a cudaMemcpy
    assert rows[5]["profile"] == {"error": "ncu profiled no kernel of this launch"}
    assert rows[2]["profile"]["shape"] == "4096x4096x4096"


def test_kernels_without_ranges_map_by_order_only_one_to_one():
    kernels = _kernels()
    rows = [_row(stages=s) for s in range(1, 8)]
    profile.assign(rows, kernels, [{"index": i} for i in range(7)], "s")
    assert [r["profile"]["tensor_pipe_pct"] for r in rows][:2] == [0, 61.63]
    rows = [_row(stages=s) for s in range(1, 7)]
    profile.assign(rows, kernels, [{"index": i} for i in range(6)], "s")
    assert all("cannot tell which kernel is which row" in r["profile"]["error"] for r in rows)


def test_a_profiled_config_other_than_the_timed_one_is_noted():
    rows = [_row(backend="triton", variant="tuned", stages=4, config="128x256x64, num_stages=4")]
    profile.assign(rows, _kernels()[1:2], [{"index": 0, "config": "128x128x64, num_stages=3"}], "s")
    assert "differs from the timed one" in rows[0]["profile"]["note"]


# ---------------------------------------------------------------------------------------------------------------
# ncu: a fake one on PATH
# ---------------------------------------------------------------------------------------------------------------


def _fake_ncu(tmp_path, monkeypatch, stdout: str, status: int = 0, unknown: str = "") -> Path:
    """An executable named ncu, first on PATH, that records its arguments (the last call's in argv.json, every call's
    metric list in metrics.jsonl) and prints ``stdout``; asked for the metric ``unknown``, it refuses it as ncu does."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "stdout.txt").write_text(stdout)
    script = bindir / "ncu"
    script.write_text(f"""#!{sys.executable}
import json, sys
if sys.argv[1:] == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (build 1)")
    sys.exit(0)
open({str(tmp_path / "argv.json")!r}, "w").write(json.dumps(sys.argv[1:]))
metrics = sys.argv[sys.argv.index("--metrics") + 1].split(",") if "--metrics" in sys.argv else []
open({str(tmp_path / "metrics.jsonl")!r}, "a").write(json.dumps(metrics) + "\\n")
if {unknown!r} and {unknown!r} in metrics:
    print("==ERROR== Failed to find metric {unknown}")
    sys.exit(1)
sys.stdout.write(open({str(tmp_path / "stdout.txt")!r}).read())
sys.exit({status})
""")
    script.chmod(0o755)
    monkeypatch.delenv("PIPESUITE_NCU", raising=False)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path / "argv.json"


def _gemm_rows():
    return [
        _row(backend="torch", variant="cuBLAS", stages=None, ceiling=True),
        _row(variant="128x256x32 mma.sync", stages=3),
        _row(backend="triton", variant="tuned", stages=4),
    ]  # stages chosen by the autotuner: not an argument


def test_profile_pass_with_a_fake_ncu(tmp_path, monkeypatch):
    """The whole pass: one ncu command per (problem, shape) with the fixed options and metrics over the worker, its
    CSV read back into each row, the run metadata's line. Rows not timed are not profiled."""
    argv_file = _fake_ncu(tmp_path, monkeypatch, _sample_with_ranges([0, 1, 1, 2, 2, 2, 2]))
    rows = _gemm_rows() + [_row(variant="128x256x64 mma.sync", measured=False, valid=False)]
    line = profile.add_profiles(rows, on_gpu=True, seed=3, progress=False)
    assert "ncu 2099.1.0.0" in line and "--clock-control none" in line
    assert "no timing was taken under the profiler" in line
    argv = json.loads(argv_file.read_text())
    assert argv[: argv.index("--metrics")] == [
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--nvtx",
        "--csv",
        "--page",
        "raw",
    ]
    assert argv[argv.index("--metrics") + 1].split(",") == list(profile.METRICS + profile.EXTRA_METRICS)
    assert f"{len(profile.METRICS) + len(profile.EXTRA_METRICS)} metrics;" in line
    worker = argv[argv.index("--metrics") + 2 :]
    assert worker[:3] == [sys.executable, "-m", "suite.driver.profile_worker"]
    assert worker[3:] == [
        "--seed",
        "10003",
        "--manifest",
        worker[6],
        "gemm",
        "4096x4096x4096",
        "torch:cuBLAS",
        "ptx:128x256x32 mma.sync@3",
        "triton:tuned",
    ]
    assert rows[0]["profile"]["kernel"] == "scale2_pipeline<3>"
    assert rows[1]["profile"]["kernels"] == 2 and rows[2]["profile"]["tensor_pipe_pct"] == 54.55
    assert "profile" not in rows[3]


def test_the_worker_loads_the_runs_plugins(tmp_path, monkeypatch):
    """A run's --plugin modules reach the worker under ncu, before the rows that may name their variants."""
    argv_file = _fake_ncu(tmp_path, monkeypatch, _sample_with_ranges([0, 1, 1, 2, 2, 2, 2]))
    profile.add_profiles(_gemm_rows(), on_gpu=True, progress=False, plugins=("a_plugin.py", "b.module"))
    worker = json.loads(argv_file.read_text())
    worker = worker[worker.index("suite.driver.profile_worker") + 1 :]
    assert worker[4:8] == ["--plugin", "a_plugin.py", "--plugin", "b.module"]
    assert worker[8:10] == ["gemm", "4096x4096x4096"]


def test_the_worker_knows_a_plugins_variant_only_with_the_plugin():
    """The example plugin's variant is unknown to a worker without --plugin, and known with it (no GPU: the worker
    then stops at its GPU check; on a GPU it launches the row)."""
    row = ["vector", "2^12", "cuda:plugin prefetch@2"]
    plugin = str(Path(__file__).with_name("plugins") / "example_plugin.py")
    runs = {
        with_plugin: subprocess.run(
            [sys.executable, "-m", "suite.driver.profile_worker", *(["--plugin", plugin] if with_plugin else []), *row],
            capture_output=True,
            text=True,
            timeout=300,
        )
        for with_plugin in (False, True)
    }
    assert runs[False].returncode == 2 and "unknown vector variant" in runs[False].stderr
    assert "unknown" not in runs[True].stderr
    assert runs[True].returncode == (0 if HAS_GPU else 2), runs[True].stderr
    if not HAS_GPU:
        assert "needs a CUDA GPU" in runs[True].stderr


def test_an_extra_metric_ncu_refuses_is_dropped_for_the_rest_of_the_run(tmp_path, monkeypatch):
    """An ncu that does not know the shared-memory throughput metric: the first group is profiled again without it
    (the other extras still asked), the next is asked without it, every row gets its profile (no smem figure), and the
    metadata's line names the one refused."""
    _fake_ncu(tmp_path, monkeypatch, _sample_with_ranges([0, 1, 1, 2, 2, 2, 2]), unknown=profile.SMEM_THROUGHPUT)
    rows = _gemm_rows() + [_row(variant="128x256x32 mma.sync", stages=3, shape="8192x8192x8192")]
    line = profile.add_profiles(rows, on_gpu=True, progress=False)
    asked = [json.loads(c) for c in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [profile.SMEM_THROUGHPUT in m for m in asked] == [True, False, False]  # 2 groups, the first asked twice
    assert all(profile.L2_THROUGHPUT in m and profile.DRAM_READ_BYTES in m for m in asked)
    assert all(r["profile"].get("kernel") and r["profile"]["smem_throughput_pct"] is None for r in rows[:3])
    kept = len(profile.METRICS) + len(profile.EXTRA_METRICS) - 1
    assert f"{kept} metrics (this ncu refused {profile.SMEM_THROUGHPUT})" in line


def test_the_l2_and_dram_read_extras_reach_the_profile_and_the_csv():
    """The L2 slices' throughput and the DRAM bytes read, where ncu gave them: in the profile object, the why cell
    and the CSV's columns."""
    kernel = _kernels()[TMA_STORE]
    values = {**kernel["values"], profile.L2_THROUGHPUT: 63.6, profile.DRAM_READ_BYTES: 2.5e8}
    p = profile.profile_of({**kernel, "values": values})
    assert p["l2_throughput_pct"] == 63.6 and p["dram_read_bytes"] == 2.5e8
    row = _row(profile=p)
    assert ", l2 64%" in profile.why(row)
    flat = profile.flat(row)
    assert flat["profile_l2_throughput_pct"] == 63.6 and flat["profile_dram_read_bytes"] == 2.5e8
    assert set(flat) <= set(profile.CSV_FIELDS)


@pytest.mark.parametrize("status", [0, 1])
def test_no_permission_for_the_counters(tmp_path, monkeypatch, status):
    """ERR_NVGPUCTRPERM, whatever ncu's exit status: one line saying so, and no row gets a profile."""
    _fake_ncu(
        tmp_path,
        monkeypatch,
        "==PROF== Connected to process 7 (/usr/bin/python3)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0. For instructions on enabling permissions and to get more information "
        "see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n==PROF== Disconnected from process 7\n"
        "==WARNING== No kernels were profiled.\n",
        status,
    )
    rows = _gemm_rows()
    with pytest.raises(profile.Unavailable, match="no permission to read the GPU's performance counters") as e:
        profile.add_profiles(rows, on_gpu=True, progress=False)
    assert "ERR_NVGPUCTRPERM" in str(e.value) and "\n" not in str(e.value)
    assert len(profile.notice(e.value)) <= 160 and "ERR_NVGPUCTRPERM" in profile.notice(e.value)
    assert not any("profile" in r for r in rows)


def test_ncu_that_profiles_nothing(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch, "==ERROR== Failed to find metric sm__nope\n", 1)
    with pytest.raises(profile.Unavailable, match="ncu profiled nothing .exit status 1.: Failed to find metric"):
        profile.add_profiles(_gemm_rows(), on_gpu=True, progress=False)


def test_missing_ncu(tmp_path, monkeypatch):
    monkeypatch.delenv("PIPESUITE_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(profile, "NCU_CANDIDATES", (str(tmp_path / "nope" / "ncu"),))
    rows = _gemm_rows()
    with pytest.raises(profile.Unavailable, match=r"^ncu \(Nsight Compute\) is not on PATH$"):
        profile.add_profiles(rows, on_gpu=True, progress=False)
    monkeypatch.setenv("PIPESUITE_NCU", str(tmp_path / "nope"))
    with pytest.raises(profile.Unavailable, match="PIPESUITE_NCU=.* is not an executable"):
        profile.add_profiles(rows, on_gpu=True, progress=False)
    with pytest.raises(profile.Unavailable, match="no CUDA GPU here"):
        profile.add_profiles(rows, on_gpu=False, progress=False)
    assert not any("profile" in r for r in rows)


def test_cli_profile_without_a_gpu_says_so_in_one_line_and_runs_on(tmp_path):
    """GPUs hidden: --profile says in one line that nothing is profiled; the run itself completes as always."""
    out = tmp_path / "run"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite.run",
            "--profile",
            "--problem",
            "vector",
            "--backend",
            "torch",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "--profile" in line]
    assert said == [
        "--profile: no CUDA GPU here: nothing was timed, so nothing is profiled; the run goes on without profiles."
    ]
    data = json.loads((out / "results.json").read_text())
    assert data["rows"] and not any("profile" in r for r in data["rows"])
    assert data["meta"]["profile"].startswith("not taken: no CUDA GPU here")
    assert "profile_" not in (out / "results.csv").read_text() and "why" not in proc.stdout


# ---------------------------------------------------------------------------------------------------------------
# The tables and the CSV
# ---------------------------------------------------------------------------------------------------------------


def _profiled_rows():
    k = _kernels()
    rows = [_row(backend="torch", variant="cuBLAS", stages=None, ceiling=True, profile=profile.profile_of(k[WS2]))]
    rows += [
        _row(stages=s, profile={**profile.profile_of(k[MMA32]), "shape": "4096x4096x4096", "note": ""}) for s in (1, 2)
    ]
    rows += [
        _row(backend="triton", variant="128x256x32", stages=1, profile={"error": "RuntimeError: boom"}),
        _row(backend="triton", variant="128x256x32", stages=2, profile=profile.profile_of(k[TMA_STORE])),
    ]
    return rows


def test_tables_show_a_why_cell_and_say_timings_were_not_profiled():
    rows = _profiled_rows()
    terminal = report.terminal_table(rows, 160)
    assert "why: stages" in terminal and "tensor 62%; wait 46%, math_throttle 21%" in terminal
    assert "no profile: RuntimeError: boom" in terminal and "tensor 64%; long_sb 45%, barrier 20%" in terminal
    assert "no timing was taken under the profiler" in terminal
    assert max(len(line) for line in terminal.splitlines()) <= 160
    md = report.table(rows)
    assert "ptx:128x256x32 mma.sync why" in md and "| why " in md
    assert "tensor 80%; long_sb 30%, barrier 28%" in md and "no timing was taken under the profiler" in md
    for block in md.split("\n\n"):  # every Markdown table keeps its columns: no cell holds a "|"
        lines = [line for line in block.splitlines() if line.startswith("|")]
        assert len({line.count("|") for line in lines}) <= 1, block
    assert "|" not in profile.why(_row(profile={"error": "a | b"}))
    plain = [{k: v for k, v in r.items() if k != "profile"} for r in rows]
    assert "why" not in report.terminal_table(plain, 160) and "why" not in report.table(plain)


def test_csv_flattens_the_profile():
    rows = _profiled_rows()
    lines = list(csv.DictReader(io.StringIO(report.to_csv(rows))))
    assert set(profile.CSV_FIELDS) <= set(lines[0])
    mma = lines[1]
    assert mma["profile_kernel"] == "gemm_f16_f32acc<3, 1, 32>" and mma["profile_tensor_pipe_pct"] == "61.63"
    assert mma["profile_stall_1"] == "wait" and mma["profile_stall_1_pct"] == "46.2"
    assert mma["profile_warps_active_per_scheduler"] == "2.0" and mma["profile_warps_eligible_per_scheduler"] == "0.49"
    assert mma["profile_why"] == "tensor 62%; wait 46%, math_throttle 21%"
    assert lines[3]["profile_note"] == "no profile: RuntimeError: boom" and lines[3]["profile_kernel"] == ""
    plain = report.to_csv([{k: v for k, v in r.items() if k != "profile"} for r in rows])
    assert "profile_" not in plain.splitlines()[0]


# ---------------------------------------------------------------------------------------------------------------
# The worker
# ---------------------------------------------------------------------------------------------------------------


def test_worker_rows():
    label = "ptx:128x256x64 ws 2wg persistent tma+wgmma"
    assert parse_row(f"{label}@4") == (label, 4)
    assert parse_row("torch:copy_") == ("torch:copy_", None)
    for bad in ("copy_", "ptx:ring@0", "ptx:ring@x", "ptx:ring@"):
        with pytest.raises(ValueError, match="backend:name|whole number"):
            parse_row(bad)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["vector", "1024", "ptx:nope@2"], "unknown vector variant"),
        (["vector", "1024", "ptx:cp.async ring@0"], "whole number >= 1"),
        (["vector", "1e3", "torch:copy_"], "sizes are whole numbers"),
        (["nope", "1024", "torch:copy_"], "unknown problem"),
    ],
)
def test_worker_refuses_bad_arguments_before_touching_the_gpu(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        worker_main(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.gpu_alone
def test_profile_pass_on_the_gpu(tmp_path):
    """The real thing, small: time the PTX ring and its ceiling, then profile them under ncu (skipped where ncu or
    the counters are not available). Every timed row gets a profile of exactly one kernel."""
    from suite.driver.bench import Options, run

    rows = run(
        Options(problems=("vector",), variants=("cp.async ring",), sizes={"vector": (2**24,)}, quick=True),
        on_gpu=True,
        progress=False,
    )
    medians = [r["median_ms"] for r in rows]
    try:
        profile.add_profiles(rows, on_gpu=True, progress=False)
    except profile.Unavailable as e:
        pytest.skip(f"ncu: {e}")
    assert [r["median_ms"] for r in rows] == medians  # the pass never re-times
    for r in rows:
        if r["ceiling"]:  # torch's copy_: a cudaMemcpy on the copy engine, no kernel for ncu
            assert r["profile"] == {"error": profile.NO_KERNEL}, r["profile"]
            continue
        assert "error" not in r["profile"], (r["variant"], r["profile"])
        assert r["profile"]["kernels"] == 1 and r["profile"]["dram_throughput_pct"] > 1
        assert len(r["profile"]["top_stalls"]) == 3 and profile.why(r).startswith("dram ")
        # the ring's cp.async writes and LDS reads go through the shared-memory data pipe: its extra metric is read
        assert r["profile"]["smem_throughput_pct"] > 0 and ", smem " in profile.why(r), r["profile"]
        # the other extras: the L2 slices' throughput, and DRAM reads of x at least (2**24 elements of 2 bytes or
        # more; ncu flushes the caches before each pass, so x comes from DRAM)
        assert r["profile"]["l2_throughput_pct"] > 0 and ", l2 " in profile.why(r), r["profile"]
        assert r["profile"]["dram_read_bytes"] >= 2 * 2**24, r["profile"]
    assert HAS_GPU


@pytest.mark.gpu
def test_worker_runs_by_hand(tmp_path):
    """Without ncu the worker just builds and launches: every row launched, none failed, nothing on stdout (where ncu
    prints its CSV)."""
    manifest = tmp_path / "m.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite.driver.profile_worker",
            "--manifest",
            str(manifest),
            "vector",
            "2^20",
            "torch:copy_",
            "ptx:cp.async ring@4",
            "triton:tile loop@4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    entries = json.loads(manifest.read_text())
    assert [e["index"] for e in entries] == [0, 1, 2] and all(e.get("launched") for e in entries), entries


def test_group_timeout_from_the_environment(monkeypatch):
    monkeypatch.delenv("PIPESUITE_PROFILE_TIMEOUT", raising=False)
    assert profile.group_timeout() is None
    monkeypatch.setenv("PIPESUITE_PROFILE_TIMEOUT", "90")
    assert profile.group_timeout() == 90.0
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv("PIPESUITE_PROFILE_TIMEOUT", bad)
        with pytest.raises(profile.Unavailable, match="PIPESUITE_PROFILE_TIMEOUT must be"):
            profile.group_timeout()


def test_every_problems_rows_get_the_same_columns():
    """Tensor-pipe busy, stall reasons and shared-memory figures come out for a row of any problem (attention's
    included): what leads the cell follows the problem's unit, never its name."""
    from suite.problems import PROBLEMS

    measured = profile.profile_of(_kernels()[TMA_STORE])
    for problem in PROBLEMS.values():
        size = problem.edge_sizes_for(problem.default_dtype)[0]
        row = _row(problem=problem.name, profile=dict(measured))
        row.update(shape=problem.shape(size), unit=problem.unit)
        lead = "tensor 80%" if problem.unit == "TFLOP/s" else "dram"
        assert profile.why(row).startswith(lead) and "long_sb 30%" in profile.why(row), problem.name
        columns = profile.flat(row)
        assert columns["profile_tensor_pipe_pct"] and columns["profile_stall_1"] == "long_scoreboard", problem.name
        assert columns["profile_smem_st_wavefronts_per_request"], problem.name
