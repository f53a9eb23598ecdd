"""C = A @ B (fp16 in, fp32 accumulate, fp16 out) in Triton through tensor descriptors (TMA on Hopper), one program
per output tile or persistent (one program per SM looping over tiles), swept over ``num_stages``; and the ``tuned``
launcher, which lets triton.autotune pick among these kernels' schedules, depths and rasterizations.

The descriptors are built either in the kernel (``tl.make_tensor_descriptor``: each program writes its tensor maps to
global scratch and fences them before its first load) or on the host (``triton.tools.tensor_descriptor``, passed as
kernel parameters: nothing to build or fence on the device). On the H200 the host-built form is 1-3 points of
cuBLAS faster at 4096^3 and about 4 at 4000x3000x1000 (results/NVIDIA-H200/probe-triton-gemm-host-desc-20261130.txt);
the table keeps both, so it shows what that buys.

Tensor descriptors need every row pitch to be a multiple of 16 bytes. When K or N is not a multiple of 8, the
launcher copies A or B into a buffer with a padded pitch on every call (counted in the time, said in the config)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from suite.checks import check_gemm_operands, check_stages
from suite.kernel import TritonModule
from suite.triton._compiled import kernel_info

BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64
NUM_WARPS = 8
GROUP_M = 8
STAGES = (2, 3)  # with C staged in shared memory for its descriptor store, 4 stages need 256 KiB
STAGES_PERSISTENT = (2, 3, 4)  # the persistent kernel stores C in two halves: 4 stages fit (224 KiB)


@triton.jit
def tile_origin(tile, tiles_m, tiles_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile index -> first row and column of C, GROUP_M tile rows at a time (programs in flight share L2)."""
    group_size = GROUP_M * tiles_n
    first_m = (tile // group_size) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (tile % group_size) % group_rows
    tile_n = (tile % group_size) // group_rows
    return tile_m * BLOCK_M, tile_n * BLOCK_N


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
    # row pitches (elements; the column stride is 1)
    stride_am,
    stride_bk,
    stride_cm,
    # how many programs walk the tiles (the SM count when PERSISTENT)
    NUM_PROGRAMS,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr,  # loop over tiles (one program per SM) instead of one program per tile
    C_DESC: tl.constexpr,  # store C through a descriptor too (its rows have a 16-byte pitch)
    EPILOGUE_SUBTILE: tl.constexpr = False,  # store C in two halves: half the shared memory for its staging
    HOST_DESC: tl.constexpr = False,  # a, b (and c when C_DESC) come as descriptors built on the host
):
    # -- descriptors: shape, strides and box of each operand; the TMA unit zero-fills reads past the edges --
    if HOST_DESC:
        a_desc = a
        b_desc = b
    else:
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
        b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tiles_m * tiles_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    step = NUM_PROGRAMS if PERSISTENT else num_tiles  # non-persistent: the loop below runs once

    # -- iterate over this program's tiles and, inside, over K: flatten=True lets the pipeliner (num_stages) run
    #    the loads of the next tile while the current one finishes --
    for tile in tl.range(tl.program_id(0), num_tiles, step, flatten=True):
        m0, n0 = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            a_tile = a_desc.load([m0, kt * BLOCK_K])
            b_tile = b_desc.load([kt * BLOCK_K, n0])
            acc = tl.dot(a_tile, b_tile, acc)

        # -- write back, fp32 -> fp16 --
        if C_DESC and EPILOGUE_SUBTILE:
            if HOST_DESC:
                c_desc = c
            else:
                c_desc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[stride_cm, 1],
                                                   block_shape=[BLOCK_M, BLOCK_N // 2])
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([m0, n0], left.to(tl.float16))
            c_desc.store([m0, n0 + BLOCK_N // 2], right.to(tl.float16))
        elif C_DESC:
            if HOST_DESC:
                c_desc = c
            else:
                c_desc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[stride_cm, 1],
                                                   block_shape=[BLOCK_M, BLOCK_N])
            c_desc.store([m0, n0], acc.to(tl.float16))
        else:
            rows = m0 + tl.arange(0, BLOCK_M)
            cols = n0 + tl.arange(0, BLOCK_N)
            c_ptrs = c + rows[:, None].to(tl.int64) * stride_cm + cols[None, :]
            tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _alloc_scratch(size: int, alignment: int, stream):
    """Global scratch Triton asks for when a kernel builds tensor descriptors on the device."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _num_programs_limit(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: a few programs, so the persistent loop really walks several tiles


class Operands:
    """A and B as the descriptors need them: rows of a 16-byte pitch (a padded copy per call where K or N is not
    a multiple of 8), whether C can be stored through a descriptor too, and the host-built descriptors of all three
    (built once per box; Triton encodes them into tensor maps at each launch)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
        (m, k), n = a.shape, b.shape[1]
        self.a, self.b, self.c = a, b, c
        self.a_padded = torch.zeros(m, -(-k // 8) * 8, dtype=a.dtype, device=a.device) if k % 8 else None
        self.b_padded = torch.zeros(k, -(-n // 8) * 8, dtype=b.dtype, device=b.device) if n % 8 else None
        self.c_desc = n % 8 == 0 and c.data_ptr() % 16 == 0
        self.note = "".join([", K % 8 != 0: A copied to a padded pitch per call" if k % 8 else "",
                             ", N % 8 != 0: B copied to a padded pitch per call" if n % 8 else ""])
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
        (m, k), n = self.a.shape, self.b.shape[1]
        return (a, b, self.c, m, n, k, a.stride(0), b.stride(0), self.c.stride(0))

    def host_args(self, block_m: int, block_n: int, block_k: int, c_halves: bool) -> tuple:
        """As args(), with A, B and (when C_DESC) C as descriptors built on the host for these boxes (C's box is
        half the tile's width when it is stored in two halves)."""
        a, b, c, m, n, k, *pitches = self.args()
        key = (block_m, block_n, block_k, c_halves)
        if key not in self._descriptors:
            c_box = [block_m, block_n // 2 if c_halves else block_n]
            self._descriptors[key] = (
                TensorDescriptor(a, shape=[m, k], strides=[a.stride(0), 1], block_shape=[block_m, block_k]),
                TensorDescriptor(b, shape=[k, n], strides=[b.stride(0), 1], block_shape=[block_k, block_n]),
                TensorDescriptor(c, shape=[m, n], strides=[c.stride(0), 1], block_shape=c_box) if self.c_desc else c,
            )
        return (*self._descriptors[key], m, n, k, *pitches)


class DescGemm:
    """The 128x256x64 tile, 8 warps, through descriptors (built in the kernel, or on the host with ``host_desc``), at
    ``stages``: one program per tile or persistent."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stages: int, persistent: bool,
                 host_desc: bool = False):
        check_stages(stages, STAGES_PERSISTENT if persistent else STAGES)
        check_gemm_operands(a, b, c)
        if not host_desc:
            triton.set_allocator(_alloc_scratch)
        self.operands, self.stages, self.persistent, self.host_desc = Operands(a, b, c), stages, persistent, host_desc
        m, n = c.shape
        tiles = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
        self.grid = min(tiles, _num_programs_limit(a.device)) if persistent else tiles
        self.config = (f"{BLOCK_M}x{BLOCK_N}x{BLOCK_K}, num_warps={NUM_WARPS}, num_stages={stages}, tensor descriptors"
                       + (" built on the host" if host_desc else " built in the kernel")
                       + (", persistent, C stored in two halves" if persistent else "") + self.operands.note)
        self.info = kernel_info(None, (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2, self.config, self.grid)
        self._compiled = False

    def __call__(self) -> None:
        args = (self.operands.host_args(BLOCK_M, BLOCK_N, BLOCK_K, c_halves=self.persistent) if self.host_desc
                else self.operands.args())
        compiled = gemm_desc_kernel[(self.grid,)](
            *args, self.grid, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
            PERSISTENT=self.persistent, C_DESC=self.operands.c_desc, EPILOGUE_SUBTILE=self.persistent,
            HOST_DESC=self.host_desc, num_warps=NUM_WARPS, num_stages=self.stages,
        )
        if not self._compiled and compiled is not None:
            self._compiled = True
            self.info = kernel_info(compiled, self.info.smem_per_stage, self.config, self.grid)


def tuning_configs() -> list[triton.Config]:
    """The space the ``tuned`` variant searches, all on the 128x256x64 tile with 8 warps and C stored in two halves:
    depth, one program per tile or persistent, and GROUP_M. One tile keeps one set of host-built descriptors valid
    for every configuration (their boxes are part of the kernel's signature), so no per-configuration hook is needed
    and the choice can be cached on disk. Other tiles never won at the suite's shapes on the H200: 256x128 and
    128x128 came 2-10 points behind 128x256 at 4096^3, 8192^3 and 4000x3000x1000
    (results/NVIDIA-H200/tune-gemm-triton-20261130.txt, probe-triton-gemm-host-desc-20261130.txt)."""
    return [
        triton.Config({"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "GROUP_M": g, "PERSISTENT": p,
                       "EPILOGUE_SUBTILE": True}, num_stages=s, num_warps=NUM_WARPS)
        for s, p, g in (
            (3, True, GROUP_M),
            # GROUP_M 4 and 16: within noise of 8 at 4096^3 on the H200 (probe rounds 95.7-101.4%); the autotuner
            # decides per shape
            (3, True, 4),
            (3, True, 16),
            (4, True, GROUP_M),  # 224 KiB: four 48 KiB stages and C's 32 KiB half
            (3, False, GROUP_M),
            (4, False, GROUP_M),
        )
    ]


# cache_results: the choice is kept in Triton's on-disk cache (keyed by Triton, the GPU, the kernel's source, the
# configurations and M, N, K), so the --profile worker, a separate process, profiles the configuration that was timed
# instead of tuning again (on the H200 it once picked another). Later runs with the same code reuse it too: the row's
# config says which was used; clearing TRITON_CACHE_DIR tunes afresh.
gemm_desc_kernel_tuned = triton.autotune(configs=tuning_configs(), key=["M", "N", "K", "C_DESC"],
                                         cache_results=True)(triton.jit(gemm_desc_kernel.fn))


class TunedGemm:
    """triton.autotune over tuning_configs(), descriptors built on the host; the chosen config is reported in
    ``info.config`` (GPU only)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
        check_gemm_operands(a, b, c)
        self.operands = Operands(a, b, c)
        m, n = c.shape
        limit = _num_programs_limit(a.device)
        self.num_programs = lambda meta: (
            min(limit, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])) if meta["PERSISTENT"]
            else triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]))
        self.limit = limit
        self.info = kernel_info(None, None, "autotuned", 0)
        self._compiled = False

    def __call__(self) -> None:
        # NUM_PROGRAMS must equal the grid; the persistent configs use the SM count, the others one per tile, and
        # the kernel only reads NUM_PROGRAMS when PERSISTENT.
        compiled = gemm_desc_kernel_tuned[lambda meta: (self.num_programs(meta),)](
            *self.operands.host_args(BLOCK_M, BLOCK_N, BLOCK_K, c_halves=True), self.limit,
            C_DESC=self.operands.c_desc, HOST_DESC=True)
        if not self._compiled and compiled is not None:
            self._compiled = True
            cfg = gemm_desc_kernel_tuned.best_config
            bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
            self.info = kernel_info(
                compiled, (bm * bk + bk * bn) * 2,
                f"{bm}x{bn}x{bk}, num_warps={cfg.num_warps}, num_stages={cfg.num_stages}, tensor descriptors"
                " built on the host" + (", persistent" if cfg.kwargs["PERSISTENT"] else "")
                + (", C stored in two halves" if cfg.kwargs["EPILOGUE_SUBTILE"] else "")
                + f", GROUP_M={cfg.kwargs['GROUP_M']} (autotuned)"
                + self.operands.note,
                self.num_programs(cfg.kwargs),
            )
            self.info.stages = cfg.num_stages


class Descriptors(TritonModule):
    """gemm_desc_kernel at one schedule and descriptor source, swept over num_stages, for the registry."""

    def __init__(self, persistent: bool, host_desc: bool = False):
        self.persistent, self.host_desc = persistent, host_desc
        self.stages = STAGES_PERSISTENT if persistent else STAGES

    def launch(self, inputs, out, stages):
        return DescGemm(*inputs, out, stages, persistent=self.persistent, host_desc=self.host_desc)


class Tuned(TritonModule):
    """triton.autotune over tuning_configs(): the depth it chose is reported in its row (GPU only)."""

    stages = (None,)

    def launch(self, inputs, out, stages):
        return TunedGemm(*inputs, out)


KERNELS = {
    "tile": Descriptors(persistent=False),
    "persistent": Descriptors(persistent=True),
    "persistent host": Descriptors(persistent=True, host_desc=True),
    "tuned": Tuned(),
}
