"""Every registered variant, derived from the registry and its kernel modules (no kernel or problem named here):

* validated (suite.validate) at its problem's odd sizes, at every stage count, wherever it runs: on a CPU the
  Triton kernels in the interpreter and the library calls, on a GPU everything;
* each kernel compiled by NVRTC built for every arch its module lists (sm_80 and sm_90 by default), without spills
  and with the SASS instruction classes its module declares it must contain;
* each kernel against its problem's bad-input table, plus its module's own rules, an unknown stage count, and (for
  the NVRTC kernels, which launch on a GPU) host tensors: a ValueError naming the rule, before anything runs.

Test ids and failure messages name the variant (backend:name).
"""

import re
import zlib

import pytest
import torch

from conftest import HAS_GPU
from suite.kernel import NvrtcModule
from suite.problems import PROBLEMS
from suite.registry import variants
from suite.sass import INSTRUCTION_CLASSES
from suite.validate import validate

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
VARIANTS = variants()
KERNELS = [v for v in VARIANTS if not (v.baseline or v.ceiling)]  # the library calls check nothing themselves


def _shape(v, size) -> str:
    return PROBLEMS[v.problem].shape(size)


# ---------------------------------------------------------------------------------------------------------------
# Validation at odd sizes
# ---------------------------------------------------------------------------------------------------------------


def _validation_cases():
    for v in VARIANTS:
        reason = v.skip_reason()
        for stages in v.stages:
            for size in PROBLEMS[v.problem].edge_sizes:
                marks = [pytest.mark.skip(reason=f"{v.label}: {reason}")] if reason else []
                yield pytest.param(v, stages, size, marks=marks, id=f"{v.label}-s{stages}-{_shape(v, size)}")


@pytest.mark.parametrize("variant, stages, size", list(_validation_cases()))
def test_validates_at_odd_sizes(variant, stages, size):
    seed = zlib.crc32(f"{variant.label} {stages} {_shape(variant, size)}".encode())  # fresh per case, reproducible
    result = validate(variant, stages, size, seed=seed, device=DEVICE)
    check = result.check
    assert check.valid, (f"{variant.label} stages={stages} size={_shape(variant, size)}: {check.message} "
                         f"(max abs error {check.max_abs_error:.3g})")


# ---------------------------------------------------------------------------------------------------------------
# NVRTC builds: every arch, no spills, the SASS the module declares
# ---------------------------------------------------------------------------------------------------------------


def _build_cases():
    for v in VARIANTS:
        if isinstance(v.kernel, NvrtcModule):
            for arch in v.kernel.archs:
                yield pytest.param(v, arch, id=f"{v.label}-{arch}")


@pytest.mark.parametrize("variant, arch", list(_build_cases()))
def test_builds_without_spills_with_its_sass(variant, arch):
    kernel = variant.kernel
    required = kernel.sass_minimums()
    unknown = sorted(set(required) - set(INSTRUCTION_CLASSES))
    assert not unknown, f"{variant.label} declares unknown SASS classes {unknown}; known: {sorted(INSTRUCTION_CLASSES)}"
    module = kernel.build(arch)
    classes, resources = module.instruction_classes(), module.resources()
    problems = []
    for stages in variant.stages:
        for expr in kernel.name_expressions(stages):
            res, sass = resources[expr], classes[expr]
            spill = res.get("local", 0) + res.get("stack", 0)
            if spill or sass["local_memory"]:
                problems.append(f"{expr}: {spill} B of local memory, {sass['local_memory']} LDL/STL (spills)")
            short = {cls: sass[cls] for cls, least in required.items() if sass[cls] < least}
            if short:
                problems.append(f"{expr}: SASS has {short}, the module requires at least "
                                f"{ {cls: required[cls] for cls in short} }")
    assert not problems, f"{variant.label} built for {arch}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------------------------------------------
# Bad input: refused with a ValueError that names the rule, before anything is launched
# ---------------------------------------------------------------------------------------------------------------


def _bad_cases():
    for v in KERNELS:
        problem = PROBLEMS[v.problem]
        bad = list(problem.bad_inputs()) + (v.kernel.bad_inputs() if v.kernel is not None else [])
        for b in bad:
            yield pytest.param(v, v.stages[0], b.inputs, b.out, b.rule, id=f"{v.label}-{b.why}")
        inputs = problem.make_inputs(problem.edge_sizes[0], 0, torch.device("cpu"))
        if v.stages != (None,):
            unknown = max(v.stages) + 1
            yield pytest.param(v, unknown, inputs, problem.make_output(inputs), "stages", id=f"{v.label}-stages")
        if isinstance(v.kernel, NvrtcModule):
            yield pytest.param(v, v.stages[0], inputs, problem.make_output(inputs), "CUDA tensor",
                               id=f"{v.label}-host tensors")


@pytest.mark.parametrize("variant, stages, inputs, out, rule", list(_bad_cases()))
def test_bad_input_is_refused_naming_the_rule(variant, stages, inputs, out, rule):
    try:
        variant.factory(inputs, out, stages)
    except ValueError as e:
        assert re.search(rule, str(e)), f"{variant.label} refused it, but its message {str(e)!r} does not match {rule!r}"
    else:
        pytest.fail(f"{variant.label} accepted an input that breaks the rule {rule!r} (stages={stages})")
