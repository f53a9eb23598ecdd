"""Validation, written once for the driver, the tests and the sanitizer: poison, run, sync, check.

Fresh random inputs from the seed, the output filled with NaN (an element the kernel never writes fails the check),
one call of the variant, a device synchronize (so an asynchronous launch error surfaces here, and the sanitizer sees
the kernel finish), then every element compared with the reference in higher precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from suite.problems import PROBLEMS, Check, Inputs
from suite.registry import Variant


@dataclass
class Validation:
    check: Check
    fn: Callable[[], None]  # the variant's callable: its ``info`` (suite.info.KernelInfo) feeds the tables
    inputs: Inputs
    out: torch.Tensor


def validate(variant: Variant, stages, size, *, seed: int, device: torch.device, dtype: str | None = None) -> Validation:
    """Build ``variant`` at ``stages`` on fresh inputs of ``size``, run it once on a NaN-poisoned output, wait for
    it, compare with the reference. Raises whatever building or launching raises (ValueError for a rule broken)."""
    problem = PROBLEMS[variant.problem]
    inputs = problem.make_inputs(size, seed, device, dtype)
    out = problem.make_output(inputs)
    out.fill_(float("nan"))  # poisoned
    fn = variant.factory(inputs, out, stages)
    fn()
    if out.device.type == "cuda":
        torch.cuda.synchronize(out.device)
    ref = (variant.reference or problem.reference)(inputs)
    return Validation(problem.check(out, ref, dtype), fn, inputs, out)
