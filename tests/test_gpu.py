"""On a GPU: every registered variant x stage count against torch, on fresh random inputs, outputs poisoned."""

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as tlc

from suite.problems import GEMM, VECTOR
from suite.registry import variants
from suite.validate import validate

pytestmark = pytest.mark.gpu

CASES_VECTOR = [(v, s) for v in variants("vector") for s in v.stages]
CASES_GEMM = [(v, s) for v in variants("gemm") for s in v.stages]


def _id(case):
    v, s = case
    return f"{v.backend}:{v.name}:{s}"


def _run(problem, variant, stages, size, seed):
    inputs = problem.make_inputs(size, seed, torch.device("cuda"))
    out = problem.make_output(inputs)
    out.fill_(float("nan"))  # poisoned: an element the kernel never writes fails the check
    variant.factory(inputs, out, stages)()
    torch.cuda.synchronize()
    return out, (variant.reference or problem.reference)(inputs)


# Every size for the main table's variants; the depth sweep's many configurations get two odd sizes (one Triton
# specialization, so one compile each) and, below, n = 2^31 + 5.
CASES_VECTOR_N = [(v, s, n) for v, s in CASES_VECTOR
                  for n in ((4097, 2**20 + 3) if v.group else (1, 3, 4, 4097, 2**20 + 3, 2**28))]


@pytest.mark.parametrize("case", CASES_VECTOR_N, ids=lambda c: f"{_id(c[:2])}:n={c[2]}")
def test_vector_bit_exact(case):
    variant, stages, n = case
    out, ref = _run(VECTOR, variant, stages, n, seed=n + 17 * (stages or 0))
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


GEMM_SHAPES = [
    (1, 1, 8),  # tiny
    (7, 13, 8),  # K = 8: one partial K tile
    (129, 257, 40),  # one past the tile in M and N
    (300, 520, 136),  # ragged in M, N % 8 == 0
    (256, 250, 64),  # N % 8 != 0: the PTX kernel's predicated B path
    (333, 77, 24),  # odd N, K < BLOCK_K
    (1100, 700, 264),  # 9 x 3 tiles: a rasterization group cut short
    (2048, 2048, 2048),
    (257, 129, 24),  # the Hopper kernels' odd shapes: N odd (B copied to a padded pitch for TMA)
    (4000, 3000, 1000),  # K % 64 != 0: the last K tile is partly past the edge (TMA zero-fills it)
    (8191, 8193, 4104),  # every dimension ragged, large
    (128, 256, 65536),  # one tile, a long K loop: the ring wraps many times
]


@pytest.mark.parametrize("case", CASES_GEMM, ids=_id)
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_fp64(case, shape):
    variant, stages = case
    check = validate(variant, stages, shape, seed=sum(shape) + 101 * (stages or 0), device=torch.device("cuda")).check
    assert check.valid, (f"{variant.label} stages={stages}: {check.message} "
                         f"(max abs error {check.max_abs_error:.3g}, rel {check.rel_error:.3g})")


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


# ---------------------------------------------------------------------------------------------------------------
# vector: the depth sweep's configurations past 2^31 elements, the residency they pin, the latency probe
# ---------------------------------------------------------------------------------------------------------------

CASES_VECTOR_KERNELS = [(v, s) for v, s in CASES_VECTOR if v.backend != "torch"]
HUGE_N = 2**31 + 5  # 64-bit indexing everywhere, and a ragged last chunk


@pytest.fixture(scope="module")
def huge_vector():
    x = VECTOR.make_inputs(HUGE_N, 31, torch.device("cuda"))[0]
    return x, x * 2


@pytest.mark.parametrize("case", CASES_VECTOR_KERNELS, ids=_id)
def test_vector_bit_exact_past_2_to_the_31(case, huge_vector):
    variant, stages = case
    x, ref = huge_vector
    out = torch.full_like(x, float("nan"))
    variant.factory((x,), out, stages)()
    torch.cuda.synchronize()
    assert torch.equal(out, ref), f"{variant.label} stages={stages}: {int((out != ref).sum())} elements differ"


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


def test_memory_latency_probe():
    from suite.probes import latency

    ns = latency.measure_ns()
    assert 150 < ns < 3000, ns  # HBM idle latency is several hundred ns on current GPUs
    small = latency.measure_ns(nbytes=256 * 1024 * 1024, steps=(1 << 12, 1 << 14))
    assert abs(small - ns) < 0.5 * ns, (small, ns)  # a random walk over DRAM: the size beyond L2 hardly matters
