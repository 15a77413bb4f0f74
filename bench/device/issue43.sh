#!/usr/bin/env bash
# Issue 43 on the H200, one call: the serving benchmark's throughput parts (bench/serve.ts, PARTS default
# burst,rates: the 32-in-flight burst beside one request, the Poisson rates, the batch-32 decode step
# timed in the same run, the engine's counters and the `target:` lines) on the Llama-3.2-1B shape in
# bf16 (random weights made on the GPU), then on the GGUF file named by the first argument (a Q4_K_M
# Llama-3.2-1B: the second target model). Builds nothing.
# Before the call (on this machine): bash ../shared/device/prepare.sh node; a clean worktree at the commit
# measured: npm run build:bench; git rev-parse HEAD > .cache/device/COMMIT. Without an argument and with
# .peer/make_gguf.py carried (bench/device/issue28b.sh), the file is made here at Q4_K_M.
# Carry [".device", ".cache/device"] (+ ".peer" or the file's folder); command
# `bash bench/device/issue43.sh [FILE.gguf]`. Knobs: PARTS (burst,rates,multiturn,http), RATES (Poisson
# rates, default 8: the TPOT target's; e.g. 2,8,32,inf), QUICK=1 (the small model, for a smoke run),
# BUDGET (the prompt-chunk budget: auto, the default, or tokens: 2048 is the engine before issue 43),
# NO_BF16=1, LAYERS=whisper,t5 (first, the layers suite's parts: Whisper-small's decoder step beside a
# decoder-only step of its size, T5-small's decode time against tokens; LAYERS_LIMIT s). At the default rates both models should fit one 600 s call (limits 250 + 300 s); with all
# four rates, call once per model (NO_BF16=1 for the second).
# What comes back: layers.log, serve-bf16.log, serve-q4.log, results/layers-nvidia-h200.{md,json},
# results/{bf16,q4}/serve-nvidia-h200.{md,json}.
set -u
source .device/setup.sh
R=$OUT/results
mkdir -p $R
T0=$(date +%s)
PARTS=${PARTS:-burst,rates}
export WEBINFER_COMMIT=$(cat .cache/device/COMMIT 2>/dev/null || echo unknown)
F=${1:-}
if [[ -z $F && -f .peer/make_gguf.py ]]; then
  ( python3 .peer/make_gguf.py --model llama-1b --types q4_k_m --out /tmp/gguf; echo "gguf rc $? $(( $(date +%s) - T0 ))s"; ls -la /tmp/gguf ) > $OUT/gguf.log 2>&1 &
  GG=$!
fi
if [[ -n ${LAYERS:-} ]]; then
  timeout ${LAYERS_LIMIT:-240} node .cache/device/bench.mjs --suite=layers --layers-parts=$LAYERS --peer=none --commit=$WEBINFER_COMMIT "--device=NVIDIA H200" --out=$R > $OUT/layers.log 2>&1
  echo "layers rc $? $(( $(date +%s) - T0 ))s" >> $OUT/layers.log
fi
[[ $PARTS == none ]] && exit 0
A=(--parts=$PARTS --rates=${RATES:-8} --budget=${BUDGET:-auto} "--device=NVIDIA H200" ${QUICK:+--quick})
if [[ -z ${NO_BF16:-} ]]; then
  timeout ${BF16_LIMIT:-250} node .cache/device/serve.mjs "${A[@]}" --out=$R/bf16 > $OUT/serve-bf16.log 2>&1
  echo "serve bf16 rc $? $(( $(date +%s) - T0 ))s" >> $OUT/serve-bf16.log
fi
if [[ -z $F && -n ${GG:-} ]]; then wait $GG; F=$(ls /tmp/gguf/*.gguf 2>/dev/null | head -1); fi
if [[ -n $F ]]; then
  timeout ${Q4_LIMIT:-300} node .cache/device/serve.mjs "${A[@]}" --no-bf16 "--gguf=$F:Llama-3.2-1B shape Q4_K_M" --out=$R/q4 > $OUT/serve-q4.log 2>&1
  echo "serve q4 rc $? $(( $(date +%s) - T0 ))s" >> $OUT/serve-q4.log
fi
grep -h "target:" $OUT/serve-*.log 2>/dev/null
