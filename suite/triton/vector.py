"""y = 2 * x in Triton: a persistent grid-stride loop whose loads ``num_stages`` may software-pipeline."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from suite.checks import check_same_device, check_shape, check_tensor
from suite.triton._compiled import kernel_info

STAGES = (1, 2, 3, 4)
BLOCK = 4096  # floats per tile: 16 KiB, the same tile as the PTX ring's
NUM_WARPS = 8
PROGRAMS_PER_SM = 4


@triton.jit
def scale2_kernel(
    # pointers
    x_ptr,
    y_ptr,
    # sizes
    n,
    # meta-parameters
    BLOCK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # -- this program's tiles: pid, pid + num_programs, ... (persistent grid-stride loop) --
    # -- 64-bit tile index, so tile * BLOCK cannot overflow past 2^31 elements --
    pid = tl.program_id(0).to(tl.int64)
    num_tiles = tl.cdiv(n, BLOCK)
    for tile in tl.range(pid, num_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        offsets = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, x * 2, mask=mask)


def check_inputs(x: torch.Tensor, y: torch.Tensor, stages: int) -> None:
    if stages not in STAGES:
        raise ValueError(f"stages must be one of {STAGES} (got {stages})")
    check_tensor(x, "x", dtype=torch.float32, ndim=1)
    check_tensor(y, "y", dtype=torch.float32, ndim=1)
    check_same_device(("x", x), ("y", y))
    check_shape(y, "y", tuple(x.shape))
    if x.numel() < 1:
        raise ValueError("x must hold at least one element")


def num_programs(n: int, device: torch.device) -> int:
    tiles = triton.cdiv(n, BLOCK)
    if device.type != "cuda":
        return min(tiles, 4)  # the interpreter: a few programs still exercise the grid-stride loop
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(tiles, sms * PROGRAMS_PER_SM))


class Scale2:
    """A launcher bound to (x, y, stages): ``Scale2(x, y, 3)()`` writes y = 2 * x."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, stages: int):
        check_inputs(x, y, stages)
        self.x, self.y, self.stages = x, y, stages
        self.grid = num_programs(x.numel(), x.device)
        self.compiled = None
        self.info = kernel_info(None, None, self._config(), self.grid)

    def _config(self) -> str:
        return f"BLOCK={BLOCK}, num_warps={NUM_WARPS}, {self.grid} programs"

    def __call__(self) -> None:
        compiled = scale2_kernel[(self.grid,)](
            self.x, self.y, self.x.numel(), BLOCK=BLOCK, NUM_STAGES=self.stages,
            num_warps=NUM_WARPS, num_stages=self.stages,
        )
        if self.compiled is None and compiled is not None:
            self.compiled = compiled
            self.info = kernel_info(compiled, None, self._config(), self.grid)


def scale2(x: torch.Tensor, stages: int = 2, out: torch.Tensor | None = None) -> torch.Tensor:
    y = torch.empty_like(x) if out is None else out
    Scale2(x, y, stages)()
    return y
