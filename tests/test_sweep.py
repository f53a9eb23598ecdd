"""--shapes sweep: the shapes drawn by --sweep-seed and --sweep-count, fixed in the plan (the same on every call,
every shard and every host), recorded in the run's meta; who takes part; refusals; the CPU path."""

from __future__ import annotations

import json
import time

import pytest
from conftest import main_here

from suite.driver import bench
from suite.driver import plan as planning
from suite.model_shapes import DISTRIBUTION, sweep_shapes
from suite.problems import GEMM
from suite.registry import variants


def _opts(seed=5, count=12, **kw):
    return bench.Options(problems=("gemm",), shape_sets=("sweep",), sweep_seed=seed, sweep_count=count, **kw)


def test_same_seed_same_plan_and_shapes():
    first, second = planning.build(_opts(), True), planning.build(_opts(), True)
    assert first.id == second.id
    assert [j.size for j in first.jobs] == list(sweep_shapes(5, 12))
    assert planning.build(_opts(seed=6), True).id != first.id
    assert planning.build(_opts(count=11), True).id != first.id


def test_meta_records_seed_count_and_distribution():
    meta = planning.build(_opts(), True).meta()
    assert meta["sweep"] == {"seed": 5, "count": 12, "distribution": DISTRIBUTION}
    assert meta["options"]["sweep_seed"] == 5 and meta["options"]["sweep_count"] == 12
    assert "sweep" not in planning.build(bench.Options(problems=("gemm",), shape_sets=("llm",)), True).meta()


def test_sweep_takes_the_llm_variants_and_the_auto_rows():
    """A sweep runs the llm set's variants but two whose walk another sweep row does as well or better (the 128x192
    split tail is the persistent 128x192 rung where its tail does not split; the 128x256 split tail and 256x128
    stream-K cover the 128x256 stream-K's shapes), and the auto rows."""
    plan = planning.build(_opts(count=3), True)
    in_llm = {v.label for v in variants("gemm") if v.shape_sets is None or "llm" in v.shape_sets}
    left_out = {"ptx:128x192x64 ws 2wg persistent tma-store tma+wgmma", "ptx:128x256 stream-k tma+wgmma"}
    for job in plan.jobs:
        labels = {r.label for r in job.rows}
        assert labels == in_llm - left_out
        assert {"ptx:auto", "triton:auto", "ptx:128x192 split-tail tma-store tma+wgmma"} <= labels


def test_fp8_keeps_k_multiples_of_16():
    plan = planning.build(_opts(count=30, dtypes=("fp8e4m3",)), True)
    expected = [s for s in sweep_shapes(5, 30) if s[2] % 16 == 0]
    assert [j.size for j in plan.jobs] == expected and expected


@pytest.mark.parametrize("count", [1, 3, 7])
def test_shards_of_a_sweep_cover_it(count):
    plan = planning.build(_opts(), True)
    again = planning.build(_opts(), True)  # another process or host builds the same plan
    indices = sorted(j.index for i in range(1, count + 1) for j in again.shard(i, count))
    assert indices == [j.index for j in plan.jobs]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--problem", "gemm", "--sweep-seed", "1"], "--sweep-seed"),
        (["--problem", "gemm", "--shapes", "llm", "--sweep-count", "4"], "--sweep-count"),
        (["--problem", "gemm", "--shapes", "sweep", "--sweep-seed", "-1"], "--sweep-seed"),
        (["--problem", "gemm", "--shapes", "sweep", "--sweep-count", "0"], "--sweep-count"),
    ],
)
def test_bad_sweep_options_exit_2(argv, flag, tmp_path, capsys):
    code, _, err = main_here([*argv, "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.startswith(f"error: {flag}:") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_cpu_run_keeps_to_the_interpreter_sizes(tmp_path, capsys, monkeypatch):
    """Without a GPU a sweep's shapes (above the interpreter's limit) are not attempted: the CPU sizes run."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the CPU path")
    assert any(GEMM.work(s) > GEMM.cpu_max_work for s in sweep_shapes(0, 48))
    start = time.monotonic()
    argv = ["--problem", "gemm", "--shapes", "sweep", "--variant", "triton:auto", "--out", str(tmp_path)]
    code, _, err = main_here(argv, capsys)
    assert code == 0, err
    assert time.monotonic() - start < 120
    data = json.loads(next(tmp_path.rglob("results.json")).read_text())
    assert {r["shape"] for r in data["rows"]} == {GEMM.shape(s) for s in GEMM.cpu_sizes}
    auto = [r for r in data["rows"] if r["variant"] == "auto"]
    assert auto and all(r["valid"] and r["note"].startswith("chose ") for r in auto)
    assert data["meta"]["plan"]["sweep"]["count"] == 48
