"""Probe (not part of the suite): the Triton persistent descriptor GEMM with descriptors built on the host (passed as
kernel parameters, no device-side tensormap creation) against the suite's device-built ones, and 2 programs per SM
of 128x128 tiles. Each configuration timed between two cuBLAS timings, two rounds.

Run from the repository root: PYTHONPATH=. python3 tools/probe_triton_gemm.py"""

import statistics
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

from suite.triton import gemm_desc as g


@triton.jit
def _split_store(c_desc, acc, m0, n0, BLOCK_N: tl.constexpr, PIECES: tl.constexpr):
    if PIECES == 1:
        c_desc.store([m0, n0], acc.to(tl.float16))
    elif PIECES == 2:
        left, right = tl.split(tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1)))
        c_desc.store([m0, n0], left.to(tl.float16))
        c_desc.store([m0, n0 + BLOCK_N // 2], right.to(tl.float16))
    else:
        left, right = tl.split(tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1)))
        l0, l1 = tl.split(tl.permute(tl.reshape(left, (acc.shape[0], 2, BLOCK_N // 4)), (0, 2, 1)))
        r0, r1 = tl.split(tl.permute(tl.reshape(right, (acc.shape[0], 2, BLOCK_N // 4)), (0, 2, 1)))
        c_desc.store([m0, n0], l0.to(tl.float16))
        c_desc.store([m0, n0 + BLOCK_N // 4], l1.to(tl.float16))
        c_desc.store([m0, n0 + BLOCK_N // 2], r0.to(tl.float16))
        c_desc.store([m0, n0 + 3 * BLOCK_N // 4], r1.to(tl.float16))


@triton.jit
def gemm_hd_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   PIECES: tl.constexpr, FLATTEN: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tiles_m * tiles_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        m0, n0 = g.tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([m0, kt * BLOCK_K])
            b = b_desc.load([kt * BLOCK_K, n0])
            acc = tl.dot(a, b, acc)
        _split_store(c_desc, acc, m0, n0, BLOCK_N, PIECES)


SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4000, 3000, 1000))
# kind, BM, BN, BK, stages, warps, programs per SM, pieces, group_m, flatten
CONFIGS = [
    ("device", 128, 256, 64, 3, 8, 1, 2, 8, True),
    ("host", 128, 256, 64, 3, 8, 1, 2, 8, True),
    ("host", 128, 256, 64, 3, 8, 1, 2, 8, False),
    ("host", 128, 256, 64, 3, 8, 1, 2, 4, True),
    ("host", 128, 256, 64, 3, 8, 1, 2, 4, False),
    ("host", 128, 256, 64, 3, 8, 1, 2, 16, False),
    ("host", 128, 256, 64, 3, 8, 1, 1, 8, False),
    ("host", 128, 256, 64, 4, 8, 1, 4, 8, False),
    ("host", 128, 256, 64, 3, 8, 1, 4, 8, False),
]


def med(fn):
    return statistics.median(do_bench(fn, warmup=25, rep=100, return_mode="all"))


torch.manual_seed(0)
triton.set_allocator(g._alloc_scratch)
sms = torch.cuda.get_device_properties(0).multi_processor_count
results = {}
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
for rnd in range(ROUNDS):
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        cublas = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        ops = g.Operands(a, b, c)
        for kind, bm, bn, bk, s, w, per_sm, pieces, gm, flat in CONFIGS:
            tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
            grid = min(tiles, per_sm * sms)
            if kind == "device":
                def run():
                    g.gemm_desc_kernel[(grid,)](*ops.args(), grid, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm,
                                                PERSISTENT=True, C_DESC=True, EPILOGUE_SUBTILE=pieces == 2,
                                                num_warps=w, num_stages=s)
            else:
                def run():
                    ad = TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm, bk])
                    bd = TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn])
                    cd = TensorDescriptor(c, [m, n], [c.stride(0), 1], [bm, bn // pieces])
                    gemm_hd_kernel[(grid,)](ad, bd, cd, m, n, k, grid, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                            GROUP_M=gm, PIECES=pieces, FLATTEN=flat, num_warps=w, num_stages=s)
            what = (f"{kind:6s} {bm}x{bn}x{bk} s={s} w={w} {per_sm}/SM pieces={pieces} G={gm}"
                    f"{'' if flat else ' no-flatten'}")
            try:
                c.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                torch.testing.assert_close(c.float(), ref, atol=0.05 * k ** 0.5, rtol=1e-2)
            except Exception as e:  # noqa: BLE001
                print(f"skip {what}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
                continue
            before = med(cublas)
            t = med(run)
            after = med(cublas)
            results.setdefault((m, n, k), {}).setdefault(what, []).append((before + after) / 2 / t)
        del a, b, c, ref
for shape, rows in results.items():
    print(f"== {'x'.join(map(str, shape))}: mean of {ROUNDS} rounds, then each round")
    for what, ratios in sorted(rows.items(), key=lambda kv: -statistics.mean(kv[1])):
        print(f"  {100 * statistics.mean(ratios):6.1f}%  ({' '.join(f'{100 * r:5.1f}' for r in ratios)})  {what}")
