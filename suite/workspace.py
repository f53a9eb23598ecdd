"""Workspaces of the split-K and stream-K launchers (every backend): fp32 scratch sized from one call's shape, owned
by one launcher. ``fresh``: from a memory pool of its own, i.e. device memory no kernel has written yet, so that a
pass that reads it before anything wrote it (the sanitizer's fix-up-order self-tests) is reported by initcheck."""

from __future__ import annotations

import torch


def new_workspace(shape: tuple[int, ...], device: torch.device, fresh: bool = False) -> torch.Tensor:
    """An uninitialized fp32 tensor of ``shape`` on ``device``; ``fresh``: from a private pool (where torch has
    one), which lives as long as the tensor."""
    if fresh and device.type == "cuda" and hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool"):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            workspace = torch.empty(shape, dtype=torch.float32, device=device)
        workspace._pipesuite_pool = pool  # the pool lives as long as the workspace
        return workspace
    return torch.empty(shape, dtype=torch.float32, device=device)
