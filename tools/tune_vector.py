"""Sweep the vector kernels' knobs on a GPU (PTX: threads, chunks per thread, tiles per block; Triton: BLOCK,
warps, tiles per program) and print GB/s and % of copy_ measured in the same run. Used to choose the defaults
in suite/ptx/vector.py and suite/triton/vector.py; not part of the suite's results.
Run from the repository root: PYTHONPATH=. python3 tools/tune_vector.py"""

import itertools
import sys

import numpy as np
import torch
from triton.testing import do_bench

from suite.ptx import loader, vector
from suite.triton import vector as tv

N = 2**28
x = torch.randn(N, device="cuda")
y = torch.empty_like(x)
gb = 2 * N * 4 / 1e9


def bench(fn):
    fn()
    torch.cuda.synchronize()
    return gb / (float(np.median(do_bench(fn, warmup=25, rep=120, return_mode="all"))) * 1e-3)


copy_bw = bench(lambda: y.copy_(x))
rows = []
for threads, chunks in itertools.product((128, 256), (4, 8)):
    mod = loader.compile_cu(
        vector.SOURCE, tuple(vector.name_expression(s) for s in vector.STAGES),
        defines=(f"VEC_CHUNKS_PER_THREAD={chunks}", f"VEC_THREADS_PER_BLOCK={threads}"))
    tile = threads * chunks * 4
    tiles = -(-N // tile)
    for stages in (1, 2, 4):
        k = mod.kernel(vector.name_expression(stages))
        smem = stages * tile * 4
        occ = loader.occupancy(k, threads, smem)
        for per_block in (1, 2, 4, 8, 16):
            grid = -(-tiles // per_block)
            fn = lambda: loader.launch(k, grid, threads, smem, x.data_ptr(), y.data_ptr(), np.int64(N))
            bw = bench(fn)
            assert torch.equal(y, 2 * x)
            rows.append((bw, f"ptx threads={threads} chunks={chunks} stages={stages} occ={occ} "
                             f"tiles/block={per_block}"))
for block, warps, per_program, stages in itertools.product((2048, 4096, 8192), (4, 8), (1, 2, 4, 8), (1, 3)):
    grid = -(-(-(-N // block)) // per_program)
    fn = lambda: tv.scale2_kernel[(grid,)](x, y, N, BLOCK=block, TILES_PER_PROGRAM=per_program, NUM_STAGES=stages,
                                           num_warps=warps, num_stages=stages)
    bw = bench(fn)
    assert torch.equal(y, 2 * x)
    rows.append((bw, f"triton BLOCK={block} warps={warps} tiles/program={per_program} stages={stages}"))
print(f"copy_ {copy_bw:.0f} GB/s")
for bw, what in sorted(rows, reverse=True):
    print(f"{bw:7.0f} GB/s {100 * bw / copy_bw:5.1f}%  {what}")
sys.stdout.flush()
