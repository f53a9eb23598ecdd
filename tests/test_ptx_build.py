"""What the registry-wide build test (tests/test_variants.py: every NVRTC kernel for sm_80 and sm_90, no spills,
its declared SASS) does not say: the SASS classifier reads real listings, the KernelInfo of a cubin, and the
vector ring's machine code grows with its depth."""

from suite.ptx import gemm, vector
from suite.sass import instruction_classes, split_functions


def test_vector_ring_issues_more_copies_the_deeper_it_is():
    """The prologue issues STAGES - 1 tiles, the mainloop one more: the LDGSTS count grows with the ring."""
    classes = vector.build("sm_90").instruction_classes()
    counts = [classes[vector.name_expression(s)]["async_copy"] for s in vector.STAGES]
    assert counts == sorted(counts) and counts[0] < counts[-1], counts


def test_sass_classifier_reads_real_listings():
    sass = vector.build("sm_90").sass()
    per_function = split_functions(sass)
    assert set(per_function) == set(vector.build("sm_90").symbols.values())
    assert instruction_classes("") == {k: 0 for k in instruction_classes("")}
    fake = "        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;\n        /*0020*/  @!P0 HMMA.16816.F32 R8, R4, R6, R8 ;"
    got = instruction_classes(fake)
    assert got["ldmatrix"] == 1 and got["mma"] == 1 and got["async_copy"] == 0
    # plain vector memory: a 16-byte load with any further modifier counts, a narrower one does not
    plain = ("        /*0010*/  @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;\n"
             "        /*0020*/       LDG.E.64 R6, desc[UR4][R2.64] ;\n"
             "        /*0030*/       STG.E.128 desc[UR4][R8.64], R4 ;\n"
             "        /*0040*/       LDGSTS.E.BYPASS.128.ZFILL [R1], desc[UR4][R2.64] ;")
    got = instruction_classes(plain)
    assert (got["vector_load"], got["vector_store"], got["async_copy"]) == (1, 1, 1)


def test_kernel_info_from_the_cubin():
    info = gemm.build("sm_90", block_k=64).kernel_info(gemm.name_expression(3, True, 64), gemm.stage_bytes(64), 3,
                                           occupancy=1, threads=256, grid=42, config="c")
    assert info.smem_per_stage == 48 * 1024 and info.smem_total >= 3 * 48 * 1024
    assert 200 <= info.registers <= 255 and info.spill_bytes == 0
    assert info.sass["mma"] > 0 and info.sass["ldmatrix"] > 0 and info.sass["async_copy"] > 0
    assert (info.occupancy, info.threads, info.grid, info.config) == (1, 256, 42, "c")
