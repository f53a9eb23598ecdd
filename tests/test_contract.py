"""The registry-wide tests assume only the kernel-module contract (suite/kernel.py, docs/adding-a-variant.md), not a
kernel design: test-only variants of each unusual kind (tests/plugins/unusual_variants.py: no shared memory, no
asynchronous copy, one stage, several depths in the main table, a dtype subset) pass them with no test edit.

Both tests run in a subprocess, so the plugin's variants never reach this process's registry."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_GPU

from suite.problems import PROBLEMS

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "tests" / "plugins" / "unusual_variants.py"
REGISTERS, STAGED, ONE_STAGE = "ptx:unusual registers", "ptx:unusual staged", "triton:unusual one stage"

FACTS = """
import json, sys
from suite.driver.bench import CPU_ARCH
from suite.kernel import NvrtcModule
from suite.plugins import load_plugins
from suite.problems import PROBLEMS
from suite.registry import variants

load_plugins([sys.argv[1]])
facts = {}
for v in variants():
    if "unusual" not in v.name:
        continue
    k = v.kernel
    facts[v.label] = {"problem": v.problem, "group": v.group, "stages": list(v.stages), "dtypes": list(v.dtypes),
                      "problem_dtypes": list(PROBLEMS[v.problem].dtypes), "nvrtc": isinstance(k, NvrtcModule)}
    if isinstance(k, NvrtcModule):
        described = k.describe(CPU_ARCH)
        facts[v.label].update(stage_bytes=k.stage_bytes, sass=[described[s].sass for s in v.stages])
print(json.dumps(facts))
"""


def _run(*args, timeout=600):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=dict(os.environ),
        check=False,
    )


def test_the_example_variants_are_of_each_unusual_kind():
    """What makes the plugin's variants worth the next test: built for sm_90 without a GPU, one has no shared memory
    and no asynchronous copy of any kind, one has a single stage and fills shared memory with plain loads, one is a
    single-stage Triton kernel of one dtype among several."""
    proc = _run("-c", FACTS, str(PLUGIN))
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(facts) == {REGISTERS, STAGED, ONE_STAGE}, facts
    no_async = ("async_copy", "bulk_copy", "tma", "mbarrier")
    regs, staged, one = facts[REGISTERS], facts[STAGED], facts[ONE_STAGE]
    assert regs["nvrtc"] and regs["stage_bytes"] == 0 and regs["problem"] == "vector" and not regs["group"]
    assert len(regs["stages"]) > 1  # a main-table row with several depths
    assert staged["nvrtc"] and staged["stages"] == [1] and staged["stage_bytes"] > 0
    for f in (regs, staged):
        assert all(sass[c] == 0 for sass in f["sass"] for c in no_async), f["sass"]
        assert all(sass["vector_load"] and sass["vector_store"] for sass in f["sass"]), f["sass"]
    assert not one["nvrtc"] and one["stages"] == [1] and one["problem"] == "gemm"
    assert len(one["dtypes"]) == 1 and len(one["problem_dtypes"]) > 1  # the problem's other dtypes get a reason


# The registry-wide tests (parametrized by variant: their ids name it) and the generic ones that read every
# variant of the registry; -k keeps the run to these.
GENERIC = (
    "test_registry_declares_the_depth_sweep",
    "test_a_run_at_every_dtype_has_a_row_for_every_variant",
    "test_cli_cpu_run_end_to_end",
)
# test id -> the unusual variants it must have run, each as the start of a parametrized id
EXPECTED = {
    "test_variants.py::test_validates_at_odd_sizes": (REGISTERS, STAGED, ONE_STAGE),
    "test_variants.py::test_builds_without_spills_with_its_sass": (
        f"{REGISTERS}-sm_80",
        f"{REGISTERS}-sm_90",
        f"{STAGED}-sm_80",
        f"{STAGED}-sm_90",
    ),
    "test_variants.py::test_bad_input_is_refused_naming_the_rule": (
        f"{REGISTERS}-stages",
        f"{REGISTERS}-host tensors",
        f"{REGISTERS}-x misaligned",
        f"{STAGED}-stages",
        f"{STAGED}-host tensors",
        f"{ONE_STAGE}-stages",
        f"{ONE_STAGE}-bf16 not implemented",
        f"{ONE_STAGE}-fp8e4m3 not implemented",
        f"{ONE_STAGE}-c narrow",
    ),
    "test_registry.py::test_an_nvrtc_kernel_describes_itself_without_a_gpu": (REGISTERS, STAGED),
    "test_registry.py::test_every_dtype_of_its_problem_has_a_row_or_a_reason": (REGISTERS, STAGED, ONE_STAGE),
}


@pytest.mark.long  # 47 s on the H200
def test_the_generic_tests_pass_the_unusual_variants_with_no_edit():
    """tests/test_variants.py, test_registry.py, test_streaming.py and the CLI's CPU run, with the plugin loaded
    (--suite-plugin): every test of an unusual variant passes (a validation is skipped only where no GPU can run
    it), and the generic tests that read the whole registry pass with the unusual variants in it."""
    files = [f"tests/{name}" for name in ("test_variants.py", "test_registry.py", "test_streaming.py", "test_cli.py")]
    proc = _run(
        "-m",
        "pytest",
        *files,
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-v",
        "--suite-plugin",
        str(PLUGIN),
        "-k",
        " or ".join(("unusual", *GENERIC)),
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    outcome = dict(
        re.findall(r"^tests/(\S+?::\w+(?:\[.*?\])?) (PASSED|SKIPPED|FAILED|ERROR)\b", proc.stdout, re.MULTILINE)
    )
    assert outcome, proc.stdout[-3000:]
    for name in GENERIC:
        assert [o for test, o in outcome.items() if test.endswith(f"::{name}")] == ["PASSED"], name
    for test, variants in EXPECTED.items():
        for variant in variants:
            ran = {t: o for t, o in outcome.items() if t.startswith(f"{test}[{variant}")}
            assert ran, f"{test} has no id for {variant}; collected: {sorted(t for t in outcome if test in t)}"
            skipped = {t for t, o in ran.items() if o == "SKIPPED"}
            # a validation needs a GPU for the .cu kernels and nothing else is skipped
            may_skip = not HAS_GPU and test.endswith("test_validates_at_odd_sizes") and variant.startswith("ptx:")
            assert not skipped or may_skip, skipped
            assert all(o in ("PASSED", "SKIPPED") for o in ran.values()), ran
    # the one-stage Triton GEMM validated in the interpreter (or on the GPU) at every edge size of its dtype
    assert sum(
        t.startswith(f"test_variants.py::test_validates_at_odd_sizes[{ONE_STAGE}-s1-") and o == "PASSED"
        for t, o in outcome.items()
    ) == len(PROBLEMS["gemm"].edge_sizes_for(None))
