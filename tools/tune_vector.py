"""Sweep the vector kernels' knobs on a GPU (PTX: chunks per thread, store hint, grid; Triton: BLOCK, warps, grid)
and print GB/s and % of copy_ measured in the same run. Used to choose the defaults in suite/ptx/vector.py and
suite/triton/vector.py; not part of the suite's results."""

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
    return gb / (float(np.median(do_bench(fn, warmup=25, rep=150, return_mode="all"))) * 1e-3)


copy_bw = bench(lambda: y.copy_(x))
rows = []
for chunks, cs in itertools.product((2, 4, 8), (1, 0)):
    mod = loader.compile_cu(vector.SOURCE, tuple(vector.name_expression(s) for s in vector.STAGES),
                            defines=(f"VEC_CHUNKS_PER_THREAD={chunks}", f"VEC_STREAMING_STORES={cs}"))
    tile = 256 * chunks * 4
    for stages in vector.STAGES:
        k = mod.kernel(vector.name_expression(stages))
        smem = stages * tile * 4
        occ = loader.occupancy(k, 256, smem)
        tiles = -(-N // tile)
        for grid_name, grid in (("resident", loader.num_sms() * occ), ("2x", 2 * loader.num_sms() * occ),
                                ("tiles/8", tiles // 8), ("tiles/32", tiles // 32)):
            fn = lambda: loader.launch(k, grid, 256, smem, x.data_ptr(), y.data_ptr(), np.int64(N))
            bw = bench(fn)
            assert torch.equal(y, 2 * x)
            rows.append((bw, f"ptx chunks={chunks} cs={cs} stages={stages} occ={occ} grid={grid_name}({grid})"))
for block, warps, per_sm, stages in itertools.product((2048, 4096, 8192), (4, 8), (2, 4, 8, 0), (1, 3)):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = -(-N // block)
    grid = tiles if per_sm == 0 else sms * per_sm
    fn = lambda: tv.scale2_kernel[(grid,)](x, y, N, BLOCK=block, NUM_STAGES=stages, num_warps=warps, num_stages=stages)
    bw = bench(fn)
    assert torch.equal(y, 2 * x)
    rows.append((bw, f"triton BLOCK={block} warps={warps} programs/SM={per_sm or 'all tiles'} stages={stages}"))
print(f"copy_ {copy_bw:.0f} GB/s")
for bw, what in sorted(rows, reverse=True):
    print(f"{bw:7.0f} GB/s {100 * bw / copy_bw:5.1f}%  {what}")
sys.stdout.flush()
