"""Time the Triton split tail, stream-K and split-K kernels at forced tiles against cuBLAS, at the mid-M band's shapes:
which tile and schedule a rule should take where 128-row tiles pad M and leave the SMs a ragged wave. Every
candidate is checked against torch before it is timed (tools/gemm_probe.py). Not part of the suite's results.

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
            depths = (3, 4) if tile[:2] == (128, 256) else (4, 5)
            name = "x".join(map(str, tile[:3])) + f" w{tile[3]}"
            for kind, base in (("split-tail", gemm_streamk.SplitTailGemm), ("stream-k", gemm_streamk.StreamKGemm)):
                for s in depths:
                    cls = forced(base, tile)
                    candidates.append(
                        (f"{kind} {name} s{s}", None, lambda cls=cls, s=s: cls((a, b), c, s), lambda r: r.config[:150])
                    )
        for s in (3, 4):
            candidates.append(
                (f"split-k s{s}", None, lambda s=s: gemm_splitk.SplitKGemm((a, b), c, s), lambda r: r.config[:150])
            )
        for s in (4, 5):
            candidates.append(
                (f"mid-m s{s}", None, lambda s=s: gemm_mid.MidGemm((a, b), c, s), lambda r: r.config[:150])
            )
        probe(f"{m}x{n}x{k}", candidates, {}, c, ref, k, cublas, 2 * m * n * k)


if __name__ == "__main__":
    main()
