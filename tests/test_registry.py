"""The registry: one registration per variant, clear errors for mistakes, gates that say why."""

import sys

import pytest
import torch

from suite import registration, registry
from suite.kernel import LibraryOp, NvrtcModule
from suite.problems import PROBLEMS

VARIANTS = registry.variants()  # the suite's registrations and any --suite-plugin's (tests/conftest.py)


def _label(v) -> str:
    return v.label


def test_every_problem_has_a_baseline_a_ceiling_and_both_kernel_backends():
    for problem in PROBLEMS:
        vs = registry.variants(problem)
        assert sum(v.baseline for v in vs) == 1 and sum(v.ceiling for v in vs) == 1
        assert {"torch", "triton", "ptx"} <= {v.backend for v in vs}


@pytest.mark.parametrize("variant", VARIANTS, ids=_label)
def test_every_dtype_of_its_problem_has_a_row_or_a_reason(variant):
    """A variant implements some of its problem's dtypes, each with its own depths; every other dtype has a reason
    (Variant.dtype_skip_reason), which the driver puts in that dtype's row: no variant is silently absent."""
    problem = PROBLEMS[variant.problem]
    assert variant.dtypes and set(variant.dtypes) <= set(problem.dtypes), (variant.label, variant.dtypes)
    for dtype in problem.dtypes:
        reason = variant.dtype_skip_reason(dtype)
        if dtype in variant.dtypes:
            stages = variant.stages_for(dtype)
            assert stages == (None,) or (stages and all(isinstance(s, int) and s >= 1 for s in stages)), (dtype, stages)
            assert reason is None or (isinstance(reason, str) and reason), (dtype, reason)  # this machine cannot run it
        else:
            assert isinstance(reason, str) and dtype in reason, (dtype, reason)


def test_a_run_at_every_dtype_has_a_row_for_every_variant():
    """The plan of a run at every dtype (a CPU run: no shape set leaves a variant out) has, for each job, a row of
    every variant of its problem: at each depth of a dtype it implements, one saying why at a dtype it does not."""
    from suite.driver import bench, plan

    built = plan.build(bench.Options(), on_gpu=False)
    assert {(j.problem, j.dtype) for j in built.jobs} == {(p, d) for p in PROBLEMS for d in PROBLEMS[p].dtypes}
    for job in built.jobs:
        rows = {}
        for r in job.rows:
            rows.setdefault(r.label, []).append(r)
        for v in registry.variants(job.problem):
            assert v.label in rows, f"{v.label} has no row at {job.problem} {job.dtype} {job.shape}"
            if job.dtype in v.dtypes:
                assert [r.stages for r in rows[v.label]] == list(v.stages_for(job.dtype)) and all(
                    r.runs for r in rows[v.label]
                ), (v.label, job.dtype)
            else:
                assert [(r.stages, r.runs) for r in rows[v.label]] == [(None, False)], (v.label, job.dtype)


def test_duplicate_and_unknown_registrations_are_refused():
    registry.variants()  # load the real registrations first
    op = LibraryOp(lambda inputs, out: lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_kernel("vector", "torch", "mul", op)
    with pytest.raises(ValueError, match="unknown problem 'matmul'"):
        registry.register_kernel("matmul", "ptx", "x", op)


def test_gpu_gate_explains_itself(monkeypatch):
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: False)
    assert registry.needs_gpu((8, 0))() == "needs a CUDA GPU"
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registration.torch.cuda, "get_device_capability", lambda: (7, 5))
    assert registry.needs_gpu((8, 0))() == "needs compute capability >= 8.0 (this GPU: 7.5)"


@pytest.fixture
def scratch_registry(monkeypatch):
    """The real registrations, restored after the test (it may add its own)."""
    registry.variants()
    monkeypatch.setattr(registration, "_REGISTRY", list(registration._REGISTRY))
    return registry


def test_a_kernel_registration_derives_from_its_module(scratch_registry, monkeypatch):
    from suite.kernel import TritonModule

    class Kernel(TritonModule):
        stages = (2, 5)

        def launch(self, inputs, out, stages):
            return lambda: out.copy_(inputs[0] * 2)

    module = type(sys)("pipesuite_test_kernel")
    module.KERNEL = Kernel()
    monkeypatch.setitem(sys.modules, "pipesuite_test_kernel", module)
    registry.register_kernel("vector", "test", "derived", "pipesuite_test_kernel:KERNEL")
    (v,) = [v for v in registry.variants() if v.label == "test:derived"]
    assert v.kernel is module.KERNEL and v.stages == (2, 5) and v.describe is None  # a Triton module: no describe
    device = "cuda" if torch.cuda.is_available() else "cpu"  # compiled Triton modules refuse host tensors on a GPU
    x = torch.randn(7, device=device)
    out = torch.full((7,), float("nan"), device=device)
    v.factory((x,), out, 2)()
    assert torch.equal(out, 2 * x)


def test_a_kernel_is_imported_only_when_needed(scratch_registry):
    registry.register_kernel("vector", "test", "lazy", "pipesuite_no_such_module:KERNEL")  # registering imports nothing
    registry.register_kernel("vector", "test", "typo", "suite.triton.vector:KERNELX")
    (v,) = [v for v in registry.variants() if v.label == "test:lazy"]
    # a reference that does not load names the variant, the reference and why, wherever it is first reached
    said = r"variant test:lazy \(vector\): its kernel 'pipesuite_no_such_module:KERNEL' does not load: ModuleNotFound"
    with pytest.raises(registration.KernelLoadError, match=said):
        _ = v.stages
    (typo,) = [v for v in registry.variants() if v.label == "test:typo"]
    with pytest.raises(registration.KernelLoadError, match="test:typo .*'suite.triton.vector:KERNELX'.*AttributeError"):
        _ = typo.dtypes
    with pytest.raises(ValueError, match="package.module:NAME"):
        registry.resolve_kernel("no_colon_here")


def test_the_list_names_a_kernel_that_does_not_load_and_goes_on(scratch_registry):
    from suite.driver.report import variant_table

    registry.register_kernel("vector", "test", "typo", "suite.triton.vector:KERNELX")
    table = variant_table(width=400, problems=("vector",))
    line = next(line for line in table.splitlines() if "| typo" in line)
    assert line.split("|")[4].strip() == "?" and "does not load" in line and "KERNELX" in line
    assert "cp.async ring" in table  # the others still listed


def test_a_run_reaching_a_kernel_that_does_not_load_is_a_usage_error(scratch_registry, capsys, tmp_path):
    from suite.run import main

    registry.register_kernel("vector", "test", "typo", "suite.triton.vector:KERNELX")
    assert main(["--problem", "vector", "--variant", "test:typo", "--no-progress", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: registration: variant test:typo (vector)") and "KERNELX" in err, err


def _breaking(**attrs):
    from suite.kernel import TritonModule

    class Kernel(TritonModule):
        stages = (2,)

        def launch(self, inputs, out, stages):
            return lambda: out.copy_(inputs[0] * 2)

    for name, value in attrs.items():
        setattr(Kernel, name, value)
    return Kernel()


@pytest.mark.parametrize(
    "kernel, said",
    [
        (42, r"is not a suite.kernel.KernelModule \(got int\)"),
        (_breaking(stages=()), r"sweeps stage counts \(\) at fp32: give depths of at least 1, or \(None,\)"),
        (_breaking(stages=(2, 0)), r"sweeps stage counts \(2, 0\) at fp32"),
        (_breaking(dtypes=("float16",)), r"declares dtypes \('float16',\): each must be one of vector's \(fp32\)"),
    ],
    ids=["not a module", "no stages", "a depth of 0", "a dtype typo"],
)
def test_a_kernel_module_that_breaks_the_contract_is_a_usage_error(scratch_registry, capsys, tmp_path, kernel, said):
    """Refused where the variant is first reached, naming it and the rule, as a kernel that does not load is: a run
    exits 2 in one line, and --list names it and goes on."""
    from suite.driver.report import variant_table
    from suite.run import main

    registry.register_kernel("vector", "test", "broken", kernel)
    (v,) = [v for v in registry.variants() if v.label == "test:broken"]
    with pytest.raises(registration.KernelLoadError, match=r"variant test:broken \(vector\): its kernel " + said):
        _ = v.stages
    assert main(["--problem", "vector", "--variant", "test:broken", "--no-progress", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: registration: variant test:broken (vector)") and len(err.splitlines()) == 1, err
    line = next(line for line in variant_table(width=400, problems=("vector",)).splitlines() if "| broken" in line)
    assert "?" in line.split("|")[4]


def test_depths_of_any_integer_type_keep_the_contract(scratch_registry):
    import numpy as np

    registry.register_kernel("vector", "test", "numpy depths", _breaking(stages=tuple(np.arange(2, 4))))
    (v,) = [v for v in registry.variants() if v.label == "test:numpy depths"]
    assert v.stages == (2, 3)


def test_launch_must_return_a_callable(scratch_registry):
    registry.register_kernel("vector", "test", "eager", _breaking(launch=lambda self, inputs, out, stages: out))
    (v,) = [v for v in registry.variants() if v.label == "test:eager"]
    device = "cuda" if torch.cuda.is_available() else "cpu"  # compiled Triton modules refuse host tensors on a GPU
    x = torch.randn(7, device=device)
    with pytest.raises(TypeError, match=r"test:eager: launch\(\) must return the zero-argument callable .*got Tensor"):
        v.factory((x,), torch.empty(7, device=device), 2)


NVRTC = [v for v in VARIANTS if isinstance(v.kernel, NvrtcModule)]


@pytest.mark.parametrize("variant", NVRTC, ids=_label)
def test_an_nvrtc_kernel_describes_itself_without_a_gpu(variant):
    """Without a GPU (as a CPU run does, suite.driver.bench.CPU_ARCH): every stage count described, and what the
    description says is what the module declares: its stage bytes (0 for a kernel without shared memory), the shared
    memory its stages take at least, the SASS classes it requires; registers, and no spills."""
    from suite.driver.bench import CPU_ARCH

    kernel = variant.kernel
    info = variant.describe(CPU_ARCH)
    assert set(info) == set(variant.stages), variant.label
    required = kernel.sass_minimums()
    assert isinstance(kernel.stage_bytes, int) and kernel.stage_bytes >= 0, (variant.label, kernel.stage_bytes)
    for stages, i in info.items():
        where = f"{variant.label} stages={stages}"
        assert i.registers and i.spill_bytes == 0, (where, i.registers, i.spill_bytes)
        assert i.smem_per_stage == kernel.stage_bytes, (where, i.smem_per_stage, kernel.stage_bytes)
        assert i.smem_total is not None and i.smem_total >= stages * kernel.stage_bytes, (where, i.smem_total)
        assert all(i.sass.get(cls, 0) >= least for cls, least in required.items()), (where, i.sass, required)
