"""Workspaces of the split-K and stream-K launchers (every backend): fp32 scratch sized from one call's shape, owned
by one launcher. ``fresh``: from a memory pool of its own, i.e. device memory no kernel has written yet, so that a
pass that reads it before anything wrote it (the sanitizer's fix-up-order self-tests) is reported by initcheck."""

from __future__ import annotations

import torch

# Every private pool made here, kept for the life of the process. A MemPool's destructor frees its blocks, and torch
# asserts (and terminates the process) if that happens while any thread routes allocations to a pool or captures a
# graph (`~MemPool` -> `captures_underway.empty()` fails), which the garbage collector can cause by freeing an old
# fault workspace inside the next one's use_mem_pool block. The pools serve only the
# fault self-tests' small workspaces (a few MB each).
_POOLS: list = []


def new_workspace(shape: tuple[int, ...], device: torch.device, fresh: bool = False) -> torch.Tensor:
    """An uninitialized fp32 tensor of ``shape`` on ``device``; ``fresh``: from a private pool of its own (where
    torch has them), never destroyed (above), so its memory is memory no kernel had written."""
    if fresh and device.type == "cuda" and hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool"):
        pool = torch.cuda.MemPool()
        _POOLS.append(pool)
        with torch.cuda.use_mem_pool(pool):
            return torch.empty(shape, dtype=torch.float32, device=device)
    return torch.empty(shape, dtype=torch.float32, device=device)
