"""Time the Triton mid-M kernel (suite/triton/gemm_mid.py) at forced token tiles: every tile the rule weighs past one
tile of M (16 to 208 rows by 16, and 256 at 16 bits) at 4 and 5 stages where its ring fits, beside the split tail at
3 and 4, against cuBLAS, fp16. Each row says the model's time (suite.waves.triton_mid_time, relative to the rule's
tile) and the tile the rule picks is marked. It fitted TRITON_MID_PIECE_TOKENS and the auto rule's wide mid-M band
(suite.gemm_rule.TRITON_MID_WIDE_M, TRITON_MID_WAVES). Every candidate is checked against torch before it is timed
(tools/gemm_probe.py). Not part of the suite's results.

Run from the repository root: PYTHONPATH=. python3 tools/tune_gemm_mid_triton.py [--tiles T,T,...] [--shape MxNxK ...]
(--tiles: only these token tiles, beside the rule's)"""

from __future__ import annotations

import sys

import torch

from suite import waves
from suite.triton import gemm_mid, gemm_streamk
from tools.gemm_probe import fp16_problem, probe, shapes_from_argv

# nine shapes of the seed-1 fp16 sweep (its weak band and the mid-M kernel's own) and three outside it, M = 140-2049
SHAPES = (
    (341, 6144, 11008),
    (307, 24576, 6144),
    (529, 10240, 11008),
    (950, 11008, 3072),
    (202, 3584, 36864),
    (206, 4608, 16384),
    (2049, 22016, 24576),
    (1524, 15360, 18944),
    (140, 36864, 18944),
    (425, 22016, 11008),
    (700, 8192, 8192),
    (360, 8192, 11008),
)


def forced(block_t: int) -> type[gemm_mid.MidGemm]:
    """The mid-M launcher with every shape's token tile ``block_t``."""

    class Forced(gemm_mid.MidGemm):
        def _plan(self, sms=None):
            rule = gemm_mid.mid_token_rows
            gemm_mid.mid_token_rows = lambda *_: block_t
            try:
                super()._plan(sms)
            finally:
                gemm_mid.mid_token_rows = rule

    return Forced


def wanted_tiles() -> set[int] | None:
    """``--tiles T,T,...``: only these token tiles (the rule's is timed too), else every tile."""
    if "--tiles" not in sys.argv:
        return None
    return {int(t) for t in sys.argv[sys.argv.index("--tiles") + 1].split(",")}


def main() -> None:
    only = wanted_tiles()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k in shapes_from_argv(SHAPES):
        a, b, c, ref, cublas = fp16_problem(m, n, k)
        rule = waves.mid_token_rows(m, n, k, sms)
        tiles = sorted({*(only or (*range(16, waves.MID_MOST_TOKENS + 1, 16), waves.MID_WIDE_TOKENS)), rule})
        rule_time = waves.triton_mid_time(m, n, k, sms, rule)
        candidates = []
        for block_t in tiles:
            model = waves.triton_mid_time(m, n, k, sms, block_t) / rule_time
            for stages in (4, 5):
                if not waves.triton_mid_ring_fits(block_t, stages):
                    continue
                label = f"mid {block_t} s{stages}" + (" (rule)" if block_t == rule else "")
                launch = forced(block_t)
                candidates.append(
                    (
                        label,
                        None,
                        lambda cls=launch, s=stages: cls((a, b), c, s),
                        lambda r, model=model: f"model {model:.2f}, {r.config[60:150]}",
                    )
                )
        for stages in (3, 4):
            candidates.append(
                (
                    f"split-tail s{stages}",
                    None,
                    lambda s=stages: gemm_streamk.SplitTailGemm((a, b), c, s),
                    lambda r: r.config[:100],
                )
            )
        probe(f"{m}x{n}x{k} fp16 (rule: {rule} tokens)", candidates, {}, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
