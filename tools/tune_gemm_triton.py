"""Time the Triton descriptor GEMM (suite/triton/gemm_desc.py) over tiles, depths, warps and schedules at the suite's
GEMM shapes, each configuration between two cuBLAS timings (its ratio is against their mean, so clock changes under
power limits hit both). Prints % of cuBLAS per shape, best first. Used to choose the registered and autotuned
configurations; not part of the suite's results. Every configuration is checked against torch before it is timed.

Run from the repository root: PYTHONPATH=. python3 tools/tune_gemm_triton.py [--extra] [--shape MxNxK ...]
--extra: the second round around the best tile (GROUP_M 4 and 32, BLOCK_K 128 at 2 stages, BLOCK_K 32 at 5-6), each
next to the first round's best for comparison. --shape: only these shapes."""

import statistics
import sys

import torch
import triton
from triton.testing import do_bench

from suite.triton import gemm_desc as g

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4000, 3000, 1000))
CONFIGS = [  # BM, BN, BK, stages, warps, persistent, subtile, group_m
    (128, 256, 64, 3, 8, True, True, 8),
    (128, 256, 64, 3, 8, True, True, 16),
    (128, 256, 64, 3, 8, True, False, 8),
    (128, 256, 64, 3, 8, True, False, 16),
    (128, 256, 64, 4, 8, True, True, 8),
    (128, 256, 64, 3, 8, False, False, 8),
    (256, 128, 64, 3, 8, True, True, 8),
    (256, 128, 64, 3, 8, True, False, 8),
    (256, 128, 64, 4, 8, True, True, 8),
    (128, 128, 64, 4, 8, True, True, 8),
    (128, 128, 64, 5, 4, True, True, 8),
]

EXTRA = [
    (128, 256, 64, 3, 8, True, True, 16),
    (128, 256, 64, 3, 8, True, False, 8),  # the first round's best
    (128, 256, 64, 3, 8, True, True, 4),
    (128, 256, 64, 3, 8, True, True, 32),
    (128, 256, 64, 3, 8, True, False, 32),
    (128, 256, 128, 2, 8, True, True, 8),
    (128, 256, 32, 5, 8, True, True, 8),
    (128, 256, 32, 6, 8, True, False, 8),
]
if "--extra" in sys.argv:
    CONFIGS = EXTRA
if "--shape" in sys.argv:
    wanted = sys.argv[sys.argv.index("--shape") + 1 :]
    SHAPES = tuple(s for s in SHAPES if "x".join(map(str, s)) in wanted)


def med(fn):
    return statistics.median(do_bench(fn, warmup=25, rep=100, return_mode="all"))


torch.manual_seed(0)
triton.set_allocator(g._alloc_scratch)
sms = torch.cuda.get_device_properties(0).multi_processor_count
for m, n, k in SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    cublas = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    ops = g.Operands(a, b, c)
    rows = []
    for bm, bn, bk, s, w, p, sub, gm in CONFIGS:
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        grid = min(tiles, sms) if p else tiles

        def run():
            g.gemm_desc_kernel[(grid,)](
                *ops.args(),
                grid,
                BLOCK_M=bm,
                BLOCK_N=bn,
                BLOCK_K=bk,
                GROUP_M=gm,
                PERSISTENT=p,
                C_DESC=ops.c_desc,
                EPILOGUE_SUBTILE=sub,
                num_warps=w,
                num_stages=s,
            )

        what = f"{bm}x{bn}x{bk} s={s} w={w} {'persistent' if p else 'tile/program'}{' subtile' if sub else ''} G={gm}"
        try:
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            torch.testing.assert_close(c.float(), ref, atol=0.05 * k**0.5, rtol=1e-2)
        except Exception as e:  # noqa: BLE001 - out of resources or wrong: say so, go on
            print(f"skip {what}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            continue
        before = med(cublas)
        t = med(run)
        after = med(cublas)
        rows.append(((before + after) / 2 / t, t, what))
    print(f"== {m}x{n}x{k}")
    for ratio, t, what in sorted(rows, reverse=True):
        print(f"  {100 * ratio:6.1f}%  {t * 1e3:8.1f} us  {what}")
    sys.stdout.flush()
