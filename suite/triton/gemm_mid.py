"""Mid-M GEMM in Triton: C = A @ B for a few hundred token rows, computed swapped (C^T = B^T A^T) as the decode
kernel computes a few, on token tiles that need not be powers of two.

Between 128 and a few hundred rows the tile kernels pad M to whole tiles of 128 or 256 rows: M = 140 computes 256
rows, and where the weight streams at about the rate the MMAs take it (M ~ 150 at 16-bit types on an H200) the
padding is the kernel's time. Swapped, the weight's N runs along wgmma's M (128 weight rows per program, 64 per
warpgroup, 8 warps) and the tokens along wgmma's N.

Triton's blocks are powers of two, so a token tile is computed in pieces: the binary digits of its rows
(``token_pieces``: 144 = 128 + 16, 208 = 128 + 64 + 16), one ``tl.dot`` and one fp32 accumulator per piece, all on
the same weight box. Each piece is a wgmma chain that reads the weight box from shared memory again, so a tile of
many small pieces is slow per token. The token tile (suite.waves.mid_token_rows): up to 208 rows of M, one tile of M
rounded up to 16 (M = 140 computes 144 rows); above, the tile of 16-208 rows by 16 (or 256 at 16 bits, one piece)
whose walk a model of pieces and waves finds fastest (M = 341: two tiles of 192 = 128 + 64, where two of 176 would
take three pieces each). Each piece's tokens come through their own host-built descriptor (a box of that many rows); the
weight box, [BLOCK_K, 128] of a 16-bit B (K x N), is read transposed (wgmma reads a transposed 16-bit operand from
shared memory); fp8's B comes N x K, its box [128, BLOCK_K] as wgmma's fp8 form takes it, each K tile's sum promoted
into fp32 (as gemm_parts.mac_loop and promoted cuBLAS), the scales applied once, to the sum.

* **mainloop**: per K tile (128 bytes of K: 64 16-bit elements, 128 fp8), the weight box and each piece's token box
  (TMA, zero past M and K) into the pipeliner's ``num_stages`` ring, then one wgmma chain per piece on the oldest
  stage;
* **schedule**: the split tail (gemm_streamk.split_tail_schedule), one program per SM: whole waves of tiles round
  robin, then each tile of the last partial wave in equal shares of K, so that the tail lasts a share of a tile; the
  token tiles of one weight tile are neighbours in the walk (gemm_parts.tile_coords' grouping), so the weight comes
  from DRAM about once;
* **epilogue**: a whole tile stores each piece's accumulator transposed into C; a share stores its fp32 part, in C's
  orientation ([tokens, 128]), into its program's workspace slot, and gemm_streamk's fix-up pass adds the shares in K
  order (bit-reproducible, no atomics).

fp16, bf16 and fp8 (e4m3 in, bf16 out). A and B rows not 16-byte pitched go through gemm_desc.Operands' padded
copies."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import ELEMENT_BYTES, count, dtype_config, num_sms, rings_that_fit
from suite.triton.gemm_parts import store_tile, walk_start, walk_unit
from suite.triton.gemm_splitk import TwoPassModule, epilogue_kwargs
from suite.triton.gemm_streamk import FAULT_FIXUP_FIRST, Schedule, StreamKGemm, split_tail_schedule
from suite.waves import (
    MID_MOST_TOKENS,
    MID_WIDE_TOKENS,
    TRITON_MID_WEIGHT_ROWS,
    mid_pieces,
    mid_token_rows,
    triton_mid_ring_fits,
)

BLOCK_W = TRITON_MID_WEIGHT_ROWS  # weight rows (C's columns) per tile: wgmma's M, 64 per warpgroup
K_BYTES = 128  # of K per stage: 128-byte rows (64 16-bit elements, 128 fp8), the swizzle's width
NUM_WARPS = 8  # two warpgroups
MOST_PIECES = 3  # 208 = 128 + 64 + 16: the widest tile's binary digits


def stage_bytes(block_t: int) -> int:
    """One stage of the ring: the weight box and the token pieces' boxes, K_BYTES of K deep (any dtype)."""
    return (BLOCK_W + block_t) * K_BYTES


def block_k_for(dtype: str) -> int:
    """K elements per stage: K_BYTES of them."""
    return K_BYTES // ELEMENT_BYTES[dtype]


# Shared memory: the ring, up to 42 KiB a stage at 208 tokens, and Triton's barriers; the pieces leave from registers
# (stored transposed straight to C, or to the workspace): 2 -> 84, 3 -> 126, 4 -> 168, 5 -> 210 KiB fit 227 KiB. The
# 256-token tile's 48 KiB stages fit 4 deep (192 KiB): at 5 stages the plan takes the tiles of 208 rows or fewer.
STAGES = rings_that_fit(stage_bytes(MID_MOST_TOKENS), 1024, (2, 3, 4, 5))
assert STAGES == (2, 3, 4, 5) and triton_mid_ring_fits(MID_WIDE_TOKENS, 4)
# the plan's ring test (suite.waves, which imports no kernel) and this module's agree on the shared memory a block has
assert all(triton_mid_ring_fits(MID_MOST_TOKENS, s) == (s in STAGES) for s in range(2, 7))
assert rings_that_fit(stage_bytes(MID_WIDE_TOKENS), 1024, (4, 5)) == (4,)
assert not triton_mid_ring_fits(MID_WIDE_TOKENS, 5)


def token_pieces(block_t: int) -> tuple[int, int, int]:
    """A token tile's rows as the tl.dot pieces that compute it: its binary digits, largest first, padded with 0 to
    MOST_PIECES (144 -> (128, 16, 0)). ``block_t`` is a multiple of 16 (tl.dot's least N) of at most
    MID_MOST_TOKENS, or MID_WIDE_TOKENS (one piece)."""
    if block_t != MID_WIDE_TOKENS and (block_t % 16 or not 16 <= block_t <= MID_MOST_TOKENS):
        raise ValueError(
            f"a token tile is a multiple of 16 within [16, {MID_MOST_TOKENS}] rows, or {MID_WIDE_TOKENS} "
            f"(got {block_t})"
        )
    pieces = mid_pieces(block_t)
    assert len(pieces) <= MOST_PIECES, block_t  # 208 = 128 + 64 + 16, and no multiple of 16 below has more
    return (*pieces, *(0,) * (MOST_PIECES - len(pieces)))


@dataclass(frozen=True)
class Plan:
    """Tiles and schedule of one mid-M launch (``plan``)."""

    block_t: int  # token rows (C's rows) per tile: wgmma's N, as ``pieces``
    tiles_t: int
    tiles_w: int
    schedule: Schedule

    @property
    def pieces(self) -> tuple[int, int, int]:
        return token_pieces(self.block_t)


def plan(dtype: str, m: int, n: int, k: int, sms: int, stages: int | None = None) -> Plan:
    """The rule, from the shape: ``mid_token_rows``' tokens (a tile whose ring fits ``stages`` deep, if given) by
    BLOCK_W weight rows, walked by the split tail over ``sms`` programs (one per SM) in K tiles of
    ``block_k_for(dtype)``."""
    block_t = mid_token_rows(m, n, k, sms, dtype, stages)
    tiles_t, tiles_w = -(-m // block_t), -(-n // BLOCK_W)
    k_tiles = -(-k // block_k_for(dtype))
    schedule = split_tail_schedule(tiles_t * tiles_w, k_tiles, sms)  # one round: the model's, and mid_kernel's walk
    assert schedule.sk_programs <= schedule.programs, schedule
    return Plan(block_t, tiles_t, tiles_w, schedule)


@triton.jit
def _put(
    acc,
    c,
    slot,
    t0,
    row0,
    w0,
    T,
    W,
    stride_cm,
    whole,
    scale_a,
    scale_b,
    P: tl.constexpr,
    BLOCK_W: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
    SHARED: tl.constexpr,
):
    """One piece's accumulator ([BLOCK_W, P]: weight rows x token rows ``row0``.. of the tile at (t0, w0)) out: to C,
    transposed, scaled (fp8) and cast, where the program covered the tile ``whole``; else its fp32 part, unscaled,
    into the program's workspace ``slot``, in C's orientation ([tile's tokens, BLOCK_W], what gemm_streamk's fix-up
    reads)."""
    ws = tl.arange(0, BLOCK_W)
    ts = row0 + tl.arange(0, P)
    if whole:
        inside = (w0 + ws[:, None] < W) & (t0 + ts[None, :] < T)
        ptrs = c + (t0 + ts[None, :]).to(tl.int64) * stride_cm + (w0 + ws[:, None])
        store_tile(ptrs, acc, inside, scale_a, scale_b, OUT_DTYPE, SCALED)
    elif SHARED:  # (never taken when no tile is shared: then there is no workspace to compile this against)
        tl.store(slot + ts[None, :] * BLOCK_W + ws[:, None], acc)


@triton.jit
def mid_kernel(
    # the token pieces' descriptors (boxes of T0, T1, T2 rows x BLOCK_K; a piece of 0 rows passes T0's, unread), the
    # weight's (B, K x N: boxes of BLOCK_K x BLOCK_W; fp8's N x K: BLOCK_W x BLOCK_K), C and the fp32 workspace
    # [programs, 2, BLOCK_T, BLOCK_W]
    tokens0,
    tokens1,
    tokens2,
    weight_desc,
    c,
    workspace,
    # sizes: tokens (M), weight rows (N), K; C's row pitch (elements)
    T,
    W,
    K,
    stride_cm,
    # the schedule (gemm_streamk.split_tail_schedule): programs, whole tiles, programs sharing the tail, its K tiles
    num_programs,
    dp_tiles,
    sk_programs,
    sk_iters,
    # fp8 only: pointers to the per-tensor scales (one fp32 each); None otherwise
    scale_a,
    scale_b,
    # meta-parameters
    T0: tl.constexpr,  # the token tile's pieces (token_pieces), largest first; 0: no such piece
    T1: tl.constexpr,
    T2: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr,  # B given N x K (fp8): the weight box as it comes, each K tile's sum promoted
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
    SHARED: tl.constexpr,  # some tile is shared by several programs: parts go to the workspace (else it is None)
):
    BLOCK_T: tl.constexpr = T0 + T1 + T2

    # -- this program's units: its whole tiles round robin, then its share of the tail (gemm_parts.walk_unit); the
    #    token tiles of one weight tile are neighbours in the walk (up to GROUP_M of them): it streams once --
    unit, dp_units, it, end, sk_program, tiles_t, tiles_w, k_tiles, sched = walk_start(
        T, W, K, BLOCK_T, BLOCK_W, BLOCK_K, num_programs, dp_tiles, sk_programs, sk_iters
    )
    while (unit < dp_units) | (it < end):
        walk = (unit, dp_units, it, end, sk_program, tiles_t, tiles_w, k_tiles, sched)
        # (one stream-K program per program: plan's schedule is the split tail in one round, ROUNDS off)
        tile, t0, w0, k_first, k_last, part, it, end, sk_program, unit = walk_unit(
            *walk, BLOCK_T, BLOCK_W, GROUP_M, ROUNDS=False
        )

        # -- MAINLOOP: the weight box and the pieces' token boxes through the ring; one wgmma chain per piece on
        #    the same weight stage, the weight on wgmma's M side: each accumulator is C^T's [BLOCK_W, piece] --
        acc0 = tl.zeros((BLOCK_W, T0), dtype=tl.float32)
        if T1:
            acc1 = tl.zeros((BLOCK_W, T1), dtype=tl.float32)
        if T2:
            acc2 = tl.zeros((BLOCK_W, T2), dtype=tl.float32)
        # fp8: each K tile's sum promoted into fp32 (max_num_imprecise_acc=BLOCK_K), as gemm_parts.mac_loop and
        # promoted cuBLAS do; 16 bits: exact in fp32 already (no promotion asked)
        IMPRECISE: tl.constexpr = BLOCK_K if B_K_MAJOR else None
        for kt in range(k_first, k_last):
            k = kt * BLOCK_K
            if B_K_MAJOR:
                weight = weight_desc.load([w0, k])  # [BLOCK_W, BLOCK_K], K-major as fp8's wgmma takes it
            else:
                weight = weight_desc.load([k, w0]).T  # [BLOCK_W, BLOCK_K], read transposed
            # tokens zero past T and K
            acc0 = tl.dot(weight, tokens0.load([t0, k]).T, acc0, max_num_imprecise_acc=IMPRECISE)
            if T1:
                acc1 = tl.dot(weight, tokens1.load([t0 + T0, k]).T, acc1, max_num_imprecise_acc=IMPRECISE)
            if T2:
                acc2 = tl.dot(weight, tokens2.load([t0 + T0 + T1, k]).T, acc2, max_num_imprecise_acc=IMPRECISE)

        # -- EPILOGUE: the tile whole to C, or this program's part to its slot for the fix-up pass --
        whole = (k_first == 0) & (k_last == k_tiles)
        slot = workspace
        if SHARED:
            slot = workspace + part * (BLOCK_T * BLOCK_W)
        _put(acc0, c, slot, t0, 0, w0, T, W, stride_cm, whole, scale_a, scale_b, T0, BLOCK_W, OUT_DTYPE, SCALED, SHARED)
        if T1:
            _put(
                acc1,
                c,
                slot,
                t0,
                T0,
                w0,
                T,
                W,
                stride_cm,
                whole,
                scale_a,
                scale_b,
                T1,
                BLOCK_W,
                OUT_DTYPE,
                SCALED,
                SHARED,
            )
        if T2:
            _put(
                acc2,
                c,
                slot,
                t0,
                T0 + T1,
                w0,
                T,
                W,
                stride_cm,
                whole,
                scale_a,
                scale_b,
                T2,
                BLOCK_W,
                OUT_DTYPE,
                SCALED,
                SHARED,
            )


class MidGemm(StreamKGemm):
    """The mid-M GEMM at ``stages``: ``plan``'s tiles, the split tail's schedule over ``sms`` programs (one per SM
    unless given: tests), gemm_streamk's fix-up pass for the shared tiles."""

    depths = STAGES
    kernels = ("mid_kernel", "streamk_fixup_kernel")
    fault = (FAULT_FIXUP_FIRST, "the fix-up pass launched before the mid-M pass")

    def _plan(self, sms: int | None = None) -> None:
        ops = self.ops
        block_k = block_k_for(ops.dtype)
        self.mid = p = plan(ops.dtype, ops.m, ops.n, ops.k, sms or num_sms(ops.a.device), self.stages)
        self.warps, self.tile = NUM_WARPS, (p.block_t, BLOCK_W, block_k)
        self.schedule = s = p.schedule
        self.fixups = s.sk_tiles if s.cover > 1 else 0
        self._workspace(s.sk_programs * 2 if self.fixups else 0, p.block_t, BLOCK_W)
        self.table = torch.tensor(s.fixup_table(), dtype=torch.int32, device=ops.c.device) if self.fixups else None
        pieces = " + ".join(str(t) for t in p.pieces if t)
        shares = s.sk_programs // max(1, s.sk_tiles)
        waves = f"{s.dp_tiles} in whole waves of {s.programs}" if s.dp_tiles else "no whole wave"
        walk = (
            f"{count(s.tiles, 'tile')}: {waves}, then {s.sk_tiles} x {count(shares, 'share')} of "
            f"{count(s.k_tiles, 'K tile')}, the shares summed in K order by a fix-up pass"
            if self.fixups
            else f"{count(s.tiles, 'tile')} of {count(s.k_tiles, 'K tile')} on {count(s.programs, 'program')}"
        )
        self.config = (
            f"swapped (C^T = B^T A^T): {BLOCK_W} weight rows x {p.block_t} tokens ({pieces}: one tl.dot each) x "
            f"{block_k} K per tile, num_warps={NUM_WARPS}, num_stages={self.stages} "
            f"({stage_bytes(p.block_t) // 1024} KiB stages), split tail: {walk}"
            + dtype_config(ops.dtype, "tl.dot(weight, tokens.T)")
            + self.operands.note
        )
        self.info = kernel_info(None, stage_bytes(p.block_t), self.config, s.programs)

    def _main(self):
        ops, p, s = self.ops, self.mid, self.schedule
        block_k = self.tile[2]
        self.operands.refresh()
        # one descriptor per piece (boxes of its rows), over the tensors the kernel reads; a piece of 0 rows: T0's.
        # The weight's box: [block_k, BLOCK_W] of a K x N B, [BLOCK_W, block_k] of fp8's N x K
        descs = [self.operands.ab_descriptors(t or p.pieces[0], BLOCK_W, block_k) for t in p.pieces]
        t0, t1, t2 = p.pieces
        meta = {"T0": t0, "T1": t1, "T2": t2, "BLOCK_W": BLOCK_W, "BLOCK_K": block_k, "GROUP_M": s.group_m}
        return mid_kernel[(s.programs,)](
            *(a for a, _ in descs),
            descs[0][1],
            ops.c,
            self.workspace,
            *(ops.m, ops.n, ops.k, ops.c.stride(0)),
            *(s.programs, s.dp_tiles, s.sk_programs, s.sk_iters),
            ops.scale_a,
            ops.scale_b,
            **meta,
            B_K_MAJOR=ops.b_k_major,
            **epilogue_kwargs(ops),
            SHARED=self.fixups > 0,
            num_warps=NUM_WARPS,
            num_stages=self.stages,
        )


# mid_kernel + gemm_streamk's fix-up pass for the registry. compute-sanitizer, on 132 SMs: M = 200 (one token tile of
# 208 = 128 + 64 + 16 rows) by 300 columns (3 weight tiles, the last partial; N not a multiple of 8: B through its
# padded pitch), each tile in shares of K (3 of 16 K tiles at 16 bits, 2 of 8 at fp8), the last partial; and M = 641
# by 11776 columns: at 16 bits three token tiles of 256 rows, one piece each, the third's rows past M zero fill (at 5
# stages, where 256 does not fit, six of 128), whole waves, then tiles in 2 shares each; at fp8 four of 192
KERNEL = TwoPassModule(MidGemm, sanitize_sizes=((200, 300, 1000), (641, 11776, 520)))
