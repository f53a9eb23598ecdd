"""The validation gate cannot be fooled (issue 22, item 10): the reference is computed before the kernel runs, from
a copy of the inputs the kernel cannot reach, and a kernel that writes to its inputs fails."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from suite.kernel import LibraryOp
from suite.registry import Variant
from suite.validate import validate


def _variant(op) -> Variant:
    return Variant("vector", "torch", "under test", LibraryOp(op))


def _zero_everything(inputs, out):
    """Overwrites its input with zeros and writes zeros: 2 * x of the overwritten x."""

    def run():
        inputs[0].zero_()
        out.zero_()

    return run


def _right_but_scribbles(inputs, out):
    """Writes the right answer, then scribbles over its input."""

    def run():
        torch.mul(inputs[0], 2, out=out)
        inputs[0][::7] = 1.0

    return run


def _honest(inputs, out):
    return lambda: torch.mul(inputs[0], 2, out=out)


def test_a_kernel_that_overwrites_its_input_fails():
    result = validate(_variant(_zero_everything), None, 4099, seed=3, device=torch.device("cpu"))
    assert result.check.valid is False
    assert "wrote to its input #0" in result.check.message and "inputs are read-only" in result.check.message


def test_a_right_answer_with_a_scribbled_input_fails():
    result = validate(_variant(_right_but_scribbles), None, 4099, seed=3, device=torch.device("cpu"))
    assert result.check.valid is False and result.check.max_abs_error == 0.0  # the output itself is right
    assert "wrote to its input #0" in result.check.message


def test_an_honest_kernel_passes():
    result = validate(_variant(_honest), None, 4099, seed=3, device=torch.device("cpu"))
    assert result.check.valid and result.check.message == ""


def test_validate_says_where_its_time_goes_without_changing_its_verdict():
    """``seconds``: the time per step (inputs, reference, build, run, check), added to across calls; the verdict is
    the same with and without it, and a kernel that scribbles still fails."""
    seconds: dict[str, float] = {}
    for _ in range(2):
        timed = validate(_variant(_honest), None, 4099, seed=3, device=torch.device("cpu"), seconds=seconds)
        assert timed.check.valid
    assert set(seconds) == {"inputs", "reference", "build", "run", "check"}
    assert all(s >= 0 for s in seconds.values()) and sum(seconds.values()) > 0
    plain = validate(_variant(_honest), None, 4099, seed=3, device=torch.device("cpu"))
    assert plain.check == timed.check
    bad = validate(_variant(_right_but_scribbles), None, 4099, seed=3, device=torch.device("cpu"), seconds={})
    assert not bad.check.valid


# ---------------------------------------------------------------------------------------------------------------
# Issue 53: plugins on sys.path only while they import; a kernel that exits at launch
# ---------------------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _plugin_dir(tmp_path, mode=0o755):
    d = tmp_path / "plugins"
    d.mkdir()
    (d / "gate_sibling.py").write_text("VALUE = 53\n")
    (d / "gate_plugin.py").write_text("import gate_sibling\n\nSEEN = gate_sibling.VALUE\n")
    os.chmod(d, mode)
    os.chmod(d / "gate_plugin.py", 0o644)
    return d


def test_a_plugins_directory_is_on_sys_path_only_while_it_imports(tmp_path, capsys):
    from suite.plugins import load_plugin

    d = _plugin_dir(tmp_path)
    before = list(sys.path)
    try:
        module = load_plugin(str(d / "gate_plugin.py"))
        assert module.SEEN == 53  # its siblings were importable while it imported
        assert str(d) not in sys.path and sys.path == before  # and nothing planted there later shadows a module
        assert "warning" not in capsys.readouterr().err
    finally:
        for name in ("gate_sibling", "pipesuite_plugin_gate_plugin"):
            sys.modules.pop(name, None)
        sys.path[:] = before


def test_a_plugin_others_can_write_is_loaded_with_a_warning(tmp_path, capsys):
    from suite.plugins import load_plugin

    d = _plugin_dir(tmp_path, mode=0o777)
    os.chmod(d / "gate_plugin.py", 0o664)
    try:
        load_plugin(str(d / "gate_plugin.py"))
        err = capsys.readouterr().err
        assert f"warning: plugin file {d / 'gate_plugin.py'} is writable by group (mode 664)" in err
        assert f"warning: plugin directory {d} is writable by group and others (mode 777)" in err
    finally:
        os.chmod(d, 0o755)
        for name in ("gate_sibling", "pipesuite_plugin_gate_plugin"):
            sys.modules.pop(name, None)


EXITING_PLUGIN = '''
"""A vector variant whose launch calls sys.exit(0) (issue 53, item 2)."""
import sys

import torch

from suite.kernel import LibraryOp
from suite.registry import register_kernel


def _exits(inputs, out):
    sys.exit(0)


register_kernel("vector", "torch", "exits at launch", LibraryOp(_exits))
'''


def test_a_kernel_that_exits_at_launch_fails_its_row_and_the_run_goes_on(tmp_path):
    plugin = tmp_path / "exiting_plugin.py"
    plugin.write_text(EXITING_PLUGIN)
    out = tmp_path / "out"
    argv = ["--plugin", str(plugin), "--problem", "vector", "--size", "4096", "--backend", "torch", "--out", str(out)]
    hidden = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # the CPU path, on any machine
    cmd = [sys.executable, "-m", "suite.run", *argv, "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=hidden, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    rows = json.loads((out / "results.json").read_text())["rows"]
    (exited,) = [r for r in rows if r["variant"] == "exits at launch"]
    assert exited["valid"] is False and "SystemExit" in exited["note"]
    others = [r for r in rows if r is not exited]
    assert others and all(r["valid"] for r in others)
