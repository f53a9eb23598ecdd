"""Bad input raises ValueError naming the rule, before anything is compiled or launched: rules of one kernel module
beyond what tests/test_variants.py checks for every registered variant (its problem's bad-input table, its module's
own rules, unknown stage counts, host tensors for the NVRTC kernels)."""

import pytest
import torch

from suite.ptx import gemm as pgemm
from suite.ptx import vector as pvector
from suite.ptx import vector_bulk as pbulk
from suite.triton import vector as tvector


def _f32(n, offset=0):
    return torch.randn(n + offset)[offset:]


@pytest.mark.parametrize("mod", [pvector, pbulk, tvector], ids=["ptx", "ptx-bulk", "triton"])
@pytest.mark.parametrize(
    "x, y, rule",
    [
        (torch.randn(8, dtype=torch.float64), torch.empty(8), "dtype torch.float32"),
        (torch.randn(4, 4), torch.empty(4, 4), "rank 1"),
        (torch.randn(16)[::2], torch.empty(8), "contiguous"),
        (_f32(8, offset=1), torch.empty(8), "16-byte boundary"),
        (torch.randn(8), torch.empty(9), r"shape \(8,\)"),
        (torch.randn(8), torch.empty(8, dtype=torch.float16), "dtype torch.float32"),
    ],
)
def test_vector_rules(mod, x, y, rule):
    with pytest.raises(ValueError, match=rule):
        mod.Scale2(x, y, 2)


@pytest.mark.parametrize("mod", [pvector, pbulk, tvector], ids=["ptx", "ptx-bulk", "triton"])
def test_vector_unknown_stages(mod):
    with pytest.raises(ValueError, match="stages must be one of"):
        mod.Scale2(torch.randn(8), torch.empty(8), 9)
    with pytest.raises(ValueError, match="stages must be one of"):
        mod.Scale2(torch.randn(8), torch.empty(8), 0, mod.depth(4096))


def test_vector_configurations_are_checked():
    with pytest.raises(ValueError, match="multiple of threads x 16 B = 2048"):
        pvector.Config(tile_bytes=1024, threads=128, schedule=pvector.BANDWIDTH.schedule)
    with pytest.raises(ValueError, match="multiple of consumer threads x 16 B = 2048"):
        pbulk.depth(3072)


def test_ptx_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        pvector.Scale2(torch.randn(8), torch.empty(8), 2)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        pbulk.Scale2(torch.randn(8), torch.empty(8), 2, pbulk.depth(2048))
    a, b, c = torch.randn(16, 16).half(), torch.randn(16, 16).half(), torch.empty(16, 16).half()
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        pgemm.Gemm(a, b, c, 3)


def _h(*shape):
    return torch.randn(*shape).half()


def test_ptx_gemm_k_multiple_of_8():
    with pytest.raises(ValueError, match="K must be a multiple of 8"):
        pgemm.check_inputs(_h(16, 12), _h(12, 16), _h(16, 16), 3)


def test_gemm_unknown_stages():
    with pytest.raises(ValueError, match="stages must be one of"):
        pgemm.Gemm(_h(16, 16), _h(16, 16), _h(16, 16), 0)


def _meta(*shape):
    """A tensor with a shape and no storage: the size rules are checked before anything touches memory."""
    return torch.empty(*shape, dtype=torch.float16, device="meta")


@pytest.mark.parametrize(
    "m, n, k",
    [
        (pgemm.MAX_DIM + 1, 8, 8),  # M + a tile would pass 2^31 in the row guards and the epilogue
        (8, pgemm.MAX_DIM + 8, 8),
        (8, 8, pgemm.MAX_DIM + 1 - (pgemm.MAX_DIM + 1) % 8 + 8),  # K (a multiple of 8) past the limit: k0 + row wraps
        (2**31 - 8, 8, 8),
    ],
)
def test_ptx_gemm_refuses_dimensions_whose_indices_would_wrap(m, n, k):
    with pytest.raises(ValueError, match=r"M, N and K must each be <= 2\^31 - 1 - 256 = 2147483391"):
        pgemm.check_inputs(_meta(m, k), _meta(k, n), _meta(m, n), 3)


def test_ptx_gemm_accepts_the_largest_dimension_and_refuses_a_grid_past_2_31():
    big = pgemm.MAX_DIM - pgemm.MAX_DIM % 8  # K must also be a multiple of 8
    with pytest.raises(ValueError, match="must be a CUDA tensor"):  # every size rule passed; only the device is wrong
        pgemm.check_inputs(_meta(big, 8), _meta(8, 8), _meta(big, 8), 3)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        pgemm.check_inputs(_meta(8, big), _meta(big, 8), _meta(8, 8), 3)
    m, n = 2**16 * 128, 2**15 * 256  # 2^31 tiles
    with pytest.raises(ValueError, match=r"the grid, ceil\(M/128\) \* ceil\(N/256\) blocks, must be <= 2\^31 - 1"):
        pgemm.check_inputs(_meta(m, 8), _meta(8, n), _meta(m, n), 3)


def test_overlap_is_by_bytes_and_canonical_keeps_the_memory():
    """check_no_overlap refuses any shared byte and takes neighbours; canonical gives a size-1 dimension the stride
    its shape implies, as a view of the same memory (and leaves a tensor already so as it is)."""
    from suite.checks import canonical, check_no_overlap

    buf = torch.randn(32)
    check_no_overlap("y", buf[16:], ("x", buf[:16]))  # adjacent: apart
    for y in (buf[15:31], buf[:16], buf[8:9]):
        with pytest.raises(ValueError, match="y must not overlap x"):
            check_no_overlap("y", y, ("x", buf[:16]))
    row = torch.randn(1, 20)[:, :16]
    view = canonical(row)
    assert row.stride() == (20, 1) and view.stride() == (16, 1)
    assert view.data_ptr() == row.data_ptr() and torch.equal(view, row)
    plain = torch.randn(3, 4)
    assert canonical(plain) is plain


def test_operands_come_back_with_the_strides_of_their_shape():
    """What the launchers build descriptors from: a batch of one cut from a wider tensor (contiguous to torch, its
    stride that of the wider one) comes back from attention_operands with the strides its shape gives, as A and C
    of a 1 x K GEMM do from gemm_operands; the same memory."""
    from suite.attention_problem import attention_operands
    from suite.checks import gemm_operands

    q = torch.randn(1, 3, 40, 64).bfloat16()[:, :2]
    k, v = (torch.randn(1, 2, 56, 64).bfloat16()[:, :1] for _ in range(2))
    out = torch.empty(1, 3, 40, 64).bfloat16()[:, :2]
    ops = attention_operands((q, k, v, True), out)
    assert q.is_contiguous() and q.stride(0) == 3 * 40 * 64
    assert [t.stride(0) for t in (ops.q, ops.k, ops.v, ops.out)] == [2 * 40 * 64, 56 * 64, 56 * 64, 2 * 40 * 64]
    assert [t.data_ptr() for t in (ops.q, ops.out)] == [q.data_ptr(), out.data_ptr()]
    a, c = torch.randn(1, 40).half()[:, :32], torch.empty(1, 24).half()[:, :16]
    ops = gemm_operands((a, torch.randn(32, 16).half()), c)
    assert (ops.a.stride(), ops.c.stride()) == ((32, 1), (16, 1)) and ops.c.data_ptr() == c.data_ptr()
