"""Faults a kernel can cause, and what the run does about them: a launch, a timed call or a reference that raises
anything (SystemExit too) fails its row and the run goes on; Ctrl-C stops the run with the rows finished so far; a
kernel that writes to its inputs while timed is INVALID and the rows after it time on fresh inputs.

The GPU path of the driver runs on CPU tensors with the sampling faked (as tests/test_timing.py does), so each fake
kernel's calls are real calls; ``test_an_input_scribbler_is_caught_on_the_gpu`` does the same with real launches.
"""

from __future__ import annotations

import sys

import fake_gpu
import pytest
import torch

from suite import registration
from suite.driver import bench
from suite.driver.workers import Interrupted
from suite.kernel import LibraryOp

SIZE = 4097


@pytest.fixture
def scratch(monkeypatch):
    """The registry as it is, plus what the test registers (gone after it)."""
    from suite.registry import variants

    variants()
    monkeypatch.setattr(registration, "_REGISTRY", list(registration._REGISTRY))
    return lambda name, op: registration.register_kernel("vector", "test", name, LibraryOp(op))


def _timed_run(monkeypatch, names, sizes=(SIZE,), device=None, on_rows=None, fake_sampling=True):
    """bench.run on the GPU path with the test's variants and the ceiling; each batch of samples calls the timed
    callable three times (real calls) when ``fake_sampling``."""
    if fake_sampling:
        fake_gpu.fake_sampling(monkeypatch)
    opts = bench.Options(
        problems=("vector",),
        sizes={"vector": tuple(sizes)},
        variants=("torch:copy_", *(f"test:{n}" for n in names)),
        quick=True,
    )
    return bench.run(opts, on_gpu=True, progress=False, device=device or torch.device("cpu"), on_rows=on_rows)


def _double(inputs, out):
    return lambda: torch.mul(inputs[0], 2, out=out)


def _by(rows):
    return {r["variant"]: r for r in rows}


def test_sys_exit_at_launch_in_timing_or_in_the_reference_fails_the_row_and_the_run_goes_on(monkeypatch, scratch):
    def exits_at_once(inputs, out):
        def call():
            sys.exit(0)

        return call

    def exits_when_timed(inputs, out):
        calls = []

        def call():
            calls.append(1)
            if len(calls) > 1:
                sys.exit(3)
            torch.mul(inputs[0], 2, out=out)

        return call

    scratch("exits", exits_at_once)
    scratch("exits timed", exits_when_timed)
    scratch("fine", _double)
    rows = _by(_timed_run(monkeypatch, ["exits", "exits timed", "fine"]))
    assert rows["exits"]["valid"] is False and rows["exits"]["failure"] == "launch"
    assert "SystemExit" in rows["exits"]["note"] and "sys.exit(0)" in rows["exits"]["error"]
    assert rows["exits timed"]["failure"] == "timing" and "sys.exit(3)" in rows["exits timed"]["error"]
    assert rows["fine"]["valid"] is True and rows["fine"]["measured"] is True  # after both: timed as usual
    assert rows["copy_"]["measured"] is True


def test_a_reference_that_exits_fails_its_row(monkeypatch, scratch):
    registration.register_kernel(
        "vector", "test", "bad reference", LibraryOp(_double), reference=lambda inputs: sys.exit(0)
    )
    scratch("fine", _double)
    rows = _by(_timed_run(monkeypatch, ["bad reference", "fine"]))
    assert rows["bad reference"]["valid"] is False and "sys.exit(0)" in rows["bad reference"]["error"]
    assert rows["fine"]["measured"] is True


def test_ctrl_c_stops_the_run_with_the_rows_finished_so_far(monkeypatch, scratch):
    def interrupts_second_job(inputs, out):
        calls = []

        def call():
            calls.append(1)
            if inputs[0].numel() != SIZE and len(calls) > 1:  # while timed, in the second job
                raise KeyboardInterrupt
            torch.mul(inputs[0], 2, out=out)

        return call

    scratch("fine", _double)
    scratch("ctrl-c", interrupts_second_job)
    with pytest.raises(Interrupted) as stopped:
        _timed_run(monkeypatch, ["fine", "ctrl-c"], sizes=(SIZE, 2 * SIZE + 1))
    rows = stopped.value.rows
    first = [r for r in rows if r["job"] == 0]
    assert len(first) == 3 and all(r["measured"] for r in first)  # the whole first job
    second = [r for r in rows if r["job"] == 1]
    assert [r["variant"] for r in second] == ["fine"]  # timed before the interrupt (the ceiling's pool was not)
    assert second[0]["measured"] is True and second[0]["throughput"] > 0  # the job's end did not come to give it
    assert second[0]["ratio_to_ceiling"] is None
    assert isinstance(stopped.value, KeyboardInterrupt)  # a caller that does not know Interrupted still stops


def test_on_rows_sees_the_rows_after_each_job(monkeypatch, scratch):
    scratch("fine", _double)
    seen = []
    rows = _timed_run(monkeypatch, ["fine"], sizes=(SIZE, 2 * SIZE + 1), on_rows=lambda so_far: seen.append(so_far))
    assert [len(s) for s in seen] == [2, 4] and seen[-1] == rows
    assert all(isinstance(r, dict) for r in seen[0])


def _scribbler(inputs, out):
    """Doubles x, and from its second call on writes zeros over x: validation (one call) cannot see it."""
    calls = []

    def call():
        calls.append(1)
        torch.mul(inputs[0], 2, out=out)
        if len(calls) > 1:
            inputs[0].zero_()

    return call


def _recorder(seen):
    def make(inputs, out):
        def call():
            seen.append(float(inputs[0].abs().sum()))
            torch.mul(inputs[0], 2, out=out)

        return call

    return make


def _check_scribbler(rows, seen):
    rows = _by(rows)
    bad = rows["scribbler"]
    assert bad["valid"] is False and bad["measured"] is False and bad["median_ms"] is None
    assert "wrote to its input #0" in bad["note"] and bad["note"].startswith("INVALID")
    after = rows["after"]
    assert after["valid"] is True and after["measured"] is True
    assert seen and all(s > 0 for s in seen)  # every timed call of the row after saw the inputs as drawn
    assert rows["copy_"]["valid"] is True and rows["copy_"]["measured"] is True


def test_an_input_scribbler_is_invalid_and_the_rows_after_it_get_fresh_inputs(monkeypatch, scratch):
    seen: list[float] = []
    scratch("scribbler", _scribbler)
    scratch("after", _recorder(seen))
    _check_scribbler(_timed_run(monkeypatch, ["scribbler", "after"]), seen)


@pytest.mark.gpu
@pytest.mark.gpu_alone
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_input_scribbler_is_caught_on_the_gpu(monkeypatch, scratch):
    """The same with real launches and the real timer: the kernel's writes on the GPU are caught after its row."""
    seen: list[float] = []
    scratch("scribbler", _scribbler)
    scratch("after", _recorder(seen))
    rows = _timed_run(monkeypatch, ["scribbler", "after"], device=torch.device("cuda"), fake_sampling=False)
    _check_scribbler(rows, seen)


def test_a_cold_run_shows_each_module_compiled_on_a_terminal_only(monkeypatch, capsys):
    """The compile progress is the run's Progress line: drawn per module on a terminal, nothing in a log."""
    from suite.driver import jobs

    for tty in (True, False):
        monkeypatch.setattr(sys.stderr, "isatty", lambda tty=tty: tty)
        step = jobs._compile_progress(True)(2)
        step("ptx:cp.async ring fp32 for sm_90")
        step("ptx:bulk ring fp32 for sm_90")
        err = capsys.readouterr().err
        if tty:
            assert "2/2" in err and "compile ptx:bulk ring fp32 for sm_90" in err and err.endswith("\n")
        else:
            assert err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    jobs._compile_progress(False)(1)("x")  # --no-progress
    assert capsys.readouterr().err == ""
