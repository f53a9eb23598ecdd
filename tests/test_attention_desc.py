"""The Triton descriptor attention kernel (suite.triton.attention_desc), beyond the registry-wide contract tests and
tests/test_attention.py's GPU sweep (which takes every registered attention kernel, this one included):

* CPU: the kernel in the interpreter at small sizes, at every depth: odd lengths, GQA, causal (bottom-right) with
  sq > skv (fully masked rows written as zeros over a NaN-poisoned output) and sq < skv, non-causal;
* sm_90, compiled without a GPU: wgmma fed by TMA on mbarriers (the module's sass_requires), no local memory, wgmma not
  serialized, within a block's shared memory, at both head dims, causal and not, every depth; and the kernel without
  descriptors (the tutorial row, which shares it) within the same generic rules.
"""

import pytest
import torch
from conftest import HAS_GPU

from suite.problems import PROBLEMS
from suite.registry import variants
from suite.triton import attention, attention_desc
from suite.validate import validate

ATTENTION = PROBLEMS["attention"]
CPU = torch.device("cpu")


def _variant():
    return next(v for v in variants("attention") if v.kernel_ref == "suite.triton.attention_desc:KERNEL")


@pytest.mark.skipif(HAS_GPU, reason="the interpreter runs only where there is no GPU (with one, the kernel compiles)")
@pytest.mark.parametrize(
    "size, stages",
    [
        ((1, 4, 1, 150, 40, 64, 1), 2),  # causal sq > skv: rows 0 .. 109 see no key; 4 query heads per KV head
        ((2, 4, 2, 70, 130, 128, 1), 3),  # causal sq < skv, d = 128, two batches
        ((1, 3, 1, 65, 129, 64, 0), 1),  # non-causal, odd lengths, a head's last box cut short
        ((1, 2, 2, 200, 200, 64, 1), 4),  # no GQA, causal square: masked and unmasked blocks, the ring wraps
    ],
)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_in_the_interpreter(size, stages, dtype):
    result = validate(_variant(), stages, size, seed=11, device=CPU, dtype=dtype)
    assert result.check.valid, result.check.message
    sq, skv = size[3], size[4]
    if size[-1] and sq > skv:
        masked = result.out[:, :, : sq - skv]
        assert torch.equal(masked, torch.zeros_like(masked))
        assert result.out[:, :, sq - skv :].abs().amax(-1).gt(0).all()


def test_bad_depth_is_refused():
    q = torch.randn(1, 2, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        attention_desc.DescAttention((q, q.clone(), q.clone(), False), torch.empty_like(q), 9)


def _spec(dtype: str, d: int, causal: bool, stages: int, desc: bool = True) -> dict:
    bm, bn = attention.BLOCK_M, attention.BLOCK_N
    box = {"q_ptr": bm, "k_ptr": bn, "v_ptr": bn, "o_ptr": bm}
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_DIM": d, "CAUSAL": causal, "STAGES": stages, "DESC": desc}
    return {
        "fn": "suite.triton.attention:attention_fwd_kernel",
        "signature": {
            **{name: f"tensordesc<{dtype}[1,{rows},{d}]>" if desc else f"*{dtype}" for name, rows in box.items()},
            **{name: "i32" for name in ("HQ", "GROUP", "SQ", "SKV")},
            "qk_scale": "fp32",
            **{name: "constexpr" for name in meta},
        },
        "constexprs": meta,
        "aligned": [] if desc else list(box),
        "options": {"num_warps": attention.NUM_WARPS, "num_stages": stages},
    }


@pytest.mark.skipif(HAS_GPU, reason="compiled without a GPU on the CPU machines; on a GPU the rows compile")
def test_compiles_for_sm90():
    from sm90_compile import assert_fits_sm90, compile_sm90

    cases = [("bf16", 128, True, s) for s in attention.STAGES]
    cases += [("fp16", 64, False, max(attention.STAGES)), ("bf16", 128, False, 2)]
    got = compile_sm90([_spec(*case) for case in cases])
    for case, g in zip(cases, got):
        assert_fits_sm90(g, attention_desc.KERNEL.sass_minimums(), case)
    # the same kernel without DESC (the tutorial row) still builds within the generic rules
    (plain,) = compile_sm90([_spec("bf16", 128, True, 3, desc=False)])
    assert_fits_sm90(plain, attention.KERNEL.sass_minimums(), "tutorial")
    assert plain["sass_sha256"] not in {g["sass_sha256"] for g in got}
