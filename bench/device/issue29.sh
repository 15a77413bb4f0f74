#!/usr/bin/env bash
# Issue 29 on the H200, one call: the serving cases of the GPU test pass, then the serving benchmark
# (bench/serve.ts) on the Llama-3.2-1B shape in bf16 while llama.cpp's peer writer makes the same shape
# at Q4_K_M, then on that file.
# Carry [".device", ".cache/device", "dist/webinfer.js", ".peer/make_gguf.py", ".peer/goldens-min.tar.xz"].
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-min.tar.xz -C ../shared
G=/tmp/gguf
R=$OUT/results
mkdir -p $G $R
T0=$(date +%s)
( python3 .peer/make_gguf.py --model llama-1b --types q4_k_m --out $G; echo "gguf rc $? $(( $(date +%s) - T0 ))s"; ls -la $G ) > $OUT/gguf.log 2>&1 &
GG=$!
node .cache/device/gputest.mjs --filter="${FILTER:-serving|streaming, stop}" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
node .cache/device/serve.mjs --device="NVIDIA H200" --out=$R/bf16 > $OUT/serve-bf16.log 2>&1
echo "serve bf16 rc $? $(( $(date +%s) - T0 ))s" >> $OUT/serve-bf16.log
wait $GG
F=$(ls $G/*.gguf | head -1)
node .cache/device/serve.mjs --no-bf16 --gguf="$F:Llama-3.2-1B shape Q4_K_M (make_gguf.py)" --device="NVIDIA H200" --out=$R/q4 > $OUT/serve-q4.log 2>&1
echo "serve q4 rc $? $(( $(date +%s) - T0 ))s" >> $OUT/serve-q4.log
