#!/usr/bin/env bash
# Issue 45 on the H200, one call: speculative decoding's mechanism (bench/speculative.ts).
#   1. While the 8B file is written: the Llama-3.2-1B shape in bf16 (verification steps of 2-8 rows, also
#      under AB, and the oracle's proposals at forced rates), and the 1B Q4_K_M file as its own draft model
#      (every proposal right: the ceiling with a draft's cost in it).
#   2. The Llama-3.1-8B shape at Q4_K_M: verification steps, the oracle at k 2/4/8 and rates 0.5/0.7/0.9
#      (the 1.8x target), then with the 1B Q4_K_M file as its draft model.
# Before the call (on this machine): bash ../shared/device/prepare.sh node; a clean worktree at the commit
# measured: npm run build:bench; git rev-parse HEAD > .cache/device/COMMIT; .peer/make_gguf.py carried.
# Carry [".device", ".cache/device", ".peer"]; command `bash bench/device/issue45.sh`. Knobs: AB (engine.tuning
# fields for the verification steps' second timing, default linearDecodeMmaMinM=2: rows 2-7 on the matrix
# GEMM), NO_8B=1.
# What comes back: gen.log, spec-1b.log, spec-8b.log, results/spec-{1b-draft,8b}-nvidia-h200.{md,svg}.
source bench/device/preamble.sh
AB=${AB:-linearDecodeMmaMinM=2}
python3 .peer/make_gguf.py --model llama-1b --types q4_k_m --out /tmp/gguf/1b --threads 12 > $OUT/gen.log 2>&1
echo "written 1b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
F1=$(ls /tmp/gguf/1b/*.gguf | head -1)
if [[ -z ${NO_8B:-} ]]; then
  python3 .peer/make_gguf.py --model llama-8b --types q4_k_m --out /tmp/gguf/8b --threads 12 >> $OUT/gen.log 2>&1 &
  W=$!
fi
timeout ${LIMIT1:-230} node .cache/device/bench.mjs --suite=spec "--spec-draft=$F1:$F1:Llama-3.2-1B shape Q4_K_M as its own draft model" \
  "--model-ab=$AB" --peer=none --commit=$COMMIT "--device=NVIDIA H200" --spec-tag=1b-draft --out=$R > $OUT/spec-1b.log 2>&1
echo "spec 1b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/spec-1b.log
[[ -n ${NO_8B:-} ]] && exit 0
wait $W
echo "written 8b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
F8=$(ls /tmp/gguf/8b/*.gguf | head -1)
timeout ${LIMIT2:-330} node .cache/device/bench.mjs --suite=spec --spec-no-bf16 "--spec-gguf=$F8:Llama-3.1-8B shape Q4_K_M" \
  "--spec-draft=$F8:$F1:Llama-3.1-8B shape Q4_K_M with the 1B Q4_K_M draft" \
  "--model-ab=$AB" --peer=none --commit=$COMMIT "--device=NVIDIA H200" --spec-tag=8b --out=$R > $OUT/spec-8b.log 2>&1
echo "spec 8b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/spec-8b.log
