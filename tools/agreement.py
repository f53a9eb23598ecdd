"""Issue 20's evidence that a faster run kept the same trust, from results.json files.

  python tools/agreement.py back-to-back A/results.json B/results.json
      every row timed in both: |median A - median B| / median A; passes when the median of those is <= 0.5% and
      none is beyond 3%
  python tools/agreement.py gpus ONE/results.json ALL/results.json
      a --gpus run against the one-GPU run of the same plan: every row's ratio to its ceiling within 3%, and the
      wall time (meta.phase_seconds.total) <= 0.60 of the one-GPU run's
  python tools/agreement.py ceilings RUN/results.json          (on the GPU the run was timed on)
      each (problem, dtype, shape)'s ceiling against an independent triton.testing.do_bench of it in the run's power
      regime, within 2%: for the burst timer, the median of 10 short do_bench bursts (5 ms of samples), each after
      0.3 s of idle and once NVML (pynvml, read here directly) reports no power-cap or thermal slowdown; for the
      others, 1 s of samples; a ceiling the run timed from a CUDA graph (its row's launch) is timed from one here too,
      and one whose L2 was flushed by a read (--flush read) by do_bench's loop with that flush

Prints one line per check and the worst rows; exit status 0 when every check passes, 1 when one does not, 2 on bad
input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

KEY = ("problem", "dtype", "shape", "backend", "variant", "stages")


def load(path: str) -> tuple[dict, dict[tuple, dict]]:
    try:
        data = json.loads(Path(path).read_text())
        rows = {tuple(r.get(k) for k in KEY): r for r in data["rows"]}
        return data["meta"], rows
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"error: {path}: not a results.json ({e})") from None


def _timed(r: dict | None) -> bool:
    return bool(r) and r.get("measured") is True and r.get("valid") is True


def _label(key: tuple) -> str:
    return " ".join("-" if k is None else str(k) for k in key)


def back_to_back(a: str, b: str) -> bool:
    _, ra = load(a)
    _, rb = load(b)
    diffs = {
        k: abs(rb[k]["median_ms"] - r["median_ms"]) / r["median_ms"]
        for k, r in ra.items()
        if _timed(r) and _timed(rb.get(k))
    }
    if not diffs:
        raise SystemExit("error: no row is timed in both runs")
    median, beyond = statistics.median(diffs.values()), [k for k, d in diffs.items() if d > 0.03]
    ok = median <= 0.005 and not beyond
    print(
        f"back-to-back: {len(diffs)} rows, median difference {100 * median:.2f}% (<= 0.5%), "
        f"{len(beyond)} beyond 3%: {'PASS' if ok else 'FAIL'}"
    )
    _worst(diffs, beyond, ra, rb)
    return ok


def _launch_bound(*rows: dict) -> bool:
    return any(r.get("launch_bound") for r in rows)


def _worst(diffs: dict, beyond: list, ra: dict, rb: dict) -> None:
    """The five rows that moved most, ^ marking those launch-bound in either run (their time is partly the host's),
    and how many of the rows beyond 3% are: they still count in the verdict."""
    host = [k for k in beyond if _launch_bound(ra[k], rb[k])]
    if host:
        print(f"  {len(host)} of the {len(beyond)} beyond 3% launch-bound in either run (^)")
    for k in sorted(diffs, key=diffs.get, reverse=True)[:5]:
        print(f"  {100 * diffs[k]:6.2f}%{'^' if _launch_bound(ra[k], rb[k]) else ' '} {_label(k)}")


def gpus(one: str, many: str) -> bool:
    meta_one, r1 = load(one)
    meta_many, rn = load(many)
    if meta_one.get("plan", {}).get("id") != meta_many.get("plan", {}).get("id"):
        raise SystemExit("error: the two runs are of different plans")
    diffs = {
        k: abs(rn[k]["ratio_to_ceiling"] - r["ratio_to_ceiling"]) / r["ratio_to_ceiling"]
        for k, r in r1.items()
        if _timed(r) and _timed(rn.get(k)) and r.get("ratio_to_ceiling") and rn[k].get("ratio_to_ceiling")
    }
    beyond = [k for k, d in diffs.items() if d > 0.03]
    wall = (meta_many.get("phase_seconds", {}).get("total"), meta_one.get("phase_seconds", {}).get("total"))
    share = wall[0] / wall[1] if all(wall) else None
    ok = bool(diffs) and not beyond and share is not None and share <= 0.60
    print(
        f"--gpus: {len(diffs)} rows, {len(beyond)} ratios beyond 3% of the one-GPU run's; wall "
        f"{wall[0]} s vs {wall[1]} s = {'-' if share is None else f'{share:.2f}'} (<= 0.60): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    _worst(diffs, beyond, r1, rn)
    return ok


def _read_flushed():
    """do_bench's samples with the L2 emptied by a read (a sum over 256 MB) instead of its own write, for a run timed
    with ``--flush read``: do_bench's loop, written out here (independent of the suite's bench._burst)."""
    import torch

    buffer = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")

    def bench(fn, warmup=0, rep=5, return_mode="all"):
        fn()
        buffer.sum()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            buffer.sum()
            fn()
        end.record()
        torch.cuda.synchronize()
        n = max(1, int(rep / (start.elapsed_time(end) / 5)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for a, b in zip(starts, ends):
            buffer.sum()
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in zip(starts, ends)]

    return bench


def _bursts(fn, do_bench, bursts: int = 10, rest_s: float = 0.3) -> float:
    """The median of ``bursts`` short do_bench bursts (no warm-up beyond do_bench's own first and estimate calls,
    5 ms of samples: some 10-15 calls of an fp16 8192^3 GEMM, below what brings the power cap on from idle), each
    after ``rest_s`` of idle and once the GPU reports no power-cap, thermal or power-brake slowdown (5 s at most):
    the burst regime from idle every time, independent of the run's pacing (suite.driver.timing)."""
    import time

    import pynvml
    import torch

    from suite.driver.meta import THROTTLE_MASK, gpu_target

    pynvml.nvmlInit()
    target = gpu_target()  # a UUID (GPU-...) or a physical index
    by_uuid = target.startswith("GPU-")
    handle = (pynvml.nvmlDeviceGetHandleByUUID if by_uuid else pynvml.nvmlDeviceGetHandleByIndex)(
        target if by_uuid else int(target)
    )
    samples = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        time.sleep(rest_s)
        start = time.monotonic()
        while pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) & THROTTLE_MASK and time.monotonic() - start < 5:
            time.sleep(0.01)
        samples += do_bench(fn, warmup=0, rep=5, return_mode="all")
    return statistics.median(samples)


def ceilings(path: str) -> bool:
    import torch
    from triton.testing import do_bench

    from suite.problems import PROBLEMS
    from suite.registry import variants

    meta, rows = load(path)
    if not torch.cuda.is_available():
        raise SystemExit("error: ceilings: needs the GPU the run was timed on")
    if meta.get("gpu") and meta["gpu"] != torch.cuda.get_device_name():
        raise SystemExit(f"error: ceilings: the run was timed on {meta['gpu']}, this is {torch.cuda.get_device_name()}")
    ok = True
    for key, r in rows.items():
        if not (r.get("ceiling") and _timed(r)):
            continue
        problem = PROBLEMS[r["problem"]]
        dtype = next(name for name, d in problem.dtypes.items() if d.label == r["dtype"])
        size = problem.parse_size(r["shape"])
        variant = next(v for v in variants(r["problem"]) if v.backend == r["backend"] and v.name == r["variant"])
        first = min(x["plan_row"] for x in rows.values() if x.get("job") == r.get("job"))  # the run's timing inputs
        seed = 10_000 + meta.get("plan", {}).get("options", {}).get("seed", 0) + first
        inputs = problem.make_inputs(size, seed, torch.device("cuda"), dtype)
        fn = variant.factory(inputs, problem.make_output(inputs), None)
        if r.get("launch") == "graph":  # launched as the run launched it: a CUDA graph's replay of the call
            from suite.driver.bench import capture_graph

            fn()
            torch.cuda.synchronize()
            graph = capture_graph(fn)
            fn = graph.replay
        if meta.get("timer", {}).get("name") == "burst":
            read = str(meta["timer"].get("flush", "")).startswith("read")  # --flush read
            independent = _bursts(fn, _read_flushed() if read else do_bench)
        else:
            independent = do_bench(fn, warmup=25, rep=1000, return_mode="median")
        diff = abs(r["median_ms"] - independent) / independent
        ok &= diff <= 0.02
        print(
            f"ceiling {_label(key)}: run {r['median_ms']:.4f} ms, do_bench {independent:.4f} ms, "
            f"{100 * diff:.2f}% (<= 2%): {'PASS' if diff <= 0.02 else 'FAIL'}"
        )
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/agreement.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="check", required=True)
    sub.add_parser("back-to-back").add_argument("runs", nargs=2)
    sub.add_parser("gpus").add_argument("runs", nargs=2)
    sub.add_parser("ceilings").add_argument("runs", nargs=1)
    args = p.parse_args(argv)
    check = {"back-to-back": back_to_back, "gpus": gpus, "ceilings": ceilings}[args.check]
    return 0 if check(*args.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
