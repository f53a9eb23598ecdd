"""The auto GEMM rows: suite.gemm_rule's choices, the auto modules delegating to registered kernels, suite.gemm."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import torch

from suite import gemm_rule
from suite.problems import GEMM
from suite.registry import variants

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GLUON_MID = "mid-m swap-ab gluon ws"


@pytest.mark.parametrize(
    "backend, shape, dtype, kernel",
    [
        ("ptx", (1, 6144, 4096), "fp16", "decode swap-ab tma+wgmma"),
        ("ptx", (8, 4096, 4096), "fp8e4m3", "decode swap-ab tma+wgmma"),
        ("ptx", (32, 14336, 4096), "fp8e4m3", "decode swap-ab tma+wgmma"),  # fp8: up to PTX_DECODE_M_FP8
        ("ptx", (33, 14336, 4096), "fp8e4m3", "64x128 split-k tma+wgmma"),
        ("ptx", (24, 14336, 4096), "fp16", "64x128 split-k tma+wgmma"),
        ("ptx", (100, 4096, 4096), "bf16", "64x128 split-k tma+wgmma"),
        ("ptx", (281, 4096, 3072), "fp16", "128x128 split-k tma+wgmma"),  # 96 128x128 tiles: one wave
        ("ptx", (512, 512, 65536), "fp16", "128x128 split-k tma+wgmma"),
        # 144 128x128 tiles would make split-K's second wave of 12: the split tail, on the tile with fewer rounds
        ("ptx", (341, 6144, 4096), "fp16", "128x192 split-tail tma-store tma+wgmma"),
        ("ptx", (341, 6144, 11008), "fp16", "mid-m swap-ab tma+wgmma"),  # 4 token tiles of 88: one wave of 128
        ("ptx", (2048, 8192, 8192), "fp16", "128x256 split-tail tma-store tma+wgmma"),
        # 200 128x256 tiles: a wave, then 68 in 5 shares each over 3 rounds (1.60 tiles' time), where 270 128x192
        # tiles take 2 waves and 6 split (2.14 of theirs)
        ("ptx", (529, 10240, 4096), "fp16", "128x256 split-tail tma-store tma+wgmma"),
        ("ptx", (692, 15360, 4096), "fp16", "128x192 split-tail tma-store tma+wgmma"),  # 3 waves, 84 in 3 shares
        ("ptx", (529, 10240, 11008), "fp16", "mid-m swap-ab tma+wgmma"),  # 3 token tiles of 184
        ("ptx", (2049, 22016, 24576), "bf16", "128x256 split-tail tma-store tma+wgmma"),  # 11 waves + 10 split
        ("ptx", (71, 37888, 24576), "fp16", "128x256 split-tail tma-store tma+wgmma"),  # one tile row
        ("ptx", (64, 22016, 5120), "fp16", "128x192 split-tail tma-store tma+wgmma"),  # 86 128x256 tiles, 115 here
        ("ptx", (129, 24576, 11008), "fp16", "mid-m swap-ab tma+wgmma"),  # one token tile of 136 rows
        ("ptx", (176, 8192, 14336), "fp16", "mid-m swap-ab tma+wgmma"),
        ("ptx", (176, 8192, 4096), "fp16", "128x256 split-tail tma-store tma+wgmma"),  # K too short for mid-M
        ("ptx", (129, 14336, 4096), "fp8e4m3", "128x256 split-tail tma-store tma+wgmma"),  # K too short for mid-M
        ("ptx", (512, 18944, 5120), "fp8e4m3", "128x256 split-tail tma-store tma+wgmma"),
        ("ptx", (201, 18944, 16384), "fp16", "256x128 stream-k tma+wgmma"),  # mid-M modelled slower
        ("ptx", (193, 12288, 3072), "fp16", "128x192 split-tail tma-store tma+wgmma"),  # K too short for mid-M
        ("ptx", (193, 65536, 3072), "fp16", "256x128 stream-k tma+wgmma"),  # so here, against a large weight too
        ("ptx", (230, 18944, 5120), "fp16", "256x128 stream-k tma+wgmma"),  # 128 < M < 256: one tile row
        ("ptx", (129, 73728, 11008), "fp8e4m3", "mid-m swap-ab tma+wgmma"),  # two 72-token tiles, not 256 rows
        ("ptx", (230, 73728, 11008), "fp8e4m3", "256x128 stream-k tma+wgmma"),  # mid-M modelled too slow at fp8
        ("ptx", (230, 3584, 36864), "fp16", "128x256 split-tail tma-store tma+wgmma"),  # 28 256x128 tiles: at once
        ("triton", (1, 6144, 4096), "fp16", "decode swap-ab desc"),
        ("triton", (16, 14336, 4096), "fp8e4m3", "decode swap-ab desc"),  # one token tile, a wide weight
        ("triton", (64, 28672, 8192), "fp8e4m3", "decode swap-ab desc"),  # fp8: up to TRITON_TINY_M_FP8, any weight
        ("triton", (65, 28672, 8192), "fp8e4m3", "split-k desc"),
        ("triton", (56, 28672, 8192), "bf16", "split-k desc"),
        ("triton", (64, 57344, 8192), "fp16", "split-tail desc"),  # 224 64x256 tiles
        ("triton", (100, 16384, 8192), "fp16", "split-k desc"),  # 64 128x256 tiles
        ("triton", (300, 8192, 4096), "bf16", "split-k desc"),  # K too short for mid-M
        ("triton", (300, 8192, 8192), "bf16", "mid-m swap-ab desc"),  # 96 128x256 tiles < 2 waves
        ("triton", (300, 8192, 8192), "fp8e4m3", "split-k desc"),  # fp8's mid-M band ends at one token tile
        # 344 tiles: 2 waves, then 80 in 3 shares each over 2 rounds (past half the SMs: several rounds)
        ("triton", (425, 22016, 11008), "bf16", "split-tail desc"),
        ("triton", (1024, 8192, 8192), "fp16", "mid-m swap-ab desc"),  # 256 tiles, 256-row token tiles
        ("triton", (1024, 4096, 8192), "fp16", "mid-m swap-ab desc"),
        ("triton", (1025, 4096, 8192), "fp16", "split-tail desc"),  # past TRITON_MID_WIDE_M, 144 tiles
        ("triton", (256, 33536, 8192), "fp16", "mid-m swap-ab desc"),  # 262 128x256 tiles < 2 waves
        ("triton", (256, 33792, 8192), "fp16", "128x256x64 desc persistent host"),  # 264: two whole waves
        ("triton", (129, 73728, 11008), "fp16", "mid-m swap-ab desc"),  # one token tile of 144 rows
        ("triton", (230, 73728, 11008), "fp16", "stream-k desc"),  # 576 256x128 tiles
        ("triton", (230, 7168, 36864), "bf16", "split-k desc"),  # 56 256x128 tiles, one split
        ("triton", (143, 7168, 36864), "fp8e4m3", "mid-m swap-ab desc"),  # the Triton mid-M kernel takes fp8
        ("triton", (193, 12288, 3072), "fp16", "split-k desc"),  # K too short for mid-M
        ("triton", (230, 7168, 36864), "fp8e4m3", "split-k desc"),
        ("triton", (623, 15360, 24576), "fp16", "split-tail desc"),  # 2 waves, then 36 tiles in 3 shares
        ("triton", (707, 27648, 29568), "fp16", "128x256x64 desc persistent host"),  # a tail of 120: not split
        # 2 waves, then 80 tiles in 3 shares over 2 rounds; after 15 waves, 92 tiles whose rounds would save less than
        # the stream-K kernel's slower tiles cost (TRITON_TAIL_ROUNDS_MOST_WAVES)
        ("triton", (950, 11008, 3072), "fp16", "split-tail desc"),
        ("triton", (4734, 14336, 8192), "fp16", "128x256x64 desc persistent host"),
        ("triton", (4096, 4096, 4096), "fp16", "128x256x64 desc persistent host"),
        ("triton", (4096, 4096, 4096), "fp8e4m3", "128x256x64 gluon ws persistent"),
        ("triton", (623, 15360, 24576), "fp8e4m3", "128x256x64 gluon ws stream-k"),  # 300 tiles: 36 in the last wave
        ("triton", (536, 11008, 16384), "fp8e4m3", "128x256x64 gluon ws persistent"),  # 215 tiles: 83 in the last
    ],
)
def test_rule_choices(backend, shape, dtype, kernel):
    """The rule's first choice on sm_90a, other than the Gluon mid-M kernel: where that comes first (its band,
    test_the_gluon_mid_m_kernel_runs_in_its_band), the listed kernel is its first fallback."""
    got = gemm_rule.choices(backend, *shape, dtype, sms=132, hopper=True)
    choice = got[1] if got[0].kernel == GLUON_MID else got[0]
    assert choice.kernel == kernel
    assert choice.why and "\n" not in choice.why  # one line: the row's note
    assert f"M={shape[0]}" in choice.why or "tiles" in choice.why  # it names what decided
    registered = {v.name for v in variants("gemm") if v.backend == backend}
    assert all(c.kernel in registered for c in gemm_rule.choices(backend, *shape, dtype))


def test_the_triton_mid_m_kernel_keeps_the_tall_choices_behind_it():
    """128 < M <= TRITON_MID_M at any dtype: the swapped mid-M kernel first, the tall band's choices behind it in their
    own order, as fallbacks (what runs where the mid-M kernel refused the shape); just above that M (the tall band's
    256-row tiles up to TALL_M) and below MID_LEAST_K, no mid-M kernel. On sm_90a below the Gluon mid-M band, without
    it in the band (there, the Gluon kernel comes first; at fp8 its band holds all of these)."""
    mid, most = "mid-m swap-ab desc", gemm_rule.TRITON_MID_M
    least = gemm_rule.TRITON_GLUON_MID_M[0]
    for shape in ((129, 73728, 11008), (202, 7168, 36864), (most, 65536, gemm_rule.MID_LEAST_K)):
        for dtype in ("bf16", "fp8e4m3"):
            hopper = dtype != "fp8e4m3" and shape[0] < least
            with_mid = gemm_rule.choices("triton", *shape, dtype, sms=132, hopper=hopper)
            assert with_mid[0].kernel == mid, shape
            assert f"token tile of {-(-shape[0] // 16) * 16} rows" in with_mid[0].why
            assert all(c.why.startswith("fallback: ") for c in with_mid[1:]), with_mid
    assert gemm_rule.choose("triton", most + 1, 65536, 8192, "fp16", sms=132, hopper=False).kernel != mid
    assert gemm_rule.choose("triton", 128, 65536, 8192, "fp16", sms=132).kernel != mid
    assert gemm_rule.choose("triton", 150, 65536, 8192, "fp16", sms=132).kernel == mid
    short = gemm_rule.MID_LEAST_K - 64
    assert mid not in {c.kernel for c in gemm_rule.choices("triton", 150, 65536, short, "fp16", sms=132)}


@pytest.mark.parametrize("shape", [(341, 6144, 11008), (360, 8192, 11008), (700, 8192, 8192), (1000, 4096, 16384)])
def test_the_triton_wide_mid_m_note_names_the_tile_the_kernel_plans(shape):
    """From TALL_M at 16 bits (without sm_90a, as the Gluon mid-M band comes first there): the note's token tile and
    count are those the kernel plans at the rule's depth."""
    from suite.triton import gemm_mid

    choice = gemm_rule.choose("triton", *shape, "bf16", sms=132, hopper=False)
    assert choice.kernel == "mid-m swap-ab desc", choice
    p = gemm_mid.plan("bf16", *shape, 132, choice.stages)
    assert f"swapped, {p.block_t}-token tiles (x {p.tiles_t})" in choice.why, (choice, p)


def test_the_gluon_mid_m_kernel_runs_in_its_band():
    """On sm_90a, at 16 bits M within TRITON_GLUON_MID_M and K <= TRITON_GLUON_MID_MOST_K, at fp8 M within
    TRITON_GLUON_MID_FP8_M at any K, and the plan's tiles at least FILL x SMs: the Gluon mid-M kernel first, at its
    plan's depth, the note naming the plan's tile, the rule without it behind as fallbacks; just outside the band,
    with fewer tiles (a narrow weight) or without sm_90a, the rule without it."""
    from suite import waves

    # the plan's tiles on 132 SMs, 16 bits: N = 512 9-33 (M = 160-700), N = 4096 66 at M = 160 and 132 from M = 341,
    # N = 24576 128 or more; fp8 (128-row weight tiles where M is small): N = 512 8-36 (M = 65-560), N = 4096 64 at
    # M = 65, 96 at M = 160 and 128 from M = 341, N = 24576 128 or more
    few = {
        False: {(160, 512), (341, 512), (700, 512), (160, 4096)},
        True: {(65, 512), (160, 512), (341, 512), (560, 512), (65, 4096), (160, 4096)},
    }
    seen = set()
    for dtype in ("fp16", "bf16", "fp8e4m3"):
        fp8 = dtype == "fp8e4m3"
        least, most = gemm_rule.TRITON_GLUON_MID_FP8_M if fp8 else gemm_rule.TRITON_GLUON_MID_M
        k_most = gemm_rule.TRITON_GLUON_MID_MOST_K
        for m, k, n in itertools.product(
            (least - 1, least, 160, 341, most, most + 1), (3072, k_most, k_most + 64), (512, 4096, 24576)
        ):
            got = gemm_rule.choices("triton", m, n, k, dtype, sms=132, hopper=True)
            rest = gemm_rule._triton_mid(m, n, k, dtype, 132, gemm_rule._triton_tiles(m, n, k, dtype, 132, True))
            plan = waves.gluon_mid_plan(m, n, 132, fp8=fp8)
            if least <= m <= most:
                assert ((m, n) in few[fp8]) == (plan.tile.tiles(m, n) < gemm_rule.FILL * 132), (m, n, dtype)
            inside = least <= m <= most and (fp8 or k <= k_most) and (m, n) not in few[fp8]
            seen.add((fp8, inside, (m, n) in few[fp8]))
            assert gemm_rule.choices("triton", m, n, k, dtype, sms=132, hopper=False)[0].kernel != GLUON_MID
            if not inside:
                assert got == rest, (m, n, k, dtype)
                continue
            assert got[0].kernel == GLUON_MID and got[0].stages == plan.stages, (m, n, k, dtype)
            t = plan.tile
            assert f"{t.weight_rows} weight columns" in got[0].why and f"{t.tokens} tokens" in got[0].why
            assert f"{t.tiles(m, n)} tiles" in got[0].why and ("fp8" in got[0].why) == fp8
            assert [c.kernel for c in got[1:]] == [c.kernel for c in rest]
            assert all(c.why.startswith("fallback: ") for c in got[1:])
            # the kernel plans the same tile again at the rule's depth
            assert waves.gluon_mid_plan(m, n, 132, plan.stages, fp8) == plan
    assert seen == {(fp8, *case) for fp8 in (False, True) for case in ((True, False), (False, False), (False, True))}


def test_triton_auto_runs_the_gluon_mid_m_kernel_at_the_rules_depth(monkeypatch):
    """On an sm_90a GPU of 132 SMs (faked: the pick reads only the SM count and the capability), triton:auto's pick in
    the band is the registered Gluon mid-M module at the plan's depth; without sm_90a, another kernel."""
    from suite import gemm_auto, waves
    from suite.triton import gemm_auto as triton_auto
    from suite.triton import gemm_mid_gluon

    for size in ((160, 24576, 8192), (341, 6144, 11008), (700, 8192, 20480)):
        monkeypatch.setattr(gemm_auto, "_device_facts", lambda: (132, True))
        choice, kernel, stages = triton_auto.KERNEL.pick(size, "bf16")
        assert kernel is gemm_mid_gluon.KERNEL and choice.kernel == GLUON_MID, (size, choice)
        assert stages == waves.gluon_mid_plan(size[0], size[1], 132).stages
        monkeypatch.setattr(gemm_auto, "_device_facts", lambda: (132, False))
        assert triton_auto.KERNEL.pick(size, "bf16")[1] is not gemm_mid_gluon.KERNEL
    # fp8: 2 x 64 weight columns by 64 + 16 tokens at 6 stages (tests/test_triton_mid_gluon.py)
    monkeypatch.setattr(gemm_auto, "_device_facts", lambda: (132, True))
    choice, kernel, stages = triton_auto.KERNEL.pick((156, 8192, 11008), "fp8e4m3")
    assert kernel is gemm_mid_gluon.KERNEL and choice.kernel == GLUON_MID and stages == 6, choice


def test_the_ptx_mid_m_kernel_runs_where_its_model_beats_the_tile_rungs():
    """PTX at 16 bits, 128 < M <= PTX_MID_M, K >= MID_LEAST_K: the mid-M kernel first exactly where its modelled walk
    is no slower than the tile rungs' (ptx_mid_ratio <= 1), its note naming its tile, with the rule's other choices
    behind it as fallbacks in their own order; elsewhere no mid-M kernel at 16 bits (fp8: the tests below)."""
    from suite import waves

    mid = "mid-m swap-ab tma+wgmma"
    seen = set()
    for m in (128, 129, 200, 256, 341, 600, 1024, 1025):
        for n in (3584, 6144, 18944, 65536):
            for k in (gemm_rule.MID_LEAST_K - 64, gemm_rule.MID_LEAST_K, 16384):
                chosen = gemm_rule.choices("ptx", m, n, k, "bf16", sms=132)
                rest = gemm_rule._ptx_tiles(m, n, k, "bf16", 132)
                takes = 128 < m <= gemm_rule.PTX_MID_M and k >= gemm_rule.MID_LEAST_K
                expect = takes and gemm_rule.ptx_mid_ratio(m, n, k, 132) <= 1
                seen.add(expect)
                assert (chosen[0].kernel == mid) == expect, (m, n, k)
                if not expect:
                    assert chosen == rest, (m, n, k)
                    continue
                block_t, consumers, w_tiles = waves.mid_tile(m, n, k, 132)
                assert w_tiles == 1, (m, n, k)  # the wide tile is weighed past the band
                assert f"{block_t}-token tiles (x {-(-m // block_t)}) on {64 * consumers} weight" in chosen[0].why
                assert chosen[0].stages == gemm_rule.PTX_MID_STAGES
                assert [c.kernel for c in chosen[1:]] == [c.kernel for c in rest]
                assert all(c.why.startswith("fallback: ") for c in chosen[1:]), chosen
    assert seen == {True, False}  # both sides of the model's comparison are met
    # the auto row's depth: every mid-M tile's ring fits it, so the plan there is the model's first choice; the wide
    # tile (4 stages) is weighed only past the band
    from suite.ptx import gemm_decode

    tiles = [(t, c) for c in waves.MID_CONSUMERS for t in range(64, 257, 8) if waves.mid_tile_ok(t, c)]
    assert len(tiles) == 28 and min(waves.mid_deepest(*tile) for tile in tiles) == gemm_rule.PTX_MID_STAGES
    assert gemm_rule.PTX_MID_STAGES in gemm_decode.MID.stages
    assert waves.MID_WIDE_LEAST_M >= gemm_rule.PTX_MID_M


@pytest.mark.parametrize(
    "shape, block_t, stages",
    [
        ((176, 24576, 28672), 88, 6),
        ((195, 6144, 11008), 104, 5),
        ((355, 7168, 36864), 120, 6),
        ((258, 6144, 11008), 136, 6),
        ((291, 6144, 11008), 152, 6),
    ],
)
def test_the_ptx_mid_m_kernel_runs_at_fp8_below_its_fitted_ratio(shape, block_t, stages):
    """PTX at fp8, in the mid-M band: the mid-M kernel's promoted tiles (two consumer warpgroups) first where its
    modelled walk is at most PTX_MID_FP8_RATIO of the split tail's, 6 stages up to PTX_MID_FP8_DEEP_TOKENS tokens and
    past the pairs' MID_FP8_PAIRS_MOST_TOKENS (one partial), 5 between (depths the fp8 build makes); the fp8 model
    sees the fp8 tile, not the 16-bit one."""
    from suite import waves
    from suite.ptx import gemm_decode

    chosen = gemm_rule.choices("ptx", *shape, "fp8e4m3", sms=132)
    assert waves.mid_tile(*shape, 132, dtype="fp8e4m3") == (block_t, 2, 1) != waves.mid_tile(*shape, 132)
    assert gemm_rule.ptx_mid_ratio(*shape, 132, "fp8e4m3") <= gemm_rule.PTX_MID_FP8_RATIO
    assert (chosen[0].kernel, chosen[0].stages) == ("mid-m swap-ab tma+wgmma", stages)
    assert f"{block_t}-token tiles" in chosen[0].why and "on 128 weight columns" in chosen[0].why
    assert [c.kernel for c in chosen[1:]] == [c.kernel for c in gemm_rule._ptx_tiles(*shape, "fp8e4m3", 132)]
    assert all(c.why.startswith("fallback: ") for c in chosen[1:])
    assert "fp8e4m3" in gemm_decode.MID.dtypes and stages in gemm_decode.MID.stages


@pytest.mark.parametrize("shape", [(740, 28672, 14336), (622, 7168, 13824), (220, 6144, 16384), (193, 12288, 3072)])
def test_the_ptx_mid_m_kernel_stays_out_at_fp8_above_its_ratio_or_below_its_k(shape):
    """Where the fp8 model's ratio passes PTX_MID_FP8_RATIO, or K is under MID_LEAST_K, fp8 runs the tile rungs."""
    assert gemm_rule.choices("ptx", *shape, "fp8e4m3", sms=132) == gemm_rule._ptx_tiles(*shape, "fp8e4m3", 132)
    ratio = gemm_rule.ptx_mid_ratio(*shape, 132, "fp8e4m3")
    assert shape[2] < gemm_rule.MID_LEAST_K or ratio > gemm_rule.PTX_MID_FP8_RATIO


@pytest.mark.parametrize("m, stages", [(129, 5), (144, 5), (145, 4), (176, 4), (208, 4)])
def test_triton_mid_m_rings_deepen_for_small_token_tiles(m, stages):
    """Triton's mid-M kernel takes 5 stages where its token tile holds up to TRITON_MID_DEEP_TOKENS rows, 4 above,
    and every such depth is one the kernel builds (in the Gluon mid-M band, without sm_90a: there, it comes first)."""
    from suite.triton import gemm_mid

    hopper = m < gemm_rule.TRITON_GLUON_MID_M[0]
    choice = gemm_rule.choose("triton", m, 14336, 8192, "fp16", sms=132, hopper=hopper)
    assert (choice.kernel, choice.stages) == ("mid-m swap-ab desc", stages)
    assert stages in gemm_mid.STAGES


@pytest.mark.parametrize(
    "tiles, k_tiles", [(1462, 384), (72, 172), (300, 384), (264, 100), (200, 172), (5, 3), (344, 48), (3552, 172)]
)
def test_the_rules_rounds_are_the_split_tails_walk(tiles, k_tiles):
    """tail_rounds counts the walk both kernels plan: their whole waves, then one share of a tile where they split
    the tail (the same share count, from the same minimum of K tiles per share), a whole tile where they do not; with
    rounds (the launchers'), the rounds of shares they deal."""
    from suite.ptx import gemm_tma
    from suite.triton import gemm_splitk, gemm_streamk

    assert gemm_rule.TAIL_MIN_K_TILES == gemm_tma.MIN_K_TILES_PER_SPLIT == gemm_splitk.MIN_K_TILES_PER_SPLIT
    _, splits = gemm_tma.split_tail_plan(tiles, k_tiles, 132)
    schedule = gemm_streamk.split_tail_schedule(tiles, k_tiles, 132)
    assert schedule.sk_programs == schedule.sk_tiles * splits
    whole, tail = divmod(tiles, 132)
    assert gemm_rule.tail_rounds(tiles, k_tiles, 132) == pytest.approx(whole + (1 / splits if tail else 0))
    assert (splits > 1) == (0 < tail <= 66 and k_tiles >= 8)  # room for two shares of every tail tile
    # the launchers' walk (rounds): its shares dealt round robin, ceil(tail x shares / 132) rounds of a share each,
    # the same count in both backends
    _, shares = gemm_tma.split_tail_plan(tiles, k_tiles, 132, rounds=True)
    schedule = gemm_streamk.split_tail_schedule(tiles, k_tiles, 132, rounds=True)
    assert schedule.sk_programs == schedule.sk_tiles * shares
    rounds = -(-tail * shares // 132) / shares if tail else 0
    assert gemm_rule.tail_rounds(tiles, k_tiles, 132, rounds=True) == pytest.approx(whole + rounds)
    assert shares == splits or (tail > 66 and rounds <= 0.8)  # a thick tail split only where it saves a fifth


def test_the_split_tail_is_chosen_only_where_it_fills_the_sms():
    """Where the rule picks a split tail, its tiles fill FILL x the SMs, or its tail is split in K, or split-K's
    128x128 tiles would make a second, partial wave (a persistent walk over few tiles is otherwise what the
    few-tiles regime avoids); and in 128 < M < 256 its tiles all run at once, as the note says."""
    ms = (17, 64, 100, 128, 129, 200, 255, 256, 341, 529, 1000, 2049)
    ns = (768, 3072, 4096, 6144, 11008, 14336, 22016, 28672, 57344)
    for dtype, m, n, k in itertools.product(("fp16", "fp8e4m3"), ms, ns, (3072, 11008, 36864)):
        choice = gemm_rule.choose("ptx", m, n, k, dtype, sms=132)
        if "split-tail" not in choice.kernel:
            continue
        width = 192 if choice.kernel.startswith("128x192") else 256
        tiles = -(-m // 128) * -(-n // width)
        k_tiles = gemm_rule.k_tiles(k, dtype)
        splits = _tail_shares(tiles, k_tiles)  # (in one round: a thicker tail's rounds do not fill the SMs better)
        split_k_waves = -(-m // 128) * -(-n // 128) > 132
        assert tiles >= gemm_rule.FILL * 132 or splits > 1 or split_k_waves, (dtype, m, n, k, choice.line())
        if "every tile at once" in choice.why:
            assert tiles <= 132, (dtype, m, n, k, choice.line())


def _tail_shares(tiles: int, k_tiles: int) -> int:
    from suite.waves import tail_split_count

    return tail_split_count(tiles, k_tiles, 132, gemm_rule.TAIL_MIN_K_TILES)


def test_triton_fp8_takes_the_gluon_kernels_from_a_wave_of_tiles():
    """fp8 on sm_90a, M >= TRITON_GLUON_FP8_M with a wave of 128x256 tiles or more: the Gluon stream-K kernel first
    where the last wave of tiles is partial and at most TRITON_GLUON_SK_LAST_WAVE full (the persistent one, then the
    host-descriptor kernel behind it), else the persistent one; below that M or with fewer tiles than SMs, neither;
    16-bit types take no Gluon kernel but the mid-M one up to TRITON_SPLIT_M, and none without sm_90a."""
    persistent, stream = "128x256x64 gluon ws persistent", "128x256x64 gluon ws stream-k"
    host = "128x256x64 desc persistent host"
    assert gemm_rule.TRITON_GLUON_FP8_M == 256 and gemm_rule.TRITON_GLUON_SK_LAST_WAVE == 0.5  # the shapes below

    # 4 x 50 = 200 tiles: 68 in the second wave; 3 x 66 = 198 tiles: 66, half of it; 5 x 67 = 335 tiles: 71 in the
    # third; 8 x 33 = 264 tiles: two whole waves
    # the rule without the mid-M kernels, which lead at fp8 up to TRITON_GLUON_MID_FP8_M (the test above)
    def choices(m, n, k, dtype, hopper=True):
        return gemm_rule._triton_tiles(m, n, k, dtype, 132, hopper)

    half = choices(300, 66 * 256, 8192, "fp8e4m3")
    assert [(c.kernel, c.stages) for c in half] == [(stream, 3), (persistent, 3), (host, 3)], half
    assert "198 128x256 tiles: 2 waves of 132 SMs, 66 in the last <= 50% of 132: Gluon stream-K" in half[0].why
    assert all(c.why.startswith("fallback: ") for c in half[1:]), half
    for m, n, line in (
        (500, 50 * 256, "200 128x256 tiles: 2 waves of 132 SMs, 68 in the last"),
        (600, 67 * 256, "335 128x256 tiles: 3 waves of 132 SMs, 71 in the last"),
        (1000, 33 * 256, "264 128x256 tiles: 2 waves of 132 SMs, 132 in the last"),
    ):
        fuller = choices(m, n, 8192, "fp8e4m3")
        assert [(c.kernel, c.stages) for c in fuller] == [(persistent, 3), (host, 3)], fuller
        assert line + ": Gluon warp-specialized persistent" in fuller[0].why, fuller[0].why
    # M just below TRITON_GLUON_FP8_M (one tile row of 255 rows), or fewer tiles than SMs at M in 256..512: neither
    for shape in ((255, 32768, 8192), (300, 8192, 8192)):
        assert {stream, persistent}.isdisjoint(c.kernel for c in choices(*shape, "fp8e4m3")), shape
    assert choices(256, 32768, 8192, "fp8e4m3")[0].kernel == persistent
    for dtype in ("fp16", "bf16"):  # 16 bits: no Gluon kernel but mid-M up to TRITON_SPLIT_M, no stream-K one at all
        for m in (256, 500, gemm_rule.TRITON_SPLIT_M):
            tiles = gemm_rule.choices("triton", m, 20224, 8192, dtype)
            assert all("gluon" not in c.kernel for c in tiles if c.kernel != GLUON_MID), (dtype, m)
        assert stream not in {c.kernel for c in gemm_rule.choices("triton", 4096, 20224, 8192, dtype)}
    assert all("gluon" not in c.kernel for c in gemm_rule.choices("triton", 500, 20224, 8192, "fp8e4m3", hopper=False))
    assert gemm_rule.choose("triton", 600, 67 * 256, 8192, "fp8e4m3", sms=132).kernel == persistent  # past the band


def test_rule_leaves_out_gluon_without_sm90a():
    assert all("gluon" not in c.kernel for c in gemm_rule.choices("triton", 4096, 4096, 4096, "bf16", hopper=False))


@pytest.mark.parametrize("args", [("cuda", 1, 1, 1), ("ptx", 0, 1, 1), ("ptx", 1, 1, 1, "fp32")])
def test_rule_refuses_bad_arguments(args):
    with pytest.raises(ValueError, match="must be"):
        gemm_rule.choices(*args)


def test_every_kernel_the_rule_picks_is_one_the_auto_rows_can_run():
    """Over M of every regime's edges, N and K small to large, every dtype: each candidate the rule names is among
    its backend's auto module's kernels, and the auto row's note names a choice (no KeyError at plan time)."""
    from suite.ptx import gemm_auto as ptx_auto
    from suite.triton import gemm_auto as triton_auto

    autos = {v.backend: v.kernel for v in variants("gemm") if v.name == "auto"}
    candidates = {"ptx": ptx_auto.CANDIDATES, "triton": triton_auto.CANDIDATES}
    ms = (1, 15, 16, 17, 64, 65, 127, 128, 129, 159, 160, 200, 255, 256, 257, 511, 512, 513, 700, 701, 4096)
    for backend, dtype, m, n, k in itertools.product(
        ("ptx", "triton"), ("fp16", "bf16", "fp8e4m3"), ms, (256, 4096, 73728), (128, 8192)
    ):
        for c in gemm_rule.choices(backend, m, n, k, dtype):
            assert c.kernel in candidates[backend], (backend, dtype, (m, n, k), c.kernel)
        assert autos[backend].choice((m, n, k), dtype).count("\n") == 0


def test_the_rule_and_the_triton_kernels_agree_on_tall_tiles():
    """The rule's Triton regime of 256-row tiles (behind the mid-M kernels where they lead) is where split-K's tile
    has 256 rows (one threshold, written in the pure rule and in the kernel module, tied here)."""
    from suite.triton import gemm_splitk

    for dtype, m in itertools.product(("fp16", "bf16", "fp8e4m3"), range(100, 300)):
        mids = ("mid-m swap-ab desc", GLUON_MID)
        tiles = [c for c in gemm_rule.choices("triton", m, 73728, 8192, dtype) if c.kernel not in mids]
        why = tiles[0].why.removeprefix("fallback: ")
        assert why.startswith(f"{gemm_rule.TALL_M // 2} < M=") == (gemm_splitk.tile_for(dtype, m)[0] == 256), (dtype, m)


def test_auto_rows_registered_with_one_unstaged_row():
    autos = {v.label: v for v in variants("gemm") if v.name == "auto"}
    assert set(autos) == {"ptx:auto", "triton:auto"}
    for v in autos.values():
        assert v.stages == (None,) and set(v.dtypes) == {"fp16", "bf16", "fp8e4m3"}
        assert v.kernel.choice((67, 45, 48), "fp16").count("\n") == 0


@pytest.mark.parametrize("dtype", ["fp16", "fp8e4m3"])
@pytest.mark.parametrize("size", [(16, 4096, 4096), (256, 512, 1024), (4096, 4096, 4096)])
def test_ptx_auto_is_described_as_its_pick_without_a_gpu(size, dtype):
    """A CPU run's ptx:auto row shows the build the rule picks for its shape and dtype: that kernel's SASS and
    resources at the depth picked, its name first in the configuration."""
    from suite.driver.precompile import CPU_ARCH, describe

    v = next(v for v in variants("gemm") if v.label == "ptx:auto")
    choice, kernel, stages = v.kernel.pick(size, dtype)
    info = describe(v, GEMM, dtype, v.kernel.build_for(size))[None]
    own = kernel.describe(CPU_ARCH, dtype)[stages]
    assert info.config.startswith(f"{choice.kernel} at {stages} stages; ")
    assert dict(info.sass) == dict(own.sass) and info.registers == own.registers and dict(info.sass)


def test_ptx_auto_is_described_by_the_mid_m_tile_its_shape_takes():
    """Where ptx:auto picks the mid-M kernel, its CPU description is the tile the shape's plan takes at the depth
    picked (192 x 88 at 341 x 6144 x 11008), not the mid-M build's describe tile."""
    from suite.driver.precompile import CPU_ARCH, describe

    size = (341, 6144, 11008)
    v = next(v for v in variants("gemm") if v.label == "ptx:auto")
    choice, kernel, stages = v.kernel.pick(size, "fp16")
    assert choice.kernel == "mid-m swap-ab tma+wgmma"
    info = describe(v, GEMM, "fp16", v.kernel.build_for(size))[None]
    own = kernel.tile_module(88, 3).describe(CPU_ARCH, "fp16")[stages]
    assert f"gemm_tma_decode<{stages}, 88, 3, 1, F16, true>" in info.config
    assert dict(info.sass) == dict(own.sass) and info.registers == own.registers == 128


@pytest.mark.parametrize("size", GEMM.cpu_sizes)
def test_triton_auto_validates_in_the_interpreter(size):
    v = next(v for v in variants("gemm") if v.label == "triton:auto")
    inputs = GEMM.make_inputs(size, 7, torch.device("cuda" if torch.cuda.is_available() else "cpu"), "fp16")
    out = GEMM.make_output(inputs).fill_(float("nan"))
    v.factory(inputs, out, None)()
    assert GEMM.check(out, GEMM.reference(inputs), "fp16").valid


def _fp16(*shape, device="cpu"):
    return torch.randn(*shape, device=device).half()


@pytest.mark.parametrize("backend", ["ptx", "triton"])
def test_gemm_refuses_bad_input_before_launch(backend):
    import suite

    device = "cuda" if torch.cuda.is_available() else "cpu"
    with pytest.raises(ValueError, match="backend"):
        suite.gemm(_fp16(8, 8), _fp16(8, 8), backend="cublas")
    meta = torch.empty(8, 8, dtype=torch.float16, device="meta")
    with pytest.raises(ValueError, match="must be CUDA or CPU tensors"):
        suite.gemm(meta, meta, backend=backend)
    trained = _fp16(8, 8).requires_grad_()
    with pytest.raises(ValueError, match="must not require grad: suite.gemm has no backward"):
        suite.gemm(trained, _fp16(8, 8), backend=backend)
    if backend == "ptx" and not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA tensors"):
            suite.gemm(_fp16(8, 8), _fp16(8, 8), backend=backend)
        return
    with pytest.raises(ValueError, match="scales"):
        suite.gemm(
            _fp16(8, 8, device=device),
            _fp16(8, 8, device=device),
            backend=backend,
            scales=(torch.ones(()), torch.ones(())),
        )
    with pytest.raises(ValueError, match="rank 2"):
        suite.gemm(_fp16(8, device=device), _fp16(8, 8, device=device), backend=backend)
    with pytest.raises(ValueError, match="K must be a multiple of 8|a's columns must equal b's rows"):
        suite.gemm(_fp16(16, 12, device=device), _fp16(16, 16, device=device), backend=backend)
    a, b = _fp16(64, 64, device=device), _fp16(64, 64, device=device)
    e5m2 = a.to(torch.float8_e5m2)
    with pytest.raises(ValueError, match=r"a must have dtype .*float8_e4m3fn \(got torch.float8_e5m2\)"):
        suite.gemm(e5m2, e5m2, backend=backend, scales=(torch.ones(()), torch.ones(())))
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="need scales"):
        suite.gemm(a8, b8, backend=backend)
    with pytest.raises(ValueError, match="fp32 tensors of one element"):
        suite.gemm(a8, b8, backend=backend, scales=(1.0, 2.0), out=torch.empty(64, 64, device=device).bfloat16())
    with pytest.raises(ValueError, match=r"out must have shape \(64, 64\) \(got \(64, 65\)\)"):
        suite.gemm(a, b, backend=backend, out=_fp16(64, 65, device=device))
    with pytest.raises(ValueError, match="out must have dtype torch.float16"):
        suite.gemm(a, b, backend=backend, out=torch.empty(64, 64, device=device))
    # C written over an input: the kernel would read what it had written (the result silently wrong)
    for name, over in (("a", a), ("b", b)):
        with pytest.raises(ValueError, match=f"out must not overlap {name}"):
            suite.gemm(a, b, backend=backend, out=over)
    both = _fp16(128, 64, device=device)
    suite.gemm(both[:64], b, backend=backend, out=both[64:])  # adjacent, apart: taken
    torch.testing.assert_close(both[64:].double(), both[:64].double() @ b.double(), rtol=2e-3, atol=2e-3)


def test_gemm_on_host_tensors_names_the_interpreter(monkeypatch):
    """CPU tensors: the PTX backend points to the Triton one, and the Triton one outside its interpreter says how to
    turn it on, before anything is imported or compiled."""
    import suite

    with pytest.raises(ValueError, match="backend='triton' and TRITON_INTERPRET=1"):
        suite.gemm(_fp16(8, 8), _fp16(8, 8), backend="ptx")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="set TRITON_INTERPRET=1 before the first call"):
        suite.gemm(_fp16(8, 8), _fp16(8, 8), backend="triton")
    # set too late: the kernels were defined compiled when their module was imported
    late = (
        "import os, torch, suite, suite.triton.gemm_auto; os.environ['TRITON_INTERPRET'] = '1'\n"
        "try:\n    suite.gemm(torch.randn(8, 8).half(), torch.randn(8, 8).half(), backend='triton')\n"
        "except ValueError as e:\n    print(e)"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    said = subprocess.run([sys.executable, "-c", late], env=env, capture_output=True, text=True, check=True).stdout
    assert "defined before TRITON_INTERPRET=1 was set" in said and "suite.triton." in said, said


def test_gemm_triton_in_the_interpreter():
    import suite

    device = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = _fp16(67, 48, device=device), _fp16(48, 45, device=device)
    out = torch.full((67, 45), float("nan"), dtype=torch.float16, device=device)
    c = suite.gemm(a, b, backend="triton", out=out)
    assert c is out
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=2e-3)
    with torch.no_grad():  # weights that require grad, at inference: taken
        c = suite.gemm(a, b.clone().requires_grad_(), backend="triton")
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=2e-3)


def test_gemm_reads_a_size_one_dimension_by_its_shape():
    """A 1 x K row cut from a wider one is contiguous to torch whatever its row pitch (a size-1 dimension's stride
    is not looked at): the descriptors take the pitch its shape gives (gemm_operands' canonical operands), for A and
    for C, where the stride would describe another layout (or fail TMA's 16-byte rule)."""
    import suite

    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(1, 260, device=device).half()[:, :256]
    b = _fp16(256, 48, device=device)
    out = torch.full((1, 52), float("nan"), device=device).half()[:, :48]
    assert a.is_contiguous() and a.stride(0) == 260 and out.is_contiguous() and out.stride(0) == 52
    c = suite.gemm(a, b, backend="triton", out=out)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=2e-3)


def test_import_suite_is_cheap():
    code = "import sys, suite; assert 'torch' not in sys.modules and callable(suite.gemm)"
    subprocess.run([sys.executable, "-c", code], check=True)


@GPU
@pytest.mark.parametrize("backend", ["ptx", "triton"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8e4m3"])
@pytest.mark.parametrize(
    "size", [(1, 6144, 4096), (67, 45, 48), (201, 3584, 5120), (300, 12288, 1024), (2048, 4096, 4096)]
)
def test_auto_validates_on_gpu(backend, dtype, size):
    import suite

    v = next(v for v in variants("gemm") if v.label == f"{backend}:auto")
    if reason := v.skip_reason():
        pytest.skip(reason)
    inputs = GEMM.make_inputs(size, 11, torch.device("cuda"), dtype)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    v.factory(inputs, out, None)()
    torch.cuda.synchronize()
    assert GEMM.check(out, GEMM.reference(inputs), dtype).valid
    scales = inputs[2:] if dtype == "fp8e4m3" else None
    c = suite.gemm(inputs[0], inputs[1], backend=backend, scales=scales)
    torch.cuda.synchronize()
    assert GEMM.check(c, GEMM.reference(inputs), dtype).valid
