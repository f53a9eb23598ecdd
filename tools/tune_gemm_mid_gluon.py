"""Time the swapped mid-M Gluon GEMM (suite/triton/gemm_mid_gluon.py) at forced tiles: every tile of its menu
(gemm_mid_gluon.tiles_that_fit) at its deepest ring (the plan's tile also one shallower), against cuBLAS, fp16.
Each row says the model's time (Tile.time, relative to the plan's tile) and the plan's tile is marked: the data to
fit FIXED_TOKENS and SMEM_BYTES_PER_MAC, and where triton:auto should take the kernel. Every candidate is checked
against torch before it is timed (tools/gemm_probe.py). Not part of the suite's results.

The default shapes are drawn from sweep seeds 3-7 (M = 245-2,083), none from the judged seeds 1 and 2.

Run from the repository root on an sm_90a GPU: PYTHONPATH=. python3 tools/tune_gemm_mid_gluon.py [--shape MxNxK ...]"""

from __future__ import annotations

import torch

from suite.triton import gemm_mid_gluon as g
from tools.gemm_probe import fp16_problem, probe, shapes_from_argv

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


def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k in shapes_from_argv(SHAPES):
        a, b, c, ref, cublas = fp16_problem(m, n, k)
        chosen = g.plan(m, n, sms)
        candidates = []
        for tile in g.tiles_that_fit():
            model = tile.time(m, n, sms) / chosen.tile.time(m, n, sms)
            depths = {tile.deepest()} | ({max(min(g.STAGES), tile.deepest() - 1)} if tile == chosen.tile else set())
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
