"""Time the PTX mid-M kernel (suite.ptx.gemm_decode.MidModule) at forced tiles: every token tile the rule weighs
(``mid_token_tiles``) at two and three consumer warpgroups, at 4 to 6 stages where the ring fits, and the wide tile's
(two weight tiles per consumer, 256 weight rows) at 3 and 4, each between two cuBLAS timings (its ratio is against their
mean), beside the tile the rule picks. Every candidate is checked against torch before it is timed. With --rungs, the
registered PTX tile rungs (the auto row's other candidates) at every depth too, as the mid-M kernel's competition. Used
to fit ``mid_plan``'s model and the auto rule's mid-M band; not part of the suite's results. ``--dtype fp8e4m3``: fp8
against promoted cuBLAS, two consumer warpgroups, every token tile the build takes (promoted in pairs up to 104 tokens,
with one partial past them), at unjudged fp8 shapes of sweep seeds 3-5: the data that fitted the fp8 ring depths
(suite.gemm_rule.PTX_MID_FP8_DEEP_TOKENS).

Run from the repository root:
PYTHONPATH=. python3 tools/tune_gemm_mid.py [--rungs] [--dtype fp8e4m3] [--shape MxNxK ...]"""

from __future__ import annotations

import sys

import torch

from suite import waves
from suite.ptx import gemm_auto
from suite.ptx import gemm_decode as g
from tools.gemm_probe import build_all, probe, problem, shapes_from_argv

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
# fp8 shapes of sweep seeds 3-5 (none from the judged seeds 1 and 2) in the fp8 mid-M band, M = 131-536
FP8_SHAPES = (
    (131, 24576, 36864),
    (137, 27648, 11008),
    (143, 10240, 11008),
    (176, 24576, 28672),
    (215, 36864, 16384),
    (267, 57344, 13824),
    (293, 57344, 28672),
    (425, 22016, 11008),
    (536, 11008, 16384),
)
STAGES = (4, 5, 6)


WIDE_STAGES = (3, 4)


def tile_module(block_t: int, consumers: int, w_tiles: int = 1, dtype: str = "fp16") -> g.MidModule:
    """One tile's build at ``dtype`` only, at every depth of STAGES (the wide tile's: WIDE_STAGES) its ring fits."""
    module = g.MidModule((block_t, consumers), w_tiles=w_tiles)
    module.dtypes = (dtype,)
    depths = STAGES if w_tiles == 1 else WIDE_STAGES
    boxes = consumers * w_tiles
    module.stages = tuple(s for s in depths if waves.mid_ring_bytes(block_t, boxes, s) <= waves.MID_SMEM)
    return module


def token_tiles(m: int, consumers: int, dtype: str) -> list[int]:
    """The token tiles timed at M: the model's (``mid_token_tiles``), and at fp8 every split of M over 1, 2, ... tiles
    (rounded up to 8) that the build takes, the one-partial tile that the model leaves out where M takes one too."""
    tiles = set(waves.mid_token_tiles(m, consumers, dtype))
    if dtype == "fp8e4m3":
        tiles |= {t for i in range(1, 9) if waves.mid_tile_ok(t := (-(-m // i) + 7) // 8 * 8, consumers, dtype)}
    return sorted(tiles)


def main() -> None:
    dtype = sys.argv[sys.argv.index("--dtype") + 1] if "--dtype" in sys.argv else "fp16"
    fp8 = dtype == "fp8e4m3"
    shapes = shapes_from_argv(FP8_SHAPES if fp8 else SHAPES)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = {(t, c, 1) for m, _, _ in shapes for c in waves.MID_CONSUMERS for t in token_tiles(m, c, dtype)}
    wide = waves.MID_WIDE_CONSUMERS  # two m64 weight tiles per consumer warpgroup: 256 weight rows on two
    tiles |= {
        (t, wide, 2)
        for m, _, _ in shapes
        for t in waves.mid_token_tiles(m, wide, dtype)
        if waves.mid_wide_tile_ok(t, wide, 2, dtype)
    }
    modules = {tile: tile_module(*tile, dtype=dtype) for tile in sorted(tiles)}
    rungs = {}
    if "--rungs" in sys.argv:  # the auto row's candidates but the swapped kernels
        rungs = {name: k for name, k in gemm_auto.CANDIDATES.items() if "swap-ab" not in name}
    failed = build_all(modules | rungs)
    torch.manual_seed(0)
    for m, n, k in shapes:
        inputs, c, ref, cublas = problem(m, n, k, dtype)
        rule = g.mid_plan(m, n, k, sms, dtype=dtype)
        candidates = []  # (label, build key, make_launch, note(launcher))
        for t, c_, w in sorted(tiles):
            if t not in token_tiles(m, c_, dtype):
                continue
            module = modules[(t, c_, w)]
            ruled = (t, c_, w) == (rule.block_t, rule.consumers, rule.w_tiles)
            model = waves.mid_time(m, n, k, sms, t, c_, w, dtype)
            for stages in module.stages:
                candidates.append(
                    (
                        f"{64 * c_ * w}x{t}{' wide' if w > 1 else ''} s{stages}" + (" (rule)" if ruled else ""),
                        (t, c_, w),
                        lambda s=stages, mod=module, t=t, c_=c_: g.Decode(
                            inputs, c, s, kernel=mod, consumers=c_, block_t=t
                        ),
                        lambda launch, model=model: (
                            f"{launch.plan.tiles_w * launch.plan.tiles_t} tiles x {launch.plan.splits}, grid "
                            f"{launch.grid}, model {model:.0f}"
                        ),
                    )
                )
        for name, kernel in rungs.items():
            for stages in kernel.stages_for(dtype):
                candidates.append(
                    (
                        f"{name.removesuffix(' tma+wgmma')} s{stages}",
                        name,
                        lambda s=stages, kernel=kernel: kernel.launch(inputs, c, s),
                        lambda launch: "(rung)",
                    )
                )
        title = f"{m}x{n}x{k} {dtype}: % of cuBLAS (rule: {rule.block_w}x{rule.block_t})"
        probe(title, candidates, failed, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
