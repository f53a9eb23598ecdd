"""A ceiling made of several library calls: the faster of them, per shape.

The driver takes every ratio of a job against one ceiling row. Where two libraries compete for that place (attention:
FlashAttention and cuDNN behind torch's scaled_dot_product_attention), ``faster_of`` makes one library op of them:
its factory, at the first build for a shape, builds every candidate that accepts the inputs, times each on them
(triton.testing.do_bench, outside anything the driver times, writing a scratch output) and keeps the faster; every
build at that shape returns the chosen one's callable, whose ``info`` names it. Without a GPU
nothing is timed: the first candidate that accepts the inputs is the one.
"""

from __future__ import annotations

from collections.abc import Callable

from suite.info import KernelInfo

CHOICE_MS = 25  # do_bench's budget per candidate: enough to tell two kernels apart by more than their noise


def _key(inputs, out) -> tuple:
    """What the choice depends on: every input's shape, dtype and device (a non-tensor input, such as a flag, as
    itself), and the output's."""

    def one(x):
        shape = getattr(x, "shape", None)
        return (tuple(shape), str(x.dtype), str(x.device)) if shape is not None else x

    return tuple(one(x) for x in inputs) + (one(out),)


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is the GPU running out of memory (torch's OutOfMemoryError is a RuntimeError, as a library's
    "no kernel for these inputs" is; so are cuDNN's and cuBLAS's ALLOC_FAILED statuses): a failure to report, never a
    candidate's refusal."""
    text = str(e)
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in text.lower() or "ALLOC_FAILED" in text


def faster_of(candidates: dict[str, Callable]) -> Callable:
    """One LibraryOp ``op(inputs, out)`` from several, by name: the faster of those that accept the inputs (a
    candidate refuses with ValueError, or with RuntimeError where the library has no kernel for them, but not for
    want of GPU memory); ValueError naming every refusal when none accepts. The choice is made once per shape (the
    first build at it) and kept, so that every later build of the op at that shape (the validated one, the timed
    one) runs and names the same candidate."""
    chosen_for: dict[tuple, tuple[str, str]] = {}

    def op(inputs, out):
        key = _key(inputs, out)
        if key not in chosen_for:
            chosen_for[key] = _choose(candidates, inputs, out)
        chosen, config = chosen_for[key]
        fn = candidates[chosen](inputs, out)
        run = lambda: fn()  # noqa: E731  (a callable of its own, to carry the info)
        run.info = KernelInfo(config=config)
        return run

    return op


def _choose(candidates: dict[str, Callable], inputs, out) -> tuple[str, str]:
    """(the chosen candidate's name, the config line saying why). On a GPU every candidate that accepts the inputs is
    timed writing a scratch output, so that ``out``'s first write (a library op may write it on its first call only,
    suite.attention_sdpa) stays the caller's and the caller's poison check sees it."""
    timing = getattr(out, "device", None) is not None and out.device.type == "cuda"
    if timing:
        import torch

        target = torch.empty_like(out)
    else:
        target = out
    built, refusals = {}, []
    for name, candidate in candidates.items():
        try:
            built[name] = candidate(inputs, target)
        except (ValueError, RuntimeError) as e:
            if out_of_memory(e):  # not a refusal of these inputs: the GPU had no room, which the row must say
                raise
            refusals.append(f"{name}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
    if not built:
        raise ValueError("no candidate accepts these inputs (" + "; ".join(refusals) + ")")
    if timing and len(built) > 1:
        from triton.testing import do_bench

        times = {name: float(do_bench(fn, warmup=5, rep=CHOICE_MS)) for name, fn in built.items()}
        chosen = min(times, key=times.get)
        how = "the faster of " + ", ".join(f"{n} ({t * 1e3:.0f} us)" for n, t in times.items())
    else:
        chosen = next(iter(built))
        how = "the first that accepts the inputs" + ("" if timing else " (nothing timed without a GPU)")
    return chosen, f"{chosen}: {how}" + (f"; refused: {'; '.join(refusals)}" if refusals else "")
