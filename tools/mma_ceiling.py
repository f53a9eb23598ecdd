"""The mma.sync issue ceiling at 1, 2 and 4 resident blocks of 256 threads per SM (8, 16, 32 warps), against cuBLAS
in the same run. Run on a GPU from the repository root: PYTHONPATH=. python3 tools/mma_ceiling.py"""

from pathlib import Path

import numpy as np
import torch
from triton.testing import do_bench

from suite.nvrtc import loader

ITERS, ACCS = 4096, 16
mod = loader.compile_cu(Path(__file__).with_name("mma_ceiling.cu"), (f"mma_loop<{ACCS}>",))
kernel = mod.kernel(f"mma_loop<{ACCS}>")
out = torch.zeros(256, device="cuda")
sms = loader.num_sms()
limit = loader.device_smem_limit()
for blocks_per_sm in (1, 2, 4):
    smem = min(limit, (228 * 1024) // blocks_per_sm - 1024)  # shared memory that admits exactly this many blocks
    occ = loader.occupancy(kernel, 256, smem)
    grid = sms * occ

    def fn(grid=grid, smem=smem):
        loader.launch(kernel, grid, 256, smem, out.data_ptr(), np.int32(ITERS), np.uint32(7))

    ms = float(np.median(do_bench(fn, warmup=25, rep=100, return_mode="all")))
    flops = grid * 8 * ITERS * ACCS * 2 * 16 * 8 * 16  # warps x iterations x mma x (2 * m * n * k)
    print(f"{occ} block(s)/SM = {8 * occ} warps/SM: {flops / ms / 1e9:.0f} TFLOP/s")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
ms = float(np.median(do_bench(lambda: a @ a, warmup=25, rep=200, return_mode="all")))
print(f"cuBLAS 8192^3: {2 * 8192**3 / ms / 1e9:.0f} TFLOP/s")
