"""An example plugin (tests/test_plugins.py loads it): two vector variants defined outside the suite, each a kernel
module and one registration, with no change to suite code.

    python -m suite.run --plugin tests/plugins/example_plugin.py --list
    python -m suite.run --plugin tests/plugins/example_plugin.py --problem vector --variant "triton:plugin tiles"
    python -m suite.sanitize --plugin tests/plugins/example_plugin.py          # on a GPU

* ``cuda:plugin prefetch``: example_plugin.cu beside this file, compiled by NVRTC through the suite's contract
  (suite.kernel.NvrtcModule): STAGES 16-byte loads in flight per thread, in registers.
* ``triton:plugin tiles``: a Triton kernel (runs in the interpreter on a CPU), 1024-float tiles, 4 per program,
  swept over num_stages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import triton
import triton.language as tl

from suite.checks import check_cuda, check_stages, check_vector_operands
from suite.kernel import NvrtcModule, TritonModule
from suite.nvrtc import loader
from suite.registry import gpu_or_interpreter, needs_gpu, register_kernel

# ---------------------------------------------------------------------------------------------------------------
# cuda:plugin prefetch
# ---------------------------------------------------------------------------------------------------------------


class Prefetch(NvrtcModule):
    source = Path(__file__).with_name("example_plugin.cu")
    stages = (1, 2, 4)
    threads = 256
    stage_bytes = 0  # no shared memory: the stages are registers
    sanitize_sizes = (3 * 1024 + 5,)
    sass_requires = ("vector_load", "vector_store")  # LDG.E.128 and STG.E.128: float4 through registers

    def constants(self):
        return {"PLUGIN_THREADS": self.threads}

    def name_expressions(self, stages):
        return (f"scale2_prefetch<{stages}>",)

    def config(self):
        return f"{self.threads} threads, float4 loads in registers"

    def launch(self, inputs, out, stages):
        (x,) = inputs
        check_stages(stages, self.stages)
        check_vector_operands(x, out)
        check_cuda(("x", x), ("y", out))
        module = self.build()
        expr = self.name_expressions(stages)[0]
        kernel = module.kernel(expr)
        rounds = -(-(x.numel() // 4) // (self.threads * stages))
        grid = max(1, min(rounds, 8 * loader.num_sms()))
        args = (x.data_ptr(), out.data_ptr(), np.int64(x.numel()))

        def run():
            loader.launch(kernel, grid, self.threads, 0, *args)

        run.info = module.kernel_info(expr, 0, stages, threads=self.threads, grid=grid, config=self.config())
        return run


PREFETCH = Prefetch()

register_kernel(
    "vector",
    "cuda",
    "plugin prefetch",
    PREFETCH,
    gate=needs_gpu((8, 0)),
    description="example plugin: STAGES float4 loads in flight per thread (tests/plugins/example_plugin.cu)",
)

# ---------------------------------------------------------------------------------------------------------------
# triton:plugin tiles
# ---------------------------------------------------------------------------------------------------------------


@triton.jit
def _scale2_tiles(x_ptr, y_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr, NUM_STAGES: tl.constexpr):
    first = tl.program_id(0).to(tl.int64) * TILES
    for i in tl.range(0, TILES, num_stages=NUM_STAGES):
        offsets = (first + i) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


class Tiles(TritonModule):
    stages = (1, 2, 3)
    block, tiles = 1024, 4

    def launch(self, inputs, out, stages):
        (x,) = inputs
        check_stages(stages, self.stages)
        check_vector_operands(x, out)
        grid = (triton.cdiv(triton.cdiv(x.numel(), self.block), self.tiles),)
        return lambda: _scale2_tiles[grid](
            x, out, x.numel(), BLOCK=self.block, TILES=self.tiles, NUM_STAGES=stages, num_stages=stages
        )


register_kernel(
    "vector",
    "triton",
    "plugin tiles",
    Tiles(),
    gate=gpu_or_interpreter,
    description="example plugin: 1024-float tiles, 4 per program, tl.range(num_stages=S)",
)
