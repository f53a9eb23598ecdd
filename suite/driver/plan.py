"""The plan of a run: its independent jobs in a fixed order, the plan's identity, and its shards.

A job is one (problem, dtype, shape) group: every row of the sweep at that dtype and shape, with the ceiling their
ratios are taken against. A job times its own ceiling, interleaved with its rows, so it can run on any GPU, in any
process, on any host, and each ratio still compares two numbers taken on one GPU in one stretch of time.

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
from dataclasses import dataclass, field

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
    """The plan of ``opts`` (suite.driver.bench.Options): one job per (problem, dtype, shape) group of
    bench.plan_groups, rows numbered in the order the unsharded run takes them. Raises bench.OptionError as
    bench.check_options does."""
    from suite.driver import bench

    groups = bench.plan_groups(bench.check_options(opts, on_gpu), opts, on_gpu)
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
    return Plan(tuple(jobs), options)


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
    if count < 1 or not 1 <= index <= count:
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


def blank_row(**fields) -> dict:
    """A results row with nothing measured: every column a row has, in order, ``fields`` filled in (further columns
    after them)."""
    row = {
        "problem": None,
        "shape": None,
        "dtype": None,
        "backend": None,
        "variant": None,
        "group": None,
        "stages": None,
        "baseline": False,
        "ceiling": False,
        "median_ms": None,
        "iqr_ms": None,
        "spread": None,  # iqr / median
        "samples": 0,
        "throughput": None,
        "unit": None,
        "ratio_to_ceiling": None,
        "valid": None,
        "max_abs_error": None,
        "rel_error": None,
        "measured": False,
        "throttled": None,
        "note": "",
    }
    row.update(fields)
    return row
