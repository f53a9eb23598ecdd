"""Results are never lost or mixed (issue 22, items 7-9): a run directory of each run's own, the default results/
checked before the run, and files written whole or not at all, with the ones not written named. CPU runs of the
torch ceiling alone (seconds)."""

import json
import os
import shlex
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import cut_run, main_here

from suite.driver import report

ROOT = Path(__file__).resolve().parents[1]
QUICK = ("--problem", "vector", "--variant", "copy_", "--no-progress")  # one torch row: seconds on a CPU
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _cli(*argv, cwd=None, preamble=""):
    """python -m suite.run without a GPU (hidden on a GPU machine); ``preamble`` runs first in the same process."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    code = f"{preamble}\nimport sys\nfrom suite.run import main\nsys.exit(main({list(argv)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=300, check=False
    )


def _main_here(*argv, cwd, monkeypatch, capsys) -> tuple[int, str, str]:
    """conftest.main_here from ``cwd`` (where the default results/ is)."""
    monkeypatch.chdir(cwd)
    return main_here(argv, capsys)


# -- 7. runs started in the same second --------------------------------------------------------------------------


def test_run_directories_are_made_exclusively(tmp_path):
    made = []
    threads = [
        threading.Thread(target=lambda: made.append(report.new_run_dir(tmp_path / "cpu", "20260101-000000")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8 and all(p.is_dir() for p in made)
    assert sorted(p.name for p in made) == sorted(["20260101-000000"] + [f"20260101-000000-{n}" for n in range(2, 9)])


def test_two_runs_in_the_same_second_keep_both_results(tmp_path):
    """The clock stopped at one second: each run still gets a directory of its own, and says which."""
    frozen = textwrap.dedent("""
        import datetime as real
        import suite.run

        class _Clock(real.datetime):
            @classmethod
            def now(cls, tz=None):
                return cls(2026, 1, 1, 12, 0, 0, tzinfo=tz)

        class _dt:
            datetime = _Clock
            timezone = real.timezone

        suite.run.dt = _dt
    """)
    procs = [_cli(*QUICK, "--seed", str(seed), cwd=tmp_path, preamble=frozen) for seed in (1, 2)]
    said = []
    for proc in procs:
        assert proc.returncode == 0, proc.stderr
        said.append(next(line for line in proc.stdout.splitlines() if line.startswith("wrote ")))
    dirs = sorted((tmp_path / "results" / "cpu").iterdir())
    assert [d.name for d in dirs] == ["20260101-120000", "20260101-120000-2"]
    assert {s.rsplit(" in ", 1)[1].rstrip("/") for s in said} == {str(Path("results/cpu") / d.name) for d in dirs}
    seeds = {json.loads((d / "results.json").read_text())["meta"]["command"].split("--seed ")[1] for d in dirs}
    assert seeds == {"1", "2"}  # neither run's files were overwritten by the other's


# -- 8. the default results/ is checked before the run -----------------------------------------------------------


@pytest.mark.parametrize("how", ["read-only mode", "unwritable filesystem", "a file"])
def test_an_unwritable_default_results_dir_is_refused_before_the_run(tmp_path, how, monkeypatch, capsys):
    if how == "read-only mode":
        if AS_ROOT:
            pytest.skip("root writes through any mode (the /proc case refuses root too)")
        (tmp_path / "results").mkdir(mode=0o500)
    elif how == "unwritable filesystem":
        (tmp_path / "results").symlink_to("/proc/self")  # a directory no one, root included, can create files in
    else:
        (tmp_path / "results").write_text("not a directory")
    code, out, err = _main_here(*QUICK, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("error: results/ (the default output; --out DIR writes elsewhere): ")
    assert "No CUDA GPU here" not in err and out == ""  # refused before anything ran


def test_out_that_no_file_can_be_created_in_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = _main_here(
        *QUICK, "--out", "/proc/self/pipesuite-results", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 2 and "error: --out: cannot create /proc/self/pipesuite-results" in err


# -- 9. a full disk while writing ----------------------------------------------------------------------------------

FULL_DISK = textwrap.dedent("""
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
""")


def test_a_full_disk_names_the_files_not_written_and_leaves_none_half_written(tmp_path):
    out = tmp_path / "run"
    proc = _cli(*QUICK, "--out", str(out), cwd=tmp_path, preamble=FULL_DISK)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith(f"error: could not write results.json, table.md in {out}/ (")
    assert "File too large" in error and error.endswith("; written: results.csv")
    assert "the fallback under" in proc.stderr and "failed too" in proc.stderr  # the limit holds there too
    assert sorted(p.name for p in out.iterdir()) == ["results.csv"]  # no temporary file, nothing half-written
    assert (out / "results.csv").read_text().count("\n") == 2  # whole: the header and the row


def test_write_error_says_which_files(tmp_path, monkeypatch):
    """In-process: a writer that fails for one file leaves the others written and names it."""
    real = report._atomic_write

    def failing(path, data):
        if path.name == "table.md":
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(report, "_atomic_write", failing)
    rows = [
        {
            "problem": "vector",
            "shape": "8",
            "dtype": "fp32",
            "backend": "torch",
            "variant": "copy_",
            "stages": None,
            "unit": "GB/s",
            "ceiling": True,
            "valid": True,
            "measured": False,
            "note": "",
        }
    ]
    with pytest.raises(report.WriteError) as info:
        report.write(rows, {"gpu": None}, tmp_path / "out")
    assert [name for name, _ in info.value.failed] == ["table.md"]
    assert sorted(p.name for p in info.value.written) == ["results.csv", "results.json"]
    assert "could not write table.md" in str(info.value) and "No space left on device" in str(info.value)


# -- issue 53, item 3: the write path ------------------------------------------------------------------------------


def test_a_dangling_symlink_out_is_refused_at_once(tmp_path):
    """From the shell: exit 2 in under 5 s, before anything runs, nothing created at the link's target."""
    import time

    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone" / "deeper")
    t0 = time.monotonic()
    proc = _cli(*QUICK, "--out", str(out))
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        proc.stderr.strip()
        == f"error: --out: {out} is a symlink to {tmp_path / 'gone' / 'deeper'}, which does not exist"
    )
    assert not (tmp_path / "gone").exists()


def test_a_symlink_to_a_directory_is_followed(tmp_path, monkeypatch, capsys):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    code, _, err = _main_here(
        *QUICK, "--out", str(tmp_path / "link"), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, err
    assert json.loads((tmp_path / "real" / "results.json").read_text())["meta"]["complete"] is True


def test_an_out_holding_a_run_is_refused_unless_overwrite(tmp_path, monkeypatch, capsys):
    """Two runs never silently share one --out: the second is refused before it runs; --overwrite replaces the
    first's files, its stale plots included."""
    out = tmp_path / "out"
    assert _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    before = (out / "results.json").read_text()
    code, stdout, err = _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and stdout == "" and "holds an earlier run's results (--overwrite replaces them)" in err
    assert (out / "results.json").read_text() == before
    (out / "gemm.png").write_bytes(b"\x89PNG stale")  # a plot of a problem the next run does not draw
    (out / "notes.txt").write_text("the user's own")
    args = (*QUICK, "--seed", "7", "--out", str(out), "--overwrite")
    assert _main_here(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    assert not (out / "gemm.png").exists() and (out / "notes.txt").exists()
    assert "--seed 7" in json.loads((out / "results.json").read_text())["meta"]["command"]


def test_the_recorded_command_is_quoted_as_a_shell_reads_it(tmp_path, monkeypatch, capsys):
    """A variant name or a path has spaces: meta.command quotes them, so the command runs again as written."""
    from suite.run import command_line

    out = tmp_path / "out dir"
    args = ("--problem", "vector", "--variant", "torch:copy_", "--size", "4097", "--no-progress", "--out", str(out))
    assert _main_here(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    command = json.loads((out / "results.json").read_text())["meta"]["command"]
    assert shlex.split(command)[3:] == list(args)
    spaced = ("--problem", "gemm", "--variant", "ptx:128x256x64 ws 2wg persistent tma-store tma+wgmma")
    assert shlex.split(command_line(spaced))[3:] == list(spaced)


def test_an_out_another_run_holds_is_refused(tmp_path, monkeypatch, capsys):
    from suite.driver import results_io

    out = tmp_path / "out"
    held = results_io.lock_out(out)  # another run, writing there now
    try:
        code, _, err = _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
        assert code == 2 and f"another run is writing to {out}" in err, err
        assert not list(out.iterdir())
    finally:
        os.close(held)
    assert _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 0


def _fake_execute(rows_per_job, then):
    """sweep.execute that reports each job's rows to on_rows, then ends as ``then`` says."""

    def execute(opts, on_gpu, *, on_rows=None, on_plan=None, **kw):
        on_plan({"plan": {"id": "fake"}, "shard": {"index": 1, "count": 1, "jobs": [0, 1]}})
        done = []
        for rows in rows_per_job:
            done += rows
            on_rows(list(done))
        if isinstance(then, BaseException):
            raise then
        return done, {"plan": {"id": "fake"}, "shard": {"index": 1, "count": 1, "jobs": [0, 1]}}

    return execute


def _fake_row(variant):
    return {
        "problem": "vector",
        "shape": "8",
        "dtype": "fp32",
        "backend": "torch",
        "variant": variant,
        "stages": None,
        "unit": "GB/s",
        "ceiling": False,
        "valid": True,
        "measured": False,
        "note": "",
    }


def test_results_are_written_after_each_job_and_complete_at_the_end(tmp_path, monkeypatch, capsys):
    from suite.driver import results_io, sweep

    out = tmp_path / "out"
    seen = []
    real = results_io.write_record

    def spy(out_dir, rows, meta, complete):
        path = real(out_dir, rows, meta, complete)
        data = json.loads(path.read_text())
        seen.append((len(data["rows"]), data["meta"]["complete"]))
        return path

    monkeypatch.setattr(results_io, "write_record", spy)
    monkeypatch.setattr(sweep, "execute", _fake_execute([[_fake_row("a")], [_fake_row("b")]], None))
    code, _, err = _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    assert seen == [(1, False), (2, False)]  # after each job, atomically (no temporary file left)
    final = json.loads((out / "results.json").read_text())
    assert final["meta"]["complete"] is True and len(final["rows"]) == 2
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_ctrl_c_keeps_what_was_measured(tmp_path, monkeypatch, capsys):
    from suite.driver import sweep

    out = tmp_path / "out"
    monkeypatch.setattr(sweep, "execute", _fake_execute([[_fake_row("a")]], KeyboardInterrupt()))
    code, _, err = _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 130 and "interrupted: 1 row(s) measured so far saved in" in err and "Traceback" not in err
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["complete"] is False and [r["variant"] for r in data["rows"]] == ["a"]
    assert data["meta"]["plan"] == {"id": "fake"}  # a cut run still names its plan, for compare and merge
    # the rows a driver attaches to the interrupt (all it measured, the job cut short included) win
    interrupt = KeyboardInterrupt()
    interrupt.rows = [_fake_row("a"), _fake_row("b, cut short")]
    monkeypatch.setattr(sweep, "execute", _fake_execute([[_fake_row("a")]], interrupt))
    code, _, err = _main_here(
        *QUICK, "--out", str(out), "--overwrite", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 130 and len(json.loads((out / "results.json").read_text())["rows"]) == 2


def test_the_plan_is_known_before_the_first_job(tmp_path):
    """sweep.execute hands its plan to on_plan once, before any job's rows: what a run cut short writes names it."""
    from suite.driver import bench, sweep

    events = []
    opts = bench.Options(problems=("vector",), variants=("triton:tile loop",), sizes={"vector": (4097, 8195)})
    rows, meta = sweep.execute(
        opts,
        on_gpu=False,
        progress=False,
        on_plan=lambda info: events.append(("plan", info)),
        on_rows=lambda rows: events.append(("rows", len(rows))),
    )
    assert [e[0] for e in events] == ["plan", "rows", "rows"] and len(rows) == 4  # each size: the ceiling, the variant
    plan = events[0][1]
    assert set(plan) == {"plan", "shard", "timer", "launch"} and all(plan[k] == meta[k] for k in plan)


def test_a_failed_final_write_falls_back_to_the_temp_dir(tmp_path, monkeypatch, capsys):
    from suite.driver import report, sweep

    out = tmp_path / "out"
    real = report.write

    def full_disk_in_out(rows, meta, out_dir, record=True):
        if Path(out_dir) == out:
            raise report.WriteError(out_dir, [], [("results.json", OSError(28, "No space left on device"))])
        return real(rows, meta, out_dir, record)

    monkeypatch.setattr(report, "write", full_disk_in_out)
    monkeypatch.setattr(sweep, "execute", _fake_execute([[_fake_row("a")]], None))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    code, _, err = _main_here(*QUICK, "--out", str(out), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1 and "No space left on device" in err, err
    (fallback,) = (tmp_path / "tmp").iterdir()
    assert f"the results were written to {fallback}/ instead" in err
    data = json.loads((fallback / "results.json").read_text())
    assert data["meta"]["complete"] is True and data["rows"][0]["variant"] == "a"


def test_internal_errors_are_one_line_exit_3(tmp_path, monkeypatch, capsys):
    from suite.driver import sweep

    def broken(*a, **kw):
        raise ZeroDivisionError("a defect")

    monkeypatch.setattr(sweep, "execute", broken)
    code, _, err = _main_here(
        *QUICK, "--out", str(tmp_path / "o"), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert (
        code == 3
        and err.strip().splitlines()[-1] == "internal error: ZeroDivisionError: a defect (--debug shows where)"
    )
    assert "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        from suite.run import main

        main([*QUICK, "--out", str(tmp_path / "p"), "--debug"])


def test_absurd_shard_counts_are_usage_errors():
    proc = _cli(*QUICK, "--shard", "1/100000000000")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        "error: --shard: 100000000000 shards: at most 10000 (a shard per job is the most that helps)"
    )


def test_help_documents_the_exit_codes():
    from suite.run import __doc__ as doc

    for line in ("0    every row valid", "1    a row failed", "2    a usage or input error", "3    an internal error"):
        assert line in doc
    assert "130  interrupted" in doc


def test_a_run_that_ends_before_writing_leaves_no_empty_directory(tmp_path, monkeypatch, capsys):
    from suite.driver import sweep

    def broken(*a, **kw):
        raise ZeroDivisionError("before any job")

    monkeypatch.setattr(sweep, "execute", broken)
    assert _main_here(*QUICK, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 3
    assert not (tmp_path / "results").exists()  # neither results/cpu/<stamp> nor results/ itself
    kept = tmp_path / "mine"
    kept.mkdir()  # the user's own (empty) directory stays
    assert _main_here(*QUICK, "--out", str(kept), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)[0] == 3
    assert kept.is_dir()


# -- a cut run finished later: --resume -----------------------------------------------------------------------------

# two jobs of 13 rows each (the ceiling, and six depths of a Triton and of a PTX variant): on a GPU every vector
# variant would time for minutes
TWO_JOBS = (
    "--problem",
    "vector",
    "--size",
    "4096",
    "8192",
    "--variant",
    "triton:tile loop 2KiB",
    "ptx:cp.async ring 2KiB",
    "--no-progress",
)


def _cut_copy(full: Path, to: Path, keep_jobs: int, keep_rows: int) -> dict:
    """A copy of the run in ``full`` as a time limit leaves it: its first ``keep_jobs`` jobs whole, ``keep_rows``
    rows of the next (a job cut half-way: on_rows writes whole jobs, a driver's interrupt may attach more)."""
    to.mkdir()
    data = json.loads((full / "results.json").read_text())
    cut_run(data, sorted({r["job"] for r in data["rows"]}), keep_jobs, keep_rows)
    (to / "results.json").write_text(json.dumps(data))
    return data


def test_resume_runs_only_what_a_cut_run_left_and_gives_the_whole_runs_rows(tmp_path, monkeypatch, capsys):
    from suite.driver import jobs as running

    full = tmp_path / "full"
    code, _, err = _main_here(*TWO_JOBS, "--out", str(full), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    cut = _cut_copy(full, tmp_path / "cut", keep_jobs=1, keep_rows=3)
    cut["meta"]["gpu_id"] = "GPU-of-the-cut-run"  # the resumed run may be on another board of the same model
    (tmp_path / "cut" / "results.json").write_text(json.dumps(cut))
    ran = []
    real = running.run_jobs
    monkeypatch.setattr(
        running, "run_jobs", lambda jobs, *a, **k: ran.append([j.index for j in jobs]) or real(jobs, *a, **k)
    )
    code, _, err = _main_here(
        *TWO_JOBS, "--out", str(tmp_path / "cut"), "--resume", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, err
    assert ran == [[1]]  # the finished job is kept, the half-done one runs again whole
    kept_rows = sum(r["job"] == 0 for r in cut["rows"])
    assert f"resuming: 1 of 2 jobs finished earlier ({kept_rows} rows kept), 1 to run" in err
    whole = json.loads((full / "results.json").read_text())
    resumed = json.loads((tmp_path / "cut" / "results.json").read_text())
    # the rows run again are measured again (on a GPU their notes carry the timing's spread), so they match the
    # whole run's by what was run and its check; the kept rows are the cut run's, every field
    fields = ("job", "plan_row", "backend", "variant", "stages", "valid", "max_abs_error")
    assert [[r[f] for f in fields] for r in resumed["rows"]] == [[r[f] for f in fields] for r in whole["rows"]]
    kept = sum(r["job"] == 0 for r in cut["rows"])
    assert [r for r in resumed["rows"] if r["job"] == 0] == [r for r in cut["rows"] if r["job"] == 0]
    assert resumed["meta"]["complete"] is True and resumed["meta"]["resumed"] == {"kept_jobs": [0], "kept_rows": kept}
    assert resumed["meta"]["resumed_from"][0]["rows"] == kept + 3
    assert resumed["meta"]["resumed_from"][0]["date"] == cut["meta"]["date"]
    assert resumed["meta"]["resumed_from"][0]["gpu_id"] == "GPU-of-the-cut-run"  # where the kept rows ran
    assert "### vector 8192" in (tmp_path / "cut" / "table.md").read_text()  # the report holds both parts


@pytest.mark.parametrize(
    "case, says",
    [
        ("complete", "that run is complete"),
        ("no record", "holds no results.json to resume"),
        ("other arguments", "the earlier run is of plan"),
        ("other software", "the cut run had torch 0.0.1"),
        ("other runtime", "the cut run had cuda_runtime 0.1"),
        ("malformed plan", "not a pipesuite run that records its plan"),
        ("with --overwrite", "pass one of them"),
        ("without --out", "needs --out DIR"),
    ],
)
def test_resume_refuses_what_it_cannot_finish(case, says, tmp_path, monkeypatch, capsys):
    full = tmp_path / "full"
    code, _, err = _main_here(*QUICK, "--out", str(full), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    target, argv = tmp_path / "cut", list(QUICK)
    if case == "complete":
        target = full
    elif case == "no record":
        target.mkdir()
    else:
        data = _cut_copy(full, target, keep_jobs=0, keep_rows=0)
        if case == "other arguments":
            argv += ["--size", "4096"]
        if case in ("other software", "other runtime", "malformed plan"):
            data["meta"].update(
                {"other software": {"torch": "0.0.1"}, "other runtime": {"cuda_runtime": "0.1"}}.get(case)
                or {"plan": "x"}
            )
            (target / "results.json").write_text(json.dumps(data))
    argv += {"with --overwrite": ["--overwrite"], "without --out": []}.get(case, [])
    argv += [] if case == "without --out" else ["--out", str(target)]
    before = {p.name: p.read_bytes() for p in target.iterdir()} if target.exists() else {}
    code, _, err = _main_here(*argv, "--resume", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    last = err.strip().splitlines()[-1]  # (after the CPU notice, where the plan had to be built first)
    assert code == 2 and last.startswith("error: --resume") and says in last and "Traceback" not in err, err
    assert ({p.name: p.read_bytes() for p in target.iterdir()} if target.exists() else {}) == before  # untouched


@pytest.mark.parametrize("damage", ["a row twice, another missing", "rows a failed device marked not run"])
def test_resume_runs_again_a_job_whose_rows_are_not_each_of_its_plan_rows_once(damage, tmp_path, monkeypatch, capsys):
    from suite.driver import jobs as running

    full = tmp_path / "full"
    code, _, err = _main_here(*TWO_JOBS, "--out", str(full), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    cut = _cut_copy(full, tmp_path / "cut", keep_jobs=1, keep_rows=0)
    if damage.startswith("a row twice"):
        cut["rows"][1] = dict(cut["rows"][0])  # the job still has as many rows as the plan gives it
    else:
        cut["rows"][0].update(failure="device", valid=False, note="not run: the GPU failed")
    (tmp_path / "cut" / "results.json").write_text(json.dumps(cut))
    ran = []
    real = running.run_jobs
    monkeypatch.setattr(
        running, "run_jobs", lambda jobs, *a, **k: ran.append([j.index for j in jobs]) or real(jobs, *a, **k)
    )
    code, _, err = _main_here(
        *TWO_JOBS, "--out", str(tmp_path / "cut"), "--resume", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and ran == [[0, 1]], (ran, err)
    rows = json.loads((tmp_path / "cut" / "results.json").read_text())["rows"]
    assert [(r["job"], r["plan_row"]) for r in rows] == [(r["job"], r["plan_row"]) for r in json.loads(
        (full / "results.json").read_text())["rows"]]  # fmt: skip


def test_a_resume_cut_before_its_plan_leaves_the_cut_run_as_it_was(tmp_path, monkeypatch, capsys):
    from suite.driver import plan as planning

    full = tmp_path / "full"
    code, _, err = _main_here(*TWO_JOBS, "--out", str(full), cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    _cut_copy(full, tmp_path / "cut", keep_jobs=1, keep_rows=0)
    before = (tmp_path / "cut" / "results.json").read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(planning, "build", interrupted)
    code, _, err = _main_here(
        *TWO_JOBS, "--out", str(tmp_path / "cut"), "--resume", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 130 and "holds the cut run as it was" in err, err
    assert (tmp_path / "cut" / "results.json").read_bytes() == before


@pytest.mark.parametrize("case", ["dangling --out", "--compare of a FIFO"])
def test_the_early_refusals_import_no_torch(tmp_path, case):
    """--compare and a bad --out answer from the files and flags alone: torch (seconds to import on a GPU machine,
    more under load) is never imported on their way, so "at once" holds however busy the machine is."""
    if case == "dangling --out":
        out = tmp_path / "out"
        out.symlink_to(tmp_path / "gone")
        argv = (*QUICK, "--out", str(out))
    else:
        os.mkfifo(tmp_path / "fifo")
        argv = ("--compare", str(tmp_path / "fifo"), str(tmp_path / "fifo"))
    check = "import atexit, sys\natexit.register(lambda: print('torch' in sys.modules))"
    proc = _cli(*argv, preamble=check)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
    assert proc.stdout.strip() == "False", "torch was imported before the refusal"
