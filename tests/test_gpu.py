"""On a GPU: every registered variant, at every dtype it implements and every stage count, against torch on fresh
random inputs, outputs poisoned, at the shapes beyond the problems' odd sizes (those, tests/test_variants.py validates
at every dtype and depth, on a GPU as on a CPU): the medium shapes at every depth, the large ones at one depth per
variant (_deepest says which and why)."""

import math
import re

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as tlc

from suite.kernel import LibraryOp
from suite.problems import GEMM, PROBLEMS, VECTOR
from suite.registry import variants
from suite.validate import validate

pytestmark = pytest.mark.gpu


def _deepest(stages: tuple) -> object:
    """The one depth a variant runs the large shapes at: its deepest ring. It keeps the most copies in flight and
    takes the most shared memory (the configuration that fails first where resources are short). The other depths
    lose little: each ``python -m suite.run`` validates every timed row at its timed (large) shape before timing it,
    and here every depth runs the medium shapes, where a ring's start, wrap and drain are as depth-dependent."""
    counts = [s for s in stages if s is not None]
    return max(counts) if counts else stages[0]


def _at(problem, dtype: str) -> str:
    return "" if dtype == problem.default_dtype else f"-{dtype}"


def _unless_it_runs_here(v, dtype: str) -> list:
    """A skip mark with the reason when the variant's gate or the dtype says it cannot run on this GPU."""
    reason = v.skip_reason() or v.dtype_skip_reason(dtype)
    return [pytest.mark.skip(reason=f"{v.label}{_at(PROBLEMS[v.problem], dtype)}: {reason}")] if reason else []


def _cases(problem, every_depth, one_depth):
    """pytest params (variant, dtype, stages, size) for every variant of ``problem`` at every dtype it implements:
    each ``every_depth(dtype)`` size at each of that dtype's depths, each ``one_depth(dtype)`` size at the deepest;
    skipped, with the reason, where its gate or the dtype says it cannot run here."""
    for v in variants(problem.name):
        for dtype in v.dtypes:
            depths, marks = v.stages_for(dtype), _unless_it_runs_here(v, dtype)
            runs = [(s, size) for size in every_depth(dtype) for s in depths]
            runs += [(_deepest(depths), size) for size in one_depth(dtype)]
            for s, size in runs:
                yield pytest.param(
                    v, dtype, s, size, marks=marks, id=f"{v.label}{_at(problem, dtype)}:{s}:{problem.shape(size)}"
                )


def _run(problem, variant, stages, size, seed, dtype=None):
    inputs = problem.make_inputs(size, seed, torch.device("cuda"), dtype)
    out = problem.make_output(inputs)
    out.fill_(float("nan"))  # poisoned: an element the kernel never writes fails the check
    variant.factory(inputs, out, stages)()
    torch.cuda.synchronize()
    return out, (variant.reference or problem.reference)(inputs)


# The vector's odd sizes (1, 3, 4, 4097, ...) are validated at every depth by tests/test_variants.py.
VECTOR_EVERY_DEPTH = (2**20 + 3,)  # 4 MiB, a ragged end: many tiles per block, every ring fills and wraps
VECTOR_ONE_DEPTH = (2**28,)  # 1 GiB: the size the sweep times


@pytest.mark.parametrize(
    "variant, dtype, stages, n", list(_cases(VECTOR, lambda d: VECTOR_EVERY_DEPTH, lambda d: VECTOR_ONE_DEPTH))
)
def test_vector_bit_exact(variant, dtype, stages, n):
    out, ref = _run(VECTOR, variant, stages, n, seed=n + 17 * (stages or 0), dtype=dtype)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


# Beyond GEMM.edge_sizes, which tests/test_variants.py validates at every dtype and depth on the GPU too (a tiny
# product, K < BLOCK_K, a partial second K tile, odd N, one past the 128 x 256 tile): the shapes that were here for
# those cases ((7, 13, 8), (129, 257, 40), (333, 77, 24), (257, 129, 24)) bought nothing more and are gone.
GEMM_EVERY_DEPTH = [
    (300, 520, 136),  # ragged in M, N % 8 == 0, several K tiles and a partial last one
    (256, 250, 64),  # N % 8 != 0 (the PTX kernel's predicated B path), M two whole tiles
    (1100, 700, 264),  # 9 x 3 tiles: a rasterization group cut short
    (1025, 8193, 72),  # 297 tiles of 128 x 256, over two per SM: a persistent ring carried from tile to tile
    (128, 256, 65536),  # one tile, a long K loop: the ring wraps many times (K 8192 for bf16 and fp8)
]
GEMM_ONE_DEPTH = [
    (2048, 2048, 2048),
    (4000, 3000, 1000),  # K % 64 != 0: the last K tile is partly past the edge (TMA zero-fills it)
    (8191, 8193, 4104),  # every dimension ragged, large
]


def _k_step(dtype: str) -> int:
    """The K multiple a dtype's kernels need: what its odd sizes' K share (8 for fp16 and bf16, 16 for fp8's
    16-byte rows), since each dtype's edge sizes keep to its rules."""
    return math.gcd(*(k for _, _, k in GEMM.edge_sizes_for(dtype)))


def _k_most(dtype: str) -> int:
    """The longest K a default run takes the dtype to (65536 for fp16, 8192 for bf16 and fp8): the precision the
    suite claims for it. (Triton's fp8 kernels sum all of K in wgmma's reduced-precision accumulator, whose error
    grows with K.)"""
    return max(k for _, _, k in GEMM.default_sizes_for(dtype))


def _gemm_shapes(shapes):
    """The shapes at a dtype: K rounded up to its K multiple and no longer than its longest (unchanged for fp16)."""
    return lambda dtype: [(m, n, min(-(-k // _k_step(dtype)) * _k_step(dtype), _k_most(dtype))) for m, n, k in shapes]


@pytest.mark.parametrize(
    "variant, dtype, stages, shape", list(_cases(GEMM, _gemm_shapes(GEMM_EVERY_DEPTH), _gemm_shapes(GEMM_ONE_DEPTH)))
)
def test_gemm_matches_fp64(variant, dtype, stages, shape):
    if rule := variant.kernel.refuses(shape, dtype):  # a shape the kernel declares it does not take: refused
        with pytest.raises(ValueError, match=re.escape(rule)):
            validate(variant, stages, shape, seed=1, device=torch.device("cuda"), dtype=dtype)
        return
    check = validate(
        variant, stages, shape, seed=sum(shape) + 101 * (stages or 0), device=torch.device("cuda"), dtype=dtype
    ).check
    assert check.valid, (
        f"{variant.label} {dtype} stages={stages} {GEMM.shape(shape)}: {check.message} "
        f"(max abs error {check.max_abs_error:.3g}, rel {check.rel_error:.3g})"
    )


def test_gemm_check_catches_a_wrong_tile():
    """The GEMM check fails when one 16x8 mma tile of C is wrong."""
    inputs = GEMM.make_inputs((256, 256, 64), 3, torch.device("cuda"))
    ref = GEMM.reference(inputs)
    out = ref.half()
    out[16:32, 8:16] += 0.01
    assert not GEMM.check(out, ref).valid


def test_ptx_gemm_refuses_a_ring_deeper_than_shared_memory(monkeypatch):
    from suite.nvrtc import loader
    from suite.ptx import gemm

    monkeypatch.setattr(loader, "device_smem_limit", lambda: 100 * 1024)  # as if the GPU had 100 KiB per block
    a = torch.randn(64, 64, device="cuda").half()
    with pytest.raises(ValueError, match="shared memory"):
        gemm.Gemm(a, a, torch.empty_like(a), 5)


def test_ptx_gemm_refuses_a_ring_that_does_not_fit_this_gpu():
    """BLOCK_K = 64 at 5 stages needs 240 KiB of shared memory per block; an H100/H200 allows 227 KiB."""
    from suite.nvrtc import loader
    from suite.ptx import gemm

    need = 5 * gemm.stage_bytes(64)
    if need <= loader.device_smem_limit():
        pytest.skip("this GPU fits a 240 KiB ring")
    a = torch.randn(256, 256, device="cuda").half()
    with pytest.raises(ValueError, match=f"needs {need} B of shared memory per block"):
        gemm.Gemm(a, a, torch.empty_like(a), 5, kernel=gemm.GemmMmaSync(64, stages=(5,)))  # not registered


def test_tma_store_rows_report_the_shared_memory_they_launch_with():
    """The TMA-store rung's rows report the launch's dynamic shared memory (ring, barriers and C's staging) plus
    static, not the ring alone; at 4 stages the staging is half a tile, said in the row, and C is still right."""
    from suite.ptx import gemm_tma

    config = gemm_tma.CONFIGS["128x256x64 ws 2wg persistent tma-store"]
    a = torch.randn(300, 192, device="cuda").half()
    b = torch.randn(192, 520, device="cuda").half()
    want = a.double() @ b.double()
    for stages in config.stages:
        c = torch.full((300, 520), float("nan"), device="cuda", dtype=torch.float16)
        launch = gemm_tma.Gemm((a, b), c, config, stages)
        launch()
        torch.cuda.synchronize()
        torch.testing.assert_close(c.double(), want, rtol=1e-2, atol=0.05)
        static = launch.info.smem_total - launch.smem_bytes
        assert 0 <= static <= 1024 and launch.info.smem_total > stages * config.stage_bytes, launch.info.smem_total
        assert launch.smem_bytes == config.smem_bytes(stages) <= 227 * 1024 - static, (stages, launch.smem_bytes)
        halves = "C staged 1/2 of a tile at a time" in launch.info.config
        assert halves == (config.c_passes(stages) == 2) == (stages == 4), (stages, launch.info.config)


# ---------------------------------------------------------------------------------------------------------------
# vector: the depth sweep's configurations past 2^31 elements, the residency they pin, the latency probe
# ---------------------------------------------------------------------------------------------------------------


def _huge_depths(v) -> tuple:
    """The depths a variant runs past 2^31 elements at. A Triton kernel: every one, since each is its own pipelined
    schedule (the pipeliner peels a different prologue and epilogue per num_stages) that must compute its offsets in
    64 bits. A .cu kernel: its deepest only, since its offsets are the same 64-bit code at every depth (STAGES sizes
    the ring and nothing that indexes the vector)."""
    return tuple(v.stages) if v.backend == "triton" else (_deepest(v.stages),)


HUGE_N = 2**31 + 5  # 64-bit indexing everywhere, and a ragged last chunk


@pytest.mark.long  # 43 s on the H200
def test_vector_bit_exact_past_2_to_the_31():
    """Every vector kernel that runs here, at each of its _huge_depths, on one vector of 2^31 + 5 floats: its output
    poisoned before each launch, compared with 2 x the input bit for bit. One test, not one per kernel and depth: the
    26 GB (input, output, reference) are made once and held by one test at a time, so it runs beside the other GPU
    tests instead of alone at the end of the run, 44 times."""
    cases = [
        (v, s)
        for v in variants("vector")
        if not isinstance(v.kernel, LibraryOp) and not _unless_it_runs_here(v, VECTOR.default_dtype)
        for s in _huge_depths(v)
    ]
    if not cases:
        pytest.skip("no vector kernel runs on this GPU")
    x = VECTOR.make_inputs(HUGE_N, 31, torch.device("cuda"))[0]
    ref = x * 2
    out = torch.empty_like(x)
    wrong = []
    for variant, stages in cases:
        out.fill_(float("nan"))
        try:
            variant.factory((x,), out, stages)()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - said with the others (a launch error may fail those after it too)
            wrong.append(f"{variant.label} stages={stages}: {type(e).__name__}: {e}")
            continue
        if not torch.equal(out, ref):
            wrong.append(f"{variant.label} stages={stages}: {int((out != ref).sum())} elements differ")
    assert not wrong, f"{len(wrong)} of {len(cases)} kernels and depths wrong past 2^31 elements:\n" + "\n".join(wrong)


def _depth_modules():
    from suite.ptx import vector, vector_bulk

    return [vector, vector_bulk]


@pytest.mark.parametrize("blocks_per_sm, stages", [(1, 1), (1, 6), (2, 2), (3, 3)])
@pytest.mark.parametrize("which", [0, 1], ids=["cp.async", "bulk"])
def test_ptx_depth_launch_pins_residency(which, blocks_per_sm, stages):
    """Padding the shared memory pins exactly k resident blocks per SM (the occupancy calculator agrees), the grid is
    k x SMs, and the row reports that residency and the bytes in flight it implies."""
    from suite.nvrtc import loader

    mod = _depth_modules()[which]
    x = torch.randn(2**20 + 3, device="cuda")
    y = torch.full_like(x, float("nan"))
    launcher = mod.Scale2(x, y, stages, mod.depth(8192, blocks_per_sm=blocks_per_sm))
    launcher()
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    props = torch.cuda.get_device_properties(0)
    assert launcher.grid == blocks_per_sm * props.multi_processor_count
    assert loader.occupancy(launcher.kernel, launcher.config.threads, launcher.smem_bytes) == blocks_per_sm
    info = launcher.info
    assert info.resident_blocks_per_sm == blocks_per_sm == info.occupancy
    assert info.bytes_in_flight_per_sm == stages * 8192 * blocks_per_sm


@pytest.mark.parametrize("which", [0, 1], ids=["cp.async", "bulk"])
def test_ptx_depth_refuses_a_ring_that_does_not_fit_its_residency(which):
    mod = _depth_modules()[which]
    x = torch.randn(4096, device="cuda")
    with pytest.raises(ValueError, match="does not fit 2 resident blocks per SM"):
        mod.Scale2(x, torch.empty_like(x), 4, mod.depth(32768, blocks_per_sm=2))  # 128 KiB > half of 228 KiB


@triton.jit
def _smid_probe(out_ptr, spin_ns):
    """Stay resident for spin_ns, then record which SM this program ran on."""
    start = tlc.globaltimer()
    now = start
    while now - start < spin_ns:
        now = tlc.globaltimer()
    tl.store(out_ptr + tl.program_id(0), tlc.smid())


def test_triton_grid_pins_one_program_per_sm():
    """Triton cannot pad shared memory: its persistent grid of k x SMs programs relies on the block scheduler
    placing k per SM. Checked with a 4-warp probe (as the depth sweep's programs) that records %smid."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for k in (1, 2):
        out = torch.full((k * sms,), -1, dtype=torch.int32, device="cuda")
        _smid_probe[(k * sms,)](out, 200_000, num_warps=4)
        torch.cuda.synchronize()
        counts = torch.bincount(out.long(), minlength=sms)
        assert counts.min() == counts.max() == k, counts.tolist()


@pytest.mark.gpu_alone  # a timing
def test_memory_latency_probe():
    from suite.probes import latency

    ns = latency.measure_ns()
    assert 150 < ns < 3000, ns  # HBM idle latency is several hundred ns on current GPUs
    small = latency.measure_ns(nbytes=256 * 1024 * 1024, steps=(1 << 12, 1 << 14))
    assert abs(small - ns) < 0.5 * ns, (small, ns)  # a random walk over DRAM: the size beyond L2 hardly matters


@pytest.mark.gpu_alone  # a timing
def test_roofline_bandwidth_probe_with_either_flush():
    """The roofline's copy_ probe (a run without the vector problem) under both flushes: an HBM-class bandwidth, the
    read flush not slower than the write (it leaves no dirty line for copy_ to write back)."""
    from suite.driver import roofline

    write, read = roofline.probe_bandwidth("write"), roofline.probe_bandwidth("read")
    assert 500 < write < 20_000 and 500 < read < 20_000, (write, read)
    assert read > 0.97 * write, (write, read)


def test_device_descriptor_scratch_is_zeroed_once_and_kept_per_stream():
    """The scratch Triton asks for when a kernel builds its tensor maps on the device: zeroed when made (initcheck
    saw the per-launch torch.empty read unwritten), then the same buffer for every launch on that stream, another
    for another stream, and none of it during a CUDA graph capture (the graph takes its own from its pool)."""
    from suite.triton import gemm_desc

    stream = torch.cuda.current_stream().cuda_stream
    first = gemm_desc._alloc_scratch(4096, 128, stream)
    assert first.dtype == torch.int8 and first.numel() == 4096 and not first.any()
    first.fill_(7)  # what a launch left: the next launch rebuilds its maps over it
    assert gemm_desc._alloc_scratch(4096, 128, stream) is first
    side = torch.cuda.Stream()
    assert gemm_desc._alloc_scratch(4096, 128, side.cuda_stream) is not first
    graph = torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph.capture_begin()
        captured = gemm_desc._alloc_scratch(4096, 128, side.cuda_stream)
        graph.capture_end()
    assert captured is not gemm_desc._SCRATCH.get((torch.cuda.current_device(), side.cuda_stream, 4096))
