"""The cubin cache as a hostile local user and a broken disk would meet it (issue 22, items 1-5): nothing planted is
loaded, nothing is followed or waited on, the whole entry is checked, a cache that cannot be written never fails a
build, and every option that reaches NVRTC is in the key. CPU only (NVRTC builds for sm_90), seconds each."""

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from suite.nvrtc import cache, loader

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "template <int S>\n__global__ void tiny(float* y) { y[threadIdx.x] = S * 1.0f; }\n"
FAULTY = "template <int S>\n__global__ void tiny(float* y) { y[threadIdx.x] = S * 2.0f; }\n"  # the planted build
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OTHER_UID = 65534  # nobody


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(cache, "_warned", set())  # "once per process" starts afresh for each test


@pytest.fixture
def cu_file(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    f = d / "tiny.cu"
    f.write_text(KERNEL)
    return f


def _build(cu_file, **kw):
    return loader.compile_cu(cu_file, ("tiny<1>",), arch="sm_90", **kw)


def _entry(cache_dir) -> Path:
    (entry,) = cache_dir.glob("*.cubin")
    return entry


def _warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: cubin cache:")]


def _header(entry: Path) -> dict:
    _magic, _digest, rest = entry.read_bytes().split(b"\n", 2)
    return json.loads(rest.split(b"\n", 1)[0])


def _planted(cu_file, entry: Path) -> None:
    """What another user can write: the faulty kernel's cubin under the victim's entry name, with the victim's key
    and options in a header whose checksum is right (everything the key covers is public)."""
    meta = _header(entry)
    faulty_src = cu_file.with_name("faulty.cu")
    faulty_src.write_text(FAULTY)
    faulty = loader.compile_cu(faulty_src, ("tiny<1>",), arch="sm_90", use_cache=False)
    entry.write_bytes(cache.Entry(entry.name, meta["key"], meta["options"]).encode(faulty.cubin, faulty.symbols))


# -- 1. a planted cubin is not loaded ---------------------------------------------------------------------------------


def test_entry_carries_its_key_and_options_and_is_private(cache_dir, cu_file):
    first = _build(cu_file)
    entry = _entry(cache_dir)
    meta = _header(entry)
    assert meta["key"] and entry.name.endswith(f"{meta['key'][:32]}.cubin")
    assert "--generate-line-info" in meta["options"] and "-arch=sm_90" in meta["options"]
    assert oct(cache_dir.stat().st_mode & 0o777) == "0o700" and oct(entry.stat().st_mode & 0o777) == "0o600"
    assert _build(cu_file).from_cache and first.cubin == _build(cu_file).cubin


def test_an_entry_moved_from_another_key_is_refused(cache_dir, cu_file, capsys):
    """A valid entry of another build (another define) renamed to this build's name: its header names another key."""
    _build(cu_file)
    mine = _entry(cache_dir)
    _build(cu_file, defines=("OTHER=1",))
    other = next(p for p in cache_dir.glob("*.cubin") if p != mine)
    os.replace(other, mine)
    rebuilt = _build(cu_file)
    assert not rebuilt.from_cache
    assert any("another key" in w for w in _warnings(capsys))


@pytest.mark.skipif(not AS_ROOT, reason="handing a file to another user needs root (chown)")
def test_a_planted_entry_of_another_user_is_refused(cache_dir, cu_file, capsys):
    good = _build(cu_file)
    entry = _entry(cache_dir)
    _planted(cu_file, entry)
    os.chown(entry, OTHER_UID, OTHER_UID)
    again = _build(cu_file)
    assert not again.from_cache and again.cubin == good.cubin
    (warning,) = _warnings(capsys)
    assert "owned by uid 65534, not by you" in warning and str(entry) in warning
    assert entry.stat().st_uid == OTHER_UID  # refused: not loaded, not overwritten


def test_a_planted_entry_others_can_write_is_refused(cache_dir, cu_file, capsys):
    good = _build(cu_file)
    entry = _entry(cache_dir)
    _planted(cu_file, entry)
    assert _build(cu_file).cubin != good.cubin  # the plant is well formed: ours, private, it would load
    entry.chmod(0o666)
    again = _build(cu_file)
    assert not again.from_cache and again.cubin == good.cubin
    assert any("writable by group and others" in w for w in _warnings(capsys))


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_shared_directory_is_not_used(cache_dir, cu_file, capsys, mode):
    """A directory others can write (a shared one, /tmp-like with the sticky bit, or a group's): whoever can write
    there can plant an entry, so nothing is read from it or written to it; one warning for the whole run."""
    good = _build(cu_file)
    entry = _entry(cache_dir)
    _planted(cu_file, entry)
    cache_dir.chmod(mode)
    for _ in range(2):
        again = _build(cu_file)
        assert not again.from_cache and again.cubin == good.cubin
    warnings = _warnings(capsys)
    assert len(warnings) == 1 and "the directory is writable by" in warnings[0], warnings
    assert _build(cu_file, defines=("X=1",)) and len(list(cache_dir.glob("*.cubin"))) == 1  # nothing written there


@pytest.mark.skipif(not AS_ROOT, reason="handing a directory to another user needs root (chown)")
def test_a_directory_of_another_user_is_not_used(cache_dir, cu_file, capsys):
    good = _build(cu_file)
    os.chown(cache_dir, OTHER_UID, OTHER_UID)
    again = _build(cu_file)
    assert not again.from_cache and again.cubin == good.cubin
    assert any("the directory is owned by uid 65534" in w for w in _warnings(capsys))


# -- 2. symlinks and special files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/dev/zero", "victim"])
def test_an_entry_that_is_a_symlink_is_not_followed(cache_dir, cu_file, tmp_path, capsys, target):
    good = _build(cu_file)
    entry = _entry(cache_dir)
    victim = tmp_path / "victim"
    victim.write_bytes(entry.read_bytes())  # a valid entry elsewhere: still not read through the link
    entry.unlink()
    entry.symlink_to(victim if target == "victim" else target)
    again = _build(cu_file)  # /dev/zero read whole would exhaust memory
    assert not again.from_cache and again.cubin == good.cubin
    assert any("it is a symlink" in w for w in _warnings(capsys))
    assert entry.is_symlink()  # refused: left as it is


def test_an_entry_that_is_a_fifo_does_not_hang(cache_dir, cu_file, capsys):
    _build(cu_file)
    entry = _entry(cache_dir)
    entry.unlink()
    os.mkfifo(entry)
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("m", _build(cu_file)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "reading a FIFO entry hangs the build"
    assert not result["m"].from_cache
    assert any("not a regular file" in w for w in _warnings(capsys))


def test_an_oversized_entry_is_not_read(cache_dir, cu_file, capsys, monkeypatch):
    _build(cu_file)
    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 100)
    assert not _build(cu_file).from_cache
    assert any("more than a cubin entry may be" in w for w in _warnings(capsys))


BROKEN = 'template <int S>\n__global__ void tiny(float* y) { unsigned v; asm volatile("mov.u33 %0, 7;" : "=r"(v)); y[0] = v; }\n'


def test_the_kept_ptx_is_never_written_through_a_symlink(cache_dir, cu_file, tmp_path):
    cu_file.write_text(BROKEN)
    with pytest.raises(loader.KernelCompileError) as first:
        _build(cu_file)
    ptx_path = first.value.ptx_path
    assert ptx_path.parent == cache_dir and "mov.u33" in ptx_path.read_text()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    ptx_path.unlink()
    ptx_path.symlink_to(victim)
    with pytest.raises(loader.KernelCompileError) as second:
        _build(cu_file)
    assert victim.read_text() == "precious"
    assert not second.value.ptx_path.is_symlink() and "mov.u33" in second.value.ptx_path.read_text()


# -- 3. the whole entry is checksummed -------------------------------------------------------------------------------


def test_an_edited_symbol_table_is_rebuilt(cache_dir, cu_file):
    """The header edited (a symbol renamed), the cubin and its old checksum left: rows would have no registers and
    no SASS. The checksum covers the header too, so the entry is rebuilt."""
    good = _build(cu_file)
    entry = _entry(cache_dir)
    magic, digest, rest = entry.read_bytes().split(b"\n", 2)
    header, cubin = rest.split(b"\n", 1)
    meta = json.loads(header)
    meta["symbols"]["tiny<1>"] = "_Z4tinyILi9EEvPf"
    entry.write_bytes(magic + b"\n" + digest + b"\n" + json.dumps(meta).encode() + b"\n" + cubin)
    again = _build(cu_file)
    assert not again.from_cache and again.symbols == good.symbols
    assert _build(cu_file).from_cache  # and the entry is whole again


# -- 4. a cache that cannot be written never fails a build -------------------------------------------------------


def _unwritable(kind: str, tmp_path: Path, monkeypatch) -> None:
    if kind == "uncreatable directory":  # /proc takes no new directory, not even from root
        monkeypatch.setenv("PIPESUITE_CACHE_DIR", "/proc/pipesuite-no-such/cubin")
    elif kind == "no home":
        monkeypatch.delenv("PIPESUITE_CACHE_DIR", raising=False)
        monkeypatch.setenv("HOME", "/proc/pipesuite-no-such-home")
    elif kind == "unset home":
        monkeypatch.delenv("PIPESUITE_CACHE_DIR", raising=False)
        monkeypatch.delenv("HOME", raising=False)
        monkeypatch.setattr(
            Path,
            "home",
            classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("Could not determine home directory."))),
        )
    elif kind == "read-only directory":
        if AS_ROOT:
            pytest.skip("root writes through a 0500 directory (the /proc case is a directory that refuses root)")
        d = tmp_path / "ro"
        d.mkdir(mode=0o500)
        monkeypatch.setenv("PIPESUITE_CACHE_DIR", str(d))


@pytest.mark.parametrize("kind", ["uncreatable directory", "no home", "unset home", "read-only directory"])
def test_an_unwritable_cache_warns_once_and_the_build_goes_on(kind, cu_file, tmp_path, monkeypatch, capsys):
    _unwritable(kind, tmp_path, monkeypatch)
    built = [_build(cu_file), _build(cu_file, defines=("X=1",)), _build(cu_file, defines=("X=2",))]
    assert all(m.cubin[:4] == b"\x7fELF" and not m.from_cache for m in built)
    warnings = _warnings(capsys)
    assert len(warnings) == 1, warnings
    assert "compiling without the cache" in warnings[0] or "uncached" in warnings[0]


def test_an_entry_path_that_is_a_directory_warns_and_the_build_goes_on(cache_dir, cu_file, capsys):
    _build(cu_file)
    entry = _entry(cache_dir)
    entry.unlink()
    entry.mkdir()
    assert _build(cu_file).cubin[:4] == b"\x7fELF"
    (warning,) = _warnings(capsys)
    assert "it is not a regular file; compiling without the cache" in warning
    assert entry.is_dir() and not list(cache_dir.glob(".*.tmp"))


def test_a_full_disk_warns_and_the_build_goes_on(tmp_path, cu_file):
    """RLIMIT_FSIZE makes every write past 512 bytes fail as a full disk does (EFBIG); the build is used."""
    script = textwrap.dedent(f"""
        import os, resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
        os.environ["PIPESUITE_CACHE_DIR"] = {str(tmp_path / "cache")!r}
        from suite.nvrtc import loader
        m = loader.compile_cu({str(cu_file)!r}, ("tiny<1>",), arch="sm_90")
        print("built", m.cubin[:4] == b"\\x7fELF", m.from_cache)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "built True False"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: cubin cache:")]
    assert len(warnings) == 1 and "could not store" in warnings[0], proc.stderr
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # nothing half-written left


# -- 5. every option that reaches NVRTC is in the key ------------------------------------------------------------


def test_changing_an_nvrtc_option_misses_the_cache(cache_dir, cu_file, monkeypatch):
    with_lines = _build(cu_file)
    assert _build(cu_file).from_cache
    monkeypatch.setattr(loader, "NVRTC_OPTIONS", {**loader.NVRTC_OPTIONS, "lineinfo": False})
    without = _build(cu_file)
    assert not without.from_cache and without.cubin != with_lines.cubin  # no line table: another cubin
    monkeypatch.setattr(loader, "NVRTC_OPTIONS", {**loader.NVRTC_OPTIONS, "lineinfo": True, "std": "c++20"})
    assert not _build(cu_file).from_cache


def test_the_key_covers_each_option_given():
    src = ROOT / "tests" / "plugins" / "example_plugin.cu"
    base = cache.cache_key(src, "sm_90", ("k<1>",), ["-arch=sm_90", "--std=c++17"])
    assert base != cache.cache_key(src, "sm_90", ("k<1>",), ["-arch=sm_90", "--std=c++17", "--generate-line-info"])
    assert base != cache.cache_key(src, "sm_90", ("k<2>",), ["-arch=sm_90", "--std=c++17"])
    assert base == cache.cache_key(src, "sm_90", ("k<1>",), ["-arch=sm_90", "--std=c++17"])


def test_a_run_with_an_unwritable_cache_builds_every_row(tmp_path):
    """The CLI with a cache directory that cannot be created: every PTX row is built and described (none fails
    'build failed: PermissionError'), exit 0, and one warning says the cache is not used."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PIPESUITE_CACHE_DIR": "/proc/pipesuite-no-such/cubin"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite.run",
            "--problem",
            "vector",
            "--variant",
            "ptx:cp.async ring",
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: cubin cache:")]
    assert len(warnings) == 1 and "cannot create /proc/pipesuite-no-such/cubin" in warnings[0], proc.stderr
    rows = json.loads((tmp_path / "run" / "results.json").read_text())["rows"]
    ptx = [r for r in rows if r["backend"] == "ptx"]
    assert ptx and all(r["valid"] is not False and r.get("built_for") == "sm_90" for r in ptx), ptx


def test_cuobjdump_listings_are_kept_by_content_and_checked_like_cubins(cache_dir, monkeypatch, capsys):
    """suite.sass keeps each cuobjdump listing in the private cache, keyed by the cubin's content and the flags: a
    second reading of the same cubin runs no cuobjdump, another cubin or other flags do, and an edited listing is
    not believed (its checksum fails: cuobjdump runs again)."""
    from suite.nvrtc import sass

    runs = []

    def fake_run(cmd, **kwargs):
        runs.append(cmd[1:-1])
        return subprocess.CompletedProcess(cmd, 0, stdout=f"listing {len(runs)} {' '.join(cmd[1:-1])}", stderr="")

    monkeypatch.setattr(sass.subprocess, "run", fake_run)
    first = sass._cuobjdump(b"cubin one", "-sass")
    assert sass._cuobjdump(b"cubin one", "-sass") == first and len(runs) == 1
    entries = list(cache_dir.glob("cuobjdump-*.txt"))
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o777 == 0o600
    assert sass._cuobjdump(b"cubin two", "-sass") != first and len(runs) == 2
    sass._cuobjdump(b"cubin one", "-res-usage")
    assert len(runs) == 3 and runs[-1] == ["-res-usage"]
    entries[0].write_bytes(entries[0].read_bytes().replace(b"listing 1", b"listing 9"))
    assert sass._cuobjdump(b"cubin one", "-sass") == "listing 4 -sass" and len(runs) == 4


# -- 6. one process compiles a key; the others wait for its entry ----------------------------------------------------


def test_a_process_missing_a_key_being_compiled_waits_and_reads_the_entry(cache_dir, cu_file):
    """While one process holds a key's compile lock, another that misses the same key waits for it (and says so) and
    loads the entry it wrote, instead of compiling the same kernel again (pytest-xdist workers, concurrent runs)."""
    import select
    import time

    _build(cu_file)
    entry_path = _entry(cache_dir)
    saved = entry_path.read_bytes()
    entry_path.unlink()  # a miss again, for the other process
    script = textwrap.dedent(f"""
        from suite.nvrtc import loader
        m = loader.compile_cu({str(cu_file)!r}, ("tiny<1>",), arch="sm_90")
        print("from_cache", m.from_cache, flush=True)
    """)
    with cache.Entry(entry_path.name, "", []).compiling():  # as the compiling process holds it
        proc = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PIPESUITE_CACHE_DIR": str(cache_dir)},
        )
        try:
            deadline, said = time.monotonic() + 120, ""
            while "waiting for another process compiling" not in said and time.monotonic() < deadline:
                if select.select([proc.stderr], [], [], 1.0)[0]:
                    line = proc.stderr.readline()  # "waiting ...": it missed the entry and waits for the lock
                    if not line:  # it ended without waiting
                        break
                    said += line
            assert "waiting for another process compiling" in said, said
            entry_path.write_bytes(saved)  # what the compiling process writes before it lets go
        except BaseException:
            proc.kill()
            raise
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "from_cache True", (out, err[-2000:])
    assert sorted(p.name for p in cache_dir.iterdir()) == [entry_path.name]  # the lock file went with the lock


def test_a_symlink_planted_at_the_lock_is_not_followed(cache_dir, cu_file, tmp_path):
    _build(cu_file)
    entry_path = _entry(cache_dir)
    entry_path.unlink()
    target = tmp_path / "victim"  # does not exist: a followed link would create it
    (cache_dir / f".{entry_path.name}.lock").symlink_to(target)
    built = _build(cu_file)  # compiled without the lock
    assert not built.from_cache and _entry(cache_dir) == entry_path
    assert not target.exists() and (cache_dir / f".{entry_path.name}.lock").is_symlink()


def test_a_file_system_without_flock_compiles_unlocked(cache_dir, cu_file, monkeypatch, capsys):
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    built = _build(cu_file)
    assert not built.from_cache and _build(cu_file).from_cache  # compiled, stored, read back
    warnings = _warnings(capsys)
    assert len(warnings) == 1 and "cannot lock" in warnings[0] and "No locks available" in warnings[0], warnings
    assert [p.name for p in cache_dir.iterdir()] == [_entry(cache_dir).name]  # no lock file left behind


def test_a_holder_that_never_finishes_is_waited_for_only_so_long(cache_dir, cu_file, monkeypatch, capsys):
    """A holder stopped or stuck in the compiler: after LOCK_WAIT_S the waiter compiles the kernel itself."""
    _build(cu_file)
    entry_path = _entry(cache_dir)
    entry_path.unlink()
    monkeypatch.setattr(cache, "LOCK_WAIT_S", 0.5)
    with cache.Entry(entry_path.name, "", []).compiling():  # held here, by another open of the lock file
        built = _build(cu_file)
    assert not built.from_cache and _entry(cache_dir) == entry_path
    err = capsys.readouterr().err
    assert "waiting for another process compiling" in err and "compiling it here too" in err, err
