"""The Triton mid-M kernel (suite/triton/gemm_mid.py): token tiles computed as power-of-two pieces on one weight box,
walked by the split tail.

* its rules: a token tile's pieces, the tile from the shape (one tile up to 208 rows of M, above it the modelled
  fastest of pieces and waves), the schedule;
* odd shapes against the fp64 reference, fresh random inputs and a NaN-poisoned output: one, two and three pieces,
  several token tiles, a whole wave then shared tail tiles, N and K not multiples of 8 (padded pitches);
* bad input, the sanitizer's fault hook (determinism, the shared bad-input cases and fp8's edge values:
  tests/test_triton_llm.py's KINDS);
* the kernel compiled for sm_90 without a GPU: wgmma fed by TMA, a chain per piece, no spills, the ring in 227 KiB.

On a CPU the kernel runs in the Triton interpreter, whose SM count is 4 (gemm_desc.num_sms): the tests pass the
program count the schedule is planned for.
"""

from __future__ import annotations

import random
import zlib

import pytest
import torch
from conftest import HAS_GPU

from suite import waves
from suite.problems import GEMM
from suite.triton import gemm_mid
from suite.triton._interp_dot import fp8_dot_unsupported

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
H200_SMS = 132
CPU_ONLY = pytest.mark.skipif(HAS_GPU, reason="compiles for sm_90 without a GPU (the GPU runs the kernel itself)")


def _run(size, dtype, seed, stages=2, **kwargs):
    """(inputs, out, launcher): fresh inputs of ``size``, the output poisoned, one call."""
    inputs = GEMM.make_inputs(size, seed, DEVICE, dtype)
    out = GEMM.make_output(inputs).fill_(float("nan"))
    launcher = gemm_mid.MidGemm(inputs, out, stages, **kwargs)
    launcher()
    return inputs, out, launcher


def _assert_valid(inputs, out, dtype, what):
    check = GEMM.check(out, GEMM.reference(inputs), dtype)
    assert check.valid, f"{what}: {check.message} (max abs error {check.max_abs_error:.3g})"


# -- the rules -----------------------------------------------------------------------------------------------------


def test_token_pieces_are_the_tiles_binary_digits():
    assert gemm_mid.token_pieces(144) == (128, 16, 0)
    assert gemm_mid.token_pieces(208) == (128, 64, 16)
    assert gemm_mid.token_pieces(128) == (128, 0, 0)
    for rows in range(16, waves.MID_MOST_TOKENS + 1, 16):
        pieces = gemm_mid.token_pieces(rows)
        real = [p for p in pieces if p]
        assert sum(real) == rows and real == sorted(set(real), reverse=True), rows
        assert all(p >= 16 and p & (p - 1) == 0 for p in real), rows  # powers of two, tl.dot's least N or more
    assert gemm_mid.token_pieces(waves.MID_WIDE_TOKENS) == (256, 0, 0)
    for bad in (0, 8, 24, waves.MID_MOST_TOKENS + 16, waves.MID_WIDE_TOKENS - 16, waves.MID_WIDE_TOKENS + 16):
        with pytest.raises(ValueError, match="multiple of 16 within"):
            gemm_mid.token_pieces(bad)


@pytest.mark.parametrize("dtype", ["fp16", "fp8e4m3"])
def test_plan_covers_m_with_the_tile_the_model_walks_fastest(dtype):
    """At any shape and depth: up to 208 rows of M, one tile of M rounded up to 16; above, a tile of 16-208 rows by
    16, or 256 at 16 bits whose ring fits the depth, no other of which ``triton_mid_time`` walks faster; every
    output tile walked once, whole or in shares of 128 bytes of K."""
    rng = random.Random(dtype)
    most, wide = waves.MID_MOST_TOKENS, waves.MID_WIDE_TOKENS
    for _ in range(300):
        m, n, k = rng.randint(1, 3000), rng.randint(1, 40000), rng.randint(1, 40000)
        stages = rng.choice([None, *gemm_mid.STAGES])
        p = gemm_mid.plan(dtype, m, n, k, H200_SMS, stages)
        if m <= most:
            assert p.tiles_t == 1 and p.block_t == -(-m // 16) * 16, (m, p)
        else:
            assert p.block_t % 16 == 0 and (p.block_t <= most or p.block_t == wide != 0), (m, p)
            assert p.block_t <= most or (dtype != "fp8e4m3" and stages in (None, 2, 3, 4)), (m, stages, p)
            others = [*range(16, most + 1, 16), *((wide,) if dtype != "fp8e4m3" else ())]
            others = [t for t in others if stages is None or waves.triton_mid_ring_fits(t, stages)]
            model = waves.triton_mid_time(m, n, k, H200_SMS, p.block_t, dtype)
            assert all(waves.triton_mid_time(m, n, k, H200_SMS, t, dtype) >= model for t in others), (m, n, k, p)
        assert p.tiles_t == -(-m // p.block_t), (m, p)
        s = p.schedule
        assert s.tiles == p.tiles_t * p.tiles_w == p.tiles_t * -(-n // gemm_mid.BLOCK_W), (m, n, s)
        assert s.k_tiles == -(-k // (64 if dtype == "fp16" else 128)), (k, s)
        assert s.dp_tiles % H200_SMS == 0 and s.sk_iters == s.sk_tiles * s.k_tiles, s
        assert s.sk_programs % max(1, s.sk_tiles) == 0, s  # equal shares of each tail tile


def test_plan_at_the_band_it_is_for():
    """M = 129 and 140 compute 144 rows where 256-row tiles compute 256. M = 341 runs two tiles of 192 = 128 + 64, where
    two of 176 would take three pieces each (the model's cost per piece); M = 700 runs 256-row tiles, one piece each,
    where their ring fits (4 stages), and 128-row ones at 5; fp8 never 256 (its promoted accumulator would spill)."""
    assert gemm_mid.plan("fp16", 129, 73728, 11008, H200_SMS).pieces == (128, 16, 0)
    p = gemm_mid.plan("fp16", 140, 36864, 18944, H200_SMS)
    assert (p.block_t, p.tiles_t, p.tiles_w) == (144, 1, 288)
    assert p.schedule.dp_tiles == 2 * H200_SMS and p.schedule.sk_tiles == 24  # two whole waves, then shares
    p = gemm_mid.plan("fp16", 341, 6144, 11008, H200_SMS)
    assert (p.block_t, p.tiles_t, p.pieces) == (192, 2, (128, 64, 0))
    shape = (341, 6144, 11008, H200_SMS)
    assert waves.triton_mid_time(*shape, 176) > waves.triton_mid_time(*shape, 192)
    assert gemm_mid.plan("bf16", 700, 8192, 8192, H200_SMS, 4).pieces == (256, 0, 0)
    assert gemm_mid.plan("bf16", 700, 8192, 8192, H200_SMS, 5).pieces == (128, 0, 0)
    assert gemm_mid.plan("fp8e4m3", 700, 8192, 8192, H200_SMS, 4).block_t <= waves.MID_MOST_TOKENS
    # a tie in the model and in rows computed (192 x 4 = 256 x 3 = 768): the fewer tiles
    assert gemm_mid.plan("fp16", 688, 2845, 16331, 114).block_t == 256


@pytest.mark.parametrize("stages, rows", [(4, 256), (5, 128)])
def test_the_launcher_plans_a_tile_its_ring_fits(stages, rows):
    """The launcher plans at its own depth: at 5 stages, where the 256-row tile's ring (240 KiB) does not fit, the
    128-row tile."""
    inputs = GEMM.make_inputs((641, 8192, 520), 3, torch.device("cpu"), "fp16")
    launcher = gemm_mid.MidGemm(inputs, GEMM.make_output(inputs), stages, sms=H200_SMS)
    assert launcher.tile[0] == launcher.mid.block_t == rows, launcher.config
    assert waves.triton_mid_ring_fits(rows, stages) and f"x {rows} tokens" in launcher.config


# -- odd shapes against fp64 ---------------------------------------------------------------------------------------

# (name, M, N, K, programs, the pieces): programs the schedule is planned for (the interpreter has 4 "SMs"); the
# K of each case makes the shares it names at 64-element (16-bit) and 128-element (fp8) K tiles alike
CASES = [
    ("one piece, two weight tiles", 20, 130, 3 * 64 + 8, 4, (32, 0, 0)),
    ("two pieces in shares of K", 40, 200, 1100, 4, (32, 16, 0)),
    ("three pieces, N and K odd", 100, 133, 300, 3, (64, 32, 16)),
    ("144 rows in shares of K", 140, 128, 1000, 4, (128, 16, 0)),
    ("two token tiles, a wave then shares", 300, 300, 1100, 4, (128, 32, 0)),
]
WIDE = ("one 256-row piece, two token tiles, a wave then shares", 391, 384, 520, 4, (256, 0, 0))  # 16 bits only
_DTYPE_CASES = [("fp16", *c) for c in (*CASES, WIDE)] + [("bf16", *c) for c in (*CASES[2:4], WIDE)]
_DTYPE_CASES += [("fp8e4m3", *c) for c in CASES[1:]]


@pytest.mark.parametrize(
    "dtype, name, m, n, k, programs, pieces", _DTYPE_CASES, ids=[f"{c[1]}-{c[0]}" for c in _DTYPE_CASES]
)
def test_close_to_fp64(dtype, name, m, n, k, programs, pieces):
    reason = fp8_dot_unsupported() if dtype == "fp8e4m3" else None  # an interpreter without fp8 tl.dot
    if reason:
        pytest.skip(reason)
    seed = zlib.crc32(f"mid {dtype} {m}x{n}x{k}".encode())
    inputs, out, launcher = _run((m, n, k), dtype, seed, sms=programs)
    assert launcher.mid.pieces == pieces, launcher.config
    _assert_valid(inputs, out, dtype, f"mid {m}x{n}x{k} {dtype}: {launcher.config}")


@pytest.mark.parametrize("dtype", ["fp16", "fp8e4m3"])
def test_the_cases_cover_what_they_say(dtype):
    """The schedules the cases above run, at either K tile: shared tiles (a fix-up), a whole wave before the tail,
    several token tiles."""
    plans = {c[0]: gemm_mid.plan(dtype, *c[1:5]) for c in CASES}
    assert plans["two pieces in shares of K"].schedule.cover > 1
    assert plans["144 rows in shares of K"].schedule.cover > 1
    two_tiles = plans["two token tiles, a wave then shares"]
    assert two_tiles.tiles_t == 2 and two_tiles.schedule.dp_tiles == 4 and two_tiles.schedule.cover > 1
    if dtype == "fp16":
        wide = gemm_mid.plan(dtype, *WIDE[1:5])
        assert wide.tiles_t == 2 and wide.schedule.dp_tiles == 4 and wide.schedule.cover > 1


def test_sanitizer_sizes_exercise_the_fix_up():
    """On 132 SMs: the first size's tile of three pieces in shares of K (what the fault's early fix-up reads) with B
    through a padded pitch; the second's a whole wave, then shared tiles, of three 256-row token tiles."""
    assert gemm_mid.KERNEL.faults[0].size == gemm_mid.KERNEL.sanitize_sizes[0]
    assert gemm_mid.KERNEL.sanitize_sizes[0][1] % 8
    for stages in gemm_mid.STAGES:
        first, second = (gemm_mid.plan("fp16", *size, H200_SMS, stages) for size in gemm_mid.KERNEL.sanitize_sizes)
        assert first.schedule.cover > 1 and len([p for p in first.pieces if p]) == 3, stages
        assert second.schedule.dp_tiles and second.schedule.cover > 1, (stages, second)
        wide = waves.triton_mid_ring_fits(waves.MID_WIDE_TOKENS, stages)
        assert second.pieces == ((waves.MID_WIDE_TOKENS, 0, 0) if wide else (128, 0, 0)), (stages, second)


# -- bad input, the fault hook ------------------------------------------------------------------------


def test_bad_depths_are_refused_naming_the_rule():
    """The shared bad-input cases (fp8 without scales, fp32, ...) run in tests/test_triton_llm.py's KINDS."""
    half = (torch.randn(8, 32).half(), torch.randn(32, 16).half())
    with pytest.raises(ValueError, match="stages must be one of"):
        gemm_mid.MidGemm(half, torch.empty(8, 16).half(), 6)
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        gemm_mid.MidGemm(half, torch.empty(8, 16).half(), 2, sms=0)


def test_fault_runs_the_fix_up_before_the_shares():
    """The sanitizer's fault launches the fix-up before the pass that writes the shares: it sums a workspace nobody
    wrote yet (NaN here) into C, where the healthy module, on the same inputs, is right. C starts at a finite value
    (7), so a fix-up that never ran would leave it there, not NaN."""
    (fault,) = gemm_mid.KERNEL.faults
    assert fault.tool == "initcheck" and gemm_mid.KERNEL.kernel_names(2) == ("mid_kernel", "streamk_fixup_kernel")
    for faults in ((), (fault.define,)):
        inputs = GEMM.make_inputs((13, 70, 10 * 64 + 8), 5, DEVICE, "fp16")  # 11 K tiles: one tile in 2 shares
        out = GEMM.make_output(inputs).fill_(7.0)
        launcher = gemm_mid.MidGemm(inputs, out, fault.stages[0], faults=faults, sms=4)
        assert launcher.fixups == 1, launcher.config  # the one tile is shared: all of C comes from the fix-up
        launcher.workspace.fill_(float("nan"))  # what a fresh, never-written workspace may hold
        launcher()
        if faults:
            assert torch.isnan(out).all()
        else:
            _assert_valid(inputs, out, "fp16", "mid, healthy")


# -- compiled for sm_90 --------------------------------------------------------------------------------------------


@CPU_ONLY
def test_on_sm90():
    """One, two and three pieces at the deepest ring with shared tiles (fp8 too: QGMMA, each K tile's sum promoted),
    the widest tile of pieces at the shallowest with none, and the 256-row piece at the deepest ring it fits (4):
    wgmma on TMA loads, one wgmma chain per piece closed together (not serialized), no spills, no atomics, the ring
    within 227 KiB."""
    from sm90_compile import SMEM_LIMIT, assert_fits_sm90, compile_sm90, desc, scales

    deepest, shallowest = max(gemm_mid.STAGES), min(gemm_mid.STAGES)
    cases = [("fp16", 32, deepest, True), ("bf16", 144, deepest, True), ("fp16", 208, deepest, True)]
    cases += [("fp16", 208, shallowest, False), ("fp8e4m3", 144, deepest, True)]
    cases.append(("fp8e4m3", waves.MID_MOST_TOKENS, deepest, True))
    cases.append(("bf16", waves.MID_WIDE_TOKENS, 4, True))
    specs = []
    for dtype, block_t, stages, shared in cases:
        fp8, bk = dtype == "fp8e4m3", gemm_mid.block_k_for(dtype)
        t0, t1, t2 = gemm_mid.token_pieces(block_t)
        sig = {f"tokens{i}": desc(dtype, [t or t0, bk]) for i, t in enumerate((t0, t1, t2))}
        sig |= {"weight_desc": desc(dtype, [gemm_mid.BLOCK_W, bk] if fp8 else [bk, gemm_mid.BLOCK_W])}
        sig |= {"c": "*bf16" if dtype != "fp16" else "*fp16", "workspace": "*fp32" if shared else "constexpr"}
        scale_sig, scale_values = scales(dtype)
        sig |= scale_sig
        sig |= {a: "i32" for a in ("T", "W", "K", "stride_cm", "num_programs", "dp_tiles", "sk_programs", "sk_iters")}
        meta = {"T0": t0, "T1": t1, "T2": t2, "BLOCK_W": gemm_mid.BLOCK_W, "BLOCK_K": bk, "GROUP_M": 8}
        meta |= {"B_K_MAJOR": fp8, "OUT_DTYPE": "tl.float16" if dtype == "fp16" else "tl.bfloat16"}
        meta |= {"SCALED": fp8, "SHARED": shared}
        values = meta | scale_values | ({} if shared else {"workspace": None})
        specs.append(
            {
                "fn": "suite.triton.gemm_mid:mid_kernel",
                "signature": sig | {k: "constexpr" for k in meta},
                "constexprs": values,
                "aligned": ["c", "stride_cm"] + (["workspace"] if shared else []),
                "options": {"num_warps": gemm_mid.NUM_WARPS, "num_stages": stages},
            }
        )
    for (dtype, block_t, stages, shared), got in zip(cases, compile_sm90(specs)):
        what = (dtype, block_t, stages, shared)
        assert_fits_sm90(got, gemm_mid.KERNEL.sass_minimums(), what)
        assert (got["classes"]["wgmma_fp8"] > 0) == (dtype == "fp8e4m3"), (what, got["classes"])
        pieces = len([p for p in gemm_mid.token_pieces(block_t) if p])
        total, closing = got["wgmma_chain"]
        assert closing == pieces and total == pieces * gemm_mid.K_BYTES // 32, (what, got["wgmma_chain"])
        assert stages * gemm_mid.stage_bytes(block_t) <= got["shared"] <= SMEM_LIMIT, (what, got["shared"])
        assert got["ptx"]["atom.global"] == 0 and got["ptx"]["red.global"] == 0, (what, got["ptx"])
