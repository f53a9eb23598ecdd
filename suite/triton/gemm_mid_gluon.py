"""Mid-M GEMM in Gluon (``triton.experimental.gluon``): C = A @ B at 16 bits or fp8 e4m3 (bf16 out, per-tensor scales)
for a few hundred to a few thousand token rows, computed swapped (C^T = B^T A^T) and warp-specialized, as the PTX mid-M
kernel is (suite/ptx/gemm_decode.cu), where the tile kernels' 128-row tiles pad M and leave the last wave ragged.

Swapped, the weight's N runs along wgmma's M and the tokens along its N. CONSUMERS partitions of one warpgroup each own
WEIGHT_COLS of N (64: one m64 wgmma per K step and piece; 128: two), so a tile is CONSUMERS x WEIGHT_COLS weight columns
(192 or 256; fp8 also 128) by a token tile. Gluon's tensors are powers of two, so a token tile is up to two pieces
(T0 + T1: 64 + 32 = 96, 128 + 32 = 160), one fp32 accumulator each, both on the same weight box: the token tiles that
divide M nearly exactly where the waves of whole tiles are few.

* **producer** (one warp, few registers): a STAGES-deep TMA ring, per stage CONSUMERS weight boxes [BLOCK_K,
  WEIGHT_COLS] of B (K x N; wgmma reads each transposed, as its A; fp8: B is N x K, boxes [WEIGHT_COLS, BLOCK_K], the
  K-major A that fp8's wgmma needs) and one token box [T_p, BLOCK_K] of A per piece, zero-filled past M, N and K; each
  stage guarded by a *ready* mbarrier (the producer's expect and the TMA bytes) and an *empty* one (one arrival per
  consumer);
* **mainloop** (each consumer): wait for a stage, one wgmma per piece, release what is read. Shared-memory A (one piece,
  or 64 + T1): each wgmma reads the weight box, the K step's groups stay in flight, and the stage the K step before read
  goes back. Register A (128 + T1, ``GluonMidTile.register_a``): the weight box goes through registers once, not once
  per piece, both groups are retired and the stage goes back at once (ptxas serializes register-A wgmma kept in flight
  in a worker partition). fp8: each K step's sums start from zero and are promoted into the fp32 accumulators once their
  groups are retired (wgmma sums fp8 products with fewer mantissa bits than fp32), as cuBLAS and the suite's other fp8
  kernels promote; two pieces take the weight through registers, as the retirement is paid anyway, and the other
  consumers' groups keep the tensor pipe busy meanwhile;
* **epilogue** (fp8: scale_a x scale_b on the accumulators first): each piece's accumulator stored transposed into the
  consumer's [T0, WEIGHT_COLS] slab (a permuted view of it) and TMA-stored into C, clipped at M and N: piece 0, then
  piece 1 in the slab's first T1 rows once piece 0's store has read it.

Persistent: min(SMs, tiles) programs stride over the tiles, the token tiles of one weight tile adjacent, so the weight
comes from DRAM about once. ``suite.waves.gluon_mid_plan`` picks the tile and depth by a model of waves, padding and
shared-memory traffic. A and B rows not 16-byte pitched go through gemm_desc.Operands' padded copies; C where N % 8 != 0
through a padded buffer. Needs sm_90a (wgmma); the interpreter does not run Gluon."""

from __future__ import annotations

from typing import ClassVar

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from suite.checks import check_stages, gemm_operands
from suite.kernel import TritonModule
from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import FP8_ACCUMULATION, HOPPER_SASS, Operands, dtype_config, num_sms
from suite.triton.gemm_gluon import GL_DTYPES, RACECHECK_BLIND
from suite.triton.gemm_gluon_fp8 import _kept_here
from suite.triton.gemm_gluon_ring import next_stage, ring_barriers, tma_load, tma_store
from suite.waves import GLUON_MID_LAYOUTS as LAYOUTS
from suite.waves import GLUON_MID_STAGES as STAGES
from suite.waves import GluonMidPlan, GluonMidTile, gluon_mid_plan, gluon_mid_tiles, grid_note

DTYPES = ("fp16", "bf16", "fp8e4m3")
UNUSED_PIECE = 8  # a one-piece tile's second token box: in the kernel's tuples, never loaded or read
PRODUCER_WARPS, PRODUCER_REGS = 1, 24
# the constants the kernels read (a jit function reads module globals only as constexprs)
_UNUSED_PIECE = gl.constexpr(UNUSED_PIECE)
_PRODUCER_WARPS, _PRODUCER_REGS = gl.constexpr(PRODUCER_WARPS), gl.constexpr(PRODUCER_REGS)


@gluon.jit
def _tile_origin(tile, token_tiles, WEIGHT_ROWS: gl.constexpr, TOKENS: gl.constexpr):
    """(first weight column n0, first token row m0) of ``tile``: token tiles of one weight tile adjacent."""
    w = tile // token_tiles
    return w * WEIGHT_ROWS, (tile - w * token_tiles) * TOKENS


@gluon.jit
def _producer(w_desc, x0_desc, x1_desc, ring, M, N, K, CONSUMERS: gl.constexpr, STAGES: gl.constexpr,
              T0: gl.constexpr, T1: gl.constexpr, STAGE_BYTES: gl.constexpr, FP8: gl.constexpr):  # fmt: skip
    """The producer partition: every K tile of this program's tiles into the ring."""
    w_ring, x0_ring, x1_ring, ready, empty = ring
    WEIGHT_COLS: gl.constexpr = w_desc.block_type.shape[0 if FP8 else 1]
    BLOCK_K: gl.constexpr = x0_desc.block_type.shape[1]
    token_tiles = gl.cdiv(M, T0 + T1)
    tiles = gl.cdiv(N, WEIGHT_COLS * CONSUMERS) * token_tiles
    smem_write_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), tiles, gl.num_programs(0)):
        n0, m0 = _tile_origin(tile, token_tiles, WEIGHT_COLS * CONSUMERS, T0 + T1)
        for kt in range(gl.cdiv(K, BLOCK_K)):
            # wait until every consumer released this stage (the first lap's parity passes at once)
            mbarrier.wait(empty.index(smem_write_stage), lap ^ 1)
            # arm the stage's ready barrier with the bytes its copies deliver, then issue them
            mbarrier.expect(ready.index(smem_write_stage), STAGE_BYTES)
            for c in gl.static_range(CONSUMERS):
                # fp8's B is N x K: its box's origin is (column, K)
                origin = [n0 + c * WEIGHT_COLS, kt * BLOCK_K] if FP8 else [kt * BLOCK_K, n0 + c * WEIGHT_COLS]
                tma_load(w_desc, origin, ready.index(smem_write_stage), w_ring.index(smem_write_stage * CONSUMERS + c))
            tma_load(x0_desc, [m0, kt * BLOCK_K], ready.index(smem_write_stage), x0_ring.index(smem_write_stage))
            if T1 > 0:
                tma_load(
                    x1_desc, [m0 + T0, kt * BLOCK_K], ready.index(smem_write_stage), x1_ring.index(smem_write_stage)
                )
            smem_write_stage, lap = next_stage(smem_write_stage, lap, STAGES)


@gluon.jit
def _consumer(c0_desc, c1_desc, ring, slabs, scales, M, N, K, C: gl.constexpr, CONSUMERS: gl.constexpr,
              STAGES: gl.constexpr, T0: gl.constexpr, T1: gl.constexpr, REGISTER_A: gl.constexpr,
              FP8: gl.constexpr):  # fmt: skip
    """Consumer partition C: its WEIGHT_COLS columns of every tile, one accumulator per token piece. ``scales``:
    (scale_a, scale_b), fp8's per-tensor scales (one fp32 each), None at 16 bits."""
    w_ring, x0_ring, x1_ring, ready, empty = ring
    WEIGHT_COLS: gl.constexpr = w_ring.type.shape[1 if FP8 else 2]
    BLOCK_K: gl.constexpr = x0_ring.type.shape[2]
    INSTR_K: gl.constexpr = 32 if FP8 else 16  # wgmma's K step
    K_WIDTH: gl.constexpr = 4 if FP8 else 2  # elements of A per 32-bit register
    # fp8: two pieces take the weight through registers (their groups are retired every K step anyway)
    gl.static_assert(not FP8 or REGISTER_A or T1 == 0)
    T1_ROWS: gl.constexpr = T1 if T1 > 0 else _UNUSED_PIECE
    layout0: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, T0, INSTR_K]
    )
    layout1: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, T1_ROWS, INSTR_K]
    )
    # register A: the weight box read from shared memory once per K step rather than once per piece
    w_layout0: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout0, k_width=K_WIDTH)
    w_layout1: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout1, k_width=K_WIDTH)
    if FP8:
        scale_a, scale_b = scales
        scale = gl.load(scale_a) * gl.load(scale_b)
        # each K step's partial sums, summed from zero (their values on entry are never read)
        part0 = gl.zeros((WEIGHT_COLS, T0), dtype=gl.float32, layout=layout0)
        part1 = gl.zeros((WEIGHT_COLS, T1_ROWS), dtype=gl.float32, layout=layout1)
    token_tiles = gl.cdiv(M, T0 + T1)
    tiles = gl.cdiv(N, WEIGHT_COLS * CONSUMERS) * token_tiles
    slab = slabs.index(C)  # [T0, WEIGHT_COLS] of C
    smem_read_stage = 0
    lap = 0
    for tile in range(gl.program_id(0), tiles, gl.num_programs(0)):
        n0, m0 = _tile_origin(tile, token_tiles, WEIGHT_COLS * CONSUMERS, T0 + T1)
        acc0 = gl.zeros((WEIGHT_COLS, T0), dtype=gl.float32, layout=layout0)
        acc1 = gl.zeros((WEIGHT_COLS, T1_ROWS), dtype=gl.float32, layout=layout1)
        # -- MAINLOOP --
        # a value of its own before the loop: Triton carries a name through a loop only where the body rebinds it to
        # something other than what it was bound to on entry
        release_stage = 0
        for kt in range(gl.cdiv(K, BLOCK_K)):
            # wait for the TMA bytes of this stage (its ready barrier's phase for this lap)
            mbarrier.wait(ready.index(smem_read_stage), lap)
            # fp8: [WEIGHT_COLS, BLOCK_K], B's K-major box as it is; 16 bits: B's K x N box, read transposed
            w_box = w_ring.index(smem_read_stage * CONSUMERS + C)
            if not FP8:
                w_box = w_box.permute((1, 0))
            if FP8:
                x0_box = x0_ring.index(smem_read_stage).permute((1, 0))
                if REGISTER_A:
                    weight = w_box.load(w_layout0)
                    part0 = warpgroup_mma(weight, x0_box, part0, use_acc=False, is_async=True)
                    weight1 = gl.convert_layout(weight, w_layout1)  # A's layout does not depend on the piece's N
                    x1_box = x1_ring.index(smem_read_stage).permute((1, 0))
                    part1 = warpgroup_mma(weight1, x1_box, part1, use_acc=False, is_async=True)
                    # both pieces' sums of this K step are final (and the stage read): promote them below
                    part0, part1 = warpgroup_mma_wait(0, deps=(part0, part1))
                else:
                    part0 = warpgroup_mma(w_box, x0_box, part0, use_acc=False, is_async=True)
                    part0 = warpgroup_mma_wait(0, deps=(part0,))  # the sum is final and the stage read
                # this K step's stage is read: back to the producer; empty[] counts every consumer
                mbarrier.arrive(empty.index(smem_read_stage))
                # promoted into fp32, kept before the next K step's wgmma (two partials alive would spill)
                acc0 = _kept_here(acc0 + part0)
                if T1 > 0:
                    acc1 = _kept_here(acc1 + part1)
            elif REGISTER_A:
                weight = w_box.load(w_layout0)
                acc0 = warpgroup_mma(weight, x0_ring.index(smem_read_stage).permute((1, 0)), acc0, is_async=True)
                weight1 = gl.convert_layout(weight, w_layout1)  # A's layout does not depend on the piece's N
                acc1 = warpgroup_mma(weight1, x1_ring.index(smem_read_stage).permute((1, 0)), acc1, is_async=True)
                # none in flight: ptxas serializes register-A wgmma kept in flight in a worker partition, so the other
                # consumers' groups keep the tensor pipe busy meanwhile
                acc0, acc1 = warpgroup_mma_wait(0, deps=(acc0, acc1))
                # this K step's stage is read: back to the producer; empty[] counts every consumer
                mbarrier.arrive(empty.index(smem_read_stage))
            else:
                acc0 = warpgroup_mma(w_box, x0_ring.index(smem_read_stage).permute((1, 0)), acc0, is_async=True)
                if T1 > 0:
                    acc1 = warpgroup_mma(w_box, x1_ring.index(smem_read_stage).permute((1, 0)), acc1, is_async=True)
                    # at most this K step's two groups in flight: the K step before's have read their stage
                    acc0, acc1 = warpgroup_mma_wait(2, deps=(acc0, acc1))
                else:
                    # at most this K step's group in flight: the K step before's has read its stage
                    acc0 = warpgroup_mma_wait(1, deps=(acc0,))
                # hand that stage back to the producer (none before the first K step); empty[] counts every consumer
                mbarrier.arrive(empty.index(release_stage), pred=kt > 0)
                release_stage = smem_read_stage
            smem_read_stage, lap = next_stage(smem_read_stage, lap, STAGES)
        if not REGISTER_A and not FP8:
            # the tile's last wgmma have completed: their stage is free too
            if T1 > 0:
                acc0, acc1 = warpgroup_mma_wait(0, deps=(acc0, acc1))
            else:
                acc0 = warpgroup_mma_wait(0, deps=(acc0,))
            mbarrier.arrive(empty.index(release_stage))
        # -- EPILOGUE: each piece transposed into the slab, then a TMA store of it (clipped at M and N), which runs
        #    on while the next tile's mainloop starts --
        if FP8:
            acc0 = acc0 * scale
            acc1 = acc1 * scale
        tma.store_wait(0)  # the previous tile's last store has finished reading the slab
        slab.permute((1, 0)).store(acc0.to(c0_desc.dtype))
        fence_async_shared()  # make the generic-proxy writes to the slab visible to the TMA (async proxy)
        tma_store(c0_desc, [m0, n0 + C * WEIGHT_COLS], slab)
        if T1 > 0:
            tma.store_wait(0)  # piece 0's store has finished reading the slab
            rows = slab.slice(0, T1)
            rows.permute((1, 0)).store(acc1.to(c1_desc.dtype))
            fence_async_shared()
            tma_store(c1_desc, [m0 + T0, n0 + C * WEIGHT_COLS], rows)
    tma.store_wait(0)


@gluon.jit
def gemm_mid_gluon_kernel(w_desc, x0_desc, x1_desc, c0_desc, c1_desc, scale_a, scale_b, M, N, K,
                          CONSUMERS: gl.constexpr, CONSUMER_REGS: gl.constexpr, STAGES: gl.constexpr,
                          T0: gl.constexpr, T1: gl.constexpr, REGISTER_A: gl.constexpr, STAGE_BYTES: gl.constexpr,
                          FP8: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """``scale_a``, ``scale_b``: fp8's per-tensor scales (pointers to one fp32 each), None at 16 bits."""
    dtype: gl.constexpr = w_desc.dtype
    w_ring = gl.allocate_shared_memory(dtype, [STAGES * CONSUMERS] + w_desc.block_type.shape, w_desc.layout)
    x0_ring = gl.allocate_shared_memory(dtype, [STAGES] + x0_desc.block_type.shape, x0_desc.layout)
    x1_ring = gl.allocate_shared_memory(dtype, [STAGES] + x1_desc.block_type.shape, x1_desc.layout)
    ready, empty = ring_barriers(STAGES, CONSUMERS)
    slabs = gl.allocate_shared_memory(c0_desc.dtype, [CONSUMERS] + c0_desc.block_type.shape, c0_desc.layout)
    ring = (w_ring, x0_ring, x1_ring, ready, empty)
    scales = (scale_a, scale_b)
    if CONSUMERS == 2:
        gl.warp_specialize(
            [
                (
                    _consumer,
                    (c0_desc, c1_desc, ring, slabs, scales, M, N, K, 0, CONSUMERS, STAGES, T0, T1, REGISTER_A, FP8),
                ),
                (
                    _consumer,
                    (c0_desc, c1_desc, ring, slabs, scales, M, N, K, 1, CONSUMERS, STAGES, T0, T1, REGISTER_A, FP8),
                ),
                (_producer, (w_desc, x0_desc, x1_desc, ring, M, N, K, CONSUMERS, STAGES, T0, T1, STAGE_BYTES, FP8)),
            ],
            [4, _PRODUCER_WARPS],
            [CONSUMER_REGS, _PRODUCER_REGS],
        )
    else:
        gl.warp_specialize(
            [
                (
                    _consumer,
                    (c0_desc, c1_desc, ring, slabs, scales, M, N, K, 0, CONSUMERS, STAGES, T0, T1, REGISTER_A, FP8),
                ),
                (
                    _consumer,
                    (c0_desc, c1_desc, ring, slabs, scales, M, N, K, 1, CONSUMERS, STAGES, T0, T1, REGISTER_A, FP8),
                ),
                (
                    _consumer,
                    (c0_desc, c1_desc, ring, slabs, scales, M, N, K, 2, CONSUMERS, STAGES, T0, T1, REGISTER_A, FP8),
                ),
                (_producer, (w_desc, x0_desc, x1_desc, ring, M, N, K, CONSUMERS, STAGES, T0, T1, STAGE_BYTES, FP8)),
            ],
            [4, 4, _PRODUCER_WARPS],
            [CONSUMER_REGS, CONSUMER_REGS, _PRODUCER_REGS],
        )
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tile: GluonMidTile) -> tuple:
    """Host-built descriptors: B's weight boxes (fp8: B is N x K), A's token box per piece, C's slab box per piece
    (an unused piece's boxes UNUSED_PIECE rows), with the default 128-byte-swizzled layouts."""
    element = GL_DTYPES[{torch.float16: "fp16", torch.bfloat16: "bf16"}.get(a.dtype, "fp8e4m3")]
    out = GL_DTYPES["bf16" if tile.fp8 else "fp16" if c.dtype == torch.float16 else "bf16"]

    def desc(t, box, dtype=element):
        layout = gl.NVMMASharedLayout.get_default_for(box, dtype)
        return TensorDescriptor(t, list(t.shape), [t.stride(0), 1], box, layout)

    t1, bk = tile.t1 or UNUSED_PIECE, tile.block_k
    return (
        desc(b, [tile.weight_cols, bk] if tile.fp8 else [bk, tile.weight_cols]),
        desc(a, [tile.t0, bk]),
        desc(a, [t1, bk]),
        desc(c, [tile.t0, tile.weight_cols], out),
        desc(c, [t1, tile.weight_cols], out),
    )


class GluonMidGemm:
    """The swapped mid-M Gluon GEMM at ``stages`` on (A, B), C = A @ B; ``tile``: a forced tile (plan's otherwise)."""

    def __init__(self, inputs: tuple, c: torch.Tensor, stages: int, tile: GluonMidTile | None = None):
        ops = gemm_operands(inputs, c, DTYPES)
        check_stages(stages, STAGES)
        c = ops.c
        m, n, k = ops.m, ops.n, ops.k
        fp8 = ops.dtype == "fp8e4m3"
        sms = num_sms(ops.a.device)
        if tile is not None and tile not in gluon_mid_tiles(fp8=fp8):
            raise ValueError(f"{tile} is not a tile of the {ops.dtype} plan's menu (suite.waves.gluon_mid_tiles)")
        chosen = gluon_mid_plan(m, n, sms, stages, fp8) if tile is None else GluonMidPlan(tile, stages)
        if chosen.tile.deepest() < stages:
            raise ValueError(f"stages={stages}: the {chosen.tile} ring fits {chosen.tile.deepest()} at most")
        self.tile, self.stages = chosen.tile, stages
        self.operands = Operands(ops.a, ops.b, c, b_k_major=ops.b_k_major)
        self.scales = (ops.scale_a, ops.scale_b)  # fp8's, (None, None) at 16 bits
        # poisoned, and initialized for initcheck, which does not see the TMA store's writes
        self.c = c
        self.c_padded = torch.full((m, -(-n // 8) * 8), float("nan"), dtype=c.dtype, device=c.device) if n % 8 else None
        a_k, b_k = self.operands.refresh()
        self.descs = descriptors(a_k, b_k, c if self.c_padded is None else self.c_padded, self.tile)
        tiles = self.tile.tiles(m, n)
        self.grid = min(sms, tiles)
        self.sizes = (m, n, k)
        self.meta = dict(
            CONSUMERS=self.tile.consumers,
            CONSUMER_REGS=LAYOUTS[(self.tile.consumers, self.tile.weight_cols)],
            STAGES=stages,
            T0=self.tile.t0,
            T1=self.tile.t1,
            REGISTER_A=self.tile.register_a,
            STAGE_BYTES=self.tile.stage_bytes(),
            FP8=fp8,
            num_warps=4,
        )
        t = self.tile
        pieces = f"{t.t0} + {t.t1}" if t.t1 else f"{t.t0}"
        self.config = (
            f"swapped: {t.consumers} consumer warpgroups x {t.weight_cols} weight columns by {t.tokens} tokens "
            f"({pieces}), {tiles} tiles (modelled {t.efficiency(m, n, sms):.2f} of whole waves at full rate), "
            f"Gluon, {PRODUCER_WARPS} producer warp, {stages}-stage TMA ring of {t.block_k} K, persistent"
            + dtype_config(ops.dtype, mma="warpgroup_mma, the weight's box as wgmma's A")
            + grid_note(tiles, sms, self.grid)
            + self.operands.note
            + (", C through a padded pitch per call" if n % 8 else "")
        )
        self.info = kernel_info(None, t.stage_bytes(), self.config, self.grid)
        self._compiled = False

    def __call__(self) -> None:
        self.operands.refresh()
        compiled = gemm_mid_gluon_kernel[(self.grid,)](*self.descs, *self.scales, *self.sizes, **self.meta)
        if self.c_padded is not None:
            self.c.copy_(self.c_padded[:, : self.c.shape[1]])
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.tile.stage_bytes(), self.config, self.grid)


class SwappedMid(TritonModule):
    """GluonMidGemm for the registry: every type, the depths its plan's tiles fit."""

    stages = STAGES
    dtypes = DTYPES
    fp8_accumulation = FP8_ACCUMULATION
    sass_requires = HOPPER_SASS
    # compute-sanitizer: edge tiles in M and N and a K tile cut short; more tiles than SMs (at 16 bits 264 of the plan's
    # 192 x 128 on 132), so programs walk two tiles and reuse their slabs behind TMA stores; a two-piece tile at every
    # type (16 bits: 256 weight columns by 64 + 16 tokens; fp8: 128 by 128 + 32, the weight through registers)
    sanitize_sizes = ((333, 1000, 520), (1500, 4100, 136), (300, 8192, 1040))
    sanitizer_blind_spots: ClassVar[dict[str, str]] = {"racecheck": RACECHECK_BLIND}

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("gemm_mid_gluon_kernel",)

    def stages_for(self, dtype: str) -> tuple:
        return STAGES

    def launch(self, inputs, out, stages):
        return GluonMidGemm(inputs, out, stages)


KERNEL = SwappedMid()
