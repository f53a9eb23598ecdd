"""The Hopper GEMM kernels' work units (suite/include/sm90_work_units.cuh), the real header compiled for the host by
the system C++ compiler and walked for every block of many schedules: each block's first_unit / next_unit walk is the
documented deal (the model below), every (tile, K tile) iteration belongs to exactly one unit, and a shared tile's
units are its contributors in K order; a stream-K partial unit has a workspace slot of its own, inside the
launcher's workspace."""

import shutil
import subprocess

import pytest

from suite.nvrtc.loader import INCLUDE_DIR

CXX = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")

# Reads "kind tiles k_tiles splits grid" lines and prints each block's units in walk order, one per line: "case
# block tile k_begin k_tiles contributors index slots...". Kinds: 0 SplitTiles persistent; 1 SplitTiles one unit per
# block (its grid: one block per unit); 2 StreamK; 3 SplitTiles persistent over whole tiles (the data-parallel walk);
# 4 SplitTail.
HARNESS = r"""
#define PIPESUITE_HD inline
#include "sm90_work_units.cuh"
#include <cstdio>
int main() {
    int kind, tiles, k, splits, grid, n = 0;
    for (; std::scanf("%d %d %d %d %d", &kind, &tiles, &k, &splits, &grid) == 5; ++n) {
        for (int b = 0; b < grid; ++b) {
            auto walk = [&](auto sched) {
                for (WorkUnit u = sched.first_unit(); u.valid(); u = sched.next_unit(u)) {
                    std::printf("%d %d %d %d %d %d %d", n, b, u.tile, u.k_begin, u.k_tiles, u.contributors, u.index);
                    for (int j = 0; j < u.contributors; ++j) std::printf(" %d", u.slot(j));
                    std::printf("\n");
                }
            };
            if (kind == 0) walk(SplitTiles<true>{tiles, k, splits, b, grid});
            else if (kind == 1) walk(SplitTiles<false>{tiles, k, splits, b, grid});
            else if (kind == 3) walk(SplitTiles<true, false>{tiles, k, 1, b, grid});
            else if (kind == 4) walk(SplitTail(tiles, k, splits, b, grid));
            else walk(StreamK(tiles, k, b, grid));
        }
    }
    return n ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    if CXX is None:
        pytest.skip("no C++ compiler on PATH (c++, g++ or clang++) to build the host harness")
    tmp = tmp_path_factory.mktemp("tile_scheduler")
    (tmp / "walk.cpp").write_text(HARNESS)
    exe = tmp / "walk"
    cmd = [CXX, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{INCLUDE_DIR}", str(tmp / "walk.cpp"), "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)

    def run(cases):
        """Per case: {block: [(tile, k_begin, k_tiles, contributors, index, slots), ...]}"""
        stdin = "".join(f"{kind} {tiles} {k} {splits} {grid}\n" for kind, tiles, k, splits, grid in cases)
        out = subprocess.run([str(exe)], input=stdin, check=True, capture_output=True, text=True).stdout
        walks = [{b: [] for b in range(c[4])} for c in cases]
        for line in out.splitlines():
            n, b, tile, k_begin, k_tiles, contributors, index, *slots = map(int, line.split())
            walks[n][b].append((tile, k_begin, k_tiles, contributors, index, tuple(slots)))
        return walks

    return run


def split_tiles_model(tiles, k_tiles, splits, grid, persistent):
    """Units tiles x splits, split-major, block b taking b (then b + grid, ... when persistent); split s of K an equal
    share, the first k_tiles % splits one more."""
    base, extra = divmod(k_tiles, splits)
    walks = {}
    for b in range(grid):
        units = []
        for u in range(b, tiles * splits, grid) if persistent else [b] if b < tiles * splits else []:
            tile, split = u % tiles, u // tiles
            k_begin = split * base + min(split, extra)
            slots = (0,) * splits  # a split's partial goes to the kernel's M x N slice `index`: no slot
            units.append((tile, k_begin, base + (split < extra), splits, split, slots))
        walks[b] = units
    return walks


def stream_k_model(tiles, k_tiles, grid):
    """Whole tiles round-robin while at least two waves remain, then the rest's iterations split evenly, a unit per
    tile a block's range touches; a shared tile's contributors first..last write slots 2c (their first unit) or
    2 first + 1 (the first contributor's range started in an earlier tile: this is its last unit)."""
    dp = (tiles // grid - 1) * grid if tiles >= 2 * grid else 0
    iters = (tiles - dp) * k_tiles

    def start(c):
        return c * iters // grid

    def block_of(i):
        return ((i + 1) * grid - 1) // iters

    walks = {}
    for c in range(grid):
        units = [(t, 0, k_tiles, 1, 0, (0,)) for t in range(c, dp, grid)]
        it, end = start(c), start(c + 1)
        while it < end:
            tile, k_begin = divmod(it, k_tiles)
            n = min(k_tiles - k_begin, end - it)
            first, last = block_of(tile * k_tiles), block_of(tile * k_tiles + k_tiles - 1)
            adjust = 1 if start(first) < tile * k_tiles else 0
            slots = tuple(2 * first + 2 * j + (adjust if j == 0 else 0) for j in range(last - first + 1))
            units.append((dp + tile, k_begin, n, last - first + 1, c - first, slots))
            it += n
        walks[c] = units
    return walks


def split_tail_model(tiles, k_tiles, splits, grid):
    """Whole tiles round-robin for tiles // grid whole waves; then the R x splits tail units (R = tiles % grid)
    round-robin too, block c taking units c, c + grid, ..., unit v being share v // R of tail tile v % R, K cut as
    split-K cuts it; tail tile t's contributors write t x splits + j."""
    dp = tiles // grid * grid
    tail = tiles - dp
    base, extra = divmod(k_tiles, splits)
    walks = {}
    for c in range(grid):
        units = [(t, 0, k_tiles, 1, 0, (0,)) for t in range(c, dp, grid)]
        for v in range(c, tail * splits, grid):
            t, split = v % tail, v // tail
            slots = tuple(t * splits + j for j in range(splits))
            units.append((dp + t, split * base + min(split, extra), base + (split < extra), splits, split, slots))
        walks[c] = units
    return walks


def check_deal(walks, tiles, k_tiles, slot_limit=None):
    """Every (tile, K tile) iteration in exactly one unit; a tile's units are its contributors, in K order. With
    ``slot_limit`` (stream-K): every partial unit of the grid writes a slot of its own below it, and each names its
    tile's contributors' slots alike (whole tiles need none)."""
    covered, by_tile = {}, {}
    for b, units in walks.items():
        for tile, k_begin, n, contributors, index, slots in units:
            assert 0 <= tile < tiles and 0 <= k_begin and k_begin + n <= k_tiles, (b, tile)
            for k in range(k_begin, k_begin + n):
                assert (tile, k) not in covered, (b, tile, k)
                covered[tile, k] = b
            by_tile.setdefault(tile, []).append((k_begin, index, contributors, slots))
    assert len(covered) == tiles * k_tiles
    written = []  # the slot each partial unit writes, over the whole grid
    for tile, units in by_tile.items():
        units.sort()
        assert [u[1] for u in units] == list(range(len(units))), tile  # contributors in K order, index 0 first
        assert {u[2] for u in units} == {len(units)}, tile
        if slot_limit is not None and len(units) > 1:
            slots = units[0][3]
            assert all(u[3] == slots for u in units), tile  # every contributor reads the same slots
            assert all(0 <= s < slot_limit for s in slots), (tile, slots)
            written += [slots[index] for _, index, _, _ in units]
    assert len(written) == len(set(written)), "two partial units write one slot"


SHAPES = [(tiles, k) for tiles in (1, 3, 7, 64, 131, 133, 264, 269, 1000) for k in (1, 2, 7, 33, 224)]


@pytest.mark.parametrize("grid", [4, 64, 132])
def test_stream_k_walks_the_documented_deal(walk, grid):
    # the launcher's grid: at most one block per iteration (every block's range then holds at least one)
    cases = [(2, tiles, k, 1, min(grid, tiles * k)) for tiles, k in SHAPES]
    for (_, tiles, k, _, blocks), got in zip(cases, walk(cases), strict=True):
        check_deal(got, tiles, k, 2 * blocks)  # what the fix-up needs, first; then the deal as documented
        assert got == stream_k_model(tiles, k, blocks), (tiles, k, blocks)


def test_split_tail_walks_the_documented_deal(walk):
    """The launcher's plans (suite.ptx.gemm_tma.split_tail_plan) and forced split counts: every iteration once, a
    tail tile's contributors in K order, each partial in a slot of its own within the launcher's tail x splits."""
    from suite.ptx.gemm_tma import split_tail_plan

    cases = []
    for tiles, k in SHAPES:
        for slots in (4, 64, 132):
            for rounds in (False, True):
                grid, splits = split_tail_plan(tiles, k, slots, rounds=rounds)
                cases.append((4, tiles, k, splits, grid))
            # forced counts (tests, probes): shares of one K tile or none, shares past K, tails in several rounds
            for forced in (2, 3, k + 1):
                if tiles % slots:
                    grid, splits = split_tail_plan(tiles, k, slots, forced)  # the grid the launcher takes
                    cases.append((4, tiles, k, splits, grid))
    assert any(c[3] > 1 for c in cases) and any(c[3] == 1 for c in cases)
    assert any((c[1] % c[4]) * c[3] > c[4] for c in cases)  # several units of the tail on some block
    for (_, tiles, k, splits, grid), got in zip(cases, walk(cases), strict=True):
        tail = tiles % grid
        check_deal(got, tiles, k, max(1, tail * splits))
        assert got == split_tail_model(tiles, k, splits, grid), (tiles, k, splits, grid)


def test_split_tail_plan_splits_only_a_thin_last_wave():
    from suite.ptx.gemm_tma import split_tail_plan

    assert split_tail_plan(1462, 384, 132) == (132, 13)  # 11 waves and 10 tiles: 13 shares of K each (130 blocks)
    assert split_tail_plan(144, 172, 132) == (132, 11)  # one wave and 12 tiles: 11 shares (sqrt(172 / 1.5) = 10.7)
    assert split_tail_plan(32, 128, 132) == (128, 4)  # fewer tiles than SMs: one wave of 4 shares each, no idle block
    assert split_tail_plan(200, 172, 132) == (132, 1)  # 68 tiles left: no room for two shares each
    assert split_tail_plan(264, 172, 132) == (132, 1)  # whole waves: nothing to split
    assert split_tail_plan(10, 6, 132) == (10, 1)  # K too short to split (fewer than 2 x 4 K tiles)
    assert split_tail_plan(1, 1, 132, splits=3) == (3, 3)  # forced (tests): 3 shares of one K tile, two empty
    assert split_tail_plan(100, 64, 132, splits=2) == (132, 2)  # forced past the slots: 200 shares in two rounds
    with pytest.raises(ValueError, match="one share of K or more"):
        split_tail_plan(100, 64, 132, splits=0)
    for tiles, k, slots in ((1462, 384, 132), (144, 172, 132), (32, 128, 132), (7, 40, 4)):
        grid, splits = split_tail_plan(tiles, k, slots)
        assert grid <= slots and (tiles % grid) * splits <= grid and splits * 4 <= max(k, 4)


def test_split_tail_in_rounds_only_where_two_shares_do_not_fit_and_it_pays():
    """The rungs' plan (rounds): a last wave more than half full is split in shares dealt in several rounds where the
    model saves a fifth of a tile or more; a thinner one keeps its one round of shares, as without rounds."""
    from suite.ptx.gemm_tma import split_tail_plan
    from suite.waves import TAIL_FIXUP_K_TILES, tail_share_rounds

    assert split_tail_plan(344, 48, 132, rounds=True) == (132, 3)  # 80 tiles left: 240 shares, two rounds of a third
    assert split_tail_plan(344, 48, 132) == (132, 1)
    assert split_tail_plan(200, 172, 132, rounds=True) == (132, 7)  # 68 left: 476 shares in 4 rounds of a seventh
    assert split_tail_plan(3552, 172, 132, rounds=True) == (132, 1)  # 120 left: any split saves too little
    assert split_tail_plan(80, 48, 132, rounds=True) == (80, 1)  # fewer tiles than slots: one round (split-K's regime)
    for tiles, k in ((1462, 384), (144, 172), (32, 128), (264, 172), (10, 6)):  # one round, or none: as before
        assert split_tail_plan(tiles, k, 132, rounds=True) == split_tail_plan(tiles, k, 132)
    # the rungs' sanitizer sizes hold one whose shares take two rounds on 132 SMs (memcheck and racecheck see it)
    from suite.ptx.gemm_tma import KERNELS

    for name in ("128x256 split-tail", "128x192 split-tail"):
        config = KERNELS[name].gemm_config
        plans = [
            (
                tiles := -(-m // config.block_m) * -(-n // config.block_n),
                *split_tail_plan(tiles, -(-k // 64), 132, rounds=True),
            )
            for m, n, k in KERNELS[name].sanitize_sizes
        ]
        assert any((tiles % grid) * splits > grid for tiles, grid, splits in plans), (name, plans)
    for tiles in range(133, 264):
        _, splits = split_tail_plan(tiles, 48, 132, rounds=True)
        tail = tiles - 132
        if splits > 1:
            saved = 48 - (tail_share_rounds(tail, 132, splits) * 48 + TAIL_FIXUP_K_TILES * (splits - 1))
            assert tail * 2 > 132 or splits <= 132 // tail
            assert saved >= 0.2 * 48, (tiles, splits)


def test_split_tiles_walks_the_documented_deal(walk):
    cases = []
    for tiles, k in SHAPES:
        for splits in (1, 2, 5, 16):
            if splits > k:  # the launchers never split finer than the K tiles
                continue
            cases.append((0, tiles, k, splits, 132))  # persistent (the decode kernel; data-parallel tiles)
            cases.append((1, tiles, k, splits, tiles * splits))  # one unit per block (split-K's grid)
        cases.append((3, tiles, k, 1, 132))  # whole tiles, persistent
        cases.append((3, tiles, k, 1, tiles))  # whole tiles, a block each
    for (kind, tiles, k, splits, grid), got in zip(cases, walk(cases), strict=True):
        assert got == split_tiles_model(tiles, k, splits, grid, persistent=kind != 1), (kind, tiles, k, splits)
        check_deal(got, tiles, k)


def test_a_persistent_walk_is_over_for_a_block_past_the_units(walk):
    """A persistent grid with more blocks than units: the extra blocks' walks are empty, not a unit past the end.
    (A one-unit-per-block grid is launched with exactly one block per unit; the kernel's walk calls it once.)"""
    (split,) = walk([(0, 3, 4, 2, 8)])
    assert [b for b, units in split.items() if units] == list(range(6))
