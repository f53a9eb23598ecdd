"""What the registry-wide build test (tests/test_variants.py: every NVRTC kernel for sm_80 and sm_90, no spills,
its declared SASS) does not say: the SASS classifier reads real listings, the KernelInfo of a cubin, and the
vector ring's machine code grows with its depth."""

import pytest

from suite.nvrtc import loader
from suite.probes import latency
from suite.ptx import gemm, vector, vector_bulk
from suite.sass import instruction_classes, opcode_counts, split_functions

ARCHS = ("sm_80", "sm_90")


def _count(ops: dict[str, int], opcode: str) -> int:
    """Instructions of one opcode, whatever their modifiers (opcode_counts keys are full mnemonics: UBLKCP.S.G)."""
    return sum(n for mnemonic, n in ops.items() if mnemonic.split(".")[0] == opcode)


VECTOR_CONFIGS = [vector.BANDWIDTH] + [vector.depth(t) for t in vector.DEPTH_TILE_BYTES]
BULK_CONFIGS = [vector_bulk.BANDWIDTH] + [vector_bulk.depth(t) for t in vector_bulk.DEPTH_TILE_BYTES]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("config", VECTOR_CONFIGS, ids=lambda c: c.name_expression(0))
def test_vector_builds_every_stage(arch, config):
    module = vector.build(arch, config)
    classes = module.instruction_classes()
    resources = module.resources()
    for stages in vector.STAGES:
        expr = config.name_expression(stages)
        # the prologue issues STAGES - 1 tiles, the mainloop one more: STAGES x chunks cp.async per thread, no more
        assert classes[expr]["async_copy"] == stages * config.chunks, f"{expr}: {classes[expr]}"
        assert classes[expr]["bulk_copy"] == 0
        assert classes[expr]["local_memory"] == 0, f"{expr}: local memory (spills) in SASS"
        assert resources[expr]["local"] == 0 and resources[expr]["stack"] == 0


@pytest.mark.parametrize("arch", ("sm_90", "sm_90a"))
@pytest.mark.parametrize("config", BULK_CONFIGS, ids=lambda c: c.name_expression(0))
def test_bulk_ring_builds_for_hopper(arch, config):
    """One UBLKCP (cp.async.bulk) per tile in the producer loop, mbarrier waits and arrivals, no cp.async, no spills."""
    module = vector_bulk.build(arch, config)
    per_symbol = split_functions(module.sass())
    resources = module.resources()
    for stages in vector_bulk.STAGES:
        expr = config.name_expression(stages)
        ops = opcode_counts(per_symbol[module.symbols[expr]])
        classes = instruction_classes(per_symbol[module.symbols[expr]])
        assert _count(ops, "UBLKCP") == 1 and classes["bulk_copy"] == 1, f"{expr}: {ops}"
        assert classes["async_copy"] == 0 and classes["tma"] == 0
        assert _count(ops, "SYNCS") >= 3, f"{expr}: mbarrier try_wait / arrive missing: {ops}"
        assert classes["local_memory"] == 0 and resources[expr]["local"] == 0 and resources[expr]["stack"] == 0


def test_bulk_ring_needs_sm_90():
    with pytest.raises(loader.KernelCompileError, match="sm_80"):
        loader.compile_cu(
            vector_bulk.SOURCE, (vector_bulk.BANDWIDTH.name_expression(2),), arch="sm_80", use_cache=False
        )


def test_latency_probe_builds():
    module = latency.build("sm_90")
    ops = opcode_counts(module.sass())
    assert _count(ops, "LDG") >= 1 and _count(ops, "LDGSTS") == 0
    assert module.resources()["pointer_chase"]["local"] == 0


def test_stream_kernel_info_without_a_gpu():
    """The depth rows' streaming fields: the residency the schedule pins and the bytes in flight it implies."""
    info = vector.describe("sm_90", vector.depth(4096), (3,))[3]
    assert (info.tile_bytes, info.resident_blocks_per_sm, info.bytes_in_flight_per_sm) == (4096, 1, 3 * 4096)
    assert info.threads == 128 and info.smem_per_stage == 4096 and info.sass["async_copy"] == 3 * 2  # 2 chunks
    info = vector_bulk.describe("sm_90", vector_bulk.depth(2048, blocks_per_sm=2), (8,))[8]
    assert (info.resident_blocks_per_sm, info.bytes_in_flight_per_sm, info.threads) == (2, 8 * 2048 * 2, 160)
    assert info.smem_total >= 8 * 2048 + vector_bulk.BARRIER_REGION
    # short runs of 2 tiles: a 4-deep ring still has only 2 tiles to put in flight; residency unknown without a GPU
    info = vector.describe("sm_90", vector.BANDWIDTH, (4,))[4]
    assert info.resident_blocks_per_sm is None and info.bytes_in_flight_per_sm is None
    assert vector.BANDWIDTH.schedule.tiles_in_flight(4) == 2


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_builds_every_stage(arch):
    module = gemm.build(arch)
    classes = module.instruction_classes()
    resources = module.resources()
    for stages in gemm.STAGES:
        for aligned in (True, False):
            expr = gemm.name_expression(stages, aligned)
            c = classes[expr]
            assert c["async_copy"] > 0, f"{expr}: no LDGSTS"
            assert c["ldmatrix"] > 0, f"{expr}: no LDSM"
            # 4 x 8 mma tiles per warp, 2 k-steps per K tile: at least 64 HMMA in the mainloop body
            assert c["mma"] >= 64, f"{expr}: {c['mma']} HMMA"
            assert c["local_memory"] == 0, f"{expr}: local memory (spills) in SASS"
            assert resources[expr]["local"] == 0 and resources[expr]["stack"] == 0, f"{expr}: {resources[expr]}"
            assert resources[expr]["registers"] <= 255


def test_sass_classifier_reads_real_listings():
    sass = vector.build("sm_90").sass()
    per_function = split_functions(sass)
    assert set(per_function) == set(vector.build("sm_90").symbols.values())
    assert instruction_classes("") == {k: 0 for k in instruction_classes("")}
    fake = "        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;\n        /*0020*/  @!P0 HMMA.16816.F32 R8, R4, R6, R8 ;"
    got = instruction_classes(fake)
    assert got["ldmatrix"] == 1 and got["mma"] == 1 and got["async_copy"] == 0
    # plain vector memory: a 16-byte load with any further modifier counts, a narrower one does not
    plain = (
        "        /*0010*/  @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;\n"
        "        /*0020*/       LDG.E.64 R6, desc[UR4][R2.64] ;\n"
        "        /*0030*/       STG.E.128 desc[UR4][R8.64], R4 ;\n"
        "        /*0040*/       LDGSTS.E.BYPASS.128.ZFILL [R1], desc[UR4][R2.64] ;"
    )
    got = instruction_classes(plain)
    assert (got["vector_load"], got["vector_store"], got["async_copy"]) == (1, 1, 1)


def test_kernel_info_from_the_cubin():
    info = gemm.build("sm_90", block_k=64).kernel_info(
        gemm.name_expression(3, True, 64), gemm.stage_bytes(64), 3, occupancy=1, threads=256, grid=42, config="c"
    )
    assert info.smem_per_stage == 48 * 1024 and info.smem_total >= 3 * 48 * 1024
    assert 200 <= info.registers <= 255 and info.spill_bytes == 0
    assert info.sass["mma"] > 0 and info.sass["ldmatrix"] > 0 and info.sass["async_copy"] > 0
    assert (info.occupancy, info.threads, info.grid, info.config) == (1, 256, 42, "c")


def test_gemm_zeroes_the_ring_stage_a_short_k_loop_never_fills():
    """The mainloop's last k-step reads fragments from the stage after the last tile; with fewer K tiles than stages
    no copy fills it, so the prologue zeroes it (a 16-byte store of zero registers, STS.128 [..], RZ). The synchronous
    STAGES = 1 kernel reads no stage past the last tile and has none."""
    import re

    from suite.sass import split_functions

    module = gemm.build("sm_90")
    listing = split_functions(module.sass())
    zero_store = re.compile(r"\bSTS\.128 \[[^\]]+\], RZ\b")
    for stages in gemm.STAGES:
        for aligned in (True, False):
            sass = listing[module.symbols[gemm.name_expression(stages, aligned)]]
            assert bool(zero_store.search(sass)) == (stages > 1), (stages, aligned)
