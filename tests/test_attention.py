"""The attention problem's own rules and kernels, beyond what the registry-wide tests check for every variant:

* CPU: the size label and parser, the FLOP count against a brute-force count of the kept pairs, the reference against
  torch's SDPA math path (and its bottom-right mask against torch's own lower-right causal bias), a fully masked row
  written as zeros, the Triton kernel in the interpreter on those cases, ``suite.ceilings.faster_of``;
* GPU (marked ``gpu``): every attention kernel at every stage count and dtype on fresh inputs, poisoned outputs, at
  sizes larger than the edge sizes: odd lengths, GQA, causal with sq > skv (fully masked rows) and sq < skv.
"""

import pytest
import torch
import torch.nn.functional as F
from conftest import HAS_GPU

from suite.attention_problem import kept_pairs
from suite.kernel import LibraryOp
from suite.problems import PROBLEMS
from suite.registry import variants
from suite.validate import validate

ATTENTION = PROBLEMS["attention"]
CPU = torch.device("cpu")


@pytest.mark.parametrize("size", ATTENTION.edge_sizes + ATTENTION.default_sizes)
def test_shape_label_parses_back(size):
    assert ATTENTION.parse_size(ATTENTION.shape(size)) == size
    assert " " not in ATTENTION.shape(size)


@pytest.mark.parametrize(
    "text, rule",
    [
        ("4x32x8x4096x4096", "attention size"),
        ("4x32x8x0x4096x128", ">= 1"),
        ("a", "attention size"),
        ("4x32x8x4096x4096x128-full", "attention size"),
        ("1x4x3x64x64x64", "HQ must be a multiple of HKV"),  # the operands' rules a size alone decides, at parse
        ("1x4x2x64x64x65-causal", r"D \(head_dim\) must be one of \(64, 128\)"),
    ],
)
def test_bad_size_text_is_refused(text, rule):
    with pytest.raises(ValueError, match=rule):
        ATTENTION.parse_size(text)


@pytest.mark.parametrize("sq, skv", [(1, 1), (7, 7), (5, 9), (9, 5), (64, 200), (200, 64)])
def test_work_counts_the_pairs_the_mask_keeps(sq, skv):
    rows = torch.arange(sq)[:, None]
    keys = torch.arange(skv)[None, :]
    assert kept_pairs(sq, skv, True) == int((keys <= rows + skv - sq).sum())
    assert kept_pairs(sq, skv, False) == sq * skv
    assert ATTENTION.work((2, 4, 2, sq, skv, 64, 1)) == 4 * 2 * 4 * 64 * kept_pairs(sq, skv, True)


def test_causal_work_is_half_plus_the_diagonal_at_square_lengths():
    s = 4096
    assert ATTENTION.work((1, 1, 1, s, s, 128, 1)) == 4 * 128 * (s * s / 2 + s / 2)


@pytest.mark.parametrize("size", [(2, 4, 2, 37, 37, 64, 1), (1, 6, 3, 20, 51, 128, 0), (1, 2, 2, 33, 70, 64, 1)])
def test_reference_agrees_with_torch(size):
    """Non-causal and causal at sq == skv against SDPA's math path; causal at sq < skv against torch's own lower-right
    causal bias, materialized: the problem's mask is FlashAttention's bottom-right one."""
    q, k, v, causal = ATTENTION.make_inputs(size, 3, CPU, "bf16")
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    sq, skv = q.shape[2], k.shape[2]
    if causal and sq != skv:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(sq, skv)._materialize(CPU)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(ATTENTION.reference(ATTENTION.make_inputs(size, 3, CPU, "bf16")), expected)


def test_a_fully_masked_row_is_zero_in_the_reference():
    size = (1, 2, 1, 50, 20, 64, 1)  # rows 0 .. 29 see no key
    ref = ATTENTION.reference(ATTENTION.make_inputs(size, 0, CPU, "fp16"))
    assert torch.equal(ref[:, :, :30], torch.zeros_like(ref[:, :, :30]))
    assert ref[:, :, 30:].abs().amin(-1).gt(0).all()  # every other row has something


def _flash_rounding(inputs, block: int = 128, drop_last_block: bool = False) -> torch.Tensor:
    """O as a FlashAttention kernel computes it (non-causal, no GQA): scores and the online softmax in fp32 over blocks
    of keys, each block's P rounded to the input type for the P V product, O rounded at the end; or with the last
    block of keys left out (a wrong key block)."""
    q, k, v, _ = inputs
    t, d, skv = q.dtype, q.shape[-1], k.shape[2]
    s = (q.float() @ k.float().transpose(-1, -2)) / d**0.5
    m = torch.full(s.shape[:-1] + (1,), -float("inf"))
    row_sum, acc = torch.zeros_like(m), torch.zeros(q.shape)
    for j in range(0, skv - block if drop_last_block else skv, block):
        sb = s[..., j : j + block]
        new_m = torch.maximum(m, sb.amax(-1, keepdim=True))
        p, alpha = torch.exp(sb - new_m), torch.exp(m - new_m)
        row_sum = row_sum * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p.to(t).float() @ v[..., j : j + block, :].float()
        m = new_m
    return (acc / row_sum).to(t)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_tolerance_takes_flash_rounding_and_catches_a_wrong_key_block(dtype):
    """The tolerance's derivation (attention_problem.py): the one rounding a FlashAttention kernel adds, P to 16 bits,
    passes over 2^18 outputs of order 1 at 16k keys, while leaving out one 64-key block of the 16k fails."""
    size = (1, 4, 4, 512, 16384, 128, 0)
    inputs = ATTENTION.make_inputs(size, 11, CPU, dtype)
    ref = ATTENTION.reference(inputs)
    good = ATTENTION.check(_flash_rounding(inputs), ref, dtype)
    assert good.valid, good.message
    wrong = ATTENTION.check(_flash_rounding(inputs, block=64, drop_last_block=True), ref, dtype)
    assert not wrong.valid
    # the row's note says by how much, in one line: the elements that missed, the worst difference and its bound
    assert "\n" not in wrong.message and "Mismatched elements" in wrong.message, wrong.message
    assert "Greatest absolute difference" in wrong.message and "allowed" in wrong.message, wrong.message


def _triton():
    return next(v for v in variants("attention") if v.backend == "triton")


@pytest.mark.skipif(HAS_GPU, reason="the interpreter runs only where there is no GPU (with one, the kernel compiles)")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("size", [(1, 4, 1, 150, 40, 64, 1), (2, 4, 2, 70, 130, 128, 1), (1, 3, 1, 65, 129, 64, 0)])
def test_triton_kernel_in_the_interpreter(size, dtype):
    """Fully masked rows (zeros over a NaN-poisoned output), GQA with 2 and 4 query heads per KV head, odd lengths."""
    result = validate(_triton(), 2, size, seed=5, device=CPU, dtype=dtype)
    assert result.check.valid, result.check.message
    sq, skv = size[3], size[4]
    if size[-1] and sq > skv:
        masked = result.out[:, :, : sq - skv]
        assert torch.equal(masked, torch.zeros_like(masked))


# ---------------------------------------------------------------------------------------------------------------
# GPU: every kernel, every depth and dtype, at sizes past the edge sizes
# ---------------------------------------------------------------------------------------------------------------

GPU_SIZES = (
    (2, 32, 8, 1000, 1000, 128, 1),  # Llama-3-8B heads, odd length, causal
    (1, 8, 8, 513, 2047, 64, 0),  # no GQA, sq < skv, d = 64
    (1, 8, 2, 700, 300, 128, 1),  # causal sq > skv: rows 0 .. 399 fully masked
    (3, 4, 1, 257, 1100, 64, 1),  # causal sq < skv, 4 query heads per KV head
)


def _gpu_cases():
    for v in variants("attention"):
        if isinstance(v.kernel, LibraryOp) and not v.ceiling and not v.baseline:
            continue
        for dtype in v.dtypes:
            for stages in v.stages_for(dtype):
                for size in GPU_SIZES:
                    case = f"{v.label}-{dtype}-s{stages}-{ATTENTION.shape(size)}"
                    yield pytest.param(v, dtype, stages, size, id=case)


@pytest.mark.gpu
@pytest.mark.parametrize("variant, dtype, stages, size", list(_gpu_cases()))
def test_gpu_kernel_matches_the_reference(variant, dtype, stages, size):
    if why := variant.skip_reason():
        pytest.skip(why)
    if rule := variant.kernel.refuses(size, dtype):
        pytest.skip(rule)
    seed = hash((variant.label, dtype, stages, size)) % 2**31
    result = validate(variant, stages, size, seed=seed, device=torch.device("cuda"), dtype=dtype)
    assert result.check.valid, (variant.label, dtype, stages, ATTENTION.shape(size), result.check.message)
    sq, skv = size[3], size[4]
    if size[-1] and sq > skv:
        masked = result.out[:, :, : sq - skv]
        assert torch.equal(masked, torch.zeros_like(masked))


def _own_kernels():
    for v in variants("attention"):
        if not isinstance(v.kernel, LibraryOp):
            yield pytest.param(v, id=v.label)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's NumPy on the poisoned head's own rows
@pytest.mark.parametrize("variant", list(_own_kernels()))
def test_a_head_reads_no_other_heads_keys_or_values(variant):
    """A key block past a head's skv must read zeros, not the next head's rows: P is 0 there, but 0 times an inf or
    NaN is NaN. With the second KV head's K and V non-finite, the query heads of the first stay within tolerance.
    Every kernel of the suite, at its deepest ring, on a GPU; without one, those the interpreter runs."""
    if why := variant.skip_reason():
        pytest.skip(why)
    device = torch.device("cuda") if HAS_GPU else CPU
    dtype = variant.dtypes[0]
    size = (2, 4, 2, 70, 130, 64, 0)  # 130 keys: a head's last 64- or 128-key block runs into the next head's rows
    if rule := variant.kernel.refuses(size, dtype):
        pytest.skip(rule)
    q, k, v, causal = ATTENTION.make_inputs(size, 17, device, dtype)
    ref = ATTENTION.reference((q, k, v, causal))
    k[:, 1], v[:, 1] = float("inf"), float("nan")  # the second KV head of each batch, its first rows included
    out = torch.full_like(q, float("nan"))
    variant.kernel.launch((q, k, v, causal), out, variant.stages_for(dtype)[-1])()
    own = ATTENTION.check(out[:, :2], ref[:, :2], dtype)  # query heads 0 and 1 of each batch: KV head 0's (GQA)
    assert own.valid, (variant.label, own.message)


def test_faster_of_takes_a_candidate_that_accepts_and_names_every_refusal():
    from suite.ceilings import faster_of

    def refuse(inputs, out):
        raise ValueError("not this shape")

    def double(inputs, out):
        return lambda: out.copy_(inputs[0] * 2)

    x, out = torch.randn(5), torch.full((5,), float("nan"))
    run = faster_of({"a": refuse, "b": double})((x,), out)
    run()
    assert torch.equal(out, x * 2) and run.info.config.startswith("b:") and "a: not this shape" in run.info.config
    with pytest.raises(ValueError, match="no candidate accepts these inputs .a: not this shape; c: not this shape"):
        faster_of({"a": refuse, "c": refuse})((x,), out)


def test_faster_of_chooses_once_per_shape_and_every_build_runs_the_choice():
    """The validated build and the timed build of a ceiling must be the same candidate: the choice is made at the
    first build for a shape and kept; a new shape is chosen afresh."""
    from suite.ceilings import faster_of

    built = []

    def candidate(name, factor):
        def make(inputs, out):
            built.append(name)
            return lambda: out.copy_(inputs[0] * factor)

        return make

    op = faster_of({"a": candidate("a", 2), "b": candidate("b", 3)})
    x, out = torch.randn(5), torch.full((5,), float("nan"))
    first = op((x,), out)
    assert built == ["a", "b", "a"]  # every candidate built for the choice, then the chosen one for the caller
    again = op((x,), out)
    assert built[3:] == ["a"] and again.info.config == first.info.config  # no new choice at the same shape
    again()
    assert torch.equal(out, x * 2)
    op((torch.randn(7),), torch.empty(7))
    assert built[4:] == ["a", "b", "a"]  # another shape: chosen afresh


def test_faster_of_reports_running_out_of_gpu_memory_instead_of_counting_it_a_refusal():
    """torch's OutOfMemoryError is a RuntimeError, as a library's "no kernel for these inputs" is: the first must fail
    the ceiling's row, not pass over the candidate to a slower one."""
    from suite.ceilings import faster_of

    def no_room(inputs, out):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def no_kernel(inputs, out):
        raise RuntimeError("No available kernel. Aborting execution.")

    def double(inputs, out):
        return lambda: out.copy_(inputs[0] * 2)

    x, out = torch.randn(5), torch.full((5,), float("nan"))
    with pytest.raises(torch.cuda.OutOfMemoryError):
        faster_of({"a": no_room, "b": double})((x,), out)
    run = faster_of({"a": no_kernel, "b": double})((x,), out)
    assert run.info.config.startswith("b:") and "a: No available kernel" in run.info.config

    def cudnn_alloc(inputs, out):
        raise RuntimeError("cuDNN Frontend error: CUDNN_STATUS_ALLOC_FAILED")

    with pytest.raises(RuntimeError, match="ALLOC_FAILED"):
        faster_of({"a": cudnn_alloc, "b": double})((x,), out)


def _fake_flash_attn_4(monkeypatch):
    """A stand-in for the flash-attn-4 package's public call, as its docs state it: q (b, sq, hq, d), k and v
    (b, skv, hkv, d) with hq a multiple of hkv, the last dimension contiguous, scale 1 / sqrt(d), the causal mask
    aligned bottom-right, a row that sees no key written as zeros; returns (out, lse)."""
    import math
    import sys
    import types

    def flash_attn_func(q, k, v, causal=False, softmax_scale=None):
        assert all(t.stride(-1) == 1 for t in (q, k, v)), "the head dimension must be contiguous"
        b, sq, hq, d = q.shape
        skv, hkv = k.shape[1], k.shape[2]
        assert k.shape == v.shape == (b, skv, hkv, d) and hq % hkv == 0
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        kf, vf = (t.repeat_interleave(hq // hkv, dim=1) for t in (kf, vf))
        s = qf @ kf.transpose(-1, -2) * (softmax_scale or 1 / math.sqrt(d))
        if causal:
            rows, keys = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
            s = s.masked_fill(keys > rows + skv - sq, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        return (p @ vf).to(q.dtype).transpose(1, 2), lse

    package, cute = types.ModuleType("flash_attn"), types.ModuleType("flash_attn.cute")
    cute.flash_attn_func = flash_attn_func
    package.cute = cute
    monkeypatch.setitem(sys.modules, "flash_attn", package)
    monkeypatch.setitem(sys.modules, "flash_attn.cute", cute)


@pytest.mark.parametrize("size", [(1, 4, 2, 70, 45, 64, 1), (2, 2, 1, 33, 90, 128, 0), (1, 4, 4, 64, 64, 64, 1)])
def test_the_flashattention_4_row_hands_the_library_its_own_layout(monkeypatch, size):
    """The FA4 row's adapter (b x h x s x d in, the library's b x s x h x d views, GQA, the bottom-right causal mask,
    the result back into the problem's output) against the problem's fp64 reference, through a stand-in of the
    library's call: on CPU the row's own code runs, but not the library."""
    from suite import attention_fa4

    _fake_flash_attn_4(monkeypatch)
    monkeypatch.setattr(attention_fa4, "_installed_version", lambda: "9.9.9")  # the stand-in's, installed or not
    (variant,) = [v for v in variants("attention") if v.backend == "fa4"]
    result = validate(variant, None, size, seed=3, device=CPU, dtype="bf16")
    assert result.check.valid, result.check.message
    assert result.fn.info.config.startswith("flash-attn-4 9.9.9 flash_attn_func on (b, s, h, d) views")


def test_the_flashattention_4_rows_version_is_the_installed_packages(monkeypatch):
    """The row's config names the installed package's version, or says it is unknown (an import path without the
    package's metadata)."""
    import importlib.metadata

    from suite import attention_fa4

    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"flash-attn-4": "4.0.0b36"}[name])
    assert attention_fa4._installed_version() == "4.0.0b36"

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert attention_fa4._installed_version() == "(version unknown)"


def test_the_flashattention_4_row_says_how_to_get_the_package(monkeypatch):
    import importlib.util

    from suite import attention_fa4

    monkeypatch.setattr(attention_fa4.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(attention_fa4.torch.cuda, "get_device_capability", lambda: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert (
        attention_fa4.available() == "the optional flash-attn-4 package is not installed (pip install 'pipesuite[fa4]')"
    )
    monkeypatch.setattr(attention_fa4.torch.cuda, "get_device_capability", lambda: (8, 0))
    assert "compute capability >= 9.0" in attention_fa4.available()


def test_a_shape_flashattention_4_has_no_kernel_for_is_refused_not_failed(monkeypatch):
    """What the library raises for a shape it cannot run (an assertion of its own, NotImplementedError) is the row's
    refusal, a ValueError naming it; running out of GPU memory stays a failure."""
    import sys

    from suite import attention_fa4

    _fake_flash_attn_4(monkeypatch)
    size = (1, 2, 1, 64, 64, 64, 0)
    inputs = ATTENTION.make_inputs(size, 1, CPU, "bf16")
    for error, expected in (
        (AssertionError("head_dim must be 64, 96 or 128"), ValueError),
        (NotImplementedError("sm80 is not supported"), ValueError),
        (torch.cuda.OutOfMemoryError("CUDA out of memory"), torch.cuda.OutOfMemoryError),
    ):

        def raising(*a, error=error, **k):
            raise error

        monkeypatch.setattr(sys.modules["flash_attn.cute"], "flash_attn_func", raising)
        with pytest.raises(expected, match="no kernel for these inputs" if expected is ValueError else "memory"):
            attention_fa4.fa4(inputs, ATTENTION.make_output(inputs))


def test_a_broken_flash_attn_install_is_the_gates_reason_not_a_crash(monkeypatch):
    import importlib.util

    from suite import attention_fa4

    def broken(name):
        raise ImportError("libcudart.so.12: cannot open shared object file")

    monkeypatch.setattr(attention_fa4.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(attention_fa4.torch.cuda, "get_device_capability", lambda: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", broken)
    assert attention_fa4.available().startswith("importing flash_attn failed (ImportError: libcudart.so.12")


def test_a_flash_attn_found_but_not_importable_is_the_gates_reason(monkeypatch):
    """flash_attn.cute found on the path while its own imports fail (the CuTe DSL's cutlass package missing, as in a
    --target install reached through PYTHONPATH): the row is not run, saying why, rather than failing every shape."""
    import importlib
    import importlib.util

    from suite import attention_fa4

    def no_cutlass(name):
        raise ModuleNotFoundError("No module named 'cutlass'")

    monkeypatch.setattr(attention_fa4.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(attention_fa4.torch.cuda, "get_device_capability", lambda: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(importlib, "import_module", no_cutlass)
    assert attention_fa4.available() == (
        "importing flash_attn.cute failed (ModuleNotFoundError: No module named 'cutlass')"
    )


@pytest.mark.skipif(HAS_GPU, reason="describes the builds without a GPU; on a GPU the rows are timed instead")
def test_a_cpu_row_is_described_by_its_own_head_dims_build():
    """Without a GPU each PTX row reports the build its size launches: a stage of K and V tiles is half as large at
    d = 64 as at d = 128, in its resources and its config."""
    from suite.driver import bench

    sizes = ATTENTION.cpu_sizes
    assert {s[5] for s in sizes} == {64, 128}
    ptx = [v for v in variants("attention", "ptx")]
    opts = bench.Options(
        problems=("attention",),
        sizes={"attention": tuple(sizes)},
        variants=tuple(v.label for v in ptx),
        dtypes=("bf16",),
    )
    rows = [r for r in bench.run(opts, on_gpu=False, progress=False) if r["backend"] == "ptx"]
    by_label = {v.label: v.kernel for v in ptx}
    assert len(rows) == len(sizes) * sum(len(v.stages) for v in ptx)
    for r in rows:
        d = ATTENTION.parse_size(r["shape"])[5]
        kernel = by_label[f"ptx:{r['variant']}"]
        assert r["built_for"] and r["smem_per_stage"] == kernel.stage_bytes_for(d), r
        assert f"d={d}," in r["config"], r["config"]
