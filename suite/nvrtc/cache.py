"""The on-disk cubin cache of the NVRTC loader (suite.nvrtc.loader).

An entry is keyed by everything that changes the cubin: the source and every header it includes (by content), the
arch, the defines, the name expressions, the include directories and the NVRTC version. Entries are written
atomically (a temporary file, then a rename) and verified by checksum on read, so a truncated or corrupt entry is
rebuilt instead of loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

CACHE_FORMAT = 1
HEADER_MAGIC = b"PIPESUITE-CUBIN"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def cache_dir() -> Path:
    """Where cubins are cached: $PIPESUITE_CACHE_DIR, else ~/.cache/pipesuite/cubin."""
    env = os.environ.get("PIPESUITE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pipesuite" / "cubin"


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


def cache_key(path: Path, arch: str, defines: tuple[str, ...], name_expressions: tuple[str, ...],
              include_path: tuple[str, ...] = (), nvrtc_version: tuple[int, int] = (0, 0),
              searched_headers: tuple[str, ...] = ()) -> str:
    """``searched_headers``: include directories whose headers are found by the compiler but not hashed here (a
    header library such as libcu++, versioned with the toolkit): keyed by directory, not content."""
    h = hashlib.sha256()
    h.update(f"format={CACHE_FORMAT};arch={arch};nvrtc={nvrtc_version};".encode())
    h.update(json.dumps([list(defines), list(name_expressions), list(include_path), list(searched_headers)]).encode())
    for src in included_sources(path, include_path):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def write_entry(entry: Path, cubin: bytes, symbols: dict[str, str], log: str = "") -> None:
    """Atomic write: a temp file in the same directory, then os.replace. Readers see the old entry or the new."""
    header = json.dumps({"sha256": hashlib.sha256(cubin).hexdigest(), "size": len(cubin), "symbols": symbols,
                         "log": log})
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=entry.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(HEADER_MAGIC + b"\n" + header.encode() + b"\n" + cubin)
        os.replace(tmp, entry)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_entry(entry: Path) -> tuple[bytes, dict[str, str], str] | None:
    """The cached cubin, symbol map and build log, or None when the entry is missing, truncated or corrupt."""
    try:
        blob = entry.read_bytes()
        magic, header, cubin = blob.split(b"\n", 2)
        meta = json.loads(header)
        if magic != HEADER_MAGIC or len(cubin) != meta["size"]:
            return None
        if hashlib.sha256(cubin).hexdigest() != meta["sha256"]:
            return None
        return cubin, dict(meta["symbols"]), str(meta.get("log", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
