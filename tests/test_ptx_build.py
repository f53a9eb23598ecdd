"""Every PTX module builds for sm_80 and sm_90 without a GPU, and its machine code is what the design says."""

import pytest

from suite.ptx import gemm, vector
from suite.sass import instruction_classes, split_functions

ARCHS = ("sm_80", "sm_90")


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_builds_every_stage(arch):
    module = vector.build(arch)
    classes = module.instruction_classes()
    resources = module.resources()
    for stages in vector.STAGES:
        expr = vector.name_expression(stages)
        assert classes[expr]["async_copy"] >= 4, f"{expr}: no LDGSTS (cp.async) in SASS"
        assert classes[expr]["local_memory"] == 0, f"{expr}: local memory (spills) in SASS"
        assert resources[expr]["local"] == 0 and resources[expr]["stack"] == 0
    # the prologue issues STAGES - 1 tiles, the mainloop one more: LDGSTS count grows with the ring
    counts = [classes[vector.name_expression(s)]["async_copy"] for s in vector.STAGES]
    assert counts == sorted(counts) and counts[0] < counts[-1]


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


def test_kernel_info_from_the_cubin():
    info = gemm.build("sm_90", block_k=64).kernel_info(gemm.name_expression(3, True, 64), gemm.stage_bytes(64), 3,
                                           occupancy=1, threads=256, grid=42, config="c")
    assert info.smem_per_stage == 48 * 1024 and info.smem_total >= 3 * 48 * 1024
    assert 200 <= info.registers <= 255 and info.spill_bytes == 0
    assert info.sass["mma"] > 0 and info.sass["ldmatrix"] > 0 and info.sass["async_copy"] > 0
    assert (info.occupancy, info.threads, info.grid, info.config) == (1, 256, 42, "c")
