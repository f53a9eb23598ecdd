#!/usr/bin/env bash
# One device call: the vector problem's timed run alone on the GPU, then the whole test suite and compute-sanitizer
# (four tools in parallel: correctness only, so they may share the GPU). Everything lands under $OUT.
set -u
export PYTHONUNBUFFERED=1 PIPESUITE_SANITIZER_TIMEOUT=${PIPESUITE_SANITIZER_TIMEOUT:-160}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
python3 -c "import torch, triton, cuda.core; print(torch.__version__, triton.__version__, cuda.core.__version__)"
timeout 230 python3 -m suite.run --problem vector --no-progress --out "$OUT/vector" > "$OUT/vector.log" 2>&1
echo "vector rc=$?"
timeout 320 python3 -m pytest -q -n 3 -p no:cacheprovider > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck synccheck initcheck; do
  timeout 330 python3 -m suite.sanitize --tools $t --out /tmp/san-$t > /tmp/san-$t.out 2>&1 &
done
wait
tail -12 "$OUT/pytest.log"
for t in memcheck racecheck synccheck initcheck; do
  cp /tmp/san-$t/sanitizer.md "$OUT/sanitizer-$t.md" 2>/dev/null; echo "== $t"; tail -3 /tmp/san-$t.out
done
tar czf "$OUT/sanitizer-logs.tgz" /tmp/san-* 2>/dev/null
grep -A40 "vector 268435456" "$OUT/vector.log" | head -40
