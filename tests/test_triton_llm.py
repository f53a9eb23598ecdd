"""The Triton kernels for the shapes LLMs run (suite/triton/gemm_splitk.py, gemm_streamk.py, gemm_decode.py):

* each at small odd shapes against the fp64 reference, fresh random inputs and a NaN-poisoned output, in every dtype:
  M = 1, M not a multiple of 8, K smaller than one split, a split that leaves a remainder, more splits than K tiles,
  N and K not multiples of 16 (stream-K: shared tiles, ranges that end mid-tile, more programs than iterations);
* the rules that choose splits, tiles and schedules, on the H200's 132 SMs, for shapes beyond the named sets;
* determinism (two runs bit-identical), bad input (ValueError naming the rule), the sanitizer's fault hook;
* each kernel compiled for sm_90 without a GPU: wgmma fed by TMA, no spills, its rings within 227 KiB.

On a CPU the kernels run in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET=1), whose SM count is 4
(gemm_desc.num_sms), so the tests force split counts and program counts; on a GPU the same cases run compiled.
"""

from __future__ import annotations

import random
import zlib

import pytest
import torch
from conftest import HAS_GPU
from fp8_edges import cublas_promoted, fp8_edge_inputs, fp8_error

from suite import waves
from suite.problems import GEMM
from suite.triton import gemm_decode, gemm_desc, gemm_mid, gemm_splitk, gemm_streamk
from suite.triton._interp_dot import fp8_dot_unsupported

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
DTYPES = ("fp16", "bf16", "fp8e4m3")
H200_SMS = 132


def _run(launcher_type, size, dtype, seed, **kwargs):
    """(inputs, out, launcher): fresh inputs of ``size``, the output poisoned, one call."""
    inputs = GEMM.make_inputs(size, seed, DEVICE, dtype)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    launcher = launcher_type(inputs, out, kwargs.pop("stages", 2), **kwargs)
    launcher()
    return inputs, out, launcher


def _assert_valid(inputs, out, dtype, what):
    check = GEMM.check(out, GEMM.reference(inputs), dtype)
    assert check.valid, f"{what}: {check.message} (max abs error {check.max_abs_error:.3g})"


def _needs(dtype: str) -> None:
    reason = fp8_dot_unsupported() if dtype == "fp8e4m3" else None  # an interpreter without fp8 tl.dot
    if reason:
        pytest.skip(reason)


def _bk(kind: str, dtype: str, m: int) -> int:
    """The K tile of split-K / stream-K at this dtype and M (the decode kernel's depends on more: see its cases)."""
    return gemm_splitk.tile_for(dtype, m)[2]


# ---------------------------------------------------------------------------------------------------------------
# Odd shapes against fp64, every dtype
# ---------------------------------------------------------------------------------------------------------------

# (name, M, N, K in K tiles or elements, splits): K as ("tiles", t) is t x BLOCK_K (+ 8 elements: a partial last
# tile, and K not a multiple of 16), K as an int is that many elements
SPLIT_CASES = [
    ("M=1", 1, 70, ("tiles", 5), 2),
    ("M odd, N odd", 13, 45, ("tiles", 3), 2),
    ("K below one split", 20, 50, 24, 3),  # one K tile for three splits: two splits empty
    ("remainder", 33, 64, ("tiles", 7), 3),  # 7 (8 with the partial tile) K tiles over 3 splits
    ("splits > K tiles", 9, 40, ("tiles", 2), 9),
    ("two tiles of each", 70, 300, ("tiles", 4), 4),  # 64- or 128-row tiles, 256 columns: several tiles, edges
]


def _by_dtype(cases):
    """fp16 and fp8 (their own operand layout and epilogue) at every case; bf16, the fp16 code at another type, at
    the first two (the interpreter is slow: the CPU suite stays within minutes)."""
    return [(d, *c) for d in DTYPES for c in (cases[:2] if d == "bf16" else cases)]


def _ids(cases):
    return [f"{c[0]}-{d}" for d, *c in _by_dtype(cases)]


def _k(k, bk: int) -> int:
    return k[1] * bk + 8 if isinstance(k, tuple) else k


@pytest.mark.parametrize("dtype, name, m, n, k, splits", _by_dtype(SPLIT_CASES), ids=_ids(SPLIT_CASES))
def test_split_k_close_to_fp64(dtype, name, m, n, k, splits):
    _needs(dtype)
    size = (m, n, _k(k, _bk("split-k", dtype, m)))
    seed = zlib.crc32(f"split-k {dtype} {size}".encode())
    inputs, out, launcher = _run(gemm_splitk.SplitKGemm, size, dtype, seed, splits=splits)
    assert launcher.splits == splits and (launcher.workspace is None) == (splits == 1)
    _assert_valid(inputs, out, dtype, f"split-K {size} {dtype} splits={splits}")


@pytest.mark.parametrize("dtype, name, m, n, k, splits", _by_dtype(SPLIT_CASES), ids=_ids(SPLIT_CASES))
def test_decode_close_to_fp64(dtype, name, m, n, k, splits):
    _needs(dtype)
    block_k = gemm_decode.plan(dtype, m, n, 1 << 20, 4, splits).block_k  # this shape's K tile, whatever K is
    size = (m, n, _k(k, block_k))
    seed = zlib.crc32(f"decode {dtype} {size}".encode())
    inputs, out, launcher = _run(gemm_decode.DecodeGemm, size, dtype, seed, splits=splits)
    assert launcher.plan.splits == splits
    _assert_valid(inputs, out, dtype, f"decode {size} {dtype} {launcher.plan}")


@pytest.mark.parametrize("dtype", ["fp16", "fp8e4m3"])
def test_split_k_takes_narrow_tiles_where_they_fill_one_wave(dtype):
    """256 rows make two tile rows of 128; 64 x SMs columns make SMs / 2 tiles of 128 x 256 (fewer than the SMs) or
    SMs tiles of 128 x 128 (one wave, full; in the interpreter, 4 "SMs": 256 columns): the rule's launch takes the
    narrow tile, one split and no workspace, and computes the right product."""
    _needs(dtype)
    bk = gemm_splitk.TILES[dtype][2]
    size = (256, 64 * gemm_splitk.num_sms(DEVICE), 3 * bk + 16)
    inputs, out, launcher = _run(gemm_splitk.SplitKGemm, size, dtype, zlib.crc32(f"narrow {dtype}".encode()))
    assert launcher.tile == (128, 128, bk) and launcher.warps == (8 if dtype == "fp8e4m3" else 4), launcher.config
    assert launcher.splits == 1 and launcher.workspace is None, launcher.config
    _assert_valid(inputs, out, dtype, f"split-K {size} {dtype} on 128 x 128 tiles")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("launcher", [gemm_splitk.SplitKGemm, gemm_streamk.StreamKGemm])
def test_tall_tiles_between_128_and_256_rows(dtype, launcher):
    """129-255 rows at 16-bit types: one tile row of 256 x 128 (the 128-row tiles would make two rows, each reading
    all of B); its rows past M are the descriptor's zero fill and are never stored. fp8 keeps 128 x 256 (its promoted
    loop's second accumulator spills at 256 rows). Both kernels compute the right product."""
    _needs(dtype)
    bk = gemm_splitk.TILES[dtype][2]
    size = (131, 200, 5 * bk + 16)
    inputs, out, run = _run(launcher, size, dtype, zlib.crc32(f"tall {dtype} {launcher.__name__}".encode()))
    if dtype == "fp8e4m3":
        assert run.tile[0] == 128, run.config  # 128-row tiles (split-K's may be 128 x 128 here)
    else:
        assert run.tile == (256, 128, bk) and run.warps == 8, run.config
    _assert_valid(inputs, out, dtype, f"{launcher.__name__} {size} {dtype} on 256 x 128 tiles")


# (name, M, N, K tiles, programs): 128x256 or 64x256 tiles; the programs stand for the SMs
STREAM_CASES = [
    ("M=1, tile shared by 3", 1, 70, 6, 3),
    ("M odd, ranges end mid-tile", 13, 300, 5, 3),  # 2 tiles x 5 K tiles over 3 programs
    ("more programs than iterations", 20, 50, 2, 7),
    ("data-parallel phase", 300, 600, 3, 2),  # 3 tile rows on 2 programs: the hybrid, 6 of 9 tiles whole, 3 after
    ("rows in lockstep", 300, 600, 4, 6),  # 3 rows x 3 tiles x 5 K tiles over 2 programs a row: 7 and 8 K tiles
    ("K below one tile", 9, 40, 0, 3),  # K = 8: one partial K tile
]


def test_stream_k_cases_cover_what_they_say():
    """The cases above do share tiles, run a data-parallel phase, run tile rows in lockstep, and have more programs
    than iterations."""
    s = gemm_streamk.schedule(tiles=1, k_tiles=7, sms=3)
    assert s.cover == 3 and s.dp_tiles == 0
    s = gemm_streamk.schedule(tiles=2, k_tiles=6, sms=3)
    assert s.cover == 2 and s.first_iter(1) % 6 != 0  # program 1 starts mid-tile
    s = gemm_streamk.schedule(tiles=1, k_tiles=3, sms=7)
    assert s.sk_programs == 3 and s.programs == 3  # one program per iteration, no idle program launched
    s = gemm_streamk.stream_k_schedule(tiles_m=3, tiles_n=3, k_tiles=4, sms=2)  # 3 rows > 2 programs: the hybrid
    assert s.dp_tiles == 6 and s.group_m == gemm_streamk.GROUP_M
    s = gemm_streamk.stream_k_schedule(tiles_m=3, tiles_n=3, k_tiles=5, sms=6)
    assert s.group_m == 1 and s.sk_programs == 6 and s.first_iter(1) % 5 != 0  # lockstep, ranges end mid-tile


def test_lockstep_rows_walk_the_same_b_panels_at_the_same_k():
    """Lockstep stream-K: program p + j q's range is program p's moved down j tile rows, so at every step of the walk
    the programs of all rows stand at the same tile column and K tile (they read the same B panel together); one tile
    row, more than 16, or rows that divide the SMs badly, take the hybrid."""
    for tiles_m, tiles_n, k_tiles, sms in ((3, 24, 172, 132), (5, 40, 172, 132), (9, 86, 384, 132), (2, 3, 5, 6)):
        s = gemm_streamk.stream_k_schedule(tiles_m, tiles_n, k_tiles, sms)
        q = sms // tiles_m
        assert s.group_m == 1 and s.sk_programs == tiles_m * q and not s.dp_tiles, s
        row = tiles_n * k_tiles
        for p in range(q):
            for j in range(tiles_m):
                assert s.first_iter(p + j * q) == s.first_iter(p) + j * row
                assert s.first_iter(p + j * q + 1) == s.first_iter(p + 1) + j * row
    assert gemm_streamk.lockstep_schedule(1, 28, 576, 132) is None  # one row: nothing to align
    assert gemm_streamk.lockstep_schedule(17, 172, 384, 132) is None  # 7 programs a row: 119 of 132 SMs
    assert gemm_streamk.lockstep_schedule(32, 16, 64, 128) is None  # 32 rows: past LOCKSTEP_MOST_ROWS
    assert gemm_streamk.stream_k_schedule(17, 172, 384, 132).group_m == gemm_streamk.GROUP_M


# (name, M, N, K tiles, programs): the split tail (the programs stand for the SMs; K past the K tiles: a partial one)
TAIL_CASES = [
    ("no room for two shares", 130, 300, 9, 4),  # 3 tall tiles (fp8: 4 of 128 x 256) on 4 programs: whole, one each
    ("tall tiles in 2 shares", 130, 300, 9, 7),  # 3 x 2 shares of 10 K tiles (fp8: 4 tiles, whole)
    ("a whole wave, then 1 tile in 3 shares", 300, 300, 12, 5),  # 6 tiles on 5 programs, 13 K tiles: 4, 4 and 5
    ("K shares of unequal length", 13, 300, 10, 5),  # 2 tiles of 64 x 256 x 2 shares of 11 K tiles: 5 and 6
    # 8 tiles of 64 x 256 on 5 programs, 25 K tiles (fp8 too): a whole wave, then 3 in 3 shares each, 9 stream-K
    # programs over the 5 launched, two rounds of shares
    ("a whole wave, then 3 tiles in 3 shares over 2 rounds", 13, 2048, 24, 5),
]


@pytest.mark.parametrize(
    "launcher, dtype, name, m, n, k_tiles, programs",
    [(gemm_streamk.StreamKGemm, *c) for c in _by_dtype(STREAM_CASES)]
    + [(gemm_streamk.SplitTailGemm, *c) for c in _by_dtype(TAIL_CASES)],
    ids=[f"stream-k-{i}" for i in _ids(STREAM_CASES)] + [f"split-tail-{i}" for i in _ids(TAIL_CASES)],
)
def test_stream_k_schedules_close_to_fp64(launcher, dtype, name, m, n, k_tiles, programs):
    """Stream-K's schedule and the split tail's, both through the stream-K kernel and its fix-up pass."""
    _needs(dtype)
    size = (m, n, k_tiles * _bk("stream-k", dtype, m) + (8 if dtype != "fp8e4m3" else 24))
    seed = zlib.crc32(f"{launcher.__name__} {dtype} {size}".encode())
    inputs, out, run = _run(launcher, size, dtype, seed, sms=programs)
    _assert_valid(inputs, out, dtype, f"{launcher.__name__} {size} {dtype} {run.schedule}")


def test_split_tail_schedule_deals_whole_waves_then_k_aligned_shares():
    """Whole waves round robin; each tail tile in `splits` shares of K, program p taking share p % splits of tail tile
    p // splits (so program p's range starts at share p % splits of K, whatever its tile: the programs that run
    together read the same K range); the fix-up's table names each tail tile's `splits` programs, in K order."""
    for tiles, k_tiles, sms in ((1462, 384, 132), (144, 172, 132), (32, 128, 132), (6, 13, 5), (200, 172, 132)):
        s = gemm_streamk.split_tail_schedule(tiles, k_tiles, sms)
        splits = s.sk_programs // s.sk_tiles
        assert s.dp_tiles % sms == 0 and 0 < s.sk_tiles <= sms and s.sk_programs <= sms and s.programs <= sms
        assert splits == waves.tail_split_count(tiles, k_tiles, sms, gemm_splitk.MIN_K_TILES_PER_SPLIT)
        for p in range(s.sk_programs):
            first, end = s.first_iter(p), s.first_iter(p + 1)
            assert first // k_tiles == (end - 1) // k_tiles == p // splits  # within one tile
            assert first % k_tiles == (p % splits) * k_tiles // splits  # its share of K, whatever the tile
        table = s.fixup_table()
        assert all(table[3 * t : 3 * t + 3] == [splits * t, splits * t + splits - 1, 2 * splits * t]
                   for t in range(s.sk_tiles))  # fmt: skip
    assert gemm_streamk.split_tail_schedule(1462, 384, 132).sk_programs == 10 * 13  # 11 waves, 10 tiles x 13
    assert gemm_streamk.split_tail_schedule(200, 172, 132).sk_programs == 68  # 68 tiles left: whole, one each
    assert gemm_streamk.split_tail_schedule(264, 172, 132).sk_programs == 132  # whole waves: the last one whole


def test_split_tail_in_rounds_deals_more_stream_k_programs_than_the_sms():
    """With rounds (the split tail's launcher): a tail of more than half the SMs after a whole wave is cut in the
    share count suite.waves gives, each share one stream-K program within one tile, K-aligned as in one round; the
    launched programs stay one per SM and walk them in turn (gemm_parts.walk_unit); one round where it fits, as
    without rounds."""
    for tiles, k_tiles, sms in ((344, 48, 132), (200, 172, 132), (8, 25, 5)):
        s = gemm_streamk.split_tail_schedule(tiles, k_tiles, sms, rounds=True)
        splits = s.sk_programs // s.sk_tiles
        assert splits == waves.tail_split_count(tiles, k_tiles, sms, gemm_splitk.MIN_K_TILES_PER_SPLIT, rounds=True)
        assert s.programs == sms < s.sk_programs and s.dp_tiles == tiles // sms * sms, s
        for q in range(s.sk_programs):
            first, end = s.first_iter(q), s.first_iter(q + 1)
            assert first // k_tiles == (end - 1) // k_tiles == q // splits
            assert first % k_tiles == (q % splits) * k_tiles // splits
    assert gemm_streamk.split_tail_schedule(344, 48, 132, rounds=True).sk_programs == 80 * 3
    for tiles, k_tiles in ((1462, 384), (144, 172), (32, 128), (264, 172), (100, 64)):
        assert gemm_streamk.split_tail_schedule(tiles, k_tiles, 132, rounds=True) == gemm_streamk.split_tail_schedule(
            tiles, k_tiles, 132
        )


# ---------------------------------------------------------------------------------------------------------------
# The rules, on the H200 (132 SMs), at shapes inside and outside the named sets
# ---------------------------------------------------------------------------------------------------------------


def test_split_count_fills_the_sms_with_few_splits():
    rule = gemm_splitk.split_count
    assert rule(tiles=8, k_tiles=1024, sms=H200_SMS) == 16  # 512x512x65536 on 128x256 tiles: 128 programs
    assert rule(tiles=32, k_tiles=512, sms=H200_SMS) == 4  # 1024x1024x32768: 128 programs
    assert rule(tiles=64, k_tiles=128, sms=H200_SMS) == 2  # 256x8192x8192: 128 programs
    assert rule(tiles=300, k_tiles=128, sms=H200_SMS) == 1  # more than two waves of tiles already: no workspace
    assert rule(tiles=8, k_tiles=7, sms=H200_SMS) == 1  # too few K tiles for two splits of 4
    assert rule(tiles=1, k_tiles=4096, sms=H200_SMS) == 31  # 31 of 132 SMs is within 5% of MAX_SPLITS' 32


def test_split_k_plan_at_llm_shapes():
    plan = gemm_splitk.split_k_plan
    narrow, wide = (128, 128, 64, 4), (128, 256, 64, 8)
    assert plan("fp16", 256, 8192, 8192, H200_SMS) == (narrow, 1)  # 64 wide tiles, 128 narrow: no workspace
    assert plan("fp16", 256, 6144, 4096, H200_SMS) == (narrow, 1)  # Llama-3 8B QKV: 48 wide, 96 narrow
    assert plan("fp8e4m3", 256, 8192, 8192, H200_SMS) == ((128, 128, 128, 8), 1)  # promoted: two warpgroups
    assert plan("fp16", 256, 10240, 8192, H200_SMS) == (wide, 3)  # 160 narrow tiles: more than one wave
    assert plan("fp16", 256, 4096, 4096, H200_SMS) == (wide, 4)  # 64 narrow tiles: under half the SMs
    assert plan("fp16", 512, 512, 65536, H200_SMS) == (wide, 16)  # long K: 16 narrow tiles; the wide ones split
    assert plan("fp16", 2048, 8192, 8192, H200_SMS) == (wide, 1)  # prefill: the wide tiles fill the GPU already
    assert plan("fp16", 16, 8192, 8192, H200_SMS)[0] == gemm_splitk.tile_for("fp16", 16)  # 64-row tiles


@pytest.mark.parametrize("seed", range(2))
def test_split_k_plan_rule_holds_for_any_shape(seed):
    rng = random.Random(seed)
    for _ in range(300):
        dtype, m, n, sms = rng.choice(DTYPES), rng.randint(1, 4096), rng.randint(1, 65536), rng.choice((4, 132, 144))
        k = rng.randint(1, 65536)
        (bm, bn, bk, warps), splits = gemm_splitk.split_k_plan(dtype, m, n, k, sms)
        base = gemm_splitk.tile_for(dtype, m)
        wide = -(-m // base[0]) * -(-n // base[1])
        if (bm, bn, bk, warps) == base:
            assert splits == gemm_splitk.split_count(wide, -(-k // bk), sms)
        else:  # the narrow tile: one wave at least half full, never split
            narrow = -(-m // bm) * -(-n // bn)
            assert bm == 128 and bn == base[1] // 2 and splits == 1, (dtype, m, n)
            assert warps == (8 if dtype == "fp8e4m3" else 4), (dtype, warps)
            assert wide < sms and sms / 2 <= narrow <= sms, (dtype, m, n, sms)


@pytest.mark.parametrize("seed", range(3))
def test_split_count_rule_holds_for_any_shape(seed):
    rng = random.Random(seed)
    for _ in range(300):
        tiles, k_tiles, sms = rng.randint(1, 600), rng.randint(1, 5000), rng.choice((4, 108, 132, 144))
        s = gemm_splitk.split_count(tiles, k_tiles, sms)
        assert 1 <= s <= gemm_splitk.MAX_SPLITS
        if s > 1:
            assert tiles * s <= 2 * sms and k_tiles // s >= gemm_splitk.MIN_K_TILES_PER_SPLIT
            fewer = waves.wave_efficiency(tiles * (s - 1), sms)
            assert fewer < waves.wave_efficiency(tiles * s, sms)  # each split added buys a fuller GPU


def test_decode_plan_at_llm_shapes():
    plan = gemm_decode.plan
    p = plan("fp16", 16, 8192, 8192, H200_SMS)  # 70B O projection
    assert (p.block_w, p.block_t, p.splits, p.programs) == (64, 16, 1, 128)  # every SM on the weight, no fix-up
    assert p.stage_bytes("fp16") <= gemm_decode.STAGE_LIMIT
    p = plan("fp16", 1, 4096, 4096, H200_SMS)  # 8B O projection: too few weight tiles alone
    assert (p.block_w, p.splits, p.programs) == (64, 2, 128)
    p = plan("fp16", 64, 28672, 4096, H200_SMS)  # 8B gate/up: 224 tiles of 128 rows, no split
    assert (p.block_w, p.block_t, p.splits) == (128, 64, 1)
    p = plan("fp8e4m3", 16, 8192, 8192, H200_SMS)
    assert p.block_k == 256 and p.splits == 1


@pytest.mark.parametrize("seed", range(3))
def test_decode_plan_rule_holds_for_any_shape(seed):
    rng = random.Random(100 + seed)
    for _ in range(200):
        dtype = rng.choice(DTYPES)
        m, n, k = rng.randint(1, 300), rng.randint(1, 60000), rng.randint(1, 60000)
        p = gemm_decode.plan(dtype, m, n, k, H200_SMS)
        assert p.block_t >= min(m, 64) and p.block_t in (16, 32, 64) and p.block_w in gemm_decode.BLOCK_WS
        assert p.stage_bytes(dtype) <= gemm_decode.STAGE_LIMIT and p.block_k <= gemm_decode.MAX_BLOCK_K
        assert p.tiles_t * p.block_t >= m and p.tiles_w * p.block_w >= n
        # no other tile or split count of the rule's candidates fills the SMs better
        best = max(
            waves.wave_efficiency(
                -(-n // w)
                * p.tiles_t
                * gemm_splitk.split_count(
                    -(-n // w) * p.tiles_t, -(-k // gemm_decode.block_k_for(dtype, w, p.block_t)), H200_SMS
                ),
                H200_SMS,
            )
            for w in gemm_decode.BLOCK_WS
        )
        assert waves.wave_efficiency(p.programs, H200_SMS) == best


@pytest.mark.parametrize("seed", range(3))
def test_stream_k_schedule_partitions_the_iterations(seed):
    """Every stream-K iteration belongs to exactly one program's contiguous range; the fix-up's table (who covered
    each tile, where the first of them left its part) agrees with walking the ranges; data-parallel tiles leave 1-2
    waves."""
    rng = random.Random(200 + seed)
    for _ in range(60):
        tiles, k_tiles, sms = rng.randint(1, 700), rng.randint(1, 40), rng.choice((3, 7, 132))
        tiles_m = rng.choice([d for d in range(1, 20) if tiles % d == 0])
        s = gemm_streamk.stream_k_schedule(tiles_m, tiles // tiles_m, k_tiles, sms)
        assert s.programs <= sms and s.sk_programs <= s.sk_iters
        if s.group_m == 1:  # lockstep: rows share the programs evenly, no data-parallel phase, no range across rows
            assert 1 < tiles_m <= gemm_streamk.LOCKSTEP_MOST_ROWS and not s.dp_tiles
            if s.sk_programs < s.sk_iters:
                q = s.sk_programs // tiles_m
                assert s.sk_programs == q * tiles_m
                assert all(s.first_iter(j * q) == j * (tiles // tiles_m) * k_tiles for j in range(tiles_m))
        elif s.dp_tiles:
            assert s.dp_tiles % sms == 0 and sms <= s.sk_tiles < 2 * sms
        else:
            assert tiles < 2 * sms
        owner = [None] * s.sk_iters
        for p in range(s.sk_programs):
            for i in range(s.first_iter(p), s.first_iter(p + 1)):
                assert owner[i] is None
                owner[i] = p
        assert None not in owner and all(s.program_of(i) == owner[i] for i in range(s.sk_iters))
        table = s.fixup_table()
        assert len(table) == 3 * s.sk_tiles
        for t in range(s.sk_tiles):
            covering = sorted({owner[i] for i in range(t * k_tiles, (t + 1) * k_tiles)})
            p_first, p_last, first_slot = table[3 * t : 3 * t + 3]
            assert covering == list(range(p_first, p_last + 1))
            # the kernel's slot of a part: 2 p, + 1 where the tile is not the first of p's range; every later
            # program's part of the tile is in its slot 0 (the fix-up reads them at a stride of two slots)
            first_tiles = [s.first_iter(p) // k_tiles for p in covering]
            assert first_slot == 2 * p_first + (first_tiles[0] != t)
            assert all(f == t for f in first_tiles[1:])


def test_sanitizer_sizes_exercise_the_fix_up():
    """On the H200, the split-K and stream-K modules' sanitizer sizes of 128 rows or more (and their faults' sizes)
    split K with a remainder, or share tiles between programs, on both the tall (256 x 128) and the 128 x 256 tiles:
    the fix-up runs under compute-sanitizer on each."""
    tiles_seen = set()
    for size in (*gemm_splitk.KERNEL.sanitize_sizes[:2], gemm_splitk.KERNEL.faults[0].size):
        (bm, bn, bk, _), splits = gemm_splitk.split_k_plan("fp16", *size, H200_SMS)
        tiles_seen.add((bm, bn))
        assert splits > 1 and -(-size[2] // bk) % splits, (size, splits)
    assert tiles_seen == {(256, 128), (128, 256)}, tiles_seen
    tiles_seen = set()
    for size in (*gemm_streamk.KERNEL.sanitize_sizes[:2], gemm_streamk.KERNEL.faults[0].size):
        m, n, k = size
        bm, bn, bk, _ = gemm_splitk.tile_for("fp16", m)
        tiles_seen.add((bm, bn))
        assert gemm_streamk.stream_k_schedule(-(-m // bm), -(-n // bn), -(-k // bk), H200_SMS).cover > 1, size
    assert tiles_seen == {(256, 128), (128, 256)}, tiles_seen
    m, n, k = gemm_streamk.KERNEL.sanitize_sizes[1]  # 3 tile rows in lockstep
    assert gemm_streamk.stream_k_schedule(-(-m // 128), -(-n // 256), -(-k // 64), H200_SMS).group_m == 1
    m, n, k = gemm_streamk.KERNEL.sanitize_sizes[-1]
    assert gemm_streamk.stream_k_schedule(-(-m // 128), -(-n // 256), -(-k // 64), H200_SMS).dp_tiles > 0
    tails = []  # the split tail's (its launcher's, rounds): shares of K on every size, one after a whole wave, one
    # with more shares than programs (two rounds of them)
    for m, n, k in gemm_streamk.SPLIT_TAIL.sanitize_sizes:
        bm, bn, bk, _ = gemm_splitk.tile_for("fp16", m)
        tiles = -(-m // bm) * -(-n // bn)
        tails.append(gemm_streamk.split_tail_schedule(tiles, -(-k // bk), H200_SMS, rounds=True))
    assert all(t.sk_programs > t.sk_tiles for t in tails) and any(t.dp_tiles for t in tails), tails
    assert any(t.sk_programs > t.programs for t in tails), tails
    for size in (gemm_decode.KERNEL.sanitize_sizes[0], gemm_decode.KERNEL.faults[0].size):
        p = gemm_decode.plan("fp16", *size, H200_SMS)
        assert p.splits > 1 and -(-size[2] // p.block_k) % p.splits, (size, p)


# ---------------------------------------------------------------------------------------------------------------
# Determinism, bad input, the fault hook
# ---------------------------------------------------------------------------------------------------------------

KINDS = {
    "split-k": (gemm_splitk.SplitKGemm, {"splits": 3}),
    "stream-k": (gemm_streamk.StreamKGemm, {"sms": 3}),
    "split-tail": (gemm_streamk.SplitTailGemm, {"sms": 4}),
    "decode": (gemm_decode.DecodeGemm, {"splits": 3}),
    "mid": (gemm_mid.MidGemm, {"sms": 6}),  # 6 programs: shares of K at both sizes below
}


@pytest.mark.parametrize("kind", KINDS)
def test_two_runs_are_bit_identical(kind):
    """The fix-up adds in a fixed order: the same inputs give the same bits, run after run (the launcher reused,
    the output poisoned between runs)."""
    launcher_type, kwargs = KINDS[kind]
    size = (37, 300, 10 * 128 + 8) if HAS_GPU else (37, 70, 10 * 64 + 8)  # 11 K tiles: the split tail splits too
    inputs, out, launcher = _run(launcher_type, size, "fp16", 3, **kwargs)
    assert launcher.workspace is not None, launcher.config  # partials to combine: there is a fix-up to order
    first = out.clone()
    out.fill_(float("nan"))
    launcher()
    assert torch.equal(first.view(torch.int16), out.view(torch.int16))
    _assert_valid(inputs, out, "fp16", kind)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "size", [(16, 4096, 4096), (512, 512, 16384), (100, 1000, 3000), (140, 36864, 4096), (341, 8960, 520)]
)
def test_bit_identical_on_the_gpu_at_llm_shapes(kind, size):
    """On the GPU, where programs finish in any order: the rule's own split counts and schedules, run three times,
    the same bits, and valid."""
    launcher_type, _ = KINDS[kind]
    inputs, out, launcher = _run(launcher_type, size, "fp16", 11)
    first = out.clone()
    for _ in range(2):
        out.fill_(float("nan"))
        launcher()
        torch.cuda.synchronize()
        assert torch.equal(first.view(torch.int16), out.view(torch.int16)), launcher.config
    _assert_valid(inputs, out, "fp16", f"{kind} {size}: {launcher.config}")


def _fp8(m, n, k):
    a = torch.randn(m, k).to(torch.float8_e4m3fn)
    b = torch.randn(n, k).to(torch.float8_e4m3fn)
    return a, b, torch.tensor(1.0), torch.tensor(1.0)


BAD = [
    (
        "fp8 without scales",
        lambda: (_fp8(8, 16, 32)[:2], torch.empty(8, 16, dtype=torch.bfloat16)),
        {},
        "needs its scale",
    ),
    (
        "fp8 B as K x N",
        lambda: (
            (_fp8(8, 16, 32)[0], torch.randn(32, 16).to(torch.float8_e4m3fn), torch.tensor(1.0), torch.tensor(1.0)),
            torch.empty(8, 16, dtype=torch.bfloat16),
        ),
        {},
        "N x K",
    ),
    (
        "fp8 scale of two",
        lambda: ((*_fp8(8, 16, 32)[:3], torch.ones(2)), torch.empty(8, 16, dtype=torch.bfloat16)),
        {},
        "per-tensor scale",
    ),
    ("fp8 out fp16", lambda: (_fp8(8, 16, 32), torch.empty(8, 16, dtype=torch.float16)), {}, "dtype torch.bfloat16"),
    (
        "bf16 with scales",
        lambda: (
            (torch.randn(8, 32).bfloat16(), torch.randn(32, 16).bfloat16(), torch.tensor(1.0), torch.tensor(1.0)),
            torch.empty(8, 16, dtype=torch.bfloat16),
        ),
        {},
        "fp8 operands only",
    ),
    ("fp32 in", lambda: ((torch.randn(8, 32), torch.randn(32, 16)), torch.empty(8, 16)), {}, "not implemented"),
    (
        "stages",
        lambda: ((torch.randn(8, 32).half(), torch.randn(32, 16).half()), torch.empty(8, 16).half()),
        {"stages": 9},
        "stages must be one of",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("what, make, kwargs, rule", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_naming_the_rule(kind, what, make, kwargs, rule):
    launcher_type, _ = KINDS[kind]
    inputs, out = make()
    with pytest.raises(ValueError, match=rule):
        launcher_type(inputs, out, kwargs.get("stages", 2))


@pytest.mark.parametrize(
    "kind, bad",
    [("split-k", {"splits": 0}), ("decode", {"splits": -1}), ("stream-k", {"sms": 0}), ("split-k", {"splits": 2.5})],
)
def test_bad_counts_are_refused(kind, bad):
    launcher_type, _ = KINDS[kind]
    inputs = (torch.randn(8, 32).half(), torch.randn(32, 16).half())
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        launcher_type(inputs, torch.empty(8, 16).half(), 2, **bad)


@pytest.mark.parametrize(
    "kind, module", [("split-k", gemm_splitk), ("stream-k", gemm_streamk), ("decode", gemm_decode)]
)
def test_fault_runs_the_fix_up_before_the_partials(kind, module):
    """The sanitizer's fault (Fault.define, planted by TritonModule.with_defines) launches the fix-up before the
    pass that writes the partials: it sums a workspace nobody wrote yet (NaN here), so C comes out wrong, while the
    healthy module, on the same inputs, is right. On a GPU, initcheck reports those reads (suite.sanitize)."""
    kernel = module.KERNEL
    (fault,) = kernel.faults
    broken = kernel.with_defines(fault.define, stages=fault.stages)
    assert broken.stages == fault.stages and broken.extra_defines == (fault.define,) and kernel.extra_defines == ()
    assert fault.tool == "initcheck" and len(kernel.kernel_names(2)) == 2  # the pass and its fix-up
    size = (13, 70, 3 * 64 + 8)
    launcher_type, kwargs = KINDS[kind]
    for faults, valid in (((), True), ((fault.define,), False)):
        inputs = GEMM.make_inputs(size, 5, DEVICE, "fp16")
        out = GEMM.make_output(inputs).fill_(float("nan"))
        launcher = launcher_type(inputs, out, fault.stages[0], faults=faults, **kwargs)
        launcher.workspace.fill_(float("nan"))  # what a fresh, never-written workspace may hold
        launcher()
        assert GEMM.check(out, GEMM.reference(inputs), "fp16").valid == valid, faults


# ---------------------------------------------------------------------------------------------------------------
# fp8 at its edges: every Triton fp8 kernel promotes each K tile's sum, as promoted cuBLAS does
# ---------------------------------------------------------------------------------------------------------------


FP8_KINDS = {
    **{kind: launcher for kind, (launcher, _) in KINDS.items()},
    "desc": lambda inputs, out, stages: gemm_desc.DescGemm(inputs, out, stages, persistent=True, host_desc=True),
}


@pytest.mark.parametrize("kind", FP8_KINDS)
def test_fp8_edge_values_match_fp64(kind):
    """Each Triton fp8 kernel (split-K with a remainder, stream-K with shared tiles, decode split, the descriptor
    kernel) on the edge inputs: NaN exactly where the product has it, and elsewhere within bf16's rounding of C
    (2^-8 of the sum of |products|, twice over) of fp64. Promotion itself is the GPU's (test below). The NaN only on
    a GPU: the interpreter widens e4m3's NaN pattern to a number."""
    _needs("fp8e4m3")
    size = (13, 300, 5 * 128 + 16)
    inputs = fp8_edge_inputs(*size, seed=52, device=DEVICE, nan=HAS_GPU)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    launcher = FP8_KINDS[kind](inputs, out, 3)
    assert "accumulation promoted" in launcher.config, launcher.config
    launcher()
    error, bound = fp8_error(out, inputs)
    assert bool((error <= 2.0**-7 * bound + 1e-6).all()), (kind, float(error.max()), launcher.config)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [*FP8_KINDS, "gluon", "gluon stream-k", "gluon mid-m"])
@pytest.mark.parametrize("size", [(48, 4096, 14336), (3000, 6144, 4096), (256, 256, 131072)])
def test_fp8_edge_values_within_twice_promoted_cublas(kind, size):
    """On the GPU, where wgmma's fp8 accumulator is narrower than fp32: on the edge inputs each Triton fp8 kernel's
    worst error against fp64 is at most twice promoted cuBLAS's (torch._scaled_mm, use_fast_accum=False) on the same
    inputs; a kernel that kept the products in wgmma's accumulator across K misses that by orders of magnitude."""
    from suite.triton.gemm_gluon import GluonGemm
    from suite.triton.gemm_mid_gluon import GluonMidGemm

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the fp8 kernels are built for sm_90")
    launchers = {
        **FP8_KINDS,
        "gluon": lambda i, o, s: GluonGemm(i, o, s),
        "gluon stream-k": lambda i, o, s: GluonGemm(i, o, s, stream_k=True),
        "gluon mid-m": lambda i, o, s: GluonMidGemm(i, o, s),
    }
    inputs = fp8_edge_inputs(*size, seed=52, device=DEVICE)
    ceiling, _ = fp8_error(cublas_promoted(inputs), inputs)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    launcher = launchers[kind](inputs, out, 3)
    launcher()
    torch.cuda.synchronize()
    error, _ = fp8_error(out, inputs)
    assert float(error.max()) <= 2 * float(ceiling.max()), (kind, size, float(error.max()), float(ceiling.max()))


def test_every_triton_fp8_module_states_its_accumulation():
    """Every registered Triton GEMM with an fp8 build says how it accumulates (a plain attribute the driver can
    show), and it is promoted: the same as the cuBLAS ceiling it is compared with."""
    from suite.registry import variants

    fp8 = [v for v in variants("gemm", "triton") if "fp8e4m3" in (v.dtypes or ())]
    assert fp8
    for v in fp8:
        assert getattr(v.kernel, "fp8_accumulation", None) == "promoted", v.label


def test_registered_for_the_llm_and_long_k_sets():
    from suite.registry import variants

    ours = {
        v.name: v
        for v in variants("gemm", "triton")
        if v.name in ("split-k desc", "stream-k desc", "decode swap-ab desc")
    }
    assert set(ours) == {"split-k desc", "stream-k desc", "decode swap-ab desc"}
    for v in ours.values():
        assert v.shape_sets == ("llm", "long-k", "sweep") and v.dtypes == DTYPES
        assert all(v.stages_for(d) for d in DTYPES) and v.kernel.sanitize_sizes and v.kernel.faults


# ---------------------------------------------------------------------------------------------------------------
# Compiled for sm_90 without a GPU
# ---------------------------------------------------------------------------------------------------------------

OUT_DTYPE = {"fp16": "tl.float16", "bf16": "tl.bfloat16", "fp8e4m3": "tl.bfloat16"}
# On the GPU machine the kernels compile for real (their rows report registers, spills and SASS); these check what
# the CPU machines' Triton makes of them, as tests/test_triton_interp.py does for the other Triton kernels
CPU_ONLY = pytest.mark.skipif(HAS_GPU, reason="compiled without a GPU on the CPU machines; on a GPU the rows compile")


def _descs(dtype, rows_a, rows_b, bk):
    from sm90_compile import desc

    fp8 = dtype == "fp8e4m3"
    return {"a_desc": desc(dtype, [rows_a, bk]), "b_desc": desc(dtype, [rows_b, bk] if fp8 else [bk, rows_b])}


def _b_rows(dtype: str, block_n: int) -> int:
    """B's box along N in gemm_parts.mac_loop: fp8 loads B in two halves of the tile's N (TwoPassGemm._mac_box)."""
    return block_n // 2 if dtype == "fp8e4m3" else block_n


def _main_pass_signature(dtype, rows_a, rows_b, bk, *ints):
    """The signature every main pass shares (split-K, stream-K, decode: one launch convention): A's and B's
    descriptors, C, the fp32 workspace, M, N, K, then its own integer arguments ``ints``."""
    from sm90_compile import OUT_TYPES

    tail = {name: "i32" for name in ("M", "N", "K", *ints)}
    return {**_descs(dtype, rows_a, rows_b, bk), "c": f"*{OUT_TYPES[dtype]}", "workspace": "*fp32", **tail}


def _spec(fn, dtype, sig, meta, stages, warps, aligned):
    from sm90_compile import scales

    scale_sig, scale_values = scales(dtype)
    options = {"num_warps": warps} | ({"num_stages": stages} if stages else {})
    return {
        "fn": fn,
        "signature": {**sig, **scale_sig, **{k: "constexpr" for k in meta}},
        "constexprs": {**meta, **scale_values},
        "aligned": aligned,
        "options": options,
    }


def _assert_pipelined(got, dtype, stages, stage_bytes, what):
    """The module's SASS and the generic rules (sm90_compile.assert_fits_sm90), its ring in shared memory, fp8 as
    QGMMA, and no atomics: the fix-up is a second pass in stream order."""
    from sm90_compile import assert_fits_sm90

    assert_fits_sm90(got, gemm_splitk.KERNEL.sass_minimums(), what)  # one declaration for the three main passes
    assert (got["classes"]["wgmma_fp8"] > 0) == (dtype == "fp8e4m3"), (what, got["classes"])
    assert stages * stage_bytes <= got["shared"], (what, got["shared"])
    assert got["ptx"]["atom.global"] == 0 and got["ptx"]["red.global"] == 0, (what, "atomics", got["ptx"])


@CPU_ONLY
def test_split_k_on_sm90():
    """The three tiles (64, 128 and 256 rows; 256 at 16-bit types) at every dtype and the deepest ring, plus the
    shallowest, the partial and the direct epilogue: wgmma on TMA loads, no spills, no atomics, within 227 KiB;
    the reduction pass at MAX_SPLITS unrolled without spills."""
    from sm90_compile import compile_sm90

    fn = "suite.triton.gemm_splitk:splitk_partial_kernel"
    cases = [(d, m, max(gemm_splitk.STAGES), True) for d, m in (("fp16", 16), ("fp16", 200), ("bf16", 1000))]
    cases += [("fp8e4m3", m, max(gemm_splitk.STAGES), True) for m in (16, 1000)]  # fp16 at M = 200: the tall tile
    cases += [("fp16", 1000, min(gemm_splitk.STAGES), False)]
    cases += [(d, 256, max(gemm_splitk.STAGES), False) for d in ("fp16", "fp8e4m3")]  # 128 x 128 at 256 x 8192
    specs = []
    for dtype, m, stages, split in cases:
        (bm, bn, bk, warps), _ = gemm_splitk.split_k_plan(dtype, m, 8192, 8192, H200_SMS)
        sig = _main_pass_signature(dtype, bm, _b_rows(dtype, bn), bk, "splits", "stride_cm")
        meta = {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "BLOCK_K": bk,
            "GROUP_M": 8,
            "SPLIT": split,
            "B_K_MAJOR": dtype == "fp8e4m3",
            "OUT_DTYPE": OUT_DTYPE[dtype],
            "SCALED": dtype == "fp8e4m3",
        }
        specs.append(_spec(fn, dtype, sig, meta, stages, warps, ["c", "workspace", "stride_cm"]))
    reduce_meta = {
        "SPLITS": gemm_splitk.MAX_SPLITS,
        "BLOCK": gemm_splitk.REDUCE_BLOCK,
        "OUT_DTYPE": "tl.bfloat16",
        "SCALED": True,
    }
    specs.append(
        _spec(
            "suite.triton.gemm_splitk:splitk_reduce_kernel",
            "fp8e4m3",
            {"workspace": "*fp32", "c": "*bf16", "MN": "i32"},
            reduce_meta,
            None,
            4,
            ["workspace", "c"],
        )
    )
    *partials, reduction = compile_sm90(specs)
    for (dtype, m, stages, _), got in zip(cases, partials):
        (bm, bn, bk, _), _ = gemm_splitk.split_k_plan(dtype, m, 8192, 8192, H200_SMS)
        _assert_pipelined(got, dtype, stages, gemm_splitk.stage_bytes(dtype, (bm, bn, bk)), (dtype, m, stages))
    assert reduction["classes"]["local_memory"] == 0, reduction["classes"]


@CPU_ONLY
def test_stream_k_on_sm90():
    from sm90_compile import compile_sm90

    fn = "suite.triton.gemm_streamk:streamk_kernel"
    # (dtype, M, stages, some tile shared): with no tile shared the launcher passes no workspace (None)
    cases = [(d, m, max(gemm_streamk.STAGES), True) for d in ("fp16", "fp8e4m3") for m in (16, 1000)]
    cases.append(("bf16", 200, max(gemm_streamk.STAGES), True))  # the tall tile
    cases.append(("fp16", 1000, min(gemm_streamk.STAGES), False))
    specs = []
    for dtype, m, stages, shared in cases:
        bm, bn, bk, warps = gemm_splitk.tile_for(dtype, m)
        sig = _main_pass_signature(
            dtype, bm, _b_rows(dtype, bn), bk, "stride_cm", "num_programs", "dp_tiles", "sk_programs", "sk_iters"
        )
        meta = {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "BLOCK_K": bk,
            "GROUP_M": 8,
            "B_K_MAJOR": dtype == "fp8e4m3",
            "OUT_DTYPE": OUT_DTYPE[dtype],
            "SCALED": dtype == "fp8e4m3",
            "SHARED": shared,
        }
        if not shared:
            meta["workspace"] = None
        aligned = ["c", "workspace", "stride_cm"] if shared else ["c", "stride_cm"]
        specs.append(_spec(fn, dtype, sig, meta, stages, warps, aligned))
    fixup_sig = {
        "workspace": "*fp32",
        "c": "*bf16",
        "table": "*i32",
        "M": "i32",
        "N": "i32",
        "stride_cm": "i32",
        "dp_tiles": "i32",
    }
    fixups = [(128, 256), (256, 128)]  # the fix-up of 128 x 256 tiles and of tall ones (16-byte loads in both)
    for bm, bn in fixups:
        fixup_meta = {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "GROUP_M": 8,
            "ROWS": gemm_streamk.fixup_rows(bn),
            "UNROLL": gemm_streamk.FIXUP_UNROLL,
            "OUT_DTYPE": "tl.bfloat16",
            "SCALED": True,
        }
        specs.append(
            _spec(
                "suite.triton.gemm_streamk:streamk_fixup_kernel",
                "fp8e4m3",
                fixup_sig,
                fixup_meta,
                None,
                4,
                ["workspace", "c", "table", "stride_cm"],
            )
        )
    built = compile_sm90(specs)
    mains, fixup_builds = built[: len(cases)], built[len(cases) :]
    for (dtype, m, stages, _), got in zip(cases, mains):
        bm, bn, bk, _ = gemm_splitk.tile_for(dtype, m)
        _assert_pipelined(got, dtype, stages, gemm_splitk.stage_bytes(dtype, (bm, bn, bk)), (dtype, m, stages))
    for tile, got in zip(fixups, fixup_builds):
        assert got["classes"]["local_memory"] == 0, (tile, got["classes"])


# decode_kernel names the launch convention's A, B, M and N by their roles: tokens and weight
DECODE_NAMES = {"a_desc": "tokens_desc", "b_desc": "weight_desc", "M": "T", "N": "W"}


@CPU_ONLY
def test_decode_on_sm90():
    """The widest and narrowest tiles of the rule, every dtype, the deepest ring (5 stages of up to 40 KiB): wgmma
    with the weight on its M side (HGMMA; QGMMA for fp8) on TMA loads, no spills, within 227 KiB."""
    from sm90_compile import compile_sm90

    fn = "suite.triton.gemm_decode:decode_kernel"
    cases = [("fp16", 64, 16), ("fp16", 128, 64), ("bf16", 128, 32), ("fp8e4m3", 64, 16), ("fp8e4m3", 128, 64)]
    stages = max(gemm_decode.STAGES)
    specs = []
    for dtype, block_w, block_t in cases:
        bk = gemm_decode.block_k_for(dtype, block_w, block_t)
        sig = _main_pass_signature(dtype, block_t, 64 if dtype == "fp8e4m3" else block_w, bk, "splits", "stride_cm")
        sig = {DECODE_NAMES.get(name, name): ty for name, ty in sig.items()}  # the convention in decode's terms
        meta = {
            "BLOCK_W": block_w,
            "BLOCK_T": block_t,
            "BLOCK_K": bk,
            "SPLIT": block_t == 16,
            "B_K_MAJOR": dtype == "fp8e4m3",
            "OUT_DTYPE": OUT_DTYPE[dtype],
            "SCALED": dtype == "fp8e4m3",
        }
        specs.append(_spec(fn, dtype, sig, meta, stages, gemm_decode.NUM_WARPS, ["c", "workspace", "stride_cm"]))
    for (dtype, block_w, block_t), got in zip(cases, compile_sm90(specs)):
        p = gemm_decode.Plan(block_w, block_t, gemm_decode.block_k_for(dtype, block_w, block_t), 1, 1, 1)
        _assert_pipelined(got, dtype, stages, p.stage_bytes(dtype), (dtype, block_w, block_t))
