"""The PTX GEMM schedules for shapes with few output tiles (gemm_tma.cu: split-K, stream-K, 64-row tiles): the rule
that picks the split count, their machine code on CPU, and on a GPU their results at the edges of the schedule, bit
for bit the same run after run, with the tile counters left at zero."""

import re

import pytest
import torch
from gemm_checks import valid_twice

from suite.problems import GEMM
from suite.ptx import gemm_tma
from suite.registry import variants
from suite.sass import instruction_classes, split_functions, wgmma_chain

SCHEDULED = [name for name, c in gemm_tma.CONFIGS.items() if c.schedule != "tiles"]
# each schedule with the dtypes its config implements (a config that leaves one out has no build for it)
SCHEDULED_DTYPES = [(name, d) for name in SCHEDULED for d in gemm_tma.DTYPES if d in gemm_tma.CONFIGS[name].dtypes]


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
    """Each schedule's instantiations meet the module's declared ``sass_requires``, keep wgmma asynchronous (no ptxas
    serialization warning, C7510 / C7514; wgmma chained into commit groups), use no local memory, and add no float
    atomically (the fix-ups sum in K order: bit-reproducible). split-K's second-pass kernels are plain loads, adds and
    stores."""
    kernel = gemm_tma.KERNELS[name]
    module = kernel.build("sm_90a")
    per = split_functions(module.sass())
    assert "C751" not in module.log and "serializ" not in module.log.lower(), module.log
    split_k = gemm_tma.CONFIGS[name].schedule == "split-k"
    reductions = {gemm_tma.reduce_expression(d) for d in gemm_tma.CONFIGS[name].dtypes} if split_k else set()
    assert reductions <= set(module.symbols) and reductions <= set(kernel.kernel_names(kernel.stages[0]))
    for expr, symbol in module.symbols.items():
        sass = per[symbol]
        classes = instruction_classes(sass)
        assert classes["local_memory"] == 0 and module.resources()[expr]["local"] == 0, expr
        assert not re.search(r"\b(RED|ATOMG?)\.E\.ADD\.(F32|FTZ)", sass), expr  # no float added atomically
        if expr in reductions:
            assert classes["wgmma"] == 0 and classes["wgmma_fp8"] == 0, expr
            continue
        count, closing = wgmma_chain(sass)
        assert count and closing and count >= closing, (expr, count, closing)
        for cls, least in kernel.sass_minimums().items():
            assert classes[cls] >= least, (expr, cls, classes[cls], least)
        assert (classes["wgmma_fp8"] > 0) == ("E4M3" in expr), expr


# The fp8 rungs whose consumer warpgroups own one m64 tile at most 144 wide (K tiles promoted in pairs)
SQUARE_FP8 = gemm_tma.CONFIGS["128x128x128 ws 2wg persistent tma-store"]
WIDE_FP8 = gemm_tma.CONFIGS["128x144x128 ws 2wg persistent tma-store"]  # cuBLAS's promoted tile width
PAIRS_RUNGS = {
    "128x128": "128x128x128 ws 2wg persistent tma-store",
    "128x144": "128x144x128 ws 2wg persistent tma-store",
}


@pytest.mark.gpu
@pytest.mark.parametrize("rung", PAIRS_RUNGS)
def test_fp8_pairs_rungs_match_fp64_at_the_edges(rung):
    """The 128 x 128 and 128 x 144 fp8 rungs on poisoned outputs, at the shallowest and deepest ring: M = 1 and 67
    (A's rows past M zero-filled), M = 129 (a second tile row partly past M), N = 300 (not a multiple of 8: C stored
    directly; an edge tile of 44 columns, 144: 12) and 264 / 520 / 4352 / 256 (144: edge tiles of 120, 88, 32 and 112
    columns, the 16 directly stored columns past C's edge) and 424 (144: an edge tile of 136, its last 16 columns half
    past the edge), K = 48 (below one K tile) and 4112 (an odd count of K tiles: the lone last one), more tiles than
    SMs (the persistent walk wraps), against fp64, twice: bit for bit the same."""
    name = PAIRS_RUNGS[rung]
    config, kernel = gemm_tma.CONFIGS[name], gemm_tma.KERNELS[name]
    for stages in (config.stages[0], config.stages[-1]):
        sizes = ((1, 300, 1040), (67, 264, 48), (129, 520, 4112), (2048, 4352, 512), (384, 256, 256), (200, 424, 272))
        for size in sizes:
            inputs = GEMM.make_inputs(size, sum(size) + stages, torch.device("cuda"), "fp8e4m3")
            out = GEMM.make_output(inputs)
            launch = gemm_tma.Gemm(inputs, out, config, stages, kernel=kernel)
            valid_twice(launch, out, inputs, "fp8e4m3", (rung, stages, size))


# On a GPU: M = 1, M not a multiple of 8, N not a multiple of 16, K below one K tile, a split remainder, more splits
# than K tiles (empty splits), a stream-K range that starts and ends inside tiles, a split tail's shares in several
# rounds.
EDGES = [
    ((1, 300, 1040), None),
    ((13, 264, 80), None),
    ((67, 250, 48), 3),
    ((64, 512, 4112), None),
    ((200, 520, 16), 4),
    ((129, 257, 272), 7),
    ((300, 264, 1040), None),  # two tile rows of the 256-row tile, the second mostly past M
    ((1700, 2600, 1040), None),  # 154 tiles of 128x256 on an H100 / H200: a whole wave, then a split tail of 22
    ((1000, 6600, 3072), None),  # 208 of 128x256 there: a whole wave, then 76 in 5 shares each over three rounds
    ((1300, 2600, 1040), 3),  # 121 of 128x256, forced: 363 shares over 132 blocks, three rounds, no whole wave
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "dtype"), SCHEDULED_DTYPES)
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
                splits=splits if config.schedule in ("split-k", "split-tail") else None,  # forced: empty shares too
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
