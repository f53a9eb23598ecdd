"""Probe: does compute-sanitizer see the Hopper GEMM's ring races? Runs gemm_tma.cu healthy or with the producer's
empty-barrier wait removed (PIPESUITE_FAULT_SKIP_EMPTY_WAIT), on a long-K shape where the ring wraps many times.
Usage: python tools/probe_tma_fault.py healthy|broken"""

import sys

import torch

from suite.problems import GEMM
from suite.ptx import gemm_tma, loader

mode = sys.argv[1]
configs = [gemm_tma.CONFIGS[n] for n in ("128x128x64 ws", "128x256x64 ws 2wg persistent tma-store")]
if mode == "broken":
    exprs = tuple(c.name_expression(2) for c in configs)
    faulty = loader.compile_cu(gemm_tma.SOURCE, exprs, arch=gemm_tma.ARCH,
                               defines=gemm_tma.DEFINES + ("PIPESUITE_FAULT_SKIP_EMPTY_WAIT=1",))
    gemm_tma.build = lambda arch=gemm_tma.ARCH: faulty
for config in configs:
    for shape in ((256, 512, 4096), (200, 264, 72)):
        inputs = GEMM.make_inputs(shape, 3, torch.device("cuda"))
        out = GEMM.make_output(inputs)
        out.fill_(float("nan"))
        gemm_tma.Gemm(*inputs, out, config, 2)()
        torch.cuda.synchronize()
        print(mode, config.describe(), shape, GEMM.check(out, GEMM.reference(inputs)).valid, flush=True)
