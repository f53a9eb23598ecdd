"""A GEMM launcher's result on a poisoned C against the fp64 reference, then again bit for bit (for the GPU tests of
the schedules that fix partial tiles up)."""

import torch

from suite.problems import GEMM


def valid_twice(launch, out: torch.Tensor, inputs, dtype: str, what) -> None:
    """``launch`` writes ``out`` (poisoned first) within the problem's tolerance of the fp64 reference, and a second
    call writes the same bits."""
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    check = GEMM.check(out, GEMM.reference(inputs), dtype)
    assert check.valid, (what, check.message)
    first = out.clone()
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    assert torch.equal(out, first), (what, "not bit-reproducible")
