import contextlib
import gc
import os
import tempfile

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    # Before any Triton kernel module is imported: triton.jit decides at decoration time whether to interpret.
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":
    from suite.triton import interpreter_compat

    interpreter_compat.install()  # older interpreters under NumPy >= 2.5 (see that module)


GPU_LOCK = os.path.join(tempfile.gettempdir(), f"pipesuite-gpu-tests-{getattr(os, 'getuid', lambda: 0)()}.lock")
GPU_TURNSTILE = GPU_LOCK + ".turnstile"
# Set while a test holds its turn: a pytest or suite process the test starts inherits it and takes no turn of its own
# (its parent's turn covers it; waiting for one would deadlock).
TURN_HELD = "PIPESUITE_TESTS_GPU_TURN_HELD"


@contextlib.contextmanager
def gpu_turn(alone: bool):
    """A readers-writer lock over the GPU between pytest-xdist workers (flock on GPU_LOCK): a test marked gpu_alone
    holds it exclusively, every other test shared. A turnstile (GPU_TURNSTILE) gives the exclusive side priority:
    a gpu_alone test waiting for its turn stops new shared turns from starting, so it waits for the tests running,
    not for all the tests left."""
    import fcntl

    with open(GPU_TURNSTILE, "a") as turnstile, open(GPU_LOCK, "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # wait behind a gpu_alone test that is waiting or running
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _give_back_gpu_memory() -> None:
    """What the test's tensors left in torch's caching allocator goes back to the GPU, so that tests in other
    workers (and the one test holding 26 GB) can have it."""
    if torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """On a GPU machine every test takes a turn on the GPU (gpu_turn): tests marked gpu_alone (timing, ncu's clock
    control) one at a time, every other test, the GPU correctness checks and compute-sanitizer's included (a few MB
    to a few GB each, nothing timed; one, test_gpu.py's past 2^31 elements, holds 26 GB), in parallel with each other;
    each gives its cached GPU memory back when it ends. A lock file rather than an xdist_group: --dist loadgroup
    stopped grouping with pytest 9.2 (pytest-xdist issue #1386), silently."""
    if not HAS_GPU or os.environ.get(TURN_HELD):
        yield
        if HAS_GPU:
            _give_back_gpu_memory()
        return
    with gpu_turn("gpu_alone" in item.keywords):
        os.environ[TURN_HELD] = "1"
        try:
            yield
            _give_back_gpu_memory()
        finally:
            os.environ.pop(TURN_HELD, None)


# "--test-part I/N": run only part I of N of the collected tests (a time-limited machine). An option, not an
# environment variable: the tests that run pytest in a subprocess must see their whole selection, not a part of it.
TEST_PART = "--test-part"


def part_indices(spec: str, count: int) -> list[int]:
    """The indices of the collected tests that part ``spec`` ("I/N", 1 <= I <= N) runs: every N-th from I - 1, so
    that the parts share each file's tests, the slow ones among them, evenly. Refuses a malformed spec."""
    try:
        index, parts = (int(x) for x in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"{TEST_PART} must be I/N with integers (got {spec!r})") from None
    if not 1 <= index <= parts:
        raise pytest.UsageError(f"{TEST_PART} must be I/N with 1 <= I <= N (got {spec!r})")
    return list(range(index - 1, count, parts))


def pytest_collection_modifyitems(config, items):
    if spec := config.getoption(TEST_PART):
        keep = set(part_indices(spec, len(items)))
        config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i not in keep])
        items[:] = [item for i, item in enumerate(items) if i in keep]
    if HAS_GPU:
        # The tests marked long first, at every other place (xdist hands each worker two at a time: pyproject.toml's
        # --maxschedchunk), so that each starts at once on a worker of its own and the rest runs beside them; the
        # gpu_alone tests last, one after another, rather than each stopping the parallel tests in turn.
        long = [item for item in items if "long" in item.keywords and "gpu_alone" not in item.keywords]
        alone = [item for item in items if "gpu_alone" in item.keywords]
        rest = [item for item in items if item not in long and item not in alone]
        front = [x for i, item in enumerate(long) for x in [item, *rest[i : i + 1]]]
        items[:] = front + rest[len(long) :] + alone
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "gpu_alone" in item.keywords:
            item.add_marker(skip)


def main_here(argv, capsys) -> tuple[int, str, str]:
    """``python -m suite.run``'s main() in this process: (exit status, stdout, stderr). For the refusals, which stop
    before anything runs (a process each costs two seconds of imports); argparse's own exit from inside parse_args."""
    from suite.run import main

    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private, empty cubin cache for the test. SASS listings an earlier test started in the background
    (suite.sass.pending_classes) are written before it is set, and this test's before it is unset: a listing written
    late would land in another test's cache (one did, on the H200, in test_loader)."""
    from suite.sass import wait_for_listings

    wait_for_listings()
    d = tmp_path / "cubin-cache"
    monkeypatch.setenv("PIPESUITE_CACHE_DIR", str(d))
    yield d
    wait_for_listings()


def pytest_addoption(parser):
    parser.addoption(
        "--suite-plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="load a pipesuite plugin (suite.plugins) before collection: the registry-wide tests "
        "cover its variants too",
    )
    parser.addoption(
        TEST_PART,
        metavar="I/N",
        help="run part I of N of the collected tests (every N-th from the I-th): the whole suite in N runs",
    )


def pytest_configure(config):
    if spec := config.getoption(TEST_PART):
        part_indices(spec, 0)  # a malformed part refused here, before xdist's workers collect
    plugins = config.getoption("--suite-plugin")
    if plugins:
        from suite.plugins import load_plugins

        load_plugins(plugins)


def cut_run(data: dict, jobs: list[int], keep_jobs: int, keep_rows: int) -> dict:
    """A run's record ``data`` as a time limit leaves it (changed in place and returned): of its ``jobs`` in order,
    the first ``keep_jobs`` whole, ``keep_rows`` rows of the next, nothing after, ``meta.complete`` false."""
    whole = [r for r in data["rows"] if r["job"] in jobs[:keep_jobs]]
    half = [r for r in data["rows"] if r["job"] == jobs[keep_jobs]][:keep_rows]
    data["rows"], data["meta"]["complete"] = whole + half, False
    return data
