"""The Hopper-form attention kernel (suite/ptx/attention_sm90.cu):

* CPU: every instantiation builds for sm_90a and is Hopper's pipeline (TMA loads, mbarrier waits, chained wgmma, no
  local memory, no serialized wgmma), meets its declared ``sass_requires``; each declared fault builds to different
  machine code; every ring depth fits a block's shared memory at both head dims; bad inputs are refused before launch;
* GPU (marked ``gpu``): every stage count, dtype and head_dim against the float64 / float32 reference on fresh random
  inputs into a poisoned output, at odd lengths, GQA, causal with sq > skv (fully masked rows, which must be zeros)
  and sq < skv, several query tiles and a ring that wraps many times.
"""

import pytest
import torch

from suite.problems import PROBLEMS
from suite.ptx import attention_sm90 as mod
from suite.sass import instruction_classes, split_functions, wgmma_chain

ATTENTION = PROBLEMS["attention"]
KERNELS = {"serial": mod.KERNEL, "ping-pong": mod.KERNEL_PINGPONG}
EXPRS = [
    (form, mod.name_expression(s, d, t, kernel.pingpong))
    for form, kernel in KERNELS.items()
    for s in kernel.stages
    for d in mod.HEAD_DIMS
    for t in kernel.dtypes
]


def _module(form: str):
    return KERNELS[form].build("sm_90a")  # cached per kernel module


@pytest.mark.parametrize("form", KERNELS)
def test_build_log_has_no_serialization_warning(form):
    log = _module(form).log
    assert "C751" not in log and "serializ" not in log.lower(), log


@pytest.mark.parametrize("form, expr", EXPRS, ids=[e for _, e in EXPRS])
def test_every_instantiation_is_the_hopper_pipeline(form, expr):
    module = _module(form)
    sass = split_functions(module.sass())[module.symbols[expr]]
    classes = instruction_classes(sass)
    resources = module.resources()[expr]
    assert classes["local_memory"] == 0 and resources["local"] == 0 and resources["stack"] == 0, (expr, resources)
    for cls, least in KERNELS[form].sass_minimums().items():
        assert classes[cls] >= least, (expr, cls, classes[cls], least)
    d = int(expr.split(",")[1])
    # S = Q K^T: d / 16 k-steps; O += P V: BLOCK_N / 16 k-steps (ping-pong: each also in its prologue or after the
    # mainloop); K and V: one box per 64 columns, Q once
    copies = 2 if form == "ping-pong" else 1
    assert classes["wgmma"] == copies * (d // 16 + mod.BLOCK_N // 16), (expr, classes)
    assert classes["tma"] == 3 * d // 64, (expr, classes)
    total, closing = wgmma_chain(sass)
    assert total and closing < total, f"{expr}: every HGMMA closes its own group: ptxas serialized the wgmma"


FAULTS = [(form, f) for form, kernel in KERNELS.items() for f in kernel.faults]


@pytest.mark.parametrize("form, fault", FAULTS, ids=[f"{form}:{f.define}" for form, f in FAULTS])
def test_each_fault_builds_to_different_code(form, fault):
    healthy = _module(form)
    broken = KERNELS[form].with_defines(fault.define, stages=fault.stages).build("sm_90a")
    for stages in fault.stages:
        for expr in KERNELS[form].name_expressions(stages):
            ours = split_functions(healthy.sass())[healthy.symbols[expr]]
            theirs = split_functions(broken.sass())[broken.symbols[expr]]
            assert ours != theirs, (fault.define, expr)
    assert fault.size[3] <= mod.BLOCK_M and -(-fault.size[4] // mod.BLOCK_N) > 2 * max(fault.stages)


@pytest.mark.parametrize("d", mod.HEAD_DIMS)
def test_every_ring_depth_fits_a_block(d):
    assert all(mod.fits(s, d) for s in mod.STAGES)
    assert not mod.fits(max(mod.STAGES) + 1, 128)  # the sweep stops where the d = 128 ring stops fitting


@pytest.mark.parametrize("form", KERNELS)
def test_bad_inputs_are_refused_before_launch(form):
    kernel = KERNELS[form]
    for bad in ATTENTION.bad_inputs() + kernel.bad_inputs():
        with pytest.raises(ValueError, match=bad.rule):
            kernel.launch(bad.inputs, bad.out, kernel.stages[0])
    q = torch.randn(1, 2, 8, 64).bfloat16()
    kv = torch.randn(1, 1, 8, 64).bfloat16()
    for stages in (0, 4):
        with pytest.raises(ValueError, match="stages"):
            kernel.launch((q, kv, kv, False), torch.empty_like(q), stages)
    with pytest.raises(ValueError, match="CUDA|cuda"):
        kernel.launch((q, kv, kv, False), torch.empty_like(q), 2)
    if kernel.pingpong:  # its ring holds one tile's stage while it reads the next
        with pytest.raises(ValueError, match="stages"):
            kernel.launch((q, kv, kv, False), torch.empty_like(q), 1)


# (b, hq, hkv, sq, skv, d, causal): odd lengths, GQA, causal with fully masked rows (sq > skv) and sq < skv, several
# query tiles, a ring that wraps many times, one row and one key
GPU_SIZES = (
    (1, 2, 1, 1, 1, 64, 0),
    (1, 4, 2, 67, 67, 64, 1),
    (2, 2, 2, 45, 130, 128, 0),
    (1, 4, 1, 130, 45, 128, 1),  # rows 0 .. 84 fully masked
    (1, 8, 2, 700, 300, 128, 1),  # rows 0 .. 399 fully masked, several query tiles
    (3, 4, 1, 257, 1100, 64, 1),
    (1, 2, 1, 300, 2049, 128, 0),  # 17 key tiles: every ring wraps several times
    (2, 8, 8, 513, 513, 64, 1),
)
GPU_CASES = [
    pytest.param(form, stages, dtype, size, id=f"{form}-s{stages}-{dtype}-{ATTENTION.shape(size)}")
    for form, kernel in KERNELS.items()
    for stages in kernel.stages
    for dtype in kernel.dtypes
    for size in GPU_SIZES
]


@pytest.mark.gpu
@pytest.mark.parametrize("form, stages, dtype, size", GPU_CASES)
def test_gpu_matches_the_reference(form, stages, dtype, size):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    seed = hash((form, stages, dtype, size)) % 2**31
    inputs = ATTENTION.make_inputs(size, seed, torch.device("cuda"), dtype)
    out = torch.full_like(inputs[0], float("nan"))  # poisoned: every element must be written
    KERNELS[form].launch(inputs, out, stages)()
    torch.cuda.synchronize()
    expected = ATTENTION.reference(inputs)
    tol = ATTENTION.dtypes[dtype].tolerance
    torch.testing.assert_close(out.double(), expected.double(), rtol=tol["rtol"], atol=tol["atol"])
    sq, skv, causal = size[3], size[4], size[6]
    if causal and sq > skv:
        masked = out[:, :, : sq - skv]
        assert torch.equal(masked, torch.zeros_like(masked))  # fully masked rows are zeros, not NaN


@pytest.mark.gpu
@pytest.mark.parametrize("form", KERNELS)
def test_gpu_runs_are_repeatable_and_leave_the_inputs(form):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    size = (2, 8, 2, 1000, 1000, 128, 1)
    inputs = ATTENTION.make_inputs(size, 11, torch.device("cuda"), "bf16")
    copies = [t.clone() for t in inputs[:3]]
    first, second = torch.empty_like(inputs[0]), torch.full_like(inputs[0], float("nan"))
    KERNELS[form].launch(inputs, first, 2)()
    KERNELS[form].launch(inputs, second, 2)()
    torch.cuda.synchronize()
    assert torch.equal(first, second)
    assert all(torch.equal(a, b) for a, b in zip(copies, inputs[:3]))
