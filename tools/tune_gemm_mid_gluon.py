"""Time the swapped mid-M Gluon GEMM (suite/triton/gemm_mid_gluon.py), fp16, against cuBLAS.

* default: at forced tiles, every tile of its menu (suite.waves.gluon_mid_tiles) at its deepest ring (the plan's tile
  also one shallower). Each row says the model's time (GluonMidTile.time, relative to the plan's tile) and the plan's
  tile is marked: the data to fit GLUON_MID_FIXED_TOKENS and GLUON_MID_SMEM_BYTES_PER_MAC. Shapes: sweep seeds 3-7
  (M = 245-2,083), none from the judged seeds 1 and 2.
* ``--band``: at every shape of sweep seeds 3-7 with M >= 64, the plan's tile and depth beside what triton:auto runs
  without the Gluon mid-M band (the rule's first other choice that takes the shape): the data that fits
  gemm_rule.TRITON_GLUON_MID_M and TRITON_GLUON_MID_MOST_K. Ends with the geometric mean and minimum over the
  shapes of each band on a small grid. ``--dtype fp8e4m3``: the same at fp8 against promoted cuBLAS, on the shapes
  with M up to 2048 (past the grid's bands) of seeds 3-5, the fit of gemm_rule.TRITON_GLUON_MID_FP8_M.

Every candidate is checked against torch before it is timed (tools/gemm_probe.py). Not part of the suite's results.

Run from the repository root on an sm_90a GPU:
PYTHONPATH=. python3 tools/tune_gemm_mid_gluon.py [--band [--dtype fp8e4m3]] [--shape MxNxK ...]"""

from __future__ import annotations

import itertools
import math
import sys

import torch

from suite import gemm_rule, waves
from suite.model_shapes import sweep_shapes
from suite.triton import gemm_mid_gluon as g
from suite.triton.gemm_auto import KERNEL as AUTO
from tools.gemm_probe import checked_ratio, fp16_problem, probe, problem, shapes_from_argv

GLUON_MID = "mid-m swap-ab gluon ws"

SHAPES = (
    (245, 5120, 3584),
    (343, 24576, 14336),
    (346, 6144, 4608),
    (425, 22016, 11008),
    (536, 11008, 16384),
    (553, 5120, 8192),
    (591, 10240, 11008),
    (622, 7168, 13824),
    (664, 11008, 36864),
    (1085, 4608, 18944),
    (1372, 12288, 8192),
    (2083, 22016, 8192),
)


def band(dtype: str) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fp8 = dtype == "fp8e4m3"
    seeds, most_m = (range(3, 6), 2048) if fp8 else (range(3, 8), 1 << 30)
    shapes = sorted({s for seed in seeds for s in sweep_shapes(seed, 48) if 64 <= s[0] <= most_m})
    rows = []
    for m, n, k in shapes_from_argv(tuple(shapes)):
        inputs, c, ref, cublas = problem(m, n, k, dtype)
        # what triton:auto runs without the band: its pick among the rule's other choices
        others = [ch for ch in gemm_rule.choices("triton", m, n, k, dtype, sms) if ch.kernel != GLUON_MID]
        other, kernel, stages = AUTO.pick_among(others, (m, n, k), dtype)
        plan = waves.gluon_mid_plan(m, n, sms, fp8=fp8)
        got = []
        for make in (
            lambda: kernel.launch(inputs, c, stages),
            lambda: g.GluonMidGemm(inputs, c, plan.stages),
        ):
            ratio, why = checked_ratio(make, c, ref, k, cublas)
            got.append(ratio)
            if ratio is None:
                print(f"  {m}x{n}x{k}: {why}", file=sys.stderr)
        t = plan.tile
        print(
            f"{m}x{n}x{k}: without the band {got[0] or 0:.3f} ({other.kernel} at {stages}), Gluon mid-M "
            f"{got[1] or 0:.3f} ({t.consumers}x{t.weight_cols} {t.t0}+{t.t1} at {plan.stages}, modelled "
            f"{t.efficiency(m, n, sms):.2f})",
            flush=True,
        )
        if None not in got:
            rows.append((m, k, t.tiles(m, n) >= gemm_rule.FILL * sms, *got))
    if not rows:
        print("no shape ran both kernels")
        return

    def score(lo: int, hi: int, most_k: int) -> tuple[float, float]:
        """Geometric mean and minimum where the band (and the rule's floor of FILL x SMs tiles) takes the kernel."""
        taken = [g_ if lo <= m <= hi and k <= most_k and fills else o for m, k, fills, o, g_ in rows]
        return math.exp(sum(map(math.log, taken)) / len(taken)), min(taken)

    geomean, low = score(1, 0, 0)  # an empty band
    print(f"\nwithout the band: geomean {geomean:.3f}, min {low:.3f}")
    if fp8:  # from past the fp8 decode band; the rule's fp8 band has no bound on K
        grid = itertools.product((65, 96, 128, 160, 200, 256), (500, 560, 700, 1000, 1500, 2048), (1 << 20,))
    else:
        grid = itertools.product((64, 128, 160, 200), (500, 700, 1000, 1500), (8192, 16384, 20480, 1 << 20))
    for geomean, low, lo, hi, most_k in sorted((*score(*b), *b) for b in grid)[::-1][:10]:
        print(f"{lo} <= M <= {hi}, K <= {most_k}: geomean {geomean:.3f}, min {low:.3f}")


def main() -> None:
    if "--band" in sys.argv:
        band(sys.argv[sys.argv.index("--dtype") + 1] if "--dtype" in sys.argv else "fp16")
        return
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k in shapes_from_argv(SHAPES):
        a, b, c, ref, cublas = fp16_problem(m, n, k)
        chosen = waves.gluon_mid_plan(m, n, sms)
        candidates = []
        for tile in waves.gluon_mid_tiles():
            model = tile.time(m, n, sms) / chosen.tile.time(m, n, sms)
            shallower = max(min(waves.GLUON_MID_STAGES), tile.deepest() - 1)
            depths = {tile.deepest()} | ({shallower} if tile == chosen.tile else set())
            for stages in sorted(depths):
                mark = " (plan)" if tile == chosen.tile and stages == chosen.stages else ""
                label = f"{tile.consumers}x{tile.weight_cols} {tile.t0}+{tile.t1} s{stages}{mark}"
                candidates.append(
                    (
                        label,
                        None,
                        lambda t=tile, s=stages: g.GluonMidGemm((a, b), c, s, tile=t),
                        lambda r, model=model: f"model {model:.2f}, {r.tile.tiles(m, n)} tiles",
                    )
                )
        probe(f"{m}x{n}x{k} fp16", candidates, {}, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
