"""Compare two runs' results.json: each matching row is SAME, FASTER or SLOWER, judged against the spreads the
runs recorded.

Rows match on (problem, shape, dtype, backend, variant, stages). A variant present with a single stage count in
each run is also matched across stage counts (so a run with --stages 1 can be held against one with --stages 3).

Verdict: each side's interval is median +- max(IQR / 2, NOISE_FLOOR * median). SLOWER when the new interval lies
wholly above the old one (more time), FASTER when wholly below, SAME when they overlap. The floor stands for the
run-to-run noise that one run's IQR cannot see (clocks, another process): 2%.
"""

from __future__ import annotations

import json
from pathlib import Path

from tabulate import tabulate

NOISE_FLOOR = 0.02


def load(path: str | Path) -> tuple[dict, list[dict]]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or "rows" not in data:
        raise ValueError(f"{path}: not a pipesuite results.json (no 'rows')")
    return data.get("meta", {}), data["rows"]


def _key(r: dict, with_stages: bool = True) -> tuple:
    base = (r["problem"], r["shape"], r["dtype"], r["backend"], r["variant"])
    return base + (r["stages"],) if with_stages else base


def _interval(r: dict) -> tuple[float, float]:
    half = max((r.get("iqr_ms") or 0.0) / 2, NOISE_FLOOR * r["median_ms"])
    return r["median_ms"] - half, r["median_ms"] + half


def verdict(old: dict, new: dict) -> str:
    old_lo, old_hi = _interval(old)
    new_lo, new_hi = _interval(new)
    if new_lo > old_hi:
        return "SLOWER"
    if new_hi < old_lo:
        return "FASTER"
    return "SAME"


def pairs(old_rows: list[dict], new_rows: list[dict]) -> list[tuple[dict, dict]]:
    old_rows = [r for r in old_rows if r.get("measured")]
    new_rows = [r for r in new_rows if r.get("measured")]
    exact = {_key(r): r for r in old_rows}
    by_variant: dict[tuple, list[dict]] = {}
    for r in old_rows:
        by_variant.setdefault(_key(r, False), []).append(r)
    new_by_variant: dict[tuple, list[dict]] = {}
    for r in new_rows:
        new_by_variant.setdefault(_key(r, False), []).append(r)
    out = []
    for r in new_rows:
        if _key(r) in exact:
            out.append((exact[_key(r)], r))
        elif len(by_variant.get(_key(r, False), [])) == 1 and len(new_by_variant[_key(r, False)]) == 1:
            out.append((by_variant[_key(r, False)][0], r))
    return out


def compare(old_path: str | Path, new_path: str | Path) -> tuple[str, list[dict]]:
    """The comparison as a table and as rows (with 'verdict' and 'change' = new / old time - 1)."""
    _, old_rows = load(old_path)
    _, new_rows = load(new_path)
    results = []
    for old, new in pairs(old_rows, new_rows):
        stages = old["stages"] if old["stages"] == new["stages"] else f"{old['stages']} -> {new['stages']}"
        results.append({
            "problem": new["problem"], "shape": new["shape"], "variant": f"{new['backend']}:{new['variant']}",
            "stages": "-" if stages is None else stages, "old_ms": old["median_ms"], "new_ms": new["median_ms"],
            "change": new["median_ms"] / old["median_ms"] - 1, "verdict": verdict(old, new),
        })
    table = tabulate(
        [[r["problem"], r["shape"], r["variant"], r["stages"], f"{r['old_ms']:.4f}", f"{r['new_ms']:.4f}",
          f"{100 * r['change']:+.1f}%", r["verdict"]] for r in results],
        headers=["problem", "shape", "variant", "stages", "old ms", "new ms", "time", "verdict"], tablefmt="github",
        disable_numparse=True,
    )
    return table, results
