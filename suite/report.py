"""python -m suite.report DIR: render a run's tables and plots again from its results.json, on any machine.

DIR is a results directory (what python -m suite.run printed, or a committed one under results/) or its results.json.
The terminal shows what the run showed (the tables when something was timed, the compact summary when nothing was;
--verbose for the tables always). table.md, results.csv, the plots and a copy of the results.json are written into a
new directory, results/<gpu>/<timestamp>-report-<DIR's name>/ (scratch, like suite.run's own timestamped runs), or
into --out OUT (refused where OUT holds a run's results already, unless --overwrite: as suite.run's --out); with
--in-place, into DIR itself, its results.json (the record of the run) left exactly as it is and the plot files an
earlier rendering left there and this one did not write removed. Nothing is run and no GPU is needed: this is how the
plots of a GPU run are drawn again after the plotting code changed. Exit status: 0; 1 when a file could not be
written; 2 on bad input (one line naming the file and the rule).

Examples:
  python -m suite.report results/NVIDIA-H200/RUN
  python -m suite.report results/NVIDIA-H200/RUN --out /tmp/again
  python -m suite.report results/NVIDIA-H200/RUN --in-place
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

from suite.driver.results_io import path_argument

WIDTH = 160
RENDERED_FIELDS = ("problem", "shape", "backend", "variant", "stages", "unit", "ceiling", "valid", "measured")


class ReportError(ValueError):
    """Bad input: one line naming the file and the rule."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"error: {message} (see python -m suite.report --help)\n")


def load(path: str | Path) -> tuple[dict, list[dict], Path]:
    """(meta, rows, results.json) of a results directory or file; ReportError when it is not one."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no results.json there" if path.is_dir() else f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{file}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{file}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ReportError(f"{file}: not a pipesuite results.json (JSON nested too deeply)") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or not isinstance(data.get("meta"), dict):
        raise ReportError(f"{file}: not a pipesuite results.json (no 'meta' object and 'rows' list)")
    for i, row in enumerate(data["rows"]):
        missing = [k for k in RENDERED_FIELDS if k not in row] if isinstance(row, dict) else ["(not an object)"]
        if missing:
            raise ReportError(f"{file}: not a pipesuite results.json (row {i} has no {', '.join(missing)})")
    if not data["rows"]:
        raise ReportError(f"{file}: holds no rows (nothing to render)")
    return data["meta"], data["rows"], file


OUT_HELP = "write table.md, results.csv, the plots and a copy of results.json here (default: a new directory)"
OVERWRITE_HELP = "let --out be a directory that holds a run's results: they and their plots are removed first"
IN_PLACE_HELP = (
    "write table.md, results.csv and the plots into DIR itself, leaving its results.json as it is, and remove the "
    "plot files an earlier rendering left there and this one did not write"
)


def default_out(meta: dict) -> Path:
    """Where a rendering goes without --out or --in-place: results/<gpu>/ (results/cpu/ for a run without one), in a
    directory made by the caller (suite.driver.report.new_run_dir) and named for the time and DIR."""
    from suite.driver.report import slug

    return Path("results") / (slug(meta["gpu"]) if meta.get("gpu") else "cpu")


def stale_plots(out: Path, rows: list[dict], written: list[Path]) -> list[Path]:
    """The plot files in ``out`` that suite.driver.report writes for ``rows``' problems (``<problem>.png``, its pages
    ``<problem>-<n>.png``, ``<problem>-ratio-vs-m.png``, ``<problem>-depth.png``) but did not write this time: an
    earlier rendering's, e.g. one file since split into pages."""
    names = "|".join(re.escape(p) for p in dict.fromkeys(r["problem"] for r in rows))
    plot = re.compile(rf"^({names})(-\d+|-ratio-vs-m|-depth)?\.png$")
    keep = {p.name for p in written}
    return sorted(p for p in out.iterdir() if plot.match(p.name) and p.name not in keep and p.is_file())


def main(argv=None) -> int:
    p = _Parser(
        prog="python -m suite.report",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("dir", type=path_argument, metavar="DIR", help="a results directory, or its results.json")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=path_argument, metavar="OUT", help=OUT_HELP)
    where.add_argument("--in-place", action="store_true", help=IN_PLACE_HELP)
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--verbose", action="store_true", help="the full tables even when nothing was timed")
    args = p.parse_args(argv)
    if args.overwrite and not args.out:
        p.error("--overwrite goes with --out")

    from suite.cli_exits import reader_may_leave
    from suite.driver import report, results_io

    try:
        meta, rows, file = load(args.dir)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = file.parent if args.in_place else args.out or default_out(meta)
    if why := report.check_out(out):
        print(f"error: {'--out' if args.out else out}: {why}", file=sys.stderr)
        return 2
    in_place = out.resolve() == file.parent.resolve()
    if args.out and not in_place and results_io.holds_results(out):
        if not args.overwrite:
            print(f"error: --out: {out} holds a run's results (--overwrite replaces them)", file=sys.stderr)
            return 2
        try:
            results_io.clear_results(out)
        except OSError as e:
            print(f"error: --out: could not remove {e.filename}: {e.strerror or e}", file=sys.stderr)
            return 1
    removed: list[Path] = []
    try:
        if not (args.in_place or args.out):
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            out = report.new_run_dir(out, f"{stamp}-report-{report.slug(file.parent.resolve().name)}")
        written, unwritten = report.write(rows, meta, out, record=not in_place), None
        if in_place:
            for path in stale_plots(out, rows, written):
                path.unlink()
                removed.append(path)
    except report.WriteError as e:
        written, unwritten = e.written, e
    except OSError as e:  # a stale plot that could not be removed
        unwritten = f"could not remove {e.filename}: {e.strerror or e}"
    with reader_may_leave():  # | head: the files are written, the status is theirs
        print(report.terminal(rows, WIDTH, verbose=args.verbose))
        if written:
            print(
                f"\nwrote {', '.join(p.name for p in written)} in {out}/"
                + (" (results.json as it was)" if in_place else "")
            )
        if removed:
            print(f"removed {', '.join(p.name for p in removed)} (an earlier rendering's, not written this time)")
    if unwritten is not None:
        print(f"\nerror: {unwritten}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
