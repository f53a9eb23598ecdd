"""python -m suite.merge: shards combine into the full run's results; overlapping, missing, mixed-GPU, mixed-software
and mixed-plan inputs are refused in one line with exit 2; --allow-partial marks the hole; --by gpu puts GPU models
side by side. Shards here are synthetic (the real default plan, rows with made-up times) except in the end-to-end
test, which merges real CPU shard runs of the CLI."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cut_run

from suite import merge
from suite.driver import bench, report
from suite.driver import plan as planning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOFTWARE = {
    "python": "3.12.3",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "cuda_core": "1.2.0",
    "nvrtc": "13.0",
    "driver": "580.65",
    "cuda_runtime": "12.8",
    "suite_source": "0123456789abcdef",
}


@pytest.fixture(scope="module")
def gemm_plan():
    return planning.build(
        bench.Options(problems=("gemm",), dtypes=("fp16", "bf16"), shape_sets=("square",)), on_gpu=True
    )


def _rows(plan, jobs, gpu="NVIDIA H200", measured=False, speed=1.0):
    rows = []
    for job in jobs:
        for spec, row in zip(job.rows, bench.skeleton(job)):
            row.update(valid=True if spec.runs else None, gpu_index=0, gpu_uuid=f"GPU-{gpu}")
            if measured and spec.runs and job.dtype == "fp16":  # one dtype: the plots are per shape
                median = (1.0 + 0.01 * row["plan_row"]) / speed
                row.update(
                    measured=True,
                    median_ms=median,
                    iqr_ms=0.001,
                    spread=0.001,
                    samples=50,
                    throughput=100.0 / median,
                    ratio_to_ceiling=0.9,
                )
            rows.append(row)
    return rows


def _part(path, plan, index=1, count=1, gpu="NVIDIA H200", measured=False, speed=1.0, **meta_changes):
    jobs = plan.shard(index, count)
    meta = {
        "date": "2026-11-30T12:00:00+00:00",
        "host": f"node{index}",
        **SOFTWARE,
        "gpu": gpu,
        "plan": plan.meta(),
        "shard": {"index": index, "count": count, "jobs": [j.index for j in jobs]},
        "phase_seconds": {"validate": 1.0, "time": 2.0, "total": 4.0},
        "gpus": [{"index": 0, "uuid": f"GPU-{gpu}", "name": gpu}],
        **meta_changes,
    }
    report.write(_rows(plan, jobs, gpu, measured, speed), meta, path)
    return path


def _merge(*argv):
    """suite.merge in this process: (exit status, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = merge.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _body(path):
    text = (path / "table.md").read_text()
    return text[text.index("###") : text.index(report.RUN_HEADING)]


def test_three_shards_rebuild_the_full_run(gemm_plan, tmp_path):
    full = _part(tmp_path / "full", gemm_plan, measured=True)
    shards = [_part(tmp_path / f"s{i}", gemm_plan, i, 3, measured=True) for i in (3, 1, 2)]  # any order
    code, out, err = _merge(*shards, "--out", tmp_path / "merged")
    assert code == 0, err
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    expected = json.loads((full / "results.json").read_text())
    assert merged["rows"] == expected["rows"]  # every row, once, in plan order
    assert _body(tmp_path / "merged") == _body(full)  # the same tables
    assert (tmp_path / "merged" / "results.csv").read_text() == (full / "results.csv").read_text()
    assert (tmp_path / "merged" / "gemm.png").read_bytes()[:4] == b"\x89PNG"
    meta = merged["meta"]
    assert meta["plan"]["id"] == gemm_plan.id and meta["shard"]["jobs"] == list(range(len(gemm_plan.jobs)))
    assert meta["shard"]["parts"] == ["3/3", "1/3", "2/3"] and meta["merge"]["partial"] is False
    assert meta["phase_seconds"]["time"] == 6.0 and meta["host"] == "node3, node1, node2"
    assert [p["shard"] for p in meta["merge"]["parts"]] == ["3/3", "1/3", "2/3"]
    assert "merged 3 result(s)" in out


def test_merged_cpu_shards_print_the_cpu_summary(gemm_plan, tmp_path):
    """Shards that timed nothing (CPU runs) merge to what suite.run prints for such a run: the compact summary."""
    from suite.driver import report

    shards = [_part(tmp_path / f"s{i}", gemm_plan, i, 2, measured=False) for i in (1, 2)]
    code, out, err = _merge(*shards, "--out", tmp_path / "merged")
    assert code == 0, err
    rows = json.loads((tmp_path / "merged" / "results.json").read_text())["rows"]
    assert out.startswith(report.cpu_summary(rows, merge.WIDTH)) and "merged 2 result(s)" in out


def test_each_parts_roofline_is_kept_where_the_parts_differ(gemm_plan, tmp_path):
    """Shards timed on two boards: the merged metadata lists each part's roofline and board, not the first part's
    alone (its rows' ratio_to_roofline were computed from their own part's); figures all parts share stay."""
    roof = {"bandwidth_gbs": 4258.4, "peak_tflops": {"fp16": 795.6}}
    shards = [
        _part(tmp_path / "s1", gemm_plan, 1, 2, measured=True, roofline=roof, gpu_id="GPU-a", memory_latency_ns=335.1),
        _part(
            tmp_path / "s2",
            gemm_plan,
            2,
            2,
            measured=True,
            roofline=dict(roof, peak_tflops={"fp16": 767.4}),
            gpu_id="GPU-b",
            memory_latency_ns=335.1,
        ),
    ]
    code, _, err = _merge(*shards, "--out", tmp_path / "merged")
    assert code == 0, err
    meta = json.loads((tmp_path / "merged" / "results.json").read_text())["meta"]
    assert meta["roofline"] == [
        {"shard": "1/2", "roofline": roof},
        {"shard": "2/2", "roofline": dict(roof, peak_tflops={"fp16": 767.4})},
    ]
    assert meta["gpu_id"] == [{"shard": "1/2", "gpu_id": "GPU-a"}, {"shard": "2/2", "gpu_id": "GPU-b"}]
    assert meta["memory_latency_ns"] == 335.1
    assert "767.4" in (tmp_path / "merged" / "table.md").read_text()


def test_a_partial_merge_completes_with_the_missing_shard(gemm_plan, tmp_path):
    """Shards 1 and 2 merged with --allow-partial, then that merge with shard 3: the full run, the hole filled."""
    one, two, three = (_part(tmp_path / f"s{i}", gemm_plan, i, 3) for i in (1, 2, 3))
    assert _merge(one, two, "--allow-partial", "--out", tmp_path / "m12")[0] == 0
    code, _, err = _merge(tmp_path / "m12", three, "--out", tmp_path / "all")
    assert code == 0, err
    assert _merge(one, two, three, "--out", tmp_path / "direct")[0] == 0
    rows = json.loads((tmp_path / "all" / "results.json").read_text())["rows"]
    assert rows == json.loads((tmp_path / "direct" / "results.json").read_text())["rows"]
    assert not any(r["backend"] == "missing" for r in rows)


@pytest.mark.parametrize(
    "case, says",
    [
        ("overlap", "overlapping shards: "),
        ("overlap other count", "overlapping shards: "),
        ("missing", "missing shards: 2/3 ("),
        ("gpu", "mixed GPU models: "),
        ("software", "mixed software versions: torch 2.11.0 in "),
        ("source", "mixed software versions: suite_source "),
        ("plan", "mixed plans: "),
    ],
)
def test_refusals_are_one_line_and_exit_2(gemm_plan, tmp_path, case, says):
    one, two, three = (_part(tmp_path / f"s{i}", gemm_plan, i, 3) for i in (1, 2, 3))
    other = planning.build(
        bench.Options(problems=("gemm",), dtypes=("fp16", "bf16"), shape_sets=("square",), seed=7), on_gpu=True
    )
    parts = {
        "overlap": [one, two, three, _part(tmp_path / "again", gemm_plan, 2, 3)],
        "overlap other count": [one, two, three, _part(tmp_path / "half", gemm_plan, 1, 2)],
        "missing": [one, three],
        "gpu": [one, two, _part(tmp_path / "h100", gemm_plan, 3, 3, gpu="NVIDIA H100 80GB HBM3")],
        "software": [one, two, _part(tmp_path / "sw", gemm_plan, 3, 3, torch="2.10.0")],
        "source": [one, two, _part(tmp_path / "src", gemm_plan, 3, 3, suite_source="fedcba9876543210")],
        "plan": [one, two, _part(tmp_path / "seed7", other, 3, 3)],
    }[case]
    code, out, err = _merge(*parts, "--out", tmp_path / "merged")
    assert code == 2 and err.startswith("error: " + says) and len(err.strip().splitlines()) == 1, err
    assert out == "" and not (tmp_path / "merged").exists()


def test_allow_partial_marks_the_hole(gemm_plan, tmp_path):
    one, three = _part(tmp_path / "s1", gemm_plan, 1, 3), _part(tmp_path / "s3", gemm_plan, 3, 3)
    code, _, err = _merge(one, three, "--allow-partial", "--out", tmp_path / "partial")
    assert code == 0 and "partial:" in err
    data = json.loads((tmp_path / "partial" / "results.json").read_text())
    hole = gemm_plan.shard(2, 3)
    marks = [r for r in data["rows"] if r["backend"] == "missing"]
    assert [r["job"] for r in marks] == [j.index for j in hole]
    assert all("not merged: shard 2/3" in r["note"] for r in marks)
    assert {(r["problem"], r["dtype"], r["shape"]) for r in marks} == {
        (j.problem, j.dtype_label, j.shape) for j in hole
    }
    assert data["meta"]["merge"]["partial"] is True and len(data["meta"]["merge"]["missing"]) == len(hole)
    assert [r["job"] for r in data["rows"]] == sorted(r["job"] for r in data["rows"])  # the hole in its place
    assert "missing:" in (tmp_path / "partial" / "table.md").read_text()


def _cut(path, keep_jobs, keep_rows):
    """The shard run at ``path`` as a time limit leaves it: its first ``keep_jobs`` jobs whole, ``keep_rows`` rows of
    the next, nothing after, ``meta.complete`` false."""
    file = path / "results.json"
    data = json.loads(file.read_text())
    file.write_text(json.dumps(cut_run(data, data["meta"]["shard"]["jobs"], keep_jobs, keep_rows)))
    return path


def test_a_cut_shard_gives_its_finished_jobs_and_the_rest_are_holes(gemm_plan, tmp_path):
    one, two = (_part(tmp_path / f"s{i}", gemm_plan, i, 2) for i in (1, 2))
    jobs = [j.index for j in gemm_plan.shard(2, 2)]
    assert len(jobs) >= 3
    _cut(two, 1, 2)
    code, _, err = _merge(one, two, "--out", tmp_path / "refused")
    assert code == 2 and "shard 2/2 was cut before it finished" in err and "pass --allow-partial" in err, err
    code, _, err = _merge(one, two, "--allow-partial", "--out", tmp_path / "partial")
    assert code == 0, err
    data = json.loads((tmp_path / "partial" / "results.json").read_text())
    marks = [r for r in data["rows"] if r["backend"] == "missing"]
    assert [r["job"] for r in marks] == jobs[1:]  # the job it was in (its 2 rows dropped) and those after
    assert all("not merged: shard 2/2 was cut before it finished" in r["note"] for r in marks)
    kept = [r for r in data["rows"] if r["backend"] != "missing"]
    assert len(kept) == gemm_plan.row_count - sum(len(gemm_plan.jobs[j].rows) for j in jobs[1:])
    assert data["meta"]["complete"] is False and data["meta"]["shard"]["jobs"] == sorted(
        set(range(len(gemm_plan.jobs))) - set(jobs[1:])
    )
    assert "--resume it" in _merge(one, two, "--out", tmp_path / "refused-again")[2]
    resumed = json.loads((two / "results.json").read_text())
    resumed["meta"]["resumed"] = {"kept_jobs": [jobs[0]], "kept_rows": 1}  # resumed, then cut again
    (two / "results.json").write_text(json.dumps(resumed))
    for order in ((one, two), (two, one)):  # what a resumed part says is its own, whichever part comes first
        code, _, err = _merge(*order, "--allow-partial", "--out", tmp_path / "order", "--overwrite")
        meta = json.loads((tmp_path / "order" / "results.json").read_text())["meta"]
        assert code == 0 and "resumed" not in meta, err
        assert [p.get("resumed") for p in meta["merge"]["parts"]] == [
            None if p == one else resumed["meta"]["resumed"] for p in order
        ]
    again = _part(tmp_path / "s2-again", gemm_plan, 2, 2)  # the cut shard run again replaces it
    code, _, err = _merge(one, again, "--out", tmp_path / "whole")
    assert code == 0, err
    assert json.loads((tmp_path / "whole" / "results.json").read_text())["meta"]["complete"] is True


def test_a_cut_part_and_resume_call_the_same_jobs_finished(gemm_plan, tmp_path):
    """One rule (results_io.job_finished) for what suite.merge takes from a cut part and what suite.run --resume
    keeps: a job whose rows are all there but one was lost with a failed device, or whose rows repeat one plan row
    in place of another, is unfinished in both; the jobs around it are finished in both."""
    from suite.driver.sweep import _kept_jobs
    from suite.merge import load, plan_row_starts

    two = _part(tmp_path / "s2", gemm_plan, 2, 2)
    jobs = [j.index for j in gemm_plan.shard(2, 2)]
    data = json.loads((two / "results.json").read_text())
    data["meta"]["complete"] = False
    failed, repeated = jobs[0], jobs[1]
    for r in data["rows"]:
        if r["job"] == failed:
            r["failure"] = "device"  # the job's last rows were not run: its worker's device failed
    twice = [r for r in data["rows"] if r["job"] == repeated]
    assert len(twice) >= 2, "the job needs two rows to repeat one"
    twice[1]["plan_row"] = twice[0]["plan_row"]  # as many rows as the plan has, one of them twice
    (two / "results.json").write_text(json.dumps(data))

    part = load(two)
    assert part.unfinished == (failed, repeated), part.unfinished
    kept = _kept_jobs(data, gemm_plan, list(gemm_plan.shard(2, 2)), 2, 2)
    assert set(kept) == set(jobs) - {failed, repeated} == set(part.jobs)
    # the plan's own row numbers are the ones merge derives from the job list
    starts = plan_row_starts(part)
    assert all(starts[j.index] == j.rows[0].index for j in gemm_plan.jobs)


def test_by_gpu_puts_models_side_by_side(gemm_plan, tmp_path):
    h200 = [_part(tmp_path / f"h200-{i}", gemm_plan, i, 2, measured=True) for i in (1, 2)]
    h100 = _part(tmp_path / "h100", gemm_plan, gpu="NVIDIA H100", measured=True, speed=0.5, torch="2.10.0")
    code, _out, err = _merge(*h200, h100, "--by", "gpu", "--out", tmp_path / "by")
    assert code == 0, err
    table = (tmp_path / "by" / "table.md").read_text()
    assert "NVIDIA H200 TFLOP/s" in table and "NVIDIA H100 TFLOP/s" in table
    assert "NVIDIA H100 / NVIDIA H200" in table and "| 0.50x" in table
    # the models first, the tables, then the record (as every table.md)
    assert table.splitlines()[2] == "GPUs NVIDIA H200, NVIDIA H100."
    assert table.index("| 0.50x") < table.index(report.RUN_HEADING) < table.index("- by: gpu")
    for name in ("NVIDIA-H200", "NVIDIA-H100"):  # each model's own merged results, plots included
        assert (tmp_path / "by" / name / "results.json").exists() and (tmp_path / "by" / name / "gemm.png").exists()
    rows = json.loads((tmp_path / "by" / "results.json").read_text())["rows"]
    assert {r["gpu"] for r in rows} == {"NVIDIA H200", "NVIDIA H100"} and len(rows) == 2 * gemm_plan.row_count
    assert (tmp_path / "by" / "results.csv").read_text().startswith("gpu,problem,shape")


def test_by_gpu_still_refuses_mixed_plans_and_missing_shards(gemm_plan, tmp_path):
    other = planning.build(bench.Options(problems=("gemm",), dtypes=("fp16",)), on_gpu=True)
    code, _, err = _merge(
        _part(tmp_path / "a", gemm_plan),
        _part(tmp_path / "b", other, gpu="NVIDIA H100"),
        "--by",
        "gpu",
        "--out",
        tmp_path / "by",
    )
    assert code == 2 and "mixed plans" in err
    code, _, err = _merge(
        _part(tmp_path / "c", gemm_plan, 1, 2),
        _part(tmp_path / "d", gemm_plan, gpu="NVIDIA H100"),
        "--by",
        "gpu",
        "--out",
        tmp_path / "by2",
    )
    assert code == 2 and "missing shards: 2/2" in err


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: d.mkdir(), "no results.json there"),
        (lambda d: (d.mkdir(), (d / "results.json").write_text("{")), "not JSON"),
        (
            lambda d: (d.mkdir(), (d / "results.json").write_text('{"meta": {}, "rows": []}')),
            "records no plan and shard",
        ),
    ],
)
def test_inputs_that_are_not_shard_results_are_refused(tmp_path, make, says):
    make(tmp_path / "x")
    code, _, err = _merge(tmp_path / "x", "--out", tmp_path / "merged")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_out_must_not_be_an_input(gemm_plan, tmp_path):
    part = _part(tmp_path / "s", gemm_plan)
    code, _, err = _merge(part, "--out", part)
    assert code == 2 and "is one of the results being merged" in err


def test_cli_merges_real_cpu_shards_into_the_unsharded_run(tmp_path):
    """End to end, as a Slurm array would: the CLI on two shards, the second as task 2 of --array=1-2 (its shard from
    the Slurm variables), then python -m suite.merge: the merged rows and tables are the unsharded run's."""
    argv = [
        sys.executable,
        "-m",
        "suite.run",
        "--problem",
        "vector",
        "--variant",
        "triton:tile loop",
        "--size",
        "4097",
        "8195",
        "12289",
        "--no-progress",
        "--out",
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    slurm = {
        "SLURM_ARRAY_TASK_ID": "2",
        "SLURM_ARRAY_TASK_COUNT": "2",
        "SLURM_ARRAY_TASK_MIN": "1",
        "SLURM_ARRAY_TASK_MAX": "2",
    }
    runs = [
        subprocess.Popen(argv + [str(tmp_path / "s1"), "--shard", "1/2"], env=env, cwd=ROOT),
        subprocess.Popen(argv + [str(tmp_path / "s2")], env={**env, **slurm}, cwd=ROOT),
        subprocess.Popen(argv + [str(tmp_path / "full")], env=env, cwd=ROOT),
    ]
    assert [p.wait(timeout=300) for p in runs] == [0, 0, 0]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite.merge",
            str(tmp_path / "s2"),
            str(tmp_path / "s1"),
            "--out",
            str(tmp_path / "the merged"),  # a space: the record's command quotes it
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    s1, s2, merged, full = (
        json.loads((tmp_path / d / "results.json").read_text()) for d in ("s1", "s2", "the merged", "full")
    )
    plan = planning.build(
        bench.Options(problems=("vector",), variants=("triton:tile loop",), sizes={"vector": (4097, 8195, 12289)}),
        on_gpu=False,
    )
    for shard, index in ((s1, 1), (s2, 2)):  # the Slurm task ran what --shard 2/2 names
        assert shard["meta"]["shard"] == {"index": index, "count": 2, "jobs": [j.index for j in plan.shard(index, 2)]}
        assert shard["meta"]["plan"]["id"] == plan.id == full["meta"]["plan"]["id"]
        assert {r["job"] for r in shard["rows"]} == set(shard["meta"]["shard"]["jobs"])
    assert merged["rows"] == full["rows"]
    assert _body(tmp_path / "the merged") == _body(tmp_path / "full")
    argv = [str(tmp_path / "s2"), str(tmp_path / "s1"), "--out", str(tmp_path / "the merged")]
    assert shlex.split(merged["meta"]["command"]) == ["python", "-m", "suite.merge", *argv]  # runs again as written
    assert sorted(merged["meta"]["shard"]["parts"]) == ["1/2", "2/2"]
    phases = s2["meta"]["phase_seconds"]  # where the time went, and the timer's rule and power regime
    assert {"startup", "meta", "plan", "compile", "validate", "reports", "total"} <= set(phases)
    assert phases["total"] >= phases["validate"] > 0
    # where validate's seconds went, already counted in it
    steps = {k: v for k, v in phases.items() if k.startswith("validate.")}
    assert set(steps) == {f"validate.{s}" for s in ("inputs", "reference", "build", "run", "check")}
    assert sum(steps.values()) <= phases["validate"] + 0.05  # (each rounded to 0.01 s)
    assert s2["meta"]["timer"]["name"] == "burst" and "power limit" in s2["meta"]["timer"]["power_regime"]


# ---------------------------------------------------------------------------------------------------------------
# Issue 53: group names stay inside --out, shards are checked against the plan, hostile inputs, the write path
# ---------------------------------------------------------------------------------------------------------------


def test_by_gpu_with_a_gpu_named_dotdot_writes_nothing_outside_out(gemm_plan, tmp_path):
    """From the shell: a shard whose meta.gpu is '..' (or '.') gets a directory of its own inside --out; a
    neighbouring run's results.json is untouched and nothing appears beside --out."""
    base = tmp_path / "base"
    base.mkdir()
    h200 = _part(base / "h200", gemm_plan, measured=True)
    evil = _part(base / "evil", gemm_plan, gpu="..", measured=True)
    neighbour = base / "results.json"
    neighbour.write_text('{"a neighbour": true}')
    before = sorted(p.relative_to(base) for p in base.rglob("*"))
    out = base / "by"
    proc = subprocess.run(
        [sys.executable, "-m", "suite.merge", str(h200), str(evil), "--by", "gpu", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    after = sorted(p.relative_to(base) for p in base.rglob("*") if not p.is_relative_to(out))
    assert after == before and neighbour.read_text() == '{"a neighbour": true}'
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["NVIDIA-H200", "unknown"]
    assert json.loads((out / "unknown" / "results.json").read_text())["meta"]["gpu"] == ".."
    # '.' and '..' would share a directory: refused, nothing written
    dot = _part(base / "dot", gemm_plan, gpu=".", measured=True)
    code, _, err = _merge(evil, dot, "--by", "gpu", "--out", base / "by2")
    assert code == 2 and "would share the directory" in err and not (base / "by2").exists()


@pytest.mark.parametrize("name", ["..", ".", "../x", "/etc", "table.md", "a/../../b"])
def test_group_directories_are_always_inside_out(tmp_path, name):
    try:
        dirs = merge.group_dirs([name], tmp_path / "out")
    except merge.MergeError:
        return
    (path,) = dirs.values()
    assert path.parent == tmp_path / "out" and path.name not in ("", ".", "..", "table.md")


def test_a_shard_with_rows_removed_is_refused(gemm_plan, tmp_path):
    one, two = _part(tmp_path / "s1", gemm_plan, 1, 2), _part(tmp_path / "s2", gemm_plan, 2, 2)
    data = json.loads((two / "results.json").read_text())
    job = data["rows"][-1]["job"]
    data["rows"] = data["rows"][:-1]  # one row of its last job gone: the shard still lists the job as run
    (two / "results.json").write_text(json.dumps(data))
    code, out, err = _merge(one, two, "--out", tmp_path / "merged")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"row(s) of {gemm_plan.jobs[job].describe()}, where the plan has {len(gemm_plan.jobs[job].rows)}" in err
    assert not (tmp_path / "merged").exists()
    data["rows"] += [dict(data["rows"][0], job=next(j for j in range(99) if j not in data["meta"]["shard"]["jobs"]))]
    (two / "results.json").write_text(json.dumps(data))
    assert _merge(one, two, "--out", tmp_path / "merged")[0] == 2


def test_the_plan_id_covers_the_plugins_code(tmp_path):
    """Two plans of the same selection differ when a plugin's source differs, so that shards run with different
    plugin code are refused as mixed plans; the suite's own variants leave the id as it was."""
    import types

    def variant_from(source_text):
        module_file = tmp_path / f"plugin_{len(list(tmp_path.iterdir()))}.py"
        module_file.write_text(source_text)
        module = types.ModuleType(module_file.stem)
        module.__file__ = str(module_file)
        sys.modules[module.__name__] = module
        kernel_type = type("Kernel", (), {"__module__": module.__name__})
        return types.SimpleNamespace(kernel=kernel_type())

    from suite.registry import variants

    assert planning.plugin_source(variants()) is None  # the suite's own
    a, b = variant_from("X = 1\n"), variant_from("X = 2\n")
    renamed = variant_from("X = 1\n")
    assert planning.plugin_source([a]) != planning.plugin_source([b])
    assert planning.plugin_source([renamed]) != planning.plugin_source([a])  # its file name is part of its code
    assert planning.plugin_source([a, b]) == planning.plugin_source([b, a])  # not the variants' order
    suite_plan = planning.build(bench.Options(problems=("vector",)), on_gpu=True)
    assert "plugin_source" not in suite_plan.options


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: os.mkfifo(d), "not a regular file (a FIFO)"),
        (lambda d: None, "not a regular file (a character device)"),
        (lambda d: d.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
        (lambda d: d.write_text('{"meta": {}, "rows": [{"median_ms": 1e400}]}'), "out of range"),
    ],
    ids=["fifo", "dev-zero", "nested", "1e400"],
)
def test_hostile_inputs_are_refused_quickly_from_the_shell(tmp_path, make, says):
    import time

    bad = Path("/dev/zero") if says.endswith("device)") else tmp_path / "bad.json"
    make(bad)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "suite.merge", str(bad), "--out", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and says in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "m").exists()


def test_an_unwritable_output_is_one_line_not_a_traceback(gemm_plan, tmp_path, monkeypatch):
    part = _part(tmp_path / "s", gemm_plan)

    def full(rows, meta, out_dir, record=True):
        raise report.WriteError(out_dir, [], [("results.json", OSError(28, "No space left on device"))])

    monkeypatch.setattr(report, "write", full)
    code, _, err = _merge(part, "--out", tmp_path / "merged")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "could not write results.json" in err and "No space left on device" in err


def test_internal_errors_exit_3_in_one_line(gemm_plan, tmp_path, monkeypatch):
    part = _part(tmp_path / "s", gemm_plan)
    monkeypatch.setattr(merge, "combine", lambda *a, **k: 1 / 0)
    code, _, err = _merge(part, "--out", tmp_path / "merged")
    assert code == 3 and err.strip() == "internal error: ZeroDivisionError: division by zero (--debug shows where)"
    with pytest.raises(ZeroDivisionError):
        merge.main([str(part), "--out", str(tmp_path / "m2"), "--debug"])


def test_an_out_holding_results_is_refused_unless_overwrite(gemm_plan, tmp_path):
    one, two = _part(tmp_path / "s1", gemm_plan, 1, 2), _part(tmp_path / "s2", gemm_plan, 2, 2)
    out = tmp_path / "merged"
    assert _merge(one, two, "--out", out)[0] == 0
    (out / "vector.png").write_bytes(b"stale")
    code, _, err = _merge(one, two, "--out", out)
    assert code == 2 and "holds results already (--overwrite replaces them)" in err
    assert _merge(one, two, "--out", out, "--overwrite")[0] == 0 and not (out / "vector.png").exists()


def test_merge_help_documents_the_exit_codes():
    proc = subprocess.run(
        [sys.executable, "-m", "suite.merge", "--help"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode == 0
    for code in ("0  merged", "1  a merged row failed", "2  a refusal or bad input", "3  an internal error"):
        assert code in proc.stdout


def test_a_plan_claiming_absurdly_many_jobs_is_refused_at_once(gemm_plan, tmp_path):
    part = _part(tmp_path / "s", gemm_plan)
    data = json.loads((part / "results.json").read_text())
    data["meta"]["plan"]["jobs"] = 10**18  # its missing jobs would be counted one by one
    (part / "results.json").write_text(json.dumps(data))
    code, _, err = _merge(part, "--allow-partial", "--out", tmp_path / "m")
    assert code == 2 and "its plan counts 1000000000000000000 jobs and lists" in err, err
