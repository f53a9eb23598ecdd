"""How reproducible is a GEMM's time under the GPU's power cap, per timing rule? (issue 20's evidence)

Times a few heavy and light GEMMs (cuBLAS through torch) with several rules, each after two histories (the GPU idle
for a second, or busy for a second with a heavy GEMM), repeated, and prints per (GEMM, rule) the spread of the
medians (max / min - 1) and the SM clock and power NVML read after each. Writes JSON to the path given.

    python tools/power_regimes.py OUT.json [--reps N]

Rules:
  adaptive  the suite's default timer (suite.driver.bench._sample)
  settled   the adaptive timer after a warm-up that runs until NVML's SM clock has held within 2% over three
            25 ms batches (at most 1 s)
  long      1 s of warm-up, then 500 ms of samples: the sustained regime's reference
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from triton.testing import do_bench


def nvml():
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

    def read():
        return {
            "clk": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
            "t": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "reasons": int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
        }

    limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000
    return read, limit


def gemms():
    g = torch.Generator(device="cuda").manual_seed(0)

    def mm(m, n, k, dtype):
        a = torch.randn(m, k, device="cuda", generator=g).to(dtype)
        b = torch.randn(k, n, device="cuda", generator=g).to(dtype)
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        return lambda: torch.matmul(a, b, out=c)

    def fp8(m, n, k):
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
        s = torch.ones((), device="cuda")
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        return lambda: torch._scaled_mm(a, b.t(), s, s, out_dtype=torch.bfloat16, out=c)

    return {
        "fp16 8192^3": mm(8192, 8192, 8192, torch.float16),
        "fp16 4096^3": mm(4096, 4096, 4096, torch.float16),
        "bf16 2048x8192x8192": mm(2048, 8192, 8192, torch.bfloat16),
        "fp8 8192^3": fp8(8192, 8192, 8192),
        "fp16 16x8192x8192": mm(16, 8192, 8192, torch.float16),
    }


def main():
    out = sys.argv[1]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 2
    from suite.driver import bench

    read, limit = nvml()
    fns = gemms()
    heavy = fns["fp16 8192^3"]
    opts = bench.Options()

    def adaptive(fn):
        s = bench._sample(fn, opts)
        return statistics.median(s.samples), s.batches

    def settled(fn):
        clocks, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 1.0:
            do_bench(fn, warmup=0, rep=25, return_mode="all")
            clocks.append(read()["clk"])
            last = clocks[-3:]
            if len(last) == 3 and max(last) <= 1.02 * min(last):
                break
        s = bench._sample(fn, opts)
        return statistics.median(s.samples), len(clocks)

    def long(fn):
        do_bench(fn, warmup=0, rep=1000, return_mode="all")
        return statistics.median(do_bench(fn, warmup=0, rep=500, return_mode="all")), 0

    def cooled():
        waited, t0 = 0, time.monotonic()
        while read()["reasons"] & 0x4 and time.monotonic() - t0 < 2.0:  # SW power cap active
            time.sleep(0.01)
            waited += 1
        return time.monotonic() - t0

    def burst(fn):
        torch.cuda.synchronize()
        wait = cooled()
        return statistics.median(do_bench(fn, warmup=5, rep=20, return_mode="all")), round(wait, 3)

    partner = {k: fns["fp16 4096^3" if k == "fp16 8192^3" else "fp16 8192^3"] for k in fns}

    def paired(fn, name):
        # fn and a partner GEMM in alternating 10 ms batches: the ratio of their medians
        a, b = [], []
        for _ in range(10):
            a += do_bench(fn, warmup=0, rep=10, return_mode="all")
            b += do_bench(partner[name], warmup=0, rep=10, return_mode="all")
        return statistics.median(a) / statistics.median(b), statistics.median(a)

    def burst_pair(fn, name):
        torch.cuda.synchronize()
        cooled()
        a = statistics.median(do_bench(fn, warmup=5, rep=20, return_mode="all"))
        torch.cuda.synchronize()
        cooled()
        b = statistics.median(do_bench(partner[name], warmup=5, rep=20, return_mode="all"))
        return a / b, a

    rules = {"adaptive": adaptive, "settled": settled, "long": long}
    if "--two" in sys.argv:
        rules = {"burst": burst, "paired": paired, "burst_pair": burst_pair}
    records = []
    for rep in range(reps):
        for history in ("idle", "hot"):
            for name, fn in fns.items():
                for rule, timer in rules.items():
                    if history == "idle":
                        torch.cuda.synchronize()
                        time.sleep(1.0)
                    else:
                        do_bench(heavy, warmup=0, rep=1000, return_mode="all")
                    t0 = time.monotonic()
                    median, extra = timer(fn, name) if rule in ("paired", "burst_pair") else timer(fn)
                    state = read()
                    records.append(
                        dict(
                            gemm=name,
                            rule=rule,
                            history=history,
                            rep=rep,
                            median_ms=median,
                            extra=extra,
                            seconds=time.monotonic() - t0,
                            **state,
                        )
                    )
                    print(json.dumps(records[-1]), flush=True)
    summary = {}
    for name in fns:
        for rule in rules:
            ms = [r["median_ms"] for r in records if r["gemm"] == name and r["rule"] == rule]
            secs = [r["seconds"] for r in records if r["gemm"] == name and r["rule"] == rule]
            summary[f"{name} | {rule}"] = {
                "spread": max(ms) / min(ms) - 1,
                "median_ms": statistics.median(ms),
                "seconds": statistics.fmean(secs),
            }
            print(
                f"{name:22s} {rule:9s} spread {100 * (max(ms) / min(ms) - 1):5.2f}%  "
                f"median {statistics.median(ms):.4f} ms  {statistics.fmean(secs):.2f} s/row"
            )
    json.dump({"power_limit_w": limit, "records": records, "summary": summary}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
