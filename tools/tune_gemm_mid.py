"""Time the PTX mid-M kernel (suite.ptx.gemm_decode.MidModule) at forced tiles: every token tile the rule weighs
(``mid_token_tiles``) at two and three consumer warpgroups, at 3 to 6 stages where the ring fits, each between two
cuBLAS timings (its ratio is against their mean), beside the tile the rule picks. Every candidate is checked against
torch before it is timed. With --rungs, the registered PTX tile rungs (the auto row's other candidates) at every depth
too, as the mid-M kernel's competition. Used to fit ``mid_plan``'s model and the auto rule's mid-M band; not part of
the suite's results.

Run from the repository root: PYTHONPATH=. python3 tools/tune_gemm_mid.py [--rungs] [--shape MxNxK ...]"""

from __future__ import annotations

import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

import torch
from triton.testing import do_bench

from suite import waves
from suite.ptx import gemm_auto
from suite.ptx import gemm_decode as g

# the weak band of the seed-1 fp16 sweep on the H100, the mid-M kernel's own band, and shapes it lost at before
SHAPES = (
    (341, 6144, 11008),
    (307, 24576, 6144),
    (529, 10240, 11008),
    (202, 3584, 36864),
    (950, 11008, 3072),
    (129, 73728, 11008),
    (140, 36864, 18944),
    (206, 4608, 16384),
    (200, 3072, 24576),
    (208, 14336, 8192),
)
STAGES = (4, 5, 6)


def tile_module(block_t: int, consumers: int) -> g.MidModule:
    """One tile's build, fp16 only, at every depth of STAGES its ring fits."""
    module = g.MidModule((block_t, consumers))
    module.dtypes = ("fp16",)
    stage = (64 * consumers + block_t) * g.ATOM_BYTES_K
    module.stages = tuple(s for s in STAGES if g.Plan(block_t, consumers, 1, 1, 1, 1).smem_bytes(s) <= g.SMEM_PER_BLOCK)
    assert stage * module.stages[-1] <= g.SMEM_PER_BLOCK
    return module


def _build_error(module) -> str | None:
    try:
        module.build()
    except Exception as e:  # noqa: BLE001 - its rows are listed with this error, not launched
        return f"{type(e).__name__}: {str(e)[:200]}"
    return None


def med(fn) -> float:
    return statistics.median(do_bench(fn, warmup=25, rep=100, return_mode="all"))


def main() -> None:
    shapes = SHAPES
    if "--shape" in sys.argv:
        wanted = sys.argv[sys.argv.index("--shape") + 1 :]
        shapes = tuple(tuple(map(int, w.split("x"))) for w in wanted if "x" in w)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = {(t, c) for m, _, _ in shapes for c in waves.MID_CONSUMERS for t in waves.mid_token_tiles(m, c)}
    modules = {tile: tile_module(*tile) for tile in sorted(tiles)}
    rungs = {}
    if "--rungs" in sys.argv:  # the auto row's candidates but the swapped kernels
        rungs = {name: k for name, k in gemm_auto.CANDIDATES.items() if "swap-ab" not in name}
    with ThreadPoolExecutor() as pool:  # every tile built once, in parallel, before anything is timed
        failed = {t: e for t, e in zip(modules, pool.map(_build_error, modules.values())) if e}
        failed |= {n: e for n, e in zip(rungs, pool.map(_build_error, rungs.values())) if e}
    for tile, error in failed.items():
        print(f"build of {tile} failed: {error}", file=sys.stderr)
    torch.manual_seed(0)
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        ref = (a.float() @ b.float()).half()
        cublas = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        flop = 2 * m * n * k
        rule = g.mid_plan(m, n, k, sms)
        out = []
        for c_ in waves.MID_CONSUMERS:
            for t in waves.mid_token_tiles(m, c_):
                module = modules[(t, c_)]
                for stages in module.stages:
                    ruled = (t, c_) == (rule.block_t, rule.consumers)
                    label = f"{64 * c_}x{t} s{stages}" + (" (rule)" if ruled else "")
                    if (t, c_) in failed:
                        out.append((label, None, "build failed"))
                        continue
                    try:
                        launch = g.Decode((a, b), c, stages, kernel=module, consumers=c_, block_t=t)
                        c.fill_(float("nan"))
                        launch()
                        torch.cuda.synchronize()
                        torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-2 * k**0.5)
                    except Exception as e:  # noqa: BLE001 - a candidate that fails is listed with why
                        out.append((label, None, f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
                        continue
                    before, time, after = med(cublas), med(launch), med(cublas)
                    p = launch.plan
                    model = waves.mid_time(m, n, k, sms, t, c_)
                    note = (
                        f"{flop / time / 1e9:.0f} TFLOP/s, {p.tiles_w * p.tiles_t} tiles x {p.splits}, grid "
                        f"{launch.grid}, model {model:.0f}"
                    )
                    out.append((label, (before + after) / 2 / time, note))
        for name, kernel in rungs.items():
            for stages in kernel.stages_for("fp16"):
                label = f"{name.removesuffix(' tma+wgmma')} s{stages}"
                if name in failed:
                    out.append((label, None, "build failed"))
                    continue
                try:
                    launch = kernel.launch((a, b), c, stages)
                    c.fill_(float("nan"))
                    launch()
                    torch.cuda.synchronize()
                    torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-2 * k**0.5)
                except Exception as e:  # noqa: BLE001 - a candidate that fails is listed with why
                    out.append((label, None, f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
                    continue
                before, time, after = med(cublas), med(launch), med(cublas)
                out.append((label, (before + after) / 2 / time, f"{flop / time / 1e9:.0f} TFLOP/s (rung)"))
        print(f"\n{m}x{n}x{k} fp16: % of cuBLAS (rule: {64 * rule.consumers}x{rule.block_t})")
        for label, ratio, note in sorted(out, key=lambda r: -(r[1] or 0)):
            print(f"  {'-' if ratio is None else f'{100 * ratio:5.1f}'}  {label:24s} {note}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
