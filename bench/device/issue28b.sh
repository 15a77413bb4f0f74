#!/usr/bin/env bash
# Issue 28 on the H200, one call: GGUF files made in the background by llama.cpp's peer writer
# (MODELS, default DeepSeek-V2-Lite's shape at Q4_K_M), while the GPU test pass runs the quantized cases
# (the quantized experts and the DeepSeek GGUF among them; FILTER) and the qgemv suite times the
# quantized GEMV at every KT and R (QGEMV=0 skips it); then the gguf suite on each file, llama.cpp on
# each same file.
# Carry [".device", ".cache/device", "dist/webinfer.js", ".peer/llama-libs.tar.xz", ".peer/make_gguf.py",
# ".peer/bench_ctypes.py", ".peer/goldens-quant.tar.xz", ".peer/goldens-min.tar.xz"] (goldens-min: llama-gqa,
# qwen3-qknorm-tied and deepseek-v2-moe); the rest as bench/device/issue28.sh says.
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-min.tar.xz -C ../shared && tar xJf .peer/goldens-quant.tar.xz -C ../shared
mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
MODELS=${MODELS:-"dsv2-lite:q4_k_m"}
G=/tmp/gguf
R=$OUT/results
mkdir -p $G $R
T0=$(date +%s)
( for m in $MODELS; do python3 .peer/make_gguf.py --model ${m%%:*} --types ${m#*:} --out $G || exit 1; done
  echo "gguf rc $? $(( $(date +%s) - T0 ))s"; ls -la $G ) > $OUT/gguf.log 2>&1 &
GG=$!
node .cache/device/gputest.mjs --filter="${FILTER:-^quant|^moe|DeepSeek GGUF|gguf-llama-q4-k-m}" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
if [[ "${QGEMV:-1}" == 1 ]]; then
  node .cache/device/bench.mjs --suite=qgemv --explore-qgemv --rounds=1 --peer=none --device="NVIDIA H200" --out=$R ${QGEMV_ARGS:-} > $OUT/qgemv.log 2>&1
  echo "qgemv rc $? $(( $(date +%s) - T0 ))s" >> $OUT/qgemv.log
  mv $R/nvidia-h200.json $R/nvidia-h200-qgemv.json 2>/dev/null
fi
wait $GG
FILES=""
for f in $(ls $G/*.gguf | sort); do b=$(basename $f .gguf); FILES="$FILES${FILES:+,}$f:$b"; done
node .cache/device/bench.mjs --suite=gguf --gguf="$FILES" --gguf-llamacpp=/tmp/llama --llamacpp-script=.peer/bench_ctypes.py \
  --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-} > $OUT/bench.log 2>&1
echo "bench rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
rm -f $R/*.svg
