"""What the tables report about a compiled kernel, whichever backend built it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields


@dataclass
class KernelInfo:
    smem_per_stage: int | None = None  # bytes of shared memory one pipeline stage holds
    smem_total: int | None = None  # bytes of shared memory per block (dynamic + static)
    registers: int | None = None  # per thread
    spill_bytes: int | None = None  # local memory per thread (register spills, stack arrays); 0 = none
    occupancy: int | None = None  # resident blocks per SM
    threads: int | None = None  # per block
    grid: int | None = None  # blocks launched
    # instruction class -> count (suite.sass.INSTRUCTION_CLASSES); a suite.sass.PendingClasses while its cuobjdump
    # still runs in the background (reading it waits)
    sass: Mapping[str, int] = field(default_factory=dict)
    stages: int | None = None  # pipeline depth, where the kernel chose it itself (the autotuned variant)
    config: str = ""  # backend-specific configuration, e.g. the autotuner's choice
    # Streaming kernels (suite.streaming): the bytes of one tile, the resident blocks per SM the launch pins (not a
    # guess), and the loads an SM keeps outstanding = tiles in flight per block x tile bytes x resident blocks.
    tile_bytes: int | None = None
    resident_blocks_per_sm: int | None = None
    bytes_in_flight_per_sm: int | None = None
    note: str = ""  # what the row must say about this build (e.g. "not pipelined"); the driver appends it to the note

    def as_dict(self, sass: bool = True) -> dict:
        """The fields as a dict (``sass`` a plain dict, waited for when pending; left out when ``sass`` is False)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sass"}
        return out | ({"sass": dict(self.sass)} if sass else {})
