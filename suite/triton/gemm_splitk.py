"""Split-K GEMM in Triton: C = A @ B with K divided over programs, for shapes whose output tiles are too few to fill
the GPU (long K, decode), and a deterministic second pass that sums the splits.

When M x N makes fewer 128x256 output tiles than the 132 SMs, one program per tile leaves most of the chip idle
(512x512x65536: 8 tiles). Split-K gives every tile ``splits`` programs, each over a contiguous range of K tiles:

* **partial pass** (``splitk_partial_kernel``): program (tile, split) streams A and B through a ``num_stages`` ring of
  tensor-descriptor (TMA) loads over its K range and stores its fp32 partial tile into its own slice of a workspace
  [splits, M, N] (plain masked stores: every element of M x N of every slice is written, zeros by an empty split);
* **reduction pass** (``splitk_reduce_kernel``, launched after it on the same stream, counted in the time): each
  element's splits are added in split order 0, 1, ..., splits - 1 in fp32, scaled (fp8), cast and stored to C.
  The order is fixed, so the result is bit-identical run to run; no atomics anywhere.

With one split there is no workspace and no second pass: the partial pass stores C itself (the plain tile kernel).

The split count comes from the shape (``split_count``, in ``split_k_plan``): the fewest splits that fill the SMs
about as well as any count can within two waves, each split keeping at least MIN_K_TILES_PER_SPLIT K tiles, at most
MAX_SPLITS; the row's config says how many. K ranges are balanced (split s covers K tiles [s k_tiles / splits,
(s + 1) k_tiles / splits)), so a remainder spreads over the splits; more splits than K tiles (which the rule never
picks, but a caller may ask for) leaves some splits empty.

The workspace is sized from the shape by each launcher and belongs to it alone. The tile (``tile_for``): 256 columns by
64 rows (one warpgroup, 4 warps) when M <= 64, where a 128-row tile would be mostly padding, 256 rows by 128 columns
when 128 < M < 256 at 16-bit types (one tile row reads B once), else 128 rows by 256 (two warpgroups, 8 warps); K steps
of 64 for fp16 / bf16 and 128 for fp8 (gemm_desc.TILES): 40 or 48 KiB stages. Split-K takes 128 x 128 tiles (one
warpgroup, fp8 two; 32 KiB stages) instead where 128 x 256 tiles are too few for the SMs but the narrower ones fill one
wave at least half (``split_k_plan``): one split, no workspace, as the PTX split-K's 128 x 128 tiles at M = 256. fp8
takes B as N x K and computes ``tl.dot(a, b.T)`` in two halves of N, each K tile's sum promoted into fp32
(gemm_parts.mac_loop), its scales applied once, to the sum (in the reduction pass, or in the partial pass when there is
one split). A and B rows not 16-byte pitched go through gemm_desc.Operands' padded copies."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from suite import workspace as workspaces
from suite.checks import check_stages, gemm_operands
from suite.kernel import Fault, TritonModule
from suite.triton._interp_dot import fp8_dot_unsupported, widen_bf16_dot
from suite.triton.compiled import kernel_info
from suite.triton.gemm_desc import (
    DTYPES,
    FP8_ACCUMULATION,
    GROUP_M,
    HOPPER_SASS,
    OUT_DTYPES,
    TILES,
    Operands,
    count,
    dtype_config,
    num_sms,
    rings_that_fit,
    stage_bytes,
)
from suite.triton.gemm_parts import add_in_order, mac_loop, split_range, store_tile, tile_coords
from suite.waves import MIN_K_TILES_PER_SPLIT, wave_split_count

# Tall tiles (256 x 128) for 128 < M < 256: the operand bytes the tiles pull from L2, per N x K, are the tile rows
# (each reads all of B) plus M / BLOCK_N (each tile column reads A's M valid rows; TMA fills rows past M with zeros and
# reads nothing for them): 1 + M / 128 against 2 + M / 256 for 128 x 256 tiles, less for every M under 256. Same
# accumulator (128 fp32 registers a thread over 8 warps) and the same stage bytes as 128 x 256.
TALL_M = 256
MAX_SPLITS = 32  # the workspace traffic (splits x M x N x 4 bytes, written and read) stays a fraction of A and B's
WAVE_SLACK = 0.05  # a split count within 5% of the best wave efficiency is as good (fewer splits: less fix-up)
REDUCE_BLOCK = 512  # elements of C per reduction program (4 warps: one 16-byte load per thread and split)
# Shared memory: the ring (C and the partials leave from registers; the layout conversion before their stores reuses
# the ring's space once the mainloop is done); stages of 48 KiB (128-row tiles) or 40 KiB (64-row) at every dtype:
#   2 -> 96, 3 -> 144, 4 -> 192 KiB fit 227 KiB (with Triton's few hundred bytes of barriers); 5 -> 240 KiB does not.
STAGES = rings_that_fit(stage_bytes("fp16"), 1024, (2, 3, 4, 5))
assert STAGES == (2, 3, 4)


def tile_for(dtype: str, m: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, warps) of the split-K and stream-K kernels: gemm_desc.TILES, with 64 rows (one
    warpgroup) instead of 128 (two) when M <= 64, and 256 rows by half the columns for an M between 128 and 256
    (``TALL_M``) at 16-bit types."""
    bm, bn, bk = TILES[dtype]
    if m <= 64:
        return 64, bn, bk, 4
    if TALL_M // 2 < m < TALL_M and dtype != "fp8e4m3":  # fp8's promoted second accumulator spills at 256 rows
        return TALL_M, bn // 2, bk, 8
    return bm, bn, bk, 8


def split_k_plan(dtype: str, m: int, n: int, k: int, sms: int) -> tuple[tuple[int, int, int, int], int]:
    """Split-K's tile (BLOCK_M, BLOCK_N, BLOCK_K, warps) and split count: ``tile_for``'s tile and ``split_count``'s
    splits, except where the 128-row tiles are fewer than the SMs and tiles half as wide fill at least half of them
    and at most all, in one wave: then those (128 x 128, one warpgroup) at one split. Splitting the wide tiles
    instead would add an fp32 workspace written and read again and a second pass (at 256 x 8192 x 8192 fp16: two
    splits, 16 MB beside B's 134 MB); the PTX split-K runs its 128 x 128 tiles unsplit there too."""
    bm, bn, bk, warps = tile_for(dtype, m)
    rows, k_tiles = -(-m // bm), -(-k // bk)
    wide, narrow = rows * -(-n // bn), rows * -(-n // (bn // 2))
    if bm == 128 and wide < sms and sms <= 2 * narrow <= 2 * sms:
        # one warpgroup holds the 128 x 128 accumulator; fp8's promotion keeps a second one beside it, which fits
        # only in two warpgroups' registers (64 rows each)
        return (bm, bn // 2, bk, 8 if dtype == "fp8e4m3" else 4), 1
    return (bm, bn, bk, warps), split_count(wide, k_tiles, sms)


# The sanitizer's self-test (suite.sanitize): the reduction pass launched before the partial pass, i.e. the fix-up
# without the ordering it needs; it reads workspace no partial has written yet, which initcheck reports. The fault's
# workspace comes from a memory pool of its own, so that its bytes are fresh device memory, never written before.
FAULT_REDUCE_FIRST = "PIPESUITE_FAULT_REDUCE_BEFORE_PARTIALS"


def split_count(tiles: int, k_tiles: int, sms: int) -> int:
    """The split-K rule: among 1..cap splits, where cap keeps tiles x splits within two waves of the SMs, every
    split at least MIN_K_TILES_PER_SPLIT K tiles and at most MAX_SPLITS, the fewest whose wave efficiency is within
    WAVE_SLACK (relative) of the best. Tiles already filling two waves get one split (no workspace)."""
    return wave_split_count(tiles, k_tiles, sms, MIN_K_TILES_PER_SPLIT, MAX_SPLITS, WAVE_SLACK)


@triton.jit
def splitk_partial_kernel(
    # A and B: descriptors built on the host; C and the fp32 workspace [splits, M, N]: pointers
    a_desc,
    b_desc,
    c,
    workspace,
    # fp8 only: pointers to the per-tensor scales (one fp32 each); None otherwise
    scale_a,
    scale_b,
    # sizes
    M,
    N,
    K,
    splits,
    # C's row pitch (elements)
    stride_cm,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT: tl.constexpr,  # splits > 1: store the fp32 partial into the workspace (else C, scaled and cast)
    B_K_MAJOR: tl.constexpr,  # B given N x K (fp8): boxes of [BLOCK_N // 2, BLOCK_K], promoted (mac_loop)
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
):
    # -- which tile and which split: the programs of one split are consecutive, so the tiles in flight at once
    #    share their K range of A and B in L2 --
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tiles_m * tiles_n
    split = tl.program_id(0) // tiles
    m0, n0 = tile_coords(tl.program_id(0) % tiles, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
    k_first, k_last = split_range(split, splits, tl.cdiv(K, BLOCK_K))

    # -- MAINLOOP --
    acc = mac_loop(a_desc, b_desc, m0, n0, k_first, k_last, BLOCK_M, BLOCK_N, BLOCK_K, B_K_MAJOR)

    # -- EPILOGUE --
    rows = m0 + tl.arange(0, BLOCK_M)
    cols = n0 + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT:
        # this split's partial, unscaled, into its own slice (an empty split stores its zeros: the reduction reads
        # every slice)
        slice_ = workspace + split.to(tl.int64) * M * N
        tl.store(slice_ + rows[:, None].to(tl.int64) * N + cols[None, :], acc, mask=inside)
    else:
        c_ptrs = c + rows[:, None].to(tl.int64) * stride_cm + cols[None, :]
        store_tile(c_ptrs, acc, inside, scale_a, scale_b, OUT_DTYPE, SCALED)


@triton.jit
def splitk_reduce_kernel(
    # the fp32 workspace [SPLITS, M, N] and C (M x N, contiguous)
    workspace,
    c,
    # fp8 only: pointers to the per-tensor scales; None otherwise
    scale_a,
    scale_b,
    # sizes: M x N
    MN,
    # meta-parameters
    SPLITS: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    SCALED: tl.constexpr,
):
    # -- the second pass: runs after the partial pass on the same stream (stream order is the only wait it needs);
    #    all SPLITS loads issued at once, then added in split order (gemm_parts.add_in_order) --
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < MN
    total = tl.load(workspace + offs, mask=inside, other=0.0)
    total = add_in_order(total, workspace + MN + offs, MN, SPLITS - 1, inside, SPLITS - 1)
    store_tile(c + offs, total, inside, scale_a, scale_b, OUT_DTYPE, SCALED)


def epilogue_kwargs(ops) -> dict:
    """The meta-parameters of every kernel that stores C: its type and whether fp8's scales apply."""
    return {"OUT_DTYPE": OUT_DTYPES[ops.dtype], "SCALED": ops.scale_a is not None}


def reduce_splits(workspace: torch.Tensor, c: torch.Tensor, ops, splits: int) -> None:
    """Launch the reduction pass: C = (sum of the workspace's first ``splits`` slices, in order) x scales."""
    mn = c.numel()
    splitk_reduce_kernel[(triton.cdiv(mn, REDUCE_BLOCK),)](
        workspace,
        c,
        ops.scale_a,
        ops.scale_b,
        mn,
        SPLITS=splits,
        BLOCK=REDUCE_BLOCK,
        **epilogue_kwargs(ops),
        num_warps=4,
    )


def new_workspace(splits: int, m: int, n: int, device: torch.device, fresh: bool = False) -> torch.Tensor:
    """The fp32 workspace [splits, M, N] of one launcher, sized from its shape (suite.workspace; ``fresh``: device
    memory never written before, for the initcheck fault)."""
    return workspaces.new_workspace((splits, m, n), device, fresh)


class TwoPassGemm:
    """What the split-K, stream-K and decode launchers share: the operands checked (at one of its ``depths``, with
    ``counts`` a test may force: None or a whole number >= 1), a main pass (``_main``) over A's and B's host-built
    descriptors and, when ``needs_fixup``, a fix-up pass (``_fixup``) after it on the same stream, or before it under
    the sanitizer's fault (``fixup_first``: ``faults`` holds ``fault``'s define). Subclasses name their ``kernels``
    and their fault, and plan the launch in ``_plan``: the workspace (``_workspace``, which also says whether the
    fix-up runs), ``warps``, ``config`` and ``info`` (whose grid is the main pass's)."""

    depths = STAGES  # the num_stages it takes
    kernels: tuple[str, ...] = ()  # the main pass's and the fix-up pass's, as the sanitizer's reports name them
    fault = ("", "")  # the sanitizer's self-test: (its define, what launching the fix-up first is)
    needs_fixup = False
    workspace: torch.Tensor | None = None

    def __init__(self, inputs, c: torch.Tensor, stages: int, faults: tuple = (), **counts):
        check_stages(stages, self.depths)
        ops = gemm_operands(inputs, c, DTYPES)
        c = ops.c  # with the strides of its shape (checks.canonical)
        for name, value in counts.items():
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a whole number >= 1 (got {value!r})")
        widen_bf16_dot()  # the interpreter's bf16 dot (suite.triton._interp_dot); nothing on a GPU
        self.ops, self.stages, self.fixup_first = ops, stages, self.fault[0] in faults
        self.operands = Operands(ops.a, ops.b, c, b_k_major=ops.b_k_major)
        self._compiled = False
        self._plan(**counts)

    def _plan(self, **counts) -> None:
        """Choose the tiles, counts and schedule for these operands (``counts``: those a test forces), make the
        workspace (``_workspace``), and set ``config`` and ``info``."""
        raise NotImplementedError

    def _workspace(self, slices: int, rows: int, cols: int) -> None:
        """The fp32 workspace [slices, rows, cols], sized from this call's shape, and the fix-up pass that reads it;
        ``slices`` = 0: neither (then the fault has no fix-up to launch early either)."""
        self.needs_fixup = slices > 0
        self.fixup_first = self.fixup_first and self.needs_fixup
        self.workspace = (
            new_workspace(slices, rows, cols, self.ops.c.device, fresh=self.fixup_first) if slices else None
        )

    def _tile_for(self, tile: tuple[int, int, int, int] | None = None) -> tuple[int, int]:
        """``tile`` (BLOCK_M, BLOCK_N, BLOCK_K, warps; by default ``tile_for``'s) into ``tile`` and ``warps``; the
        output tiles it makes and the K tiles of each."""
        ops = self.ops
        bm, bn, bk, self.warps = tile or tile_for(ops.dtype, ops.m)
        self.tile = bm, bn, bk
        return triton.cdiv(ops.m, bm) * triton.cdiv(ops.n, bn), triton.cdiv(ops.k, bk)

    def _mac_box(self) -> tuple[int, int, int]:
        """A's and B's boxes of gemm_parts.mac_loop at this tile: fp8 loads B in two halves of N."""
        bm, bn, bk = self.tile
        return bm, bn // 2 if self.ops.b_k_major else bn, bk

    def _main(self):
        """Launch the main pass; what Triton compiled (None in the interpreter)."""
        raise NotImplementedError

    def _fixup(self) -> None:
        raise NotImplementedError

    def _launch_main(self, kernel, programs: int, box: tuple[int, int, int], *args, **meta):
        """``kernel`` over ``programs`` programs: A's and B's descriptors for ``box`` (A's rows, B's columns, K), C,
        the workspace, the scales, M, N, K, then ``args``; ``meta`` and the meta-parameters all three share."""
        ops = self.ops
        self.operands.refresh()
        a_desc, b_desc = self.operands.ab_descriptors(*box)
        return kernel[(programs,)](
            *(a_desc, b_desc, ops.c, self.workspace, ops.scale_a, ops.scale_b, ops.m, ops.n, ops.k, *args),
            **meta,
            B_K_MAJOR=ops.b_k_major,
            **epilogue_kwargs(ops),
            num_warps=self.warps,
            num_stages=self.stages,
        )

    def _compiled_info(self, compiled) -> None:
        """The row's KernelInfo once Triton compiled the main pass: its resources, SASS and occupancy."""
        self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.info.grid)

    def __call__(self) -> None:
        if self.fixup_first:  # the fault: the fix-up before the partials it sums
            self._fixup()
        compiled = self._main()
        if self.needs_fixup and not self.fixup_first:
            self._fixup()  # after the partials: stream order
        if not self._compiled and compiled is not None:
            self._compiled = True
            self._compiled_info(compiled)


class SplitKGemm(TwoPassGemm):
    """Split-K at ``stages`` on the dtype's tile: ``splits`` from ``split_count`` unless given (the tests force
    counts the rule would not pick)."""

    kernels = ("splitk_partial_kernel", "splitk_reduce_kernel")
    fault = (FAULT_REDUCE_FIRST, "the reduction pass launched before the partial pass")

    def _plan(self, splits: int | None = None) -> None:
        ops = self.ops
        tile, rule = split_k_plan(ops.dtype, ops.m, ops.n, ops.k, num_sms(ops.a.device))
        tiles, k_tiles = self._tile_for(tile)
        bm, bn, bk = self.tile
        self.splits = rule if splits is None else splits
        self.grid = tiles * self.splits
        self._workspace(self.splits if self.splits > 1 else 0, ops.m, ops.n)
        self.config = (
            f"{bm}x{bn}x{bk}, num_warps={self.warps}, num_stages={self.stages}, split-K: "
            f"{count(self.splits, 'split')} of {count(k_tiles, 'K tile')} over {count(tiles, 'tile')}"
            + (
                f" ({self.grid} programs), fp32 workspace [{self.splits}, M, N] summed in split order by a second pass"
                if self.splits > 1
                else ", C stored directly"
            )
            + dtype_config(ops.dtype)
            + self.operands.note
        )
        self.info = kernel_info(None, stage_bytes(ops.dtype, self.tile), self.config, self.grid)

    def _main(self):
        bm, bn, bk = self.tile
        meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M, "SPLIT": self.splits > 1}
        return self._launch_main(
            splitk_partial_kernel, self.grid, self._mac_box(), self.splits, self.ops.c.stride(0), **meta
        )

    def _fixup(self) -> None:
        reduce_splits(self.workspace, self.ops.c, self.ops, self.splits)


class TwoPassModule(TritonModule):
    """A TwoPassGemm (``launcher``), swept over its depths, for the registry: the same rings fit at every dtype
    (split-K's and stream-K's stages are 40-48 KiB, tile_for; decode's at most 40 KiB, its block_k_for); fp8 where
    the interpreter has an fp8 dot (suite.triton._interp_dot). The sanitizer's self-test launches the fix-up pass
    first at 2 stages, at the first of ``sanitize_sizes``: it reads workspace nothing has written yet (initcheck)."""

    depth_is_num_stages = True  # the launch's num_stages (suite.kernel.TritonModule)
    dtypes = DTYPES
    fp8_accumulation = FP8_ACCUMULATION
    sass_requires = HOPPER_SASS  # the main pass's; the fix-up pass is plain loads and stores

    def __init__(self, launcher: type[TwoPassGemm], sanitize_sizes: tuple):
        self.launcher, self.stages, self.sanitize_sizes = launcher, launcher.depths, sanitize_sizes
        define, fault = launcher.fault
        self.faults = (
            Fault(
                f"{fault} (the fix-up without its ordering)",
                define,
                (2,),
                tool="initcheck",
                size=sanitize_sizes[0],
                in_launcher=True,
            ),
        )

    def stages_for(self, dtype: str) -> tuple:
        return self.stages

    def skip_reason(self, dtype: str) -> str | None:
        return fp8_dot_unsupported() if dtype == "fp8e4m3" else None

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return self.launcher.kernels

    def launch(self, inputs, out, stages):
        return self.launcher(inputs, out, stages, faults=self.extra_defines)


# splitk_partial_kernel + splitk_reduce_kernel for the registry. compute-sanitizer (on 132 SMs), each size with
# splits over a K whose tiles do not divide evenly, a partial last K tile and N not a multiple of 8 (B through its
# padded pitch): M = 200 on 1 x 3 tall tiles (256 x 128; fp8: 2 x 2 edge tiles of 128 x 256), M = 300 on 3 x 2
# tiles of 128 x 256, and 64-row tiles, 16 splits of 65 K tiles
KERNEL = TwoPassModule(SplitKGemm, sanitize_sizes=((200, 300, 1096), (300, 300, 1096), (64, 520, 4104)))
