import os

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    # Before any Triton kernel module is imported: triton.jit decides at decoration time whether to interpret.
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":
    from suite.triton import interpreter_compat

    interpreter_compat.install()  # older interpreters under NumPy >= 2.5 (see that module)


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private, empty cubin cache for the test."""
    d = tmp_path / "cubin-cache"
    monkeypatch.setenv("PIPESUITE_CACHE_DIR", str(d))
    return d


def pytest_addoption(parser):
    parser.addoption("--suite-plugin", action="append", default=[], metavar="MODULE",
                     help="load a pipesuite plugin (suite.plugins) before collection: the registry-wide tests "
                          "cover its variants too")


def pytest_configure(config):
    plugins = config.getoption("--suite-plugin")
    if plugins:
        from suite.plugins import load_plugins

        load_plugins(plugins)
