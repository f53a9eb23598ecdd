"""Per-backend summary of a multi-shape run: how close each backend comes to the ceiling over all the shapes.

For each (problem, dtype) timed at two shapes or more, and each backend, two kinds of row are summarized:
- ``best``: the best valid timed row of each shape (every variant and stage count: an oracle no caller gets);
- ``auto``: the backend's ``auto`` row of each shape (a label ending in ``:auto``, the kernel a rule picks without
  timing), when the run has one.
Each gives the geometric mean of the ratio to the ceiling (throughput / ceiling's), the minimum and its shape, and the
share of shapes at ``THRESHOLD`` or above. Ceiling rows are left out (their ratio is 1 by definition).
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass

from tabulate import tabulate

THRESHOLD = 0.95
AUTO_SUFFIX = ":auto"
KINDS = ("best", "auto")


def label(row: dict) -> str:
    return f"{row['backend']}:{row['variant']}"


def is_auto(row: dict) -> bool:
    return label(row).endswith(AUTO_SUFFIX)


def _timed(row: dict) -> bool:
    """A row with a ratio to summarize: timed, not failed, not the ceiling itself."""
    ratio = row.get("ratio_to_ceiling")
    return bool(row.get("measured")) and row.get("valid") is not False and not row.get("ceiling") and bool(ratio)


def points(rows: list[dict]) -> dict[tuple[str, str, str, str], dict[str, float]]:
    """(problem, dtype, backend, kind) -> {shape: ratio to the ceiling}, kind ``best`` or ``auto`` (the best of a
    shape's auto rows, should it have several), for each (problem, dtype) timed at two shapes or more."""
    timed = [r for r in rows if _timed(r)]
    shapes: dict[tuple[str, str], set[str]] = {}
    for r in timed:
        shapes.setdefault((r["problem"], r.get("dtype")), set()).add(r["shape"])
    out: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for r in timed:
        if len(shapes[(r["problem"], r.get("dtype"))]) < 2:
            continue
        for kind in KINDS if is_auto(r) else KINDS[:1]:
            per_shape = out.setdefault((r["problem"], r.get("dtype"), r["backend"], kind), {})
            per_shape[r["shape"]] = max(per_shape.get(r["shape"], 0.0), r["ratio_to_ceiling"])
    return out


@dataclass(frozen=True)
class Stat:
    problem: str
    dtype: str
    backend: str
    kind: str  # best or auto
    shapes: int
    geomean: float
    minimum: float
    weakest: str  # the shape of the minimum
    at_threshold: int  # shapes at THRESHOLD or above

    @property
    def share(self) -> float:
        return self.at_threshold / self.shapes


def stats(rows: list[dict]) -> list[Stat]:
    """One Stat per (problem, dtype, backend, kind) of ``points``: in the order the rows first name each (problem,
    dtype, backend), its best rows first, then its auto rows."""
    out = []
    for (problem, dtype, backend, kind), per_shape in points(rows).items():
        ratios = list(per_shape.values())
        weakest = min(per_shape, key=per_shape.get)
        out.append(
            Stat(
                problem,
                dtype,
                backend,
                kind,
                len(ratios),
                statistics.geometric_mean(ratios),
                per_shape[weakest],
                weakest,
                sum(r >= THRESHOLD for r in ratios),
            )
        )
    first: dict[tuple[str, str, str], int] = {}
    for i, s in enumerate(out):
        first.setdefault((s.problem, s.dtype, s.backend), i)
    return sorted(out, key=lambda s: (first[(s.problem, s.dtype, s.backend)], KINDS.index(s.kind)))


def _ceilings(rows: list[dict], problem: str) -> str:
    return ", ".join(dict.fromkeys(label(r) for r in rows if r["problem"] == problem and r.get("ceiling"))) or "-"


def table(rows: list[dict], fmt: str = "github", width: int = 160, heading: str = "### ") -> str | None:
    """The summary of every multi-shape (problem, dtype) of ``rows`` as a titled table per problem, with a line
    saying what the columns mean (wrapped to ``width``); None when the run has no such group."""
    all_stats = stats(rows)
    if not all_stats:
        return None
    blocks = []
    for problem in dict.fromkeys(s.problem for s in all_stats):
        body = [
            [
                s.dtype,
                s.backend,
                s.kind,
                str(s.shapes),
                f"{s.geomean:.3f}",
                f"{s.minimum:.3f}",
                s.weakest,
                f"{100 * s.share:.0f}% ({s.at_threshold}/{s.shapes})",
            ]
            for s in all_stats
            if s.problem == problem
        ]
        headers = ["dtype", "backend", "rows", "shapes", "geomean", "min", "at min", f">= {THRESHOLD:g}"]
        autos = any(s.kind == "auto" for s in all_stats if s.problem == problem)
        about = (
            f"Ratio to the ceiling ({_ceilings(rows, problem)}) per backend. best: the best valid row of each shape "
            "(every variant and stage count); auto: the backend's auto row (a variant ending in "
            f"'{AUTO_SUFFIX}')" + ("." if autos else "; this run has none.")
        )
        blocks.append(
            f"{heading}{problem}: summary per backend\n\n{textwrap.fill(about, width)}\n\n"
            + tabulate(body, headers=headers, tablefmt=fmt, disable_numparse=True)
        )
    return "\n\n".join(blocks)
