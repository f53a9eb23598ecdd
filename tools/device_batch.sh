#!/usr/bin/env bash
# Device batches, each one call of the device tool (10 minutes at most). Everything lands under $OUT, results folders
# as tarballs (the tool brings back at most 8 files). Usage: tools/device_batch.sh STEP...
#   tests     the whole test suite (pytest -n 4: correctness only, workers may share the GPU)
#   sanitize  compute-sanitizer, the four tools in parallel (correctness only), faults included
#   gemm      python -m suite.run --problem gemm (timed: alone on the GPU)
#   vector    python -m suite.run --problem vector (timed: alone on the GPU)
#   profile   python -m suite.run --profile --problem gemm --size 4096, then --profile --problem vector
set -u
export PYTHONUNBUFFERED=1 PIPESUITE_SANITIZER_TIMEOUT=${PIPESUITE_SANITIZER_TIMEOUT:-400}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
stamp=$(date +%Y%m%d-%H%M%S)
for step in "$@"; do
  case $step in
    tests)
      timeout ${TEST_LIMIT:-560} python3 -m pytest -q -n 4 -p no:cacheprovider --durations=30 > "$OUT/pytest.log" 2>&1
      echo "pytest rc=$?"; tail -15 "$OUT/pytest.log" ;;
    sanitize)
      for t in memcheck racecheck synccheck initcheck; do
        timeout ${SAN_LIMIT:-560} python3 -m suite.sanitize --tools $t --out "/tmp/sanitizer-$stamp/$t" > "/tmp/san-$t.out" 2>&1 &
      done
      wait
      for t in memcheck racecheck synccheck initcheck; do echo "== $t"; grep -A12 "^## Self-test" "/tmp/san-$t.out"; done
      tar czf "$OUT/sanitizer-$stamp.tgz" -C /tmp "sanitizer-$stamp" ;;
    gemm|vector)
      timeout 560 python3 -m suite.run --problem $step --no-progress --out "/tmp/$stamp-$step" > "$OUT/$step.log" 2>&1
      echo "$step rc=$?"; tar czf "$OUT/$step-$stamp.tgz" -C /tmp "$stamp-$step" ;;
    profile)
      timeout 280 python3 -m suite.run --profile --problem gemm --size 4096 --no-progress \
        --out "/tmp/$stamp-profile-gemm" > "$OUT/profile-gemm.log" 2>&1
      timeout 280 python3 -m suite.run --profile --problem vector --no-progress \
        --out "/tmp/$stamp-profile-vector" > "$OUT/profile-vector.log" 2>&1
      tar czf "$OUT/profile-$stamp.tgz" -C /tmp "$stamp-profile-gemm" "$stamp-profile-vector" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
