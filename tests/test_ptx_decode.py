"""The PTX decode GEMM (gemm_decode.cu's gemm_tma_decode, suite.ptx.gemm_decode): the rule that picks its tile, stage
and split count; its machine code on CPU (the swapped wgmma, fp8's K-major one promoted per K atom, TMA, mbarriers,
no spills); and on a GPU its results at the edges of the schedule, bit for bit the same run after run."""

import re
from pathlib import Path

import pytest
import torch
from gemm_checks import valid_twice

from suite import waves
from suite.problems import GEMM
from suite.ptx import gemm_decode
from suite.sass import instruction_classes, split_functions, wgmma_chain


def test_token_tile_is_the_power_of_two_at_least_m_from_8_to_64():
    assert [gemm_decode.block_t_for(m) for m in (1, 7, 8, 9, 16, 17, 33, 64, 65, 256)] == [
        8,
        8,
        8,
        16,
        16,
        32,
        64,
        64,
        64,
        64,
    ]


def test_plan_keeps_enough_weight_in_flight_with_few_splits_and_fits_its_stages():
    mib = 2**20
    # Llama-3 8B's down projection at M = 16: 64 weight tiles of 64 columns. A 3-deep ring of 32 KiB weight stages
    # keeps 64 x 2 x 32 KiB = 4 MiB in flight unsplit, under the target: two splits (128 units); 4 deep, 6 MiB: one
    p = gemm_decode.plan(16, 4096, 14336, 132, 3)
    assert (p.block_t, p.block_w, p.block_k, p.splits, p.units) == (16, 64, 256, 2, 128)
    assert gemm_decode.plan(16, 4096, 14336, 132, 4).splits == 1
    assert gemm_decode.IN_FLIGHT_TARGET == 5 * mib
    # M = 64: 16 KiB weight stages (BK = 128): 3 MiB unsplit at 4 deep, so two splits
    assert gemm_decode.plan(64, 4096, 4096, 132, 4).splits == 2
    # M = 1: 8-row token tiles; N = 8192: 128 tiles fill the SMs unsplit from 3 stages on
    one = gemm_decode.plan(1, 8192, 8192, 132, 3)
    assert (one.block_t, one.splits, one.block_w) == (8, 1, 64)
    # N = 28672: one split either way, the units as well spread: the wider tile
    wide = gemm_decode.plan(16, 28672, 4096, 132, 4)
    assert (wide.block_w, wide.splits, wide.block_k) == (128, 1, 128)
    # long K, few tiles: split until the weight in flight reaches the target, every split >= 4 stages
    long_k = gemm_decode.plan(64, 512, 65536, 132, 4)
    assert long_k.splits == 14 and long_k.block_w == 64
    for m in (1, 5, 16, 31, 64, 100, 256):
        for n in (8, 1000, 4096, 6144, 28672, 57344):
            for k in (16, 4096, 14336, 28672):
                for stages in gemm_decode.STAGES:
                    p = gemm_decode.plan(m, n, k, 132, stages)
                    assert p.stage_bytes <= gemm_decode.STAGE_LIMIT
                    assert max(p.smem_bytes(s) for s in gemm_decode.STAGES) <= gemm_decode.SMEM_PER_BLOCK
                    assert p.tiles_t * p.block_t >= m and p.tiles_w * p.block_w >= n
                    k_stages = -(-k // p.block_k)
                    assert p.splits == 1 or k_stages // p.splits >= gemm_decode.MIN_K_STAGES_PER_SPLIT
                    assert p.units <= max(2 * 132, p.tiles_w * p.tiles_t)  # within two waves unless unsplit
                    assert (p.block_t, p.consumers, p.k_atoms) in gemm_decode.every_plan_shape()
                    weight_stage = p.block_w * p.block_k * 2
                    if p.splits > 1:  # split only where one split fewer keeps too little in flight
                        fewer = p.units // p.splits * (p.splits - 1) * (stages - 1) * weight_stage
                        assert fewer < gemm_decode.IN_FLIGHT_TARGET or p.units > 132, (m, n, k, stages, p)
    assert gemm_decode.plan(16, 4096, 4096, 132, 3, splits=5, consumers=2).splits == 5  # forced (tests)


def test_decode_refuses_unpitched_k_and_unbuilt_depths_before_launch():
    assert "multiple of 8" in gemm_decode.refusal((16, 4096, 4100), "bf16")
    assert gemm_decode.refusal((256, 4000, 4096), "fp16") is None
    assert gemm_decode.refusal((8192, 4096, 4096), "fp16") is None  # any M: token tiles of 64
    a, b = torch.randn(16, 12).half(), torch.randn(12, 128).half()
    with pytest.raises(ValueError, match="K must be a multiple of 8"):
        gemm_decode.Decode((a, b), torch.empty(16, 128).half(), 3)
    with pytest.raises(ValueError, match="stages"):
        gemm_decode.Decode((a, b), torch.empty(16, 128).half(), 5)
    assert "multiple of 16" in gemm_decode.refusal((16, 4096, 4104), "fp8e4m3")  # fp8's rows: 16 bytes of K
    assert gemm_decode.KERNEL.fp8_accumulation == "promoted"


def test_an_atom_is_128_bytes_of_k_at_every_dtype():
    """fp8's stages hold the same bytes as the 16-bit ones, twice the K: the same plans, BK doubled."""
    half, fp8 = (gemm_decode.plan(16, 4096, 14336, 132, 3, dtype=d) for d in ("bf16", "fp8e4m3"))
    assert (half.block_t, half.consumers, half.k_atoms) == (fp8.block_t, fp8.consumers, fp8.k_atoms)
    assert fp8.block_k == 2 * half.block_k and fp8.stage_bytes == half.stage_bytes


def test_mid_token_tiles_pad_m_to_8_rows_per_tile_not_to_the_rungs_128():
    assert waves.mid_token_tiles(341, 2) == [176, 120, 88, 72, 64]
    assert waves.mid_token_tiles(341, 3) == [120, 88, 72, 64]
    assert waves.mid_token_tiles(129, 2) == [136, 72] and waves.mid_token_tiles(20, 3) == [64]
    # fp8: every tile the build takes (160 tokens at most), those past the pairs' 104 only where M takes two or more
    assert waves.mid_token_tiles(315, 2, "fp8e4m3") == [160, 112, 80, 64]
    assert waves.mid_token_tiles(143, 2, "fp8e4m3") == [72] and waves.mid_token_tiles(104, 2, "fp8e4m3") == [104]
    # 105-127 rows: past one tile in pairs and short of two tiles of 64 or more: two tiles of 64
    assert waves.mid_token_tiles(109, 2, "fp8e4m3") == [64]
    for m in range(1, 3000, 7):
        rows = waves.mid_token_tiles(m, 2, "fp8e4m3")
        assert rows and all(waves.mid_tile_ok(t, 2, "fp8e4m3") for t in rows), m
        assert waves.mid_token_tiles(m, 3, "fp8e4m3") == []
    for m in range(1, 3000, 7):
        for consumers in waves.MID_CONSUMERS:
            rows = waves.mid_token_tiles(m, consumers)
            assert rows and len(set(rows)) == len(rows), (m, consumers)
            for t in rows:
                tiles = -(-m // t)
                assert waves.mid_tile_ok(t, consumers) and tiles * t >= m, (m, t)
                assert m <= t or tiles * t - m < 8 * tiles, (m, t)  # each tile pads less than 8 rows
    assert not waves.mid_tile_ok(136, 3) and not waves.mid_tile_ok(100, 2)
    assert not waves.mid_tile_ok(56, 2) and not waves.mid_tile_ok(216, 2)
    assert waves.mid_tile_ok(128, 3) and waves.mid_tile_ok(208, 2) and waves.mid_tile_ok(64, 3)


def test_mid_plan_takes_the_modelled_fastest_tile_that_fits_the_ring():
    """The model's choice is the cheapest of every candidate tile whose ring fits the depth; forced tiles are taken
    as given; 341 x 6144 x 11008 takes one wave of 128 tiles of 192 x 88 rather than the
    96 tiles of 128 x 176."""
    assert (
        gemm_decode.mid_plan(341, 6144, 11008, 132).block_t,
        gemm_decode.mid_plan(341, 6144, 11008, 132).consumers,
    ) == (88, 3)
    for shape in (
        (341, 6144, 11008),
        (529, 10240, 11008),
        (202, 3584, 36864),
        (129, 73728, 11008),
        (1453, 6144, 11008),
    ):
        for stages in (None, *gemm_decode.MID_STAGES):
            p = gemm_decode.mid_plan(*shape, 132, stages)
            assert stages is None or p.smem_bytes(stages) <= gemm_decode.SMEM_PER_BLOCK
            cost = waves.mid_time(*shape, 132, p.block_t, p.consumers, p.w_tiles)
            for c, w in ((2, 1), (3, 1), (2, 2)):
                for t in waves.mid_token_tiles(shape[0], c):
                    if w == 2 and (t > gemm_decode.WIDE_MOST_TOKENS or shape[0] <= waves.MID_WIDE_LEAST_M):
                        continue
                    fits = stages is None or waves.mid_ring_bytes(t, c * w, stages) <= waves.MID_SMEM
                    assert not fits or cost <= waves.mid_time(*shape, 132, t, c, w), (shape, stages, t, c, w)
    forced = gemm_decode.mid_plan(341, 6144, 11008, 132, consumers=2, block_t=176)
    assert (forced.block_t, forced.consumers) == (176, 2)
    with pytest.raises(ValueError, match="does not fit"):
        gemm_decode.mid_plan(341, 6144, 11008, 132, 6, consumers=2, block_t=208)
    with pytest.raises(ValueError, match="both block_t and consumers"):
        gemm_decode.mid_plan(341, 6144, 11008, 132, block_t=88)


def test_mid_ring_bytes_is_the_launchers_figure():
    for t, c in ((64, 2), (88, 3), (128, 3), (208, 2)):
        for s in (2, 4, 6):
            assert waves.mid_ring_bytes(t, c, s) == gemm_decode.Plan(t, c, 1, 1, 1, 1, tail=True).smem_bytes(s)
        assert waves.mid_ring_bytes(t, c, waves.mid_deepest(t, c)) <= waves.MID_SMEM
        deeper = waves.mid_deepest(t, c) + 1
        assert deeper > waves.MID_DEEPEST or waves.mid_ring_bytes(t, c, deeper) > waves.MID_SMEM
    assert waves.MID_SMEM == gemm_decode.SMEM_PER_BLOCK


def test_mid_plan_splits_only_the_last_partial_wave():
    # 576 weight tiles of 128 columns at M = 129: 4 whole waves on 132 SMs, then 48 tiles left, each in 2 shares
    p = gemm_decode.mid_plan(129, 73728, 11008, 132, consumers=2, block_t=136)
    assert (p.block_t, p.block_w, p.block_k, p.tiles_w, p.tiles_t, p.splits, p.tail) == (136, 128, 64, 576, 1, 2, True)
    # 1056 tiles: whole waves
    assert gemm_decode.mid_plan(129, 4096 * 33, 4096, 132, consumers=2, block_t=136).splits == 1
    for m in (100, 129, 200, 341, 529, 1000):
        for n in (1000, 4096, 14336, 73728):
            for k in (520, 4096, 36864):
                p = gemm_decode.mid_plan(m, n, k, 132)
                tiles = p.tiles_w * p.tiles_t
                assert p.splits == 1 or tiles % 132, (m, n, k, p)  # whole waves only: nothing split
                assert p.splits == 1 or -(-k // 64) // p.splits >= 4, (m, n, k, p)
                assert p.smem_bytes(waves.mid_deepest(p.block_t, p.consumers * p.w_tiles)) <= gemm_decode.SMEM_PER_BLOCK
                assert waves.mid_tile_ok(p.block_t, p.consumers) and p.k_atoms == 1, (m, n, k, p)


def test_mid_refuses_unbuilt_depths_fp8_tiles_and_other_widths_before_launch():
    a, b = torch.randn(130, 64).half(), torch.randn(64, 256).half()
    with pytest.raises(ValueError, match="stages"):
        gemm_decode.Decode((a, b), torch.empty(130, 256).half(), 2, kernel=gemm_decode.MID)
    # fp8's promoted tiles: two consumer warpgroups, at most 160 tokens (the 16-bit tiles go to 208)
    assert gemm_decode.mid_plan(130, 256, 64, 132, consumers=2, block_t=168).block_t == 168
    assert gemm_decode.mid_plan(130, 256, 64, 132, consumers=2, block_t=160, dtype="fp8e4m3").block_t == 160
    with pytest.raises(ValueError, match="block_t=168: the mid-M build takes .* fp8: 160 on two"):
        gemm_decode.mid_plan(130, 256, 64, 132, consumers=2, block_t=168, dtype="fp8e4m3")
    with pytest.raises(ValueError, match="block_t=64: the mid-M build takes"):
        gemm_decode.mid_plan(130, 256, 64, 132, consumers=3, block_t=64, dtype="fp8e4m3")
    # a tile's own build without an fp8 form refuses fp8 before anything else (three consumers: 16-bit only)
    wide = gemm_decode.MID.tile_module(88, 3)
    assert wide.dtypes == ("fp16", "bf16") and gemm_decode.MID.tile_module(80, 2).dtypes == gemm_decode.DTYPES
    fp8 = GEMM.make_inputs((130, 256, 64), 1, torch.device("cpu"), "fp8e4m3")
    with pytest.raises(ValueError, match="this build takes fp16, bf16"):
        gemm_decode.Decode(fp8, GEMM.make_output(fp8), 4, kernel=wide)
    with pytest.raises(ValueError, match="2 or 3 consumer warpgroups"):
        gemm_decode.mid_plan(130, 256, 64, 132, consumers=1)
    with pytest.raises(ValueError, match="block_t=136: the mid-M build takes"):
        gemm_decode.mid_plan(130, 256, 64, 132, consumers=3, block_t=136)
    with pytest.raises(ValueError, match="not a mid-M tile"):
        gemm_decode.MidModule((90, 2))
    # forced splits where the tiles make whole waves: nothing to split, no workspace
    assert gemm_decode.mid_plan(129, 128 * 264, 4096, 132, splits=3, consumers=2, block_t=136).splits == 1


@pytest.mark.parametrize(
    "kernel",
    [
        gemm_decode.KERNEL,
        gemm_decode.MID,
        gemm_decode.MID.tile_module(88, 3),
        gemm_decode.MID.tile_module(128, 3),
        gemm_decode.MID.tile_module(*gemm_decode.MID_DESCRIBE_TILE_FP8),
        gemm_decode.MID.tile_module(waves.MID_MOST_TOKENS_FP8[2], 2),
    ],
    ids=["decode", "mid", "mid-192x88", "mid-192x128", "mid-128x104", "mid-128x160"],
)
def test_decode_builds_the_swapped_wgmma_on_a_tma_ring_without_spills(kernel):
    """Every instantiation: the transposed-A 16-bit wgmma (HGMMA ... tnspA) at N = BLOCK_T, BK / 16 of them chained per
    commit group, or fp8's K-major one (QGMMA ... E4M3, no transpose), 4 per group (one K atom, promoted; the mid-M
    build's fp8 tiles up to 104 tokens in pairs of groups, wider ones, 128 x 160 here, one group at a time), the first
    of each group overwriting its partial (RZ, !UPT); TMA loads of the weight and the tokens, mbarriers, no local
    memory; the fix-up's one integer atomic (the counter, acquire-release), no float atomics and no sequentially
    consistent fence."""
    module = kernel.build("sm_90a")
    assert "C7510" not in module.log and "serializ" not in module.log.lower(), module.log
    per = split_functions(module.sass())
    expected = {e for s in kernel.stages for e in kernel.name_expressions(s)}
    assert expected == set(module.symbols)
    dtypes = kernel.tile_dtypes() if isinstance(kernel, gemm_decode.MidModule) else kernel.dtypes
    assert len(expected) == len(dtypes) * len(kernel.stages) * len(kernel.shapes())
    for expr, symbol in module.symbols.items():
        sass, res = per[symbol], module.resources()[expr]
        assert res["local"] == 0 and res["stack"] == 0, (expr, res)
        stages, block_t, consumers, k_atoms = (int(v) for v in expr.split("<")[1].split(",")[:4])
        classes = instruction_classes(sass)
        assert classes["tma"] >= 2 and classes["mbarrier"] and classes["local_memory"] == 0, (expr, classes)
        count, closing = wgmma_chain(sass)
        if "E4M3" in expr:
            qgmma = [line for line in sass.splitlines() if "GMMA." in line]
            assert qgmma and all(f"QGMMA.64x{block_t}x32.F32.E4M3.E4M3" in line for line in qgmma), expr
            assert not any("tnsp" in line for line in qgmma), expr
            assert count and count == 4 * closing, (expr, count, closing)  # a K atom per group, promoted
            assert sum("RZ, !UPT" in line for line in qgmma) == closing, expr  # each group's partial from zero
        else:
            hgmma = [line for line in sass.splitlines() if "HGMMA." in line]
            assert hgmma and all(f"HGMMA.64x{block_t}x16.F32" in line and "tnspA" in line for line in hgmma), expr
            assert all(("BF16" in line) == ("BF16" in expr) for line in hgmma), expr
            assert count and count == 4 * k_atoms * closing, (expr, count, closing)  # BK / 16 per stage, one group
        assert len(re.findall(r"ATOMG\.E\.ADD\.S32\.STRONG\.GPU", sass)) == 1, expr  # the counter: an integer add
        if "E4M3" in expr and expr.endswith("true>"):  # the mid-M build's fp8: a group left in flight only in pairs
            one_left = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", sass) is not None
            assert one_left == (block_t <= waves.MID_FP8_PAIRS_MOST_TOKENS), expr
        # above 64 registers of accumulators and fp8's partials (two consumers; three: 32): the producer's registers
        # handed over. The consumers' TRY_ALLOC spins until the pool holds 232 each (three: 152): the block must
        # start with the whole register file, 168 a thread at 384 threads (128 at 512)
        fp8, mid = "E4M3" in expr, expr.endswith("true>")
        pairs = fp8 and mid and block_t <= waves.MID_FP8_PAIRS_MOST_TOKENS
        acc_regs = block_t // 2 * (3 if pairs else 2 if fp8 else 1)
        shifted = (consumers == 2 and acc_regs > 64) or (consumers == 3 and acc_regs > 32)
        assert ("USETMAXREG.DEALLOC.CTAPOOL 0x28" in sass) == shifted, expr
        each = {2: "0xe8", 3: "0x98"}.get(consumers)
        assert bool(re.search(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, {each}", sass)) == shifted, expr
        assert not shifted or res["registers"] == 65536 // ((1 + consumers) * 128) // 8 * 8, (expr, res)
        assert not re.search(r"(ATOMG|RED)\.E\.ADD\.F32", sass) and "MEMBAR.SC" not in sass, expr


# On a GPU: M = 1 (7 zero-filled token rows), M not a multiple of 8, N not a multiple of 8 or 16 (B padded, edge
# weight tiles), K below one stage and not a multiple of one, a split remainder, more splits than K stages (empty
# splits), two and more token tiles, both tile widths.
EDGES = [
    ((1, 300, 1040), None, None),
    ((13, 264, 80), None, 2),
    ((67, 250, 48), 3, 1),
    ((64, 512, 4112), None, None),
    ((200, 520, 16), 4, 2),
    ((129, 257, 272), 7, 1),
    ((256, 4000, 2056), None, None),
    ((8, 4096, 14336), None, None),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", gemm_decode.DTYPES)
@pytest.mark.parametrize("stages", gemm_decode.STAGES)
def test_decode_matches_fp64_at_the_edges_bit_reproducibly(stages, dtype):
    for size, splits, consumers in EDGES:
        if gemm_decode.refusal(size, dtype):  # fp8: K % 16
            continue
        inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), dtype)
        out = GEMM.make_output(inputs)
        launch = gemm_decode.Decode(inputs, out, stages, splits=splits, consumers=consumers)
        assert splits is None or launch.plan.splits == splits
        valid_twice(launch, out, inputs, dtype, (stages, size, splits, consumers))
        assert int(launch.counters.abs().sum()) == 0, (stages, size, "fix-up counters not reset")


# The mid-M build on a GPU: the rule's tile at M = 129 (two of 72, K with a remainder, an edge weight tile), two of 160
# with a ring that wraps, the split tail after a whole wave (150 tiles on 132 SMs: the 18 left forced into 3 shares) at
# 144 and at the widest build (208), fewer rows than the smallest token tile with N % 8 != 0 (a padded B), two tiles of
# 128 (M = 256), two of 136 (half a row of 8 registers past 8 rows, the producer's registers handed over); three
# consumer warpgroups: four tiles of 88 with an edge weight tile (1000 = 5 x 192 + 40), the widest (128 tokens, the
# producer's registers handed over), and a split tail (272 tiles of 192 x 104: 8 left, in 3 shares); the rule's wide
# tile at 4 stages (twelve token tiles of 112, the last 17 rows, and an edge weight tile: 2600 = 10 x 256 + 40).
MID_EDGES = [
    ((129, 1000, 520), None, None),
    ((300, 520, 4104), None, (160, 2)),
    ((129, 19200, 1040), 3, (144, 2)),
    ((208, 19200, 1040), 3, (208, 2)),
    ((176, 4000, 2056), None, None),
    ((190, 520, 4104), None, None),
    ((90, 260, 1032), None, (96, 2)),
    ((256, 4000, 2056), None, (128, 2)),
    ((260, 3000, 2056), None, (136, 2)),
    ((341, 1000, 1040), None, (88, 3)),
    ((129, 1000, 2056), None, (128, 3)),
    ((200, 26000, 1040), 3, (104, 3)),
    ((1249, 2600, 1032), None, None),
]
# fp8 (K % 16; the tiles above that fp8 takes run too, 144 tokens among them): its rule's tiles at M = 156 (two of 80,
# 128 tiles, no split), its widest in pairs (104) and the narrowest with one partial (112) with a split tail (300
# tiles: 36 left, in 3 shares), its widest (160) over two token tiles (the last partly empty) at an odd count of K
# stages (2064 = 16 x 128 + 16), an odd count in pairs (the pairs' last stage alone: 72 tokens), and fewer rows than
# its smallest tile with N % 8 != 0
MID_FP8_EDGES = [
    ((156, 8192, 1040), None, (80, 2)),
    ((208, 19200, 1040), 3, (104, 2)),
    ((224, 19200, 1040), 3, (112, 2)),
    ((300, 8192, 2064), None, (160, 2)),
    ((129, 1000, 2064), None, (72, 2)),
    ((40, 260, 1040), None, (64, 2)),
    ((109, 3000, 1040), None, (64, 2)),  # past one tile in pairs (104), short of two of 64: two of 64
]


def test_every_mid_edge_runs_at_two_depths_at_least():
    for _, _, tile in MID_EDGES + MID_FP8_EDGES:
        if tile is not None:
            assert sum(s <= waves.mid_deepest(*tile) for s in gemm_decode.MID_STAGES) >= 2, tile


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", gemm_decode.MID.dtypes)
@pytest.mark.parametrize("stages", gemm_decode.MID_STAGES)
def test_mid_matches_fp64_at_the_edges_bit_reproducibly(stages, dtype):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for size, splits, tile in MID_EDGES + (MID_FP8_EDGES if dtype == "fp8e4m3" else []):
        if tile is not None and stages > waves.mid_deepest(*tile):  # (208 tokens on 128 columns: 5 deep at most)
            continue
        if gemm_decode.refusal(size, dtype) or (tile is not None and not waves.mid_tile_ok(*tile, dtype)):
            continue  # fp8: K % 16, and its tiles only
        inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), dtype)
        out = GEMM.make_output(inputs)
        shape = {} if tile is None else {"block_t": tile[0], "consumers": tile[1]}
        p = gemm_decode.mid_plan(*size, sms, dtype=dtype, **shape)
        tiles = p.tiles_w * p.tiles_t
        fits = splits is not None and tiles % sms and (tiles % sms) * splits <= sms
        assert splits is None or fits or sms != 132, size  # the H100's and H200's 132 SMs: the forced tail runs
        forced = splits if fits else None
        launch = gemm_decode.Decode(inputs, out, stages, kernel=gemm_decode.MID, splits=forced, **shape)
        assert forced is None or launch.plan.splits == forced
        assert tile is None or (launch.plan.block_t, launch.plan.consumers) == tile
        valid_twice(launch, out, inputs, dtype, (stages, size, splits, tile))
        assert int(launch.counters.abs().sum()) == 0, (stages, size, "fix-up counters not reset")


def test_the_sanitizer_sees_every_kind_of_mid_m_walk():
    """At every depth, the mid-M sanitizer sizes take both widths, a three-consumer tile above 64 tokens (the
    producer's registers handed over), and whole waves followed by a split tail; at fp8, tiles promoted in pairs and
    with one partial, each with a split tail."""
    for stages in gemm_decode.MID.stages:
        plans = [gemm_decode.mid_plan(*size, 132, stages) for size in gemm_decode.MID.sanitize_sizes]
        assert {p.consumers for p in plans} == {2, 3}, stages
        assert any(p.consumers == 3 and p.block_t > 64 and p.splits > 1 for p in plans), stages
        assert any(p.consumers == 3 and p.splits == 1 for p in plans), stages
        assert any(p.tiles_w * p.tiles_t > 132 and p.splits > 1 for p in plans), stages
        fp8 = [
            gemm_decode.mid_plan(*size, 132, stages, dtype="fp8e4m3")
            for size in gemm_decode.MID.sanitize_sizes
            if not gemm_decode.refusal(size, "fp8e4m3")
        ]
        for pairs in (True, False):
            assert any((p.block_t <= waves.MID_FP8_PAIRS_MOST_TOKENS) == pairs and p.splits > 1 for p in fp8), (
                stages,
                pairs,
            )


def test_without_a_gpu_a_mid_m_row_is_described_by_the_tile_its_depth_takes(monkeypatch):
    """The registered mid-M build describes a shape's rows by the tile each depth's plan takes (192 x 88 at 341 x 6144
    x 11008 at every depth; where the depths' plans differ, each its own), and a tile's own build has only the depths
    its ring fits."""
    assert gemm_decode.MID.build_for((341, 6144, 11008, 0)) == (341, 6144, 11008)
    described = gemm_decode.MID.describe("sm_90a", "fp16", build=(341, 6144, 11008))
    assert set(described) == set(gemm_decode.MID_STAGES)
    for stages, info in described.items():
        assert f"gemm_tma_decode<{stages}, 88, 3, 1, F16, true>" in info.config, info.config
        assert info.smem_total >= (192 + 88) * 128 * stages and info.spill_bytes == 0
    # depths whose plans differ (the tiles other tests build: no compile of its own)
    picks = {4: (128, 3), 5: (144, 2), 6: (88, 3)}
    monkeypatch.setattr(gemm_decode, "mid_tile", lambda m, n, k, sms, stages=None, dtype="fp16": picks[stages])
    for stages, info in gemm_decode.MID.describe("sm_90a", "bf16", build=(1, 2, 3)).items():
        t, c = picks[stages]
        assert f"gemm_tma_decode<{stages}, {t}, {c}, 1, BF16, true>" in info.config, info.config
    wide = gemm_decode.MID.tile_module(208, 2)
    assert wide.stages == (4, 5) and wide.build_for((1, 2, 3)) is None


def test_every_n_of_the_swapped_wgmma_form_binds_its_registers():
    """wgmma_m64nNk16_f32_mmajor_a at every N = 8 .. 256 by 8 (half rows of 8 registers for N % 16 == 8): one
    transposed-A HGMMA of that N each, no local memory (a wrong register list fails to assemble or spills)."""
    from pathlib import Path

    from suite.nvrtc import loader

    names = tuple(f"swapped_form<{n}>" for n in range(8, 257, 8))
    module = loader.compile_cu(Path(__file__).parent / "data" / "wgmma_swapped_forms.cu", names, arch="sm_90a")
    per = split_functions(module.sass())
    for name in names:
        n = int(name.split("<")[1].rstrip(">"))
        sass, res = per[module.symbols[name]], module.resources()[name]
        hgmma = [line for line in sass.splitlines() if "HGMMA." in line]
        assert len(hgmma) == 1 and f"HGMMA.64x{n}x16.F32" in hgmma[0] and "tnspA" in hgmma[0], (name, hgmma)
        assert res["local"] == 0 and res["stack"] == 0, (name, res)


def test_every_n_of_the_fp8_wgmma_form_binds_its_registers():
    """wgmma_m64nNk32_f32_e4m3 at every N = 8 .. 160 by 8 (the decode and mid-M kernels' tokens, the 128 x 144 rung):
    one K-major QGMMA of that N each, in both its overwriting and its accumulating form, no local memory."""
    from pathlib import Path

    from suite.nvrtc import loader

    names = tuple(f"e4m3_form<{n}>" for n in range(8, 161, 8))
    module = loader.compile_cu(Path(__file__).parent / "data" / "wgmma_swapped_forms.cu", names, arch="sm_90a")
    per = split_functions(module.sass())
    for name in names:
        n = int(name.split("<")[1].rstrip(">"))
        sass, res = per[module.symbols[name]], module.resources()[name]
        qgmma = [line for line in sass.splitlines() if "QGMMA." in line]  # (ptxas may add an empty HGMMA: RZ in, out)
        assert len(qgmma) == 2 and all(f"QGMMA.64x{n}x32.F32.E4M3.E4M3" in q for q in qgmma), (name, qgmma)
        assert sum("RZ, !UPT" in q for q in qgmma) == 1 and not any("tnsp" in q for q in qgmma), (name, qgmma)
        assert res["local"] == 0 and res["stack"] == 0, (name, res)


def test_the_mid_m_model_picks_these_tiles():
    """Pinned choices of the model (suite.waves.mid_tile) at mid-M shapes, so that a change to its constants shows
    here: the tile (block_t, consumers, weight tiles per consumer), its ring depth limits, and a depth that no tile
    fits. The wide tile (256 weight rows) only past MID_WIDE_LEAST_M tokens (1453, 2049), and there at 4 stages."""
    expected = {
        (341, 6144, 11008): (88, 3, 1),
        (529, 10240, 11008): (184, 2, 1),
        (140, 36864, 18944): (72, 3, 1),
        (307, 24576, 6144): (160, 2, 1),
        (129, 73728, 11008): (136, 2, 1),
        (202, 3584, 36864): (104, 2, 1),
        (950, 11008, 3072): (160, 2, 1),
        (1453, 6144, 11008): (136, 2, 2),
        (2049, 22016, 24576): (160, 2, 2),
    }
    for shape, tile in expected.items():
        assert waves.mid_tile(*shape, 132) == tile, shape
        assert waves.mid_tile(*shape, 132, 4 if tile[2] == 2 else 5) == tile, shape  # every narrow tile fits 5
        assert waves.mid_tile(*shape, 132, dtype="bf16") == tile, shape
    assert waves.mid_tile(1453, 6144, 11008, 132, 5) == (184, 2, 1)  # the wide tile's ring does not fit 5 deep
    assert waves.mid_tile(1453, 6144, 11008, 132, dtype="fp8e4m3")[2] == 1  # no wide tile at fp8
    assert waves.mid_tile(waves.MID_WIDE_LEAST_M, 6144, 11008, 132)[2] == 1
    assert waves.mid_tile(529, 10240, 11008, 132, 6) != (184, 2, 1)  # 128 x 184 does not fit 6 deep
    wide_edge = gemm_decode.mid_plan(1249, 2600, 1032, 132, 4)  # MID_EDGES' rule-picked wide tile
    assert (wide_edge.block_t, wide_edge.block_w, wide_edge.tiles_t, wide_edge.tiles_w) == (112, 256, 12, 11)
    assert waves.mid_deepest(184, 2) == 5 and waves.mid_deepest(88, 3) == 6 and waves.mid_deepest(192, 4) == 4
    with pytest.raises(ValueError, match="stages=10: no mid-M tile's ring fits"):
        waves.mid_tile(300, 4096, 8192, 132, 10)


def test_the_mid_m_sanitizer_names_every_tile_a_depth_may_run():
    for stages in gemm_decode.MID.stages:
        names = set(gemm_decode.MID.kernel_names(stages))
        for size in gemm_decode.MID.sanitize_sizes:
            for dtype in gemm_decode.MID.dtypes:
                p = gemm_decode.mid_plan(*size, 132, stages, dtype=dtype)
                assert p.name_expression(stages, dtype) in names, (stages, size, dtype)
        assert f"gemm_tma_decode<{stages}, 104, 2, 1, E4M3, true>" in names  # fp8's widest tile in pairs
        assert f"gemm_tma_decode<{stages}, 160, 2, 1, E4M3, true>" in names  # and its widest with one partial
        assert f"gemm_tma_decode<{stages}, 168, 2, 1, E4M3, true>" not in names  # not built past 160
        assert f"gemm_tma_decode<{stages}, 64, 3, 1, E4M3, true>" not in names  # and has no three-consumer tile
        assert "gemm_tma_decode<6, 208, 2, 1, F16, true>" not in names  # its ring does not fit 6 deep
        # the wide tile (16 bits, up to 192 tokens) where its ring fits: 4 deep at 192 tokens, 5 up to 104
        for t, deepest in ((64, 5), (104, 5), (112, 4), (192, 4)):
            wide = {f"gemm_tma_decode<{stages}, {t}, 2, 1, {d}, true, 2>" for d in ("F16", "BF16")}
            assert wide <= names if stages <= deepest else not wide & names, (stages, t)
        assert not any(", E4M3, true, 2>" in name or "200, 2, 1, F16, true, 2>" in name for name in names)
    tile = gemm_decode.MID.tile_module(88, 3)
    assert set(tile.kernel_names(4)) == {
        "gemm_tma_decode<4, 88, 3, 1, F16, true>",
        "gemm_tma_decode<4, 88, 3, 1, BF16, true>",
    }
    assert gemm_decode.MID.tile_module(*gemm_decode.MID_DESCRIBE_TILE) is gemm_decode.MID
    # a tile's own build plans its own tile whatever the shape
    assert (tile.plan(529, 10240, 11008, 132, 4).block_t, tile.plan(529, 10240, 11008, 132, 4).consumers) == (88, 3)


# The wide mid-M tile (w_tiles = 2: two m64 weight tiles per consumer warpgroup, 256 weight rows on two), forced: its
# most tokens and a tile that pads M, at its depths (3 and 4: 4 stages of 192 tokens is the most that fits)
WIDE_TILES = ((128, 3), (160, 4), (gemm_decode.WIDE_MOST_TOKENS, 4))


def _wide(block_t: int, stages: int) -> gemm_decode.MidModule:
    module = gemm_decode.MidModule((block_t, 2), w_tiles=2)
    module.stages = (stages,)
    return module


@pytest.mark.parametrize("block_t, stages", WIDE_TILES)
def test_the_wide_mid_m_tile_chains_both_weight_tiles_without_spills(block_t, stages):
    """Per K stage one wgmma group of 8 transposed-A HGMMA of N = BLOCK_T (2 weight tiles x 4 k-steps of 16) on one
    token box; no local memory or stack: the second tile's accumulators are dead while the first's fix-up sums (the
    sum writes every accumulator), and the consumers hold both tiles in the registers the producer hands over."""
    module = _wide(block_t, stages).build("sm_90a")
    per = split_functions(module.sass())
    for expr, symbol in module.symbols.items():
        res = module.resources()[expr]
        assert res["local"] == 0 and res["stack"] == 0, (expr, res)
        hgmma = [line for line in per[symbol].splitlines() if "HGMMA." in line]
        assert len(hgmma) == 8 and all(f"HGMMA.64x{block_t}x16.F32" in h and "tnspA" in h for h in hgmma), expr
        assert wgmma_chain(per[symbol]) == (8, 1), expr


def test_the_wide_tile_is_forced_16_bit_and_fits_its_ring():
    p = gemm_decode.mid_plan(950, 11008, 3072, 132, 4, consumers=2, block_t=160, w_tiles=2)
    assert (p.block_w, p.tiles_w, p.tiles_t) == (256, 43, 6)
    assert p.name_expression(4, "fp16") == "gemm_tma_decode<4, 160, 2, 1, F16, true, 2>"
    for bad in (
        dict(w_tiles=2),  # not forced
        dict(w_tiles=2, consumers=2, block_t=gemm_decode.WIDE_MOST_TOKENS + 8),
        dict(w_tiles=2, consumers=2, block_t=96, dtype="fp8e4m3"),
        dict(w_tiles=3, consumers=2, block_t=96),
    ):
        with pytest.raises(ValueError, match="w_tiles"):
            gemm_decode.mid_plan(300, 4096, 4096, 132, 4, **bad)
    with pytest.raises(ValueError, match="does not fit"):
        gemm_decode.mid_plan(300, 4096, 4096, 132, 5, consumers=2, block_t=192, w_tiles=2)
    assert "fp8e4m3" not in gemm_decode.MidModule((160, 2), w_tiles=2).dtypes


def test_the_registered_mid_m_build_describes_the_wide_tile_its_plan_takes():
    """At 2049 x 22016 x 24576 the 4-deep plan takes the wide tile (256 x 160), which 5 and 6 do not fit: each depth
    is described by the build its plan launches, the wide one with its own ring and no spills."""
    described = gemm_decode.MID.describe("sm_90a", "fp16", build=(2049, 22016, 24576))
    assert "gemm_tma_decode<4, 160, 2, 1, F16, true, 2>" in described[4].config, described[4].config
    assert described[4].smem_total >= (256 + 160) * 128 * 4 and described[4].spill_bytes == 0
    assert all(", true>" in described[s].config for s in (5, 6)), described
    wide = gemm_decode.MID.tile_module(160, 2, 2)
    assert wide.stages == (4,) and wide.w_tiles == 2 and wide.dtypes == ("fp16", "bf16")
    assert gemm_decode.MID.tile_module(160, 2, 2) is wide is not gemm_decode.MID.tile_module(160, 2)


# On a GPU: an edge weight tile (1000 = 3 x 256 + 232) and M in two token tiles of 160, N % 8 != 0 (a padded B) with
# fewer rows than the tile, and a split tail after a whole wave at both widest tiles (150 tiles: the 18 left in 3
# shares, the fix-up summing both weight tiles of each warpgroup)
WIDE_EDGES = [
    ((300, 1000, 520), None, 160),
    ((129, 260, 1032), None, 128),
    ((192, 38400, 1040), 3, 192),
    ((300, 19200, 1040), 3, 160),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("fp16", "bf16"))
def test_the_wide_mid_m_tile_matches_fp64_at_the_edges_bit_reproducibly(dtype):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for size, splits, block_t in WIDE_EDGES:
        stages = 4 if block_t > 128 else 3
        module = _wide(block_t, stages)
        inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), dtype)
        out = GEMM.make_output(inputs)
        p = gemm_decode.mid_plan(*size, sms, consumers=2, block_t=block_t, w_tiles=2, dtype=dtype)
        tiles = p.tiles_w * p.tiles_t
        forced = splits if splits and tiles % sms and (tiles % sms) * splits <= sms else None
        launch = gemm_decode.Decode(inputs, out, stages, kernel=module, splits=forced, consumers=2, block_t=block_t)
        assert launch.plan.w_tiles == 2 and launch.plan.block_w == 256
        assert forced is None or launch.plan.splits == forced
        valid_twice(launch, out, inputs, dtype, (stages, size, splits, block_t))
        assert int(launch.counters.abs().sum()) == 0, (stages, size, "fix-up counters not reset")


def test_the_fp8_mid_m_token_bounds_are_the_kernels():
    """The build's fp8 token bounds (suite.waves) are the ones gemm_decode.cu's static_assert and pairs switch read."""
    source = (Path(gemm_decode.__file__).parent / "gemm_decode.cu").read_text()
    assert f"constexpr int FP8_PAIRS_MOST_TOKENS = {waves.MID_FP8_PAIRS_MOST_TOKENS};" in source
    assert f"constexpr int FP8_MID_MOST_TOKENS = {waves.MID_MOST_TOKENS_FP8[2]};" in source
    # the model weighs every tile the build takes, the one-partial tiles past the pairs' most included
    assert max(max(waves.mid_token_tiles(m, 2, "fp8e4m3")) for m in range(1, 400)) == waves.MID_MOST_TOKENS_FP8[2]
    widest = gemm_decode.MID.tile_module(waves.MID_MOST_TOKENS_FP8[2], 2)
    assert "fp8e4m3" in widest.tile_dtypes() and "fp8e4m3" not in gemm_decode.MID.tile_module(168, 2).tile_dtypes()
