"""bf16 and fp8 e4m3 in the Triton descriptor GEMMs (suite/triton/gemm_desc.py; the Gluon kernel's SASS is checked
in tests/test_triton_interp.py): padded pitches where a row is not 16 bytes, the tuned configurations of each dtype,
the rows that have no build saying why, bad input, and the interpreter's bf16 dot (suite/triton/_interp_dot.py).

The registry-wide tests (tests/test_variants.py) validate every variant at every dtype it declares at the problem's
edge sizes; these add the shapes those do not reach."""

from __future__ import annotations

import pytest
import torch
from conftest import HAS_GPU
from gemm_checks import valid_twice

from suite.problems import GEMM
from suite.triton import gemm_desc

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")


@pytest.mark.parametrize("name", ["tile", "persistent", "persistent host"])
@pytest.mark.parametrize(
    "dtype, size",
    [
        ("fp8e4m3", (37, 45, 40)),  # K % 16 != 0: A and B (N x K) padded to 48; N odd: C without a descriptor
        ("fp8e4m3", (5, 264, 136)),  # K % 16 == 8, C through its descriptor
        ("bf16", (19, 30, 13)),  # K and N odd: A and B padded
    ],
)
def test_desc_pads_rows_that_are_not_16_bytes(name, dtype, size):
    kernel = gemm_desc.KERNELS[name]
    inputs = GEMM.make_inputs(size, 7, DEVICE, dtype)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    launcher = kernel.launch(inputs, out, kernel.stages_for(dtype)[-1])
    launcher()
    check = GEMM.check(out, GEMM.reference(inputs), dtype)
    assert check.valid, f"{name} {dtype} {size}: {check.message} ({launcher.config})"
    assert "padded pitch" in launcher.config
    assert ("B given N x K" in launcher.config) == (dtype == "fp8e4m3")


def test_operands_pad_by_element_size():
    fp8 = torch.float8_e4m3fn
    ops = gemm_desc.Operands(
        torch.zeros(4, 24, dtype=fp8),
        torch.zeros(8, 24, dtype=fp8),
        torch.zeros(4, 8, dtype=torch.bfloat16),
        b_k_major=True,
    )
    assert ops.a_padded.shape == (4, 32) and ops.b_padded.shape == (8, 32) and ops.c_desc
    ops = gemm_desc.Operands(torch.zeros(4, 24).half(), torch.zeros(24, 12).half(), torch.zeros(4, 12).half())
    assert ops.a_padded is None and ops.b_padded.shape == (24, 16) and not ops.c_desc


@pytest.mark.parametrize("dtype", gemm_desc.DTYPES)
def test_tuned_configs_fit_and_use_the_dtype_tile(dtype):
    configs = gemm_desc.tuning_configs(dtype)
    assert {c.kwargs["BLOCK_K"] for c in configs} == {gemm_desc.TILES[dtype][2]}
    for c in configs:
        ring = c.num_stages * gemm_desc.stage_bytes(dtype)
        c_stage = gemm_desc.C_TILE_BYTES // (2 if c.kwargs["EPILOGUE_SUBTILE"] else 1)
        assert ring + c_stage <= gemm_desc.SMEM_LIMIT, c
    assert gemm_desc.TUNED_KERNELS[dtype].keys[-1] == "OUT_TYPE"  # fp16 and bf16 choices kept apart


def test_every_triton_gemm_row_says_why_it_has_no_build():
    """A Triton GEMM variant without a dtype has a reason in its row (the pointer kernel: fp16 only, and why)."""
    from suite.registry import variants

    for v in variants("gemm", "triton"):
        for dtype in GEMM.dtypes:
            reason = v.dtype_skip_reason(dtype) if dtype not in v.dtypes else None
            assert reason is None or "no " + dtype in reason
    pointer = next(v for v in variants("gemm", "triton") if v.name == "128x256x32")
    assert "K-major" in pointer.dtype_skip_reason("fp8e4m3") and "twin" in pointer.dtype_skip_reason("bf16")


@pytest.mark.parametrize("name", ["tile", "persistent host", "tuned"])
def test_desc_refuses_fp8_b_in_the_wrong_layout(name):
    a = torch.randn(8, 32).to(torch.float8_e4m3fn)
    b = torch.randn(32, 16).to(torch.float8_e4m3fn)  # K x N: fp8 takes N x K
    with pytest.raises(ValueError, match="N x K"):
        gemm_desc.KERNELS[name].launch(
            (a, b, torch.tensor(1.0), torch.tensor(1.0)),
            torch.empty(8, 16, dtype=torch.bfloat16),
            3 if name != "tuned" else None,
        )


@pytest.mark.skipif(HAS_GPU, reason="the interpreter runs only where there is no GPU")
def test_interpreter_bf16_dot_is_widened_exactly():
    import triton
    import triton.language as tl

    from suite.triton._interp_dot import widen_bf16_dot

    @triton.jit
    def dot16(a, b, c):
        r = tl.arange(0, 16)
        x = tl.load(a + r[:, None] * 16 + r[None, :])
        y = tl.load(b + r[:, None] * 16 + r[None, :])
        tl.store(c + r[:, None] * 16 + r[None, :], tl.dot(x, y))

    assert widen_bf16_dot() and widen_bf16_dot()  # installed once, and again a no-op
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c = torch.empty(16, 16)
    dot16[(1,)](a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-6, atol=1e-5)


@pytest.mark.skipif(HAS_GPU, reason="the interpreter runs only where there is no GPU")
def test_fp8_rows_skip_where_the_interpreter_cannot_multiply_fp8(monkeypatch):
    """An interpreter whose tl.dot fails on fp8 (triton 3.9's does not; another version's might) turns every
    Triton GEMM's fp8 row into a skip that says why, not a failure; the other dtypes still run."""
    from triton.runtime import interpreter

    from suite.triton import _interp_dot, gemm_decode, gemm_splitk, gemm_streamk

    def no_fp8(self, a, b, d, *args, **kwargs):
        raise NotImplementedError("no fp8 here")

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", no_fp8)
    _interp_dot.fp8_dot_unsupported.cache_clear()
    try:
        reason = _interp_dot.fp8_dot_unsupported()
        assert "cannot run an fp8 tl.dot" in reason and "no fp8 here" in reason
        for kernel in (
            gemm_desc.KERNELS["persistent host"],
            gemm_splitk.KERNEL,
            gemm_streamk.KERNEL,
            gemm_decode.KERNEL,
        ):
            assert kernel.skip_reason("fp8e4m3") == reason and kernel.skip_reason("bf16") is None
    finally:
        _interp_dot.fp8_dot_unsupported.cache_clear()


def _stream_k_units(tiles: int, k_tiles: int, programs: int):
    """The units the Gluon stream-K kernel walks (its producer and consumers alike), from stream_k_plan: per program
    its whole tiles, then (tile, first K tile, end) per tile its share of the last wave's K iterations touches."""
    from suite.triton.gemm_gluon import stream_k_plan

    dp, sk_iters, sk_programs = stream_k_plan(tiles, k_tiles, programs)
    for p in range(programs):
        units = [(tile, 0, k_tiles) for tile in range(p, dp, programs)]
        it = min(p * sk_iters // sk_programs, sk_iters)
        end = min((p + 1) * sk_iters // sk_programs, sk_iters)
        while it < end:
            t, kb = divmod(it, k_tiles)
            ke = min(k_tiles, kb + end - it)
            units.append((dp + t, kb, ke))
            it += ke - kb
        yield p, units, (dp, sk_iters, sk_programs)


@pytest.mark.parametrize("programs", [1, 4, 132])
def test_gluon_stream_k_plan_covers_every_k_iteration_once_and_each_tile_has_one_finisher(programs):
    """stream_k_plan and the kernel's walk over it: every tile's K tiles exactly once; whole waves whole, the last
    wave shared in parts of at least half a tile (or all of a short K); per shared tile one finisher (the unit with
    its first K tile), whose contributors are exactly the next programs up to the owner of the tile's last K
    iteration by the kernel's formula, each publishing once, from its first unit (so no finisher waits on a program
    that waits on it)."""
    for tiles in (1, 2, 5, programs - 1, programs, programs + 1, 3 * programs + 7, 2048):
        for k_tiles in (1, 2, 3, 8, 33, 64):
            if tiles < 1:
                continue
            covered = {}
            publishers = {}
            finishers = {}
            for p, units, (dp, sk_iters, sk_programs) in _stream_k_units(tiles, k_tiles, programs):
                assert dp % programs == 0 and 0 <= tiles - dp < programs
                assert sk_iters == (tiles - dp) * k_tiles and 1 <= sk_programs <= programs
                shared = [u for u in units if u[0] >= dp]
                for tile, kb, ke in units:
                    assert 0 <= kb < ke <= k_tiles
                    for kt in range(kb, ke):
                        assert (tile, kt) not in covered, (tiles, k_tiles, programs, tile, kt)
                        covered[(tile, kt)] = p
                    if tile < dp:
                        assert (kb, ke) == (0, k_tiles)
                        continue
                    i = shared.index((tile, kb, ke))  # among this program's shared units
                    if ke - kb < k_tiles:
                        assert ke - kb >= min(k_tiles // 2, sk_iters // sk_programs) or i in (0, len(shared) - 1)
                    if kb > 0:
                        assert i == 0 and p not in publishers, "a program publishes once, from its first unit"
                        publishers[p] = tile
                    else:
                        assert tile not in finishers
                        finishers[tile] = (p, ke)
            assert len(covered) == tiles * k_tiles
            for tile in range(dp, tiles):
                p, ke = finishers[tile]
                if ke == k_tiles:
                    continue
                tile_end = (tile - dp + 1) * k_tiles
                last = (tile_end * sk_programs - 1) // sk_iters  # the kernel's owner of the tile's last iteration
                assert last == covered[(tile, k_tiles - 1)] and last > p
                assert all(publishers.get(c) == tile for c in range(p + 1, last + 1)), (tiles, k_tiles, tile)
            assert sorted(publishers) == sorted(
                c for tile in range(dp, tiles) for c in range(finishers[tile][0] + 1, covered[(tile, k_tiles - 1)] + 1)
            )


def test_gluon_stream_k_plan_at_8192_cubed_leaves_half_tiles():
    from suite.triton.gemm_gluon import stream_k_plan

    # 2048 tiles of 128 x 256 on 132 SMs: 15 whole waves, then 68 tiles' 64 K tiles over 132 programs (33 each)
    assert stream_k_plan(2048, 64, 132) == (1980, 4352, 132)
    assert stream_k_plan(1320, 64, 132) == (1320, 0, 1)  # whole waves only: nothing shared
    assert stream_k_plan(4, 64, 132) == (0, 256, 8)  # 4 tiles: 8 programs of half a tile
    with pytest.raises(ValueError, match="stream-K needs tiles"):
        stream_k_plan(0, 64, 132)


@pytest.mark.gpu
def test_gluon_fp8_stream_k_matches_fp64_bit_for_bit_and_leaves_its_flags_at_zero():
    """The Gluon fp8 kernel's stream-K (GluonGemm(stream_k=True), registered as gluon ws stream-k), at both depths,
    on poisoned outputs: fewer tiles than SMs (every tile shared: M = 1, 67 and 129 with edge tiles of N and a partial
    K tile), and more (2048 x 8192 x 1024: 3 whole waves, then 116 tiles of 8 K tiles over 132 programs,
    finishers adding one or two partials); twice, bit for bit, the flags zero after each launch."""
    from suite.triton.gemm_gluon import GluonGemm

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon GEMM is built for sm_90")
    for stages in (3, 4):
        for size in ((1, 300, 1040), (67, 264, 4112), (129, 520, 4112), (2048, 8192, 1024)):
            inputs = GEMM.make_inputs(size, sum(size) + stages, DEVICE, "fp8e4m3")
            out = GEMM.make_output(inputs)
            launch = GluonGemm(inputs, out, stages, stream_k=True)
            assert "stream-K" in launch.config, launch.config
            valid_twice(launch, out, inputs, "fp8e4m3", (stages, size))
            assert int(launch.flags.abs().sum()) == 0, (stages, size, "flags not reset")


def test_gluon_stream_k_is_refused_off_the_fp8_halves():
    from suite.triton.gemm_gluon import GluonGemm

    bf16 = GEMM.make_inputs((64, 64, 64), 0, torch.device("cpu"), "bf16")
    with pytest.raises(ValueError, match="stream_k: built on the fp8 kernel's promoted halves only"):
        GluonGemm(bf16, GEMM.make_output(bf16), 3, stream_k=True)


def test_gluon_stream_k_is_registered_for_fp8_with_a_fault_whose_finisher_reads_first():
    """The registry's gluon ws stream-k: fp8 only (the 16-bit rows say why), the square, llm and sweep sets,
    sanitizer sizes whose plans share tiles; its declared fault (the fix-up wait removed) runs in fp8 at a size where
    the finisher's own share is shorter than each contributor's, so it reads their slots before they are written, and
    the module built with the fault's define launches that build on fresh workspace memory. A fault without stream-K
    is refused."""
    from suite.registry import variants
    from suite.triton.gemm_gluon import FAULT_SK_NO_WAIT, STREAM_K, TILES, GluonGemm

    (v,) = [v for v in variants("gemm", "triton") if v.name == "128x256x64 gluon ws stream-k"]
    assert v.kernel is STREAM_K and v.shape_sets == ("square", "llm", "sweep") and v.dtypes == ("fp8e4m3",)
    for d in ("fp16", "bf16"):
        assert "fp8 kernel's promoted halves only" in v.dtype_skip_reason(d), d
    bm, bn, bk = TILES["fp8e4m3"]

    def walk_at(m, n, k):
        """(K tiles per tile, program -> its units) on GluonGemm's stream-K grid on the H200."""
        tiles, k_tiles = -(-m // bm) * -(-n // bn), -(-k // bk)
        units = _stream_k_units(tiles, k_tiles, min(132, tiles * k_tiles))
        return k_tiles, {p: u for p, u, _ in units if u}

    for size in STREAM_K.sanitize_sizes:
        shared = [u for units in walk_at(*size)[1].values() for u in units if u[1] > 0]
        assert shared, (size, "no tile shared: the fix-up is not exercised")
    (fault,) = STREAM_K.faults
    assert fault.define == FAULT_SK_NO_WAIT and fault.tool == "initcheck" and fault.dtype == "fp8e4m3"
    k_tiles, walk = walk_at(*fault.size)
    finisher = [p for p, units in walk.items() if units[0][1] == 0 and units[0][2] < k_tiles]
    assert finisher == [0] and len(walk) >= 3, walk
    own = walk[0][0][2] - walk[0][0][1]
    assert all(u[2] - u[1] > own for p, units in walk.items() if p > 0 for u in units), walk
    inputs = GEMM.make_inputs(fault.size, 1, DEVICE, "fp8e4m3")  # launchers built, not launched
    healthy = STREAM_K.launch(inputs, GEMM.make_output(inputs), 3)
    broken = STREAM_K.with_defines(fault.define, stages=fault.stages).launch(inputs, GEMM.make_output(inputs), 3)
    assert healthy.stream_k and broken.stream_k and not healthy.fault and broken.fault
    assert broken.workspace.numel() == healthy.workspace.numel() == healthy.grid * 128 * 256
    with pytest.raises(ValueError, match="it needs stream_k"):
        GluonGemm(inputs, GEMM.make_output(inputs), 3, fault=True)


def test_gluon_stream_k_launcher_sizes_its_plan_workspace_and_flags_from_the_shape():
    """Built on CPU tensors (no launch): every SM's program (the interpreter's 4), the plan of its own tiles and K
    tiles, a slot of 128 x 256 fp32 per program, zeroed flags per program and warpgroup, and the config saying so."""
    from suite.triton.gemm_gluon import GluonGemm, stream_k_plan

    inputs = GEMM.make_inputs((300, 1280, 1040), 1, torch.device("cpu"), "fp8e4m3")  # 3 x 5 tiles, 9 K tiles
    launch = GluonGemm(inputs, GEMM.make_output(inputs), 3, stream_k=True)
    assert launch.grid == 4 and launch.sk_plan == stream_k_plan(15, 9, 4) == (12, 27, 4)
    assert launch.workspace.numel() == 4 * 128 * 256 and launch.workspace.dtype == torch.float32
    assert launch.flags.shape == (8,) and int(launch.flags.abs().sum()) == 0
    assert "stream-K: 12 tiles whole, then 27 K iterations over 4 programs" in launch.config
    plain = GluonGemm(inputs, GEMM.make_output(inputs), 3)
    assert plain.workspace is None and plain.flags is None and "stream-K" not in plain.config
