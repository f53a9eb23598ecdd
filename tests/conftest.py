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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Tests marked gpu_alone take the GPU as a whole (timing, ncu's clock control, compute-sanitizer, tens of GB):
    under pytest-xdist (-n auto) they take turns, each holding GPU_LOCK from its setup to its teardown, so no two of
    them time, profile or fill memory side by side on one GPU. Every other test, the GPU correctness checks marked
    gpu included (a few MB each, nothing timed), runs in parallel. A lock file rather than an xdist_group:
    --dist loadgroup stopped grouping with pytest 9.2 (pytest-xdist issue #1386), silently."""
    if not (HAS_GPU and "gpu_alone" in item.keywords):
        yield
        return
    from filelock import FileLock

    with FileLock(GPU_LOCK):
        yield


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "gpu_alone" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private, empty cubin cache for the test."""
    d = tmp_path / "cubin-cache"
    monkeypatch.setenv("PIPESUITE_CACHE_DIR", str(d))
    return d


def pytest_addoption(parser):
    parser.addoption(
        "--suite-plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="load a pipesuite plugin (suite.plugins) before collection: the registry-wide tests "
        "cover its variants too",
    )


def pytest_configure(config):
    plugins = config.getoption("--suite-plugin")
    if plugins:
        from suite.plugins import load_plugins

        load_plugins(plugins)
