"""Where racecheck's hazards on the Gluon GEMM come from (not part of the suite). Run under compute-sanitizer:

    compute-sanitizer --tool racecheck --print-limit 100000 python3 tools/racecheck_gluon_ws.py empty|gemm

empty: a Gluon kernel whose warp_specialize partitions do nothing but write one shared word each (their own), so any
hazard racecheck reports is in Triton's partition dispatch, not in a kernel's own shared memory. gemm: the suite's
Gluon GEMM (suite/triton/gemm_gluon.py) at its sanitizer sizes. Compare the hazard addresses of the two."""

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _default(buf):
    buf.index(0).store(gl.full([32], 1, gl.int32, gl.BlockedLayout([1], [32], [gl.num_warps()], [0])))


@gluon.jit
def _worker(buf):
    buf.index(1).store(gl.full([32], 2, gl.int32, gl.BlockedLayout([1], [32], [1], [0])))


@gluon.jit
def empty_ws_kernel(out):
    buf = gl.allocate_shared_memory(gl.int32, [2, 32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    gl.warp_specialize([(_default, (buf,)), (_worker, (buf,))], [1], [24])


def main(which: str) -> None:
    if which == "empty":
        empty_ws_kernel[(132,)](torch.zeros(1, device="cuda"), num_warps=8)
    else:
        from suite.triton.gemm_gluon import KERNEL, GluonGemm

        for m, n, k in KERNEL.sanitize_sizes:
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            GluonGemm((a, b), c, 3)()
    torch.cuda.synchronize()
    print("done", which)


if __name__ == "__main__":
    main(sys.argv[1])
