#!/usr/bin/env bash
# Issue 45 on the H200, one call after the verification rows moved to the decode kernels (verifyRowsAsDecode)
# and the quantized GEMV's rows-each form (quantGemvRowsEach): the GPU test pass of the exactness cases
# (FILTER), the quantized GEMV at 4 rows of x at the 8B shapes in both forms (qgemv suite), then
# issue45.sh (AB: the verification steps again under quantGemvRowsEach=true by default). Before the call:
# as issue45.sh says, and the goldens packed as issue44-45-check.sh says. Carry [".device", ".cache/device",
# ".peer"]. What comes back: logs.txt (every log, in order) and results.tar.xz (the results folder).
source bench/device/preamble.sh
mkdir -p ../shared && tar xJf .peer/goldens-check.tar.xz -C ../shared
timeout ${TEST_LIMIT:-150} node .cache/device/gputest.mjs --filter="${FILTER:-^speculative|rows do not depend|GQA decode on the subgroup-matrix tile|^models › gguf-llama-q4-k-m:}" \
  --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
timeout ${QGEMV_LIMIT:-120} node .cache/device/bench.mjs --suite=qgemv --qgemv-shapes=8b --qgemv-types=Q4_K,Q6_K --qgemv-m=${QGEMV_M:-4} --rounds=3 \
  --commit=$COMMIT "--device=NVIDIA H200" --peer=none --out=$R > $OUT/qgemv.log 2>&1
echo "qgemv rc $? $(( $(date +%s) - T0 ))s" >> $OUT/qgemv.log
AB=${AB:-quantGemvRowsEach=true} bash bench/device/issue45.sh
for f in gputest qgemv gen spec-1b spec-8b; do [[ -f $OUT/$f.log ]] && { echo "=== $f.log"; cat $OUT/$f.log; rm $OUT/$f.log; }; done > $OUT/logs.txt
tar cJf $OUT/results.tar.xz -C $OUT results && rm -rf $OUT/results
