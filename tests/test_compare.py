"""--compare as a regression gate, on synthetic rows: every row of either file gets one verdict, exit 0 / 1 / 2."""

import json
import subprocess
import sys

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


def _write(path, rows, meta=None):
    path.write_text(json.dumps({"meta": meta or {}, "rows": rows}))
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


def _six_way():
    """OLD and NEW rows that produce each verdict once, plus the rows that must not be lost."""
    old = [
        _row(variant="same", median_ms=1.0),
        _row(variant="faster", median_ms=1.0),
        _row(variant="slower", median_ms=1.0),
        _row(variant="gone", median_ms=1.0),  # MISSING
        _row(variant="broken", median_ms=1.0),  # INVALID: fails validation in NEW
        _row(variant="untimed", median_ms=1.0),  # INVALID: not timed in NEW
        _row(variant="was broken", valid=False, measured=False, median_ms=None),  # NEW: nothing to hold it against
        _row(variant="noisy", median_ms=1.0),  # NOISY: spread 30% in NEW
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
        _row(variant="noisy", median_ms=1.0, iqr_ms=0.3),
    ]
    return old, new


def test_every_row_lands_in_exactly_one_verdict():
    old, new = _six_way()
    results = compare.compare_rows(old, new)
    got = {r["variant"].split(":")[1]: r["verdict"] for r in results}
    assert got == {
        "same": "SAME",
        "faster": "FASTER",
        "slower": "SLOWER",
        "gone": "MISSING",
        "broken": "INVALID",
        "untimed": "INVALID",
        "was broken": "NEW",
        "added": "NEW",
        "added broken": "INVALID",
        "noisy": "NOISY",
    }
    # every row of each file is on exactly one line
    lines = compare.match(old, new)
    assert len(lines) == len(results)
    assert sorted(id(o) for o, _ in lines if o is not None) == sorted(map(id, old))
    assert sorted(id(n) for _, n in lines if n is not None) == sorted(map(id, new))
    assert compare.exit_code(results) == 1
    assert {r["verdict"] for r in results} == set(compare.VERDICTS)


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
    """An interval as wide as a 30% spread overlaps anything: NOISY, and the gate fails (in NEW, matched or not, or
    in the OLD row it is held against)."""
    assert compare.classify(_row(), _row(median_ms=1.0, iqr_ms=0.3)) == (
        "NOISY",
        "NEW samples spread 30% > 10% (IQR / median): time it again",
    )
    assert compare.classify(None, _row(iqr_ms=0.5))[0] == "NOISY"  # a NEW row not in OLD
    assert compare.classify(_row(iqr_ms=0.5), _row())[0] == "NOISY"  # nothing to hold it against
    assert compare.classify(_row(), _row(iqr_ms=0.09))[0] == "SAME"  # 9%: inside the recorded spread
    results = compare.compare_rows([_row()], [_row(median_ms=1.0, iqr_ms=0.3)])
    assert compare.exit_code(results) == 1 and "NOISY" in compare.FAILING


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
}


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
    """16k rows (every variant at one stage count each side, the path that was quadratic: 98 s) in well under a
    second; 8x the rows take about 8x the time, not 64x. Timed in this process's CPU time, which another test
    process on the same cores does not inflate (wall time did: 8.4x for 4x the rows once, on CI's two cores)."""
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
