"""Attention forward (suite.attention_problem) in Triton through tensor descriptors (TMA on Hopper): the tutorial
kernel of suite.triton.attention with DESC, Q, K and V read and O written through descriptors built on the host, swept
over ``num_stages`` (how many K / V blocks the pipeliner keeps in flight).

Each tensor is seen as 3-D, (batch x heads, seq, head_dim), and boxed [1, BLOCK, head_dim]: a box that runs past a
head's last row is zero-filled by the TMA unit on loads and clipped on stores, so a block never reads or writes the
next head's rows, and odd lengths need no masked loads (the scores of keys past skv are still masked to -inf, since a
zero key scores 0, not -inf). Causal (bottom-right) and GQA as in suite.triton.attention.
"""

from __future__ import annotations

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from suite.attention_problem import grid_limit_bad_inputs
from suite.problems import BadInput
from suite.triton.attention import BLOCK_M, BLOCK_N, Attention, TutorialAttention
from suite.triton.gemm_desc import HOPPER_SASS


def _descriptor(t: torch.Tensor, block: int) -> TensorDescriptor:
    """``t`` (b, heads, seq, d), contiguous, as (b * heads, seq, d) boxed [1, block, d]."""
    b, h, s, d = t.shape
    return TensorDescriptor(t.view(b * h, s, d), shape=[b * h, s, d], strides=[s * d, d, 1], block_shape=[1, block, d])


class DescAttention(Attention):
    """The tutorial kernel with DESC at ``stages``: ``DescAttention((q, k, v, causal), out, 3)()`` writes out."""

    desc = True
    how = ", Q / K / V / O through tensor descriptors built on the host"

    def __init__(self, inputs, out: torch.Tensor, stages: int):
        super().__init__(inputs, out, stages)  # checks the operands (contiguous, 16-byte aligned: a tensor map's needs)
        o = self.ops
        self.descs = tuple(
            _descriptor(t, rows) for t, rows in ((o.q, BLOCK_M), (o.k, BLOCK_N), (o.v, BLOCK_N), (o.out, BLOCK_M))
        )

    def operands(self) -> tuple:
        return self.descs


class DescriptorAttention(TutorialAttention):
    """The tutorial kernel with DESC, swept over the K / V pipeline depth (tl.range's and the launch's num_stages);
    its sanitizer sizes (odd lengths, boxes past a head's rows, fully masked rows) are the tutorial's."""

    sass_requires = HOPPER_SASS  # wgmma fed by TMA loads on mbarriers

    def bad_inputs(self) -> list[BadInput]:
        return grid_limit_bad_inputs()  # descriptor coordinates per head: no 32-bit offset within a head

    def launch(self, inputs, out, stages):
        return DescAttention(inputs, out, stages)


KERNEL = DescriptorAttention()
