"""The driver's GPU path on CPU tensors, for the tests of what it does with rows (tests/test_faults.py,
tests/test_error_bound.py): each batch of samples calls the timed callable three times (real calls) and reads 1 ms;
the GPU's state reads unthrottled and the clock stands still."""

from suite.driver import measure, meta, timing


def fake_sampling(monkeypatch) -> None:
    def fake_time(fn, opts, rep_scale=1.0):
        for _ in range(3):
            fn()
        return [1.0] * 12

    monkeypatch.setattr(measure, "_time", fake_time)
    monkeypatch.setattr(meta, "gpu_state", lambda: {"throttled": False, "sm_clock_mhz": 1980.0})
    monkeypatch.setattr(timing, "now", lambda: 0.0)
