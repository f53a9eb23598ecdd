"""The plots of a run (matplotlib, Agg), rendered to PNG bytes for suite.driver.report to write.

- ``<problem>.png``: throughput against pipeline stages, one panel per (shape, dtype), each with its own ceiling line.
  Panels are grouped by dtype (each dtype starts a new row of the grid), at most ``MAX_COLS`` a row and
  ``MAX_ROWS`` rows a file: a run with more panels is split into ``<problem>-1.png``, ``<problem>-2.png``...
  A colour per backend, a line style and marker per variant (the same in every panel and file), and each variant
  drawn at a small offset of its own along the stage axis, so that variants that coincide stay visible.
- ``<problem>-ratio-vs-m.png``: for a GEMM run of several shapes, the ratio to the ceiling of each backend's best row
  per shape (and of its auto row, dashed, when the run has one) against M, a panel per dtype (suite.driver.summary).
- ``<problem>-depth.png``: the streaming kernels against bytes in flight (suite.driver.depth_plot).
"""

from __future__ import annotations

import io
import math
import re
import statistics

from suite.driver import depth_plot, summary

MAX_COLS = 4  # panels per row of a file: with the legend, under 3,000 pixels at DPI
MAX_ROWS = 4  # rows of panels per file
PANEL = (5.0, 3.7)  # inches, width and height of one panel with its titles
LEGEND_WIDTH = 4.0  # inches, to the right of the panels
DPI = 120
CEILING_COLOR = "black"  # no variant is ever drawn in it
BACKEND_COLORS = {"ptx": "#d62728", "triton": "#1f77b4", "cuda": "#2ca02c", "torch": "#9467bd"}
SPARE_COLORS = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")  # other backends (plugins)
# seven line styles against fifteen markers (coprime): the first 105 variants of a backend all differ in the pair
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (8, 2, 2, 2)))
MARKERS = "osD^vP*X<>hpd8H"
SWEEP_LINE = {"markersize": 5, "linewidth": 1.2, "alpha": 0.9}
OFFSET_SPAN = 0.5  # stages: the variants' offsets spread over at most this much around each stage count
OFFSET_STEP = 0.06  # stages between two variants' offsets, at most
ZOOM_ABOVE = 0.8  # a panel whose rows all reach this share of its best row has a y axis that does not start at 0
M_PROBLEMS = {"gemm"}  # problems whose shape is MxNxK: the ratio-vs-M plot
MIN_M = 3  # values of M a dtype needs for its ratio-vs-M panel
M_SHIFT = 0.06  # log2 units between two series' offsets along M, so that equal ratios at one M stay apart
_MNK = re.compile(r"^(\d+)x\d+x\d+$")


def backend_colors(backends: list[str]) -> dict[str, str]:
    spare = iter(SPARE_COLORS)
    return {b: BACKEND_COLORS.get(b) or next(spare, "#444444") for b in backends}


def styles(labels: list[str]) -> dict[str, tuple[str, object, str]]:
    """(colour, line style, marker) per ``backend:variant`` label: the backend's colour, and a line style and marker
    per variant within its backend, so that no two labels share all three."""
    colors = backend_colors(list(dict.fromkeys(label.split(":", 1)[0] for label in labels)))
    seen: dict[str, int] = {}
    out = {}
    for label in dict.fromkeys(labels):
        backend = label.split(":", 1)[0]
        i = seen[backend] = seen.get(backend, -1) + 1
        out[label] = (colors[backend], LINESTYLES[i % len(LINESTYLES)], MARKERS[i % len(MARKERS)])
    return out


def short_dtype(dtype: str | None) -> str:
    """The input type of a dtype such as 'fp8e4m3->fp32acc->bf16'."""
    return (dtype or "-").split("->", 1)[0]


def _measured(rows: list[dict], problem: str) -> list[dict]:
    """``problem``'s timed rows that did not fail. Grouped variants (the vector's depth sweep) are drawn against bytes
    in flight by suite.driver.depth_plot instead."""
    return [
        r
        for r in rows
        if r["problem"] == problem
        and r.get("measured")
        and r.get("valid") is not False
        and r.get("throughput")
        and not r.get("group")
    ]


def pages(rows: list[dict], problem: str) -> list[list[list[tuple[str, str]]]]:
    """The (shape, dtype) panels of ``problem``'s measured rows, laid out: files, each a list of grid rows, each a list
    of at most MAX_COLS panels; a dtype's panels in the order met, each dtype starting a new grid row."""
    keys = list(dict.fromkeys((r["shape"], r.get("dtype")) for r in _measured(rows, problem)))
    grid = []
    for dtype in dict.fromkeys(d for _, d in keys):
        mine = [k for k in keys if k[1] == dtype]
        grid += [mine[i : i + MAX_COLS] for i in range(0, len(mine), MAX_COLS)]
    return [grid[i : i + MAX_ROWS] for i in range(0, len(grid), MAX_ROWS)]


def file_names(problem: str, count: int) -> list[str]:
    """``<problem>.png`` for a single file, else ``<problem>-1.png``..."""
    return [f"{problem}.png"] if count == 1 else [f"{problem}-{i + 1}.png" for i in range(count)]


def figures(rows: list[dict], problem: str) -> list:
    """The stage plots of ``problem`` as matplotlib Figures, one per file of ``pages`` (none when nothing of it was
    measured). One legend per figure, to the right of every panel, outside the axes: it never covers data."""
    measured = _measured(rows, problem)
    laid_out = pages(rows, problem)
    if not laid_out:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    labels = list(dict.fromkeys(summary.label(r) for r in measured if not r["ceiling"]))
    style = styles(labels)
    staged = [k for k in labels if any(r["stages"] is not None for r in measured if summary.label(r) == k)]
    step = min(OFFSET_STEP, OFFSET_SPAN / max(1, len(staged)))
    offset = {k: (i - (len(staged) - 1) / 2) * step for i, k in enumerate(staged)}
    cols = max(len(line) for page in laid_out for line in page)
    out = []
    for page in laid_out:
        fig = plt.figure(figsize=(cols * PANEL[0] + LEGEND_WIDTH, len(page) * PANEL[1]), dpi=DPI, layout="constrained")
        grid = fig.add_gridspec(len(page), cols)
        dtypes: dict[str, set[str]] = {}  # label -> the dtypes it is drawn in on this page
        ceilings: set[str] = set()
        for i, line in enumerate(page):
            for j, (shape, dtype) in enumerate(line):
                ax = fig.add_subplot(grid[i, j])
                group = [r for r in measured if (r["shape"], r.get("dtype")) == (shape, dtype)]
                ceilings |= {summary.label(r) for r in group if r["ceiling"]}
                for k in _panel(ax, problem, group, style, offset):
                    dtypes.setdefault(k, set()).add(short_dtype(dtype))
        page_dtypes = list(dict.fromkeys(d for line in page for _, d in line))
        several = len(page_dtypes) > 1
        handles = [
            Line2D(
                [], [], color=CEILING_COLOR, linestyle="--", linewidth=1.5, label=f"{k} (ceiling: dashed, per panel)"
            )
            for k in sorted(ceilings)
        ]
        for k in labels:
            if k in dtypes:
                color, linestyle, marker = style[k]
                unstaged = k not in offset
                text = k + (" (no stages)" if unstaged else "")
                text += f" [{', '.join(d for d in map(short_dtype, page_dtypes) if d in dtypes[k])}]" if several else ""
                handles.append(
                    Line2D([], [], color=color, linestyle=linestyle, marker=None if unstaged else marker, label=text)
                )
        title = "dtypes: " + ", ".join(map(short_dtype, page_dtypes)) if several else f"dtype: {page_dtypes[0] or '-'}"
        fig.legend(handles=handles, loc="outside right upper", fontsize=7, title=title, title_fontsize=8, frameon=False)
        out.append(fig)
    return out


def _panel(ax, problem: str, group: list[dict], style: dict, offset: dict) -> list[str]:
    """One (shape, dtype) panel: each variant's stage sweep (offset along the stage axis), each unstaged variant as a
    horizontal line of its style, the ceiling as a black dashed line. Returns the labels drawn."""
    by_label: dict[str, list[dict]] = {}
    for r in group:
        by_label.setdefault(summary.label(r), []).append(r)
    ceiling = next((r for r in group if r["ceiling"]), None)
    for label, rs in by_label.items():
        if label not in style:
            continue  # the ceiling
        color, linestyle, marker = style[label]
        staged = sorted((r for r in rs if r["stages"] is not None), key=lambda r: r["stages"])
        if staged:
            xs, ys = [r["stages"] + offset[label] for r in staged], [r["throughput"] for r in staged]
            ax.plot(xs, ys, label=label, color=color, linestyle=linestyle, marker=marker, **SWEEP_LINE)
        for r in rs:
            if r["stages"] is None:
                ax.axhline(r["throughput"], color=color, linestyle=linestyle, linewidth=1, alpha=0.8, label=label)
    unit = group[0]["unit"]
    title = f"{problem} {group[0]['shape']}\n{group[0].get('dtype') or '-'}"
    if ceiling:
        ax.axhline(
            ceiling["throughput"],
            color=CEILING_COLOR,
            linestyle="--",
            linewidth=1.5,
            label=f"{summary.label(ceiling)} (ceiling)",
        )
        title += f", ceiling {ceiling['throughput']:.{0 if unit == 'GB/s' else 1}f} {unit}"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("pipeline stages", fontsize=8)
    ax.set_ylabel(unit, fontsize=8)
    ax.tick_params(labelsize=7)
    lo, hi = min(r["throughput"] for r in group), max(r["throughput"] for r in group)
    if lo >= ZOOM_ABOVE * hi:  # all rows close to the best: drawn from 0 they would coincide
        ax.set_ylim(lo - 0.15 * (hi - lo or hi), hi + 0.15 * (hi - lo or hi))
        ax.set_ylabel(f"{unit} (axis not from 0)", fontsize=8)
    else:
        ax.set_ylim(0, hi * 1.08)
    stages = [r["stages"] for r in group if r["stages"] is not None]
    if stages:
        ax.set_xlim(min(stages) - 0.5, max(stages) + 0.5)
        ax.set_xticks(range(min(stages), max(stages) + 1))
    ax.grid(alpha=0.3)
    return [k for k in by_label if k in style]


def m_of(shape: str) -> int | None:
    """M of a GEMM shape 'MxNxK'; None for any other shape."""
    m = _MNK.match(shape)
    return int(m.group(1)) if m else None


def ratio_figure(rows: list[dict], problem: str):
    """Ratio to the ceiling against M (log scale) for a multi-shape GEMM run, a panel per dtype: each backend's best
    row per shape as filled markers, with a solid line through each octave of M's geometric means (of its M and of
    its ratios); its auto rows, when the run has them, as hollow markers and a dashed line. None when ``problem`` is
    not a GEMM or no dtype of it was timed at MIN_M values of M."""
    if problem not in M_PROBLEMS:
        return None
    points = {k: v for k, v in summary.points(rows).items() if k[0] == problem}
    dtypes = [
        d
        for d in dict.fromkeys(k[1] for k in points)
        if len({m_of(s) for k, v in points.items() if k[1] == d for s in v} - {None}) >= MIN_M
    ]
    if not dtypes:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    colors = backend_colors(list(dict.fromkeys(k[2] for k in points)))
    cols = min(len(dtypes), MAX_COLS - 1)
    nrows = math.ceil(len(dtypes) / cols)
    fig, axes = plt.subplots(
        nrows,
        cols,
        figsize=(cols * 6.5 + 2.5, nrows * 4.5),
        dpi=DPI,
        squeeze=False,
        layout="constrained",
    )
    for ax in axes.flat[len(dtypes) :]:
        ax.remove()
    series = list(dict.fromkeys((k[2], k[3]) for k in points))  # (backend, kind), each at an x offset of its own
    shift = {k: 2 ** ((i - (len(series) - 1) / 2) * M_SHIFT) for i, k in enumerate(series)}
    for ax, dtype in zip(axes.flat, dtypes):
        for (_, d, backend, kind), per_shape in points.items():
            at = sorted(
                (m_of(s) * shift[(backend, kind)], ratio)
                for s, ratio in per_shape.items()
                if d == dtype and m_of(s) is not None
            )
            if not at:
                continue
            color, auto = colors[backend], kind == "auto"
            ax.scatter(
                [m for m, _ in at],
                [r for _, r in at],
                s=18,
                marker="s" if auto else "o",
                facecolors="none" if auto else color,
                edgecolors=color,
                alpha=0.75,
            )
            octaves: dict[int, list[tuple[float, float]]] = {}  # a sweep's M are all different: a trend per octave
            for m, ratio in at:
                octaves.setdefault(math.floor(math.log2(m / shift[(backend, kind)])), []).append((m, ratio))
            trend = [[statistics.geometric_mean(v) for v in zip(*octaves[k])] for k in sorted(octaves)]
            ax.plot(
                *zip(*trend), color=color, linestyle="--" if auto else "-", linewidth=1.3, label=f"{backend} {kind}"
            )
        ax.axhline(1.0, color=CEILING_COLOR, linestyle="--", linewidth=1, label="the ceiling")
        ax.axhline(summary.THRESHOLD, color="gray", linestyle=":", linewidth=1, label=f"{summary.THRESHOLD:g}")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.set_xlabel("M (log scale)")
        ax.set_ylabel("ratio to the ceiling")
        ax.set_title(f"{problem} {dtype}: ratio to the ceiling against M", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    legend = {}
    for ax in fig.axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(text, handle)
    fig.legend(
        list(legend.values()),
        list(legend),
        loc="outside right upper",
        fontsize=8,
        frameon=False,
        title="line: geometric mean per octave of M\nbest: filled; auto: hollow",
        title_fontsize=8,
    )
    return fig


def png(fig) -> bytes:
    """The figure as PNG bytes, cropped to what it draws (legends outside the axes included); the figure is closed.
    Stored with a palette of 256 colours, undithered: lines and markers on white use a few dozen colours besides
    their anti-aliased edges, so the image looks the same and the file is about a third of the RGBA one."""
    import matplotlib.pyplot as plt
    from PIL import Image

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.1, facecolor="white")
    finally:
        plt.close(fig)
    image = Image.open(buf).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def drawings(rows: list[dict], meta: dict, problem: str) -> list[tuple[str, object]]:
    """(file name, Figure) for each plot of ``problem`` there is something to draw: the stage plots, the ratio-vs-M
    plot and the depth plot (``png`` renders and closes each)."""
    pages_ = figures(rows, problem)
    out = list(zip(file_names(problem, len(pages_)), pages_))
    if (fig := ratio_figure(rows, problem)) is not None:
        out.append((f"{problem}-ratio-vs-m.png", fig))
    if (fig := depth_plot.figure(rows, meta, problem)) is not None:
        out.append((f"{problem}-depth.png", fig))
    return out
