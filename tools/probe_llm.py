"""Probes behind the LLM-shape GEMM rows (issue 18), on a GPU; not part of the suite's results. Each configuration is
checked against torch (fp32 product) before it is timed; times are do_bench medians with the L2 flushed, of a CUDA
graph's replay (as the suite times its rows, suite.driver.bench.Launched) unless said otherwise, against cuBLAS timed
the same way in the same process.

  launch    the Triton split-K, stream-K and decode launchers at the LLM targets: host time per call, the eager
            call's GPU time and the graph's (what made their eager rows launch-bound)
  split-k   the PTX split-K kernels at the long-K shapes at the rule's split count and forced ones, with an
            unregistered 128 x 256 split-K instantiation beside the registered tiles, each also built with its
            blocks in tile-major order (GEMM_TMA_SPLIT_MAJOR=0: a tile's splits neighbour; the registered order,
            split-major, has the blocks that read one K range neighbour)
  ptx-decode  the PTX swapped decode kernel beside the 64 x 128 split-K and the Triton decode kernel, at their
            rules and with its tile width, split count and stage size forced
  decode    the Triton decode tiles (weight rows, stage size, depth) and PTX 64 x 128 split counts at M = 16 and 64,
            and the PTX 64 x 128 tile on stream-K (every SM, the fix-up in the kernel)
  fp8       cuBLAS fp8 with promoted and with fast accumulation, beside the best PTX and Gluon fp8 rows, at 8192^3 and
            4096^3: where fp8's gap to cuBLAS is; and the PTX kernel built without promotion, promoted in quarters
            of N (GEMM_TMA_FP8_QUARTERS; the Gluon kernel too), with A from registers (GEMM_TMA_FP8_A_REGS), its
            fast accumulation in n128 halves (GEMM_TMA_FP8_PROBE_HALVES), the 128 x 128 rung with one partial
            (GEMM_TMA_FP8_OVERLAP=0), clusters of 2 CTAs sharing B (Config.cluster), other persistent grids than
            the wave rule's, the Gluon kernel on stream-K (GluonGemm(stream_k=True)), the halves with only the adds
            between a wait and the next issue (GEMM_TMA_FP8_EARLY_WAIT; GluonGemm(early_wait=False): the Gluon
            kernel without it), and (--pipelined)
            with the promotion half-overlapped (GEMM_TMA_FP8_PIPELINED) on 128 x 192 tiles; --only LABEL... keeps the
            configurations whose label holds one; --once calls each once, timing nothing (for ncu
            --profile-from-start off), and prints their labels in launch order
  triton-split  the Triton split-K on 128 x 128 tiles at 1-3 splits beside the rule's 128 x 256 tiles, at M = 256
  floor     a one-element add and copy_ of a weight's bytes, timed as the decode rows are (read flush, graph): what
            fixed costs leave of the roofline at Llama-3 8B's small weights
  rotate    the decode rows as a model runs them: distinct operand sets back to back in one CUDA graph (no flush,
            no event pair per call), against the roofline: what the fixed cost of the suite's per-call timing hides
  m256      M = 256 against large weights (70B's QKV, the set's weakest cell): cuBLAS, the registered split-K,
            stream-K and persistent rows at their best depths of the full run, and split counts the rules do not
            choose (the PTX 128 x 128 split-K at 2 and 3, an unregistered 128 x 256 split-K at 2-4, the Triton
            row's decomposition), and both PTX stream-K tiles with a fixed finisher (GEMM_TMA_SK_FIXED_FINISHER);
            the persistent 128 x 192 tile (108 tiles at 70B's QKV) was first timed here and is registered;
            --once calls cuBLAS and the registered rows once each, for ncu
  uniform   the PTX kernels of gemm_tma.cu at f5ac21a (tools/_gemm_tma_head.cu) against the working tree's, and
            the tree's with its warpgroup broadcast (GEMM_TMA_WG_BROADCAST) and descriptor adds (GEMM_TMA_DESC_PLUS)
            apart, at the square fp8 and fp16 shapes and decode shapes (--fp8-only: fp8 alone)
  epilogue  the 128 x 256 TMA-store rung in every dtype at the square shapes: as registered, its tile rows in groups
            of 8 and 32, its epilogue skipped (GEMM_TMA_PROBE_NO_EPILOGUE), C stored directly, C staged by 4-byte
            stores instead of stmatrix (also on fp8's pairs rungs) (--fp8-only, --only)
  skew      the same rung as registered, with its second consumer warpgroup started 1 or 2 K tiles after the
            first (GEMM_TMA_SKEW), and instrumented (GEMM_TMA_PROBE_CLOCKS: cycles per tile in mainloop and
            epilogue, SM clock, the warpgroups' lag at the end) (--fp8-only, --only)
  flush     cuBLAS and the best decode rows of each backend with the L2 flushed by a write (do_bench's zero_ of
            256 MB, which leaves up to the L2's size of dirty lines that the kernel's own reads then evict to DRAM),
            by a read (a sum over the same buffer: clean lines), and not at all

Run from the repository root:
  PYTHONPATH=. python3 tools/probe_llm.py {launch,split-k,decode,flush,fp8,triton-split,floor,rotate}
      [--shape MxNxK ...]
      [--flush read]

--flush read times every configuration (and cuBLAS) after a read of 256 MB instead of do_bench's write."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time

import torch
from triton.testing import do_bench

from suite.driver.bench import capture_graph
from suite.problems import _gemm_inputs, _gemm_output

TARGETS = ((512, 512, 65536), (1024, 1024, 32768), (256, 8192, 8192), (64, 8192, 8192), (16, 8192, 8192))
LONG_K = ((512, 512, 65536), (1024, 1024, 32768), (256, 8192, 8192), (512, 1024, 65536))
DECODE = ((16, 8192, 8192), (64, 8192, 8192))


FLUSH = {"mode": "write"}  # --flush: "write" is do_bench's own loop; "read" is the loop below
PIPELINED = {"on": False}  # --pipelined: the fp8 probe times the GEMM_TMA_FP8_PIPELINED builds too
ONLY = {"labels": ()}  # --only: the fp8 probe's configurations whose label holds one of these
ONCE = {"on": False}  # --once: the fp8 probe calls each configuration once, for ncu (fp8_once)
FP16_TOO = {"on": True}  # --fp8-only: the uniform and epilogue probes time their fp8 rows only


def median_us(fn, rep_ms: float = 150.0) -> float:
    if FLUSH["mode"] == "write":
        return statistics.median(do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")) * 1e3
    return read_flushed_us(fn)


@functools.cache
def _flush_buffer() -> torch.Tensor:
    return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")  # do_bench's buffer size


def read_flushed_us(fn) -> float:
    """``event_bursts`` with the L2 emptied by a read of 256 MB before each call (the L2 left clean)."""
    return event_bursts(fn, _flush_buffer().sum)


def event_bursts(call, before, bursts: int = 6, calls: int = 40) -> float:
    """The median, in µs, of ``bursts`` x ``calls`` event-timed calls, ``before()`` outside the timed region of each,
    the first call of a burst dropped and the bursts rested (below the power cap, as the suite's burst timer)."""
    samples = []
    for _ in range(bursts):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for start, end in zip(starts, ends):
            before()
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        samples += [a.elapsed_time(b) for a, b in zip(starts, ends)][1:]
        time.sleep(0.05)
    return statistics.median(samples) * 1e3


def replayed(fn):
    """``fn`` called once, then captured into a CUDA graph: its replay."""
    fn()
    torch.cuda.synchronize()
    return capture_graph(fn).replay


def host_us(fn, calls: int = 200) -> float:
    seconds = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(seconds) * 1e6


class Shape:
    """One shape's fp16 operands, its fp32 reference and its cuBLAS time (graph-replayed)."""

    def __init__(self, size):
        self.size = size
        self.inputs = _gemm_inputs(size, 1, torch.device("cuda"), "fp16")
        self.ref = self.inputs[0].float() @ self.inputs[1].float()
        c = _gemm_output(self.inputs)
        self.cublas_us = median_us(replayed(lambda: torch.matmul(self.inputs[0], self.inputs[1], out=c)))
        print(f"{'x'.join(map(str, size))}: cuBLAS {self.cublas_us:.1f} us", flush=True)

    def checked(self, make):
        """A launcher from ``make(c)``, called once on a NaN-poisoned C and compared with the reference."""
        c = _gemm_output(self.inputs)
        launcher = make(c)
        c.fill_(float("nan"))
        launcher()
        torch.cuda.synchronize()
        err = (c.float() - self.ref).abs().max().item()
        if not err < 0.05:
            raise ValueError(f"wrong result: max abs error {err}")
        return launcher

    def report(self, label: str, make, detail=lambda fn: "") -> None:
        """One configuration: ``make(c)`` checked, its graph replay timed and printed against cuBLAS with
        ``detail(launcher)``; a configuration that fails is printed with its error and the probe goes on. With
        --only, a configuration whose label holds none of its words is skipped."""
        if ONLY["labels"] and not any(w in label for w in ONLY["labels"]):
            return
        try:
            fn = self.checked(make)
            t = median_us(replayed(fn))
            print(f"{label}{detail(fn)}: {t:7.1f} us ({self.cublas_us / t:.3f})", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{label}: {type(e).__name__}: {str(e)[:120]}", flush=True)


def launch(shapes) -> None:
    from suite.triton.gemm_decode import DecodeGemm
    from suite.triton.gemm_splitk import SplitKGemm
    from suite.triton.gemm_streamk import StreamKGemm

    for size in shapes:
        shape = Shape(size)
        for cls in (SplitKGemm, StreamKGemm, DecodeGemm):
            for stages in (3, 4):
                name = f"  {cls.__name__:12s} {stages} st"
                try:
                    fn = shape.checked(lambda c, cls=cls, stages=stages: cls(shape.inputs, c, stages))
                    eager, graph, host = median_us(fn), median_us(replayed(fn)), host_us(fn)
                    print(
                        f"{name}: host {host:5.1f} us/call | eager {eager:6.1f} us ({shape.cublas_us / eager:.3f})"
                        f" | graph {graph:6.1f} us ({shape.cublas_us / graph:.3f})",
                        flush=True,
                    )
                except Exception as e:  # noqa: BLE001 - a configuration that fails is listed, the probe goes on
                    print(f"{name}: {type(e).__name__}: {str(e)[:120]}", flush=True)


def split_k(shapes) -> None:
    from suite.ptx import gemm_tma as g

    wide = g.Config(256, 2, False, False, (3, 4), schedule="split-k", dtypes=("fp16",))  # not registered
    tiles = {
        "128x128": (g.CONFIGS["128x128 split-k"], g.KERNELS["128x128 split-k"]),
        "64x128": (g.CONFIGS["64x128 split-k"], g.KERNELS["64x128 split-k"]),
        "128x256": (wide, g.TmaGemm(wide)),
    }
    # the same kernels with a tile's splits next to each other (GEMM_TMA_SPLIT_MAJOR=0; the registered order has the
    # blocks that read one K range of A and B next to each other)
    for name in ("128x128", "128x256"):
        config, module = tiles[name]
        tiles[f"{name} tile-major"] = (config, module.with_defines("GEMM_TMA_SPLIT_MAJOR=0"))
    for size in shapes:
        shape = Shape(size)
        for name, (config, module) in tiles.items():
            for stages in config.stages:
                for splits in (None, 4, 8, 16, 32):  # None: the rule's count (marked *)
                    shape.report(
                        f"  {name:20s} {stages} st, splits {splits or 'by rule'}",
                        lambda c, config=config, module=module, stages=stages, splits=splits: g.Gemm(
                            shape.inputs, c, config, stages, kernel=module, splits=splits
                        ),
                        lambda fn: f" ({fn.splits} splits, {fn.grid} blocks)",
                    )


def decode(shapes) -> None:
    from suite.ptx import gemm_tma as g
    from suite.triton import gemm_decode as gd

    gd.DecodeGemm.depths = (2, 3, 4, 5, 6, 7)  # deeper rings than the registered sweep
    for size in shapes:
        shape = Shape(size)
        for block_w in (64, 128):
            for stage_kib in (32, 64):
                gd.BLOCK_WS, gd.STAGE_LIMIT = (block_w,), stage_kib * 1024  # the plan's choices, forced
                for stages in (3, 4, 6):
                    shape.report(
                        f"  triton {block_w} weight rows, stages <= {stage_kib} KiB, {stages} st",
                        lambda c, stages=stages: gd.DecodeGemm(shape.inputs, c, stages),
                        lambda fn: (
                            f" (BLOCK_K {fn.plan.block_k}, {fn.plan.splits} split(s), {fn.plan.programs} programs)"
                        ),
                    )
        config, module = g.CONFIGS["64x128 split-k"], g.KERNELS["64x128 split-k"]
        registered = g.SHORT_A_BOX, g.L2_PROMOTION
        # M < 64: A's TMA box of M rows rounded up to 8 (the registered launch) and of the tile's 64 rows (the copy
        # engine zero-filling the rows past M)
        for short in (True, False) if size[0] < config.block_m else (True,):
            g.SHORT_A_BOX = short
            box = "short A box" if short else "64-row A box"
            for promotion in ("L2_128B", "L2_256B"):  # the registered maps' L2 promotion, and the one before
                g.L2_PROMOTION = promotion
                for stages in config.stages:
                    for splits in (1, 2, 3, 4):
                        shape.report(
                            f"  ptx 64x128 {stages} st, {splits} split(s), {box}, {promotion}",
                            lambda c, stages=stages, splits=splits: g.Gemm(
                                shape.inputs, c, config, stages, kernel=module, splits=splits
                            ),
                        )
        g.SHORT_A_BOX, g.L2_PROMOTION = registered
        # the same 64 x 128 tile on stream-K: every SM streams (the split-K keeps to STREAMING_SM_SHARE of them) and
        # the partials are fixed up in the kernel, no second pass (at 16 x 4096 x 14336 the split-K's second pass is
        # 2.4 us of 35)
        streamed = dataclasses.replace(config, schedule="stream-k", persistent=True)
        for fix_up, module in (
            ("", g.TmaGemm(streamed)),
            (" fixed-finisher", g.TmaGemm(streamed).with_defines("GEMM_TMA_SK_FIXED_FINISHER=1")),
        ):
            for stages in streamed.stages:
                shape.report(
                    f"  ptx 64x128 stream-k{fix_up} {stages} st",
                    lambda c, stages=stages, module=module: g.Gemm(shape.inputs, c, streamed, stages, kernel=module),
                    lambda fn: f" ({fn.grid} blocks)",
                )


def ptx_decode(shapes) -> None:
    """The PTX swapped decode kernel (suite.ptx.gemm_decode) beside the registered 64 x 128 split-K and the Triton
    decode kernel, each at its rule's plan, and the PTX decode with its choices forced: 1 or 2 consumer warpgroups,
    1-4 splits, and smaller stages in deeper rings (a 24 KiB stage limit, 4-8 deep). Each line also gives the bytes
    the shape must move (A, B, C) over the time."""
    from suite.ptx import gemm_decode as pd
    from suite.ptx import gemm_tma as g
    from suite.triton import gemm_decode as gd

    registered = pd.STAGE_LIMIT, pd.STAGES
    deep = pd.DecodeModule()
    for size in shapes:
        shape = Shape(size)
        m, n, k = size
        moved = 2 * (m * k + k * n + m * n)
        config, module = g.CONFIGS["64x128 split-k"], g.KERNELS["64x128 split-k"]
        for stages in config.stages:
            shape.report(
                f"  ptx 64x128 split-k {stages} st",
                lambda c, stages=stages: g.Gemm(shape.inputs, c, config, stages, kernel=module),
                lambda fn: f" ({fn.splits} splits, {fn.grid} blocks)",
            )
        for stages in (3, 4):
            shape.report(
                f"  triton decode {stages} st",
                lambda c, stages=stages: gd.DecodeGemm(shape.inputs, c, stages),
                lambda fn: f" ({fn.plan.block_w}x{fn.plan.block_t}x{fn.plan.block_k}, {fn.plan.splits} splits)",
            )
        detail = lambda fn: (  # noqa: E731
            f" ({fn.plan.block_w}x{fn.plan.block_t}x{fn.plan.block_k}, {fn.plan.splits} splits, {fn.grid} blocks)"
        )
        for stages in pd.STAGES:
            shape.report(
                f"  ptx decode rule {stages} st",
                lambda c, stages=stages: pd.Decode(shape.inputs, c, stages),
                detail,
            )
        for consumers in (1, 2):
            for splits in (1, 2, 3, 4):
                for stages in (3, 4):
                    shape.report(
                        f"  ptx decode {consumers} wg, {splits} splits, {stages} st",
                        lambda c, stages=stages, consumers=consumers, splits=splits: pd.Decode(
                            shape.inputs, c, stages, splits=splits, consumers=consumers
                        ),
                        detail,
                    )
        pd.STAGE_LIMIT, pd.STAGES = 24 * 1024, (4, 6, 8)
        deep.stages = pd.STAGES
        for stages in pd.STAGES:
            shape.report(
                f"  ptx decode 24 KiB stages {stages} st",
                lambda c, stages=stages: pd.Decode(shape.inputs, c, stages, kernel=deep),
                detail,
            )
        pd.STAGE_LIMIT, pd.STAGES = registered
        print(f"  (the shape moves {moved / 1e6:.1f} MB: at 4.26 TB/s {moved / 4.26e6:.1f} us)", flush=True)


def fp64_checked_us(launcher, c, ref, checked: bool = True) -> tuple[float, float | None]:
    """``launcher`` (writing ``c``) called once on a NaN-poisoned C, its largest error against the fp64 ``ref`` as a
    share of max |C| (None when not ``checked``: a build that writes no C), then its graph replay timed, in µs."""
    c.fill_(float("nan"))
    launcher()
    torch.cuda.synchronize()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item() if checked else None
    return median_us(replayed(launcher)), err


def uniform(shapes) -> None:
    """The PTX kernels built from tools/_gemm_tma_head.cu (gemm_tma.cu before its warpgroup index was broadcast
    from lane 0 and its wgmma descriptors advanced by one add per k-step: per-thread descriptors moved to uniform
    registers, R2UR, before every wgmma; not committed: `git show f5ac21a:suite/ptx/gemm_tma.cu >
    tools/_gemm_tma_head.cu`) against the working tree's, in one process, against cuBLAS: fp8's 128 x 144, 128 x 128
    and 128 x 256 rungs and fp16's 128 x 256 rung at the square shapes, the decode kernel at decode shapes. Each
    checked against the reference first (fp8 against fp64)."""
    from pathlib import Path

    from suite.problems import PROBLEMS
    from suite.ptx import gemm_decode as pd
    from suite.ptx import gemm_tma as g

    head = Path(__file__).with_name("_gemm_tma_head.cu")

    def before(module):
        module = g.TmaGemm(module.gemm_config) if isinstance(module, g.TmaGemm) else pd.DecodeModule()
        module.source = head
        return module

    gemm, device = PROBLEMS["gemm"], torch.device("cuda")
    fp8_rows = (
        ("128x144x128 ws 2wg persistent tma-store", 5),
        ("128x128x128 ws 2wg persistent tma-store", 5),
        ("128x256x64 ws 2wg persistent tma-store", 3),
    )
    for size in ((8192, 8192, 8192), (4096, 4096, 4096)):
        inputs = gemm.make_inputs(size, 1, device, "fp8e4m3")
        ref = gemm.reference(inputs)
        c = gemm.make_output(inputs)
        call = cublas_fp8(inputs, c, False)
        base = median_us(replayed(call))
        print(f"{'x'.join(map(str, size))} fp8 cuBLAS promoted {base:8.1f} us", flush=True)
        for name, stages in fp8_rows:
            config = g.CONFIGS[name]
            builds = [("head", before(g.KERNELS[name]))]
            # the two changes apart: the warpgroup index broadcast (GEMM_TMA_WG_BROADCAST) and the descriptors
            # advanced by an add (GEMM_TMA_DESC_PLUS)
            plain = g.TmaGemm(dataclasses.replace(config, uniform_warpgroup=False))  # the defines say which
            for bcast in (0, 1):
                for plus in (0, 1):
                    defines = (f"GEMM_TMA_WG_BROADCAST={bcast}", f"GEMM_TMA_DESC_PLUS={plus}")
                    module = plain.with_defines(*defines, stages=(stages,))
                    builds.append((f"broadcast {bcast} plus {plus}", module))
            for tag, module in builds:
                c = gemm.make_output(inputs)
                us, err = fp64_checked_us(g.Gemm(inputs, c, config, stages, kernel=module), c, ref)
                print(
                    f"{'x'.join(map(str, size))} fp8 {name.split()[0]} {stages} st {tag}: {us:8.1f} us "
                    f"({base / us:.3f}), max error {err:.1e} of max |C|",
                    flush=True,
                )
    if not FP16_TOO["on"]:
        return
    top = "128x256x64 ws 2wg persistent tma-store"
    for size in ((8192, 8192, 8192), (4096, 4096, 4096)):
        shape = Shape(size)
        for tag, module in (("head", before(g.KERNELS[top])), ("tree", g.KERNELS[top])):
            for stages in (3, 4):
                shape.report(
                    f"  fp16 {top.split()[0]} {stages} st {tag}",
                    lambda c, m=module, s=stages: g.Gemm(shape.inputs, c, g.CONFIGS[top], s, kernel=m),
                )
    for size in shapes:
        shape = Shape(size)
        for tag, module in (("head", before(pd.KERNEL)), ("tree", pd.KERNEL)):
            for stages in pd.STAGES[1:]:
                shape.report(
                    f"  ptx decode {stages} st {tag}",
                    lambda c, m=module, s=stages: pd.Decode(shape.inputs, c, s, kernel=m),
                )


def square_cases(shapes):
    """Per shape and dtype (fp8, and with FP16_TOO bf16 and fp16): a label, the inputs, their fp64 reference and
    cuBLAS's graph-timed median in µs (fp8: promoted ``_scaled_mm``), printed as it is timed."""
    from suite.problems import PROBLEMS

    gemm, device = PROBLEMS["gemm"], torch.device("cuda")
    dtypes = ("fp8e4m3",) if not FP16_TOO["on"] else ("fp8e4m3", "bf16", "fp16")
    for size in shapes:
        for dtype in dtypes:
            inputs = gemm.make_inputs(size, 1, device, dtype)
            ref = gemm.reference(inputs)
            c = gemm.make_output(inputs)
            call = cublas_fp8(inputs, c, False) if dtype == "fp8e4m3" else lambda: torch.matmul(*inputs[:2], out=c)
            base = median_us(replayed(call))
            where = f"{'x'.join(map(str, size))} {dtype}"
            print(f"{where} cuBLAS {base:8.1f} us", flush=True)
            yield where, dtype, inputs, ref, base


def epilogue(shapes) -> None:
    """The 128 x 256 TMA-store rung (the fp8 row of issue 19's 8192^3 bar) at the square shapes, in every dtype,
    in one process, against cuBLAS (fp8: promoted): as registered (tile rows in groups of 16, C staged by stmatrix),
    with its tile rows grouped 8 and 32 at a time (Config.group_m), with its epilogue skipped
    (GEMM_TMA_PROBE_NO_EPILOGUE: C unwritten, what the epilogue costs the tensor pipe), with C stored straight from
    the registers instead of through the TMA-store staging (tma_store=False: no staging, so no second store pass at 4
    stages), and with C staged by 4-byte stores (GEMM_TMA_STMATRIX=0; fp8's pairs rungs too). Each checked against
    fp64 first, but the one that writes no C. (The fp8 epilogue fused into the next tile's first K tile was timed here
    at 569e4c2: GEMM_TMA_FP8_FUSED_EPILOGUE=1.)"""
    from suite.problems import PROBLEMS
    from suite.ptx import gemm_tma as g

    gemm = PROBLEMS["gemm"]
    top = g.CONFIGS["128x256x64 ws 2wg persistent tma-store"]
    direct = dataclasses.replace(top, tma_store=False)
    builds = [("registered", top, g.KERNELS["128x256x64 ws 2wg persistent tma-store"], True)]
    for group_m in (8, 32):  # the registered rung groups 16 tile rows
        config = dataclasses.replace(top, group_m=group_m)
        builds.append((f"GROUP_M={group_m}", config, g.TmaGemm(config), True))
    builds.append(("no epilogue", top, g.TmaGemm(top).with_defines("GEMM_TMA_PROBE_NO_EPILOGUE=1"), False))
    builds.append(("direct stores", direct, g.TmaGemm(direct), True))
    # C staged by one 4-byte store per pair of columns instead of stmatrix (GEMM_TMA_STMATRIX=0), on this rung and
    # on fp8's pairs rungs (their builds hold fp8 only)
    sts = "GEMM_TMA_STMATRIX=0"
    builds.append(("4-byte staging stores", top, g.TmaGemm(top).with_defines(sts), True))
    for name in ("128x144x128 ws 2wg persistent tma-store", "128x128x128 ws 2wg persistent tma-store"):
        config = g.CONFIGS[name]
        builds.append((f"{name.split()[0]} registered", config, g.KERNELS[name], True))
        builds.append((f"{name.split()[0]} 4-byte staging stores", config, g.TmaGemm(config).with_defines(sts), True))
    for where, dtype, inputs, ref, base in square_cases(shapes):
        for tag, config, module, checked in builds:
            if ONLY["labels"] and not any(w in tag for w in ONLY["labels"]):
                continue
            if dtype not in config.dtypes:
                continue
            for stages in config.stages[1:]:
                try:
                    c = gemm.make_output(inputs)
                    us, err = fp64_checked_us(g.Gemm(inputs, c, config, stages, kernel=module), c, ref, checked)
                    what = f"max error {err:.1e} of max |C|" if checked else "C not written"
                    print(f"{where} {tag} {stages} st: {us:8.1f} us ({base / us:.3f}), {what}", flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{where} {tag} {stages} st: {type(e).__name__}: {str(e)[:160]}", flush=True)


def skew(shapes) -> None:
    """The 128 x 256 TMA-store rung at the square shapes, every dtype (fp8 against promoted cuBLAS), in one process:
    as registered, with its second consumer warpgroup started 1 or 2 K tiles after the first (GEMM_TMA_SKEW: one
    warpgroup's epilogue under the other's wgmma), and instrumented (GEMM_TMA_PROBE_CLOCKS: SM cycles per tile in
    mainloops and epilogues, the SM clock, the warpgroups' skew at the end), with and without the skew. Each checked
    against fp64 first."""
    from suite.problems import PROBLEMS
    from suite.ptx import gemm_tma as g

    gemm, device = PROBLEMS["gemm"], torch.device("cuda")
    name = "128x256x64 ws 2wg persistent tma-store"
    top = g.CONFIGS[name]
    builds = [("registered", g.KERNELS[name], False)]
    builds += [(f"skew {k}", g.TmaGemm(top).with_defines(f"GEMM_TMA_SKEW={k}"), False) for k in (1, 2)]
    builds.append(("clocks", g.TmaGemm(top).with_defines("GEMM_TMA_PROBE_CLOCKS=1"), True))
    builds.append(("clocks, skew 1", g.TmaGemm(top).with_defines("GEMM_TMA_PROBE_CLOCKS=1", "GEMM_TMA_SKEW=1"), True))
    for where, _, inputs, ref, base in square_cases(shapes):
        for tag, module, clocked in builds:
            if ONLY["labels"] and not any(w in tag for w in ONLY["labels"]):
                continue
            for stages in (3, 4):
                try:
                    c = gemm.make_output(inputs)
                    launcher = g.Gemm(inputs, c, top, stages, kernel=module)
                    if clocked:  # 8 words per (block, consumer warpgroup), in place of the unused workspace
                        words = torch.zeros(launcher.grid * top.consumers * 8, dtype=torch.int64, device=device)
                        launcher.workspace = words
                        launcher.args = launcher.args[:9] + (words.data_ptr(),) + launcher.args[10:]
                    us, err = fp64_checked_us(launcher, c, ref)
                    line = f"{where} {tag} {stages} st: {us:8.1f} us ({base / us:.3f}), max error {err:.1e}"
                    if clocked:  # the last replay's counts
                        w = words.view(launcher.grid, top.consumers, 8).double().cpu()
                        tiles = w[:, :, 2].sum()
                        main, epi = w[:, :, 0].sum() / tiles, w[:, :, 1].sum() / tiles
                        mhz = ((w[:, :, 6] - w[:, :, 5]) / (w[:, :, 4] - w[:, :, 3])).median().item() * 1e3
                        lag = (w[:, 1, 6] - w[:, 0, 6]).median().item()
                        line += (
                            f"; per tile: mainloop {main:.0f} cycles, epilogue {epi:.0f} ({epi / (main + epi):.1%})"
                            f"; SM clock {mhz:.0f} MHz; warpgroup 1 ends {lag:.0f} cycles after 0 (median)"
                        )
                    print(line, flush=True)
                except Exception as e:  # noqa: BLE001
                    print(f"{where} {tag} {stages} st: {type(e).__name__}: {str(e)[:160]}", flush=True)


def triton_split(shapes) -> None:
    """The Triton split-K with 128 x 128 tiles at one or two splits beside the registered rule's tile and count
    (128 x 256, two splits at 256 x 8192 x 8192, whose 16 MB workspace is written and read again): whether the PTX
    row's decomposition (one split of 128 x 128 tiles) helps the Triton kernel too."""
    from suite.triton import gemm_splitk as gs

    rule_tile = gs.tile_for
    gs.SplitKGemm.depths = (3, 4, 5, 6)  # 32 KiB stages of 128 x 128 x 64 fit 6 deep
    for size in shapes:
        shape = Shape(size)
        for tile in (None, (128, 128, 64, 8), (128, 128, 64, 4)):
            gs.tile_for = rule_tile if tile is None else (lambda dtype, m, tile=tile: tile)
            for splits in (None, 1, 2, 3) if tile else (None,):
                for stages in (3, 4, 5, 6) if tile else (3, 4):
                    name = "rule's tile" if tile is None else f"{tile[0]}x{tile[1]}x{tile[2]}, {tile[3]} warps"
                    shape.report(
                        f"  triton split-k {name}, {stages} st, splits {splits or 'by rule'}",
                        lambda c, stages=stages, splits=splits: gs.SplitKGemm(shape.inputs, c, stages, splits=splits),
                        lambda fn: f" ({fn.splits} splits, {fn.grid} programs)",
                    )
    gs.tile_for = rule_tile


def m256(shapes) -> None:
    from suite.ptx import gemm_tma as g
    from suite.registry import variants

    by_label = {v.label: v for v in variants("gemm")}
    registered = (  # each at its best depth in gemm-llm-long-k-256sk at 256 x 10240 x 8192
        ("ptx:128x256x64 ws 2wg persistent tma-store tma+wgmma", 4),
        ("ptx:128x192x64 ws 2wg persistent tma-store tma+wgmma", 4),  # registered from this probe's first run
        ("ptx:256x128 stream-k tma+wgmma", 4),
        ("ptx:128x128 split-k tma+wgmma", 7),
        ("ptx:64x128 split-k tma+wgmma", 8),
        ("triton:split-k desc", 4),
    )
    wide = g.Config(256, 2, False, False, (3, 4), schedule="split-k", dtypes=("fp16",))  # not registered
    wide_kernel = g.TmaGemm(wide)
    fixed = {
        g.CONFIGS[name]: g.TmaGemm(g.CONFIGS[name]).with_defines("GEMM_TMA_SK_FIXED_FINISHER=1")
        for name in ("256x128 stream-k", "128x256 stream-k")
    }
    for size in shapes:
        shape = Shape(size)
        made = [
            (f"{label} {stages} st", lambda c, v=by_label[label], s=stages: v.factory(shape.inputs, c, s))
            for label, stages in registered
        ]
        if ONCE["on"]:
            c = _gemm_output(shape.inputs)
            calls = [("cuBLAS", lambda c=c: torch.matmul(shape.inputs[0], shape.inputs[1], out=c))]
            calls += [(label, shape.checked(make)) for label, make in made]
            profiled_once(size, calls)
            continue
        for label, make in made:
            shape.report(f"  {label}", make, lambda fn: f" ({getattr(fn, 'grid', '?')} blocks)")
        for name in ("256x128 stream-k", "128x256 stream-k"):  # the tile's first unit as its fixed finisher
            config = g.CONFIGS[name]
            for stages in config.stages:
                shape.report(
                    f"  ptx {name} fixed-finisher {stages} st",
                    lambda c, config=config, stages=stages: g.Gemm(
                        shape.inputs, c, config, stages, kernel=fixed[config]
                    ),
                    lambda fn: f" ({fn.grid} blocks)",
                )
        for splits in (2, 3):
            config = g.CONFIGS["128x128 split-k"]
            shape.report(
                f"  ptx 128x128 split-k 7 st, {splits} splits",
                lambda c, splits=splits: g.Gemm(
                    shape.inputs, c, config, 7, kernel=g.KERNELS["128x128 split-k"], splits=splits
                ),
                lambda fn: f" ({fn.grid} blocks)",
            )
        for stages in wide.stages:
            for splits in (2, 3, 4):
                shape.report(
                    f"  ptx 128x256 split-k (unregistered) {stages} st, {splits} splits",
                    lambda c, stages=stages, splits=splits: g.Gemm(
                        shape.inputs, c, wide, stages, kernel=wide_kernel, splits=splits
                    ),
                    lambda fn: f" ({fn.grid} blocks)",
                )


def flush(shapes) -> None:
    from suite.problems import PROBLEMS
    from suite.registry import variants

    gemm, device = PROBLEMS["gemm"], torch.device("cuda")
    cache = _flush_buffer()
    flushes = {"write (zero_)": cache.zero_, "read (sum)": cache.sum, "none": lambda: None}
    by_label = {v.label: v for v in variants("gemm")}
    rows = (("torch:cuBLAS", None), ("triton:decode swap-ab desc", 4), ("ptx:64x128 split-k tma+wgmma", 6))
    for size in shapes:
        inputs = gemm.make_inputs(size, 1, device, "fp16")
        megabytes = (size[0] * size[2] + size[1] * size[2] + size[0] * size[1]) * 2 / 1e6
        for label, stages in rows:
            call = replayed(by_label[label].factory(inputs, gemm.make_output(inputs), stages))
            times = {name: event_bursts(call, before) / 1e3 for name, before in flushes.items()}  # ms
            print(
                f"{size} {label:34s} "
                + "  ".join(f"{k}: {1e3 * t:.1f} us ({megabytes / 1e3 / t:.2f} TB/s)" for k, t in times.items()),
                flush=True,
            )


def fp8(shapes) -> None:
    """Where fp8's gap to cuBLAS is (issue 19): cuBLAS with its default promoted accumulation and with
    use_fast_accum=True (wgmma's own accumulator across all of K), beside the suite's best fp8 rows, each checked
    against the fp64 reference first. If cuBLAS loses little to promotion, the kernels' gap is elsewhere (their
    L2 traffic, no multicast); if it loses much, the kernels' promotion schedule is the place."""
    from suite.problems import PROBLEMS
    from suite.registry import variants

    gemm, device = PROBLEMS["gemm"], torch.device("cuda")
    by_label = {v.label: v for v in variants("gemm")}
    from suite.ptx import gemm_tma as g

    # (label, make(inputs, c) -> launcher): the registered rows at their best depth, then unregistered PTX builds
    registered = (
        ("ptx:128x256x64 ws 2wg persistent tma-store tma+wgmma", 3),
        ("ptx:128x128x128 ws 2wg persistent tma-store tma+wgmma", 5),
        ("ptx:128x144x128 ws 2wg persistent tma-store tma+wgmma", 5),
        ("ptx:128x128 split-k tma+wgmma", 4),
        ("triton:128x256x64 gluon ws persistent", 3),
    )
    names = [label for label, _ in registered]
    made = [
        (f"{label} {stages} st", lambda inputs, c, v=by_label[label], s=stages: v.factory(inputs, c, s))
        for label, stages in registered
    ]

    def built(name: str, config, module) -> None:
        made.extend(
            (f"ptx {name} {s} st", lambda inputs, c, s=s: g.Gemm(inputs, c, config, s, kernel=module))
            for s in config.stages
        )

    top = g.CONFIGS["128x256x64 ws 2wg persistent tma-store"]
    # the top rung without promotion (GEMM_TMA_FP8_FAST_ACCUM=1): what promotion costs the PTX kernel
    built("top rung, fast accumulation", top, g.TmaGemm(top).with_defines("GEMM_TMA_FP8_FAST_ACCUM=1"))
    # fast accumulation in the promoted form's n128 halves: each half waited for (its waits without its adds), and
    # both halves in one group (the narrower instruction alone): GEMM_TMA_FP8_PROBE_HALVES=1 / 2
    for mode, name in ((1, "halves waited, no adds"), (2, "halves in one group")):
        built(
            f"top rung, fast accumulation, {name}",
            top,
            g.TmaGemm(top).with_defines(f"GEMM_TMA_FP8_PROBE_HALVES={mode}"),
        )
    # the top rung's promotion in quarters of N, two partials in turn (GEMM_TMA_FP8_QUARTERS=1), and A read from
    # registers (GEMM_TMA_FP8_A_REGS=1), each alone and both together
    for name, defines in (
        ("top rung, promoted in quarters", ("GEMM_TMA_FP8_QUARTERS=1",)),
        ("top rung, promoted in halves, A from registers", ("GEMM_TMA_FP8_A_REGS=1",)),
        ("top rung, promoted in quarters, A from registers", ("GEMM_TMA_FP8_QUARTERS=1", "GEMM_TMA_FP8_A_REGS=1")),
    ):
        built(name, top, g.TmaGemm(top).with_defines(*defines))
    # 128 x 128 tiles (two consumer warpgroups of 64 x 128, persistent, TMA-store epilogue): the registered rung
    # (K tiles promoted in pairs through two partials, the first added while the second runs) is timed above; here
    # with one partial, each K tile waited for before its adds (GEMM_TMA_FP8_OVERLAP=0)
    square = g.CONFIGS["128x128x128 ws 2wg persistent tma-store"]
    built("128x128 persistent tma-store, one partial", square, g.TmaGemm(square).with_defines("GEMM_TMA_FP8_OVERLAP=0"))
    # the same in clusters of 2 CTAs on vertically adjacent tiles, B loaded once and multicast to both (on the H200
    # slower: 0.87 / 0.92 against 0.95 / 1.02, 2026-12-01); and the top rung's 128 x 256 tiles so clustered
    paired = dataclasses.replace(square, cluster=2)
    built("128x128 persistent tma-store, cluster 2", paired, g.TmaGemm(paired))
    top_paired = dataclasses.replace(top, cluster=2, dtypes=("fp8e4m3",), stages=(3, 4))
    built("top rung, cluster 2", top_paired, g.TmaGemm(top_paired))
    # the Gluon kernel promoted in quarters the same way (GluonGemm(quarters=True))
    from suite.triton.gemm_gluon import FP8_STAGES, GluonGemm

    made.extend(
        (f"gluon promoted in quarters {s} st", lambda inputs, c, s=s: GluonGemm(inputs, c, s, quarters=True))
        for s in FP8_STAGES[1:]
    )
    # the halves with nothing but the adds between a group's wait and the next group's issue: the next K tile's
    # full barrier waited on under the K tile before's last half (1), and each stage released after the next K tile's
    # first issue (2) (GEMM_TMA_FP8_EARLY_WAIT); the Gluon kernel has form (1) registered since 3f33301, so here it
    # runs without it (GluonGemm(early_wait=False)), persistent and on stream-K
    for level in (1, 2):
        early = g.TmaGemm(top).with_defines(f"GEMM_TMA_FP8_EARLY_WAIT={level}")
        built(f"top rung, early wait {level}", top, early)
    for s in FP8_STAGES[1:]:
        made.append((f"gluon without early wait {s} st", lambda i, c, s=s: GluonGemm(i, c, s, early_wait=False)))
        made.append(
            (
                f"gluon stream-k without early wait {s} st",
                lambda i, c, s=s: GluonGemm(i, c, s, stream_k=True, early_wait=False),
            )
        )
    # Energy at the power cap (issue 19, 8192^3): the tile walk's L2 reuse (GROUP_M, tile rows per rasterization
    # group: B's panels are read from HBM once per group) and cuBLAS's own tile width, 144 (its promoted kernel's
    # 144 x 128: 12.5% more MACs per byte loaded than 128 x 128; 72 accumulator registers and two partials of 72 fit)
    square_5 = dataclasses.replace(square, stages=(5,))
    for group_m in (16, 32):
        built(
            f"128x128 pairs GROUP_M={group_m}",
            square_5,
            g.TmaGemm(square_5).with_defines(f"GEMM_TMA_GROUP_M={group_m}"),
        )
    # the registered 128 x 144 rung (GROUP_M=16) is timed above; here with 8 tile rows per group, and in clusters of
    # 2 CTAs sharing B (8 cluster rows per group: 16 tile rows)
    wide_8 = dataclasses.replace(g.CONFIGS["128x144x128 ws 2wg persistent tma-store"], group_m=8, stages=(5,))
    built("128x144 pairs GROUP_M=8", wide_8, g.TmaGemm(wide_8))
    wide_paired = dataclasses.replace(wide_8, cluster=2, stages=(5, 6))
    built("128x144 pairs, cluster 2", wide_paired, g.TmaGemm(wide_paired))

    # 192 x 128 tiles on three consumer warpgroups of 64 x 128 (160 registers each: 64 accumulators and one
    # partial, each K tile waited for before its adds, while the other two warpgroups' groups keep the tensor pipe
    # busy): 12% fewer bytes loaded per MAC than 128 x 144 ((192 + 128) / (192 x 128) against (128 + 144) /
    # (128 x 144)); 8192^3 is 2752 tiles, 20.85 waves of 132
    tall = g.Config(128, 3, True, True, (4, 5), block_m=192, dtypes=("fp8e4m3",), group_m=16)
    for group_m in (8, 16, 32):
        config = dataclasses.replace(tall, group_m=group_m)
        built(f"192x128 3wg one partial GROUP_M={group_m}", config, g.TmaGemm(config))

    # the registered 128 x 144 and 128 x 128 rungs with the TMA loads' L2 promotion at 256 bytes, as before 2026-12-02,
    # instead of 128 (gemm_tma.L2_PROMOTION)
    def promoted(name: str, stages: int, promotion: str):
        def make(inputs, c):
            registered, g.L2_PROMOTION = g.L2_PROMOTION, promotion
            try:
                return g.Gemm(inputs, c, g.CONFIGS[name], stages, kernel=g.KERNELS[name])
            finally:
                g.L2_PROMOTION = registered

        return make

    for name in ("128x144x128 ws 2wg persistent tma-store", "128x128x128 ws 2wg persistent tma-store"):
        made.append((f"ptx {name.split()[0]} L2_256B promotion 5 st", promoted(name, 5, "L2_256B")))
    for promotion in ("NONE", "L2_64B"):
        wide = "128x144x128 ws 2wg persistent tma-store"
        made.append((f"ptx 128x144x128 {promotion} promotion 5 st", promoted(wide, 5, promotion)))

    # Persistent grids other than the wave rule's (suite.waves: the fewest programs that keep the rounds; at 8192^3
    # 2048 tiles of 128 x 256 and 4096 of 128 x 128 take 128 programs, 3648 of 128 x 144 take 131): all 132 SMs, and
    # half of them
    def on_grid(make, programs: int):
        def made_on(inputs, c):
            launcher = make(inputs, c)
            if not hasattr(launcher, "grid"):
                raise TypeError(f"{type(launcher).__name__} has no persistent grid to set")
            launcher.grid = programs
            return launcher

        return made_on

    for programs in (132, 64):
        made.append((f"gluon 128x256 3 st, {programs} programs", on_grid(lambda i, c: GluonGemm(i, c, 3), programs)))
        for name, stages in ((names[1], 5), (names[2], 5)):
            made.append(
                (
                    f"ptx {name.split(':')[1].split()[0]} {stages} st, {programs} programs",
                    on_grid(lambda i, c, v=by_label[name], s=stages: v.factory(i, c, s), programs),
                )
            )
    made.append(("gluon 128x256 4 st (wave rule)", lambda i, c: GluonGemm(i, c, 4)))
    # the Gluon kernel on every SM, its ragged last wave's K iterations shared (GluonGemm(stream_k=True): whole waves,
    # then parts of at least half a tile, the finisher adding the later parts' partials in K order)
    made.extend((f"gluon 128x256 stream-k {s} st", lambda i, c, s=s: GluonGemm(i, c, s, stream_k=True)) for s in (3, 4))
    made.append(("gluon 128x256 GROUP_M=8 3 st", lambda i, c: GluonGemm(i, c, 3, group_m=8)))
    # the pairs rungs on the stream-K schedule with data-parallel waves first (StreamK: all but the last one or two
    # waves' tiles whole, the rest shared evenly, fixed up in K order), TMA-store epilogue kept: the last wave's
    # quantization (8192^3: 27.64 waves of 144-wide tiles, 31.03 of 128-wide; 4096^3: 7.03 / 7.76)
    for name in ("128x144x128 ws 2wg persistent tma-store", "128x128x128 ws 2wg persistent tma-store"):
        streamed = dataclasses.replace(g.CONFIGS[name], schedule="stream-k", stages=(5, 6))
        built(f"{name.split()[0]} pairs stream-k tma-store", streamed, g.TmaGemm(streamed))
        # the same with the tile's first unit as its fixed finisher (GEMM_TMA_SK_FIXED_FINISHER: its partial stays in
        # registers, the later units' are read once, each behind its own flag)
        fixed = g.TmaGemm(streamed).with_defines("GEMM_TMA_SK_FIXED_FINISHER=1")
        built(f"{name.split()[0]} pairs stream-k fixed-finisher", streamed, fixed)
    from suite.triton.gemm_gluon import PAIRS_STAGES

    made.extend(
        (f"gluon pairs 128x128 {s} st", lambda inputs, c, s=s: GluonGemm(inputs, c, s, pairs=True))
        for s in PAIRS_STAGES
    )
    for group_m in (16, 32):
        made.append(
            (
                f"gluon 128x256 GROUP_M={group_m} 3 st",
                lambda inputs, c, gm=group_m: GluonGemm(inputs, c, 3, group_m=gm),
            )
        )
        made.append(
            (
                f"gluon pairs 128x128 GROUP_M={group_m} 5 st",
                lambda inputs, c, gm=group_m: GluonGemm(inputs, c, 5, pairs=True, group_m=gm),
            )
        )
    # (on the H200, 2026-12-01: 128 x 192 0.92 / 0.89 of promoted cuBLAS at 8192^3 / 4096^3, the split-K 0.77 /
    # 0.74; --pipelined times them again)
    if PIPELINED["on"]:
        narrow = g.Config(192, 2, True, True, (3, 4), dtypes=("fp8e4m3",))
        built(
            "128x192 persistent tma-store, pipelined promotion",
            narrow,
            g.TmaGemm(narrow).with_defines("GEMM_TMA_FP8_PIPELINED=1"),
        )
        built(
            "128x128 split-k, pipelined promotion",
            g.CONFIGS["128x128 split-k"],
            g.KERNELS["128x128 split-k"].with_defines("GEMM_TMA_FP8_PIPELINED=1"),
        )
    if ONLY["labels"]:
        made = [m for m in made if any(w in m[0] for w in ONLY["labels"])]
    if ONCE["on"]:
        fp8_once(shapes, made)
        return
    for size in shapes:
        inputs = gemm.make_inputs(size, 1, device, "fp8e4m3")
        ref = gemm.reference(inputs)
        flop = 2 * size[0] * size[1] * size[2]
        timed = {}
        for fast in (False, True):
            try:
                c = gemm.make_output(inputs)
                call = cublas_fp8(inputs, c, fast)
                call()
                torch.cuda.synchronize()
                err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
                timed[f"cuBLAS use_fast_accum={fast}"] = (median_us(replayed(call)), err)
            except RuntimeError as e:  # _scaled_mm refuses N or K not a multiple of 16: the kernels still run
                print(f"{'x'.join(map(str, size))} cuBLAS use_fast_accum={fast}: {str(e)[:100]}", flush=True)
        base = timed.get("cuBLAS use_fast_accum=False", (None,))[0]

        def show(name: str, us: float, err: float) -> None:
            ratio = f"{base / us:.3f} of promoted cuBLAS" if base else "no cuBLAS time"
            print(
                f"{'x'.join(map(str, size))} {name:62s} {us:8.1f} us {flop / us / 1e6:7.1f} TFLOP/s "
                f"({ratio}), max error {err:.1e} of max |C|",
                flush=True,
            )

        for name, (us, err) in timed.items():
            show(name, us, err)
        for label, make in made:  # each printed once timed (a configuration that hangs leaves the ones before)
            try:
                c = gemm.make_output(inputs)
                call = make(inputs, c)
                call()
                torch.cuda.synchronize()
                err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
                show(label, median_us(replayed(call)), err)
            except Exception as e:  # noqa: BLE001 - a configuration that fails is listed, the probe goes on
                print(f"{label}: {type(e).__name__}: {str(e)[:120]}", flush=True)


def cublas_fp8(inputs, c, fast: bool):
    """cuBLAS fp8 on the suite's fp8 inputs (A, B as N x K, the two scales) into ``c``: promoted accumulation, or
    wgmma's own across all of K with ``fast``."""
    a, b, scale_a, scale_b = inputs
    return lambda: torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=c.dtype, out=c, use_fast_accum=fast)


def fp8_once(shapes, made) -> None:
    """--once: cuBLAS (promoted and fast) and every fp8 configuration of ``made`` called once each inside one
    cudaProfilerStart / Stop range, after a warm-up call outside it, for ``ncu --profile-from-start off``; their
    labels printed in launch order (ncu's kernels come in the same order; a split-K launch is two kernels)."""
    from suite.problems import PROBLEMS

    gemm = PROBLEMS["gemm"]
    for size in shapes:
        inputs = gemm.make_inputs(size, 1, torch.device("cuda"), "fp8e4m3")
        calls = [
            (f"cuBLAS use_fast_accum={fast}", cublas_fp8(inputs, gemm.make_output(inputs), fast))
            for fast in (False, True)
        ]
        calls += [(label, make(inputs, gemm.make_output(inputs))) for label, make in made]
        profiled_once(size, calls)


def profiled_once(size, calls) -> None:
    """--once: every (label, call) called once as a warm-up, then once more inside one cudaProfilerStart / Stop range
    (for ``ncu --profile-from-start off``), their labels printed in launch order first: ncu's kernels come in the
    same order (a split-K call is two kernels; torch.profiler sees none under ncu: it holds CUPTI)."""
    for _, call in calls:
        call()
    torch.cuda.synchronize()
    print(f"{'x'.join(map(str, size))}: {len(calls)} calls, in order:", flush=True)
    for i, (label, _) in enumerate(calls):
        print(f"  {i:2d} {label}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    for _, call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def floor(shapes) -> None:
    """What a small memory-bound kernel can reach in this timing (the read flush, graph replay, an event pair per
    call), beside the roofline, which counts no fixed cost: a one-element add (the launch and the events alone), and
    ``copy_`` moving a weight's bytes (half of them read, half written), for the weights of the MxNxK shapes given
    (B, N x K fp16), each as a share of the bytes at the copy_ rate of the largest."""
    one = torch.ones(1, device="cuda")
    print(f"one-element add: {event_bursts(replayed(lambda: one.add_(1)), _flush_buffer().sum):.2f} us", flush=True)
    timed = []
    for size in shapes:
        moved = size[1] * size[2] * 2  # bytes of the weight
        src = torch.randn(moved // 8, device="cuda")  # copy_ reads half and writes half
        dst = torch.empty_like(src)
        us = event_bursts(replayed(lambda dst=dst, src=src: dst.copy_(src)), _flush_buffer().sum)
        timed.append((size, moved, us))
    peak = max(moved / us for _, moved, us in timed)  # bytes per us
    for size, moved, us in timed:
        print(
            f"copy_ moving {moved / 1e6:.1f} MB ({size[1]} x {size[2]} fp16): {us:.2f} us, "
            f"{moved / us / 1e6:.2f} TB/s, {moved / peak / us:.3f} of the largest copy's rate",
            flush=True,
        )


ROTATE_L2_MULTIPLE = 3  # the other operand sets of a rotation hold at least this many L2s of bytes


def rotation_sets(moved_bytes: int, l2_bytes: int, multiple: int = ROTATE_L2_MULTIPLE) -> int:
    """Operand sets a rotation needs so that between two calls on one set the others move at least ``multiple`` L2s
    of bytes (the set is gone from L2 when its turn comes again, with no flush): at least 2."""
    return max(2, 1 + -(-multiple * l2_bytes // max(1, moved_bytes)))


def rotate(shapes) -> None:
    """The decode rows as a model runs them: R operand sets of the shape (distinct weights, as the layers of a decode
    step), called one after another in one CUDA graph with nothing between them (no flush: the other sets evict
    each from L2 before its turn comes again), an event pair around the whole graph; the time per call then holds
    the GPU's gap between kernels but not the launch and events' fixed cost that an event pair per call does (the
    one-element add's 4.1 us, ``floor``). Beside them copy_ of the weight's bytes rotated the same way. Each
    against the roofline of the bytes it must move (A, B and C) at the suite's own roofline rate (probe_bandwidth:
    copy_ of 1 GiB, read-flushed), timed here."""
    from suite.driver.roofline import probe_bandwidth
    from suite.problems import PROBLEMS
    from suite.registry import variants

    gemm = PROBLEMS["gemm"]
    by_label = {v.label: v for v in variants("gemm")}
    rows = (
        ("cuBLAS", None, None),
        ("ptx 64x128 split-k 8 st", "ptx:64x128 split-k tma+wgmma", 8),
        ("triton decode swap-ab 3 st", "triton:decode swap-ab desc", 3),
        ("triton decode swap-ab 4 st", "triton:decode swap-ab desc", 4),
    )
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bandwidth = probe_bandwidth("read") * 1e3  # the suite's roofline rate (copy_ of 1 GiB), in bytes per us
    print(f"copy_ of 1 GiB (suite.driver.roofline): {bandwidth / 1e6:.2f} TB/s; L2 {l2 / 2**20:.0f} MiB", flush=True)

    def per_call_us(calls) -> float:
        """The graph of ``calls`` run 4 times over, timed by one event pair: microseconds per call."""
        for call in calls:
            call()
        torch.cuda.synchronize()
        graph = capture_graph(lambda: [call() for _ in range(4) for call in calls])
        return event_bursts(graph.replay, lambda: None, bursts=4, calls=10) / (4 * len(calls))

    for size in shapes:
        m, n, k = size
        moved = 2 * (m * k + k * n + m * n)
        sets = rotation_sets(moved, l2)
        name = "x".join(map(str, size))
        roofline_us = moved / bandwidth
        operands = [gemm.make_inputs(size, i, torch.device("cuda"), "fp16") for i in range(sets)]
        outputs = [gemm.make_output(inputs) for inputs in operands]
        ref = operands[0][0].double() @ operands[0][1].double()
        srcs = [torch.randn(k * n // 4, device="cuda") for _ in range(sets)]  # the weight's bytes, half read
        dsts = [torch.empty_like(src) for src in srcs]
        copy_us = per_call_us([lambda d=d, s=s: d.copy_(s) for d, s in zip(dsts, srcs)])
        print(
            f"{name}: {sets} sets; roofline {roofline_us:.2f} us; copy_ of the weight's bytes {copy_us:.2f} us "
            f"({k * n * 2 / bandwidth / copy_us:.3f} of its own roofline)",
            flush=True,
        )
        for label, variant, stages in rows:
            try:
                if variant is None:
                    calls = [lambda i=i, c=c: torch.matmul(i[0], i[1], out=c) for i, c in zip(operands, outputs)]
                else:
                    calls = [by_label[variant].factory(i, c, stages) for i, c in zip(operands, outputs)]
                outputs[0].fill_(float("nan"))
                us = per_call_us(calls)
                err = (outputs[0].double() - ref).abs().max().item()
                if not err < 0.05:
                    raise ValueError(f"wrong result: max abs error {err}")
                print(f"  {label:28s} {us:7.2f} us/call, {roofline_us / us:.3f} of the roofline", flush=True)
            except Exception as e:  # noqa: BLE001 - a row that fails is listed, the probe goes on
                print(f"  {label}: {type(e).__name__}: {str(e)[:120]}", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "probe",
        choices=(
            "launch",
            "split-k",
            "decode",
            "ptx-decode",
            "flush",
            "fp8",
            "triton-split",
            "floor",
            "rotate",
            "m256",
            "uniform",
            "epilogue",
            "skew",
        ),
    )
    p.add_argument("--shape", nargs="+", help="MxNxK shapes instead of the probe's own")
    p.add_argument("--flush", choices=("write", "read"), default="write", help="how the L2 is emptied before a call")
    p.add_argument("--pipelined", action="store_true", help="fp8: time the GEMM_TMA_FP8_PIPELINED builds too")
    p.add_argument("--fp8-only", action="store_true", help="uniform, epilogue, skew: time their fp8 rows only")
    p.add_argument(
        "--only",
        nargs="+",
        default=(),
        help="fp8, decode, epilogue, skew: only configurations whose label holds one of these",
    )
    p.add_argument(
        "--once", action="store_true", help="fp8, m256: call each configuration once (for ncu), time nothing"
    )
    args = p.parse_args(argv)
    FLUSH["mode"] = args.flush
    PIPELINED["on"] = args.pipelined
    ONCE["on"] = args.once
    FP16_TOO["on"] = not args.fp8_only
    ONLY["labels"] = tuple(args.only)
    own = {
        "launch": TARGETS,
        "split-k": LONG_K,
        "decode": DECODE,
        # Llama-3 8B's down, QKV and O, 70B's O, at decode M
        "ptx-decode": (
            (16, 4096, 14336),
            (64, 4096, 14336),
            (1, 6144, 4096),
            (16, 6144, 4096),
            (16, 4096, 4096),
            (64, 4096, 4096),
            (16, 8192, 8192),
            (64, 8192, 8192),
            (16, 28672, 4096),
        ),
        "flush": ((16, 8192, 8192), (128, 8192, 8192)),
        "fp8": ((8192, 8192, 8192), (4096, 4096, 4096)),
        "triton-split": ((256, 8192, 8192), (256, 10240, 8192), (256, 6144, 4096)),
        # Llama-3 8B's QKV, O and down weights, and a 1 GiB copy
        "floor": ((16, 6144, 4096), (16, 4096, 4096), (16, 4096, 14336), (16, 32768, 16384)),
        # Llama-3 8B's QKV, O and down at M = 16 and 64, and 8192 x 8192
        "rotate": ((16, 6144, 4096), (16, 4096, 4096), (16, 4096, 14336), (64, 4096, 4096), (16, 8192, 8192)),
        # 70B's QKV and 8B's QKV at M = 256 (the PTX and Triton rows' weakest cells), and 256 x 8192 x 8192
        "m256": ((256, 10240, 8192), (256, 6144, 4096), (256, 8192, 8192)),
        # the decode shapes of the uniform probe (its square shapes are its own)
        "uniform": ((16, 8192, 8192), (64, 4096, 14336), (16, 6144, 4096)),
        "epilogue": ((8192, 8192, 8192), (4096, 4096, 4096)),
        "skew": ((8192, 8192, 8192), (4096, 4096, 4096)),
    }[args.probe]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shape] if args.shape else own
    probes = {"launch": launch, "split-k": split_k, "decode": decode, "flush": flush, "fp8": fp8}
    probes["triton-split"] = triton_split
    probes["ptx-decode"] = ptx_decode
    probes["floor"] = floor
    probes["rotate"] = rotate
    probes["m256"] = m256
    probes["uniform"] = uniform
    probes["epilogue"] = epilogue
    probes["skew"] = skew
    probes[args.probe](shapes)


if __name__ == "__main__":
    main()
