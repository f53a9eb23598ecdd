"""C = A @ B (fp32 accumulate) in Triton through tensor descriptors (TMA on Hopper), one program per output tile or
persistent (at most one program per SM looping over tiles: suite.waves' rule), swept over ``num_stages``; and the
``tuned`` launcher, which lets triton.autotune pick among these kernels' schedules, depths and rasterizations.

Three input types (suite.problems.GEMM_DTYPES), each on its own tile, every stage 48 KiB of shared memory:

* fp16 -> fp16 and bf16 -> bf16: A (M x K) and B (K x N) row-major, 128x256x64;
* fp8 e4m3 -> bf16: B is given N x K (K-major, what wgmma's fp8 form reads and ``torch._scaled_mm`` takes), loaded as
  [BLOCK_N, BLOCK_K] boxes and multiplied as ``tl.dot(a, b.T)``; 128x256x128, fp8's natural tile (wgmma's k32 steps,
  128-byte rows). The per-tensor scales multiply the fp32 accumulator in the epilogue, before the bf16 store, as
  ``torch._scaled_mm`` does. wgmma sums fp8 products with fewer mantissa bits than fp32 (and Triton's default on sm_90
  keeps them there across all of K, which at K = 8192 falls outside the tolerance), so each K tile's sum is promoted
  into fp32 registers (``max_num_imprecise_acc=BLOCK_K``), as promoted cuBLAS and the PTX kernel do: in two halves of N,
  whose second accumulators need 64 registers a thread (the whole tile's would need 128, and spills).

The descriptors are built either in the kernel (``tl.make_tensor_descriptor``: each program writes its tensor maps to
global scratch and fences them before its first load) or on the host (``triton.tools.tensor_descriptor``, passed as
kernel parameters: nothing to build or fence on the device). The table keeps both, so it shows what that buys
(docs/tuning.md).

Tensor descriptors need every row pitch to be a multiple of 16 bytes. Where a row of A or B is not (K or N not a
multiple of 8 for 2-byte types, K not a multiple of 16 for fp8), the launcher copies it into a buffer with a padded
pitch on every call (counted in the time, said in the config): ``Operands``, which the other descriptor kernels of
the suite (split-K, stream-K, decode) use too."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from suite.checks import check_stages, gemm_operands
from suite.kernel import TritonModule
from suite.triton._interp_dot import fp8_dot_unsupported, widen_bf16_dot
from suite.triton.compiled import kernel_info
from suite.triton.gemm_parts import mac_loop, scaled, tile_coords
from suite.waves import grid_note, persistent_grid

DTYPES = ("fp16", "bf16", "fp8e4m3")
# (BLOCK_M, BLOCK_N, BLOCK_K) per input type: 48 KiB per stage either way, (128 x 64 + 64 x 256) x 2 bytes for the
# 2-byte types and (128 x 128 + 256 x 128) x 1 byte for fp8
TILES = {"fp16": (128, 256, 64), "bf16": (128, 256, 64), "fp8e4m3": (128, 256, 128)}
BLOCK_M, BLOCK_N, BLOCK_K = TILES["fp16"]
NUM_WARPS = 8
GROUP_M = 8
# The output type of each input type, for the epilogue's cast (fp8's is bf16, as torch._scaled_mm's here)
OUT_DTYPES = {"fp16": tl.float16, "bf16": tl.bfloat16, "fp8e4m3": tl.bfloat16}
# ... and by name, as gemm_desc_kernel takes it: a string, so that it can sit in the autotuner's key, which
# triton.autotune writes to its on-disk cache as JSON (a tl.dtype is not JSON)
OUT_TYPES = {"fp16": "fp16", "bf16": "bf16", "fp8e4m3": "bf16"}
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp8e4m3": 1}
SMEM_LIMIT = 227 * 1024  # the most shared memory one block may have on sm_90
# What every descriptor kernel's sm_90 build contains (suite.kernel's sass_requires): wgmma fed by TMA loads on
# mbarriers (the split-K / stream-K / decode modules: their main pass)
HOPPER_SASS = {"wgmma": 1, "tma": 1, "mbarrier": 1}


def stage_bytes(dtype: str, tile: tuple[int, int, int] | None = None) -> int:
    """Shared memory of one ring stage: an A box and a B box."""
    bm, bn, bk = tile or TILES[dtype]
    return (bm + bn) * bk * ELEMENT_BYTES[dtype]


def rings_that_fit(ring_stage: int, other: int, depths) -> tuple[int, ...]:
    """The depths whose ring (``ring_stage`` bytes a stage) and ``other`` bytes of shared memory fit SMEM_LIMIT."""
    return tuple(s for s in depths if s * ring_stage + other <= SMEM_LIMIT)


# Shared memory per block = ring + C's staging tile for its descriptor store (64 KiB for a 128x256 tile of 2-byte C;
# half of it when the persistent kernel stores C in two halves). With 48 KiB stages, for every dtype:
#   one program per tile: 2 -> 160, 3 -> 208 KiB; 4 -> 256 KiB does not fit 227;
#   persistent (C in halves): 2 -> 128, 3 -> 176, 4 -> 224 KiB; 5 -> 272 KiB does not.
C_TILE_BYTES = BLOCK_M * BLOCK_N * 2
STAGES = rings_that_fit(stage_bytes("fp16"), C_TILE_BYTES, (2, 3, 4))
STAGES_PERSISTENT = rings_that_fit(stage_bytes("fp16"), C_TILE_BYTES // 2, (2, 3, 4, 5))
assert STAGES == (2, 3) and STAGES_PERSISTENT == (2, 3, 4)
assert len({stage_bytes(d) for d in DTYPES}) == 1  # one stage list serves every dtype


@triton.jit
def cast_out(x, OUT_TYPE: tl.constexpr):
    """x in C's type, named by OUT_TYPE ("fp16" or "bf16")."""
    if OUT_TYPE == "bf16":
        return x.to(tl.bfloat16)
    else:
        return x.to(tl.float16)


@triton.jit
def gemm_desc_kernel(
    # A, B, C: pointers, or with HOST_DESC descriptors built on the host (C stays a pointer unless C_DESC)
    a,
    b,
    c,
    # sizes
    M,
    N,
    K,
    # row pitches (elements; the column stride is 1): A's, B's (a row of K x N, or with B_K_MAJOR of N x K), C's
    stride_am,
    stride_b,
    stride_cm,
    # how many programs walk the tiles (the SM count when PERSISTENT)
    NUM_PROGRAMS,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr,  # loop over tiles (at most one program per SM) instead of one program per tile
    C_DESC: tl.constexpr,  # store C through a descriptor too (its rows have a 16-byte pitch)
    EPILOGUE_SUBTILE: tl.constexpr = False,  # store C in two halves: half the shared memory for its staging
    HOST_DESC: tl.constexpr = False,  # a, b (and c when C_DESC) come as descriptors built on the host
    B_K_MAJOR: tl.constexpr = False,  # B given as N x K (fp8): boxes of [BLOCK_N, BLOCK_K], multiplied transposed
    OUT_TYPE: tl.constexpr = "fp16",  # C's element type: "fp16" or "bf16"
    SCALED: tl.constexpr = False,  # multiply by scale_a x scale_b in the epilogue (fp8's per-tensor scales)
    # fp8 only: pointers to the per-tensor scales (one fp32 each)
    scale_a=None,
    scale_b=None,
):
    # -- descriptors: shape, strides and box of each operand; the TMA unit zero-fills reads past the edges --
    if HOST_DESC:
        a_desc = a
        b_desc = b
    else:
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
        if B_K_MAJOR:  # fp8: loaded in two halves of N (see the mainloop)
            b_desc = tl.make_tensor_descriptor(
                b, shape=[N, K], strides=[stride_b, 1], block_shape=[BLOCK_N // 2, BLOCK_K]
            )
        else:
            b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[stride_b, 1], block_shape=[BLOCK_K, BLOCK_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tiles_m * tiles_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    step = NUM_PROGRAMS if PERSISTENT else num_tiles  # non-persistent: the loop below runs once

    # -- iterate over this program's tiles and, inside, over K: flatten=True lets the pipeliner (num_stages) run
    #    the loads of the next tile while the current one finishes --
    for tile in tl.range(tl.program_id(0), num_tiles, step, flatten=True):
        m0, n0 = tile_coords(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = mac_loop(a_desc, b_desc, m0, n0, 0, k_tiles, BLOCK_M, BLOCK_N, BLOCK_K, B_K_MAJOR)

        # -- write back: the scales (fp8) on the fp32 accumulator, then the cast to C's type --
        acc = scaled(acc, scale_a, scale_b, SCALED)
        if C_DESC and EPILOGUE_SUBTILE:
            if HOST_DESC:
                c_desc = c
            else:
                c_desc = tl.make_tensor_descriptor(
                    c, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N // 2]
                )
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([m0, n0], cast_out(left, OUT_TYPE))
            c_desc.store([m0, n0 + BLOCK_N // 2], cast_out(right, OUT_TYPE))
        elif C_DESC:
            if HOST_DESC:
                c_desc = c
            else:
                c_desc = tl.make_tensor_descriptor(
                    c, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N]
                )
            c_desc.store([m0, n0], cast_out(acc, OUT_TYPE))
        else:
            rows = m0 + tl.arange(0, BLOCK_M)
            cols = n0 + tl.arange(0, BLOCK_N)
            c_ptrs = c + rows[:, None].to(tl.int64) * stride_cm + cols[None, :]
            tl.store(c_ptrs, cast_out(acc, OUT_TYPE), mask=(rows[:, None] < M) & (cols[None, :] < N))


_SCRATCH: dict[tuple, torch.Tensor] = {}  # (device, stream, bytes) -> zeroed scratch, made on first use


def _alloc_scratch(size: int, alignment: int, stream):
    """Global scratch Triton asks for, at every launch, when a kernel builds tensor descriptors on the device: one
    buffer per (device, stream, size), zeroed when made and reused by every later launch on that stream (stream order
    keeps two launches from building in it at once; each program writes its 128-byte tensor maps before it reads
    them). With a fresh torch.empty per launch, compute-sanitizer's initcheck reports reads of it at the
    make_tensor_descriptor lines (docs/sanitizer.md). The maps are written through
    tensormap.cp_fenceproxy, which initcheck probably does not follow (the rows validate, so the maps are whole);
    zeroed memory leaves nothing unwritten either way, and a memset per launch would sit in the timed region. Under
    CUDA graph capture the graph gets its own (torch.empty from the graph's pool: nothing enqueued into the graph)."""
    if torch.cuda.is_current_stream_capturing():
        return torch.empty(size, dtype=torch.int8, device="cuda")
    key = (torch.cuda.current_device(), stream, size)
    if key not in _SCRATCH:
        _SCRATCH[key] = torch.zeros(size, dtype=torch.int8, device="cuda")
        torch.cuda.current_stream().synchronize()  # zeroed before the launch, whichever stream it is on
    return _SCRATCH[key]


def num_sms(device: torch.device) -> int:
    """Programs a persistent grid launches: the SM count, or in the interpreter a few (so that persistent loops
    really walk several tiles, and split rules see a small GPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


_num_programs_limit = num_sms  # the name the tools use


class Operands:
    """A and B as the descriptors need them: rows of a 16-byte pitch (a padded copy per call where a row of A or B
    is not), whether C can be stored through a descriptor too, and the host-built descriptors of all three (built
    once per box; Triton encodes them into tensor maps at each launch).

    ``b_k_major``: B is N x K (fp8), its rows run along K; otherwise K x N, its rows run along N."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, b_k_major: bool = False):
        m, k = a.shape
        n = b.shape[0] if b_k_major else b.shape[1]
        self.a, self.b, self.c, self.b_k_major = a, b, c, b_k_major
        self.m, self.n, self.k = m, n, k
        per_16_bytes = 16 // a.element_size()  # elements in 16 bytes: 8 for 2-byte types, 16 for fp8
        b_row = k if b_k_major else n

        def padded(rows: int, cols: int, t: torch.Tensor) -> torch.Tensor | None:
            if cols % per_16_bytes == 0:
                return None
            return torch.zeros(rows, -(-cols // per_16_bytes) * per_16_bytes, dtype=t.dtype, device=t.device)

        self.a_padded = padded(m, k, a)
        self.b_padded = padded(b.shape[0], b_row, b)
        self.c_desc = (n * c.element_size()) % 16 == 0 and c.data_ptr() % 16 == 0
        rule = f"a multiple of {per_16_bytes}"
        self.note = "".join(
            [
                f", K not {rule}: A copied to a padded pitch per call" if self.a_padded is not None else "",
                f", {'K' if b_k_major else 'N'} not {rule}: B copied to a padded pitch per call"
                if self.b_padded is not None
                else "",
            ]
        )
        self._descriptors = {}

    def refresh(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy A and B into their padded buffers where they have one; the tensors the kernel reads."""
        a, b = self.a, self.b
        if self.a_padded is not None:
            self.a_padded[:, : a.shape[1]].copy_(a)
            a = self.a_padded
        if self.b_padded is not None:
            self.b_padded[:, : b.shape[1]].copy_(b)
            b = self.b_padded
        return a, b

    def args(self) -> tuple:
        """Refresh the padded copies and return (a, b, c, M, N, K, pitches) for the kernel."""
        a, b = self.refresh()
        return (a, b, self.c, self.m, self.n, self.k, a.stride(0), b.stride(0), self.c.stride(0))

    def ab_descriptors(self, block_m: int, block_n: int, block_k: int) -> tuple[TensorDescriptor, TensorDescriptor]:
        """Host-built descriptors of A ([block_m, block_k] boxes) and B ([block_k, block_n] boxes, or
        [block_n, block_k] when K-major), over the tensors the kernel reads (the padded buffers where there are).
        gemm_desc_kernel loads a K-major B in halves of its tile's N: it asks for block_n = BLOCK_N // 2."""
        key = ("ab", block_m, block_n, block_k)
        if key not in self._descriptors:
            a = self.a if self.a_padded is None else self.a_padded
            b = self.b if self.b_padded is None else self.b_padded
            m, n, k = self.m, self.n, self.k
            if self.b_k_major:
                b_desc = TensorDescriptor(b, shape=[n, k], strides=[b.stride(0), 1], block_shape=[block_n, block_k])
            else:
                b_desc = TensorDescriptor(b, shape=[k, n], strides=[b.stride(0), 1], block_shape=[block_k, block_n])
            self._descriptors[key] = (
                TensorDescriptor(a, shape=[m, k], strides=[a.stride(0), 1], block_shape=[block_m, block_k]),
                b_desc,
            )
        return self._descriptors[key]

    def host_args(self, block_m: int, block_n: int, block_k: int, c_halves: bool) -> tuple:
        """As args(), with A, B and (when C_DESC) C as descriptors built on the host for gemm_desc_kernel's boxes at
        this tile (C's box is half the tile's width when it is stored in two halves, a K-major B's always)."""
        _, _, c, m, n, k, *pitches = self.args()
        key = ("c", block_m, block_n, c_halves)
        if key not in self._descriptors:
            c_box = [block_m, block_n // 2 if c_halves else block_n]
            self._descriptors[key] = (
                TensorDescriptor(c, shape=[m, n], strides=[c.stride(0), 1], block_shape=c_box) if self.c_desc else c
            )
        b_block_n = block_n // 2 if self.b_k_major else block_n
        return (*self.ab_descriptors(block_m, b_block_n, block_k), self._descriptors[key], m, n, k, *pitches)


def scale_kwargs(ops) -> dict:
    """The kernel's keyword arguments for the scales: fp8's two per-tensor scales, nothing otherwise."""
    if ops.scale_a is None:
        return {}
    return {"SCALED": True, "scale_a": ops.scale_a, "scale_b": ops.scale_b}


def count(n: int, thing: str) -> str:
    """'1 tile', '2 tiles': a count for a row's config."""
    return f"{n} {thing}" + ("" if n == 1 else "s")


# How every Triton GEMM's fp8 rows accumulate (the kernel modules' ``fp8_accumulation``): "promoted", each K tile's
# wgmma sum added into fp32 registers, as torch._scaled_mm(..., use_fast_accum=False) and the PTX kernels do; "fast"
# would be wgmma's own accumulator across all of K (use_fast_accum=True). A row is compared with the cuBLAS ceiling
# that accumulates the same way.
FP8_ACCUMULATION = "promoted"


def dtype_config(dtype: str, mma: str = "tl.dot(a, b.T)") -> str:
    """What the row must say about the operands of ``dtype``; ``mma``: how the kernel multiplies fp8's K-major B."""
    if dtype == "fp8e4m3":
        return (
            f", fp8e4m3->bf16: B given N x K (K-major), {mma}, scale_a x scale_b on the fp32 "
            f"accumulator before the bf16 store, accumulation {FP8_ACCUMULATION} (each K tile's sum added in fp32)"
        )
    return ""


class DescGemm:
    """The dtype's tile (TILES), 8 warps, through descriptors (built in the kernel, or on the host with
    ``host_desc``), at ``stages``: one program per tile or persistent."""

    def __init__(self, inputs, c: torch.Tensor, stages: int, persistent: bool, host_desc: bool = False):
        check_stages(stages, STAGES_PERSISTENT if persistent else STAGES)
        ops = gemm_operands(inputs, c, DTYPES)
        c = ops.c  # with the strides of its shape (checks.canonical)
        widen_bf16_dot()  # the interpreter's bf16 dot (suite.triton._interp_dot); nothing on a GPU
        if not host_desc:
            triton.set_allocator(_alloc_scratch)
        self.ops, self.tile = ops, TILES[ops.dtype]
        self.operands = Operands(ops.a, ops.b, c, b_k_major=ops.b_k_major)
        self.stages, self.persistent, self.host_desc = stages, persistent, host_desc
        bm, bn, bk = self.tile
        tiles = triton.cdiv(ops.m, bm) * triton.cdiv(ops.n, bn)
        self.grid = persistent_grid(tiles, num_sms(ops.a.device)) if persistent else tiles  # suite.waves' rule
        self.config = (
            f"{bm}x{bn}x{bk}, num_warps={NUM_WARPS}, num_stages={stages}, tensor descriptors"
            + (" built on the host" if host_desc else " built in the kernel")
            + (", persistent, C stored in two halves" if persistent else "")
            + (grid_note(tiles, num_sms(ops.a.device), self.grid) if persistent else "")
            + dtype_config(ops.dtype)
            + self.operands.note
        )
        self.info = kernel_info(None, stage_bytes(ops.dtype), self.config, self.grid)
        self._compiled = False

    def __call__(self) -> None:
        bm, bn, bk = self.tile
        args = self.operands.host_args(bm, bn, bk, c_halves=self.persistent) if self.host_desc else self.operands.args()
        compiled = gemm_desc_kernel[(self.grid,)](
            *args,
            self.grid,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=GROUP_M,
            PERSISTENT=self.persistent,
            C_DESC=self.operands.c_desc,
            EPILOGUE_SUBTILE=self.persistent,
            HOST_DESC=self.host_desc,
            B_K_MAJOR=self.ops.b_k_major,
            OUT_TYPE=OUT_TYPES[self.ops.dtype],
            num_warps=NUM_WARPS,
            num_stages=self.stages,
            **scale_kwargs(self.ops),
        )
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid)


def tuning_configs(dtype: str = "fp16") -> list[triton.Config]:
    """The space the ``tuned`` variant searches at ``dtype``, all on that dtype's tile (TILES) with 8 warps and C
    stored in two halves: depth, one program per tile or persistent, and GROUP_M. One tile keeps one set of
    host-built descriptors valid for every configuration (their boxes are part of the kernel's signature), so no
    per-configuration hook is needed and the choice can be cached on disk. The tiles come from the tuning runs that
    docs/tuning.md describes.
    The configurations are the same for every dtype; only the tile's BLOCK_K differs (64, or 128 for fp8)."""
    bm, bn, bk = TILES[dtype]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g, "PERSISTENT": p, "EPILOGUE_SUBTILE": True},
            num_stages=s,
            num_warps=NUM_WARPS,
        )
        for s, p, g in (
            (3, True, GROUP_M),
            # GROUP_M 4 and 16: no better than 8 in general (docs/tuning.md); the autotuner decides per shape
            (3, True, 4),
            (3, True, 16),
            (4, True, GROUP_M),  # 224 KiB: four 48 KiB stages and C's 32 KiB half
            (3, False, GROUP_M),
            (4, False, GROUP_M),
        )
    ]


# One autotuner per dtype (fp8's configurations have another BLOCK_K). cache_results: the choice is kept in Triton's
# on-disk cache (keyed by Triton, the GPU, the kernel's source, the configurations and the key: M, N, K, C_DESC and
# the output type, which tells fp16 from bf16), so the --profile worker, a separate process, profiles the
# configuration that was timed instead of tuning again (tuning afresh may pick another). Later runs with the same
# code reuse it too: the row's config says which was used; clearing TRITON_CACHE_DIR tunes afresh. Building an
# autotuner compiles nothing.
TUNED_KERNELS = {
    dtype: triton.autotune(
        configs=tuning_configs(dtype), key=["M", "N", "K", "C_DESC", "OUT_TYPE"], cache_results=True
    )(triton.jit(gemm_desc_kernel.fn))
    for dtype in DTYPES
}
gemm_desc_kernel_tuned = TUNED_KERNELS["fp16"]


class TunedGemm:
    """triton.autotune over tuning_configs(dtype), descriptors built on the host; the chosen config is reported in
    ``info.config`` (GPU only)."""

    def __init__(self, inputs, c: torch.Tensor):
        ops = gemm_operands(inputs, c, DTYPES)
        c = ops.c  # with the strides of its shape (checks.canonical)
        self.ops, self.tile, self.kernel = ops, TILES[ops.dtype], TUNED_KERNELS[ops.dtype]
        self.operands = Operands(ops.a, ops.b, c, b_k_major=ops.b_k_major)
        m, n = ops.m, ops.n
        limit = num_sms(ops.a.device)
        bm, bn, _ = self.tile
        if any((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) != (bm, bn) for c in self.kernel.configs):
            raise ValueError(f"every tuned configuration must use the {bm}x{bn} tile (one persistent grid serves all)")
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        # Every configuration has this tile, so every persistent one launches this grid (suite.waves' rule: at
        # 4000 x 3000, 384 tiles, 128 programs on 132 SMs), and the kernel strides over the tiles by it (NUM_PROGRAMS:
        # a larger stride than the grid skips tiles)
        self.persistent_programs = persistent_grid(tiles, limit)
        self.num_programs = lambda meta: self.persistent_programs if meta["PERSISTENT"] else tiles
        self.info = kernel_info(None, None, "autotuned", 0)
        self._compiled = False

    def __call__(self) -> None:
        # NUM_PROGRAMS must equal the grid: the persistent configs' grid (one for all of them), the others one
        # program per tile (the kernel only reads NUM_PROGRAMS when PERSISTENT).
        bm, bn, bk = self.tile
        compiled = self.kernel[lambda meta: (self.num_programs(meta),)](
            *self.operands.host_args(bm, bn, bk, c_halves=True),
            self.persistent_programs,
            C_DESC=self.operands.c_desc,
            HOST_DESC=True,
            B_K_MAJOR=self.ops.b_k_major,
            OUT_TYPE=OUT_TYPES[self.ops.dtype],
            **scale_kwargs(self.ops),
        )
        if not self._compiled and compiled is not None:
            self._compiled = True
            cfg = self.kernel.best_config
            bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
            self.info = kernel_info(
                compiled,
                stage_bytes(self.ops.dtype, (bm, bn, bk)),
                f"{bm}x{bn}x{bk}, num_warps={cfg.num_warps}, num_stages={cfg.num_stages}, tensor descriptors"
                " built on the host"
                + (", persistent" if cfg.kwargs["PERSISTENT"] else "")
                + (", C stored in two halves" if cfg.kwargs["EPILOGUE_SUBTILE"] else "")
                + f", GROUP_M={cfg.kwargs['GROUP_M']} (autotuned)"
                + dtype_config(self.ops.dtype)
                + self.operands.note,
                self.num_programs(cfg.kwargs),
            )
            self.info.stages = cfg.num_stages


class Descriptors(TritonModule):
    """gemm_desc_kernel at one schedule and descriptor source, swept over num_stages, for the registry."""

    depth_is_num_stages = True  # the launch's num_stages (suite.kernel.TritonModule)
    dtypes = DTYPES
    fp8_accumulation = FP8_ACCUMULATION
    sass_requires = HOPPER_SASS

    # compute-sanitizer: edge tiles with N % 8 != 0 (B and C through padded buffers) and a K tile cut short; a ring that
    # wraps many times within a tile; more tiles (144) than SMs (132), so a persistent program walks two tiles
    sanitize_sizes = ((130, 250, 40), (256, 512, 1024), (1536, 3072, 64))

    def __init__(self, persistent: bool, host_desc: bool = False):
        self.persistent, self.host_desc = persistent, host_desc
        self.stages = STAGES_PERSISTENT if persistent else STAGES

    def kernel_names(self, stages: int) -> tuple[str, ...]:
        return ("gemm_desc_kernel",)

    def stages_for(self, dtype: str) -> tuple:
        return self.stages  # 48 KiB stages at every dtype (TILES): the same rings fit

    def skip_reason(self, dtype: str) -> str | None:
        return fp8_dot_unsupported() if dtype == "fp8e4m3" else None  # the interpreter's fp8 (suite.triton._interp_dot)

    def launch(self, inputs, out, stages):
        return DescGemm(inputs, out, stages, persistent=self.persistent, host_desc=self.host_desc)


class Tuned(TritonModule):
    """triton.autotune over tuning_configs(dtype): the depth it chose is reported in its row (GPU only)."""

    stages = (None,)
    dtypes = DTYPES
    fp8_accumulation = FP8_ACCUMULATION
    sass_requires = HOPPER_SASS

    def launch(self, inputs, out, stages):
        return TunedGemm(inputs, out)


KERNELS = {
    "tile": Descriptors(persistent=False),
    "persistent": Descriptors(persistent=True),
    "persistent host": Descriptors(persistent=True, host_desc=True),
    "tuned": Tuned(),
}
