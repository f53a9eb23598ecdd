"""What a kernel's machine code contains, read from ``cuobjdump -sass`` text (works without a GPU).

Shared by both backends: the PTX loader disassembles NVRTC's cubins, the Triton side disassembles Triton's cubins,
and the driver reports the same instruction classes for each.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from suite.nvrtc.cache import Entry

# The class the tables report -> the SASS instructions it counts. "OP" counts opcode OP with any modifiers;
# "OP.M1.M2" counts OP only where its modifiers include M1 and M2 (so "LDG.E.128" is LDG.E.128 and
# LDG.E.128.CONSTANT, never LDG.E.64).
INSTRUCTION_CLASSES: dict[str, tuple[str, ...]] = {
    "async_copy": ("LDGSTS",),  # cp.async global -> shared
    "ldmatrix": ("LDSM",),  # ldmatrix shared -> registers
    "mma": ("HMMA",),  # mma.sync on the tensor cores (Ampere path)
    "wgmma": ("HGMMA", "QGMMA"),  # warpgroup mma (Hopper path): HGMMA for 16-bit operands, QGMMA for fp8
    "wgmma_fp8": ("QGMMA",),  # the fp8 form on its own
    "tma": ("UTMALDG", "UTMASTG"),  # tensor-map copies through the copy engine (cp.async.bulk.tensor)
    "bulk_copy": ("UBLKCP",),  # 1-D bulk copies through the copy engine (cp.async.bulk, no tensor map)
    "mbarrier": ("SYNCS",),  # mbarrier init / arrive / try-wait (the async pipeline's barriers, sm_90)
    "vector_load": ("LDG.E.128",),  # plain 16-byte global loads (through registers)
    "vector_store": ("STG.E.128",),  # plain 16-byte global stores
    "local_memory": ("LDL", "STL"),  # register spills or stack arrays
}

_FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)
_OPCODE_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def split_functions(sass: str) -> dict[str, str]:
    """Per kernel symbol, its part of a cuobjdump -sass listing."""
    marks = list(_FUNCTION_RE.finditer(sass))
    return {
        m[1]: sass[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(sass))] for i, m in enumerate(marks)
    }


def opcode_counts(sass: str) -> dict[str, int]:
    """Count of each full mnemonic, modifiers included (e.g. ``LDGSTS.E.BYPASS.128.ZFILL``)."""
    counts: dict[str, int] = {}
    for op in _OPCODE_RE.findall(sass):
        counts[op] = counts.get(op, 0) + 1
    return counts


def _matches(mnemonic: str, pattern: str) -> bool:
    op, *mods = mnemonic.split(".")
    want_op, *want_mods = pattern.split(".")
    return op == want_op and set(want_mods) <= set(mods)


def instruction_classes(sass: str) -> dict[str, int]:
    """How many instructions of each class in INSTRUCTION_CLASSES the listing holds (0 when absent)."""
    counts = opcode_counts(sass)
    return {
        cls: sum(n for mnemonic, n in counts.items() if any(_matches(mnemonic, p) for p in patterns))
        for cls, patterns in INSTRUCTION_CLASSES.items()
    }


@functools.lru_cache(maxsize=256)  # a Triton launcher asks once; every launcher of one compiled kernel asks again
def _cubin_classes(cubin: bytes) -> tuple[tuple[str, int], ...]:
    return tuple(instruction_classes(disassemble(cubin)).items())


def cubin_instruction_classes(cubin: bytes) -> dict[str, int]:
    """instruction_classes of a single-kernel cubin's whole listing (a Triton kernel's), counted once per cubin."""
    return dict(_cubin_classes(cubin))


class PendingClasses(Mapping):
    """``cubin_instruction_classes`` of a cubin whose cuobjdump runs in a background thread (``pending_classes``);
    reading it waits for that run. The driver reads a row's once the job's rows are validated, so the listings of a
    job's Triton kernels (a cuobjdump of ~0.5 s each on a fresh machine) are made while the next rows compile."""

    def __init__(self, future: Future):
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def _classes(self) -> dict[str, int]:
        return self._future.result()

    def __getitem__(self, name: str) -> int:
        return self._classes()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes())

    def __len__(self) -> int:
        return len(self._classes())


_LISTERS: list[ThreadPoolExecutor] = []  # made on first use (no threads at import)
_OUTSTANDING: set[Future] = set()


def pending_classes(cubin: bytes) -> PendingClasses:
    """``cubin_instruction_classes(cubin)``, started in a background thread."""
    if not _LISTERS:
        _LISTERS.append(ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="cuobjdump"))
    future = _LISTERS[0].submit(cubin_instruction_classes, cubin)
    _OUTSTANDING.add(future)
    future.add_done_callback(_OUTSTANDING.discard)
    return PendingClasses(future)


def wait_for_listings() -> None:
    """Wait until every listing started in the background has been written (to the cache directory of the moment it
    is written in): the tests call it after each test, so none lands in the next test's cache."""
    for future in list(_OUTSTANDING):
        future.exception()  # waits; a failure is the reader's to see


def wgmma_chain(sass: str) -> tuple[int, int]:
    """(HGMMA instructions, those that close a group with ``gsb0``). ptxas chains the wgmma of one commit group and
    marks only the last; when it serializes them (warning C7510) every HGMMA carries gsb0 and is waited on alone."""
    ops = [line for line in sass.splitlines() if re.search(r"\b[HQ]GMMA\.", line)]
    return len(ops), sum("gsb0" in line for line in ops)


def summary(classes: dict[str, int]) -> str:
    """Short form for a table cell, e.g. ``LDGSTS LDSM HMMA``: the opcodes of the classes present (spills excepted;
    wgmma as QGMMA when its operands are fp8)."""
    names = {"wgmma": "QGMMA" if classes.get("wgmma_fp8") else "HGMMA"}
    return (
        " ".join(
            names.get(c, INSTRUCTION_CLASSES[c][0])
            for c, n in classes.items()
            if n and c not in ("local_memory", "wgmma_fp8")
        )
        or "-"
    )


# ---------------------------------------------------------------------------------------------------------------
# cuobjdump: the one that ships in Triton's wheel, else the toolkit's
# ---------------------------------------------------------------------------------------------------------------


@functools.cache
def cuobjdump() -> str:
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("cuobjdump")
    if not found:
        raise FileNotFoundError("cuobjdump not found (neither in Triton's wheel nor on PATH)")
    return found


@functools.cache
def _cuobjdump_identity() -> str:
    """The cuobjdump binary in use, by path and content: part of the key of every listing kept on disk."""
    path = Path(cuobjdump())
    return f"{path.resolve()}:{hashlib.sha256(path.read_bytes()).hexdigest()}"


def _cuobjdump(cubin: bytes, *flags: str) -> str:
    """``cuobjdump FLAGS`` on ``cubin``: its output, kept in the private compile cache (suite.nvrtc.cache, keyed by
    the cubin's and cuobjdump's content and the flags), so a run that loads a kernel it loaded before (a warm run:
    every Triton row has a cubin of its own) reads the listing instead of disassembling again."""
    key = hashlib.sha256(json.dumps([_cuobjdump_identity(), list(flags)]).encode() + b"\0" + cubin).hexdigest()
    entry = Entry(f"cuobjdump-{key[:40]}.txt", key, list(flags))
    kept = entry.read()
    if kept is not None:
        return kept[0].decode()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cubin"
        f.write_bytes(cubin)
        text = subprocess.run([cuobjdump(), *flags, str(f)], check=True, capture_output=True, text=True).stdout
    entry.write(text.encode(), {})
    return text


@functools.lru_cache(maxsize=64)  # the same cubin is asked about by each launcher built from it
def disassemble(cubin: bytes) -> str:
    return _cuobjdump(cubin, "-sass")


_RES_RE = re.compile(r"Function (\S+):\s*\n?\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


@functools.lru_cache(maxsize=64)
def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per kernel symbol: registers per thread, stack frame, static shared memory and local memory (bytes)."""
    text = _cuobjdump(cubin, "-res-usage")
    return {
        m[1]: {"registers": int(m[2]), "stack": int(m[3]), "static_smem": int(m[4]), "local": int(m[5])}
        for m in _RES_RE.finditer(text)
    }
