"""--shard I/N and Slurm job arrays: shards of the plan are disjoint, cover it, keep its order and its seeds, are the
same on every host, and the Slurm variables name the same shards. (A CLI shard run from the Slurm variables, merged
with one from --shard: test_merge.py.)"""

import json
import os
import subprocess
import sys

import pytest
from conftest import main_here

from suite.driver import bench
from suite.driver import plan as planning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def full_plan():
    """The default GPU run's plan (built on any machine: planning asks no GPU)."""
    return planning.build(bench.Options(), on_gpu=True)


def test_the_plan_is_one_job_per_problem_dtype_and_shape(full_plan):
    groups = bench.plan_groups(bench.check_options(bench.Options(), True), bench.Options(), True)
    assert len(full_plan.jobs) == len(groups) > 3
    assert [len(j.rows) for j in full_plan.jobs] == [len(g[3]) for g in groups]
    assert [r.index for j in full_plan.jobs for r in j.rows] == list(range(full_plan.row_count))  # run order
    assert all(j.ceiling for j in full_plan.jobs)  # each job carries the ceiling its ratios need
    assert all(any(r.label == j.ceiling for r in j.rows) for j in full_plan.jobs)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 50])
def test_shards_are_disjoint_cover_the_plan_and_keep_its_order(full_plan, count):
    shards = [full_plan.shard(i, count) for i in range(1, count + 1)]
    indices = [j.index for shard in shards for j in shard]
    assert sorted(indices) == list(range(len(full_plan.jobs)))  # disjoint, and their union is the plan
    for shard in shards:
        assert [j.index for j in shard] == sorted(j.index for j in shard)  # each in plan order


def test_three_shards_are_the_unsharded_plan(full_plan):
    parts = [full_plan.shard(i, 3) for i in (1, 2, 3)]
    assert all(parts) and set().union(*({j.index for j in p} for p in parts)) == {j.index for j in full_plan.jobs}
    assert sum(len(p) for p in parts) == len(full_plan.jobs)
    rows = sorted((r.index, r.label, r.stages) for p in parts for j in p for r in j.rows)
    assert rows == [(r.index, r.label, r.stages) for j in full_plan.jobs for r in j.rows]  # same rows, same seeds


def test_shards_are_balanced(full_plan):
    """Longest job first to the least loaded shard: no shard exceeds an even share by more than one job."""
    total, largest = sum(j.cost for j in full_plan.jobs), max(j.cost for j in full_plan.jobs)
    for count in (2, 3, 4):
        loads = [sum(j.cost for j in full_plan.shard(i, count)) for i in range(1, count + 1)]
        assert max(loads) <= total / count + largest, (count, loads)
        assert min(loads) > 0


def test_the_plan_and_its_shards_are_the_same_in_another_process(full_plan):
    """Another interpreter (another hash seed, as on another host) builds the same plan id and the same shards."""
    script = (
        "import json; from suite.driver import bench, plan; p = plan.build(bench.Options(), on_gpu=True); "
        "print(json.dumps([p.id, [[j.index for j in p.shard(i, 3)] for i in (1, 2, 3)]]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    plan_id, shards = json.loads(proc.stdout)
    assert plan_id == full_plan.id
    assert shards == [[j.index for j in full_plan.shard(i, 3)] for i in (1, 2, 3)]


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 1},
        {"quick": True},
        {"timer": "fixed"},
        {"launch": "eager"},
        {"problems": ("gemm",)},
        {"stages": (2,)},
        {"dtypes": ("fp16",)},
    ],
)
def test_the_plan_id_changes_with_what_is_measured(full_plan, change):
    assert planning.build(bench.Options(**change), on_gpu=True).id != full_plan.id


def test_the_plan_id_is_stable(full_plan):
    assert planning.build(bench.Options(), on_gpu=True).id == full_plan.id
    assert planning.build(bench.Options(), on_gpu=False).id != full_plan.id  # the CPU run's sizes


def test_job_descriptions_read_back(full_plan):
    for job in full_plan.jobs:
        back = planning.parse_description(job.describe())
        assert (back["problem"], back["dtype"], back["shape"], back["rows"]) == (
            job.problem,
            job.dtype_label,
            job.shape,
            len(job.rows),
        )


@pytest.mark.parametrize("text, shard", [("1/3", (1, 3)), ("3/3", (3, 3)), (" 2 / 5 ", (2, 5)), ("1/1", (1, 1))])
def test_parse_shard(text, shard):
    assert planning.parse_shard(text) == shard


@pytest.mark.parametrize(
    "text, rule",
    [
        ("0/3", "between 1 and N"),
        ("4/3", "between 1 and N"),
        ("1/0", "N must be at least 1"),
        ("3", "a shard is I/N"),
        ("a/b", "a shard is I/N"),
        ("-1/3", "I/N"),
        ("", "I/N"),
    ],
)
def test_parse_shard_names_the_rule(text, rule):
    with pytest.raises(ValueError, match=rule):
        planning.parse_shard(text)


def _slurm(task, count, low=None, high=None, step=None):
    env = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count)}
    env.update(
        {
            k: str(v)
            for k, v in (("SLURM_ARRAY_TASK_MIN", low), ("SLURM_ARRAY_TASK_MAX", high), ("SLURM_ARRAY_TASK_STEP", step))
            if v is not None
        }
    )
    return env


@pytest.mark.parametrize(
    "array, tasks",
    [
        ("--array=0-2", [_slurm(t, 3, 0, 2, 1) for t in (0, 1, 2)]),
        ("--array=1-3", [_slurm(t, 3, 1, 3, 1) for t in (1, 2, 3)]),
        ("--array=5-7", [_slurm(t, 3, 5, 7) for t in (5, 6, 7)]),  # no STEP: 1
        ("--array=1-7:2", [_slurm(t, 4, 1, 7, 2) for t in (1, 3, 5, 7)]),
        ("--array=0-2, MIN unset", [_slurm(t, 3) for t in (0, 1, 2)]),
    ],
)
def test_slurm_array_tasks_are_the_shards_in_order(full_plan, array, tasks):
    """Each task of the array is one shard, the first task the first shard; the same jobs as --shard I/N."""
    n = len(tasks)
    shards = [planning.shard_from_env(env) for env in tasks]
    assert shards == [(i, n) for i in range(1, n + 1)], array
    for (i, count), expected in zip(shards, range(1, n + 1)):
        assert [j.index for j in full_plan.shard(i, count)] == [j.index for j in full_plan.shard(expected, n)]


@pytest.mark.parametrize(
    "env, rule",
    [
        (_slurm(5, 3), "SLURM_ARRAY_TASK_ID=5 is not one of COUNT=3"),
        (_slurm(0, 3, 1, 3), "SLURM_ARRAY_TASK_ID=0 is not one of COUNT=3 tasks from MIN=1"),
        (_slurm(5, 3, 1, 7), "to MAX=7"),  # --array=1,5,7: not an arithmetic range
        (_slurm(2, 3, 1, 5, 2), "in steps of 2"),  # between two tasks of the step
        ({"SLURM_ARRAY_TASK_ID": "1"}, "must both be set"),
        (_slurm("x", 3), "whole numbers"),
    ],
)
def test_slurm_variables_that_name_no_shard_are_refused(env, rule):
    with pytest.raises(ValueError, match=rule):
        planning.shard_from_env(env)
    assert planning.shard_from_env({"SLURM_JOB_ID": "7"}) is None  # a job, not an array: the whole plan


def _cli(*argv, env=None):
    full = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "suite.run", *argv],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize(
    "argv, env, says",
    [
        (["--shard", "4/3"], {}, "error: argument --shard: '4/3': I must be between 1 and N"),
        (["--shard", "1/0"], {}, "error: argument --shard: '1/0': N must be at least 1"),
        (["--shard", "x"], {}, "error: argument --shard: 'x': a shard is I/N"),
        ([], _slurm(3, 3), "error: SLURM_ARRAY_TASK_*: SLURM_ARRAY_TASK_ID=3 is not one of COUNT=3"),
        (["--gpus", "all"], {}, "error: --gpus all: no CUDA GPU here"),
    ],
)
def test_cli_refuses_bad_shards_and_gpus_in_one_line(argv, env, says, tmp_path, monkeypatch, capsys):
    """Exit 2, one error line, nothing written. ``--gpus all`` through a process with every GPU hidden; the others
    through main() in this process (a process each would cost two seconds of imports)."""
    argv = ["--problem", "vector", "--out", str(tmp_path / "r"), *argv]
    if "--gpus" in argv:
        proc = _cli(*argv, env=env)
        code, err = proc.returncode, proc.stderr
    else:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code, _, err = main_here(argv, capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith(says), err
    assert len([line for line in err.splitlines() if line.startswith("error")]) == 1
    assert not (tmp_path / "r").exists()


def test_stages_pick_each_dtypes_own_depths():
    """--stages keeps, at each dtype, the depths of that dtype it names: the Gluon GEMM sweeps 2-3 stages at 16-bit
    types and 2-4 at fp8, so --stages 4 runs it at fp8 only (a depth of the default dtype alone once decided, and
    dropped it), and --stages 2 3 does not add fp8's 4."""
    gluon = "triton:128x256x64 gluon ws persistent"

    def depths(stages):
        opts = bench.Options(
            problems=("gemm",),
            dtypes=("fp16", "fp8e4m3"),
            stages=stages,
            variants=(gluon,),
            sizes={"gemm": [(512,) * 3]},
        )
        groups = bench.plan_groups(bench.check_options(opts, True), opts, True)
        return {dtype: [s for v, s in rows if v.label == gluon] for _, dtype, _, rows in groups}

    assert depths((4,)) == {"fp16": [], "fp8e4m3": [4]}
    assert depths((2, 3)) == {"fp16": [2, 3], "fp8e4m3": [2, 3]}
    assert depths(None) == {"fp16": [2, 3], "fp8e4m3": [2, 3, 4]}


def test_a_shard_with_no_jobs_says_so_and_prints_no_empty_table(tmp_path, capsys):
    """A plan of one job in three shards: shard 3 runs nothing, says why on stderr, and prints one line in place of
    a summary table of headers only; its results.json is written (for suite.merge)."""
    argv = ["--problem", "vector", "--backend", "torch", "--size", "4096", "--shard", "3/3", "--no-progress"]
    code, out, err = main_here([*argv, "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert "shard 3/3 has no jobs: the plan has 1" in err
    assert out.startswith("no rows: nothing ran") and "|" not in out, out
    assert (tmp_path / "r" / "results.json").is_file()
