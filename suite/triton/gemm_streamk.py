"""Stream-K GEMM in Triton: persistent programs (one per SM) share the MAC-loop iterations of the output tiles
evenly, whatever the tile count, and a deterministic second pass fixes up the tiles that several programs shared.

Split-K balances the work only when tiles x splits is close to a multiple of the SMs; stream-K balances it always.
One iteration is one K tile of one output tile (a BLOCK_K step of the mainloop). The schedule (``stream_k_schedule``):

* **tile rows in lockstep** (``lockstep_schedule``), where 2-16 tile rows divide the SMs closely: each row's
  iterations (its tiles in order x K tiles) cut into one contiguous, balanced range for each of q programs, the same
  q ranges in every row, so the programs of all rows, running the same work at the same rate, read the same K range
  of the same B columns together and B streams from DRAM about once (ranges that start anywhere in K have each row
  read B at its own time);
* else a data-parallel + stream-K hybrid (``schedule``): while two or more full waves of tiles remain, whole tiles
  are dealt round robin to the programs (each stored straight to C), leaving between one and two waves' worth of
  tiles, whose iterations (``sk_iters`` = tiles x K tiles) are cut into one contiguous, balanced range per program
  (program p: [p S / P, (p + 1) S / P));
* **the walk**: a program takes its range tile by tile; a tile it covers whole it stores to C, a tile it covers in
  part it stores as an fp32 partial into its own workspace slot (slot 0 for the first tile of its range, slot 1 for
  the last: a range holds at most two partial tiles); where the ranges outnumber the programs (the split tail's
  shares in several rounds), a program takes the ranges p, p + programs, ... in turn, each with its two slots;
* **fix-up pass** (``streamk_fixup_kernel``, launched after it on the same stream, counted in the time): for each
  tile that several programs covered (always contiguous programs, p_first..p_last), the partials are added in program
  order, scaled (fp8), cast and stored to C. The programs covering a tile follow from the range formula alone, so the
  order is fixed: bit-identical run to run, no atomics, no flags.

Tiles (``gemm_splitk.tile_for``): 64 or 128 rows (M <= 64 or not) by 256 columns, or 256 by 128 for 128 < M < 256 at
16-bit types, K steps of 64 (fp16 / bf16) or 128 (fp8), loads through host-built tensor descriptors (TMA),
``num_stages`` deep; fp8 takes B as N x K and computes ``tl.dot(a, b.T)`` in two halves of N, each K tile's sum promoted
into fp32 (gemm_parts.mac_loop), its scales applied once per tile, to the sum. Each program walks its data-parallel
tiles and its stream-K units through one main loop: a second instance of fp8's promoted loop does not fit in registers
beside the first. The workspace [stream-K programs, 2, BLOCK_M, BLOCK_N] fp32 is sized from the shape by each launcher
and belongs to it alone. ``tl.dot`` expresses all of it (the partial tiles are plain stores, their ordering the
stream's), so no Gluon."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import GROUP_M, count, dtype_config, num_sms, stage_bytes
from suite.triton.gemm_parts import (
    add_in_order,
    mac_loop,
    store_tile,
    tile_coords,
    walk_start,
    walk_unit,
)
from suite.triton.gemm_splitk import STAGES, TwoPassGemm, TwoPassModule, epilogue_kwargs
from suite.waves import MIN_K_TILES_PER_SPLIT, tail_split_count

FIXUP_ELEMENTS = 512  # of a tile per fix-up program (2 rows of 256, 4 of 128): over 4 warps, one 16-byte load per
# thread and partial
FIXUP_UNROLL = 8  # partials loaded at once (in flight together) before they are added in order
# The sanitizer's self-test: the fix-up pass launched before the stream-K pass (the fix-up without its ordering); it
# reads partial slots not written yet, which initcheck reports (the fault's workspace is fresh device memory).
FAULT_FIXUP_FIRST = "PIPESUITE_FAULT_FIXUP_BEFORE_PARTIALS"


@dataclass(frozen=True)
class Schedule:
    """Who does what: ``dp_tiles`` whole tiles round robin, then ``sk_iters`` iterations over ``sk_programs``."""

    tiles: int
    k_tiles: int
    programs: int  # the grid (one program per SM; fewer where there is less work, or lockstep's rows leave SMs over)
    dp_tiles: int  # the first dp_tiles tiles (in tile order), whole, round robin
    sk_programs: int  # programs sharing the rest
    sk_iters: int  # (tiles - dp_tiles) x k_tiles
    group_m: int = GROUP_M  # tile rows per group of the tile order (gemm_parts.tile_coords); 1: row by row

    @property
    def sk_tiles(self) -> int:
        return self.tiles - self.dp_tiles

    def first_iter(self, p: int) -> int:
        """The first stream-K iteration of program p (p = sk_programs: the end)."""
        return p * self.sk_iters // self.sk_programs

    def program_of(self, i: int) -> int:
        """The program whose range holds stream-K iteration i: the largest p with first_iter(p) <= i."""
        return ((i + 1) * self.sk_programs - 1) // self.sk_iters

    def covering(self, t: int) -> tuple[int, int]:
        """(p_first, p_last): the programs that cover stream-K tile t (t counted from dp_tiles)."""
        return self.program_of(t * self.k_tiles), self.program_of((t + 1) * self.k_tiles - 1)

    @property
    def cover(self) -> int:
        """The most programs any stream-K tile is shared by."""
        return max((b - a + 1 for a, b in map(self.covering, range(self.sk_tiles))), default=1)

    def fixup_table(self) -> list[int]:
        """What the fix-up pass reads instead of dividing, three per stream-K tile: p_first and p_last, and the
        workspace slot of p_first's part (its slot 1 when the tile ends its range after others, else slot 0)."""
        table = []
        for t in range(self.sk_tiles):
            p_first, p_last = self.covering(t)
            table += [p_first, p_last, 2 * p_first + int(self.first_iter(p_first) // self.k_tiles != t)]
        return table


def schedule(tiles: int, k_tiles: int, sms: int) -> Schedule:
    """The stream-K rule: one program per SM; while at least two full waves of tiles remain, those beyond the last
    one-to-two waves are dealt whole (data-parallel: no fix-up, and the tiles in flight at once are neighbours in L2);
    the iterations of the rest are shared evenly by the programs (at most one program per iteration)."""
    full_waves = tiles // sms
    dp_tiles = (full_waves - 1) * sms if full_waves >= 2 else 0
    sk_iters = (tiles - dp_tiles) * k_tiles
    sk_programs = min(sms, sk_iters)
    return Schedule(tiles, k_tiles, sms if dp_tiles else sk_programs, dp_tiles, sk_programs, sk_iters)


# Lockstep stream-K takes the SMs in whole multiples of the tile rows: it runs where that leaves at most 1 - this
# share of them idle (an idle SM is its share of the time lost outright, which aligned B reads do not repay for a
# tenth of the SMs)
LOCKSTEP_MIN_SHARE = 0.95
# and for at most this many tile rows (8 programs a row at least): with more rows, each row's A panel is read by few
# programs at once and A outgrows L2, where the hybrid's grouped waves (GROUP_M rows at a time) read both operands
# from L2
LOCKSTEP_MOST_ROWS = 16


def lockstep_schedule(tiles_m: int, tiles_n: int, k_tiles: int, sms: int) -> Schedule | None:
    """Stream-K with the tile rows in lockstep: every iteration shared (no data-parallel phase) by q = sms // tiles_m
    programs per tile row, the tiles in row order (group_m 1), so that program p + j q walks row j's tiles exactly
    as program p walks row 0's. Running the same work at the same rate, the programs of all rows read the same K
    range of the same B columns together, and B streams from DRAM about once, where stream-K's ranges, started
    anywhere in K, have each tile row read a B panel at its own time. None for one tile row (nothing to align: the
    hybrid's data-parallel phase is worth more), more than LOCKSTEP_MOST_ROWS, or rows that would leave more than
    1 - LOCKSTEP_MIN_SHARE of the SMs idle."""
    q = sms // tiles_m
    if not 2 <= tiles_m <= LOCKSTEP_MOST_ROWS or tiles_m * q < LOCKSTEP_MIN_SHARE * sms:
        return None
    tiles = tiles_m * tiles_n
    sk_programs = min(tiles_m * q, tiles * k_tiles)
    return Schedule(tiles, k_tiles, sk_programs, 0, sk_programs, tiles * k_tiles, group_m=1)


def stream_k_schedule(tiles_m: int, tiles_n: int, k_tiles: int, sms: int) -> Schedule:
    """The stream-K kernel's schedule: 2-16 tile rows in lockstep where they divide the SMs closely enough
    (``lockstep_schedule``), else the data-parallel + stream-K hybrid (``schedule``)."""
    return lockstep_schedule(tiles_m, tiles_n, k_tiles, sms) or schedule(tiles_m * tiles_n, k_tiles, sms)


def split_tail_schedule(tiles: int, k_tiles: int, sms: int, rounds: bool = False) -> Schedule:
    """The split tail, as a stream-K schedule: every whole wave of tiles dealt round robin, then each tile of the
    last, partial wave cut into ``splits`` equal shares of K (suite.waves.tail_split_count), one stream-K program
    each (sk_programs = tail x splits: stream-K program q's range is share q % splits of tail tile q // splits, so
    the programs that run together read the same K range of B, where stream-K's ranges start anywhere in K). One
    share each (no room for two): the tail's tiles whole, one program each (a whole last wave when tiles % sms ==
    0). ``rounds`` (the split tail's own launcher; the mid-M kernel's model weighs one round): after a whole wave, a
    tail of more than half the SMs may be cut into more shares than the SMs, each launched program walking the
    stream-K programs id, id + sms, ... (gemm_parts.walk_unit): ceil(sk_programs / sms) rounds of a share."""
    tail = tiles % sms or min(tiles, sms)
    splits = tail_split_count(tiles, k_tiles, sms, MIN_K_TILES_PER_SPLIT, rounds)
    dp_tiles = tiles - tail
    sk_programs = tail * splits
    return Schedule(tiles, k_tiles, sms if dp_tiles else sk_programs, dp_tiles, sk_programs, tail * k_tiles)


@triton.jit
def _c_tile(c, m0, n0, M, N, stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr = 0, row0=0):
    """Pointers to C's tile at (m0, n0) (or ROWS of its rows from ``row0``) and the mask that keeps them in M x N."""
    if ROWS:
        rows = m0 + row0 + tl.arange(0, ROWS)
    else:
        rows = m0 + tl.arange(0, BLOCK_M)
    cols = n0 + tl.arange(0, BLOCK_N)
    return c + rows[:, None].to(tl.int64) * stride_cm + cols[None, :], (rows[:, None] < M) & (cols[None, :] < N)


@triton.jit
def streamk_kernel(
    # A and B: descriptors built on the host; C and the fp32 workspace [sk_programs, 2, BLOCK_M, BLOCK_N]: pointers
    a_desc,
    b_desc,
    c,
    workspace,
    # fp8 only: pointers to the per-tensor scales (one fp32 each); None otherwise
    scale_a,
    scale_b,
    # sizes
    M,
    N,
    K,
    # C's row pitch (elements)
    stride_cm,
    # the schedule (a Schedule: stream_k_schedule's, or split_tail_schedule's)
    num_programs,
    dp_tiles,
    sk_programs,
    sk_iters,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr,  # B given N x K (fp8): boxes of [BLOCK_N // 2, BLOCK_K], promoted (mac_loop)
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
    SHARED: tl.constexpr,  # some tile is shared by several programs: parts go to the workspace (else it is None)
):
    # -- this program's units, one main loop for all (a second instance of fp8's promoted main loop does not fit
    #    in registers beside the first): its data-parallel tiles, whole and round robin, then the contiguous range
    #    of stream-K iterations of each of its stream-K programs (itself; where they outnumber the programs, itself,
    #    itself + num_programs, ...; empty past sk_programs), one unit per tile a range touches --
    unit, dp_units, it, end, sk_program, tiles_m, tiles_n, k_tiles, sched = walk_start(
        M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_programs, dp_tiles, sk_programs, sk_iters
    )
    while (unit < dp_units) | (it < end):
        walk = (unit, dp_units, it, end, sk_program, tiles_m, tiles_n, k_tiles, sched)
        tile, m0, n0, k_first, k_last, part, it, end, sk_program, unit = walk_unit(*walk, BLOCK_M, BLOCK_N, GROUP_M)
        acc = mac_loop(a_desc, b_desc, m0, n0, k_first, k_last, BLOCK_M, BLOCK_N, BLOCK_K, B_K_MAJOR)
        if (k_first == 0) & (k_last == k_tiles):  # the whole tile: no one else touches it
            c_ptrs, inside = _c_tile(c, m0, n0, M, N, stride_cm, BLOCK_M, BLOCK_N)
            store_tile(c_ptrs, acc, inside, scale_a, scale_b, OUT_DTYPE, SCALED)
        elif SHARED:  # (never taken when no tile is shared: then there is no workspace to compile this against)
            # a part: into its stream-K program's slot (0 for its range's first tile, 1 for its last), whole tile,
            # for the fix-up pass
            slot = part * (BLOCK_M * BLOCK_N)
            offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            tl.store(workspace + slot + offs, acc)


@triton.jit
def streamk_fixup_kernel(
    # the fp32 workspace [sk_programs, 2, BLOCK_M, BLOCK_N], C, and the schedule's table (Schedule.fixup_table, int32)
    workspace,
    c,
    table,
    # fp8 only: pointers to the per-tensor scales; None otherwise
    scale_a,
    scale_b,
    # sizes
    M,
    N,
    # C's row pitch (elements)
    stride_cm,
    # the schedule
    dp_tiles,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    ROWS: tl.constexpr,  # rows of the tile this program sums
    UNROLL: tl.constexpr,  # partials loaded at once
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
):
    # -- the second pass: runs after streamk_kernel on the same stream (stream order is the only wait it needs) --
    t = tl.program_id(0)  # a stream-K tile
    # the programs whose ranges hold the tile's first and last iterations (Schedule.covering), and the slot of the
    # first one's part (the later ones' parts are in their slot 0: the tile is the first of their ranges)
    p_first = tl.load(table + 3 * t)
    p_last = tl.load(table + 3 * t + 1)
    if p_first < p_last:  # else one program covered the tile whole and stored it
        rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK_N)
        offs = rows[:, None] * BLOCK_N + cols[None, :]
        inside = offs < BLOCK_M * BLOCK_N
        first_slot = tl.load(table + 3 * t + 2).to(tl.int64)
        total = tl.load(workspace + first_slot * (BLOCK_M * BLOCK_N) + offs)
        # the later parts, slot 0 of programs p_first + 1 .. p_last, added in program order
        later = workspace + (p_first + 1).to(tl.int64) * (2 * BLOCK_M * BLOCK_N) + offs
        total = add_in_order(total, later, 2 * BLOCK_M * BLOCK_N, p_last - p_first, inside, UNROLL)
        m0, n0 = tile_coords(dp_tiles + t, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), BLOCK_M, BLOCK_N, GROUP_M)
        c_ptrs, inside = _c_tile(c, m0, n0, M, N, stride_cm, BLOCK_M, BLOCK_N, ROWS, tl.program_id(1) * ROWS)
        store_tile(c_ptrs, total, inside, scale_a, scale_b, OUT_DTYPE, SCALED)


def fixup_rows(block_n: int) -> int:
    """Rows of a tile each fix-up program sums: FIXUP_ELEMENTS of them."""
    return FIXUP_ELEMENTS // block_n


class StreamKGemm(TwoPassGemm):
    """Stream-K at ``stages`` on ``tile_for``'s tile; ``sms``: the programs it may use (tests pass other counts)."""

    depths = STAGES  # split-K's: the same tiles (tile_for)
    kernels = ("streamk_kernel", "streamk_fixup_kernel")
    fault = (FAULT_FIXUP_FIRST, "the fix-up pass launched before the stream-K pass")

    # the schedule's rule, of (tile rows, tile columns, K tiles, SMs): stream-K's (SplitTailGemm: the split tail's)
    rule = staticmethod(stream_k_schedule)

    def _plan(self, sms: int | None = None) -> None:
        tiles, k_tiles = self._tile_for()
        ops, (bm, bn, bk) = self.ops, self.tile
        tiles_m = triton.cdiv(ops.m, bm)
        self.schedule = s = self.rule(tiles_m, tiles // tiles_m, k_tiles, sms or num_sms(ops.a.device))
        self.fixups = s.sk_tiles if s.cover > 1 else 0
        self._workspace(s.sk_programs * 2 if self.fixups else 0, bm, bn)
        self.table = torch.tensor(s.fixup_table(), dtype=torch.int32, device=ops.c.device) if self.fixups else None
        self.config = (
            f"{bm}x{bn}x{bk}, num_warps={self.warps}, num_stages={self.stages}, stream-K: "
            f"{count(s.programs, 'program')}"
            + (f" ({s.sk_programs // tiles_m} per tile row, rows in lockstep)" if s.group_m == 1 else "")
            + f", {s.dp_tiles} of {count(tiles, 'tile')} data-parallel, then "
            f"{count(s.sk_iters, 'iteration')} "
            f"({count(s.sk_tiles, 'tile')} x {count(s.k_tiles, 'K tile')}) shared"
            + (
                f" by {s.sk_programs} stream-K programs in {-(-s.sk_programs // s.programs)} rounds, "
                if s.sk_programs > s.programs
                else ", "
            )
            + (
                f"tiles shared by up to {s.cover} programs summed in program order by a fix-up pass"
                if self.fixups
                else "no tile shared"
            )
            + dtype_config(ops.dtype)
            + self.operands.note
        )
        self.info = kernel_info(None, stage_bytes(ops.dtype, self.tile), self.config, s.programs)

    def _fixup(self) -> None:
        bm, bn, _ = self.tile
        ops, s = self.ops, self.schedule
        rows = fixup_rows(bn)
        meta = {"BLOCK_M": bm, "BLOCK_N": bn, "GROUP_M": s.group_m, "ROWS": rows, "UNROLL": FIXUP_UNROLL}
        streamk_fixup_kernel[(s.sk_tiles, bm // rows)](
            *(self.workspace, ops.c, self.table, ops.scale_a, ops.scale_b, ops.m, ops.n, ops.c.stride(0)),
            s.dp_tiles,
            **meta,
            **epilogue_kwargs(ops),
            num_warps=4,
        )

    def _main(self):
        bm, bn, bk = self.tile
        s = self.schedule
        sched = (s.programs, s.dp_tiles, s.sk_programs, s.sk_iters)
        meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": s.group_m, "SHARED": self.fixups > 0}
        return self._launch_main(streamk_kernel, s.programs, self._mac_box(), self.ops.c.stride(0), *sched, **meta)


class SplitTailGemm(StreamKGemm):
    """The split tail (split_tail_schedule) through the stream-K kernel and its fix-up pass."""

    rule = staticmethod(
        lambda tiles_m, tiles_n, k_tiles, sms: split_tail_schedule(tiles_m * tiles_n, k_tiles, sms, rounds=True)
    )


# streamk_kernel + streamk_fixup_kernel for the registry. compute-sanitizer: tiles shared by several programs, ranges
# that start and end mid-tile, edge tiles in M and N, a partial K tile, N not a multiple of 8 (B through its padded
# pitch), on tall tiles (M = 200: 256 x 128 at 16-bit types) and on 128 x 256 ones, their 3 rows in lockstep (M = 300,
# 44 programs a row); and the hybrid's data-parallel phase (19 tile rows do not divide 132 SMs closely: 2432 x 3840 is
# 19 x 15 = 285 tiles of 128 x 256)
KERNEL = TwoPassModule(StreamKGemm, sanitize_sizes=((200, 300, 1000), (300, 2996, 1000), (2432, 3840, 136)))
# The split tail's sanitizer sizes, on 132 SMs: 6 tiles of 128 x 256 each in 3 shares of K (300 x 300 x 1000: no
# whole wave), a whole wave then 21 tiles in 3 shares (1100 x 4104 x 1040: 9 x 17 = 153 tiles; fp8, 2 shares), and
# a whole wave then 76 tiles in 3 shares over two rounds (1000 x 6600 x 1536: 8 x 26 = 208 tiles; fp8's 12 K tiles
# leave them whole)
SPLIT_TAIL = TwoPassModule(SplitTailGemm, sanitize_sizes=((300, 300, 1000), (1100, 4104, 1040), (1000, 6600, 1536)))
