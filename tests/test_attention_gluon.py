"""The Gluon warp-specialized attention kernel (suite.triton.attention_gluon), beyond the registry-wide contract tests
and tests/test_attention.py's GPU sweep (which takes every registered attention kernel, this one included). The
Triton interpreter does not run Gluon, so on CPU the kernel is compiled for sm_90 and its build checked: wgmma fed by
TMA on mbarriers (the module's sass_requires), no local memory, wgmma not serialized, within a block's shared memory,
setmaxnreg handing the producer warp its few registers, at both head dims, causal and not, every depth, every
mainloop."""

import pytest
import torch
from conftest import HAS_GPU

from suite.triton import attention_gluon as g

ELEMENT = {"bf16": "gl.bfloat16", "fp16": "gl.float16"}


def _spec(dtype: str, d: int, causal: bool, stages: int, mainloop: int = 0) -> dict:
    meta = {
        "CAUSAL": causal,
        "STAGES": stages,
        "MAINLOOP": mainloop,
        "CONSUMERS": g.CONSUMERS,
        "CONSUMER_REGS": g.CONSUMER_REGS,
        "PRODUCER_WARPS": g.PRODUCER_WARPS,
        "PRODUCER_REGS": g.PRODUCER_REGS,
        "num_warps": g.NUM_WARPS,
    }
    boxes = {"q_desc": g.BLOCK_M // g.CONSUMERS, "k_desc": g.BLOCK_N, "v_desc": g.BLOCK_N}
    return {
        "fn": "suite.triton.attention_gluon:attention_gluon_kernel",
        "gluon": True,
        "signature": {
            **{name: {"gluon_desc": [dtype, [1, rows, d], ELEMENT[dtype]]} for name, rows in boxes.items()},
            "o_ptr": f"*{dtype}",
            **{name: "i32" for name in ("HQ", "GROUP", "SQ", "SKV")},
            "qk_scale": "fp32",
            **{name: "constexpr" for name in meta},
        },
        "constexprs": meta,
        "aligned": ["o_ptr"],
        "options": {"num_warps": g.NUM_WARPS},
    }


@pytest.mark.skipif(HAS_GPU, reason="compiled without a GPU on the CPU machines; on a GPU the rows compile")
def test_compiles_for_sm90_warp_specialized():
    from sm90_compile import assert_fits_sm90, compile_sm90

    loops = (int(g.SERIAL), int(g.OVERLAP), int(g.PINGPONG))
    cases = [("bf16", 128, True, s, loop) for s in g.STAGES for loop in loops]
    cases += [("fp16", 64, False, max(g.STAGES), loop) for loop in loops[1:]] + [("bf16", 128, False, 2, 0)]
    for case, got in zip(cases, compile_sm90([_spec(*case) for case in cases])):
        dtype, d, causal, stages, _ = case
        assert_fits_sm90(got, g.KERNEL.sass_minimums(), case)
        # Q once and an S-deep ring of K and V blocks, and nothing else of size in shared memory (the barriers)
        ring = (g.BLOCK_M + 2 * stages * g.BLOCK_N) * d * 2
        assert 0 <= got["shared"] - ring < 1024, (case, got["shared"], ring)
        assert got["ptx"]["setmaxnreg"] >= 2, (case, got["ptx"])
        # every wgmma wait drains its groups (the overlapped and ping-pong mainloops' next S completes within a block)
        assert got["wgmma_waits"] and set(got["wgmma_waits"]) == {"0"}, (case, got["wgmma_waits"])


def test_bad_depth_and_operands_are_refused_before_any_launch():
    q = torch.randn(1, 2, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="stages"):
        g.GluonAttention((q, q.clone(), q.clone(), False), torch.empty_like(q), 4)
    with pytest.raises(ValueError):
        g.GluonAttention((q, q.clone().float(), q.clone(), False), torch.empty_like(q), 2)
