"""Throughput against the bytes of loads in flight per SM, with Little's law drawn from the measured memory latency.

For rows that carry ``bytes_in_flight_per_sm`` (the streaming kernels, suite.streaming) and a throughput in GB/s.
Little's law: a memory system of latency L sustains a load bandwidth of (bytes in flight) / L. A streaming kernel
stores every byte it loads, and the throughput column counts bytes read + written, so

    throughput = 2 x bytes_in_flight_per_sm x SMs / L        (1 byte/ns = 1 GB/s)

is the line drawn from the idle latency the suite measured (run metadata ``memory_latency_ns``, a pointer chase),
and each measured point implies an effective (loaded) latency

    effective_latency_ns = 2 x bytes_in_flight_per_sm x SMs / throughput,

added to its row (table, CSV, JSON). Points on the line see idle latency; points below it see queueing (loaded
latency above idle) or a limit other than bytes in flight; where the curve meets the copy_ ceiling is how many bytes
in flight per SM, hence how many stages of a given tile, the GPU needs.
"""

from __future__ import annotations

import re

LATENCY_KEY = "memory_latency_ns"
_TILE_SUFFIX = re.compile(r"\s*\d+\s*KiB$")


def _sms(meta: dict) -> int | None:
    sms = meta.get("sms")
    return int(sms) if sms else None


def _applies(row: dict) -> bool:
    return bool(row.get("bytes_in_flight_per_sm")) and row.get("unit") == "GB/s"


def effective_latency_ns(row: dict, sms: int | None) -> float | None:
    """Latency the row's throughput implies for its loads in flight (None when not measured or not applicable)."""
    if not (_applies(row) and row.get("measured") and row.get("throughput") and sms):
        return None
    return 2 * row["bytes_in_flight_per_sm"] * sms / row["throughput"]


def annotate(rows: list[dict], meta: dict) -> None:
    """Add ``effective_latency_ns`` to every row it applies to (None elsewhere)."""
    sms = _sms(meta)
    for row in rows:
        row["effective_latency_ns"] = effective_latency_ns(row, sms)


def family(row: dict) -> str:
    """The kernel a row belongs to, whatever its tile size: 'ptx:cp.async ring 4KiB' -> 'ptx:cp.async ring'."""
    return f"{row['backend']}:{_TILE_SUFFIX.sub('', row['variant'])}"


MAX_COLS = 4  # panels per row
FAMILY_SPREAD = 0.12  # log2 units: the kernels' points spread over this much around each bytes-in-flight value


def figure(rows: list[dict], meta: dict, problem: str):
    """One panel per shape: measured points (a color per kernel, a marker per tile size; the rows of a registry group,
    i.e. a sweep, joined by a line; ungrouped rows, the headline configurations, as hollow markers), the ceiling, and
    the Little's-law line. Each kernel's points sit at a small offset of its own along the (log) x axis, so that
    kernels with equal bytes in flight and equal throughput stay visible. None when no applicable row was measured."""
    measured = [r for r in rows if r["problem"] == problem and r.get("measured")]
    points = [r for r in measured if _applies(r)]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latency, sms = meta.get(LATENCY_KEY), _sms(meta)
    latency = latency if isinstance(latency, (int, float)) and latency > 0 else None  # else why it was not measured
    shapes = list(dict.fromkeys(r["shape"] for r in points))
    families = list(dict.fromkeys(family(r) for r in points))
    tiles = sorted({r.get("tile_bytes") or 0 for r in points})
    markers = dict(zip(tiles, "os^Dv<>ph*"))
    step = FAMILY_SPREAD / max(1, len(families) - 1)
    shift = {fam: 2 ** ((i - (len(families) - 1) / 2) * step) for i, fam in enumerate(families)}
    cols = min(len(shapes), MAX_COLS)
    nrows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 5 * nrows), squeeze=False)
    for ax in axes.flat[len(shapes) :]:
        ax.remove()
    for ax, shape in zip(axes.flat, shapes):
        shown = [r for r in points if r["shape"] == shape]
        for i, fam in enumerate(families):
            for tile in tiles:
                rs = sorted(
                    (r for r in shown if family(r) == fam and (r.get("tile_bytes") or 0) == tile),
                    key=lambda r: r["bytes_in_flight_per_sm"],
                )
                for swept in (True, False):
                    sel = [r for r in rs if bool(r.get("group")) == swept]
                    if not sel:
                        continue
                    ax.plot(
                        [r["bytes_in_flight_per_sm"] / 1024 * shift[fam] for r in sel],
                        [r["throughput"] for r in sel],
                        marker=markers.get(tile, "o"),
                        color=f"C{i}",
                        linestyle="-" if swept else "none",
                        markerfacecolor=f"C{i}" if swept else "none",
                        alpha=0.85,
                        label=f"{fam}, {tile // 1024} KiB tiles" + ("" if swept else " (headline row)"),
                    )
        xs = [r["bytes_in_flight_per_sm"] / 1024 for r in shown]
        lo, hi = min(xs) / 1.5, max(xs) * 1.5
        ceiling = next((r for r in measured if r["shape"] == shape and r.get("ceiling")), None)
        if ceiling:
            ax.axhline(
                ceiling["throughput"],
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"{ceiling['backend']}:{ceiling['variant']} (ceiling)",
            )
        if latency and sms:
            grid = [lo * (hi / lo) ** (k / 100) for k in range(101)]
            little = [2 * x * 1024 * sms / latency for x in grid]
            top = (ceiling["throughput"] if ceiling else max(r["throughput"] for r in shown)) * 1.15
            keep = [(x, y) for x, y in zip(grid, little) if y <= top]
            if keep:
                ax.plot(
                    *zip(*keep),
                    color="gray",
                    linestyle=":",
                    linewidth=1.5,
                    label=f"Little's law: 2 x in flight x {sms} SMs / {latency:.0f} ns",
                )
            if ceiling:  # where the line meets the ceiling: what an SM needs in flight at idle latency
                need = ceiling["throughput"] * latency / (2 * sms) / 1024
                ax.axvline(
                    need,
                    color="gray",
                    linestyle="-.",
                    linewidth=1,
                    label=f"ceiling reached at idle latency: {need:.0f} KiB in flight/SM",
                )
        ax.set_xscale("log", base=2)
        ax.set_xlim(lo, hi)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("loads in flight per SM (KiB) = tiles in flight x tile x resident blocks")
        ax.set_ylabel(shown[0]["unit"] + " (read + written)")
        title = f"{problem} {shape}: throughput vs bytes in flight"
        ax.set_title(
            title
            + (
                f"\nidle memory latency {latency:.0f} ns (pointer chase)"
                if latency
                else "\nno memory latency measured: Little's law not drawn"
            ),
            fontsize=10,
        )
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
