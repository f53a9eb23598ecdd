"""One launch of each GEMM kernel at 4096^3 after a warm-up, for `ncu` to profile (see tools/device_run.sh).
Usage: python3 tools/profile_gemm.py [ptx32|ptx64|triton] [stages]"""

import sys

import torch

from suite.problems import GEMM

which = sys.argv[1] if len(sys.argv) > 1 else "ptx32"
stages = int(sys.argv[2]) if len(sys.argv) > 2 else 4
a, b = GEMM.make_inputs((4096, 4096, 4096), 0, torch.device("cuda"))
c = torch.empty(4096, 4096, dtype=torch.float16, device="cuda")
if which.startswith("ptx"):
    from suite.ptx.gemm import Gemm

    fn = Gemm(a, b, c, stages, block_k=int(which[3:] or 32))
else:
    from suite.triton.gemm import Gemm

    fn = Gemm(a, b, c, stages)
for _ in range(3):
    fn()
torch.cuda.synchronize()
print(which, stages, "ok", float((c.double() - (a.double() @ b.double())).abs().max()))
