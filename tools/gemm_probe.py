"""What the GEMM probes (tools/tune_gemm_ptx.py, tools/tune_gemm_mid.py, tools/probe_triton_tiles.py) share: the
shapes given on the command line, every candidate module built once, in parallel threads, before anything is timed
(NVRTC releases the GIL; a module compiled on a candidate's first call would hold the GPU idle for it), and each
candidate checked against torch, then timed between two cuBLAS timings (its ratio is against their mean), each timed
as the suite times a row (``med``), so that a probe's ratios and a suite run's agree."""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from suite.driver.measure import _burst, capture_graph
from suite.driver.timing import BURST


def shapes_from_argv(default: tuple) -> tuple:
    """``--shape MxNxK ...`` (last on the line: it takes the rest), else ``default``."""
    if "--shape" not in sys.argv:
        return default
    wanted = sys.argv[sys.argv.index("--shape") + 1 :]
    return tuple(tuple(map(int, w.split("x"))) for w in wanted if "x" in w)


def _build_error(module) -> str | None:
    try:
        module.build()
    except Exception as e:  # noqa: BLE001 - its rows are listed with this error, not launched
        return f"{type(e).__name__}: {str(e)[:200]}"
    return None


def build_all(modules: dict) -> dict:
    """Build every module of ``modules`` (key -> NVRTC module) in parallel; key -> error of those that failed, each
    also printed to stderr."""
    with ThreadPoolExecutor() as pool:
        failed = {key: e for key, e in zip(modules, pool.map(_build_error, modules.values())) if e}
    for key, error in failed.items():
        print(f"build of {key} failed: {error}", file=sys.stderr)
    return failed


def fp16_problem(m: int, n: int, k: int):
    """Fresh random fp16 operands on the GPU: (a, b, c, the fp32 product rounded to fp16, cuBLAS writing c)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    return a, b, c, (a.float() @ b.float()).half(), lambda: torch.matmul(a, b, out=c)


def fp8_problem(m: int, n: int, k: int):
    """Fresh random fp8 e4m3 operands on the GPU, B given N x K, scales of 0.5 and 3: ((a, b, scale_a, scale_b), c,
    the fp32 product scaled and rounded to bf16, promoted cuBLAS writing c)."""
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.tensor(0.5, device="cuda"), torch.tensor(3.0, device="cuda")
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = (a.float() @ b.float().T * 1.5).bfloat16()
    return (
        (a, b, scale_a, scale_b),
        c,
        ref,
        lambda: torch._scaled_mm(
            a, b.T, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, use_fast_accum=False, out=c
        ),
    )


def problem(m: int, n: int, k: int, dtype: str):
    """(inputs, c, reference, cuBLAS writing c) at ``dtype``: fp16_problem's operands as (a, b), or fp8_problem's."""
    if dtype == "fp8e4m3":
        return fp8_problem(m, n, k)
    a, b, c, ref, cublas = fp16_problem(m, n, k)
    return (a, b), c, ref, cublas


def med(fn) -> float:
    """``fn``'s median milliseconds, sampled as the suite's burst timer samples a row (suite.driver.measure, without its
    NVML cool-down and retaken bursts): one call captured into a CUDA graph and replayed (eagerly where it cannot be
    captured), the L2 emptied by reading 256 MB before each call (do_bench's own flush, a write, leaves dirty lines
    that a short call then writes back, pulling every ratio towards 1), BURST.max_batches bursts of BURST.batch_ms of
    GPU time, a rest of twice a burst's time between them."""
    fn()
    torch.cuda.synchronize()
    try:
        call = capture_graph(fn).replay
    except Exception:  # noqa: BLE001 - timed eagerly, as the suite times a call it cannot capture
        call = fn
    samples, spent = [], 0.0
    for _ in range(BURST.max_batches):
        time.sleep(2 * spent)  # none before the first
        started = time.perf_counter()
        samples += _burst(call, BURST.batch_ms, "read")
        spent = time.perf_counter() - started
    return statistics.median(samples)


def checked_ratio(make_launch, c: torch.Tensor, ref: torch.Tensor, k: int, cublas) -> tuple[float | None, object]:
    """``make_launch()``'s launcher, run once on ``c`` poisoned with NaN and checked against ``ref``, then timed
    between two timings of ``cublas``: (its ratio to cuBLAS, (the launcher, its median ms)), or (None, why it
    failed)."""
    try:
        launch = make_launch()
        c.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-2 * k**0.5)
    except Exception as e:  # noqa: BLE001 - a candidate that fails is listed with why, the rest go on
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
    before, time, after = med(cublas), med(launch), med(cublas)
    return (before + after) / 2 / time, (launch, time)


def probe(title: str, candidates: list, failed: dict, c: torch.Tensor, ref: torch.Tensor, k: int, cublas, flop: int):
    """Check and time each candidate, (label, build key, make_launch, note(launcher) -> str), one whose build failed
    (its key in ``failed``) listed with the error instead; print them best first under ``title``."""
    out = []
    for label, key, make_launch, note in candidates:
        if key in failed:  # listed with its build's error, not compiled again at each shape
            out.append((label, None, f"build failed: {failed[key][:100]}"))
            continue
        ratio, got = checked_ratio(make_launch, c, ref, k, cublas)
        if ratio is None:
            out.append((label, None, got))
            continue
        launch, ms = got
        out.append((label, ratio, f"{flop / ms / 1e9:.0f} TFLOP/s, {note(launch)}"))
    width = max((len(label) for label, _, _ in out), default=0)
    print(f"\n{title}")
    for label, ratio, text in sorted(out, key=lambda r: -(r[1] or 0)):
        print(f"  {'-' if ratio is None else f'{100 * ratio:5.1f}'}  {label:{width}s} {text}")
    sys.stdout.flush()
