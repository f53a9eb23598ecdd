#!/usr/bin/env bash
# One batch on a GPU machine: versions, GPU tests, then the suite's own runs. Logs and results go under $OUT
# (default ./device-out). Usage: tools/device_run.sh [tests|suite|all] [extra suite.run args...]
set -u -o pipefail
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
what=${1:-all}
shift || true
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton, cuda.core, cuda.bindings; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda.core', cuda.core.__version__, 'cuda.bindings', cuda.bindings.__version__)"
} 2>&1 | tee "$OUT/env.log"
status=0
if [[ $what == tests || $what == all ]]; then
  timeout 330 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --maxfail=20 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25 || status=1
fi
if [[ $what == suite || $what == all ]]; then
  timeout 400 python3 -m suite.run --no-progress --out "$OUT/run" "$@" 2>&1 | tee "$OUT/suite.log" || status=1
fi
exit $status
