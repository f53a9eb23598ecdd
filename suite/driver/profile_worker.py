"""The program ncu runs for ``python -m suite.run --profile`` (suite.driver.profile): one profiled call per row.

    python -m suite.driver.profile_worker [--seed N] [--manifest PATH] PROBLEM SIZE ROW [ROW ...]

ROW is ``backend:name`` (as ``--list`` shows it) with ``@stages`` for a variant swept over stage counts, e.g.
``"ptx:128x256x32 mma.sync@4"``. For each row, in order: build the variant through the registry on one set of inputs
(a fresh output), call it twice unprofiled (compile, load the module, autotune, create library handles), then call
it once between cudaProfilerStart and cudaProfilerStop inside the NVTX range ``pipesuite#<i> <row>``. Under
``ncu --profile-from-start off --nvtx`` only that call's kernels are profiled, and each is tagged with its range.
A row that fails to build or launch is recorded in the manifest with its error; the others go on. Nothing is
printed on stdout (ncu prints its CSV there). Runs by hand too (without ncu it just launches).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

WARMUP_CALLS = 2


def parse_row(text: str) -> tuple[str, int | None]:
    """'ptx:cp.async ring@3' -> ('ptx:cp.async ring', 3); 'torch:copy_' -> ('torch:copy_', None)."""
    label, at, stages = text.rpartition("@") if "@" in text else (text, "", "")
    if ":" not in label:
        raise ValueError(f"{text!r}: a row is backend:name or backend:name@stages")
    if at:
        if not stages.isdigit() or int(stages) < 1:
            raise ValueError(f"{text!r}: the stage count after @ must be a whole number >= 1")
        return label, int(stages)
    return label, None


def _profiler(start: bool) -> None:
    """cudaProfilerStart / Stop: the window ncu --profile-from-start off profiles."""
    import torch

    if start:
        torch.cuda.profiler.start()
    else:
        torch.cuda.profiler.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.driver.profile_worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=10_000)
    p.add_argument("--manifest", type=Path, help="where to write what was launched (JSON), row by row")
    p.add_argument("--dtype", help="the problem's dtype (suite.problems.DType name; default: the problem's first)")
    p.add_argument(
        "--plugin", action="append", default=[], metavar="MODULE", help="a module to import first (as suite.run's)"
    )
    p.add_argument("problem")
    p.add_argument("size")
    p.add_argument("rows", nargs="+", metavar="ROW")
    args = p.parse_args(argv)

    from suite.plugins import PluginError, load_plugins
    from suite.problems import PROBLEMS
    from suite.registry import variants

    try:
        load_plugins(args.plugin)
    except PluginError as e:
        p.error(str(e))
    if args.problem not in PROBLEMS:
        p.error(f"unknown problem {args.problem!r}; known: {', '.join(PROBLEMS)}")
    problem = PROBLEMS[args.problem]
    try:
        size = problem.parse_size(args.size)
        rows = [parse_row(r) for r in args.rows]
    except ValueError as e:
        p.error(str(e))
    known = {v.label: v for v in variants(problem.name)}
    unknown = [label for label, _ in rows if label not in known]
    if unknown:
        p.error(f"unknown {problem.name} variant(s) {', '.join(map(repr, unknown))} (python -m suite.run --list)")

    import torch
    import torch.cuda.nvtx as nvtx

    if not torch.cuda.is_available():
        print("profile_worker: needs a CUDA GPU", file=sys.stderr)
        return 2
    inputs = problem.make_inputs(size, args.seed, torch.device("cuda"), args.dtype)
    manifest = []
    for i, (label, stages) in enumerate(rows):
        variant = known[label]
        entry = {"index": i, "label": label, "stages": stages}
        try:
            reason = variant.skip_reason()
            if reason:
                raise RuntimeError(f"skipped: {reason}")
            out = problem.make_output(inputs)
            fn = variant.factory(inputs, out, stages)
            for _ in range(WARMUP_CALLS):  # compile, load, autotune: none of these launches is profiled
                fn()
            torch.cuda.synchronize()
            info = getattr(fn, "info", None)
            entry["config"] = getattr(info, "config", "") or ""
            nvtx.range_push(f"pipesuite#{i} {label}" + ("" if stages is None else f" stages={stages}"))
            _profiler(True)
            try:
                fn()  # the one profiled call
                torch.cuda.synchronize()
            finally:
                _profiler(False)
                nvtx.range_pop()
            entry["launched"] = True
        except Exception as e:  # noqa: BLE001 - a failed row is reported, the others still run
            text = str(e).strip().splitlines()
            entry["error"] = f"{type(e).__name__}: {text[0] if text else ''}"[:200]
            print(f"profile_worker: {label} stages={stages}: {entry['error']}", file=sys.stderr)
        finally:
            fn = out = None  # free this row's output (and anything the launcher holds) before the next row:
            torch.cuda.empty_cache()  # ncu saves and restores the device memory allocated, per replay pass
        manifest.append(entry)
        if args.manifest:
            args.manifest.write_text(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
