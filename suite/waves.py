"""How many programs a persistent GEMM launches: the wave rule the PTX and Triton persistent kernels share.

A persistent grid of G programs walks T output tiles in ceil(T / G) rounds. With G = every slot of the GPU (SMs x
resident blocks), the last round is ragged whenever T is not a multiple of G, and its idle SMs wait for the others.
The fewest programs that keep the same number of rounds, ceil(T / rounds), do the same tiles in the same rounds and
leave the spare SMs idle for the whole kernel instead of for its last round: at a fixed clock no slower, and where a
long kernel runs at the power cap (a large fp8 GEMM) the idle SMs' power buys the busy ones' clock (docs/results.md
has the measurement).

The grid is balanced only where it keeps at least BALANCED_MIN_SHARE of the slots busy: just past one wave (T = G + 1)
balancing would halve the grid, and a round that streams its operands would then run on half the SMs' bandwidth."""

from __future__ import annotations

import math
from dataclasses import dataclass

BALANCED_MIN_SHARE = 0.9
# split-K and the split tail: every split of a tile's K streams at least this many K tiles (fewer and each split's
# prologue, epilogue and partial tile cost more than its mainloop); both backends' kernels and suite.gemm_rule use it
MIN_K_TILES_PER_SPLIT = 4


def persistent_grid(tiles: int, slots: int) -> int:
    """Programs for a persistent walk of ``tiles`` output tiles on ``slots`` resident programs at most: the fewest
    that take the same number of rounds as all the slots would, if that keeps BALANCED_MIN_SHARE of them busy; else
    min(tiles, slots)."""
    if tiles < 1 or slots < 1:
        raise ValueError(f"a persistent grid needs at least one tile and one slot (got {tiles} tiles, {slots} slots)")
    if tiles <= slots:
        return tiles
    rounds = -(-tiles // slots)
    balanced = -(-tiles // rounds)
    return balanced if balanced >= BALANCED_MIN_SHARE * slots else slots


def grid_note(tiles: int, slots: int, grid: int) -> str:
    """What a row's config says of its persistent grid where the wave rule left slots idle ('' where it did not)."""
    if grid >= min(tiles, slots):
        return ""
    return f", {grid} programs on {slots} slots (whole waves: {-(-tiles // grid)} rounds of {tiles} tiles)"


def wave_efficiency(programs: int, sms: int) -> float:
    """Busy fraction of the SM slots over the waves ``programs`` one-per-SM programs take."""
    return programs / (-(-programs // sms) * sms)


def wave_split_count(tiles: int, k_tiles: int, sms: int, min_k_tiles: int, max_splits: int, slack: float) -> int:
    """A split count by waves (the Triton split-K's and both decode kernels' rule): among 1..cap splits, where cap
    keeps tiles x splits within two waves of the SMs, every split at least ``min_k_tiles`` K tiles and at most
    ``max_splits``, the fewest whose wave efficiency is within ``slack`` (relative) of the best. Tiles already filling
    two waves get one split (no workspace)."""
    cap = max(1, min(max_splits, k_tiles // min_k_tiles, (2 * sms) // max(1, tiles)))
    best = max(wave_efficiency(tiles * s, sms) for s in range(1, cap + 1))
    return next(s for s in range(1, cap + 1) if wave_efficiency(tiles * s, sms) >= best * (1 - slack))


# The split tail: the fix-up's cost per contributor, in K tiles of the mainloop (the last unit reads each other
# unit's fp32 partial tile back from L2 on one SM: about 1.5 K tiles of a 128 x 256 tile's MMAs)
TAIL_FIXUP_K_TILES = 1.5
# ... and with its shares in several rounds, the least modelled saving, in whole tiles' time, for which it splits a
# tail of more than half the slots: the model leaves out each share's fp32 partial store and the extra units' ring
# turnovers, which several rounds of shares multiply, so a split must be modelled ahead by a margin
TAIL_ROUNDS_LEAST_SAVING = 0.2


def tail_split_count(tiles: int, k_tiles: int, slots: int, min_k_tiles: int, rounds: bool = False) -> int:
    """The split tail's rule (both backends): how many shares of K each tile of the last, partial wave gets, R = tiles
    % slots of them (all the tiles where fewer than the slots), so that that wave lasts a share of a tile instead of
    a whole one. As many as the slots hold (R x splits <= slots), every share at least ``min_k_tiles`` K tiles, and
    no more than the fix-up repays: about sqrt(K tiles / TAIL_FIXUP_K_TILES) (a share's K tiles fall as 1 / splits,
    the fix-up's reads grow with splits). 1: no tail, or no room for two shares of each of its tiles.

    ``rounds`` (a walk that deals the tail's shares round robin, several per block: the PTX tile rungs' and the
    Triton split tail's, not the mid-M builds', whose models weigh one round): after a whole wave or more, where two
    shares of each tail tile do not fit the slots (R > slots / 2), the count, within the same bounds of K, whose
    shares' rounds (``tail_share_rounds``) and fix-up (TAIL_FIXUP_K_TILES per share past one) take the fewest K
    tiles' time, where that saves TAIL_ROUNDS_LEAST_SAVING of a tile or more (else 1); a tail of 80 tiles after two
    waves of 132 at 48 K tiles: 3 shares each, 240 shares in two rounds, two thirds of a tile where the unsplit tail
    takes one. (With fewer tiles than slots, split-K's kernels are the rule's alternative.)"""
    tail = tiles % slots
    if not tail:
        return 1
    repaid = max(1, round(math.sqrt(k_tiles / TAIL_FIXUP_K_TILES)))
    one_round = max(1, min(slots // tail, k_tiles // min_k_tiles, repaid))
    if not rounds or one_round > 1 or tiles < slots:
        return one_round
    counts = range(1, max(1, min(k_tiles // min_k_tiles, repaid)) + 1)
    cost = {s: tail_share_rounds(tail, slots, s) * k_tiles + TAIL_FIXUP_K_TILES * (s - 1) for s in counts}
    best = min(counts, key=lambda s: (cost[s], s))
    return best if cost[best] <= (1 - TAIL_ROUNDS_LEAST_SAVING) * k_tiles else 1


def tail_share_rounds(tail: int, slots: int, splits: int) -> float:
    """How long ``tail`` tiles cut into ``splits`` shares of K each take on ``slots`` blocks dealt them round robin,
    in whole tiles' time: ceil(tail x splits / slots) rounds of 1 / splits of a tile."""
    return -(-tail * splits // slots) / splits


# The mid-M builds of both backends (128 < M < a few hundred tokens, computed swapped: the weight on the MMA's M, the
# tokens on its N): the most token rows of one Triton tile made of several pieces. Its accumulators, 128 weight rows x
# 208 tokens over two warpgroups, are 104 fp32 registers a thread, short of the 128-register tiles' budget, which
# leaves the registers the swapped operand's descriptors, fp8's promotion and the epilogue take.
MID_MOST_TOKENS = 208
# ... and one piece of 256 tokens (128 accumulator registers, as a 128x256 tile's) at 16 bits, where M is past one tile
# of MID_MOST_TOKENS: fp8's promotion keeps a second accumulator beside it, which would spill. Its ring stage, (128 +
# 256) x 128 bytes, fits four deep in an SM's shared memory, not five.
MID_WIDE_TOKENS = 256
# The Triton mid-M model's cost of a tl.dot piece beyond its tokens (``triton_mid_time``), in tokens: each piece is a
# wgmma chain of its own that reads the whole weight operand from shared memory again, so a tile of more, smaller
# pieces runs slower per token (fitted with the split tail's MID_SPLIT_ROUNDS on forced tiles at 12 fp16 shapes,
# M = 140-2049, 9 of them from the seed-1 sweep: tools/tune_gemm_mid_triton.py)
TRITON_MID_PIECE_TOKENS = 64
TRITON_MID_WEIGHT_ROWS = 128  # weight rows (C's columns) per Triton mid-M tile: wgmma's M, 64 per warpgroup


def mid_pieces(block_t: int) -> tuple[int, ...]:
    """The tl.dot pieces the Triton mid-M build computes a token tile of ``block_t`` rows with: its binary digits,
    largest first (144 -> (128, 16))."""
    return tuple(1 << b for b in reversed(range(block_t.bit_length())) if block_t >> b & 1)


def triton_mid_time(m: int, n: int, k: int, sms: int, block_t: int, dtype: str = "fp16") -> float:
    """The model's time of the Triton mid-M walk at a token tile, in K-stage times of one token on one warpgroup: the
    split tail's rounds (``tail_walk_rounds``) x a tile's time, sum over its pieces of (piece + TRITON_MID_PIECE_TOKENS)
    (the two warpgroups run at once)."""
    tiles = -(-n // TRITON_MID_WEIGHT_ROWS) * -(-m // block_t)
    k_stages = -(-k // mid_stage_k(dtype))
    tile = sum(p + TRITON_MID_PIECE_TOKENS for p in mid_pieces(block_t))
    return tail_walk_rounds(tiles, k_stages, sms) * k_stages * tile


def triton_mid_ring_fits(block_t: int, stages: int) -> bool:
    """Whether the Triton mid-M ring of ``stages`` stages, (weight rows + tokens) x 128 bytes each, and Triton's
    barriers fit an SM's shared memory for one block."""
    return stages * (TRITON_MID_WEIGHT_ROWS + block_t) * 128 + 1024 <= MID_SMEM


def mid_token_rows(m: int, n: int, k: int, sms: int, dtype: str = "fp16", stages: int | None = None) -> int:
    """Token rows per tile of the Triton mid-M build (Triton computes a tile as power-of-two tl.dot pieces of at least
    16 rows). Up to MID_MOST_TOKENS rows of M: one tile, M rounded up to 16 (M = 129 runs 144 rows). Above: of the
    tiles of 16 to MID_MOST_TOKENS rows by 16, and MID_WIDE_TOKENS at 16 bits, whose ring fits ``stages`` deep (if
    given), the one ``triton_mid_time`` walks fastest (ties: the fewer rows computed, then the fewer tiles): fewer
    pieces a tile, whole waves."""
    if m < 1:
        raise ValueError(f"M must be >= 1 (got {m})")
    if m <= MID_MOST_TOKENS:
        return -(-m // 16) * 16
    options = [*range(16, MID_MOST_TOKENS + 1, 16), *((MID_WIDE_TOKENS,) if dtype != "fp8e4m3" else ())]
    options = [t for t in options if stages is None or triton_mid_ring_fits(t, stages)]
    return min(options, key=lambda t: (triton_mid_time(m, n, k, sms, t, dtype), -(-m // t) * t, -t))


# The PTX mid-M build's tiles (suite.ptx.gemm_decode.MidModule): 64 x consumers weight columns x block_t tokens
# (wgmma's N, by 8), a K stage of 64. Two consumer warpgroups take up to 208 tokens, where the fix-up's partial
# (another 104 registers) still fits beside the accumulators in the producer's registers; three (192 weight columns,
# 152 registers each) up to 128. Below 64 tokens an m64nN wgmma reads more weight from shared memory than it
# multiplies with.
MID_CONSUMERS = (2, 3)
MID_MOST_TOKENS_FOR = {2: MID_MOST_TOKENS, 3: 128}
# fp8 promotes each K stage's sum into the accumulators: up to MID_FP8_PAIRS_MOST_TOKENS tokens two stages' partials
# in turn, three times the accumulator's registers, which two consumer warpgroups hold without spilling (156
# registers; ptxas spills from 112); above, one partial, twice the accumulator's registers (160 at 160 tokens), each
# stage's adds covered by the other consumer's wgmma; three consumer warpgroups at no tile of 64 or more
MID_FP8_PAIRS_MOST_TOKENS = 104
MID_MOST_TOKENS_FP8 = {2: 160}
MID_LEAST_TOKENS = 64
MID_DEEPEST = 6  # its deepest ring (suite.ptx.gemm_decode.MID_STAGES)
MID_SMEM = 227 * 1024  # an SM's shared memory for one block
# The model of a tile's pace (``mid_time``; tools/tune_gemm_mid.py times forced tiles to fit it, on shapes outside the
# judged sweeps, docs/results.md): an m64nNk16 wgmma reads its 64 x 16 weight operand from shared memory whatever N,
# worth MID_FIXED_TOKENS tokens of MMA time; the split tail's fix-up costs MID_SPLIT_ROUNDS of a round per share past
# one (the last share in reads every other one's partial tile).
MID_FIXED_TOKENS = 32
MID_SPLIT_ROUNDS = 0.16
# The wide tile (suite.ptx.gemm_decode's W_TILES = 2): two m64 weight tiles per consumer warpgroup, 256 weight rows on
# two, 16-bit only, up to MID_WIDE_MOST_TOKENS tokens (its accumulators and a fix-up slice fit a consumer's registers).
# Each stage's token box feeds both weight tiles' wgmma in one group, so its fixed cost per wgmma is the smaller
# MID_WIDE_FIXED_TOKENS (fitted with tools/tune_gemm_mid.py --rungs on forced tiles at five fp16 shapes, M = 307-2049).
# It is weighed only past MID_WIDE_LEAST_M tokens: there the narrow tiles fall behind by a cost the model leaves out
# (likeliest, not profiled: the weight read again by twice the token tiles' walks), and the wide tile ran well ahead;
# below, suite runs put it a little behind the narrow tiles the model ties it with (suite runs at M = 529-2049 on an
# H100; docs/results.md).
MID_WIDE_MOST_TOKENS = 192
MID_WIDE_CONSUMERS = 2
MID_WIDE_FIXED_TOKENS = 24
MID_WIDE_LEAST_M = 1024


def mid_tile_ok(block_t: int, consumers: int, dtype: str = "fp16") -> bool:
    """Whether the PTX mid-M build makes a tile of ``block_t`` tokens x 64 x ``consumers`` weight columns at
    ``dtype``."""
    most = (MID_MOST_TOKENS_FP8 if dtype == "fp8e4m3" else MID_MOST_TOKENS_FOR).get(consumers, 0)
    return block_t % 8 == 0 and MID_LEAST_TOKENS <= block_t <= most


def mid_wide_tile_ok(block_t: int, consumers: int, w_tiles: int, dtype: str = "fp16") -> bool:
    """Whether the PTX mid-M build makes a tile of ``w_tiles`` m64 weight tiles per consumer warpgroup: 1 wherever
    ``mid_tile_ok``; 2 (the wide tile) at 16 bits on MID_WIDE_CONSUMERS warpgroups, up to MID_WIDE_MOST_TOKENS
    tokens."""
    if w_tiles == 1:
        return True
    return w_tiles == 2 and dtype != "fp8e4m3" and consumers == MID_WIDE_CONSUMERS and block_t <= MID_WIDE_MOST_TOKENS


def mid_stage_k(dtype: str = "fp16") -> int:
    """K per stage of both mid-M builds (PTX and Triton): one 128-byte swizzled row, 64 of K at 16 bits, 128 at fp8
    (the same MMA time: fp8's wgmma runs twice the K per cycle)."""
    return 128 if dtype == "fp8e4m3" else 64


def mid_ring_bytes(block_t: int, boxes: int, stages: int) -> int:
    """The PTX mid-M block's dynamic shared memory: the ring of (64 x boxes + block_t) rows of 128 bytes per stage
    (``boxes``: 64-column weight boxes, consumers x weight tiles per consumer), its full and empty barriers, the
    fix-up's verdicts and the 1024-byte alignment's slack."""
    return stages * (64 * boxes + block_t) * 128 + 2 * stages * 8 + 16 + 1024


def mid_deepest(block_t: int, boxes: int) -> int:
    """The deepest ring of at most MID_DEEPEST stages that the tile (``boxes``: its 64-column weight boxes) fits in an
    SM's shared memory."""
    return max(s for s in range(2, MID_DEEPEST + 1) if mid_ring_bytes(block_t, boxes, s) <= MID_SMEM)


def mid_token_tiles(m: int, consumers: int, dtype: str = "fp16") -> list[int]:
    """The token tiles (rows) the mid-M rule weighs at ``consumers`` and ``dtype``: M over 1, 2, ... tiles, rounded
    up to 8, within the build's bounds (``mid_tile_ok``); at fp8 the one-partial tiles (past
    MID_FP8_PAIRS_MOST_TOKENS) only where M takes two or more of them: alone, one token tile leaves the tile count to
    the weight's tiles and the split tail's fix-up to fill the SMs, and the tiles in pairs ran as fast or faster there
    (M = 131-143, tools/tune_gemm_mid.py --dtype fp8e4m3). Tiles of the least where M is smaller or no split of M falls
    within them; none where ``consumers`` has no tile at ``dtype``."""
    if not mid_tile_ok(MID_LEAST_TOKENS, consumers, dtype):
        return []
    if m <= MID_LEAST_TOKENS:
        return [MID_LEAST_TOKENS]
    rows, tiles = [], 1
    while (t := (-(-m // tiles) + 7) // 8 * 8) >= MID_LEAST_TOKENS:
        alone = dtype == "fp8e4m3" and tiles == 1 and t > MID_FP8_PAIRS_MOST_TOKENS
        if mid_tile_ok(t, consumers, dtype) and not alone and t not in rows:
            rows.append(t)
        tiles += 1
    # fp8, M = 105-127: past the one tile in pairs and short of two tiles of the least: tiles of the least, the last
    # one partly empty
    return rows or [MID_LEAST_TOKENS]


def tail_walk_rounds(tiles: int, k_stages: int, sms: int) -> float:
    """The split tail's rounds in the mid-M model: whole waves, then the last partial wave's share of a tile and its
    fix-up (MID_SPLIT_ROUNDS per share past one); where that wave is not split, a whole round."""
    splits = tail_split_count(tiles, k_stages, sms, MIN_K_TILES_PER_SPLIT)
    if tiles % sms and splits > 1:
        return tiles // sms + 1 / splits + MID_SPLIT_ROUNDS * (splits - 1)
    return -(-tiles // sms)


def mid_time(
    m: int, n: int, k: int, sms: int, block_t: int, consumers: int, w_tiles: int = 1, dtype: str = "fp16"
) -> float:
    """The model's time of the PTX mid-M walk at a tile, in K-stage times of one token on one m64 weight tile: the
    split tail's rounds (``tail_walk_rounds``) x a tile's time, consumers x w_tiles x (block_t + the fixed tokens,
    MID_FIXED_TOKENS or the wide tile's MID_WIDE_FIXED_TOKENS)."""
    tiles = -(-n // (64 * consumers * w_tiles)) * -(-m // block_t)
    k_stages = -(-k // mid_stage_k(dtype))
    fixed = MID_FIXED_TOKENS if w_tiles == 1 else MID_WIDE_FIXED_TOKENS
    return tail_walk_rounds(tiles, k_stages, sms) * k_stages * consumers * w_tiles * (block_t + fixed)


def mid_tile(m: int, n: int, k: int, sms: int, stages: int | None = None, dtype: str = "fp16") -> tuple[int, int, int]:
    """The PTX mid-M rule's tile, (block_t, consumers, w_tiles): of every tile ``mid_token_tiles`` gives at two and
    three consumer warpgroups and ``dtype``, and at 16 bits past MID_WIDE_LEAST_M tokens the wide tile's (two weight
    tiles on two warpgroups, up to MID_WIDE_MOST_TOKENS tokens), whose ring fits ``stages`` deep (if given), the one
    ``mid_time`` walks fastest (ties: the fewer tiles)."""
    options = [(t, c, 1) for c in MID_CONSUMERS for t in mid_token_tiles(m, c, dtype)]
    if dtype != "fp8e4m3" and m > MID_WIDE_LEAST_M:
        wide = MID_WIDE_CONSUMERS
        options += [(t, wide, 2) for t in mid_token_tiles(m, wide, dtype) if mid_wide_tile_ok(t, wide, 2, dtype)]
    options = [o for o in options if stages is None or mid_ring_bytes(o[0], o[1] * o[2], stages) <= MID_SMEM]
    if not options:
        raise ValueError(f"stages={stages}: no mid-M tile's ring fits {MID_SMEM} bytes")
    return min(
        options,
        key=lambda o: (mid_time(m, n, k, sms, *o, dtype), -(-n // (64 * o[1] * o[2])) * -(-m // o[0]), o[2]),
    )


# The Gluon mid-M kernel (suite/triton/gemm_mid_gluon.py): its tiles and their plan, here so that suite.gemm_rule
# names the depth whose plan the kernel then makes. A tile is CONSUMERS warpgroups x WEIGHT_COLS weight columns (wgmma's
# M) by a token tile of one or two power-of-two pieces (T0 + T1, wgmma's N), on a ring of 128-byte-deep stages (64 of K
# at 16 bits, 128 at fp8: the same MMA time, as fp8's wgmma runs twice the K per cycle).
GLUON_MID_BLOCK_K = 64  # 128 bytes of K per stage at 16 bits: the swizzle's width
GLUON_MID_BLOCK_K_FP8 = 128
GLUON_MID_SMEM = 227 * 1024 - 1024  # what a block may have on sm_90, less the barriers' and the compiler's own
# (consumers, weight columns each) -> the registers each consumer partition gets: the partitions' threads x registers
# fit the SM's 64K beside the producer's warpgroup at its few registers
GLUON_MID_LAYOUTS = {(3, 64): 152, (2, 128): 232, (2, 64): 232}
# the layouts each type's plan weighs: at 16 bits those it was fitted on; at fp8, whose promoted partials halve the
# token tiles a consumer holds, 64 weight columns a consumer (128 on two warpgroups, as the PTX mid-M kernel's fp8
# tiles): 128 with the partials and the weight in registers spill
GLUON_MID_MENU = {False: ((3, 64), (2, 128)), True: ((3, 64), (2, 64))}
# token tiles: (T0, T1) with T1 < T0, powers of two; each consumer holds WEIGHT_COLS x (T0 + T1) fp32 accumulators
# (fp8: as many again, each K tile's partial sums before they are promoted)
GLUON_MID_PIECES = ((64, 0), (64, 16), (64, 32), (128, 0), (128, 16), (128, 32), (128, 64))
GLUON_MID_MOST_ACC_REGS = {(3, 64): 96, (2, 128): 160, (2, 64): 160}  # accumulator registers a thread may hold
GLUON_MID_STAGES = (3, 4, 5, 6)
# shared-memory bytes an SM reads per multiply-add at the tensor pipe's pace (128 bytes a clock over ~2,100 16-bit
# multiply-adds a clock; fp8 reads half the bytes at twice the rate, so its per-element ratio is the same): tiles
# that read more per multiply-add (small pieces, each re-reading the weight box) are bound by shared memory instead
GLUON_MID_SMEM_BYTES_PER_MAC = 0.06
# a tile's fixed cost (its ring's fill, the epilogue's stores), in token columns of the tile's multiply-adds: fewer,
# larger tiles where the waves allow (fitted on forced tiles at unjudged shapes, tools/tune_gemm_mid_gluon.py: the
# plan's picks there are the same for any value from 8 to 32)
GLUON_MID_FIXED_TOKENS = 16


@dataclass(frozen=True)
class GluonMidTile:
    consumers: int
    weight_cols: int
    t0: int
    t1: int
    fp8: bool = False  # fp8 e4m3 in, bf16 out: each K tile's sum promoted into fp32

    @property
    def tokens(self) -> int:
        return self.t0 + self.t1

    @property
    def weight_rows(self) -> int:  # the tile's extent along N (wgmma's M)
        return self.consumers * self.weight_cols

    @property
    def block_k(self) -> int:  # K per stage: 128 bytes of it
        return GLUON_MID_BLOCK_K_FP8 if self.fp8 else GLUON_MID_BLOCK_K

    def stage_bytes(self) -> int:  # a one-piece tile's unused ring is compiled away
        return 128 * (self.weight_rows + self.tokens)

    def slab_bytes(self) -> int:  # C's slabs: 16-bit (fp8's output is bf16)
        return 2 * self.consumers * self.t0 * self.weight_cols

    def deepest(self) -> int:
        """The most stages whose ring fits beside the slabs (0 if none of GLUON_MID_STAGES does)."""
        fits = [s for s in GLUON_MID_STAGES if s * self.stage_bytes() + self.slab_bytes() <= GLUON_MID_SMEM]
        return max(fits, default=0)

    @property
    def register_a(self) -> bool:
        """Whether the kernel loads the weight box into registers (wgmma's A) once per K step for both pieces, retiring
        each K step's groups, rather than having each piece's wgmma read it from shared memory with the K step's groups
        kept in flight: two pieces of 128 + T1 tokens, whose long wgmma hide the retirement (at 64 + T1 the groups in
        flight are worth more than the second read). At fp8, every two-piece tile: its consumers retire each K
        step's groups anyway, to promote their sums."""
        return self.t1 > 0 and (self.fp8 or self.t0 >= 128)

    def rate(self) -> float:
        """The tensor pipe's share this tile keeps busy: 1, or less where each consumer's shared-memory reads per
        multiply-add (the token boxes once per K step, the weight box once per piece, or once where it goes through
        registers) pass GLUON_MID_SMEM_BYTES_PER_MAC."""
        pieces = 2 if self.t1 and not self.register_a else 1
        per_mac = 2 * (pieces * self.weight_cols + self.tokens) / (self.weight_cols * self.tokens)
        return min(1.0, GLUON_MID_SMEM_BYTES_PER_MAC / per_mac)

    def tiles(self, m: int, n: int) -> int:
        return math.ceil(n / self.weight_rows) * math.ceil(m / self.tokens)

    def time(self, m: int, n: int, sms: int) -> float:
        """Modelled walk: rounds of whole tiles (one per program and round) x a tile's multiply-adds per unit of K
        at its rate, and its fixed cost."""
        rounds = math.ceil(self.tiles(m, n) / sms)
        return rounds * self.weight_rows * (self.tokens + GLUON_MID_FIXED_TOKENS) / self.rate()

    def efficiency(self, m: int, n: int, sms: int) -> float:
        """The problem's multiply-adds per SM over the modelled walk: 1 for whole waves of exact tiles at full rate."""
        return m * n / sms / self.time(m, n, sms)


def gluon_mid_tiles(stages: int | None = None, fp8: bool = False) -> list[GluonMidTile]:
    """Every tile of the type's GLUON_MID_MENU x GLUON_MID_PIECES within its consumers' registers (fp8: twice the
    accumulators, the partial sums beside them) whose ring fits ``stages`` (any depth of GLUON_MID_STAGES when
    None)."""
    out = []
    for consumers, cols in GLUON_MID_MENU[fp8]:
        for t0, t1 in GLUON_MID_PIECES:
            tile = GluonMidTile(consumers, cols, t0, t1, fp8)
            if (2 if fp8 else 1) * cols * tile.tokens // 128 > GLUON_MID_MOST_ACC_REGS[(consumers, cols)]:
                continue
            if tile.deepest() and (stages is None or tile.deepest() >= stages):
                out.append(tile)
    return out


@dataclass(frozen=True)
class GluonMidPlan:
    tile: GluonMidTile
    stages: int


def gluon_mid_plan(m: int, n: int, sms: int, stages: int | None = None, fp8: bool = False) -> GluonMidPlan:
    """The tile whose modelled walk is fastest (ties: the fewer tiles, then more weight columns), at ``stages`` or its
    deepest ring."""
    best = min(gluon_mid_tiles(stages, fp8), key=lambda t: (t.time(m, n, sms), t.tiles(m, n), -t.weight_rows))
    return GluonMidPlan(best, stages or best.deepest())
