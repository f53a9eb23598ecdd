"""The SASS facts the tables and tests read (suite.nvrtc.sass, next to the compiler and the cache it keeps its
listings in), under the name the kernels and tests import."""

from suite.nvrtc.sass import (
    INSTRUCTION_CLASSES,
    PendingClasses,
    cubin_instruction_classes,
    cuobjdump,
    disassemble,
    instruction_classes,
    opcode_counts,
    pending_classes,
    resource_usage,
    split_functions,
    summary,
    wait_for_listings,
    wgmma_chain,
)

__all__ = [
    "INSTRUCTION_CLASSES",
    "PendingClasses",
    "cubin_instruction_classes",
    "cuobjdump",
    "disassemble",
    "instruction_classes",
    "opcode_counts",
    "pending_classes",
    "resource_usage",
    "split_functions",
    "summary",
    "wait_for_listings",
    "wgmma_chain",
]
