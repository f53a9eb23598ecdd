"""The NVRTC loader without a GPU: compile, cache (hit, miss, corrupt, truncated), errors."""

import shutil
import textwrap

import pytest

from suite.nvrtc import loader
from suite.ptx import vector

KERNEL = textwrap.dedent(
    """
    #include "ptx_wrappers.cuh"
    template <int S>
    __global__ void tiny(float* y) { y[threadIdx.x] = S * 1.0f; }
    """
)


@pytest.fixture
def cu_file(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    shutil.copy(loader.INCLUDE_DIR / "ptx_wrappers.cuh", d / "ptx_wrappers.cuh")  # found before the shared one
    f = d / "tiny.cu"
    f.write_text(KERNEL)
    return f


def test_compile_names_instantiations(cache_dir, cu_file):
    m = loader.compile_cu(cu_file, ("tiny<1>", "tiny<2>"), arch="sm_90")
    assert set(m.symbols) == {"tiny<1>", "tiny<2>"}
    assert m.symbols["tiny<2>"].startswith("_Z4tinyILi2E")
    assert m.cubin[:4] == b"\x7fELF"
    assert not m.from_cache


def test_cache_hit_and_miss(cache_dir, cu_file):
    first = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    again = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    assert again.from_cache and again.cubin == first.cubin and again.symbols == first.symbols
    # each thing the key covers misses: another arch, another define, another instantiation set
    assert not loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_80").from_cache
    assert not loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90", defines=("X=1",)).from_cache
    assert not loader.compile_cu(cu_file, ("tiny<1>", "tiny<3>"), arch="sm_90").from_cache
    assert len(list(cache_dir.glob("*.cubin"))) == 4


def test_included_header_is_part_of_the_key(cache_dir, cu_file):
    loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    header = cu_file.with_name("ptx_wrappers.cuh")
    header.write_text(header.read_text() + "\n// edited\n")
    assert not loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90").from_cache


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entry_is_rebuilt(cache_dir, cu_file, damage):
    good = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    (entry,) = cache_dir.glob("*.cubin")
    blob = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(blob[: len(blob) - 100])
    elif damage == "flip":
        entry.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    elif damage == "garbage":
        entry.write_bytes(b"not a cache entry at all")
    else:
        entry.write_bytes(b"")
    rebuilt = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    assert not rebuilt.from_cache and rebuilt.cubin == good.cubin
    assert loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90").from_cache  # and the entry is whole again


def test_compile_error_carries_file_line_and_log(cache_dir, cu_file):
    cu_file.write_text(KERNEL.replace("S * 1.0f;", "S * 1.0f +;"))
    with pytest.raises(loader.KernelCompileError) as info:
        loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    err = info.value
    assert err.path == cu_file
    assert f"{cu_file}(4): error" in err.log  # file:line of the broken statement
    assert "expected an expression" in str(err) and str(cu_file) in str(err)
    assert not list(cache_dir.glob("*.cubin"))  # nothing cached for a failed build


def test_a_wrappers_static_assert_names_the_line_that_instantiated_it(cache_dir, cu_file):
    """An error inside a shared header's template (a wrapper's static_assert on its immediate) is placed at the
    header, where NVRTC places it, and at the line of the compiled file that instantiated it."""
    cu_file.write_text(KERNEL.replace("S * 1.0f;", "S * 1.0f; wgmma_wait<9>();"))
    with pytest.raises(loader.KernelCompileError) as info:
        loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90a")
    first = info.value.first_error
    assert "ptx_wrappers.cuh:" in first and "pending-group count in 0..7" in first, first
    assert first.endswith(f"(instantiated at {cu_file}:4)"), first


def test_unknown_name_expression_is_a_clear_error(cache_dir, cu_file):
    m = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    with pytest.raises(KeyError, match="tiny<7>"):
        m.kernel("tiny<7>")


def test_resource_usage_and_sass(cache_dir, cu_file):
    m = loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90")
    res = m.resources()["tiny<1>"]
    assert res["registers"] > 0 and res["local"] == 0
    assert "Function : " + m.symbols["tiny<1>"] in m.sass()


def _compile_in_child(args):
    path, cache = args
    import os

    os.environ["PIPESUITE_CACHE_DIR"] = cache
    from suite.nvrtc import loader as child_loader

    m = child_loader.compile_cu(path, ("tiny<1>", "tiny<2>"), arch="sm_90")
    return m.cubin, m.symbols


def test_two_processes_compiling_at_once_leave_one_valid_entry(cache_dir, cu_file):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        (cubin1, sym1), (cubin2, sym2) = pool.map(_compile_in_child, [(str(cu_file), str(cache_dir))] * 2)
    assert cubin1 == cubin2 and sym1 == sym2
    entries = list(cache_dir.iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".cubin", entries  # no temp files left behind
    hit = loader.compile_cu(cu_file, ("tiny<1>", "tiny<2>"), arch="sm_90")
    assert hit.from_cache and hit.cubin == cubin1


def test_inline_asm_error_names_the_source_line(cache_dir, tmp_path):
    """A typo inside an inline-asm wrapper fails in ptxas, which only knows PTX lines: the error names the wrapper's
    file:line and the kernel line it was inlined at, and keeps the PTX."""
    src = tmp_path / "typo"
    src.mkdir()
    shutil.copy(vector.SOURCE, src / "vector.cu")
    for other in loader.INCLUDE_DIR.glob("*.cuh"):  # the shared headers beside it, found before suite/include's, so
        shutil.copy(other, src / other.name)  # that ring.cuh includes the broken wrappers written below
    header = (loader.INCLUDE_DIR / "ptx_wrappers.cuh").read_text()
    assert header.count("cp.async.commit_group;") == 1
    (src / "ptx_wrappers.cuh").write_text(header.replace("cp.async.commit_group;", "cp.async.comit_group;"))
    typo_line = next(i for i, text in enumerate(header.splitlines(), 1) if "cp.async.commit_group;" in text)
    call_lines = {
        i for i, text in enumerate((src / "vector.cu").read_text().splitlines(), 1) if "cp_async_commit();" in text
    }
    with pytest.raises(loader.KernelCompileError) as info:
        loader.compile_cu(src / "vector.cu", (vector.name_expression(2),), arch="sm_90")
    err = info.value
    assert "ptx input, line" in err.log  # ptxas, not the C++ front end
    assert err.locations and all(
        f"ptx_wrappers.cuh:{typo_line} (inlined at {src / 'vector.cu'}:" in loc for loc in err.locations
    ), err.locations
    inlined_at = {int(loc.split("vector.cu:")[1].split(")")[0]) for loc in err.locations}
    assert inlined_at <= call_lines and inlined_at, (inlined_at, call_lines)
    assert "Unknown modifier '.comit_group'" in str(err) and str(err.ptx_path) in str(err)
    ptx_line = int(err.locations[0].rsplit("PTX line ", 1)[1].rstrip("]"))
    assert "cp.async.comit_group" in err.ptx_path.read_text().splitlines()[ptx_line - 1]


def test_a_cluster_launch_counts_its_grid_in_clusters():
    """loader.launch takes the grid in blocks; cuda.core counts a clustered grid in clusters: the conversion, and a
    grid that is not whole clusters refused before anything is launched. (cuda.core's own LaunchConfig wants a driver
    to validate a cluster: a recording stand-in takes its place here.)"""

    def config(**kwargs):
        return kwargs

    assert loader._launch_config(config, 132, 384, 1024, 1) == {"grid": 132, "block": 384, "shmem_size": 1024}
    assert loader._launch_config(config, 132, 384, 1024, 2) == {
        "grid": 66,
        "cluster": 2,
        "block": 384,
        "shmem_size": 1024,
    }
    with pytest.raises(ValueError, match="multiple of the cluster"):
        loader._launch_config(config, 131, 384, 1024, 2)
