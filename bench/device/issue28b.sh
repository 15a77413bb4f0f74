#!/usr/bin/env bash
# Issue 28, second session (NVIDIA H200), in two calls on one warm machine:
#   PHASE=probe: the GGUF files made in the background into .cache/gguf (kept on the warm machine for
#     the next call) by llama.cpp's peer writer, while the GPU test pass runs the quantized cases (the
#     quantized experts and the DeepSeek GGUF among them) and the qgemv suite times the quantized GEMV
#     at every KT and R;
#   PHASE=bench: the gguf suite on every file (making any that are missing), llama.cpp on each same file.
# Carry [".device", ".cache/device", "dist/webinfer.js", ".peer/llama-libs.tar.xz", ".peer/make_gguf.py",
# ".peer/bench_ctypes.py", ".peer/goldens-quant.tar.xz", ".peer/goldens-min.tar.xz"] (goldens-min: llama-gqa,
# qwen3-qknorm-tied and deepseek-v2-moe), as bench/device/issue28.sh says.
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-min.tar.xz -C ../shared && tar xJf .peer/goldens-quant.tar.xz -C ../shared
mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
MODELS=${MODELS:-"llama-1b:q4_k_m,q8_0,q4_0,bf16 llama-8b:q4_k_m dsv2-lite:q4_k_m"}
G=.cache/gguf
mkdir -p $G $OUT/results
R=$OUT/results
T0=$(date +%s)
make_all() {
  for m in $MODELS; do
    python3 .peer/make_gguf.py --model ${m%%:*} --types ${m#*:} --out $G.part || return 1
  done
  mv $G.part/*.gguf $G/ 2>/dev/null; true
}
if [[ "${PHASE:-probe}" == probe ]]; then
  ( make_all; echo "gguf rc $? $(( $(date +%s) - T0 ))s"; ls -la $G ) > $OUT/gguf.log 2>&1 &
  GG=$!
  node .cache/device/gputest.mjs --filter="${FILTER:-^quant|^moe|DeepSeek GGUF|gguf-llama-q4-k-m|quantize on load}" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
  echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
  node .cache/device/bench.mjs --suite=qgemv --explore-qgemv --rounds=${ROUNDS:-1} --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-} > $OUT/qgemv.log 2>&1
  echo "qgemv rc $? $(( $(date +%s) - T0 ))s" >> $OUT/qgemv.log
  wait $GG
else
  if [[ -z "$(ls $G/*.gguf 2>/dev/null)" ]]; then make_all > $OUT/gguf.log 2>&1; fi
  FILES=""
  for f in $(ls $G/*.gguf | sort); do b=$(basename $f .gguf); FILES="$FILES${FILES:+,}$f:$b"; done
  node .cache/device/bench.mjs --suite=gguf --gguf="$FILES" --gguf-llamacpp=/tmp/llama --llamacpp-script=.peer/bench_ctypes.py \
    --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-} > $OUT/bench.log 2>&1
  echo "bench rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
fi
rm -f $R/*.svg
