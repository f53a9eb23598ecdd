"""How the streaming kernels (the vector problem, both backends) deal tiles to blocks, and what they keep in flight.

Little's law is the whole story of a streaming pipeline: a memory system of latency L delivers bandwidth B only if
B x L bytes of loads are in flight. A block keeps `tiles in flight x tile bytes` of loads outstanding; an SM holds
`resident blocks` of them. So the depth sweep fixes the residency (the schedule pins it) and varies stages and tile
size, and every row reports ``bytes_in_flight_per_sm = tiles in flight x tile bytes x resident blocks``.

Two schedules:

* ``Schedule(blocks_per_sm=k)``, persistent: grid = k x SMs and block b streams tiles b, b + grid, b + 2 grid, ...
  (a long run of tiles, many times the ring depth). The launcher pins the residency: the PTX kernels pad their
  shared memory so exactly k blocks fit on an SM (the occupancy calculator is asked to confirm); Triton cannot pad,
  so its programs are pinned by the grid alone (k x SMs programs, which the block scheduler spreads k per SM).
* ``Schedule(tiles_per_block=r)``, short runs: each block streams one run of r contiguous tiles and exits; blocks come
  and go as the hardware schedules them, the residency is whatever the kernel's resources allow, and with r tiles a
  block never has more than r tiles in flight however deep its ring is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    blocks_per_sm: int | None = None  # persistent: this many resident blocks per SM, pinned by the launcher
    tiles_per_block: int | None = None  # short runs: each block streams one run of this many tiles

    def __post_init__(self):
        if (self.blocks_per_sm is None) == (self.tiles_per_block is None):
            raise ValueError("a Schedule is either persistent (blocks_per_sm) or short runs (tiles_per_block)")
        for name in ("blocks_per_sm", "tiles_per_block"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be an int >= 1 (got {value!r})")

    @property
    def persistent(self) -> bool:
        return self.blocks_per_sm is not None

    @property
    def run(self) -> int:
        """Contiguous tiles per run, the kernels' ``run`` argument (runs are dealt to blocks round-robin)."""
        return 1 if self.persistent else self.tiles_per_block

    def grid(self, num_tiles: int, num_sms: int) -> int:
        if self.persistent:
            return self.blocks_per_sm * num_sms
        return max(1, -(-num_tiles // self.tiles_per_block))

    def tiles_in_flight(self, ring_tiles: int) -> int:
        """Tiles of loads one block keeps outstanding when its ring can hold ``ring_tiles`` of them: a short run
        caps it at the run's length."""
        return ring_tiles if self.persistent else min(ring_tiles, self.tiles_per_block)

    def describe(self, pinned_by: str = "shared-memory padding") -> str:
        if self.persistent:
            return f"persistent, {self.blocks_per_sm}/SM pinned by {pinned_by}, tiles grid-strided"
        tiles = "1 tile" if self.tiles_per_block == 1 else f"{self.tiles_per_block} tiles"
        return f"{tiles} per block, residency set by resources"


def bytes_in_flight_per_sm(tiles_in_flight: int, tile_bytes: int, resident_blocks_per_sm: int | None) -> int | None:
    """Loads an SM keeps outstanding: tiles in flight per block x tile bytes x resident blocks (None if unknown)."""
    if resident_blocks_per_sm is None:
        return None
    return tiles_in_flight * tile_bytes * resident_blocks_per_sm


def kib(nbytes: int) -> str:
    return f"{nbytes / 1024:g} KiB"


# The depth sweep's axes, shared by the three streaming kernels so their tables line up: tiles of 2-32 KiB, and every
# stage count of DEPTH_STAGES whose ring (plus 128 bytes of barriers) fits the 227 KiB an H100/H200 block may have.
DEPTH_TILE_BYTES = (2048, 4096, 8192, 16384, 32768)
DEPTH_STAGES = (1, 2, 3, 4, 6, 8)
BANDWIDTH_STAGES = (4,)  # the headline rows: each backend's best measured configuration, at one depth
_SMEM_PER_BLOCK_SM90 = 227 * 1024


def depth_stages(tile_bytes: int) -> tuple[int, ...]:
    return tuple(s for s in DEPTH_STAGES if 128 + s * tile_bytes <= _SMEM_PER_BLOCK_SM90)
