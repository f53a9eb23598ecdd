"""Plugins: variants defined outside the suite (tests/plugins/example_plugin.py and the .cu beside it) list, validate,
are covered by the registry-wide tests and are sanitized, through --plugin and through an installed entry point."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_GPU

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "tests" / "plugins" / "example_plugin.py"
NAMES = ("cuda:plugin prefetch", "triton:plugin tiles")


def _run(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, check=False)


def test_listed_by_path_and_by_module_name():
    for spec in (str(PLUGIN), "tests.plugins.example_plugin"):
        proc = _run("-m", "suite.run", "--plugin", spec, "--list")
        assert proc.returncode == 0, proc.stderr
        assert "plugin prefetch" in proc.stdout and "plugin tiles" in proc.stdout


def test_runs_and_validates(tmp_path):
    """On a CPU: the Triton variant validates in the interpreter, the .cu one is built for sm_90 with its SASS; on a
    GPU both validate and are timed."""
    proc = _run(
        "-m",
        "suite.run",
        "--plugin",
        str(PLUGIN),
        "--problem",
        "vector",
        "--size",
        "40963",
        "--quick",
        "--variant",
        *NAMES,
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [
        r
        for r in json.loads((tmp_path / "run" / "results.json").read_text())["rows"]
        if f"{r['backend']}:{r['variant']}" in NAMES
    ]
    assert {f"{r['backend']}:{r['variant']}" for r in rows} == set(NAMES)
    for r in rows:
        if HAS_GPU or r["backend"] == "triton":
            assert r["valid"] and r["max_abs_error"] == 0.0, r
        else:
            assert r["built_for"] == "sm_90" and r["spill_bytes"] == 0 and r["registers"] > 0, r


def test_bad_plugin_is_one_clear_line():
    proc = _run("-m", "suite.run", "--plugin", "tests.plugins.no_such_plugin", "--list")
    assert proc.returncode == 2
    assert "error: --plugin: plugin 'tests.plugins.no_such_plugin' failed to import" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "name, said",
    [
        ("gone/vars.txt", "plugin {} is not a .py file"),
        ("notes.txt", "plugin {} is not a .py file"),
        ("gone/vars.py", "plugin file {} does not exist"),
        ("pkg.py", "plugin {} is a directory, not a .py file"),
    ],
)
def test_a_plugin_path_that_is_no_python_file_is_named_as_a_file(tmp_path, name, said):
    """A path (it has a slash, or names a file) is a plugin file, whatever its suffix: refused as one, not imported
    as a module named after the path."""
    from suite.plugins import PluginError, load_plugin

    (tmp_path / "notes.txt").write_text("x = 1\n")
    (tmp_path / "pkg.py").mkdir()
    with pytest.raises(PluginError, match=re.escape(said.format(tmp_path / name))):
        load_plugin(str(tmp_path / name))


def test_a_plugin_linked_under_a_py_name_loads(tmp_path):
    """The suffix is the path's as given: a .py link to a file of another name is a plugin file."""
    from suite.plugins import load_plugin

    (tmp_path / "vars.txt").write_text("LOADED = 7\n")
    (tmp_path / "linked.py").symlink_to(tmp_path / "vars.txt")
    assert load_plugin(str(tmp_path / "linked.py")).LOADED == 7


def test_registry_wide_tests_cover_the_plugin():
    """tests/test_variants.py with the plugin loaded (conftest's --suite-plugin): its variants get the odd-size,
    build and bad-input tests with no test written for them."""
    proc = _run(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "test_variants.py"),
        "--suite-plugin",
        str(PLUGIN),
        "-k",
        "plugin",
        "-rA",
        "-n",
        "0",  # a few dozen tests: workers would cost more to start than they save
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = proc.stdout
    assert "test_builds_without_spills_with_its_sass[cuda:plugin prefetch-sm_90]" in out
    assert "test_validates_at_odd_sizes[triton:plugin tiles-s2-4097]" in out
    assert "test_bad_input_is_refused_naming_the_rule[cuda:plugin prefetch-x misaligned]" in out


def test_entry_point_group(tmp_path):
    """An installed distribution's 'pipesuite.variants' entry point is imported before the registry is read."""
    dist = tmp_path / "pipesuite_example-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pipesuite-example\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pipesuite.variants]\nexample = example_plugin\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(PLUGIN.parent), str(ROOT)]))
    proc = _run("-m", "suite.run", "--list", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "plugin prefetch" in proc.stdout and "plugin tiles" in proc.stdout


@pytest.mark.gpu
@pytest.mark.long  # 21 s on the H200, nothing timed
@pytest.mark.skipif(not shutil.which("compute-sanitizer"), reason="needs compute-sanitizer")
def test_sanitized(tmp_path):
    """The plugin's .cu variant runs under compute-sanitizer with no change to the suite, and is clean (only it:
    --variant)."""
    proc = _run(
        "-m",
        "suite.sanitize",
        "--plugin",
        str(PLUGIN),
        "--variant",
        "cuda:plugin prefetch",
        "--tools",
        "memcheck",
        "racecheck",
        "--out",
        str(tmp_path),
    )
    assert (tmp_path / "sanitizer.md").exists(), proc.stderr[-3000:]
    rows = [
        line
        for line in (tmp_path / "sanitizer.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| variant")
    ]  # the data rows of both tables
    logs = "\n".join(f"--- {f.name}\n{f.read_text()[-2500:]}" for f in sorted(tmp_path.glob("racecheck*.log")))
    assert len(rows) == 3 and all(line.count("clean") == 2 for line in rows), f"{rows}\n{logs}"  # stages 1, 2, 4
    assert all("cuda:plugin prefetch" in line for line in rows) and proc.returncode == 0, rows  # nothing else ran
    log = (tmp_path / "memcheck-healthy.log").read_text()
    for stages in (1, 2, 4):
        assert f"CASE cuda:plugin prefetch fp32 stages={stages} shape=3077 valid=True" in log, log[-3000:]


BROKEN_CU = """\
template <int STAGES>
__global__ void broken_kernel(const float* x, float* y, long long n) {
    unsigned v;
    asm volatile("mov.u33 %0, 7;" : "=r"(v));  // the typo ptxas rejects
    y[0] = x[0] * v;
}
"""

BROKEN_PLUGIN = """\
from pathlib import Path

from suite.kernel import LibraryOp, NvrtcModule
from suite.registry import anywhere, needs_gpu, register_kernel


class Broken(NvrtcModule):
    source = Path(__file__).with_name("broken.cu")
    stages, threads, stage_bytes = (1, 2), 32, 0

    def name_expressions(self, stages):
        return (f"broken_kernel<{stages}>",)

    def launch(self, inputs, out, stages):
        self.build()
        raise AssertionError("not reached: the build fails")


register_kernel("vector", "cuda", "broken build", Broken(), gate=needs_gpu((8, 0)) if {on_cpu} else anywhere)


def broken_launch(inputs, out):
    def run():
        raise RuntimeError("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure (simulated)")
    return run


register_kernel("vector", "torch", "broken launch", LibraryOp(broken_launch))
"""


def test_a_variant_that_fails_leaves_a_failed_row_and_the_run_goes_on(tmp_path):
    plugin = tmp_path / "broken_plugin.py"
    (tmp_path / "broken.cu").write_text(BROKEN_CU)
    plugin.write_text(BROKEN_PLUGIN.replace("{on_cpu}", str(not HAS_GPU)))
    proc = _run(
        "-m",
        "suite.run",
        "--plugin",
        str(plugin),
        "--problem",
        "vector",
        "--size",
        "40963",
        "--quick",
        "--variant",
        "cuda:broken build",
        "torch:broken launch",
        "triton:tile loop",
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # something failed, and the exit status says so
    rows = json.loads((tmp_path / "run" / "results.json").read_text())["rows"]
    by = {}
    for r in rows:
        by.setdefault(f"{r['backend']}:{r['variant']}", []).append(r)
    assert len(by["cuda:broken build"]) == 2  # one failed row per stage count
    for r in by["cuda:broken build"]:
        assert r["valid"] is False and "failed: KernelCompileError: " in r["note"], r["note"]
        assert f"{tmp_path / 'broken.cu'}:4" in r["note"] and "Unknown modifier '.u33'" in r["note"], r["note"]
    (launch,) = by["torch:broken launch"]
    assert launch["valid"] is False and "CUDA_ERROR_LAUNCH_FAILED" in launch["note"], launch
    assert by["triton:tile loop"] and all(r["valid"] for r in by["triton:tile loop"])  # the rest of the run
    assert "failed: KernelCompileError" in (tmp_path / "run" / "table.md").read_text()


# ---------------------------------------------------------------------------------------------------------------
# Issue 22, item 13: a plugin never ends a run as a success, fails in one line, and loads once
# ---------------------------------------------------------------------------------------------------------------


def _entry_point(tmp_path, module: str, name: str = "example"):
    """An installed distribution (a .dist-info on PYTHONPATH) whose 'pipesuite.variants' entry point is ``module``."""
    dist = tmp_path / f"pipesuite_{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pipesuite-{name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[pipesuite.variants]\n{name} = {module}\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(PLUGIN.parent), str(ROOT)]))


@pytest.mark.parametrize("code", ["0", "None"])
def test_a_plugin_that_calls_sys_exit_is_a_plugin_error(tmp_path, code):
    plugin = tmp_path / "quitter.py"
    plugin.write_text(f"import sys\nsys.exit({code})\n")
    proc = _run("-m", "suite.run", "--plugin", str(plugin), "--problem", "vector", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (
        "error: --plugin: plugin" in proc.stderr and "SystemExit" in proc.stderr and "called sys.exit()" in proc.stderr
    )
    assert not (tmp_path / "run").exists()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """In this process: a distribution installed on sys.path whose entry point is ``module`` (write its code with
    the returned function), the entry points read afresh."""
    import suite.plugins

    monkeypatch.setattr(suite.plugins, "_entry_points_loaded", False)
    monkeypatch.setattr(suite.plugins, "_entry_points_error", None)
    monkeypatch.syspath_prepend(str(tmp_path))
    _entry_point(tmp_path, "bad_plugin", "bad")

    def install(code: str):
        (tmp_path / "bad_plugin.py").write_text(code)
        sys.modules.pop("bad_plugin", None)

    yield install
    sys.modules.pop("bad_plugin", None)


@pytest.mark.parametrize(
    "code, what",
    [
        ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
        ("import sys\nsys.exit(0)\n", "SystemExit(0): it called sys.exit() while importing"),
    ],
)
def test_a_failing_entry_point_is_one_line(installed, capsys, tmp_path, code, what):
    from suite.run import main

    installed(code)
    for argv in (["--list"], ["--problem", "vector", "--out", str(tmp_path / "run")]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [
            f"error: installed plugin: entry point 'bad' = 'bad_plugin' (pipesuite.variants) failed to import: {what}"
        ], err
    assert not (tmp_path / "run").exists()


def test_a_failed_entry_point_is_never_skipped_later(installed):
    from suite.plugins import PluginError
    from suite.registry import variants

    installed("raise RuntimeError('boom')\n")
    for _ in range(2):  # the second read refuses too: it does not go on without the plugin
        with pytest.raises(PluginError, match="boom"):
            variants()


def test_a_plugin_given_twice_loads_once(tmp_path):
    """--plugin path.py of a module that is also installed as an entry point (and the same by module name): its
    variants are registered once, not refused as duplicates."""
    env = _entry_point(tmp_path, "example_plugin")
    proc = _run(
        "-m", "suite.run", "--plugin", str(PLUGIN), "--plugin", "tests.plugins.example_plugin", "--list", env=env
    )
    assert proc.returncode == 0, proc.stderr
    listed = [line for line in proc.stdout.splitlines() if line.startswith("| ")]  # the table's lines
    assert (
        sum("plugin prefetch" in line for line in listed) == 1 and sum("plugin tiles" in line for line in listed) == 1
    )
    proc = _run("-m", "suite.run", "--plugin", str(PLUGIN), "--plugin", "tests.plugins.example_plugin", "--list")
    assert proc.returncode == 0, proc.stderr
    assert sum("plugin prefetch" in line for line in proc.stdout.splitlines() if line.startswith("| ")) == 1
