#!/usr/bin/env bash
# Issue 42, second session, first call on the H200: where a small quantized GEMV's time goes. The qgemv
# suite timed as a step runs (calls in one pass, weights rotating over 4 copies so they come from DRAM),
# with the yardsticks beside (the read kernel over the same bytes; an empty dispatch), every KT, R and
# workgroup size of the explore lists; then the planner's plan with the RMSNorm folded in.
# Before the call (on this machine): bash ../shared/device/prepare.sh node; a clean worktree at the commit
# measured: npm run build:bench; git rev-parse HEAD > .cache/device/COMMIT. Carry [".device", ".cache/device"].
# What comes back: span.log, rms.log, results/qgemv-*.md.
set -u
source .device/setup.sh
R=$OUT/results
mkdir -p $R
T0=$(date +%s)
COMMIT=$(cat .cache/device/COMMIT 2>/dev/null || echo unknown)
B=(node .cache/device/bench.mjs --suite=qgemv --commit=$COMMIT --peer=none "--device=NVIDIA H200" --out=$R)
timeout ${SPAN_LIMIT:-330} "${B[@]}" --qgemv-shapes=8b,1b --qgemv-m=1 --rounds=2 --qgemv-span --qgemv-rot=4 --qgemv-yardsticks --explore-qgemv \
  --qgemv-kt=${KTS:-32,64,128} --qgemv-r=${RS:-2,4} --qgemv-wg=${WGS:-64,256} ${SPAN_ARGS:-} > $OUT/span.log 2>&1
echo "span rc $? $(( $(date +%s) - T0 ))s" >> $OUT/span.log
mv $R/qgemv-nvidia-h200.md $R/qgemv-span-nvidia-h200.md 2>/dev/null
timeout ${RMS_LIMIT:-120} "${B[@]}" --qgemv-shapes=8b,1b --qgemv-m=1 --rounds=2 --qgemv-span --qgemv-rot=4 --qgemv-rms --qgemv-types=${RMS_TYPES:-Q4_K,Q4_0} > $OUT/rms.log 2>&1
echo "rms rc $? $(( $(date +%s) - T0 ))s" >> $OUT/rms.log
mv $R/qgemv-nvidia-h200.md $R/qgemv-span-rms-nvidia-h200.md 2>/dev/null
rm -f $R/*.json
