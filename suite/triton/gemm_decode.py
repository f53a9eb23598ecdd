"""Decode GEMM in Triton: C = A @ B for a few token rows (M = 1..256) against a wide weight B, computed swapped,
C^T = B^T A^T, with split-K where the weight's tiles alone cannot fill the SMs.

A decode step streams the weight (K x N, 134 MB at 8192 x 8192 fp16) through the SMs exactly once, against M = 16
tokens: a memory pipeline. The 128x256 tiles of the other kernels put the tokens on wgmma's M side, which is at least
64 rows per warpgroup, so a 16-token step wastes three quarters of every wgmma and keeps 128-row A tiles in shared
memory for nothing. Swapped, the weight's N runs along wgmma's M (BLOCK_W = 64 or 128 weight rows per program, one
warpgroup) and the tokens along wgmma's N (BLOCK_T = 16..64: wgmma's N may be any multiple of 8): every row of every
wgmma is real weight, and the shared-memory ring holds weight, BLOCK_K deep.

* **mainloop**: per K tile, a [BLOCK_T, BLOCK_K] box of A and a box of B (TMA through host-built descriptors), then
  ``tl.dot(w, a.T)`` with w the weight as [BLOCK_W, BLOCK_K]: B's K x N box transposed (fp16 / bf16: wgmma reads a
  transposed 16-bit operand from shared memory), or fp8's N x K box as it comes (K-major, as wgmma's fp8 form needs
  both operands);
* the ring is ``num_stages`` deep: the weight streams once, so depth buys bytes in flight, ((S - 1) x the stage's
  bytes per SM), not reuse;
* **epilogue**: the [BLOCK_W, BLOCK_T] accumulator is C^T's tile: stored transposed into C (scaled and cast), or with
  split-K as an fp32 partial into the workspace [splits, M, N] that gemm_splitk's reduction pass sums in split order
  (deterministic, no atomics).

The rule (``plan``), from the shape only:

* BLOCK_T = the power of two >= M, between 16 (tl.dot's least) and 64; more tokens take several token tiles, which
  read the same weight tile at the same time (neighbouring programs), so it streams from DRAM about once;
* BLOCK_K = the largest power of two (at most 256, TMA's box limit) whose stage, (BLOCK_W + BLOCK_T) x BLOCK_K
  elements, stays within 48 KiB: rings of 2..4 stages (STAGES) always fit 227 KiB. A wide tile's stage stays
  deep in K (128 weight rows x 64 tokens: BLOCK_K 128, not 64): fewer, larger TMA boxes keep more bytes in flight
  per stage than a deeper ring of shallow ones (docs/tuning.md);
* BLOCK_W in {64, 128} and the split count (gemm_splitk.split_count: at most two waves, >= 4 K tiles per split) are
  chosen together: the pair with the best wave efficiency over the SMs, ties to fewer splits (one split: no
  workspace, no second pass), then to the wider tile. E.g. N = 8192 -> 128 programs of 64 weight rows, no split;
  N = 4096 -> 64 x 2 splits; N = 28672 -> 224 programs of 128 rows.

fp16, bf16 and fp8 (B given N x K, each K tile's sum promoted into fp32, its scales applied once, to the sum). A and B
rows not 16-byte pitched go through gemm_desc.Operands' padded copies."""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import ELEMENT_BYTES, count, dtype_config, num_sms, rings_that_fit
from suite.triton.gemm_parts import split_range, store_tile
from suite.triton.gemm_splitk import (
    FAULT_REDUCE_FIRST,
    TwoPassGemm,
    TwoPassModule,
    reduce_splits,
    split_count,
)
from suite.waves import wave_efficiency

NUM_WARPS = 4  # one warpgroup: BLOCK_W weight rows as 1 or 2 wgmma m64 steps
STAGE_LIMIT = 48 * 1024  # bytes of one stage at most (BLOCK_K is chosen to fit it)
BLOCK_WS = (128, 64)  # weight rows per program, the wider first
MAX_BLOCK_T = 64
MAX_BLOCK_K = 256  # elements: a TMA box has at most 256 per dimension
# Shared memory: the ring, <= 48 KiB a stage (the accumulator's layout conversion before the store reuses the ring's
# space once the mainloop is done): 2 -> 96, 3 -> 144, 4 -> 192 KiB fit 227 KiB; 5 -> 240 KiB does not.
STAGES = rings_that_fit(STAGE_LIMIT, 1024, (2, 3, 4, 5))
assert STAGES == (2, 3, 4)


@dataclass(frozen=True)
class Plan:
    """Tile, splits and grid of one decode launch (``plan``)."""

    block_w: int  # weight rows (C's columns) per program: wgmma's M
    block_t: int  # token rows (C's rows) per program: wgmma's N
    block_k: int
    splits: int
    tiles_w: int
    tiles_t: int

    @property
    def tiles(self) -> int:
        return self.tiles_w * self.tiles_t

    @property
    def programs(self) -> int:
        return self.tiles * self.splits

    def stage_bytes(self, dtype: str) -> int:
        return (self.block_w + self.block_t) * self.block_k * ELEMENT_BYTES[dtype]


def block_t_for(m: int) -> int:
    """Token rows per program: the power of two >= M, within [16, MAX_BLOCK_T]."""
    return min(MAX_BLOCK_T, max(16, triton.next_power_of_2(m)))


def block_k_for(dtype: str, block_w: int, block_t: int) -> int:
    """The largest power of two, at most MAX_BLOCK_K, whose stage (A's and B's boxes) fits STAGE_LIMIT."""
    fits = STAGE_LIMIT // ((block_w + block_t) * ELEMENT_BYTES[dtype])
    return min(MAX_BLOCK_K, 1 << (fits.bit_length() - 1))


def plan(dtype: str, m: int, n: int, k: int, sms: int, splits: int | None = None) -> Plan:
    """The decode rule (the module's docstring): BLOCK_T from M, BLOCK_K from the stage limit, and (BLOCK_W, splits)
    with the best wave efficiency, ties to fewer splits, then the wider tile. ``splits`` forces a count (tests)."""
    block_t = block_t_for(m)
    tiles_t = triton.cdiv(m, block_t)
    best = None
    for block_w in BLOCK_WS:
        block_k = block_k_for(dtype, block_w, block_t)
        tiles = triton.cdiv(n, block_w) * tiles_t
        s = split_count(tiles, triton.cdiv(k, block_k), sms) if splits is None else splits
        candidate = Plan(block_w, block_t, block_k, s, triton.cdiv(n, block_w), tiles_t)
        score = (wave_efficiency(candidate.programs, sms), -s)  # BLOCK_WS is widest first: ties keep the wider
        if best is None or score > best[0]:
            best = (score, candidate)
    return best[1]


@triton.jit
def decode_kernel(
    # The main passes' launch convention (TwoPassGemm._launch_main: A, B, C, workspace, scales, M, N, K, splits, C's
    # pitch), named here in the decode's own terms: A holds the T tokens, B the weight of W rows (C's N). One tuple
    # argument would state the convention once, but Triton then drops the 16-byte alignment of the pointers inside
    # it (the epilogue's stores compile narrower), so it stays a parameter list.
    # the tokens (A) and the weight (B): descriptors built on the host; C and the fp32 workspace [splits, T, W]
    tokens_desc,
    weight_desc,
    c,
    workspace,
    # fp8 only: pointers to the per-tensor scales (one fp32 each); None otherwise
    scale_a,
    scale_b,
    # sizes: tokens (M), weight rows (N), K
    T,
    W,
    K,
    splits,
    # C's row pitch (elements)
    stride_cm,
    # meta-parameters
    BLOCK_W: tl.constexpr,  # weight rows (N) per program: the wgmma's M
    BLOCK_T: tl.constexpr,  # token rows (M) per program: the wgmma's N
    BLOCK_K: tl.constexpr,
    SPLIT: tl.constexpr,  # splits > 1: store the fp32 partial into the workspace (else C, scaled and cast)
    B_K_MAJOR: tl.constexpr,  # B given N x K (fp8): its box is a 64-row slice of the weight, [64, BLOCK_K]
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
):
    # -- which token tile, weight tile and split: token tiles of one weight tile are neighbours (they read the same
    #    weight boxes at about the same time, so the weight comes from DRAM about once), then the weight tiles of one
    #    split (adjacent columns of the same K rows) --
    pid = tl.program_id(0)
    tiles_t = tl.cdiv(T, BLOCK_T)
    tiles = tiles_t * tl.cdiv(W, BLOCK_W)
    split = pid // tiles
    t0 = (pid % tiles % tiles_t) * BLOCK_T
    w0 = (pid % tiles // tiles_t) * BLOCK_W
    k_first, k_last = split_range(split, splits, tl.cdiv(K, BLOCK_K))

    # -- MAINLOOP: num_stages boxes of weight in flight (TMA into the pipeliner's ring); wgmma with the weight as
    #    the M side, the tokens as the N side: acc is C^T's tile, [BLOCK_W, BLOCK_T] --
    if B_K_MAJOR:
        # fp8: each K tile's sum promoted into fp32 (max_num_imprecise_acc=BLOCK_K), as gemm_parts.mac_loop and
        # promoted cuBLAS do; in 64-row slices of the weight (wgmma's M per warpgroup), the weight's box being one
        # slice: the promotion of a two-instruction accumulator makes ptxas serialize every wgmma
        SLICES: tl.constexpr = BLOCK_W // 64
        top = tl.zeros((64, BLOCK_T), dtype=tl.float32)
        bottom = tl.zeros((64, BLOCK_T), dtype=tl.float32)
        for kt in range(k_first, k_last):
            tokens = tokens_desc.load([t0, kt * BLOCK_K]).T  # [BLOCK_K, BLOCK_T], zero past T
            top = tl.dot(weight_desc.load([w0, kt * BLOCK_K]), tokens, top, max_num_imprecise_acc=BLOCK_K)
            if SLICES == 2:
                weight = weight_desc.load([w0 + 64, kt * BLOCK_K])  # [64, BLOCK_K]
                bottom = tl.dot(weight, tokens, bottom, max_num_imprecise_acc=BLOCK_K)
        if SLICES == 2:
            acc = tl.reshape(tl.permute(tl.join(top, bottom), (2, 0, 1)), (BLOCK_W, BLOCK_T))
        else:
            acc = top
    else:
        acc = tl.zeros((BLOCK_W, BLOCK_T), dtype=tl.float32)
        for kt in range(k_first, k_last):
            tokens = tokens_desc.load([t0, kt * BLOCK_K])  # [BLOCK_T, BLOCK_K], zero past T
            weight = weight_desc.load([kt * BLOCK_K, w0]).T  # [BLOCK_K, BLOCK_W] read transposed
            acc = tl.dot(weight, tokens.T, acc)

    # -- EPILOGUE: C[t, w] = acc[w, t], masked to T x W --
    ws = w0 + tl.arange(0, BLOCK_W)
    ts = t0 + tl.arange(0, BLOCK_T)
    inside = (ws[:, None] < W) & (ts[None, :] < T)
    if SPLIT:
        # this split's partial, unscaled, into its own slice of the workspace (an empty split stores its zeros)
        slice_ = workspace + split.to(tl.int64) * T * W
        tl.store(slice_ + ts[None, :].to(tl.int64) * W + ws[:, None], acc, mask=inside)
    else:
        store_tile(
            c + ts[None, :].to(tl.int64) * stride_cm + ws[:, None], acc, inside, scale_a, scale_b, OUT_DTYPE, SCALED
        )


class DecodeGemm(TwoPassGemm):
    """The swapped decode GEMM at ``stages``, planned by ``plan`` (``splits`` forces a split count: tests)."""

    depths = STAGES
    warps = NUM_WARPS
    kernels = ("decode_kernel", "splitk_reduce_kernel")
    fault = (FAULT_REDUCE_FIRST, "the reduction pass launched before the decode pass")

    def _plan(self, splits: int | None = None) -> None:
        ops = self.ops
        sms = num_sms(ops.a.device)
        self.plan = p = plan(ops.dtype, ops.m, ops.n, ops.k, sms, splits)
        self._workspace(p.splits if p.splits > 1 else 0, ops.m, ops.n)
        stage = p.stage_bytes(ops.dtype)
        self.config = (
            f"swapped (C^T = B^T A^T): {p.block_w} weight rows x {p.block_t} tokens x {p.block_k} K per "
            f"program, num_warps={NUM_WARPS}, num_stages={self.stages} ({stage // 1024} KiB stages), "
            f"{count(p.tiles, 'tile')} x {count(p.splits, 'split')} = {count(p.programs, 'program')}"
            + (
                ", fp32 workspace [splits, M, N] summed in split order by a second pass"
                if p.splits > 1
                else ", C stored directly"
            )
            + dtype_config(ops.dtype)
            + self.operands.note
        )
        self.info = kernel_info(None, stage, self.config, p.programs)
        self._note_in_flight(sms)

    def _note_in_flight(self, sms: int) -> None:
        """Loads each SM keeps in flight: S - 1 stages ahead of the one the wgmma reads, per program, times the
        programs an SM holds at once (as many as fit, kernel_info's occupancy once compiled, but no more than the
        grid gives it)."""
        per_sm = max(1, min(self.info.occupancy or 1, -(-self.plan.programs // sms)))
        self.info.resident_blocks_per_sm = per_sm
        self.info.bytes_in_flight_per_sm = (self.stages - 1) * self.info.smem_per_stage * per_sm

    def _main(self):
        p = self.plan
        # fp8's weight box is one 64-row slice (decode_kernel's promoted main loop)
        box = (p.block_t, 64 if self.ops.b_k_major else p.block_w, p.block_k)
        meta = {"BLOCK_W": p.block_w, "BLOCK_T": p.block_t, "BLOCK_K": p.block_k, "SPLIT": p.splits > 1}
        return self._launch_main(decode_kernel, p.programs, box, p.splits, self.ops.c.stride(0), **meta)

    def _fixup(self) -> None:
        reduce_splits(self.workspace, self.ops.c, self.ops, self.plan.splits)

    def _compiled_info(self, compiled) -> None:
        super()._compiled_info(compiled)
        self._note_in_flight(num_sms(self.ops.a.device))


# decode_kernel (+ gemm_splitk's reduction pass) for the registry. compute-sanitizer: M = 5 (one token tile, 11 rows
# of zero fill), N = 4000 (B's pitch padded, edge weight tiles) and K long enough for several splits with a remainder
# and a ring that wraps; and M = 70 (two token tiles, the second nearly empty)
KERNEL = TwoPassModule(DecodeGemm, sanitize_sizes=((5, 4000, 2056), (70, 1000, 520)))
