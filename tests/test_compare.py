"""--compare as a regression gate, on synthetic rows: every row of either file gets one verdict, exit 0 / 1 / 2."""

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite.driver import compare
from suite.run import main


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
        "measured": True,
        "valid": True,
        "note": "",
    }
    row.update(kw)
    return row


H200 = {
    "gpu": "NVIDIA H200",
    "python": "3.12.3",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "cuda_core": "1.2.0",
    "cuda_bindings": "13.3.1",
    "nvrtc": "13.0",
    "cuda_runtime": "13.0",
    "driver": "580.159.04",
    "plan": {"id": "plan-of-the-test"},  # recorded, without timing options (runs older than them)
}


def _write(path, rows, meta=None):
    """A results.json of ``rows`` with complete metadata (``meta``: instead)."""
    path.write_text(json.dumps({"meta": H200 if meta is None else meta, "rows": rows}))
    return path


def test_verdicts_of_timed_pairs(tmp_path):
    old = _write(tmp_path / "old.json", [_row(stages=3, median_ms=1.0)])
    same = _write(tmp_path / "same.json", [_row(stages=3, median_ms=1.01)])
    slower = _write(tmp_path / "slow.json", [_row(stages=1, median_ms=1.3)])
    faster = _write(tmp_path / "fast.json", [_row(stages=3, median_ms=0.8)])
    wide = _write(tmp_path / "wide.json", [_row(stages=3, median_ms=1.05, iqr_ms=0.1)])  # 9.5% spread
    assert [r["verdict"] for r in compare.compare(old, same)[1]] == ["SAME"]
    res = compare.compare(old, slower)[1]
    assert [r["verdict"] for r in res] == ["SLOWER"] and res[0]["stages"] == "3 -> 1"
    assert [r["verdict"] for r in compare.compare(old, faster)[1]] == ["FASTER"]
    assert [r["verdict"] for r in compare.compare(old, wide)[1]] == ["SAME"]  # inside the recorded spread
    # the 2% floor: 1.0 vs 1.05 overlaps (1.02 > 1.029), 1.0 vs 1.06 does not
    assert compare.verdict(_row(median_ms=1.0, iqr_ms=0), _row(median_ms=1.04, iqr_ms=0)) == "SAME"
    assert compare.verdict(_row(median_ms=1.0, iqr_ms=0), _row(median_ms=1.06, iqr_ms=0)) == "SLOWER"


def _every_verdict():
    """OLD and NEW rows that produce each verdict at least once, plus the rows that must not be lost."""
    no_build = "no bf16 build: fp8 only"
    old = [
        _row(variant="same", median_ms=1.0),
        _row(variant="faster", median_ms=1.0),
        _row(variant="slower", median_ms=1.0),
        _row(variant="gone", median_ms=1.0),  # MISSING
        _row(variant="broken", median_ms=1.0),  # INVALID: fails validation in NEW
        _row(variant="untimed", median_ms=1.0),  # INVALID: timed in OLD, not timed in NEW
        _row(variant="was broken", valid=False, measured=False, median_ms=None),  # NEW: nothing to hold it against
        _row(variant="noisy", median_ms=1.0),  # NOISY and failing: spread 30% in NEW, median 8% slower
        _row(variant="noisy same", median_ms=1.0),  # NOISY, not failing: spread 30%, the same median
        _row(variant="still broken", valid=False, measured=False, median_ms=None, note="INVALID: not close"),
        _row(variant="no build", valid=None, measured=False, median_ms=None, note=no_build),
    ]
    new = [
        _row(variant="same", median_ms=1.005),
        _row(variant="faster", median_ms=0.5),
        _row(variant="slower", median_ms=2.0),
        _row(variant="broken", valid=False, measured=False, median_ms=None),
        _row(variant="untimed", valid=None, measured=False, median_ms=None),
        _row(variant="was broken", median_ms=1.0),
        _row(variant="added", median_ms=1.0),  # NEW
        _row(variant="added broken", valid=False, measured=False, median_ms=None),  # INVALID, in NEW only
        _row(variant="noisy", median_ms=1.08, iqr_ms=0.3),
        _row(variant="noisy same", median_ms=1.0, iqr_ms=0.3),
        _row(variant="still broken", valid=False, measured=False, median_ms=None, note="INVALID: not close"),
        _row(variant="no build", valid=None, measured=False, median_ms=None, note=no_build),
        _row(variant="added no build", valid=None, measured=False, median_ms=None, note=no_build),
    ]
    return old, new


def test_every_row_lands_in_exactly_one_verdict():
    old, new = _every_verdict()
    results = compare.compare_rows(old, new)
    got = {r["variant"].split(":")[1]: (r["verdict"], r["fails"]) for r in results}
    assert got == {
        "same": ("SAME", False),
        "faster": ("FASTER", False),
        "slower": ("SLOWER", True),
        "gone": ("MISSING", True),
        "broken": ("INVALID", True),
        "untimed": ("INVALID", True),
        "was broken": ("NEW", False),
        "added": ("NEW", False),
        "added broken": ("INVALID", True),
        "noisy": ("NOISY", True),
        "noisy same": ("NOISY", False),
        "still broken": ("STILL INVALID", False),
        "no build": ("NOT RUN", False),
        "added no build": ("NOT RUN", False),
    }
    # every row of each file is on exactly one line
    lines = compare.match(old, new)
    assert len(lines) == len(results)
    assert sorted(id(o) for o, _ in lines if o is not None) == sorted(map(id, old))
    assert sorted(id(n) for _, n in lines if n is not None) == sorted(map(id, new))
    assert compare.exit_code(results) == 1
    assert {r["verdict"] for r in results} == set(compare.VERDICTS)
    assert compare.exit_code([r for r in results if not r["fails"]]) == 0


def test_rows_untimed_for_the_same_reason_in_both_runs_pass(tmp_path, capsys):
    """Issue 53: a row with no build for its dtype (or refused, or failed in both) is the same in both runs: the
    gate passes a run compared with itself, and says why each such row was not timed."""
    rows = [
        _row(variant="timed"),
        _row(variant="fp8 only", dtype="bf16", valid=None, measured=False, median_ms=None, note="no bf16 build: x"),
        _row(variant="decode", valid=False, measured=False, median_ms=None, note="refused: M <= 256"),
    ]
    path = _write(tmp_path / "run.json", rows)
    assert main(["--compare", str(path), str(path)]) == 0
    out = capsys.readouterr().out
    assert "| NOT RUN" in out and "no bf16 build: x" in out and "| STILL INVALID" in out
    assert out.rstrip().endswith("3 rows: 1 SAME, 1 STILL INVALID, 1 NOT RUN; exit 0")
    # a row timed in OLD that NEW did not time is a loss, whatever the reason
    lost = _write(tmp_path / "lost.json", [rows[0], dict(rows[0], variant="fp8 only", dtype="bf16"), rows[2]])
    assert main(["--compare", str(lost), str(path)]) == 1
    assert "timed in OLD, not in NEW: no bf16 build: x" in capsys.readouterr().out


def test_duplicate_rows_are_matched_in_order_not_dropped():
    old = [_row(median_ms=1.0), _row(median_ms=2.0)]
    new = [_row(median_ms=1.0), _row(median_ms=2.0), _row(median_ms=3.0)]
    results = compare.compare_rows(old, new)
    assert [r["verdict"] for r in results] == ["SAME", "SAME", "NEW"]


def test_cross_stage_match_only_with_one_stage_count_each_side():
    one_each = compare.compare_rows([_row(stages=2)], [_row(stages=4)])
    assert [(r["verdict"], r["stages"]) for r in one_each] == [("SAME", "2 -> 4")]
    sweep = compare.compare_rows([_row(stages=2), _row(stages=3)], [_row(stages=4)])
    assert sorted(r["verdict"] for r in sweep) == ["MISSING", "MISSING", "NEW"]


@pytest.mark.parametrize(
    "new_rows, code",
    [
        ([_row(variant="a", median_ms=1.0), _row(variant="b", median_ms=0.5)], 0),  # SAME + FASTER
        ([_row(variant="a", median_ms=1.0), _row(variant="b", median_ms=1.0), _row(variant="c")], 0),  # + NEW
        ([_row(variant="a", median_ms=1.5), _row(variant="b", median_ms=1.0)], 1),  # SLOWER
        ([_row(variant="a", median_ms=1.0)], 1),  # b MISSING
        ([_row(variant="a", median_ms=1.0), _row(variant="b", valid=False, measured=False, median_ms=None)], 1),
    ],
)
def test_cli_exit_codes(tmp_path, capsys, new_rows, code):
    old = _write(tmp_path / "old.json", [_row(variant="a", median_ms=1.0), _row(variant="b", median_ms=1.0)])
    new = _write(tmp_path / "new.json", new_rows)
    assert main(["--compare", str(old), str(new)]) == code
    summary = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert f"; exit {code}" in summary


@pytest.mark.parametrize(
    "content, why",
    [
        ('{"rows": "x"}', "'rows' is a str, not a list"),
        ('{"rows": [{"measured": true}]}', "row 0: no 'problem'"),
        ('{"rows": [7]}', "row 0: a row is a int"),
        ('{"rows": []}', "holds no rows"),
        ("[]", "no top-level 'rows'"),
        ('{"meta": {}}', "no top-level 'rows'"),
        ("not json at all", "not JSON"),
        ("", "the file is empty"),
        (None, "cannot read it"),  # no such file
    ],
)
def test_malformed_file_is_one_line_naming_it(tmp_path, capsys, content, why):
    good = _write(tmp_path / "good.json", [_row()])
    bad = tmp_path / "bad file.json"
    if content is not None:
        bad.write_text(content)
    for argv in (["--compare", str(bad), str(good)], ["--compare", str(good), str(bad)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0] and why in lines[0], err
        assert out == ""


def test_malformed_file_from_the_shell(tmp_path):
    """The same through the real entry point: exit status 2, one line, no traceback."""
    good = _write(tmp_path / "good.json", [_row()])
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": [{"measured": true}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "suite.run", "--compare", str(good), str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr and "Traceback" not in proc.stderr


def test_nothing_comparable_is_an_error(tmp_path, capsys):
    old = _write(tmp_path / "old.json", [_row(problem="vector")])
    unrelated = _write(tmp_path / "unrelated.json", [_row(problem="gemm", shape="8x8x8", dtype="fp16")])
    assert main(["--compare", str(old), str(unrelated)]) == 2
    assert "share no" in capsys.readouterr().err
    cpu_run = _write(tmp_path / "cpu.json", [_row(measured=False, median_ms=None)])
    assert main(["--compare", str(cpu_run), str(old)]) == 2
    assert "no timed, valid row" in capsys.readouterr().err
    # a CPU run records no GPU: that it has nothing timed is said first (--force would not help)
    bare_cpu = _write(tmp_path / "bare.json", [_row(measured=False, median_ms=None)], meta={"mode": "cpu"})
    assert main(["--compare", str(bare_cpu), str(bare_cpu)]) == 2
    assert "no timed, valid row" in capsys.readouterr().err


def test_a_run_compared_with_itself_is_all_same(tmp_path, capsys):
    rows = [_row(variant=v, stages=s, median_ms=1.0 + s) for v in ("x", "y") for s in (1, 2, 3)]
    rows.append(_row(backend="torch", variant="copy_", stages=None, ceiling=True))
    path = _write(tmp_path / "run.json", rows)
    assert main(["--compare", str(path), str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("| SAME") == len(rows) and "7 rows: 7 SAME; exit 0" in out


# ---------------------------------------------------------------------------------------------------------------
# Issue 22: noise, metadata, hostile files, size, run directories
# ---------------------------------------------------------------------------------------------------------------


def test_a_noisy_row_never_passes_as_same():
    """An interval as wide as a 30% spread overlaps anything: NOISY, never SAME. It fails the gate when its median
    is slower than OLD's by more than the floor on each side; the same median (a run compared with itself) or nothing
    to hold it against is said, not failed."""
    assert compare.classify(_row(), _row(median_ms=1.05, iqr_ms=0.3)) == (
        "NOISY",
        "NEW samples spread 28.6% > 10% (IQR / median) and a slower median: time it again",
        True,
    )
    assert compare.classify(_row(), _row(median_ms=1.0, iqr_ms=0.3))[::2] == ("NOISY", False)
    assert compare.classify(_row(iqr_ms=0.3), _row(iqr_ms=0.3))[::2] == ("NOISY", False)  # itself
    assert compare.classify(_row(median_ms=1.0, iqr_ms=0.5), _row(median_ms=1.1))[::2] == ("NOISY", True)
    assert compare.classify(None, _row(iqr_ms=0.5))[::2] == ("NOISY", False)  # a NEW row not in OLD
    assert compare.classify(_row(), _row(iqr_ms=0.09))[0] == "SAME"  # 9%: inside the recorded spread
    results = compare.compare_rows([_row()], [_row(median_ms=1.05, iqr_ms=0.3)])
    assert compare.exit_code(results) == 1 and results[0]["verdict"] == "NOISY"


@pytest.mark.parametrize(
    "change, why",
    [
        ({"gpu": "NVIDIA A100-SXM4-80GB"}, "different GPU models NVIDIA H200"),
        ({"triton": "2.3.1"}, "different triton 3.6.0"),
        ({"torch": "1.13.1"}, "different torch 2.11.0+cu130"),
        ({"driver": "550.54.15"}, "different driver 580.159.04"),
    ],
)
def test_runs_that_are_not_comparable_are_refused(tmp_path, capsys, change, why):
    rows = [_row(variant=v, median_ms=m) for v, m in (("a", 1.0), ("b", 2.0))]
    old = _write(tmp_path / "old.json", rows, H200)
    new = _write(tmp_path / "new.json", [dict(r, median_ms=r["median_ms"] / 2) for r in rows], {**H200, **change})
    assert main(["--compare", str(old), str(new)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert why in err and "not comparable" in err and "--allow-different" in err
    # allowed: said above the verdicts, which then count as usual
    assert main(["--compare", str(old), str(new), "--allow-different"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("note: compared although they differ (--allow-different): ") and why[10:] in first
    assert out.index("note:") < out.index("| problem") and out.count("| FASTER") == 2


def test_runs_timed_differently_are_refused(tmp_path, capsys):
    """Another timer, L2 flush or launch changes the figures without changing a kernel: refused unless allowed;
    a run that does not record its method (older than the field) is compared as before."""
    timed = lambda timer, flush, launch: {  # noqa: E731
        **H200,
        "plan": {"options": {"timer": timer, "launch": launch, **({"flush": flush} if flush != "write" else {})}},
    }
    rows = [_row()]
    old = _write(tmp_path / "old.json", rows, timed("burst", "write", "graph"))
    for change, why in (
        (("burst", "read", "graph"), "different L2 flushes write (OLD"),
        (("adaptive", "write", "graph"), "different timers burst (OLD"),
        (("burst", "write", "eager"), "different launches graph (OLD"),
    ):
        new = _write(tmp_path / "new.json", rows, timed(*change))
        assert compare.comparable(
            json.loads(old.read_text())["meta"], json.loads(new.read_text())["meta"], allow_different=True
        )
        assert main(["--compare", str(old), str(new)]) == 2
        err = capsys.readouterr().err
        assert why.replace("OLD", "") in err and "--allow-different" in err, err
    same = _write(tmp_path / "same.json", rows, timed("burst", "write", "graph"))
    assert main(["--compare", str(old), str(same)]) == 0
    unrecorded = _write(tmp_path / "unrecorded.json", rows, H200)
    assert main(["--compare", str(unrecorded), str(old)]) == 0
    capsys.readouterr()


def test_minor_version_differences_are_said_not_refused(tmp_path, capsys):
    old = _write(tmp_path / "old.json", [_row()], H200)
    new = _write(tmp_path / "new.json", [_row()], {**H200, "triton": "3.9.0", "torch": "2.13.0"})
    assert main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "note: software differs: torch 2.11.0+cu130 -> 2.13.0, triton 3.6.0 -> 3.9.0"


def test_allow_different_needs_compare():
    proc = subprocess.run(
        [sys.executable, "-m", "suite.run", "--allow-different"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "--allow-different goes with --compare" in proc.stderr


def test_a_deeply_nested_file_is_bad_input(tmp_path, capsys):
    good = _write(tmp_path / "good.json", [_row()])
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for argv in (["--compare", str(deep), str(good)], ["--compare", str(good), str(deep)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and str(deep) in err and "nested too deeply" in err


def test_matching_is_linear():
    """16k rows (every variant at one stage count each side, the path that was once quadratic) in well under a
    second; 8x the rows take about 8x the time, not 64x. Timed in this process's CPU time, which another test
    process on the same cores does not inflate (wall time does, on a shared CI machine)."""
    import gc
    import time

    def timed(n):
        old = [_row(variant=f"v{i}", stages=2, median_ms=1.0) for i in range(n)]
        new = [_row(variant=f"v{i}", stages=3, median_ms=1.0) for i in range(n)]
        gc.collect()
        gc.disable()  # a collection of the other tests' garbage inside the timed call is not the matching's cost
        try:
            t0 = time.process_time()
            results = compare.compare_rows(old, new)
            elapsed = time.process_time() - t0
        finally:
            gc.enable()
        assert len(results) == n and all(r["verdict"] == "SAME" for r in results)
        return elapsed

    assert timed(16_000) < 2.0
    small, large = min(timed(2_000) for _ in range(3)), min(timed(16_000) for _ in range(3))
    assert large < 24 * small, (small, large)  # linear: ~8x; quadratic: ~64x


def test_compare_takes_run_directories(tmp_path, capsys):
    for name, ms in (("old", 1.0), ("new", 0.5)):
        (tmp_path / name).mkdir()
        _write(tmp_path / name / "results.json", [_row(median_ms=ms)], H200)
    assert main(["--compare", str(tmp_path / "old") + "/", str(tmp_path / "new")]) == 0
    assert "FASTER" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["--compare", str(tmp_path / "empty"), str(tmp_path / "new")]) == 2
    assert "a directory with no results.json" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# Issue 53: a gate that passes on itself; metadata required; per GPU; hostile files
# ---------------------------------------------------------------------------------------------------------------

# the curated runs, results/<gpu>/<name>/ and the profiles within them; not a CPU run's output (results/cpu/) or a
# timestamped run, both ignored by git
RESULTS = Path(__file__).parents[1] / "results"
COMMITTED = sorted(
    p.parent
    for p in RESULTS.glob("*/**/results.json")
    if p.relative_to(RESULTS).parts[0] != "cpu" and not p.parent.name[:1].isdigit()
)


@pytest.mark.parametrize("run", COMMITTED, ids=[f"{p.parent.name}/{p.name}" for p in COMMITTED])
def test_every_committed_run_compared_with_itself_passes(run, capsys):
    assert main(["--compare", str(run), str(run)]) == 0, capsys.readouterr().out[-2000:]
    assert capsys.readouterr().out.rstrip().endswith("; exit 0")


def test_two_runs_of_the_same_command_pass(tmp_path):
    """Two default runs, the same command on the same H200 one after the other (kept compressed under tests/data: the
    curated results/ holds one run per command)."""
    pair = []
    for i in (1, 2):
        run = tmp_path / f"run{i}"
        run.mkdir()
        data = gzip.decompress((Path(__file__).parent / "data" / "default-pair" / f"run{i}.json.gz").read_bytes())
        (run / "results.json").write_bytes(data)
        pair.append(run)
    results = compare.compare(*pair)[1]
    assert compare.exit_code(results) == 0, [r for r in results if r["fails"]]
    assert sum(r["verdict"] == "SAME" for r in results) > 400  # the pair's timed rows, matched and alike


# ids: a test whose id is "gpu" would be taken for one marked gpu (tests/conftest.py) and skipped without one
@pytest.mark.parametrize(
    "field", [None, "gpu", "plan", "torch", "driver"], ids=["all", "model", "plan", "torch", "driver"]
)
def test_missing_metadata_is_refused_unless_forced(tmp_path, capsys, field):
    meta = {} if field is None else {k: v for k, v in H200.items() if k != field}
    bare = _write(tmp_path / "bare.json", [_row()], meta)
    full = _write(tmp_path / "full.json", [_row()])
    for argv in (["--compare", str(bare), str(full)], ["--compare", str(full), str(bare)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and str(bare) in err and "--force" in err, err
        assert ("no metadata" if field is None else f"no {field} in its metadata") in err
        assert main([*argv, "--force"]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("note: compared without knowing whether they are comparable (--force)")


def test_force_needs_compare():
    proc = subprocess.run([sys.executable, "-m", "suite.run", "--force"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "--force goes with --compare" in proc.stderr


def test_a_file_of_several_gpus_is_compared_per_gpu(tmp_path, capsys):
    """A suite.merge --by gpu file: no meta.gpu (refused without --force), and rows of H100 and H200 with the same
    key; each is held against its own GPU's row, never the other's."""
    by_gpu = {"by": "gpu", "gpus": ["NVIDIA H100", "NVIDIA H200"], "plan": {"id": "p"}}
    rows = [_row(gpu="NVIDIA H100", median_ms=2.0), _row(gpu="NVIDIA H200", median_ms=1.0)]
    old = _write(tmp_path / "old.json", rows, by_gpu)
    assert main(["--compare", str(old), str(old)]) == 2
    assert "no gpu" in capsys.readouterr().err
    assert main(["--compare", str(old), str(old), "--force"]) == 0
    assert capsys.readouterr().out.count("| SAME") == 2
    swapped = _write(tmp_path / "new.json", [rows[0], dict(rows[1], median_ms=2.0)], by_gpu)
    results = compare.compare(old, swapped, force=True)[1]
    assert [r["verdict"] for r in results] == ["SAME", "SLOWER"]


def _fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize(
    "make, why",
    [
        (_fifo, "not a regular file (a FIFO)"),
        (lambda tmp_path: Path("/dev/zero"), "not a regular file (a character device)"),
        (lambda tmp_path: _write(tmp_path / "infinity.json", [_row(median_ms=1e400)]), "Infinity is not a number"),
        (lambda tmp_path: tmp_path / "inf.json", "out of range"),
        (lambda tmp_path: tmp_path / "nan.json", "NaN is not a number JSON allows"),
        (lambda tmp_path: tmp_path / "int.json", "more than 19 digits"),
    ],
)
def test_hostile_files_are_refused_quickly_from_the_shell(tmp_path, make, why):
    """Exit 2, one line naming the file, no traceback, in well under 5 s (a FIFO is never opened)."""
    good = _write(tmp_path / "good.json", [_row()])
    (tmp_path / "inf.json").write_text(json.dumps({"meta": H200, "rows": [_row()]}).replace("1.0,", "1e400,", 1))
    (tmp_path / "nan.json").write_text(json.dumps({"meta": H200, "rows": [_row(median_ms=float("nan"))]}))
    (tmp_path / "int.json").write_text(json.dumps({"meta": H200, "rows": [_row(stages=10**30)]}))
    bad = make(tmp_path)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "suite.run", "--compare", str(good), str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr and why in proc.stderr, proc.stderr


def test_an_incomplete_run_is_said(tmp_path, capsys):
    old = _write(tmp_path / "old.json", [_row(variant="a"), _row(variant="b")])
    cut = _write(tmp_path / "cut.json", [_row(variant="a")], {**H200, "complete": False})
    assert main(["--compare", str(old), str(cut)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"note: {cut} is an incomplete run (meta.complete false)") and "| MISSING" in out
