"""What a new user sees (issue 22, items 14-18): compile errors at their .cu line, build failures counted apart, a
compact CPU terminal, output that fits, suite.report, and a gemm.png whose legend covers nothing. CPU only."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite.driver import plots, report
from suite.nvrtc import cache, loader

ROOT = Path(__file__).resolve().parents[1]
H200_RUN = ROOT / "results" / "NVIDIA-H200" / "default"  # a committed run: vector, GEMM (fp16, bf16, fp8), attention
HAS_GPU = __import__("torch").cuda.is_available()


def _run(*args, cwd=None, env=None):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=600, check=False
    )


def _h200_rows() -> list[dict]:
    """The committed run's bf16 and fp8 GEMM rows (the square shapes, every variant with a build for the dtype)."""
    rows = json.loads((H200_RUN / "results.json").read_text())["rows"]
    return [r for r in rows if r["problem"] == "gemm" and not r["dtype"].startswith("fp16")]


# -- 14. compile errors ----------------------------------------------------------------------------------------------

BROKEN_CXX = """\
template <int STAGES>
__global__ void broken_cxx(const float* x, float* y, long long n) {
    int unused;  // a warning first
    y[0] = x[0] * STAGES   // the missing ';'
}
"""

BROKEN_PTX = """\
template <int STAGES>
__global__ void broken_ptx(const float* x, float* y, long long n) {
    unsigned v;
    asm volatile("mov.u33 %0, 7;" : "=r"(v));  // the typo ptxas rejects
    y[0] = x[0] * v;
}
"""

BROKEN_PLUGIN = """\
from pathlib import Path

from suite.kernel import NvrtcModule
from suite.registry import anywhere, needs_gpu, register_kernel


class Broken(NvrtcModule):
    stages, threads, stage_bytes = (1, 2), 32, 0

    def __init__(self, name):
        self.source, self.kernel_name = Path(__file__).with_name(name + ".cu"), name

    def name_expressions(self, stages):
        return (f"{self.kernel_name}<{stages}>",)

    def launch(self, inputs, out, stages):
        self.build()
        raise AssertionError("not reached: the build fails")


gate = needs_gpu((8, 0)) if {on_cpu} else anywhere
register_kernel("vector", "cuda", "broken cxx", Broken("broken_cxx"), gate=gate)
register_kernel("vector", "cuda", "broken ptx", Broken("broken_ptx"), gate=gate)
"""


def test_a_build_error_shows_its_first_error_at_its_line_and_is_counted_as_a_build_failure(tmp_path):
    (tmp_path / "broken_cxx.cu").write_text(BROKEN_CXX)
    (tmp_path / "broken_ptx.cu").write_text(BROKEN_PTX)
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(BROKEN_PLUGIN.replace("{on_cpu}", "True"))
    out = tmp_path / "run"
    proc = _run(
        "-m",
        "suite.run",
        "--plugin",
        str(plugin),
        "--problem",
        "vector",
        "--size",
        "4099",
        "--variant",
        "cuda:broken cxx",
        "cuda:broken ptx",
        "--out",
        str(out),
        "--no-progress",
        env={"PIPESUITE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    cxx = f'{tmp_path / "broken_cxx.cu"}:5: error: expected a ";"'  # the line after the statement, as NVRTC says
    ptx = f"{tmp_path / 'broken_ptx.cu'}:4: error: Unknown modifier '.u33'"
    table_md = (out / "table.md").read_text()
    for text in (proc.stdout, " ".join(table_md.split())):
        flat = " ".join(text.split())
        assert cxx in flat and ptx in flat, text
        assert "PTX kept at " + str(tmp_path / "cache") in flat  # the kept .ptx, for the ptxas error
        assert "warning" not in flat.split(ptx)[0].rsplit("broken ptx", 1)[-1]  # the error is first, not a warning
    assert proc.stderr.rstrip().splitlines()[-1] == "4 rows failed: 4 build failed"
    assert "FAILED validation" not in proc.stderr
    raw = (out / "results.json").read_text()
    assert "\\u0000" not in raw and "\x00" not in table_md
    rows = json.loads(raw)["rows"]
    broken = [r for r in rows if r["variant"].startswith("broken")]
    assert len(broken) == 4 and all(r["failure"] == "build" and r["valid"] is False for r in broken)


def test_the_first_error_is_never_a_warning(tmp_path, cache_dir):
    """ptxas's diagnostics with a warning ahead of the error (as a real log can have): the location shown first is
    the error's."""
    src = tmp_path / "broken_ptx.cu"
    src.write_text(BROKEN_PTX)
    with pytest.raises(loader.KernelCompileError) as info:
        loader.compile_cu(src, ("broken_ptx<1>",), arch="sm_90")
    real = info.value
    line = int(re.search(r"ptx input, line (\d+); error", real.log)[1])
    log = real.log.replace(
        "ptxas application ptx input",
        f"ptxas application ptx input, line {line - 2}; warning : "
        "a warning ahead of the error\nptxas application ptx input",
        1,
    )
    from cuda.core import ProgramOptions

    options = ProgramOptions(
        name=str(src), arch="sm_90", include_path=[str(tmp_path), str(loader.INCLUDE_DIR)], **loader.NVRTC_OPTIONS
    )
    err = loader._compile_error(
        src, "sm_90", log, src.read_text(), options, ("broken_ptx<1>",), cache.Entry("x.cubin", "k", [])
    )
    assert "warning" in " ".join(err.locations)  # both are placed in the source...
    assert err.first_error.startswith(f"{src}:4: error: Unknown modifier '.u33'")  # ...the error first
    assert ": error:" in err.locations[0]


def test_a_cxx_error_names_its_file_and_line():
    err = loader.KernelCompileError(
        Path("/k/x.cu"),
        "sm_90",
        "6: NVRTC_ERROR_COMPILATION, compilation log:\n\n/k/x.cu(3): warning #177-D: "
        'variable "u" was declared but never referenced\n/k/x.cu(7): error: expected a ";"\n\n1 error detected\n',
    )
    assert err.first_error == '/k/x.cu:7: error: expected a ";"' and err.summary == err.first_error


def test_compile_logs_never_keep_a_nul(cu_nul_program, tmp_path, cache_dir):
    src = tmp_path / "k.cu"
    src.write_text("template <int S> __global__ void k(float* y) { y[0] = S; }\n")
    cu_nul_program["fail"] = True
    with pytest.raises(loader.KernelCompileError) as info:
        loader.compile_cu(src, ("k<1>",), arch="sm_90")
    assert "\x00" not in info.value.log and "\x00" not in str(info.value) and "\x00" not in info.value.first_error
    cu_nul_program["fail"] = False
    built = loader.compile_cu(src, ("k<1>",), arch="sm_90")
    assert built.log == "k.cu(1): warning: one\nptxas warning: two" and "\x00" not in built.log
    assert loader.compile_cu(src, ("k<1>",), arch="sm_90").log == built.log  # and as cached


@pytest.fixture
def cu_nul_program(monkeypatch):
    """cuda.core's Program replaced by one whose logs carry NUL bytes mid-text, as NVRTC's and ptxas's logs joined
    do (each ends in NUL)."""
    import cuda.core
    from cuda.core._utils.cuda_utils import NVRTCError

    state = {"fail": False}

    class Obj:
        def __init__(self):
            self.code, self.symbol_mapping = b"\x7fELF" + b"\0" * 60, {"k<1>": b"_Z1kILi1EEvPf"}

    class FakeProgram:
        def __init__(self, source, code_type, options):
            pass

        def compile(self, target, name_expressions=(), logs=None):
            if state["fail"]:
                raise NVRTCError(
                    "6: NVRTC_ERROR_COMPILATION, compilation log:\n\nk.cu(1): warning: one\n\x00\n"
                    'k.cu(1): error: expected a ";"\n\x00\x00'
                )
            logs.write("k.cu(1): warning: one\x00\nptxas warning: two\n\x00\x00")
            return Obj()

    monkeypatch.setattr(cuda.core, "Program", FakeProgram)
    return state


@pytest.mark.skipif(HAS_GPU, reason="the interpreter's run (on a GPU the same driver code times the rows)")
def test_a_library_that_does_not_take_the_shape_says_so_in_its_row_and_fails_nothing():
    """cuBLASLt's fp8 GEMM wants N and K multiples of 16. At an odd N the fp8 ceiling's row says so and is not run,
    the Triton kernels of that shape run and validate without it, and no row counts as failed (the CPU default run's
    fp8 sizes are such shapes: it exited 1 on them before)."""
    import torch

    from suite.driver import bench

    opts = bench.Options(
        problems=("gemm",),
        dtypes=("fp8e4m3",),
        variants=("torch:cuBLAS", "triton:128x256x64 desc"),
        sizes={"gemm": ((67, 45, 48),)},
    )
    rows = bench.run(opts, on_gpu=False, progress=False, device=torch.device("cpu"))
    (ceiling,) = [r for r in rows if r["backend"] == "torch"]
    assert ceiling["valid"] is None and not ceiling["measured"], ceiling
    assert ceiling["note"] == "not run: torch._scaled_mm (cuBLASLt fp8) needs N and K multiples of 16 (N = 45)"
    kernels = [r for r in rows if r["backend"] == "triton"]
    assert kernels and all(r["valid"] is True for r in kernels), kernels
    assert report.failure_summary(rows) is None


# -- 15. the CPU terminal ------------------------------------------------------------------------------------------


def _as_cpu_run(rows: list[dict]) -> list[dict]:
    """The committed GPU rows as a CPU run would leave them: Triton and torch validated, NVRTC kernels built for
    sm_90 and described, nothing timed."""
    out = []
    for r in rows:
        r = dict(r, measured=False, median_ms=None, throughput=None, ratio_to_ceiling=None)
        if r["backend"] in ("ptx", "cuda"):
            r.update(valid=None, built_for="sm_90")
        out.append(r)
    return out


def test_the_cpu_summary_is_compact_and_keeps_every_failure():
    rows = _as_cpu_run(_h200_rows())
    ptx_row = next(i for i, r in enumerate(rows) if r["backend"] == "ptx")
    triton_row = next(i for i, r in enumerate(rows) if r["backend"] == "triton")
    rows[ptx_row] = dict(
        rows[ptx_row],
        valid=False,
        failure="build",
        built_for=None,
        note='build failed: KernelCompileError: /k/gemm.cu:12: error: expected a ";"',
    )
    rows[triton_row] = dict(rows[triton_row], valid=False, note="INVALID: Tensor-likes are not close!")
    text = report.terminal(rows, 160)
    lines = text.splitlines()
    assert len(lines) <= 20 and max(map(len, lines)) <= 160, text
    assert "valid, not timed" not in text and "built sm_90:" not in text
    ptx = next(line for line in lines if line.startswith("| gemm      | ptx"))
    n = sum(r["backend"] == "ptx" for r in rows)
    assert [c.strip() for c in ptx.split("|")[3:8]] == [str(n), "0", str(n - 1), "1", "0"]  # rows, valid, built...
    assert "HGMMA" in ptx and "UTMALDG" in ptx  # the SASS classes found
    flat = " ".join(text.split())
    assert '/k/gemm.cu:12: error: expected a ";"' in flat and "Tensor-likes are not close!" in flat
    assert "Full tables: --verbose" in flat
    full = report.terminal(rows, 160, verbose=True)
    assert "built sm_90: HGMMA" in full and len(full.splitlines()) > 100  # what --verbose prints


def test_stage_rows_empty_in_every_column_are_dropped():
    rows = _h200_rows()
    empty = re.compile(r"^\| \d+ +(\| +- +)+\|$")
    for text in (report.table(rows), report.terminal_table(rows, 160)):
        assert not [line for line in text.splitlines() if empty.match(line)]
    assert "| 6 " in report.table(rows)  # a stage count some variant of the table did run stays


# -- 16. terminal and files ----------------------------------------------------------------------------------------


def test_the_progress_bar_is_drawn_only_on_a_terminal(monkeypatch, tmp_path):
    from suite.driver.bench import Progress

    log = tmp_path / "log"
    with log.open("w") as f:
        monkeypatch.setattr(sys, "stderr", f)
        bar = Progress(3)
        for i in range(3):
            bar.step(f"step {i}")
    assert log.read_text() == ""

    class Terminal:
        text = ""

        def write(self, s):
            Terminal.text += s

        def flush(self):
            pass

        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = Progress(2)
    bar.step("a")
    bar.step("b")
    assert Terminal.text.startswith("\r[") and Terminal.text.endswith("\n")


def test_list_fits_160_columns_and_says_what_is_built_here(capsys):
    from suite.run import main

    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 160
    ptx = [line for line in out.splitlines() if line.startswith("| vector    | ptx ")]
    assert ptx
    if not HAS_GPU:
        assert all(line.rstrip(" |").endswith("built, not run (no GPU)") for line in ptx), ptx
    assert "- ptx:cp.async ring (vector): " in out  # each variant's description, below the table


def test_table_md_lines_stay_readable_and_long_configs_go_to_the_notes():
    rows = _h200_rows()
    text = report.table(rows)
    assert max(len(line) for line in text.splitlines()) <= report.MD_WIDTH
    tuned = next(r for r in rows if r["variant"] == "tuned")
    assert len(tuned["config"]) > report.CONFIG_INLINE
    assert f"- triton:tuned stages={tuned['stages']}: config: {tuned['config']}" in " ".join(text.split())
    assert "(in the notes)" in text


def test_tile_counts_are_pluralized():
    from suite.streaming import Schedule

    assert "1 tile per block" in Schedule(tiles_per_block=1).describe()
    assert "2 tiles per block" in Schedule(tiles_per_block=2).describe()


# -- 17. suite.report --------------------------------------------------------------------------------------------


def test_report_renders_a_committed_run_without_a_gpu(tmp_path, capsys):
    from suite.report import main

    assert main([str(H200_RUN), "--out", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == [
        "attention.png",
        "gemm-ratio-vs-m.png",
        "gemm.png",
        "results.csv",
        "results.json",
        "table.md",
        "vector-depth.png",
        "vector.png",
    ]
    assert (tmp_path / "again" / "gemm.png").read_bytes()[:4] == b"\x89PNG"
    tables = [line for line in out.splitlines() if not line.startswith("wrote ")]  # the last line names a path
    assert "ptx:128x256x64 ws 2wg tma+wgmma" in out and max(map(len, tables)) <= 160
    # in place: the tables and plots again, the record untouched
    copy = tmp_path / "copy"
    shutil.copytree(H200_RUN, copy)
    (copy / "table.md").unlink()
    before = (copy / "results.json").read_bytes()
    assert main([str(copy), "--in-place"]) == 0
    assert (copy / "table.md").exists() and (copy / "results.json").read_bytes() == before
    assert "(results.json as it was)" in capsys.readouterr().out


def test_table_md_marks_the_cells_the_terminal_marks_and_says_what_they_mean():
    rows = json.loads((H200_RUN / "results.json").read_text())["rows"]
    timed = [r for r in rows if r.get("measured") and r.get("valid") is not False and r["stages"] is not None]
    steady, spread = next(r for r in timed if r["spread"] < 0.005), next(r for r in timed if r["spread"] > 0.01)
    throttled = dict(steady, variant=steady["variant"] + " (throttled)", throttled=True)
    md = report.table([steady, spread, throttled])
    digits = 0 if steady["unit"] == "GB/s" else 1
    assert f"{spread['throughput']:.{digits}f}~" in md and f"{throttled['throughput']:.{digits}f}*" in md, md
    assert f"| {steady['throughput']:.{digits}f} " in md, md  # no mark
    legend = md.split("Marks after a throughput:\n", 1)[1]
    assert "~ samples spread" in legend and "* the GPU reported a clock slowdown" in legend and "^" not in legend


def test_report_out_keeps_another_runs_results_unless_told(tmp_path, capsys):
    """--out into a folder that holds a run's results is refused in one line, the record untouched, as suite.run's
    --out is; --overwrite replaces them, an earlier rendering's plots included."""
    from suite.report import main

    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text('{"meta": {}, "rows": []}')
    (other / "stale.png").write_bytes(b"\x89PNG")
    assert main([str(H200_RUN), "--out", str(other)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds a run's results (--overwrite replaces them)" in err, err
    assert (other / "results.json").read_text() == '{"meta": {}, "rows": []}'
    assert main([str(H200_RUN), "--out", str(other), "--overwrite"]) == 0
    assert (other / "results.json").read_bytes() == (H200_RUN / "results.json").read_bytes()
    assert not (other / "stale.png").exists()
    with pytest.raises(SystemExit) as exit_:
        main([str(H200_RUN), "--overwrite"])
    assert exit_.value.code == 2 and "--overwrite goes with --out" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda d: d.mkdir(), "no results.json there"),
        (lambda d: (d.mkdir(), (d / "results.json").write_text("[" * 100_000)), "nested too deeply"),
        (
            lambda d: (d.mkdir(), (d / "results.json").write_text('{"meta": {}, "rows": [{"problem": "x"}]}')),
            "row 0 has no",
        ),
    ],
)
def test_report_refuses_bad_input_in_one_line(tmp_path, make, why):
    make(tmp_path / "bad")
    proc = _run("-m", "suite.report", str(tmp_path / "bad"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert why in proc.stderr and "Traceback" not in proc.stderr


# -- 18. gemm.png ------------------------------------------------------------------------------------------------


def test_gemm_png_of_the_committed_h200_run_has_no_legend_over_an_axis():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    (fig,) = plots.figures(_h200_rows(), "gemm")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), "a legend covers a panel"
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    # a colour family per backend (its dominant channel), a marker per variant within it
    families = {"ptx": 0, "cuda": 1, "triton": 2}  # red, green, blue
    seen: dict[str, set] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            label = line.get_label()
            backend = label.split(":", 1)[0]
            if backend in families and line.get_marker() not in (None, "None", ""):
                rgb = to_rgb(line.get_color())
                assert max(range(3), key=lambda c: rgb[c]) == families[backend], (label, rgb)
                seen.setdefault(backend, set()).add((label, line.get_marker()))
    for backend, pairs in seen.items():
        assert len({m for _, m in pairs}) == len({label for label, _ in pairs}), backend
    plt.close(fig)


# -- 19. set-up: each dependency declared once ---------------------------------------------------------------------


def test_each_dependency_is_declared_once():
    """`pip install -e .` then `.[test]` must not change a version the first chose (numpy was pinned in the test
    extra only, so installing the tests downgraded it): no package appears both in the dependencies and in an extra,
    nor twice in one list."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(specs):
        return [re.match(r"[A-Za-z0-9_.-]+", s)[0].lower().replace("_", "-") for s in specs]

    base = names(project["dependencies"])
    assert len(base) == len(set(base)), base
    for extra, specs in project.get("optional-dependencies", {}).items():
        again = set(names(specs)) & set(base)
        assert not again, f"[{extra}] declares {sorted(again)} again"
        assert len(names(specs)) == len(set(names(specs))), extra


# -- issue 53: the gate from the shell -----------------------------------------------------------------------------


def test_compare_of_a_committed_run_without_its_metadata_exits_2(tmp_path):
    """A committed run compared with a copy whose meta was deleted: exit 2 in one line naming the copy and --force,
    no traceback; with --force it compares, says so, and passes (the same rows)."""
    run = ROOT / "results" / "NVIDIA-H200" / "default"
    data = json.loads((run / "results.json").read_text())
    del data["meta"]
    bare = tmp_path / "results.json"
    bare.write_text(json.dumps(data))
    proc = _run("-m", "suite.run", "--compare", str(run), str(bare))
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and str(bare) in proc.stderr and "no metadata" in proc.stderr
    assert "--force" in proc.stderr
    forced = _run("-m", "suite.run", "--compare", str(run), str(bare), "--force")
    assert forced.returncode == 0, forced.stdout[-2000:]
    assert forced.stdout.startswith("note: compared without knowing whether they are comparable (--force)")


def test_the_parts_of_the_test_suite_run_every_test_once():
    """--test-part I/N (a machine whose calls are time-limited runs the suite in N calls): the N parts
    together run each collected test exactly once, each part every N-th test (each file's slow tests shared out)."""
    from conftest import part_indices

    for count, parts in ((5262, 2), (5262, 3), (7, 7), (2, 5)):
        chosen = [i for p in range(1, parts + 1) for i in part_indices(f"{p}/{parts}", count)]
        assert sorted(chosen) == list(range(count))
        assert max(len(part_indices(f"{p}/{parts}", count)) for p in range(1, parts + 1)) <= -(-count // parts)
    for bad in ("0/2", "3/2", "1", "a/b", "1/2/3"):
        with pytest.raises(pytest.UsageError, match="--test-part"):
            part_indices(bad, 10)


# -- output read by a reader that leaves early (| head) --------------------------------------------------------------


def _reader_gone(*args):
    """``python *args`` with standard output a pipe whose reader has already left: its first write fails (EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    try:
        return subprocess.run(
            [sys.executable, *args], stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=600
        )
    finally:
        os.close(write)


def _quiet(proc) -> None:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "BrokenPipeError" not in proc.stderr, proc.stderr  # not even the interpreter's flush at exit


def test_list_into_a_closed_pipe_ends_quietly_as_sigpipe_would():
    proc = _reader_gone("-m", "suite.run", "--list")
    _quiet(proc)
    assert proc.returncode == 141


def test_the_gate_into_a_closed_pipe_keeps_its_verdict():
    same = _reader_gone("-m", "suite.run", "--compare", str(H200_RUN), str(H200_RUN))
    _quiet(same)
    assert same.returncode == 0  # a run against itself passes (tests/test_compare.py), read or not


def test_report_into_a_closed_pipe_writes_its_files_and_says_so_by_its_status(tmp_path):
    proc = _reader_gone("-m", "suite.report", str(H200_RUN), "--out", str(tmp_path / "r"))
    _quiet(proc)
    assert proc.returncode == 0
    assert (tmp_path / "r" / "table.md").read_text() == (H200_RUN / "table.md").read_text()


def test_a_broken_pipe_that_is_not_stdouts_is_an_internal_error(capsys):
    """A worker's pipe breaking is a defect, whatever its exception's class: exit 3 with its line, not the quiet 141
    of a reader that left."""
    from suite.cli_exits import INTERNAL, guarded

    def body():
        raise BrokenPipeError(32, "Broken pipe")

    assert guarded(body, debug=False) == INTERNAL
    assert "internal error: BrokenPipeError" in capsys.readouterr().err
