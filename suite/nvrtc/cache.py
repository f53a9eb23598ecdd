"""The on-disk cubin cache of the NVRTC loader (suite.nvrtc.loader): one user's, checked on every read.

Key: everything that changes the cubin: the source and every header it includes (by content), the arch, every option
that reaches NVRTC as NVRTC receives it (defines, include directories, line info, the language standard, the file
name...), the name expressions and the NVRTC version.

Entry: a magic line, the SHA-256 of everything after it, a JSON header (format, key, options, symbols, build log,
cubin size) and the cubin. It is used only when the checksum covers the whole entry and the header's key and options
are the ones asked for, so an edited header, a truncated file or an entry moved from another key is rebuilt.

Trust: the directory is created 0700 and entries are written 0600 (a temporary name, then a rename, so a reader sees
the old entry or the new). A directory or entry not owned by the user, or writable by anyone else (group or others),
is refused: the kernel is compiled and used without the cache, with one warning. Entries are opened relative to the
opened directory with O_NOFOLLOW and O_NONBLOCK and must be regular files of at most MAX_ENTRY_BYTES: a symlink, a
FIFO or a device is refused, never followed, waited on or read. A failed write (a read-only or full disk, no home
directory, a directory where the entry goes) leaves the compiled cubin in use and warns once.

One compile per key: a process that misses an entry compiles it holding an exclusive flock on ``.NAME.lock`` beside it
(created 0600, never followed), and reads the cache again once it holds it; so of several processes missing one key
(test workers, concurrent runs) one compiles and the others load its entry.

So the cache is private: it cannot be shared between users (each has their own: ~/.cache/pipesuite/cubin, or
$PIPESUITE_CACHE_DIR); it can be deleted at any time. Nothing here runs at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

CACHE_FORMAT = 2
MAGIC = b"PIPESUITE-CUBIN-2"
# A process that misses a key another one is compiling waits at most this long for its entry (a holder stopped or stuck
# in the compiler would otherwise hold every other process back), polling every LOCK_POLL_S.
LOCK_WAIT_S, LOCK_POLL_S = 600.0, 0.05
MAX_ENTRY_BYTES = 256 * 1024 * 1024  # a cubin of the suite is well under 10 MiB; anything larger is not an entry
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

_warned: set[str] = set()
_warn_lock = threading.Lock()  # the loader compiles in parallel threads (suite.driver.precompile)


def _warn(kind: str, message: str) -> None:
    """One line on stderr, once per process for each ``kind`` ('dir', 'entry', 'write')."""
    with _warn_lock:
        if kind in _warned:
            return
        _warned.add(kind)
    print(f"warning: cubin cache: {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """Where cubins are cached: $PIPESUITE_CACHE_DIR, else ~/.cache/pipesuite/cubin. Raises RuntimeError when
    neither is known (no home directory)."""
    env = os.environ.get("PIPESUITE_CACHE_DIR")
    if env:
        return Path(env)
    home = Path.home()  # RuntimeError (3.12) when there is no home; '~' unexpanded (3.11 and earlier)
    if not home.is_absolute():
        raise RuntimeError("could not determine the home directory")
    return home / ".cache" / "pipesuite" / "cubin"


def included_sources(path: Path, include_path: tuple[str | Path, ...] = ()) -> list[Path]:
    """The .cu file and every header it pulls in with #include "..." (recursively), found as the compiler finds them:
    relative to the including file first, then in each ``include_path`` directory in order."""
    seen: list[Path] = []
    stack = [Path(path).resolve()]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.append(p)
        for name in _INCLUDE_RE.findall(p.read_text()):
            for base in (p.parent, *map(Path, include_path)):
                dep = (base / name).resolve()
                if dep.exists():
                    stack.append(dep)
                    break
    return seen


def cache_key(
    path: Path,
    arch: str,
    name_expressions: tuple[str, ...],
    options: list[str],
    header_dirs: tuple[str, ...] = (),
    nvrtc_version: tuple[int, int] = (0, 0),
) -> str:
    """The key of one compile. ``options``: every option NVRTC receives (suite.nvrtc.loader passes ProgramOptions'
    own rendering); ``header_dirs``: where the ``#include "..."`` headers hashed by content are found (a header
    library on the include path but not here, such as libcu++, is keyed by its directory, which is in ``options``)."""
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "arch": arch,
                "nvrtc": list(nvrtc_version),
                "name_expressions": list(name_expressions),
                "options": list(options),
            }
        ).encode()
    )
    for src in included_sources(path, header_dirs):
        h.update(b"\0" + src.name.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def _untrusted(st: os.stat_result, what: str) -> str | None:
    """Why a file or directory with this stat is not to be trusted, or None."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        return f"{what} is owned by uid {st.st_uid}, not by you (uid {uid})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit]
    if writers:
        return f"{what} is writable by {' and '.join(writers)} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class Entry:
    """One cache entry, ``name`` in the cache directory, for ``key`` built with ``options``. ``read`` returns the
    cubin, symbols and build log, or None (then the caller compiles); ``write`` stores a compiled cubin unless the
    entry was refused on read; ``keep`` writes a failed build's PTX beside it. None of them raises for a problem of
    the cache: the compile goes on without it."""

    def __init__(self, name: str, key: str, options: list[str]):
        self.name, self.key, self.options = name, key, list(options)
        self.refused = False  # read found something that is not ours to trust: no write either
        self.dir: Path | None = None

    # -- the directory ----------------------------------------------------------------------------------------------

    def _open_dir(self, create: bool) -> int | None:
        """The cache directory, opened and checked (owner, mode); None (with one warning) when it cannot be used,
        or silently when ``create`` is False and it does not exist yet."""
        try:
            d = cache_dir()
        except (RuntimeError, KeyError, OSError) as e:
            _warn("dir", f"no cache directory ({e}; set PIPESUITE_CACHE_DIR): compiling without the cache")
            return None
        self.dir = d
        if create:
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
            except OSError as e:
                _warn("dir", f"cannot create {d} ({e.strerror or e}): compiling without the cache")
                return None
        try:
            fd = os.open(d, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except FileNotFoundError:
            if create:
                _warn("dir", f"cannot open {d} (it vanished): compiling without the cache")
            return None
        except OSError as e:
            _warn("dir", f"cannot open {d} ({e.strerror or e}): compiling without the cache")
            return None
        why = _untrusted(os.fstat(fd), "the directory")
        if why:
            os.close(fd)
            _warn("dir", f"not using {d}: {why}; compiling without the cache (the cache is private to its user)")
            return None
        return fd

    # -- read --------------------------------------------------------------------------------------------------------

    def read(self) -> tuple[bytes, dict[str, str], str] | None:
        dfd = self._open_dir(create=False)
        if dfd is None:
            return None
        try:
            return self._read(dfd)
        finally:
            os.close(dfd)

    def _refuse(self, why: str) -> None:
        self.refused = True
        _warn("entry", f"refused {self.dir / self.name}: {why}; compiling without the cache")

    def _read(self, dfd: int):
        try:
            fd = os.open(self.name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as e:  # ELOOP: a symlink; EACCES, ENXIO (a socket), ...
            self._refuse(
                "it is a symlink" if os.path.islink(self.dir / self.name) else f"cannot open it ({e.strerror})"
            )
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._refuse("it is not a regular file")
                return None
            if why := _untrusted(st, "it"):
                self._refuse(why)
                return None
            if st.st_size > MAX_ENTRY_BYTES:
                self._refuse(f"it is {st.st_size} bytes, more than a cubin entry may be ({MAX_ENTRY_BYTES})")
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                blob = f.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return self._parse(blob)

    def _parse(self, blob: bytes):
        """The entry's content, or None when it is not whole (rebuilt, silently: a crash mid-write of an older
        version, a disk error) or is not this key's (an entry moved or copied from another key: refused)."""
        try:
            magic, digest, rest = blob.split(b"\n", 2)
            if magic != MAGIC or hashlib.sha256(rest).hexdigest().encode() != digest:
                return None
            header, cubin = rest.split(b"\n", 1)
            meta = json.loads(header)
            if meta.get("format") != CACHE_FORMAT or meta.get("size") != len(cubin):
                return None
            if meta.get("key") != self.key or meta.get("options") != self.options:
                self._refuse("it holds another key's build (its header names another key or other options)")
                return None
            symbols = meta["symbols"]
            if not isinstance(symbols, dict) or not all(isinstance(v, str) for v in symbols.values()):
                return None
            return cubin, dict(symbols), str(meta.get("log", ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    # -- one compiler per key ----------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def compiling(self):
        """Held while this process compiles the entry: an exclusive lock (flock) on a lock file beside it, so that
        of several processes missing the same key (pytest-xdist workers, concurrent runs) one compiles and the others
        wait, then read its entry. The holder removes the lock file as it lets go; a waiter that then holds a removed
        file's lock opens the path again. No lock (a cache that cannot take the lock file, a file system without
        flock, a system without fcntl) or a wait past LOCK_WAIT_S (a holder stopped or stuck): the compile goes on
        unlocked, as without the cache."""
        try:
            import fcntl
        except ImportError:  # not a POSIX system
            yield
            return
        dfd = self._open_dir(create=True)
        if dfd is None:
            yield
            return
        lock = f".{self.name}.lock"
        try:
            fd = self._lock(fcntl, dfd, lock)
            try:
                yield
            finally:
                if fd is not None:
                    try:
                        os.unlink(lock, dir_fd=dfd)
                    except OSError:
                        pass
                    os.close(fd)  # lets go of the lock
        finally:
            os.close(dfd)

    def _lock(self, fcntl, dfd: int, lock: str) -> int | None:
        """The lock file's descriptor, locked and still the file at its name; None to compile unlocked."""
        deadline = time.monotonic() + LOCK_WAIT_S
        said = False
        while time.monotonic() < deadline:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, 0o600, dir_fd=dfd)
            except OSError:  # a symlink or something else planted there: no lock, never followed
                return None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    return None
                locked = False
                while not locked:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        locked = True
                    except BlockingIOError:  # another process compiles this key
                        if not said:
                            print(
                                f"waiting for another process compiling {self.name} (one of this run's compile "
                                "workers, or another run sharing the cache)",
                                file=sys.stderr,
                                flush=True,
                            )
                            said = True
                        if time.monotonic() >= deadline:
                            break
                        time.sleep(LOCK_POLL_S)
                if not locked:
                    os.close(fd)
                    break
                try:
                    same = os.stat(lock, dir_fd=dfd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:  # its holder finished and removed it: the entry is there, or another lock
                    same = False
            except OSError as e:  # a file system without flock (ENOLCK, ENOSYS, EOPNOTSUPP): unlocked, as before
                os.close(fd)
                with contextlib.suppress(OSError):  # nobody can hold a lock there: the file is of no use
                    os.unlink(lock, dir_fd=dfd)
                _warn("lock", f"cannot lock {self.dir / lock} ({e.strerror or e}): compiling unlocked")
                return None
            except BaseException:
                os.close(fd)
                raise
            if same:
                return fd
            os.close(fd)
        _warn("lock", f"waited {LOCK_WAIT_S:.0f} s for another process compiling {self.name}: compiling it here too")
        return None

    # -- write -------------------------------------------------------------------------------------------------------

    def encode(self, cubin: bytes, symbols: dict[str, str], log: str = "") -> bytes:
        header = json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": self.key,
                "options": self.options,
                "symbols": symbols,
                "log": log,
                "size": len(cubin),
            }
        )
        rest = header.encode() + b"\n" + cubin
        return MAGIC + b"\n" + hashlib.sha256(rest).hexdigest().encode() + b"\n" + rest

    def write(self, cubin: bytes, symbols: dict[str, str], log: str = "") -> bool:
        """Store the entry (0600, atomically). False, with one warning, when it cannot be stored."""
        if self.refused:
            return False
        return self._store(self.name, self.encode(cubin, symbols, log)) is not None

    def _store(self, name: str, data: bytes) -> Path | None:
        dfd = self._open_dir(create=True)
        if dfd is None:
            return None
        d = self.dir
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
            return d / name
        except OSError as e:
            _warn(
                "write",
                f"could not store {d / name} ({type(e).__name__}: {e.strerror or e}); the "
                "compiled cubin is used, uncached",
            )
            return None
        finally:
            os.close(dfd)

    def keep(self, suffix: str, text: str) -> Path:
        """Keep ``text`` (a failed build's PTX) beside the entry, as ``name + suffix``; in a new private file of the
        system's temporary directory when the cache directory cannot take it."""
        data, name = text.encode(), self.name.removesuffix(".cubin") + suffix
        kept = self._store(name, data)
        if kept is not None:
            return kept
        fd, path = tempfile.mkstemp(prefix=f"{name.removesuffix(suffix)}-", suffix=suffix)  # O_EXCL, 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return Path(path)
