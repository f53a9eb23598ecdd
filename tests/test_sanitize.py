"""The sanitizer: its report parser and what it runs, derived from the registry (CPU); the fault builds compile to
fewer barriers (CPU); on a GPU, the self-test: every declared fault must be reported."""

import re
import shutil
from pathlib import Path

import pytest

from suite.kernel import NvrtcModule
from suite.sanitize import (
    faults,
    kernel_names,
    kernel_pattern,
    normalize,
    not_sanitized,
    parse,
    run_tool,
    sanitized_variants,
)
from suite.sass import split_functions

# Shaped like compute-sanitizer 2025's real output on an H200 (racecheck of the broken GEMM, abridged).
REPORT = """========= COMPUTE-SANITIZER
========= Error: Potential WAR hazard detected at __shared__ 0x1000 in block (0,0,0) :
=========     Read Thread (96,0,0) at void gemm_f16_f32acc<(int)1, (bool)1, (int)32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1620
=========     Write Thread (192,0,0) at void gemm_f16_f32acc<(int)1, (bool)1, (int)32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1250
=========     Current Value : 111, Incoming Value : 0
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame:  [0x4cd39] in cydriver.cpython-312-x86_64-linux-gnu.so
=========
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuGetProcAddress_v2.
=========
CASE ptx:128x256x32 mma.sync stages=1 shape=200x264x72 valid=True
========= Error: Race reported between Write access at void gemm_f16_f32acc<1, false, 32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1a0
=========     and Read access at void gemm_f16_f32acc<1, false, 32>(const unsigned short *, const unsigned short *, unsigned short *, int, int, int)+0x1c0 [512 hazards]
=========
========= Invalid __global__ write of size 4 bytes
=========     at void scale2_ring<(int)128, (int)1, (int)3>(const float *, float *, long long, int)+0x70
=========     by thread (0,0,0) in block (0,0,0)
=========
========= RACECHECK SUMMARY: 3 hazards displayed (239712 errors, 38592 warnings)
"""


NAMES = ["gemm_f16_f32acc<1, true, 32>", "gemm_f16_f32acc<1, false, 32>", "scale2_ring<128, 1, 3>"]


def test_parse_attributes_findings_to_instantiations():
    total, per_kernel = parse(REPORT, NAMES)
    assert total == 239712  # all errors, not the displayed hazards
    assert per_kernel == {
        "gemm_f16_f32acc<1, true, 32>": 1,
        "gemm_f16_f32acc<1, false, 32>": 1,
        "scale2_ring<128, 1, 3>": 1,
    }
    assert normalize("scale2_pipeline<(int)4>") == "scale2_pipeline<4>"
    assert parse("========= ERROR SUMMARY: 0 errors\n", NAMES) == (0, {})
    assert parse("no sanitizer output", NAMES)[0] is None  # a tool that did not run is not 'clean'
    # a kernel the names do not cover is not attributed (it still counts in the tool's total)
    assert parse(REPORT, ["scale2_ring<128, 1, 3>"])[1] == {"scale2_ring<128, 1, 3>": 1}


def test_findings_that_name_no_kernel_go_to_the_case_that_ran():
    """With line info in the cubin, racecheck names the inlined function (ldmatrix_x4, cuda's cp.async helper), not
    the kernel: such a finding belongs to the launch whose CASE-START line came before it (one output stream).
    The hazard block is real (the H200 run of 2026-11-30, cuda backend GEMM with its ring barrier removed)."""
    from pathlib import Path

    log = (Path(__file__).parent / "data" / "racecheck-fault-h200-20261130.log").read_text().splitlines()
    hazard = "\n".join(log[1:31])
    assert "hazard detected" in hazard and "gemm_" not in hazard  # the block names no kernel (gemm.py is a host frame)
    names = ["gemm_cuda_pipeline<2, true, 32>", "gemm_f16_f32acc<2, true, 32>"]
    report = (
        f"CASE-START {names[0]} ; gemm_cuda_pipeline<2, false, 32>\n{hazard}\n{hazard}\n"
        f"CASE-START {names[1]}\n========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n"
    )
    total, per_kernel = parse(report, names)
    assert total == 2 and per_kernel == {names[0]: 2}
    assert parse(hazard, names)[1] == {}  # no case named: not attributed to anything


def test_a_fault_reported_only_as_warp_level_warnings_is_caught():
    """racecheck files a race between threads of one warp as a warning; when its 50 displayed hazards are all such
    warnings, the errors it counts are never displayed. A fault run counts the warnings (the H200 run of 2026-11-30,
    about 12:23: the mma.sync GEMM without its ring barrier, 260,896 errors, every displayed hazard a warning); a
    healthy run does not."""
    warning = "\n".join(
        [
            "========= Warning: (Warp Level Programming) Potential RAW hazard detected at __shared__ 0x6600 in block "
            "(2,0,0) :",
            "=========     Write Thread (32,0,0) at cp_async_16(unsigned int, const void *, int)+0x1a70 in "
            "ptx_wrappers.cuh:22",
            "=========     Read Thread (40,0,0) at ldmatrix_x4(unsigned int, unsigned int (&)[4])+0x1e30 in "
            "ptx_wrappers.cuh:74",
            "=========     Current Value : 230",
            "========= ",
        ]
    )
    names = ["gemm_f16_f32acc<2, true, 32>", "gemm_f16_f32acc<2, false, 32>"]
    report = (
        f"========= COMPUTE-SANITIZER\nCASE-START {names[0]} ; {names[1]}\n{warning}\n{warning}\n"
        "========= RACECHECK SUMMARY: 50 hazards displayed (260896 errors, 0 warnings)\n"
    )
    assert parse(report, names, warnings=True) == (260896, {names[0]: 2})
    assert parse(report, names) == (260896, {})
    tool_warning = "========= Warning: Detected overflow of print buffer\n"  # not a hazard: never a finding
    assert parse(f"CASE-START {names[0]}\n{tool_warning}", names, warnings=True)[1] == {}


def test_kernel_pattern_finds_plain_and_template_kernels():
    pattern = kernel_pattern(["my_kernel", "scale2_pipeline<2>"])
    assert pattern.search("at void my_kernel(float *, int)+0x40")[1] == "my_kernel"
    assert pattern.search("at void scale2_pipeline<(int)2>(const float *)+0x70")[1] == "scale2_pipeline<(int)2>"
    assert pattern.search("at void not_my_kernel(float *)") is None


def test_what_is_sanitized_comes_from_the_registry():
    """Every instantiation a sanitized variant can launch is looked for; variants the sanitizer skips are listed."""
    for v in sanitized_variants():
        for s in v.stages:
            assert {normalize(n) for n in v.kernel.kernel_names(s)} <= set(kernel_names()), v.label
    skipped = dict(not_sanitized())
    assert all(v.label not in skipped for v in sanitized_variants())


@pytest.mark.parametrize(
    "variant, fault",
    [(v, f) for v, f in faults() if isinstance(v.kernel, NvrtcModule) and not f.in_launcher],
    ids=lambda x: getattr(x, "label", getattr(x, "define", "")),
)
def test_each_fault_changes_the_code(variant, fault):
    """A fault define that compiles to the same machine code would make the self-test blind: the faulty build's
    instantiations differ from the healthy ones, and have fewer waits (block barriers, mbarrier try-waits, cp.async
    group waits). (NVRTC kernels; a Triton kernel's fault is a constexpr its own module's tests check, and a launcher's fault changes the
    order of launches, not the code: the sanitizer's run shows it caught.)"""
    arch = variant.kernel.archs[-1]
    healthy = variant.kernel.build(arch)
    broken = variant.kernel.with_defines(fault.define, stages=fault.stages).build(arch)
    for s in fault.stages:
        changed = 0
        for expr in variant.kernel.kernel_names(s):
            waits = [
                len(re.findall(r"BAR\.SYNC|SYNCS\.PHASECHK|DEPBAR", split_functions(m.sass())[m.symbols[expr]]))
                for m in (healthy, broken)
            ]
            if waits[0] == 0:  # a kernel with no wait to remove (a second pass beside the ring's kernels)
                assert waits[1] == 0, f"{variant.label} {fault.define} {expr}: waits 0 -> {waits[1]}"
                continue
            assert waits[1] < waits[0], f"{variant.label} {fault.define} {expr}: waits {waits[0]} -> {waits[1]}"
            changed += 1
        assert changed, f"{variant.label} {fault.define}: no instantiation at {s} stages lost a wait"


@pytest.mark.gpu
@pytest.mark.long  # 80 s on the H200 (racecheck's analysis runs on the host's cores; nothing here is timed)
@pytest.mark.skipif(not shutil.which("compute-sanitizer"), reason="needs compute-sanitizer")
def test_racecheck_catches_every_declared_fault(tmp_path):
    """Each declared racecheck fault, run alone as python -m suite.sanitize runs it (one sanitizer process each), is
    reported and attributed to the instantiations it broke."""
    from concurrent.futures import ThreadPoolExecutor

    declared = faults("racecheck")
    assert declared
    with ThreadPoolExecutor(len(declared)) as pool:  # one sanitizer process per fault, side by side (racecheck's
        # analysis is on the host's cores; each process has its own log)
        reports = list(pool.map(lambda i: run_tool("racecheck", "fault", tmp_path, fault=i), range(len(declared))))
    for (v, fault), (total, per_kernel, report) in zip(declared, reports):
        names = {normalize(n) for s in fault.stages for n in v.kernel.kernel_names(s)}
        cases = "\n".join(line for line in report.splitlines() if line.startswith("CASE"))
        assert total and sum(per_kernel.get(n, 0) for n in names), (
            f"{v.label} {fault.define}: not reported for {sorted(names)}; findings per kernel {per_kernel}, "
            f"{total} in the summary; cases:\n{cases}\nreport's first lines:\n{report[:1500]}"
        )


@pytest.mark.gpu
@pytest.mark.long
@pytest.mark.skipif(not shutil.which("compute-sanitizer"), reason="needs compute-sanitizer")
@pytest.mark.parametrize("tool", ["memcheck", "initcheck"])
def test_memcheck_and_initcheck_catch_every_declared_fault(tool, tmp_path):
    """Each declared memcheck or initcheck fault, run alone as python -m suite.sanitize runs it, is reported: attributed
    to the instantiations it broke or, failing that, in the process's error total (the runner's rule: a launch-order
    fault's finding may name the kernel that read, not the one whose launch moved)."""
    from concurrent.futures import ThreadPoolExecutor

    declared = faults(tool)
    assert declared
    with ThreadPoolExecutor(len(declared)) as pool:
        reports = list(pool.map(lambda i: run_tool(tool, "fault", tmp_path, fault=i), range(len(declared))))
    for (v, fault), (total, per_kernel, report) in zip(declared, reports):
        names = {normalize(n) for s in fault.stages for n in v.kernel.kernel_names(s)}
        cases = "\n".join(line for line in report.splitlines() if line.startswith("CASE"))
        assert sum(per_kernel.get(n, 0) for n in names) or total, (
            f"{v.label} {fault.define}: not reported by {tool}; cases:\n{cases}\nreport's last lines:\n{report[-1500:]}"
        )


def test_a_fault_worker_needs_its_fault():
    with pytest.raises(ValueError, match="one fault"):
        run_tool("racecheck", "fault", Path("."))


def test_variant_selection_limits_the_run_and_reaches_the_workers():
    """--variant: only the named variants (by label or name) and their faults run, the workers get the same
    selection; an unknown or unsanitized name is refused with the list of those that can be named."""
    from suite import sanitize

    everything = sanitize.sanitized_variants()
    try:
        sanitize.select(["ptx:bulk ring 2KiB", "128x256x32 mma.sync"])
        assert [v.label for v in sanitize.sanitized_variants()] == ["ptx:bulk ring 2KiB", "ptx:128x256x32 mma.sync"]
        assert {v.label for v, _ in sanitize.faults()} == {"ptx:128x256x32 mma.sync"}
        assert not sanitize.not_sanitized()  # nothing outside the selection is listed as skipped
        cmd = sanitize.tool_command("cs", "racecheck", "healthy", plugins=("p.py",))
        assert cmd[cmd.index("--worker-tool") :] == [
            "--worker-tool",
            "racecheck",
            "--plugin=p.py",
            "--variant=ptx:bulk ring 2KiB",
            "--variant=128x256x32 mma.sync",
        ]
        for bad in (["nope"], ["triton:tuned"]):
            with pytest.raises(ValueError, match="not a sanitized variant"):
                sanitize.select(bad)
    finally:
        sanitize.select([])
    assert sanitize.sanitized_variants() == everything


def test_a_tool_that_cannot_judge_a_kernel_does_not_run_it(monkeypatch, capsys):
    """A module's sanitizer_blind_spots keep that tool off it (the bulk ring under racecheck: a documented false
    positive of raw cp.async.bulk + mbarrier rings; the Gluon GEMM's, in Triton's warp-specialization dispatch);
    every other tool still runs it, and other kernels still run."""
    import types

    import suite.validate
    from suite import sanitize

    launched = []

    def fake_validate(v, stages, size, seed, device, dtype=None):
        launched.append(v.label)
        return types.SimpleNamespace(check=types.SimpleNamespace(valid=True))

    monkeypatch.setattr(suite.validate, "validate", fake_validate)
    try:
        sanitize.select(["ptx:bulk ring 2KiB", "ptx:cp.async ring 2KiB"])
        assert sanitize.worker_healthy("racecheck") == 0
        assert set(launched) == {"ptx:cp.async ring 2KiB"}
        launched.clear()
        assert sanitize.worker_healthy("memcheck") == 0
        assert set(launched) == {"ptx:cp.async ring 2KiB", "ptx:bulk ring 2KiB"}
    finally:
        sanitize.select([])
    blind = {(v.label, t) for v in sanitize.sanitized_variants() for t in sanitize.TOOLS if sanitize.blind_spot(v, t)}
    # the documented ones: the bulk ring's mbarrier-released refills, the Gluon GEMM's warp-specialization dispatch
    assert blind and all(
        (label.startswith("ptx:bulk ring") or "gluon" in label) and tool == "racecheck" for label, tool in blind
    )


def test_the_healthy_cases_cover_every_dtype_a_variant_implements(monkeypatch, capsys):
    """bf16 and fp8 builds are sanitized too: each dtype a variant implements, at its depths and every size the
    kernel takes at it; a size it refuses is listed with the rule, and a launch that refuses one is said, not
    counted as a failure; --dtype limits the dtypes and reaches the workers."""
    import types

    import suite.validate
    from suite import sanitize

    label = "ptx:128x256x64 ws 2wg persistent tma-store tma+wgmma"
    launched = []

    def fake_validate(v, stages, size, seed, device, dtype=None):
        launched.append((dtype, stages, size))
        if dtype == "bf16" and size == (130, 250, 40):
            raise ValueError("a rule only the launch knows")
        return types.SimpleNamespace(check=types.SimpleNamespace(valid=True))

    monkeypatch.setattr(suite.validate, "validate", fake_validate)
    try:
        sanitize.select([label])
        (v,) = sanitize.sanitized_variants()
        run, not_run = sanitize.cases(v)
        assert {d for d, _, _ in run} == {"fp16", "bf16", "fp8e4m3"}
        for dtype in ("fp16", "bf16", "fp8e4m3"):
            assert {s for d, s, _ in run if d == dtype} == set(v.stages_for(dtype))
        # fp8's K must be a multiple of 16 for TMA: 130x250x40 is refused there, by the module's stated rule
        assert (("fp8e4m3", v.stages_for("fp8e4m3")[0], (130, 250, 40))) not in run
        assert any(w.startswith("fp8e4m3 at 130x250x40: K must be a multiple of 16") for w in not_run), not_run
        assert sanitize.worker_healthy("memcheck") == 0  # the refusal is not a failure
        assert sorted(launched) == sorted(run)
        out = capsys.readouterr().out
        assert f"CASE {label} bf16 stages=2 shape=130x250x40 {sanitize.REFUSED}a rule only the launch knows" in out
        assert f"CASE {label} fp8e4m3 stages=2 shape=256x512x1024 valid=True" in out
        sanitize.select_dtypes(["bf16"])
        assert {d for d, _, _ in sanitize.cases(v)[0]} == {"bf16"}
        sanitize.select(["ptx:cp.async ring"])  # fp32 only: said, not silently left out
        (ring,) = sanitize.sanitized_variants()
        assert sanitize.cases(ring) == ([], ["(--dtype bf16): it implements fp32 only"])
        assert "--dtype=bf16" in sanitize.tool_command("cs", "memcheck", "healthy")
        with pytest.raises(ValueError, match="not a dtype: 'fp4'"):
            sanitize.select_dtypes(["fp4"])
    finally:
        sanitize.select([])
        sanitize.select_dtypes([])
    assert "--dtype=bf16" not in sanitize.tool_command("cs", "memcheck", "healthy")


def test_an_unknown_dtype_is_refused_in_one_line(capsys):
    from suite import sanitize

    assert sanitize.main(["--dtype", "fp4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --dtype: not a dtype: 'fp4'") and len(err.splitlines()) == 1


def test_a_tool_that_stopped_early_never_calls_the_cases_it_did_not_reach_clean():
    """The report counts a row's cases by its worker's CASE lines: on the H200 a racecheck worker timed out in the
    middle of the Triton stream-K kernel's cases, and the rows it never reached (the decode kernel) read "clean".
    Now a row whose cases did not all finish reads "not finished: I of N cases ran", and the run is not clean."""
    from suite import sanitize

    label = "triton:decode swap-ab desc"
    try:
        sanitize.select(["triton:split-k desc", label])
        first, second = sanitize.sanitized_variants()
        lines = [
            sanitize._case_line(v, d, s, size) + " valid=True"
            for v in (first, second)
            for d, s, size in sanitize.cases(v)[0]
        ]
        everything = {"memcheck": "\n".join(lines)}
        rows, ok = sanitize.healthy_rows(["memcheck"], {"memcheck": {}}, everything)
        assert ok and {r[-1] for r in rows} == {"clean"}
        # stopped after the first variant's cases and one of the second's
        cut = len(sanitize.cases(first)[0]) + 1
        rows, ok = sanitize.healthy_rows(["memcheck"], {"memcheck": {}}, {"memcheck": "\n".join(lines[:cut])})
        assert not ok
        assert {r[-1] for r in rows if r[0] != label} == {"clean"}
        verdicts = [r[-1] for r in rows if r[0] == label]
        per_depth = len([c for c in sanitize.cases(second)[0] if c[1] == second.stages[0]])
        assert verdicts[0] == f"not finished: 1 of {per_depth} cases ran"
        assert all(v == f"not finished: 0 of {per_depth} cases ran" for v in verdicts[1:]), verdicts
        name = sanitize.normalize(first.kernel.kernel_names(first.stages[0])[0])
        rows, ok = sanitize.healthy_rows(["memcheck"], {"memcheck": {name: 3}}, everything)
        assert not ok and rows[0][-1] == "3 finding(s)"
    finally:
        sanitize.select([])
