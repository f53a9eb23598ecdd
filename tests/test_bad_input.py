"""Bad input raises ValueError naming the rule, before anything is compiled or launched: rules of one kernel module
beyond what tests/test_variants.py checks for every registered variant (its problem's bad-input table, its module's
own rules, unknown stage counts, host tensors for the NVRTC kernels)."""

import pytest
import torch

from suite.ptx import gemm as pgemm


def _h(*shape):
    return torch.randn(*shape).half()


def test_ptx_gemm_k_multiple_of_8():
    with pytest.raises(ValueError, match="K must be a multiple of 8"):
        pgemm.check_inputs(_h(16, 12), _h(12, 16), _h(16, 16), 3)


def test_gemm_unknown_stages():
    with pytest.raises(ValueError, match="stages must be one of"):
        pgemm.Gemm(_h(16, 16), _h(16, 16), _h(16, 16), 0)
