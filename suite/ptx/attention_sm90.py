"""Attention forward (suite.attention_problem) in the Hopper form of ``attention_sm90.cu``: TMA loads of Q once and of
128-key K / V tiles into a STAGES-deep mbarrier ring, a producer warpgroup (one thread issues the copies) and two
consumer warpgroups of 64 query rows each, S = Q K^T and O += P V on wgmma (P from registers), the online softmax in
registers (sm_90a only)."""

from __future__ import annotations

from pathlib import Path

from suite.attention_problem import HEAD_DIMS, cuda_launch_operands
from suite.checks import check_stages
from suite.kernel import Fault
from suite.ptx.attention import SANITIZE_EDGES, AttentionModule
from suite.ptx.gemm_tma import (
    ALIGN_SLACK,
    ARCH,
    BARRIER_BYTES,
    DEFINES,
    SMEM_PER_BLOCK,
    SWIZZLE_BYTES,
    _tensor_map,
    smem_define,
)

SOURCE = Path(__file__).with_name("attention_sm90.cu")
# At d = 128 a stage is 64 KiB: three and the Q tile fill the 227 KiB a block may take. Ping-pong holds one tile's
# stage while it reads the next, so its ring starts at two.
STAGES = (1, 2, 3)
PINGPONG_STAGES = (2, 3)
BLOCK_M, BLOCK_N, CONSUMERS = 128, 128, 2
THREADS = (1 + CONSUMERS) * 128  # a producer warpgroup and two consumer warpgroups
BOX_COLS = SWIZZLE_BYTES // 2  # 16-bit columns per TMA box row
# one 128-row query tile per head against 32 key tiles: every stage of a 2-deep ring refilled many times
FAULT_SIZE = (1, 2, 1, 128, 4096, 64, 0)


# The producer then laps the consumers: it re-arms a stage's full barrier whose phase is not done and its copies
# overwrite K / V tiles the consumers' wgmma may still read, as the GEMM's SKIP_EMPTY_WAIT, which memcheck reports.
SKIP_EMPTY_WAIT = Fault(
    "the producer's wait on the empty barrier removed (a K / V stage refilled while the consumers may still read it)",
    "PIPESUITE_FAULT_SKIP_EMPTY_WAIT",
    (2,),
    tool="memcheck",
    size=FAULT_SIZE,
)
# No fault for the consumers' wait on the full barrier (a stage read before its bytes land): wgmma reads shared memory
# through the async proxy, which no compute-sanitizer tool tracks, and under instrumentation the consumers trail the
# copy engine, so the build computes the right result and nothing is reported (docs/sanitizer.md). Nor for a stage
# released before the O += P V that reads it completes: a race between two async-proxy operations (wgmma's read,
# TMA's write).


def tile_bytes(rows: int, d: int) -> int:
    return rows * d * 2


def stage_bytes(d: int) -> int:
    """One ring stage: a K tile and a V tile of BLOCK_N rows."""
    return 2 * tile_bytes(BLOCK_N, d)


def smem_bytes(stages: int, d: int) -> int:
    """The Q tile, the ring, its barriers (full and empty per stage, and Q's), and the slack the kernel rounds its base
    up by (to the 1024-byte swizzle atom). The kernel static_asserts its own layout against this figure."""
    return tile_bytes(BLOCK_M, d) + stages * stage_bytes(d) + (2 * stages + 1) * BARRIER_BYTES + ALIGN_SLACK


def name_expression(stages: int, d: int, dtype: str, pingpong: bool = False) -> str:
    flag = lambda b: "true" if b else "false"  # noqa: E731
    return f"attention_sm90<{stages}, {d}, {flag(dtype == 'bf16')}, {flag(pingpong)}>"


def fits(stages: int, d: int) -> bool:
    return smem_bytes(stages, d) <= SMEM_PER_BLOCK


class AttentionWgmma(AttentionModule):
    """attention_sm90.cu compiled for each stage count, head_dim and dtype (sm_90a), in one of its two consumer
    mainloops: serial (``pingpong`` False) or FlashAttention-3's ping-pong of the two consumer warpgroups."""

    source = SOURCE
    block_m, block_n, threads = BLOCK_M, BLOCK_N, THREADS
    archs = (ARCH,)
    stages = STAGES
    # per instantiation: TMA loads (Q once, K and V per tile, a box per 64 columns), wgmma (S: D / 16 k-steps; P V:
    # 8 k-steps of 16 keys), mbarrier waits and arrives
    sass_requires = {"tma": 3, "wgmma": 64 // 16 + BLOCK_N // 16, "mbarrier": 1}
    # a long non-causal row of 9 key tiles, so the ring wraps
    sanitize_sizes = (SANITIZE_EDGES, (1, 2, 1, 70, 1100, 64, 0))
    faults = (SKIP_EMPTY_WAIT,)

    def __init__(self, pingpong: bool = False):
        self.pingpong = pingpong
        self.stages = PINGPONG_STAGES if pingpong else STAGES

    def name_expression(self, stages: int, d: int, dtype: str) -> str:
        return name_expression(stages, d, dtype, self.pingpong)

    def smem_bytes(self, stages: int, d: int) -> int:
        return smem_bytes(stages, d)

    def stage_bytes_for(self, d: int) -> int:
        return stage_bytes(d)

    def defines(self) -> tuple[str, ...]:
        figures = [((s, d, 0, 0), smem_bytes(s, d)) for s in STAGES for d in HEAD_DIMS]
        return DEFINES + (smem_define(figures),) + super().defines()

    def build_arch(self, arch: str | None) -> str | None:
        """Always sm_90a: asked for sm_90 (the GPU's own arch, or the driver's CPU arch), build its 'a' target."""
        return ARCH if arch in (None, "sm_90") else arch

    def build(self, arch: str | None = None):
        return super().build(self.build_arch(arch))

    def config(self, d: int = 128) -> str:
        return (
            f"{BLOCK_M} query rows x {BLOCK_N}-key tiles, d={d}, 1 producer warpgroup (TMA) + 2 consumer warpgroups "
            "of 64 rows (wgmma, P from registers)" + (", ping-pong" if self.pingpong else ", no ping-pong")
        )

    def launch(self, inputs, out, stages):
        check_stages(stages, self.stages)
        # the problem's rules, 32-bit TMA row coordinates, b * hq within the grid's y (and the maps' outermost) extent
        ops = cuda_launch_operands(inputs, out, self.dtypes, BLOCK_M)
        # 3-D maps (head, row, column): the TMA unit zero-fills rows past a head's own sq or skv; boxes of 64 columns
        # (one 128-byte swizzled row each), BLOCK_M or BLOCK_N rows of one head
        d = ops.d
        tmap_q = _tensor_map(ops.q.view(ops.b * ops.hq, ops.sq, d), (1, BLOCK_M, BOX_COLS))
        tmap_k = _tensor_map(ops.k.view(ops.b * ops.hkv, ops.skv, d), (1, BLOCK_N, BOX_COLS))
        tmap_v = _tensor_map(ops.v.view(ops.b * ops.hkv, ops.skv, d), (1, BLOCK_N, BOX_COLS))
        return self._launchable(ops, stages, (tmap_q, tmap_k, tmap_v, out.data_ptr(), *ops.kernel_scalars()))


KERNEL = AttentionWgmma()
KERNEL_PINGPONG = AttentionWgmma(pingpong=True)
