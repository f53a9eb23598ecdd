"""A small program for Nsight Compute to profile: one launch each of the PTX GEMMs (mma.sync and TMA + wgmma) and
the vector ring, at 2048^3 / 2^26. Usage: ncu ... python tools/ncu_target.py"""

import torch

from suite.problems import GEMM, VECTOR
from suite.registry import variants

for v in variants():
    if v.backend != "ptx" or v.skip_reason():
        continue
    problem = GEMM if v.problem == "gemm" else VECTOR
    size = (2048, 2048, 2048) if v.problem == "gemm" else 2**26
    inputs = problem.make_inputs(size, 1, torch.device("cuda"))
    out = problem.make_output(inputs)
    v.factory(inputs, out, v.stages[-1] if v.stages[-1] <= 3 else 3)()
torch.cuda.synchronize()
