"""Where a run's wall time goes: ``python tools/profile_run.py OUT.prof [suite.run arguments]`` runs
``python -m suite.run`` under cProfile and writes its statistics to OUT.prof, also when the run is stopped by
SIGTERM or SIGINT (``timeout``), then prints the 40 functions with the most cumulative time.
Read it again with ``python -c "import pstats; pstats.Stats('OUT.prof').sort_stats('tottime').print_stats(40)"``."""

from __future__ import annotations

import cProfile
import pstats
import runpy
import signal
import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) < 2 or not sys.argv[1].endswith(".prof"):
        print(__doc__, file=sys.stderr)
        return 2
    out, args = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: the suite package
    profiler = cProfile.Profile()
    stopped = False

    def stop(signum, frame):
        nonlocal stopped
        stopped = True
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    sys.argv = ["suite.run", *args]
    code = 0
    profiler.enable()
    try:
        runpy.run_module("suite.run", run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    except KeyboardInterrupt:
        code = 124
    finally:
        profiler.disable()
        profiler.dump_stats(out)
    print(f"profile of {'a stopped' if stopped else 'the'} run: {out}", file=sys.stderr)
    pstats.Stats(out, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    return code


if __name__ == "__main__":
    sys.exit(main())
