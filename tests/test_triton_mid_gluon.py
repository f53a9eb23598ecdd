"""The swapped mid-M Gluon GEMM (suite/triton/gemm_mid_gluon.py): its tile plan, and on a GPU every tile of its menu
against the fp64 reference on odd shapes (edge tiles in M and N, K cut short; N % 8 != 0: B and C through padded
pitches; K % 8 != 0: A through one; more tiles than SMs, so that programs walk several tiles, wrap the ring across
them and reuse their slabs), fresh random inputs and a NaN-poisoned output, twice bit for bit. Its sm_90 build is
checked without a GPU in tests/test_triton_interp.py."""

from __future__ import annotations

import pytest
import torch
from conftest import HAS_GPU
from gemm_checks import valid_twice

from suite import waves
from suite.problems import GEMM
from suite.triton import gemm_mid_gluon as g

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
H200_SMS = 132


@pytest.mark.parametrize(
    "m, n, tile",
    [
        (341, 6144, (3, 64, 64, 32)),  # 4 token tiles of 96 on 32 weight tiles of 192: 128 tiles, one wave
        (307, 24576, (3, 64, 128, 32)),  # 2 of 160 on 128 of 192: 256 tiles, two waves
        (950, 11008, (2, 128, 128, 32)),  # 6 of 160 on 43 of 256: 258 tiles, two waves
    ],
)
def test_plan_takes_the_tile_whose_waves_fill_the_sms(m, n, tile):
    chosen = waves.gluon_mid_plan(m, n, H200_SMS)
    got = chosen.tile
    assert (got.consumers, got.weight_cols, got.t0, got.t1) == tile
    assert chosen.stages == got.deepest() and got.tiles(m, n) <= 2 * H200_SMS


def test_every_tile_of_the_menu_fits_its_registers_and_shared_memory():
    # (consumers, weight columns, T0, T1) -> deepest ring, worked by hand: a stage is 2 x 64 x (weight columns x
    # consumers + tokens) bytes, the slabs 2 x consumers x T0 x weight columns, 226 KiB in all; tokens x columns / 128
    # accumulator registers at most 96 (3 x 64) or 160 (2 x 128), which leaves out 2 x 128 with 128 + 64
    menu = {
        (3, 64, 64, 0): 6, (3, 64, 64, 16): 5, (3, 64, 64, 32): 5, (3, 64, 128, 0): 4, (3, 64, 128, 16): 4,
        (3, 64, 128, 32): 4, (3, 64, 128, 64): 3, (2, 128, 64, 0): 4, (2, 128, 64, 16): 4, (2, 128, 64, 32): 4,
        (2, 128, 128, 0): 3, (2, 128, 128, 16): 3, (2, 128, 128, 32): 3,
    }  # fmt: skip
    tiles = waves.gluon_mid_tiles()
    assert {(t.consumers, t.weight_cols, t.t0, t.t1): t.deepest() for t in tiles} == menu
    assert {(t.consumers, t.weight_cols, t.t0, t.t1) for t in waves.gluon_mid_tiles(5)} == {
        key for key, deepest in menu.items() if deepest >= 5
    }
    for t in tiles:
        assert 0 < t.rate() <= 1
    # shared-memory reads per multiply-add, 2 x (pieces x weight columns + tokens) / (weight columns x tokens) bytes
    # (the weight box once per piece, or once in all where it goes through registers), against 0.06 at the tensor
    # pipe's pace
    assert waves.GluonMidTile(3, 64, 64, 0).rate() == pytest.approx(0.06 / (2 * 128 / (64 * 64)))
    assert waves.GluonMidTile(3, 64, 64, 32).rate() == pytest.approx(0.06 / (2 * 224 / (64 * 96)))
    assert waves.GluonMidTile(3, 64, 128, 16).register_a and not waves.GluonMidTile(3, 64, 64, 32).register_a
    assert waves.GluonMidTile(3, 64, 128, 16).rate() == 1.0  # 2 x 208 / (64 x 144) = 0.045
    # a forced depth the ring does not fit is refused before anything is built
    inputs = GEMM.make_inputs((64, 512, 128), 0, torch.device("cpu"), "fp16")
    wide = waves.GluonMidTile(2, 128, 128, 32)
    with pytest.raises(ValueError, match="ring fits 3 at most"):
        g.GluonMidGemm(inputs, GEMM.make_output(inputs), 4, tile=wide)
    # no such layout; too many accumulators
    for off_menu in (waves.GluonMidTile(4, 64, 128, 32), waves.GluonMidTile(2, 128, 128, 64)):
        with pytest.raises(ValueError, match="not a tile of the fp16 plan's menu"):
            g.GluonMidGemm(inputs, GEMM.make_output(inputs), 3, tile=off_menu)
    assert min(t.tiles(1500, 8200) for t in tiles) >= 2 * H200_SMS  # the GPU test's largest size walks each twice


def test_the_fp8_menu_holds_the_promoted_partials_beside_the_accumulators():
    # fp8: 64 weight columns a consumer, 3 or 2 of them; twice the accumulators (each K step's partial sums beside
    # them), 2 x tokens x 64 / 128 registers, at most 96 (3 x 64) or 160 (2 x 64); the same 128-byte stages (128 of
    # K) and bf16 slabs as at 16 bits, so the same deepest rings, worked by hand
    menu = {
        (3, 64, 64, 0): 6, (3, 64, 64, 16): 5, (3, 64, 64, 32): 5, (2, 64, 64, 0): 6, (2, 64, 64, 16): 6,
        (2, 64, 64, 32): 6, (2, 64, 128, 0): 6, (2, 64, 128, 16): 5, (2, 64, 128, 32): 5,
    }  # fmt: skip
    tiles = waves.gluon_mid_tiles(fp8=True)
    assert {(t.consumers, t.weight_cols, t.t0, t.t1): t.deepest() for t in tiles} == menu
    assert all(t.fp8 and t.block_k == 128 for t in tiles)
    # two pieces take the weight through registers (each K step's groups are retired to promote anyway), one does not
    assert {t.register_a for t in tiles if t.t1} == {True} and {t.register_a for t in tiles if not t.t1} == {False}
    # 156 x 8192: 64 weight tiles of 128 by 2 token tiles of 80 (64 + 16) make 128 tiles for 132 SMs, where 192-row
    # weight tiles make 43 x 2 = 86 (or 43 x 3 = 129 of 64 tokens, padding M to 192)
    plan = waves.gluon_mid_plan(156, 8192, H200_SMS, fp8=True)
    assert (plan.tile.consumers, plan.tile.weight_cols, plan.tile.t0, plan.tile.t1, plan.stages) == (2, 64, 64, 16, 6)
    # a 16-bit tile is not an fp8 one, and the other way round: refused before anything is built
    inputs = GEMM.make_inputs((64, 512, 128), 0, torch.device("cpu"), "fp8e4m3")
    for off_menu in (waves.GluonMidTile(3, 64, 64, 32), waves.GluonMidTile(2, 128, 64, 16, fp8=True)):
        with pytest.raises(ValueError, match="not a tile of the fp8e4m3 plan's menu"):
            g.GluonMidGemm(inputs, GEMM.make_output(inputs), 3, tile=off_menu)
    launch = g.GluonMidGemm(inputs, GEMM.make_output(inputs), 3)
    assert "accumulation promoted" in launch.config and launch.meta["FP8"], launch.config


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8e4m3"])
def test_every_tile_matches_fp64_on_odd_shapes(dtype):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon GEMM is built for sm_90")
    for tile in waves.gluon_mid_tiles(fp8=dtype == "fp8e4m3"):
        for stages in sorted({3, tile.deepest()}):
            # (1500, 8200, 261): 330 to 1,032 tiles, at least two per program on 132 SMs
            # fp8 also at K % 16 == 0, the operands read in place (the others go through padded copies)
            more = ((300, 4100, 1040),) if dtype == "fp8e4m3" else ()
            for size in ((333, 1000, 520), (77, 1004, 264), (1500, 8200, 261), *more):
                inputs = GEMM.make_inputs(size, sum(size) + stages, DEVICE, dtype)
                out = GEMM.make_output(inputs)
                launch = g.GluonMidGemm(inputs, out, stages, tile=tile)
                valid_twice(launch, out, inputs, dtype, (tile, stages, size))
