"""Decode GEMM in hand PTX: C = A @ B for few token rows (any M; built for up to a few hundred) against a wide weight
B (K x N), computed swapped, C^T = B^T A^T, by ``gemm_decode.cu``'s ``gemm_tma_decode`` (TMA into an mbarrier ring,
wgmma, a producer warp and one to three consumer warpgroups; sm_90a only; fp16, bf16 and fp8 e4m3, fp8 promoted per 128
of K as cuBLAS is).

The tile rungs and the 64 x 128 split-K put the tokens on wgmma's M side, 64 rows per warpgroup at least: at M = 16
three quarters of every wgmma, and of every A stage, are padding. Swapped, the weight's N runs along wgmma's M (64
weight columns per consumer warpgroup, read transposed from B's N-major box as the tile rungs read B; fp8's B, given N x
K, is wgmma's K-major A as it is) and the tokens along wgmma's N (the decode build's BLOCK_T = 8..64, the mid-M
build's 64..208 by 8: wgmma's N may be any multiple of 8, where ``tl.dot`` takes 16 at least): every row of every
wgmma is weight, and the ring holds weight, up to 256 deep in K per stage.

The rule (``plan``), from the shape only, as the Triton decode kernel's (suite.triton.gemm_decode.plan) but for
wgmma's N of 8:

* BLOCK_T = the power of two >= M, between 8 and 64; more tokens take several token tiles, neighbours in the walk
  (they read the same weight boxes at about the same time, so the weight comes from DRAM about once);
* BK, the K of a stage, = the most K atoms (4, 2, 1: 256, 128 or 64 of K, fp8 twice that) whose stage
  ((BW + BLOCK_T) x 128 bytes per atom) is at most STAGE_LIMIT: 2-4 deep rings fit 227 KiB (STAGES);
* BW in {128, 64} (two or one consumer warpgroups) and the split count are chosen together, for the ring's depth
  S: the split count is the fewest (within two waves of units, >= MIN_K_STAGES_PER_SPLIT stages per split) whose
  units keep IN_FLIGHT_TARGET bytes of weight in flight, units x (S - 1) x the weight's stage bytes (Little's law:
  the bytes HBM needs outstanding to stream at its pace); where none does, the wave rule's
  (suite.waves.wave_split_count). Then the pair with the fewest splits (a split adds a workspace written and read
  again and the fix-up's wait), then the best wave efficiency, then the wider tile. The wave rule alone splits
  shapes whose unsplit units already keep enough weight in flight, which is slower (docs/results.md).
* The grid is persistent (suite.waves.persistent_grid): one block per SM at most walks units b, b + grid, ..., the
  ring running on across units.

Splits > 1: each unit stores its fp32 partial into its split's M x N slice of a workspace of this launcher's own and
arrives on its tile's counter; the last split to arrive sums the slices in split order and stores C (a serialized
fix-up in the kernel, no second pass): bit-reproducible, no float atomics.

The mid-M build (``MID``, ``mid_plan``; fp16, bf16 and fp8) is the same kernel for a few hundred tokens, where the tile
rungs pad M to a multiple of 128 rows and their tile counts fall between waves: 128 or 192 weight columns (two or three
consumer warpgroups, given the producer's registers) x 64-208 tokens by 8 (M over a few tiles, rounded up to 8), or at
16 bits past 1024 tokens the wide tile's 256 (two m64 weight tiles on each of two consumers) x 64-192 tokens, the tile
whose walk suite.waves.mid_tile models fastest (M = 341 x N = 6144: four token tiles of 88 on 192 weight columns, 128
tiles in one wave, where 128x192 rungs make 96), 128 bytes of K per stage (64 of K, fp8 128: tiles up to 160 tokens,
promoted in pairs of stages up to 104), and the split tail's walk (whole tiles in persistent waves, then the last
partial wave's tiles split in K, summed by the same fix-up). Each tile is compiled on demand (``MidModule``).

K % 8 != 0 (fp8: K % 16) is refused (TMA needs 16-byte rows of A); N % 8 != 0 copies a 16-bit B to a padded pitch on
every call (counted in the time, said in the row), as the tile rungs do (fp8's B, N x K, has K-byte rows). Any M runs
(several token tiles of 64 above 64 rows), so the row exists at every shape of the llm and long-k sets; past a few
hundred tokens the tile rungs are the kernels for it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from suite.checks import check_cuda, check_stages, gemm_operands
from suite.kernel import Fault, KernelInfo, NvrtcModule
from suite.nvrtc import loader
from suite.problem_types import meta_tensor
from suite.problems import BadInput
from suite.ptx import gemm_tma
from suite.ptx.gemm_tma import (
    ALIGN_SLACK,
    ARCH,
    BARRIER_BYTES,
    DEFINES,
    ELEMENT,
    FLAG_BYTES,
    SWIZZLE_BYTES,
    WG_THREADS,
)
from suite.waves import (
    MID_CONSUMERS,
    MID_LEAST_TOKENS,
    MID_MOST_TOKENS_FOR,
    MID_WIDE_CONSUMERS,
    MID_WIDE_MOST_TOKENS,
    mid_ring_bytes,
    mid_stage_k,
    mid_tile,
    mid_tile_ok,
    mid_wide_tile_ok,
    persistent_grid,
    wave_efficiency,
    wave_split_count,
)
from suite.workspace import new_workspace

SOURCE = Path(__file__).with_name("gemm_decode.cu")
DTYPES = ("fp16", "bf16", "fp8e4m3")
ATOM_BYTES_K = SWIZZLE_BYTES  # a K atom: one 128-byte swizzled row of K (64 of K at 16 bits, 128 at fp8)
BLOCK_TS = (8, 16, 32, 64)  # token rows per unit: wgmma's N
CONSUMERS = (2, 1)  # consumer warpgroups, 64 weight columns each: BW = 128 or 64, the wider first
K_ATOMS = (4, 2, 1)  # BK = 256, 128, 64: a TMA box has at most 256 rows; the deeper first
STAGE_LIMIT = 48 * 1024  # bytes of one stage at most (BK is chosen to fit it)
SMEM_PER_BLOCK = 227 * 1024
STAGES = (2, 3, 4)  # at <= 48 KiB stages every one fits 227 KiB; 5 would not
MID_STAGES = (4, 5, 6)  # the mid-M build's rings (suite.waves.mid_ring_bytes): at each depth its plan takes the tiles
# that fit; a 3-deep ring leaves too little of K in flight to cover the load latency at these tiles' MMA per stage
# The wide mid-M tile (w_tiles = 2: two m64 weight tiles per consumer warpgroup, 256 weight rows on two): its most
# tokens, whose accumulators (2 x tokens / 2 registers a thread) and a fix-up slice's beside one tile's stay in the
# 232 registers a consumer gets from the producer (setmaxnreg); 4 stages of it fit an SM's shared memory
WIDE_MOST_TOKENS = MID_WIDE_MOST_TOKENS
MID_DESCRIBE_TILE = (144, 2)  # the tile ``describe`` reports where no size picks one
MID_DESCRIBE_TILE_FP8 = (104, 2)  # and at fp8: its widest tile promoted in pairs
RULE_SMS = 132  # the SMs a description without a GPU plans for (suite.gemm_rule.H200_SMS: the committed runs' GPU)
MIN_K_STAGES_PER_SPLIT = 4  # fewer and a split's prologue and partial cost more than its mainloop
MAX_SPLITS = 32
WAVE_SLACK = 0.05  # a split count within 5% of the best wave efficiency is as good (fewer: less fix-up)
IN_FLIGHT_TARGET = 5 * 2**20  # weight bytes in flight over the chip: ~4.3 TB/s x ~1.2 us of loaded HBM latency


@dataclass(frozen=True)
class Plan:
    """Tile, splits and grid of one decode launch (``plan``)."""

    block_t: int  # token rows (C's rows) per unit: wgmma's N
    consumers: int  # consumer warpgroups: BW = 64 x consumers weight columns (C's columns) per unit
    k_atoms: int  # BK = atom_k x k_atoms: K per stage
    splits: int
    tiles_w: int
    tiles_t: int
    atom_k: int = 64  # K per atom (128 bytes): 64 at 16 bits, 128 at fp8
    tail: bool = False  # the walk: whole tiles in waves, then the last partial wave's tiles split (the mid-M build)
    w_tiles: int = 1  # m64 weight tiles per consumer warpgroup (2: the mid-M build's wide tile, 16-bit)

    @property
    def block_w(self) -> int:
        return 64 * self.consumers * self.w_tiles

    @property
    def block_k(self) -> int:
        return self.atom_k * self.k_atoms

    @property
    def units(self) -> int:
        return self.tiles_w * self.tiles_t * self.splits

    @property
    def threads(self) -> int:
        return (1 + self.consumers) * WG_THREADS

    @property
    def stage_bytes(self) -> int:
        return (self.block_w + self.block_t) * ATOM_BYTES_K * self.k_atoms

    def smem_bytes(self, stages: int) -> int:
        return stages * self.stage_bytes + 2 * stages * BARRIER_BYTES + FLAG_BYTES + ALIGN_SLACK

    def name_expression(self, stages: int, dtype: str) -> str:
        walk = "true" if self.tail else "false"
        wide = f", {self.w_tiles}" if self.w_tiles != 1 else ""
        tile = f"{self.block_t}, {self.consumers}, {self.k_atoms}"
        return f"gemm_tma_decode<{stages}, {tile}, {ELEMENT[dtype]}, {walk}{wide}>"


def block_t_for(m: int) -> int:
    """Token rows per unit: the power of two >= M, within [8, 64]."""
    return min(BLOCK_TS[-1], max(BLOCK_TS[0], 1 << max(0, m - 1).bit_length()))


def k_atoms_for(consumers: int, block_t: int) -> int:
    """The most K atoms (128 bytes of K each) whose stage, (64 x consumers + BLOCK_T) x 128 bytes each, fits
    STAGE_LIMIT (the same at every dtype: an atom is 128 bytes of K)."""
    return next(a for a in K_ATOMS if (64 * consumers + block_t) * ATOM_BYTES_K * a <= STAGE_LIMIT)


def plan(
    m: int,
    n: int,
    k: int,
    sms: int,
    stages: int,
    splits: int | None = None,
    consumers: int | None = None,
    dtype: str = "fp16",
) -> Plan:
    """The decode rule (the module's docstring) for a ring ``stages`` deep. ``splits`` and ``consumers`` force a
    choice (tests)."""
    atom_k = gemm_tma.block_k(dtype)  # K per 128-byte atom: 64, fp8 128
    block_t = block_t_for(m)
    tiles_t = -(-m // block_t)
    best = None
    for c in CONSUMERS if consumers is None else (consumers,):
        k_atoms = k_atoms_for(c, block_t)
        tiles = -(-n // (64 * c)) * tiles_t
        k_stages = -(-k // (atom_k * k_atoms))
        s = splits or split_count(tiles, k_stages, sms, (stages - 1) * 64 * c * ATOM_BYTES_K * k_atoms)
        candidate = Plan(block_t, c, k_atoms, s, tiles // tiles_t, tiles_t, atom_k)
        score = (-s, wave_efficiency(candidate.units, sms))  # CONSUMERS is widest first: ties keep the wider
        if best is None or score > best[0]:
            best = (score, candidate)
    return best[1]


def split_count(tiles: int, k_stages: int, sms: int, in_flight_per_unit: int) -> int:
    """The fewest splits within the wave rule's bounds (two waves of units, >= MIN_K_STAGES_PER_SPLIT K stages each,
    at most MAX_SPLITS) whose units keep IN_FLIGHT_TARGET bytes of weight in flight; the wave rule's count where none
    does."""
    cap = max(1, min(MAX_SPLITS, k_stages // MIN_K_STAGES_PER_SPLIT, (2 * sms) // max(1, tiles)))
    enough = next((s for s in range(1, cap + 1) if tiles * s * in_flight_per_unit >= IN_FLIGHT_TARGET), None)
    return enough or wave_split_count(tiles, k_stages, sms, MIN_K_STAGES_PER_SPLIT, MAX_SPLITS, WAVE_SLACK)


def every_plan_shape() -> tuple[tuple[int, int, int], ...]:
    """(BLOCK_T, consumers, K atoms) of every plan the rule can make: what the module compiles."""
    return tuple((t, c, k_atoms_for(c, t)) for t in BLOCK_TS for c in CONSUMERS)


def mid_plan(
    m: int,
    n: int,
    k: int,
    sms: int,
    stages: int | None = None,
    splits: int | None = None,
    consumers: int | None = None,
    block_t: int | None = None,
    dtype: str = "fp16",
    w_tiles: int | None = None,
) -> Plan:
    """The mid-M build's plan (one per shape, depth and dtype): suite.waves.mid_tile's tile among those whose ring
    fits ``stages`` deep, one 128-byte row of K per stage (64 of K, fp8 128); tiles in persistent waves and the last
    partial wave's split in K (gemm_tma.split_tail_plan, for one block per SM; the launcher repeats it for the blocks
    an SM holds). ``consumers`` and ``block_t`` force the tile (both or neither), with ``w_tiles`` weight tiles per
    consumer (1 unless given; 2: the wide tile, 16-bit, two consumers, at most WIDE_MOST_TOKENS), ``splits`` the
    tail's split count (tests, probes)."""
    if consumers is not None and consumers not in MID_CONSUMERS:
        raise ValueError(f"consumers={consumers}: the mid-M build has 2 or 3 consumer warpgroups")
    if (consumers is None) != (block_t is None):
        raise ValueError("force the mid-M tile with both block_t and consumers, or neither")
    if w_tiles is not None and block_t is None:
        raise ValueError(f"w_tiles={w_tiles}: force the tile's weight tiles with its block_t and consumers")
    if w_tiles not in (None, 1) and not mid_wide_tile_ok(block_t, consumers, w_tiles, dtype):
        raise ValueError(
            f"w_tiles={w_tiles}: two m64 weight tiles per consumer warpgroup are a 16-bit tile of "
            f"{MID_WIDE_CONSUMERS} consumers and at most {WIDE_MOST_TOKENS} tokens"
        )
    if block_t is None:
        block_t, consumers, w_tiles = mid_tile(m, n, k, sms, stages, dtype)
    elif not mid_tile_ok(block_t, consumers, dtype):
        raise ValueError(
            f"block_t={block_t}: the mid-M build takes 64 .. 208 tokens by 8 (three consumers: 128; fp8: 160 on two)"
        )
    w_tiles = w_tiles or 1
    boxes = consumers * w_tiles  # 64-column weight boxes per stage
    if stages is not None and mid_ring_bytes(block_t, boxes, stages) > SMEM_PER_BLOCK:
        raise ValueError(f"stages={stages}: a {64 * boxes} x {block_t} tile's ring does not fit {SMEM_PER_BLOCK} B")
    tiles_t, tiles_w = -(-m // block_t), -(-n // (64 * boxes))
    atom_k = mid_stage_k(dtype)
    _, s = gemm_tma.split_tail_plan(tiles_w * tiles_t, -(-k // atom_k), sms, splits)
    return Plan(block_t, consumers, 1, s, tiles_w, tiles_t, atom_k, tail=True, w_tiles=w_tiles)


def refusal(size, dtype: str) -> str | None:
    return gemm_tma.shape_rule(size, dtype)


class Decode(gemm_tma.SplitLaunch):
    """A launcher bound to (inputs, c, stages): ``Decode((a, b), c, 3)()`` writes c = a @ b. ``splits`` and
    ``consumers`` force the plan's choices (tests). The workspace (splits > 1) is this launcher's own, sized
    from this shape."""

    def __init__(self, inputs, c: torch.Tensor, stages: int, kernel: DecodeModule | None = None, **forced):
        kernel = kernel or KERNEL
        ops = gemm_operands(tuple(inputs), c, DTYPES)
        check_stages(stages, kernel.stages)
        m, n, k, dtype = ops.m, ops.n, ops.k, ops.dtype
        if rule := refusal((m, n, k), dtype):
            raise ValueError(rule)
        if forced.get("splits") is not None and forced["splits"] < 1:
            raise ValueError(f"splits must be >= 1 (got {forced['splits']})")
        if dtype not in kernel.dtypes:
            raise ValueError(f"{dtype}: this build takes {', '.join(kernel.dtypes)}")
        check_cuda(("a", ops.a), ("b", ops.b), ("c", c))
        sms = loader.num_sms()
        self.plan = p = kernel.plan(m, n, k, sms, stages, dtype=dtype, **forced)
        module = kernel.build_of(p)
        expr = p.name_expression(stages, dtype)
        blocks_per_sm = self._bind_kernel(module, expr, p.smem_bytes(stages), p.threads, stages)
        k_stages = -(-k // p.block_k)
        tiles = p.tiles_w * p.tiles_t
        if p.tail:  # the split tail for the block slots the GPU holds
            self.grid, splits = gemm_tma.split_tail_plan(tiles, k_stages, sms * blocks_per_sm, forced.get("splits"))
            self.plan = p = replace(p, splits=splits)
        else:
            self.grid = persistent_grid(p.units, sms * blocks_per_sm)
        fp8 = dtype == "fp8e4m3"
        # B's rows at a 16-byte pitch for TMA: a padded copy where not (fp8's B is N x K: its rows are K bytes)
        b = self._bind_b(ops.b, pad=not fp8 and n % 8 != 0)
        # boxes as (rows, columns): the tokens BLOCK_T x one atom of K (one per K atom of a stage); the weight BK rows
        # of K x 64 of its columns (one per consumer warpgroup), or fp8's 64 rows of N x one atom of K (one per
        # consumer warpgroup and K atom): every box row 128 bytes, the swizzle's width
        self.tmap_tokens = gemm_tma._tensor_map(ops.a, (p.block_t, p.atom_k))
        self.tmap_weight = gemm_tma._tensor_map(b, (64, p.atom_k) if fp8 else (p.block_k, 64))
        self.reduce, self.reduce_first = None, False  # no second pass: the fix-up is in the kernel
        # This launcher's own workspace and counters, from this shape (never another's): one fp32 M x N slice per
        # split, and a counter per (tile, consumer warpgroup) that the kernel leaves at zero after every launch. Under
        # the sanitizer's fault the workspace is fresh device memory (initcheck sees a slice read before it is written)
        fresh = NO_FIXUP_WAIT.define in kernel.extra_defines
        self.workspace = new_workspace((p.splits * m * n if p.splits > 1 else 1,), c.device, fresh=fresh)
        self.counters = torch.zeros(p.tiles_w * p.tiles_t * p.consumers, dtype=torch.int32, device=c.device)
        self.threads = p.threads
        self.args = (
            self.tmap_tokens,
            self.tmap_weight,
            c.data_ptr(),
            np.int32(m),
            np.int32(n),
            np.int32(k),
            self.workspace.data_ptr(),
            self.counters.data_ptr(),
            np.int32(p.splits),
            # fp8's per-tensor scales (read by fp8 builds only; a valid pointer otherwise)
            (ops.scale_a if fp8 else self.workspace).data_ptr(),
            (ops.scale_b if fp8 else self.workspace).data_ptr(),
        )
        if p.tail:
            tail = tiles % self.grid
            walk = (
                f"{tiles} tiles: {tiles - tail} in {tiles // self.grid} whole waves of {self.grid}, then {tail} x "
                f"{p.splits} splits of {k_stages} K stages"
                if p.splits > 1
                else f"{tiles} tiles of {k_stages} K stages on {self.grid} blocks"
            )
        else:
            walk = (
                f"{tiles} tiles x {p.splits} split{'s' if p.splits > 1 else ''} of {k_stages} K stages = "
                f"{p.units} units on {self.grid} blocks"
            )
        note = (
            f"swapped (C^T = B^T A^T): {p.block_w} weight columns x {p.block_t} tokens x {p.block_k} K per unit, 1 "
            f"producer warp + {p.consumers} consumer warpgroup{'s' if p.consumers > 1 else ''}, "
            f"{p.stage_bytes // 1024} KiB stages, {walk}"
            + (", fp32 workspace [splits, M, N] summed in split order by the last split in" if p.splits > 1 else "")
            + (", N % 8 != 0: B copied to a padded pitch per call" if n % 8 and not fp8 else "")
            + (", promoted per 128 of K (each K atom's sum added in fp32), scales on the sum" if fp8 else "")
        )
        per_sm = max(1, min(blocks_per_sm, -(-self.grid // sms)))
        self._set_info(
            module,
            expr,
            p.stage_bytes,
            stages,
            blocks_per_sm,
            p.threads,
            note,
            resident_blocks_per_sm=per_sm,
            # loads each SM keeps in flight: S - 1 stages ahead of the one the wgmma read
            bytes_in_flight_per_sm=(stages - 1) * p.stage_bytes * per_sm,
        )


# The sanitizer's self-tests: the producer's empty-barrier wait removed (at 2 stages it laps the consumers: 32 K
# stages in 8 splits of 4), and the fix-up's wait removed: split 0 sums the slices at once, before any split has
# written its own (initcheck: the workspace is fresh device memory; 8 tiles x 8 splits). Without the wait but
# summing at the last split in, or at the first, the slices were already written under the sanitizer: it was blind.
SKIP_EMPTY_WAIT = gemm_tma.skip_empty_wait((16, 64, 8192))
NO_FIXUP_WAIT = Fault(
    "the split-K fix-up's wait removed (split 0 sums the slices at once, waiting for no split)",
    "PIPESUITE_FAULT_DECODE_NO_FIXUP_WAIT",
    (2,),
    tool="initcheck",
    size=(16, 512, 8192),
)


class DecodeModule(NvrtcModule):
    """gemm_tma_decode as the kernel-module contract (suite.kernel) states it: built for sm_90a only, every plan the
    rule can make at every depth and dtype; its SASS must hold wgmma, TMA and mbarrier instructions."""

    source = SOURCE
    archs = (ARCH,)
    stages = STAGES
    dtypes = DTYPES
    fp8_accumulation = "promoted"  # each K atom's (128 of K) wgmma sum added into fp32 registers
    threads = 2 * WG_THREADS  # the first plan's (describe): one consumer warpgroup
    stage_bytes = (64 + 8) * ATOM_BYTES_K * 4
    # wgmma per stage (16 at BK = 256), the tokens' boxes and the weight's, mbarriers
    sass_requires = {"wgmma": 4, "tma": 2, "mbarrier": 1}
    # M = 1 (one token tile of 8, 7 rows zero-filled), N % 8 != 0 (padded B, an edge weight tile), two splits at 2-3
    # stages and a ring that wraps; M = 70 (two token tiles of 64, the second nearly empty); M = 13 at K < one stage;
    # 7-8 splits of a K with a remainder (the fix-up: every split but the last one in waits for nothing); fp8 (K % 16,
    # the others' K are not): M = 3, an edge weight tile, K stages of 512 with a remainder and splits
    sanitize_sizes = ((1, 4000, 2056), (70, 1000, 520), (13, 264, 40), (16, 512, 8200), (3, 1000, 4112))

    def __init__(self, faults: tuple[Fault, ...] = ()):
        self.faults = faults

    tail = False  # the walk its plans take (Plan.tail)
    w_tiles = 1  # m64 weight tiles per consumer warpgroup of its plans (Plan.w_tiles)

    def shapes(self) -> tuple[tuple[int, int, int], ...]:
        """(BLOCK_T, consumers, K atoms) of every plan it can make: what it compiles (the first: describe's)."""
        return every_plan_shape()

    def defines(self) -> tuple[str, ...]:
        figures = [
            ((s, t, c, a), Plan(t, c, a, 1, 1, 1).smem_bytes(s)) for t, c, a in self.shapes() for s in self.stages
        ]
        return DEFINES + (gemm_tma.smem_define(figures),) + super().defines()

    def build(self, arch: str | None = None):
        """Always sm_90a: asked for sm_90 (the GPU's own arch, or the driver's CPU arch), build its 'a' target."""
        return super().build(ARCH if arch in (None, "sm_90") else arch)

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return tuple(
            Plan(t, c, a, 1, 1, 1, tail=self.tail).name_expression(stages, d)
            for d in self.dtypes
            for t, c, a in self.shapes()
        )

    def describe(self, arch: str, dtype: str | None = None) -> dict[int, KernelInfo]:
        """Every depth's kernel of the first plan shape at ``dtype`` (default: the module's first dtype)."""
        dtype = dtype or self.dtypes[0]
        plan = Plan(*self.shapes()[0], 1, 1, 1, tail=self.tail, w_tiles=self.w_tiles)
        return self.describe_depths(
            arch, lambda s: plan.name_expression(s, dtype), lambda expr: f"{arch} cubin, {expr}; {self.config()}"
        )

    def refuses(self, size, dtype: str) -> str | None:
        return refusal(size, dtype)

    def plan(self, m: int, n: int, k: int, sms: int, stages: int, **options) -> Plan:
        """This build's plan for the shape (the decode rule; the mid-M build overrides it)."""
        return plan(m, n, k, sms, stages, **options)

    def build_of(self, plan: Plan):
        """The build that holds ``plan``'s kernel, for this GPU: every plan's, here (the mid-M build: its tile's)."""
        return self.build()

    def config(self) -> str:
        return (
            "swapped decode: 64 or 128 weight columns on wgmma's M, 8-64 tokens on its N, stages of <= 48 KiB, "
            "persistent"
        )

    def launch(self, inputs, out, stages):
        return Decode(inputs, out, stages, kernel=self)

    def bad_inputs(self) -> list[BadInput]:
        return [
            BadInput(
                tuple(meta_tensor(*sh, dtype=torch.float16) for sh in ((16, 12), (12, 16))),
                meta_tensor(16, 16, dtype=torch.float16),
                "K must be a multiple of 8",
                "K % 8 != 0",
            ),
        ]


KERNEL = DecodeModule(faults=(SKIP_EMPTY_WAIT, NO_FIXUP_WAIT))


_TILES_LOCK = threading.Lock()


class MidModule(DecodeModule):
    """The same kernel for the mid M that the tile rungs pad most (a few hundred tokens): 128 or 192 weight columns x
    64-208 token rows by 8 (``mid_plan``: M over a few tiles, rounded up to 8, where the rungs round it up to 128 or
    256: M = 341 runs four tiles of 88 rows on 192 weight columns), 128 bytes of K per stage (64 of K, fp8 128), the
    consumer warpgroups given the producer's registers, the split tail's walk. At 16 bits also the wide tile: two m64
    weight tiles per consumer warpgroup (256 weight columns on two) x 64-192 tokens, both tiles' wgmma on one token
    box per stage, in rings of 4 stages (5 up to 104 tokens), which the model weighs past MID_WIDE_LEAST_M tokens.

    fp8 (e4m3 in, bf16 out) promotes each K stage's sum (128 of K) into the fp32 accumulators, on two consumer
    warpgroups: two stages' partials in turn up to 104 tokens, one partial (each stage's adds under the other
    consumer's wgmma) up to 160.

    Tiles are many (19 token counts on two consumer warpgroups, 9 on three, 17 wide): each is compiled on demand, the
    first time a launch or a precompile asks for it (``build_of``, ``modules_for``), and kept in the cubin cache, with
    every dtype it takes.
    ``MidModule(tile=(block_t, consumers), w_tiles)`` is one tile's build, whose plans take that tile; the registered
    one (``MID``, tile None) plans any tile, and builds and describes ``MID_DESCRIBE_TILE``'s."""

    stages = MID_STAGES
    dtypes = DTYPES  # fp8 on the tiles mid_tile_ok takes at fp8
    # M = 129 (two token tiles, an edge weight tile, a K remainder); M = 300 (a split tail) with a ring that wraps; the
    # split tail after whole waves (300 tiles of 128 x 104); N % 8 != 0 (a padded B) and one token tile of 96; the
    # producer's registers handed over: three consumers, four token tiles of 88 in one wave and two of 104 with a split
    # tail; two consumers, two token tiles of 136. fp8 (K % 16: the third, eighth and ninth): 208 x 19200 (fp8's
    # tiles: two token tiles of 104, two whole waves and a split tail), 156 x 8192 x 1040 (two token tiles of 80,
    # 128 tiles, no split) and 300 x 19200 x 1040 (two token tiles of 152, promoted with one partial, with a split
    # tail; 16 bits: the same tile); the wide tile (16 bits, 4 stages): twelve token tiles of 112 (the last 17 rows)
    # on 256 weight columns, an edge weight tile (2600 = 10 x 256 + 40)
    sanitize_sizes = (
        (129, 1000, 520),
        (300, 520, 4104),
        (208, 19200, 1040),
        (90, 260, 1032),
        (341, 6144, 520),
        (200, 6144, 520),
        (260, 8192, 520),
        (156, 8192, 1040),
        (300, 19200, 1040),
        (1249, 2600, 520),
    )

    tail = True

    def __init__(self, tile: tuple[int, int] | None = None, w_tiles: int = 1):
        super().__init__(faults=())  # the decode build's faults cover the source both builds share
        if tile is not None and not mid_tile_ok(*tile):
            raise ValueError(f"tile={tile}: not a mid-M tile (block_t 64 .. 208 by 8; three consumers: up to 128)")
        if w_tiles != 1 and (tile is None or not mid_wide_tile_ok(*tile, w_tiles)):
            raise ValueError(
                f"w_tiles={w_tiles}: a tile's own build of 2 weight tiles per consumer, on {MID_WIDE_CONSUMERS} "
                f"consumers and up to {WIDE_MOST_TOKENS} tokens"
            )
        self.tile, self.w_tiles = tile, w_tiles
        if w_tiles != 1:
            self.dtypes = tuple(d for d in self.dtypes if d != "fp8e4m3")

    def defines(self) -> tuple[str, ...]:
        # the layout's key counts weight boxes (consumers x w_tiles), as the kernel's static_assert looks it up
        figures = [
            ((s, t, c * self.w_tiles, a), Plan(t, c, a, 1, 1, 1, tail=True, w_tiles=self.w_tiles).smem_bytes(s))
            for t, c, a in self.shapes()
            for s in self.stages
        ]
        return DEFINES + (gemm_tma.smem_define(figures),) + NvrtcModule.defines(self)

    @property
    def threads(self) -> int:  # the described tile's
        return (1 + self.shapes()[0][1]) * WG_THREADS

    @property
    def stage_bytes(self) -> int:  # the described tile's
        block_t, consumers, _ = self.shapes()[0]
        return (64 * consumers * self.w_tiles + block_t) * ATOM_BYTES_K

    def shapes(self) -> tuple[tuple[int, int, int], ...]:
        """What this build compiles: its tile's (BLOCK_T, consumers, 1 K atom)."""
        block_t, consumers = self.tile or MID_DESCRIBE_TILE
        return ((block_t, consumers, 1),)

    def tile_dtypes(self) -> tuple[str, ...]:
        """The dtypes this build's tile is compiled for: fp8 only where its promoted form fits the tile."""
        block_t, consumers, _ = self.shapes()[0]
        return tuple(
            d
            for d in self.dtypes
            if mid_tile_ok(block_t, consumers, d) and mid_wide_tile_ok(block_t, consumers, self.w_tiles, d)
        )

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        block_t, consumers, k_atoms = self.shapes()[0]
        return tuple(
            Plan(block_t, consumers, k_atoms, 1, 1, 1, tail=True, w_tiles=self.w_tiles).name_expression(stages, d)
            for d in self.tile_dtypes()
        )

    def tile_module(self, block_t: int, consumers: int, w_tiles: int = 1) -> MidModule:
        """The build of one tile, at this build's depths that its ring fits and with its defines (made once, then
        shared): this module for its own tile (the registered one's: MID_DESCRIBE_TILE, which fits every depth)."""
        key = (block_t, consumers, w_tiles)
        if key == (*(self.tile or MID_DESCRIBE_TILE), self.w_tiles):
            return self
        with _TILES_LOCK:  # precompile's threads describe and build tiles at once: one module per tile
            tiles = self.__dict__.setdefault("_tiles", {})
            if key not in tiles:
                other = MidModule((block_t, consumers), w_tiles)
                boxes = consumers * w_tiles
                other.stages = tuple(s for s in self.stages if mid_ring_bytes(block_t, boxes, s) <= SMEM_PER_BLOCK)
                other.dtypes = other.tile_dtypes()  # a launch at a dtype the tile has no build for: refused at once
                other.extra_defines = self.extra_defines
                tiles[key] = other
            return tiles[key]

    def build_for(self, size) -> tuple[int, int, int] | None:
        """The shape, for the registered build: each depth's plan picks its tile from it, and ``describe(...,
        build=size)`` describes those tiles; None for a tile's own build."""
        return None if self.tile else tuple(size[:3])

    def describe(self, arch: str, dtype: str | None = None, build: tuple | None = None) -> dict[int, KernelInfo]:
        """Without a shape, this build's tile at every depth (the registered build at fp8: MID_DESCRIBE_TILE_FP8's);
        with one (``build_for``), each depth's kernel is the tile its plan takes there, on the rule's GPU of 132 SMs
        (no GPU to ask)."""
        dtype = dtype or self.dtypes[0]
        if build is None:
            if dtype not in self.tile_dtypes():
                if self.tile:
                    raise ValueError(f"the {self.tile} mid-M tile has no {dtype} build")
                return self.tile_module(*MID_DESCRIBE_TILE_FP8).describe(arch, dtype)
            return super().describe(arch, dtype)
        m, n, k = build
        return {
            s: self.tile_module(*mid_tile(m, n, k, RULE_SMS, s, dtype)).describe(arch, dtype)[s] for s in self.stages
        }

    def with_defines(self, *defines: str, stages: tuple[int, ...] | None = None) -> MidModule:
        other = super().with_defines(*defines, stages=stages)
        other.__dict__.pop("_tiles", None)  # the copy's tiles are built with its own defines
        return other

    def build_of(self, plan: Plan):
        return self.tile_module(plan.block_t, plan.consumers, plan.w_tiles).build()

    def modules_for(self, size, dtype: str) -> tuple[MidModule, ...]:
        """The tiles the plans at ``size`` take, one per depth (fewer where depths share one)."""
        m, n, k = size[:3]
        sms = loader.num_sms()
        tiles = dict.fromkeys(mid_tile(m, n, k, sms, s, dtype) for s in self.stages)
        return tuple(self.tile_module(*t) for t in tiles)

    def plan(self, m: int, n: int, k: int, sms: int, stages: int, dtype: str = "fp16", **forced) -> Plan:
        """The mid-M rule: the tile that fits ``stages`` deep at ``dtype``; a tile's own build, its tile."""
        if self.tile:  # its own tile unless forced otherwise, at its own weight tiles
            forced = {"block_t": self.tile[0], "consumers": self.tile[1], "w_tiles": self.w_tiles, **forced}
        return mid_plan(m, n, k, sms, stages, dtype=dtype, **forced)

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        """Every instantiation a launch at ``stages`` may run: each tile whose ring fits that deep (a tile's own build:
        its own), as the sanitizer attributes findings."""
        if self.tile:
            return self.name_expressions(stages)
        return tuple(
            Plan(t, c, 1, 1, 1, 1, tail=True, w_tiles=w).name_expression(stages, d)
            for d in self.dtypes
            for c in MID_CONSUMERS
            for w in (1, 2)
            for t in range(MID_LEAST_TOKENS, MID_MOST_TOKENS_FOR[c] + 1, 8)
            if mid_ring_bytes(t, c * w, stages) <= SMEM_PER_BLOCK
            and mid_tile_ok(t, c, d)
            and mid_wide_tile_ok(t, c, w, d)
        )

    def config(self) -> str:
        return (
            "swapped mid-M: 128 or 192 weight columns on wgmma's M, 64-208 tokens by 8 on its N (fp8: 128 columns x "
            "64-104 tokens promoted in pairs of K stages, 112-160 with one partial; 16-bit: also 256 columns x 64-192 "
            "tokens, two weight tiles per consumer; "
            "the fastest modelled walk, mid_plan), one 128-byte row of K per stage, "
            "persistent waves then a split tail"
        )


MID = MidModule()
