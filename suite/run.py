"""python -m suite.run: validate and time every variant this machine can run, print the tables, write results/.

Examples:
  python -m suite.run                                   # everything, default sizes
  python -m suite.run --problem gemm --size 8192        # one problem, one size (its default dtype: --dtype for more)
  python -m suite.run --problem gemm --size 96x80x64    # without a GPU: a size the interpreter runs in seconds
  python -m suite.run --problem vector --backend ptx --stages 1 3
  python -m suite.run --list                            # the registered variants and their gates
  python -m suite.run --problem gemm --size 4096 --profile   # and why: one more launch per row under ncu
  python -m suite.run --compare OLD NEW                 # two runs (directories or results.json): a gate
  python -m suite.run ... --out DIR --resume            # finish a run that was cut (a time limit, Ctrl-C)

Exit status:
  0    every row valid (and, with --compare, no row failed the gate)
  1    a row failed (validation, build or launch), a regression (--compare), or the results could not be written
       where asked (they are then written to a directory under the system temp dir, which is named)
  2    a usage or input error, found before any work: a bad flag or value, an --out that cannot be written (or that
       another run holds, or that holds a run without --overwrite), a file that is not a readable results.json,
       a --resume of a run of other arguments, software or GPU
  3    an internal error: one line (--debug shows the traceback)
  130  interrupted (Ctrl-C): the rows measured so far are in results.json, with meta.complete false
  141  the reader of the output left early (| head), as for any command SIGPIPE ends; --compare keeps its 0 or 1
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import sys
import textwrap
from pathlib import Path

from suite.driver import timing
from suite.driver.results_io import path_argument


def _problem_choices() -> dict[str, tuple[str, ...]]:
    """The values --problem, --dtype and --shapes take: the problems' own (suite.problems.PROBLEMS). Read after the
    cheap checks (suite.problems imports torch), so that --compare, a bad --out or a bad shard count answer at once."""
    from suite.problems import PROBLEMS

    return {
        "--problem": tuple(PROBLEMS),
        "--dtype": tuple(dict.fromkeys(d for p in PROBLEMS.values() for d in p.dtypes)),
        "--shapes": tuple(dict.fromkeys(s for p in PROBLEMS.values() for s in p.shape_sets)),
    }


def _unknown_choice(args: argparse.Namespace) -> tuple[str, str] | None:
    """(option, message) for the first value of --problem, --dtype or --shapes that no problem has, or None."""
    for flag, known in _problem_choices().items():
        for value in getattr(args, flag[2:]) or ():
            if value not in known:
                return flag, f"invalid choice: {value!r} (choose from {', '.join(map(repr, known))})"
    return None


MAX_SHARDS = 10_000  # more shards than this is no plan anyone runs (and assigning jobs to them is not free)
WIDTH = 160  # terminal columns everything printed fits in (table.md and the CSV keep the full detail)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line naming the flag and the rule (argparse would print the usage first), exit 2
        self.exit(2, f"error: {message} (see python -m suite.run --help)\n")


def _stage_count(text: str) -> int:
    try:
        stages = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: stage counts are whole numbers >= 1") from None
    if stages < 1:
        raise argparse.ArgumentTypeError(f"{text}: stage counts must be >= 1")
    return stages


def _shard(text: str) -> tuple[int, int]:
    from suite.driver.plan import parse_shard

    try:
        return parse_shard(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _usage_error(flag: str, message: str) -> int:
    print(f"error: {flag}: {message}", file=sys.stderr)
    return 2


def _say(text: str) -> None:
    """A message on stderr, wrapped to the terminal width."""
    print(textwrap.fill(text, WIDTH), file=sys.stderr)


def check_out(out: Path) -> str | None:
    """Why the results cannot be written to ``out``, or None (suite.driver.results_io.check_out: symlinks resolved, a
    file is created and removed there, not guessed from mode bits)."""
    from suite.driver.results_io import check_out as check

    return check(out)


def parse_args(argv=None) -> argparse.Namespace:
    p = _Parser(
        prog="python -m suite.run",
        description="Triton vs hand-written PTX, per software-pipeline depth: validate against torch, time, tabulate.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument(
        "--problem",
        nargs="+",
        action="extend",
        metavar="PROBLEM",
        help="problems to run (default: all; see --list)",
    )
    p.add_argument(
        "--backend",
        nargs="+",
        action="extend",
        help="backends to run, e.g. torch triton ptx (default: all; see --list)",
    )
    p.add_argument(
        "--stages",
        nargs="+",
        action="extend",
        type=_stage_count,
        metavar="S",
        help="stage counts to sweep (default: each variant's own; unstaged variants always run)",
    )
    p.add_argument(
        "--variant",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="only these variants, by name or backend:name (see --list); the ceiling of each problem that runs is "
        "kept. This and the other list options add up when repeated (--variant A --variant B is --variant A B)",
    )
    p.add_argument(
        "--size",
        nargs="+",
        action="extend",
        metavar="SIZE",
        help="problem sizes: vector n ('268435456' or '2^28'), gemm 'M' (a cube) or 'MxNxK', attention "
        "'BxHQxHKVxSQxSKVxD', '-causal' appended for a causal mask. Needs a single --problem. Without a GPU, limited "
        "to what the interpreter runs in seconds (vector n <= 2^24, gemm M*N*K <= 2^28, attention "
        "4*B*HQ*SQ*SKV*D <= 2^30)",
    )
    p.add_argument(
        "--shapes",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="named shape sets instead of the default sizes (gemm: square, llm: Llama-3 8B/70B "
        "projections at decode and prefill M, long-k: fewer output tiles than SMs, sweep: --sweep-count shapes drawn "
        "with --sweep-seed from public model dimensions; attention: attn-8b, attn-70b, attn-d64: Llama-3 8B's and "
        "70B's heads and a d = 64 model's at 512 to 16k tokens)",
    )
    p.add_argument(
        "--sweep-seed",
        type=int,
        default=None,
        metavar="S",
        help="with --shapes sweep: the seed of the shapes drawn (default 0); the same seed draws the same shapes "
        "everywhere",
    )
    p.add_argument(
        "--sweep-count",
        type=int,
        default=None,
        metavar="N",
        help="with --shapes sweep: how many shapes are drawn (default 48)",
    )
    p.add_argument(
        "--dtype",
        nargs="+",
        action="extend",
        metavar="DTYPE",
        help="only these input types (vector: fp32; gemm: fp16, bf16, fp8e4m3; attention: bf16, fp16). Default: every "
        "type at the default sizes; the problem's first type alone with --size or --shapes",
    )
    p.add_argument(
        "--out",
        type=path_argument,
        metavar="DIR",
        help="where to write table.md, results.csv, results.json and plots "
        "(default: results/<gpu>/<timestamp>/; results/cpu/<timestamp>/ without a GPU)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="let --out be a directory that holds an earlier run: its results and plots are removed first",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --out DIR holding a run that was cut (its results.json's meta.complete false): run only the jobs "
        "it did not finish, with the same arguments, software and GPU, and write both together",
    )
    p.add_argument("--quick", action="store_true", help="a short smoke run: smaller sizes, fewer repetitions")
    p.add_argument("--seed", type=int, default=0, help="base seed; every validation draws a fresh one from it")
    p.add_argument(
        "--list",
        action="store_true",
        help="print the registered variants with their gates and exit (--problem, --backend and --variant narrow it)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE (a dotted name or a .py file) before reading the registry: variants defined "
        "outside the suite (repeatable; installed 'pipesuite.variants' entry points load anyway)",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("OLD", "NEW"),
        type=path_argument,
        help="compare two runs (their directories or results.json files) row by row (SAME / FASTER / "
        "SLOWER / NOISY / MISSING / INVALID / STILL INVALID / NOT RUN / NEW) and exit: 0 when no row fails the gate, "
        "1 when one is SLOWER, MISSING, INVALID or NOISY with a slower median, 2 on bad input, on a file without "
        "its metadata (GPU, plan, software versions) or on runs of different GPU models or major software versions",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --compare: compare files that do not record their GPU, plan or software versions (said above the "
        "verdicts)",
    )
    p.add_argument(
        "--allow-different",
        action="store_true",
        help="with --compare: compare runs of different GPU models or major software versions anyway "
        "(said above the verdicts)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="after timing, one more launch of every timed row under Nsight Compute (ncu, in a separate "
        "process; timings are never taken under the profiler): SM and DRAM throughput, occupancy, "
        "tensor pipe, warps per scheduler, top stalls, shared-memory bank conflicts, and a 'why' "
        "cell per row",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout instead of tables")
    p.add_argument("--debug", action="store_true", help="an internal error shows its traceback (exit 3 either way)")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress line on stderr (it is drawn only on a terminal)"
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="the full tables on the terminal even when nothing is timed (without a GPU the terminal "
        "shows a compact summary: per problem and backend, rows valid, built and failed, the SASS "
        "classes found, and every failure)",
    )
    p.add_argument(
        "--gpus",
        metavar="all|I,J",
        help="one worker process per GPU ('all', or torch's indices, e.g. 0,1), the plan's (problem, dtype, "
        "shape) jobs spread among them; each job times its own ceiling on its GPU, each row records "
        "the GPU it ran on",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="run the I-th of N deterministic parts of the plan (same plan, same order on every host; "
        "default in a Slurm job array: SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT); combine the "
        "parts with python -m suite.merge",
    )
    p.add_argument(
        "--timer",
        choices=timing.TIMERS,
        default="burst",
        help="burst (default): sample each row in bursts of 10 ms of calls, each begun after a rest and once the GPU "
        "reports no power-cap or thermal slowdown, until its median is known to +-0.25%% (95%% CI) or 8 bursts; "
        "adaptive: the same stop rule on sustained back-to-back load (the clocks at the power cap; heavy rows vary "
        "by several percent run to run), 375 ms of samples at most; fixed: 200 ms of samples, 400 ms more when the "
        "spread is above 1%%",
    )
    p.add_argument(
        "--flush",
        choices=timing.FLUSHES,
        default=None,
        help="how the L2 is emptied before each sample: read (the burst timer's default: a sum over a 256 MB buffer, "
        "nothing of the kernel's data and nothing dirty left, as a weight streaming through a model's layer finds "
        "the L2; burst timer only) or write (the other timers' default and do_bench's: zeros over 256 MB, which "
        "leaves the L2 full of dirty lines that a memory-bound kernel's reads then evict to DRAM, a large part of a "
        "decode GEMM's time)",
    )
    p.add_argument(
        "--launch",
        choices=timing.LAUNCHES,
        default="graph",
        help="graph (default): time each row's call replayed from a CUDA graph, the host's Python launch path left "
        "out (its cost per call is recorded as host_enqueue_us); eager: time the calls as Python makes them",
    )
    args = p.parse_args(argv)
    for name in ("problem", "backend", "stages", "variant", "size", "shapes", "dtype"):
        if values := getattr(args, name):  # a value given twice (the flag repeated) counts once
            setattr(args, name, list(dict.fromkeys(values)))
    if args.size and (not args.problem or len(args.problem) != 1):
        p.error("--size needs exactly one --problem (sizes mean different things per problem)")
    if args.allow_different and not args.compare:
        p.error("--allow-different goes with --compare")
    if args.force and not args.compare:
        p.error("--force goes with --compare")
    return args


# What a --gpus worker imports while it waits for its GPU (suite.driver.workers.prestart): the driver, the kernel
# modules it reaches and torch, none of which touches CUDA at import
WORKER_PRELOAD = ("suite.driver.bench", "suite.variants")


def command_line(argv: list[str] | tuple[str, ...]) -> str:
    """The run's command as meta.command records it: quoted as a shell reads it back (a variant name has spaces), so
    the record's command runs again as written."""
    return "python -m suite.run " + shlex.join(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from suite.cli_exits import guarded

    return guarded(lambda: _with_workers(args, argv), args.debug, "interrupted")


def _with_workers(args: argparse.Namespace, argv) -> int:
    prestarted = []
    if args.gpus and not (args.list or args.compare):
        # the workers' interpreters and imports start now, beside this process's own (seconds of each --gpus run)
        from suite.driver import workers

        prestarted = workers.prestart(workers.gpu_count_hint(args.gpus), WORKER_PRELOAD)
    try:
        return _main(args, argv, prestarted)
    except Exception as e:
        # A registration that names a kernel that does not import is the user's to fix. Only suite.registration
        # raises KernelLoadError, so it is loaded whenever one is raised; importing it here would import torch
        # before --compare and the early refusals, which answer without it.
        registration = sys.modules.get("suite.registration")
        if registration is not None and isinstance(e, registration.KernelLoadError):
            return _usage_error("registration", str(e))
        raise
    finally:
        if prestarted:
            workers.shutdown(prestarted)  # those run_jobs did not take, or all of them after an early exit


def _main(args: argparse.Namespace, argv, prestarted: list) -> int:
    if args.compare:  # no torch, no plugins: the files alone
        from suite.cli_exits import reader_may_leave
        from suite.driver.compare import CompareError, compare, exit_code, summary

        try:
            table, results = compare(*args.compare, allow_different=args.allow_different, force=args.force)
        except CompareError as e:
            return _usage_error("--compare", str(e))
        with reader_may_leave():  # | head keeps the gate's verdict
            print(table)
            print(summary(results))
        return exit_code(results)
    if args.out is not None and not args.list:  # before any work: a bad --out is known at once
        if why := check_out(args.out):
            return _usage_error("--out", why)
        if args.resume and args.overwrite:
            return _usage_error("--resume", "keeps the run in --out; --overwrite would remove it: pass one of them")
        if args.resume and (why := _resumable(args.out)[1]):
            return _usage_error("--resume", why)
        if not args.overwrite and not args.resume and _holds_results(args.out):
            return _usage_error("--out", f"{args.out} holds an earlier run's results (--overwrite replaces them)")
    elif args.resume and not args.list:
        return _usage_error("--resume", "needs --out DIR: the directory of the run to finish")
    elif args.overwrite and not args.list:
        return _usage_error("--overwrite", "goes with --out DIR: without it each run writes a new directory")
    if unknown := _unknown_choice(args):
        return _usage_error(*unknown)
    import torch

    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        # Must happen before any Triton kernel module is imported: triton.jit reads it when it decorates.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ.get("TRITON_INTERPRET") == "1":
        from suite.triton import interpreter_compat

        interpreter_compat.install()  # older interpreters under NumPy >= 2.5 (see that module)
    from suite.plugins import PluginError, load_plugins

    try:  # installed entry points, then --plugin, each once; a failing one is one line, exit 2
        load_plugins(args.plugin)
    except PluginError as e:
        return _usage_error(e.source, str(e))
    if args.list:
        from suite.driver.report import variant_table

        print(variant_table(problems=args.problem, backends=args.backend, names=args.variant))
        return 0
    default_out = None  # results/<gpu>/ (a directory per run is made in it at the end): checked now, not after the run
    if args.out is None:
        from suite.driver.report import slug

        default_out = Path("results") / (slug(torch.cuda.get_device_name()) if on_gpu else "cpu")
        if why := check_out(default_out):
            return _usage_error("results/ (the default output; --out DIR writes elsewhere)", why)

    from suite.driver import report
    from suite.driver.bench import OptionError, Options, check_options
    from suite.problems import PROBLEMS

    problems = tuple(args.problem or PROBLEMS)
    if args.dtype:
        problems = tuple(p for p in problems if set(args.dtype) & set(PROBLEMS[p].dtypes))
        if not problems:
            taken = ", ".join(args.dtype)
            return _usage_error(f"--dtype {' '.join(args.dtype)}", f"no selected problem takes {taken}")
    if args.shapes:
        problems = tuple(p for p in problems if set(args.shapes) & set(PROBLEMS[p].shape_sets))
        if not problems:
            return _usage_error(f"--shapes {' '.join(args.shapes)}", "no selected problem has these shape sets")
        if args.size:
            return _usage_error("--shapes", "give named shape sets or --size, not both")
    if args.backend:
        from suite.registry import variants

        known = {v.backend for v in variants()}
        unknown = [b for b in args.backend if b not in known]
        if unknown:
            return _usage_error(
                "--backend", f"unknown {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}"
            )
    if args.variant:
        from suite.driver.bench import variant_names

        known = variant_names()
        unknown = [n for n in args.variant if n not in known]
        if unknown:
            import difflib

            folded = {k.lower(): k for k in known}
            close = [folded[c] for n in unknown for c in difflib.get_close_matches(n.lower(), folded, n=1)]
            close = list(dict.fromkeys(close))  # two typos of one name suggest it once
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            return _usage_error(
                "--variant",
                f"unknown {', '.join(map(repr, unknown))}{hint} (python -m suite.run --list shows the variants)",
            )
    for flag, value in (("--sweep-seed", args.sweep_seed), ("--sweep-count", args.sweep_count)):
        if value is not None and "sweep" not in (args.shapes or ()):
            return _usage_error(flag, "is only valid with --shapes sweep")
    from suite.model_shapes import DEFAULT_COUNT, DEFAULT_SEED, sweep_shapes

    sweep = {"sweep_seed": DEFAULT_SEED if args.sweep_seed is None else args.sweep_seed}
    sweep["sweep_count"] = DEFAULT_COUNT if args.sweep_count is None else args.sweep_count
    if "sweep" in (args.shapes or ()):
        try:
            sweep_shapes(sweep["sweep_seed"], sweep["sweep_count"])
        except ValueError as e:
            flag = "--sweep-seed" if "seed" in str(e) else "--sweep-count"
            return _usage_error(flag, str(e))
    sizes = {}
    if args.flush == "read" and args.timer != "burst":
        return _usage_error(
            f"--flush {args.flush}",
            f"only the burst timer flushes by a read (--timer {args.timer} "
            "samples with do_bench, whose flush is a write)",
        )
    if args.size:
        try:
            sizes[problems[0]] = tuple(PROBLEMS[problems[0]].parse_size(s) for s in args.size)
        except ValueError as e:
            return _usage_error("--size", str(e))
    opts = Options(
        problems=problems,
        backends=tuple(args.backend) if args.backend else None,
        variants=tuple(args.variant) if args.variant else None,
        stages=tuple(args.stages) if args.stages else None,
        sizes=sizes,
        quick=args.quick,
        seed=args.seed,
        dtypes=tuple(args.dtype) if args.dtype else None,
        shape_sets=tuple(args.shapes) if args.shapes else None,
        **sweep,
        timer=args.timer,
        launch=args.launch,
        flush=args.flush,  # None: the timer's own (Options resolves it)
    )
    try:
        check_options(opts, on_gpu)
    except OptionError as e:
        flag = {
            "stages": "--stages " + " ".join(map(str, args.stages or ())),
            "sizes": "--size " + " ".join(args.size or ()),
        }.get(e.option, "--problem / --backend / --variant / --stages")  # "variants": all
        return _usage_error(flag, str(e))

    from suite.driver import sweep

    try:
        shard = sweep.resolve_shard(args.shard, os.environ)
    except ValueError as e:
        return _usage_error("SLURM_ARRAY_TASK_*", str(e))
    if shard is not None and shard[1] > MAX_SHARDS:
        where = "--shard" if args.shard else "SLURM_ARRAY_TASK_COUNT"
        return _usage_error(where, f"{shard[1]} shards: at most {MAX_SHARDS} (a shard per job is the most that helps)")
    gpus = None
    if args.gpus:
        try:
            gpus = sweep.resolve_gpus(args.gpus, on_gpu)
        except ValueError as e:
            return _usage_error(f"--gpus {args.gpus}", str(e))

    from suite.driver import results_io

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    # what this run creates, innermost first: removed again if the run ends before writing anything in it
    made = _missing(args.out or default_out)
    try:  # a directory of this run's own (another run of the same second gets another), held until the run ends
        out = args.out or report.new_run_dir(default_out, stamp)
        if args.out is None:
            made.insert(0, out)
        lock = results_io.lock_out(out)
    except results_io.Busy as e:
        return _usage_error("--out", f"{e} (wait for it, or choose another --out)")
    except OSError as e:
        return _usage_error("--out", f"cannot create {args.out or default_out} ({getattr(e, 'strerror', None) or e})")
    try:
        resume = None
        if args.resume:  # checked again under the lock: another run may have finished it since
            resume, why = _resumable(out)
            if why:
                return _usage_error("--resume", why)
        elif _holds_results(out):  # checked again under the lock: another run may have finished there since
            if not args.overwrite:
                return _usage_error("--out", f"{out} holds an earlier run's results (--overwrite replaces them)")
            results_io.clear_results(out)
        return _run(args, argv, prestarted, opts, on_gpu, shard, gpus, out, resume)
    finally:
        os.close(lock)
        for path in made:  # a run that ended before writing anything leaves no empty directory behind
            with contextlib.suppress(OSError):
                path.rmdir()


def _missing(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, innermost first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _resumable(out: Path) -> tuple[dict | None, str | None]:
    """The run in ``out`` that --resume can finish, as read, and None; or None and why there is none."""
    from suite.driver.results_io import InputError, read_json

    file = Path(out) / "results.json"
    if not file.exists():
        return None, f"{out} holds no results.json to resume"
    try:
        data = read_json(file)
    except InputError as e:
        return None, str(e)
    meta = data.get("meta") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(data.get("rows"), list) or not isinstance(meta.get("plan"), dict):
        return None, f"{file}: not a pipesuite run that records its plan (nothing to resume from)"
    if meta.get("complete") is not False:
        return None, f"{file}: that run is complete (meta.complete is not false): nothing to resume"
    return data, None


def _holds_results(out: Path) -> bool:
    from suite.driver.results_io import holds_results

    return holds_results(out)


def _run(args, argv, prestarted, opts, on_gpu, shard, gpus, out: Path, resume: dict | None = None) -> int:
    """The run itself into ``out`` (checked and held): results.json written after each job (meta.complete false)
    and whole at the end; on Ctrl-C what was measured is kept (exit 130); when the final write fails, the results go
    to a directory under the system temp dir, named (exit 1). ``resume``: the record in ``out`` of the cut run this
    one finishes (its finished jobs kept, the rest run)."""
    from suite.driver import meta as run_meta
    from suite.driver import report, results_io, sweep

    if not on_gpu:
        _say(
            "No CUDA GPU here: Triton kernels run in the Triton interpreter at small sizes and are validated "
            "against torch; PTX kernels are compiled for sm_90 and their SASS reported, not run. Nothing is timed."
            + (
                " --shapes and --quick pick GPU sizes: a problem without --size runs its small CPU sizes instead."
                if opts.shape_sets or opts.quick
                else ""
            )
        )
    command = command_line(argv if argv is not None else sys.argv[1:])
    phases = sweep.Phases(since_start=True)
    with phases("meta"):
        meta = run_meta.collect(on_gpu)
        meta["gpu_state_before"] = run_meta.gpu_state() if on_gpu else {}
    if resume is not None:
        # every row is compared with ceilings timed in its own job, so the two parts are one run only on the same
        # software and GPU model (suite.merge's rule for shards)
        was = resume["meta"]
        if differ := [k for k in ("gpu", *results_io.SOFTWARE) if was.get(k) != meta.get(k)]:
            key = differ[0]
            return _usage_error(
                "--resume", f"the cut run had {key} {was.get(key)}, this one {meta.get(key)}: the same is needed"
            )
        # its GPU too: the kept rows ran there (each row also names it, gpu_uuid), and meta.gpus lists this run only
        earlier = {k: was.get(k) for k in ("date", "host", "gpu_id", "command", "phase_seconds")}
        meta["resumed_from"] = [*(was.get("resumed_from") or []), {**earlier, "rows": len(resume["rows"])}]
    so_far: list[dict] = []

    def on_rows(rows: list[dict]) -> None:  # after each job: what a crash or Ctrl-C would otherwise lose
        so_far[:] = rows
        with contextlib.suppress(OSError):  # the final write tries again, and falls back
            results_io.write_record(out, rows, {**meta, "command": command}, complete=False)

    try:
        rows, run_info = sweep.execute(
            opts,
            on_gpu,
            gpus=gpus,
            prestarted=prestarted,
            shard=shard,
            plugins=tuple(args.plugin or ()),
            progress=not args.no_progress,
            phases=phases,
            on_rows=on_rows,
            on_plan=meta.update,  # a cut run's results.json names its plan: compare and merge can read it
            resume=resume,
        )
    except sweep.ResumeError as e:
        return _usage_error("--resume", str(e))
    except KeyboardInterrupt as e:
        rows = list(getattr(e, "rows", None) or so_far)  # the driver's own rows when it attaches them
        if resume is not None and "plan" not in meta:  # cut before the plan was built: the record is as it was
            print(f"\ninterrupted before any job: {out} holds the cut run as it was", file=sys.stderr)
            return 130
        meta["command"] = command
        try:
            where = results_io.write_record(out, rows, meta, complete=False)
        except OSError:
            where = results_io.write_record(results_io.fallback_dir("interrupted"), rows, meta, complete=False)
        print(
            f"\ninterrupted: {len(rows)} row(s) measured so far saved in {where} (meta.complete false)", file=sys.stderr
        )
        return 130
    meta.update(run_info)
    meta["gpu_state_after"] = run_meta.gpu_state() if on_gpu else {}
    from suite.driver import roofline

    # each row against its shape's bound on this GPU, its probes flushed as the rows were; a probe that fails (out of
    # memory, a ceiling that refuses) costs the roofline columns, never the run's report
    try:
        meta["roofline"] = roofline.annotate(rows, on_gpu, opts.flush)
    except Exception as e:  # noqa: BLE001 - the rows are measured; say why the bound is missing and write them
        meta["roofline"] = {
            "note": f"not probed: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        }
        print(
            f"warning: the roofline was not probed ({type(e).__name__}); the rows are written without it",
            file=sys.stderr,
        )
    if args.profile:  # after every timing, in separate processes
        from suite.driver import profile

        try:
            meta["profile"] = profile.add_profiles(
                rows, on_gpu, seed=args.seed, progress=not args.no_progress, plugins=tuple(args.plugin or ())
            )
        except profile.Unavailable as e:
            meta["profile"] = f"not taken: {e}"
            print(profile.notice(e, WIDTH), file=sys.stderr)
    meta["command"] = command
    meta["complete"] = True

    with phases("reports"):
        try:  # files whole or absent
            written, unwritten = report.write(rows, meta, out), None
        except report.WriteError as e:
            written, unwritten = e.written, e
    if unwritten is None:
        try:
            sweep.record_phases(out, meta, phases)
        except OSError as e:
            unwritten = report.WriteError(out, written, [("results.json's phase_seconds", e)])
    fallback = None
    if unwritten is not None:  # the results go somewhere rather than nowhere
        try:
            fallback = results_io.fallback_dir("results")
            report.write(rows, meta, fallback)
            fallback = f"the results were written to {fallback}/ instead"
        except OSError as e:
            fallback = f"the fallback under {fallback or 'the temp dir'} failed too: {e}"
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    else:
        print(report.terminal(rows, WIDTH, verbose=args.verbose))
        if written:
            print(f"\nwrote {', '.join(p.name for p in written)} in {out}/")
    for why in report.missing_plots(rows, on_gpu):
        _say(why)
    if unwritten is not None:
        print(f"\nerror: {unwritten}\n{fallback}", file=sys.stderr)
    closing = report.failure_summary(rows)  # build failures, invalid rows... each counted apart
    if closing:
        print(f"\n{closing}", file=sys.stderr)
    return 1 if unwritten is not None or closing else 0


if __name__ == "__main__":
    sys.exit(main())
