#!/usr/bin/env bash
# Issue 28's measurements in one GPU-machine call (NVIDIA H200): the GPU test pass of the quantized
# cases and the GGUF goldens, then the gguf suite on GGUF files with random weights made here by
# llama.cpp's peer writer (../shared/peers/llamacpp/make_gguf.py), llama.cpp on each same file.
#
# Before the call, on this machine: what bench/device/issue27.sh says (.device/, .peer/ with the
# llama.cpp libraries, make_gguf.py, bench_ctypes.py and shared/goldens), and
#   tar cJf .peer/goldens-quant.tar.xz -C ../shared goldens-quant/gguf-{llama-q4-k-m,llama-q5-mix,qwen3-q4-0,qwen3-q8-0} (four: the carry limit)
#   npm run build && npm run build:bench
#   tar cJf .peer/goldens-min.tar.xz -C ../shared goldens/llama-gqa goldens/qwen3-qknorm-tied
# Carry [".device", ".cache/device", "dist/webinfer.js", ".peer/llama-libs.tar.xz", ".peer/make_gguf.py",
# ".peer/bench_ctypes.py", ".peer/goldens-quant.tar.xz", ".peer/goldens-min.tar.xz"]; command `bash bench/device/issue28.sh`.
# MODELS (default "llama-1b:q4_k_m,q8_0,q4_0,bf16 llama-8b:q4_k_m"): shape:types to make and time.
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-min.tar.xz -C ../shared && tar xJf .peer/goldens-quant.tar.xz -C ../shared
mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
MODELS=${MODELS:-"llama-1b:q4_k_m,q8_0,q4_0,bf16 llama-8b:q4_k_m"}
( for m in $MODELS; do python3 .peer/make_gguf.py --model ${m%%:*} --types ${m#*:} --out /tmp/gguf || exit 1; done ) > /tmp/gguf.log 2>&1 &
GG=$!
T0=$(date +%s)
R=$OUT/results
node .cache/device/gputest.mjs --filter="${FILTER:-^quant|gguf-llama-q4-k-m|gguf-llama-q5-mix|gguf-qwen3-q4-0|gguf-qwen3-q8-0|quantize on load|^linear}" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
wait $GG; echo "gguf rc $? $(( $(date +%s) - T0 ))s" >> /tmp/gguf.log; ls -la /tmp/gguf >> /tmp/gguf.log
FILES=""
for f in /tmp/gguf/*.gguf; do b=$(basename $f .gguf); FILES="$FILES${FILES:+,}$f:$b"; done
{
  cat /tmp/gguf.log
  node .cache/device/bench.mjs --suite=gguf --gguf="$FILES" --gguf-llamacpp=/tmp/llama --llamacpp-script=.peer/bench_ctypes.py \
    --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-}
  echo "bench rc $? $(( $(date +%s) - T0 ))s"
} > $OUT/bench.log 2>&1
rm -f $R/*.svg
