"""Every registered variant, derived from the registry and its kernel modules (no kernel or problem named here, and
nothing assumed of a kernel's design beyond what its module declares: shared memory, stage counts, copies and dtypes
are whatever the contract in suite/kernel.py says they are):

* validated (suite.validate) at every dtype it implements, at that dtype's odd sizes (``Problem.edge_sizes_for``),
  at every stage count of that dtype (``Variant.stages_for``), wherever it runs: on a CPU the Triton kernels in the
  interpreter and the library calls, on a GPU everything. (In the interpreter a kernel whose depth is only
  num_stages, ``TritonModule.depth_is_num_stages``, runs its depths at one edge size: there they are one program.)
  A variant that cannot run here has one skipped id per dtype, saying why (not one per stage count and size);
* each kernel compiled by NVRTC built for every arch its module lists, every instantiation its stage counts need,
  without spills and with the SASS instruction classes its module declares it must contain;
* each kernel against its problem's bad-input table, plus its module's own rules, an unknown stage count, every dtype
  of its problem it does not implement, and (for the NVRTC kernels, which launch on a GPU, and compiled Triton
  kernels) host tensors: a ValueError naming the rule, before anything runs.

Test ids and failure messages name the variant (backend:name) and the dtype where it is not the problem's default.
"""

import functools
import os
import re
import zlib

import pytest
import torch
from conftest import HAS_GPU

from suite.kernel import LibraryOp, NvrtcModule, TritonModule
from suite.problems import PROBLEMS
from suite.registry import variants
from suite.sass import INSTRUCTION_CLASSES
from suite.validate import validate

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # set by conftest where there is no GPU
VARIANTS = variants()
KERNELS = [v for v in VARIANTS if not isinstance(v.kernel, LibraryOp)]  # library calls check nothing themselves


def _shape(v, size) -> str:
    return PROBLEMS[v.problem].shape(size)


def _at(v, dtype) -> str:
    """The dtype's part of an id: nothing for the problem's default dtype (ids read as before dtypes came)."""
    return "" if dtype == PROBLEMS[v.problem].default_dtype else f"-{dtype}"


# ---------------------------------------------------------------------------------------------------------------
# Validation at odd sizes: every dtype a variant declares, at that dtype's edge sizes and every depth
# ---------------------------------------------------------------------------------------------------------------


def _validation_cases():
    for v in VARIANTS:
        problem = PROBLEMS[v.problem]
        for dtype in v.dtypes:
            stages, sizes = v.stages_for(dtype), problem.edge_sizes_for(dtype)
            reason = v.skip_reason() or v.dtype_skip_reason(dtype)
            if reason:  # one id that says why, not one per stage count and size
                yield pytest.param(
                    v,
                    dtype,
                    stages[0],
                    sizes[0],
                    id=f"{v.label}{_at(v, dtype)}",
                    marks=pytest.mark.skip(reason=f"{v.label}{_at(v, dtype)}: {reason}"),
                )
                continue
            for s, size in _depths_and_sizes(v, stages, sizes):
                yield pytest.param(v, dtype, s, size, id=f"{v.label}{_at(v, dtype)}-s{s}-{_shape(v, size)}")


def _depths_and_sizes(v, stages, sizes) -> list:
    """Every depth at every edge size; in the interpreter, for a kernel whose depth is only Triton's num_stages (a
    compiler transform the interpreter does not perform: every depth is the same program there, suite.kernel), every
    depth at the first edge size and the deepest at the others."""
    if INTERPRETED and getattr(v.kernel, "depth_is_num_stages", False) and len(stages) > 1:
        deepest = max(stages)
        return [(s, sizes[0]) for s in stages] + [(deepest, size) for size in sizes[1:]]
    return [(s, size) for s in stages for size in sizes]


@pytest.mark.parametrize("variant, dtype, stages, size", list(_validation_cases()))
def test_validates_at_odd_sizes(variant, dtype, stages, size):
    # fresh inputs per case, reproducible
    seed = zlib.crc32(f"{variant.label} {dtype} {stages} {_shape(variant, size)}".encode())
    if rule := variant.kernel.refuses(size, dtype):  # a shape the kernel declares it does not take: refused, by name
        with pytest.raises(ValueError, match=re.escape(rule)):
            validate(variant, stages, size, seed=seed, device=DEVICE, dtype=dtype)
        return
    check = validate(variant, stages, size, seed=seed, device=DEVICE, dtype=dtype).check
    assert check.valid, (
        f"{variant.label} {dtype} stages={stages} size={_shape(variant, size)}: {check.message} "
        f"(max abs error {check.max_abs_error:.3g})"
    )


GEMM_KERNELS = [v for v in KERNELS if v.problem == "gemm" and "fp16" in v.dtypes]


@pytest.mark.parametrize("variant", GEMM_KERNELS, ids=lambda v: v.label)
def test_gemm_rows_cut_from_wider_ones(variant):
    """A and C of one row cut from wider rows: contiguous to torch (a size-1 dimension's stride is not looked at),
    with the wider rows' pitch as their stride. The kernel reads and writes them by their shape (gemm_operands'
    canonical operands), the C it stores included."""
    if reason := variant.skip_reason():
        pytest.skip(reason)
    gemm = PROBLEMS["gemm"]
    size = (1, 72, 64)
    a, b = gemm.make_inputs(size, zlib.crc32(variant.label.encode()), DEVICE, "fp16")
    # pitches that are not a multiple of 16 bytes: a descriptor built from them is refused
    row = torch.empty(1, 68, dtype=a.dtype, device=DEVICE)[:, :64]
    row.copy_(a)
    out = torch.full((1, 76), float("nan"), dtype=torch.float16, device=DEVICE)[:, :72]
    assert row.is_contiguous() and row.stride(0) == 68 and out.is_contiguous() and out.stride(0) == 76
    if rule := variant.kernel.refuses(size, "fp16"):
        pytest.skip(f"refuses {size}: {rule}")
    variant.factory((row, b), out, variant.stages[0])()
    check = gemm.check(out, gemm.reference((row, b)), "fp16")
    assert check.valid, f"{variant.label}: {check.message}"


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
    depths = dict.fromkeys(s for dtype in variant.dtypes for s in variant.stages_for(dtype))  # every dtype's depths
    for stages in depths:
        for expr in kernel.name_expressions(stages):
            if expr not in resources:
                problems.append(f"{expr}: a launch at stages={stages} may pick it, but build() did not compile it")
                continue
            res, sass = resources[expr], classes[expr]
            spill = res.get("local", 0) + res.get("stack", 0)
            if spill or sass["local_memory"]:
                problems.append(f"{expr}: {spill} B of local memory, {sass['local_memory']} LDL/STL (spills)")
            short = {cls: sass[cls] for cls, least in required.items() if sass[cls] < least}
            if short:
                problems.append(
                    f"{expr}: SASS has {short}, the module requires at least { {cls: required[cls] for cls in short} }"
                )
    assert not problems, f"{variant.label} built for {arch}:\n  " + "\n  ".join(problems)


def _fp8_cases():
    for v in VARIANTS:
        if isinstance(v.kernel, NvrtcModule) and any(d.startswith("fp8") for d in v.dtypes) and len(v.dtypes) > 1:
            yield pytest.param(v, id=v.label)


@pytest.mark.parametrize("variant", list(_fp8_cases()))
def test_a_cpu_description_of_an_fp8_row_is_of_its_fp8_build(variant):
    """Without a GPU a row is described by its dtype's build: an fp8 row's description (each depth's kernel, its
    configuration and SASS) is not a 16-bit build's (HGMMA where its own has QGMMA)."""
    from suite.driver.precompile import describe

    problem = PROBLEMS[variant.problem]
    build = variant.kernel.build_for(problem.default_sizes[0])

    def seen(dtype):
        described = describe(variant, problem, dtype, build)
        return {s: (info.config, sorted(dict(info.sass).items())) for s, info in described.items()}

    fp8 = [d for d in variant.dtypes if d.startswith("fp8")]
    wide = [d for d in variant.dtypes if not d.startswith("fp8")]
    for d in fp8:
        assert all(seen(d) != seen(w) for w in wide), f"{variant.label}: {d} described as a 16-bit build"


# ---------------------------------------------------------------------------------------------------------------
# Bad input: refused with a ValueError that names the rule, before anything is launched
# ---------------------------------------------------------------------------------------------------------------


def _rule_for(problem, variant, inputs, rule):
    """``rule``, or the dtype's: inputs of a dtype the variant lacks are refused for that first, naming it."""
    dtype = problem.input_dtype(inputs)
    return "not implemented" if dtype in problem.dtypes and dtype not in variant.dtypes else rule


def _bad_cases():
    for v in VARIANTS:
        problem = PROBLEMS[v.problem]
        # a dtype of its problem it does not implement: refused by the registration (Variant.factory), library or not
        for dtype in problem.dtypes:
            if dtype not in v.dtypes:
                inputs = problem.make_inputs(problem.edge_sizes_for(dtype)[0], 0, torch.device("cpu"), dtype)
                yield pytest.param(
                    v,
                    v.stages[0],
                    inputs,
                    problem.make_output(inputs),
                    "not implemented",
                    id=f"{v.label}-{dtype} not implemented",
                )
        if v not in KERNELS:
            continue
        rule_for = functools.partial(_rule_for, problem, v)

        for b in list(problem.bad_inputs()) + v.kernel.bad_inputs():
            yield pytest.param(v, v.stages[0], b.inputs, b.out, rule_for(b.inputs, b.rule), id=f"{v.label}-{b.why}")
        inputs = problem.make_inputs(problem.edge_sizes[0], 0, torch.device("cpu"))
        if v.stages != (None,):
            unknown = max(v.stages) + 1
            yield pytest.param(
                v, unknown, inputs, problem.make_output(inputs), rule_for(inputs, "stages"), id=f"{v.label}-stages"
            )
        compiled_triton = v.backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1"  # auto too
        if isinstance(v.kernel, NvrtcModule) or compiled_triton:
            yield pytest.param(
                v,
                v.stages[0],
                inputs,
                problem.make_output(inputs),
                rule_for(inputs, "CUDA tensor"),
                id=f"{v.label}-host tensors",
            )


@pytest.mark.parametrize("variant, stages, inputs, out, rule", list(_bad_cases()))
def test_bad_input_is_refused_naming_the_rule(variant, stages, inputs, out, rule):
    try:
        variant.factory(inputs, out, stages)
    except ValueError as e:
        said = str(e)
        assert re.search(rule, said), f"{variant.label} refused it, but its message {said!r} does not match {rule!r}"
    else:
        pytest.fail(f"{variant.label} accepted an input that breaks the rule {rule!r} (stages={stages})")


def test_compiled_triton_kernels_refuse_host_tensors_before_any_launch(monkeypatch):
    """Outside the interpreter every Triton kernel refuses CPU tensors (a compiled kernel would dereference host
    addresses on the GPU) once its other rules hold, before anything compiles or launches: TRITON_INTERPRET unset."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    checked = 0
    for problem in PROBLEMS.values():
        inputs = problem.make_inputs(problem.edge_sizes[0], 0, torch.device("cpu"))
        for v in variants(problem.name):
            if isinstance(v.kernel, TritonModule) and problem.input_dtype(inputs) in v.dtypes:
                with pytest.raises(ValueError, match="CUDA tensor"):
                    v.factory(inputs, problem.make_output(inputs), v.stages[0])
                for bad in problem.bad_inputs():  # a broken rule is named first, as on a GPU
                    with pytest.raises(ValueError, match=_rule_for(problem, v, bad.inputs, bad.rule)):
                        v.factory(bad.inputs, bad.out, v.stages[0])
                checked += 1
    assert checked >= 10


def test_the_registry_refuses_host_tensors_for_a_triton_module_that_does_not(monkeypatch):
    """A Triton module whose launch does not call refuse_host_tensors (a plugin's, say) is still refused host tensors
    when compiled, before its launcher is handed back (TritonModule adds the check to every subclass's launch)."""
    from suite import registration

    class Forgetful(TritonModule):
        stages = (1,)

        def launch(self, inputs, out, stages):  # builds a launcher and touches no tensor memory, as launch must
            return lambda: None

    variants()
    monkeypatch.setattr(registration, "_REGISTRY", list(registration._REGISTRY))
    registration.register_kernel("vector", "test", "forgetful", Forgetful())
    (v,) = [v for v in variants("vector") if v.label == "test:forgetful"]
    x = torch.randn(1031)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="CUDA tensor"):
        v.factory((x,), torch.empty_like(x), 1)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the interpreter runs on host memory
    assert callable(v.factory((x,), torch.empty_like(x), 1))
