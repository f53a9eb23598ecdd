"""Triton kernels in the interpreter (CPU tensors), every stage count, odd sizes, against torch. Every depth is one
program in the interpreter (num_stages is a compiler transform it does not perform: suite.kernel's
TritonModule.depth_is_num_stages), so each test runs every depth at its first size and the deepest at the others."""

from pathlib import Path

import pytest
import torch
from conftest import HAS_GPU

pytestmark = pytest.mark.skipif(HAS_GPU, reason="interpreter tests run on the CPU-only machines")

from suite.triton import gemm as tgemm  # noqa: E402  (after conftest set TRITON_INTERPRET)
from suite.triton import vector as tvector  # noqa: E402
from suite.triton import vector_desc as tdesc  # noqa: E402


def _each_depth_once(stages, sizes) -> list[tuple]:
    """(stages, size) pairs: every depth at the first size, the deepest at the others."""
    return [(s, sizes[0]) for s in stages] + [(max(stages), size) for size in sizes[1:]]


@pytest.mark.parametrize("stages, n", _each_depth_once(tvector.STAGES, [1, 3, 4, 4097, 3 * 8192 + 5, 5 * 8192]))
def test_vector_bit_exact(stages, n):
    g = torch.Generator().manual_seed(1000 * stages + n)
    x = torch.randn(n, generator=g)
    y = torch.full_like(x, float("nan"))  # poisoned: an unwritten element fails
    tvector.scale2(x, stages, out=y)
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


DEPTH_CASES = [
    (t, s, n)
    for t in tvector.DEPTH_TILE_BYTES
    for s, n in _each_depth_once((1, 2, 3, 8), [5, 2 * 8192 + 7, 9 * 8192 + 3])
]


@pytest.mark.parametrize("tile, stages, n", DEPTH_CASES, ids=[f"{t // 1024}KiB-s{s}-{n}" for t, s, n in DEPTH_CASES])
def test_vector_depth_configs_bit_exact(tile, stages, n):
    """The persistent grid-stride loop: tiles dealt to INTERPRETER_SMS programs, a ragged tail, programs with no tile
    at all (n = 5)."""
    g = torch.Generator().manual_seed(tile + 10 * stages + n)
    x = torch.randn(n, generator=g)
    y = torch.full_like(x, float("nan"))
    launcher = tvector.Scale2(x, y, stages, tvector.depth(tile))
    assert launcher.grid == tvector.INTERPRETER_SMS
    launcher()
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


# Compiled in a separate process: TRITON_INTERPRET=1 (set for this one) makes triton.jit interpret, and the
# interpreter's patches of triton.language break compilation in the same process.
_COMPILE_SCRIPT = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from suite.sass import disassemble, instruction_classes
from suite.triton import vector as tv

out = []
for block, run, warps, stages in json.loads(sys.argv[1]):
    aligned = [["tt.divisibility", 16]]  # as a launch specializes 16-byte aligned pointers and n % 16 == 0
    src = ASTSource(fn=tv.scale2_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i64",
                    "BLOCK": "constexpr", "RUN": "constexpr", "NUM_STAGES": "constexpr"},
                    constexprs={"BLOCK": block, "RUN": run, "NUM_STAGES": stages},
                    attrs={(0,): aligned, (1,): aligned, (2,): aligned})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    out.append({"classes": instruction_classes(disassemble(k.asm["cubin"])), "shared": k.metadata.shared})
print(json.dumps(out))
"""

COMPILE_CASES = [(c, s) for c in [tvector.BANDWIDTH] + [tvector.depth(t) for t in (2048, 32768)] for s in (1, 2, 6)]


@pytest.fixture(scope="module")
def compiled_sm90():
    """Each COMPILE_CASES kernel compiled by Triton for sm_90, without a GPU: SASS classes and shared bytes."""
    import json
    import os
    import subprocess
    import sys

    cases = [(c.block, c.schedule.run, c.num_warps, s) for c, s in COMPILE_CASES]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT, json.dumps(cases)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "i",
    range(len(COMPILE_CASES)),
    ids=[f"{c.tile_bytes // 1024}KiB-run{c.schedule.run}-s{s}" for c, s in COMPILE_CASES],
)
def test_vector_pipelines_on_sm90(compiled_sm90, i):
    """Triton turns the tile loop's loads into cp.async (LDGSTS) into S - 1 tile buffers when S >= 2, plain loads at
    S = 1, never spills; the row's tiles in flight are derived from exactly these facts (streaming_info)."""
    config, stages = COMPILE_CASES[i]
    classes, shared = compiled_sm90[i]["classes"], compiled_sm90[i]["shared"]
    assert classes["local_memory"] == 0
    assert (classes["async_copy"] > 0) == (stages > 1)
    assert shared // config.tile_bytes == stages - 1


def test_vector_row_says_when_triton_did_not_pipeline():
    from suite.info import KernelInfo

    plain = KernelInfo(sass={"async_copy": 0}, smem_total=0, occupancy=4)
    info = tvector.streaming_info(plain, tvector.depth(2048), 4)
    assert "not pipelined" in info.note and info.bytes_in_flight_per_sm == 2048  # one tile, one program per SM
    piped = KernelInfo(sass={"async_copy": 8}, smem_total=3 * 2048, occupancy=4)
    info = tvector.streaming_info(piped, tvector.depth(2048), 4)
    assert not info.note and info.bytes_in_flight_per_sm == 3 * 2048
    info = tvector.streaming_info(
        KernelInfo(sass={"async_copy": 8}, smem_total=3 * 32768, occupancy=1), tvector.BANDWIDTH, 4
    )
    assert info.bytes_in_flight_per_sm == 2 * 32768  # a short run of 2 tiles caps the ring's 3 buffers


# -- the tile loop through tensor descriptors (suite/triton/vector_desc.py) --

DESC_CONFIGS = [
    tdesc.BANDWIDTH,
    tdesc.Config(tile_bytes=2048, num_warps=4, schedule=tvector.Schedule(tiles_per_block=2)),
    tdesc.Config(tile_bytes=4096, num_warps=4, schedule=tvector.Schedule(blocks_per_sm=1)),
]


# fewer floats than one row (descriptors never used), exactly one row, whole tiles, a partial last tile after
# several whole ones plus a tail after the last whole row
@pytest.mark.parametrize("stages, n", _each_depth_once(tdesc.STAGES, [5, 256, 4 * 1024, 37 * 256 + 11]))
@pytest.mark.parametrize("config", DESC_CONFIGS, ids=["bandwidth", "2KiB-run2", "4KiB-persistent"])
def test_desc_vector_bit_exact(config, stages, n):
    g = torch.Generator().manual_seed(100 * stages + n + config.tile_bytes)
    x = torch.randn(n, generator=g)
    y = torch.full_like(x, float("nan"))
    tdesc.Scale2(x, y, stages, config)()
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


def test_vector_kernels_compile_with_their_sizes_at_one():
    """Triton's launcher turns an integer argument equal to 1 into a constexpr (unless the kernel says
    do_not_specialize): n == 1 for both tile loops, rows == 1 (n of 256..511 floats) for the descriptor loop. Each
    kernel compiles for sm_90 so specialized, as a launch at those sizes would compile it (rows == 1 once did not)."""
    from sm90_compile import compile_sm90

    box = f"tensordesc<fp32[{tdesc.BANDWIDTH.rows},{tdesc.WIDTH}]>"
    desc_signature = {"x_desc": box, "y_desc": box, "x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "rows": "i32"}
    desc_signature |= dict.fromkeys(["ROWS", "WIDTH", "RUN", "NUM_STAGES"], "constexpr")
    desc_meta = {"ROWS": tdesc.BANDWIDTH.rows, "WIDTH": tdesc.WIDTH, "RUN": 1, "NUM_STAGES": 3}
    loop_signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "RUN": "constexpr"}
    loop_signature["NUM_STAGES"] = "constexpr"
    loop_meta = {"BLOCK": tvector.BANDWIDTH.block, "RUN": tvector.BANDWIDTH.schedule.run, "NUM_STAGES": 3}
    options = {"num_warps": 4, "num_stages": 3}
    desc = {"fn": "suite.triton.vector_desc:scale2_desc_kernel", "signature": desc_signature, "constexprs": desc_meta}
    loop = {"fn": "suite.triton.vector:scale2_kernel", "signature": loop_signature, "constexprs": loop_meta}
    specs = [{**desc, "ones": ["rows"]}, {**desc, "ones": ["n"]}, {**loop, "ones": ["n"]}]
    for got in compile_sm90([{**spec, "aligned": ["x_ptr", "y_ptr"], "options": options} for spec in specs]):
        assert got["classes"]["local_memory"] == 0, got["classes"]


@pytest.mark.parametrize("tile_bytes", [1000, 3 * 1024, 512 * 1024])
def test_desc_vector_refuses_tiles_tma_cannot_box(tile_bytes):
    with pytest.raises(ValueError, match="power of two up to 256"):
        tdesc.Config(tile_bytes=tile_bytes, num_warps=4, schedule=tvector.Schedule(tiles_per_block=1))


_DESC_COMPILE_SCRIPT = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from suite.sass import disassemble, instruction_classes
from suite.triton import vector_desc as tv

out = []
for rows, run, warps, stages in json.loads(sys.argv[1]):
    box = f"tensordesc<fp32[{rows},{tv.WIDTH}]>"
    aligned = [["tt.divisibility", 16]]
    src = ASTSource(fn=tv.scale2_desc_kernel, signature={"x_desc": box, "y_desc": box, "x_ptr": "*fp32",
                    "y_ptr": "*fp32", "n": "i64", "rows": "i32", "ROWS": "constexpr", "WIDTH": "constexpr",
                    "RUN": "constexpr", "NUM_STAGES": "constexpr"},
                    constexprs={"ROWS": rows, "WIDTH": tv.WIDTH, "RUN": run, "NUM_STAGES": stages},
                    attrs={(2,): aligned, (3,): aligned})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    out.append({"classes": instruction_classes(disassemble(k.asm["cubin"])), "shared": k.metadata.shared})
print(json.dumps(out))
"""


def test_desc_vector_is_tma_on_sm90():
    """Compiled by Triton for sm_90 without a GPU (both configurations, every depth, in one compiling process): TMA
    loads and stores (UTMALDG, UTMASTG) on mbarriers, no spills, and S tiles of shared memory at S >= 2 (S - 1 load
    buffers and the store's): what streaming_info assumes."""
    import json
    import os
    import subprocess
    import sys

    cases = [(config, stages) for config in DESC_CONFIGS[:2] for stages in tdesc.STAGES]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _DESC_COMPILE_SCRIPT,
            json.dumps([[c.rows, c.schedule.run, c.num_warps, stages] for c, stages in cases]),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(compiled) == len(cases)
    for (config, stages), got in zip(cases, compiled):
        what = f"{config.rows} rows, run {config.schedule.run}, {stages} stages"
        classes = got["classes"]
        assert classes["local_memory"] == 0, what
        assert classes["tma"] >= 2 and classes["mbarrier"] > 0, (what, classes)
        assert got["shared"] // config.tile_bytes == max(1, stages), what
        info = tdesc.streaming_info(
            tdesc.KernelInfo(sass=classes, smem_total=got["shared"], occupancy=1), config, stages
        )
        # a run of r tiles keeps at most r in flight, however many buffers: BANDWIDTH's single tile never overlaps
        assert not info.note, what
        assert info.bytes_in_flight_per_sm == min(config.schedule.run, max(1, stages - 1)) * config.tile_bytes, what


@pytest.mark.parametrize(
    "stages, shape", _each_depth_once(tgemm.STAGES, [(200, 264, 72), (67, 45, 40), (1, 1, 8), (130, 257, 8)])
)
def test_gemm_close_to_fp64(stages, shape):
    m, n, k = shape
    g = torch.Generator().manual_seed(stages * 7919 + m * 31 + n)
    a = torch.randn(m, k, generator=g).half()
    b = (torch.randn(k, n, generator=g) / k**0.5).half()
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    tgemm.matmul(a, b, stages, out=c)
    _fp64_check(c, a, b)


def _fp64_check(c, a, b):
    """The check test_gemm_close_to_fp64 applies."""
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-3, atol=1e-3)


# Defects planted in a copy of suite/triton/gemm.py's kernel source: each is a plausible bug, and each must make the
# same check as above fail. (A mutation that no longer applies, because the kernel changed, fails the test too.)
MUTANTS = {
    "last K tile's tail dropped": ("mask=ks[None, :] < K - k0,", "mask=ks[None, :] < K - k0 - 8,"),
    "last row of C never stored": ("(out_rows[:, None] < M)", "(out_rows[:, None] < M - 1)"),
    "B read one column off": (
        "b_ptrs += tl.full((), BLOCK_K, tl.int64) * stride_bk",
        "b_ptrs += tl.full((), BLOCK_K, tl.int64) * stride_bk + stride_bn",
    ),
    "accumulator restarted per K tile": ("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b)"),
}


def _mutant(tmp_path, name):
    """suite.triton.gemm with one defect planted in its kernel, imported from a file of its own."""
    import importlib.util

    before, after = MUTANTS[name]
    source = Path(tgemm.__file__).read_text()
    assert source.count(before) == 1, f"mutation {name!r} no longer applies to suite/triton/gemm.py"
    path = tmp_path / f"gemm_mutant_{list(MUTANTS).index(name)}.py"
    path.write_text(source.replace(before, after))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", MUTANTS)
def test_gemm_planted_defect_is_caught(tmp_path, name):
    """The check above can fail: a kernel with a real defect, run the same way on fresh inputs, is rejected, while
    the unmodified kernel passes on the very same inputs."""
    m, n, k = 67, 45, 72  # 3 K tiles, the last partial: every planted defect has something to break
    g = torch.Generator().manual_seed(5)
    a = torch.randn(m, k, generator=g).half()
    b = (torch.randn(k, n, generator=g) / k**0.5).half()
    _fp64_check(tgemm.matmul(a, b, 2, out=torch.full((m, n), float("nan"), dtype=torch.float16)), a, b)
    broken = _mutant(tmp_path, name)
    c = broken.matmul(a, b, 2, out=torch.full((m, n), float("nan"), dtype=torch.float16))
    with pytest.raises(AssertionError):
        _fp64_check(c, a, b)


@pytest.mark.skipif(HAS_GPU, reason="the interpreter runs only where there is no GPU (with one, the kernels compile)")
def test_interpreter_loop_bounds_under_strict_numpy():
    """NumPy >= 2.5 refuses int() of a one-element 1-D array, which is how triton 3.6's interpreter read a loop bound.
    NumPy's deprecation warning, made an error here, stands in for that refusal: the persistent loop must still run,
    bit-exact."""
    import warnings

    x = torch.randn(9 * 512 + 3, generator=torch.Generator().manual_seed(5))
    y = torch.full_like(x, float("nan"))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*ndim > 0 to a scalar.*")
        tvector.Scale2(x, y, 3, tvector.depth(2048))()
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


def test_interpreter_compat_squeezes_the_index(monkeypatch):
    """install() wraps the interpreter's tensor patch so __index__ reads a one-element array of any rank, restores
    with the interpreter's own scope, and never wraps twice."""
    import operator
    import types
    import warnings

    import numpy as np
    from triton.runtime import interpreter

    from suite.triton import interpreter_compat

    def old_patch(tensor, scope):  # triton 3.6's hook, as it was
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", old_patch)
    assert interpreter_compat.install() and interpreter_compat.install()
    assert interpreter._patch_lang_tensor.__wrapped__ is old_patch  # wrapped once

    class Scalar:
        handle = types.SimpleNamespace(data=np.array([7], dtype=np.int32))

    scope = interpreter._LangPatchScope()
    interpreter._patch_lang_tensor(Scalar, scope)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert operator.index(Scalar()) == 7
    scope.restore()
    assert not hasattr(Scalar, "__index__")


# -- the descriptor GEMM (suite/triton/gemm_desc.py), compiled for sm_90 without a GPU --


def _gemm_desc_spec(dtype: str, host: bool, stages: int, persistent: bool = True) -> dict:
    """gemm_desc_kernel as DescGemm launches it at ``dtype`` (C stored through a descriptor, in halves when
    persistent), for tests/sm90_compile.py."""
    from sm90_compile import OUT_TYPES, TRITON_TYPES, desc, scales

    from suite.triton import gemm_desc as g

    bm, bn, bk = g.TILES[dtype]
    fp8 = dtype == "fp8e4m3"
    c_box = [bm, bn // 2 if persistent else bn]
    if host:
        operands = {
            "a": desc(dtype, [bm, bk]),
            "b": desc(dtype, [bn // 2, bk] if fp8 else [bk, bn]),  # fp8: B in two halves of N
            "c": f"tensordesc<{OUT_TYPES[dtype]}[{c_box[0]},{c_box[1]}]>",
        }
    else:
        operands = {"a": f"*{TRITON_TYPES[dtype]}", "b": f"*{TRITON_TYPES[dtype]}", "c": f"*{OUT_TYPES[dtype]}"}
    ints = {name: "i32" for name in ("M", "N", "K", "stride_am", "stride_b", "stride_cm", "NUM_PROGRAMS")}
    meta = {
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "BLOCK_K": bk,
        "GROUP_M": g.GROUP_M,
        "PERSISTENT": persistent,
        "C_DESC": True,
        "EPILOGUE_SUBTILE": persistent,
        "HOST_DESC": host,
        "B_K_MAJOR": fp8,
        "OUT_TYPE": OUT_TYPES[dtype],
        "SCALED": fp8,
    }
    scale_sig, scale_values = scales(dtype)
    return {
        "fn": "suite.triton.gemm_desc:gemm_desc_kernel",
        "signature": {**operands, **ints, **{k: "constexpr" for k in meta}, **scale_sig},
        "constexprs": {**meta, **scale_values},
        "aligned": ["M", "N", "K", "stride_am", "stride_b", "stride_cm"],
        "options": {"num_warps": g.NUM_WARPS, "num_stages": stages},
    }


def test_gemm_desc_host_descriptors_build_nothing_on_the_device():
    """Compiled for sm_90 without a GPU, the persistent descriptor GEMM at 3 stages fits either way (the module's
    SASS, no spills, three 48 KiB stages plus C's 32 KiB half), and only the in-kernel form writes tensor maps on the
    device: the difference the host-built row measures."""
    from sm90_compile import assert_fits_sm90, compile_sm90

    from suite.triton import gemm_desc

    in_kernel, host = compile_sm90([_gemm_desc_spec("fp16", False, 3), _gemm_desc_spec("fp16", True, 3)])
    stage = gemm_desc.stage_bytes("fp16")
    c_half = gemm_desc.C_TILE_BYTES // 2
    for got in (in_kernel, host):
        assert_fits_sm90(got, gemm_desc.KERNELS["persistent"].sass_minimums(), "persistent fp16, 3 stages")
        assert (got["shared"] - c_half) // stage == 3, got["shared"]
    assert in_kernel["ptx"]["tensormap.replace"] > 0
    assert host["ptx"]["tensormap.replace"] == 0


def test_gemm_desc_every_dtype_and_depth_fits_on_sm90():
    """bf16 and fp8 (128x256x128, B K-major, promoted) at every depth the modules sweep, host-built descriptors: the
    module's SASS (QGMMA for fp8, HGMMA otherwise), no spills, wgmma not serialized, and the shared memory the stage
    lists were derived from (48 KiB stages plus C's staging tile, whole or in halves)."""
    from sm90_compile import assert_fits_sm90, compile_sm90

    from suite.triton import gemm_desc as g

    cases = [
        (d, s, p) for d in ("bf16", "fp8e4m3") for p in (True, False) for s in (g.STAGES_PERSISTENT if p else g.STAGES)
    ]
    results = compile_sm90([_gemm_desc_spec(d, True, s, p) for d, s, p in cases])
    for (dtype, stages, persistent), got in zip(cases, results):
        kernel = g.KERNELS["persistent" if persistent else "tile"]
        assert_fits_sm90(got, kernel.sass_minimums(), (dtype, stages, persistent))
        assert (got["classes"]["wgmma_fp8"] > 0) == (dtype == "fp8e4m3"), (dtype, got["classes"])
        c_tile = g.C_TILE_BYTES // (2 if persistent else 1)
        assert 0 <= got["shared"] - stages * g.stage_bytes(dtype) - c_tile < 1024, (dtype, stages, persistent)


# -- the warp-specialized Gluon GEMM (suite/triton/gemm_gluon.py), compiled for sm_90 without a GPU --


def _gluon_spec(dtype: str, stages: int, stream_k: int = 0) -> dict:
    """gemm_gluon_kernel's compile spec as GluonGemm launches it; stream_k: the kernel's STREAM_K (1 stream-K, 2 its
    fault)."""
    from sm90_compile import OUT_TYPES, TRITON_TYPES, scales

    from suite.triton import gemm_gluon as g

    bm, bn, bk = g.TILES[dtype]
    fp8 = dtype == "fp8e4m3"
    element = {"fp16": "gl.float16", "bf16": "gl.bfloat16", "fp8e4m3": "gl.float8e4nv"}
    out = "gl.float16" if dtype == "fp16" else "gl.bfloat16"
    meta = {
        "GROUP_M": g.FP8_GROUP_M if fp8 else g.GROUP_M,
        "STAGES": stages,
        "PRODUCER_WARPS": g.PRODUCER_WARPS,
        "PRODUCER_REGS": g.PRODUCER_REGS,
        "B_K_MAJOR": fp8,
        "num_warps": g.FP8_CONSUMER_WARPS if fp8 else g.NUM_WARPS,
        "STREAM_K": int(stream_k),
    }
    scale_sig, scale_values = scales(dtype)
    sig = {
        "a_desc": {"gluon_desc": [TRITON_TYPES[dtype], [bm, bk], element[dtype]]},
        "b_desc": {"gluon_desc": [TRITON_TYPES[dtype], [bn, bk] if fp8 else [bk, bn], element[dtype]]},
        "c_desc": {"gluon_desc": [OUT_TYPES[dtype], g.c_box(dtype, stages), out]},
        **scale_sig,
        "workspace": "*fp32" if stream_k else "constexpr",
        "flags": "*i32" if stream_k else "constexpr",
        **{k: "i32" if stream_k else "constexpr" for k in ("sk_dp", "sk_iters", "sk_programs")},
        "M": "i32",
        "N": "i32",
        "K": "i32",
        **{k: "constexpr" for k in meta},
    }
    return {
        "fn": "suite.triton.gemm_gluon:gemm_gluon_kernel",
        "gluon": True,
        "signature": sig,
        "constexprs": {
            **meta,
            **scale_values,
            **({} if stream_k else dict.fromkeys(("workspace", "flags", "sk_dp", "sk_iters", "sk_programs"))),
        },
        "options": {"num_warps": meta["num_warps"]},
    }


def test_gluon_gemm_is_warp_specialized_on_sm90():
    """Compiled for sm_90 without a GPU, at every dtype and depth: the module's SASS (QGMMA for fp8), no spills,
    wgmma not serialized, the ring plus C's staging tile (fp8 at 4 stages: half of it) in shared memory, and
    setmaxnreg giving the producer warp its few registers and the consumer warpgroups the rest (the warp
    specialization the row is about)."""
    from sm90_compile import assert_fits_sm90, compile_sm90

    from suite.triton import gemm_gluon as g

    cases = [(d, s) for d in g.DTYPES for s in g.KERNEL.stages_for(d)]
    for (dtype, stages), got in zip(cases, compile_sm90([_gluon_spec(d, s) for d, s in cases])):
        assert_fits_sm90(got, g.KERNEL.sass_minimums(), (dtype, stages))
        assert (got["classes"]["wgmma_fp8"] > 0) == (dtype == "fp8e4m3"), (dtype, got["classes"])
        box = g.c_box(dtype, stages)  # fp8: one per consumer warpgroup
        c_tile = box[0] * box[1] * 2 * (2 if dtype == "fp8e4m3" else 1)
        assert c_tile == (g.BLOCK_M * g.BLOCK_N * 2) // (2 if stages == 4 else 1), (dtype, stages, box)
        assert 0 <= got["shared"] - stages * g.stage_bytes(dtype) - c_tile < 1024, (stages, got["shared"])
        assert got["ptx"]["setmaxnreg"] >= 2, got["ptx"]


def test_gluon_fp8_stream_k_fits_and_publishes_through_gpu_scoped_atomics():
    """Stream-K (GluonGemm(stream_k=True), gluon ws stream-k) at every depth: the module's SASS, no spills, wgmma not
    serialized, the fix-up's atomics on the flags (none in the persistent kernel), the same shared memory as the
    persistent kernel. Its sanitizer fault (STREAM_K=2: no fix-up wait) compiles without the acquire polls."""
    from sm90_compile import assert_fits_sm90, compile_sm90

    from suite.triton import gemm_gluon as g

    stages = g.STREAM_K.stages_for("fp8e4m3")
    registered = compile_sm90([_gluon_spec("fp8e4m3", s) for s in stages])
    fault, *stream_k = compile_sm90(
        [_gluon_spec("fp8e4m3", stages[0], stream_k=2)] + [_gluon_spec("fp8e4m3", s, stream_k=1) for s in stages]
    )
    assert fault["ptx"]["atom.global"] < stream_k[0]["ptx"]["atom.global"], (fault["ptx"], stream_k[0]["ptx"])
    for s, got, base in zip(stages, stream_k, registered):
        assert_fits_sm90(got, g.STREAM_K.sass_minimums(), ("stream-K", s))
        assert got["ptx"]["atom.global"] + got["ptx"]["red.global"] > 0, (s, got["ptx"])
        assert base["ptx"]["atom.global"] + base["ptx"]["red.global"] == 0, (s, base["ptx"])
        assert abs(got["shared"] - base["shared"]) < 64, (s, got["shared"], base["shared"])


def test_the_tuned_persistent_configs_stride_by_the_grid_they_launch(monkeypatch):
    """At 4000 x 3000 on 132 SMs a persistent grid of 128 x 256 tiles is 128 programs (384 tiles in 3 whole rounds,
    suite.waves). With the SM count as the kernel's tile stride (NUM_PROGRAMS), 128 programs striding by 132 would never
    compute tiles 128-131 and 260-263 (NaN left in the poisoned C). Every persistent configuration strides by the grid
    it launches, and the others launch a program per tile. (The launch is recorded, not run: the interpreter's 4 SMs
    never make the persistent grid smaller.)"""
    from suite.triton import gemm_desc as gd

    monkeypatch.setattr(gd, "num_sms", lambda device: 132)
    a, b = torch.randn(4000, 64).half(), torch.randn(64, 3000).half()
    tuned = gd.TunedGemm((a, b), torch.empty(4000, 3000, dtype=torch.float16))
    configs, launches = tuned.kernel.configs, []

    class Recorded:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append((grid, args))

    tuned.kernel = Recorded()
    tuned()
    ((grid, args),) = launches
    stride = args[len(tuned.operands.host_args(*tuned.tile, c_halves=True))]
    persistent = [grid(c.kwargs)[0] for c in configs if c.kwargs["PERSISTENT"]]
    assert persistent and set(persistent) == {stride} == {128}
    assert {grid(c.kwargs)[0] for c in configs if not c.kwargs["PERSISTENT"]} == {32 * 12}


# -- the swapped mid-M Gluon GEMM (suite/triton/gemm_mid_gluon.py), compiled for sm_90 without a GPU --


def _mid_gluon_spec(tile, stages: int, dtype: str = "fp16") -> dict:
    """gemm_mid_gluon_kernel's compile spec as GluonMidGemm launches it: its descriptors' boxes and its meta-parameters,
    from a launcher built (not launched) on CPU tensors."""
    from sm90_compile import OUT_TYPES, TRITON_TYPES, scales

    from suite.problems import GEMM
    from suite.triton import gemm_mid_gluon as g

    inputs = GEMM.make_inputs((64, 512, 128), 0, torch.device("cpu"), dtype)
    launch = g.GluonMidGemm(inputs, GEMM.make_output(inputs), stages, tile=tile)
    element = {"fp16": "gl.float16", "bf16": "gl.bfloat16", "fp8e4m3": "gl.float8e4nv"}
    out = OUT_TYPES[dtype]
    names = ("w_desc", "x0_desc", "x1_desc", "c0_desc", "c1_desc")
    out_element = {"fp16": "gl.float16", "bf16": "gl.bfloat16"}[out]
    types = [(TRITON_TYPES[dtype], element[dtype])] * 3 + [(out, out_element)] * 2
    scale_sig, scale_values = scales(dtype)
    return {
        "fn": "suite.triton.gemm_mid_gluon:gemm_mid_gluon_kernel",
        "gluon": True,
        "signature": {
            **{
                name: {"gluon_desc": [ty, list(d.block_shape), el]}
                for name, d, (ty, el) in zip(names, launch.descs, types)
            },
            **scale_sig,
            "M": "i32",
            "N": "i32",
            "K": "i32",
            **dict.fromkeys(launch.meta, "constexpr"),
        },
        "constexprs": {**launch.meta, **scale_values},
        "options": {"num_warps": launch.meta["num_warps"]},
    }


def test_mid_gluon_tiles_fit_sm90_at_their_deepest_rings():
    """Every tile the swapped mid-M Gluon kernel's plan may pick, at the deepest ring it fits (the shared-memory
    bound; bf16 at one of them): no spills, wgmma not serialized, its ring and slabs within what a block may have
    and as the module counts them; a register-A tile loads the weight box into registers once per K step and retires
    each K step's groups, the others leave wgmma to read it from shared memory with a K step's groups in flight."""
    from sm90_compile import assert_fits_sm90, compile_sm90

    from suite import waves
    from suite.triton import gemm_mid_gluon as g

    tiles = waves.gluon_mid_tiles()
    fp8_tiles = waves.gluon_mid_tiles(fp8=True)
    builds = [(t, t.deepest(), "fp16") for t in tiles] + [(tiles[-1], 3, "bf16")]
    builds += [(t, t.deepest(), "fp8e4m3") for t in fp8_tiles]
    specs = [_mid_gluon_spec(*build) for build in builds]
    for (tile, stages, dtype), got in zip(builds, compile_sm90(specs)):
        assert_fits_sm90(got, g.KERNEL.sass_minimums(), (tile, dtype))
        assert 0 <= got["shared"] - (stages * tile.stage_bytes() + tile.slab_bytes()) < 1024, (tile, got["shared"])
        if tile.fp8:  # every K step's groups retired, to promote their sums; two pieces' weight through registers
            assert set(got["wgmma_waits"]) == {"0"} and bool(got["classes"]["ldmatrix"]) == tile.register_a, got
            assert got["classes"]["wgmma_fp8"], (tile, got["classes"])  # QGMMA: the operands are fp8
        elif tile.register_a:
            assert got["classes"]["ldmatrix"] and set(got["wgmma_waits"]) == {"0"}, (tile, got)
        else:  # a wait that leaves one group per piece in flight
            assert not got["classes"]["ldmatrix"] and str(2 if tile.t1 else 1) in got["wgmma_waits"], (tile, got)
        assert got["ptx"]["setmaxnreg"] >= 2, got["ptx"]
