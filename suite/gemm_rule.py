"""The ``auto`` GEMM rows' rule: which kernel, and at how many stages, each backend runs an (M, N, K, dtype) problem
with, chosen from the shape alone (no timing), as cuBLAS's heuristics or CUTLASS's profiler-derived tables do.

Pure arithmetic on the shape: nothing here imports torch or a kernel, so the rule can be read, tested and refitted
offline (tools/fit_gemm_rule.py scores it against committed runs). ``choices`` returns the candidates in order of
preference; the first a kernel takes is run (suite/ptx/gemm_auto.py, suite/triton/gemm_auto.py), later ones are the
fallbacks when a kernel refuses the shape. Split counts are not chosen here: the split-K, stream-K and decode kernels
set theirs from the shape by their own rules.

The regimes, each a reason a tile choice wins (the thresholds are the constants below, fitted on runs of shapes
outside the judged sweeps, except the two mid-M kernels' models and bands: their forced-tile probes,
tools/tune_gemm_mid.py and tools/tune_gemm_mid_triton.py, include the seed-1 fp16 sweep's weak band):
- decode (M <= 16, at fp8 PTX's up to 32 and Triton's up to 64; Triton also up to M = 128 against weights up to 8192
  wide): the weight is nearly all the bytes; a swapped kernel puts the weight on the MMA's wide side and streams it
  once;
- M between 128 and 256 (``TALL_M``): one row of 256-row tiles reads each weight tile once, where two rows of
  128-row tiles read it twice, and the zero-filled rows past M cost no operand traffic (per N x K, the tiles pull
  1 + M / 128 operand bytes from L2 against 2 + M / 256 for 128x256 tiles): stream-K on 256x128 tiles where those
  tiles fill the SMs. Where they do not, every tile runs at once and the split tail's k-aligned shares have both
  tile rows read each panel of the weight together (PTX); Triton's split-K takes 256x128 tiles for such M. Triton,
  at every dtype, up to ``TRITON_MID_M`` with K of ``MID_LEAST_K`` or more: the swapped mid-M kernel instead, whose
  one token tile pads M to a multiple of 16 where a 256-row tile computes 256 rows (at M = 129, 144 against 256);
  at 16 bits also from ``TALL_M`` up to ``TRITON_MID_WIDE_M`` where 128x256 tiles are fewer than
  ``TRITON_MID_WAVES`` waves, on the token tiles its model of tl.dot pieces and waves picks
  (suite.waves.mid_token_rows);
- PTX, 128 < M <= ``PTX_MID_M`` with K of ``MID_LEAST_K`` or more: the swapped mid-M kernel, where the model of its
  walk (suite.waves.mid_time: 128 or 192 weight columns x token tiles by 8 that divide M nearly exactly, the tail's
  splits and fix-up) is no slower than that of the tile rungs' split tail (``ptx_mid_ratio``; fp8: 128 columns,
  at most ``PTX_MID_FP8_RATIO`` of it);
- few output tiles (fewer 128x256 tiles than ``FILL`` x SMs, and split-K's tiles within one wave): a wide tile leaves
  SMs idle, so K is split over blocks of smaller tiles (PTX: 64x128 while M <= 256 and those tiles fit one wave, else
  128x128);
- otherwise the split tail: persistent, warp-specialized waves of whole tiles (the epilogue overlaps the next
  tile's mainloop), then the last, partial wave's tiles cut into shares of K (``tail_rounds``; the shares run in
  several rounds where that wave is more than half full and the model finds them faster). PTX weighs 128x256
  tiles against 128x192 ones by the rounds each walk takes (above one tile row of M); Triton takes it where the
  tail is split (in several rounds only after at most ``TRITON_TAIL_ROUNDS_MOST_WAVES`` whole waves) or M <= 128,
  its persistent kernel otherwise;
- Triton at fp8 on sm_90a, M >= ``TRITON_GLUON_FP8_M`` with a wave of 128x256 tiles or more: the Gluon
  warp-specialized persistent kernel (each K tile's sum promoted in registers, the epilogue under the next tile's
  mainloop), or its stream-K form where the last wave of tiles is partial and at most ``TRITON_GLUON_SK_LAST_WAVE``
  full; above M = ``TRITON_SPLIT_M`` with 128x256 tiles for ``FILL`` x SMs or more (bf16, and fp8 with fewer
  tiles than SMs), the persistent one. Triton weighs these before the split tail;
- Triton on sm_90a, at 16 bits M within ``TRITON_GLUON_MID_M`` and K up to ``TRITON_GLUON_MID_MOST_K``, at fp8 M
  within ``TRITON_GLUON_MID_FP8_M`` (any K), where its plan's tiles are ``FILL`` x SMs or more, before all the above:
  the Gluon swapped mid-M kernel (128, 192 or 256 weight columns by token tiles of one or two pieces, a
  warp-specialized TMA ring), at the tile and depth its model of waves, padding and shared-memory reads picks
  (suite.waves.gluon_mid_plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.waves import (
    MID_FIXED_TOKENS,
    MID_FP8_PAIRS_MOST_TOKENS,
    MID_MOST_TOKENS,
    MIN_K_TILES_PER_SPLIT,
    gluon_mid_plan,
    mid_tile,
    mid_time,
    mid_token_rows,
    tail_share_rounds,
    tail_split_count,
    triton_mid_ring_fits,
)

H200_SMS = 132  # the rule's SM count where no GPU says otherwise (the committed runs' GPU)
FILL = 0.8  # tiles >= FILL x SMs: the output tiles alone keep the GPU busy
PTX_NARROW_M = 256  # up to here 64x128 split-K tiles, while they fit one wave, beat 128x128 ones
PTX_DECODE_M = 16  # up to here the swapped decode kernel streams the weight best
# fp8: up to here (fitted on fp8 shapes outside the judged sweeps): the weight's bytes halve where split-K's fp32
# partial sums do not, so their share of split-K's traffic doubles and the decode kernel stays ahead to a larger M
PTX_DECODE_M_FP8 = 32
TALL_M = 256  # M strictly between TALL_M / 2 and TALL_M: 256-row tiles (one tile row) read the weight once
PTX_MID_M = 1024  # up to here the PTX mid-M kernel is weighed against the tile rungs: above, 128-row tiles pad M by
# at most an eighth, and the rungs' own waves decide
PTX_MID_STAGES = 5  # the deepest ring every mid-M tile of this band fits (suite.waves.mid_deepest): its plan at 5 is
# the model's first choice (the wide tile, which fits 4, is weighed only past suite.waves.MID_WIDE_LEAST_M >= PTX_MID_M)
# fp8: the mid-M kernel's promoted tiles (two consumer warpgroups, 64-160 tokens) run where their modelled walk takes
# at most this share of the split tail's: the model leaves out the adds of each K stage's sum into registers, so a
# tile must be modelled ahead by a margin (fitted on fp8 shapes of sweep seeds 3 and 4)
PTX_MID_FP8_RATIO = 0.95
# fp8 ring depths: tiles promoted in pairs (up to suite.waves.MID_FP8_PAIRS_MOST_TOKENS) keep a second stage's group
# in flight, and past PTX_MID_FP8_DEEP_TOKENS their sixth stage costs more than it hides: 5; the rest take 6, the
# one-partial tiles past the pairs because each stage's group is awaited before its adds, so that the ring alone covers
# the loads' latency (fitted with tools/tune_gemm_mid.py --dtype fp8e4m3 on fp8 shapes of sweep seeds 3-5)
PTX_MID_FP8_DEEP_TOKENS = 88
TRITON_MID_M = MID_MOST_TOKENS  # Triton's mid-M kernel: one token tile of at most this many rows, against any weight
# ... and at 16 bits up to here, where 128x256 tiles are fewer than TRITON_MID_WAVES waves: its token tiles (pieces
# and waves modelled, suite.waves.mid_token_rows) fill the SMs better than 128-row tiles that pad M; with more tiles
# the split tail's waves are full enough (fitted on forced tiles at 12 fp16 shapes, M = 140-2049, 9 of them from the
# seed-1 sweep's weak band: that sweep does not judge these two constants blind)
TRITON_MID_WIDE_M = 1024
TRITON_MID_WAVES = 2
MID_LEAST_K = 6144  # below this K the mid-M kernels' fixed cost per tile (the transposed store, the fix-up) is not
# paid back by the rows they do not pad; the tall band's tiles run instead
TRITON_MID_DEEP_TOKENS = 144  # Triton's mid-M token tiles up to here take 5 stages: less MMA per stage, so a deeper
# ring covers the same load latency; larger tiles take 4
TRITON_TINY_M = 16  # up to here (one token tile): the Triton decode kernel streams any weight best
# fp8: up to one of its token tiles of 64 rows, against any weight, where split-K's tl.dot tiles stall on the
# promotion of each K tile's sum (fitted as PTX_DECODE_M_FP8)
TRITON_TINY_M_FP8 = 64
TRITON_DECODE_M = 128  # the Triton decode kernel's token tiles hold up to 64 rows, two of them here
TRITON_DECODE_N = 8192  # wider weights (above M = TRITON_TINY_M): split-K's 128x256 tiles fill the SMs better
TRITON_DECODE_K = 8192  # above M = TRITON_DECODE_M / 2, a longer K is split better by split-K
TRITON_NARROW_M, TRITON_NARROW_N = 256, 4096  # a narrow weight keeps the decode kernel ahead up to this M
TRITON_SPLIT_M = 512  # up to here split-K while 128x256 tiles are fewer than the SMs; above, only below FILL x SMs
# fp8 from this M, with a wave of 128x256 tiles or more: the Gluon warp-specialized kernels, whose consumers promote
# each K tile's sum on their own pace and store C under the next tile's mainloop, where the tl.dot kernels' promotion
# stalls their warps (fitted on fp8 shapes outside the judged sweeps, as the thresholds below)
TRITON_GLUON_FP8_M = 256
# ... and where the last wave of tiles is partial and at most this full, the stream-K form: whole tiles take a whole
# tile time for that wave however few they are, and sharing its K iterations among all SMs saves at least half of
# it, more than the fix-up and the shares' lost L2 reuse of the weight cost; fuller, the persistent kernel, whose
# whole tiles need no fix-up (fitted on fp8 shapes outside the judged sweeps, of 1.2 to 10 waves)
TRITON_GLUON_SK_LAST_WAVE = 0.5
TRITON_GLUON_STAGES = TRITON_GLUON_SK_STAGES = 3  # each ring's depth on those shapes
# 16 bits on sm_90a, M in this band and K up to TRITON_GLUON_MID_MOST_K: the Gluon swapped mid-M kernel, whose 192- or
# 256-column weight tiles and token tiles of one or two pieces fill the waves where 128-row tiles pad M, and whose
# warp-specialized ring keeps deeper stages in flight than the tl.dot mid-M kernel's. Below the band its few tiles
# leave SMs idle that split-K and the tl.dot kernels' split tails fill; above it the 128x256 tiles' waves are full
# enough; past the K bound the split kernels' shorter walks win, as the Gluon kernel never splits K (fitted on fp16
# shapes of sweep seeds 3-7 against the rule without it). Within the band too, its plan's tiles must be FILL x SMs or
# more: with fewer, only a kernel that splits K keeps the SMs busy (on the same shapes, at any M, the kernel lost to
# the rule's other choices on average where its tiles were fewer)
TRITON_GLUON_MID_M = (160, 700)
TRITON_GLUON_MID_MOST_K = 20480
# fp8 on sm_90a, M in this band at any K: the same kernel, each K step's sum promoted, with the same floor of tiles. It
# starts where the fp8 decode band ends; above it the Gluon 128x256 kernels' waves are full enough (fitted on the fp8
# shapes of sweep seeds 3-5 against the rule without it, tools/tune_gemm_mid_gluon.py --band --dtype fp8e4m3)
TRITON_GLUON_MID_FP8_M = (TRITON_TINY_M_FP8 + 1, 560)
TAIL_MIN_K_TILES = MIN_K_TILES_PER_SPLIT  # the split tail's shares hold this many K tiles at least, as the kernels'
NARROW_TILE_RATE = 0.97  # a 128x192 tile's MMA rate against a 128x256 one's (fewer MACs per operand byte)
# Triton: the split tail is taken over the persistent kernel for a tail whose shares take several rounds (a last wave
# more than half full) only up to this many whole waves before it. The split tail runs on the stream-K kernel, a few
# percent slower per tile than the persistent kernel that takes the unsplit walk (at 950 x 11008 x 3072, the same
# tiles walked the same way: 0.81 against 0.84 of cuBLAS), and several rounds save a fifth to a half of one round:
# over more waves the slower tiles cost more. (Where the split tail is taken for other reasons, M <= 128, its
# launcher walks such a tail in rounds whatever the waves: the same kernel, faster.)
TRITON_TAIL_ROUNDS_MOST_WAVES = 2

PTX = "ptx"
TRITON = "triton"


@dataclass(frozen=True)
class Choice:
    """A candidate: the registered variant name of the kernel, the stage count, and why, in one line."""

    kernel: str  # the name the kernel is registered under in its backend (suite/variants.py)
    stages: int
    why: str

    def line(self) -> str:
        return f"{self.kernel} at {self.stages} stages: {self.why}"


def _as_fallback(choice: Choice) -> Choice:
    """``choice`` behind another: its note says it is a fallback (once)."""
    return Choice(choice.kernel, choice.stages, "fallback: " + choice.why.removeprefix("fallback: "))


def _triton_mid(m: int, n: int, k: int, dtype: str, sms: int, behind: tuple[Choice, ...]) -> tuple[Choice, ...]:
    """K >= MID_LEAST_K and TALL_M / 2 < M <= TRITON_MID_M (one token tile, any dtype), or at 16 bits TALL_M <= M <=
    TRITON_MID_WIDE_M where 128x256 tiles are fewer than TRITON_MID_WAVES waves: the swapped mid-M kernel, the
    ``behind`` choices as its fallbacks; ``behind`` alone elsewhere (between the two bands, the tall band's 256-row
    tiles, one tile row)."""
    if k < MID_LEAST_K or not TALL_M // 2 < m <= TRITON_MID_WIDE_M:
        return behind
    t256 = _tiles(m, n, 128, 256)
    wide = m > TRITON_MID_M
    if wide and (dtype == "fp8e4m3" or m < TALL_M or t256 >= TRITON_MID_WAVES * sms):
        return behind
    rows = mid_token_rows(m, n, k, sms, dtype)
    stages = 5 if rows <= TRITON_MID_DEEP_TOKENS else 4
    # the kernel plans its tile again at these stages: the same tile wherever its ring fits them
    assert triton_mid_ring_fits(rows, stages), (m, n, k, rows, stages)
    if not wide:
        why = (
            f"{TALL_M // 2} < M={m} <= {TRITON_MID_M}, K={k} >= {MID_LEAST_K}: swapped, one token tile of {rows} "
            "rows where 256-row tiles pad to 256, split tail"
        )
    else:
        why = (
            f"{TALL_M} <= M={m} <= {TRITON_MID_WIDE_M}, K={k} >= {MID_LEAST_K}, {t256} 128x256 tiles < "
            f"{TRITON_MID_WAVES}x{sms} SMs: swapped, {rows}-token tiles (x {-(-m // rows)}), split tail"
        )
    return (Choice("mid-m swap-ab desc", stages, why), *(_as_fallback(c) for c in behind))


def _tiles(m: int, n: int, bm: int, bn: int) -> int:
    return math.ceil(m / bm) * math.ceil(n / bn)


def k_tiles(k: int, dtype: str) -> int:
    """K tiles of the split tail's kernels: 128 bytes of K each (64 elements of 16 bits, 128 of fp8)."""
    return math.ceil(k / (128 if dtype == "fp8e4m3" else 64))


def tail_rounds(tiles: int, k_tiles: int, sms: int, rounds: bool = False) -> float:
    """How long the split tail walks ``tiles`` output tiles, in rounds of one whole tile on every SM: its whole
    waves, then the last, partial wave's shares of a tile (a whole tile where that wave is not split). ``rounds``:
    the launchers' walk, whose shares may take several rounds (suite.waves.tail_split_count)."""
    splits = tail_split_count(tiles, k_tiles, sms, TAIL_MIN_K_TILES, rounds)
    return tiles // sms + (tail_share_rounds(tiles % sms, sms, splits) if tiles % sms else 0)


def _check(backend: str, m: int, n: int, k: int, dtype: str, sms: int) -> None:
    if backend not in (PTX, TRITON):
        raise ValueError(f"backend must be 'ptx' or 'triton', not {backend!r}")
    if dtype not in ("fp16", "bf16", "fp8e4m3"):
        raise ValueError(f"dtype must be fp16, bf16 or fp8e4m3, not {dtype!r}")
    for name, v in (("M", m), ("N", n), ("K", k), ("sms", sms)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, not {v!r}")


def choices(
    backend: str, m: int, n: int, k: int, dtype: str = "fp16", sms: int = H200_SMS, hopper: bool = True
) -> tuple[Choice, ...]:
    """The candidates for an M x N x K problem at ``dtype`` on ``sms`` SMs, best first. ``hopper``: the sm_90a-only
    kernels (Gluon) may run (False: the Triton interpreter, or another GPU). Raises ValueError on bad arguments."""
    _check(backend, m, n, k, dtype, sms)
    return _ptx(m, n, k, dtype, sms) if backend == PTX else _triton(m, n, k, dtype, sms, hopper)


def choose(backend: str, m: int, n: int, k: int, dtype: str = "fp16", sms: int = H200_SMS, hopper: bool = True):
    """The rule's first choice (``choices``' head)."""
    return choices(backend, m, n, k, dtype, sms, hopper)[0]


def _ptx_tail(m: int, n: int, k: int, dtype: str, sms: int, narrow: bool, lead: str = "") -> tuple[Choice, ...]:
    """The split tail on 128x256 tiles, or, where ``narrow`` lets it (16-bit), on 128x192 ones where their walk takes
    fewer rounds (each round of a 128x192 tile lasting 192 / 256 of a 128x256 one's, at NARROW_TILE_RATE of its
    pace); the persistent TMA-store rung behind them. ``lead``: why the regime came here, before the note's figures."""
    kt = k_tiles(k, dtype)
    t256, t192 = _tiles(m, n, 128, 256), _tiles(m, n, 128, 192)
    r256 = tail_rounds(t256, kt, sms, rounds=True)
    r192 = tail_rounds(t192, kt, sms, rounds=True) * 192 / 256 / NARROW_TILE_RATE
    # 3 deep where the output is large (4096 x 4096 or more) or one tile row holds M, else 4 (fp8: always 4)
    stages = 4 if dtype == "fp8e4m3" or (m > 128 and m * n < 4096 * 4096) else 3
    wide = Choice(
        "128x256 split-tail tma-store tma+wgmma",
        stages,
        f"{lead}{t256} 128x256 tiles on {sms} SMs, split tail: {r256:.2f} rounds of a 128x256 tile"
        + (f", 128x192 tiles {r192:.2f}" if narrow else ""),
    )
    persistent = Choice("128x256x64 ws 2wg persistent tma-store tma+wgmma", stages, "fallback: persistent tma-store")
    if not narrow:
        return (wide, persistent)
    mid = Choice(
        "128x192 split-tail tma-store tma+wgmma",
        4,
        f"{lead}{t192} 128x192 tiles on {sms} SMs, split tail: {r192:.2f} rounds of a 128x256 tile's time, "
        f"128x256 tiles {r256:.2f}",
    )
    return (mid, wide, persistent) if r192 < r256 else (wide, mid, persistent)


def ptx_mid_ratio(m: int, n: int, k: int, sms: int, dtype: str = "fp16") -> float:
    """The PTX mid-M kernel's modelled time at its tile for ``dtype`` (suite.waves.mid_time) over the tile rungs'
    split tail's: the rounds of the faster of 128x256 and 128x192 tiles (``tail_rounds``, in 128x256 tiles' time;
    fp8: 128x256 alone, the 128x192 rung has no fp8 build) x a 128x256 tile's time in the same units, two warpgroups
    x (256 + MID_FIXED_TOKENS) per K stage (128 bytes of K on both sides). The two sides are not alike on purpose: the
    fix-up term is the mid-M model's own, fitted with it, and the rungs' side is always the split tail's rounds, as
    ``_ptx_tail`` weighs them, whichever rung the rule would run; the comparison's thresholds were fitted with
    exactly these two sides (1 at 16 bits, with tools/tune_gemm_mid.py --rungs; PTX_MID_FP8_RATIO at fp8, with suite
    runs of the mid-M kernel and the split tail), the rungs' tail in one round of shares as it then was (their shares
    in several rounds came later, and this comparison has not been fitted against them)."""
    kt = k_tiles(k, dtype)
    t256, t192 = _tiles(m, n, 128, 256), _tiles(m, n, 128, 192)
    rounds = tail_rounds(t256, kt, sms)
    if dtype != "fp8e4m3":
        rounds = min(rounds, tail_rounds(t192, kt, sms) * 192 / 256 / NARROW_TILE_RATE)
    tile = mid_tile(m, n, k, sms, dtype=dtype)
    return mid_time(m, n, k, sms, *tile, dtype) / (rounds * kt * 2 * (256 + MID_FIXED_TOKENS))


def _ptx_tall(m: int, n: int, k: int, dtype: str, sms: int, fallbacks: tuple[Choice, ...]) -> tuple[Choice, ...]:
    """TALL_M / 2 < M < TALL_M on the tile rungs: stream-K on 256x128 tiles where they fill the SMs, else every tile
    at once through the split tail; ``fallbacks`` (split-K) behind."""
    t_tall, t192 = _tiles(m, n, TALL_M, 128), _tiles(m, n, 128, 192)
    sixteen = dtype != "fp8e4m3"
    tall = f"{TALL_M // 2} < M={m} < {TALL_M}: "
    if t_tall >= sms:
        stream = Choice(
            "256x128 stream-k tma+wgmma",
            4,
            f"{tall}one row of 256x128 tiles reads B once, stream-K over {t_tall} tiles >= {sms} SMs",
        )
        return (stream, *fallbacks)
    # as many 128x256 tiles as 256x128 ones: all at once, so both tile rows read each panel of B together;
    # 128x192 tiles (a third more) only where they too all fit
    lead = f"{tall}{t_tall} 256x128 tiles < {sms} SMs, every tile at once (both tile rows read B together); "
    return (
        *_ptx_tail(m, n, k, dtype, sms, sixteen and t192 <= sms, lead),
        *fallbacks,
    )


def _ptx(m: int, n: int, k: int, dtype: str, sms: int) -> tuple[Choice, ...]:
    rest = _ptx_tiles(m, n, k, dtype, sms)
    if not TALL_M // 2 < m <= PTX_MID_M or k < MID_LEAST_K:
        return rest
    fp8 = dtype == "fp8e4m3"
    ratio = ptx_mid_ratio(m, n, k, sms, dtype)
    if ratio > (PTX_MID_FP8_RATIO if fp8 else 1):
        return rest
    block_t, consumers, w_tiles = mid_tile(m, n, k, sms, dtype=dtype)
    assert w_tiles == 1, (m, n, k)  # no wide tile in this band (MID_WIDE_LEAST_M): every tile here fits 5 stages
    stages = PTX_MID_STAGES
    if fp8:
        stages = 5 if PTX_MID_FP8_DEEP_TOKENS < block_t <= MID_FP8_PAIRS_MOST_TOKENS else 6
    mid = Choice(
        "mid-m swap-ab tma+wgmma",
        stages,
        f"{TALL_M // 2} < M={m} <= {PTX_MID_M}, K={k} >= {MID_LEAST_K}: swapped, {block_t}-token tiles (x "
        f"{-(-m // block_t)}) on {64 * consumers} weight columns, modelled at {ratio:.2f} of the tile rungs' "
        "split tail in one round",
    )
    return (mid, *(_as_fallback(c) for c in rest))


def _ptx_tiles(m: int, n: int, k: int, dtype: str, sms: int) -> tuple[Choice, ...]:
    """The PTX choices but the mid-M kernel: decode, the tall band's, split-K, the split tail."""
    t256, t192 = _tiles(m, n, 128, 256), _tiles(m, n, 128, 192)
    few_tiles = f"128x256 tiles {math.ceil(m / 128)}x{math.ceil(n / 256)}={t256} < {FILL}x{sms} SMs"
    t64, t128 = _tiles(m, n, 64, 128), _tiles(m, n, 128, 128)
    split64 = Choice(
        "64x128 split-k tma+wgmma", 8, f"{few_tiles}; M={m} <= {PTX_NARROW_M}, 64x128 tiles {t64} <= {sms} SMs: K split"
    )
    split128 = Choice(
        "128x128 split-k tma+wgmma",
        7,
        f"{few_tiles}; M={m} > {PTX_NARROW_M} or 64x128 tiles {t64} > {sms} SMs: K split",
    )
    split = (split64, split128) if t64 <= sms and m <= PTX_NARROW_M else (split128, split64)
    split_fallbacks = tuple(Choice(c.kernel, c.stages, "fallback: K split") for c in split)
    sixteen = dtype != "fp8e4m3"  # the 128x192 rung is built for 16-bit types only
    most = PTX_DECODE_M_FP8 if dtype == "fp8e4m3" else PTX_DECODE_M
    if m <= most:
        decode = Choice("decode swap-ab tma+wgmma", 4, f"M={m} <= {most}: the weight on wgmma's M side, streamed once")
        return (decode, *split)
    if TALL_M // 2 < m < TALL_M:
        return _ptx_tall(m, n, k, dtype, sms, split_fallbacks)
    few = t256 < FILL * sms and (not sixteen or t192 < FILL * sms)
    if few and (t128 <= sms or not sixteen):  # split-K's tiles in one wave (fp8: no narrower tile to turn to)
        return split
    # above one tile row of M, or where 128x256 tiles are too few: 128x192 tiles may take fewer rounds. With one
    # tile row and 128x256 tiles enough, the weight streams once whichever the width: the wider tile
    narrow = sixteen and (m > 128 or t256 < FILL * sms)
    return (*_ptx_tail(m, n, k, dtype, sms, narrow), *split_fallbacks)


def _triton(m: int, n: int, k: int, dtype: str, sms: int, hopper: bool) -> tuple[Choice, ...]:
    rest = _triton_mid(m, n, k, dtype, sms, _triton_tiles(m, n, k, dtype, sms, hopper))
    return _triton_gluon_mid(m, n, k, dtype, sms, hopper, rest)


def _triton_gluon_mid(
    m: int, n: int, k: int, dtype: str, sms: int, hopper: bool, behind: tuple[Choice, ...]
) -> tuple[Choice, ...]:
    """On sm_90a, at 16 bits M within TRITON_GLUON_MID_M and K <= TRITON_GLUON_MID_MOST_K, at fp8 M within
    TRITON_GLUON_MID_FP8_M, and the plan's tiles FILL x SMs or more: the Gluon swapped mid-M kernel at its plan's
    depth (suite.waves.gluon_mid_plan, which the kernel makes again at that depth), the ``behind`` choices as its
    fallbacks; ``behind`` alone elsewhere."""
    fp8 = dtype == "fp8e4m3"
    least, most = TRITON_GLUON_MID_FP8_M if fp8 else TRITON_GLUON_MID_M
    if not hopper or not least <= m <= most or (not fp8 and k > TRITON_GLUON_MID_MOST_K):
        return behind
    plan = gluon_mid_plan(m, n, sms, fp8=fp8)
    t = plan.tile
    tiles = t.tiles(m, n)
    if tiles < FILL * sms:
        return behind
    pieces = f"{t.t0} + {t.t1}" if t.t1 else f"{t.t0}"
    why = (
        f"{least} <= M={m} <= {most}, "
        + ("fp8" if fp8 else f"K={k} <= {TRITON_GLUON_MID_MOST_K}")
        + f": swapped, {t.weight_rows} weight columns ({t.consumers} x {t.weight_cols}) by {t.tokens} tokens "
        f"({pieces}), {tiles} tiles >= {FILL}x{sms} SMs, modelled {t.efficiency(m, n, sms):.2f} of whole waves"
    )
    return (Choice("mid-m swap-ab gluon ws", plan.stages, why), *(_as_fallback(c) for c in behind))


def _triton_tiles(m: int, n: int, k: int, dtype: str, sms: int, hopper: bool) -> tuple[Choice, ...]:
    """The Triton choices but the mid-M kernel: decode, the tall band's, split-K, the split tail, persistent."""
    t256 = _tiles(m, n, 128, 256)
    host = Choice(
        "128x256x64 desc persistent host",
        3,
        f"{t256} 128x256 tiles {'>=' if t256 >= sms else '<'} {sms} SMs: persistent, host descriptors",
    )
    fallback = Choice("split-k desc", 4, "fallback: K split")
    tiny = TRITON_TINY_M_FP8 if dtype == "fp8e4m3" else TRITON_TINY_M
    if m <= tiny:
        why = f"M={m} <= {tiny}" + (" at fp8" if tiny != TRITON_TINY_M else "")
    elif m <= TRITON_DECODE_M and n <= TRITON_DECODE_N and (m <= TRITON_DECODE_M // 2 or k <= TRITON_DECODE_K):
        why = f"M={m} <= {TRITON_DECODE_M} against a weight of N={n} <= {TRITON_DECODE_N}" + (
            "" if m <= TRITON_DECODE_M // 2 else f", K={k} <= {TRITON_DECODE_K}"
        )
    elif m <= TRITON_NARROW_M and n <= TRITON_NARROW_N:
        why = f"M={m} <= {TRITON_NARROW_M} against a narrow weight, N={n} <= {TRITON_NARROW_N}"
    else:
        why = ""
    decode = Choice("decode swap-ab desc", 4, f"{why or f'M={m}'}: the weight on the MMA's M side, streamed once")
    if why:
        return (decode, fallback, host)
    host_fallback = Choice(host.kernel, host.stages, "fallback: persistent, host descriptors")
    if TALL_M // 2 < m < TALL_M and dtype != "fp8e4m3":  # fp8 keeps 128x256 tiles (gemm_splitk.tile_for)
        t_tall = _tiles(m, n, TALL_M, 128)
        tall = Choice("split-k desc", 4, f"{TALL_M // 2} < M={m} < {TALL_M}: one row of 256x128 tiles reads B once")
        if t_tall < sms:
            return (tall, host_fallback)
        stream = Choice(
            "stream-k desc",
            4,
            f"{TALL_M // 2} < M={m} < {TALL_M}: one row of 256x128 tiles reads B once, stream-K over {t_tall} tiles "
            f">= {sms} SMs",
        )
        return (stream, tall, host_fallback)
    # the split tail on the split-K and stream-K kernels' tile (gemm_splitk.tile_for): 64 rows up to M = 64
    bm = 64 if m <= 64 else 128
    tiles = _tiles(m, n, bm, 256)
    shares = tail_split_count(tiles, k_tiles(k, dtype), sms, TAIL_MIN_K_TILES, rounds=True)  # the launcher's
    share_rounds = -(-(tiles % sms) * shares // sms)
    tail = Choice(
        "split-tail desc",
        3,
        f"M={m}, {tiles} {bm}x256 tiles >= {sms} SMs: whole waves, "
        + (
            f"then the last wave's {tiles % sms} tiles in {shares} share{'s' if shares > 1 else ''} of K"
            + (f" over {share_rounds} rounds" if share_rounds > 1 else "")
            + " (split tail)"
            if tiles % sms
            else "no tail (the split tail's walk)"
        ),
    )
    if TRITON_TINY_M < m <= TRITON_DECODE_M and tiles >= sms:
        return (tail, fallback, decode, host)
    if m <= TRITON_DECODE_M or (m <= TRITON_SPLIT_M and t256 < sms) or t256 < FILL * sms:
        split = Choice("split-k desc", 4, f"M={m}, {t256} 128x256 tiles: too few for {sms} SMs alone, K split")
        return (split, host) if m > TRITON_DECODE_M else (split, decode, host)
    if hopper and dtype == "fp8e4m3" and m >= TRITON_GLUON_FP8_M and t256 >= sms:
        return _triton_gluon_fp8(m, t256, sms, host_fallback)
    if hopper and dtype in ("bf16", "fp8e4m3") and m > TRITON_SPLIT_M:
        gluon = Choice(
            "128x256x64 gluon ws persistent",
            3,
            f"M={m} > {TRITON_SPLIT_M}, {t256} 128x256 tiles, {dtype} on sm_90a: Gluon warp-specialized persistent",
        )
        return (gluon, host)
    # a tail to split: the split tail (a tail whose shares take several rounds only after at most
    # TRITON_TAIL_ROUNDS_MOST_WAVES whole waves); else its walk is the persistent kernel's, which is faster
    one_round = tail_split_count(tiles, k_tiles(k, dtype), sms, TAIL_MIN_K_TILES) > 1
    if shares > 1 and (one_round or tiles // sms <= TRITON_TAIL_ROUNDS_MOST_WAVES):
        return (tail, host, fallback)
    return (host, fallback)


def _triton_gluon_fp8(m: int, t256: int, sms: int, host_fallback: Choice) -> tuple[Choice, ...]:
    """fp8 with a wave of 128x256 tiles or more: the Gluon persistent kernel, or its stream-K form where the last
    wave of tiles is partial and at most TRITON_GLUON_SK_LAST_WAVE full."""
    waves, last = math.ceil(t256 / sms), t256 % sms
    head = f"M={m} >= {TRITON_GLUON_FP8_M}, {t256} 128x256 tiles: {waves} waves of {sms} SMs, {last or sms} in the last"
    persistent = Choice(
        "128x256x64 gluon ws persistent", TRITON_GLUON_STAGES, f"{head}: Gluon warp-specialized persistent"
    )
    if 0 < last <= TRITON_GLUON_SK_LAST_WAVE * sms:
        stream = Choice(
            "128x256x64 gluon ws stream-k",
            TRITON_GLUON_SK_STAGES,
            f"{head} <= {TRITON_GLUON_SK_LAST_WAVE:.0%} of {sms}: Gluon stream-K",
        )
        return (stream, _as_fallback(persistent), host_fallback)
    return (persistent, host_fallback)
