"""Validation, written once for the driver, the tests and the sanitizer: reference, poison, run, sync, check.

Fresh random inputs from the seed; the reference computed first, from a copy of the inputs the kernel never sees;
the output filled with NaN (an element the kernel never writes fails the check); one call of the variant; a device
synchronize (so an asynchronous launch error surfaces here, and the sanitizer sees the kernel finish); then every
element compared with the reference in higher precision, and the inputs compared bit for bit with that copy: a kernel
that writes to its inputs fails, whatever its output (a kernel that zeroes x and y would otherwise match 2 * x).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from suite.problems import PROBLEMS, Check, Inputs
from suite.registry import Variant


@dataclass
class Validation:
    check: Check
    fn: Callable[[], None]  # the variant's callable: its ``info`` (suite.info.KernelInfo) feeds the tables
    inputs: Inputs
    out: torch.Tensor
    ref: torch.Tensor | None = None  # the reference it was checked against (a ceiling's error is taken against it too)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def changed_inputs(inputs: Inputs, pristine: Inputs) -> list[int]:
    """Indices of the inputs whose bits differ from ``pristine`` (their copies taken before the run)."""
    return [
        i
        for i, (now, before) in enumerate(zip(inputs, pristine))
        if isinstance(now, torch.Tensor) and not torch.equal(_bits(now), _bits(before))
    ]


def _steps(seconds: dict[str, float] | None, device: torch.device):
    """``with step(name):`` adds the seconds the step took to ``seconds[name]``, its GPU work included (a device
    synchronize ends each step); nothing at all when ``seconds`` is None."""

    @contextlib.contextmanager
    def step(name: str):
        if seconds is None:
            yield
            return
        t0 = time.perf_counter()
        yield
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0

    return step


def validate(
    variant: Variant,
    stages,
    size,
    *,
    seed: int,
    device: torch.device,
    dtype: str | None = None,
    seconds: dict[str, float] | None = None,
) -> Validation:
    """Build ``variant`` at ``stages`` on fresh inputs of ``size``, run it once on a NaN-poisoned output, wait for
    it, compare with the reference (computed before the run, from a copy of the inputs) and the inputs with that copy.
    ``seconds``: where the time goes, added per step (inputs, reference, build, run, check). Raises whatever building
    or launching raises (ValueError for a rule broken)."""
    problem = PROBLEMS[variant.problem]
    step = _steps(seconds, torch.device(device))
    with step("inputs"):
        inputs = problem.make_inputs(size, seed, device, dtype)
        pristine = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)  # out of the kernel's reach
    with step("reference"):
        ref = (variant.reference or problem.reference)(pristine)
    with step("build"):
        out = problem.make_output(inputs)
        out.fill_(float("nan"))  # poisoned
        fn = variant.factory(inputs, out, stages)
    with step("run"):
        fn()
        if out.device.type == "cuda":
            torch.cuda.synchronize(out.device)
    with step("check"):
        check = problem.check(out, ref, dtype)
        touched = changed_inputs(inputs, pristine)
    if touched:
        which = ", ".join(f"#{i} ({tuple(inputs[i].shape)})" for i in touched)
        check = replace(
            check,
            valid=False,
            message=f"the kernel wrote to its input {which}: inputs are read-only"
            + (f"; and {check.message}" if check.message else ""),
        )
    return Validation(check, fn, inputs, out, ref)
