"""The Hopper GEMM (gemm_tma.cu) builds for sm_90a without a GPU, and its machine code is Hopper's pipeline: TMA
loads (and stores), mbarrier waits, chained wgmma, no local memory, and no sign that ptxas serialized the wgmma."""

import pytest

from suite.ptx import gemm_tma
from suite.sass import split_functions, wgmma_chain

CASES = [
    (name, stages, dtype)
    for name, config in gemm_tma.CONFIGS.items()
    for stages in config.stages
    for dtype in config.dtypes
]


def _module(name: str):
    return gemm_tma.KERNELS[name].build("sm_90a")  # cached per kernel module


def test_build_log_has_no_serialization_warning():
    # ptxas writes its warnings into NVRTC's log (suite.nvrtc.loader keeps it); C7510 means every wgmma waits alone.
    for name in gemm_tma.CONFIGS:
        log = _module(name).log
        assert "C7510" not in log and "serializ" not in log.lower(), (name, log)


@pytest.mark.parametrize("name,stages,dtype", CASES, ids=[f"{n}:{s}:{d}" for n, s, d in CASES])
def test_every_instantiation_is_the_hopper_pipeline(name, stages, dtype):
    config = gemm_tma.CONFIGS[name]
    module = _module(name)
    expr = config.name_expression(stages, dtype)
    classes = module.instruction_classes()[expr]
    resources = module.resources()[expr]
    # K_STEPS (4) wgmma per m64 tile per K tile (fp8: per 128-wide half of N), QGMMA for fp8 operands
    m_tiles = config.block_m // 64 // config.consumers  # m64 wgmma tiles per consumer warpgroup
    assert classes["wgmma"] >= 4 * m_tiles, f"{expr}: {classes['wgmma']} HGMMA"
    assert (classes["wgmma_fp8"] > 0) == (dtype == "fp8e4m3"), f"{expr}: {classes}"
    # one A box and BLOCK_N / 64 B boxes per stage (fp8's K-major B: one box), plus BLOCK_N / 64 C boxes per m64
    # tile when storing with TMA
    loads = 1 + (1 if dtype == "fp8e4m3" else config.block_n // 64)
    assert classes["tma"] >= loads + (config.block_n // 64 if config.tma_store else 0), f"{expr}: {classes}"
    assert classes["mbarrier"] > 0, f"{expr}: no SYNCS (mbarrier) instructions"
    assert classes["local_memory"] == 0 and resources["local"] == 0 and resources["stack"] == 0, f"{expr}: spills"
    sass = split_functions(module.sass())[module.symbols[expr]]
    total, closing = wgmma_chain(sass)
    assert total and closing < total, f"{expr}: every HGMMA closes its own group: ptxas serialized the wgmma"


def test_wgmma_chain_detects_serialized_code():
    chained = (
        "/*0f00*/ HGMMA.64x256x16.F32 R24, gdesc[UR16].tnspB, R24 ;\n"
        "/*1090*/ HGMMA.64x256x16.F32 R24, gdesc[UR16].tnspB, R24, gsb0 ;"
    )
    serialized = chained.replace("R24 ;", "R24, gsb0 ;")
    assert wgmma_chain(chained) == (2, 1)
    assert wgmma_chain(serialized) == (2, 2)


def test_stage_lists_are_the_rings_that_fit():
    """Every depth listed fits; one more would not (or would pass the kernel's limit of 8 stages)."""
    limit = 227 * 1024  # an H100 / H200 block may opt in to 227 KiB, dynamic and static shared memory together
    for name, config in gemm_tma.CONFIGS.items():
        static = _module(name).resources()[config.name_expression(config.stages[0], config.dtypes[0])]["static_smem"]
        assert all(config.smem_bytes(s) + static <= limit for s in config.stages), name
        deeper = max(config.stages) + 1
        assert deeper > 8 or config.smem_bytes(deeper) + static > limit, f"{name}: a deeper ring would fit too"


def test_sm90_without_a_is_refused_by_ptxas():
    """wgmma and setmaxnreg exist only on sm_90a: a plain sm_90 build of the same source must not silently pass."""
    from suite.nvrtc import loader

    with pytest.raises(loader.KernelCompileError):
        loader.compile_cu(
            gemm_tma.SOURCE,
            (gemm_tma.CONFIGS["128x128x64 ws"].name_expression(2),),
            arch="sm_90",
            defines=gemm_tma.DEFINES,
            use_cache=False,
        )


@pytest.mark.parametrize("off_by", [-16, 1024])
def test_a_launcher_smem_figure_that_drifts_from_the_kernels_layout_fails_the_build(off_by):
    """The shared-memory layout is declared once: the kernel static_asserts the launcher's figure (Config.smem_bytes,
    passed as PIPESUITE_SMEM_FIGURES) against its own, so a figure off by a few bytes, or by an atom, does not build."""
    from suite.nvrtc import loader

    config = gemm_tma.CONFIGS["128x256x64 ws 2wg persistent tma-store"]
    stages = config.stages[-1]  # C staged in two passes
    figures = [(key, n + off_by) for key, n in config.smem_figures() if key[0] == stages]
    with pytest.raises(loader.KernelCompileError, match="shared-memory figure"):
        loader.compile_cu(
            gemm_tma.SOURCE,
            (config.name_expression(stages),),
            arch="sm_90a",
            defines=(*gemm_tma.DEFINES, gemm_tma.smem_define(figures)),
            use_cache=False,
        )


def test_every_hopper_module_passes_its_smem_figures():
    """Every Hopper GEMM module (and the fp16 ladder build) hands the kernel its shared-memory figures to check."""
    from suite.ptx import gemm_decode

    modules = [*gemm_tma.KERNELS.values(), gemm_decode.KERNEL, gemm_decode.MID]
    assert all(any(d.startswith("PIPESUITE_SMEM_FIGURES=") for d in m.defines()) for m in modules)


def test_the_ring_fault_runs_where_the_producer_can_lap_the_consumer():
    """The skip-empty-wait fault only shows when the producer refills a stage: the sanitizer launches it at a size
    whose K loop is several times longer than the ring (the first sanitize size has one K tile)."""
    fault = gemm_tma.SKIP_EMPTY_WAIT
    m, n, k = fault.size
    assert -(-k // gemm_tma.block_k("fp16")) >= 4 * max(fault.stages)
