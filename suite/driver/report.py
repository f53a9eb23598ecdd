"""Tables (tabulate), CSV, JSON and plots (matplotlib) of a run's rows."""

from __future__ import annotations

import csv
import json
import os
import re
import tempfile
from pathlib import Path

from tabulate import tabulate

from suite.driver import depth_plot

CSV_FIELDS = (
    "problem", "shape", "dtype", "backend", "variant", "stages", "median_ms", "iqr_ms", "spread", "samples",
    "throughput", "unit", "ratio_to_ceiling", "valid", "max_abs_error", "rel_error", "smem_per_stage", "smem_total",
    "registers", "spill_bytes", "occupancy", "threads", "grid", "sass", "config", "baseline", "ceiling", "measured",
    "sm_clock_mhz", "temperature_c", "throttled", "built_for", "note",
    "group", "tile_bytes", "resident_blocks_per_sm", "bytes_in_flight_per_sm", "effective_latency_ns",
)


def _kib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 1024:g}"


def _perf(row: dict) -> str:
    """The throughput, or why there is none: FAIL (invalid), 'valid, not timed' (no GPU: interpreter),
    'built <arch>, not run' (no GPU: PTX compiled only), 'skipped'."""
    if row.get("valid") is False:
        return "FAIL"
    if row.get("measured"):
        digits = 0 if row["unit"] == "GB/s" else 1
        return f"{row['throughput']:.{digits}f}" + (" (throttled)" if row.get("throttled") else "")
    if row.get("valid"):
        return "valid, not timed"
    if row.get("built_for"):
        return f"built {row['built_for']}, not run"
    return "skipped"


def _pct(row: dict) -> str:
    r = row.get("ratio_to_ceiling")
    return "-" if r is None else f"{100 * r:.1f}%"


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
    """Rows by (problem, shape, registry group): one table block each."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["problem"], r["shape"], r.get("group") or ""), []).append(r)
    return groups


def _label(r: dict) -> str:
    return f"{r['backend']}:{r['variant']}"


def table(rows: list[dict], fmt: str = "github") -> str:
    """One block per (problem, shape): the stage sweep with each swept variant side by side, then every other
    variant (baselines, ceilings, tuned) on a line of its own."""
    blocks = []
    for (problem, shape, group_name), group in _groups(rows).items():
        unit = group[0]["unit"]
        ceiling = next((r for r in rows if r["ceiling"] and (r["problem"], r["shape"]) == (problem, shape)), None)
        ceiling_name = _label(ceiling) if ceiling else "ceiling"
        by_variant: dict[str, list[dict]] = {}
        for r in group:
            by_variant.setdefault(_label(r), []).append(r)
        swept = [k for k, rs in by_variant.items() if len({r["stages"] for r in rs}) > 1]
        others = [r for k, rs in by_variant.items() if k not in swept for r in rs]

        where = f"{problem} {shape} ({group[0]['dtype']})" + (f", {group_name}" if group_name else "")
        title = f"### {where}: {unit}, % of {ceiling_name}"
        headers = ["stages"]
        for k in swept:
            headers += [f"{k} {unit}", f"{k} %", f"{k} smem stage/total, regs, blocks", f"{k} SASS"]
        body = []
        for s in sorted({r["stages"] for k in swept for r in by_variant[k]}):
            line = [s]
            for k in swept:
                r = next((r for r in by_variant[k] if r["stages"] == s), None)
                line += ["-"] * 4 if r is None else [_perf(r), _pct(r), _resources(r), r.get("sass") or "-"]
            body.append(line)
        parts = [title]
        if body:
            parts.append(tabulate(body, headers=headers, tablefmt=fmt, disable_numparse=True))
        if others:
            other_body = [[_label(r), "-" if r["stages"] is None else r["stages"], _perf(r), _pct(r), _resources(r),
                           r.get("sass") or "-", r.get("config") or ""] for r in others]
            parts.append(tabulate(other_body, headers=["variant", "stages", unit, "%", "smem stage/total, regs, blocks",
                                                        "SASS", "config"], tablefmt=fmt, disable_numparse=True))
        notes = [f"- {_label(r)} stages={r['stages']}: {r['note']}" for r in group if r.get("note")]
        if notes:
            parts.append("\n".join(notes))
        blocks.append("\n\n".join(parts))
    return "\n\n".join(blocks)


def variant_table() -> str:
    """The registered variants with their stage sweeps, roles, gates and whether they run here (--list)."""
    from suite.registry import variants

    rows = []
    for v in variants():
        reason = v.skip_reason()
        rows.append([v.problem, v.backend, v.name, ",".join("-" if s is None else str(s) for s in v.stages),
                     " ".join(role for role, on in (("baseline", v.baseline), ("ceiling", v.ceiling)) if on),
                     (v.gate.__doc__ or v.gate.__name__).strip(), "yes" if reason is None else f"no: {reason}",
                     v.description])
    return tabulate(rows, headers=["problem", "backend", "variant", "stages", "role", "gate", "runs here", "what"],
                    tablefmt="github")


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def to_csv(rows: list[dict]) -> str:
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k) for k in CSV_FIELDS})
    return buf.getvalue()


def plot(rows: list[dict], problem: str, path: Path) -> bool:
    """Throughput against stage count, a line per swept variant and shape, ceilings as horizontal lines.
    Returns False (and writes nothing) when nothing was measured."""
    # grouped variants (the vector's depth sweep) are drawn against bytes in flight by suite.driver.depth_plot
    measured = [r for r in rows if r["problem"] == problem and r.get("measured") and not r.get("group")]
    if not measured:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r["shape"] for r in measured))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.5 * len(shapes), 4.2), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        group = [r for r in measured if r["shape"] == shape]
        lines: dict[str, list[dict]] = {}
        for r in group:
            lines.setdefault(_label(r), []).append(r)
        for i, (label, rs) in enumerate(lines.items()):
            if len({r["stages"] for r in rs}) > 1:
                rs = sorted(rs, key=lambda r: r["stages"])
                ax.plot([r["stages"] for r in rs], [r["throughput"] for r in rs], marker="o", label=label)
            else:
                style = "--" if rs[0]["ceiling"] else ":"
                ax.axhline(rs[0]["throughput"], linestyle=style, color=f"C{i + 2}",
                           label=f"{label}" + (" (ceiling)" if rs[0]["ceiling"] else "") +
                                 ("" if rs[0]["stages"] is None else f", {rs[0]['stages']} stages"))
        ax.set_title(f"{problem} {shape}")
        ax.set_xlabel("pipeline stages")
        ax.set_ylabel(group[0]["unit"])
        ax.set_ylim(bottom=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unknown"


def write(rows: list[dict], meta: dict, out_dir: Path) -> list[Path]:
    """Write table.md, results.csv, results.json and one plot per problem into ``out_dir``. Everything is written
    to temporary names first and renamed into place, so an interrupted run leaves no half-written file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = depth_plot.write(rows, meta, out_dir)  # adds each row's effective latency (for the files below)
    md = "# pipesuite results\n\n" + "\n".join(f"- {k}: {v}" for k, v in meta.items()) + "\n\n" + table(rows) + "\n"
    for name, text in (("table.md", md), ("results.csv", to_csv(rows)),
                       ("results.json", json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))):
        _atomic_write(out_dir / name, text)
        written.append(out_dir / name)
    for problem in dict.fromkeys(r["problem"] for r in rows):
        path = out_dir / f"{problem}.png"
        if plot(rows, problem, path):
            written.append(path)
    return written
