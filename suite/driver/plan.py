"""The plan of a run: its independent jobs in a fixed order, the plan's identity, and its shards.

A job is one (problem, dtype, shape) group: every row of the sweep at that dtype and shape, with the ceiling their
ratios are taken against. A job times its own ceiling, interleaved with its rows, so it can run on any GPU, in any
process, on any host, and each ratio still compares two numbers taken on one GPU in one stretch of time.

What runs: ``Options`` (the CLI's selection and timer) select (problem, variant, stage counts) through the registry
(``selected``, refused before any work by ``check_options`` when they select nothing meaningful), then
(problem, dtype, shape) groups (``plan_groups``), then the jobs (``build``).

The plan depends only on the options and the registry (never on the GPU or the host), so ``--shard I/N`` picks the
same jobs everywhere. Its identity (``Plan.id``) is a hash of the jobs and of the options that change what is
measured; suite.merge refuses to combine results of different plans.

Shards: jobs are dealt to N shards by a deterministic longest-first rule on their estimated cost (rows that run count
1, a row that only says a dtype is not implemented 0.05, the ceiling 1), ties to the lower shard; each shard runs its
jobs in plan order. ``shard_from_env`` reads a Slurm job array's task (SLURM_ARRAY_TASK_ID, _COUNT, _MIN, _STEP).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from suite import model_shapes
from suite.driver import timing
from suite.driver.rows import blank_row  # noqa: F401  (suite.merge reads it here)
from suite.problems import PROBLEMS, Problem
from suite.registry import Variant, variants


@dataclass
class Options:
    problems: tuple[str, ...] = tuple(PROBLEMS)
    backends: tuple[str, ...] | None = None  # None: all
    variants: tuple[str, ...] | None = None  # names or backend:name; None: all (ceilings always run)
    stages: tuple[int, ...] | None = None  # None: each variant's own sweep
    sizes: dict[str, tuple] = field(default_factory=dict)  # problem -> sizes; missing: the problem's defaults
    dtypes: tuple[str, ...] | None = None  # dtype names (suite.problems.DType); None: every dtype of each problem
    shape_sets: tuple[str, ...] | None = None  # --shapes: named sets (Problem.shape_sets) instead of the defaults
    # a shape set drawn when the plan is made (a Problem.shape_sets function: the GEMM's sweep) takes these
    sweep_seed: int = model_shapes.DEFAULT_SEED
    sweep_count: int = model_shapes.DEFAULT_COUNT
    quick: bool = False
    seed: int = 0
    warmup_ms: float = 25.0
    rep_ms: float = 200.0  # the fixed timer's budget (a quarter with --quick)
    timer: str = "burst"  # suite.driver.timing.TIMERS: "burst", "adaptive" (sustained) or "fixed" (rep_ms of samples)
    launch: str = "graph"  # timing.LAUNCHES: the samples time a CUDA graph's replay of one call, or the call itself
    # timing.FLUSHES: the L2 emptied by a read (the burst timer's default) or a write (do_bench's, the other
    # timers'); None: the timer's own (timing.default_flush)
    flush: str | None = None

    def __post_init__(self):
        if self.flush is None:
            self.flush = timing.default_flush(self.timer)


def variant_names() -> set[str]:
    """Every name a variant answers to on the command line: its name and backend:name."""
    return {v.name for v in variants()} | {v.label for v in variants()}


def every_stage(v: Variant) -> tuple:
    """The depths ``v`` sweeps at any of its dtypes, in order (the default dtype's first)."""
    every = dict.fromkeys(v.stages)
    for dtype in v.dtypes:
        every.update(dict.fromkeys(v.stages_for(dtype)))
    return tuple(every)


def selected(opts: Options) -> list[tuple[Problem, Variant, tuple]]:
    """(problem, variant, stage counts) for everything the options select. A problem runs when the filters (backend,
    variant, stages) pick at least one of its variants; its ceiling then always runs too, whatever the filters say,
    so every row has its % column. A problem none of whose variants the filters pick does not run at all."""
    out = []
    for name in opts.problems:
        picked = []
        for v in variants(name):
            if opts.backends and v.backend not in opts.backends:
                continue
            if opts.variants and not v.is_named(opts.variants):
                continue
            stages = v.stages
            if opts.stages is not None and stages != (None,):
                # any dtype's depths: a depth only one dtype sweeps (fp8's 4 stages of the Gluon GEMM) is picked
                # too, and plan_groups keeps each dtype's own
                stages = tuple(s for s in every_stage(v) if s in opts.stages)
                if not stages:
                    continue
            picked.append((v, stages))
        if picked:
            chosen = dict(picked)
            out += [(PROBLEMS[name], v, chosen.get(v, v.stages)) for v in variants(name) if v in chosen or v.ceiling]
    return out


class OptionError(ValueError):
    """Options that select nothing, or sizes this machine should not attempt; ``option`` names the Options field."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def check_options(opts: Options, on_gpu: bool) -> list[tuple[Problem, Variant, tuple]]:
    """Refuse, before any work, options that cannot give a meaningful run; return what they select.

    - the filters must pick at least one variant;
    - every requested stage count must be swept by at least one variant the other filters pick;
    - without a GPU, every requested size must be within the problem's CPU limit (``Problem.cpu_limit``): the Triton
      interpreter is tens of thousands of times slower than the GPU.
    """
    plan = selected(opts)
    if not plan:
        said = f"problem {', '.join(opts.problems)}" + (
            f", backend {', '.join(opts.backends)}" if opts.backends else ""
        )
        for name in opts.variants or ():  # where each named variant is registered
            found = sorted(
                {f"{v.problem} {v.backend}:{v.name}" for p in PROBLEMS for v in variants(p) if v.is_named((name,))}
            )
            said += f"; {name!r} is registered as {' and '.join(found)}"
        raise OptionError("variants", f"no registered variant matches these filters together ({said}; see --list)")
    if opts.stages is not None:
        unstaged = selected(replace(opts, stages=None))
        swept = {s for _, v, _ in unstaged for s in every_stage(v) if s is not None}
        missing = [s for s in opts.stages if s not in swept]
        if missing:
            raise OptionError(
                "stages",
                f"no selected variant sweeps {', '.join(map(str, missing))} stage(s); "
                f"they sweep {', '.join(map(str, sorted(swept))) or 'none'}",
            )
    if not on_gpu:
        for name, sizes in opts.sizes.items():
            problem = PROBLEMS[name]
            for size in sizes:
                if problem.work(size) > problem.cpu_max_work:
                    raise OptionError(
                        "sizes",
                        f"{problem.shape(size)} is too large for a CPU run (the Triton "
                        f"interpreter): {name} needs {problem.cpu_limit} without a GPU",
                    )
    return plan


def dtypes_for(problem: Problem, opts: Options) -> tuple[str, ...]:
    """The problem's dtypes the options select: those --dtype names; without it, every dtype in a default run (each
    at its own default sizes), and the problem's default dtype alone at named shape sets or explicit sizes (another
    dtype is one --dtype away)."""
    if opts.dtypes is None:
        return (problem.default_dtype,) if opts.shape_sets or problem.name in opts.sizes else tuple(problem.dtypes)
    return tuple(d for d in problem.dtypes if d in opts.dtypes)


def sizes_for(problem: Problem, opts: Options, on_gpu: bool, dtype: str | None = None) -> tuple:
    """(size, shape set) pairs: explicit sizes (no set: every variant runs them), the named sets asked for, or the
    default run's sizes for ``dtype``, each tagged with the first set it belongs to."""

    def tagged(sizes):
        return tuple(
            (
                size,
                next(
                    (n for n, members in problem.shape_sets.items() if not callable(members) and size in members),
                    None,
                ),
            )
            for size in sizes
        )

    if problem.name in opts.sizes:
        return tuple((size, None) for size in opts.sizes[problem.name])
    if not on_gpu:
        return tuple((size, None) for size in problem.cpu_sizes)
    if opts.shape_sets:
        return tuple(
            dict.fromkeys(
                (size, name)
                for name in opts.shape_sets
                for size in problem.fits(set_members(problem, name, opts), dtype)
            )
        )
    return tagged(problem.quick_sizes if opts.quick else problem.default_sizes_for(dtype))


def set_members(problem: Problem, name: str, opts: Options) -> tuple:
    """The sizes of the problem's shape set ``name``: its list, or for a set drawn when the plan is made (a function
    of seed and count, the GEMM's sweep) the draw of the options' --sweep-seed and --sweep-count."""
    members = problem.shape_sets.get(name, ())
    return tuple(members(opts.sweep_seed, opts.sweep_count)) if callable(members) else members


def drawn_sets(opts) -> tuple[str, ...]:
    """The shape sets the options ask for that are drawn when the plan is made (their sizes depend on the seed)."""
    return tuple(
        name
        for name in getattr(opts, "shape_sets", None) or ()
        if any(callable(PROBLEMS[p].shape_sets.get(name)) for p in opts.problems)
    )


def plan_groups(plan: list[tuple[Problem, Variant, tuple]], opts: Options, on_gpu: bool) -> list[tuple]:
    """The run as independent groups, in order: (problem, dtype, size, [(variant, stages), ...]), one per
    (problem, dtype, shape), each with its ceiling. A variant runs at a dtype it implements and at a size of a
    shape set it takes part in (Variant.shape_sets); at a dtype it does not implement it gets one row that says so
    (stages None), never silently absent."""
    groups = []
    for problem in {p.name: p for p, _, _ in plan}.values():
        chosen = [(v, stages) for p, v, stages in plan if p is problem]
        for dtype in dtypes_for(problem, opts):
            for size, shape_set in sizes_for(problem, opts, on_gpu, dtype):
                jobs = []
                for v, stages in chosen:
                    if shape_set is not None and v.shape_sets is not None and shape_set not in v.shape_sets:
                        continue
                    if dtype not in v.dtypes:
                        jobs.append((v, (None,)))
                        continue
                    at_dtype = v.stages_for(dtype)
                    if opts.stages is not None and stages != (None,):  # this dtype's depths that --stages names
                        at_dtype = tuple(s for s in at_dtype if s in stages)
                    jobs.append((v, at_dtype))
                groups.append((problem, dtype, size, [(v, s) for v, ss in jobs for s in ss]))
    return groups


NOTE_ROW_COST = 0.05  # a row that only says its variant has no build for the dtype: no validation, no timing
CEILING_COST = 1.0


@dataclass(frozen=True)
class RowSpec:
    """One row of the plan: a variant (backend:name) at a stage count. ``index`` is its position in the whole plan;
    its validation seed derives from it, so a row gets the same inputs whichever shard or GPU runs it."""

    index: int
    label: str
    stages: int | None
    runs: bool = True  # False: the variant does not implement the job's dtype (its row says so)


@dataclass(frozen=True)
class Job:
    index: int  # position in the plan
    problem: str
    dtype: str  # the dtype name (suite.problems.DType.name)
    dtype_label: str  # the rows' ``dtype`` (input -> accumulator -> output)
    size: object  # the problem's size: an int (vector) or an (M, N, K) tuple (gemm)
    shape: str
    rows: tuple[RowSpec, ...]
    ceiling: str | None  # label of the variant whose time the ratios are taken against; None: none at this dtype
    timing_seed: int  # inputs of the timing runs: shared by every job of one (problem, dtype, shape)

    @property
    def cost(self) -> float:
        return CEILING_COST + sum(1.0 if r.runs else NOTE_ROW_COST for r in self.rows)

    def describe(self) -> str:
        """One line: 'gemm fp16->fp32acc->fp16 4096x4096x4096: 45 rows' (the rows' own dtype label)."""
        return f"{self.problem} {self.dtype_label} {self.shape}: {len(self.rows)} rows"


_DESCRIBED = re.compile(r"^(?P<problem>\S+) (?P<dtype>\S+) (?P<shape>\S+): (?P<rows>\d+) rows$")


def parse_description(text: str) -> dict:
    """``Job.describe``'s line back as problem, dtype (label), shape and rows (suite.merge marks missing jobs)."""
    m = _DESCRIBED.match(text)
    if not m:
        raise ValueError(f"not a job description: {text!r}")
    return {**m.groupdict(), "rows": int(m["rows"])}


@dataclass(frozen=True)
class Plan:
    jobs: tuple[Job, ...]
    options: dict = field(default_factory=dict)  # what, besides the jobs, changes the measurement (in the id)
    # a drawn shape set's seed, count and distribution (--shapes sweep), recorded in the run's meta; {}: none
    sweep: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        """A hash of the jobs (their order, shapes, rows, seeds) and the options that change what is measured."""
        body = {
            "options": self.options,
            "jobs": [
                [
                    j.problem,
                    j.dtype,
                    j.shape,
                    j.ceiling,
                    j.timing_seed,
                    [[r.index, r.label, r.stages, r.runs] for r in j.rows],
                ]
                for j in self.jobs
            ],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def row_count(self) -> int:
        return sum(len(j.rows) for j in self.jobs)

    def shard(self, index: int, count: int) -> tuple[Job, ...]:
        """The jobs of shard ``index`` of ``count`` (1-based), in plan order."""
        owners = assign(self.jobs, count)
        return tuple(j for j in self.jobs if owners[j.index] == index)

    def meta(self) -> dict:
        """What results metadata records of the plan: its id, its size, one line per job (suite.merge uses them to
        name and mark what a partial merge lacks) and the options in its id."""
        return {
            "id": self.id,
            "jobs": len(self.jobs),
            "rows": self.row_count,
            "job_list": [j.describe() for j in self.jobs],
            "options": self.options,
            **({"sweep": self.sweep} if self.sweep else {}),
        }


def assign(jobs: tuple[Job, ...] | list[Job], count: int) -> dict[int, int]:
    """job index -> shard (1..count): longest job first to the least loaded shard, ties to the lower shard number.
    Deterministic: it depends only on the jobs' costs and order."""
    loads = [0.0] * count
    owners: dict[int, int] = {}
    for job in sorted(jobs, key=lambda j: (-j.cost, j.index)):
        shard = min(range(count), key=lambda s: (loads[s], s))
        loads[shard] += job.cost
        owners[job.index] = shard + 1
    return owners


def build(opts, on_gpu: bool) -> Plan:
    """The plan of ``opts`` (Options): one job per (problem, dtype, shape) group of ``plan_groups``, rows numbered
    in the order the unsharded run takes them. Raises OptionError as ``check_options`` does."""
    groups = plan_groups(check_options(opts, on_gpu), opts, on_gpu)
    jobs: list[Job] = []
    groups_seen = []
    row_index = 0
    for problem, dtype, size, group in groups:
        groups_seen.append(group)
        timing_seed = 10_000 + opts.seed + row_index
        ceiling = next((v.label for v, _ in group if v.ceiling and dtype in v.dtypes), None)
        rows = tuple(RowSpec(row_index + i, v.label, stages, dtype in v.dtypes) for i, (v, stages) in enumerate(group))
        row_index += len(rows)
        jobs.append(
            Job(
                len(jobs),
                problem.name,
                dtype,
                problem.dtype_of(dtype).label,
                size,
                problem.shape(size),
                rows,
                ceiling,
                timing_seed,
            )
        )
    options = plan_options(opts, on_gpu)
    if outside := plugin_source(v for job_group in groups_seen for v, _ in job_group):
        options["plugin_source"] = outside  # shards run with different plugin code are different plans
    sweep = {}
    if drawn_sets(opts):
        sweep = {"seed": opts.sweep_seed, "count": opts.sweep_count, "distribution": model_shapes.DISTRIBUTION}
    return Plan(tuple(jobs), options, sweep)


def plugin_source(variants) -> str | None:
    """A hash of the code of the variants defined outside the suite (plugins): each one's kernel module file and the
    kernel source it compiles, by file name and content (not path: shards run on other hosts); None when every
    variant is the suite's own (the plan ids of such runs are unchanged)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = set()
    for v in variants:
        module = sys.modules.get(type(v.kernel).__module__)
        for f in (getattr(module, "__file__", None), getattr(v.kernel, "source", None)):
            if isinstance(f, (str, Path)) and Path(f).is_file() and not Path(f).resolve().is_relative_to(root):
                files.add(Path(f).resolve())
    if not files:
        return None
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: (f.name, str(f))):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def plan_options(opts, on_gpu: bool) -> dict:
    """The options besides the selection that change what a row measures: they are part of the plan's identity."""
    return {
        "mode": "gpu" if on_gpu else "cpu",
        "quick": opts.quick,
        "seed": opts.seed,
        "timer": getattr(opts, "timer", "fixed"),
        "launch": getattr(opts, "launch", "eager"),
        **({"flush": opts.flush} if getattr(opts, "flush", "write") != "write" else {}),  # the old plans' ids kept
        # a drawn set's seed and count: shards and GPUs of one sweep draw the same shapes (other plans' ids kept)
        **({"sweep_seed": opts.sweep_seed, "sweep_count": opts.sweep_count} if drawn_sets(opts) else {}),
    }


# ---------------------------------------------------------------------------------------------------------------
# --shard I/N and Slurm job arrays
# ---------------------------------------------------------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """'I/N' (1 <= I <= N) -> (I, N). Raises ValueError naming the rule."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m:
        raise ValueError(f"{text!r}: a shard is I/N, e.g. 2/3 (the second of three)")
    index, count = int(m[1]), int(m[2])
    if count < 1:
        raise ValueError(f"{text!r}: N must be at least 1 (the number of shards)")
    if not 1 <= index <= count:
        raise ValueError(f"{text!r}: I must be between 1 and N (shards are numbered 1/N to N/N)")
    return index, count


SLURM_VARS = (
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
)


def shard_from_env(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """The shard of a Slurm job array task; None outside one. Slurm numbers tasks as the --array range given
    (0-2, 1-3, 1-7:2, ...): the shard is (ID - MIN) / STEP + 1 of COUNT (MIN 0 and STEP 1 when unset). Tasks that are
    not an arithmetic range (--array=1,5,7: MAX - MIN is not (COUNT - 1) x STEP) are refused: pass --shard then.
    Raises ValueError naming the variables."""
    task, count = environ.get("SLURM_ARRAY_TASK_ID"), environ.get("SLURM_ARRAY_TASK_COUNT")
    if task is None and count is None:
        return None
    if task is None or count is None:
        raise ValueError("SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT must both be set (or pass --shard I/N)")
    try:
        task_id, n = int(task), int(count)
        low = int(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
        step = int(environ.get("SLURM_ARRAY_TASK_STEP", "1"))
        high = int(environ["SLURM_ARRAY_TASK_MAX"]) if "SLURM_ARRAY_TASK_MAX" in environ else None
    except ValueError:
        raise ValueError("SLURM_ARRAY_TASK_ID, _COUNT, _MIN, _MAX and _STEP must be whole numbers") from None
    offset = task_id - low
    arithmetic = high is None or high - low == (n - 1) * step
    if n < 1 or step < 1 or not arithmetic or offset < 0 or offset % step or offset // step >= n:
        raise ValueError(
            f"SLURM_ARRAY_TASK_ID={task_id} is not one of COUNT={n} tasks from MIN={low} in steps of "
            f"{step}"
            + ("" if high is None else f" to MAX={high}")
            + f": submit the array as --array=0-{n - 1} (or pass --shard I/N)"
        )
    return offset // step + 1, n
