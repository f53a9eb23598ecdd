#!/usr/bin/env bash
# One device call: the whole test suite and compute-sanitizer (four tools in parallel; correctness only, so they may
# share the GPU), then, alone on the GPU, the vector problem's timed run. Everything lands under $OUT.
set -u
export PYTHONUNBUFFERED=1 PIPESUITE_SANITIZER_TIMEOUT=${PIPESUITE_SANITIZER_TIMEOUT:-200}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
python3 -c "import torch, triton, cuda.core; print(torch.__version__, triton.__version__, cuda.core.__version__)"
timeout 330 python3 -m pytest -q -n 3 -p no:cacheprovider > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck synccheck initcheck; do
  timeout 440 python3 -m suite.sanitize --tools $t --out /tmp/san-$t > /tmp/san-$t.out 2>&1 &
done
wait
tail -25 "$OUT/pytest.log"
for t in memcheck racecheck synccheck initcheck; do
  cp /tmp/san-$t/sanitizer.md "$OUT/sanitizer-$t.md" 2>/dev/null; echo "== $t"; tail -4 /tmp/san-$t.out
done
tar czf "$OUT/sanitizer-logs.tgz" /tmp/san-* 2>/dev/null
timeout 200 python3 -m suite.run --problem vector --no-progress --out "$OUT/vector" > "$OUT/vector.log" 2>&1
echo "vector rc=$?"; tail -30 "$OUT/vector.log"
