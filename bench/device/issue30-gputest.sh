#!/usr/bin/env bash
# Issue 30's GPU test pass on the H200 (one call): the group-type kernel cases and the HF quantized
# goldens (MLX, AWQ, GPTQ, FP8), every spread item (no software adapter here), the subgroup-matrix GEMM
# included. Before the call: npm run build && npm run build:bench, and
#   tar cJf .peer/goldens-hfq.tar.xz -C ../shared goldens-quant/{mlx-llama-4bit,mlx-llama-8bit,awq-llama-4bit-g128,gptq-llama-4bit-g128,fp8-qwen3,fp8-deepseek-v3}
# Carry [".device", ".cache/device", "dist/webinfer.js", ".peer/goldens-min.tar.xz", ".peer/goldens-hfq.tar.xz"].
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-min.tar.xz -C ../shared && tar xJf .peer/goldens-hfq.tar.xz -C ../shared
T0=$(date +%s)
node .cache/device/gputest.mjs --filter="${FILTER:-group|mlx-|awq-|gptq-|fp8-}" --out=$OUT/results --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
