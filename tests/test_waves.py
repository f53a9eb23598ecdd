"""The wave rule of the persistent GEMM grids (suite.waves): the fewest programs that take as many rounds of tiles as
every slot would, where that keeps most slots busy; and on a GPU, every persistent launcher launching that grid."""

import pytest
import torch

from suite.waves import BALANCED_MIN_SHARE, grid_note, persistent_grid


def rounds(tiles: int, programs: int) -> int:
    return -(-tiles // programs)


def test_whole_waves_on_fewer_programs_where_the_last_wave_is_ragged():
    assert persistent_grid(2048, 132) == 128  # 128 x 256 tiles at 8192^2: 16 rounds either way
    assert persistent_grid(4096, 132) == 128  # 128 x 128 tiles at 8192^2: 32 rounds
    assert persistent_grid(3648, 132) == 131  # 128 x 144 tiles at 8192^2: 28 rounds
    assert persistent_grid(512, 132) == 128  # 128 x 256 at 4096^2: 4 rounds
    assert persistent_grid(1320, 132) == 132  # whole waves already
    assert persistent_grid(100, 132) == 100  # fewer tiles than slots: one program each
    assert persistent_grid(1, 132) == 1


def test_the_grid_stays_whole_where_balancing_would_idle_many_slots():
    assert persistent_grid(133, 132) == 132  # balanced: 67 programs, half the SMs' bandwidth
    assert persistent_grid(928, 132) == 132  # 128 x 144 at 4096^2: 116 programs would be 88% of the slots
    assert persistent_grid(270, 264) == 264  # two resident blocks per SM


def test_the_rule_never_adds_a_round_and_balances_only_to_the_fewest_programs():
    for slots in (4, 114, 132, 264):
        for tiles in range(1, 12 * slots):
            g = persistent_grid(tiles, slots)
            assert 1 <= g <= min(tiles, slots)
            assert rounds(tiles, g) == rounds(tiles, min(tiles, slots)), (tiles, slots, g)
            if g < min(tiles, slots):  # balanced: one program fewer would need one more round
                assert g >= BALANCED_MIN_SHARE * slots
                assert rounds(tiles, g - 1) > rounds(tiles, g)


def test_a_row_says_where_the_rule_idled_slots():
    assert grid_note(2048, 132, 128) == ", 128 programs on 132 slots (whole waves: 16 rounds of 2048 tiles)"
    assert grid_note(1320, 132, 132) == grid_note(100, 132, 100) == ""


@pytest.mark.parametrize("tiles, slots", [(0, 132), (10, 0), (-1, 4)])
def test_no_tiles_or_no_slots_is_refused(tiles, slots):
    with pytest.raises(ValueError, match="at least one tile and one slot"):
        persistent_grid(tiles, slots)


PERSISTENT = (
    "ptx:128x256x64 ws 2wg persistent tma-store tma+wgmma",
    "ptx:128x256x64 ws 2wg persistent tma+wgmma",
    "triton:128x256x64 desc persistent",
    "triton:128x256x64 desc persistent host",
    "triton:128x256x64 gluon ws persistent",
)


@pytest.mark.gpu
@pytest.mark.parametrize("label", PERSISTENT)
def test_persistent_launchers_take_the_rule_s_grid_and_stay_correct(label):
    """2048 tiles of 128 x 256 (4096 x 16384, a short K of 72: a partial K tile), fp16: on 132 SMs 128 programs of
    16 tiles each; the result against the fp64 reference, on a poisoned C."""
    from suite.problems import GEMM
    from suite.registry import variants

    variant = {v.label: v for v in variants("gemm")}[label]
    size = (4096, 16384, 72)
    inputs = GEMM.make_inputs(size, 7, torch.device("cuda"), "fp16")
    out = GEMM.make_output(inputs)
    launch = variant.factory(inputs, out, variant.stages[len(variant.stages) // 2])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert launch.grid == persistent_grid(2048, sms), (label, launch.grid)
    if launch.grid < min(2048, sms):
        assert f"{launch.grid} programs on {sms} slots" in launch.info.config, launch.info.config
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    check = GEMM.check(out, GEMM.reference(inputs), "fp16")
    assert check.valid, (label, check.message)
