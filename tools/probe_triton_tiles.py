"""Time the Triton split tail at forced tiles (128x256, 128x128 and 64x256), beside split-K and the mid-M kernel,
against cuBLAS, at the mid-M band's shapes: whether narrower tiles, whose last wave splits where 128x256 tiles leave
SMs idle, pay for the operand bytes they move per MAC (docs/tuning.md). Every candidate is checked against torch
before it is timed (tools/gemm_probe.py). Not part of the suite's results.

Run from the repository root: PYTHONPATH=. python3 tools/probe_triton_tiles.py [--shape MxNxK ...]"""

from __future__ import annotations

from suite.triton import gemm_mid, gemm_splitk, gemm_streamk
from tools.gemm_probe import fp16_problem, probe, shapes_from_argv

SHAPES = (
    (341, 6144, 11008),
    (307, 24576, 6144),
    (529, 10240, 11008),
    (425, 22016, 11008),
    (950, 11008, 3072),
    (256, 10240, 8192),
)
TILES = ((128, 256, 64, 8), (128, 128, 64, 8), (64, 256, 64, 4), (128, 128, 64, 4))


def forced(base, tile):
    """``base`` at ``tile`` (BLOCK_M, BLOCK_N, BLOCK_K, warps), at any depth whose ring fits."""

    class Forced(base):
        depths = (2, 3, 4, 5, 6)

        def _tile_for(self, _tile=None):
            return super()._tile_for(tile)

    return Forced


def main() -> None:
    for m, n, k in shapes_from_argv(SHAPES):
        a, b, c, ref, cublas = fp16_problem(m, n, k)
        candidates = []
        for tile in TILES:
            name = "x".join(map(str, tile[:3])) + f" w{tile[3]}"
            for s in (3, 4) if tile[:2] == (128, 256) else (4, 5):
                cls = forced(gemm_streamk.SplitTailGemm, tile)
                candidates.append(
                    (f"split-tail {name} s{s}", None, lambda cls=cls, s=s: cls((a, b), c, s), lambda r: r.config[:150])
                )
        for kind, cls, s in (("split-k", gemm_splitk.SplitKGemm, 4), ("mid-m", gemm_mid.MidGemm, 4)):
            candidates.append((f"{kind} s{s}", None, lambda cls=cls, s=s: cls((a, b), c, s), lambda r: r.config[:150]))
        probe(f"{m}x{n}x{k}", candidates, {}, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
