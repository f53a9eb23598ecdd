"""python -m suite.merge DIR... --out DIR: combine shard results into one results directory.

Each DIR is a results directory of suite.run (its results.json): a shard (``--shard I/N``, a Slurm job array task),
a whole run, or an earlier merge. The output is what suite.run writes (table.md, results.csv, results.json, plots,
through suite.driver.report.write), rows in plan order, with metadata saying which parts it was merged from.

It refuses, with exit 2 and one line naming the rule:
- results of different plans (the plan's id: another selection, sizes, seed, timer, launch, --quick, other
  registered variants, as another commit's, or another version of a plugin's code);
- results of different GPU models (``--by gpu`` puts them side by side instead);
- results of different software (Python, torch, Triton, cuda-core / cuda-bindings, NVRTC, the driver, the CUDA
  runtime, or the suite's own source);
- overlapping shards (two parts that both ran a job of the plan);
- a part whose rows are not the plan's rows for its jobs (rows removed, added or moved to another job);
- missing shards (jobs of the plan that no part ran), unless ``--allow-partial``: then each missing (problem, dtype,
  shape) gets a row that marks the hole, and the metadata lists what is missing.

A part that was cut (Ctrl-C, a time limit: ``meta.complete`` false) counts only its finished jobs; the job it was
in when cut, and those after, are missing as above (the finished rows of a job cut half-way are left out: a shape's
summary and depth gains compare every row of its job).

What each part measured of its own GPU (``meta.roofline``, ``meta.gpu_id``, ``meta.memory_latency_ns``) is kept where
the parts agree and listed per part where they differ: each row keeps its own part's roofline.

``--by gpu``: the parts are grouped by GPU model, each group merged as above into OUT/<gpu>/, and OUT/table.md puts
the models side by side (throughput, % of ceiling, and each model's throughput relative to the first), for
comparing GPU generations; all groups must be of one plan.

The output directory is checked before anything is read (symlinks resolved; it must be writable), held by this
merge while it writes, and refused when it holds results already unless ``--overwrite`` (their stale plots are then
removed). Each group of ``--by gpu`` is written to a directory named by the GPU model made path-safe, always inside
--out.

Exit status:
  0  merged
  1  a merged row failed (as suite.run), or the output could not be written (said in one line)
  2  a refusal or bad input (a file that is not a regular, readable results.json: FIFOs and devices are refused
     without opening them; numbers out of range; JSON nested too deeply)
  3  an internal error: one line (--debug shows the traceback)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from suite.driver.results_io import SOFTWARE, InputError, in_plan_order, job_finished, path_argument, read_json

WIDTH = 160
# What each part measured of its own GPU and run. Where the parts agree the merged metadata keeps the value; where they
# differ (parts on other boards or leases) it lists each part's, since every row keeps the figures of the part that
# timed it (its roofline and ratio_to_roofline are computed from its own part's copy_ ceiling and tensor peak).
PER_PART = ("gpu_id", "memory_latency_ns", "roofline")


class MergeError(ValueError):
    """A refusal: one line naming the rule."""


@dataclass
class Part:
    dir: Path
    meta: dict
    rows: list[dict]
    unfinished: tuple[int, ...] = ()  # jobs of its shard that a cut run did not finish

    @property
    def plan(self) -> dict:
        return self.meta["plan"]

    @property
    def jobs(self) -> list[int]:
        """The jobs of the plan this part ran to the end."""
        return [j for j in self.meta["shard"]["jobs"] if j not in self.unfinished]

    @property
    def cut(self) -> bool:
        return self.meta.get("complete") is False

    @property
    def shard(self) -> str:
        shard = self.meta["shard"]
        if shard.get("index") is not None:
            return f"{shard['index']}/{shard['count']}"
        return "merged " + ", ".join(shard.get("parts") or [])

    @property
    def gpu(self) -> str:
        return self.meta.get("gpu") or "cpu"


def load(path: str | Path) -> Part:
    """One results directory (or its results.json). MergeError, one line naming it, when it is not one that
    records its plan and shard."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    where = path if path.is_dir() else path.parent
    if path.is_dir() and not os.path.lexists(file):
        raise MergeError(f"{path}: no results.json there")
    try:
        data = read_json(file)
    except InputError as e:
        raise MergeError(str(e)) from None
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict) or not isinstance(data.get("rows"), list):
        raise MergeError(f"{file}: not a pipesuite results.json (no meta and rows)")
    meta = data["meta"]
    plan, shard = meta.get("plan"), meta.get("shard")
    rows = [r for r in data["rows"] if not (isinstance(r, dict) and r.get("placeholder"))]  # an earlier hole
    if not isinstance(plan, dict) or "id" not in plan or not isinstance(shard, dict) or "jobs" not in shard:
        raise MergeError(f"{file}: its metadata records no plan and shard (written before suite.merge existed?)")
    part = Part(where, meta, rows)
    check_rows(part, file)
    return part


def check_rows(part: Part, file: Path) -> None:
    """Refuse (MergeError) a part whose rows are not its jobs' rows as the plan counts them: a shard with rows removed
    (or added, or of another job) is not the shard it says it is. A cut part's jobs that it did not finish, by
    suite.run --resume's rule (results_io.job_finished: every plan row once, none lost with a device that failed),
    are its unfinished ones: their rows are dropped and the jobs left to the other parts (or marked missing)."""
    try:
        listed = part.plan.get("job_list")
        if not isinstance(listed, list) or part.plan.get("jobs") != len(listed):
            raise ValueError(f"its plan counts {part.plan.get('jobs')!r} jobs and lists {len(listed or [])}")
        jobs = [int(j) for j in part.jobs]
        expected = {j: plan_rows(part, j) for j in jobs}
        first_row = plan_row_starts(part)
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise MergeError(f"{file}: its plan and shard do not describe its jobs ({e})") from None
    if any(not isinstance(r, dict) for r in part.rows):
        raise MergeError(f"{file}: not a pipesuite results.json (a row is not an object)")
    if part.cut:  # its finished jobs by suite.run --resume's rule; the others are left to other parts
        by_job: dict[int, list[dict]] = {}
        for r in part.rows:
            by_job.setdefault(r.get("job"), []).append(r)
        part.unfinished = tuple(
            j for j in jobs if not job_finished(by_job.get(j, []), range(first_row[j], first_row[j] + expected[j]))
        )
        part.rows = [r for r in part.rows if r.get("job") not in part.unfinished]
    have = Counter(r.get("job") for r in part.rows)
    for job in part.jobs:
        if have.get(job, 0) != expected[job]:
            raise MergeError(
                f"{file}: {have.get(job, 0)} row(s) of {_describe(part, job)}, where the plan has {expected[job]} "
                "(rows removed or added since the run)"
            )
    stray = sorted(str(j) for j in set(have) - set(part.jobs))
    if stray:
        raise MergeError(f"{file}: rows of job(s) {', '.join(stray)}, which its shard did not run")


def plan_rows(part: Part, job: int) -> int:
    """How many rows the plan gives ``job`` (from its description in the plan's job list)."""
    from suite.driver.plan import parse_description

    names = part.plan.get("job_list")
    if not isinstance(names, list) or not 0 <= job < len(names):
        raise IndexError(f"job {job} is not in the plan's job list")
    return parse_description(str(names[job]))["rows"]


def plan_row_starts(part: Part) -> list[int]:
    """Each job's first plan row: the plan numbers its rows in job order (suite.driver.plan), so job j's rows are
    the next ``plan_rows`` after job j - 1's."""
    starts, row = [], 0
    for job in range(len(part.plan["job_list"])):
        starts.append(row)
        row += plan_rows(part, job)
    return starts


def _describe(part: Part, job: int) -> str:
    names = part.plan.get("job_list") or []
    return names[job] if job < len(names) else f"job {job}"


def same_plan(parts: list[Part]) -> None:
    """Refuse (MergeError) parts of different plans."""
    if not parts:
        raise MergeError("no results to merge")
    first = parts[0]
    for part in parts[1:]:
        if part.plan["id"] != first.plan["id"]:
            raise MergeError(
                f"mixed plans: {first.dir} ran plan {first.plan['id']}, {part.dir} plan "
                f"{part.plan['id']} (another selection, sizes, seed, timer, launch or --quick, or other registered "
                "variants: a run of another commit, or with another plugin)"
            )


def check(parts: list[Part], *, same_gpu: bool = True) -> None:
    """Refuse (MergeError) parts that cannot be one run: different plans, GPU models (``same_gpu``) or software,
    or two parts that ran the same job."""
    same_plan(parts)
    first = parts[0]
    if same_gpu:
        for part in parts[1:]:
            if part.gpu != first.gpu:
                raise MergeError(
                    f"mixed GPU models: {first.dir} ran on {first.gpu}, {part.dir} on {part.gpu} "
                    "(--by gpu puts them side by side)"
                )
    for part in parts[1:]:
        for key in SOFTWARE:
            if part.meta.get(key) != first.meta.get(key):
                raise MergeError(
                    f"mixed software versions: {key} {first.meta.get(key)} in {first.dir}, "
                    f"{part.meta.get(key)} in {part.dir}"
                )
    owner: dict[int, Part] = {}
    for part in parts:
        for job in part.jobs:
            if job in owner:
                other = owner[job]
                raise MergeError(
                    f"overlapping shards: {other.dir} (shard {other.shard}) and {part.dir} (shard "
                    f"{part.shard}) both ran {_describe(part, job)}"
                )
            owner[job] = part


def missing_jobs(parts: list[Part]) -> list[int]:
    covered = {job for part in parts for job in part.jobs}
    return [job for job in range(int(parts[0].plan["jobs"])) if job not in covered]


def _missing_shards(parts: list[Part]) -> str:
    """'2/3' when every part is a plain shard of one count; '' otherwise."""
    shards = [p.meta["shard"] for p in parts]
    counts = {s.get("count") for s in shards}
    if len(counts) != 1 or None in counts or any(s.get("index") is None for s in shards):
        return ""
    count = counts.pop()
    have = {s["index"] for s in shards}
    return ", ".join(f"{i}/{count}" for i in range(1, count + 1) if i not in have)


def _gap(parts: list[Part], job: int, shards: str) -> str:
    """Why no part has ``job``: a part cut before it finished it, or a shard not given."""
    cut = next((p for p in parts if job in p.unfinished), None)
    if cut is not None:
        return f"shard {cut.shard} was cut before it finished"
    return f"shard {shards} is missing" if shards else "its shard is missing"


def _placeholder(parts: list[Part], job: int, shards: str) -> dict:
    """The row that marks a job no part ran to the end (--allow-partial)."""
    from suite.driver.plan import blank_row, parse_description
    from suite.problems import PROBLEMS

    described = parse_description(_describe(parts[0], job))
    problem = PROBLEMS.get(described["problem"])
    return blank_row(
        problem=described["problem"],
        shape=described["shape"],
        dtype=described["dtype"],
        backend="missing",
        variant=f"{described['rows']} rows",
        group="",
        unit=problem.unit if problem else "",
        note=f"not merged: {_gap(parts, job, shards)} (its {described['rows']} rows; --allow-partial)",
        job=job,
        plan_row=None,
        gpu_index=None,
        gpu_uuid=None,
        placeholder=True,
    )


def combine(parts: list[Part], *, allow_partial: bool = False, same_gpu: bool = True) -> tuple[list[dict], dict]:
    """The merged rows (plan order) and metadata of ``parts``; MergeError on a refusal."""
    check(parts, same_gpu=same_gpu)
    missing = missing_jobs(parts)
    shards = _missing_shards(parts)
    if missing and not allow_partial:
        cut = {j for p in parts for j in p.unfinished}
        listed = "; ".join(
            _describe(parts[0], j) + (f" ({_gap(parts, j, shards)})" if j in cut else "") for j in missing[:3]
        )
        listed += f"; and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise MergeError(
            f"missing {f'shards: {shards}' if shards else 'jobs'} ({len(missing)} of {parts[0].plan['jobs']} jobs: "
            f"{listed}); merge them too{' (a cut shard: --resume it)' if cut else ''}, or pass --allow-partial"
        )
    rows = [r for part in parts for r in part.rows] + [_placeholder(parts, j, shards) for j in missing]
    rows = in_plan_order(rows)
    first = parts[0].meta
    meta = {
        k: v
        for k, v in first.items()
        if k
        not in (
            "gpu_state_before",
            "gpu_state_after",
            "phase_seconds",
            "command",
            "shard",
            "gpus",
            "merge",
            "resumed",
            "resumed_from",
        )
    }
    meta["complete"] = not missing  # every job of the plan is in it
    for key in PER_PART:
        values = [p.meta.get(key) for p in parts]
        if any(v != values[0] for v in values):
            meta[key] = [{"shard": p.shard, key: v} for p, v in zip(parts, values)]
    meta["host"] = ", ".join(dict.fromkeys(str(p.meta.get("host")) for p in parts))
    meta["shard"] = {
        "index": None,
        "count": None,
        "jobs": sorted(j for p in parts for j in p.jobs),
        "parts": [p.shard for p in parts],
    }
    phases: dict[str, float] = {}
    for part in parts:
        for name, seconds in (part.meta.get("phase_seconds") or {}).items():
            phases[name] = round(phases.get(name, 0.0) + seconds, 2)
    meta["phase_seconds"] = phases  # summed over the parts (machine time, not wall time)
    meta["gpus"] = [dict(g, host=p.meta.get("host")) for p in parts for g in (p.meta.get("gpus") or [])]
    meta["merge"] = {
        "parts": [
            {
                "dir": str(p.dir),
                "shard": p.shard,
                "host": p.meta.get("host"),
                "date": p.meta.get("date"),
                "phase_seconds": p.meta.get("phase_seconds"),
                **{k: p.meta[k] for k in ("resumed", "resumed_from") if k in p.meta},  # a part finished by --resume
            }
            for p in parts
        ],
        "partial": bool(missing),
        "missing": [f"{_describe(parts[0], j)} ({_gap(parts, j, shards)})" for j in missing],
    }
    return rows, meta


# ---------------------------------------------------------------------------------------------------------------
# --by gpu
# ---------------------------------------------------------------------------------------------------------------


def _key(r: dict) -> tuple:
    return (r["problem"], r.get("dtype"), r["shape"], r.get("group") or "", r["backend"], r["variant"], r["stages"])


def side_by_side(runs: dict[str, list[dict]]) -> str:
    """One block per (problem, dtype, shape, table): each (variant, stages) on a line, each GPU model's throughput and
    % of its own ceiling side by side, and every model after the first relative to the first."""
    from tabulate import tabulate

    from suite.driver.report import _pct, _perf

    names = list(runs)
    by_gpu = {name: {_key(r): r for r in rows} for name, rows in runs.items()}
    keys = list(dict.fromkeys(_key(r) for rows in runs.values() for r in rows))
    blocks: dict[tuple, list[tuple]] = {}
    for key in keys:
        blocks.setdefault(key[:4], []).append(key)
    out = []
    for (problem, dtype, shape, group), members in blocks.items():
        first = next(by_gpu[n][k] for k in members for n in names if k in by_gpu[n])
        unit = first.get("unit", "")
        headers = ["variant", "stages"]
        for i, name in enumerate(names):
            headers += [f"{name} {unit}", f"{name} %"] + ([f"{name} / {names[0]}"] if i else [])
        body = []
        for key in members:
            line = [f"{key[4]}:{key[5]}", "-" if key[6] is None else str(key[6])]
            base = by_gpu[names[0]].get(key)
            for i, name in enumerate(names):
                r = by_gpu[name].get(key)
                line += ["-", "-"] if r is None else [_perf(r), _pct(r)]
                if i:
                    both = r is not None and base is not None and r.get("measured") and base.get("measured")
                    line.append(f"{r['throughput'] / base['throughput']:.2f}x" if both and base["throughput"] else "-")
            body.append(line)
        title = f"### {problem} {shape} ({dtype})" + (f", {group}" if group else "") + f": {unit} by GPU"
        out.append(title + "\n\n" + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True))
    return "\n\n".join(out)


def write_by_gpu(groups: dict[str, tuple[list[dict], dict]], out: Path, command: str) -> list[Path]:
    """OUT/<gpu>/ (each model's merged results, as suite.run writes them) and OUT/table.md, results.csv and
    results.json with the models side by side (every row with its ``gpu``)."""
    from suite.driver import report

    dirs = group_dirs(list(groups), out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (rows, meta) in groups.items():
        written += report.write(rows, meta, dirs[name])
    runs = {name: rows for name, (rows, _) in groups.items()}
    meta = {
        "by": "gpu",
        "gpus": list(groups),
        "plan": next(iter(groups.values()))[1]["plan"],
        "command": command,
        "runs": {name: str(dirs[name]) for name in groups},
    }
    md = "# pipesuite results by GPU\n\n" + report.headline(meta) + "\n\n" + side_by_side(runs) + "\n\n"
    md += report.record_section(meta)
    rows = [dict(r, gpu=name) for name, rs in runs.items() for r in rs]
    buf = io.StringIO()
    fields = ("gpu",) + report.CSV_FIELDS
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: r.get(k) for k in fields})
    for name, text in (
        ("table.md", md),
        ("results.csv", buf.getvalue()),
        ("results.json", json.dumps({"meta": meta, "rows": rows}, indent=1, default=str)),
    ):
        report._atomic_write(out / name, text)
        written.append(out / name)
    return written


def group_dirs(names: list[str], out: Path) -> dict[str, Path]:
    """Each GPU model's directory: OUT/<its name made path-safe (suite.driver.report.slug)>, which must be a new name
    directly inside OUT (a model named '..' or '.' neither escapes OUT nor overwrites its files) and differ from every
    other model's. MergeError otherwise."""
    from suite.driver import report, results_io

    root = out.resolve()
    dirs: dict[str, Path] = {}
    for name in names:
        safe = report.slug(name)
        path = out / safe
        if safe in results_io.RESULT_FILES or path.resolve().parent != root or safe in (".", ".."):
            raise MergeError(f"GPU model {name!r}: no directory of that name can be made inside {out}")
        if (clash := next((n for n, d in dirs.items() if d == path), None)) is not None:
            raise MergeError(f"GPU models {clash!r} and {name!r} would share the directory {path}")
        dirs[name] = path
    return dirs


# ---------------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"error: {message} (see python -m suite.merge --help)\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = _Parser(
        prog="python -m suite.merge",
        description=__doc__.split("\n\n")[0],
        epilog="Example: python -m suite.merge results/shard-*/ --out results/merged\n\n"
        + __doc__[__doc__.index("Exit status:") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "dirs", nargs="+", type=path_argument, metavar="DIR", help="results directories (or their results.json)"
    )
    p.add_argument("--out", type=path_argument, required=True, metavar="DIR", help="where to write the merged results")
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge even when shards are missing: each missing shape gets a row that marks the hole",
    )
    p.add_argument("--by", choices=("gpu",), help="gpu: runs of different GPU models side by side in one table")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="let --out be a directory that holds results already: they and their plots are removed first",
    )
    p.add_argument("--debug", action="store_true", help="an internal error shows its traceback (exit 3 either way)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from suite.cli_exits import guarded

    return guarded(lambda: _main(args, argv), args.debug, "interrupted: nothing merged")


def _main(args: argparse.Namespace, argv) -> int:
    from suite.driver import results_io
    from suite.run import check_out

    if why := check_out(args.out):
        print(f"error: --out: {why}", file=sys.stderr)
        return 2
    # quoted as a shell reads it back (a path may have spaces): the record's command runs again as written
    command = "python -m suite.merge " + shlex.join(argv if argv is not None else sys.argv[1:])
    try:
        parts = [load(d) for d in args.dirs]
        out = args.out.resolve()
        inside = next((p.dir for p in parts if p.dir.resolve() == out), None)
        if inside is not None:
            raise MergeError(f"--out {args.out} is one of the results being merged")
        if not args.overwrite and results_io.holds_results(args.out):
            raise MergeError(f"--out {args.out} holds results already (--overwrite replaces them)")
        if args.by == "gpu":
            same_plan(parts)  # one plan across the models; each model's parts merged (and checked) on their own
            groups = {}
            for name in dict.fromkeys(p.gpu for p in parts):
                rows, meta = combine([p for p in parts if p.gpu == name], allow_partial=args.allow_partial)
                meta["command"] = command
                groups[name] = (rows, meta)
            group_dirs(list(groups), args.out)
        else:
            rows, meta = combine(parts, allow_partial=args.allow_partial)
            meta["command"] = command
    except MergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    try:
        lock = results_io.lock_out(args.out)
    except results_io.Busy as e:
        print(f"error: --out: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --out: cannot create {args.out} ({e.strerror or e})", file=sys.stderr)
        return 1
    try:
        return _write(args, parts, groups if args.by == "gpu" else None, (rows, meta) if args.by != "gpu" else None)
    finally:
        os.close(lock)


def _write(args, parts: list[Part], groups, merged) -> int:
    from suite.driver import report, results_io

    if results_io.holds_results(args.out):
        results_io.clear_results(args.out)  # --overwrite (checked above): no stale plot stays beside the new ones
    try:
        if groups is not None:
            written = write_by_gpu(groups, args.out, groups[next(iter(groups))][1]["command"])
        else:
            written = report.write(merged[0], merged[1], args.out)
    except OSError as e:  # report.WriteError included: one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 1
    if groups is not None:
        print(side_by_side({name: rows for name, (rows, _) in groups.items()}))
        all_rows = [r for rows, _ in groups.values() for r in rows]
    else:
        rows, meta = merged
        print(report.terminal(rows, WIDTH))
        all_rows = rows
        if meta["merge"]["partial"]:
            print(
                f"\npartial: {len(meta['merge']['missing'])} shape(s) missing, marked in the table: "
                + "; ".join(meta["merge"]["missing"][:3]),
                file=sys.stderr,
            )
    print(f"\nmerged {len(parts)} result(s) into {args.out}/: {', '.join(sorted({p.name for p in written}))}")
    failed = [r for r in all_rows if r.get("valid") is False]
    if failed:
        print(f"\n{len(failed)} row(s) FAILED (validation, or a GPU that failed)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
