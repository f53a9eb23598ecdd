"""The driver's entry points and names under the module the CLI, the tools and the tests import them from.

The driver is split by what it does: suite.driver.plan (the options and what they select, the jobs),
suite.driver.precompile (compiling up front), suite.driver.measure (timing one callable: burst, graph, sampling),
suite.driver.rows (the results row), suite.driver.jobs (running the jobs). This module defines nothing.
"""

from suite.driver import measure
from suite.driver import meta as run_meta
from suite.driver import precompile as _precompile_module
from suite.driver import rows as _rows_module
from suite.driver.jobs import Progress, job_worker, run, run_job, run_jobs, worker_setup
from suite.driver.measure import (
    EAGER_CALLS,
    EAGER_MIN_CALLS,
    HostTimed,
    Launched,
    _burst,
    _sample,
    capture_graph,
    describe_launch,
    eager_calls,
    stop_rule,
)
from suite.driver.plan import (
    OptionError,
    Options,
    check_options,
    dtypes_for,
    plan_groups,
    selected,
    sizes_for,
    variant_names,
)
from suite.driver.precompile import CPU_ARCH, precompile
from suite.driver.rows import LAUNCH_BOUND_SHARE, MAX_SPREAD, Row, current_gpu, skeleton
from suite.driver.workers import Interrupted

__all__ = [
    "CPU_ARCH",
    "EAGER_CALLS",
    "EAGER_MIN_CALLS",
    "LAUNCH_BOUND_SHARE",
    "MAX_SPREAD",
    "HostTimed",
    "Interrupted",
    "Launched",
    "OptionError",
    "Options",
    "Progress",
    "Row",
    "_burst",
    "_precompile_module",
    "_rows_module",
    "_sample",
    "capture_graph",
    "check_options",
    "current_gpu",
    "describe_launch",
    "dtypes_for",
    "eager_calls",
    "job_worker",
    "measure",
    "plan_groups",
    "precompile",
    "run",
    "run_job",
    "run_jobs",
    "run_meta",
    "selected",
    "sizes_for",
    "skeleton",
    "stop_rule",
    "variant_names",
    "worker_setup",
]
