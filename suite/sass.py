"""What a kernel's machine code contains, read from ``cuobjdump -sass`` text (works without a GPU).

Shared by both backends: the PTX loader disassembles NVRTC's cubins, the Triton side disassembles Triton's cubins,
and the driver reports the same instruction classes for each.
"""

from __future__ import annotations

import re

# SASS opcode (the mnemonic before the first '.') -> the class the tables report.
INSTRUCTION_CLASSES: dict[str, tuple[str, ...]] = {
    "async_copy": ("LDGSTS",),  # cp.async global -> shared
    "ldmatrix": ("LDSM",),  # ldmatrix shared -> registers
    "mma": ("HMMA",),  # mma.sync on the tensor cores (Ampere path)
    "wgmma": ("HGMMA",),  # warpgroup mma (Hopper path)
    "tma": ("UTMALDG", "UTMASTG", "UBLKCP"),  # bulk / tensor copies through the copy engine
    "local_memory": ("LDL", "STL"),  # register spills or stack arrays
}

_FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)
_OPCODE_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def split_functions(sass: str) -> dict[str, str]:
    """Per kernel symbol, its part of a cuobjdump -sass listing."""
    marks = list(_FUNCTION_RE.finditer(sass))
    return {m[1]: sass[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(sass))] for i, m in enumerate(marks)}


def opcode_counts(sass: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in _OPCODE_RE.findall(sass):
        counts[op] = counts.get(op, 0) + 1
    return counts


def instruction_classes(sass: str) -> dict[str, int]:
    """How many instructions of each class in INSTRUCTION_CLASSES the listing holds (0 when absent)."""
    counts = opcode_counts(sass)
    return {cls: sum(counts.get(op, 0) for op in ops) for cls, ops in INSTRUCTION_CLASSES.items()}


def summary(classes: dict[str, int]) -> str:
    """Short form for a table cell, e.g. ``LDGSTS LDSM HMMA``: the opcodes of the classes present (spills excepted)."""
    return " ".join(INSTRUCTION_CLASSES[c][0] for c, n in classes.items() if n and c != "local_memory") or "-"
