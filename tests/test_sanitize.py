"""The sanitizer report parser (CPU), and on a GPU the self-test: a broken variant must be reported as a race."""

import shutil

import pytest

from suite.sanitize import normalize, parse, run_tool

# Shaped like compute-sanitizer 2025's real output on an H200 (racecheck of the broken GEMM, abridged).
REPORT = """========= COMPUTE-SANITIZER
========= Error: Potential WAR hazard detected at __shared__ 0x1000 in block (0,0,0) :
=========     Read Thread (96,0,0) at void gemm_f16_f32acc<(int)1, (bool)1, (int)32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1620
=========     Write Thread (192,0,0) at void gemm_f16_f32acc<(int)1, (bool)1, (int)32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1250
=========     Current Value : 111, Incoming Value : 0
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame:  [0x4cd39] in cydriver.cpython-312-x86_64-linux-gnu.so
=========
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuGetProcAddress_v2.
=========
CASE ptx:128x256x32 mma.sync stages=1 shape=200x264x72 valid=True
========= Error: Race reported between Write access at void gemm_f16_f32acc<1, false, 32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1a0
=========     and Read access at void gemm_f16_f32acc<1, false, 32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1c0 [512 hazards]
=========
========= Invalid __global__ write of size 4 bytes
=========     at void scale2_ring<(int)128, (int)1, (int)3>(const float *, float *, long long, int)+0x70
=========     by thread (0,0,0) in block (0,0,0)
=========
========= RACECHECK SUMMARY: 3 hazards displayed (239712 errors, 38592 warnings)
"""


def test_parse_attributes_findings_to_instantiations():
    total, per_kernel = parse(REPORT)
    assert total == 239712  # all errors, not the displayed hazards
    assert per_kernel == {"gemm_f16_f32acc<1, true, 32>": 1, "gemm_f16_f32acc<1, false, 32>": 1,
                          "scale2_ring<128, 1, 3>": 1}
    assert normalize("scale2_bulk_ring<(int)4, (int)1, (int)4>") == "scale2_bulk_ring<4, 1, 4>"
    assert parse("========= ERROR SUMMARY: 0 errors\n") == (0, {})
    assert parse("no sanitizer output")[0] is None  # a tool that did not run is not 'clean'


@pytest.mark.gpu
@pytest.mark.skipif(not shutil.which("compute-sanitizer"), reason="needs compute-sanitizer")
def test_racecheck_catches_the_missing_reuse_barrier(tmp_path):
    total, per_kernel, report = run_tool("racecheck", "broken", tmp_path)
    assert total and total > 0, report[-2000:]
