"""--profile: why each timed row runs as fast as it does, from one separate launch under Nsight Compute (ncu).

Timing and profiling never mix. The run (suite.driver.jobs) times every row first; then, per (problem, shape), one
separate process (``python -m suite.driver.profile_worker``) runs under ncu. The worker builds each timed row's variant
through the registry, calls it twice outside any profiled range (compiling, loading the module, autotuning, creating
cuBLAS handles), then calls it once more between cudaProfilerStart and cudaProfilerStop, inside an NVTX range named
``pipesuite#<i>``. ncu runs with

- ``--profile-from-start off``: it profiles only the kernels launched between start and stop, i.e. exactly the
  kernels of that one call (one kernel for most variants; a split-K or stream-K call, or a torch op, that launches
  more than one shows its longest, and says so, with each kernel's share of their time);
- ``--nvtx``: each kernel's row in the raw CSV names the range it ran in, which maps it to its table row without
  relying on launch order or kernel names;
- ``--clock-control none``: the suite never changes the GPU's clocks (ncu would lock them to base by default), so
  the profile sees the clocks the timings saw;
- ``--csv --page raw --metrics METRICS``: a small fixed set (below), and EXTRA_METRICS where this ncu knows them
  (refused once, they are dropped for the rest of the run, and the metadata's line says so). ncu replays the kernel
  once per pass over the metric groups (a pass per group of metrics the hardware counts together), restoring the
  memory it writes and flushing the caches before each pass (``--cache-control all``, ncu's default), like the
  timing's flushed L2.

Without a GPU, without ncu, or without permission to read the GPU's performance counters (ERR_NVGPUCTRPERM),
``add_profiles`` raises ``Unavailable`` with a one-line reason and leaves the rows as they are.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Warp-stall reasons of smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio on gh100: the average number
# of warps stalled for that reason per cycle in which the scheduler issued an instruction. "selected" is the warp
# that issued (1 per issue cycle), not a stall; the others together are the stall cycles the shares divide.
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "gmma",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
NOT_A_STALL = "selected"
# A launch that ran but started no kernel: torch's copy_ of contiguous tensors (the vector ceiling) is a
# cudaMemcpyAsync, which the copy engine performs; ncu profiles kernels only.
NO_KERNEL = "launched no kernel (a cudaMemcpy, as torch's copy_ is, runs on the copy engine; ncu profiles kernels)"

# The fixed metric set. Every name is a column of the committed H200 raw CSV (tests/data/ncu-raw-h200-20261130.csv,
# taken with this ncu), so the one command collects them all; the counters behind them are in ncu's gh100 list
# (tests/data/ncu-query-metrics-gh100.txt). 32 names, about 17 replay passes per kernel.
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_THROUGHPUT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
WARPS_ACTIVE = "smsp__warps_active.avg.per_cycle_active"
WARPS_ELIGIBLE = "smsp__warps_eligible.avg.per_cycle_active"
# Cycles the tensor pipe was busy with HMMA (mma.sync), HFMA2.MMA, HGMMA (wgmma) or QGMMA: on gh100 the one pipe
# metric that counts both mma.sync and wgmma (the committed sample, tests/data, has it for both kinds of GEMM).
# There is no separate wgmma cycles metric; the row's SASS classes (HMMA / HGMMA) tell which it was.
TENSOR_PIPE = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
# to pick the longest kernel of a multi-kernel call and give each kernel its share of the call: never reported as a
# time (ncu replays each kernel with the caches flushed per pass, not as the timed run ran them)
DURATION = "gpu__time_duration.sum"
# The shared-memory data pipe's wavefronts as a share of its peak rate: ncu's "Shared Memory" throughput (Memory
# Workload Analysis). Not in the committed sample, so asked for as an extra (EXTRA_METRICS): an ncu that refuses it
# profiles without it.
SMEM_THROUGHPUT = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"
# The L2 slices' throughput as a share of peak (Speed Of Light's "L2 Cache Throughput"): a kernel whose operands come
# from L2 as fast as the L2 serves them is bound here, not by DRAM. And the bytes read from DRAM, to set against the
# operands' bytes: an operand read from DRAM more than once shows as a multiple of them. Both asked for as extras.
L2_THROUGHPUT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_READ_BYTES = "dram__bytes_read.sum"
EXTRA_METRICS = (SMEM_THROUGHPUT, L2_THROUGHPUT, DRAM_READ_BYTES)
UNKNOWN_METRIC = "Failed to find metric"  # ncu's error for a metric name this ncu or GPU does not have
SMEM = {  # shared memory, loads (LDS, and ldmatrix's wavefronts) and stores (STS)
    "ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "ld_requests": "smsp__sass_inst_executed_op_shared_ld.sum",
    "st_requests": "smsp__sass_inst_executed_op_shared_st.sum",
}


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


METRICS = (
    SM_THROUGHPUT,
    DRAM_THROUGHPUT,
    OCCUPANCY,
    WARPS_ACTIVE,
    WARPS_ELIGIBLE,
    TENSOR_PIPE,
    DURATION,
    *SMEM.values(),
    *(stall_metric(r) for r in STALL_REASONS),
)

RANGE_PREFIX = "pipesuite#"  # the worker's NVTX range of row i is "pipesuite#<i> <label> stages=<s>"
_RANGE_RE = re.compile(re.escape(RANGE_PREFIX) + r"(\d+)")
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")  # when ncu is not on PATH
TIMED_NOTE = "one separate launch per row under Nsight Compute after all timing; no timing was taken under the profiler"

# Short names of stall reasons for the "why" cell (the JSON and CSV keep ncu's names).
SHORT = {
    "long_scoreboard": "long_sb",
    "short_scoreboard": "short_sb",
    "math_pipe_throttle": "math_throttle",
    "branch_resolving": "branch",
    "dispatch_stall": "dispatch",
    "no_instruction": "no_inst",
}


class Unavailable(RuntimeError):
    """The profile pass cannot run here; the message is one line saying why."""


def notice(reason: Unavailable | str, width: int = 160) -> str:
    """What the CLI prints when there is no profile: one line of at most ``width`` characters."""
    head, tail = "--profile: ", "; the run goes on without profiles."
    text = str(reason).replace("\n", " ")
    room = width - len(head) - len(tail)
    return head + (text if len(text) <= room else text[: room - 3] + "...") + tail


# ---------------------------------------------------------------------------------------------------------------
# ncu's raw CSV -> kernels -> profile objects
# ---------------------------------------------------------------------------------------------------------------

_TIME_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _number(text: str, unit: str = "") -> float | None:
    """A raw-page value as a float in base units: thousands separators dropped ('4,227,072'), times in ns, counts
    with a K/M/G prefix ('Kinst') scaled; None for an empty or 'n/a' cell."""
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    unit = (unit or "").strip()
    if unit in _TIME_NS:
        return value * _TIME_NS[unit]
    if len(unit) > 1 and unit[0] in _PREFIX and unit[1:].isalpha() and unit[1:].islower():
        return value * _PREFIX[unit[0]]
    return value


ANONYMOUS = "(anonymous namespace)"  # a part of a C++ name, not its argument list


def short_kernel_name(name: str) -> str:
    """'void gemm_tma_wgmma<3, 256, 2, 1, 1>(TensorMap, ...)' -> 'gemm_tma_wgmma<3, 256, 2, 1, 1>'; an
    '(anonymous namespace)' inside the name is kept: 'void a::(anonymous namespace)::f<1>(int)' -> 'a::(anonymous
    namespace)::f<1>'."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0 and not name.startswith(ANONYMOUS, i):
            return name[:i]
    return name


def read_raw_csv(text: str) -> list[dict]:
    """The kernels of ``ncu --csv --page raw`` output, in the order ncu profiled them. Lines before the header
    (ncu's ==PROF== / ==WARNING== lines, anything the program printed) are skipped; the units row scales the values.
    Each kernel: {"id", "name", "range" (the worker's row index from its NVTX range, or None), "values": {metric:
    float or None}}. Raises ValueError when there is no raw-page header."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith('"ID",')]
    if not starts:
        raise ValueError('no ncu raw-page CSV header (a line starting with "ID",) in the output')
    body = [line for line in lines[starts[-1] :] if line.strip() and not line.startswith("==")]
    table = list(csv.reader(body))
    header, records = table[0], table[1:]
    units = {}
    if records and not records[0][0].strip():  # the units row has no ID
        units = dict(zip(header, records[0]))
        records = records[1:]
    kernels = []
    for fields in records:
        cells = dict(zip(header, fields))
        found = _RANGE_RE.search(" ".join(v for k, v in cells.items() if "__" not in k))
        kernels.append(
            {
                "id": cells.get("ID"),
                "name": cells.get("Kernel Name", ""),
                "range": int(found[1]) if found else None,
                "values": {m: _number(cells[m], units.get(m, "")) for m in header if "__" in m},
            }
        )
    return kernels


def _ratio(num, den) -> float | None:
    return None if num is None or not den else num / den


def _r(value, digits: int = 2):
    return None if value is None else round(value, digits)


def profile_of(kernel: dict) -> dict:
    """The profile object of one profiled kernel (docs/method.md, "--profile")."""
    v = kernel["values"]
    stalls = {r: v.get(stall_metric(r)) for r in STALL_REASONS}
    stalled = {r: x for r, x in stalls.items() if r != NOT_A_STALL and x}
    total = sum(stalled.values())
    top = sorted(stalled.items(), key=lambda kv: -kv[1])[:3]
    smem = {k: v.get(m) for k, m in SMEM.items()}
    conflicts = sum(smem[k] or 0 for k in ("ld_conflicts", "st_conflicts"))
    wavefronts = sum(smem[k] or 0 for k in ("ld_wavefronts", "st_wavefronts"))
    smem.update(
        ld_wavefronts_per_request=_r(_ratio(smem["ld_wavefronts"], smem["ld_requests"])),
        st_wavefronts_per_request=_r(_ratio(smem["st_wavefronts"], smem["st_requests"])),
        bank_conflict_pct=_r(_ratio(100 * conflicts, wavefronts), 1),
    )
    return {
        "kernel": short_kernel_name(kernel["name"]),
        "sm_throughput_pct": v.get(SM_THROUGHPUT),
        "dram_throughput_pct": v.get(DRAM_THROUGHPUT),
        "achieved_occupancy_pct": v.get(OCCUPANCY),
        "tensor_pipe_pct": v.get(TENSOR_PIPE),
        "smem_throughput_pct": v.get(SMEM_THROUGHPUT),
        "l2_throughput_pct": v.get(L2_THROUGHPUT),
        "dram_read_bytes": v.get(DRAM_READ_BYTES),
        "warps_per_scheduler": {"active": v.get(WARPS_ACTIVE), "eligible": v.get(WARPS_ELIGIBLE)},
        "top_stalls": [{"reason": r, "share_pct": round(100 * x / total, 1), "warps_per_issue": x} for r, x in top],
        "stalls": stalls,
        "smem": smem,
    }


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0f}%"


def why(row: dict) -> str:
    """The compact cell: what the kernel keeps busy (the tensor pipe for a TFLOP/s problem, DRAM for a GB/s one; and
    the L2 slices and the shared-memory data pipe where they were measured), the two largest stall reasons with their
    share of stall cycles, and shared-memory bank conflicts when they add 5% or more of the wavefronts. E.g.
    'tensor 66%, l2 38%, smem 41%; wait 42%, long_sb 12%' (no '|': the cell sits in Markdown tables). '-' for a row
    without a profile."""
    p = row.get("profile")
    if not p:
        return "-"
    if p.get("error"):
        return "no profile: " + p["error"].replace("|", "/")
    lead = (
        f"tensor {_pct(p.get('tensor_pipe_pct'))}"
        if row.get("unit") == "TFLOP/s"
        else f"dram {_pct(p.get('dram_throughput_pct'))}"
    )
    for name, key in (("l2", "l2_throughput_pct"), ("smem", "smem_throughput_pct")):
        if p.get(key) is not None:
            lead += f", {name} {_pct(p[key])}"
    stalls = ", ".join(f"{SHORT.get(s['reason'], s['reason'])} {s['share_pct']:.0f}%" for s in p["top_stalls"][:2])
    cell = lead + (f"; {stalls}" if stalls else "")
    conflict = (p.get("smem") or {}).get("bank_conflict_pct")
    if conflict is not None and conflict >= 5:
        cell += f"; bank conflicts {conflict:.0f}%"
    return cell


CSV_FIELDS = (
    "profile_kernel",
    "profile_shape",
    "profile_sm_throughput_pct",
    "profile_dram_throughput_pct",
    "profile_achieved_occupancy_pct",
    "profile_tensor_pipe_pct",
    "profile_smem_throughput_pct",
    "profile_l2_throughput_pct",
    "profile_dram_read_bytes",
    "profile_warps_active_per_scheduler",
    "profile_warps_eligible_per_scheduler",
    "profile_stall_1",
    "profile_stall_1_pct",
    "profile_stall_2",
    "profile_stall_2_pct",
    "profile_stall_3",
    "profile_stall_3_pct",
    "profile_smem_bank_conflict_pct",
    "profile_smem_ld_wavefronts_per_request",
    "profile_smem_st_wavefronts_per_request",
    "profile_why",
    "profile_note",
)


def flat(row: dict) -> dict:
    """The row's profile as the CSV's profile_* columns (empty when it has none)."""
    p = row.get("profile")
    if not p:
        return {}
    if p.get("error"):
        return {"profile_note": f"no profile: {p['error']}"}
    out = {
        f"profile_{k}": p.get(k)
        for k in (
            "kernel",
            "shape",
            "sm_throughput_pct",
            "dram_throughput_pct",
            "achieved_occupancy_pct",
            "tensor_pipe_pct",
            "smem_throughput_pct",
            "l2_throughput_pct",
            "dram_read_bytes",
        )
    }
    out["profile_warps_active_per_scheduler"] = p["warps_per_scheduler"]["active"]
    out["profile_warps_eligible_per_scheduler"] = p["warps_per_scheduler"]["eligible"]
    for i, stall in enumerate(p["top_stalls"], 1):
        out[f"profile_stall_{i}"], out[f"profile_stall_{i}_pct"] = stall["reason"], stall["share_pct"]
    out["profile_smem_bank_conflict_pct"] = p["smem"]["bank_conflict_pct"]
    out["profile_smem_ld_wavefronts_per_request"] = p["smem"]["ld_wavefronts_per_request"]
    out["profile_smem_st_wavefronts_per_request"] = p["smem"]["st_wavefronts_per_request"]
    out["profile_why"] = why(row)
    out["profile_note"] = p.get("note") or ""
    return out


# ---------------------------------------------------------------------------------------------------------------
# Running ncu over the worker
# ---------------------------------------------------------------------------------------------------------------


def find_ncu() -> str:
    """The ncu executable: $PIPESUITE_NCU, else ncu on PATH, else the CUDA toolkit's. Raises Unavailable."""
    explicit = os.environ.get("PIPESUITE_NCU")
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise Unavailable(f"PIPESUITE_NCU={explicit} is not an executable")
        return found
    found = shutil.which("ncu") or next((c for c in NCU_CANDIDATES if os.access(c, os.X_OK)), None)
    if not found:
        raise Unavailable("ncu (Nsight Compute) is not on PATH")
    return found


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    versions = re.findall(r"Version\s+(\S+)", out)
    return versions[-1] if versions else (out.strip().splitlines() or ["unknown"])[-1]


def ncu_command(ncu: str, worker_args: list[str], extras: tuple[str, ...] = EXTRA_METRICS) -> list[str]:
    """ncu over the profile worker, asking for METRICS and ``extras`` (those of EXTRA_METRICS this ncu knows)."""
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--nvtx",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(METRICS + tuple(extras)),
        sys.executable,
        "-m",
        "suite.driver.profile_worker",
        *worker_args,
    ]


def _first_error(text: str) -> str:
    line = next((ln for ln in text.splitlines() if ln.startswith("==ERROR==")), None)
    if line is None:
        line = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no output")
    line = line.replace("==ERROR==", "").strip()
    return line if len(line) <= 80 else line[:77] + "..."


def _item(row: dict, stages_swept: bool) -> str:
    """The worker's argument for a row: backend:name, with @stages for a variant swept over stages."""
    label = f"{row['backend']}:{row['variant']}"
    return f"{label}@{row['stages']}" if stages_swept and row["stages"] is not None else label


def profile_group(
    ncu: str,
    problem: str,
    shape: str,
    rows: list[dict],
    seed: int = 0,
    timeout_s: float | None = None,
    dtype: str = "",
    extras: tuple[str, ...] = EXTRA_METRICS,
    plugins: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Profile ``rows`` (all of one problem and shape) in one worker process under ncu, which loads ``plugins`` (the
    run's --plugin modules, whose variants may be among the rows) first, and set each row's
    ``profile``: the profile object, or {"error": why} for a row whose kernel ncu did not profile. The ``extras``
    (of EXTRA_METRICS) are asked for too; where ncu refuses a metric name, once more without the extras it named (all
    of them if it named none of them). Returns the extras collected. Raises Unavailable when ncu cannot profile at all
    (no permission, a metric of METRICS ncu does not know, ...)."""
    from suite.problems import PROBLEMS
    from suite.registry import variants

    swept = {v.label: v.stages != (None,) for v in variants(problem)}
    items = [_item(r, swept.get(f"{r['backend']}:{r['variant']}", True)) for r in rows]
    name = next((d.name for d in PROBLEMS[problem].dtypes.values() if d.label == dtype), "")
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the repository root, so the worker imports this suite
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    while True:
        with tempfile.TemporaryDirectory(prefix="pipesuite-profile-") as tmp:
            manifest_path = Path(tmp) / "manifest.json"
            cmd = ncu_command(
                ncu,
                ["--seed", str(10_000 + seed), "--manifest", str(manifest_path)]
                + (["--dtype", name] if name else [])
                + [arg for plugin in plugins for arg in ("--plugin", plugin)]
                + [problem, shape, *items],
                extras=extras,
            )
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, env=env, timeout=timeout_s or 120 + 30 * len(rows)
                )
            except subprocess.TimeoutExpired as e:
                raise Unavailable(f"ncu did not finish {problem} {shape} in {e.timeout:.0f} s") from None
            manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
        output = done.stdout + "\n" + done.stderr
        if PERMISSION_ERROR in output:
            raise Unavailable(
                f"no permission to read the GPU's performance counters ({PERMISSION_ERROR}: "
                "developer.nvidia.com/ERR_NVGPUCTRPERM)"
            )
        try:
            kernels = read_raw_csv(done.stdout)
        except ValueError:
            if extras and UNKNOWN_METRIC in output:
                # this ncu does not know an extra metric: ask again without the ones it names
                refused = {m for m in extras if m in output} or set(extras)
                extras = tuple(m for m in extras if m not in refused)
                continue
            raise Unavailable(f"ncu profiled nothing (exit status {done.returncode}): {_first_error(output)}") from None
        assign(rows, kernels, manifest, shape, worker_error=None if done.returncode == 0 else _first_error(done.stderr))
        return extras


def assign(
    rows: list[dict], kernels: list[dict], manifest: list[dict], shape: str, worker_error: str | None = None
) -> None:
    """Give row i the profile of the kernels ncu profiled in the worker's range i (the longest when there are several).
    Without range names in the CSV, kernels are taken in launch order, but only when there is exactly one per
    launched row; otherwise every row gets an error rather than a guess."""
    entries = {e["index"]: e for e in manifest}
    by_range: dict[int, list[dict]] = {}
    if kernels and all(k["range"] is not None for k in kernels):
        for k in kernels:
            by_range.setdefault(k["range"], []).append(k)
    elif kernels:
        launched = [e["index"] for e in manifest if not e.get("error")]
        if len(launched) == len(kernels):
            by_range = {i: [k] for i, k in zip(launched, kernels)}
        else:
            for row in rows:
                row["profile"] = {
                    "error": f"{len(kernels)} kernels profiled for {len(launched)} launches and no NVTX "
                    "range names in ncu's CSV: cannot tell which kernel is which row"
                }
            return
    for i, row in enumerate(rows):
        entry = entries.get(i, {})
        found = by_range.get(i)
        if not found:
            launched = bool(entry) and not entry.get("error") and not worker_error
            row["profile"] = {
                "error": NO_KERNEL
                if launched
                else entry.get("error") or worker_error or "ncu profiled no kernel of this launch"
            }
            continue
        main = max(found, key=lambda k: k["values"].get(DURATION) or 0)
        profile = {**profile_of(main), "shape": shape, "kernels": len(found)}
        notes = []
        if len(found) > 1:  # a split-K or stream-K pass and its fix-up: how the call's time divides between them
            times = [k["values"].get(DURATION) for k in found]
            shares = ""
            if all(times) and (total := sum(times)):
                shares = (
                    " ("
                    + ", ".join(f"{short_kernel_name(k['name'])} {100 * t / total:.0f}%" for k, t in zip(found, times))
                    + " of their time under ncu)"
                )
            notes.append(f"{len(found)} kernels in one call{shares}; the longest shown")
        if entry.get("config") and row.get("config") and entry["config"] != row["config"]:
            notes.append(f"profiled config ({entry['config']}) differs from the timed one")
        profile["note"] = "; ".join(notes)
        row["profile"] = profile


def group_timeout() -> float | None:
    """$PIPESUITE_PROFILE_TIMEOUT: seconds one (problem, shape)'s ncu process may take (default: 120 + 30 per row).
    A group past it gets no profile columns, and the run's timed results are written all the same."""
    value = os.environ.get("PIPESUITE_PROFILE_TIMEOUT")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not seconds > 0:
        raise Unavailable(f"PIPESUITE_PROFILE_TIMEOUT must be a number of seconds > 0 (got {value!r})")
    return seconds


def add_profiles(
    rows: list[dict], on_gpu: bool, seed: int = 0, progress: bool = True, plugins: tuple[str, ...] = ()
) -> str:
    """Profile every timed, valid row (see the module docstring), the workers loading ``plugins`` (the run's --plugin
    modules) first; return the run metadata's line about it. Raises
    Unavailable (one line) when nothing can be profiled here; rows are then left without a profile."""
    if not on_gpu:
        raise Unavailable("no CUDA GPU here: nothing was timed, so nothing is profiled")
    timed = [r for r in rows if r.get("measured") and r.get("valid")]
    if not timed:
        raise Unavailable("no row was timed, so nothing is profiled")
    ncu = find_ncu()
    extras = EXTRA_METRICS  # less those ncu refuses
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in timed:  # one worker per (problem, shape, dtype): the rows of one group share their inputs
        groups.setdefault((r["problem"], r["shape"], r.get("dtype") or ""), []).append(r)
    for n, ((problem, shape, dtype), group) in enumerate(groups.items()):
        t0 = time.time()
        if progress:
            print(
                f"profiling {problem} {shape}: {len(group)} launches under ncu ...", end="", file=sys.stderr, flush=True
            )
        try:
            extras = profile_group(
                ncu,
                problem,
                shape,
                group,
                seed,
                timeout_s=group_timeout(),
                dtype=dtype,
                extras=extras,
                plugins=plugins,
            )
        except Unavailable as e:
            if progress:
                print(" failed", file=sys.stderr)
            if n == 0:
                raise  # nothing profiled: say so once, no columns
            for row in group:  # a later group: the profiles taken so far stay, these rows say why they have none
                row["profile"] = {"error": str(e)}
            continue
        if progress:
            print(f" {time.time() - t0:.0f} s", file=sys.stderr)
    count = len(METRICS) + len(extras)
    refused = [m for m in EXTRA_METRICS if m not in extras]
    refused = f" (this ncu refused {', '.join(refused)})" if refused else ""
    return f"ncu {ncu_version(ncu)}, --clock-control none, {count} metrics{refused}; {TIMED_NOTE}"
