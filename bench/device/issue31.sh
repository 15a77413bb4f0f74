#!/usr/bin/env bash
# Issue 31 on the H200, one call: the layers suite (bench/layers.ts): BERT-base's shape (encode of
# 128-token inputs at batch 1 and 32), Whisper-small's (RTF on 30 s clips at batch 1 and 8, its decoder
# step beside a Llama of the same size) and gpt-oss-20b's at batch 1 (MXFP4 experts, then bf16), all with
# random weights (BERT and Whisper from safetensors written in memory, loaded through engine.loadModel).
# The results are rewritten after each part, so a run cut at LIMIT seconds keeps what it measured.
#
# Before the call, on this machine: .device/ as bench/device/issue27.sh says (../shared/device/prepare.sh
# node), and the bundle built from a clean checkout of the commit measured, its commit written beside it:
#   git worktree add /tmp/wt31 HEAD && ln -s $PWD/node_modules /tmp/wt31/node_modules
#   (cd /tmp/wt31 && npx vite build -c vite.bench.config.ts --outDir $OLDPWD/.cache/layers-device && git rev-parse HEAD > $OLDPWD/.cache/layers-device/COMMIT)
# Carry [".device", ".cache/layers-device"]; command `bash bench/device/issue31.sh` (about 3-5 minutes;
# PARTS=bert,whisper,gptoss and GPTOSS=mxfp4,bf16 pick what runs, BENCH_ARGS adds flags).
# What comes back: bench.log, results/layers-nvidia-h200.{md,json}.
set -u
source .device/setup.sh
B=${BENCH:-.cache/layers-device/bench.mjs}
R=$OUT/results
mkdir -p $R
T0=$(date +%s)
COMMIT=${COMMIT:-$(cat .cache/layers-device/COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
timeout ${LIMIT:-540} node $B --suite=layers --layers-parts=${PARTS:-bert,whisper,gptoss} --layers-gptoss=${GPTOSS:-mxfp4,bf16} \
  --commit=$COMMIT --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-} > $OUT/bench.log 2>&1
echo "bench rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
{ nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv; free -g; nproc; } >> $OUT/bench.log 2>&1
rm -f $R/nvidia-h200.json $R/nvidia-h200-*.svg
