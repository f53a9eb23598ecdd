"""The PTX GEMM schedules for shapes with few output tiles (gemm_tma.cu: split-K, stream-K, 64-row tiles): the rule
that picks the split count, their machine code on CPU, and on a GPU their results at the edges of the schedule, bit
for bit the same run after run, with the tile counters left at zero."""

import dataclasses
import re

import pytest
import torch
from gemm_checks import valid_twice

from suite.problems import GEMM
from suite.ptx import gemm_tma
from suite.registry import variants
from suite.sass import instruction_classes, split_functions, wgmma_chain

SCHEDULED = [name for name, c in gemm_tma.CONFIGS.items() if c.schedule != "tiles"]


def test_split_count_fills_the_sms_once_and_keeps_splits_long():
    assert gemm_tma.split_count(tiles=32, k_tiles=128, slots=132) == 4  # 128 blocks: one wave
    assert gemm_tma.split_count(tiles=64, k_tiles=128, slots=264) == 4  # 2 resident blocks per SM: 256 blocks
    assert gemm_tma.split_count(tiles=8, k_tiles=1024, slots=132) == 16
    assert gemm_tma.split_count(tiles=512, k_tiles=64, slots=132) == 1  # the tiles fill the SMs already
    assert gemm_tma.split_count(tiles=2, k_tiles=6, slots=132) == 1  # every split >= 4 K tiles
    assert gemm_tma.split_count(tiles=1, k_tiles=1, slots=132) == 1


def test_a_memory_bound_shape_splits_only_until_its_blocks_occupy_the_share_of_sms():
    share = gemm_tma.STREAMING_SM_SHARE
    rule = gemm_tma.split_count
    # 64 x 8192 x 8192 fp16 on 64x128 tiles: 64 blocks already stream the weight from 48% of 132 SMs
    assert gemm_tma.memory_bound("fp16", 64, 8192, 8192)
    assert rule(tiles=64, k_tiles=128, slots=132, streaming=True, sms=132) == 1
    assert rule(tiles=64, k_tiles=128, slots=132) == 2  # the compute-bound rule would fill every slot
    # N = 4096: 32 tiles need two splits to reach the share; one tile: as many as the K tiles allow
    assert rule(tiles=32, k_tiles=64, slots=132, streaming=True, sms=132) == 2
    assert rule(tiles=1, k_tiles=64, slots=132, streaming=True, sms=132) == 16
    for tiles in range(1, 300):  # never more blocks than the compute-bound rule, and at least the share when it can
        s = rule(tiles, 512, 132, streaming=True, sms=132)
        assert 1 <= s <= rule(tiles, 512, 132)
        assert tiles * s >= share * 132 or s == rule(tiles, 512, 132)
        assert s == 1 or tiles * (s - 1) < share * 132  # no split beyond the one that reaches the share
    # the square shapes, 256-row prefill and long K stay compute-bound: they fill the slots
    for dtype in gemm_tma.DTYPES:
        for shape in ((4096, 4096, 4096), (256, 8192, 8192), (512, 512, 65536), (8192, 8192, 8192)):
            assert not gemm_tma.memory_bound(dtype, *shape), (dtype, shape)
        for shape in ((1, 4096, 4096), (16, 28672, 4096), (128, 8192, 8192)):
            assert gemm_tma.memory_bound(dtype, *shape), (dtype, shape)


@pytest.mark.parametrize("name", SCHEDULED)
def test_schedules_build_as_hoppers_pipeline(name):
    """wgmma (QGMMA for fp8) chained within each commit group, TMA loads, no spills; stream-K's fix-up with its one
    integer atomic, split-K's with none (its partials go to a second kernel, which is plain loads, adds and stores)."""
    kernel = gemm_tma.KERNELS[name]
    module = kernel.build("sm_90a")
    per = split_functions(module.sass())
    assert "C7510" not in module.log and "serializ" not in module.log.lower(), module.log  # C7510, C7514: wgmma waits
    split_k = gemm_tma.CONFIGS[name].schedule == "split-k"
    reductions = {gemm_tma.reduce_expression(d) for d in gemm_tma.CONFIGS[name].dtypes} if split_k else set()
    assert reductions <= set(module.symbols) and reductions <= set(kernel.kernel_names(kernel.stages[0]))
    for expr, symbol in module.symbols.items():
        sass = per[symbol]
        classes = instruction_classes(sass)
        if expr in reductions:
            assert "LDG.E.128" in sass and "ATOMG" not in sass and classes["wgmma_fp8"] == 0, expr
            assert classes["local_memory"] == 0 and module.resources()[expr]["local"] == 0, expr
            continue
        count, closing = wgmma_chain(sass)
        # K_STEPS (4) wgmma per m64 tile chained in each commit group, one group per K tile (fp8: per m64 tile and
        # 128-wide half of N), the mainloop inlined once per kind of unit (stream-K: whole tiles and shared ones)
        config = gemm_tma.CONFIGS[name]
        per_group = 4 if "E4M3" in expr else 4 * (config.block_m // 64 // config.consumers)
        assert count and count == per_group * closing, (expr, count, closing)
        assert classes["tma"] >= 2 and classes["mbarrier"] and classes["local_memory"] == 0, (expr, classes)
        assert (classes["wgmma_fp8"] > 0) == ("E4M3" in expr), expr
        # stream-K: the tile counter of the fix-up (an integer: no float is added atomically), one acquire-release
        # add per warpgroup and no thread's sequentially consistent fence; split-K: none
        assert ("ATOMG" in sass) != split_k, expr
        assert "MEMBAR.SC" not in sass, expr
        res = module.resources()[expr]
        assert res["local"] == 0 and res["stack"] == 0, (expr, res)


def test_fp8_pipelined_promotion_builds_without_serializing_wgmma():
    """GEMM_TMA_FP8_PIPELINED (tools/probe_llm.py fp8, not registered): both halves of a K tile issued as two groups,
    the first promoted under the second, on 128 x 192 tiles (two n96 partials beside 96 accumulators) and on the
    128-wide split-K tiles. ptxas must keep the wgmma asynchronous (no C7510 / C7514), with no spills."""
    narrow = gemm_tma.Config(192, 2, True, True, (4,), dtypes=("fp8e4m3",))
    builds = {
        "128x192": (narrow, gemm_tma.TmaGemm(narrow).with_defines("GEMM_TMA_FP8_PIPELINED=1")),
        "64x128 split-k": (
            gemm_tma.CONFIGS["64x128 split-k"],
            gemm_tma.KERNELS["64x128 split-k"].with_defines("GEMM_TMA_FP8_PIPELINED=1", stages=(4,)),
        ),
    }
    for name, (config, kernel) in builds.items():
        module = kernel.build("sm_90a")
        assert "C751" not in module.log and "serializ" not in module.log.lower(), (name, module.log)
        per = split_functions(module.sass())
        expr = config.name_expression(4, "fp8e4m3")
        sass = per[module.symbols[expr]]
        count, closing = wgmma_chain(sass)
        assert count and count == 4 * closing, (name, count, closing)  # 4 k-steps per half, one group per half
        classes = instruction_classes(sass)
        assert classes["wgmma_fp8"] > 0 and classes["local_memory"] == 0, (name, classes)
        assert module.resources()[expr]["local"] == 0, name


# The top rung's fp8 promotion schedules that tools/probe_llm.py fp8 times beside the registered one (not registered):
# quarters of N through two partials taken in turn, A from registers, and both.
TOP = dataclasses.replace(
    gemm_tma.CONFIGS["128x256x64 ws 2wg persistent tma-store"], dtypes=("fp8e4m3",), stages=(3, 4)
)
PROMOTIONS = {
    "quarters": ("GEMM_TMA_FP8_QUARTERS=1",),
    "A in registers": ("GEMM_TMA_FP8_A_REGS=1",),
    "quarters, A in registers": ("GEMM_TMA_FP8_QUARTERS=1", "GEMM_TMA_FP8_A_REGS=1"),
}


@pytest.mark.parametrize("name", PROMOTIONS)
def test_fp8_promotion_schedules_build_with_a_group_in_flight_under_the_adds(name):
    """Each K tile's groups (4 wgmma each: 4 quarters or 2 halves) stay asynchronous (no C7510 / C7514), with as many
    waits as groups; in quarters every wait but the last leaves one group running (DEPBAR.LE 1) while the partial
    before it is added; A from registers: ldmatrix feeds wgmma's register operand. No spills."""
    defines = PROMOTIONS[name]
    module = gemm_tma.TmaGemm(TOP).with_defines(*defines, stages=(3,)).build("sm_90a")
    assert "C751" not in module.log and "serializ" not in module.log.lower(), (name, module.log)
    expr = TOP.name_expression(3, "fp8e4m3")
    sass = split_functions(module.sass())[module.symbols[expr]]
    count, closing = wgmma_chain(sass)
    groups = 4 if "GEMM_TMA_FP8_QUARTERS=1" in defines else 2
    assert (count, closing) == (4 * groups, groups), (name, count, closing)
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d)", sass)
    assert waits == (["1", "1", "1", "0"] if groups == 4 else ["0", "0"]), (name, waits)
    register_a = re.findall(r"QGMMA\.\S+ R\d+, R\d+, gdesc", sass)
    classes = instruction_classes(sass)
    if "GEMM_TMA_FP8_A_REGS=1" in defines:
        assert len(register_a) == count and classes["ldmatrix"] == 4, (name, len(register_a), classes)
    else:
        assert not register_a and classes["ldmatrix"] == 0, name
    assert classes["local_memory"] == 0 and module.resources()[expr]["local"] == 0, name


# The fp8 rung on 128 x 128 tiles: K tiles promoted in pairs (GEMM_TMA_FP8_OVERLAP), and the same in clusters of two
# CTAs sharing B by TMA multicast (tools/probe_llm.py fp8 only; not registered).
SQUARE_FP8 = gemm_tma.CONFIGS["128x128x128 ws 2wg persistent tma-store"]
PAIRED_FP8 = dataclasses.replace(SQUARE_FP8, cluster=2)
WIDE_FP8 = gemm_tma.CONFIGS["128x144x128 ws 2wg persistent tma-store"]  # cuBLAS's tile width, also in pairs
# 192 x 128 on three consumer warpgroups, one partial each (tools/probe_llm.py fp8 only; not registered)
TALL_FP8 = gemm_tma.Config(128, 3, True, True, (4, 5), block_m=192, dtypes=("fp8e4m3",), group_m=16)
# the pairs rungs on stream-K with data-parallel waves first, TMA-store epilogue kept (tools/probe_llm.py fp8 only)
STREAMED_FP8 = {
    f"{w} stream-k": dataclasses.replace(c, schedule="stream-k", stages=(5, 6))
    for w, c in (("128x128", SQUARE_FP8), ("128x144", WIDE_FP8))
}
PAIRS_RUNGS = {
    "128x128": "128x128x128 ws 2wg persistent tma-store",
    "128x144": "128x144x128 ws 2wg persistent tma-store",
}


def _fp8_sass(config, kernel, stages):
    module = kernel.build("sm_90a")
    expr = config.name_expression(stages, "fp8e4m3")
    return module, expr, split_functions(module.sass())[module.symbols[expr]]


@pytest.mark.parametrize("stages", SQUARE_FP8.stages)
@pytest.mark.parametrize("rung", PAIRS_RUNGS)
def test_fp8_pairs_keep_a_group_in_flight_under_the_first_adds(rung, stages):
    """The registered fp8 rungs on 128 x 128 and 128 x 144 tiles: per pair of K tiles two groups of 4 wgmma (n128 /
    n144) into two partials, the first waited for with the second still running (DEPBAR.LE 1), then the second; a
    lone last K tile waits alone. No C7510 / C7514, no spills; QGMMA, TMA loads and stores (two boxes of C: 144's last
    16 columns go out as direct stores)."""
    name = PAIRS_RUNGS[rung]
    config = gemm_tma.CONFIGS[name]
    module, expr, sass = _fp8_sass(config, gemm_tma.KERNELS[name], stages)
    assert "C751" not in module.log, module.log
    assert wgmma_chain(sass) == (12, 3)
    assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d)", sass) == ["1", "0", "0"]
    assert len(re.findall(rf"QGMMA\.64x{config.block_n}x32", sass)) == 12, rung
    classes = instruction_classes(sass)
    assert classes["wgmma_fp8"] == 12 and classes["tma"] == 4 and classes["local_memory"] == 0, classes
    assert module.resources()[expr]["local"] == 0


@pytest.mark.parametrize("stages", TALL_FP8.stages)
def test_the_192x128_fp8_tile_runs_three_consumer_warpgroups_on_160_registers(stages):
    """Three consumer warpgroups of 64 x 128: the producer gives registers down to 24, the consumers take 160 (64
    accumulators and one 64-register partial: no pairs), one group of 4 n128 wgmma per K tile waited for before its
    adds; no spills, no C751x; A's 192-row box and B's, C in two boxes per warpgroup (two passes at 5 stages)."""
    module, expr, sass = _fp8_sass(TALL_FP8, gemm_tma.TmaGemm(TALL_FP8), stages)
    assert "C751" not in module.log, module.log
    assert TALL_FP8.threads == 512 and TALL_FP8.smem_bytes(stages) <= gemm_tma.SMEM_PER_BLOCK
    assert re.findall(r"USETMAXREG\.\S+\.CTAPOOL (?:UP0, )?(0x[0-9a-f]+)", sass) == ["0xa0", "0x18"], sass[:0]
    assert len(re.findall(r"QGMMA\.64x128x32", sass)) == 4
    assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d)", sass) == ["0"]
    classes = instruction_classes(sass)
    assert classes["tma"] == 4 and classes["local_memory"] == 0, classes
    assert module.resources()[expr]["local"] == 0
    assert TALL_FP8.c_passes(stages) == (2 if stages == 5 else 1)


def test_only_the_top_rung_keeps_its_wgmma_descriptors_in_uniform_registers_of_their_own():
    """Config.uniform_warpgroup (GEMM_TMA_WG_BROADCAST) on the 128 x 256 TMA-store rung: the warpgroup index
    broadcast from lane 0 (SHFL.IDX), so each fp8 half's four QGMMA read four different uniform descriptor registers,
    built before the group; the pairs rungs keep the per-thread index (all their QGMMA read one register quad,
    rewritten between them, when it is uniform: slower on the H200), and no descriptor of either is rebuilt whole per
    k-step (GEMM_TMA_DESC_PLUS)."""
    name = "128x256x64 ws 2wg persistent tma-store"
    top = gemm_tma.CONFIGS[name]
    assert top.uniform_warpgroup and "GEMM_TMA_WG_BROADCAST=1" in gemm_tma.KERNELS[name].defines()
    module, _, sass = _fp8_sass(top, gemm_tma.KERNELS[name], 3)
    descriptors = re.findall(r"QGMMA\.64x128x32\S* R\d+, gdesc\[(UR\d+)\]", sass)
    assert len(descriptors) == 8 and len(set(descriptors[:4])) == 4 and descriptors[:4] == descriptors[4:], descriptors
    assert "SHFL.IDX" in sass
    for rung in PAIRS_RUNGS.values():
        assert not gemm_tma.CONFIGS[rung].uniform_warpgroup
        assert not any("GEMM_TMA_WG_BROADCAST" in d for d in gemm_tma.KERNELS[rung].defines())
        assert "SHFL.IDX" not in _fp8_sass(gemm_tma.CONFIGS[rung], gemm_tma.KERNELS[rung], 5)[2]


@pytest.mark.parametrize(
    "name", [n for n, c in gemm_tma.CONFIGS.items() if c.tma_store and c.schedule == "tiles" and c.persistent]
)
def test_the_tma_store_epilogue_stages_c_with_stmatrix(name):
    """GEMM_TMA_STMATRIX: each warp stages four 8 x 8 matrices of C per stmatrix, so a thread's m64 tile takes one
    STSM per 16 of its whole boxes' columns (a 64 x 256 tile: 16), and no 4-byte shared store; built with 0, the
    4-byte stores (one per pair of columns) and no STSM."""
    config = gemm_tma.CONFIGS[name]
    stages, dtype = config.stages[0], config.dtypes[0]
    expr = config.name_expression(stages, dtype)
    module = gemm_tma.KERNELS[name].build("sm_90a")
    sass = split_functions(module.sass())[module.symbols[expr]]
    boxes = config.block_n // 64  # whole 64-column boxes of the tile
    assert len(re.findall(r"\bSTSM\.", sass)) == boxes * 4, (name, len(re.findall(r"\bSTSM\.", sass)))
    assert not re.findall(r"\bSTS \[", sass), name
    plain = gemm_tma.TmaGemm(config).with_defines("GEMM_TMA_STMATRIX=0", stages=(stages,)).build("sm_90a")
    plain_sass = split_functions(plain.sass())[plain.symbols[expr]]
    assert not re.findall(r"\bSTSM\.", plain_sass) and len(re.findall(r"\bSTS \[", plain_sass)) == boxes * 16, name


def test_fp8_cluster_build_multicasts_b_and_arrives_on_both_ctas():
    """The clustered build: one multicast TMA load of B per K tile beside A's own; consumers arrive on the empty
    barrier of both CTAs (two arrives per release) without a GPU-wide fence in the mainloop (.release.cluster would put
    MEMBAR.ALL.GPU before each); cluster barriers at the start and the end."""
    module, _, sass = _fp8_sass(PAIRED_FP8, gemm_tma.TmaGemm(PAIRED_FP8), 5)
    assert "C751" not in module.log, module.log
    assert len(re.findall(r"UTMALDG\.2D\.MULTICAST", sass)) == 1
    assert len(re.findall(r"UTMALDG\.2D ", sass)) == 1  # A, this CTA's own
    assert len(re.findall(r"UCGABAR_ARV", sass)) == 2 and len(re.findall(r"UCGABAR_WAIT", sass)) == 2
    assert len(re.findall(r"MEMBAR\.ALL\.GPU", sass)) <= 2  # the barriers' init fence and the final cluster barrier
    assert wgmma_chain(sass) == (12, 3)


def test_cluster_config_refuses_what_it_cannot_walk():
    with pytest.raises(ValueError, match="cluster must be 1 or 2"):
        dataclasses.replace(SQUARE_FP8, cluster=4)
    with pytest.raises(ValueError, match="persistent tile schedule"):
        dataclasses.replace(gemm_tma.CONFIGS["128x128 split-k"], cluster=2)


@pytest.mark.gpu
@pytest.mark.parametrize("build", ["rung", "cluster 2", "128x144", "192x128 3wg", *STREAMED_FP8])
def test_fp8_square_rung_matches_fp64_at_the_edges(build):
    """The 128 x 128 fp8 rung, its clustered build, the 128 x 144 rung and both on stream-K (whole tiles first where
    there are two waves of them, 2048 x 4352; the rest shared, fixed up in K order, the tile counters left at zero) on
    poisoned outputs, at the shallowest and
    deepest ring: M = 1 and 67 (a cluster's second CTA wholly past M: zero-filled A, no stores), M = 129 (its rows
    partly past M), N = 300 (not a multiple of 8: C stored directly; an edge tile of 44 columns, 144: 12) and 264 /
    520 / 4352 / 256 (144: edge tiles of 120, 88, 32 and 112 columns, the 16 directly stored columns past C's edge) and
    424 (144: an edge tile of 136, its last 16 columns half past the edge), K = 48 (below one K tile) and 4112 (an odd
    count of K tiles: the lone last one), more tiles than clusters (the persistent walk wraps), against fp64, twice:
    bit for bit the same."""
    paired = build == "cluster 2"
    config = {"rung": SQUARE_FP8, "cluster 2": PAIRED_FP8, "128x144": WIDE_FP8, "192x128 3wg": TALL_FP8}.get(build)
    config = config or STREAMED_FP8[build]
    kernel = gemm_tma.KERNELS[PAIRS_RUNGS["128x144"]] if build == "128x144" else gemm_tma.TmaGemm(config)
    for stages in (config.stages[0], config.stages[-1]):
        sizes = ((1, 300, 1040), (67, 264, 48), (129, 520, 4112), (2048, 4352, 512), (384, 256, 256), (200, 424, 272))
        for size in sizes:
            inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), "fp8e4m3")
            out = GEMM.make_output(inputs).fill_(float("nan"))
            launch = gemm_tma.Gemm(inputs, out, config, stages, kernel=kernel)
            launch()
            torch.cuda.synchronize()
            check = GEMM.check(out, GEMM.reference(inputs), "fp8e4m3")
            assert check.valid, (build, stages, size, check.message)
            first = out.clone()
            out.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            assert torch.equal(out, first), (build, stages, size, "not bit-reproducible")
            if paired:
                assert launch.grid % 2 == 0 and "clusters of 2" in launch.info.config, launch.info.config
            assert int(launch.counters.abs().sum()) == 0, (build, size, "tile counters not reset")


# On a GPU: M = 1, M not a multiple of 8, N not a multiple of 16, K below one K tile, a split remainder, more splits
# than K tiles (empty splits), a stream-K range that starts and ends inside tiles.
EDGES = [
    ((1, 300, 1040), None),
    ((13, 264, 80), None),
    ((67, 250, 48), 3),
    ((64, 512, 4112), None),
    ((200, 520, 16), 4),
    ((129, 257, 272), 7),
    ((300, 264, 1040), None),  # two tile rows of the 256-row tile, the second mostly past M
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", gemm_tma.DTYPES)
@pytest.mark.parametrize("name", SCHEDULED)
def test_schedules_match_fp64_at_the_edges_bit_reproducibly(name, dtype):
    config = gemm_tma.CONFIGS[name]
    for size, splits in EDGES:
        if dtype == "fp8e4m3" and size[2] % 16:
            continue
        for stages in config.stages[:1]:
            inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), dtype)
            out = GEMM.make_output(inputs).fill_(float("nan"))
            launch = gemm_tma.Gemm(
                inputs,
                out,
                config,
                stages,
                kernel=gemm_tma.KERNELS[name],
                splits=splits if config.schedule == "split-k" else None,
            )
            launch()
            torch.cuda.synchronize()
            check = GEMM.check(out, GEMM.reference(inputs), dtype)
            assert check.valid, (name, dtype, size, splits, check.message)
            first = out.clone()
            out.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            assert torch.equal(out, first), (name, dtype, size, "not bit-reproducible")
            assert int(launch.counters.abs().sum()) == 0, (name, size, "tile counters not reset")


@pytest.mark.gpu
@pytest.mark.parametrize("name", PROMOTIONS)
def test_fp8_promotion_schedules_match_fp64_at_the_edges(name):
    """The top rung's unregistered promotion schedules on poisoned outputs at both depths (3: C staged whole; 4: in
    two passes): M = 1 and 67 (A's rows past M zero-filled), N = 300 (an edge tile of 44 columns), K = 1040 and 48 (a
    partial K tile; below one), a tile count above the SMs (persistent tiles wrap), against fp64."""
    kernel = gemm_tma.TmaGemm(TOP).with_defines(*PROMOTIONS[name])
    for stages in TOP.stages:
        for size in ((1, 300, 1040), (67, 264, 48), (129, 520, 4112), (2048, 4352, 512)):
            inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), "fp8e4m3")
            out = GEMM.make_output(inputs).fill_(float("nan"))
            gemm_tma.Gemm(inputs, out, TOP, stages, kernel=kernel)()
            torch.cuda.synchronize()
            check = GEMM.check(out, GEMM.reference(inputs), "fp8e4m3")
            assert check.valid, (name, stages, size, check.message)


@pytest.mark.gpu
def test_fp8_pipelined_promotion_matches_fp64_at_the_edges():
    """The unregistered GEMM_TMA_FP8_PIPELINED builds that tools/probe_llm.py fp8 times, held to the registered rows'
    check: 128 x 192 persistent tiles with the TMA-store epilogue (edge tiles of N at 192 columns) and the 64 x 128
    split-K with a forced split count, on poisoned outputs."""
    narrow = gemm_tma.Config(192, 2, True, True, (3,), dtypes=("fp8e4m3",))
    builds = (
        (narrow, gemm_tma.TmaGemm(narrow).with_defines("GEMM_TMA_FP8_PIPELINED=1"), None),
        (
            gemm_tma.CONFIGS["64x128 split-k"],
            gemm_tma.KERNELS["64x128 split-k"].with_defines("GEMM_TMA_FP8_PIPELINED=1", stages=(4,)),
            3,
        ),
    )
    for config, kernel, splits in builds:
        for size in ((1, 300, 1040), (67, 250, 48), (129, 520, 4112), (256, 1000, 2048)):
            stages = kernel.stages[0]
            inputs = GEMM.make_inputs(size, sum(size), torch.device("cuda"), "fp8e4m3")
            out = GEMM.make_output(inputs).fill_(float("nan"))
            gemm_tma.Gemm(inputs, out, config, stages, kernel=kernel, splits=splits)()
            torch.cuda.synchronize()
            check = GEMM.check(out, GEMM.reference(inputs), "fp8e4m3")
            assert check.valid, (config.block_n, size, check.message)


def test_the_fp16_ladder_build_holds_only_rungs_with_an_fp16_build():
    """gemm_tma.build (the module Gemm launches fp16 from when given no kernel module) compiles exactly the fp16
    instantiations of the tile rungs that implement fp16, each of which their own kernel modules compile too (the
    SASS tests); the fp8-only rungs (128 x 128 x 128, 128 x 144 x 128) stay out: there is no fp16 Tile of 144."""
    ladder = set(gemm_tma.fp16_ladder())
    expected = {
        expr
        for name, config in gemm_tma.CONFIGS.items()
        if config.schedule == "tiles" and "fp16" in config.dtypes
        for stages in config.stages
        for expr in [config.name_expression(stages, "fp16")]
        if expr in gemm_tma.KERNELS[name].all_name_expressions()
    }
    assert ladder == expected and len(ladder) == sum(
        len(c.stages) for c in gemm_tma.CONFIGS.values() if c.schedule == "tiles" and "fp16" in c.dtypes
    )
    assert not any(", 144," in e for e in ladder)
    assert any(
        ", 144," in e for e in gemm_tma.KERNELS["128x144x128 ws 2wg persistent tma-store"].all_name_expressions()
    )


# GEMM_TMA_SK_FIXED_FINISHER (tools/probe_llm.py only): stream-K's fix-up with the tile's first unit as its finisher,
# on the registered stream-K row, the 64 x 128 decode tile on stream-K and the fp8 pairs rungs on stream-K
FIXED_FINISHER = {
    "128x256 stream-k": gemm_tma.CONFIGS["128x256 stream-k"],
    "64x128 stream-k": dataclasses.replace(gemm_tma.CONFIGS["64x128 split-k"], schedule="stream-k", persistent=True),
    **STREAMED_FP8,
}


def test_fixed_finisher_builds_hold_wgmma_and_their_flag_atomics():
    """Built for sm_90a on CPU: the fixed finisher's flags are a release store and an acquire load at GPU scope, with
    no counter atomic and no fence (the registered fix-up's atom.acq_rel is gone); the decode tile's 16-bit builds keep
    every value in registers."""
    for name, config in FIXED_FINISHER.items():
        shallowest = dataclasses.replace(config, stages=config.stages[:1])  # one depth: the fix-up is the same at all
        module = gemm_tma.TmaGemm(shallowest).with_defines("GEMM_TMA_SK_FIXED_FINISHER=1").build(gemm_tma.ARCH)
        for expr, sass in split_functions(module.sass()).items():
            classes = instruction_classes(sass)
            assert classes["wgmma"] > 0 and classes["tma"] > 0, (name, expr)
            assert "MEMBAR.SC" not in sass and "ATOM" not in sass, (name, expr)
            assert re.search(r"\bST\.E\.STRONG\.GPU\b|\bSTG\.E\.STRONG\.GPU\b", sass), (name, expr)
            assert re.search(r"\bLDG\.E\.STRONG\.GPU\b|\bLD\.E\.STRONG\.GPU\b", sass), (name, expr)
        if name == "64x128 stream-k":
            resources = module.resources()
            assert all(r["stack"] == 0 for e, r in resources.items() if "E4M3" not in e), resources


def test_the_128x192_rung_builds_n192_wgmma_without_spills():
    """The persistent 128 x 192 rung (16-bit B in three 64-column boxes, wgmma n192, 96 accumulators per thread),
    every depth and 16-bit type it registers, built for sm_90a on CPU: HGMMA.64x192x16 of the right type, three B
    boxes loaded per K tile beside A's, three C boxes stored per m64 tile, no local memory; no fp8 build, and its
    row says why."""
    name = "128x192x64 ws 2wg persistent tma-store"
    config = gemm_tma.CONFIGS[name]
    assert config.stages == (3, 4) and config.dtypes == ("fp16", "bf16")
    assert all(config.c_passes(s) == 1 for s in config.stages)  # three C boxes: no two-pass staging
    module = gemm_tma.KERNELS[name].build(gemm_tma.ARCH)
    functions = split_functions(module.sass())
    assert len(functions) == 4
    assert sum("BF16" in re.search(r"HGMMA\.64x192x16\.F32\S*", s).group() for s in functions.values()) == 2
    for expr, sass in functions.items():
        assert re.search(r"HGMMA\.64x192x16\.F32(\.BF16)?\b", sass), expr
        assert "HGMMA.64x256" not in sass and "HGMMA.64x128" not in sass, expr
        assert sass.count("UTMALDG") == 4 and sass.count("UTMASTG") == 3, expr
    assert all(r["local"] == 0 and r["stack"] == 0 for r in module.resources().values()), module.resources()
    variant = {v.label: v for v in variants("gemm")}[f"ptx:{name} tma+wgmma"]
    assert variant.dtype_skip_reason("fp8e4m3").startswith("no fp8e4m3 build: 16-bit only"), variant


@pytest.mark.gpu
@pytest.mark.parametrize("name", FIXED_FINISHER)
def test_fixed_finisher_stream_k_matches_fp64_bit_for_bit(name):
    """The fixed-finisher fix-up at the schedule's edges (EDGES: ranges that start and end inside tiles, M = 1, N not
    a multiple of 16, K below one K tile), a decode shape whose tiles each have four or five units (16 x 4096 x 14336
    on 64 x 128 tiles), and whole waves then shared ones (2048 x 4352 x 512), every dtype the config builds, against
    fp64, twice bit for bit, the flags left at zero."""
    config = FIXED_FINISHER[name]
    kernel = gemm_tma.TmaGemm(config).with_defines("GEMM_TMA_SK_FIXED_FINISHER=1")
    sizes = [size for size, _ in EDGES] + [(16, 4096, 14336), (2048, 4352, 512)]
    for dtype in config.dtypes:
        for size in sizes:
            if dtype == "fp8e4m3" and size[2] % 16:
                continue
            stages = config.stages[0]
            inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), dtype)
            out = GEMM.make_output(inputs)
            launch = gemm_tma.Gemm(inputs, out, config, stages, kernel=kernel)
            valid_twice(launch, out, inputs, dtype, (name, dtype, size))
            assert int(launch.counters.abs().sum()) == 0, (name, dtype, size, "flags not reset")


def _stream_k_walk(tiles: int, k_tiles: int, grid: int):
    """gemm_tma.cu's StreamK as it deals units, per block: (tile, k_begin, k_tiles, contributors, index, slot(index),
    slot(j) for every j) for the stream-K part (the data-parallel tiles are whole: no fix-up)."""
    dp = (tiles // grid - 1) * grid if tiles >= 2 * grid else 0
    iters = (tiles - dp) * k_tiles

    def start(c):
        return c * iters // grid

    def block_of(i):
        return ((i + 1) * grid - 1) // iters

    for c in range(grid):
        units, it, end = [], start(c), start(c + 1)
        while it < end:
            tile, k_begin = divmod(it, k_tiles)
            n = min(k_tiles - k_begin, end - it)
            first, last = block_of(tile * k_tiles), block_of(tile * k_tiles + k_tiles - 1)
            adjust = 1 if start(first) < tile * k_tiles else 0
            slots = [2 * first + 2 * j + (adjust if j == 0 else 0) for j in range(last - first + 1)]
            units.append((dp + tile, k_begin, n, last - first + 1, c - first, slots))
            it += n
        yield c, units


@pytest.mark.parametrize("grid", [4, 64, 132])
def test_fixed_finisher_waits_only_at_a_block_s_last_unit_on_other_blocks_first_units(grid):
    """What fix_up_fixed relies on, for StreamK's deal at many shapes: a shared tile's unit 0 starts at its first K
    tile and is its block's last unit (the only one that waits); every later unit j is its block's first, in the
    block's slot 2c, written once per launch (so a flag per slot suffices); contributors' slots are the next blocks';
    and every slot and flag lies inside the launcher's arrays (2 x grid slots, max(tiles, 2 x grid) flags)."""
    for tiles in (1, 3, grid - 1, grid + 1, 2 * grid, 2 * grid + 5, 7 * grid + 3):
        for k_tiles in (1, 2, 7, 33, 224):
            if tiles < 1:
                continue
            written = set()
            for c, units in _stream_k_walk(tiles, k_tiles, grid):
                for i, (_tile, k_begin, n, contributors, index, slots) in enumerate(units):
                    if contributors == 1:
                        continue
                    if index == 0:
                        assert k_begin == 0 and n < k_tiles and i == len(units) - 1, (tiles, k_tiles, c, i)
                    else:
                        assert i == 0 and k_begin > 0 and slots[index] == 2 * c, (tiles, k_tiles, c, i)
                        assert slots[index] not in written
                        written.add(slots[index])
                    assert slots[1:] == [2 * (c - index + j) for j in range(1, contributors)]
                    assert all(0 <= s < 2 * grid for s in slots)
            assert all(s < max(tiles, 2 * grid) for s in written)
