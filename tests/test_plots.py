"""The plots (suite.driver.plots), the per-backend summary (suite.driver.summary) and where suite.report writes, on
small fake runs: CPU only, Agg backend."""

import json
import math
import struct

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from suite.driver import plots, report, summary  # noqa: E402

FP16, FP8 = "fp16->fp32acc->fp16", "fp8e4m3->fp32acc->bf16"


def _row(shape, dtype, backend, variant, stages, throughput, of=None, **kw):
    """A timed GEMM row; its ratio to the ceiling when ``of``, the ceiling's throughput, is given."""
    row = {
        "problem": "gemm",
        "shape": shape,
        "dtype": dtype,
        "backend": backend,
        "variant": variant,
        "stages": stages,
        "unit": "TFLOP/s",
        "throughput": throughput,
        "ratio_to_ceiling": throughput / of if of else None,
        "ceiling": False,
        "baseline": False,
        "valid": True,
        "measured": True,
        "median_ms": 1.0,
        "note": "",
    }
    return row | kw


def _run(shapes, dtypes=(FP16, FP8), stages=(2, 3, 4)):
    """Per (shape, dtype): a cuBLAS ceiling whose throughput differs everywhere, and three variants over two backends,
    two of which coincide exactly (same throughput at every stage count)."""
    rows = []
    for i, shape in enumerate(shapes):
        for j, dtype in enumerate(dtypes):
            top = 100.0 + 10 * i + 1000 * j
            rows.append(_row(shape, dtype, "torch", "cuBLAS", None, top, top, ceiling=True))
            for s in stages:
                rows.append(_row(shape, dtype, "ptx", "a", s, top * (0.5 + 0.1 * s), top))
                rows.append(_row(shape, dtype, "ptx", "b", s, top * (0.5 + 0.1 * s), top))  # coincides with ptx:a
                rows.append(_row(shape, dtype, "triton", "c", s, top * (0.4 + 0.1 * s), top))
    return rows


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _ceiling_lines(ax):
    return [ln for ln in ax.get_lines() if ln.get_label().endswith("(ceiling)")]


def test_one_panel_per_shape_and_dtype_each_with_its_own_ceiling_in_files_of_bounded_size():
    shapes = [f"{m}x4096x4096" for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)]
    rows = _run(shapes)  # 22 panels: more than a file holds
    figs = plots.figures(rows, "gemm")
    assert len(figs) == 2 and plots.file_names("gemm", 2) == ["gemm-1.png", "gemm-2.png"]
    ceilings = {(r["shape"], r["dtype"]): r["throughput"] for r in rows if r["ceiling"]}
    seen = []
    for fig in figs:
        assert len(fig.axes) <= plots.MAX_COLS * plots.MAX_ROWS
        for ax in fig.axes:
            title = ax.get_title()
            (key,) = [k for k in ceilings if k[0] in title.split("\n")[0].split() and k[1] in title]
            seen.append(key)
            (line,) = _ceiling_lines(ax)
            assert set(line.get_ydata()) == {ceilings[key]}
            # each variant's line holds its points of this shape and dtype only, one per stage count
            for ln in ax.get_lines():
                if ln not in _ceiling_lines(ax):
                    assert len(ln.get_xdata()) == 3
                    assert max(ln.get_ydata()) < ceilings[key]
        width, height = _png_size(plots.png(fig))
        assert width <= 6000 and height <= 6000 and width <= 4000
    assert sorted(seen) == sorted(ceilings)  # every (shape, dtype) once
    # dtypes are not mixed in a row of the grid: each dtype starts a new one
    for page in plots.pages(rows, "gemm"):
        for line in page:
            assert len({d for _, d in line}) == 1


def test_a_png_is_a_palette_image_that_looks_like_the_full_colour_rendering():
    import io

    import numpy as np
    from PIL import Image

    (fig,) = plots.figures(_run(["64x4096x4096", "128x4096x4096"]), "gemm")
    full = io.BytesIO()
    fig.savefig(full, format="png", dpi=plots.DPI, bbox_inches="tight", pad_inches=0.1, facecolor="white")
    small = plots.png(fig)
    rgb = np.asarray(Image.open(full).convert("RGB"), dtype=np.int16)
    image = Image.open(io.BytesIO(small))
    assert image.mode == "P" and image.size == (rgb.shape[1], rgb.shape[0])
    diff = np.abs(np.asarray(image.convert("RGB"), dtype=np.int16) - rgb)
    assert diff.mean() < 0.2 and np.quantile(diff.max(axis=2), 0.999) < 8, (diff.mean(), diff.max())
    assert len(small) < 0.6 * len(full.getvalue())


def test_styles_colour_per_backend_style_per_variant_and_coinciding_variants_stay_apart():
    rows = _run(["64x4096x4096", "128x4096x4096"], dtypes=(FP16,))
    rows.append(_row("64x4096x4096", FP16, "ptx", "broken", 3, 1e6, valid=False))  # a failed row is not drawn
    (fig,) = plots.figures(rows, "gemm")
    for ax in fig.axes:
        lines = {ln.get_label(): ln for ln in ax.get_lines() if ln not in _ceiling_lines(ax)}
        assert set(lines) == {"ptx:a", "ptx:b", "triton:c"}
        a, b, c = lines["ptx:a"], lines["ptx:b"], lines["triton:c"]
        assert to_rgba(a.get_color()) == to_rgba(b.get_color()) != to_rgba(c.get_color())
        assert (a.get_linestyle(), a.get_marker()) != (b.get_linestyle(), b.get_marker())
        assert list(a.get_ydata()) == list(b.get_ydata())  # the same values...
        assert all(xa != xb for xa, xb in zip(a.get_xdata(), b.get_xdata()))  # ...drawn apart
        assert all(abs(x - round(x)) < 0.3 for x in a.get_xdata())  # still read as their stage count
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert FP16 in legend.get_title().get_text() and len(texts) == 4  # the ceiling and three variants
    plt.close(fig)


def test_several_dtypes_on_a_file_are_named_in_the_legend_and_titles():
    rows = _run(["64x4096x4096", "128x4096x4096"])
    rows += [_row("64x4096x4096", FP16, "ptx", "fp16 only", 3, 1.0, 100.0)]
    (fig,) = plots.figures(rows, "gemm")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "ptx:a [fp16, fp8e4m3]" in texts and "ptx:fp16 only [fp16]" in texts
    assert sorted(sum(d in ax.get_title() for d in (FP16, FP8)) for ax in fig.axes) == [1, 1, 1, 1]
    plt.close(fig)


def test_panels_of_close_rows_do_not_start_at_zero_and_others_do():
    rows = [
        _row("1024", "fp32", "torch", "copy_", None, 4200.0, 4200.0, problem="vector", unit="GB/s", ceiling=True),
        _row("1024", "fp32", "ptx", "ring", 4, 4150.0, 4200.0, problem="vector", unit="GB/s"),
        _row("1024", "fp32", "triton", "loop", 4, 4100.0, 4200.0, problem="vector", unit="GB/s"),
    ]
    (fig,) = plots.figures(rows, "vector")
    (ax,) = fig.axes
    assert 0 < ax.get_ylim()[0] < 4100 and ax.get_ylim()[1] > 4200 and "not from 0" in ax.get_ylabel()
    plt.close(fig)
    (fig,) = plots.figures(rows + [dict(rows[1], stages=1, throughput=1000.0)], "vector")
    assert fig.axes[0].get_ylim()[0] == 0
    plt.close(fig)


def _summary_run():
    """Three fp16 shapes, cuBLAS at 100: ptx best 0.9, 1.1, 0.8 (a worse variant beside it), its auto row 0.85, 1.0,
    0.8; triton best 0.96, 0.5, 1.2; and one fp8 shape (a single shape: no summary)."""
    rows = []
    best = {"ptx": (0.9, 1.1, 0.8), "triton": (0.96, 0.5, 1.2)}
    auto = (0.85, 1.0, 0.8)
    for i, shape in enumerate(("16x4096x4096", "256x4096x4096", "4096x4096x4096")):
        rows.append(_row(shape, FP16, "torch", "cuBLAS", None, 100.0, 100.0, ceiling=True))
        for backend, ratios in best.items():
            rows.append(_row(shape, FP16, backend, "tile", 3, 100.0 * ratios[i], 100.0))
            rows.append(_row(shape, FP16, backend, "tile", 2, 50.0 * ratios[i], 100.0))
        rows.append(_row(shape, FP16, "ptx", "auto", None, 100.0 * auto[i], 100.0))
        rows.append(_row(shape, FP16, "ptx", "broken", 3, 500.0, 100.0, valid=False))  # a failure is no best
    rows.append(_row("16x4096x4096", FP8, "torch", "cuBLAS", None, 200.0, 200.0, ceiling=True))
    rows.append(_row("16x4096x4096", FP8, "ptx", "tile", 3, 100.0, 200.0))
    return rows


def test_summary_geomean_min_and_share_by_hand():
    stats = {(s.backend, s.kind): s for s in summary.stats(_summary_run())}
    assert set(stats) == {("ptx", "best"), ("ptx", "auto"), ("triton", "best")}  # no fp8 line: one shape
    ptx, auto, triton = stats["ptx", "best"], stats["ptx", "auto"], stats["triton", "best"]
    assert ptx.geomean == pytest.approx((0.9 * 1.1 * 0.8) ** (1 / 3))
    assert (ptx.minimum, ptx.weakest, ptx.at_threshold, ptx.shapes) == (pytest.approx(0.8), "4096x4096x4096", 1, 3)
    assert auto.geomean == pytest.approx(math.exp((math.log(0.85) + math.log(1.0) + math.log(0.8)) / 3))
    assert (auto.minimum, auto.at_threshold) == (pytest.approx(0.8), 1)
    assert triton.geomean == pytest.approx((0.96 * 0.5 * 1.2) ** (1 / 3))
    assert (triton.minimum, triton.weakest, triton.at_threshold) == (pytest.approx(0.5), "256x4096x4096", 2)
    text = summary.table(_summary_run())
    assert f"| {FP16} | ptx       | auto   | 3        | {auto.geomean:.3f}" in text, text
    assert "67% (2/3)" in text and "33% (1/3)" in text


def test_summary_in_table_md_and_the_terminal_and_absent_for_one_shape():
    rows = _summary_run()
    for text in (report.table(rows), report.terminal_table(rows, 160)):
        assert "gemm: summary per backend" in text and "ptx" in text
    assert max(len(line) for line in report.terminal_table(rows, 160).splitlines()) <= 160
    plain = [r for r in rows if r["variant"] != "auto"]
    assert "this run has none" in summary.table(plain)
    assert {s.kind for s in summary.stats(plain)} == {"best"}
    one = [r for r in rows if r["shape"] == "16x4096x4096"]
    assert summary.table(one) is None and "summary per backend" not in report.table(one)


def test_ratio_against_m_colours_backends_and_dashes_auto_rows():
    rows = _summary_run()
    fig = plots.ratio_figure(rows, "gemm")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["ptx best"].get_linestyle() == "-" and lines["ptx auto"].get_linestyle() == "--"
    assert to_rgba(lines["ptx best"].get_color()) == to_rgba(lines["ptx auto"].get_color())
    assert to_rgba(lines["ptx best"].get_color()) != to_rgba(lines["triton best"].get_color())
    assert list(lines["ptx best"].get_ydata()) == pytest.approx([0.9, 1.1, 0.8])  # the best of each shape, by M
    width, _ = _png_size(plots.png(fig))
    assert width <= 6000
    # fewer than three values of M, or not a GEMM: no such plot
    assert plots.ratio_figure([r for r in rows if not r["shape"].startswith("16x")], "gemm") is None
    assert plots.ratio_figure([r | {"problem": "vector"} for r in rows], "vector") is None


def _small_pages(monkeypatch):
    """Files of two panels at most, so that a run of three shapes is split as a large run is (and draws fast)."""
    monkeypatch.setattr(plots, "MAX_COLS", 2)
    monkeypatch.setattr(plots, "MAX_ROWS", 1)
    return _run(["1x4096x4096", "16x4096x4096", "256x4096x4096"], dtypes=(FP16,))


def test_write_names_every_file_it_draws(tmp_path, monkeypatch):
    rows = _small_pages(monkeypatch)
    names = sorted(p.name for p in report.write(rows, {"gpu": "test"}, tmp_path))
    assert names == ["gemm-1.png", "gemm-2.png", "gemm-ratio-vs-m.png", "results.csv", "results.json", "table.md"]
    for name in names:
        if name.endswith(".png"):
            assert _png_size((tmp_path / name).read_bytes())[0] <= 6000


def test_report_writes_a_new_directory_unless_in_place(tmp_path, monkeypatch, capsys):
    from suite.report import main

    run = tmp_path / "results" / "NVIDIA-H200" / "llm"
    rows = _small_pages(monkeypatch)
    report.write(rows, {"gpu": "NVIDIA H200"}, run)
    (run / "gemm.png").write_bytes(b"an earlier rendering")  # one file, since split into pages
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    monkeypatch.chdir(tmp_path)
    assert main([str(run)]) == 0 and main([str(run)]) == 0  # twice: two directories
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # DIR untouched
    made = sorted((tmp_path / "results" / "NVIDIA-H200").glob("*-report-llm*"))
    assert len(made) == 2 and all((d / "results.json").exists() and (d / "gemm-1.png").exists() for d in made)
    assert f"in {made[0].relative_to(tmp_path)}/" in capsys.readouterr().out
    # --in-place: DIR's tables and plots again, its record as it was, the earlier rendering's plot removed
    assert main([str(run), "--in-place"]) == 0
    out = capsys.readouterr().out
    assert "removed gemm.png" in out and not (run / "gemm.png").exists() and (run / "gemm-2.png").exists()
    assert (run / "results.json").read_bytes() == before["results.json"]
    with pytest.raises(SystemExit) as info:
        main([str(run), "--in-place", "--out", str(tmp_path / "x")])
    assert info.value.code == 2


def test_committed_llm_run_renders_in_files_no_wider_than_6000_pixels():
    """The issue's bar, on the committed LLM-shape run (58 shapes) when it is there: figures only, not saved."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results" / "NVIDIA-H200"
    found = [d for d in ("llm", "gemm-llm-long-k-stmatrix") if (root / d / "results.json").exists()]
    if not found:
        pytest.skip("no committed LLM-shape run")
    rows = json.loads((root / found[0] / "results.json").read_text())["rows"]
    figs = plots.figures(rows, "gemm")
    assert sum(len(f.axes) for f in figs) == len({(r["shape"], r["dtype"]) for r in rows if r.get("measured")})
    for fig in figs:
        width, height = fig.get_size_inches() * fig.dpi
        assert width <= 6000 and height <= 6000
        plt.close(fig)
