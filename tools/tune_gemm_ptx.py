"""Time GEMM schedules that are not registered rows at the sweep's weakest shapes (the mid-M band, where the output
tiles are one to two waves), each between two cuBLAS timings (its ratio is against their mean). Candidates: the
registered PTX rows the rule picks there; the split tail on 128x256, 128x192 and 128x128 tiles, and on the first
two at forced share counts (the last wave's shares in one round or several); PTX split-K at
forced split counts (how many splits a wave-aware split count would need) and on 128x256 and 128x192 tiles;
stream-K with the persistent rung's policies (warpgroup index in uniform registers, tile rows in groups of 16); the
Triton split-K at forced split counts and its split tail. Every candidate is checked against torch before it is
timed. Used to choose registered configurations and split rules; not part of the suite's results.

Run from the repository root: PYTHONPATH=. python3 tools/tune_gemm_ptx.py [--quick] [--match TEXT] [--shape MxNxK ...]
--quick: the registered rows and two split counts only (a first look in under two minutes); --match TEXT: the
candidates whose label holds TEXT, beside the five registered rows (--shape last: it takes the rest of the line)."""

from __future__ import annotations

import dataclasses
import sys

import torch

from suite.ptx import gemm_tma as g
from suite.triton import gemm_splitk, gemm_streamk
from tools.gemm_probe import build_all, fp16_problem, probe, shapes_from_argv

# the sweep's weakest fp16 cells on the H100 (best row / cuBLAS 0.75-0.86), and a named shape as a control
SHAPES = (
    (341, 6144, 11008),
    (529, 10240, 11008),
    (202, 3584, 36864),
    (950, 11008, 3072),
    (2049, 22016, 24576),
    (140, 36864, 18944),
    (4000, 3000, 1000),
)
SPLIT_COUNTS = (1, 2, 3, 4, 6, 8, 11)
TAIL_SHARES = (1, 2, 3, 4, 5, 7)  # forced shares of each tile of the split tail's last wave


def candidates(quick: bool) -> list[tuple[str, g.Config | str, int, int | None]]:
    """(label, config (or "triton split-k" / "triton split-tail"), stages, forced splits or None)."""
    reg = g.CONFIGS
    rows = [
        ("128x256 persistent tma-store s3", reg["128x256x64 ws 2wg persistent tma-store"], 3, None),
        ("128x192 persistent tma-store s4", reg["128x192x64 ws 2wg persistent tma-store"], 4, None),
        ("128x256 stream-k s4", reg["128x256 stream-k"], 4, None),
        ("256x128 stream-k s4", reg["256x128 stream-k"], 4, None),
        ("128x128 split-k s4 (rule)", reg["128x128 split-k"], 4, None),
    ]
    counts = (2, 4) if quick else SPLIT_COUNTS
    rows += [(f"128x128 split-k s4 x{s}", reg["128x128 split-k"], 4, s) for s in counts]
    if quick:
        return rows
    split256 = g.Config(256, 2, False, False, (3, 4), schedule="split-k", uniform_warpgroup=True, group_m=16)
    split192 = g.Config(192, 2, False, False, (3, 4), schedule="split-k", dtypes=("fp16", "bf16"))
    rows += [(f"128x256 split-k s3 x{s}", split256, 3, s) for s in SPLIT_COUNTS]
    rows += [(f"128x192 split-k s4 x{s}", split192, 4, s) for s in (1, 2, 3, 4)]
    sk = dataclasses.replace(reg["128x256 stream-k"], uniform_warpgroup=True, group_m=16)
    rows += [("128x256 stream-k s4 uniform g16", sk, 4, None), ("128x256 stream-k s3 uniform g16", sk, 3, None)]
    # stream-K on the narrower tiles: where 128x192 tiles are fewer than the SMs (341 x 6144: 96 tiles on 132 SMs,
    # which the split tail leaves whole) every block takes an equal share of all the tiles' K iterations
    sk192 = dataclasses.replace(reg["128x192x64 ws 2wg persistent tma-store"], tma_store=False, schedule="stream-k")
    sk128 = g.Config(128, 2, True, False, (4, 6), schedule="stream-k")
    rows += [(f"128x192 stream-k s{st}", sk192, st, None) for st in (3, 4)]
    rows += [(f"128x128 stream-k s{st}", sk128, st, None) for st in (4, 6)]
    # the split tail (the plan's split count) on the registered 128x256 rung, and on 128x192 and 128x128 tiles
    tail = reg["128x256 split-tail"]
    tail192 = reg["128x192 split-tail"]
    tail128 = dataclasses.replace(tail, block_n=128, stages=(4, 5, 6), uniform_warpgroup=False)
    rows += [(f"128x256 split-tail s{st}", tail, st, None) for st in (3, 4)]
    rows += [("128x192 split-tail s4", tail192, 4, None)]
    # ... and at forced share counts (1: the tail whole), the tail's shares in one round or several: the data for
    # suite.waves.TAIL_ROUNDS_LEAST_SAVING
    rows += [(f"128x256 split-tail s4 x{s}", tail, 4, s) for s in TAIL_SHARES]
    rows += [(f"128x192 split-tail s4 x{s}", tail192, 4, s) for s in TAIL_SHARES]
    rows += [(f"128x128 split-tail s{st}", tail128, st, None) for st in (4, 6)]
    rows += [(f"triton split-k s4 x{s}", "triton split-k", 4, s) for s in (None, *SPLIT_COUNTS)]
    rows += [(f"triton split-tail s{st}", "triton split-tail", st, None) for st in (3, 4)]
    return rows


def main() -> None:
    shapes = shapes_from_argv(SHAPES)
    rows = candidates("--quick" in sys.argv)
    if "--match" in sys.argv:  # only the candidates whose label holds this text (and the registered rows, to compare)
        text = sys.argv[sys.argv.index("--match") + 1]
        rows = [r for i, r in enumerate(rows) if text in r[0] or i < 5]
    # each PTX candidate built once, fp16 at its probed depth only
    rows = [
        (label, c if isinstance(c, str) else dataclasses.replace(c, dtypes=("fp16",), stages=(st,)), st, s)
        for label, c, st, s in rows
    ]
    modules = {c: g.TmaGemm(c) for _, c, _, _ in rows if not isinstance(c, str)}
    failed = build_all(modules)
    torch.manual_seed(0)
    for m, n, k in shapes:
        a, b, c, ref, cublas = fp16_problem(m, n, k)
        timed = []  # (label, build key, make_launch, note(launcher))
        for label, config, stages, splits in rows:

            def make_launch(config=config, stages=stages, splits=splits):
                if config == "triton split-k":
                    return gemm_splitk.SplitKGemm((a, b), c, stages, splits=splits)
                if config == "triton split-tail":
                    return gemm_streamk.SplitTailGemm((a, b), c, stages)
                return g.Gemm((a, b), c, config, stages, kernel=modules[config], splits=splits)

            timed.append((label, config, make_launch, lambda launch: f"grid {getattr(launch, 'grid', '-')}"))
        probe(f"{m}x{n}x{k} fp16: % of cuBLAS", timed, failed, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
