"""Tables (tabulate), CSV, JSON and plots (matplotlib) of a run's rows."""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import textwrap
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
    """Rows by (problem, dtype, shape, registry group): one table block each, the shape and group read as one
    (``shape``, ``group``) key so that each dtype's rows are judged against that dtype's ceiling."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["problem"], (r["shape"], r.get("dtype")), r.get("group") or ""), []).append(r)
    return groups


def _ceiling_of(rows: list[dict], problem: str, shape_dtype: tuple) -> dict | None:
    return next((r for r in rows if r["ceiling"] and (r["problem"], (r["shape"], r.get("dtype"))) == (problem, shape_dtype)),
                None)


def _label(r: dict) -> str:
    return f"{r['backend']}:{r['variant']}"


def _where(r: dict) -> str:
    """The variant, and its stage count where it has one."""
    return _label(r) + ("" if r["stages"] is None else f" stages={r['stages']}")


def table(rows: list[dict], fmt: str = "github") -> str:
    """One block per (problem, shape): the stage sweep with each swept variant side by side, then every other
    variant (baselines, ceilings, tuned) on a line of its own."""
    blocks = []
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
        title = f"### {where}: {unit}, % of {ceiling_name}"
        headers = ["stages"]
        for k in swept:
            headers += [f"{k} {unit}", f"{k} %", f"{k} smem stage/total, regs, blocks", f"{k} SASS"]
            headers += [f"{k} why"] if why else []
        body = []
        for s in sorted({r["stages"] for k in swept for r in by_variant[k]}):
            line = [s]
            for k in swept:
                r = next((r for r in by_variant[k] if r["stages"] == s), None)
                line += ["-"] * 4 if r is None else [_perf(r), _pct(r), _resources(r), r.get("sass") or "-"]
                line += [_why(r)] if why else []
            body.append(line)
        parts = [title]
        if body:
            parts.append(tabulate(body, headers=headers, tablefmt=fmt, disable_numparse=True))
        if others:
            other_body = [[_label(r), "-" if r["stages"] is None else r["stages"], _perf(r), _pct(r), _resources(r),
                           r.get("sass") or "-"] + ([_why(r)] if why else []) + [r.get("config") or ""] for r in others]
            parts.append(tabulate(other_body, headers=["variant", "stages", unit, "%", "smem stage/total, regs, blocks",
                                                        "SASS"] + (["why"] if why else []) + ["config"],
                                  tablefmt=fmt, disable_numparse=True))
        notes = [f"- {_where(r)}: {r['note']}" for r in group if r.get("note")]
        notes += [f"- {_where(r)}: profile: {r['profile']['note']}" for r in group
                  if (r.get("profile") or {}).get("note")]
        notes += [f"- {_profile_note()}"] if why else []
        if notes:
            parts.append("\n".join(notes))
        blocks.append("\n\n".join(parts))
    return "\n\n".join(blocks)


def _profiled(group: list[dict]) -> bool:
    return any(r.get("profile") for r in group)


def _why(r: dict | None) -> str:
    """The row's compact profile cell (suite.driver.profile.why); '-' without one."""
    from suite.driver.profile import why

    return "-" if r is None else why(r)


def _profile_note() -> str:
    from suite.driver.profile import TIMED_NOTE

    return f"why: {TIMED_NOTE} (how to read it: README, Reading the profile columns)"


THROTTLED, NOISY = "*", "~"  # marks in the terminal table's cells


def _cell(r: dict, noisy_above: float) -> str:
    """One variant at one stage count, compactly: throughput and % of the ceiling (with a mark when the GPU throttled
    or the samples spread), or what happened instead."""
    if r.get("measured") and r.get("valid") is not False:
        digits = 0 if r["unit"] == "GB/s" else 1
        marks = (THROTTLED if r.get("throttled") else "") + (NOISY if (r.get("spread") or 0) > noisy_above else "")
        pct = "" if r.get("ratio_to_ceiling") is None else f" {100 * r['ratio_to_ceiling']:.1f}%"
        return f"{r['throughput']:.{digits}f}{marks}{pct}"
    if r.get("valid") is None and r.get("built_for"):
        return f"built {r['built_for']}: {r.get('sass') or 'no SASS classes'}"
    return _perf(r)


def _github(headers: list[str], body: list[list[str]]) -> str:
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def _width(headers: list[str], body: list[list[str]]) -> int:
    """Characters per line of the github-format table of these cells."""
    return max(len(line) for line in _github(headers, body).splitlines())


def _fit(headers: list[str], body: list[list[str]], width: int, keep: int = 1) -> list[str]:
    """The table, split into several (each repeating the first ``keep`` columns) so that every line fits
    ``width``."""
    tables, cols = [], list(range(keep, len(headers)))
    while cols:
        take = 1
        while take < len(cols) and _width(*_columns(headers, body, list(range(keep)) + cols[:take + 1])) <= width:
            take += 1
        tables.append(_github(*_columns(headers, body, list(range(keep)) + cols[:take])))
        cols = cols[take:]
    return tables


def _columns(headers: list[str], body: list[list[str]], picked: list[int]) -> tuple[list[str], list[list[str]]]:
    return [headers[i] for i in picked], [[line[i] for i in picked] for line in body]


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 3)] + "..."


def terminal_table(rows: list[dict], width: int = 160) -> str:
    """What the CLI prints: per (problem, shape), the stage sweep with one compact cell per variant ('4043 95.8%',
    marks for throttling and spread), split into several tables when the variants do not fit ``width`` columns
    side by side; the unstaged variants; and the notes that explain a failure or a skip. Resources, SASS and every
    note are in table.md and results.csv."""
    from suite.driver.bench import MAX_SPREAD

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
        cells = {id(r): _cell(r, MAX_SPREAD) for r in group}
        marks |= {m for c in cells.values() for m in (THROTTLED, NOISY) if m in c.split(" ")[0]}
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
            body = [[_label(r), "-" if r["stages"] is None else str(r["stages"]), cells[id(r)]]
                    + ([_why(r)] if why else []) + [r.get("config") or ""] for r in others]
            headers = ["variant", "stages", unit] + (["why"] if why else []) + ["config"]
            n = len(headers) - 1  # the config column, clipped to what is left
            room = width - _width(headers[:n], [line[:n] for line in body]) - 5  # "| " + config + " |" - shared "|"
            body = [line[:n] + [_clip(line[n], max(room, 6))] for line in body]
            parts.append(_github(headers, body))
        problems = [f"{_where(r)}: {r['note']}" for r in group if r.get("valid") is False or
                    r.get("note", "").startswith("skipped")]
        if problems:
            parts.append("\n".join(textwrap.fill(p, width, initial_indent="- ", subsequent_indent="  ")
                                   for p in problems))
        blocks.append("\n\n".join(parts))
    legend = []
    if THROTTLED in marks:
        legend.append(f"{THROTTLED} the GPU reported a clock slowdown (power/thermal) at the end of timing")
    if NOISY in marks:
        legend.append(f"{NOISY} samples spread (IQR / median) above {100 * MAX_SPREAD:g}%")
    if any(r.get("profile") for r in rows):
        legend.append(_profile_note())
    footer = textwrap.fill("; ".join(legend + ["resources, SASS and all notes: table.md"]), width)
    return "\n\n".join(blocks + [footer])


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


def _temp_beside(path: Path) -> tuple[int, Path]:
    """A new, empty file next to ``path`` to write before renaming it into place, created with mode 0666 less the
    umask like any file the user creates (tempfile.mkstemp would make it 0600)."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def _atomic_write(path: Path, data: str | bytes) -> None:
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


CEILING_COLOR = "black"  # no variant line is ever drawn in it


def figure(rows: list[dict], problem: str):
    """The plot of ``problem`` as a matplotlib Figure (None when nothing of it was measured): throughput against
    stage count, one panel per shape, a line per swept variant, the ceiling as a black dashed line, every other
    unstaged variant (baselines, tuned) as a dotted line. Each label keeps one color across panels, taken from a
    palette without black; each legend sits below its panel, outside the axes, so it never covers data."""
    # grouped variants (the vector's depth sweep) are drawn against bytes in flight by suite.driver.depth_plot
    measured = [r for r in rows if r["problem"] == problem and r.get("measured") and not r.get("group")]
    if not measured:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(_label(r) for r in measured if not r["ceiling"]))
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20").colors
    color = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
    shapes = list(dict.fromkeys(r["shape"] for r in measured))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.5 * len(shapes), 5.2), squeeze=False, layout="constrained")
    for ax, shape in zip(axes[0], shapes):
        group = [r for r in measured if r["shape"] == shape]
        lines: dict[str, list[dict]] = {}
        for r in group:
            lines.setdefault(_label(r), []).append(r)
        for label, rs in lines.items():
            if len({r["stages"] for r in rs}) > 1:
                rs = sorted(rs, key=lambda r: r["stages"])
                ax.plot([r["stages"] for r in rs], [r["throughput"] for r in rs], marker="o", label=label,
                        color=color[label])
            elif rs[0]["ceiling"]:
                ax.axhline(rs[0]["throughput"], linestyle="--", color=CEILING_COLOR, label=f"{label} (ceiling)")
            else:
                ax.axhline(rs[0]["throughput"], linestyle=":", color=color[label],
                           label=label + ("" if rs[0]["stages"] is None else f", {rs[0]['stages']} stages"))
        ax.set_title(f"{problem} {shape}")
        ax.set_xlabel("pipeline stages")
        ax.set_ylabel(group[0]["unit"])
        ax.set_ylim(bottom=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    return fig


def plot(rows: list[dict], problem: str, path: Path) -> bool:
    """Write ``figure(rows, problem)`` as a PNG (atomically, honouring the umask). Returns False (and writes
    nothing) when nothing was measured."""
    fig = figure(rows, problem)
    if fig is None:
        return False
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    _atomic_write(path, buf.getvalue())
    return True


def missing_plots(rows: list[dict], on_gpu: bool) -> list[str]:
    """Why a problem of ``rows`` got no plot (plots show measured throughput): one sentence for a run without a GPU,
    else one per problem of which nothing was timed."""
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    unplotted = [p for p in problems if not any(r.get("measured") for r in rows if r["problem"] == p)]
    if not unplotted:
        return []
    if not on_gpu:
        return [f"No plot written ({', '.join(p + '.png' for p in unplotted)}): plots show measured throughput, and "
                "without a GPU nothing is timed."]
    return [f"No {p}.png written: no {p} row was timed (each failed validation or was skipped; see table.md)."
            for p in unplotted]


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
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unknown"


def write(rows: list[dict], meta: dict, out_dir: Path) -> list[Path]:
    """Write table.md, results.csv, results.json and one plot per problem into ``out_dir``. Everything is written
    to temporary names first and renamed into place, so an interrupted run leaves no half-written file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = depth_plot.write(rows, meta, out_dir)  # adds each row's effective latency (for the files below)
    md = "# pipesuite results\n\n" + "\n".join(f"- {k}: {_text(v)}" for k, v in meta.items()) + "\n\n" + table(rows) + "\n"
    for name, text in (("table.md", md), ("results.csv", to_csv(rows)),
                       ("results.json", json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))):
        _atomic_write(out_dir / name, text)
        written.append(out_dir / name)
    for problem in dict.fromkeys(r["problem"] for r in rows):
        path = out_dir / f"{problem}.png"
        if plot(rows, problem, path):
            written.append(path)
    return written
