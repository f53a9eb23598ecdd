"""The GPU's idle global-memory latency, measured by the suite itself: a single-thread pointer chase (latency.cu)
over a buffer much larger than L2. Little's law (suite.driver.depth_plot) compares the streaming kernels with it.

The chase runs twice, short and long, timed with CUDA events; latency = (long - short) / (extra steps), so launch
overhead and the first misses cancel.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from suite.nvrtc import loader

SOURCE = Path(__file__).with_name("latency.cu")
LINE_BYTES = 128
REGION_BYTES = 2 * 1024 * 1024  # lines are visited in random order within a region, regions in order
BUFFER_BYTES = 512 * 1024 * 1024  # > 8x the 60 MiB L2 of an H200
STEPS = (1 << 14, 1 << 17)  # short and long chase


@functools.cache
def build(arch: str | None = None) -> loader.CompiledModule:
    return loader.compile_cu(SOURCE, ("pointer_chase",), arch=arch)


def chase_order(num_lines: int, lines_per_region: int, generator: torch.Generator, device) -> torch.Tensor:
    """The order the chase visits lines in: each region's lines shuffled, regions in sequence (int64 line indices)."""
    regions = num_lines // lines_per_region
    keys = torch.rand(regions, lines_per_region, generator=generator, device=device)
    order = keys.argsort(dim=1) + torch.arange(regions, device=device)[:, None] * lines_per_region
    return order.reshape(-1)


def chase_buffer(nbytes: int, seed: int, device) -> tuple[torch.Tensor, int]:
    """A buffer of ``nbytes`` whose lines form one cycle in ``chase_order``; returns it and the first line."""
    num_lines = nbytes // LINE_BYTES
    words = LINE_BYTES // 4
    g = torch.Generator(device=device).manual_seed(seed)
    order = chase_order(num_lines, REGION_BYTES // LINE_BYTES, g, device)
    buf = torch.zeros(num_lines, words, dtype=torch.int32, device=device)
    buf[order, 0] = torch.roll(order, -1).to(torch.int32)  # line order[i] points at order[i + 1], the last at the first
    return buf.reshape(-1), int(order[0])


def measure_ns(nbytes: int = BUFFER_BYTES, steps: tuple[int, int] = STEPS, seed: int = 0) -> float:
    """Nanoseconds per dependent load (needs a GPU)."""
    device = torch.device("cuda")
    buf, first = chase_buffer(nbytes, seed, device)
    if max(steps) >= buf.numel() * 4 // LINE_BYTES:
        raise ValueError("the chase must be shorter than the cycle: every step has to touch a new line")
    kernel = build().kernel("pointer_chase")
    out = torch.empty(1, dtype=torch.int32, device=device)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=device)
    elapsed = []
    for n in steps:
        flush.zero_()  # evict the buffer's lines (written just above) from L2
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loader.launch(kernel, 1, 1, 0, buf.data_ptr(), np.int64(n), np.uint32(first), out.data_ptr())
        end.record()
        end.synchronize()
        elapsed.append(start.elapsed_time(end) * 1e6)  # ms -> ns
    return (elapsed[1] - elapsed[0]) / (steps[1] - steps[0])
