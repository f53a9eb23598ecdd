#!/usr/bin/env bash
# Device batches, each one call of the device tool (10 minutes at most). Everything lands under $OUT, results folders
# as tarballs (the tool brings back at most 8 files). Usage: tools/device_batch.sh STEP...
#   tests     the whole test suite (pytest -n $TEST_WORKERS (8) -v: correctness only, workers may share the GPU; failures listed as
#             they happen, so a run cut short still names them, each line stamped with its second); TEST_PART=I/N runs
#             part I of N (pytest --test-part I/N, tests/conftest.py: every N-th test), the suite in N calls
#   sanitize  compute-sanitizer, the four tools in parallel (correctness only), faults included; SAN_ARGS adds
#             arguments (e.g. --variant NAME), SAN_TOOLS picks tools (racecheck alone takes the longest)
#   plugin    the example plugin's variant under memcheck and racecheck (suite.sanitize --plugin ... --variant ...)
#   gemm      python -m suite.run --problem gemm (timed: alone on the GPU)
#   vector    python -m suite.run --problem vector (timed: alone on the GPU)
#   profile   python -m suite.run --profile --problem gemm --size 4096, then --profile --problem vector
#             (PROFILE_PROBLEMS picks: "gemm", "vector", "attention" or several; gemm and vector the default),
#             PROFILE_ARGS added to each (e.g. --dtype bf16), each cut at PROFILE_LIMIT (280) seconds
#   gpus      python -m suite.run --gpus all $SUITE_ARGS, then tools/agreement.py gpus against this batch's pair run 2
#             when there is one (run the pair first in the same batch), the folder as gpus-<stamp>.tgz
#   pack      every file under $OUT, logs and tarballs, into one batch-<stamp>.tgz, in 15 MiB parts when larger (the
#             device tool brings back at most 8 files of 16 MiB: end a batch with it when its steps leave more)
#   pytest    python -m pytest $PYTEST_ARGS (a chosen subset, e.g. one test file; PYTEST_ARGS, SAN_ARGS and SUITE_ARGS
#             are read as shell words, so quotes in them hold: PYTEST_ARGS='-k "a or b"',
#             SAN_ARGS='--variant "ptx:64x128 split-k tma+wgmma"')
#   readme-tests  the README's test command as written (python -m pytest: every core), timed, with the 60 slowest
#             tests listed (issue 20's 5-minute target on the H200)
#   suite     python -m suite.run $SUITE_ARGS (timed: alone on the GPU; cut by SIGINT at SUITE_LIMIT seconds, its
#             measured rows kept), the results folder as suite-<stamp>.tgz
#   probe     the Triton tuning probes: tools/tune_vector.py --triton-desc --quick, tools/tune_gemm_triton.py --extra
#             at 4096^3 and 4000x3000x1000 (timed: alone on the GPU)
#   probe-gemm  tools/tune_gemm_ptx.py $PROBE_ARGS: split counts, split-K tiles and stream-K policies at the sweep's
#             weakest shapes, against cuBLAS (timed: alone on the GPU)
#   probe-mid  tools/tune_gemm_mid.py $PROBE_ARGS: the PTX mid-M kernel at forced tiles and depths, against cuBLAS
#   ptx-decode  the PTX swapped decode kernel's GPU tests
#   fa4-a     the first half of the flash-attn-4 wheels (tools/fa4_wheels.sh made them; call with carry [".whl/a"]):
#             kept in /tmp/fa4-wheels for fa4-b, the next call on the same (still warm) machine
#   fa4-b     the second half (carry [".whl/b"]): the big wheel joined, everything installed into /tmp/site, then
#             the attention rows at the default sizes with the FA4 row among them (SUITE_ARGS adds arguments); other
#             steps see the package only when the command exports
#             PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages first
#   shards    python -m suite.run $SUITE_ARGS --shard I/$SHARD_COUNT for each I in $SHARDS (e.g. SHARDS="1 2"
#             SHARD_COUNT=3), each cut by SIGINT at SHARD_LIMIT seconds (its measured rows kept, meta.complete false),
#             each folder as shard-I-<stamp>.tgz: merge them here with python -m suite.merge. The folders stay on the
#             machine under SHARD_ROOT (default: /tmp/shards-<hash of SUITE_ARGS and SHARD_COUNT>): the same command
#             in the next call on a warm machine skips finished shards and resumes a cut one (--resume); on a fresh
#             machine, RESUME_DIR (a folder carried to it, holding shard-I/ folders) brings cut shards back.
#             CALL_LIMIT: the seconds the whole batch may take (the call's timeout): each shard is cut at what is left
#             of it, and a shard with less than SHARD_MIN (60) seconds left is not started (said in the log), so that
#             many small shards fill a call one after another (end with pack: each shard leaves a tarball and a log).
#             SUITE_DIR: run the suite from another copy of it (e.g. an older commit's suite/, to finish a sweep
#             begun at that code; suite.merge refuses parts of different suite sources)
#   pair      python -m suite.run $SUITE_ARGS twice back to back (issue 20's evidence: on a fresh machine the first
#             is the fresh-cache run), each cut by SIGINT at SUITE_LIMIT seconds (360: a cold default run on an H100
#             took over 300), then tools/agreement.py back-to-back and ceilings, and --compare of run 1 with run 2 and of run 2 with itself;
#             both folders in pair-<stamp>.tgz
set -u
export PYTHONUNBUFFERED=1 PIPESUITE_SANITIZER_TIMEOUT=${PIPESUITE_SANITIZER_TIMEOUT:-400}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: steps may run from another directory (SUITE_DIR)
stamp=$(date +%Y%m%d-%H%M%S) begin=$(date +%s)
for step in "$@"; do
  case $step in
    tests)
      # each line stamped with the seconds since the start: a run cut at its limit still shows where the time went
      log="$OUT/pytest${TEST_PART:+-part-${TEST_PART%/*}}.log"
      timeout ${TEST_LIMIT:-560} python3 -m pytest -v -n ${TEST_WORKERS:-8} -rfE ${TEST_PART:+--test-part $TEST_PART} \
        -p no:cacheprovider --durations=30 2>&1 | python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin: sys.stdout.write(f"{time.time() - t0:6.1f} {line}")' > "$log"
      echo "pytest ${TEST_PART:+part $TEST_PART }rc=${PIPESTATUS[0]}"; grep -E "(FAILED|ERROR) " "$log" | head -20; tail -3 "$log" ;;
    plugin)
      timeout 300 python3 -m suite.sanitize --plugin tests/plugins/example_plugin.py --variant "cuda:plugin prefetch" \
        --tools memcheck racecheck --out "/tmp/sanitizer-$stamp-plugin" > "$OUT/plugin-sanitize.log" 2>&1
      echo "plugin sanitize rc=$?"; tail -12 "$OUT/plugin-sanitize.log"
      tar czf "$OUT/sanitizer-$stamp-plugin.tgz" -C /tmp "sanitizer-$stamp-plugin" ;;
    sanitize)
      tools=${SAN_TOOLS:-memcheck racecheck synccheck initcheck}
      for t in $tools; do
        eval "timeout ${SAN_LIMIT:-560} python3 -m suite.sanitize --tools $t ${SAN_ARGS:-} --out /tmp/sanitizer-$stamp/$t" \
          > "/tmp/san-$t.out" 2>&1 &
      done
      wait
      for t in $tools; do echo "== $t"; grep -E "finding|NOT caught|TIMEOUT" "/tmp/san-$t.out" | head -8; done
      tar czf "$OUT/sanitizer-$stamp.tgz" -C /tmp "sanitizer-$stamp" ;;
    gemm|vector)
      timeout 560 python3 -m suite.run --problem $step --no-progress --out "/tmp/$stamp-$step" > "$OUT/$step.log" 2>&1
      echo "$step rc=$?"; tar czf "$OUT/$step-$stamp.tgz" -C /tmp "$stamp-$step" ;;
    profile)
      export PIPESUITE_PROFILE_TIMEOUT=${PIPESUITE_PROFILE_TIMEOUT:-200}
      dirs=()
      for p in ${PROFILE_PROBLEMS:-gemm vector}; do
        size=(); [ "$p" = gemm ] && size=(--size 4096)
        eval "timeout ${PROFILE_LIMIT:-280} python3 -m suite.run --profile --problem $p ${size[*]} --no-progress \
          --out /tmp/$stamp-profile-$p ${PROFILE_ARGS:-}" > "$OUT/profile-$p.log" 2>&1
        echo "profile $p rc=$?"; dirs+=("$stamp-profile-$p")
      done
      tar czf "$OUT/profile-$stamp.tgz" -C /tmp "${dirs[@]}" ;;
    probe)
      PYTHONPATH=. timeout 300 python3 tools/tune_vector.py --triton-desc --quick > "$OUT/probe-vector-desc.txt" \
        2> "$OUT/probe-vector-desc.err"
      echo "vector probe rc=$?"; head -8 "$OUT/probe-vector-desc.txt"
      PYTHONPATH=. timeout 200 python3 tools/tune_gemm_triton.py --extra --shape 4096x4096x4096 4000x3000x1000 \
        > "$OUT/probe-gemm-extra.txt" 2> "$OUT/probe-gemm-extra.err"
      echo "gemm probe rc=$?"; cat "$OUT/probe-gemm-extra.txt" ;;
    probe-gemm)
      eval "PYTHONPATH=. timeout ${PROBE_LIMIT:-540} python3 tools/tune_gemm_ptx.py ${PROBE_ARGS:-}" \
        > "$OUT/probe-gemm.txt" 2> "$OUT/probe-gemm.err"
      echo "gemm probe rc=$?"; cat "$OUT/probe-gemm.txt"; tail -3 "$OUT/probe-gemm.err" ;;
    probe-mid)
      eval "PYTHONPATH=. timeout ${PROBE_LIMIT:-540} python3 tools/tune_gemm_mid.py ${PROBE_ARGS:-}" \
        > "$OUT/probe-mid.txt" 2> "$OUT/probe-mid.err"
      echo "mid-M probe rc=$?"; cat "$OUT/probe-mid.txt"; tail -3 "$OUT/probe-mid.err" ;;
    ptx-decode)
      timeout 200 python3 -m pytest -q -n 4 -rfE -p no:cacheprovider tests/test_ptx_decode.py \
        > "$OUT/ptx-decode-test.log" 2>&1
      echo "ptx decode GPU test rc=$?"; grep -E "(FAILED|ERROR) |Error" "$OUT/ptx-decode-test.log" | head -20
      tail -3 "$OUT/ptx-decode-test.log" ;;
    pair)
      for i in 1 2; do
        eval "timeout -s INT ${SUITE_LIMIT:-360} python3 -m suite.run --no-progress --out /tmp/$stamp-run$i ${SUITE_ARGS:-}" \
          > "$OUT/pair-run$i.log" 2>&1
        echo "run $i rc=$?"; grep -o '"total": [0-9.]*' "/tmp/$stamp-run$i/results.json" | tail -1
      done
      PYTHONPATH=. python3 tools/agreement.py back-to-back "/tmp/$stamp-run1/results.json" \
        "/tmp/$stamp-run2/results.json" > "$OUT/pair-agreement.txt" 2>&1
      PYTHONPATH=. timeout 90 python3 tools/agreement.py ceilings "/tmp/$stamp-run2/results.json" \
        >> "$OUT/pair-agreement.txt" 2>&1
      cat "$OUT/pair-agreement.txt"
      for pair in "run1 run2" "run2 run2"; do  # the gate: the two runs, and a run against itself (issue 53)
        read -r old new <<< "$pair"
        timeout 60 python3 -m suite.run --compare "/tmp/$stamp-$old" "/tmp/$stamp-$new" > "$OUT/compare-$old-$new.txt" 2>&1
        echo "compare $old $new rc=$?"; tail -4 "$OUT/compare-$old-$new.txt"
      done
      tar czf "$OUT/pair-$stamp.tgz" -C /tmp "$stamp-run1" "$stamp-run2" ;;
    gpus)
      eval "timeout ${GPUS_LIMIT:-200} python3 -m suite.run --gpus all --no-progress --out /tmp/$stamp-gpus ${SUITE_ARGS:-}" \
        > "$OUT/gpus.log" 2>&1
      echo "gpus rc=$?"; grep -o '"total": [0-9.]*' "/tmp/$stamp-gpus/results.json" | tail -1
      if [ -f "/tmp/$stamp-run2/results.json" ]; then
        PYTHONPATH=. python3 tools/agreement.py gpus "/tmp/$stamp-run2/results.json" "/tmp/$stamp-gpus/results.json" \
          > "$OUT/gpus-agreement.txt" 2>&1
        cat "$OUT/gpus-agreement.txt"
      fi
      tar czf "$OUT/gpus-$stamp.tgz" -C /tmp "$stamp-gpus" ;;
    pack)
      (cd "$OUT" && find . -type f ! -name "batch-$stamp.tgz" -print0 | tar czf "batch-$stamp.tgz" --null -T - --remove-files
        # the tool brings back files of 16 MiB at most: a larger bundle in 15 MiB parts (cat batch-*.part-* to join)
        if [ "$(stat -c %s "batch-$stamp.tgz")" -gt $((15 << 20)) ]; then
          split -b 15M "batch-$stamp.tgz" "batch-$stamp.tgz.part-" && rm "batch-$stamp.tgz"; fi)
      ls -s "$OUT" ;;
    readme-tests)
      start=$(date +%s)
      timeout ${TEST_LIMIT:-540} python3 -m pytest -p no:cacheprovider --durations=60 > "$OUT/readme-tests.log" 2>&1
      echo "readme tests rc=$? in $(( $(date +%s) - start )) s"; grep -E "(FAILED|ERROR) " "$OUT/readme-tests.log" | head
      tail -2 "$OUT/readme-tests.log" ;;
    pytest)
      eval "timeout ${TEST_LIMIT:-300} python3 -m pytest -q -rfE -p no:cacheprovider ${PYTEST_ARGS:-}" \
        > "$OUT/pytest-subset.log" 2>&1
      echo "pytest subset rc=$?"; grep -E "(FAILED|ERROR) " "$OUT/pytest-subset.log" | head -20
      tail -3 "$OUT/pytest-subset.log" ;;
    fa4-a)
      mkdir -p /tmp/fa4-wheels && cp .whl/a/* /tmp/fa4-wheels/ && ls -la /tmp/fa4-wheels ;;
    fa4-b)
      cp .whl/b/* /tmp/fa4-wheels/
      for big in /tmp/fa4-wheels/*.whl.part-aa; do
        cat "${big%.part-aa}".part-* > "${big%.part-aa}" && rm "${big%.part-aa}".part-*; done
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        /tmp/fa4-wheels/*.whl > "$OUT/fa4-install.log" 2>&1; echo "fa4 install rc=$?"
      # the DSL's cutlass package sits where its .pth file points, which only a site directory reads: on the path too
      eval "PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages timeout ${SUITE_LIMIT:-400} \
        python3 -m suite.run --problem attention --no-progress \
        --out /tmp/$stamp-fa4 ${SUITE_ARGS:-}" > "$OUT/fa4.log" 2>&1
      echo "fa4 suite rc=$?"; grep -i "fa4" "$OUT/fa4.log" | head -20; tar czf "$OUT/fa4-$stamp.tgz" -C /tmp "$stamp-fa4" ;;
    shards)
      # one folder per shard under a root named for the sweep (its arguments, shard count and suite source), kept on
      # the machine: the same command again, in the next call, skips the shards that finished and resumes the one
      # that was cut; other code gets another root (suite.merge refuses parts of different suite sources)
      source_hash=$(cd "${SUITE_DIR:-.}" && python3 -c 'from suite.driver.meta import suite_source; print(suite_source())')
      root=${SHARD_ROOT:-/tmp/shards-$(printf '%s' "${SUITE_ARGS:-} ${SHARD_COUNT:-1} $source_hash" | md5sum | cut -c1-10)}
      mkdir -p "$root" && root=$(cd "$root" && pwd)
      for i in ${SHARDS:-1}; do
        dir="$root/shard-$i" resume=""
        if [ ! -f "$dir/results.json" ] && [ -n "${RESUME_DIR:-}" ] && [ -f "$RESUME_DIR/shard-$i/results.json" ]; then
          cp -r "$RESUME_DIR/shard-$i" "$root/"  # a cut shard carried to a fresh machine (its tarball, untarred)
        fi
        if [ -f "$dir/results.json" ]; then
          state=$(python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))["meta"]
print("complete" if m.get("complete") else "cut" if m.get("plan") else "unplanned")' "$dir/results.json")
          case $state in
            complete) echo "shard $i/${SHARD_COUNT:-1}: complete in $root (an earlier call's)"; continue ;;
            cut) resume="--resume" ;;  # only its unfinished jobs run
            *) rm -rf "$dir" ;;  # cut before its plan was made: nothing to resume, run it anew
          esac
        fi
        limit=${SHARD_LIMIT:-280}
        if [ -n "${CALL_LIMIT:-}" ]; then  # what the batch has left, 20 s kept for the tarballs and the transfer
          left=$(( CALL_LIMIT - ($(date +%s) - begin) - 20 ))
          if [ $left -lt ${SHARD_MIN:-60} ]; then echo "shard $i/${SHARD_COUNT:-1}: not started ($left s left)"; continue; fi
          [ $left -lt "$limit" ] && limit=$left
        fi
        (cd "${SUITE_DIR:-.}" && eval "timeout -s INT $limit python3 -m suite.run --no-progress --out \"$dir\" $resume \
          --shard $i/${SHARD_COUNT:-1} ${SUITE_ARGS:-}") > "$OUT/shard-$i.log" 2>&1
        echo "shard $i/${SHARD_COUNT:-1} rc=$?"; tail -2 "$OUT/shard-$i.log"
        tar czf "$OUT/shard-$i-$stamp.tgz" -C "$root" "shard-$i"
      done ;;
    suite)
      eval "timeout -s INT ${SUITE_LIMIT:-400} python3 -m suite.run --no-progress --out /tmp/$stamp-suite ${SUITE_ARGS:-}" \
        > "$OUT/suite.log" 2>&1
      echo "suite rc=$?"; tar czf "$OUT/suite-$stamp.tgz" -C /tmp "$stamp-suite" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
