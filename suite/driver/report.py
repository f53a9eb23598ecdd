"""Tables (tabulate), CSV, JSON and plots (matplotlib) of a run's rows."""

from __future__ import annotations

import csv
import json
import re
import textwrap
from pathlib import Path

from tabulate import tabulate

from suite.driver import depth_plot, plots, results_io, summary

CSV_FIELDS = (
    "problem",
    "shape",
    "dtype",
    "backend",
    "variant",
    "stages",
    "median_ms",
    "iqr_ms",
    "spread",
    "samples",
    "throughput",
    "unit",
    "ratio_to_ceiling",
    "roofline",
    "ratio_to_roofline",
    "bound",
    "floor_ms",
    "ratio_to_floor",
    "accumulation",
    "valid",
    "max_abs_error",
    "rel_error",
    "ceiling_error",
    "smem_per_stage",
    "smem_total",
    "registers",
    "spill_bytes",
    "occupancy",
    "threads",
    "grid",
    "sass",
    "config",
    "baseline",
    "ceiling",
    "measured",
    "sm_clock_mhz",
    "temperature_c",
    "throttled",
    "launch",
    "host_enqueue_us",
    "launch_bound",
    "built_for",
    "note",
    "group",
    "tile_bytes",
    "resident_blocks_per_sm",
    "bytes_in_flight_per_sm",
    "effective_latency_ns",
)


def _kib(nbytes) -> str:
    """Bytes as KiB for a table cell: whole KiB as integers, anything else to one decimal (a ring's 16 bytes of
    barriers show as 96.0, not 96.0156); the exact bytes are in the JSON and CSV."""
    if nbytes is None:
        return "-"
    kib = nbytes / 1024
    return f"{kib:g}" if kib.is_integer() else f"{kib:.1f}"


def _perf(row: dict) -> str:
    """The throughput, or why there is none: FAIL (invalid), 'valid, not timed' (no GPU: interpreter),
    'built <arch>, not run' (no GPU: PTX compiled only), 'skipped'."""
    if row.get("valid") is False:
        return "FAIL"
    if row.get("measured"):
        digits = 0 if row["unit"] == "GB/s" else 1
        return f"{row['throughput']:.{digits}f}{_marks(row)}"
    if row.get("valid"):
        return "valid, not timed"
    if row.get("built_for"):
        return f"built {row['built_for']}, not run"
    return "skipped"


def _pct(row: dict) -> str:
    """% of the ceiling, and of the roofline (suite.driver.roofline) and the memory floor (floor_ms) where the row
    has them: '62.3% (rl 41% fl 91%)'."""
    r = row.get("ratio_to_ceiling")
    if r is None:
        return "-"
    extra = [
        f"{name} {100 * v:.0f}%"
        for name, v in (("rl", row.get("ratio_to_roofline")), ("fl", row.get("ratio_to_floor")))
        if v is not None
    ]
    return f"{100 * r:.1f}%" + (f" ({' '.join(extra)})" if extra else "")


def _resources(row: dict) -> str:
    """smem per stage / total (KiB), registers, spills, resident blocks per SM."""
    regs = "-" if row.get("registers") is None else str(row["registers"])
    spill = row.get("spill_bytes")
    spill = "" if not spill else f"+{spill}B spill"
    occ = row.get("resident_blocks_per_sm") or row.get("occupancy")  # the residency a launch pins, else what fits
    occ = "-" if occ is None else str(occ)
    text = f"{_kib(row.get('smem_per_stage'))}/{_kib(row.get('smem_total'))} KiB, {regs} regs{spill}, {occ}/SM"
    if row.get("bytes_in_flight_per_sm"):  # streaming kernels (suite.streaming, suite.driver.depth_plot)
        text += f", {_kib(row['bytes_in_flight_per_sm'])} KiB in flight/SM"
        if row.get("effective_latency_ns"):
            text += f" ({row['effective_latency_ns']:.0f} ns eff. latency)"
    return text


def _groups(rows: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    """Rows by (problem, dtype, shape, registry group): one table block each, the shape and group read as one
    (``shape``, ``group``) key so that each dtype's rows are judged against that dtype's ceiling."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["problem"], (r["shape"], r.get("dtype")), r.get("group") or ""), []).append(r)
    return groups


def _ceiling_of(rows: list[dict], problem: str, shape_dtype: tuple) -> dict | None:
    return next(
        (r for r in rows if r["ceiling"] and (r["problem"], (r["shape"], r.get("dtype"))) == (problem, shape_dtype)),
        None,
    )


def _label(r: dict) -> str:
    return f"{r['backend']}:{r['variant']}"


def _where(r: dict) -> str:
    """The variant, and its stage count where it has one."""
    return _label(r) + ("" if r["stages"] is None else f" stages={r['stages']}")


MD_WIDTH = 300  # table.md: its tables are split to fit this (a variant's columns kept together), its notes wrapped
CONFIG_INLINE = 60  # a configuration longer than this is given in the notes below its table, not in a cell


def table(rows: list[dict], fmt: str = "github", width: int = MD_WIDTH) -> str:
    """One block per (problem, shape): the stage sweep with each swept variant side by side (split into several
    tables, each repeating the stage column, so that lines fit ``width``; stage counts no variant of a table ran are
    left out), then every other variant (baselines, ceilings, tuned) on a line of its own, then the notes: each row's
    note, and each configuration too long for a cell. A multi-shape run starts with its summary per backend
    (suite.driver.summary)."""
    blocks = [text] if (text := summary.table(rows, fmt, width)) else []
    for (problem, (shape, _), group_name), group in _groups(rows).items():
        unit = group[0]["unit"]
        ceiling = _ceiling_of(rows, problem, (shape, group[0].get("dtype")))
        ceiling_name = _label(ceiling) if ceiling else "ceiling"
        by_variant: dict[str, list[dict]] = {}
        for r in group:
            by_variant.setdefault(_label(r), []).append(r)
        swept = [k for k, rs in by_variant.items() if len({r["stages"] for r in rs}) > 1]
        others = [r for k, rs in by_variant.items() if k not in swept for r in rs]
        why = _profiled(group)  # with --profile: a "why" column per variant

        where = f"{problem} {shape} ({group[0]['dtype']})" + (f", {group_name}" if group_name else "")
        of = [
            what
            for key, what in (("ratio_to_roofline", "rl: % of the roofline"), ("ratio_to_floor", "fl: % of the floor"))
            if any(r.get(key) is not None for r in group)
        ]
        title = (
            f"### {where}: {unit}, % of {ceiling_name}" + (f" ({'; '.join(of)})" if of else "") + _accumulation(group)
        )
        headers = ["stages"]
        for k in swept:  # a variant's columns: its name heads the first (and the wide "why" cell), the others follow
            headers += [f"{k} {unit}", "%", "smem stage/total, regs, blocks", "SASS"] + ([f"{k} why"] if why else [])
        body = []
        for s in sorted({r["stages"] for k in swept for r in by_variant[k]}):
            line = [str(s)]
            for k in swept:
                r = next((r for r in by_variant[k] if r["stages"] == s), None)
                line += ["-"] * 4 if r is None else [_perf(r), _pct(r), _resources(r), r.get("sass") or "-"]
                line += [_why(r)] if why else []
            body.append(line)
        parts = [title]
        if body:
            parts += _fit(headers, body, width, group=5 if why else 4, fmt=fmt)
        notes = [gains] if (gains := _depth_gains(by_variant, swept)) else []
        if others:
            other_body = []
            for r in others:
                config = r.get("config") or ""
                if len(config) > CONFIG_INLINE:
                    notes.append(f"- {_where(r)}: config: {config}")
                    config = "(in the notes)"
                other_body.append(
                    [
                        _label(r),
                        "-" if r["stages"] is None else str(r["stages"]),
                        _perf(r),
                        _pct(r),
                        _resources(r),
                        r.get("sass") or "-",
                    ]
                    + ([_why(r)] if why else [])
                    + [config]
                )
            parts.append(
                tabulate(
                    other_body,
                    headers=["variant", "stages", unit, "%", "smem stage/total, regs, blocks", "SASS"]
                    + (["why"] if why else [])
                    + ["config"],
                    tablefmt=fmt,
                    disable_numparse=True,
                )
            )
        notes += [f"- {_where(r)}: {r['note']}" for r in group if r.get("note")]
        notes += [
            f"- {_where(r)}: profile: {r['profile']['note']}" for r in group if (r.get("profile") or {}).get("note")
        ]
        notes += [f"- {_profile_note()}"] if why else []
        if notes:
            parts.append(
                "\n".join(
                    textwrap.fill(n, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
                    for n in notes
                )
            )
        blocks.append("\n\n".join(parts))
    timed = [r for r in rows if r.get("measured") and r.get("valid") is not False]
    if explained := legend(rows, {m for r in timed for m in _marks(r)}):
        blocks.append("Marks after a throughput:\n" + "\n".join(f"- {line}" for line in explained))
    return "\n\n".join(blocks)


def _depth_gains(by_variant: dict[str, list[dict]], swept: list[str]) -> str | None:
    """One line: each swept variant's fastest stage count against its shallowest (both valid and timed), as the
    speed the deeper ring gives: 'depth (fastest against the shallowest stage count, in speed): ptx:ring 1 -> 3
    stages +25%'."""
    gains = []
    for k in swept:
        timed = [r for r in by_variant[k] if r.get("valid") and r.get("median_ms")]
        if len(timed) < 2:
            continue
        first = min(timed, key=lambda r: r["stages"])
        best = min(timed, key=lambda r: r["median_ms"])
        if best is first:
            gains.append(f"{k} fastest at its shallowest, {first['stages']}")
        else:
            gain = first["median_ms"] / best["median_ms"] - 1
            gains.append(f"{k} {first['stages']} -> {best['stages']} stages {gain:+.0%}")
    return "- depth (fastest against the shallowest stage count, in speed): " + "; ".join(gains) if gains else None


def _accumulation(group: list[dict]) -> str:
    """For rows that state their accumulation (fp8): '; accumulation: promoted', each kind with its count where the
    group's rows differ; '' for rows that do not state it."""
    kinds = [r["accumulation"] for r in group if r.get("accumulation")]
    if not kinds:
        return ""
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    text = next(iter(counts)) if len(counts) == 1 else ", ".join(f"{k} ({n} rows)" for k, n in counts.items())
    return f"; accumulation: {text}"


def _profiled(group: list[dict]) -> bool:
    return any(r.get("profile") for r in group)


def _why(r: dict | None) -> str:
    """The row's compact profile cell (suite.driver.profile.why); '-' without one."""
    from suite.driver.profile import why

    return "-" if r is None else why(r)


def _profile_note() -> str:
    from suite.driver.profile import TIMED_NOTE

    return f"why: {TIMED_NOTE} (how to read it: docs/method.md, --profile)"


THROTTLED, NOISY, LAUNCH_BOUND = "*", "~", "^"  # marks after a throughput, in the terminal and in table.md


def _marks(r: dict) -> str:
    """A timed row's marks, in the terminal's cells and table.md's: the GPU throttled, the samples spread, the row
    is launch-bound."""
    from suite.driver.bench import MAX_SPREAD

    return (
        (THROTTLED if r.get("throttled") else "")
        + (NOISY if (r.get("spread") or 0) > MAX_SPREAD else "")
        + (LAUNCH_BOUND if r.get("launch_bound") else "")
    )


def legend(rows: list[dict], marks: set[str]) -> list[str]:
    """What each of ``marks`` (those that appear in the tables of ``rows``) means, one line each."""
    from suite.driver.bench import LAUNCH_BOUND_SHARE, MAX_SPREAD

    lines = []
    if THROTTLED in marks:
        lines.append(f"{THROTTLED} the GPU reported a clock slowdown (power/thermal) at the end of timing")
    if NOISY in marks:
        lines.append(f"{NOISY} samples spread (IQR / median) above {100 * MAX_SPREAD:g}%")
    if LAUNCH_BOUND in marks:
        graphed = any(r.get("launch_bound") and r.get("launch") == "graph" for r in rows)
        lines.append(
            f"{LAUNCH_BOUND} launch-bound: the host's time to enqueue a call from Python is at least "
            f"{100 * LAUNCH_BOUND_SHARE:g}% of the GPU's median"
            + (" (timed from a CUDA graph, which leaves the host out" if graphed else " (the time is partly the host's")
            + "; the row's note says which)"
        )
    return lines


def _cell(r: dict) -> str:
    """One variant at one stage count, compactly: throughput and % of the ceiling (with a mark when the GPU throttled
    or the samples spread), or what happened instead."""
    if r.get("measured") and r.get("valid") is not False:
        digits = 0 if r["unit"] == "GB/s" else 1
        pct = "" if r.get("ratio_to_ceiling") is None else f" {_pct(r)}"
        return f"{r['throughput']:.{digits}f}{_marks(r)}{pct}"
    if r.get("valid") is None and r.get("built_for"):
        return f"built {r['built_for']}: {r.get('sass') or 'no SASS classes'}"
    return _perf(r)


def _github(headers: list[str], body: list[list[str]]) -> str:
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def _width(headers: list[str], body: list[list[str]]) -> int:
    """Characters per line of the github-format table of these cells."""
    return max(len(line) for line in _github(headers, body).splitlines())


def _fit(
    headers: list[str], body: list[list[str]], width: int, keep: int = 1, group: int = 1, fmt: str = "github"
) -> list[str]:
    """The table, split into several (each repeating the first ``keep`` columns; the others taken ``group`` at a time,
    a variant's columns never parted) so that every line fits ``width`` (one group wider than that stays whole). Each
    table leaves out the lines that are '-' in every column it shows but the first ``keep``."""
    groups = [list(range(i, min(i + group, len(headers)))) for i in range(keep, len(headers), group)]
    first = list(range(keep))

    def columns(n: int) -> list[int]:  # the kept columns and the first n groups
        return first + [c for g in groups[:n] for c in g]

    tables = []
    while groups:
        take = 1
        while take < len(groups) and _width(*_columns(headers, body, columns(take + 1))) <= width:
            take += 1
        picked_headers, picked = _columns(headers, body, columns(take))
        picked = [line for line in picked if any(cell != "-" for cell in line[keep:])]
        tables.append(tabulate(picked, headers=picked_headers, tablefmt=fmt, disable_numparse=True))
        groups = groups[take:]
    return tables


def _columns(headers: list[str], body: list[list[str]], picked: list[int]) -> tuple[list[str], list[list[str]]]:
    return [headers[i] for i in picked], [[line[i] for i in picked] for line in body]


def _fill(item: str, width: int) -> str:
    """A list item wrapped to ``width``, never breaking a word (a path, a file:line stays whole to copy)."""
    return textwrap.fill(
        item, width, initial_indent="- ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 3)] + "..."


def terminal_table(rows: list[dict], width: int = 160) -> str:
    """What the CLI prints: per (problem, shape), the stage sweep with one compact cell per variant ('4043 95.8%',
    marks for throttling and spread), split into several tables when the variants do not fit ``width`` columns
    side by side; the unstaged variants; the notes that explain a failure or a skip; and, for a multi-shape run,
    the summary per backend (suite.driver.summary). Resources, SASS and every note are in table.md and results.csv."""
    blocks, marks = [], set()
    for (problem, (shape, _), group_name), group in _groups(rows).items():
        unit = group[0]["unit"]
        ceiling = _ceiling_of(rows, problem, (shape, group[0].get("dtype")))
        by_variant: dict[str, list[dict]] = {}
        for r in group:
            by_variant.setdefault(_label(r), []).append(r)
        swept = [k for k, rs in by_variant.items() if len({r["stages"] for r in rs}) > 1]
        others = [r for k, rs in by_variant.items() if k not in swept for r in rs]
        where = f"{problem} {shape} ({group[0]['dtype']})" + (f", {group_name}" if group_name else "")
        parts = [_clip(f"{where}: {unit}, % of {_label(ceiling) if ceiling else 'ceiling'}", width)]
        cells = {id(r): _cell(r) for r in group}
        marks |= {m for c in cells.values() for m in (THROTTLED, NOISY, LAUNCH_BOUND) if m in c.split(" ")[0]}
        why = _profiled(group)
        if swept:
            body, why_body = [], []  # the sweep; with --profile, the same sweep with a "why" cell per row
            for s in sorted({r["stages"] for k in swept for r in by_variant[k]}):
                line, why_line = [str(s)], [str(s)]
                for k in swept:
                    r = next((r for r in by_variant[k] if r["stages"] == s), None)
                    line.append("-" if r is None else cells[id(r)])
                    why_line.append(_clip(_why(r), width - 12))
                body.append(line)
                why_body.append(why_line)
            parts += _fit(["stages"] + swept, body, width)
            if why:
                parts += _fit(["why: stages"] + swept, why_body, width)
        if others:
            body = [
                [_label(r), "-" if r["stages"] is None else str(r["stages"]), cells[id(r)]]
                + ([_why(r)] if why else [])
                + [r.get("config") or ""]
                for r in others
            ]
            headers = ["variant", "stages", unit] + (["why"] if why else []) + ["config"]
            n = len(headers) - 1  # the config column, clipped to what is left
            room = width - _width(headers[:n], [line[:n] for line in body]) - 5  # "| " + config + " |" - shared "|"
            body = [line[:n] + [_clip(line[n], max(room, 6))] for line in body]
            parts.append(_github(headers, body))
        problems = [
            f"{_where(r)}: {r['note']}"
            for r in group
            if r.get("valid") is False or r.get("note", "").startswith("skipped")
        ]
        if problems:
            parts.append("\n".join(_fill(p, width) for p in problems))
        blocks.append("\n\n".join(parts))
    explained = legend(rows, marks)
    if any(r.get("profile") for r in rows):
        explained.append(_profile_note())
    if text := summary.table(rows, width=width, heading=""):
        blocks.append(text)
    footer = textwrap.fill("; ".join(explained + ["resources, SASS and all notes: table.md"]), width)
    return "\n\n".join(blocks + [footer])


def terminal(rows: list[dict], width: int = 160, verbose: bool = False) -> str:
    """What the CLI prints: the tables (terminal_table) when something was timed or ``verbose``; for a run that timed
    nothing (no GPU), the compact summary (cpu_summary); a run without rows (a shard with no jobs) says so."""
    if not rows:
        return "no rows: nothing ran"
    if verbose or any(r.get("measured") for r in rows):
        return terminal_table(rows, width)
    return cpu_summary(rows, width)


def _sass_classes(rows: list[dict]) -> str:
    """The SASS opcodes of ``rows``' cells, each once, in the order met."""
    names = dict.fromkeys(op for r in rows for op in (r.get("sass") or "").split() if op != "-")
    return " ".join(names) or "-"


def cpu_summary(rows: list[dict], width: int = 160) -> str:
    """A run that timed nothing, compactly: per problem and backend, how many rows validated (Triton in the
    interpreter, torch), were built and described (NVRTC kernels compiled for a GPU that is not here), failed or were
    skipped, and the SASS classes their builds hold; then every failure in full (rows failing alike, together)."""
    counts: dict[tuple[str, str], dict] = {}
    for r in rows:
        c = counts.setdefault(
            (r["problem"], r["backend"]), {"rows": [], "valid": 0, "built": 0, "failed": 0, "skipped": 0}
        )
        c["rows"].append(r)
        if r.get("valid") is False:
            c["failed"] += 1
        elif r.get("valid"):
            c["valid"] += 1
        elif r.get("built_for"):
            c["built"] += 1
        else:
            c["skipped"] += 1
    archs = sorted({r["built_for"] for r in rows if r.get("built_for")})
    built = f"built {', '.join(archs)}, not run" if archs else "built, not run"
    headers = ["problem", "backend", "rows", "valid", built, "failed", "skipped", "SASS classes found"]
    body = [
        [
            p,
            b,
            str(len(c["rows"])),
            str(c["valid"]),
            str(c["built"]),
            str(c["failed"]),
            str(c["skipped"]),
            _sass_classes(c["rows"]),
        ]
        for (p, b), c in counts.items()
    ]
    room = width - _width(headers[:-1], [line[:-1] for line in body]) - 5
    body = [line[:-1] + [_clip(line[-1], max(room, 12))] for line in body]
    parts = [_github(headers, body)]
    failures: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("valid") is False:
            failures.setdefault((_label(r), r.get("note") or "failed"), []).append(r)
    if failures:
        lines = []
        for (label, note), rs in failures.items():
            at = ", ".join(dict.fromkeys(f"{r['problem']} {r['shape']} ({r.get('dtype')})" for r in rs))
            stages = [str(r["stages"]) for r in rs if r["stages"] is not None]
            where = label + (f" stages={','.join(dict.fromkeys(stages))}" if stages else "")
            lines.append(_fill(f"{where} at {at}: {note}", width))
        parts.append("\n".join(lines))
    parts.append(
        textwrap.fill(
            "valid: checked against torch (Triton in its interpreter); built: compiled for the GPU "
            "named and described (registers, shared memory, SASS), not run; nothing is timed "
            "without a GPU. Full tables: --verbose; every row, resource and note: table.md.",
            width,
        )
    )
    return "\n\n".join(parts)


FAILURES = {  # a failed row's kind (failure_kind) -> how the closing line counts it
    "build": "build failed",
    "invalid": "FAILED validation",
    "launch": "launch failed",
    "timing": "timing failed",
    "refused": "refused by the kernel",
    "failed": "failed",
}


def failure_kind(row: dict) -> str | None:
    """None for a row that did not fail; else what failed: build, launch or timing (suite.driver.bench._fail),
    invalid (validation), refused (a configuration the kernel refuses) or failed (anything else)."""
    if row.get("valid") is not False:
        return None
    if row.get("failure") in FAILURES:
        return row["failure"]
    note = row.get("note") or ""
    return "invalid" if note.startswith("INVALID") else "refused" if note.startswith("refused") else "failed"


def failure_summary(rows: list[dict]) -> str | None:
    """The CLI's closing line when rows failed (it then exits 1), each kind counted apart, e.g. '3 rows failed: 2
    build failed, 1 FAILED validation'; None when none did."""
    kinds = [k for r in rows if (k := failure_kind(r))]
    if not kinds:
        return None
    counts = {k: kinds.count(k) for k in FAILURES if k in kinds}
    return f"{len(kinds)} row{'s' if len(kinds) != 1 else ''} failed: " + ", ".join(
        f"{n} {FAILURES[k]}" for k, n in counts.items()
    )


def _runs_here(v, on_gpu: bool) -> str:
    reason = v.skip_reason()
    if reason is None:
        interpreted = not on_gpu and v.backend == "triton"
        return "yes (Triton interpreter)" if interpreted else "yes"
    if not on_gpu and v.describe is not None:
        return "built, not run (no GPU)"
    return f"no: {reason}"


def _stages_text(stages: tuple) -> str:
    return ",".join("-" if s is None else str(s) for s in stages)


def variant_table(
    width: int = 160,
    problems: tuple[str, ...] | None = None,
    backends: tuple[str, ...] | None = None,
    names: tuple[str, ...] | None = None,
) -> str:
    """The registered variants (--list): problem, backend, name, stage sweep, role and whether each runs here, in a
    table that fits ``width``; then each variant's description and gate, wrapped to ``width``. ``problems``,
    ``backends`` and ``names`` (a name or backend:name) narrow it as they narrow a run (None: all)."""
    import torch

    from suite.registry import KernelLoadError, variants

    on_gpu = torch.cuda.is_available()
    rows, about = [], []
    for v in variants():
        if (problems and v.problem not in problems) or (backends and v.backend not in backends):
            continue
        if names and not v.is_named(names):
            continue
        try:
            stages, runs = _stages_text(v.stages), _runs_here(v, on_gpu)
            by_dtype = {d: v.stages_for(d) for d in v.dtypes}
        except KernelLoadError as e:  # listed with why: the other variants' lines still matter
            stages, runs, by_dtype = "?", f"no: {e}", {}
        rows.append(
            [
                v.problem,
                v.backend,
                v.name,
                stages,
                " ".join(role for role, on in (("baseline", v.baseline), ("ceiling", v.ceiling)) if on),
                runs,
            ]
        )
        gate = (v.gate.__doc__ or v.gate.__name__).strip()
        text = (v.description.rstrip(".") + ". " if v.description else "") + f"Runs on: {gate}"
        if len(set(by_dtype.values())) > 1:  # the table's column is the default dtype's sweep
            text += ". Stages by dtype: " + "; ".join(f"{d} {_stages_text(ss)}" for d, ss in by_dtype.items())
        about.append(_fill(f"{v.label} ({v.problem}): {text}", width))
    headers = ["problem", "backend", "variant", "stages", "role", "runs here"]
    if not rows:
        return "no registered variant matches these filters"
    room = width - _width(headers[:-1], [line[:-1] for line in rows]) - 5
    rows = [line[:-1] + [_clip(line[-1], max(room, 24))] for line in rows]
    return _github(headers, rows) + "\n\n" + "\n".join(about)


# The writing path (temporary names renamed into place, the --out checks) is suite.driver.results_io's.
_temp_beside, _atomic_write = results_io.temp_beside, results_io.atomic_write


def to_csv(rows: list[dict]) -> str:
    import io

    buf = io.StringIO()
    from suite.driver import profile

    profiled = any(r.get("profile") for r in rows)  # the profile_* columns only when --profile took profiles
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS + (profile.CSV_FIELDS if profiled else ()), extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k) for k in CSV_FIELDS} | profile.flat(r))
    return buf.getvalue()


def missing_plots(rows: list[dict], on_gpu: bool) -> list[str]:
    """Why a problem of ``rows`` got no plot (plots show measured throughput): one sentence for a run without a GPU,
    else one per problem of which nothing was timed."""
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    unplotted = [p for p in problems if not any(r.get("measured") for r in rows if r["problem"] == p)]
    if not unplotted:
        return []
    if not on_gpu:
        return [
            (
                f"No plot written ({', '.join(p + '.png' for p in unplotted)}): plots show measured throughput, and "
                "without a GPU nothing is timed."
            )
        ]
    return [
        f"No {p}.png written: no {p} row was timed (each failed validation or was skipped; see table.md)."
        for p in unplotted
    ]


def _text(value) -> str:
    """A metadata value as a reader writes it: '-' for none, yes / no, key=value lists, never a Python repr."""
    if value is None or value == "" or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def slug(text: str) -> str:
    """``text`` as one path component: letters, digits, '.', '_' and '-' only, no leading or trailing '.' or '-' (so
    never '.' or '..'), 'unknown' when nothing is left."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "unknown"


class WriteError(OSError):
    """Some files of a results directory could not be written: ``written`` are whole, ``failed`` (name, error) were
    not written at all (each file is written to a temporary name and renamed into place, never half-written)."""

    def __init__(self, out_dir: Path, written: list[Path], failed: list[tuple[str, BaseException]]):
        self.out_dir, self.written, self.failed = Path(out_dir), list(written), list(failed)
        errors = "; ".join(dict.fromkeys(f"{type(e).__name__}: {getattr(e, 'strerror', None) or e}" for _, e in failed))
        text = f"could not write {', '.join(name for name, _ in failed)} in {out_dir}/ ({errors})"
        if written:
            text += f"; written: {', '.join(p.name for p in written)}"
        super().__init__(text)


RUN_HEADING = "## The run"  # table.md's last section: every field of meta, after the tables


def headline(meta: dict) -> str:
    """table.md's first lines: the GPU, driver, torch and Triton, the date and the command, with a pointer to the
    whole record at the end (a sweep's meta runs to dozens of lines, which would push its tables off the first
    screen). Any value of any type renders as _text renders it (a hand-edited record included)."""
    gpu, gpus = meta.get("gpu"), meta.get("gpus")
    if gpu:
        sms = f" ({_text(meta['sms'])} SMs)" if meta.get("sms") else ""
        parts = [f"{_text(gpu)}{sms}, driver {_text(meta.get('driver'))}"]
    elif isinstance(gpus, list) and gpus and all(isinstance(g, str) for g in gpus):  # suite.merge --by gpu
        parts = [f"GPUs {', '.join(gpus)}"]
    else:
        parts = ["no GPU"]
    if software := ", ".join(
        f"{name} {_text(meta[key])}" for name, key in (("torch", "torch"), ("Triton", "triton")) if meta.get(key)
    ):
        parts.append(software)
    parts += [_text(meta["date"])] if meta.get("date") else []
    parts += [f"complete: {_text(meta['complete'])}"] if "complete" in meta else []
    text = "; ".join(parts) + "."
    if command := meta.get("command"):
        command = _text(command)
        # a code span fenced by more backticks than any run of them in the command (CommonMark), spaced when needed
        fence = "`" * (max((len(run) for run in re.findall(r"`+", command)), default=0) + 1)
        pad = " " if "`" in command else ""
        text += f"\n\n{fence}{pad}{command}{pad}{fence}"
    return text + "\n\nEverything the run recorded (software, timer, plan, phases): [the run](#the-run), at the end."


def record_section(meta: dict) -> str:
    """table.md's last section: every field of ``meta``, one wrapped line each, under RUN_HEADING."""
    lines = (
        textwrap.fill(
            f"- {k}: {_text(v)}", MD_WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        for k, v in meta.items()
    )
    return f"{RUN_HEADING}\n\n" + "\n".join(lines) + "\n"


def write(rows: list[dict], meta: dict, out_dir: Path, record: bool = True) -> list[Path]:
    """Write results.json (unless not ``record``: suite.report re-rendering a run in place leaves its record as it
    is), results.csv, table.md and the plots into ``out_dir``; returns the files written. Each is written to a
    temporary name and renamed into place, so none is ever half-written; when some cannot be written (a full
    disk...), the others still are and WriteError names those that were not."""
    written: list[Path] = []
    failed: list[tuple[str, BaseException]] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(out_dir, [], [("the directory", e)]) from None
    depth_plot.annotate(rows, meta)  # each row's effective latency, for the files below
    md = "# pipesuite results\n\n" + headline(meta) + "\n\n" + table(rows) + "\n\n" + record_section(meta)
    files = (
        ("results.json", lambda: json.dumps({"meta": meta, "rows": rows}, indent=1, default=str)),
        ("results.csv", lambda: to_csv(rows)),
        ("table.md", lambda: md),
    )[0 if record else 1 :]
    for name, text in files:  # the JSON first: it is the record of the run
        try:
            _atomic_write(out_dir / name, text())
            written.append(out_dir / name)
        except OSError as e:
            failed.append((name, e))
    for problem in dict.fromkeys(r["problem"] for r in rows):
        for name, fig in plots.drawings(rows, meta, problem):
            try:
                _atomic_write(out_dir / name, plots.png(fig))
                written.append(out_dir / name)
            except OSError as e:
                failed.append((name, e))
    if failed:
        raise WriteError(out_dir, written, failed)
    return written


def new_run_dir(base: Path, stamp: str) -> Path:
    """A new results directory ``base/stamp``, created here and by no one else: when another run took that name (two
    runs started in the same second), ``stamp-2``, ``stamp-3``... WriteError when it cannot be made."""
    n = 1
    while True:
        path = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            base.mkdir(parents=True, exist_ok=True)
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
        except OSError as e:
            raise WriteError(path, [], [("the directory", e)]) from None


def check_out(out: Path) -> str | None:
    """Why results cannot be written to ``out``, or None (suite.driver.results_io.check_out)."""
    return results_io.check_out(out)
