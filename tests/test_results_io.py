"""Results are never lost or mixed (issue 22, items 7-9): a run directory of each run's own, the default results/
checked before the run, and files written whole or not at all, with the ones not written named. CPU runs of the
torch ceiling alone (seconds)."""

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import main_here

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
