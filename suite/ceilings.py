"""A ceiling made of several library calls: the faster of them, per shape.

The driver takes every ratio of a job against one ceiling row. Where two libraries compete for that place (attention:
FlashAttention and cuDNN behind torch's scaled_dot_product_attention), ``faster_of`` makes one library op of them:
its factory builds every candidate that accepts the inputs, times each on them (triton.testing.do_bench, outside
anything the driver times) and returns the faster's callable, whose ``info`` names the one chosen. Without a GPU
nothing is timed: the first candidate that accepts the inputs is the one.
"""

from __future__ import annotations

from collections.abc import Callable

from suite.info import KernelInfo

CHOICE_MS = 25  # do_bench's budget per candidate: enough to tell two kernels apart by more than their noise


def faster_of(candidates: dict[str, Callable]) -> Callable:
    """One LibraryOp ``op(inputs, out)`` from several, by name: the faster of those that accept the inputs (a
    candidate refuses with ValueError, or with RuntimeError where the library has no kernel for them); ValueError
    naming every refusal when none accepts."""

    def op(inputs, out):
        built, refusals = {}, []
        for name, candidate in candidates.items():
            try:
                built[name] = candidate(inputs, out)
            except (ValueError, RuntimeError) as e:
                refusals.append(f"{name}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
        if not built:
            raise ValueError("no candidate accepts these inputs (" + "; ".join(refusals) + ")")
        if out.device.type == "cuda" and len(built) > 1:
            from triton.testing import do_bench

            times = {name: float(do_bench(fn, warmup=5, rep=CHOICE_MS)) for name, fn in built.items()}
            chosen = min(times, key=times.get)
            how = "the faster of " + ", ".join(f"{n} ({t * 1e3:.0f} us)" for n, t in times.items())
        else:
            chosen = next(iter(built))
            how = "the first that accepts the inputs (nothing timed without a GPU)"
        # built afresh: a library op may write the problem's output on its first call only (suite.attention_sdpa),
        # and that call must be the caller's, not the timing's
        fn = candidates[chosen](inputs, out) if out.device.type == "cuda" and len(built) > 1 else built[chosen]
        run = lambda: fn()  # noqa: E731  (a callable of its own, to carry the info)
        run.info = KernelInfo(config=f"{chosen}: {how}" + (f"; refused: {'; '.join(refusals)}" if refusals else ""))
        return run

    return op
