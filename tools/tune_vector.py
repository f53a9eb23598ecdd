"""Sweep the vector kernels' configurations on a GPU at 1 GiB and print GB/s and % of copy_ measured in the same run,
best first: tile size, threads (warps), schedule (short runs of r tiles per block, or a persistent grid pinned to k
blocks per SM) and ring depth, for the cp.async ring, the bulk-copy ring (sm_90+) and the Triton loop. Used to choose
each backend's BANDWIDTH configuration (suite/ptx/vector.py, suite/ptx/vector_bulk.py, suite/triton/vector.py: the
headline rows); not part of the suite's results. Every configuration is checked bit-exact before it is timed.

Run from the repository root: PYTHONPATH=. python3 tools/tune_vector.py [--quick] [--triton]
--triton: only the Triton loop, over a wider space (tiles to 64 KiB, 4 and 8 warps), each
configuration's % of copy_ taken against copy_ timed right before and after it.
--triton-desc: the same for the Triton loop through tensor descriptors (suite/triton/vector_desc.py), over tiles,
warps, schedules and num_stages."""

import itertools
import sys

import numpy as np
import torch
from triton.testing import do_bench

from suite.ptx import vector, vector_bulk
from suite.streaming import Schedule
from suite.triton import vector as tvector
from suite.triton import vector_desc as tdesc

QUICK = "--quick" in sys.argv
TRITON_ONLY = "--triton" in sys.argv
TRITON_DESC = "--triton-desc" in sys.argv
N = 2**28
x = torch.randn(N, device="cuda")
y = torch.empty_like(x)
gb = 2 * N * 4 / 1e9
SCHEDULES = [Schedule(tiles_per_block=r) for r in (1, 2, 4)] + [Schedule(blocks_per_sm=k) for k in (1, 2)]
TILES = (32 * 1024,) if QUICK else (16 * 1024, 32 * 1024)


def bench(fn):
    fn()
    torch.cuda.synchronize()
    return gb / (float(np.median(do_bench(fn, warmup=25, rep=60 if QUICK else 120, return_mode="all"))) * 1e-3)


def trial(rows, what, make):
    try:
        fn = make()
    except ValueError as e:  # a ring that does not fit the residency asked for
        print(f"skip {what}: {e}", file=sys.stderr)
        return
    y.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x), what
    rows.append((bench(fn), f"{what} [{fn.info.config}], in flight {fn.info.bytes_in_flight_per_sm} B/SM"))


copy_bw = bench(lambda: y.copy_(x))
rows = []


def around_copy(rows, what, make):
    """Check ``make()``'s launcher bit-exact, then time it between two copy_ timings; skip what does not fit."""
    try:
        fn = make()
        y.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - out of shared memory: say so, go on
        print(f"skip {what}: {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
        return
    assert torch.equal(y, 2 * x), what
    before = bench(lambda: y.copy_(x))
    bw = bench(fn)
    around = (before + bench(lambda: y.copy_(x))) / 2
    rows.append((bw / around, f"{what} [{fn.info.config}] copy_ around {around:.0f} GB/s"))


if TRITON_ONLY or TRITON_DESC:
    if TRITON_DESC:
        schedules = [Schedule(tiles_per_block=r) for r in (1, 2, 4)] + [Schedule(blocks_per_sm=k) for k in (1, 2)]
        for tile, warps, schedule, stages in itertools.product(
            (16 * 1024, 32 * 1024, 64 * 1024), (4, 8), schedules, (2, 3, 4)
        ):
            config = tdesc.Config(tile_bytes=tile, num_warps=warps, schedule=schedule)
            around_copy(rows, f"triton desc num_stages={stages}", lambda: tdesc.Scale2(x, y, stages, config))
    else:
        for tile, warps, run, stages in itertools.product((16 * 1024, 32 * 1024, 64 * 1024), (4, 8), (1, 2), (1, 3, 4)):
            config = tvector.Config(tile_bytes=tile, num_warps=warps, schedule=Schedule(tiles_per_block=run))
            around_copy(rows, f"triton num_stages={stages}", lambda: tvector.Scale2(x, y, stages, config))
    for ratio, what in sorted(rows, reverse=True):
        print(f"{100 * ratio:5.1f}%  {what}")
    sys.exit(0)
for tile, threads, schedule, stages in itertools.product(TILES, (128, 256), SCHEDULES, (2, 4)):
    config = vector.Config(tile_bytes=tile, threads=threads, schedule=schedule)
    trial(rows, f"ptx cp.async ring stages={stages}", lambda: vector.Scale2(x, y, stages, config))
if torch.cuda.get_device_capability() >= vector_bulk.MIN_CAPABILITY:
    for tile, warps, schedule, stages in itertools.product(TILES, (4, 8), SCHEDULES, (2, 4, 6)):
        config = vector_bulk.Config(tile_bytes=tile, consumer_warps=warps, schedule=schedule)
        trial(rows, f"ptx bulk ring stages={stages}", lambda: vector_bulk.Scale2(x, y, stages, config))
for tile, warps, schedule, stages in itertools.product(TILES, (4, 8), SCHEDULES, (1, 3, 4)):
    config = tvector.Config(tile_bytes=tile, num_warps=warps, schedule=schedule)
    trial(rows, f"triton tile loop num_stages={stages}", lambda: tvector.Scale2(x, y, stages, config))
print(f"copy_ {copy_bw:.0f} GB/s")
for bw, what in sorted(rows, reverse=True):
    print(f"{bw:7.0f} GB/s {100 * bw / copy_bw:5.1f}%  {what}")
sys.stdout.flush()
