"""Compare two runs' results.json as a regression gate: every row of either file gets exactly one verdict.

OLD and NEW are results.json files or the run directories that hold them (the directory a run printed). Rows match on
(problem, shape, dtype, backend, variant, stages); a variant present with a single stage count in each run is also
matched across stage counts (so a run with --stages 1 can be held against one with --stages 3, and the autotuned
variant against itself when it picked another depth). A row repeated in one file (the same --size given twice) is
matched in order. Matching is linear in the number of rows.

Verdicts, one per row of OLD and per row of NEW (a matched pair is one line):
  SAME / FASTER / SLOWER  matched, both timed and valid: each side's interval is median +- max(IQR / 2,
                          NOISE_FLOOR * median); SLOWER when the new interval lies wholly above the old one (more
                          time), FASTER when wholly below, SAME when they overlap. The floor stands for the run-to-run
                          noise one run's IQR cannot see (clocks, another process).
  NOISY                   timed, but its samples spread (IQR / median) above NOISY_SPREAD (5 x the floor) in NEW, or
                          in the OLD row it is held against: an interval that wide overlaps anything, so it is never
                          passed as SAME. It fails the gate when NEW's median lies above OLD's by more than the floor
                          on each side (as SLOWER would with no spread recorded): time it again. Otherwise (the same
                          median, a faster one, or nothing timed to hold it against) it is said and does not fail.
  INVALID                 failed validation in NEW where it did not fail in OLD (or is in NEW only), or timed and
                          valid in OLD but not timed in NEW
  STILL INVALID           failed validation in both runs: no regression, said but not failing
  NOT RUN                 not timed in NEW for a stated reason (no build for the dtype, refused, a CPU run...) and
                          not timed in OLD either, or in NEW only: the reason is the note
  MISSING                 in OLD only
  NEW                     in NEW only, timed and valid; or matched with an OLD row that was not timed or not valid
                          (nothing to hold it against)

A file whose rows carry a ``gpu`` field of several values (suite.merge --by gpu) is compared per GPU: the GPU is part
of the match key.

The runs must be comparable: both record their metadata (``meta`` with the GPU model, the plan and the software
versions below; a file without them is refused, exit 2, unless ``force`` (--force), which says so above the verdicts);
the same GPU model, the same major version of Python, torch, Triton, cuda-core, cuda-bindings, NVRTC, the CUDA runtime
and the driver, and the same way of timing where both runs record it (the timer, the L2 flush before each sample, graph
or eager launch, from the plan's options: the flush changes a memory-bound row's time, which is not a change of the
kernel). Otherwise the comparison is refused (exit 2), unless ``allow_different`` (--allow-different), which says so
above the verdicts; any other difference of those versions is said there too.

Exit codes (``exit_code``): 0 when no row fails (SLOWER, MISSING, INVALID, or a NOISY row whose median got slower);
1 when one does; the CLI exits 2 on bad input (``CompareError``): a file that cannot be read, is not a regular file (a
FIFO or a device is refused without opening it), is not JSON (or is nested too deeply to be a results file) or is not
a pipesuite results.json, missing metadata, an OLD with no timed row, two files with no row in common, or runs that
are not comparable. Every such error is one line naming the file.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict, deque
from pathlib import Path

from tabulate import tabulate

from suite.driver.results_io import InputError, read_json

NOISE_FLOOR = 0.02
NOISY_SPREAD = 5 * NOISE_FLOOR  # IQR / median above this: the row's interval says nothing (NOISY)
VERDICTS = ("SAME", "FASTER", "SLOWER", "NOISY", "MISSING", "INVALID", "STILL INVALID", "NOT RUN", "NEW")
FAILING = ("SLOWER", "MISSING", "INVALID")  # any of these makes the comparison exit 1 (and a NOISY row that slowed)
# Metadata that must agree (GPU model) or agree in major version (software) for two runs' times to be compared.
GPU_FIELD = "gpu"
SOFTWARE = ("python", "torch", "triton", "cuda_core", "cuda_bindings", "nvrtc", "cuda_runtime", "driver")
REQUIRED_META = (GPU_FIELD, "plan", *SOFTWARE)  # without these two runs cannot be said to be comparable
_KEY_FIELDS = ("problem", "shape", "dtype", "backend", "variant")


class CompareError(ValueError):
    """Bad input to the comparison: one line, naming the file."""


def _timed(r: dict) -> bool:
    return r.get("measured") is True and r.get("valid") is True


def _row_problem(r) -> str | None:
    """Why ``r`` is not a results row the comparison can use, or None."""
    if not isinstance(r, dict):
        return f"a row is a {type(r).__name__}, not an object"
    missing = [k for k in (*_KEY_FIELDS, "stages", "measured", "valid") if k not in r]
    if missing:
        return "no " + ", ".join(repr(k) for k in missing)
    bad = [k for k in _KEY_FIELDS if not isinstance(r[k], str)]
    if bad:
        return ", ".join(repr(k) for k in bad) + " must be text"
    if r["stages"] is not None and (not isinstance(r["stages"], int) or isinstance(r["stages"], bool)):
        return f"'stages' must be a whole number or null (got {r['stages']!r})"
    if not isinstance(r["measured"], bool) or r["valid"] not in (True, False, None):
        return "'measured' must be true or false and 'valid' true, false or null"
    if r["measured"]:
        median, iqr = r.get("median_ms"), r.get("iqr_ms")
        if not _number(median) or median <= 0:
            return f"a timed row needs 'median_ms' > 0 (got {median!r})"
        if iqr is not None and (not _number(iqr) or iqr < 0):
            return f"'iqr_ms' must be >= 0 or null (got {iqr!r})"
    return None


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def results_file(path: str | Path) -> Path:
    """The results.json of ``path``: the file itself, or the one in a run directory."""
    path = Path(path)
    return path / "results.json" if path.is_dir() else path


def load(path: str | Path) -> tuple[dict, list[dict]]:
    """(meta, rows) of a results.json, or of the run directory holding one. Raises CompareError, one line naming the
    file, when it is not one."""
    if Path(path).is_dir() and not (Path(path) / "results.json").is_file():
        raise CompareError(f"{path}: a directory with no results.json (not a run directory)")
    path = results_file(path)
    try:
        data = read_json(path)
    except InputError as e:
        raise CompareError(str(e)) from None
    what = f"{path}: not a pipesuite results.json"
    if not isinstance(data, dict) or "rows" not in data:
        raise CompareError(f"{what} (no top-level 'rows')")
    rows = data["rows"]
    if not isinstance(rows, list):
        raise CompareError(f"{what} ('rows' is a {type(rows).__name__}, not a list)")
    if not rows:
        raise CompareError(f"{path}: holds no rows (nothing to compare)")
    for i, r in enumerate(rows):
        problem = _row_problem(r)
        if problem:
            raise CompareError(f"{what} (row {i}: {problem})")
    meta = data.get("meta")
    return meta if isinstance(meta, dict) else {}, rows


def _major(version) -> int | None:
    m = re.match(r"\s*(\d+)", str(version))
    return int(m[1]) if m else None


def _method(meta: dict, what: str) -> str | None:
    """How a run timed its rows, from its plan's options (``meta.plan.options``): "timer", "launch" or "flush" (a plan
    without "flush" flushed by do_bench's write, the only flush before the option); None where the run has no plan
    options (runs older than them)."""
    options = (meta.get("plan") or {}).get("options") if isinstance(meta.get("plan"), dict) else None
    if not isinstance(options, dict):
        return None
    return str(options.get(what, "write" if what == "flush" else "")) or None


def unrecorded(meta: dict) -> list[str]:
    """The fields of REQUIRED_META that ``meta`` does not record (all of them when there is no metadata)."""
    return [k for k in REQUIRED_META if meta.get(k) in (None, "", {}, [])]


def comparable(
    old_meta: dict,
    new_meta: dict,
    old: str = "OLD",
    new: str = "NEW",
    *,
    allow_different: bool = False,
    force: bool = False,
) -> list[str]:
    """Refuse (CompareError) runs that do not record what makes them comparable (REQUIRED_META) unless ``force``, and
    runs of different GPU models or of different major software versions unless ``allow_different``; return the notes
    to print above the verdicts (what differs or is unknown, and that it was allowed)."""
    refusals, notes = [], []
    for name, meta in ((old, old_meta), (new, new_meta)):
        if lacks := unrecorded(meta):
            what = "no metadata" if not meta else "no " + ", ".join(lacks) + " in its metadata"
            if not force:
                raise CompareError(
                    f"{name}: {what}: cannot tell whether the runs are comparable (--force compares them anyway)"
                )
            notes.append(f"compared without knowing whether they are comparable (--force): {name} has {what}")
    old_gpu, new_gpu = old_meta.get(GPU_FIELD), new_meta.get(GPU_FIELD)
    if old_gpu and new_gpu and old_gpu != new_gpu:
        refusals.append(f"GPU models {old_gpu} ({old}) and {new_gpu} ({new})")
    elif bool(old_gpu) != bool(new_gpu) and (old_meta or new_meta):
        notes.append(f"only {old if old_gpu else new} records its GPU model ({old_gpu or new_gpu})")
    for what, a, b in (
        ("timers", _method(old_meta, "timer"), _method(new_meta, "timer")),
        ("L2 flushes", _method(old_meta, "flush"), _method(new_meta, "flush")),
        ("launches", _method(old_meta, "launch"), _method(new_meta, "launch")),
    ):
        if a and b and a != b:
            refusals.append(f"{what} {a} ({old}) and {b} ({new})")
    minor = []
    for field in SOFTWARE:
        a, b = old_meta.get(field), new_meta.get(field)
        if a is None or b is None or str(a) == str(b):
            continue
        if _major(a) != _major(b):
            refusals.append(f"{field} {a} ({old}) and {b} ({new})")
        else:
            minor.append(f"{field} {a} -> {b}")
    if refusals and not allow_different:
        raise CompareError(
            f"{old} and {new} are not comparable: different {'; '.join(refusals)} "
            "(--allow-different compares them anyway)"
        )
    if refusals:
        notes.insert(0, f"compared although they differ (--allow-different): {'; '.join(refusals)}")
    if minor:
        notes.append(f"software differs: {', '.join(minor)}")
    for name, meta in ((old, old_meta), (new, new_meta)):
        if meta.get("complete") is False:  # written after each job: a run that crashed or was interrupted
            notes.append(f"{name} is an incomplete run (meta.complete false): the rows it did not reach are MISSING")
    return [f"note: {n}" for n in notes]


def _key(r: dict, with_stages: bool = True) -> tuple:
    base = (str(r.get("gpu") or ""), *(r[k] for k in _KEY_FIELDS))  # a --by gpu file's rows: per GPU
    return base + (r["stages"],) if with_stages else base


def _interval(r: dict) -> tuple[float, float]:
    half = max((r.get("iqr_ms") or 0.0) / 2, NOISE_FLOOR * r["median_ms"])
    return r["median_ms"] - half, r["median_ms"] + half


def verdict(old: dict, new: dict) -> str:
    """SAME / FASTER / SLOWER of two timed, valid rows."""
    old_lo, old_hi = _interval(old)
    new_lo, new_hi = _interval(new)
    if new_lo > old_hi:
        return "SLOWER"
    if new_hi < old_lo:
        return "FASTER"
    return "SAME"


def match(old_rows: list[dict], new_rows: list[dict]) -> list[tuple[dict | None, dict | None]]:
    """Every row of both lists exactly once: (old, new) pairs, (old, None) for OLD only, (None, new) for NEW only.
    In OLD's order, then the NEW-only rows in NEW's order. Linear: every lookup is by key."""
    by_key: dict[tuple, deque[int]] = defaultdict(deque)
    by_base: dict[tuple, list[int]] = defaultdict(list)
    for j, r in enumerate(new_rows):
        by_key[_key(r)].append(j)
        by_base[_key(r, False)].append(j)
    partner: dict[int, int] = {}
    for i, r in enumerate(old_rows):  # exact matches, in order (duplicates pair up first with first)
        queue = by_key.get(_key(r))
        if queue:
            partner[i] = queue.popleft()
    old_count = Counter(_key(r, False) for r in old_rows)
    taken = set(partner.values())
    for i, r in enumerate(old_rows):  # one stage count on each side: match across stage counts
        base = _key(r, False)
        if i in partner or old_count[base] != 1 or len(by_base.get(base, ())) != 1:
            continue
        j = by_base[base][0]
        if j not in taken:
            partner[i] = j
            taken.add(j)
    out: list[tuple[dict | None, dict | None]] = [
        (r, new_rows[partner[i]] if i in partner else None) for i, r in enumerate(old_rows)
    ]
    out += [(None, r) for j, r in enumerate(new_rows) if j not in taken]
    return out


def _spread(r: dict) -> float:
    return (r.get("iqr_ms") or 0.0) / r["median_ms"]


def _reason(r: dict) -> str:
    return str(r.get("note") or "no reason recorded")


def classify(old: dict | None, new: dict | None) -> tuple[str, str, bool]:
    """(verdict, note, whether it fails the gate) of one matched line."""
    if new is None:
        return "MISSING", "not in NEW", True
    if not _timed(new):
        if new["valid"] is False:
            if old is not None and old["valid"] is False:
                return "STILL INVALID", f"failed in OLD too: {_reason(new)}", False
            return "INVALID", f"failed validation in NEW: {_reason(new)}", True
        if old is not None and _timed(old):
            return "INVALID", f"timed in OLD, not in NEW: {_reason(new)}", True
        if old is not None and _reason(old) != _reason(new):
            return "NOT RUN", f"{_reason(new)} (OLD: {_reason(old)})", False
        return "NOT RUN", _reason(new), False
    for side, r in (("NEW", new), ("OLD", old)):
        if r is not None and _timed(r) and _spread(r) > NOISY_SPREAD:
            spread = f"{side} samples spread {100 * _spread(r):.1f}% > {100 * NOISY_SPREAD:g}% (IQR / median)"
            if old is None or not _timed(old):
                return "NOISY", f"{spread}; nothing to hold it against", False
            if verdict(dict(old, iqr_ms=0), dict(new, iqr_ms=0)) == "SLOWER":
                return "NOISY", f"{spread} and a slower median: time it again", True
            return "NOISY", f"{spread}; the median is not slower", False
    if old is None:
        return "NEW", "not in OLD", False
    if not _timed(old):
        return "NEW", "OLD has no valid timing", False
    v = verdict(old, new)
    return v, "", v in FAILING


def compare_rows(old_rows: list[dict], new_rows: list[dict]) -> list[dict]:
    """One result per matched line, with 'verdict', 'note', 'old_ms', 'new_ms', 'change' (new / old time - 1) and
    'matched' (a row of each file)."""
    results = []
    for old, new in match(old_rows, new_rows):
        v, note, fails = classify(old, new)
        either = new or old
        if old is not None and new is not None and old["stages"] != new["stages"]:
            stages = f"{_stages(old['stages'])} -> {_stages(new['stages'])}"
        else:
            stages = _stages(either["stages"])
        old_ms = old["median_ms"] if old is not None and _timed(old) else None
        new_ms = new["median_ms"] if new is not None and _timed(new) else None
        results.append(
            {
                "problem": either["problem"],
                "shape": either["shape"],
                "variant": f"{either['backend']}:{either['variant']}",
                "stages": stages,
                "old_ms": old_ms,
                "new_ms": new_ms,
                "change": new_ms / old_ms - 1 if old_ms and new_ms else None,
                "verdict": v,
                "note": note,
                "matched": old is not None and new is not None,
                "fails": fails,
            }
        )
    return results


def _stages(s) -> str:
    return "-" if s is None else str(s)


def exit_code(results: list[dict]) -> int:
    """0 when no row fails the gate (see ``classify``), else 1."""
    return 1 if any(r["fails"] for r in results) else 0


def summary(results: list[dict]) -> str:
    counts = {v: sum(r["verdict"] == v for r in results) for v in VERDICTS}
    text = f"{len(results)} rows: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    bad = list(dict.fromkeys(r["verdict"] for r in results if r["fails"]))
    return text + (f"; exit 1 ({', '.join(bad)})" if bad else "; exit 0")


def compare(
    old_path: str | Path, new_path: str | Path, allow_different: bool = False, force: bool = False
) -> tuple[str, list[dict]]:
    """The comparison as a table (the notes of ``comparable`` above it) and as results (see compare_rows). Raises
    CompareError when a file is not a results.json, the runs are not comparable, OLD holds no timed row, or the files
    share no row."""
    old_meta, old_rows = load(old_path)
    new_meta, new_rows = load(new_path)
    if not any(_timed(r) for r in old_rows):  # first: neither --force nor --allow-different would help
        raise CompareError(f"{old_path}: no timed, valid row (a CPU run?): nothing to hold NEW against")
    notes = comparable(
        old_meta,
        new_meta,
        str(results_file(old_path)),
        str(results_file(new_path)),
        allow_different=allow_different,
        force=force,
    )
    results = compare_rows(old_rows, new_rows)
    if not any(r["matched"] for r in results):
        raise CompareError(f"{old_path} and {new_path} share no (problem, shape, dtype, variant): nothing to compare")
    table = tabulate(
        [
            [
                r["problem"],
                r["shape"],
                r["variant"],
                r["stages"],
                _ms(r["old_ms"]),
                _ms(r["new_ms"]),
                "-" if r["change"] is None else f"{100 * r['change']:+.1f}%",
                r["verdict"],
                r["note"],
            ]
            for r in results
        ],
        headers=["problem", "shape", "variant", "stages", "old ms", "new ms", "time", "verdict", "note"],
        tablefmt="github",
        disable_numparse=True,
    )
    return "\n".join([*notes, table]), results


def _ms(x) -> str:
    return "-" if x is None else f"{x:.4f}"
