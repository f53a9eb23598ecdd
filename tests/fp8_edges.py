"""fp8 operands at the edges of e4m3 (issue 52) and a kernel's error on them against fp64, for the tests of every fp8
kernel (tests/test_triton_llm.py, tests/test_ptx_fp8_edges.py): the same inputs, the same measure."""

import torch


def fp8_edge_inputs(m, n, k, seed, device, nan=True):
    """fp8 operands at the edges (issue 52): rows of A at +-448 (e4m3's largest), a saturated column of B (a row of
    its N x K form), a zero row of A, a NaN (``nan``), and scales of 0.5 and 3.0; the rest fresh N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g)
    a[1] = 448 * torch.randn(k, generator=g).sign()
    a[2] = 0
    b[3] = 448
    if nan:
        a[4, 5] = float("nan")
    fp8 = torch.float8_e4m3fn
    return tuple(t.to(device) for t in (a.to(fp8), b.to(fp8), torch.tensor(0.5), torch.tensor(3.0)))


def cublas_promoted(inputs) -> torch.Tensor:
    """Promoted cuBLAS's C on ``inputs`` (torch._scaled_mm, use_fast_accum=False): the ceiling the fp8 rows are
    compared with."""
    a, b, sa, sb = inputs
    return torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=False)


def fp8_error(out, inputs):
    """(where C is NaN, its worst error over the finite elements) against the fp64 product of the operands,
    computed on the operands' device."""
    a, b, sa, sb = (t.double() for t in inputs)
    ref = a @ b.T * (sa * sb)
    got = out.double()
    assert torch.equal(got.isnan(), ref.isnan()), "NaN where the product has none, or none where it has one"
    finite = ~ref.isnan()
    bound = (a.abs().nan_to_num() @ b.abs().T) * (sa * sb)  # what rounding errors scale with
    return (got - ref).abs()[finite], bound[finite]
