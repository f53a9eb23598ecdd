"""The validation gate cannot be fooled (issue 22, item 10): the reference is computed before the kernel runs, from
a copy of the inputs the kernel cannot reach, and a kernel that writes to its inputs fails."""

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
