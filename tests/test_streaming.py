"""The vector problem's depth sweep on the CPU: tile schedules, residency pinning arithmetic, what the registry
declares, the effective-latency arithmetic and the depth plot, the grouped tables."""

import json

import pytest

from suite import registry
from suite.driver import depth_plot, report
from suite.ptx.stream import share_of_sm
from suite.streaming import Schedule, bytes_in_flight_per_sm

H200_SMEM_PER_SM, H200_RESERVED = 233472, 1024  # 228 KiB per SM, 1 KiB reserved per block (sm_90)


def test_schedules():
    persistent, runs = Schedule(blocks_per_sm=2), Schedule(tiles_per_block=2)
    assert (persistent.persistent, persistent.run, persistent.grid(10**6, 132)) == (True, 1, 264)
    assert (runs.persistent, runs.run, runs.grid(9, 132)) == (False, 2, 5)
    assert persistent.tiles_in_flight(8) == 8 and runs.tiles_in_flight(8) == 2 and runs.tiles_in_flight(1) == 1
    assert bytes_in_flight_per_sm(4, 8192, 2) == 65536 and bytes_in_flight_per_sm(4, 8192, None) is None
    for bad in ({}, {"blocks_per_sm": 1, "tiles_per_block": 2}, {"blocks_per_sm": 0}, {"tiles_per_block": 1.5}):
        with pytest.raises(ValueError):
            Schedule(**bad)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7])
def test_a_share_of_the_sm_pins_exactly_k_blocks(k):
    share = share_of_sm(k, H200_SMEM_PER_SM, H200_RESERVED, 0)
    per_block = share + H200_RESERVED
    assert k * per_block <= H200_SMEM_PER_SM < (k + 1) * per_block
    assert share % 128 == 0
    if k == 1:
        assert share == 227 * 1024  # the most one block may opt in to on an H100/H200


def test_registry_declares_the_depth_sweep():
    """The suite's own depth sweep (suite/variants.py: DEPTH_VARIANTS at each DEPTH_TILE_BYTES) and headline rows.
    Only the suite's registrations are pinned here: a plugin's vector variant, of whatever design (no shared memory,
    one stage, several stage counts in the main table), needs no edit."""
    from suite.streaming import BANDWIDTH_STAGES, DEPTH_TILE_BYTES
    from suite.variants import DEPTH_VARIANTS

    by_label = {v.label: v for v in registry.variants("vector")}
    groups = {}
    for tile in DEPTH_TILE_BYTES:
        vs = [by_label[f"{backend}:{name} {tile // 1024}KiB"] for _, backend, name, *_ in DEPTH_VARIANTS]
        assert sorted(v.backend for v in vs) == ["ptx", "ptx", "triton"], tile
        assert len({v.group for v in vs}) == 1 and vs[0].group, tile  # one table per tile size
        groups[vs[0].group] = vs
        assert len({v.stages for v in vs}) == 1 and vs[0].stages[0] == 1  # one stage axis per table, from 1 stage
        assert all(128 + s * tile <= 227 * 1024 for s in vs[0].stages)  # every ring fits an H200 block
    assert len(groups) == len(DEPTH_TILE_BYTES) == 5  # 2, 4, 8, 16, 32 KiB tiles
    assert max(s for vs in groups.values() for v in vs for s in v.stages) == 8
    # each backend's headline row: its best measured configuration at one depth, in the main table
    for label in ("triton:tile loop", "ptx:cp.async ring", "ptx:bulk ring"):
        assert by_label[label].stages == BANDWIDTH_STAGES and not by_label[label].group, label


def _row(**kw):
    row = {
        "problem": "vector",
        "shape": "268435456",
        "dtype": "fp32",
        "backend": "ptx",
        "variant": "cp.async ring 2KiB",
        "group": "depth sweep: 2 KiB tiles",
        "stages": 1,
        "baseline": False,
        "ceiling": False,
        "median_ms": 1.0,
        "iqr_ms": 0.0,
        "spread": 0.0,
        "samples": 10,
        "throughput": 1000.0,
        "unit": "GB/s",
        "ratio_to_ceiling": 0.25,
        "valid": True,
        "measured": True,
        "throttled": False,
        "note": "",
        "tile_bytes": 2048,
        "resident_blocks_per_sm": 1,
        "bytes_in_flight_per_sm": 2048,
        "occupancy": 1,
        "sass": "LDGSTS",
    }
    row.update(kw)
    return row


def _rows():
    rows = [
        _row(
            backend="torch",
            variant="copy_",
            group="",
            stages=None,
            ceiling=True,
            throughput=4000.0,
            ratio_to_ceiling=1.0,
            tile_bytes=None,
            resident_blocks_per_sm=None,
            bytes_in_flight_per_sm=None,
        )
    ]
    for s in (1, 2, 4, 8):
        rows.append(_row(stages=s, bytes_in_flight_per_sm=2048 * s, throughput=min(4000.0, 900.0 * s)))
        rows.append(
            _row(
                backend="triton",
                variant="tile loop 2KiB",
                stages=s,
                bytes_in_flight_per_sm=2048 * max(1, s - 1),
                throughput=min(3900.0, 850.0 * max(1, s - 1)),
            )
        )
    rows.append(
        _row(
            variant="cp.async ring",
            group="",
            stages=4,
            tile_bytes=32768,
            bytes_in_flight_per_sm=65536,
            throughput=4150.0,
        )
    )
    return rows


def test_effective_latency_is_littles_law():
    # 2 KiB of loads in flight on each of 132 SMs at 1000 GB/s read + written: 2 x 2048 x 132 / 1000 = 540.7 ns
    assert depth_plot.effective_latency_ns(_row(), 132) == pytest.approx(2 * 2048 * 132 / 1000.0)
    assert depth_plot.effective_latency_ns(_row(measured=False), 132) is None
    assert depth_plot.effective_latency_ns(_row(unit="TFLOP/s"), 132) is None
    assert depth_plot.effective_latency_ns(_row(), None) is None
    assert depth_plot.family(_row(variant="cp.async ring 16KiB")) == "ptx:cp.async ring"


def test_depth_plot_and_columns(tmp_path):
    rows = _rows()
    written = report.write(rows, {"gpu": "test", "sms": 132, "memory_latency_ns": 600.0}, tmp_path)
    assert (tmp_path / "vector-depth.png") in written
    assert (tmp_path / "vector-depth.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads((tmp_path / "results.json").read_text())["rows"]
    ring1 = next(r for r in data if r["variant"] == "cp.async ring 2KiB" and r["stages"] == 1)
    assert ring1["effective_latency_ns"] == pytest.approx(2 * 2048 * 132 / 900.0)
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    for column in ("tile_bytes", "resident_blocks_per_sm", "bytes_in_flight_per_sm", "effective_latency_ns"):
        assert column in header
    # without a measured latency (or without SMs) the plot is still drawn, without the Little's-law line
    import matplotlib.pyplot as plt

    fig = depth_plot.figure(rows, {"memory_latency_ns": "unavailable (no GPU)"}, "vector")
    assert fig is not None and fig.axes
    plt.close(fig)
    assert depth_plot.figure([_row(measured=False)], {}, "vector") is None


def test_groups_get_their_own_table_against_the_shape_ceiling():
    text = report.table(_rows())
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert titles == [
        "### vector 268435456 (fp32): GB/s, % of torch:copy_",
        "### vector 268435456 (fp32), depth sweep: 2 KiB tiles: GB/s, % of torch:copy_",
    ]
    depth_table = text.split(titles[1])[1]
    assert "ptx:cp.async ring 2KiB GB/s" in depth_table and "triton:tile loop 2KiB GB/s" in depth_table
    assert "16 KiB in flight/SM" in depth_table and "| 8 " in depth_table
