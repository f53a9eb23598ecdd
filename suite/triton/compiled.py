"""KernelInfo for a kernel Triton compiled (none under the interpreter): resources from its metadata, SASS classes
from its cubin, occupancy from the same limits the hardware applies."""

from __future__ import annotations

from suite.info import KernelInfo
from suite.sass import pending_classes

# Per-SM limits of sm_80 / sm_90 (identical on both): registers, threads, resident blocks.
_REGS_PER_SM, _THREADS_PER_SM, _BLOCKS_PER_SM = 65536, 2048, 32


def kernel_info(compiled, smem_per_stage: int | None, config: str, grid: int) -> KernelInfo:
    if compiled is None or not hasattr(compiled, "metadata"):  # interpreter: nothing was compiled
        return KernelInfo(smem_per_stage=smem_per_stage, config=config, grid=grid)
    import torch

    threads = compiled.metadata.num_warps * 32
    shared = int(compiled.metadata.shared)
    regs = int(compiled.n_regs)
    smem_per_sm = torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_multiprocessor
    by_regs = _REGS_PER_SM // max(1, regs * threads)
    by_smem = smem_per_sm // shared if shared else _BLOCKS_PER_SM
    occupancy = min(by_regs, by_smem, _THREADS_PER_SM // threads, _BLOCKS_PER_SM)
    return KernelInfo(
        smem_per_stage=smem_per_stage,
        smem_total=shared,
        registers=regs,
        spill_bytes=int(compiled.n_spills) * 4,
        occupancy=occupancy,
        threads=threads,
        grid=grid,
        sass=pending_classes(compiled.asm["cubin"]),  # its cuobjdump in the background; reading it waits
        config=config,
    )
