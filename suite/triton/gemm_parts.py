"""The parts the Triton GEMM kernels share, written once: the tile schedule (grouped tile order, balanced split-K
ranges, stream-K ranges and their per-tile units), the ``tl.dot`` main loop of each operand form (fp16 / bf16, and
fp8 with its K tiles' sums promoted into fp32), the epilogue that scales, casts and stores a tile, and the one
deterministic way partial sums are added (in a fixed order, so the bits do not depend on which program finished
first).

All are ``triton.jit`` functions of scalars and blocks, so the Gluon kernel calls the schedule helpers too."""

from __future__ import annotations

import triton
import triton.language as tl

# -- the tile schedule ---------------------------------------------------------------------------------------------


@triton.jit
def tile_coords(tile, tiles_m, tiles_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile index -> first row and column of C, GROUP_M tile rows at a time (programs in flight share L2)."""
    group_size = GROUP_M * tiles_n
    first_m = (tile // group_size) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (tile % group_size) % group_rows
    tile_n = (tile % group_size) // group_rows
    return tile_m * BLOCK_M, tile_n * BLOCK_N


@triton.jit
def split_range(split, splits, k_tiles):
    """Split ``split``'s K tiles [first, last) of ``splits`` balanced ranges: the remainder spreads over the
    splits; more splits than K tiles leaves some empty."""
    return split * k_tiles // splits, (split + 1) * k_tiles // splits


@triton.jit
def stream_k_range(program, sk_iters, sk_programs):
    """Program ``program``'s stream-K iterations [first, end): one contiguous, balanced range of ``sk_iters`` per
    program, empty past ``sk_programs``. ``program``'s type sets the width of the product ``program x sk_iters``
    (64 bits where it may pass 2^31)."""
    first = tl.minimum(program * sk_iters // sk_programs, sk_iters)
    end = tl.minimum((program + 1) * sk_iters // sk_programs, sk_iters)
    return first, end


@triton.jit
def stream_k_unit(it, end, k_tiles):
    """The unit at stream-K iteration ``it`` of a range ending at ``end``: (the stream-K tile t, its K tiles
    [kb, ke)); the next unit starts at ``it + ke - kb``."""
    t = it // k_tiles
    kb = it - t * k_tiles
    return t, kb, tl.minimum(k_tiles, kb + end - it)


@triton.jit
def walk_start(
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    num_programs,
    dp_tiles,
    sk_programs,
    sk_iters,
):
    """Where this persistent program starts its walk of a stream-K schedule (gemm_streamk.Schedule: its programs,
    data-parallel tiles, stream-K programs and iterations) over M x N x K in BLOCK_M x BLOCK_N tiles and BLOCK_K
    steps: the walk's state, (its first unit, 0; this program's data-parallel tiles; the range [it, end) of its first
    stream-K program (empty past the stream-K programs); that stream-K program, this program's own id (where the
    stream-K programs outnumber the launched ones, the split tail's shares in several rounds, it walks stream-K
    programs id, id + num_programs, ... in turn); the tile grid and its K tiles; the schedule as one tuple), for
    ``walk_unit``."""
    pid = tl.program_id(0)
    dp_units = tl.cdiv(tl.maximum(dp_tiles - pid, 0), num_programs)
    k_tiles = tl.cdiv(K, BLOCK_K)
    it, end = stream_k_range(pid.to(tl.int64), sk_iters, sk_programs)
    it, end = it.to(tl.int32), end.to(tl.int32)
    sched = (num_programs, dp_tiles, sk_programs, sk_iters)
    return 0, dp_units, it, end, pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), k_tiles, sched


@triton.jit
def walk_unit(
    unit,
    dp_units,
    it,
    end,
    sk_program,
    tiles_m,
    tiles_n,
    k_tiles,
    sched,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    ROUNDS: tl.constexpr = True,
):
    """This program's unit ``unit`` of its walk (``walk_start``'s state): its data-parallel tiles first, whole and
    round robin (``unit`` < ``dp_units``), then the units of its stream-K programs' ranges, [it, end) of
    ``sk_program``'s first. Returns (the tile, its first row and column of C (``tile_coords``), its K tiles [k_first,
    k_last), the workspace slot of its part where it covers the tile in part (64-bit, to be scaled by the tile's
    elements: 2 x the stream-K program for the first tile of its range, one more for its last, a range holding at most
    two partial tiles), then the walk's next state: the range's next iteration and end, the stream-K program they
    belong to (where this range is done, the next of this program's: num_programs on; ROUNDS off, a kernel whose
    schedules never hold more stream-K programs than programs, their one range), the next unit)."""
    num_programs, dp_tiles, sk_programs, sk_iters = sched[0], sched[1], sched[2], sched[3]
    tile = tl.program_id(0) + unit * num_programs
    k_first = k_tiles * 0
    k_last = k_tiles
    slot = sk_program.to(tl.int64) * 0
    if unit >= dp_units:
        t, k_first, k_last = stream_k_unit(it, end, k_tiles)
        tile = dp_tiles + t
        first, _ = stream_k_range(sk_program.to(tl.int64), sk_iters, sk_programs)
        slot = sk_program.to(tl.int64) * 2 + (t != (first // k_tiles).to(tl.int32)).to(tl.int64)
        it += k_last - k_first
        if ROUNDS and it >= end:  # the range is done: this program's next stream-K program's (empty past the last)
            sk_program += num_programs
            next_it, next_end = stream_k_range(sk_program.to(tl.int64), sk_iters, sk_programs)
            it, end = next_it.to(tl.int32), next_end.to(tl.int32)
    m0, n0 = tile_coords(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
    return tile, m0, n0, k_first, k_last, slot, it, end, sk_program, unit + 1


# -- the main loop -------------------------------------------------------------------------------------------------


@triton.jit
def mac_loop(
    a_desc,
    b_desc,
    m0,
    n0,
    k_first,
    k_last,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
):
    """K tiles [k_first, k_last) of the tile at (m0, n0) through tensor descriptors (TMA into the pipeliner's
    num_stages ring, zero-filled past the edges), wgmma on the oldest; the fp32 accumulator.

    B_K_MAJOR (fp8, B given N x K, ``b_desc``'s box [BLOCK_N // 2, BLOCK_K]): wgmma sums fp8 products with fewer
    mantissa bits than fp32, so each K tile's sum is promoted into fp32 registers (``max_num_imprecise_acc=
    BLOCK_K``), as promoted cuBLAS (``torch._scaled_mm(..., use_fast_accum=False)``) and the PTX kernels do. In two
    halves of N: the promotion keeps a second accumulator per dot, and a whole 128 x 256 tile's would not fit in
    registers beside the first."""
    if B_K_MAJOR:
        left = tl.zeros((BLOCK_M, BLOCK_N // 2), dtype=tl.float32)
        right = tl.zeros((BLOCK_M, BLOCK_N // 2), dtype=tl.float32)
        for kt in range(k_first, k_last):
            a_tile = a_desc.load([m0, kt * BLOCK_K])
            b_left = b_desc.load([n0, kt * BLOCK_K])
            b_right = b_desc.load([n0 + BLOCK_N // 2, kt * BLOCK_K])
            left = tl.dot(a_tile, b_left.T, left, max_num_imprecise_acc=BLOCK_K)
            right = tl.dot(a_tile, b_right.T, right, max_num_imprecise_acc=BLOCK_K)
        return tl.reshape(tl.permute(tl.join(left, right), (0, 2, 1)), (BLOCK_M, BLOCK_N))
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_first, k_last):
            acc = tl.dot(a_desc.load([m0, kt * BLOCK_K]), b_desc.load([kt * BLOCK_K, n0]), acc)
        return acc


# -- the epilogue and the fix-up -----------------------------------------------------------------------------------


@triton.jit
def scaled(acc, scale_a, scale_b, SCALED: tl.constexpr):
    """The fp32 sum times fp8's per-tensor scales (once, on the whole sum, as torch._scaled_mm), or as it is."""
    if SCALED:
        acc = acc * (tl.load(scale_a) * tl.load(scale_b))
    return acc


@triton.jit
def store_tile(ptrs, acc, mask, scale_a, scale_b, OUT_DTYPE: tl.constexpr, SCALED: tl.constexpr):
    """A finished fp32 sum to C: scaled (fp8), cast to C's type, stored where ``mask``."""
    tl.store(ptrs, scaled(acc, scale_a, scale_b, SCALED).to(OUT_DTYPE), mask=mask)


@triton.jit
def add_in_order(total, ptrs, stride, count, mask, UNROLL: tl.constexpr):
    """``total`` + the ``count`` fp32 partials at ``ptrs``, ``ptrs + stride``, ..., added one at a time in that
    order: one fixed order of additions per element, so the result is the same bits every run, whichever program
    wrote its partial first. UNROLL partials are loaded at once (in flight together) before they are added; a load
    past ``count`` adds an exact 0."""
    for j0 in range(0, count, UNROLL):
        for u in tl.static_range(UNROLL):
            j = j0 + u
            # j as a block: j < count is a Python bool where the bounds are constexpr, which no mask may be
            in_range = tl.full(mask.shape, 0, tl.int32) + j < count
            total += tl.load(ptrs + j * stride, mask=mask & in_range, other=0.0)
    return total
