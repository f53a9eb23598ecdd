"""Reading and writing a results directory safely: the JSON a user hands in (only regular files, finite numbers,
bounded size and nesting), the output directory checked before any work and held by one run at a time, and files
written whole (a temporary name renamed into place) with a fallback under the system temp dir when the final write
fails.

Used by suite.run, suite.merge and suite.driver.compare; knows nothing of rows beyond their being JSON.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import stat
import tempfile
from pathlib import Path

MAX_BYTES = 1 << 30  # a results.json larger than this is not one (nor would it fit in memory as Python objects)
MAX_INT_DIGITS = 19  # an integer of more digits than a 64-bit one holds is no count, index or time of a results file


class InputError(ValueError):
    """A file handed in is not one that can be read as a results file: one line, naming it."""


class _BadNumber(ValueError):
    pass


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _BadNumber(f"the number {text} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _BadNumber(f"the integer {text[:24]}... has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _constant(text: str):
    raise _BadNumber(f"{text} is not a number JSON allows")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def read_json(path: str | Path):
    """The JSON value in the regular file ``path``. InputError (one line naming it) when it cannot be read, is not a
    regular file (refused from its status, without opening it: a FIFO would block, a device never ends), is larger
    than MAX_BYTES, is not UTF-8 JSON, holds a number out of range (1e400, NaN) or is nested too deeply."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: not a regular file (a {_kind(mode)}): refused without opening it")
    try:  # O_NONBLOCK: should it have become a FIFO since the stat, the open does not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InputError(f"{path}: not a regular file: refused")
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    if len(raw) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB: not a results file")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not JSON (not UTF-8 text)") from None
    if not text.strip():
        raise InputError(f"{path}: not JSON (the file is empty)")
    try:
        return json.loads(text, parse_float=_finite, parse_int=_bounded_int, parse_constant=_constant)
    except _BadNumber as e:
        raise InputError(f"{path}: not a pipesuite results.json ({e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise InputError(f"{path}: not a pipesuite results.json (JSON nested too deeply)") from None


def temp_beside(path: Path) -> tuple[int, Path]:
    """A new, empty file next to ``path`` to write before renaming it into place, created with mode 0666 less the
    umask like any file the user creates (tempfile.mkstemp would make it 0600)."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def atomic_write(path: Path, data: str | bytes) -> None:
    """``data`` into ``path`` whole or not at all: written to a temporary name beside it, then renamed over it."""
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_record(out_dir: Path, rows: list[dict], meta: dict, complete: bool) -> Path:
    """results.json of a run in ``out_dir``, atomically, with ``meta.complete`` saying whether the run finished (a
    run writes it after each job with complete false, so that a crash or Ctrl-C leaves what was measured)."""
    path = Path(out_dir) / "results.json"
    atomic_write(path, json.dumps({"meta": {**meta, "complete": complete}, "rows": rows}, indent=1, default=str))
    return path


def fallback_dir(name: str) -> Path:
    """A new directory under the system temp dir for results that could not be written where asked."""
    return Path(tempfile.mkdtemp(prefix=f"pipesuite-{name}-"))


def path_argument(text: str) -> Path:
    """A command line's path (argparse's ``type``): an empty one is refused, where Path("") would quietly mean the
    current directory."""
    if not text.strip():
        import argparse

        raise argparse.ArgumentTypeError("an empty path: name a directory or file ('.' for the current directory)")
    return Path(text)


def check_out(out: Path) -> str | None:
    """Why results cannot be written to ``out``, or None: symlinks resolved (a dangling one is refused: the run would
    find out only when it writes), it must be a directory or creatable as one, and a file must be creatable in it (or
    in the nearest directory above it that exists): tried, not guessed from mode bits (root passes any mode check, a
    read-only mount passes them all). Creates nothing that stays."""
    out = Path(out)
    if out.is_symlink() and not out.exists():
        return f"{out} is a symlink to {os.readlink(out)}, which does not exist"
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        return f"cannot resolve {out} ({e})"
    if resolved.exists() and not resolved.is_dir():
        return f"{out} exists and is not a directory"
    probe = resolved
    while not probe.exists():
        if probe.is_symlink():
            return f"cannot create {out}: {probe} is a symlink to a path that does not exist"
        probe = probe.parent
    if not probe.is_dir():
        return f"cannot create {out}: {probe} is not a directory"
    try:
        fd, tmp = temp_beside(probe / "write-probe")
        os.close(fd)
        Path(tmp).unlink()
    except OSError as e:
        doing = "write in" if probe == resolved else "create"
        return f"cannot {doing} {out}: cannot write in {probe} ({e.strerror or e})"
    return None


class Busy(OSError):
    """Another process holds the output directory."""


def lock_out(out: Path) -> int:
    """Make ``out`` and hold it for this process (an exclusive flock on the directory itself: no lock file is left
    in the results, and the lock goes with the process however it ends). Returns the descriptor to keep open;
    Busy when another run holds it."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(f"another run is writing to {out}") from None
    return fd


# The software a run records (suite.driver.meta): results of different software are not one run (suite.merge refuses
# to merge them, suite.run refuses to --resume one)
SOFTWARE = (
    "python",
    "torch",
    "triton",
    "cuda_core",
    "cuda_bindings",
    "cuda_python",
    "nvrtc",
    "driver",
    "cuda_runtime",
    "suite_source",
)


def in_plan_order(rows: list[dict]) -> list[dict]:
    """``rows`` in the plan's order: by job, then by row within it (a merge's hole, with no plan row, first)."""
    return sorted(rows, key=lambda r: (r.get("job", 0), -1 if r.get("plan_row") is None else r["plan_row"]))


def job_finished(rows: list[dict], plan_rows) -> bool:
    """Whether a cut run finished a job, by its ``rows`` and the plan row indices the job has (``plan_rows``): each
    plan row once, and none of them lost with a device that failed (``failure`` "device": not run, or cut short).
    One rule for what suite.run --resume keeps and what suite.merge takes from a cut part."""
    got = sorted(r["plan_row"] if isinstance(r.get("plan_row"), int) else -1 for r in rows)
    return got == sorted(plan_rows) and not any(r.get("failure") == "device" for r in rows)


RESULT_FILES = ("results.json", "results.csv", "table.md")


def holds_results(out: Path) -> bool:
    return any((Path(out) / name).exists() for name in RESULT_FILES)


def clear_results(out: Path) -> None:
    """Remove an earlier run's files from ``out`` (--overwrite): its record, table and plots, so that no stale plot
    of a problem this run does not draw stays beside the new results."""
    for path in Path(out).iterdir():
        if path.name in RESULT_FILES or (path.suffix == ".png" and path.is_file()):
            path.unlink(missing_ok=True)
