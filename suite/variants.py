"""Every registered variant. Adding one is a kernel module plus one registration here.

A kernel is named by "package.module:NAME" and imported on first use, so importing this file compiles and launches
nothing, and the Triton modules see TRITON_INTERPRET as set by whoever runs them. The library baselines and
ceilings are kernel modules too (suite.kernel.LibraryOp), registered the same way.
"""

from __future__ import annotations

import torch

from suite.attention_fa4 import available as fa4_available
from suite.attention_fa4 import fa4
from suite.attention_sdpa import cudnn_refuses, needs_cuda_tensors, refuses, sdpa, without_gpu
from suite.ceilings import faster_of
from suite.kernel import LibraryOp
from suite.registration import anywhere, gpu_or_interpreter, needs_gpu, needs_sm90a, register_kernel

# ---------------------------------------------------------------------------------------------------------------
# vector: y = 2 * x
# ---------------------------------------------------------------------------------------------------------------


register_kernel(
    "vector",
    "torch",
    "mul",
    LibraryOp(lambda inputs, out: lambda: torch.mul(inputs[0], 2, out=out)),
    baseline=True,
    gate=anywhere,
    description="torch.mul(x, 2, out=y)",
)
register_kernel(
    "vector",
    "torch",
    "copy_",
    # a device-to-device memcpy: captured in a CUDA graph it becomes a memcpy node, which the driver runs its own way
    # (a graph's memcpy node runs well below the eager copy's bandwidth: pytorch#191284)
    LibraryOp(
        lambda inputs, out: lambda: out.copy_(inputs[0]),
        eager_only="a device-to-device memcpy, which a CUDA graph runs another way (slower: pytorch#191284)",
    ),
    ceiling=True,
    gate=anywhere,
    reference=lambda inputs: inputs[0],
    description="y.copy_(x): the device-to-device bandwidth ceiling (reads and writes as many bytes as y = 2x)",
)


# The bandwidth regime: 1 GiB, each backend's best measured configuration (BANDWIDTH in suite/ptx/vector.py,
# suite/ptx/vector_bulk.py, suite/triton/vector.py), one stage count each: the headline rows against copy_.
register_kernel(
    "vector",
    "triton",
    "tile loop",
    "suite.triton.vector:KERNELS[bandwidth]",
    gate=gpu_or_interpreter,
    description="each program streams 2 tiles of 64 KiB, tl.range(num_stages=4)",
)
register_kernel(
    "vector",
    "triton",
    "desc tile loop",
    "suite.triton.vector_desc:KERNELS[bandwidth]",
    gate=gpu_or_interpreter,
    description="the tile loop through tensor descriptors (TMA loads and stores on Hopper): one 32 KiB tile per "
    "program, 8 warps; num_stages=3 pipelines nothing here but sizes shared memory to 2 programs per SM",
)
register_kernel(
    "vector",
    "ptx",
    "cp.async ring",
    "suite.ptx.vector:KERNELS[bandwidth]",
    gate=needs_gpu((8, 0)),
    description="each block streams 2 tiles of 32 KiB through a 4-deep cp.async shared-memory ring",
)
register_kernel(
    "vector",
    "ptx",
    "bulk ring",
    "suite.ptx.vector_bulk:KERNELS[bandwidth]",
    gate=needs_gpu((9, 0)),
    description="each block streams 2 tiles of 32 KiB through a 4-deep ring of cp.async.bulk copies and mbarriers",
)
register_kernel(
    "vector",
    "cuda",
    "cuda::pipeline ring",
    "suite.cuda.vector:KERNEL",
    gate=needs_gpu((8, 0)),
    description="the PTX ring's tiles (32 KiB, 2 per block), copies through cuda::memcpy_async into a "
    "cuda::pipeline (libcu++)",
)

# The depth sweep: persistent grids at one resident block (program) per SM, pinned; tiles of 2-32 KiB; every stage
# count whose ring fits (suite.streaming.depth_stages). One group (table) per tile size.
DEPTH_VARIANTS = (
    # module, backend, name (the tile size is appended), gate, description
    (
        "suite.triton.vector",
        "triton",
        "tile loop",
        gpu_or_interpreter,
        "one program per SM (grid-pinned), 4 warps, tl.range(num_stages=S) over its tiles",
    ),
    (
        "suite.ptx.vector",
        "ptx",
        "cp.async ring",
        needs_gpu((8, 0)),
        "one 128-thread block per SM (pinned by shared-memory padding), an S-deep cp.async ring",
    ),
    (
        "suite.ptx.vector_bulk",
        "ptx",
        "bulk ring",
        needs_gpu((9, 0)),
        "one block per SM (pinned by shared-memory padding), 1 producer + 4 consumer warps, an S-deep "
        "cp.async.bulk + mbarrier ring (Hopper)",
    ),
)
for _tile_kib in (2, 4, 8, 16, 32):
    for _module, _backend, _name, _gate, _what in DEPTH_VARIANTS:
        register_kernel(
            "vector",
            _backend,
            f"{_name} {_tile_kib}KiB",
            f"{_module}:KERNELS[{_tile_kib}KiB]",
            gate=_gate,
            group=f"depth sweep: {_tile_kib} KiB tiles, persistent, 1 block/SM",
            description=f"{_tile_kib} KiB tiles: {_what}",
        )

# ---------------------------------------------------------------------------------------------------------------
# gemm: C = A @ B, fp16 in, fp32 accumulate, fp16 out
# ---------------------------------------------------------------------------------------------------------------


def _cublas(inputs, out):
    """torch's GEMM for each dtype: torch.matmul (cuBLAS) for fp16 / bf16; torch._scaled_mm (cuBLASLt's fp8 path,
    per-tensor scales, bf16 out) for fp8 e4m3, B given as N x K and passed transposed (column-major), as cuBLAS
    wants it."""
    if len(inputs) == 4:
        a, b, scale_a, scale_b = inputs
        if why := _cublas_refuses((a.shape[0], b.shape[0], a.shape[1]), "fp8e4m3"):
            raise ValueError(why)
        return lambda: torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=out.dtype, out=out)
    a, b = inputs
    return lambda: torch.matmul(a, b, out=out)


def _cublas_refuses(size, dtype: str) -> str | None:
    """cuBLASLt's fp8 GEMM (torch._scaled_mm) takes N and K multiples of 16 only: other shapes are refused, not
    padded (a padded copy would be timed as cuBLAS)."""
    if dtype != "fp8e4m3":
        return None
    _, n, k = size
    bad = [f"{name} = {v}" for name, v in (("N", n), ("K", k)) if v % 16]
    return f"torch._scaled_mm (cuBLASLt fp8) needs N and K multiples of 16 ({', '.join(bad)})" if bad else None


def _fp8_capable(dtype: str) -> str | None:
    if dtype == "fp8e4m3" and torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9):
        return "torch._scaled_mm (fp8) needs compute capability >= 8.9"
    return None


register_kernel(
    "gemm",
    "torch",
    "cuBLAS",
    LibraryOp(
        _cublas,
        dtypes=("fp16", "bf16", "fp8e4m3"),
        requires=_fp8_capable,
        refuses=_cublas_refuses,
        fp8_accumulation="promoted",  # torch._scaled_mm's default, use_fast_accum=False
    ),
    baseline=True,
    ceiling=True,
    gate=anywhere,
    description="torch.matmul(a, b, out=c); fp8: torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=bf16)",
)

# Every GEMM variant but cuBLAS, in the tables' order: (backend, name, kernel, gate, shape sets, description).
# - sm_80 designs (mma.sync, cp.async or cuda::pipeline), at the square shapes;
# - the PTX Hopper ladder (suite/ptx/gemm_tma.py CONFIGS): each rung adds one technique, each sweeps every ring that
#   fits; then the schedules for shapes whose output tiles cannot fill the SMs (decode, long K): the same TMA + wgmma
#   pipeline, the work cut into units of (tile, K range), a tile shared by several units summed in K order by its last;
# - Triton on Hopper: tensor descriptors and Gluon; then split-K, stream-K and the swapped decode kernel, whose tiles,
#   split counts and schedules come from the shape by the rules in each module, with deterministic fix-ups (no float
#   atomics).
GEMM_VARIANTS = (
    (
        "triton",
        "128x256x32",
        "suite.triton.gemm:KERNEL",
        gpu_or_interpreter,
        ("square",),
        "the PTX kernel's tile: 128x256x32, 8 warps, GROUP_M=8, swept over num_stages",
    ),
    (
        "triton",
        "tuned",
        "suite.triton.gemm_desc:KERNELS[tuned]",
        needs_gpu((9, 0)),
        ("square",),
        "triton.autotune over depths, both schedules (one program per tile, persistent) and GROUP_M of the "
        "128x256x64 tensor-descriptor kernel, descriptors built on the host "
        "(suite.triton.gemm_desc.tuning_configs)",
    ),
    (
        "cuda",
        "128x256x32 cuda::pipeline",
        "suite.cuda.gemm:GEMM_K32",
        needs_gpu((8, 0)),
        ("square",),
        "the PTX kernel's tile, ldmatrix and mma.sync; global -> shared through cuda::memcpy_async and a "
        "cuda::pipeline (libcu++)",
    ),
    (
        "ptx",
        "128x256x32 mma.sync",
        "suite.ptx.gemm:GEMM_K32",
        needs_gpu((8, 0)),
        ("square",),
        "the original design: cp.async ring, ldmatrix into 2 register slots, mma.sync m16n8k16, 8 warps 2x4",
    ),
    (
        "ptx",
        "128x256x64 mma.sync",
        "suite.ptx.gemm:GEMM_K64",
        needs_gpu((8, 0)),
        ("square",),
        "the same pipeline with BLOCK_K = 64: one block barrier per 4 k-steps instead of per 2",
    ),
    (
        "ptx",
        "128x128x64 ws tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x128x64 ws]",
        needs_sm90a,
        ("square",),
        "TMA into an mbarrier ring (full/empty per stage), wgmma from shared memory; 1 producer warp, 1 "
        "consumer warpgroup, setmaxnreg",
    ),
    (
        "ptx",
        "128x256x64 ws 2wg tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x256x64 ws 2wg]",
        needs_sm90a,
        ("square",),
        "the same with two consumer warpgroups (64x256 each): twice the tile",
    ),
    (
        "ptx",
        "128x256x64 ws 2wg persistent tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x256x64 ws 2wg persistent]",
        needs_sm90a,
        ("square",),
        "the same, persistent: one block per SM walks the tiles (grouped), the ring runs on across tiles",
    ),
    (
        "ptx",
        "128x256x64 ws 2wg persistent tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x256x64 ws 2wg persistent tma-store]",
        needs_sm90a,
        None,
        "the same, its epilogue staged in shared memory and stored with TMA while the next tile starts",
    ),
    (
        "ptx",
        "128x128x128 ws 2wg persistent tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x128x128 ws 2wg persistent tma-store]",
        needs_sm90a,
        ("square",),
        "fp8: the persistent TMA-store rung on 128x128 tiles (64x128 per consumer warpgroup), whose registers hold "
        "two partials: K tiles promoted in pairs, the first added while the second's wgmma run",
    ),
    (
        "ptx",
        "128x144x128 ws 2wg persistent tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x144x128 ws 2wg persistent tma-store]",
        needs_sm90a,
        ("square",),
        "fp8: the same on cuBLAS's promoted tile width, 128x144 (64x144 per consumer warpgroup: 72 accumulators "
        "and two partials of 72), tile rows in groups of 16; the last 16 columns stored directly",
    ),
    (
        "ptx",
        "128x192x64 ws 2wg persistent tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x192x64 ws 2wg persistent tma-store]",
        needs_sm90a,
        ("llm", "long-k"),
        "the persistent TMA-store rung on 128x192 tiles (64x192 per consumer warpgroup, B in three 64-column "
        "boxes), each over all of K: where 128x256 tiles leave SMs idle (at M = 256, N = 10240: 108 tiles, not 80)",
    ),
    (
        "ptx",
        "128x256 split-tail tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x256 split-tail]",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "the persistent TMA-store rung, its last, partial wave split in K: each of its tiles cut into 2 or more "
        "shares of K (k-aligned: blocks that run together read the same K range of B), so the last round lasts a "
        "share of a tile, or, where that wave holds more than half the SMs' tiles, a few rounds of a share each",
    ),
    (
        "ptx",
        "128x192 split-tail tma-store tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x192 split-tail]",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "the split tail on the 128x192 rung (16-bit): the same walk, on the narrower tile whose waves fall "
        "differently (suite.gemm_rule weighs the two by the rounds each takes)",
    ),
    (
        "ptx",
        "128x256 stream-k tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x256 stream-k]",
        needs_sm90a,
        ("llm", "long-k"),
        "the persistent rung's 128x256 tile (2 consumer warpgroups), stream-K: whole tiles in data-parallel "
        "waves while two waves remain, the last tiles' K iterations shared evenly",
    ),
    (
        "ptx",
        "256x128 stream-k tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[256x128 stream-k]",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "the 128x256 stream-K's schedule on 256x128 tiles (2 consumer warpgroups of 128 rows): at M <= 256 one "
        "tile row holds all of M, so the weight B is read from HBM once",
    ),
    (
        "ptx",
        "128x128 split-k tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[128x128 split-k]",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "128x128 tiles on 2 consumer warpgroups (64x128 each), K split over tiles x splits blocks (splits: as"
        " many as fill the block slots once, >= 4 K tiles each)",
    ),
    (
        "ptx",
        "64x128 split-k tma+wgmma",
        "suite.ptx.gemm_tma:KERNELS[64x128 split-k]",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "decode: 64x128 tiles on 1 consumer warpgroup (a 128-row tile would be mostly padding for M <= 64), "
        "split-K as above, rings 4-8 deep (24 KiB stages; 232 registers per thread: one block per SM)",
    ),
    (
        "ptx",
        "decode swap-ab tma+wgmma",
        "suite.ptx.gemm_decode:KERNEL",
        needs_sm90a,
        ("llm", "long-k", "sweep"),
        "small M: C^T = B^T A^T, 64 or 128 weight columns on wgmma's M side (1 or 2 consumer warpgroups) and 8-64 "
        "tokens on its N side, stages of <= 48 KiB (up to 256 of K, fp8 512, promoted per 128) in 2-4 deep rings, "
        "persistent; split-K until "
        "5 MiB of weight is in flight, the splits summed in split order by the last one in (suite.ptx.gemm_decode."
        "plan)",
    ),
    (
        "ptx",
        "mid-m swap-ab tma+wgmma",
        "suite.ptx.gemm_decode:MID",
        needs_sm90a,
        ("llm", "sweep"),
        "a few hundred tokens: the decode kernel's swapped tile, 128 or 192 weight columns on wgmma's M and token "
        "tiles by 8 that divide M nearly exactly on its N (M = 341: four of 88 where the tile rungs compute 384 rows), "
        "the tile of the fastest modelled walk (suite.waves.mid_tile; past 1024 tokens at 16 bits also 256 weight "
        "columns, two m64 tiles per warpgroup, 4 deep), 4-6 deep rings of 128 bytes of K (fp8: tiles "
        "up to 104 tokens promoted in pairs of K stages, up to 160 with one partial), persistent waves "
        "then a split tail (suite.ptx.gemm_decode.mid_plan)",
    ),
    (
        "triton",
        "128x256x64 desc",
        "suite.triton.gemm_desc:KERNELS[tile]",
        gpu_or_interpreter,
        ("square",),
        "tensor descriptors built in the kernel (tl.make_tensor_descriptor; TMA on Hopper), one program per "
        "tile, 8 warps, swept over num_stages",
    ),
    (
        "triton",
        "128x256x64 desc persistent",
        "suite.triton.gemm_desc:KERNELS[persistent]",
        gpu_or_interpreter,
        ("square",),
        "tensor descriptors, one program per SM over all tiles (tl.range(..., flatten=True)), 8 warps, C "
        "stored in two halves",
    ),
    (
        "triton",
        "128x256x64 desc persistent host",
        "suite.triton.gemm_desc:KERNELS[persistent host]",
        gpu_or_interpreter,
        None,
        "the same with its descriptors built on the host (triton.tools.tensor_descriptor) and passed as "
        "kernel parameters: no tensor maps written and fenced by each program",
    ),
    (
        "triton",
        "128x256x64 gluon ws persistent",
        "suite.triton.gemm_gluon:KERNEL",
        needs_sm90a,
        ("square", "llm", "sweep"),
        "Gluon (triton.experimental.gluon, Triton's lower-level language): the PTX TMA-store kernel's design,"
        " a 1-warp TMA producer and two wgmma warpgroups on an mbarrier ring, persistent, C stored with TMA",
    ),
    (
        "triton",
        "128x256x64 gluon ws stream-k",
        "suite.triton.gemm_gluon:STREAM_K",
        needs_sm90a,
        ("square", "llm", "sweep"),
        "the Gluon kernel (fp8) on every SM with stream-K for its ragged last wave: whole tiles round robin, then "
        "the remaining tiles' K iterations in one balanced range per program, shared tiles' partials added by the "
        "tile's first program in K order through a workspace and per-slot flags (suite.triton.gemm_gluon."
        "stream_k_plan)",
    ),
    (
        "triton",
        "split-k desc",
        "suite.triton.gemm_splitk:KERNEL",
        gpu_or_interpreter,
        ("llm", "long-k", "sweep"),
        "split-K: each output tile's K tiles dealt in balanced ranges to `splits` programs (64x256 tiles on 4"
        " warps for M <= 64, else 128x256 on 8), fp32 partials summed in split order by a second Triton pass;"
        " splits: the fewest that fill the SMs within 5% as well as any count within two waves, >= 4 K tiles "
        "each (suite.triton.gemm_splitk.split_count)",
    ),
    (
        "triton",
        "stream-k desc",
        "suite.triton.gemm_streamk:KERNEL",
        gpu_or_interpreter,
        ("llm", "long-k", "sweep"),
        "stream-K: 2-16 tile rows in lockstep where they divide the SMs closely (the same balanced contiguous "
        "ranges of tiles x K tiles in every row, so all rows read B together), else one program per SM, whole "
        "tiles round robin while two waves remain, the rest's iterations in one balanced contiguous range per "
        "program; shared tiles summed in program order by a fix-up pass",
    ),
    (
        "triton",
        "split-tail desc",
        "suite.triton.gemm_streamk:SPLIT_TAIL",
        gpu_or_interpreter,
        ("llm", "long-k", "sweep"),
        "the split tail through the stream-K kernel: whole waves of tiles round robin, then each tile of the last, "
        "partial wave in equal shares of K, k-aligned (programs that run together read the same K range of B), one "
        "program each or, where that wave holds more than half the SMs' tiles, a few in turn; shared tiles summed "
        "in K order by the fix-up pass",
    ),
    (
        "triton",
        "mid-m swap-ab desc",
        "suite.triton.gemm_mid:KERNEL",
        gpu_or_interpreter,
        ("llm", "sweep"),
        "a few hundred tokens, swapped as the decode kernel: 128 weight rows on wgmma's M and token tiles on its N "
        "(up to M = 208 one tile of M rounded up to 16; above, the tile a model of pieces and waves picks, 256 rows "
        "at 16 bits among them), each token tile as one tl.dot per binary digit (144 = 128 + 16) on the same weight "
        "box; 2-5 deep rings of 128 bytes of K (the 256-row tile's 2-4; fp8 promoted per K tile), whole waves then a "
        "split tail (suite.triton.gemm_mid)",
    ),
    (
        "triton",
        "mid-m swap-ab gluon ws",
        "suite.triton.gemm_mid_gluon:KERNEL",
        needs_sm90a,
        ("llm", "sweep"),
        "Gluon, swapped and warp-specialized as the PTX mid-M kernel: 2-3 consumer warpgroups of 64 or 128 weight "
        "columns on wgmma's M, a token tile of up to two power-of-two pieces (up to 128 + 64) on its N, a 1-warp TMA "
        "producer on an mbarrier ring, persistent, C stored transposed through TMA (fp8: 64 weight columns a "
        "consumer, each K step's sum promoted); the tile a model of waves, padding and shared-memory reads picks "
        "(suite.waves.gluon_mid_plan)",
    ),
    (
        "triton",
        "decode swap-ab desc",
        "suite.triton.gemm_decode:KERNEL",
        gpu_or_interpreter,
        ("llm", "long-k", "sweep"),
        "small M: C^T = B^T A^T, 64 or 128 weight rows on wgmma's M side and 16-64 tokens on its N side, "
        "stages of <= 48 KiB in 2-4 deep rings (the weight streams once), split-K where the weight's tiles "
        "cannot fill the SMs (suite.triton.gemm_decode.plan)",
    ),
)
for _backend, _name, _kernel, _gate, _shapes, _what in GEMM_VARIANTS:
    register_kernel("gemm", _backend, _name, _kernel, gate=_gate, shape_sets=_shapes, description=_what)

# One row per backend whose kernel and depth a rule picks from the shape, without timing (suite.gemm_rule), among the
# kernels registered above; its note says what it chose and why.
register_kernel(
    "gemm",
    "ptx",
    "auto",
    "suite.ptx.gemm_auto:KERNEL",
    gate=needs_sm90a,
    description="the PTX kernel and stage count suite.gemm_rule picks for the shape: decode swap-ab, split-K or the "
    "persistent TMA-store rungs",
)
register_kernel(
    "gemm",
    "triton",
    "auto",
    "suite.triton.gemm_auto:KERNEL",
    gate=gpu_or_interpreter,
    description="the Triton kernel and stage count suite.gemm_rule picks for the shape: decode swap-ab, split-K, "
    "the persistent descriptor kernel or Gluon (sm_90a)",
)

# ---------------------------------------------------------------------------------------------------------------
# attention: O = softmax(Q K^T * scale [+ causal mask]) V, bf16 (default) or fp16 (suite/attention_problem.py)
# ---------------------------------------------------------------------------------------------------------------

_SDPA_DTYPES = ("bf16", "fp16")
register_kernel(
    "attention",
    "torch",
    "SDPA flash",
    LibraryOp(sdpa("flash"), dtypes=_SDPA_DTYPES, requires=needs_cuda_tensors, refuses=refuses),
    baseline=True,
    gate=needs_gpu((8, 0)),
    description="F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION), enable_gqa=True",
)
register_kernel(
    "attention",
    "torch",
    "SDPA cuDNN",
    LibraryOp(sdpa("cuDNN"), dtypes=_SDPA_DTYPES, requires=needs_cuda_tensors, refuses=cudnn_refuses),
    gate=needs_gpu((8, 0)),
    description="F.scaled_dot_product_attention under sdpa_kernel(CUDNN_ATTENTION); GQA by enable_gqa where cuDNN "
    "takes it, else K and V expanded once outside the timed call",
)
register_kernel(
    "attention",
    "torch",
    "SDPA faster of flash, cuDNN",
    LibraryOp(
        faster_of({"flash": sdpa("flash"), "cuDNN": sdpa("cuDNN")}),
        dtypes=_SDPA_DTYPES,
        requires=needs_cuda_tensors,
        refuses=refuses,
    ),
    ceiling=True,
    gate=needs_gpu((8, 0)),
    description="the ceiling: whichever of the SDPA flash and cuDNN rows is faster at the shape (timed once as it is "
    "built; suite.ceilings.faster_of)",
)
register_kernel(
    "attention",
    "fa4",
    "flash_attn_func",
    LibraryOp(fa4, dtypes=_SDPA_DTYPES),
    gate=fa4_available,
    description="FlashAttention-4 (the optional flash-attn-4 package, CuTe DSL) flash_attn_func, GQA native, the "
    "causal mask bottom-right as the problem's",
)
register_kernel(
    "attention",
    "torch",
    "SDPA math",
    LibraryOp(sdpa("math"), dtypes=_SDPA_DTYPES, refuses=refuses),
    gate=without_gpu,
    description="F.scaled_dot_product_attention under sdpa_kernel(MATH), on a CPU only: the library's check of the "
    "problem there (on a GPU the fused rows stand for SDPA; the unfused path would hold every score in memory)",
)
register_kernel(
    "attention",
    "triton",
    "tutorial 128x64",
    "suite.triton.attention:KERNEL",
    gate=gpu_or_interpreter,
    description="the tutorial form: 128 query rows per program in registers, 64-key K / V blocks through "
    "tl.range(num_stages=S), online softmax in fp32, diagonal blocks masked and later ones skipped",
)
register_kernel(
    "attention",
    "ptx",
    "64x64 mma.sync",
    "suite.ptx.attention:KERNEL",
    gate=needs_gpu((8, 0)),
    description="the Ampere form: 4 warps x 16 query rows, Q held in registers, 64-key K / V tiles through an S-deep "
    "cp.async ring, ldmatrix (.trans for V) and mma.sync m16n8k16, online softmax in registers with exp2",
)
register_kernel(
    "attention",
    "ptx",
    "128x128 wgmma ws",
    "suite.ptx.attention_sm90:KERNEL",
    gate=needs_sm90a,
    description="the Hopper form: TMA loads of Q once and of 128-key K / V tiles into an S-deep mbarrier ring, a "
    "producer warpgroup and two consumer warpgroups of 64 query rows (setmaxnreg), S = Q K^T and O += P V on wgmma "
    "(P from registers, V read transposed), online softmax in registers with exp2; each warpgroup serial (S, softmax, "
    "P V)",
)
register_kernel(
    "attention",
    "ptx",
    "128x128 wgmma ws ping-pong",
    "suite.ptx.attention_sm90:KERNEL_PINGPONG",
    gate=needs_sm90a,
    description="the Hopper form with FlashAttention-3's ping-pong: the two consumer warpgroups take turns at the "
    "tensor pipe on named barriers, each turn issuing one warpgroup's O += P V of its last tile and S = Q K^T of its "
    "next while the other runs its softmax; S-deep ring, S = 2-3",
)
register_kernel(
    "attention",
    "triton",
    "desc 128x64",
    "suite.triton.attention_desc:KERNEL",
    gate=gpu_or_interpreter,
    description="the tutorial form through tensor descriptors built on the host (TMA on Hopper): Q, K, V and O as "
    "(batch x heads, seq, d) boxed [1, rows, d], zero-filled past a head's rows; K / V blocks pipelined by "
    "num_stages=S",
)
register_kernel(
    "attention",
    "triton",
    "128x128 gluon ws",
    "suite.triton.attention_gluon:KERNEL",
    gate=needs_sm90a,
    description="Gluon (triton.experimental.gluon): the Hopper form in Triton's lower-level language, a 1-warp TMA "
    "producer filling an S-deep ring of 128-key K and V blocks (a ready and an empty mbarrier each) and two consumer "
    "warpgroups of 64 query rows on warpgroup_mma, P from registers, online softmax in registers with exp2",
)
register_kernel(
    "attention",
    "triton",
    "128x128 gluon ws overlap",
    "suite.triton.attention_gluon:OVERLAPPED",
    gate=needs_sm90a,
    description="the Gluon form with the next key block's S = Q K^T issued before this block's softmax, so that the "
    "tensor pipe computes it while the warpgroup computes exponentials (half of FlashAttention-3's intra-warpgroup "
    "overlap: P V completes within its block)",
)
register_kernel(
    "attention",
    "triton",
    "128x128 gluon ws ping-pong",
    "suite.triton.attention_gluon:PING_PONG",
    gate=needs_sm90a,
    description="the Gluon form with FlashAttention-3's ping-pong: each consumer warpgroup issues O += P V and the "
    "next block's S back to back on its turn (an mbarrier per warpgroup), so that one's matrix products run under "
    "the other's softmax",
)
